//! Fuzzing the front ends of `remat!` and `#[checkpoint]`. Three kinds of input: random token trees, near-valid input (valid
//! blocks and functions with tokens dropped, duplicated, swapped, replaced,
//! wrapped in new groups or unwrapped), and deep nesting (nested groups
//! across the nesting limit, and long chains of prefix, binary, method and
//! cast operators at one level). What is asserted, on every case:
//!
//! - the macro returns (no panic), on a thread with a fixed `STACK`: an
//!   unbounded recursion would overflow it and abort the test binary;
//! - every rejection is spanned: each `compile_error!` in the output starts
//!   where a token of the input starts and ends where one ends (syn puts
//!   the error's first and last span on the `compile_error` identifier and
//!   on its braces), or lies inside one literal (syn spans each field of
//!   `x.0.0` with its part of the literal `0.0`); "unexpected end of input"
//!   points at the last token.
//!   Only where an input is empty may an error be at `Span::call_site()`,
//!   the whole invocation. The inputs are parsed
//!   from text, so that their spans have real positions (proc-macro2's
//!   `span-locations`, a dev-dependency feature).
//!
//! Case counts are in `config()`; docs/dsl.md lists them.

use std::ops::Range;
use std::str::FromStr;

use proc_macro2::{Delimiter, Group, Ident, Literal, Punct, Spacing, Span, TokenStream, TokenTree};
use proptest::prelude::*;
use quote::quote;

const IDENTS: &[&str] = &[
    "save",
    "recompute",
    "auto",
    "region",
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
    "on_forward",
    "Saved",
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
/// of Rust, nested in blocks, so that every statement kind is reached, in
/// `remat!` blocks and in `#[checkpoint]` bodies (return positions too).
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
    "needs a, b, m;",
    "needs a.0, &b;",
    "let t = a.on_forward();",
    "let u = remat::needs(&a);",
    "let a = save;",
    "let v = auto value: self.v.forward(&x);",
    "let p = region [pol] proj: f(&a, &v);",
    "return (a, remat!(save w: f(&a)));",
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
    // Labelled breaks and `continue`, which the front ends once mishandled.
    "break 'b;",
    "break 'b a;",
    "continue;",
    "let r = &mut h; r.t = a;",
    "let e = cache.get_mut(0).unwrap(); *e = a;",
    "let S { ref mut t, .. } = s; *t = a;",
    "let rows = a.i(&idx);",
    "let p = a.chunk(2, 0);",
    "#[cfg(debug_assertions)] let a = x.exp();",
    "#[cfg(not(debug_assertions))]",
    "let s = S { t: a, ..s };",
    "let p = P(a, b);",
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
    "'b:",
    "'b: loop",
    "for e in &mut cache",
    "#[cfg(feature = \"f\")]",
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
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// The stack each case runs on. rustc runs proc macros on its main thread
/// (8 MiB by default); this is a quarter of it, in a debug build.
const STACK: usize = 2 << 20;

/// Runs `f` on a thread with `STACK` bytes of stack. A panic is returned as
/// an error; a stack overflow aborts the process (the test fails).
fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(f)
        .expect("spawn a test thread")
        .join()
        .map_err(|panic| {
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })
}

/// Byte ranges where the tokens of `tokens` start and end (a group's
/// delimiters are tokens too).
fn token_bounds(tokens: &TokenStream, starts: &mut Vec<usize>, ends: &mut Vec<usize>) {
    for token in tokens.clone() {
        let mut ranges = vec![token.span().byte_range()];
        if let TokenTree::Group(group) = &token {
            ranges.push(group.span_open().byte_range());
            ranges.push(group.span_close().byte_range());
            token_bounds(&group.stream(), starts, ends);
        }
        for range in ranges {
            starts.push(range.start);
            ends.push(range.end);
        }
    }
}

/// The spans of each `compile_error!` in `out`: syn's first span (on the
/// identifier) and last span (on the group holding the message).
fn error_spans(out: &TokenStream, found: &mut Vec<(String, Range<usize>, Range<usize>)>) {
    super::each_error(out.clone(), &mut |ident, group| {
        found.push((
            group.stream().to_string(),
            ident.span().byte_range(),
            group.span().byte_range(),
        ));
    });
}

/// Byte ranges of the literals of `tokens`, at any depth.
fn literal_ranges(tokens: &TokenStream, out: &mut Vec<Range<usize>>) {
    for token in tokens.clone() {
        match &token {
            TokenTree::Literal(literal) => out.push(literal.span().byte_range()),
            TokenTree::Group(group) => literal_ranges(&group.stream(), out),
            _ => {}
        }
    }
}

/// Checks that every error of `out` points at tokens of `inputs`.
fn check_spanned(inputs: &[&TokenStream], out: &TokenStream) -> Result<(), String> {
    let (mut starts, mut ends, mut literals) = (Vec::new(), Vec::new(), Vec::new());
    for input in inputs {
        token_bounds(input, &mut starts, &mut ends);
        literal_ranges(input, &mut literals);
    }
    let mut errors = Vec::new();
    error_spans(out, &mut errors);
    let some_empty = inputs.iter().any(|input| input.is_empty());
    for (message, first, last) in errors {
        // An empty input has no token to point at: "unexpected end of
        // input" there is at `Span::call_site()`, the whole invocation (e.g.
        // `#[checkpoint]` on nothing). Any other error, end of input
        // included, must be at tokens of the input.
        if some_empty && first == (0..0) && last == (0..0) {
            continue;
        }
        // A part of a literal: syn splits `0.0` in `x.0.0` into two fields,
        // each spanned at its digits (rustc, without `subspan`, spans both
        // at the whole literal).
        let in_literal = |range: &Range<usize>| {
            literals
                .iter()
                .any(|lit| lit.start <= range.start && range.end <= lit.end)
        };
        let at_tokens = |range: &Range<usize>| {
            starts.contains(&range.start) && ends.contains(&range.end) || in_literal(range)
        };
        if !at_tokens(&first) || !at_tokens(&last) {
            return Err(format!(
                "error at {first:?}..{last:?}, not at tokens of the input: {message}"
            ));
        }
    }
    Ok(())
}

/// An input: text (parsed on the test thread, so that its tokens have real
/// spans) or a random token tree, rendered to text when it round-trips
/// (else built as is, with call-site spans, and only run, not span-checked).
#[derive(Debug, Clone)]
enum Input {
    Text(String),
    Toks(Vec<Tok>),
}

impl Input {
    /// The tokens, and whether their spans are real.
    fn tokens(&self) -> (TokenStream, bool) {
        match self {
            Input::Text(text) => (TokenStream::from_str(text).expect("balanced input"), true),
            Input::Toks(toks) => {
                let built = stream(toks);
                match TokenStream::from_str(&built.to_string()) {
                    Ok(parsed) => (parsed, true),
                    Err(_) => (built, false),
                }
            }
        }
    }
}

/// Runs `#[checkpoint]` (with `args`) or `remat!` (without) on a small
/// stack: it must return, and its errors must point at the input.
/// proc-macro2's tokens are not `Send`, so they are made and checked on
/// that thread.
fn run(args: Option<Input>, item: Input) -> Result<(), TestCaseError> {
    let what = format!("{args:?}\n{item:?}");
    let result = on_small_stack(move || {
        let (item, real) = item.tokens();
        match args {
            None => {
                let out = crate::remat_block::remat(item.clone());
                if real {
                    check_spanned(&[&item], &out)?;
                }
            }
            Some(args) => {
                let (args, real_args) = args.tokens();
                let out = crate::checkpoint::checkpoint(args.clone(), item.clone());
                if real && real_args {
                    check_spanned(&[&args, &item], &out)?;
                }
            }
        }
        Ok::<(), String>(())
    });
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(TestCaseError::fail(format!("{error}\ninput: {what}"))),
        Err(panic) => Err(TestCaseError::fail(format!(
            "panicked: {panic}\ninput: {what}"
        ))),
    }
}

// ------------------------------------------------------- near-valid input

/// Valid `remat!` inputs, to mutate.
const REMAT_SEEDS: &[&str] = &[
    "let attn = save attention: self.attention.forward(&h); needs attn; let x = x + &attn; \
     let m = recompute mlp: self.mlp.forward(&self.ln2.forward(&x));",
    "let (a, b) = save split: split(&h); needs a; scope decoder { let y = recompute proj: \
     self.proj.forward(&a); } let z = y + b.on_forward().unwrap();",
    "save attention: ops::attention(&x, Some(&mask), 3)",
    "let k = region [policy] [format!(\"k.{}\", i)]: self.k.forward(&h); needs k; \
     let q: Tensor = save \"q proj\": q.forward(&h); for i in 0..n { let y = save \
     [format!(\"l{i}\")]: layer.forward(&h); needs y; h = &h + y; } if !is_recomputing() { \
     println!(\"{q}\"); }",
];

/// Valid `#[checkpoint]` arguments and functions, to mutate.
const CHECKPOINT_SEEDS: &[(&str, &str)] = &[
    (
        "",
        "fn forward(&self, x: &Tensor) -> Tensor { let h = self.ln1.forward(x); remat! { let attn \
         = save attention: self.attention.forward(&h); needs attn; let x = x + &attn; let m = \
         recompute mlp: self.mlp.forward(&x); } x + m }",
    ),
    (
        "name = [format!(\"layers.{}\", self.index)], state_hooks = [RngStateHook::cpu()], \
         determinism = Metadata",
        "pub fn block(x: Tensor, xs: &[Tensor], n: usize, mask: Option<&Tensor>) -> Tensor { \
         let y = remat!(save a: f(&x)); let v = vec![y.shallow_clone()]; if n > 1 { remat! { \
         needs y; } } let s = y.size(); match mask { Some(m) => x * m, None => x } }",
    ),
    (
        "enabled = self.on, strict = true, name = \"b\"",
        "fn f(self, x: &Tensor, cfg: Option<impl Fn() -> f64>, _: &str) -> (Tensor, Tensor) { \
         let (a, b) = remat!(region [self.policy] s: self.split(x)); let g = |t: &Tensor| t + 1; \
         remat! { needs a; } (g(&a), b) }",
    ),
];

/// A token tree, with its text, for mutations.
#[derive(Debug, Clone)]
enum Tree {
    Leaf(String, bool),
    Group(Delimiter, Vec<Tree>),
}

fn to_trees(tokens: TokenStream) -> Vec<Tree> {
    tokens
        .into_iter()
        .map(|token| match token {
            TokenTree::Group(g) => Tree::Group(g.delimiter(), to_trees(g.stream())),
            TokenTree::Punct(p) => Tree::Leaf(p.to_string(), p.spacing() == Spacing::Joint),
            other => Tree::Leaf(other.to_string(), false),
        })
        .collect()
}

fn render_trees(trees: &[Tree], out: &mut String) {
    for tree in trees {
        match tree {
            Tree::Leaf(text, joint) => {
                out.push_str(text);
                if !joint {
                    out.push(' ');
                }
            }
            Tree::Group(delimiter, inner) => {
                let (open, close) = match delimiter {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::None => ("", ""),
                };
                out.push_str(open);
                render_trees(inner, out);
                out.push_str(close);
                out.push(' ');
            }
        }
    }
}

/// The number of token sequences (the top level and each group's).
fn sequences(trees: &[Tree]) -> usize {
    1 + trees
        .iter()
        .map(|t| match t {
            Tree::Group(_, inner) => sequences(inner),
            Tree::Leaf(..) => 0,
        })
        .sum::<usize>()
}

/// The `n`th sequence, in preorder.
fn nth_sequence<'a>(trees: &'a mut Vec<Tree>, n: &mut usize) -> Option<&'a mut Vec<Tree>> {
    if *n == 0 {
        return Some(trees);
    }
    *n -= 1;
    for tree in trees.iter_mut() {
        if let Tree::Group(_, inner) = tree {
            if let Some(found) = nth_sequence(inner, n) {
                return Some(found);
            }
        }
    }
    None
}

#[derive(Debug, Clone)]
enum Mutation {
    Drop,
    Duplicate,
    Swap,
    Replace(Tok),
    /// Wraps this many tokens in a new group.
    Wrap(u8, usize),
    Unwrap,
}

fn mutation() -> impl Strategy<Value = (Mutation, usize, usize)> {
    let leaf = prop_oneof![
        prop::sample::select(IDENTS).prop_map(Tok::Ident),
        (prop::sample::select(PUNCTS), any::<bool>()).prop_map(|(c, j)| Tok::Punct(c, j)),
    ];
    let kind = prop_oneof![
        3 => Just(Mutation::Drop),
        2 => Just(Mutation::Duplicate),
        2 => Just(Mutation::Swap),
        2 => leaf.prop_map(Mutation::Replace),
        1 => (0u8..3, 0usize..6).prop_map(|(d, n)| Mutation::Wrap(d, n)),
        1 => Just(Mutation::Unwrap),
    ];
    (kind, any::<usize>(), any::<usize>())
}

fn mutate(trees: &mut Vec<Tree>, (mutation, seq, at): &(Mutation, usize, usize)) {
    let mut n = seq % sequences(trees);
    let Some(seq) = nth_sequence(trees, &mut n) else {
        return;
    };
    if seq.is_empty() {
        return;
    }
    let at = at % seq.len();
    match mutation {
        Mutation::Drop => {
            seq.remove(at);
        }
        Mutation::Duplicate => seq.insert(at, seq[at].clone()),
        Mutation::Swap if at + 1 < seq.len() => seq.swap(at, at + 1),
        Mutation::Swap => {}
        Mutation::Replace(tok) => {
            seq[at] = match tok {
                Tok::Ident(name) => Tree::Leaf(name.to_string(), false),
                Tok::Punct(c, joint) => Tree::Leaf(c.to_string(), *joint),
                _ => return,
            }
        }
        Mutation::Wrap(d, len) => {
            let end = (at + len).min(seq.len());
            let inner: Vec<Tree> = seq.drain(at..end).collect();
            let delimiter =
                [Delimiter::Parenthesis, Delimiter::Bracket, Delimiter::Brace][*d as usize % 3];
            seq.insert(at, Tree::Group(delimiter, inner));
        }
        Mutation::Unwrap => {
            if let Tree::Group(_, inner) = seq[at].clone() {
                seq.splice(at..=at, inner);
            }
        }
    }
}

/// `seed` with `mutations` applied, as text; `None` if the text no longer
/// lexes (a lone `'`, say), which is rustc's to reject, not ours.
fn mutated(seed: &str, mutations: &[(Mutation, usize, usize)]) -> Option<Input> {
    let mut trees = to_trees(TokenStream::from_str(seed).expect("seeds lex"));
    for m in mutations {
        mutate(&mut trees, m);
    }
    let mut text = String::new();
    render_trees(&trees, &mut text);
    TokenStream::from_str(&text)
        .is_ok()
        .then_some(Input::Text(text))
}

// ------------------------------------------------------------ deep input

/// What one level of nesting wraps around the level inside it.
const LEVELS: &[(&str, &str)] = &[
    ("(", ")"),
    ("[", "]"),
    ("{", "}"),
    ("f(", ")"),
    ("x + (", ")"),
    ("{ let y = ", "; y }"),
    ("if c { ", " } else { 0 }"),
    ("remat!(save a: f(", "))"),
    ("|x| (", ")"),
];

/// An operator repeated at one level (no delimiters): prefix operators
/// recurse in syn's parser, the others build a deep tree.
const CHAINS: &[(&str, &str, &str)] = &[
    ("", "- ", "x"),
    ("", "! ", "x"),
    ("", "& ", "x"),
    ("", "* ", "x"),
    ("", "return ", "x"),
    ("", "|| ", "x"),
    ("x", " + x", ""),
    ("x", ".f()", ""),
    ("x", " as T", ""),
    ("x", "?", ""),
    ("x", ".0", ""),
    ("x", "[0]", ""),
    ("x", " = x", ""),
    ("x", "()", ""),
    ("", "--", "x"),
    ("", "break ", "x"),
    ("", "&mut ", "x"),
    ("", "move || ", "x"),
    ("", "|a, b| ", "x"),
    ("x", ".f::<A, B>()", ""),
    ("x", " as T<A, B>", ""),
    ("", "{ x } - ", "x"),
    ("if c { x } ", "else if c { x } ", "else { x }"),
];

#[derive(Debug, Clone)]
enum Deep {
    Nested(Vec<usize>),
    Chain(usize, usize),
}

fn deep_nested() -> impl Strategy<Value = Deep> {
    prop::collection::vec(0..LEVELS.len(), 100..400).prop_map(Deep::Nested)
}

fn deep_chain() -> impl Strategy<Value = Deep> {
    let n = prop_oneof![1usize..200, 200usize..5_000];
    (0..CHAINS.len(), n).prop_map(|(c, n)| Deep::Chain(c, n))
}

fn deep_expr(deep: &Deep) -> String {
    match deep {
        Deep::Nested(levels) => {
            let mut text = String::from("x");
            for &level in levels {
                let (open, close) = LEVELS[level];
                text = format!("{open}{text}{close}");
            }
            text
        }
        Deep::Chain(chain, n) => {
            let (start, op, end) = CHAINS[*chain];
            format!("{start}{}{end}", op.repeat(*n))
        }
    }
}

/// Where the deep expression goes: a `remat!` block, a region's argument,
/// `needs`, a `#[checkpoint]` body, or a checkpoint's name.
fn deep_inputs(expr: &str, place: u8) -> (Option<Input>, Input) {
    let text = |s: String| Input::Text(s);
    match place % 5 {
        0 => (None, text(format!("let y = {expr}; needs y;"))),
        1 => (None, text(format!("let y = save a: f(&{expr}); needs y;"))),
        2 => (None, text(format!("needs {expr};"))),
        3 => (
            Some(text(String::new())),
            text(format!(
                "fn f(x: &Tensor) -> Tensor {{ let y = {expr}; remat! {{ needs y; }} y }}"
            )),
        ),
        _ => (
            Some(text(format!("name = [{expr}]"))),
            text("fn f(x: &Tensor) -> Tensor { x + 1 }".to_string()),
        ),
    }
}

/// "Unexpected end of input" points at the last token of the input (a
/// group's closing delimiter), not at the whole invocation.
#[test]
fn end_of_input_errors_point_at_the_last_token() {
    // (arguments of `#[checkpoint]` or none for `remat!`, item, the text
    // of the last token)
    let cases: &[(Option<&str>, &str, &str)] = &[
        (Some("name ="), "fn f(x: &Tensor) -> Tensor { x + 1 }", "="),
        (Some("name"), "fn f(x: &Tensor) -> Tensor { x + 1 }", "name"),
        (
            Some("state_hooks ="),
            "fn f(x: &Tensor) -> Tensor { x + 1 }",
            "=",
        ),
        (Some(""), "fn f(x: &Tensor) -> Tensor", "Tensor"),
        (Some(""), "fn f(x: &Tensor)", ")"),
        (None, "let a = save attention", "attention"),
        (None, "let a = save attention:", ":"),
        (None, "needs a,", ","),
        (None, "save attention: f(&x);  let y = x +", "+"),
        (None, "auto attention:", ":"),
    ];
    for &(args, item, last) in cases {
        let (args, item) = (args.map(str::to_string), item.to_string());
        let last = last.to_string();
        let result = on_small_stack(move || {
            let item = TokenStream::from_str(&item).expect("lexes");
            let (out, end) = match args {
                None => (crate::remat_block::remat(item.clone()), item),
                Some(args) => {
                    let args = TokenStream::from_str(&args).expect("lexes");
                    let out = crate::checkpoint::checkpoint(args.clone(), item.clone());
                    let end = if args.is_empty() { item } else { args };
                    (out, end)
                }
            };
            let (mut starts, mut ends) = (Vec::new(), Vec::new());
            token_bounds(&end, &mut starts, &mut ends);
            let end = (*starts.iter().max().unwrap())..(*ends.iter().max().unwrap());
            let mut errors = Vec::new();
            error_spans(&out, &mut errors);
            assert!(
                errors.iter().any(|(_, first, _)| *first == end),
                "no error at the last token `{last}`: {errors:?}"
            );
            assert!(
                errors.iter().all(|(_, first, _)| *first != (0..0)),
                "an error at the whole invocation: {errors:?}"
            );
        });
        if let Err(panic) = result {
            panic!("{panic}");
        }
    }
}

/// The chain length `n` at which the input of `place` is first refused
/// by the pre-parse scan (its arguments or its item).
fn first_refused(chain: usize, place: u8) -> usize {
    let refused = |n: usize| {
        let (args, item) = deep_inputs(&deep_expr(&Deep::Chain(chain, n)), place);
        let refused = |input: &Input| crate::depth_limit::check(&input.tokens().0).is_some();
        args.as_ref().is_some_and(refused) || refused(&item)
    };
    let (mut lo, mut hi) = (0, 1);
    while !refused(hi) {
        (lo, hi) = (hi, hi * 2);
    }
    while hi - lo > 1 {
        let mid = (lo + hi) / 2;
        if refused(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// Every chain, in every place, at the longest length the limit accepts
/// (which must run through parsing and the expansion on
/// `STACK`) and one past it (refused, spanned).
#[test]
fn chains_at_the_limit_run_without_overflow() {
    for (chain, (_, op, _)) in CHAINS.iter().enumerate() {
        for place in 0..5 {
            // A thread of its own: proc-macro2 keeps every parsed text of a
            // thread (for span locations), which slows later parses.
            let n = std::thread::spawn(move || first_refused(chain, place))
                .join()
                .expect("the scan does not panic");
            assert!(n > 20, "a chain of {n} `{op}` is refused in place {place}");
            for n in [n - 1, n] {
                let (args, item) = deep_inputs(&deep_expr(&Deep::Chain(chain, n)), place);
                if let Err(error) = run(args, item) {
                    panic!("{error}");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn remat_on_random_tokens(input in prop::collection::vec(tok(), 0..40)) {
        run(None, Input::Toks(input))?;
    }

    #[test]
    fn checkpoint_on_random_tokens(
        args in prop::collection::vec(tok(), 0..20),
        item in prop::collection::vec(tok(), 0..40),
    ) {
        run(Some(Input::Toks(args.clone())), Input::Toks(item))?;
        let valid = "fn f(&self, x: &Tensor) -> Tensor { x + 1 }".to_string();
        run(Some(Input::Toks(args)), Input::Text(valid))?;
    }

    #[test]
    fn checkpoint_on_random_bodies(body in prop::collection::vec(tok(), 0..40)) {
        let (body, real) = Input::Toks(body).tokens();
        prop_assume!(real);
        let method = format!("fn f(&self, x: &Tensor) -> Tensor {{ {body} }}");
        run(Some(Input::Text(String::new())), Input::Text(method))?;
        let block = format!("fn f(x: Tensor) {{ remat! {{ {body} }} }}");
        run(Some(Input::Text(String::new())), Input::Text(block))?;
    }

    #[test]
    fn remat_on_near_valid_blocks(
        seed in 0..REMAT_SEEDS.len(),
        mutations in prop::collection::vec(mutation(), 1..5),
    ) {
        if let Some(input) = mutated(REMAT_SEEDS[seed], &mutations) {
            run(None, input)?;
        }
    }

    #[test]
    fn checkpoint_on_near_valid_functions(
        seed in 0..CHECKPOINT_SEEDS.len(),
        mutations in prop::collection::vec(mutation(), 1..5),
        in_args in any::<bool>(),
    ) {
        let (args, item) = CHECKPOINT_SEEDS[seed];
        let (args, item) = if in_args {
            (mutated(args, &mutations), Some(Input::Text(item.to_string())))
        } else {
            (Some(Input::Text(args.to_string())), mutated(item, &mutations))
        };
        if let (Some(args), Some(item)) = (args, item) {
            run(Some(args), item)?;
        }
    }

    #[test]
    fn deep_nesting_is_refused_without_overflow(deep in deep_nested(), place in any::<u8>()) {
        let (args, item) = deep_inputs(&deep_expr(&deep), place);
        run(args, item)?;
    }

    /// Long operator chains at one level (`- - - ... x`, `x + x + ...`)
    /// have no delimiters: the chain limit of `crate::depth_limit` refuses
    /// them before syn parses.
    #[test]
    fn long_chains_are_refused_without_overflow(deep in deep_chain(), place in any::<u8>()) {
        let (args, item) = deep_inputs(&deep_expr(&deep), place);
        run(args, item)?;
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
        let out = crate::remat_block::remat(body.clone());
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
