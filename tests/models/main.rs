//! Real models written with `remat::nn` and the macros: a ResNet-style CNN
//! with batch norm (train mode) and a GPT with dropout. Each trains three
//! steps with and without remat; everything must be bit-identical. A binary
//! of its own: the models draw from libtorch's process-wide generator, so
//! its tests run one at a time (`serial`).

#[path = "../common/mod.rs"]
mod common;

mod gpt_dropout;
mod harness;
mod resnet;
mod state;

/// Held by every test of this binary: the generator is process-wide.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}
