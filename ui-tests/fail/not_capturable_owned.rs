// Owned parameters and an owned `self` that cannot be captured: each is one
// error, at the parameter, however the value is captured (a named type, a
// type containing `impl Trait`, `self`).
use remat::checkpoint;
use tch::Tensor;

struct Config {
    scale: f64,
}

struct Layer {
    weight: Tensor,
}

impl Layer {
    #[checkpoint]
    fn forward(self, x: &Tensor) -> Tensor {
        x + &self.weight
    }
}

#[checkpoint]
fn owned(x: &Tensor, config: Config) -> Tensor {
    x * config.scale
}

#[checkpoint]
fn opaque(x: &Tensor, scale: Option<impl Fn(f64) -> f64>) -> Tensor {
    match &scale {
        Some(f) => x * f(2.0),
        None => x * 2.0,
    }
}

fn main() {}
