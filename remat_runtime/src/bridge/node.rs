//! Custom autograd nodes whose backward is Rust code.

use super::hook_stack::NodeId;
use super::{check, ffi, init, take_tensor};
use crate::error::Result;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::os::raw::{c_char, c_void};
use tch::Tensor;
use torch_sys::C_tensor;

/// The backward of a node, as the bridge calls it.
pub(crate) trait NodeBackward: Send + 'static {
    /// Gradients for each input (`None`: no gradient), given the gradients of
    /// each output (zeros where autograd had none).
    fn backward(
        &mut self,
        saved: &SavedAccess<'_>,
        grads: Vec<Tensor>,
    ) -> Result<Vec<Option<Tensor>>, String>;

    /// The graph will not be backpropagated again (no `retain_graph`).
    fn release(&mut self) {}
}

/// What the node owns on the Rust side (a thin pointer for C++).
pub(super) struct NodeCtx {
    pub(super) backward: Box<dyn NodeBackward>,
}

/// Read access to a node's saved tensors during its backward (users reach
/// them through [`BackwardContext`](crate::autograd::BackwardContext)).
pub(crate) struct SavedAccess<'a> {
    node: *mut c_void,
    _borrow: PhantomData<&'a ()>,
}

impl SavedAccess<'_> {
    pub(super) fn new(node: *mut c_void) -> Self {
        SavedAccess {
            node,
            _borrow: PhantomData,
        }
    }

    /// Unpacks saved tensor `i` (through the saved-tensor hooks that packed
    /// it); an index past the end is an error, not a panic.
    pub(crate) fn get(&self, i: usize) -> Result<Tensor> {
        let mut out: *mut C_tensor = std::ptr::null_mut();
        // SAFETY: `node` is live during backward; on success `out` is an
        // owned tensor.
        unsafe {
            check(ffi::remat_node_saved(self.node, i, &mut out))?;
            Ok(take_tensor(out))
        }
    }
}

/// Attaches a node running `backward` to `outputs`, with next edges to
/// `inputs`' gradients and `saved` stored as SavedVariables on it.
///
/// Returns `false`, leaving `outputs` untouched and dropping `backward`, when
/// grad mode is off or no input requires grad.
pub(crate) fn attach_node(
    backward: Box<dyn NodeBackward>,
    name: &str,
    inputs: &[&Tensor],
    outputs: &mut [Tensor],
    saved: &[&Tensor],
) -> Result<bool> {
    init();
    let name = CString::new(name.replace('\0', " ")).expect("NULs were replaced");
    let ctx = Box::into_raw(Box::new(NodeCtx { backward })) as *mut c_void;
    let input_ptrs: Vec<*const C_tensor> = inputs.iter().map(|t| t.as_ptr()).collect();
    let mut output_ptrs: Vec<*mut C_tensor> = outputs.iter_mut().map(|t| t.as_mut_ptr()).collect();
    let saved_ptrs: Vec<*const C_tensor> = saved.iter().map(|t| t.as_ptr()).collect();
    let mut attached = 0;
    // SAFETY: all pointers are live tch tensors for the duration of the call;
    // the bridge replaces `*outputs[i]` in place (the handles stay owned by
    // `outputs`). If `attached` is set, the node owns `ctx`.
    let err = unsafe {
        ffi::remat_fn_apply(
            ctx,
            name.as_ptr(),
            input_ptrs.as_ptr(),
            input_ptrs.len(),
            output_ptrs.as_mut_ptr(),
            output_ptrs.len(),
            saved_ptrs.as_ptr(),
            saved_ptrs.len(),
            &mut attached,
        )
    };
    if attached == 0 {
        // SAFETY: no node took ownership of the box leaked above.
        drop(unsafe { Box::from_raw(ctx as *mut NodeCtx) });
    }
    check(err)?;
    Ok(attached != 0)
}

/// Unpacks saved tensor `i` of the custom node that is `t`'s `grad_fn`.
pub(crate) fn grad_fn_saved(t: &Tensor, i: usize) -> Result<Tensor> {
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: `t` is live; on success `out` is an owned tensor.
    unsafe {
        check(ffi::remat_grad_fn_saved(t.as_ptr(), i, &mut out))?;
        Ok(take_tensor(out))
    }
}

/// Every autograd node reachable from the roots, by id, with its name
/// (`AddmmBackward0`, or a custom function's name).
///
/// A save's [`super::SaveSite::node`] finds its node here for every node
/// created by libtorch's generated autograd code and by remat's own
/// functions: both create the node, then save right away.
pub(crate) fn graph_nodes(roots: &[&Tensor]) -> Result<HashMap<NodeId, String>> {
    let ptrs: Vec<*const C_tensor> = roots.iter().map(|t| t.as_ptr()).collect();
    let mut out: *mut c_char = std::ptr::null_mut();
    // SAFETY: `ptrs` holds `ptrs.len()` live tensors borrowed for the call;
    // on success `out` is a heap string we free below.
    check(unsafe { ffi::remat_graph_nodes(ptrs.as_ptr(), ptrs.len(), &mut out) })?;
    if out.is_null() {
        return Ok(HashMap::new());
    }
    // SAFETY: a non-null `out` is a NUL-terminated string from the bridge,
    // copied then freed exactly once.
    let text = unsafe {
        let text = CStr::from_ptr(out).to_string_lossy().into_owned();
        ffi::remat_string_free(out);
        text
    };
    Ok(text
        .lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ' ');
            let thread = parts.next()?.parse().ok()?;
            let seq = parts.next()?.parse().ok()?;
            Some((NodeId { thread, seq }, parts.next()?.to_string()))
        })
        .collect())
}

/// A non-leaf tensor requiring grad with `value`'s data and metadata (a
/// fresh version counter), for a value served on replay: its `grad_fn` is a
/// C++ node that fails if it is ever run. One bridge call, no Rust node.
pub(crate) fn served_value(value: &Tensor) -> Result<Tensor> {
    init();
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: `value` is a live tensor; on success `out` is an owned tensor.
    check(unsafe { ffi::remat_served_value(value.as_ptr(), &mut out) })?;
    // SAFETY: `out` is non-null and owned after a successful call.
    Ok(unsafe { take_tensor(out) })
}
