//! The depth limits: the macros refuse, before parsing, input that would
//! make syn's parser or the check recurse too deep. rustc itself grows its
//! stack, a proc macro cannot, so without the limits a deep enough
//! expression would crash the compiler. The scan here is iterative.
//!
//! Two limits:
//!
//! - `MAX_GROUP_DEPTH`: delimiters (`()`, `[]`, `{}`) nested deeper than
//!   this;
//! - `MAX_CHAIN`: operators chained in one expression, counted along its
//!   nesting. A chain needs no delimiters (`- - - x`, `x + x + x`,
//!   `x.f().f()`, `return return x`, `|a| |a| x`), yet each operator is one
//!   more level of syn's tree, which syn's parser, the check and every
//!   later pass recurse over.
//!
//! The chain count of a token is the number of operators before it in its
//! *run* (its part of the token sequence since the last separator), plus
//! the same count at each enclosing group. Operators are punctuation
//! characters (the second `:` of `::` excepted), groups (calls, indexes and
//! any delimited operand), and the keywords that build a level without
//! delimiters (`as`, `return`, `break`, `yield`, `else`, `become`, `box`);
//! a literal after `.` (`x.0.0`, whose `0.0` is two fields) counts too.
//! A run restarts at `;`, after a match arm's `=>`, and at an identifier or
//! literal right after `}` (a new statement or arm: nothing continues an
//! expression that way). A `,` separates siblings (arguments, elements,
//! arms), so it restarts the run too, except for what was counted up to the
//! last `|` or `<` of the run: the commas of closure parameters
//! (`|a, b| |a, b| x`) and of generic arguments (`x as T<A, B> as T<A, B>`)
//! sit inside a chain. Attributes (`#[..]`, doc comments) count nothing.
//! The count over-approximates the depth of syn's tree (a path's `::`, or
//! `a < b` inside arguments, count although they nest nothing), which only
//! makes the limit err on the safe side.

use proc_macro2::{Delimiter, Spacing, Span, TokenStream, TokenTree};

/// The deepest nesting of `()`, `[]` and `{}` the macros accept.
pub(crate) const MAX_GROUP_DEPTH: usize = 128;

/// The longest operator chain the macros accept, counted along the
/// nesting (see the module's documentation). Measured: 128 is about 60% of
/// the longest chains of the most expensive operators (`return`, closures)
/// that the macros handle on a 2 MiB stack in a debug build.
pub(crate) const MAX_CHAIN: usize = 128;

/// Keywords that start or continue one more level of the tree without a
/// delimiter.
const CHAIN_KEYWORDS: &[&str] = &["as", "return", "break", "yield", "else", "become", "box"];

/// One token sequence being scanned.
struct Frame {
    tokens: Vec<TokenTree>,
    next: usize,
    /// The chain count at the group that holds this sequence.
    base: usize,
    /// Operators counted in the current run.
    count: usize,
    /// What a `,` restarts the run at: the count up to the run's last `|`
    /// or `<`.
    floor: usize,
    /// The previous token was a brace group.
    after_brace: bool,
    /// The previous token was a `Joint` punct, and which.
    joint: Option<char>,
    /// The previous token was a `.`.
    after_dot: bool,
    /// The previous token was an operand (an identifier, a literal or a
    /// group): a group after it is a call, an index or a struct body.
    after_operand: bool,
}

impl Frame {
    fn new(stream: TokenStream, base: usize) -> Self {
        Frame {
            tokens: stream.into_iter().collect(),
            next: 0,
            base,
            count: 0,
            floor: 0,
            after_brace: false,
            joint: None,
            after_dot: false,
            after_operand: false,
        }
    }

    fn restart(&mut self) {
        self.count = 0;
        self.floor = 0;
    }

    /// Whether the tokens from `at` are an attribute's `[..]` (after `#` or
    /// `#!`).
    fn attribute_at(&self, at: usize) -> bool {
        let bracket = |i: usize| matches!(self.tokens.get(i), Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Bracket);
        match self.tokens.get(at) {
            Some(TokenTree::Punct(p)) if p.as_char() == '!' => bracket(at + 1),
            _ => bracket(at),
        }
    }
}

/// An error at the first token past either limit, if any.
pub(crate) fn check(tokens: &TokenStream) -> Option<syn::Error> {
    let mut stack = vec![Frame::new(tokens.clone(), 0)];
    // Inside an attribute: `#`, `!` and its group count nothing.
    let mut attribute = false;
    while let Some(top) = stack.last_mut() {
        let Some(token) = top.tokens.get(top.next).cloned() else {
            stack.pop();
            if let Some(parent) = stack.last_mut() {
                parent.joint = None;
                parent.after_operand = true;
            }
            continue;
        };
        top.next += 1;
        let after_brace = std::mem::replace(&mut top.after_brace, false);
        let joint = top.joint.take();
        let after_dot = std::mem::replace(
            &mut top.after_dot,
            matches!(&token, TokenTree::Punct(p) if p.as_char() == '.'),
        );
        let after_operand = std::mem::replace(
            &mut top.after_operand,
            !matches!(&token, TokenTree::Punct(_)),
        );
        let counted = match &token {
            TokenTree::Group(group) => {
                let counted = !std::mem::replace(&mut attribute, false);
                top.count += usize::from(counted);
                top.after_brace = group.delimiter() == Delimiter::Brace;
                let base = top.base + top.count;
                if stack.len() > MAX_GROUP_DEPTH {
                    return Some(group_error(group.span()));
                }
                // A group that opens an operand (`(`, `x + (`) is nesting,
                // which the depth limit bounds; one after an operand
                // continues a chain (`x()()()`, `x[0][0]`).
                if after_operand && base > MAX_CHAIN {
                    return Some(chain_error(group.span_open()));
                }
                stack.push(Frame::new(group.stream(), base));
                continue;
            }
            TokenTree::Punct(punct) => {
                let ch = punct.as_char();
                if punct.spacing() == Spacing::Joint {
                    top.joint = Some(ch);
                }
                match (joint, ch) {
                    (_, ';') => {
                        top.restart();
                        false
                    }
                    (_, ',') => {
                        top.count = top.floor;
                        false
                    }
                    // A match arm's body: the pattern nests nothing in it.
                    (Some('='), '>') => {
                        top.restart();
                        false
                    }
                    (Some(':'), ':') => false,
                    (None, '#') if top.attribute_at(top.next) => {
                        attribute = true;
                        false
                    }
                    (_, '!') if attribute => false,
                    (_, '|' | '<') => {
                        top.floor = top.count + 1;
                        true
                    }
                    _ => true,
                }
            }
            TokenTree::Ident(ident) => {
                if after_brace && ident != "as" && ident != "else" {
                    top.restart();
                }
                CHAIN_KEYWORDS.iter().any(|k| ident == k)
            }
            // A field: `x.0`, or two of them (`x.0.0` holds the literal `0.0`).
            TokenTree::Literal(_) => {
                if after_brace {
                    top.restart();
                }
                after_dot
            }
        };
        if counted {
            top.count += 1;
            if top.base + top.count > MAX_CHAIN {
                return Some(chain_error(token.span()));
            }
        }
    }
    None
}

fn group_error(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        format!(
            "this code nests delimiters more than {MAX_GROUP_DEPTH} levels deep, deeper than \
             the remat macros parse and check; split it into `let` bindings or helper \
             functions"
        ),
    )
}

fn chain_error(span: Span) -> syn::Error {
    syn::Error::new(
        span,
        format!(
            "this expression chains more than {MAX_CHAIN} operators (counted along its \
             nesting: operators, calls, indexes and delimiters), more than the remat macros \
             parse and check; split it into `let` bindings, e.g. \
             `let a = x + y + z; let b = a + w;`"
        ),
    )
}
