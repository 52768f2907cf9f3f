//! The random programs: a small tree language over one `N x N` value, its
//! proptest strategy, and one interpreter that runs a program either with
//! remat (checkpoints and regions) or as plain autograd.

use proptest::prelude::*;
use remat::{checkpoint, diagnostics::live_checkpoints, recompute_needs_tensor, region, Policy};
use remat::{RecomputeStateHook, RngStateHook};
use std::any::Any;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tch::{Kind, Tensor};

const N: i64 = 4;

/// One operation on the current value `h` (`w` is a parameter).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `sin` saves its input.
    Sin,
    /// `tanh` saves its output.
    Tanh,
    /// `h * w` saves both.
    MulW,
    /// `h + w` saves nothing.
    AddW,
    /// `h @ w / 2` saves both.
    MatmulW,
    /// A view.
    Transpose,
    /// Views or copies, depending on the layout.
    Reshape,
    /// `chunk` views, recombined.
    ChunkCat,
    /// A slice view, recombined.
    Slice,
    /// An in-place update of a fresh tensor.
    InPlace,
    /// A reduction: rows minus their mean.
    CenterRows,
    /// Randomness: needs the RNG state hook.
    Dropout,
    /// State outside libtorch: needs the counter state hook.
    Counter,
}

/// A program node.
#[derive(Clone, Debug)]
pub enum Node {
    Op(Op),
    /// A region; `tuple` makes it return two outputs, recombined by bare code.
    Region {
        id: usize,
        policy: Policy,
        tuple: bool,
        body: Vec<Node>,
    },
    /// A nested checkpoint; `view_input` passes it a transposed view.
    Checkpoint {
        id: usize,
        view_input: bool,
        body: Vec<Node>,
    },
    /// Two checkpoints on the same input, their outputs added.
    Shared {
        id: usize,
        a: Vec<Node>,
        b: Vec<Node>,
    },
    /// `recompute_needs_tensor` on the current value: bare code reads it.
    Mark,
}

/// A whole program: the body of the outermost checkpoint.
#[derive(Clone, Debug)]
pub struct Program {
    pub body: Vec<Node>,
    pub seed: u64,
}

fn op() -> impl Strategy<Value = Op> {
    use Op::*;
    prop::sample::select(vec![
        Sin, Tanh, MulW, AddW, MatmulW, Transpose, Reshape, ChunkCat, Slice, InPlace, CenterRows,
        Dropout, Counter,
    ])
}

fn policy() -> impl Strategy<Value = Policy> {
    prop_oneof![Just(Policy::Save), Just(Policy::Recompute)]
}

fn nodes() -> impl Strategy<Value = Vec<Node>> {
    let leaf = prop::collection::vec(op().prop_map(Node::Op), 1..4);
    leaf.prop_recursive(3, 32, 5, |inner| {
        prop::collection::vec(
            prop_oneof![
                4 => op().prop_map(Node::Op),
                3 => (policy(), any::<bool>(), inner.clone()).prop_map(|(policy, tuple, body)| {
                    Node::Region { id: 0, policy, tuple, body }
                }),
                1 => (any::<bool>(), inner.clone()).prop_map(|(view_input, body)| {
                    Node::Checkpoint { id: 0, view_input, body }
                }),
                1 => (inner.clone(), inner).prop_map(|(a, b)| Node::Shared { id: 0, a, b }),
            ],
            1..5,
        )
    })
}

/// Random programs, normalised (see [`normalise`]).
pub fn program() -> impl Strategy<Value = Program> {
    (nodes(), any::<u64>()).prop_map(|(body, seed)| {
        let mut next = 0;
        Program {
            body: normalise(body, false, &mut next),
            seed,
        }
    })
}

/// Makes a generated tree a valid program: inside a `save` region, inner
/// regions are `save` (a `recompute` there is an error by design) and
/// checkpoints are inlined; every node gets a unique id (region names);
/// bare code that reads a `save` output is preceded by a `Mark` (a
/// `recompute` region consuming it asks by itself).
pub fn normalise(nodes: Vec<Node>, in_save: bool, next: &mut usize) -> Vec<Node> {
    fn fresh(next: &mut usize) -> usize {
        *next += 1;
        *next
    }
    let mut out = Vec::new();
    let mut pending_save = false;
    for node in nodes {
        let node = match node {
            Node::Region {
                policy,
                tuple,
                body,
                ..
            } => {
                let policy = if in_save { Policy::Save } else { policy };
                let inner_save = in_save || policy == Policy::Save;
                Node::Region {
                    id: fresh(next),
                    policy,
                    tuple,
                    body: normalise(body, inner_save, next),
                }
            }
            Node::Checkpoint { body, .. } | Node::Shared { a: body, .. } if in_save => {
                for n in normalise(body, true, next) {
                    out.push(n);
                }
                continue;
            }
            Node::Checkpoint {
                view_input, body, ..
            } => Node::Checkpoint {
                id: fresh(next),
                view_input,
                body: normalise(body, false, next),
            },
            Node::Shared { a, b, .. } => Node::Shared {
                id: fresh(next),
                a: normalise(a, false, next),
                b: normalise(b, false, next),
            },
            other => other,
        };
        let is_recompute_region = matches!(
            node,
            Node::Region {
                policy: Policy::Recompute,
                ..
            }
        );
        if pending_save && !is_recompute_region {
            out.push(Node::Mark);
        }
        pending_save = matches!(
            node,
            Node::Region {
                policy: Policy::Save,
                tuple: false,
                ..
            }
        );
        out.push(node);
    }
    if pending_save {
        // Whatever consumes this body's value reads it.
        out.push(Node::Mark);
    }
    out
}

/// Which state a subtree touches: its checkpoints need the matching hooks.
fn uses(nodes: &[Node], op: Op) -> bool {
    nodes.iter().any(|n| match n {
        Node::Op(o) => *o == op,
        Node::Region { body, .. } | Node::Checkpoint { body, .. } => uses(body, op),
        Node::Shared { a, b, .. } => uses(a, op) || uses(b, op),
        Node::Mark => false,
    })
}

/// A counter that some ops read and advance: state replay must restore.
struct CounterHook(Arc<AtomicU64>);

impl RecomputeStateHook for CounterHook {
    fn snapshot(&self) -> Box<dyn Any + Send> {
        Box::new(self.0.load(Ordering::SeqCst))
    }
    fn restore(&self, s: &(dyn Any + Send)) {
        self.0
            .store(*s.downcast_ref::<u64>().unwrap(), Ordering::SeqCst);
    }
}

/// What a run shares: the parameter, the counter, and whether remat runs.
struct Ctx {
    w: Tensor,
    counter: Arc<AtomicU64>,
    remat: bool,
}

impl Ctx {
    fn shallow(&self) -> Ctx {
        Ctx {
            w: self.w.shallow_clone(),
            counter: self.counter.clone(),
            remat: self.remat,
        }
    }
}

fn apply(op: Op, h: &Tensor, ctx: &Ctx) -> Tensor {
    match op {
        Op::Sin => h.sin(),
        Op::Tanh => h.tanh(),
        Op::MulW => h * &ctx.w,
        Op::AddW => h + &ctx.w,
        Op::MatmulW => h.matmul(&ctx.w) * 0.5,
        Op::Transpose => h.transpose(0, 1),
        Op::Reshape => h.reshape([-1]).reshape([N, N]),
        Op::ChunkCat => {
            let parts = h.chunk(2, 0);
            Tensor::cat(&[&parts[1] * 2.0, parts[0].shallow_clone()], 0)
        }
        Op::Slice => Tensor::cat(&[h.narrow(0, 1, N - 1), h.narrow(0, 0, 1).sin()], 0),
        Op::InPlace => {
            let mut t = h * 1.0;
            let _ = t.g_add_(&Tensor::ones([N, N], tch::kind::FLOAT_CPU));
            t
        }
        Op::CenterRows => h - h.mean_dim(Some([1i64].as_slice()), true, Kind::Float),
        Op::Dropout => h.dropout(0.3, true),
        Op::Counter => {
            let c = ctx.counter.fetch_add(1, Ordering::SeqCst) % 3;
            h * (1.0 + c as f64)
        }
    }
}

fn run(nodes: &[Node], mut h: Tensor, ctx: &Ctx) -> Tensor {
    for node in nodes {
        h = match node {
            Node::Op(op) => apply(*op, &h, ctx),
            Node::Mark => {
                recompute_needs_tensor(&h);
                h
            }
            Node::Region {
                id,
                policy,
                tuple,
                body,
            } => run_region(*id, *policy, *tuple, body, &h, ctx),
            Node::Checkpoint {
                id,
                view_input,
                body,
            } => {
                if *view_input {
                    let t = h.transpose(0, 1);
                    run_checkpoint(*id, body, &t, ctx, |t| t.transpose(0, 1))
                } else {
                    run_checkpoint(*id, body, &h, ctx, |t| t)
                }
            }
            Node::Shared { id, a, b } => {
                let x = run_checkpoint(*id, a, &h, ctx, |t| t);
                let y = run_checkpoint(*id + 1_000_000, b, &h, ctx, |t| t);
                x + y
            }
        };
    }
    h
}

fn run_region(
    id: usize,
    policy: Policy,
    tuple: bool,
    body: &[Node],
    h: &Tensor,
    ctx: &Ctx,
) -> Tensor {
    let body_of = |h: &Tensor| run(body, h.shallow_clone(), ctx);
    if !ctx.remat {
        return if tuple {
            body_of(h) + h * 0.5
        } else {
            body_of(h)
        };
    }
    let r = region(format!("r{id}"), policy);
    if tuple {
        let (a, b): (Tensor, Tensor) = r.call(h, |h| (body_of(h), h * 0.5));
        if policy == Policy::Save {
            // Bare code below reads both outputs.
            recompute_needs_tensor(&a);
            recompute_needs_tensor(&b);
        }
        a + b
    } else {
        r.call(h, body_of)
    }
}

fn run_checkpoint(
    id: usize,
    body: &[Node],
    input: &Tensor,
    ctx: &Ctx,
    unview: fn(Tensor) -> Tensor,
) -> Tensor {
    if !ctx.remat {
        return run(body, unview(input.shallow_clone()), ctx);
    }
    let mut c = checkpoint(format!("c{id}")).strict_recompute(true);
    if uses(body, Op::Dropout) {
        c = c.state_hook(RngStateHook::cpu());
    }
    if uses(body, Op::Counter) {
        c = c.state_hook(CounterHook(ctx.counter.clone()));
    }
    let (body, ctx) = (body.to_vec(), ctx.shallow());
    c.call(input, move |t| run(&body, unview(t), &ctx))
}

/// Runs `p` and returns the loss and the leaves' gradients.
fn gradients(p: &Program, remat: bool) -> Result<(Tensor, Tensor, Tensor), String> {
    tch::manual_seed(p.seed as i64);
    let x = Tensor::randn([N, N], tch::kind::FLOAT_CPU).set_requires_grad(true);
    let w = (Tensor::randn([N, N], tch::kind::FLOAT_CPU) * 0.5).set_requires_grad(true);
    let ctx = Ctx {
        w: w.shallow_clone(),
        counter: Arc::new(AtomicU64::new(0)),
        remat,
    };
    tch::manual_seed(p.seed as i64 ^ 0x5eed);
    let h = run_checkpoint(0, &p.body, &x, &ctx, |t| t);
    let loss = (&h * &h).sum(Kind::Float);
    loss.f_backward().map_err(|e| e.to_string())?;
    Ok((loss.detach(), x.grad(), w.grad()))
}

/// The bit patterns of `t`'s values (none for an undefined gradient: a leaf
/// the program does not use).
fn bits(t: &Tensor) -> Vec<u32> {
    if !t.defined() {
        return Vec::new();
    }
    Vec::<f32>::try_from(t.flatten(0, -1))
        .unwrap()
        .into_iter()
        .map(f32::to_bits)
        .collect()
}

/// The property: bitwise-equal loss and gradients, and no checkpoint state
/// left once the graph is gone (after backward, and when dropped without).
pub fn check(p: &Program) -> Result<(), String> {
    // The count of live checkpoints is process-wide: one program at a time
    // (the regression tests run on other test threads).
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let before = live_checkpoints();
    let plain = gradients(p, false).map_err(|e| format!("plain autograd failed: {e}"))?;
    let remat = gradients(p, true).map_err(|e| format!("with remat: {e}"))?;
    for (what, a, b) in [
        ("loss", &remat.0, &plain.0),
        ("x.grad", &remat.1, &plain.1),
        ("w.grad", &remat.2, &plain.2),
    ] {
        if bits(a) != bits(b) {
            return Err(format!("{what} differs: remat {a} plain {b}"));
        }
    }
    drop(remat);
    if live_checkpoints() != before {
        return Err(format!(
            "{} checkpoint(s) alive after backward",
            live_checkpoints() - before
        ));
    }
    // A forward whose graph is dropped without backward frees everything.
    {
        tch::manual_seed(p.seed as i64);
        let x = Tensor::randn([N, N], tch::kind::FLOAT_CPU).set_requires_grad(true);
        let ctx = Ctx {
            w: Tensor::randn([N, N], tch::kind::FLOAT_CPU).set_requires_grad(true),
            counter: Arc::new(AtomicU64::new(0)),
            remat: true,
        };
        let _h = run_checkpoint(0, &p.body, &x, &ctx, |t| t);
    }
    if live_checkpoints() != before {
        return Err("checkpoint state alive after dropping a forward".into());
    }
    Ok(())
}
