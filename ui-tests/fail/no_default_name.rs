// A region whose callee gives no clear name must be named.
use remat::remat;
use tch::Tensor;

struct Model {
    layers: Vec<Layer>,
}

struct Layer;

impl Layer {
    fn forward(&self, x: &Tensor) -> Tensor {
        x.relu()
    }
}

impl Model {
    fn run(&self, x: &Tensor) -> Tensor {
        remat! {
            let y = recompute self.layers[0].forward(x);
        }
        y
    }
}

fn main() {}
