//! Fuzzing the entry points with arbitrary token streams: they must never
//! panic, and always return tokens (an expansion or `compile_error!`s).

use std::str::FromStr;

use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use proptest::prelude::*;
use quote::quote;

const IDENTS: &[&str] = &[
    "save",
    "recompute",
    "needs",
    "scope",
    "let",
    "mut",
    "self",
    "Self",
    "fn",
    "if",
    "else",
    "for",
    "in",
    "loop",
    "while",
    "return",
    "match",
    "move",
    "ref",
    "as",
    "remat",
    "x",
    "a",
    "attn",
    "f",
    "is_recomputing",
    "view",
    "size",
    "Tensor",
    "Option",
    "Vec",
    "name",
    "state_hooks",
    "determinism",
    "Metadata",
    "struct",
    "enum",
    "union",
    "impl",
    "async",
    "const",
    "unsafe",
    "pub",
    "where",
    "true",
];

const PUNCTS: &[char] = &[
    ';', ':', ',', '.', '&', '=', '!', '#', '?', '<', '>', '+', '-', '*', '/', '|', '@', '\'', '$',
    '%', '^', '~',
];

const STRINGS: &[&str] = &["", "attention", "{attn}", "layers.0", "{{}}", "{"];

#[derive(Debug, Clone)]
enum Tok {
    Ident(&'static str),
    Punct(char, bool),
    Int(u8),
    Str(&'static str),
    Group(u8, Vec<Tok>),
}

fn tok() -> impl Strategy<Value = Tok> {
    let leaf = prop_oneof![
        4 => prop::sample::select(IDENTS).prop_map(Tok::Ident),
        3 => (prop::sample::select(PUNCTS), any::<bool>()).prop_map(|(c, joint)| Tok::Punct(c, joint)),
        1 => any::<u8>().prop_map(Tok::Int),
        1 => prop::sample::select(STRINGS).prop_map(Tok::Str),
    ];
    leaf.prop_recursive(4, 96, 10, |inner| {
        (0u8..4, prop::collection::vec(inner, 0..10)).prop_map(|(d, toks)| Tok::Group(d, toks))
    })
}

fn tokens() -> impl Strategy<Value = TokenStream> {
    prop::collection::vec(tok(), 0..40).prop_map(|toks| stream(&toks))
}

fn stream(toks: &[Tok]) -> TokenStream {
    toks.iter()
        .map(|tok| match tok {
            Tok::Ident(name) => TokenTree::Ident(Ident::new(name, Span::call_site())),
            Tok::Punct(c, joint) => {
                let spacing = if *joint {
                    Spacing::Joint
                } else {
                    Spacing::Alone
                };
                TokenTree::Punct(Punct::new(*c, spacing))
            }
            Tok::Int(n) => TokenTree::Literal(Literal::u8_unsuffixed(*n)),
            Tok::Str(s) => TokenTree::Literal(Literal::string(s)),
            Tok::Group(d, inner) => {
                let delimiter = match d {
                    0 => Delimiter::Parenthesis,
                    1 => Delimiter::Brace,
                    2 => Delimiter::Bracket,
                    _ => Delimiter::None,
                };
                TokenTree::Group(Group::new(delimiter, stream(inner)))
            }
        })
        .collect()
}

/// Statement-shaped input: well-formed and malformed pieces of the DSL and
/// of Rust, nested in blocks, so that the checker is reached too.
#[derive(Debug, Clone)]
enum Piece {
    Line(&'static str),
    Block(&'static str, Vec<Piece>),
}

const LINES: &[&str] = &[
    "let a = save attention: self.attention.forward(&h);",
    "let (a, b) = save pair: split(&x);",
    "let m = recompute mlp: self.mlp.forward(&a);",
    "save \"x.y\": f(a, &b, 3);",
    "recompute [format!(\"l{}\", i)]: g(&a);",
    "needs a;",
    "needs a, &b, m;",
    "let v = a.view([-1]).tr();",
    "let c = a + 1;",
    "let s = a.size();",
    "println!(\"{a} {}\", b);",
    "#[remat(unchecked)]",
    "#[remat(oops)]",
    "let a = x;",
    "a = b;",
    "return a;",
    "let y = remat!(save z: f(&a));",
    "remat!(recompute q: self.f(a))",
    "save self.forward(x);",
    "save attention: ;",
    "let x = save 3: f();",
    "needs;",
    "scope;",
    "a",
    "(a, b)",
    "let f = |a| a + 1;",
    "match a { Some(a) => a, None => b }",
];

const OPENERS: &[&str] = &[
    "scope s",
    "scope \"t\"",
    "if !is_recomputing()",
    "if is_recomputing()",
    "if c",
    "for i in 0..n",
    "loop",
    "remat!",
    "",
    "while let Some(a) = it.next()",
];

fn piece() -> impl Strategy<Value = Piece> {
    let line = prop::sample::select(LINES).prop_map(Piece::Line);
    line.prop_recursive(3, 48, 6, |inner| {
        (
            prop::sample::select(OPENERS),
            prop::collection::vec(inner, 0..6),
        )
            .prop_map(|(open, body)| Piece::Block(open, body))
    })
}

fn render(pieces: &[Piece], out: &mut String) {
    for piece in pieces {
        match piece {
            Piece::Line(line) => out.push_str(line),
            Piece::Block(open, body) => {
                out.push_str(open);
                out.push_str(" { ");
                render(body, out);
                out.push_str(" }");
            }
        }
        out.push(' ');
    }
}

fn body() -> impl Strategy<Value = TokenStream> {
    prop::collection::vec(piece(), 0..10).prop_map(|pieces| {
        let mut text = String::new();
        render(&pieces, &mut text);
        TokenStream::from_str(&text).expect("pieces are balanced")
    })
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn remat_never_panics_on_random_tokens(input in tokens()) {
        let _ = crate::expand::remat(input);
    }

    #[test]
    fn checkpoint_never_panics_on_random_tokens(args in tokens(), item in tokens()) {
        let _ = crate::checkpoint::checkpoint(args.clone(), item);
        let _ = crate::checkpoint::checkpoint(args, quote!(fn f(&self, x: &Tensor) -> Tensor { x + 1 }));
    }

    #[test]
    fn checkpoint_never_panics_on_random_bodies(body in tokens()) {
        let _ = crate::checkpoint::checkpoint(quote!(), quote!(fn f(&self, x: &Tensor) -> Tensor { #body }));
        let _ = crate::checkpoint::checkpoint(quote!(), quote!(fn f(x: Tensor) { remat! { #body } }));
    }

    #[test]
    fn derive_never_panics_on_random_tokens(input in tokens()) {
        let _ = crate::capture::derive(input.clone());
        let _ = crate::capture::derive(quote!(struct S { #input }));
    }

    /// On statement-shaped input, the output is also well-formed: it parses
    /// as statements (a block) or as an item (a checkpoint).
    #[test]
    fn statement_shaped_input_expands_to_well_formed_code(body in body()) {
        let out = crate::expand::remat(body.clone());
        prop_assert!(
            syn::parse::Parser::parse2(syn::Block::parse_within, out.clone()).is_ok(),
            "remat! output does not parse: {}", out
        );
        // DSL statements outside `remat!` are not Rust: only no panic here.
        let _ = crate::checkpoint::checkpoint(quote!(), quote!(fn f(&self, x: &Tensor) -> Tensor { #body }));
        let item = quote!(fn f(&self, x: &Tensor, n: usize) -> Tensor { remat! { #body } x });
        let out = crate::checkpoint::checkpoint(quote!(), item);
        prop_assert!(syn::parse2::<syn::ItemFn>(out.clone()).is_ok(), "checkpoint output does not parse: {}", out);
    }
}
