//! What bare code may see inside a save output it has not marked: the
//! fields of a derived output (`Saved::fields`, each a `&Saved<..>`), the
//! elements of a `Vec`, the item of an `Option` and the parts of a tuple,
//! each wrapped again, so that metadata and views are reachable and data
//! is not (docs/dsl.md, rules Y5 and Y10).
//!
//! Invariant: every accessor here returns references to `Saved` values
//! (or `Option`s and slices of them), never to the values themselves.

use crate::bridge::{wrap_slice, Saved};

/// A type whose fields a save output shows one by one, each as a
/// `&Saved<..>`: what `#[derive(RegionOutput)]` implements, with a view
/// type of references (`Saved` and the type's name, by default).
///
/// ```
/// use remat_runtime::{Saved, SavedFields};
/// use tch::Tensor;
///
/// struct Pair { a: Tensor, b: Tensor }
/// struct PairView<'a> { a: &'a Saved<Tensor>, b: &'a Saved<Tensor> }
/// impl SavedFields for Pair {
///     type Fields<'a> = PairView<'a>;
///     fn fields(&self) -> PairView<'_> {
///         PairView { a: Saved::from_ref(&self.a), b: Saved::from_ref(&self.b) }
///     }
/// }
/// let p = Saved::new(Pair { a: Tensor::ones([2], tch::kind::FLOAT_CPU), b: Tensor::ones([3], tch::kind::FLOAT_CPU) });
/// assert_eq!(p.fields().b.size(), [3]);
/// ```
pub trait SavedFields {
    /// The fields, each a reference to it wrapped.
    type Fields<'a>
    where
        Self: 'a;
    /// The fields of `self`, wrapped: nothing in it reads a value.
    fn fields(&self) -> Self::Fields<'_>;
}

impl<T: SavedFields> Saved<T> {
    /// The fields of a derived output, each a `&Saved<..>`: their metadata
    /// and views, as a save output gives them, before `needs`.
    ///
    /// ```
    /// use remat_runtime::{Saved, SavedFields};
    /// use tch::Tensor;
    ///
    /// struct One { t: Tensor }
    /// impl SavedFields for One {
    ///     type Fields<'a> = &'a Saved<Tensor>;
    ///     fn fields(&self) -> &Saved<Tensor> {
    ///         Saved::from_ref(&self.t)
    ///     }
    /// }
    /// let one = Saved::new(One { t: Tensor::zeros([2, 8], tch::kind::FLOAT_CPU) });
    /// assert_eq!(one.fields().size(), [2, 8]);
    /// ```
    pub fn fields(&self) -> T::Fields<'_> {
        self.value.0.fields()
    }
}

impl<T> Saved<Vec<T>> {
    /// The elements, each wrapped.
    ///
    /// ```
    /// let v = remat_runtime::Saved::new(vec![tch::Tensor::ones([2], tch::kind::FLOAT_CPU)]);
    /// assert_eq!(v.as_slice()[0].size(), [2]);
    /// ```
    pub fn as_slice(&self) -> &[Saved<T>] {
        wrap_slice(&self.value.0)
    }

    /// How many elements.
    ///
    /// ```
    /// let v = remat_runtime::Saved::new(vec![tch::Tensor::ones([2], tch::kind::FLOAT_CPU)]);
    /// assert_eq!(v.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.value.0.len()
    }

    /// Whether it has no element.
    ///
    /// ```
    /// let v = remat_runtime::Saved::new(Vec::<tch::Tensor>::new());
    /// assert!(v.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.value.0.is_empty()
    }
}

impl<T> Saved<Option<T>> {
    /// The item, wrapped, if present.
    ///
    /// ```
    /// let o = remat_runtime::Saved::new(Some(tch::Tensor::ones([2], tch::kind::FLOAT_CPU)));
    /// assert_eq!(o.as_ref().unwrap().size(), [2]);
    /// ```
    pub fn as_ref(&self) -> Option<&Saved<T>> {
        self.value.0.as_ref().map(Saved::from_ref)
    }
}

macro_rules! tuple_parts {
    ($($name:ident)+) => {
        impl<$($name),+> Saved<($($name,)+)> {
            /// The parts, each wrapped.
            #[allow(non_snake_case)]
            pub fn parts(&self) -> ($(&Saved<$name>,)+) {
                let ($($name,)+) = &self.value.0;
                ($(Saved::from_ref($name),)+)
            }
        }
    };
}
for_each_output_arity!(tuple_parts);
