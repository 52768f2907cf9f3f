// A checkpoint owns everything it uses that is not a tensor input; these
// types cannot be captured.
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
    fn forward(&self, x: &Tensor, config: &Config) -> Tensor {
        x * config.scale + &self.weight
    }
}

fn main() {}
