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

use proc_macro2::{Delimiter, Group, Ident, Punct, Spacing, Span, TokenStream, TokenTree};

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
    /// The frame of `stream`, nested at chain count `base`.
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

    /// Starts a new run.
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

/// What the token before the current one was, taken from its frame as the
/// current token is read.
struct Prev {
    after_brace: bool,
    joint: Option<char>,
    after_dot: bool,
    after_operand: bool,
}

impl Frame {
    /// The next token, and what the one before it was; records what this
    /// one is for the next.
    fn take(&mut self) -> Option<(TokenTree, Prev)> {
        let token = self.tokens.get(self.next).cloned()?;
        self.next += 1;
        let prev = Prev {
            after_brace: std::mem::replace(&mut self.after_brace, false),
            joint: self.joint.take(),
            after_dot: std::mem::replace(
                &mut self.after_dot,
                matches!(&token, TokenTree::Punct(p) if p.as_char() == '.'),
            ),
            after_operand: std::mem::replace(
                &mut self.after_operand,
                !matches!(&token, TokenTree::Punct(_)),
            ),
        };
        Some((token, prev))
    }

    /// Enters `group`, `depth` frames deep: the frame of its contents, or
    /// the error for a limit it passes.
    fn open(
        &mut self,
        group: &Group,
        after_operand: bool,
        attribute: &mut bool,
        depth: usize,
    ) -> Result<Frame, syn::Error> {
        let counted = !std::mem::replace(attribute, false);
        self.count += usize::from(counted);
        self.after_brace = group.delimiter() == Delimiter::Brace;
        let base = self.base + self.count;
        if depth > MAX_GROUP_DEPTH {
            return Err(group_error(group.span()));
        }
        // A group that opens an operand (`(`, `x + (`) is nesting, which
        // the depth limit bounds; one after an operand continues a chain
        // (`x()()()`, `x[0][0]`).
        if after_operand && base > MAX_CHAIN {
            return Err(chain_error(group.span_open()));
        }
        Ok(Frame::new(group.stream(), base))
    }

    /// Whether `punct` counts as an operator; `;`, `,` and `=>` restart
    /// the run.
    fn punct(&mut self, punct: &Punct, joint: Option<char>, attribute: &mut bool) -> bool {
        let ch = punct.as_char();
        if punct.spacing() == Spacing::Joint {
            self.joint = Some(ch);
        }
        match (joint, ch) {
            (_, ';') => {
                self.restart();
                false
            }
            (_, ',') => {
                self.count = self.floor;
                false
            }
            // A match arm's body: the pattern nests nothing in it.
            (Some('='), '>') => {
                self.restart();
                false
            }
            (Some(':'), ':') => false,
            (None, '#') if self.attribute_at(self.next) => {
                *attribute = true;
                false
            }
            (_, '!') if *attribute => false,
            (_, '|' | '<') => {
                self.floor = self.count + 1;
                true
            }
            _ => true,
        }
    }

    /// Whether `ident` counts as an operator (a chain keyword); after `}`
    /// it starts a new statement or arm, unless it continues one.
    fn ident(&mut self, ident: &Ident, after_brace: bool) -> bool {
        if after_brace && ident != "as" && ident != "else" {
            self.restart();
        }
        CHAIN_KEYWORDS.iter().any(|k| ident == k)
    }

    /// Whether a literal counts: a field, `x.0`, or two of them (`x.0.0`
    /// holds the literal `0.0`).
    fn literal(&mut self, after_brace: bool, after_dot: bool) -> bool {
        if after_brace {
            self.restart();
        }
        after_dot
    }
}

/// An error at the first token past either limit, if any.
pub(crate) fn check(tokens: &TokenStream) -> Option<syn::Error> {
    let mut stack = vec![Frame::new(tokens.clone(), 0)];
    // Inside an attribute: `#`, `!` and its group count nothing.
    let mut attribute = false;
    loop {
        let depth = stack.len();
        let top = stack.last_mut()?;
        let Some((token, prev)) = top.take() else {
            stack.pop();
            if let Some(parent) = stack.last_mut() {
                parent.joint = None;
                parent.after_operand = true;
            }
            continue;
        };
        let counted = match &token {
            TokenTree::Group(group) => {
                match top.open(group, prev.after_operand, &mut attribute, depth) {
                    Ok(frame) => stack.push(frame),
                    Err(error) => return Some(error),
                }
                continue;
            }
            TokenTree::Punct(punct) => top.punct(punct, prev.joint, &mut attribute),
            TokenTree::Ident(ident) => top.ident(ident, prev.after_brace),
            TokenTree::Literal(_) => top.literal(prev.after_brace, prev.after_dot),
        };
        if counted {
            top.count += 1;
            if top.base + top.count > MAX_CHAIN {
                return Some(chain_error(token.span()));
            }
        }
    }
}

/// Delimiters nested deeper than `MAX_GROUP_DEPTH`.
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

/// An operator chain longer than `MAX_CHAIN`.
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
