//! User-defined autograd functions with forward and backward written in Rust.

use crate::bridge::{attach_node, no_grad, NodeBackward, SavedAccess};
use crate::error::{panic_message, Error, Result};
use crate::hooks::save_names;
use std::panic::{catch_unwind, AssertUnwindSafe};
use tch::Tensor;

/// A differentiable operation whose forward and backward are Rust code, the
/// counterpart of PyTorch's `torch.autograd.Function` (which tch lacks).
///
/// `forward` runs with grad mode off, like PyTorch's; its outputs are then
/// attached to a node whose backward calls [`Function::backward`]. The
/// function value itself lives in that node: fields set in `forward` are
/// there in `backward`, and the value is dropped with the graph.
///
/// ```
/// use remat_runtime::{autograd::apply, autograd::BackwardContext, autograd::ForwardContext, autograd::Function, Result};
/// use tch::{Kind, Tensor};
///
/// /// `x * y`, with its gradient written by hand.
/// struct Mul;
///
/// impl Function for Mul {
///     fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
///         let (x, y) = (inputs[0], inputs[1]);
///         ctx.save_for_backward([("x", x), ("y", y)]);
///         Ok(vec![x * y])
///     }
///
///     fn backward(&mut self, ctx: &BackwardContext<'_>, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
///         let (x, y) = (ctx.saved("x")?, ctx.saved("y")?);
///         Ok(vec![Some(&grads[0] * y), Some(&grads[0] * x)])
///     }
/// }
///
/// let x = Tensor::from_slice(&[1.0f32, 2.0]).set_requires_grad(true);
/// let y = Tensor::from_slice(&[3.0f32, 4.0]).set_requires_grad(true);
/// let z = apply(Mul, &[&x, &y]).remove(0);
/// z.sum(Kind::Float).backward();
/// assert_eq!(Vec::<f32>::try_from(x.grad()).unwrap(), [3.0, 4.0]);
/// ```
pub trait Function: Send + 'static {
    /// The name of the node in the graph and in error messages.
    fn name(&self) -> &str {
        std::any::type_name::<Self>()
    }

    /// Computes the outputs (grad mode is off) and saves what backward needs.
    fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[&Tensor]) -> Result<Vec<Tensor>>;

    /// Gradients of the inputs (one per input, `None` for no gradient) from
    /// the gradients of the outputs (zeros for an output that got none).
    fn backward(
        &mut self,
        ctx: &BackwardContext<'_>,
        grad_outputs: &[Tensor],
    ) -> Result<Vec<Option<Tensor>>>;
}

/// What [`Function::forward`] can record for backward.
///
/// ```
/// # use remat_runtime::autograd::ForwardContext;
/// # fn f(ctx: &mut ForwardContext, x: &tch::Tensor) {
/// ctx.save_for_backward([("x", x)]);
/// # }
/// ```
#[derive(Default)]
pub struct ForwardContext {
    names: Vec<String>,
    saved: Vec<Tensor>,
    /// The first invalid name, reported by `try_apply` after the forward.
    invalid: Option<String>,
}

impl ForwardContext {
    /// Saves tensors for backward under names. They are stored as autograd
    /// saved tensors: saved-tensor hooks see them, and modifying one in place
    /// before backward is an error.
    ///
    /// Names show in memory reports (instead of `saved.<i>`). A name must be
    /// non-empty and must not contain `.`; a bad one makes [`try_apply`]
    /// return an error (and [`apply`] panic). An undefined tensor
    /// (`Tensor::new()`) keeps its slot and comes back undefined.
    ///
    /// ```
    /// use remat_runtime::{autograd::apply, autograd::BackwardContext, autograd::ForwardContext, autograd::Function, Result};
    /// use tch::{Kind, Tensor};
    ///
    /// struct Square;
    ///
    /// impl Function for Square {
    ///     fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    ///         ctx.save_for_backward([("x", inputs[0])]);
    ///         Ok(vec![inputs[0] * inputs[0]])
    ///     }
    ///
    ///     fn backward(&mut self, ctx: &BackwardContext<'_>, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
    ///         Ok(vec![Some(&grads[0] * 2 * ctx.saved("x")?)])
    ///     }
    /// }
    ///
    /// let mut x = Tensor::from_slice(&[3.0f32]).set_requires_grad(true);
    /// let y = apply(Square, &[&x]).remove(0);
    /// // Saved tensors must stay as they were until backward:
    /// let _ = tch::no_grad(|| x.g_add_(&Tensor::ones([1], tch::kind::FLOAT_CPU)));
    /// let err = remat_runtime::autograd::backward_with(&y.sum(Kind::Float), false).unwrap_err();
    /// assert!(err.to_string().contains("modified by an inplace operation"));
    /// ```
    pub fn save_for_backward<'a>(
        &mut self,
        tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
    ) {
        for (name, t) in tensors {
            // docs/semantics.md, rule D2 (E26): names show in reports.
            if let Err(message) = save_names::validate(name) {
                self.invalid.get_or_insert(message);
            }
            self.names.push(name.to_string());
            self.saved.push(t.shallow_clone());
        }
    }
}

/// What [`Function::backward`] can read.
///
/// ```
/// # use remat_runtime::autograd::BackwardContext;
/// # fn f(ctx: &BackwardContext<'_>) -> remat_runtime::Result<()> {
/// let x = ctx.saved("x")?;
/// if ctx.needs_input_grad(0) { /* ... */ }
/// # Ok(()) }
/// ```
pub struct BackwardContext<'a> {
    function: &'a str,
    names: &'a [String],
    needs_grad: &'a [bool],
    saved: &'a SavedAccess<'a>,
}

impl BackwardContext<'_> {
    /// The tensor saved under `name`; a name that was not saved is an error
    /// listing those that were.
    ///
    /// ```
    /// use remat_runtime::{autograd::apply, autograd::BackwardContext, autograd::ForwardContext, autograd::Function, Result};
    /// use tch::{Kind, Tensor};
    ///
    /// /// `exp(x)`, whose gradient reuses the saved output.
    /// struct Exp;
    ///
    /// impl Function for Exp {
    ///     fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    ///         let out = inputs[0].exp();
    ///         ctx.save_for_backward([("out", &out)]);
    ///         Ok(vec![out])
    ///     }
    ///
    ///     fn backward(&mut self, ctx: &BackwardContext<'_>, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
    ///         assert!(ctx.saved("x").is_err()); // only "out" was saved
    ///         Ok(vec![Some(&grads[0] * ctx.saved("out")?)])
    ///     }
    /// }
    ///
    /// let x = Tensor::from_slice(&[0.0f32, 1.0]).set_requires_grad(true);
    /// let y = apply(Exp, &[&x]).remove(0);
    /// y.sum(Kind::Float).backward();
    /// assert!(x.grad().allclose(&x.exp(), 1e-6, 1e-6, false));
    /// ```
    pub fn saved(&self, name: &str) -> Result<Tensor> {
        let i = self
            .names
            .iter()
            .position(|n| n == name)
            .ok_or_else(|| Error::Function {
                function: self.function.to_string(),
                message: format!(
                    "no tensor was saved as `{name}` (saved: {:?}); save it in forward with \
                 ctx.save_for_backward([(\"{name}\", &t)])",
                    self.names
                ),
            })?;
        self.saved.get(i)
    }

    /// All saved tensors, in the order they were saved.
    ///
    /// ```
    /// use remat_runtime::{autograd::apply, autograd::BackwardContext, autograd::ForwardContext, autograd::Function, Result};
    /// use tch::{Kind, Tensor};
    ///
    /// /// The dot product of two vectors.
    /// struct Dot;
    ///
    /// impl Function for Dot {
    ///     fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    ///         ctx.save_for_backward([("a", inputs[0]), ("b", inputs[1])]);
    ///         Ok(vec![inputs[0].dot(inputs[1])])
    ///     }
    ///
    ///     fn backward(&mut self, ctx: &BackwardContext<'_>, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
    ///         let [a, b]: [Tensor; 2] = ctx.saved_tensors()?.try_into().unwrap();
    ///         Ok(vec![Some(&grads[0] * b), Some(&grads[0] * a)])
    ///     }
    /// }
    ///
    /// let a = Tensor::from_slice(&[1.0f32, 2.0]).set_requires_grad(true);
    /// let b = Tensor::from_slice(&[3.0f32, 4.0]).set_requires_grad(true);
    /// apply(Dot, &[&a, &b]).remove(0).backward();
    /// assert_eq!(Vec::<f32>::try_from(a.grad()).unwrap(), [3.0, 4.0]);
    /// assert_eq!(Vec::<f32>::try_from(b.grad()).unwrap(), [1.0, 2.0]);
    /// ```
    pub fn saved_tensors(&self) -> Result<Vec<Tensor>> {
        (0..self.names.len()).map(|i| self.saved.get(i)).collect()
    }

    /// Whether input `i` requires a gradient (`false` past the last input).
    ///
    /// Backward can skip the work for inputs that need none:
    ///
    /// ```
    /// use remat_runtime::{autograd::apply, autograd::BackwardContext, autograd::ForwardContext, autograd::Function, Result};
    /// use tch::{Kind, Tensor};
    ///
    /// struct Mul;
    ///
    /// impl Function for Mul {
    ///     fn forward(&mut self, ctx: &mut ForwardContext, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    ///         ctx.save_for_backward([("x", inputs[0]), ("w", inputs[1])]);
    ///         Ok(vec![inputs[0] * inputs[1]])
    ///     }
    ///
    ///     fn backward(&mut self, ctx: &BackwardContext<'_>, grads: &[Tensor]) -> Result<Vec<Option<Tensor>>> {
    ///         let mut grad_inputs = vec![None, None];
    ///         if ctx.needs_input_grad(0) {
    ///             grad_inputs[0] = Some(&grads[0] * ctx.saved("w")?);
    ///         }
    ///         if ctx.needs_input_grad(1) {
    ///             grad_inputs[1] = Some(&grads[0] * ctx.saved("x")?);
    ///         }
    ///         Ok(grad_inputs)
    ///     }
    /// }
    ///
    /// let x = Tensor::from_slice(&[1.0f32, 2.0]); // data: no gradient
    /// let w = Tensor::from_slice(&[3.0f32, 4.0]).set_requires_grad(true);
    /// apply(Mul, &[&x, &w]).remove(0).sum(Kind::Float).backward();
    /// assert_eq!(Vec::<f32>::try_from(w.grad()).unwrap(), [1.0, 2.0]);
    /// ```
    pub fn needs_input_grad(&self, i: usize) -> bool {
        self.needs_grad.get(i).copied().unwrap_or(false)
    }
}

struct Node<F> {
    function: F,
    name: String,
    names: Vec<String>,
    needs_grad: Vec<bool>,
}

impl<F: Function> NodeBackward for Node<F> {
    fn backward(
        &mut self,
        saved: &SavedAccess<'_>,
        grads: Vec<Tensor>,
    ) -> std::result::Result<Vec<Option<Tensor>>, String> {
        let Node {
            function,
            name,
            names,
            needs_grad,
        } = self;
        let ctx = BackwardContext {
            function: name,
            names,
            needs_grad,
            saved,
        };
        let out = catch_unwind(AssertUnwindSafe(|| function.backward(&ctx, &grads)));
        match out {
            Ok(Ok(g)) if g.len() == needs_grad.len() => Ok(g),
            Ok(Ok(g)) => Err(format!(
                "custom function `{name}`: backward returned {} gradients for {} inputs",
                g.len(),
                needs_grad.len()
            )),
            Ok(Err(e)) => Err(format!("custom function `{name}`: backward failed: {e}")),
            Err(p) => Err(format!(
                "custom function `{name}`: backward panicked: {}",
                panic_message(&*p)
            )),
        }
    }
}

/// Runs `function` on `inputs` and returns its outputs, attached to the
/// autograd graph when grad mode is on and an input requires grad.
///
/// Panics where [`try_apply`] returns an error, as tch's plain functions do.
///
/// ```
/// # use remat_runtime::{autograd::*, Error, Result};
/// # struct Double;
/// # impl Function for Double {
/// #   fn forward(&mut self, _: &mut ForwardContext, i: &[&tch::Tensor]) -> Result<Vec<tch::Tensor>> { Ok(vec![i[0] * 2]) }
/// #   fn backward(&mut self, _: &BackwardContext<'_>, g: &[tch::Tensor]) -> Result<Vec<Option<tch::Tensor>>> { Ok(vec![Some(&g[0] * 2)]) }
/// # }
/// let y = apply(Double, &[&tch::Tensor::ones([2], tch::kind::FLOAT_CPU)]);
/// assert_eq!(y.len(), 1);
/// ```
pub fn apply<F: Function>(function: F, inputs: &[&Tensor]) -> Vec<Tensor> {
    match try_apply(function, inputs) {
        Ok(out) => out,
        Err(e) => panic!("{e}"),
    }
}

/// Like [`apply`], returning errors (from forward or from libtorch) as `Err`.
///
/// ```
/// # use remat_runtime::{autograd::*, Error, Result};
/// # struct Fails;
/// # impl Function for Fails {
/// #   fn forward(&mut self, _: &mut ForwardContext, _: &[&tch::Tensor]) -> Result<Vec<tch::Tensor>> { Err(Error::torch("no")) }
/// #   fn backward(&mut self, _: &BackwardContext<'_>, _: &[tch::Tensor]) -> Result<Vec<Option<tch::Tensor>>> { Ok(vec![]) }
/// # }
/// assert!(try_apply(Fails, &[]).is_err());
/// ```
pub fn try_apply<F: Function>(mut function: F, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
    let mut ctx = ForwardContext::default();
    let mut outputs = no_grad(|| function.forward(&mut ctx, inputs))?;
    let name = function.name().to_string();
    if let Some(message) = ctx.invalid.take() {
        return Err(Error::Function {
            function: name,
            message,
        });
    }
    // libtorch packs only defined saves, in order: name exactly those.
    let _names = save_names::pend(
        ctx.names
            .iter()
            .zip(&ctx.saved)
            .filter(|(_, t)| t.defined())
            .map(|(n, _)| n.clone())
            .collect(),
    );
    let needs_grad = inputs.iter().map(|t| t.requires_grad()).collect();
    let saved: Vec<&Tensor> = ctx.saved.iter().collect();
    let node = Node {
        function,
        name: name.clone(),
        names: std::mem::take(&mut ctx.names),
        needs_grad,
    };
    attach_node(Box::new(node), &name, inputs, &mut outputs, &saved)?;
    Ok(outputs)
}
