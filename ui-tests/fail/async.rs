// Adversarial round three (ui-tests/README.md): a `remat!` inside an `async` block, whose bindings
// the old check could not see. rustc type-checks the block as any other:
// the save output is a `Saved<Tensor>` there too. Fix: `needs a;` in the
// block (ui-tests/pass/fixes.rs, `in_async`).
use remat::{checkpoint, remat};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use tch::Tensor;

fn attention(x: &Tensor) -> Tensor {
    x.tanh()
}

fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("nothing here waits"),
    }
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    block_on(async {
        remat! { let a = save attention: attention(x); }
        a.exp() * x
    })
}

fn main() {}
