//! Save outputs as bare code holds them: [`Saved`], a value whose data
//! cannot be read until it is marked, so that rustc's type checker, not an
//! analysis of the source, refuses bare code that would read a skipped
//! region's output during recomputation (docs/dsl.md, section Y).
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
/// Each takes the arguments `Tensor`'s method of the same name takes
/// (`view([-1])`, `view((b, -1))`, `permute([1, 0])`). Anything that may
/// copy (`reshape`, `flatten`, `contiguous`, `to_kind`, indexing by a
/// tensor) reads the data, and so needs the value marked first.
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

    /// A view with other sizes, as [`Tensor::view`]: a view always (libtorch
    /// refuses sizes the strides do not allow, where `reshape` would copy).
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.view([3, 2]).size(), [3, 2]);
    /// assert_eq!(s.view([-1]).size(), [6]);
    /// assert_eq!(s.view((3, -1)).size(), [3, 2]);
    /// ```
    pub fn view(&self, size: impl SizeList) -> Saved<Tensor> {
        Saved::new(self.value.0.view(&*size.sizes()))
    }

    /// A view with `other`'s sizes, as [`Tensor::view_as`]. `other` is read
    /// for its metadata only; a save output's is [`Saved::meta`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 3], tch::kind::FLOAT_CPU));
    /// let like = tch::Tensor::zeros([6], tch::kind::FLOAT_CPU);
    /// assert_eq!(s.view_as(&like).size(), [6]);
    /// ```
    pub fn view_as(&self, other: &Tensor) -> Saved<Tensor> {
        Saved::new(self.value.0.view_as(other))
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

    /// Two dimensions swapped, as [`Tensor::swapaxes`] (numpy's name).
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([4, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.swapaxes(0, 1).size(), [3, 4]);
    /// ```
    pub fn swapaxes(&self, axis0: i64, axis1: i64) -> Saved<Tensor> {
        Saved::new(self.value.0.swapaxes(axis0, axis1))
    }

    /// A matrix (or vector) transposed, as [`Tensor::tr`] (torch's `t()`).
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([4, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.tr().size(), [3, 4]);
    /// ```
    pub fn tr(&self) -> Saved<Tensor> {
        Saved::new(self.value.0.tr())
    }

    /// The last two dimensions swapped, as [`Tensor::mt`] (torch's `mT`).
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 4, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.mt().size(), [2, 3, 4]);
    /// ```
    pub fn mt(&self) -> Saved<Tensor> {
        Saved::new(self.value.0.mt())
    }

    /// The dimensions reordered, as [`Tensor::permute`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([1, 2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.permute([2, 0, 1]).size(), [3, 1, 2]);
    /// ```
    pub fn permute(&self, dims: impl torch_sys::IntList) -> Saved<Tensor> {
        Saved::new(self.value.0.permute(dims))
    }

    /// Dimensions moved to other places, as [`Tensor::movedim`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([1, 2, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.movedim([0], [2]).size(), [2, 3, 1]);
    /// ```
    pub fn movedim(
        &self,
        source: impl torch_sys::IntList,
        destination: impl torch_sys::IntList,
    ) -> Saved<Tensor> {
        Saved::new(self.value.0.movedim(source, destination))
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

    /// Every dimension of size one removed, as [`Tensor::squeeze`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([1, 2, 1], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.squeeze().size(), [2]);
    /// ```
    pub fn squeeze(&self) -> Saved<Tensor> {
        Saved::new(self.value.0.squeeze())
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

    /// Dimensions of size one removed, as [`Tensor::squeeze_dims`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([1, 2, 1], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.squeeze_dims([0, 2]).size(), [2]);
    /// ```
    pub fn squeeze_dims(&self, dims: impl torch_sys::IntList) -> Saved<Tensor> {
        Saved::new(self.value.0.squeeze_dims(dims))
    }

    /// One dimension split into `sizes`, as [`Tensor::unflatten`]: a view
    /// for every input (splitting one dimension needs no copy, whatever
    /// its stride).
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2, 12], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.unflatten(1, [3, 4]).size(), [2, 3, 4]);
    /// ```
    pub fn unflatten(&self, dim: i64, sizes: impl torch_sys::IntList) -> Saved<Tensor> {
        Saved::new(self.value.0.unflatten(dim, sizes))
    }

    /// Broadcast to `size` without copying, as [`Tensor::expand`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([1, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.expand([2, 3], false).size(), [2, 3]);
    /// ```
    pub fn expand(&self, size: impl torch_sys::IntList, implicit: bool) -> Saved<Tensor> {
        Saved::new(self.value.0.expand(size, implicit))
    }

    /// Broadcast to `other`'s sizes without copying, as
    /// [`Tensor::expand_as`]. `other` is read for its metadata only; a
    /// save output's is [`Saved::meta`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([1, 3], tch::kind::FLOAT_CPU));
    /// let like = tch::Tensor::zeros([2, 3], tch::kind::FLOAT_CPU);
    /// assert_eq!(s.expand_as(&like).size(), [2, 3]);
    /// ```
    pub fn expand_as(&self, other: &Tensor) -> Saved<Tensor> {
        Saved::new(self.value.0.expand_as(other))
    }

    /// A diagonal, as [`Tensor::diagonal`]: a view with the diagonal's
    /// stride.
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([3, 3], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.diagonal(0, 0, 1).size(), [3]);
    /// ```
    pub fn diagonal(&self, offset: i64, dim1: i64, dim2: i64) -> Saved<Tensor> {
        Saved::new(self.value.0.diagonal(offset, dim1, dim2))
    }

    /// Sliding windows of one dimension, as [`Tensor::unfold`]: a view
    /// whose windows overlap in the storage.
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([6], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.unfold(0, 2, 2).size(), [3, 2]);
    /// ```
    pub fn unfold(&self, dimension: i64, size: i64, step: i64) -> Saved<Tensor> {
        Saved::new(self.value.0.unfold(dimension, size, step))
    }

    /// The same bytes read as another element type of the same size, as
    /// [`Tensor::view_dtype`].
    ///
    /// ```
    /// let s = remat_runtime::Saved::new(tch::Tensor::zeros([2], tch::kind::FLOAT_CPU));
    /// assert_eq!(s.view_dtype(tch::Kind::Int).kind(), tch::Kind::Int);
    /// ```
    pub fn view_dtype(&self, dtype: Kind) -> Saved<Tensor> {
        Saved::new(self.value.0.view_dtype(dtype))
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

    /// A tensor with this one's metadata (sizes, strides, element type,
    /// device) and no data, for what reads metadata only and takes a
    /// `&Tensor`: `x.view_as(&a.meta())`, `x.expand_as(&a.meta())`, a
    /// helper of yours that looks at shapes. Reading its data, even for
    /// zero elements, fails with a message saying so (it is a placeholder,
    /// docs/semantics.md rule P4); it holds no memory and no graph.
    ///
    /// ```
    /// use remat_runtime::Saved;
    /// let a = Saved::new(tch::Tensor::ones([2, 3], tch::kind::FLOAT_CPU));
    /// let x = tch::Tensor::zeros([6], tch::kind::FLOAT_CPU);
    /// assert_eq!(x.view_as(&a.meta()).size(), [2, 3]);
    /// assert!(a.meta().f_sum(tch::Kind::Float).is_err()); // no data
    /// ```
    pub fn meta(&self) -> Tensor {
        let spec = crate::bridge::TensorMeta::of(&self.value.0)
            .ok()
            .and_then(|m| crate::bridge::PlaceholderSpec::from_meta(&m))
            .unwrap_or_else(|| {
                crate::bridge::PlaceholderSpec::contiguous(
                    &self.value.0.size(),
                    self.value.0.kind(),
                    self.value.0.device(),
                )
            });
        crate::bridge::placeholder(
            &spec,
            "`Saved::meta()` is a save output's metadata only: it has no data. Read the data \
             of the save output itself, marked with `remat::needs(..)`",
        )
        .unwrap_or_else(|e| panic!("cannot make a metadata-only tensor: {e}"))
    }
}

/// The sizes [`Saved::view`] takes: what `Tensor::view` takes (`tch::Shape`:
/// an array, a slice, a number, a tuple of numbers) and a reference to an
/// array (`&[3, 2]`), which remat's `view` took before it took tch's forms.
///
/// ```
/// use remat_runtime::SizeList;
/// assert_eq!(&*(2, -1).sizes(), [2, -1]);
/// assert_eq!(&*(&[3, 2]).sizes(), [3, 2]);
/// ```
pub trait SizeList {
    /// The sizes, in order.
    fn sizes(&self) -> Box<[i64]>;
}

impl<const N: usize> SizeList for [i64; N] {
    fn sizes(&self) -> Box<[i64]> {
        Box::new(*self)
    }
}

impl<const N: usize> SizeList for &[i64; N] {
    fn sizes(&self) -> Box<[i64]> {
        Box::new(**self)
    }
}

impl SizeList for &[i64] {
    fn sizes(&self) -> Box<[i64]> {
        (*self).into()
    }
}

impl SizeList for Vec<i64> {
    fn sizes(&self) -> Box<[i64]> {
        self.as_slice().into()
    }
}

impl SizeList for &Vec<i64> {
    fn sizes(&self) -> Box<[i64]> {
        self.as_slice().into()
    }
}

impl SizeList for () {
    fn sizes(&self) -> Box<[i64]> {
        Box::new([])
    }
}

macro_rules! number_sizes {
    ($($t:ty),*) => {$(
        impl SizeList for $t {
            fn sizes(&self) -> Box<[i64]> {
                Box::new([*self as i64])
            }
        }
    )*};
}
number_sizes!(i64, i32, usize);

macro_rules! tuple_sizes {
    ($($name:ident)+) => {
        impl SizeList for ($(tuple_sizes!(@i64 $name),)+) {
            #[allow(non_snake_case)]
            fn sizes(&self) -> Box<[i64]> {
                let ($($name,)+) = *self;
                Box::new([$($name),+])
            }
        }
    };
    (@i64 $name:ident) => { i64 };
}
tuple_sizes!(A);
tuple_sizes!(A B);
tuple_sizes!(A B C);
tuple_sizes!(A B C D);
tuple_sizes!(A B C D E);
tuple_sizes!(A B C D E F);

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
