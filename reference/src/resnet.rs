//! A small ResNet-style CNN with batch norm, written in tch's `nn` style
//! with `remat::nn` (the one changed import) and the macros. Shared by
//! `tests/models` and `examples/resnet.rs`.

use remat::nn;
use remat::prelude::*;

/// How the residual blocks run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// No checkpoints.
    Plain,
    /// Each block one checkpoint, replayed whole.
    Whole,
    /// Each block a checkpoint whose first conv + batch norm is a `save` region.
    SaveStem,
}

fn conv3x3(vs: nn::Path, c_in: i64, c_out: i64) -> nn::Conv2D {
    let cfg = nn::ConvConfig {
        padding: 1,
        bias: false,
        ..Default::default()
    };
    nn::conv2d(vs, c_in, c_out, 3, cfg)
}

/// Two 3x3 convolutions with batch norm, and the skip connection.
#[derive(Capture)]
pub struct Block {
    index: usize,
    conv1: nn::Conv2D,
    bn1: nn::BatchNorm,
    conv2: nn::Conv2D,
    bn2: nn::BatchNorm,
}

impl Block {
    pub fn new(vs: &nn::Path, index: usize, c: i64) -> Self {
        Block {
            index,
            conv1: conv3x3(vs / "conv1", c, c),
            bn1: nn::batch_norm2d(vs / "bn1", c, Default::default()),
            conv2: conv3x3(vs / "conv2", c, c),
            bn2: nn::batch_norm2d(vs / "bn2", c, Default::default()),
        }
    }

    fn stem(&self, x: &Tensor) -> Tensor {
        x.apply(&self.conv1).apply_t(&self.bn1, true).relu()
    }

    fn rest(&self, x: &Tensor, h: &Tensor) -> Tensor {
        (h.apply(&self.conv2).apply_t(&self.bn2, true) + x).relu()
    }

    fn plain(&self, x: &Tensor) -> Tensor {
        let h = self.stem(x);
        self.rest(x, &h)
    }

    #[checkpoint(name = [format!("layer{}", self.index)])]
    fn whole(&self, x: &Tensor) -> Tensor {
        let h = self.stem(x);
        self.rest(x, &h)
    }

    #[checkpoint(name = [format!("layer{}", self.index)])]
    fn save_stem(&self, x: &Tensor) -> Tensor {
        remat! {
            let h = save pre: self.stem(x);
            needs h;
        }
        self.rest(x, &h)
    }

    pub fn forward(&self, x: &Tensor, mode: Mode) -> Tensor {
        match mode {
            Mode::Plain => self.plain(x),
            Mode::Whole => self.whole(x),
            Mode::SaveStem => self.save_stem(x),
        }
    }
}

/// Stem conv + batch norm, residual blocks, global pooling, classifier.
pub struct ResNet {
    conv: nn::Conv2D,
    bn: nn::BatchNorm,
    blocks: Vec<Block>,
    fc: nn::Linear,
}

impl ResNet {
    pub fn new(vs: &nn::Path, channels: i64, blocks: usize, classes: i64) -> Self {
        ResNet {
            conv: conv3x3(vs / "conv1", 3, channels),
            bn: nn::batch_norm2d(vs / "bn1", channels, Default::default()),
            blocks: (0..blocks)
                .map(|i| Block::new(&(vs / "layers" / i), i, channels))
                .collect(),
            fc: nn::linear(vs / "fc", channels, classes, Default::default()),
        }
    }

    pub fn forward(&self, images: &Tensor, mode: Mode) -> Tensor {
        let mut x = images.apply(&self.conv).apply_t(&self.bn, true).relu();
        for block in &self.blocks {
            x = block.forward(&x, mode);
        }
        x.adaptive_avg_pool2d([1, 1]).flatten(1, -1).apply(&self.fc)
    }
}

/// A fixed batch: images `[8, 3, 8, 8]` and labels in `0..10`.
pub fn batch() -> (Tensor, Tensor) {
    let g = tch::kind::FLOAT_CPU;
    let images = Tensor::linspace(-2.0, 2.0, 8 * 3 * 8 * 8, g)
        .view([8, 3, 8, 8])
        .sin();
    let labels = Tensor::arange(8, tch::kind::INT64_CPU).remainder(10);
    (images, labels)
}

/// The training loss of one step.
pub fn loss(model: &ResNet, mode: Mode) -> Tensor {
    let (images, labels) = batch();
    model
        .forward(&images, mode)
        .cross_entropy_for_logits(&labels)
}
