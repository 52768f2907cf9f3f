//! How a memory report prints: a header, the checkpoint's inputs, then per
//! region its line, its storage rows with their views, its parameters and
//! its footers.

use crate::diagnostics::device::name_of;
use crate::diagnostics::format::human_bytes;
use crate::diagnostics::memory_report::model::{
    InputMemory, KeptStorage, MemoryReport, RegionMemory,
};
use std::fmt;

impl fmt::Display for MemoryReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{}: {} kept in {} storage(s)",
            self.checkpoint,
            human_bytes(self.total_bytes()),
            self.storage_count()
        )?;
        if let Some(inputs) = &self.inputs {
            write_inputs(f, "  ", inputs)?;
        }
        for r in &self.regions {
            write_region(f, r, "  ")?;
        }
        Ok(())
    }
}

/// The checkpoint-inputs line of a report.
fn write_inputs(f: &mut fmt::Formatter<'_>, pad: &str, i: &InputMemory) -> fmt::Result {
    write!(
        f,
        "{pad}inputs kept for replay: {} in {} storage(s)",
        human_bytes(i.bytes),
        i.storages
    )?;
    if i.hook_packed > 0 {
        write!(f, ", {} packed by saved-tensor hooks", i.hook_packed)?;
    }
    if i.parameters > 0 {
        write!(
            f,
            ", {} leaf input(s) requiring grad (parameters) not counted",
            i.parameters
        )?;
    }
    writeln!(f)
}

/// One region of a memory report: its line, its storages with their views,
/// its parameters and its footers.
fn write_region(f: &mut fmt::Formatter<'_>, r: &RegionMemory, pad: &str) -> fmt::Result {
    write!(
        f,
        "{pad}{} ({}): {}",
        r.region,
        r.location,
        human_bytes(r.bytes())
    )?;
    if r.released {
        write!(
            f,
            "  ! output no longer alive: its saves were already released"
        )?;
    }
    writeln!(f)?;
    let rows = |f: &mut fmt::Formatter<'_>, storages: &mut dyn Iterator<Item = &KeptStorage>| {
        for s in storages {
            write!(
                f,
                "{pad}  {:>10}  {}  {:?} {:?}",
                human_bytes(s.bytes),
                s.names.join(" = "),
                s.sizes,
                s.kind
            )?;
            if s.held < s.bytes {
                write!(
                    f,
                    "  holds {} of {}",
                    human_bytes(s.held),
                    human_bytes(s.bytes)
                )?;
            }
            match &s.annotation {
                Some(note) => writeln!(f, "  {note}")?,
                None => writeln!(f)?,
            }
            for v in &s.views {
                writeln!(
                    f,
                    "{pad}  {:>10}  - {}  view {:?}  spans {}",
                    "",
                    v.names.join(" = "),
                    v.sizes,
                    human_bytes(v.spans)
                )?;
            }
        }
        Ok(())
    };
    rows(f, &mut r.storages())?;
    if !r.parameters.is_empty() {
        writeln!(
            f,
            "{pad}  + {} parameter storage(s) saved, not activation memory ({}):",
            r.parameters.len(),
            human_bytes(r.parameters.iter().map(|p| p.bytes).sum())
        )?;
        let inner = format!("{pad}  ");
        let _ = &inner;
        rows(f, &mut r.parameters.iter())?;
    }
    if !r.rebuilt.is_empty() {
        writeln!(
            f,
            "{pad}  + {} save(s) rebuilt on replay, not kept: {}",
            r.rebuilt.len(),
            r.rebuilt.join(", ")
        )?;
    }
    if r.hook_packed > 0 {
        writeln!(
            f,
            "{pad}  + {} packed by saved-tensor hooks, not resident",
            r.hook_packed
        )?;
    }
    for s in &r.offloaded_storages {
        writeln!(
            f,
            "{pad}  + {:>8}  {}  {:?} {:?}  offloaded to {}, not resident",
            human_bytes(s.bytes),
            s.names.join(" = "),
            s.sizes,
            s.kind,
            name_of(s.target)
        )?;
    }
    Ok(())
}
