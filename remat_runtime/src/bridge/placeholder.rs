//! Placeholder tensors: real metadata, no data (docs/semantics.md, rule P4).

use super::kind_code::scalar_type;
use super::{check, ffi, take_tensor};
use crate::error::Result;
use std::ffi::CString;
use tch::{Device, Kind, Tensor};
use torch_sys::C_tensor;

/// The metadata of a placeholder: everything a tensor has but its data.
///
/// ```
/// use remat_runtime::{autograd::placeholder, autograd::PlaceholderSpec};
/// use tch::{Device, Kind};
/// let spec = PlaceholderSpec::contiguous(&[2, 3], Kind::Float, Device::Cpu);
/// let p = placeholder(&spec, "no data here").unwrap();
/// assert_eq!(p.size(), [2, 3]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlaceholderSpec {
    /// Sizes of the tensor.
    pub sizes: Vec<i64>,
    /// Strides of the tensor, in elements.
    pub strides: Vec<i64>,
    /// Offset of the tensor into its storage, in elements.
    pub storage_offset: i64,
    /// Element type.
    pub kind: Kind,
    /// Device the tensor claims to live on.
    pub device: Device,
    /// Byte size the storage declares (memory reports read it).
    pub storage_nbytes: i64,
}

impl PlaceholderSpec {
    /// A contiguous tensor of `sizes` whose storage is exactly its size.
    ///
    /// ```
    /// use remat_runtime::autograd::PlaceholderSpec;
    /// use tch::{Device, Kind};
    /// let spec = PlaceholderSpec::contiguous(&[2, 3], Kind::Float, Device::Cpu);
    /// assert_eq!(spec.strides, [3, 1]);
    /// assert_eq!(spec.storage_offset, 0);
    /// assert_eq!(spec.storage_nbytes, 2 * 3 * 4);
    /// ```
    pub fn contiguous(sizes: &[i64], kind: Kind, device: Device) -> Self {
        let mut strides = vec![0; sizes.len()];
        let mut step = 1;
        for (i, &n) in sizes.iter().enumerate().rev() {
            strides[i] = step;
            step *= n.max(1);
        }
        let numel: i64 = sizes.iter().product();
        PlaceholderSpec {
            sizes: sizes.to_vec(),
            strides,
            storage_offset: 0,
            kind,
            device,
            storage_nbytes: numel * kind.elt_size_in_bytes() as i64,
        }
    }

    /// The metadata of `t` (sizes, strides, offset, kind, device, storage size).
    ///
    /// A placeholder made from it looks like `t` without holding its data:
    ///
    /// ```
    /// use remat_runtime::{autograd::placeholder, autograd::PlaceholderSpec};
    /// let t = tch::Tensor::zeros([4, 3], tch::kind::FLOAT_CPU);
    /// let view = t.narrow(0, 1, 2).transpose(0, 1); // sizes [3, 2], offset 3
    /// let spec = PlaceholderSpec::of(&view);
    /// assert_eq!((spec.strides.as_slice(), spec.storage_offset), (&[1, 3][..], 3));
    /// assert_eq!(spec.storage_nbytes, 4 * 3 * 4); // the whole storage
    /// let p = placeholder(&spec, "not kept").unwrap();
    /// assert_eq!((p.size(), p.stride()), (view.size(), view.stride()));
    /// ```
    pub fn of(t: &Tensor) -> Self {
        PlaceholderSpec {
            sizes: t.size(),
            strides: t.stride(),
            storage_offset: super::storage_offset(t),
            kind: t.kind(),
            device: t.device(),
            storage_nbytes: super::storage_nbytes(t),
        }
    }
}

impl PlaceholderSpec {
    /// The spec of the tensor `meta` was taken from; `None` for an element
    /// type tch cannot name.
    pub(crate) fn from_meta(meta: &super::TensorMeta) -> Option<Self> {
        Some(PlaceholderSpec {
            sizes: meta.sizes().to_vec(),
            strides: meta.strides().to_vec(),
            storage_offset: meta.storage_offset,
            kind: meta.kind()?,
            device: meta.device,
            storage_nbytes: meta.storage_nbytes,
        })
    }
}

/// A tensor with `spec`'s metadata over a storage that holds no data.
///
/// Metadata and view operations (`size`, `view`, `transpose`, `select`, ...)
/// work; anything that reads or writes its data fails with `message`. A view
/// of a placeholder is a placeholder.
///
/// ```
/// use remat_runtime::autograd::{is_placeholder, placeholder, PlaceholderSpec};
/// use tch::{Device, Kind};
/// let spec = PlaceholderSpec::contiguous(&[4, 4], Kind::Float, Device::Cpu);
/// let p = placeholder(&spec, "the value was not kept").unwrap();
/// assert!(is_placeholder(&p.transpose(0, 1)));
/// let err = p.f_sum(Kind::Float).unwrap_err();
/// assert!(err.to_string().contains("the value was not kept"));
/// ```
pub fn placeholder(spec: &PlaceholderSpec, message: &str) -> Result<Tensor> {
    if spec.sizes.len() != spec.strides.len() {
        return Err(crate::Error::torch(format!(
            "placeholder has {} sizes but {} strides",
            spec.sizes.len(),
            spec.strides.len()
        )));
    }
    let msg = CString::new(message.replace('\0', " ")).expect("NULs were replaced");
    let mut out: *mut C_tensor = std::ptr::null_mut();
    // SAFETY: the arrays hold `sizes.len()` elements and `msg` is a
    // NUL-terminated string, all alive for the call; on success `out` is an
    // owned tensor.
    unsafe {
        check(ffi::remat_placeholder_new(
            spec.sizes.as_ptr(),
            spec.strides.as_ptr(),
            spec.sizes.len(),
            spec.storage_offset,
            scalar_type(spec.kind),
            device_code(spec.device)?,
            spec.storage_nbytes,
            msg.as_ptr(),
            &mut out,
        ))?;
        Ok(take_tensor(out))
    }
}

/// Whether `t` (or the tensor it is a view of) is a placeholder.
///
/// ```
/// assert!(!remat_runtime::autograd::is_placeholder(&tch::Tensor::ones([2], tch::kind::FLOAT_CPU)));
/// ```
pub fn is_placeholder(t: &Tensor) -> bool {
    // SAFETY: `t` is a live tensor.
    unsafe { ffi::remat_is_placeholder(t.as_ptr()) != 0 }
}

/// The bridge's device code: -1 for the CPU, the index for a CUDA device.
fn device_code(device: Device) -> Result<std::os::raw::c_int> {
    match device {
        Device::Cpu => Ok(-1),
        Device::Cuda(i) => Ok(i as std::os::raw::c_int),
        other => Err(crate::Error::torch(format!(
            "placeholders support CPU and CUDA tensors, not {other:?}"
        ))),
    }
}
