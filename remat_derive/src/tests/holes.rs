//! Issue 19's holes: programs the check accepted although they read a
//! `save` output during recomputation, each refused now with a message that
//! names the tensor, next to the valid variant of the same program, which
//! stays accepted. One test per hole, named after the construct: here
//! control flow and places (labelled blocks, `&mut` re-borrows, copies
//! taken for views, one element of a vector written); `holes_phase` has
//! `needs` on recomputation, `#[cfg]`, and the valid programs the check
//! refused.

use proc_macro2::TokenStream;
use quote::quote;

use super::checkpoint_errors;

/// Errors of a `#[checkpoint]` method whose body is `body`.
pub(super) fn checkpoint(body: TokenStream) -> Vec<String> {
    checkpoint_errors(
        quote!(),
        quote! {
            fn forward(&self, x: &Tensor, idx: &Tensor, n: usize, c: bool) -> Tensor { #body }
        },
    )
}

/// Asserts one error, containing each of `parts`.
#[track_caller]
pub(super) fn refused(body: TokenStream, parts: &[&str]) {
    let errors = checkpoint(body.clone());
    assert!(
        errors.len() == 1 && parts.iter().all(|p| errors[0].contains(p)),
        "expected one error containing {parts:?} for\n{body}\ngot {errors:#?}"
    );
}

#[track_caller]
pub(super) fn accepted(body: TokenStream) {
    let errors = checkpoint(body.clone());
    assert!(
        errors.is_empty(),
        "unexpected errors for\n{body}\n{errors:#?}"
    );
}

#[test]
fn labelled_blocks_join_their_breaks() {
    // Issue 19's program: the block is left by its `break` only.
    refused(
        quote! {
            let mut h = x * 1.0;
            'b: { remat! { let a = save attention: attention(x); } h = a; break 'b; }
            (&h + x).tanh()
        },
        &["`h` is a view of `a`", "add `needs h;` before this read"],
    );
    // A `break 'found` out of a `for` inside the block, or its end.
    refused(
        quote! {
            let mut h = x * 1.0;
            'found: {
                for i in 0..n {
                    remat! { let a = save [i]: attention(x); }
                    if c { h = a; break 'found; }
                }
                h = x * 2.0;
            }
            (&h + x).tanh()
        },
        &["`h` is a view of `a`"],
    );
    // The value a `break 'b` carries is the block's.
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            let h = 'b: { if c { break 'b a; } x * 2.0 };
            (&h + x).tanh()
        },
        &["`h` is a view of `a`"],
    );
    // The valid variants: marked on the path that leaves, or before it.
    accepted(quote! {
        let mut h = x * 1.0;
        'b: { remat! { let a = save attention: attention(x); needs a; } h = a; break 'b; }
        (&h + x).tanh()
    });
    accepted(quote! {
        let mut h = x * 1.0;
        'b: { remat! { let a = save attention: attention(x); } h = a; break 'b; }
        remat! { needs h; }
        (&h + x).tanh()
    });
    // A `loop`'s value is its `break`'s: returning it is not a read.
    accepted(quote! {
        remat! { let a = save attention: attention(x); }
        loop { if c { break a; } }
    });
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            let h = loop { break a.view([-1]); };
            h.exp()
        },
        &["`h` is a view of `a`"],
    );
}

#[test]
fn writes_through_mut_reborrows_reach_their_target() {
    // Issue 19's program: `r.t = a` writes `s.t`.
    refused(
        quote! {
            let mut s = S { t: x * 1.0 };
            remat! { let a = save attention: attention(x); }
            let r = &mut s; r.t = a;
            (&s.t + x).tanh()
        },
        &[
            "`s.t` is a view of `a`",
            "add `needs s.t;` before this read",
        ],
    );
    // `*r = a` through a reference to a field, and a re-borrow of `r`.
    refused(
        quote! {
            let mut s = S { t: x * 1.0 };
            remat! { let a = save attention: attention(x); }
            let r = &mut s.t; let q = &mut *r; *q = a;
            (&s.t + x).tanh()
        },
        &["`s.t` is a view of `a`"],
    );
    // The KV-cache pattern: an element, by index or by `get_mut`.
    refused(
        quote! {
            let mut cache = vec![S { t: x * 1.0 }];
            remat! { let k = save attention: attention(x); }
            let entry = &mut cache[0]; entry.t = k;
            (&cache[0].t + x).tanh()
        },
        &["the output of `save` region `attention`"],
    );
    refused(
        quote! {
            let mut cache = vec![S { t: x * 1.0 }];
            remat! { let k = save attention: attention(x); }
            let entry = cache.get_mut(0).unwrap(); entry.t = k;
            (&cache[0].t + x).tanh()
        },
        &["the output of `save` region `attention`"],
    );
    refused(
        quote! {
            let mut cache = vec![S { t: x * 1.0 }];
            remat! { let k = save attention: attention(x); }
            for entry in &mut cache { entry.t = k.shallow_clone(); }
            (&cache[0].t + x).tanh()
        },
        &["the output of `save` region `attention`"],
    );
    refused(
        quote! {
            let mut s = S { t: x * 1.0 };
            remat! { let a = save attention: attention(x); }
            let S { ref mut t } = s; *t = a;
            (&s.t + x).tanh()
        },
        &["`s.t` is a view of `a`"],
    );
    // A reference whose target the check cannot name: the write is a read.
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            let r = &mut *self.slot(); r.t = a;
            x * 2.0
        },
        &["`a` holds the output of `save` region `attention`"],
    );
    // The valid variants: marked, or the reference points elsewhere.
    accepted(quote! {
        let mut s = S { t: x * 1.0 };
        remat! { let a = save attention: attention(x); }
        let r = &mut s; r.t = a;
        remat! { needs s.t; }
        (&s.t + x).tanh()
    });
    accepted(quote! {
        let mut s = S { t: x * 1.0 };
        let mut u = S { t: x * 1.0 };
        remat! { let a = save attention: attention(x); }
        let mut r = &mut s; r = &mut u; r.t = a;
        (&s.t + x).tanh()
    });
}

#[test]
fn copies_are_not_views() {
    // Issue 19's programs: `i` with a tensor index is `index_select`, a
    // copy: taking it reads the output, in bare code and in an argument.
    refused(
        quote! {
            remat! { let a = save attention: attention(x); }
            let rows = a.i(idx);
            remat! { needs rows; }
            rows.exp()
        },
        &[
            "`a` holds the output of `save` region `attention`",
            "add `needs a;` before this read",
        ],
    );
    refused(
        quote! {
            remat! {
                let a = save attention: attention(x);
                let m = recompute mlp: mlp(&a.i(idx));
            }
            m
        },
        &["`a` holds the output of `save` region `attention`"],
    );
    // An index the check cannot classify, and the `*_copy` variants that
    // the old prefixes took for views.
    for copy in [
        quote!(i(n)),
        quote!(i(&idx)),
        quote!(i((.., idx))),
        quote!(squeeze_copy()),
        quote!(expand_copy([2, 2], false)),
        quote!(reshape([-1])),
        quote!(contiguous()),
        quote!(flatten(0, -1)),
    ] {
        refused(
            quote! {
                remat! { let a = save attention: attention(x); }
                let v = a.#copy;
                v
            },
            &["`a` holds the output of `save` region `attention`"],
        );
    }
    // The valid variants: the output marked before the copy; and the
    // views of `i` (integers, ranges, `NewAxis`, tuples of them).
    accepted(quote! {
        remat! { let a = save attention: attention(x); needs a; }
        let rows = a.i(idx);
        rows.exp()
    });
    for view in [
        quote!(i(0)),
        quote!(i(-1)),
        quote!(i(n as i64)),
        quote!(i(1..)),
        quote!(i(..)),
        quote!(i((.., 0..2, NewAxis))),
        quote!(squeeze_dim(0)),
        quote!(expand_as(x)),
    ] {
        refused(
            quote! {
                remat! { let a = save attention: attention(x); }
                let v = a.#view;
                v.exp()
            },
            &["`v` is a view of `a`"],
        );
        accepted(quote! {
            remat! { let a = save attention: attention(x); }
            let v = a.#view;
            remat! { needs v; }
            a.exp() + v.exp()
        });
    }
}

#[test]
fn a_call_given_mut_may_return_a_reference_into_it() {
    refused(
        quote! {
            let mut s = S { t: x * 1.0 };
            remat! { let a = save attention: attention(x); }
            let r = slot(&mut s); r.t = a;
            (&s.t + x).tanh()
        },
        &["`s.t` is a view of `a`"],
    );
    refused(
        quote! {
            let mut cache = vec![S { t: x * 1.0 }];
            remat! { let k = save attention: attention(x); }
            let e = self.pick(&mut cache, 0); e.t = k;
            (&cache[0].t + x).tanh()
        },
        &["the output of `save` region `attention`"],
    );
    accepted(quote! {
        let mut s = S { t: x * 1.0 };
        remat! { let a = save attention: attention(x); }
        let r = slot(&mut s); r.t = a;
        remat! { needs a; }
        (&s.t + x).tanh()
    });
}

#[test]
fn writing_one_element_keeps_the_others_unmarked() {
    // Found by the oracle: every index of `p` is one place, and a write to
    // `p[0]` kept what it held as element 0 alone, so the `needs p[0]`
    // before it covered the read of `p[1]`.
    refused(
        quote! {
            let mut p = vec![x * 1.0, x * 1.0];
            'b0: { p = remat!(save [1]: fv(x)); }
            'b1: {
                'b2: { remat! { needs p[0]; } p[0] = x.shallow_clone(); }
                let _ = p[1].exp();
            }
            x * 1.0
        },
        &["`p[1]` is an element of `p`", "add `needs p;`"],
    );
    refused(
        quote! {
            remat! { let mut p = save parts: fv(x); }
            remat! { needs p[0]; }
            p[0] = x.shallow_clone();
            (&p[1] + x).tanh()
        },
        &["`p[1]` is an element of `p`, the output of `save` region `parts`"],
    );
    accepted(quote! {
        remat! { let mut p = save parts: fv(x); }
        remat! { needs p; }
        p[0] = x.shallow_clone();
        (&p[1] + x).tanh()
    });
    accepted(quote! {
        remat! { let mut p = save parts: fv(x); }
        remat! { needs p[0]; }
        (&p[0] + x).tanh()
    });
}
