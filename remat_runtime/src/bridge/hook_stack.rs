//! The per-thread stack of default saved-tensor hooks.

use super::{check, ffi, init};
use crate::error::Result;
use std::any::Any;
use std::os::raw::c_void;
use std::sync::Arc;
use tch::Tensor;

/// What a pack hook returns; kept by libtorch's SavedVariable until unpack.
pub(crate) type Payload = Box<dyn Any + Send>;

/// An autograd node as libtorch numbers it: the forward thread's id and the
/// node's sequence number on that thread (unique together).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct NodeId {
    pub thread: u64,
    pub seq: u64,
}

/// What libtorch tells about a save as it is packed.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct SaveSite {
    /// The saved tensor is a parameter (a leaf that requires grad) or a view
    /// of one: it is not activation memory.
    pub param: bool,
    /// The node that saves it: the last node the thread created (see
    /// [`crate::bridge::graph_nodes`] for which nodes this holds for).
    pub node: Option<NodeId>,
}

/// A pack/unpack pair as libtorch sees it. Unpack may run on an autograd
/// worker thread, hence `Send + Sync`; payloads are locked while unpacked.
pub(crate) trait HookPair: Send + Sync + 'static {
    /// Receives a detached alias of the tensor being saved, and where the
    /// save was made (most pairs do not care).
    fn pack(&self, tensor: Tensor, site: SaveSite) -> Result<Payload, String>;
    /// Gives back the tensor for a payload this pair packed.
    fn unpack(&self, payload: &(dyn Any + Send)) -> Result<Tensor, String>;
}

/// Pushes `pair` (or, with `None`, a level without hooks) on this thread's
/// stack. The caller pops it with [`pop_hooks`].
pub(crate) fn push_hooks(pair: Option<Arc<dyn HookPair>>) -> Result<()> {
    init();
    let raw = match pair {
        Some(pair) => Box::into_raw(Box::new(pair)) as *mut c_void,
        None => std::ptr::null_mut(),
    };
    // SAFETY: the stack takes ownership of `raw` (released via `hooks_drop`),
    // even when the push fails.
    check(unsafe { ffi::remat_hooks_push(raw) })
}

/// Pops the top of this thread's hook stack.
pub(crate) fn pop_hooks() -> Result<()> {
    // SAFETY: no arguments; the bridge checks that the stack is not empty.
    check(unsafe { ffi::remat_hooks_pop() })
}

/// How many levels this thread's hook stack has.
pub(crate) fn hooks_depth() -> usize {
    // SAFETY: reads a thread-local size.
    unsafe { ffi::remat_hooks_depth() }
}
