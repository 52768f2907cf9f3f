//! Issue 19's holes, continued (see `holes`): a `needs` counted only where
//! it runs on the forward, `#[cfg]`'d statements as alternatives, and the
//! valid programs the check refused (struct update syntax, tuple struct
//! literals).

use quote::quote;

use super::holes::{accepted, checkpoint, refused};

#[test]
fn needs_counts_only_where_it_runs_on_the_forward() {
    // Issue 19's program: `recompute_needs_tensor` does nothing during
    // recomputation, so this `needs` keeps nothing.
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            if is_recomputing() { remat! { needs a; } }
            a.exp()
        },
        &[
            "`a` holds the output of `save` region `attention`",
            "add `needs a;` before this read",
        ],
    );
    // The `else` of a forward-only test runs on recomputation only.
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            if !remat::is_recomputing() { let y = 1; } else { remat! { needs a; } }
            a.exp()
        },
        &["`a` holds the output of `save` region `attention`"],
    );
    // Nor for a read after it in the same arm.
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            if is_recomputing() { remat! { needs a; } let y = a.exp(); }
            x * 2.0
        },
        &["`a` holds the output of `save` region `attention`"],
    );
    // Reads in the recomputation arm are checked, as before.
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            if is_recomputing() { let y = a.exp(); }
            x * 2.0
        },
        &["`a` holds the output of `save` region `attention`"],
    );
    // The valid variants: a `needs` that runs on the forward counts, in
    // either form of the test, and together with the recomputation arm's
    // own values.
    accepted(quote! {
        remat! { let a = save attention: attention(x); }
        if !is_recomputing() { remat! { needs a; } }
        a.exp()
    });
    accepted(quote! {
        remat! { let a = save attention: attention(x); }
        if is_recomputing() { let y = x.exp(); } else { remat! { needs a; } }
        let h = if !is_recomputing() { remat! { needs a; } a.view([-1]) } else { a.view([-1]) };
        h.exp() + a.exp()
    });
}

#[test]
fn cfg_statements_are_alternatives() {
    // Issue 19's program: either `let` may be the one compiled in, and a
    // removed `let` shadows nothing.
    refused(
        quote! {
            remat! {
                #[cfg(debug_assertions)]
                let attn = save attention: attention(x);
                #[cfg(not(debug_assertions))]
                let attn = recompute attention: attention(x);
            }
            attn.exp()
        },
        &[
            "`attn` holds the output of `save` region `attention`",
            "or pass `attn` to a region",
        ],
    );
    // The same with `let`s of bare code, and with a removed shadowing
    // `let` of a computed value.
    refused(
        quote! {
            #[cfg(debug_assertions)]
            let attn = remat!(save attention: attention(x));
            #[cfg(not(debug_assertions))]
            let attn = remat!(recompute attention: attention(x));
            attn.exp()
        },
        &["`attn` holds the output of `save` region `attention`"],
    );
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            #[cfg(feature = "fast")]
            let a = x.exp();
            a.exp()
        },
        &["`a` holds the output of `save` region `attention`"],
    );
    // An expression statement and a `remat!` block under `#[cfg]`.
    refused(
        quote! {
            let mut h = x * 1.0;
            remat! { let a = save attention: attention(x); }
            #[cfg(debug_assertions)]
            { h = a; }
            h.exp()
        },
        &["`h` is a view of `a`"],
    );
    // The valid variants: the output passed to a region or returned, or
    // marked in the same cfg'd statement that makes it.
    accepted(quote! {
        remat! {
            #[cfg(debug_assertions)]
            let attn = save attention: attention(x);
            #[cfg(not(debug_assertions))]
            let attn = recompute attention: attention(x);
            let y = recompute mlp: mlp(&attn);
        }
        attn
    });
    accepted(quote! {
        #[cfg(debug_assertions)]
        remat! { let attn = save attention: attention(x); needs attn; }
        #[cfg(not(debug_assertions))]
        remat! { let attn = recompute attention: attention(x); }
        attn.exp()
    });
    // The same region name in two cfg'd statements is no duplicate; with
    // a statement that is not cfg'd, it is.
    let errors = checkpoint(quote! {
        remat! {
            #[cfg(debug_assertions)]
            let attn = save attention: attention(x);
            let y = recompute attention: attention(x);
        }
        y
    });
    assert!(
        errors.len() == 1 && errors[0].contains("region name `attention` is used twice"),
        "{errors:#?}"
    );
}

#[test]
fn struct_update_and_tuple_structs_carry_their_parts() {
    // Issue 19's valid programs: `..first` moves the other fields, and the
    // `save` field only goes to a region; a tuple struct literal, marked by
    // its fields.
    accepted(quote! {
        remat! { let a = save attention: attention(x); }
        let first = S { t: a, u: x * 1.0 };
        let second = S { u: x * 2.0, ..first };
        remat! { let y = recompute mlp: mlp(&second.t); }
        y + second.u
    });
    accepted(quote! {
        remat! { let (a, b) = save attention: attention(x); }
        let p = Pair(a, b);
        remat! { needs p.0, p.1; }
        p.0.exp() + p.1.exp()
    });
    // Their parts are still the `save` output.
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            let first = S { t: a, u: x * 1.0 };
            let second = S { u: x * 2.0, ..first };
            second.t.exp()
        },
        &["`second.t` is a view of `a`", "add `needs second.t;`"],
    );
    refused(
        quote! {
            remat! { let (a, b) = save attention: attention(x); }
            let p = P(a, b);
            remat! { needs p.0; }
            p.1.exp()
        },
        &["`p.1` is a view of `b`", "add `needs p.1;`"],
    );
    // A field written over is not the base's.
    accepted(quote! {
        remat! { let a = save attention: attention(x); }
        let first = S { t: a, u: x * 1.0 };
        let second = S { t: x * 2.0, ..first };
        second.t.exp()
    });
    // A snake-case call is a function: its arguments are read.
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            let p = pair(a, x);
            x * 2.0
        },
        &["`a` holds the output of `save` region `attention`"],
    );
}

#[test]
fn a_needed_piece_of_a_split_view_keeps_every_piece() {
    // Issue 19's valid program: the runtime keeps the whole storage, so
    // every piece of the split is served.
    accepted(quote! {
        remat! { let a = save attention: attention(x); }
        let parts = a.chunk(3, 0);
        remat! { needs parts[0]; }
        parts[1].exp() + a.exp()
    });
    accepted(quote! {
        remat! { let a = save attention: attention(x); }
        let parts = a.unbind(0);
        remat! { needs parts[n]; }
        parts[0].exp()
    });
    // Unmarked, a piece is still the output; and the elements of a
    // multi-tensor output are separate tensors, marked one by one.
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            let parts = a.split(2, 0);
            parts[1].exp()
        },
        &["`parts[1]` is a view of `a`", "add `needs parts[1];`"],
    );
    refused(
        quote! {
            remat! { let (a, b) = save attention: attention(x); }
            let parts = a.chunk(2, 0);
            remat! { needs parts[0]; }
            parts[1].exp() + b.exp()
        },
        &["`b` holds the output of `save` region `attention`"],
    );
}
