// Malformed input (adversarial round one): `let a = save;` (plain Rust, in which `save`
// is no value), a `needs` of an unknown name, a region policy that is not a
// `Policy`, and a read of a run-time policy's output (a `Saved<Tensor>`).
use remat::{checkpoint, remat};
use tch::Tensor;

fn f(h: &Tensor) -> Tensor {
    h.tanh()
}

#[checkpoint]
fn missing_call(x: &Tensor) -> Tensor {
    remat! {
        let a = save;
    }
    x + 1
}

#[checkpoint]
fn unknown_needs(x: &Tensor) -> Tensor {
    remat! {
        let attn = save attention: f(x);
        needs atn;
    }
    attn
}

#[checkpoint]
fn wrong_policy(x: &Tensor) -> Tensor {
    remat!(region [true] f: f(x))
}

#[checkpoint]
fn run_time_policy_read(x: &Tensor, p: remat::Policy) -> Tensor {
    let a = remat!(region [p] f: f(x));
    a * 2
}

fn main() {}
