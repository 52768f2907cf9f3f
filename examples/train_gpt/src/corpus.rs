//! The training corpus (the repository's own text, written by build.rs),
//! split into training and held-out validation bytes, and seeded batches of
//! byte sequences drawn from either.
//!
//! Invariant: the split is fixed (every tenth 4 KiB chunk is validation, so
//! both halves mix prose and code), and samplers with the same seed draw the
//! same batches in every process.

use remat_reference::model::Config;
use tch::Tensor;

static CORPUS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/corpus.txt"));

const CHUNK: usize = 4096;

/// The corpus, split.
pub struct Corpus {
    pub train: Vec<u8>,
    pub val: Vec<u8>,
}

impl Corpus {
    pub fn load() -> Corpus {
        let mut train = Vec::new();
        let mut val = Vec::new();
        for (i, chunk) in CORPUS.chunks(CHUNK).enumerate() {
            if i % 10 == 9 {
                val.extend_from_slice(chunk);
            } else {
                train.extend_from_slice(chunk);
            }
        }
        Corpus { train, val }
    }
}

/// Draws sequence start offsets with splitmix64: independent of libtorch's
/// generator, so that nothing in the model can shift the batches.
#[derive(Clone)]
pub struct Sampler {
    state: u64,
}

impl Sampler {
    pub fn new(seed: u64) -> Sampler {
        Sampler { state: seed }
    }

    fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// [`Sampler::batch`] moved to `device`.
    pub fn batch_on(&mut self, bytes: &[u8], cfg: Config, device: tch::Device) -> (Tensor, Tensor) {
        let (x, y) = self.batch(bytes, cfg);
        (x.to(device), y.to(device))
    }

    /// `cfg.b` windows of `cfg.t + 1` bytes: the first `t` are the tokens,
    /// the last `t` their next-byte targets (both `[b, t]`, int64).
    pub fn batch(&mut self, bytes: &[u8], cfg: Config) -> (Tensor, Tensor) {
        let t = cfg.t as usize;
        assert!(bytes.len() > t + 1, "the corpus is shorter than a sequence");
        let mut data = Vec::with_capacity(cfg.b as usize * (t + 1));
        for _ in 0..cfg.b {
            let start = (self.next() % (bytes.len() - t) as u64) as usize;
            data.extend(bytes[start..start + t + 1].iter().map(|&b| i64::from(b)));
        }
        let data = Tensor::from_slice(&data).view([cfg.b, cfg.t + 1]);
        (
            data.narrow(1, 0, cfg.t).contiguous(),
            data.narrow(1, 1, cfg.t).contiguous(),
        )
    }
}
