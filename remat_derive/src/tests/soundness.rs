//! Issue 8's cases: programs the old, syntactic check accepted although
//! they read a `save` output on replay, the ones it refused although they
//! are fine, and more shapes of real model code.

use proc_macro2::TokenStream;
use quote::quote;

use super::{checkpoint_errors, errors, remat_errors};

/// Errors of a `#[checkpoint]` method whose body is `body`.
fn checkpoint(body: TokenStream) -> Vec<String> {
    checkpoint_errors(
        quote!(),
        quote! {
            fn forward(&self, x: &Tensor, xs: &[Tensor], n: usize, c: bool) -> Tensor { #body }
        },
    )
}

#[track_caller]
fn refused(body: TokenStream, part: &str) {
    let errors = checkpoint(body.clone());
    assert!(
        !errors.is_empty() && errors.iter().any(|e| e.contains(part)),
        "expected an error containing {part:?} for\n{body}\ngot {errors:#?}"
    );
}

#[track_caller]
fn accepted(body: TokenStream) {
    let errors = checkpoint(body.clone());
    assert!(
        errors.is_empty(),
        "unexpected errors for\n{body}\n{errors:#?}"
    );
}

// ------------------------------------------------------------ part 1: holes

#[test]
fn named_format_argument() {
    refused(
        quote! {
            let a = remat!(save f: f(x));
            let s = format!("{t}", t = a);
            x + 1
        },
        "`a` holds the output of `save` region `f`",
    );
}

#[test]
fn stored_in_a_field_or_an_index() {
    refused(
        quote! {
            let a = remat!(save f: f(x));
            let mut h = Holder::default();
            h.t = a;
            h.t.exp()
        },
        "`h.t` is a view of `a`",
    );
    refused(
        quote! {
            let a = remat!(save f: f(x));
            let mut v = vec![x.shallow_clone()];
            v[0] = a;
            v[0].exp()
        },
        "the output of `save` region `f`",
    );
    // Fine once marked, and the field's neighbours are not touched.
    accepted(quote! {
        let a = remat!(save f: f(x));
        let mut h = Holder::default();
        h.t = a;
        h.u = x.exp();
        let y = h.u.exp();
        remat! { needs h.t; }
        h.t.exp()
    });
}

#[test]
fn assigned_in_one_branch() {
    refused(
        quote! {
            let a;
            if c { a = remat!(save f: f(x)); } else { a = x.exp(); }
            a.exp()
        },
        "`a` holds the output of `save` region `f`",
    );
    refused(
        quote! {
            let a = match n { 0 => remat!(save f: f(x)), _ => x.exp() };
            a.exp()
        },
        "`save` region `f`",
    );
    // Marked on both paths after the join.
    accepted(quote! {
        let a;
        if c { a = remat!(save f: f(x)); remat! { needs a; } } else { a = x.exp(); }
        a.exp()
    });
}

#[test]
fn carried_into_the_next_iteration() {
    refused(
        quote! {
            let mut h = x.shallow_clone();
            for i in 0..n {
                let y = h.exp();
                h = remat!(save [format!("l{i}")]: f(&y));
            }
            h
        },
        "`h` holds the output of `save` region `[format!(\"l{i}\")]`",
    );
    accepted(quote! {
        let mut h = x.shallow_clone();
        for i in 0..n {
            let y = h.exp();
            h = remat!(save [format!("l{i}")]: f(&y));
            remat! { needs h; }
        }
        h
    });
    // Marking the previous iteration's value does not mark the new one.
    refused(
        quote! {
            let mut prev = x.shallow_clone();
            loop {
                let a = remat!(save [format!("l{n}")]: f(x));
                remat! { needs prev; }
                let y = a.exp();
                prev = a;
                if c { break; }
            }
            prev
        },
        "`a` holds the output",
    );
}

#[test]
fn macros_in_the_body() {
    refused(
        quote! {
            macro_rules! show { () => { println!("{:?}", a) }; }
            let a = remat!(save f: f(x));
            show!();
            x + 1
        },
        "`a` holds the output",
    );
    refused(
        quote! {
            macro_rules! make { ($n:ident) => { let $n = remat!(save f: f(x)); }; }
            make!(a);
            a.exp()
        },
        "the check cannot see the bindings of a `remat!` inside `make!`",
    );
}

#[test]
fn one_part_of_a_multi_tensor_output() {
    refused(
        quote! {
            let (a, b) = remat!(save f: f(x));
            remat! { needs a; }
            let y = a.exp();
            b.exp()
        },
        "`b` holds the output of `save` region `f`",
    );
    refused(
        quote! {
            let parts = remat!(save f: f(x));
            remat! { needs parts.0; }
            let y = parts.0.exp();
            parts.1.exp()
        },
        "`parts.1` is a view of `parts`",
    );
    refused(
        quote! {
            let parts = remat!(save f: f(x));
            remat! { needs parts[0]; }
            parts[1].exp()
        },
        "`parts[1]` is a view of `parts`",
    );
    accepted(quote! {
        let parts = remat!(save f: f(x));
        remat! { needs parts; }
        parts[1].exp()
    });
    accepted(quote! {
        let (a, b) = remat!(save f: f(x));
        remat! { needs a, b; }
        a.exp() + b.exp()
    });
}

#[test]
fn slices_of_save_outputs_passed_to_a_region() {
    accepted(quote! {
        let a = remat!(save f: f(x));
        let b = remat!(save g: g(x));
        remat! { let y = recompute cat: cat(&[a.shallow_clone(), b], 0); }
        y
    });
    accepted(quote! {
        let a = remat!(save f: f(x));
        let y = remat!(recompute cat: cat(&vec![&a, x], 0));
        y
    });
}

#[test]
fn cfg_on_a_remat_statement_is_kept() {
    let out = crate::checkpoint::checkpoint(
        quote!(),
        quote! {
            fn f(x: &Tensor) -> Tensor {
                #[cfg(feature = "extra")]
                remat! { recompute extra: g(x); }
                x + 1
            }
        },
    );
    assert!(errors(&out).is_empty());
    let text = out.to_string();
    assert!(text.contains("# [cfg (feature = \"extra\")]"), "{text}");
    // `needs` under a `cfg` may not run: it does not count.
    refused(
        quote! {
            let a = remat!(save f: f(x));
            #[cfg(feature = "extra")]
            remat! { needs a; }
            a.exp()
        },
        "`a` holds the output",
    );
}

#[test]
fn deep_nesting_is_an_error_not_a_crash() {
    let mut expr = quote!(x);
    for _ in 0..1000 {
        expr = quote!((#expr));
    }
    let errors = checkpoint(quote!(#expr + 1));
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("more than 128 levels deep"),
        "{errors:?}"
    );
    let errors = remat_errors(quote!(let y = #expr;));
    assert!(
        errors[0].contains("more than 128 levels deep"),
        "{errors:?}"
    );
    // Long flat chains are fine up to the expression limit, then an error.
    let mut chain = quote!(x);
    for _ in 0..100 {
        chain = quote!(#chain + x);
    }
    accepted(quote!(#chain));
}

#[test]
fn malformed_let_and_unknown_needs() {
    refused(
        quote! {
            remat! { let a = save; }
            x + 1
        },
        "expected a call after `save`",
    );
    refused(
        quote! {
            remat! { let attn = save attention: f(x); needs atn; }
            attn
        },
        "`atn` is not a local name in this checkpoint",
    );
    refused(
        quote! {
            remat! { let attn = save attention: f(x); needs atn; }
            attn
        },
        "did you mean `attn`?",
    );
}

// ------------------------------------------------------ more shapes, ours

#[test]
fn more_shapes_refused() {
    let cases: Vec<(TokenStream, &str)> = vec![
        // A struct literal carrying a save output, read through its field.
        (
            quote! { let a = remat!(save f: f(x)); let s = S { t: a, n }; s.t.exp() },
            "`s.t` is a view of `a`",
        ),
        // A tuple built from save outputs, destructured later.
        (
            quote! { let a = remat!(save f: f(x)); let t = (a, x.exp()); let (p, q) = t; p.exp() },
            "`p` is a view of `a`",
        ),
        // `if let` on an `Option` holding a save output.
        (
            quote! { let o = Some(remat!(save f: f(x))); if let Some(t) = o { t.exp(); } x + 1 },
            "`t` holds the output",
        ),
        // A `while` loop carrying the value.
        (
            quote! {
                let mut h = x.shallow_clone();
                let mut i = 0;
                while i < n { let y = h.exp(); h = remat!(save [i]: f(&y)); i += 1; }
                h
            },
            "`h` holds the output",
        ),
        // Read after a labelled break out of nested loops.
        (
            quote! {
                let mut h = x.shallow_clone();
                'outer: for i in 0..n { for j in 0..n { h = remat!(save [i + j]: f(x)); break 'outer; } }
                h.exp()
            },
            "`h` holds the output",
        ),
        // A closure returning a save output, called twice: the mark of the
        // first call's output does not cover the second.
        (
            quote! {
                let g = || remat!(save [n]: f(x));
                let a = g();
                remat! { needs a; }
                let b = g();
                a.exp() + b.exp()
            },
            "`b`",
        ),
        // Iterating over a Vec output.
        (
            quote! { let parts = remat!(save f: f(x)); for p in parts.iter() { p.exp(); } x + 1 },
            "`p` is an element of `parts`, the output of `save` region `f`, which is skipped on replay; add `needs p;` before this read",
        ),
        // Stored into `self`: escapes, a read.
        (
            quote! { let a = remat!(save f: f(x)); self.cache.set(a); x + 1 },
            "`a` holds the output",
        ),
        // Passed to a helper.
        (
            quote! { let a = remat!(save f: f(x)); helper(&a) },
            "`a` holds the output",
        ),
        // A match arm binding a tuple part.
        (
            quote! { let t = remat!(save f: f(x)); match t { (p, _) => p.exp() } },
            "`p` is a view of `t`",
        ),
        // A mark only inside a loop body that may not run.
        (
            quote! {
                let a = remat!(save f: f(x));
                for _ in 0..n { remat! { needs a; } }
                a.exp()
            },
            "`a` holds the output",
        ),
        // A mark in a recomputation-only branch does nothing (issue 19:
        // this case was the forward-only one, backwards).
        (
            quote! {
                let a = remat!(save f: f(x));
                if is_recomputing() { remat! { needs a; } }
                a.exp()
            },
            "`a` holds the output",
        ),
        // `needs` on one of two possible values marks neither.
        (
            quote! {
                let a = remat!(save f: f(x));
                let b = remat!(save g: g(x));
                let h = if c { a.shallow_clone() } else { b.shallow_clone() };
                remat! { needs h; }
                a.exp()
            },
            "`a` holds the output",
        ),
        // Compound assignment reads.
        (
            quote! { let a = remat!(save f: f(x)); let mut y = x.exp(); y += &a; y },
            "`a` holds the output",
        ),
        // A run-time policy region is a possible save.
        (
            quote! { let a = remat!(region [self.policy] f: f(x)); a.exp() },
            "region `f` (its policy `[self.policy]` may be `Save`)",
        ),
        // Its receiver is captured, as for `recompute`.
        (
            quote! { let a = remat!(save f: f(x)); let b = remat!(region [self.policy] g: a.matmul(x)); b },
            "`region` region `g` reads it through its receiver",
        ),
        // Unchecked macro tokens containing `remat!`.
        (
            quote! { my_block! { remat! { let a = save f: f(x); } } x + 1 },
            "inside `my_block!`",
        ),
        // A let-else's binding.
        (
            quote! { let Some(t) = Some(remat!(save f: f(x))) else { return x + 1; }; t.exp() },
            "`t` holds the output",
        ),
        // Shadowing in an inner block, then the outer one read.
        (
            quote! { let a = remat!(save f: f(x)); { let a = x.exp(); remat! { needs a; } } a.exp() },
            "`a` holds the output",
        ),
    ];
    for (body, part) in cases {
        refused(body, part);
    }
}

#[test]
fn more_shapes_accepted() {
    let cases: Vec<TokenStream> = vec![
        // Reassigning a carried value to a computed one clears it.
        quote! {
            let mut h = remat!(save f: f(x));
            h = x.exp();
            h.exp()
        },
        // A struct field overwritten by a computed value.
        quote! {
            let mut s = S { t: remat!(save f: f(x)) };
            s.t = x.exp();
            s.t.exp()
        },
        // Marking through a view marks the value.
        quote! {
            let a = remat!(save f: f(x));
            let v = a.view([-1]);
            remat! { needs v; }
            a.exp()
        },
        // Metadata through a tuple part.
        quote! {
            let (a, b) = remat!(save f: f(x));
            let s = a.size();
            b.dim();
            x + 1
        },
        // Returned from inside a match and a loop break path.
        quote! {
            let a = remat!(save f: f(x));
            match n { 0 => a, _ => x.exp() }
        },
        // Marked before a loop, read in it.
        quote! {
            let a = remat!(save f: f(x));
            remat! { needs a; }
            let mut y = x.exp();
            for _ in 0..n { y = &y + &a; }
            y
        },
        // A save output passed through `Some` and a slice to regions.
        quote! {
            let a = remat!(save f: f(x));
            let y = remat!(recompute g: g(Some(&a), &[a.shallow_clone()]));
            y
        },
        // A mark in a forward-only branch runs on the forward, where it
        // keeps the value (issue 19; refused before, by a backwards rule).
        quote! {
            let a = remat!(save f: f(x));
            if !is_recomputing() { remat! { needs a; } }
            a.exp()
        },
        // Forward-only code.
        quote! {
            let a = remat!(save f: f(x));
            if !is_recomputing() { println!("{a}"); }
            x + 1
        },
        // A run-time policy region's output, marked.
        quote! {
            let a = remat!(region [self.policy] f: f(x));
            remat! { needs a; }
            a.exp()
        },
        // Unchecked statement.
        quote! {
            let a = remat!(save f: f(x));
            #[remat(unchecked)]
            let y = helper(&a);
            y
        },
        // Per-iteration value, marked each time, read in the same iteration.
        quote! {
            let mut out = Vec::new();
            for i in 0..n {
                let a = remat!(save [i]: f(x));
                remat! { needs a; }
                out.push(a.exp());
            }
            x + 1
        },
        // `continue` before the read.
        quote! {
            for i in 0..n {
                let a = remat!(save [i]: f(x));
                if c { continue; }
                remat! { needs a; }
                a.exp();
            }
            x + 1
        },
        // A closure whose result is marked after each call.
        quote! {
            let g = || remat!(save [n]: f(x));
            let a = g();
            remat! { needs a; }
            a.exp()
        },
        // Names the check cannot see after an unknown statement macro.
        quote! {
            define!(z);
            remat! { needs z; }
            x + 1
        },
    ];
    for body in cases {
        accepted(body);
    }
}

/// Every identifier of an expansion (error messages are literals, not
/// identifiers).
fn idents(tokens: TokenStream) -> Vec<String> {
    let mut out = Vec::new();
    for token in tokens {
        match token {
            proc_macro2::TokenTree::Ident(ident) => out.push(ident.to_string()),
            proc_macro2::TokenTree::Group(group) => out.extend(idents(group.stream())),
            _ => {}
        }
    }
    out
}

/// Issue 8's leftovers: after our error for `let a = save;` or for `needs`
/// of an unknown name, the expansion must not name them any more, or rustc
/// reports them again (E0425). `let a = save;` binds `a` to the error
/// itself, so later uses of `a` are not reported either.
#[test]
fn missing_call_and_unknown_needs_leave_no_name_for_rustc() {
    let expand = |body: TokenStream| {
        crate::checkpoint::checkpoint(
            quote!(),
            quote!(fn forward(&self, x: &Tensor) -> Tensor { #body }),
        )
    };
    let out = expand(quote! {
        remat! { let a = save; }
        remat! { let attn = save attention: f(x); needs atn, attn; }
        let y = { remat! { let b = recompute; needs bb; } };
        // In the bare code of another invocation.
        remat! { let z = { remat! { needs cc; } 1 }; }
        x + &a + attn
    });
    let messages = errors(&out);
    assert_eq!(messages.len(), 5, "{messages:#?}");
    for message in &messages[..3] {
        assert!(message.contains("is not a local name"), "{messages:#?}");
    }
    assert!(messages[3].contains("expected a call after `save`"));
    assert!(messages[4].contains("expected a call after `recompute`"));
    let names = idents(out);
    for gone in ["save", "recompute", "atn", "bb", "cc"] {
        assert!(
            !names.iter().any(|i| i == gone),
            "`{gone}` is still in the expansion"
        );
    }
    // `needs atn, attn;` keeps the call for `attn`; `a` is still bound.
    assert!(names.iter().any(|i| i == "attn") && names.iter().any(|i| i == "a"));

    // The same in a standalone block.
    let out = crate::expand::remat(quote! { let a = save; needs a; });
    assert_eq!(errors(&out).len(), 1, "{:#?}", errors(&out));
    assert!(!idents(out).iter().any(|i| i == "save"));

    // A local named `save` makes it ordinary Rust, kept as written.
    let out = expand(quote! {
        let save = x.shallow_clone();
        remat! { let a = save; }
        a
    });
    assert!(errors(&out).is_empty(), "{:#?}", errors(&out));
    assert_eq!(idents(out).iter().filter(|i| *i == "save").count(), 2);

    // After a statement macro that might bind it, `needs` of the name is
    // left to rustc, call included.
    let out = expand(quote! {
        make_local!(atn);
        remat! { needs atn; }
        x + 1
    });
    assert!(errors(&out).is_empty(), "{:#?}", errors(&out));
    assert!(idents(out).iter().filter(|i| *i == "atn").count() == 2);
}
