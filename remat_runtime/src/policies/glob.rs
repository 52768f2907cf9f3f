//! Shell-style patterns over checkpoint and region names: `*` (any run of
//! characters, dots included), `?` (one character), `[abc]`, `[0-3]` and
//! `[!abc]` (one character in, or not in, a set); `\` takes the next
//! character literally. Nothing else is special.
//!
//! Invariant: a pattern is parsed once, when its table is first used;
//! matching never fails (a malformed set was refused at parse time).

#[derive(Clone, Debug, PartialEq, Eq)]
enum Token {
    Char(char),
    Any,
    AnyRun,
    Set {
        negated: bool,
        items: Vec<(char, char)>,
    },
}

/// A parsed pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Glob {
    tokens: Vec<Token>,
}

impl Glob {
    /// Parses `text`; the error says what is malformed.
    pub(crate) fn new(text: &str) -> Result<Glob, String> {
        let chars: Vec<char> = text.chars().collect();
        let mut tokens = Vec::new();
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '*' => {
                    // `**` is one run: no exponential backtracking.
                    if tokens.last() != Some(&Token::AnyRun) {
                        tokens.push(Token::AnyRun);
                    }
                }
                '?' => tokens.push(Token::Any),
                '\\' => {
                    i += 1;
                    let c = *chars
                        .get(i)
                        .ok_or_else(|| format!("pattern `{text}` ends with a lone `\\`"))?;
                    tokens.push(Token::Char(c));
                }
                '[' => {
                    let (token, next) = parse_set(&chars, i)
                        .ok_or_else(|| format!("pattern `{text}` has a `[` without its `]`"))?;
                    tokens.push(token);
                    i = next;
                    continue;
                }
                c => tokens.push(Token::Char(c)),
            }
            i += 1;
        }
        Ok(Glob { tokens })
    }

    /// Whether the whole of `name` matches.
    pub(crate) fn matches(&self, name: &str) -> bool {
        let name: Vec<char> = name.chars().collect();
        // Iterative matcher with one backtrack point for the latest `*`:
        // linear in practice, never exponential.
        let (mut p, mut n) = (0, 0);
        let mut star: Option<(usize, usize)> = None;
        while n < name.len() {
            match self.tokens.get(p) {
                Some(Token::AnyRun) => {
                    star = Some((p, n));
                    p += 1;
                    continue;
                }
                Some(t) if one(t, name[n]) => {
                    p += 1;
                    n += 1;
                    continue;
                }
                _ => {}
            }
            match star {
                Some((sp, sn)) => {
                    p = sp + 1;
                    n = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            }
        }
        self.tokens[p..].iter().all(|t| *t == Token::AnyRun)
    }
}

fn one(token: &Token, c: char) -> bool {
    match token {
        Token::Char(x) => *x == c,
        Token::Any => true,
        Token::AnyRun => false,
        Token::Set { negated, items } => {
            items.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
        }
    }
}

/// The set starting at `chars[start] == '['`, and the index after its `]`.
/// A `]` right after `[` or `[!` is a member, as in the shell.
fn parse_set(chars: &[char], start: usize) -> Option<(Token, usize)> {
    let mut i = start + 1;
    let negated = chars.get(i) == Some(&'!');
    if negated {
        i += 1;
    }
    let mut items = Vec::new();
    let first = i;
    loop {
        let c = *chars.get(i)?;
        if c == ']' && i > first {
            return Some((Token::Set { negated, items }, i + 1));
        }
        if chars.get(i + 1) == Some(&'-') && chars.get(i + 2).is_some_and(|&h| h != ']') {
            items.push((c, chars[i + 2]));
            i += 3;
        } else {
            items.push((c, c));
            i += 1;
        }
    }
}

/// `name` with every special character escaped.
pub(crate) fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, n: &str) -> bool {
        Glob::new(p).unwrap().matches(n)
    }

    #[test]
    fn stars_match_any_run_dots_included() {
        assert!(m("layers.*", "layers.3"));
        assert!(m("layers.*", "layers.12"));
        assert!(m("layers.*", "layers."));
        assert!(!m("layers.*", "layer.3"));
        assert!(m("*", ""));
        assert!(m("mlp.*", "mlp.up.proj"));
        assert!(m("*.up", "mlp.up"));
        assert!(m("a*b*c", "aXbYbZc"));
        assert!(!m("a*b*c", "aXbYbZ"));
        assert!(m("**", "anything"));
    }

    #[test]
    fn question_marks_match_one_character() {
        assert!(m("layers.?", "layers.3"));
        assert!(!m("layers.?", "layers.12"));
        assert!(m("layers.??", "layers.12"));
    }

    #[test]
    fn sets_and_ranges() {
        assert!(m("layers.[0-3]", "layers.0"));
        assert!(m("layers.[0-3]", "layers.3"));
        assert!(!m("layers.[0-3]", "layers.4"));
        assert!(!m("layers.[0-3]", "layers.10"));
        assert!(m("[abc]", "b"));
        assert!(!m("[abc]", "d"));
        assert!(m("[!abc]", "d"));
        assert!(!m("[!abc]", "a"));
        assert!(m("[]]", "]"));
        assert!(m("[a-]", "-"));
        assert!(m("layers.[0-13-5]", "layers.4"));
    }

    #[test]
    fn escapes_and_literals() {
        assert!(m(r"a\*", "a*"));
        assert!(!m(r"a\*", "ab"));
        let g = Glob::new(&escape("weird[1]*")).unwrap();
        assert!(g.matches("weird[1]*"));
        assert!(!g.matches("weird1x"));
    }

    #[test]
    fn malformed_patterns_are_refused() {
        assert!(Glob::new("layers.[0-3")
            .unwrap_err()
            .contains("without its `]`"));
        assert!(Glob::new("a\\").unwrap_err().contains("lone"));
    }
}
