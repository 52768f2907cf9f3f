// Adversarial round three (ui-tests/README.md): or-patterns (`A(t) | B(t)`) and rest patterns
// (`(first, .., last)`, `[first, .., last]`) in `let`, `match` and
// destructuring assignment, which the old check followed wrongly. Each
// binding has the element's type: a `Saved<Tensor>` (or a reference to
// one), which has no tensor methods. Fix: `needs` the names the pattern
// binds (ui-tests/pass/fixes.rs, `patterns`).
use remat::{checkpoint, remat};
use tch::Tensor;

fn three(x: &Tensor) -> (Tensor, Tensor, Tensor) {
    (x.tanh(), x.sin(), x.cos())
}

fn heads(x: &Tensor) -> Vec<Tensor> {
    x.chunk(4, 0)
}

enum Route<T> {
    Left(T),
    Right(T),
}

#[checkpoint]
fn or_pattern_in_let(x: &Tensor, left: bool) -> Tensor {
    remat! { let (a, b, _) = save three: three(x); }
    let route = if left {
        Route::Left(a)
    } else {
        Route::Right(b)
    };
    let (Route::Left(t) | Route::Right(t)) = route;
    t.exp()
}

#[checkpoint]
fn or_pattern_in_match(x: &Tensor, left: bool) -> Tensor {
    remat! { let (a, b, _) = save three: three(x); }
    let route = if left {
        Route::Left(a)
    } else {
        Route::Right(b)
    };
    match route {
        Route::Left(t) | Route::Right(t) => t * x,
    }
}

#[checkpoint]
fn rest_pattern_in_let(x: &Tensor) -> Tensor {
    remat! { let (first, .., last) = save three: three(x); }
    first.exp() + last
}

#[checkpoint]
fn rest_pattern_in_match(x: &Tensor) -> Tensor {
    remat! { let parts = save heads: heads(x); }
    match parts.as_slice() {
        [first, .., last] => first.exp() + last.exp(),
        _ => x * 1,
    }
}

#[checkpoint]
fn rest_pattern_in_assignment(x: &Tensor) -> Tensor {
    let (mut h, mut g) = (x * 1, x * 2);
    remat! { let (a, b, c) = save three: three(x); }
    (h, .., g) = (a, b, c);
    h * g
}

fn main() {}
