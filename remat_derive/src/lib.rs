//! Procedural macros of remat: `remat!` blocks, `#[checkpoint]` functions,
//! `#[derive(Capture)]`, and the compile-time check that bare code does not
//! read a skipped `save` region's output.
//!
//! Use them through the `remat` crate, which re-exports them; the expansion
//! names the runtime by absolute paths (`::remat::...`).
//!
//! The crate parses (`parse`) into a small model (`ast`), checks it (`check`),
//! then generates code (`expand`, `checkpoint`, `capture`), as thiserror's
//! implementation parses, validates, then expands. Before any of it,
//! `depth_limit` refuses input nested deeper than a proc macro's stack
//! allows; in a `#[checkpoint]` body, `preparsed` parses each `remat!` once,
//! so that the check and the expansion read the same statements. Errors are
//! `syn::Error`s with precise spans, combined and emitted as
//! `compile_error!`; the macros never panic.

mod ast;
mod capture;
mod check;
mod checkpoint;
mod checkpoint_args;
mod default_name;
mod depth_limit;
mod errors;
mod expand;
mod param_kind;
mod parse;
mod preparsed;
mod remat_guard;
mod rename_self;
mod unchecked_attr;

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
/// the region's inputs. Bare code that reads a `save` output must be
/// preceded by `needs x;`, or the block does not compile.
#[proc_macro]
pub fn remat(input: TokenStream) -> TokenStream {
    expand::remat(input.into()).into()
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
/// parameters are captured through `Capture`. `remat!` blocks in the body are
/// expanded here, and the check covers the whole body.
#[proc_macro_attribute]
pub fn checkpoint(args: TokenStream, item: TokenStream) -> TokenStream {
    checkpoint::checkpoint(args.into(), item.into()).into()
}

/// Implements `remat::Capture` by capturing each field.
#[proc_macro_derive(Capture)]
pub fn derive_capture(input: TokenStream) -> TokenStream {
    capture::derive(input.into()).into()
}
