//! Code as text for error messages. `TokenStream`'s own `Display` spaces
//! every token (`self.layers [0].forward(& x)`), which reads badly in a
//! message that tells the user what to write; this spaces it the way people
//! write it (`self.layers[0].forward(&x)`).

use proc_macro2::{Delimiter, Group, Punct, Spacing, TokenStream, TokenTree};

/// The characters that, after an operand, make a binary operator, which is
/// spaced on both sides.
const OPERATORS: &str = "=+-*/%<>|^&";

/// What was written last, which decides the space before the next token.
#[derive(Clone, Copy, PartialEq)]
enum Prev {
    Start,
    Word,
    Space,
    Glued,
}

/// `tokens` as text, spaced the way people write code.
pub(crate) fn compact(tokens: &TokenStream) -> String {
    let mut out = String::new();
    write(tokens, &mut out);
    out
}

/// Writes one token sequence; a group's contents start afresh.
fn write(tokens: &TokenStream, out: &mut String) {
    let mut prev = Prev::Start;
    for tt in tokens.clone() {
        prev = match &tt {
            TokenTree::Ident(_) | TokenTree::Literal(_) => word(&tt.to_string(), prev, out),
            TokenTree::Group(group) => delimited(group, prev, out),
            TokenTree::Punct(punct) => operator(punct, prev, out),
        };
    }
}

/// An identifier or literal: spaced from a word before it.
fn word(text: &str, prev: Prev, out: &mut String) -> Prev {
    if prev == Prev::Word {
        out.push(' ');
    }
    out.push_str(text);
    Prev::Word
}

/// A group: glued to what precedes it (a call, an index), except a brace
/// after a word (`if x { .. }`), with spaces inside braces.
fn delimited(group: &Group, prev: Prev, out: &mut String) -> Prev {
    let (open, close) = match group.delimiter() {
        Delimiter::Parenthesis => ("(", ")"),
        Delimiter::Bracket => ("[", "]"),
        Delimiter::Brace => ("{ ", " }"),
        Delimiter::None => ("", ""),
    };
    if prev == Prev::Word && group.delimiter() == Delimiter::Brace {
        out.push(' ');
    }
    out.push_str(open);
    write(&group.stream(), out);
    out.push_str(close);
    Prev::Word
}

/// A punctuation character: a binary operator is spaced on both sides, a
/// separator (`,`, `;`) after it, anything else (`.`, `&x`, `::`) glued.
fn operator(punct: &Punct, prev: Prev, out: &mut String) -> Prev {
    let c = punct.as_char();
    let binary = prev == Prev::Word && OPERATORS.contains(c);
    if binary {
        out.push(' ');
    }
    out.push(c);
    let next = match (c, punct.spacing()) {
        (_, Spacing::Joint) => Prev::Glued,
        (',' | ';', _) => Prev::Space,
        _ if binary || prev == Prev::Glued && OPERATORS.contains(c) => Prev::Space,
        _ => Prev::Glued,
    };
    if next == Prev::Space {
        out.push(' ');
    }
    next
}
