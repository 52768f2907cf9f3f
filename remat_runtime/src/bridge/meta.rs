//! A tensor's metadata in one crossing into C++: what a `Save` region
//! records about each input and output.
//!
//! Invariant: a [`TensorMeta`] is a snapshot: it holds no handle to the
//! tensor, and its sizes and strides are inline up to `META_DIMS` dimensions
//! (no allocation for the common shapes).

use super::ffi::{self, RawMeta, META_DIMS};
use super::{check, StorageKey};
use crate::error::Result;
use tch::{Device, Kind, Tensor};

/// Sizes and strides, inline for up to `META_DIMS` dimensions.
#[derive(Clone, Debug)]
pub(crate) enum Dims {
    Inline {
        ndim: u8,
        sizes: [i64; META_DIMS],
        strides: [i64; META_DIMS],
    },
    Heap {
        sizes: Vec<i64>,
        strides: Vec<i64>,
    },
}

/// Equal when the sizes and strides are, however they are stored.
impl PartialEq for Dims {
    fn eq(&self, other: &Dims) -> bool {
        self.sizes() == other.sizes() && self.strides() == other.strides()
    }
}

impl Eq for Dims {}

impl Dims {
    pub(crate) fn sizes(&self) -> &[i64] {
        match self {
            Dims::Inline { ndim, sizes, .. } => &sizes[..*ndim as usize],
            Dims::Heap { sizes, .. } => sizes,
        }
    }

    pub(crate) fn strides(&self) -> &[i64] {
        match self {
            Dims::Inline { ndim, strides, .. } => &strides[..*ndim as usize],
            Dims::Heap { strides, .. } => strides,
        }
    }
}

/// What one call tells about a tensor.
#[derive(Clone, Debug)]
pub(crate) struct TensorMeta {
    pub storage: Option<StorageKey>,
    pub storage_nbytes: i64,
    pub storage_offset: i64,
    /// `None` for an inference tensor (it has no version counter).
    pub version: Option<u32>,
    /// libtorch's `ScalarType` code (compared as is; see [`TensorMeta::kind`]).
    pub scalar_type: i32,
    pub device: Device,
    pub requires_grad: bool,
    pub is_placeholder: bool,
    pub dims: Dims,
}

impl TensorMeta {
    /// The metadata of `t` (an undefined tensor gives empty metadata).
    pub(crate) fn of(t: &Tensor) -> Result<Self> {
        let mut raw = RawMeta::default();
        // SAFETY: `t` is a live tensor and `raw` a valid out-pointer of the
        // layout bridge.h declares.
        check(unsafe { ffi::remat_tensor_meta(t.as_ptr(), &mut raw) })?;
        let dims = if raw.ndim as usize <= META_DIMS {
            Dims::Inline {
                ndim: raw.ndim as u8,
                sizes: raw.sizes,
                strides: raw.strides,
            }
        } else {
            Dims::Heap {
                sizes: t.size(),
                strides: t.stride(),
            }
        };
        Ok(TensorMeta {
            storage: (raw.storage_key != 0).then_some(StorageKey(raw.storage_key)),
            storage_nbytes: raw.storage_nbytes,
            storage_offset: raw.storage_offset,
            version: (raw.has_version != 0).then_some(raw.version),
            scalar_type: raw.scalar_type,
            device: match raw.device {
                -1 => Device::Cpu,
                -3 => Device::Vulkan,
                i if i >= 0 => Device::Cuda(i as usize),
                _ => Device::Mps,
            },
            requires_grad: raw.requires_grad != 0,
            is_placeholder: raw.is_placeholder != 0,
            dims,
        })
    }

    pub(crate) fn sizes(&self) -> &[i64] {
        self.dims.sizes()
    }

    pub(crate) fn strides(&self) -> &[i64] {
        self.dims.strides()
    }

    /// The element type, if tch has a name for it.
    pub(crate) fn kind(&self) -> Option<Kind> {
        super::kind_code::kind_of_code(self.scalar_type)
    }
}

/// Whether `t` requires grad and is a leaf (a fresh allocation, not a
/// computation), in one crossing.
pub(crate) fn is_grad_leaf(t: &Tensor) -> bool {
    // SAFETY: `t` is a live tensor.
    unsafe { ffi::remat_is_grad_leaf(t.as_ptr()) != 0 }
}
