//! A small ResNet-style CNN with batch norm, written in tch's `nn` style
//! with `remat::nn` (in place of `tch::nn`) and the macros, each residual
//! block runnable plain, as one checkpoint, or with a `save` region. Used by
//! `tests/models` (bitwise against the plain model) and `examples/resnet.rs`.
//!
//! ```
//! use remat_reference::resnet::{loss, Mode, ResNet};
//! let vs = remat::nn::VarStore::new(tch::Device::Cpu);
//! let model = ResNet::new(&vs.root(), 4, 2, 10);
//! loss(&model, Mode::Whole).backward(); // the blocks replay here
//! ```

use remat::nn;
use remat::prelude::*;

/// How the residual blocks run.
///
/// ```
/// use remat_reference::resnet::{loss, Mode, ResNet};
/// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
/// let model = ResNet::new(&vs.root(), 4, 1, 10);
/// for mode in [Mode::Plain, Mode::Whole, Mode::SaveStem] {
///     loss(&model, mode).backward();
/// }
/// ```
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

/// Two 3x3 convolutions with batch norm, and the skip connection;
/// `Capture`, so that its checkpoints own a handle to the same layers.
///
/// ```
/// use remat_reference::resnet::{Block, Mode};
/// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
/// let block = Block::new(&(vs.root() / "layers" / 0), 0, 4);
/// let x = tch::Tensor::randn([2, 4, 8, 8], tch::kind::FLOAT_CPU);
/// assert_eq!(block.forward(&x, Mode::Whole).size(), [2, 4, 8, 8]);
/// ```
#[derive(Capture)]
pub struct Block {
    index: usize,
    conv1: nn::Conv2D,
    bn1: nn::BatchNorm,
    conv2: nn::Conv2D,
    bn2: nn::BatchNorm,
}

impl Block {
    /// The block's layers under `vs` (`conv1`, `bn1`, `conv2`, `bn2`), `c`
    /// channels in and out; `index` names its checkpoint (`layer{index}`).
    ///
    /// ```
    /// use remat_reference::resnet::Block;
    /// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
    /// let _block = Block::new(&vs.root(), 0, 4);
    /// assert!(vs.variables().contains_key("bn1.running_mean"));
    /// ```
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

    /// The block on `x` (batch norm in train mode) under `mode`.
    ///
    /// ```
    /// use remat_reference::resnet::{Block, Mode};
    /// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
    /// let block = Block::new(&vs.root(), 0, 4);
    /// let x = tch::Tensor::randn([2, 4, 8, 8], tch::kind::FLOAT_CPU);
    /// let y = block.forward(&x, Mode::SaveStem);
    /// y.sum(tch::Kind::Float).backward();
    /// ```
    pub fn forward(&self, x: &Tensor, mode: Mode) -> Tensor {
        match mode {
            Mode::Plain => self.plain(x),
            Mode::Whole => self.whole(x),
            Mode::SaveStem => self.save_stem(x),
        }
    }
}

/// Stem conv + batch norm, residual blocks, global pooling, classifier.
///
/// ```
/// use remat_reference::resnet::{batch, Mode, ResNet};
/// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
/// let model = ResNet::new(&vs.root(), 4, 2, 10);
/// let (images, _) = batch();
/// assert_eq!(model.forward(&images, Mode::Plain).size(), [8, 10]);
/// ```
pub struct ResNet {
    conv: nn::Conv2D,
    bn: nn::BatchNorm,
    blocks: Vec<Block>,
    fc: nn::Linear,
}

impl ResNet {
    /// A model of `blocks` residual blocks of `channels` channels over RGB
    /// images, with `classes` outputs; its variables live under `vs`.
    ///
    /// ```
    /// use remat_reference::resnet::ResNet;
    /// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
    /// let _model = ResNet::new(&vs.root(), 4, 2, 10);
    /// assert!(vs.variables().contains_key("layers.1.conv2.weight"));
    /// ```
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

    /// The logits of `images` (`[n, 3, h, w]`), its blocks under `mode`.
    ///
    /// ```
    /// use remat_reference::resnet::{Mode, ResNet};
    /// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
    /// let model = ResNet::new(&vs.root(), 4, 1, 10);
    /// let images = tch::Tensor::randn([2, 3, 8, 8], tch::kind::FLOAT_CPU);
    /// assert_eq!(model.forward(&images, Mode::Whole).size(), [2, 10]);
    /// ```
    pub fn forward(&self, images: &Tensor, mode: Mode) -> Tensor {
        let mut x = images.apply(&self.conv).apply_t(&self.bn, true).relu();
        for block in &self.blocks {
            x = block.forward(&x, mode);
        }
        x.adaptive_avg_pool2d([1, 1]).flatten(1, -1).apply(&self.fc)
    }
}

/// A fixed batch: images `[8, 3, 8, 8]` and labels in `0..10`. Computed,
/// not drawn, so that it does not depend on the generator.
///
/// ```
/// let (images, labels) = remat_reference::resnet::batch();
/// assert_eq!((images.size(), labels.size()), (vec![8, 3, 8, 8], vec![8]));
/// ```
pub fn batch() -> (Tensor, Tensor) {
    let g = tch::kind::FLOAT_CPU;
    let images = Tensor::linspace(-2.0, 2.0, 8 * 3 * 8 * 8, g)
        .view([8, 3, 8, 8])
        .sin();
    let labels = Tensor::arange(8, tch::kind::INT64_CPU).remainder(10);
    (images, labels)
}

/// The training loss of one step on [`batch`].
///
/// ```
/// use remat_reference::resnet::{loss, Mode, ResNet};
/// let vs = remat::nn::VarStore::new(tch::Device::Cpu);
/// let model = ResNet::new(&vs.root(), 4, 1, 10);
/// assert_eq!(loss(&model, Mode::Plain).size(), Vec::<i64>::new());
/// ```
pub fn loss(model: &ResNet, mode: Mode) -> Tensor {
    let (images, labels) = batch();
    model
        .forward(&images, mode)
        .cross_entropy_for_logits(&labels)
}
