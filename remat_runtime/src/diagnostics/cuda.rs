//! CUDA diagnostics: a report printed when an allocation fails, and report
//! rows annotated with where their storage was allocated (the CUDA caching
//! allocator's snapshot). Both need a build with the `cuda` feature and a
//! CUDA device; anywhere else they return [`Error::Unsupported`].
//!
//! Invariant: the OOM observer never panics into the allocator and never
//! waits on a lock the failing thread may hold for long: the report is
//! built on a helper thread and given up after a short wait.
//!
//! docs/semantics.md, rule D5 (E29 without CUDA).

use crate::bridge::{
    attach_oom_observer as attach_native, cuda_blocks, cuda_built, record_allocation_contexts,
    OomEvent,
};
use crate::checkpointing::frame::describe_position;
use crate::diagnostics::format::human_bytes;
use crate::diagnostics::memory_report::MemoryReport;
use crate::diagnostics::saved_report::saved_tensors_report;
use crate::error::{Error, Result};
use std::sync::mpsc;
use std::time::Duration;

#[cfg(doc)]
use crate::diagnostics::memory_report::memory_report;

/// Fails unless this build and machine have the CUDA diagnostics.
fn require_cuda(what: &str) -> Result<()> {
    if !cuda_built() {
        return Err(Error::Unsupported(format!(
            "{what} needs CUDA: this build of remat has no CUDA diagnostics; build with the \
             `cuda` feature (remat/cuda) where the CUDA toolkit headers are found (CUDA_HOME), \
             and run on a machine with a CUDA device"
        )));
    }
    if !tch::Cuda::is_available() {
        return Err(Error::Unsupported(format!(
            "{what} needs CUDA, but no CUDA device is visible"
        )));
    }
    Ok(())
}

/// On every CUDA out-of-memory error from now on, prints to stderr (before
/// the error propagates) what was being allocated, where in the model the
/// thread was (checkpoint, region, forward or replay) and the whole-model
/// saved-for-backward report. Attach it once, before training.
///
/// On a CPU build, or without a CUDA device, it returns
/// [`Error::Unsupported`]:
///
/// ```
/// # if !tch::Cuda::is_available() {
/// let err = remat_runtime::diagnostics::attach_oom_observer().unwrap_err();
/// assert!(err.to_string().contains("needs CUDA"));
/// # }
/// ```
pub fn attach_oom_observer() -> Result<()> {
    require_cuda("attach_oom_observer")?;
    attach_native(print_oom_report)
}

/// What the observer prints, as text.
pub(crate) fn oom_report(event: OomEvent, position: Option<String>) -> String {
    let mut text = format!(
        "CUDA out of memory on device {}: {} requested ({} free of {})\n",
        event.device,
        human_bytes(event.requested as i64),
        human_bytes(event.device_free as i64),
        human_bytes(event.device_total as i64),
    );
    text += &match position {
        Some(p) => format!("remat: the failing allocation was made in {p}\n"),
        None => "remat: the failing allocation was made outside checkpoints\n".into(),
    };
    // The failing thread may hold a checkpoint's lock (an unpack hook that
    // allocates): build the report elsewhere and give up after a while.
    let (send, receive) = mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("remat-oom-report".into())
        .spawn(move || {
            let _ = send.send(saved_tensors_report(None).to_string());
        });
    match spawned
        .ok()
        .and_then(|_| receive.recv_timeout(Duration::from_secs(2)).ok())
    {
        Some(report) => text += &report,
        None => text += "(the saved-for-backward report is unavailable: a checkpoint is busy)\n",
    }
    text
}

fn print_oom_report(event: OomEvent) {
    eprint!("{}", oom_report(event, describe_position()));
}

/// Starts (or stops) recording, with every CUDA allocation, where in the
/// model it was made (`checkpoint::region (forward)`), for
/// [`MemoryReport::annotate_allocation_sites`]. Recording costs a little
/// time per allocation: turn it on for a diagnostic run.
///
/// ```
/// # if !tch::Cuda::is_available() {
/// let err = remat_runtime::diagnostics::record_allocation_sites(true).unwrap_err();
/// assert!(err.to_string().contains("needs CUDA"));
/// # }
/// ```
pub fn record_allocation_sites(enabled: bool) -> Result<()> {
    require_cuda("record_allocation_sites")?;
    record_allocation_contexts(enabled, allocation_label)
}

fn allocation_label() -> String {
    describe_position().unwrap_or_else(|| "outside checkpoints".into())
}

impl MemoryReport {
    /// Notes on each storage row where its storage was allocated, from the
    /// CUDA allocator's snapshot (recorded by
    /// [`record_allocation_sites`]); rows on other devices or allocated
    /// before recording get no note. The region's call site stays on its
    /// line either way.
    ///
    /// ```
    /// use remat_runtime::{checkpoint, diagnostics::memory_report, region, Policy};
    /// let x = tch::Tensor::ones([4, 4], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// let _y = checkpoint("block").call(&x, |x| {
    ///     let h = region("exp", Policy::Save).call(&x, |x| x.exp());
    ///     let mut report = memory_report().unwrap();
    ///     if !tch::Cuda::is_available() {
    ///         assert!(report.annotate_allocation_sites().is_err());
    ///     }
    ///     h
    /// });
    /// ```
    pub fn annotate_allocation_sites(&mut self) -> Result<()> {
        require_cuda("annotate_allocation_sites")?;
        let blocks = cuda_blocks()?;
        self.annotate(|_, row| {
            // The last block starting at or before the storage's address.
            let i = blocks.partition_point(|b| b.address <= row.address);
            let block = blocks.get(i.checked_sub(1)?)?;
            (row.address < block.address + block.size && !block.context.is_empty())
                .then(|| format!("allocated in {}", block.context))
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oom_report_names_the_request_and_the_position() {
        let event = OomEvent {
            device: 0,
            requested: 3 << 30,
            device_total: 80 << 30,
            device_free: 1 << 30,
        };
        let text = oom_report(event, Some("layers.3::mlp (replay)".into()));
        assert!(text.starts_with(
            "CUDA out of memory on device 0: 3.00 GiB requested (1.00 GiB free of 80.00 GiB)\n\
             remat: the failing allocation was made in layers.3::mlp (replay)\n\
             saved for backward: "
        ));
    }
}
