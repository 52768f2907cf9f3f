//! Lowering macro invocations, which syn leaves as tokens: `remat!` as its
//! regions, `vec!` as an array, a macro defined in the body by scanning its
//! definition and input for local names (each a read), any other by its
//! arguments where they parse as expressions, else by scanning too. A
//! `remat!` inside another macro is an error, since the check cannot see
//! what it binds.

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::{Expr, Lit, LitStr, Macro, Token};

use super::Lower;
use crate::ast::{self, Invocation};
use crate::check::ir::{Operand, Proj, ReadKind};
use crate::check::report;
use crate::check::vocab::is_std_macro;

impl Lower {
    /// A macro invocation: `remat!` is lowered as regions; `vec!` as an
    /// array; a macro defined in the body reads every tracked local its
    /// definition names; any other is read as comma-separated expressions
    /// (format strings' captures and named arguments included) when it
    /// parses that way, else its tokens are scanned for local names.
    pub(super) fn macro_value(&mut self, mac: &Macro, statement: bool) -> Operand {
        let name = mac
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_default();
        if ast::is_remat(mac) {
            let parsed = self.preparsed.get(mac);
            return match &parsed.invocation {
                Invocation::Expr(region) => self.region(region),
                Invocation::Stmts(stmts) => {
                    self.remat_stmts(stmts, false);
                    Operand::Other
                }
            };
        }
        let at = mac.to_token_stream();
        if let Some(definition) = self.macros.get(&name).cloned() {
            if contains_remat(&definition) {
                self.hidden_remat(&at, &name);
            } else {
                self.scan_tokens(definition);
            }
            self.scan_tokens(mac.tokens.clone());
            if statement {
                self.opaque_macro = true;
            }
            return Operand::Other;
        }
        // A `remat!` inside another macro's input: only the standard macros
        // are known to evaluate their arguments as written.
        if !is_std_macro(&name) && contains_remat(&mac.tokens) {
            self.hidden_remat(&at, &name);
            if statement {
                self.opaque_macro = true;
            }
            return Operand::Other;
        }
        // A macro statement may bind names (hygiene permitting) the check
        // does not see.
        if statement && !is_std_macro(&name) {
            self.opaque_macro = true;
        }
        let parsed = mac.parse_body_with(Punctuated::<Expr, Token![,]>::parse_terminated);
        match parsed {
            Ok(args) if name == "vec" => Operand::Parts(
                args.iter()
                    .map(|e| (Proj::Index(None), self.value(e)))
                    .collect(),
            ),
            Ok(args) => {
                for arg in &args {
                    match arg {
                        Expr::Lit(syn::ExprLit {
                            lit: Lit::Str(lit), ..
                        }) => self.format_captures(lit),
                        // `format!("{t}", t = a)`: a named argument.
                        Expr::Assign(assign) => self.read_expr(&assign.right),
                        _ => self.read_expr(arg),
                    }
                }
                Operand::Other
            }
            Err(_) => {
                if contains_remat(&mac.tokens) {
                    self.hidden_remat(&at, &name);
                } else {
                    self.scan_tokens(mac.tokens.clone());
                }
                if statement {
                    self.opaque_macro = true;
                }
                Operand::Other
            }
        }
    }

    /// Reports a `remat!` inside the macro `name`, unless the statement is
    /// `#[remat(unchecked)]`, which is the way to accept it.
    fn hidden_remat(&mut self, at: &TokenStream, name: &str) {
        if self.unchecked == 0 {
            self.error(report::hidden_remat(at, name));
        }
    }

    /// `println!("{attn}")` reads `attn`.
    fn format_captures(&mut self, lit: &LitStr) {
        let value = lit.value();
        let mut chars = value.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '{' {
                continue;
            }
            if chars.peek() == Some(&'{') {
                chars.next();
                continue;
            }
            let mut name = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_alphanumeric() || c == '_' {
                    name.push(c);
                    chars.next();
                } else {
                    break;
                }
            }
            self.read_name(&name, lit.to_token_stream());
        }
    }

    /// Tokens the check cannot parse: every free identifier naming a local
    /// is a read. Iterative, whatever the nesting.
    pub(super) fn scan_tokens(&mut self, tokens: TokenStream) {
        let mut stack: Vec<Vec<TokenTree>> = vec![tokens.into_iter().collect()];
        while let Some(tokens) = stack.pop() {
            for (i, token) in tokens.iter().enumerate() {
                match token {
                    TokenTree::Group(group) => stack.push(group.stream().into_iter().collect()),
                    TokenTree::Ident(ident) => {
                        let punct = |t: Option<&TokenTree>, chars: &[char]| matches!(t, Some(TokenTree::Punct(p)) if chars.contains(&p.as_char()));
                        // `.name` is a field or a method; `name:` and
                        // `name!` a path, a field or a macro.
                        let member = i > 0 && punct(tokens.get(i - 1), &['.']);
                        let path = punct(tokens.get(i + 1), &[':', '!']);
                        if !member && !path {
                            self.read_name(&ident.to_string(), ident.to_token_stream());
                        }
                    }
                    TokenTree::Literal(lit) => {
                        if let Ok(lit) = syn::parse2::<LitStr>(lit.to_token_stream()) {
                            self.format_captures(&lit);
                        }
                    }
                    TokenTree::Punct(_) => {}
                }
            }
        }
    }

    fn read_name(&mut self, name: &str, at: TokenStream) {
        if let Some(id) = self.scopes.resolve(name) {
            self.read(
                Operand::Place(id, Vec::new()),
                at,
                Some(name.to_owned()),
                ReadKind::Bare,
            );
        }
    }
}

/// Whether tokens invoke `remat!` (at any depth).
fn contains_remat(tokens: &TokenStream) -> bool {
    let mut stack: Vec<Vec<TokenTree>> = vec![tokens.clone().into_iter().collect()];
    while let Some(tokens) = stack.pop() {
        for (i, token) in tokens.iter().enumerate() {
            match token {
                TokenTree::Group(g) => stack.push(g.stream().into_iter().collect()),
                TokenTree::Ident(ident) if ident == "remat" => {
                    if matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == '!')
                    {
                        return true;
                    }
                }
                _ => {}
            }
        }
    }
    false
}
