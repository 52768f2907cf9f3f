//! `#[checkpoint]`: a function whose body becomes a checkpoint's closure,
//! so that its activations are dropped after the forward and rebuilt by
//! replaying the body during backward.
//!
//! The passes, in order: refuse input nested too deep (`depth_limit`),
//! parse the options (`args`) and the function into the model (`ast`),
//! check it (`valid`), generate (`expand`, with `params` for the
//! parameters). Errors are collected, never thrown: malformed options are
//! reported and the defaults used, so the function's own errors still show.

mod args;
mod ast;
mod expand;
mod nameable;
mod param_kind;
mod params;
mod rename_self;
mod returned;
mod valid;

use proc_macro2::TokenStream;
use quote::quote;

use crate::checkpoint::args::Args;
use crate::checkpoint::ast::Checkpoint;
use crate::errors::{parse_to_end, push_error};

/// Entry point of `#[checkpoint]`.
pub(crate) fn checkpoint(args: TokenStream, item: TokenStream) -> TokenStream {
    if let Some(error) =
        crate::depth_limit::check(&args).or_else(|| crate::depth_limit::check(&item))
    {
        // The function is left as written: rustc parses deep code itself.
        let error = error.to_compile_error();
        return quote!(#error #item);
    }
    let mut errors = None;
    let args = parse_to_end(<Args as syn::parse::Parse>::parse, args).unwrap_or_else(|error| {
        push_error(&mut errors, error);
        Args::default()
    });
    let func = match ast::parse_fn(item.clone()) {
        Ok(func) => func,
        Err(error) => {
            // Not a function: nothing to expand, the item stays as written.
            push_error(&mut errors, error);
            let errors = errors.map(|e| e.to_compile_error());
            return quote!(#errors #item);
        }
    };
    let checkpoint = Checkpoint::new(args, func);
    let verdict = valid::check(&checkpoint);
    if let Some(more) = verdict.errors {
        push_error(&mut errors, more);
    }
    let errors = errors.map(|e| e.to_compile_error());
    expand::expand(&checkpoint, verdict.refused, errors)
}
