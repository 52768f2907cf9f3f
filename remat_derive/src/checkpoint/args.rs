//! The options of `#[checkpoint(...)]`, parsed into `Args`.
//!
//! ```text
//! #[checkpoint]
//! #[checkpoint(name = "layers.0")]
//! #[checkpoint(name = [expr], state_hooks = [expr, ...], determinism = Metadata)]
//! #[checkpoint(enabled = self.checkpointing, strict = cfg!(test))]
//! #[checkpoint(early_stop = false)]   // the replay computes the tail too
//! #[checkpoint(preserve_rng_state = false)]  // the replay draws numbers of its own
//! #[checkpoint(backward_inside = true)]  // the body computes gradients itself
//! #[checkpoint(auto)]      // on or off: the active plan decides
//! ```
//!
//! The first malformed option stops the parse: the options are few and
//! each error names the accepted forms.

use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Expr, Ident, LitStr, Token};

use crate::name::Name;

/// The options, as written.
#[derive(Default)]
pub(crate) struct Args {
    pub name: Option<Name>,
    pub state_hooks: Vec<Expr>,
    /// `None`, `Metadata` or `Bitwise`.
    pub determinism: Option<Ident>,
    /// `enabled = EXPR` (a `bool`): off runs the body as a plain call.
    pub enabled: Option<Expr>,
    /// `strict = EXPR` (a `bool`): `Checkpoint::strict_recompute`.
    pub strict: Option<Expr>,
    /// `early_stop = EXPR` (a `bool`): `Checkpoint::early_stop`.
    pub early_stop: Option<Expr>,
    /// `backward_inside = EXPR` (a `bool`): `Checkpoint::backward_inside`.
    pub backward_inside: Option<Expr>,
    /// `preserve_rng_state = EXPR` (a `bool`): `Checkpoint::preserve_rng_state`.
    pub preserve_rng_state: Option<Expr>,
    /// `auto`: `Checkpoint::auto()`, the active plan decides whether the
    /// checkpoint is on.
    pub auto: Option<Ident>,
}

/// Every accepted form, for messages.
const OPTIONS: &str = "expected `name = \"...\"`, `name = [expr]`, \
    `state_hooks = [expr, ...]`, `determinism = None|Metadata|Bitwise`, `enabled = EXPR`, \
    `strict = EXPR`, `early_stop = EXPR`, `backward_inside = EXPR`, \
    `preserve_rng_state = EXPR` or `auto`";

impl Parse for Args {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut args = Args::default();
        let mut seen: Vec<String> = Vec::new();
        while !input.is_empty() {
            let key: Ident = input
                .parse()
                .map_err(|e| syn::Error::new(e.span(), OPTIONS))?;
            let key_name = key.to_string();
            if seen.contains(&key_name) {
                return Err(syn::Error::new(
                    key.span(),
                    format!("`{key_name}` is given twice"),
                ));
            }
            if key_name == "auto" {
                args.auto = Some(parse_auto(input, &key, &seen)?);
            } else {
                if key_name == "enabled" && args.auto.is_some() {
                    return Err(conflict(&key, "auto"));
                }
                if !input.peek(Token![=]) {
                    return Err(input.error(format!("expected `=` after `{key_name}`; {OPTIONS}")));
                }
                input.parse::<Token![=]>()?;
                args.parse_value(input, &key)?;
            }
            seen.push(key_name);
            if input.is_empty() {
                break;
            }
            input.parse::<Token![,]>()?;
        }
        Ok(args)
    }
}

impl Args {
    /// The value of the option `key`, after its `=`.
    fn parse_value(&mut self, input: ParseStream, key: &Ident) -> syn::Result<()> {
        match key.to_string().as_str() {
            "name" => self.name = Some(parse_name(input)?),
            "state_hooks" => self.state_hooks = parse_state_hooks(input)?,
            "enabled" => self.enabled = Some(input.parse()?),
            "strict" => self.strict = Some(input.parse()?),
            "early_stop" => self.early_stop = Some(input.parse()?),
            "backward_inside" => self.backward_inside = Some(input.parse()?),
            "preserve_rng_state" => self.preserve_rng_state = Some(input.parse()?),
            "determinism" => self.determinism = Some(parse_determinism(input)?),
            key_name => {
                return Err(syn::Error::new(
                    key.span(),
                    format!("unknown `#[checkpoint]` option `{key_name}`; {OPTIONS}"),
                ))
            }
        }
        Ok(())
    }

    /// Whether the options' expressions (`name`, `enabled`, `strict`,
    /// `early_stop`, `backward_inside`, `preserve_rng_state`, the state
    /// hooks) name `ident`.
    pub(crate) fn mentions(&self, ident: &Ident) -> bool {
        fn mentions(tokens: TokenStream, ident: &Ident) -> bool {
            tokens.into_iter().any(|tree| match tree {
                proc_macro2::TokenTree::Ident(i) => i == *ident,
                proc_macro2::TokenTree::Group(g) => mentions(g.stream(), ident),
                _ => false,
            })
        }
        let name = match &self.name {
            Some(Name::Dynamic(expr)) => Some(&**expr),
            _ => None,
        };
        name.into_iter()
            .chain(&self.enabled)
            .chain(&self.strict)
            .chain(&self.early_stop)
            .chain(&self.backward_inside)
            .chain(&self.preserve_rng_state)
            .chain(&self.state_hooks)
            .any(|expr| mentions(expr.to_token_stream(), ident))
    }
}

/// `auto`, which takes no value and excludes `enabled`.
fn parse_auto(input: ParseStream, key: &Ident, seen: &[String]) -> syn::Result<Ident> {
    if input.peek(Token![=]) {
        return Err(input.error(
            "`auto` takes no value: `#[checkpoint(auto)]` lets the active plan \
             decide whether the checkpoint is on",
        ));
    }
    if let Some(enabled) = seen.iter().find(|k| *k == "enabled") {
        return Err(conflict(key, enabled));
    }
    Ok(key.clone())
}

/// `auto` with `enabled`: both would decide whether the checkpoint is on.
fn conflict(key: &Ident, other: &str) -> syn::Error {
    syn::Error::new(
        key.span(),
        format!(
            "`auto` and `enabled` both decide whether the checkpoint is on, and `{other}` is \
             given already: keep `auto` (the active plan decides) or `enabled = EXPR`"
        ),
    )
}

/// `"lit"` or `[expr]`.
fn parse_name(input: ParseStream) -> syn::Result<Name> {
    const FORM: &str = "expected `name = \"...\"` or `name = [expr]`";
    if input.peek(syn::token::Bracket) {
        let content;
        syn::bracketed!(content in input);
        let expr: Expr = content.parse()?;
        if !content.is_empty() {
            return Err(content.error(FORM));
        }
        return Ok(Name::Dynamic(Box::new(expr)));
    }
    let lit: LitStr = input.parse().map_err(|e| syn::Error::new(e.span(), FORM))?;
    if lit.value().is_empty() {
        return Err(syn::Error::new(
            lit.span(),
            "a checkpoint name must not be empty",
        ));
    }
    Ok(Name::Static {
        value: lit.value(),
        span: lit.span(),
    })
}

/// `[expr, ...]`.
fn parse_state_hooks(input: ParseStream) -> syn::Result<Vec<Expr>> {
    if !input.peek(syn::token::Bracket) {
        return Err(input.error("expected `state_hooks = [expr, ...]`"));
    }
    let content;
    syn::bracketed!(content in input);
    Ok(Punctuated::<Expr, Token![,]>::parse_terminated(&content)?
        .into_iter()
        .collect())
}

/// `None`, `Metadata` or `Bitwise`, the runtime's `Determinism` variants.
fn parse_determinism(input: ParseStream) -> syn::Result<Ident> {
    let value: Ident = input
        .parse()
        .map_err(|e| syn::Error::new(e.span(), "expected `None`, `Metadata` or `Bitwise`"))?;
    if !matches!(value.to_string().as_str(), "None" | "Metadata" | "Bitwise") {
        return Err(syn::Error::new(
            value.span(),
            "expected `None`, `Metadata` or `Bitwise`",
        ));
    }
    Ok(value)
}
