//! Procedural macros of remat: `remat!` blocks, `#[checkpoint]` functions,
//! `#[derive(Capture)]` and `#[derive(RegionOutput)]`.
//!
//! Use them through the `remat` crate, which re-exports them; the expansion
//! names the runtime by absolute paths (`::remat::...`).
//!
//! The compile-time guarantee that bare code does not read a skipped
//! `save` region's output is not here: the expansion hands bare code such
//! outputs as `remat::Saved`, whose data cannot be read until marked, and
//! rustc's type checker does the rest (docs/dsl.md, section Y).
//!
//! This file holds only the four entry points. Each hands its tokens to
//! its macro's folder, whose `mod.rs` runs that macro's passes in order, in
//! the manner of `thiserror`'s `impl/`: parse into a model (`ast.rs`),
//! check it (`valid.rs`), generate (`expand.rs`, or `expand/`):
//!
//! - `remat_block/`: `remat!`, with its statement parser in `parse/` and
//!   the `needs` rewriting of nested blocks in `nested_needs.rs`;
//! - `checkpoint/`: `#[checkpoint]`, with its options in `args.rs` and
//!   what each parameter becomes in `params.rs`;
//! - `capture/`: `#[derive(Capture)]`, whose model is syn's `DeriveInput`;
//! - `output/`: `#[derive(RegionOutput)]`.
//!
//! What more than one macro uses is at the root: `depth_limit.rs` refuses,
//! before any parsing, input nested deeper than a proc macro's stack
//! allows, and `gone_attr.rs` refuses `#[remat(..)]` (both for `remat!` and
//! `#[checkpoint]`); `name.rs` is a region's, scope's or checkpoint's name;
//! `closure_self.rs` is what `self` is called in a checkpoint's closure;
//! `errors.rs` collects errors. Errors are `syn::Error`s with precise
//! spans, combined and emitted as `compile_error!`; the macros never panic.

#![deny(unsafe_code)]

mod capture;
mod checkpoint;
mod closure_self;
mod depth_limit;
mod errors;
mod gone_attr;
mod name;
mod output;
mod remat_block;

#[cfg(test)]
mod tests;

use proc_macro::TokenStream;

/// Runs calls as regions of the enclosing checkpoint.
///
/// Statement form, whose `let` bindings stay visible after the block:
///
/// ```text
/// remat! {
///     let attn = save attention: self.attention.forward(&h);
///     needs attn;                        // bare code below reads attn
///     let x = x + &attn;
///     let m = recompute mlp: self.mlp.forward(&self.ln2.forward(&x));
///     scope "decoder" { recompute proj: self.proj.forward(&m); }
/// }
/// ```
///
/// Expression form, one region, yielding its output:
/// `remat!(save attention: self.attention.forward(&h))`.
///
/// A region is `save` or `recompute`, an optional name (identifier, string
/// literal, or `[expr]` computed at run time; by default the callee's name),
/// and one call. Its arguments are evaluated first, as bare code, and are
/// the region's inputs. A region that may be skipped on recomputation
/// (`save`, `auto`, `region [..]`) hands bare code its output as
/// `remat::Saved`, which cannot be read until `needs x;` marks it.
#[proc_macro]
pub fn remat(input: TokenStream) -> TokenStream {
    remat_block::remat(input.into()).into()
}

/// Makes a function's body a checkpoint: activations inside are dropped after
/// the forward and rebuilt by replaying the body during backward.
///
/// ```text
/// #[checkpoint]                                 // named after the function
/// #[checkpoint(name = "layers.0")]
/// #[checkpoint(name = [format!("layers.{}", self.index)],
///              state_hooks = [RngHook::new()], determinism = Metadata)]
/// ```
///
/// Tensor parameters (`Tensor`, `&Tensor`, `Option<&Tensor>`, `&[Tensor]`,
/// `&Vec<Tensor>`) are the checkpoint's inputs; `self` and the other
/// parameters are captured through `Capture`. A save output in return
/// position leaves the checkpoint as a tensor.
#[proc_macro_attribute]
pub fn checkpoint(args: TokenStream, item: TokenStream) -> TokenStream {
    checkpoint::checkpoint(args.into(), item.into()).into()
}

/// Implements `remat::Capture` by capturing each field.
#[proc_macro_derive(Capture)]
pub fn derive_capture(input: TokenStream) -> TokenStream {
    capture::derive(input.into()).into()
}

/// Makes a struct or enum whose fields are tensors, `Option<Tensor>`s,
/// `Vec`s, tuples or other such types a region output and a checkpoint
/// output, with a saved form (`Saved` and the type's name, or
/// `#[remat(saved = Name)]`) that bare code holds until `needs`.
///
/// ```text
/// #[derive(RegionOutput)]
/// pub struct Attention { pub out: Tensor, pub lse: Tensor }
///
/// remat! { let a = save attention: attend(&h); }   // a: SavedAttention
/// let rows = a.out.size()[0];                      // metadata: fine
/// let a = needs(a);                                // a: Attention
/// ```
#[proc_macro_derive(RegionOutput, attributes(remat))]
pub fn derive_region_output(input: TokenStream) -> TokenStream {
    output::derive(input.into()).into()
}
