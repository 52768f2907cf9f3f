// Regions in loops take a run-time name (`[format!(..)]`): the runtime
// refuses a name used twice in one run (duplicate_name.rs).
use remat::{checkpoint, remat};
use tch::{Kind, Tensor};

fn layer(h: &Tensor, scale: f64) -> Tensor {
    (h * scale).tanh()
}

#[checkpoint(strict = true)]
fn stack(x: &Tensor, scales: Vec<f64>) -> Tensor {
    let mut h = x.shallow_clone();
    for (i, scale) in scales.iter().enumerate() {
        remat! {
            let y = save [format!("layer.{i}")]: layer(&h, *scale);
            needs y;
        }
        h = &h + y;
    }
    h
}

fn main() {
    let x = Tensor::randn([4], (Kind::Float, tch::Device::Cpu)).set_requires_grad(true);
    let (y, trace) = remat::diagnostics::collect_trace(|| stack(&x, vec![0.5, 1.0, 2.0]));
    assert_eq!(
        trace.to_string(),
        "remat trace\n  layer.0: save\n  layer.1: save\n  layer.2: save\n"
    );
    y.sum(Kind::Float).f_backward().unwrap();
    let g = x.grad().copy();
    let _ = x.grad().zero_();
    let mut h = x.shallow_clone();
    for s in [0.5, 1.0, 2.0] {
        h = &h + layer(&h, s);
    }
    h.sum(Kind::Float).backward();
    assert!(
        g.equal(&x.grad()),
        "the gradients must be bitwise those of the plain version"
    );
}
