//! The compile-time check: every rule of docs/dsl.md, allowed and refused.

use proc_macro2::TokenStream;
use quote::quote;

use super::{assert_one_error, checkpoint_errors, remat_errors};

/// Errors of a `#[checkpoint]` method whose body is `body`.
fn checkpoint(body: TokenStream) -> Vec<String> {
    checkpoint_errors(
        quote!(),
        quote! {
            fn forward(&self, x: &Tensor, mask: Option<&Tensor>, n: usize) -> Tensor { #body }
        },
    )
}

#[track_caller]
fn assert_ok(errors: Vec<String>) {
    assert!(errors.is_empty(), "unexpected errors: {errors:#?}");
}

/// The message for an unmarked read of `var` from region `region`.
fn read_of(var: &str, region: &str) -> [String; 3] {
    [
        format!("`{var}` holds the output of `save` region `{region}`, which is skipped on replay"),
        format!("add `needs {var};` before this read"),
        format!("or pass `{var}` to a region"),
    ]
}

#[track_caller]
fn assert_read(errors: Vec<String>, var: &str, region: &str) {
    let parts = read_of(var, region);
    assert_one_error(
        &errors,
        &parts.iter().map(String::as_str).collect::<Vec<_>>(),
    );
}

// docs/dsl.md, rules X1 and X5: a save output read by bare code is refused.

#[test]
fn bare_read_of_a_save_output_is_refused() {
    assert_read(
        remat_errors(quote! {
            let attn = save attention: self.attention.forward(&h);
            let y = x + &attn;
        }),
        "attn",
        "attention",
    );
    // Every name bound by the pattern is a save output.
    assert_read(
        remat_errors(quote! {
            let (q, k) = save qk: self.qk.forward(&h);
            let s = q.exp();
        }),
        "q",
        "qk",
    );
}

#[test]
fn reads_are_found_in_any_bare_expression() {
    let reads = [
        quote!(let y = attn.sum(Kind::Float);),
        quote!(let y = f(&attn);),
        quote!(let y = if c { attn.exp() } else { x.exp() };),
        quote!(let y = match c { _ => attn.exp() };),
        quote!(let y = [&attn][0].exp();),
        quote!(for _ in 0..2 {
            let y = attn.exp();
        }),
        quote!(let f = || attn.exp();),
        quote!(let y = { let z = 1; attn * z };),
        quote!(attn.copy_(&x);),
        quote!(println!("{:?}", attn);),
        quote!(println!("{attn:?}");),
        quote!(assert!(bool::from(attn.eq(1.0).all()), "{}", 1);),
        quote!(let y = vec![attn.exp(); 2];),
        quote!(let y = self.cache.put(&attn, n);),
    ];
    for read in reads {
        let text = read.to_string();
        let errors = remat_errors(quote! {
            let attn = save attention: self.attention.forward(&h);
            #read
        });
        assert_eq!(errors.len(), 1, "{text}: {errors:#?}");
        assert!(
            errors[0].contains("`attn` holds the output"),
            "{text}: {errors:?}"
        );
    }
}

#[test]
fn the_error_points_at_the_read() {
    let errors = crate::expand::remat(quote! {
        let attn = save attention: self.attention.forward(&h);
        let y = x + attn.exp();
    });
    // The span of the error is the read, `attn`: its tokens are the ones the
    // `compile_error!` is spanned with; here we check the message names it.
    assert_eq!(super::errors(&errors).len(), 1);
}

// docs/dsl.md, rule X2: views of a save output are save outputs.

#[test]
fn read_through_a_view_is_refused() {
    let errors = remat_errors(quote! {
        let attn = save attention: self.attention.forward(&h);
        let v = attn.view([-1, 64]).transpose(0, 1);
        let y = v.sum(Kind::Float);
    });
    assert_one_error(
        &errors,
        &[
            "`v` is a view of `attn`, the output of `save` region `attention`",
            "add `needs v;` before this read",
        ],
    );
}

#[test]
fn every_listed_view_method_makes_a_view() {
    for view in [
        quote!(view([-1])),
        quote!(view_as(&x)),
        quote!(narrow(0, 0, 1)),
        quote!(select(0, 1)),
        quote!(slice(0, 0, 1, 1)),
        quote!(transpose(0, 1)),
        quote!(tr()),
        quote!(permute([1, 0])),
        quote!(unsqueeze(0)),
        quote!(squeeze()),
        quote!(squeeze_dim(0)),
        quote!(expand([2, 2], false)),
        quote!(expand_as(&x)),
        quote!(chunk(2, 0)),
        quote!(split(2, 0)),
        quote!(unbind(0)),
        quote!(i(0)),
        quote!(shallow_clone()),
        quote!(detach()),
        quote!(alias()),
        quote!(view([-1]).tr().detach()),
    ] {
        let text = view.to_string();
        let errors = remat_errors(quote! {
            let a = save s: f(&x);
            let v = a.#view;
            recompute r: g(&v);           // a view passed to a region: fine
            let y = v.exp();              // a view read: refused
        });
        assert_one_error(&errors, &["`v` is a view of `a`"]);
        assert!(!errors[0].is_empty(), "{text}");
    }
    // Not a view: a computation on the value, which is a read.
    assert_read(
        remat_errors(quote! {
            let a = save s: f(&x);
            let v = a.exp();
        }),
        "a",
        "s",
    );
}

#[test]
fn elements_and_fields_of_a_save_output_are_save_outputs() {
    let errors = remat_errors(quote! {
        let parts = save s: f(&x);
        let first = &parts[0];
        recompute r: g(first, &parts.1);
        let y = first.exp();
    });
    assert_one_error(&errors, &["`first` is a view of `parts`"]);
}

// docs/dsl.md, rule X3: allowed uses.

#[test]
fn passing_a_save_output_to_a_region_is_fine() {
    assert_ok(remat_errors(quote! {
        let a = save s: f(&x);
        recompute r1: g(a.shallow_clone());
        recompute r2: g(&a);
        save s2: g(&a, Some(&a), a.view([-1]), &a.chunk(2, 0)[0]);
        let m = recompute mlp: self.mlp.forward(&a);
        let n = remat!(recompute again: self.mlp.forward(&a));
        let k = m + n;
    }));
    // Computing on it in the argument is bare code.
    assert_read(
        remat_errors(quote! {
            let a = save s: f(&x);
            recompute r: g(&(&a + 1));
        }),
        "a",
        "s",
    );
}

#[test]
fn metadata_reads_are_fine() {
    assert_ok(remat_errors(quote! {
        let a = save s: f(&x);
        let shape = a.size();
        let (b, t) = a.size2().unwrap();
        let d = a.dim();
        let k = a.kind();
        let dev = a.device();
        let n = a.numel();
        let g = a.requires_grad();
        let c = a.is_contiguous();
        let s = a.view([-1]).size();
        let v = a.narrow(0, 0, a.size()[0] / 2);
        assert_eq!(a.size(), [2, 3]);
    }));
}

#[test]
fn returning_a_save_output_from_the_checkpoint_is_fine() {
    assert_ok(checkpoint(quote! {
        remat! { let attn = save attention: self.attention.forward(x); }
        attn
    }));
    assert_ok(checkpoint(quote! {
        remat! { let attn = save attention: self.attention.forward(x); }
        if n > 0 { return attn.view([-1]); }
        match n { 0 => attn, _ => { attn } }
    }));
    assert_ok(checkpoint(quote! {
        remat!(save attention: self.attention.forward(x))
    }));
    // Returning from a closure is not returning from the checkpoint.
    assert_read(
        checkpoint(quote! {
            remat! { let attn = save attention: self.attention.forward(x); }
            let f = || { return attn.exp(); };
            x.shallow_clone()
        }),
        "attn",
        "attention",
    );
    // A standalone block does not return from a checkpoint it can see.
    assert_read(
        remat_errors(quote! {
            let attn = save attention: self.attention.forward(x);
            return attn;
        }),
        "attn",
        "attention",
    );
}

#[test]
fn forward_only_branches_are_fine() {
    assert_ok(remat_errors(quote! {
        let a = save s: f(&x);
        if !is_recomputing() { println!("{a:?}"); self.log(&a); }
        if !remat::is_recomputing() { let y = a.exp(); }
        if !(::remat::is_recomputing()) { let y = a.exp(); }
        if is_recomputing() { let y = 1; } else { let y = a.exp(); }
    }));
    // The other branch is checked; a `needs` there would do nothing, so
    // the fix marks the output where it is made.
    assert_one_error(
        &remat_errors(quote! {
            let a = save s: f(&x);
            if !is_recomputing() { let y = 1; } else { let y = a.exp(); }
        }),
        &[
            "`a` holds the output of `save` region `s`",
            "add `needs a;` right after the statement of region `s` (this read runs on \
             recomputation only",
        ],
    );
}

// docs/dsl.md, rule X4: `needs`.

#[test]
fn needs_marks_from_that_statement_on() {
    assert_ok(remat_errors(quote! {
        let attn = save attention: self.attention.forward(&h);
        needs attn;
        let x = x + &attn;
        println!("{attn}");
    }));
    // Before the mark, a read is still refused.
    assert_read(
        remat_errors(quote! {
            let attn = save attention: self.attention.forward(&h);
            let y = attn.exp();
            needs attn;
        }),
        "attn",
        "attention",
    );
}

#[test]
fn a_mark_belongs_to_the_value_and_all_its_views() {
    // Marking the output marks a view made earlier...
    assert_ok(remat_errors(quote! {
        let a = save s: f(&x);
        let v = a.view([-1]);
        needs a;
        let y = v.exp() + a.exp();
    }));
    // ...and marking a view marks the output and later views.
    assert_ok(remat_errors(quote! {
        let a = save s: f(&x);
        let v = a.view([-1]);
        needs v;
        let w = a.tr();
        let y = a.exp() + w.exp();
    }));
    // Several at once.
    assert_ok(remat_errors(quote! {
        let a = save s: f(&x);
        let b = save t: g(&x);
        needs a, &b;
        let y = a + b;
    }));
    // Another output of the same region is another value.
    assert_read(
        remat_errors(quote! {
            let (a, b) = save s: f(&x);
            needs a;
            let y = b.exp();
        }),
        "b",
        "s",
    );
}

#[test]
fn a_mark_lasts_on_every_path_after_it() {
    // `needs` is a statement of `remat!`: in nested bare blocks of a
    // checkpoint it is written `remat! { needs a; }`. The mark belongs to
    // the value, on every path after it: the block's end does not undo it
    // (the runtime keeps the value for the whole replay).
    assert_ok(checkpoint(quote! {
        remat! { let a = save s: f(x); }
        { remat! { needs a; } let y = a.exp(); }
        let z = a.exp();
        z
    }));
    assert_read(
        checkpoint(quote! {
            remat! { let a = save s: f(x); }
            if n > 0 { remat! { needs a; } }
            let z = a.exp();
            z
        }),
        "a",
        "s",
    );
    // `scope` is reporting only, not a Rust scope: its marks and bindings stay.
    assert_ok(remat_errors(quote! {
        scope attn_block {
            let a = save s: f(&x);
            needs a;
        }
        let z = a.exp();
    }));
}

#[test]
fn needs_on_something_that_is_not_a_save_output() {
    let errors = checkpoint(quote! {
        remat! { needs x; }
        x + 1
    });
    assert_one_error(
        &errors,
        &[
            "`needs x;` has no effect",
            "`x` is an input of the checkpoint",
            "Remove it",
        ],
    );
    let errors = remat_errors(quote! {
        let m = recompute mlp: self.mlp.forward(&h);
        needs m;
    });
    assert_one_error(
        &errors,
        &[
            "`needs m;` has no effect",
            "output of `recompute` region `mlp`",
        ],
    );
    // What the check cannot see (a helper's result, a field) is accepted:
    // it may be a save output, and the runtime handles the rest.
    assert_ok(remat_errors(quote! {
        let y = self.helper(&h);
        needs y, self.cache, outer;
    }));
}

// docs/dsl.md, rule X6: shadowing and scopes.

#[test]
fn shadowing_clears_and_sets_as_rust_does() {
    // A new plain `let` of the name is not a save output.
    assert_ok(remat_errors(quote! {
        let a = save s: f(&x);
        let a = x.exp();
        let y = a.exp();
    }));
    // Shadowing by another save: the new value is unmarked.
    let errors = remat_errors(quote! {
        let attn = save first: f(&x);
        needs attn;
        let attn = save second: g(&x);
        let y = attn.exp();
    });
    assert_read(errors, "attn", "second");
    // Shadowing in an inner block ends with it.
    assert_read(
        remat_errors(quote! {
            let a = save s: f(&x);
            { let a = x.exp(); let y = a.exp(); }
            let z = a.exp();
        }),
        "a",
        "s",
    );
    // Patterns of closures, `for`, `match` and `if let` shadow too.
    assert_ok(remat_errors(quote! {
        let a = save s: f(&x);
        let g = |a: &Tensor| a.exp();
        for a in xs.iter() { a.exp(); }
        match o { Some(a) => a.exp(), None => x.exp() };
        if let Some(a) = o { a.exp(); }
    }));
}

#[test]
fn assignment_rebinds_the_name() {
    assert_ok(remat_errors(quote! {
        let mut a = save s: f(&x);
        a = x.exp();
        let y = a.exp();
    }));
}

// docs/dsl.md, rule X7: `#[remat(unchecked)]`.

#[test]
fn unchecked_statements_are_not_checked() {
    assert_ok(remat_errors(quote! {
        let a = save s: f(&x);
        #[remat(unchecked)]
        let y = a.exp();
        #[remat(unchecked)]
        println!("{a}");
        #[remat(unchecked)]
        recompute r: a.matmul(&x);
        #[remat(unchecked)]
        scope s2 { let z = a.exp(); }
    }));
    // It applies to its statement only.
    assert_read(
        remat_errors(quote! {
            let a = save s: f(&x);
            #[remat(unchecked)]
            let y = a.exp();
            let z = a.exp();
        }),
        "a",
        "s",
    );
    // Inside a checkpoint, on bare statements at any depth; and it is stripped.
    let out = crate::checkpoint::checkpoint(
        quote!(),
        quote! {
            fn f(x: &Tensor) -> Tensor {
                remat! { let a = save s: g(x); }
                if true {
                    #[remat(unchecked)]
                    let y = a.exp();
                }
                x + 1
            }
        },
    );
    assert_ok(super::errors(&out));
    assert!(!out.to_string().contains("remat (unchecked)"), "{out}");
}

#[test]
fn malformed_remat_attributes_in_bare_code() {
    let errors = checkpoint(quote! {
        #[remat(skip)]
        let y = x + 1;
        y
    });
    assert_one_error(&errors, &["unknown `remat` option"]);
}

// A `recompute` region's receiver is captured, not an input.

#[test]
fn recompute_receiver_reading_a_save_output_is_refused() {
    let errors = remat_errors(quote! {
        let a = save s: f(&x);
        let y = recompute r: a.matmul(&w);
    });
    assert_one_error(
        &errors,
        &[
            "`a` holds the output of `save` region `s`",
            "`recompute` region `r` reads it through its receiver",
            "pass `a` as an argument",
        ],
    );
    // A skipped `save` region never evaluates it on replay.
    assert_ok(remat_errors(quote! {
        let a = save s: f(&x);
        let y = save r: a.matmul(&w);
    }));
}

// A `remat!(save ...)` expression read in place.

#[test]
fn inline_save_output_read_in_place_is_refused() {
    let errors = checkpoint(quote! {
        let y = remat!(save attention: self.attention.forward(x)) + 1;
        y
    });
    assert_one_error(
        &errors,
        &[
            "reads the output of `save` region `attention` in place",
            "let x = save attention",
        ],
    );
    // Bound by `let`, it is a save output like any other.
    assert_read(
        checkpoint(quote! {
            let a = remat!(save attention: self.attention.forward(x));
            let y = a.exp();
            y
        }),
        "a",
        "attention",
    );
}

// The whole checkpoint body is one check.

#[test]
fn checkpoint_check_spans_blocks_and_bare_code() {
    assert_read(
        checkpoint(quote! {
            let h = self.ln1.forward(x);
            remat! { let attn = save attention: self.attention.forward(&h); }
            let y = attn.exp();
            remat! { needs attn; }
            y
        }),
        "attn",
        "attention",
    );
    // The example of docs/dsl.md.
    assert_ok(checkpoint(quote! {
        let h = self.ln1.forward(x);
        remat! {
            let attn = save attention: self.attention.forward(&h);
            needs attn;
            let x = x + &attn;
            let m = recompute mlp: self.mlp.forward(&self.ln2.forward(&x));
        }
        x + m
    }));
    // `remat!` nested in bare code, and bare code nested in `remat!`.
    assert_read(
        checkpoint(quote! {
            if n > 0 {
                remat! {
                    let a = save s: f(x);
                    for i in 0..n { let y = a.exp(); }
                }
            }
            x + 1
        }),
        "a",
        "s",
    );
}

#[test]
fn standalone_blocks_check_only_themselves() {
    // A name from outside the block is not known to be a save output.
    assert_ok(remat_errors(quote! {
        let y = attn.exp();
        needs attn;
    }));
}

// Duplicate static names.

#[test]
fn duplicate_static_names_are_refused() {
    let errors = checkpoint(quote! {
        remat! {
            let a = save attention: self.attention.forward(x);
            let b = recompute attention: self.other.forward(x);
        }
        x + 1
    });
    assert_one_error(
        &errors,
        &["region name `attention` is used twice in this checkpoint"],
    );
    // Across blocks, default names included.
    let errors = checkpoint(quote! {
        remat! { save self.attention.forward(x); }
        remat! { save "attention": f(x); }
        x + 1
    });
    assert_one_error(
        &errors,
        &["region name `attention` is used twice in this checkpoint"],
    );
    let errors = remat_errors(quote! {
        save mlp: f(x);
        scope s { recompute mlp: g(x); }
    });
    assert_one_error(
        &errors,
        &["region name `mlp` is used twice in this `remat!` block"],
    );
}

#[test]
fn names_in_loops_and_exclusive_branches_are_not_duplicates() {
    assert_ok(checkpoint(quote! {
        for (i, layer) in self.layers.iter().enumerate() {
            remat! { save [format!("layer.{i}")]: layer.forward(x); }
            remat! { save same: layer.forward(x); }
        }
        while n > 0 { remat! { save same: f(x); } }
        loop { remat! { save same: f(x); } break; }
        let f = || { remat!(save same: f(x)); };
        if n > 0 {
            remat! { save branch: f(x); }
        } else if n < 0 {
            remat! { save branch: g(x); }
        } else {
            remat! { save branch: h(x); }
        }
        match n {
            0 => remat!(save arm: f(x)),
            _ => remat!(save arm: g(x)),
        }
    }));
    // After the branches, both are taken.
    let errors = checkpoint(quote! {
        if n > 0 { remat! { save branch: f(x); } }
        remat! { save branch: g(x); }
        x + 1
    });
    assert_one_error(&errors, &["region name `branch` is used twice"]);
    // Dynamic names are not compared.
    assert_ok(checkpoint(quote! {
        remat! { save [name()]: f(x); save [name()]: g(x); }
        x + 1
    }));
}

#[test]
fn every_error_is_reported() {
    let errors = checkpoint(quote! {
        remat! {
            let a = save s: f(x);
            let b = save s: g(x);
        }
        let y = a.exp() + b.exp();
        y
    });
    assert_eq!(errors.len(), 3, "{errors:#?}");
}

#[test]
fn auto_outputs_are_possible_save_outputs() {
    // Read unmarked: refused, naming the plan.
    let errors = checkpoint(quote! {
        let a = remat!(auto attention: self.attention.forward(x));
        a + 1
    });
    assert_one_error(
        &errors,
        &[
            "`a` holds the output of `auto` region `attention` (the active plan may make it `Save`)",
            "add `needs a;` before this read",
        ],
    );
    // Marked, or passed to a region: accepted.
    assert_ok(checkpoint(quote! {
        remat! {
            let a = auto attention: self.attention.forward(x);
            let m = recompute mlp: self.mlp.forward(&a);
            needs a;
        }
        a + m
    }));
    // The receiver is captured, as for `recompute`: an unmarked save output
    // there is a read.
    let errors = remat_errors(quote! {
        let s = save s: make(x);
        let y = auto f: s.forward(x);
    });
    assert_one_error(&errors, &["`auto` region `f` reads it"]);
}

#[test]
fn malformed_auto_is_refused() {
    assert_one_error(
        &remat_errors(quote!(let a = auto;)),
        &["expected a call after `auto`"],
    );
    assert_one_error(
        &checkpoint_errors(
            quote!(auto = true),
            quote!(
                fn f(x: &Tensor) -> Tensor {
                    x + 1
                }
            ),
        ),
        &["`auto` takes no value"],
    );
    assert_one_error(
        &checkpoint_errors(
            quote!(enabled = self.on, auto),
            quote!(
                fn f(&self, x: &Tensor) -> Tensor {
                    x + 1
                }
            ),
        ),
        &["`auto` and `enabled` both decide whether the checkpoint is on"],
    );
}
