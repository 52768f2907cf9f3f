//! Every fix the check suggests satisfies it (issue 19): for random
//! programs of the oracle's statements (`oracle_program`), the first error
//! is fixed as its message says (`add `needs X;` before this read`: the
//! statement goes right before the statement of the read; `right after the
//! statement of region R`: after that statement; `Remove it`: the statement
//! goes), and the check runs again, until it accepts. A fix that
//! leaves the same error where it was fails the test.

use std::str::FromStr;

use proc_macro2::TokenStream;
use proptest::prelude::*;
use quote::quote;

use super::oracle_program::{render_body, stmt};

/// The first error of the check on `text`: its message and its byte
/// offset in `text`.
fn first_error(text: &str) -> Option<(String, usize)> {
    let body = TokenStream::from_str(text).expect("balanced");
    let base = body.clone().into_iter().next()?.span().byte_range().start;
    let out =
        crate::checkpoint::checkpoint(quote!(), quote!(fn block(x: &Tensor) -> Tensor { #body }));
    let mut found = Vec::new();
    errors_at(out, &mut found);
    found
        .into_iter()
        .find(|(_, at)| *at >= base)
        .map(|(message, at)| (message, at - base))
}

fn errors_at(tokens: TokenStream, found: &mut Vec<(String, usize)>) {
    super::each_error(tokens, &mut |ident, group| {
        if let Ok(lit) = syn::parse2::<syn::LitStr>(group.stream()) {
            found.push((lit.value(), ident.span().byte_range().start));
        }
    });
}

/// Where the statement holding byte `at` starts: after the `;`, `{` or
/// `}` before it (the renderer separates statements by a space).
fn stmt_start(text: &str, at: usize) -> usize {
    text[..at].rfind([';', '{', '}']).map_or(0, |i| i + 2)
}

/// `text` with the first error's fix applied, or why it cannot be.
fn apply_fix(text: &str, message: &str, at: usize) -> Result<String, String> {
    if message.contains("right after the statement of region `") {
        // `needs A;` right after the statement of region `[1]`, `needs B;`
        // right after that of region `[2]`: each after `.. save [K]: ..;`.
        let mut text = text.to_string();
        for part in message.split("`needs ").skip(1) {
            let Some((target, rest)) = part.split_once(";` right after ") else {
                continue;
            };
            let region = rest.split('`').nth(1).ok_or("no region")?;
            let stmt = text
                .find(&format!("save {region}:"))
                .ok_or("no such region")?;
            let end = text[stmt..].find("; ").ok_or("no statement end")? + stmt + 2;
            text.insert_str(end, &format!("remat! {{ needs {target}; }} "));
        }
        return Ok(text);
    }
    if let Some(rest) = message.split("add `needs ").nth(1) {
        let target = rest.split(";`").next().unwrap_or_default();
        let start = stmt_start(text, at);
        return Ok(format!(
            "{}remat! {{ needs {target}; }} {}",
            &text[..start],
            &text[start..]
        ));
    }
    if let Some(rest) = message.split("no one `needs` covers every path").nth(1) {
        // `pass `v` to a region`: the read `v.exp()` (or `v.i(x)`) becomes
        // a region's argument.
        let var = rest
            .split("pass `")
            .nth(1)
            .and_then(|r| r.split('`').next());
        let var = var.ok_or("no variable")?;
        let call = text[at..].strip_prefix(var).ok_or("not at the variable")?;
        let len = [".exp()", ".i(x)"]
            .iter()
            .find(|m| call.starts_with(**m))
            .ok_or("an unknown read")?
            .len();
        let end = at + var.len() + len;
        return Ok(format!(
            "{}remat!(recompute [fix{at}]: f(&{var})){}",
            &text[..at],
            &text[end..]
        ));
    }
    if message.ends_with("Remove it") {
        // The `needs` statement is the `remat! { .. }` around `at`.
        let start = text[..at].rfind("remat!").ok_or("no remat! before it")?;
        let end = text[at..].find('}').ok_or("no end")? + at + 1;
        return Ok(format!("{}{}", &text[..start], &text[end..]));
    }
    Err(format!("no fix to apply in: {message}"))
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 200,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn every_suggested_fix_satisfies_the_check(stmts in prop::collection::vec(stmt(), 1..10)) {
        let mut text = render_body(&stmts);
        for _ in 0..40 {
            let Some((message, at)) = first_error(&text) else {
                return Ok(());
            };
            let fixed = apply_fix(&text, &message, at)
                .map_err(|e| TestCaseError::fail(format!("{e}\nin:\n{text}")))?;
            if let Some((again, at_again)) = first_error(&fixed) {
                // The same error, moved by the inserted text.
                let moved = fixed.len() - text.len();
                prop_assert!(
                    !(again == message && (at_again == at || at_again == at + moved)),
                    "the suggested fix leaves the error:\n{message}\nbefore:\n{text}\nafter:\n{fixed}"
                );
            }
            text = fixed;
        }
        prop_assert!(false, "no fixpoint after 40 fixes:\n{}", text);
    }
}
