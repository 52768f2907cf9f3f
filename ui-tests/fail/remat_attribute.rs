// `#[remat(...)]`, the old check's escape hatch, is gone: every use of
// it, misspelt or not, inner or on the function, is refused with the same
// message, and the statements it was on are type-checked as written.
use remat::{checkpoint, remat};
use tch::Tensor;

fn attention(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint]
fn block(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: attention(x);
        #[remat(uncheked)]
        let a = attn.relu();
        #[remat]
        let b = attn.sin();
        #[remat(unchecked)]
        needs attn;
    }
    a + b
}

fn standalone(x: &Tensor) {
    remat! {
        #![remat(unchecked)]
        let y = x.relu();
    }
}

#[checkpoint]
#[remat(unchecked)]
fn misplaced(x: &Tensor) -> Tensor {
    x.relu()
}

fn main() {}
