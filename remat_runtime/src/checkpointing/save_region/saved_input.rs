//! Saved tensors of a `Save` region that are its inputs (or views inside
//! them): when replay reproduces those inputs, they are rebuilt from the
//! replayed input instead of being kept (docs/semantics.md, rules S3-S5;
//! P6 when the recomputed input does not allow it).

use crate::bridge::{storage_offset, StorageKey, TensorMeta, WeakStorage};
use tch::Tensor;

/// What a `Save` region knew about a tensor input at entry.
pub(crate) struct InputInfo {
    /// Position among the region's tensor inputs.
    pub index: usize,
    storage: WeakStorage,
    /// Taken in one crossing, with the shape inline: no allocation per input.
    meta: TensorMeta,
    version: u32,
    /// The input is (a view of) an upstream `Save` output: replay serves it
    /// (or a placeholder), so nothing can be rebuilt from it.
    stub: bool,
}

impl InputInfo {
    /// `is_output` says whether a storage holds a `Save` output (asked
    /// with the key the metadata already holds).
    pub(crate) fn new(
        index: usize,
        t: &Tensor,
        is_output: impl FnOnce(StorageKey) -> bool,
    ) -> Option<Self> {
        let meta = TensorMeta::of(t).ok()?;
        if meta.is_placeholder {
            return None;
        }
        Some(InputInfo {
            index,
            storage: WeakStorage::new(t)?,
            version: meta.version?,
            stub: meta.storage.is_some_and(is_output),
            meta,
        })
    }

    fn same_storage(&self, key: Option<StorageKey>) -> bool {
        self.storage.is_alive() && key == Some(self.storage.key())
    }

    fn sizes(&self) -> &[i64] {
        self.meta.sizes()
    }

    fn strides(&self) -> &[i64] {
        self.meta.strides()
    }
}

/// How to cut a saved view out of the replayed input.
#[derive(Clone, Debug)]
pub(crate) struct ViewSpec {
    sizes: Vec<i64>,
    strides: Vec<i64>,
    relative_offset: i64,
    base_sizes: Vec<i64>,
    base_strides: Vec<i64>,
}

/// Which input the tensor that `meta` describes can be rebuilt from, if
/// any: the input itself (`None` spec) or a view inside it. A tensor
/// modified in place since entry is kept.
pub(crate) fn classify(
    meta: &TensorMeta,
    inputs: &[InputInfo],
) -> Option<(usize, Option<ViewSpec>)> {
    if meta.is_placeholder {
        return None;
    }
    let version = meta.version?;
    let (sizes, strides, offset) = (meta.sizes(), meta.strides(), meta.storage_offset);
    let same =
        |i: &InputInfo| i.same_storage(meta.storage) && i.meta.scalar_type == meta.scalar_type;
    if let Some(info) = inputs.iter().find(|i| {
        same(i) && i.meta.storage_offset == offset && i.sizes() == sizes && i.strides() == strides
    }) {
        // docs/semantics.md, rules S3 (the input itself), S4 (not if it moved
        // version) and S5 (not if it is a Save output).
        return (!info.stub && version == info.version).then_some((info.index, None));
    }
    let numel: i64 = sizes.iter().product();
    // docs/semantics.md, rule S3: a view must be non-empty with non-negative strides.
    if numel == 0 || strides.iter().any(|&s| s < 0) {
        return None;
    }
    let info = inputs.iter().find(|i| {
        !i.stub
            && same(i)
            && i.strides().iter().all(|&s| s >= 0)
            && contains(
                i.meta.storage_offset,
                i.sizes(),
                i.strides(),
                offset,
                sizes,
                strides,
            )
    })?;
    // docs/semantics.md, rule S4.
    (version == info.version).then(|| {
        (
            info.index,
            Some(ViewSpec {
                sizes: sizes.to_vec(),
                strides: strides.to_vec(),
                relative_offset: offset - info.meta.storage_offset,
                base_sizes: info.sizes().to_vec(),
                base_strides: info.strides().to_vec(),
            }),
        )
    })
}

/// One past the last element a layout addresses, relative to its offset.
fn extent(sizes: &[i64], strides: &[i64]) -> i64 {
    if sizes.contains(&0) {
        return 0;
    }
    1 + sizes
        .iter()
        .zip(strides)
        .map(|(n, s)| (n - 1) * s)
        .sum::<i64>()
}

fn contains(base_off: i64, bs: &[i64], bst: &[i64], off: i64, s: &[i64], st: &[i64]) -> bool {
    let (b_end, end) = (base_off + extent(bs, bst), off + extent(s, st));
    off >= base_off && end <= b_end
}

/// The saved value rebuilt from the replayed input `base`.
pub(crate) fn rebuild(base: &Tensor, view: &Option<ViewSpec>) -> Result<Tensor, String> {
    let Some(v) = view else {
        return Ok(base.detach());
    };
    if base.size() != v.base_sizes || base.stride() != v.base_strides {
        return Err(format!(
            "it saved a view of an input for backward, but replay reproduced that input with \
             another layout (expected sizes {:?} strides {:?}, got {:?} {:?}), so the view \
             cannot be rebuilt",
            v.base_sizes,
            v.base_strides,
            base.size(),
            base.stride()
        ));
    }
    let offset = storage_offset(base) + v.relative_offset;
    Ok(base
        .as_strided(v.sizes.as_slice(), v.strides.as_slice(), Some(offset))
        .detach())
}
