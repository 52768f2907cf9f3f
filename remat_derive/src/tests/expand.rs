//! Snapshots of the generated code (pretty-printed), one per main form, so
//! that any change to an expansion is reviewed. Update with
//! `INSTA_UPDATE=always cargo test -p remat_derive`, then read the diff.

use proc_macro2::TokenStream;
use quote::quote;

use super::{pretty_items, pretty_stmts};

fn remat(input: TokenStream) -> String {
    pretty_stmts(crate::remat_block::remat(input))
}

fn checkpoint(args: TokenStream, item: TokenStream) -> String {
    pretty_items(crate::checkpoint::checkpoint(args, item))
}

fn method(args: TokenStream, item: TokenStream) -> String {
    let out = crate::checkpoint::checkpoint(args, item);
    pretty_items(quote!(impl Block { #out }))
}

fn derive(input: TokenStream) -> String {
    pretty_items(crate::capture::derive(input))
}

#[test]
fn block_with_every_statement() {
    insta::assert_snapshot!(remat(quote! {
        let attn = save attention: self.attention.forward(&h, mask);
        needs attn;
        let x = x + &attn;
        let m = recompute mlp: self.mlp.forward(&self.ln2.forward(&x));
        save "layers.0.proj": ops::project(&m);
        recompute [format!("head.{}", i)]: heads(&x, i);
        #[allow(unused_variables)]
        let (q, k): (Saved<Tensor>, Saved<Tensor>) = save qk: self.qk.forward(&x);
        let v = auto value: self.v.forward(&x);
        let p = region [self.policy(i)] proj: self.proj.forward(&q, &k);
        scope decoder {
            let y = recompute norm: self.norm.forward(&m);
            scope "inner" {
                save out: self.out.forward(&y);
            }
        }
        needs q, k;
        println!("{:?} {:?}", q, k);
        v
    }));
}

#[test]
fn region_without_arguments_and_with_one() {
    insta::assert_snapshot!(remat(quote! {
        let r = recompute rng: self.sample();
        let one = save attention(&h);
    }));
}

#[test]
fn expression_form() {
    insta::assert_snapshot!(remat(quote!(save attention: self.attention.forward(&h))));
}

#[test]
fn checkpoint_method_dsl_example() {
    insta::assert_snapshot!(method(
        quote!(name = [format!("layers.{}", self.index)]),
        quote! {
            fn forward(&self, x: &Tensor) -> Tensor {
                let h = self.ln1.forward(x);
                remat! {
                    let attn = save attention: self.attention.forward(&h);
                    needs attn;
                    let x = x + &attn;
                    let m = recompute mlp: self.mlp.forward(&self.ln2.forward(&x));
                }
                x + m
            }
        },
    ));
}

#[test]
fn checkpoint_method_with_options_and_parameter_kinds() {
    insta::assert_snapshot!(method(
        quote!(
            name = "block",
            state_hooks = [RngHook::new(), self.hook()],
            determinism = Bitwise
        ),
        quote! {
            /// Docs stay.
            #[inline]
            pub fn forward(
                &self,
                x: &Tensor,
                mask: Option<&Tensor>,
                xs: &[Tensor],
                ys: &Vec<Tensor>,
                owned: Tensor,
                mut n: usize,
                cfg: &Config,
                (a, b): (i64, i64),
                _: bool,
            ) -> Tensor {
                let y = remat!(recompute proj: self.proj.forward(x));
                for (i, t) in xs.iter().enumerate() {
                    remat! { save [format!("xs.{i}")]: self.mlp.forward(t); }
                }
                println!("{} {}", self.index, n);
                fn helper(v: &Self) -> usize { v.index }
                y + owned
            }
        },
    ));
}

#[test]
fn checkpoint_free_function_and_owned_receiver() {
    insta::assert_snapshot!(checkpoint(
        quote!(determinism = Metadata),
        quote! {
            pub(crate) fn block(x: Tensor, scale: f64) -> Tensor {
                remat! { let y = save scaled: scale_by(&x, scale); }
                y
            }
        },
    ));
    insta::assert_snapshot!(method(
        quote!(),
        quote! {
            fn consume(mut self, x: &Tensor) -> Tensor {
                self.count += 1;
                remat!(save lin: self.lin.forward(x))
            }
        },
    ));
}

#[test]
fn errors_are_emitted_in_the_function() {
    insta::assert_snapshot!(checkpoint(
        quote!(),
        quote! {
            fn f(x: &Tensor) -> Tensor {
                remat! { let a = save s: g(x); }
                #[remat(unchecked)]
                let b = a.exp();
                b
            }
        },
    ));
}

#[test]
fn checkpoint_return_positions() {
    // Names, tuples of them and `remat!(..)` in return position are
    // wrapped; other expressions, closures' and nested items' returns are
    // not.
    insta::assert_snapshot!(checkpoint(
        quote!(),
        quote! {
            fn f(x: &Tensor, n: usize) -> (Tensor, Tensor) {
                remat! { let a = save s: g(x); let b = recompute t: h(x); }
                if n == 0 {
                    return (a, b);
                }
                let k = |t: Tensor| -> Tensor { return t; };
                fn helper(t: Tensor) -> Tensor { return t; }
                match n {
                    1 => (a, remat!(save u: g(x))),
                    2 => { let c = a; (c, (b)) }
                    _ => if n > 5 { (a, b) } else { unsafe { (a, b) } },
                }
            }
        },
    ));
}

#[test]
fn checkpoint_enabled_runs_the_body_plainly() {
    // The plain branch unwraps with `returned_plain`; its `self` stays.
    insta::assert_snapshot!(method(
        quote!(enabled = self.training),
        quote! {
            fn forward(&self, x: &Tensor) -> Tensor {
                let y = remat!(save a: self.a.forward(x));
                y
            }
        },
    ));
}

#[test]
fn checkpoint_tail_that_is_no_name_keeps_its_type() {
    insta::assert_snapshot!(checkpoint(
        quote!(),
        quote! {
            fn f(xs: &[Tensor]) -> Vec<Tensor> {
                xs.iter().map(|x| x.exp()).collect()
            }
        },
    ));
}

#[test]
fn derive_capture() {
    insta::assert_snapshot!(derive(quote! {
        struct Block<M: Module, const N: usize> where M: Clone {
            index: usize,
            mlp: M,
            weights: [Tensor; N],
        }
    }));
    insta::assert_snapshot!(derive(quote!(
        struct Pair(Tensor, Rc<Config>);
    )));
    insta::assert_snapshot!(derive(quote!(
        struct Marker;
    )));
    insta::assert_snapshot!(derive(quote! {
        enum Act { Relu, Gelu { approximate: bool }, Custom(Rc<dyn Fn(&Tensor) -> Tensor>) }
    }));
    insta::assert_snapshot!(derive(quote!(union U { a: u32 })));
}
