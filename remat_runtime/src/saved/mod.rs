//! Save outputs as bare code holds them: [`Saved`], a value whose data
//! cannot be read until it is marked, so that rustc's type checker, not an
//! analysis of the source, refuses bare code that would read a skipped
//! region's output during recomputation (docs/dsl.md, section T).
//!
//! The type's layout is in `bridge/saved_repr.rs`; here is what bare code
//! may do with it: metadata and views (placeholders have both, rule P4).
//! The ways out are passing it to a region (`arg.rs`), returning it from
//! the checkpoint (`returned.rs`), and, in `checkpointing/needs.rs`,
//! `needs` and `Saved::on_forward`.

pub(crate) mod arg;
pub(crate) mod fields;
pub(crate) mod returned;
pub(crate) mod unmarked;

pub use crate::bridge::Saved;
use tch::{Device, Kind, TchError, Tensor};

/// Metadata: the same on the forward and on recomputation, where the value
/// may be a placeholder (docs/semantics.md, rule P4).
impl Saved<Tensor> {
    /// The sizes, as [`Tensor::size`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.size(), [2, 3]);
    /// ```
    pub fn size(&self) -> Vec<i64> {
        self.value.0.size()
    }

    /// The size of a one-dimensional tensor, as [`Tensor::size1`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([4], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.size1().unwrap(), 4);
    /// ```
    pub fn size1(&self) -> Result<i64, TchError> {
        self.value.0.size1()
    }

    /// The sizes of a two-dimensional tensor, as [`Tensor::size2`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.size2().unwrap(), (2, 3));
    /// ```
    pub fn size2(&self) -> Result<(i64, i64), TchError> {
        self.value.0.size2()
    }

    /// The sizes of a three-dimensional tensor, as [`Tensor::size3`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([1, 2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.size3().unwrap(), (1, 2, 3));
    /// ```
    pub fn size3(&self) -> Result<(i64, i64, i64), TchError> {
        self.value.0.size3()
    }

    /// The sizes of a four-dimensional tensor, as [`Tensor::size4`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([1, 1, 2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.size4().unwrap(), (1, 1, 2, 3));
    /// ```
    pub fn size4(&self) -> Result<(i64, i64, i64, i64), TchError> {
        self.value.0.size4()
    }

    /// The number of dimensions, as [`Tensor::dim`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.dim(), 2);
    /// ```
    pub fn dim(&self) -> usize {
        self.value.0.dim()
    }

    /// The element type, as [`Tensor::kind`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.kind(), tch::Kind::Float);
    /// ```
    pub fn kind(&self) -> Kind {
        self.value.0.kind()
    }

    /// The device, as [`Tensor::device`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.device(), tch::Device::Cpu);
    /// ```
    pub fn device(&self) -> Device {
        self.value.0.device()
    }

    /// The number of elements, as [`Tensor::numel`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.numel(), 6);
    /// ```
    pub fn numel(&self) -> usize {
        self.value.0.numel()
    }

    /// Whether it requires grad, as [`Tensor::requires_grad`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2], tch::kind::FLOAT_CPU));
    /// assert!(!s.requires_grad());
    /// ```
    pub fn requires_grad(&self) -> bool {
        self.value.0.requires_grad()
    }

    /// The strides, as [`Tensor::stride`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.stride(), [3, 1]);
    /// ```
    pub fn stride(&self) -> Vec<i64> {
        self.value.0.stride()
    }

    /// Whether it is contiguous, as [`Tensor::is_contiguous`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 3], tch::kind::FLOAT_CPU));
    /// assert!(s.is_contiguous());
    /// ```
    pub fn is_contiguous(&self) -> bool {
        self.value.0.is_contiguous()
    }
}

/// Views: libtorch returns each as a view of the same storage, for every
/// argument, so a view is as safe as the value (a placeholder's view is a
/// placeholder) and asking for a view keeps the whole output (rule K6).
/// Anything that may copy (`reshape`, `contiguous`, `to_kind`, indexing
/// by a tensor) reads the data, and so needs the value marked first.
impl Saved<Tensor> {
    /// Another handle to the same tensor, as [`Tensor::shallow_clone`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2], tch::kind::FLOAT_CPU));
    /// let t = s.shallow_clone();
    /// assert_eq!(t.size(), s.size());
    /// ```
    pub fn shallow_clone(&self) -> Saved<Tensor> {
        Saved::new(self.value.0.shallow_clone())
    }

    /// A view with other sizes, as [`Tensor::view`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.view(&[3, 2]).size(), [3, 2]);
    /// ```
    pub fn view(&self, size: &[i64]) -> Saved<Tensor> {
        Saved::new(self.value.0.view(size))
    }

    /// A slice of one dimension, as [`Tensor::narrow`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([4, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.narrow(0, 1, 2).size(), [2, 3]);
    /// ```
    pub fn narrow(&self, dim: i64, start: i64, length: i64) -> Saved<Tensor> {
        Saved::new(self.value.0.narrow(dim, start, length))
    }

    /// One index of one dimension, as [`Tensor::select`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([4, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.select(0, 1).size(), [3]);
    /// ```
    pub fn select(&self, dim: i64, index: i64) -> Saved<Tensor> {
        Saved::new(self.value.0.select(dim, index))
    }

    /// Two dimensions swapped, as [`Tensor::transpose`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([4, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.transpose(0, 1).size(), [3, 4]);
    /// ```
    pub fn transpose(&self, dim0: i64, dim1: i64) -> Saved<Tensor> {
        Saved::new(self.value.0.transpose(dim0, dim1))
    }

    /// The dimensions reordered, as [`Tensor::permute`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([1, 2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.permute(&[2, 0, 1]).size(), [3, 1, 2]);
    /// ```
    pub fn permute(&self, dims: &[i64]) -> Saved<Tensor> {
        Saved::new(self.value.0.permute(dims))
    }

    /// A dimension of size one inserted, as [`Tensor::unsqueeze`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.unsqueeze(0).size(), [1, 2]);
    /// ```
    pub fn unsqueeze(&self, dim: i64) -> Saved<Tensor> {
        Saved::new(self.value.0.unsqueeze(dim))
    }

    /// A dimension of size one removed, as [`Tensor::squeeze_dim`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([1, 2], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.squeeze_dim(0).size(), [2]);
    /// ```
    pub fn squeeze_dim(&self, dim: i64) -> Saved<Tensor> {
        Saved::new(self.value.0.squeeze_dim(dim))
    }

    /// Broadcast to `size` without copying, as [`Tensor::expand`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([1, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.expand(&[2, 3], false).size(), [2, 3]);
    /// ```
    pub fn expand(&self, size: &[i64], implicit: bool) -> Saved<Tensor> {
        Saved::new(self.value.0.expand(size, implicit))
    }

    /// Detached from the graph, the same storage, as [`Tensor::detach`].
    ///
    /// ```
    /// let x = tch::Tensor::zeros([2], tch::kind::FLOAT_CPU).set_requires_grad(true);
    /// assert!(!remat_runtime::Saved::new(x).detach().requires_grad());
    /// ```
    pub fn detach(&self) -> Saved<Tensor> {
        Saved::new(self.value.0.detach())
    }

    /// `chunks` views along `dim`, as [`Tensor::chunk`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 6], tch::kind::FLOAT_CPU));
    /// let [q, k, v]: [_; 3] = s.chunk(3, 1).try_into().ok().unwrap();
    /// assert_eq!(q.size(), [2, 2]);
    /// ```
    pub fn chunk(&self, chunks: i64, dim: i64) -> Vec<Saved<Tensor>> {
        self.value
            .0
            .chunk(chunks, dim)
            .into_iter()
            .map(Saved::new)
            .collect()
    }

    /// Views of `split_size` along `dim`, as [`Tensor::split`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 6], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.split(2, 1).len(), 3);
    /// ```
    pub fn split(&self, split_size: i64, dim: i64) -> Vec<Saved<Tensor>> {
        self.value
            .0
            .split(split_size, dim)
            .into_iter()
            .map(Saved::new)
            .collect()
    }

    /// The views of each index along `dim`, as [`Tensor::unbind`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([3, 2], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.unbind(0).len(), 3);
    /// ```
    pub fn unbind(&self, dim: i64) -> Vec<Saved<Tensor>> {
        self.value
            .0
            .unbind(dim)
            .into_iter()
            .map(Saved::new)
            .collect()
    }
}

/// Shows the metadata only: printing never reads the data. A tensor's is
/// `Saved { size, kind, device }`; a value holding several (a derived
/// output, a tuple) shows each tensor's in a list.
impl<T: crate::io::RegionInput> std::fmt::Debug for Saved<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        struct Meta<'a>(&'a Tensor);
        impl std::fmt::Debug for Meta<'_> {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct("Saved")
                    .field("size", &self.0.size())
                    .field("kind", &self.0.kind())
                    .field("device", &self.0.device())
                    .finish()
            }
        }
        let mut tensors = Vec::new();
        self.value.0.visit(&mut |t| tensors.push(t.shallow_clone()));
        match tensors.as_slice() {
            [one] => Meta(one).fmt(f),
            many => f.debug_list().entries(many.iter().map(Meta)).finish(),
        }
    }
}
