//! Random numbers inside checkpoints: what the default keeps (every
//! checkpoint keeps libtorch's default generators for its recomputation,
//! docs/semantics.md, rule C14), the switches, and the state hooks.
//!
//! A test binary of its own: libtorch's generator is process-wide, and
//! other tests draw from it; every test here takes `GeneratorLock`, so that
//! they do not race each other (and the process-wide switch, which one of
//! them flips, is seen by no other test while it is off).

mod adversarial;
mod default;
mod hooks;
mod model;
