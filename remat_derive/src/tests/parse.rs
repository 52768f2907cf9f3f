//! The parser: statement classification, names, and malformed input.

use proc_macro2::TokenStream;
use quote::{quote, ToTokens};

use super::{assert_one_error, remat_errors};
use crate::name::Name;
use crate::remat_block::ast::{Call, Invocation, PolicyKind, Stmt};
use crate::remat_block::parse::parse_invocation;

fn stmts(tokens: TokenStream) -> Vec<Stmt> {
    match parse_invocation(tokens) {
        (Invocation::Stmts(stmts), None) => stmts,
        (Invocation::Stmts(_), Some(error)) => panic!("unexpected error: {error}"),
        (Invocation::Expr(_), _) => panic!("parsed as the expression form"),
    }
}

fn kinds(tokens: TokenStream) -> Vec<&'static str> {
    stmts(tokens)
        .iter()
        .map(|stmt| match stmt {
            Stmt::Region(r) if r.pat.is_some() => "let-region",
            Stmt::Region(_) => "region",
            Stmt::Needs(_) => "needs",
            Stmt::Scope(_) => "scope",
            Stmt::Bare(_) => "bare",
        })
        .collect()
}

fn static_name(name: &Name) -> String {
    match name {
        Name::Static { value, .. } => value.clone(),
        Name::Dynamic(expr) => format!("[{}]", expr.to_token_stream()),
    }
}

/// The name of the single region in `tokens`, a statement.
fn region_name(tokens: TokenStream) -> String {
    match &stmts(tokens)[..] {
        [Stmt::Region(r)] => static_name(&r.region.name),
        _ => panic!("expected one region statement"),
    }
}

#[test]
fn expression_form_is_one_region_without_semicolon() {
    let (invocation, errors) = parse_invocation(quote!(save attention: self.attention.forward(&h)));
    assert!(errors.is_none());
    let Invocation::Expr(region) = invocation else {
        panic!("expected the expression form")
    };
    assert!(region.policy.kind == PolicyKind::Save);
    assert_eq!(static_name(&region.name), "attention");
    assert!(matches!(region.call, Call::Method(_)));

    // With a semicolon it is a block of one statement.
    assert_eq!(
        kinds(quote!(save attention: self.attention.forward(&h);)),
        ["region"]
    );
}

#[test]
fn statement_kinds() {
    let kinds = kinds(quote! {
        let h = self.ln1.forward(x);
        let attn = save attention: self.attention.forward(&h);
        needs attn;
        needs attn, h;
        recompute mlp: self.mlp.forward(&h);
        let v = auto value: self.v.forward(&h);
        region [policy] proj: self.proj.forward(&h);
        scope decoder { recompute proj: self.proj.forward(&h); }
        scope "enc" {}
        scope [format!("s{}", i)] { needs attn; }
        for i in 0..3 { println!("{i}"); }
        x + 1
    });
    assert_eq!(
        kinds,
        [
            "bare",
            "let-region",
            "needs",
            "needs",
            "region",
            "let-region",
            "region",
            "scope",
            "scope",
            "scope",
            "bare",
            "bare"
        ]
    );
}

#[test]
fn keywords_used_as_ordinary_names_stay_rust() {
    // `save`, `recompute`, `needs` and `scope` are not Rust keywords: as
    // variables or functions they are bare code.
    let kinds = kinds(quote! {
        let save = 1;
        let y = save(x);
        let z = save + 1;
        let w = save as i64;
        save.push(1);
        recompute::run(x);
        needs.push(x);
        needs = false;
        let needs = 2;
        scope[0] = 1;
        scope.enter();
        let r = recompute;
        let a = save;
        let q = auto;
    });
    // `let a = save;` is plain Rust, reading a local named `save` (rustc
    // reports the name if there is none).
    assert_eq!(kinds.len(), 14, "{kinds:?}");
    assert!(kinds.iter().all(|k| *k == "bare"), "{kinds:?}");
}

#[test]
fn region_names() {
    assert_eq!(
        region_name(quote!(save attention: self.attention.forward(&h);)),
        "attention"
    );
    assert_eq!(
        region_name(quote!(save "layers.0.attn": self.attention.forward(&h);)),
        "layers.0.attn"
    );
    assert_eq!(region_name(quote!(save r#type: kind(&h);)), "type");
    assert_eq!(
        region_name(quote!(save [format!("l{}", i)]: self.attention.forward(&h);)),
        "[format ! (\"l{}\" , i)]"
    );
}

#[test]
fn default_names_come_from_the_callee() {
    assert_eq!(region_name(quote!(save attention(&h);)), "attention");
    assert_eq!(region_name(quote!(save ops::rope(&q);)), "rope");
    assert_eq!(
        region_name(quote!(save self.attention.forward(&h);)),
        "attention"
    );
    assert_eq!(
        region_name(quote!(save self.blocks.ffn.forward(&h);)),
        "ffn"
    );
    assert_eq!(region_name(quote!(save mlp.forward(&h);)), "mlp");
    assert_eq!(region_name(quote!(save Self::attend(self, &h);)), "attend");
    assert_eq!(region_name(quote!(save r#ref.forward(&h);)), "ref");

    // Forms that cannot follow the keyword in a statement (`save (` is a
    // call of a function named `save`), checked on the naming rule itself.
    let name = |expr: syn::Expr| {
        let call = match expr {
            syn::Expr::Call(call) => Call::Fn(call),
            syn::Expr::MethodCall(call) => Call::Method(call),
            _ => panic!("not a call"),
        };
        crate::remat_block::parse::default_name::default_name(&call).map(|name| static_name(&name))
    };
    assert_eq!(
        name(syn::parse_quote!((&self.mlp).forward(&h))).as_deref(),
        Some("mlp")
    );
    assert_eq!(
        name(syn::parse_quote!((self.act)(&h))).as_deref(),
        Some("act")
    );
    assert_eq!(
        name(syn::parse_quote!(<T as Op>::apply(&h))).as_deref(),
        Some("apply")
    );
    assert_eq!(name(syn::parse_quote!(self.forward(&h))), None);
    assert_eq!(name(syn::parse_quote!((self.f())(&h))), None);
}

#[test]
fn no_clear_default_name_requires_one() {
    for tokens in [
        quote!(save self.forward(&h);),
        quote!(save self.layers[i].forward(&h);),
        quote!(save self.0.forward(&h);),
        quote!(save self.get().forward(&h);),
    ] {
        let errors = remat_errors(tokens);
        assert_one_error(
            &errors,
            &["cannot name this region after its callee", "save NAME:"],
        );
    }
}

#[test]
fn code_in_messages_is_spaced_as_written() {
    for (tokens, text) in [
        (
            quote!(self.layers[i].forward(&h, -1)),
            "self.layers[i].forward(&h, -1)",
        ),
        (
            quote!(format!("layers.{}", self.index)),
            "format!(\"layers.{}\", self.index)",
        ),
        (
            quote!(a::b(x + &y, x == 2) as f64),
            "a::b(x + &y, x == 2) as f64",
        ),
        (quote!(t.view([b * t, -1])), "t.view([b * t, -1])"),
    ] {
        assert_eq!(crate::remat_block::parse::compact::compact(&tokens), text);
    }
    let errors = remat_errors(quote!(save self.layers[i].forward(&h);));
    assert_one_error(&errors, &["`save NAME: self.layers[i].forward(&h)`"]);
}

#[test]
fn let_with_type_and_attributes() {
    let stmts = stmts(quote! {
        #[allow(unused)]
        let (a, b): (Tensor, Tensor) = save pair: self.split(&h);
    });
    let [Stmt::Region(r)] = &stmts[..] else {
        panic!("expected one region")
    };
    assert_eq!(r.attrs.len(), 1, "attributes are kept");
    assert_eq!(
        r.pat.to_token_stream().to_string(),
        "(a , b) : (Tensor , Tensor)"
    );
}

#[test]
fn nested_scopes_parse_their_statements() {
    let stmts = stmts(quote! {
        scope outer {
            let a = save one: f(&x);
            scope inner { needs a; recompute two: g(&a); }
        }
    });
    let [Stmt::Scope(outer)] = &stmts[..] else {
        panic!("expected a scope")
    };
    assert_eq!(static_name(&outer.name), "outer");
    assert_eq!(outer.stmts.len(), 2);
    let Stmt::Scope(inner) = &outer.stmts[1] else {
        panic!("expected a nested scope")
    };
    assert_eq!(inner.stmts.len(), 2);
}

#[test]
fn malformed_statements() {
    let cases: Vec<(TokenStream, &[&str])> = vec![
        (
            quote!(let x = save attention: ;),
            &["expected a call after `save`", "let attn = save attention:"],
        ),
        (quote!(save attention:), &["expected a call after `save`"]),
        (
            quote!(save attention: 1 + 2;),
            &["runs one call or method call, and this is not one"],
        ),
        (
            quote!(recompute mlp: x.f()?;),
            &["`recompute` region runs one call"],
        ),
        (
            quote!(save attention: f(x) let y = 1;),
            &["expected `;` after the `save` region statement"],
        ),
        (
            quote!(save attention self.attention.forward(&h);),
            &["expected `:` after the region name"],
        ),
        (
            quote!(save [name] f(x);),
            &["expected `:` after the region name"],
        ),
        (
            quote!(save []: f(x);),
            &["expected an expression giving the region name"],
        ),
        (
            quote!(save [a, b]: f(x);),
            &["expected one expression giving the region name"],
        ),
        (quote!(save "": f(x);), &["a region name must not be empty"]),
        (
            quote!(save 12: f(x);),
            &["a region name is an identifier, a string literal or `[expr]`"],
        ),
        (quote!(needs;), &["expected `needs x;` or `needs x, y;`"]),
        (quote!(needs a b;), &["expected `,` or `;` here"]),
        (quote!(scope {}), &["expected `scope NAME { ... }`"]),
        (quote!(scope name;), &["expected `{` after the scope name"]),
        (quote!(scope "": {}), &["a scope name must not be empty"]),
        (
            quote!(#![allow(unused)] let y = 1;),
            &["inner attributes are not supported in `remat!`"],
        ),
        (quote!(#![remat(unchecked)] let y = 1;), &[GONE]),
        (quote!(#[remat(unchecked)] needs a;), &[GONE]),
        (
            quote!(#[inline] scope s {}),
            &["a `scope` takes no attributes"],
        ),
        (
            quote!(needs a.0;),
            &[
                "`needs` rebinds a local name to its marked value, and `a.0` is not one",
                "`::remat::needs(&a.0)`",
            ],
        ),
        (
            quote!(needs &a;),
            &["`needs` takes the name itself: `needs a;`"],
        ),
        (quote!(needs a, self.b;), &["and `self.b` is not one"]),
        (quote!(needs a, v[0], b;), &["and `v[0]` is not one"]),
        (quote!(needs f(a);), &["and `f(a)` is not one"]),
        (quote!(needs crate::a;), &["and `crate::a` is not one"]),
    ];
    for (tokens, parts) in cases {
        let text = tokens.to_string();
        let errors = remat_errors(tokens);
        assert_eq!(errors.len(), 1, "{text}: {errors:#?}");
        for part in parts {
            assert!(
                errors[0].contains(part),
                "{text}: {:?} lacks {part:?}",
                errors[0]
            );
        }
    }
}

#[test]
fn malformed_statements_are_skipped_and_the_rest_expands() {
    let tokens = quote! {
        let a = save one: f(&x);
        save two: 1 + 2;
        needs a;
        recompute three: ;
        let b = &a + 1;
    };
    let out = crate::remat_block::remat(tokens);
    let errors = super::errors(&out);
    assert_eq!(errors.len(), 2, "{errors:#?}");
    let text = out.to_string();
    assert!(text.contains("\"one\""), "{text}");
    assert!(text.contains("let a = :: remat :: needs (a) ;"), "{text}");
    assert!(text.contains("let b"), "{text}");
}

#[test]
fn too_many_region_arguments() {
    let errors = remat_errors(quote!(save big: f(a, b, c, d, e, f, g, h, i, j, k, l, m);));
    assert_one_error(&errors, &["at most 12 arguments"]);
    let errors = remat_errors(quote!(save big: f(a, b, c, d, e, f, g, h, i, j, k, l)));
    assert!(errors.is_empty(), "{errors:#?}");
}

#[test]
fn checkpoint_options() {
    use super::checkpoint_errors;
    let item = quote!(
        fn f(x: &Tensor) -> Tensor {
            x + 1
        }
    );
    let ok = [
        quote!(),
        quote!(name = "layers.0"),
        quote!(name = [format!("layers.{}", i)]),
        quote!(state_hooks = [a, b()], determinism = None),
        quote!(determinism = Metadata,),
        quote!(determinism = Bitwise, name = "x", state_hooks = []),
    ];
    for args in ok {
        let errors = checkpoint_errors(args.clone(), item.clone());
        assert!(errors.is_empty(), "{args}: {errors:#?}");
    }
    let bad: Vec<(TokenStream, &str)> = vec![
        (quote!(foo = 1), "unknown `#[checkpoint]` option `foo`"),
        (
            quote!(name = 3),
            "expected `name = \"...\"` or `name = [expr]`",
        ),
        (quote!(name = ""), "a checkpoint name must not be empty"),
        (quote!(name = "a", name = "b"), "`name` is given twice"),
        (
            quote!(determinism = Fast),
            "expected `None`, `Metadata` or `Bitwise`",
        ),
        (
            quote!(state_hooks = a),
            "expected `state_hooks = [expr, ...]`",
        ),
        (quote!(name "x"), "expected `=` after `name`"),
        (quote!("x"), "expected `name = \"...\"`"),
    ];
    for (args, part) in bad {
        let errors = checkpoint_errors(args.clone(), item.clone());
        assert_one_error(&errors, &[part]);
    }
}

#[test]
fn checkpoint_targets() {
    use super::checkpoint_errors;
    let cases: Vec<(TokenStream, &str)> = vec![
        (
            quote!(
                struct S;
            ),
            "`#[checkpoint]` applies to a function or method with a body",
        ),
        (
            quote!(
                fn f(&self) -> Tensor;
            ),
            "`#[checkpoint]` applies to a function or method with a body",
        ),
        (
            quote!(
                async fn f(x: &Tensor) -> Tensor {
                    x + 1
                }
            ),
            "cannot be `async`",
        ),
        (
            quote!(
                const fn f() {}
            ),
            "cannot be `const`",
        ),
        (
            quote!(
                fn f(&mut self, x: &Tensor) -> Tensor {
                    x + 1
                }
            ),
            "cannot take `&mut` parameters",
        ),
        (
            quote!(
                fn f(x: &mut Tensor) -> Tensor {
                    x + 1
                }
            ),
            "cannot take `&mut` parameters",
        ),
        (
            quote!(
                fn f(x: Option<&mut Tensor>) -> Tensor {
                    x + 1
                }
            ),
            "cannot take `&mut` parameters",
        ),
        (
            quote!(
                fn f(c: &mut Cache, x: &Tensor) -> Tensor {
                    x + 1
                }
            ),
            "cannot take `&mut` parameters",
        ),
        (
            quote!(
                #[remat(unchecked)]
                fn f(x: &Tensor) -> Tensor {
                    x + 1
                }
            ),
            GONE,
        ),
        (
            quote!(
                fn f(x: &Tensor) -> Tensor {
                    #![remat(unchecked)]
                    x + 1
                }
            ),
            GONE,
        ),
    ];
    for (item, part) in cases {
        let errors = checkpoint_errors(quote!(), item.clone());
        assert_one_error(&errors, &[part]);
    }
}

/// The start of the error for `#[remat(..)]`, which rustc's types replaced.
const GONE: &str = "`#[remat(..)]` no longer exists: rustc's types decide what bare code may read";

#[test]
fn remat_attribute_is_refused_on_statements() {
    for tokens in [
        quote!(#[remat(unchecked)] let a = save s: f(&x);),
        quote!(#[allow(unused)] #[remat(unchecked)] let a = save s: f(&x);),
        quote!(#[remat(checked)] save a: f(x);),
        quote!(#[remat] recompute a: f(x);),
        quote!(#[remat(unchecked)] scope s { save a: f(x); }),
        quote!(scope s { #[remat(unchecked)] save a: f(x); }),
    ] {
        let text = tokens.to_string();
        let errors = remat_errors(tokens);
        assert_eq!(errors.len(), 1, "{text}: {errors:#?}");
        assert!(errors[0].starts_with(GONE), "{text}: {:?}", errors[0]);
        assert!(
            errors[0].contains("mark the save output with `needs`")
                && errors[0].contains("`.on_forward()`"),
            "{text}: {:?}",
            errors[0]
        );
    }
}

#[test]
fn remat_attribute_is_refused_in_checkpoint_bodies() {
    use super::checkpoint_errors;
    // Anywhere in the body, `remat!` blocks and nested blocks included:
    // one error per attribute, and the attribute is taken out.
    let item = quote!(
        fn f(x: &Tensor) -> Tensor {
            #[remat(unchecked)]
            let y = x.exp();
            remat! {
                #[remat(unchecked)]
                let z = save a: g(&y);
            }
            if c {
                #[remat(unchecked)]
                println!("{}", y);
            }
            y
        }
    );
    let errors = checkpoint_errors(quote!(), item.clone());
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(errors.iter().all(|e| e.starts_with(GONE)), "{errors:#?}");
    let out = crate::checkpoint::checkpoint(quote!(), item).to_string();
    assert!(!out.contains("# [remat"), "{out}");
    assert!(out.contains("let y = x . exp () ;"), "{out}");
    assert!(out.contains("let z = save a : g (& y) ;"), "{out}");
}

#[test]
fn needs_takes_local_names() {
    let stmts = stmts(quote! {
        needs a;
        needs a, b, r#type,;
    });
    let names: Vec<Vec<String>> = stmts
        .iter()
        .map(|stmt| match stmt {
            Stmt::Needs(needs) => needs.names.iter().map(|n| n.to_string()).collect(),
            _ => panic!("expected `needs`"),
        })
        .collect();
    assert_eq!(names, [vec!["a"], vec!["a", "b", "r#type"]]);

    // A name per statement is rebound to its marked value, so that bare
    // code below reads the plain value.
    let out = crate::remat_block::remat(quote!(needs a, b;)).to_string();
    assert_eq!(
        out,
        "let a = :: remat :: needs (a) ; let b = :: remat :: needs (b) ;"
    );
    // It is `let`s: an attribute (a `#[cfg]`, a lint) is kept on each.
    let out = crate::remat_block::remat(quote!(#[cfg(test)] needs a, b;)).to_string();
    assert_eq!(
        out,
        "# [cfg (test)] let a = :: remat :: needs (a) ; # [cfg (test)] let b = :: remat :: needs (b) ;"
    );
}
