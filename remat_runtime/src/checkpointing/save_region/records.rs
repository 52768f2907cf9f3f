//! The `Save` regions one checkpoint's forward ran: by name, for the
//! replay that reaches them again, and in forward order, for the reports.
//!
//! Invariant: records are only added, by the forward; a replay finds a
//! region by the name the forward gave it, or fails (rule R5).
//!
//! docs/semantics.md rules kept here: R5 (a region the forward did not
//! record), D3 (reports list regions in forward order).

use crate::checkpointing::save_region::record::SaveRecord;
use crate::error::Error;
use crate::fast_hash::FastMap;
use std::borrow::Cow;
use std::sync::Arc;

/// A checkpoint call's `Save` records.
#[derive(Default)]
pub(crate) struct Records {
    by_name: FastMap<Cow<'static, str>, Arc<SaveRecord>>,
    /// The same records in forward order.
    order: Vec<Arc<SaveRecord>>,
}

impl Records {
    /// Room for `regions` before the tables grow.
    pub(crate) fn with_capacity(regions: usize) -> Records {
        Records {
            by_name: FastMap::with_capacity_and_hasher(regions, Default::default()),
            order: Vec::with_capacity(regions),
        }
    }

    /// Adds the record of a `Save` region the forward ran.
    pub(crate) fn add(&mut self, name: Cow<'static, str>, record: Arc<SaveRecord>) {
        self.by_name.insert(name, record.clone());
        self.order.push(record);
    }

    /// The record of region `name`, which replay reached again; `region` is
    /// how messages call it.
    // docs/semantics.md, rule R5 (E6).
    pub(crate) fn reached(
        &self,
        name: &str,
        region: impl FnOnce() -> String,
    ) -> Result<Arc<SaveRecord>, Error> {
        self.by_name
            .get(name)
            .cloned()
            .ok_or_else(|| Error::Region {
                region: region(),
                message: "replay reached this `save` region but the forward did not record it; \
                      forward and replay followed different code paths (or the region's \
                      policy differs between them)"
                    .into(),
            })
    }

    /// Whether the forward ran a `Save` region named `name`.
    pub(crate) fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// How many regions the forward recorded.
    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// The records in forward order.
    pub(crate) fn in_order(&self) -> Vec<Arc<SaveRecord>> {
        self.order.clone()
    }
}
