//! The memory report of one block: block 0 of the reference model run
//! through a checkpoint of the runtime API, with `remat::diagnostics::memory_report()`
//! called at the end of its forward (the only place it answers).
//!
//! Under `--autocast` the block runs inside the same autocast scope as
//! training's forward, so the report shows the dtypes and bytes the
//! training run keeps.
//!
//! Invariant: reports the forward's view only; the replay in backward does
//! not overwrite it.

use crate::corpus::{Corpus, Sampler};
use crate::options::AutocastArg;
use remat::{checkpoint, diagnostics::memory_report, diagnostics::MemoryReport};
use remat_reference::model::{block_body, Config, Model, ModelPolicy};
use std::sync::{Arc, Mutex};

/// What block 0 keeps for backward under `policy`, its forward at the
/// precision `autocast`.
pub fn block_report(
    cfg: Config,
    seed: u64,
    policy: ModelPolicy,
    autocast: AutocastArg,
    device: tch::Device,
) -> Result<MemoryReport, String> {
    let model = Model::on(cfg, seed as i64, device);
    let (x, y) = Sampler::new(seed).batch_on(&Corpus::load().train, cfg, device);
    let slot: Arc<Mutex<Option<MemoryReport>>> = Arc::default();
    let loss = autocast.scope(device, || {
        model.loss_through(&x, &y, |h| {
            let block = model.blocks[0].shallow();
            let slot = slot.clone();
            checkpoint("layers.0").call(&h, move |h| {
                let out = block_body(&block, &h, policy);
                let mut slot = slot.lock().expect("not poisoned");
                if slot.is_none() {
                    *slot = memory_report().ok();
                }
                out
            })
        })
    });
    loss.backward();
    let report = slot.lock().expect("not poisoned").take();
    report.ok_or_else(|| "memory_report() did not answer inside the checkpoint".to_string())
}
