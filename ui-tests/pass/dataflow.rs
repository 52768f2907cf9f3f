// A false positive of the old analysis (save outputs in a `Vec` passed to a region:
// the region receives them opened, docs/dsl.md Y3), `#[cfg]` on a `remat!`
// statement, a tuple output marked whole, and a save output marked in a
// loop before it is carried to the next iteration; the gradients equal the
// plain version's.
use remat::{checkpoint, needs, remat};
use tch::{Kind, Tensor};

fn f(h: &Tensor) -> Tensor {
    h.tanh()
}

fn pair(h: &Tensor) -> (Tensor, Tensor) {
    (h.tanh(), h.sigmoid())
}

fn cat(xs: &[Tensor]) -> Tensor {
    Tensor::cat(xs, 0)
}

#[checkpoint(strict = true)]
fn block(x: &Tensor, n: usize) -> Tensor {
    let a = remat!(save a: f(x));
    let b = remat!(save b: f(&(x * 2)));
    let y = remat!(recompute cat: cat(&vec![a.shallow_clone(), b]));
    #[cfg(any())]
    remat! {
        recompute never: panic_region(x);
    }
    let (p, q) = remat!(save pair: pair(x));
    remat! { needs p, q; }
    let mut h = x.shallow_clone();
    for i in 0..n {
        let s = remat!(save [format!("layer{i}")]: f(&h));
        h = needs(s) * 2;
    }
    y.sum(Kind::Float) + (p * q + h).sum(Kind::Float)
}

#[allow(dead_code)]
fn panic_region(_: &Tensor) -> Tensor {
    panic!("a cfg'd-out statement ran")
}

fn plain(x: &Tensor, n: usize) -> Tensor {
    let y = Tensor::cat(&[x.tanh(), (x * 2).tanh()], 0);
    let (p, q) = pair(x);
    let mut h = x.shallow_clone();
    for _ in 0..n {
        h = h.tanh() * 2;
    }
    y.sum(Kind::Float) + (p * q + h).sum(Kind::Float)
}

fn main() {
    let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    block(&x, 3).f_backward().unwrap();
    let g = x.grad().copy();
    let _ = x.grad().zero_();
    plain(&x, 3).backward();
    assert!(
        g.equal(&x.grad()),
        "the gradients must be bitwise those of the plain version"
    );
}
