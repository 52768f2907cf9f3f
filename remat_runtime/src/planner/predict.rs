//! What one choice per layer costs in all: bytes kept, the peak during
//! backward (backward.rs's levels), replay time and its spread.

use crate::planner::backward::predict_levels;
use crate::planner::cost::Profile;

/// The predicted cost of a plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prediction {
    /// Bytes kept at the forward→backward point (the measure of
    /// [`measure_kept_bytes`](crate::planner::measure_kept_bytes)).
    pub kept_bytes: i64,
    /// The most bytes in use during backward, over those in use before the
    /// forward: at each point of the backward, the baseline's measured
    /// level ([`Profile::backward`]) plus what the plan keeps more than the
    /// baseline in the layers the backward has not reached yet, at the
    /// highest point; plus the profile's
    /// [`gathered_bytes`](Profile::gathered_bytes) (docs/planner.md, "Peak
    /// during backward").
    pub peak_bytes: i64,
    /// Total replay time in one backward, ns.
    pub replay_ns: u64,
    /// The spread of `replay_ns`: the sum of its choices' spreads (the
    /// profile's estimates of one kind err alike wherever they enter), ns.
    pub spread_ns: u64,
}

/// The prediction for one choice index per layer.
///
/// ```no_run
/// # fn f(profile: &remat_runtime::planner::Profile) {
/// let baseline: Vec<usize> = vec![1; profile.layers.len()];
/// let p = remat_runtime::planner::predict(profile, &baseline);
/// # }
/// ```
pub fn predict(profile: &Profile, choices: &[usize]) -> Prediction {
    let (mut over, mut replay, mut spread) = (0, 0, 0);
    for (i, &c) in choices.iter().enumerate() {
        let c = &profile.kinds[profile.layer_kind[i]].choices[c];
        over += c.bytes;
        replay += c.replay_ns;
        spread += c.spread_ns;
    }
    Prediction {
        kept_bytes: profile.baseline_bytes + over,
        peak_bytes: predict_levels(profile, choices).most() + profile.gathered_bytes,
        replay_ns: replay,
        spread_ns: spread,
    }
}
