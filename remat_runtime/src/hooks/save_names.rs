//! Names of the saves a custom function is making, for the pack hook that
//! receives them (a `Save` region's reports show them instead of `saved.<i>`).
//!
//! Invariant: names are pending only while a function attaches its node, in
//! the order libtorch packs its defined saves; the guard clears them however
//! that ends.
//!
//! docs/semantics.md, rule D2 (names; E26 for a bad one).

use std::cell::RefCell;
use std::collections::VecDeque;

thread_local! {
    static PENDING: RefCell<Option<VecDeque<String>>> = const { RefCell::new(None) };
}

/// Clears the pending names when dropped (also when unwinding).
pub(crate) struct PendingNames(Option<VecDeque<String>>);

/// Makes `names` pending (one per defined save, in save order) until the
/// guard is dropped.
pub(crate) fn pend(names: Vec<String>) -> PendingNames {
    PendingNames(PENDING.with(|p| p.borrow_mut().replace(names.into())))
}

impl Drop for PendingNames {
    fn drop(&mut self) {
        let previous = self.0.take();
        PENDING.with(|p| *p.borrow_mut() = previous);
    }
}

/// The name of the save being packed now, if a function named it.
pub(crate) fn next() -> Option<String> {
    PENDING.with(|p| p.borrow_mut().as_mut().and_then(VecDeque::pop_front))
}

/// Checks a name given to `save_for_backward`, as the reference does.
pub(crate) fn validate(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("save_for_backward got an empty name; name each saved tensor".into());
    }
    if name.contains('.') {
        return Err(format!(
            "save_for_backward name `{name}` must not contain '.' (reports show saves as \
             `region.name`); use `_` instead"
        ));
    }
    Ok(())
}
