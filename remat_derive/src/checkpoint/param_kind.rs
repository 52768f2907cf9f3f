//! How a `#[checkpoint]` parameter reaches the closure, decided by its
//! written type: tensors (`Tensor`, `&Tensor`, `Option<&Tensor>`,
//! `&[Tensor]`, `&Vec<Tensor>`) are the checkpoint's inputs, which replay
//! gets back as they were; anything else is captured through `Capture`.
//! The macro sees types as written, not resolved, so a tensor behind an
//! alias is captured, not an input.

use syn::Type;

/// How a parameter reaches the closure.
pub(crate) enum Kind {
    /// `Tensor`: an input, passed and received owned.
    Tensor,
    /// `&Tensor`: an input, received owned, rebound as a reference.
    TensorRef,
    /// `Option<&Tensor>`: received as `Option<Tensor>`.
    TensorOption,
    /// `&[Tensor]`: received as `Vec<Tensor>`.
    TensorSlice,
    /// `&Vec<Tensor>`: passed as a slice, received as `Vec<Tensor>`.
    TensorVec,
    /// Anything else, captured; `by_ref` for `&T`.
    Capture { by_ref: bool },
    /// `&mut T` or `Option<&mut Tensor>`: refused, since replay runs the
    /// body again during backward, after that borrow has ended.
    MutRef,
}

/// The type inside parentheses and invisible groups, which change nothing.
fn strip_ty(ty: &Type) -> &Type {
    match ty {
        Type::Paren(t) => strip_ty(&t.elem),
        Type::Group(t) => strip_ty(&t.elem),
        _ => ty,
    }
}

/// The last path segment, if the type is `...::NAME<ARGS>`.
fn last_segment(ty: &Type) -> Option<&syn::PathSegment> {
    match strip_ty(ty) {
        Type::Path(path) if path.qself.is_none() => path.path.segments.last(),
        _ => None,
    }
}

/// Whether the type is written `Tensor` (any path ending so).
fn is_tensor(ty: &Type) -> bool {
    last_segment(ty).is_some_and(|s| s.ident == "Tensor" && s.arguments.is_none())
}

/// The single type argument of `NAME<T>`.
fn single_arg<'a>(ty: &'a Type, name: &str) -> Option<&'a Type> {
    let segment = last_segment(ty)?;
    if segment.ident != name {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &segment.arguments else {
        return None;
    };
    match args.args.iter().collect::<Vec<_>>().as_slice() {
        [syn::GenericArgument::Type(ty)] => Some(ty),
        _ => None,
    }
}

/// Classifies a parameter by its written type (the macro cannot resolve
/// aliases: a tensor behind another name is captured, not an input).
pub(crate) fn classify(ty: &Type) -> Kind {
    if is_tensor(ty) {
        return Kind::Tensor;
    }
    if let Some(inner) = single_arg(ty, "Option") {
        if let Type::Reference(r) = strip_ty(inner) {
            if is_tensor(&r.elem) {
                if r.mutability.is_some() {
                    return Kind::MutRef;
                }
                return Kind::TensorOption;
            }
        }
        return Kind::Capture { by_ref: false };
    }
    if let Type::Reference(r) = strip_ty(ty) {
        if r.mutability.is_some() {
            return Kind::MutRef;
        }
        let elem = strip_ty(&r.elem);
        if is_tensor(elem) {
            return Kind::TensorRef;
        }
        if let Type::Slice(slice) = elem {
            if is_tensor(&slice.elem) {
                return Kind::TensorSlice;
            }
        }
        if single_arg(elem, "Vec").is_some_and(is_tensor) {
            return Kind::TensorVec;
        }
        return Kind::Capture { by_ref: true };
    }
    Kind::Capture { by_ref: false }
}
