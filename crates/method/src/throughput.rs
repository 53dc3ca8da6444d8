//! RFC 2544 section 26.1 throughput: the highest rate at which the device
//! forwards every frame it is offered (or, with an allowed loss, loses no
//! more than that share of them).
//!
//! # How the rate is searched
//!
//! Each step is one constant-rate trial of `trial_duration`. A trial
//! *passes* when its loss ratio (frames never received over frames the
//! schedule called for, so frames the tester failed to send count as lost)
//! is at most `allowed_loss_ratio` and the generator held the rate (see
//! "When the tester is the limit"). The search keeps a bracket: `lo`, the
//! highest rate that passed, and `hi`, the lowest rate that failed. The
//! throughput is `lo`, the rate of a trial that really passed (listed in
//! the result's trials; its intended rate, or for a trial whose generator
//! paused, the rate the device really saw); it is 0 when no trial passed.
//!
//! 1. **Line rate first.** The first trial runs at `max_fps` (normally the
//!    line rate of the frame size). If it passes, the throughput is
//!    `max_fps` after a single trial. If it passes only at the lower rate
//!    the device saw (the generator paused, see below), nothing above that
//!    rate can be offered either: the search ends there, marked
//!    `tester_limited`.
//! 2. **A hint from the overload.** An overloaded device forwards about as
//!    much as it can, so after the first trial fails the second runs at the
//!    rate the device really forwarded in it (received frames over the
//!    duration and any pauses of the generator, the time the device saw
//!    the frames over), kept between `min_fps` and `0.999 × max_fps`. The
//!    hint is used once only.
//! 3. **Stepping down while nothing passed.** After each further failure
//!    with no passing rate yet, the next rate is `hi × (1 − w)`, where the
//!    step `w` starts at `2 × resolution` and doubles on every such step
//!    (2 %, 4 %, 8 %, … for a 1 % resolution), never below `min_fps`. If
//!    the trial at `min_fps` fails, the throughput is 0.
//! 4. **Stepping up after the hint passed.** If the hint passed, the device
//!    may forward somewhat more than it managed while overloaded, so the
//!    next rates are `lo × (1 + w)` with the same doubling steps, until one
//!    fails or the step would go past the middle of the bracket.
//! 5. **Bisection.** Otherwise, with a passing `lo` and a failing `hi`, the
//!    next rate is `(lo + hi) / 2`.
//! 6. **Stop** once `hi − lo ≤ resolution × hi` ([`relative_width`]): the
//!    device's real throughput lies below `hi`, and the reported `lo` is
//!    within `resolution` of it.
//!
//! A device that forwards its capacity when overloaded costs four trials
//! (line rate, hint, one step up, one bisection) at any resolution. One
//! that forwards 90 % of its capacity when overloaded costs 8 trials at
//! 1 % resolution (14 at 0.1 %), one that collapses to half 14 (20), and
//! one that forwards nothing at all when overloaded about 20 (30), which is
//! what a plain bisection from line rate costs anyway. (Figures for 64-byte
//! frames at 10 Gbit/s; see the `print_trial_counts` test.)
//!
//! Every rate tried lies strictly inside the current bracket, so each trial
//! narrows it; the steps of 3 and 4 grow geometrically, so they reach
//! `min_fps` or the middle of the bracket after a few trials. As a hard
//! guarantee the search also ends after [`MAX_TRIALS`] trials, reporting
//! the highest rate that passed so far.
//!
//! # When the tester is the limit
//!
//! A trial whose loss is partly the tester's (`TrialResult::tester_limited`:
//! the generator fell short of its rate, the tester's sending port refused
//! frames, or its receiving port dropped some, as the kernel's counters
//! say) did not measure the device alone. The search
//! treats such a trial like any failed trial (the rate was not shown to
//! pass), but when the *lowest failing rate* — the `hi` just above the
//! reported throughput — was such a trial, the search ended
//! against the tester's ceiling rather than the device's, and the result is
//! marked `tester_limited`: the device may forward more than reported.
//! A failure at a rate the tester did send in full is the device's and
//! never marks the result.
//!
//! A generator held up by the machine pauses rather than catch up in a
//! burst (`TrialResult::generator_paused_ns`): it still sends every frame,
//! but over the duration plus the pauses, so the device saw a rate lower
//! than the trial's by the paused share. A trial whose loss is within
//! `allowed_loss_ratio` and whose pauses add up to at most `resolution` of
//! its duration (`TrialResult::held_rate`) passes at its rate: the rate
//! the device saw differs from it by less than the precision asked for. A
//! trial that lost no more than allowed but paused longer showed that the
//! device forwards the rate it really saw (`offered_fps`, frames over the
//! time they took; between the pauses it even got them at the trial's
//! rate): it passes *at that rate* when that is above `lo`, and `lo`
//! becomes that rate, so the throughput is always a rate some trial
//! really showed (`ThroughputResult::throughput_trial`). Below or at `lo`
//! it showed nothing new: the search counts it as failed and as the
//! tester's failure, so when it ends up as `hi` the result is marked
//! `tester_limited` as above. A trial that lost too much failed whatever
//! it paused (the device lost frames at an even lower rate than
//! intended): pauses never mark a failure. The progress display's verdict
//! (`Progress::TrialDone::passed`) is the one the search used.

use crate::TrialRunner;
use linerate_results::{MixInfo, ThroughputResult, TrialResult, TrialSpec};
use linerate_wire::units::{FrameSize, Layer};
use linerate_wire::FrameMix;
use std::time::Duration;

/// The search never runs more trials than this. With the geometric steps a
/// search at 1 % resolution needs well under 20; the cap only guarantees
/// termination whatever the runner reports (e.g. a device whose behaviour
/// changes from trial to trial).
pub const MAX_TRIALS: usize = 64;

/// Smallest resolution the search uses; finer values are raised to this.
pub const MIN_RESOLUTION: f64 = 1e-6;
/// Largest resolution the search uses; coarser values are lowered to this.
pub const MAX_RESOLUTION: f64 = 0.5;

/// Settings of one throughput search.
#[derive(Debug, Clone)]
pub struct ThroughputConfig {
    /// Upper end of the search and rate of the first trial, frames/s:
    /// normally the line rate for the frame size (the caller computes it).
    pub max_fps: f64,
    /// Lowest rate worth trying, frames/s; if it fails, the throughput is 0.
    pub min_fps: f64,
    /// Relative resolution: stop when `hi - lo <= resolution * hi`.
    pub resolution: f64,
    /// Share of frames a trial may lose and still pass (RFC 2544: 0).
    pub allowed_loss_ratio: f64,
    /// How long each trial sends.
    pub trial_duration: Duration,
    /// Send this frame-size mix (IMIX) instead of the search's frame size
    /// alone; rates stay frames/s and Mbps count the mix's mean frame.
    pub mix: Option<FrameMix>,
}

impl ThroughputConfig {
    pub const DEFAULT_RESOLUTION: f64 = 0.01;
    /// `min_fps` of [`ThroughputConfig::new`] is `max_fps` divided by this.
    pub const DEFAULT_MIN_DIVISOR: f64 = 10_000.0;

    /// A search from `max_fps` down to `max_fps / 10 000` at 1 %
    /// resolution, with no loss allowed.
    pub fn new(max_fps: f64, trial_duration: Duration) -> Self {
        ThroughputConfig {
            max_fps,
            min_fps: max_fps / Self::DEFAULT_MIN_DIVISOR,
            resolution: Self::DEFAULT_RESOLUTION,
            allowed_loss_ratio: 0.0,
            trial_duration,
            mix: None,
        }
    }

    /// Checks the settings; [`find_throughput`] copes with bad ones too
    /// (see there) but a user should hear about them.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(self.max_fps.is_finite() && self.max_fps > 0.0) {
            return Err(ConfigError::MaxRate(self.max_fps));
        }
        if !(self.min_fps.is_finite() && self.min_fps > 0.0 && self.min_fps <= self.max_fps) {
            return Err(ConfigError::MinRate {
                min: self.min_fps,
                max: self.max_fps,
            });
        }
        if !(MIN_RESOLUTION..=MAX_RESOLUTION).contains(&self.resolution) {
            return Err(ConfigError::Resolution(self.resolution));
        }
        if !(0.0..1.0).contains(&self.allowed_loss_ratio) {
            return Err(ConfigError::AllowedLoss(self.allowed_loss_ratio));
        }
        if self.trial_duration.is_zero() {
            return Err(ConfigError::Duration);
        }
        Ok(())
    }
}

/// Settings a search cannot work with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error("the highest rate to try must be a positive number of frames/s, not {0}")]
    MaxRate(f64),
    #[error("the lowest rate worth trying ({min} frames/s) must be above zero and no higher than the highest ({max} frames/s)")]
    MinRate { min: f64, max: f64 },
    #[error(
        "resolution {0} is out of range: use a fraction from 0.000001 to 0.5 (0.01 means 1 %)"
    )]
    Resolution(f64),
    #[error("allowed loss {0} is out of range: use a fraction from 0 up to 1 (0.001 means 0.1 %)")]
    AllowedLoss(f64),
    #[error("the trial duration must be longer than zero")]
    Duration,
}

/// What the search is doing, for a progress display.
#[derive(Debug, Clone, Copy)]
pub enum Progress<'a> {
    /// A trial is about to run; `lo` is the highest rate that passed so far
    /// (0 if none) and `hi` the lowest that failed (`max_fps` before the first
    /// trial).
    TrialStarting {
        frame: FrameSize,
        /// The mix sent instead of `frame` alone (its largest size), if any:
        /// a display names the mix, not its largest frame.
        mix: Option<&'a FrameMix>,
        trial_no: usize,
        intended_fps: f64,
        lo: f64,
        hi: f64,
    },
    /// A trial has run.
    TrialDone {
        frame: FrameSize,
        trial_no: usize,
        result: &'a TrialResult,
        passed: bool,
    },
}

/// `(hi - lo) / hi`: how wide a bracket is relative to its upper end
/// (0 when `hi` is not positive).
pub fn relative_width(lo: f64, hi: f64) -> f64 {
    if hi > 0.0 {
        (hi - lo) / hi
    } else {
        0.0
    }
}

/// Why the next trial runs at the rate it does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    LineRate,
    Hint,
    Down,
    Up,
    Bisect,
}

/// RFC 2544 section 26.1 throughput for one frame size (see the module
/// documentation for the search).
///
/// `line_rate_fps` is only reported (the caller normally passes it as
/// `cfg.max_fps` too). Settings [`ThroughputConfig::validate`] refuses are
/// made workable rather than refused: a resolution is kept within
/// 0.000001..=0.5, a `min_fps` that is not positive becomes
/// `max_fps / 10 000`, and a `max_fps` that is not positive gives a
/// throughput of 0 without any trial.
///
/// A runner error ends the search and is returned as is.
pub fn find_throughput<R: TrialRunner>(
    runner: &mut R,
    frame: FrameSize,
    cfg: &ThroughputConfig,
    line_rate_fps: f64,
    progress: &mut dyn FnMut(Progress),
) -> Result<ThroughputResult, R::Error> {
    let resolution = if cfg.resolution.is_nan() {
        ThroughputConfig::DEFAULT_RESOLUTION
    } else {
        cfg.resolution.clamp(MIN_RESOLUTION, MAX_RESOLUTION)
    };
    let max_fps = cfg.max_fps;
    let min_fps = if cfg.min_fps.is_finite() && cfg.min_fps > 0.0 {
        cfg.min_fps
    } else {
        max_fps / ThroughputConfig::DEFAULT_MIN_DIVISOR
    };

    let mut trials: Vec<TrialResult> = Vec::new();
    // Highest rate that passed.
    let mut lo: Option<f64> = None;
    // Lowest rate that failed, and the index of its trial.
    let mut hi: Option<(f64, usize)> = None;
    let mut step_down = 2.0 * resolution;
    let mut step_up = 2.0 * resolution;
    let mut galloping_up = false;

    let mut candidate = max_fps;
    let mut step = Step::LineRate;
    let usable = max_fps.is_finite() && max_fps > 0.0;
    // Ends at the latest after MAX_TRIALS trials.
    while usable && trials.len() < MAX_TRIALS {
        let trial_no = trials.len() + 1;
        progress(Progress::TrialStarting {
            frame,
            mix: cfg.mix.as_ref(),
            trial_no,
            intended_fps: candidate,
            lo: lo.unwrap_or(0.0),
            hi: hi.map_or(max_fps, |(h, _)| h),
        });
        let spec = TrialSpec {
            frame,
            mix: cfg.mix.clone(),
            intended_fps: candidate,
            duration: cfg.trial_duration,
        };
        let result = runner.run(&spec)?;
        let shown = shown_rate(&result, candidate, cfg.allowed_loss_ratio, resolution)
            .filter(|&fps| fps > lo.unwrap_or(0.0) && fps >= min_fps);
        let passed = shown.is_some();
        progress(Progress::TrialDone {
            frame,
            trial_no,
            result: &result,
            passed,
        });
        trials.push(result);

        if let Some(fps) = shown {
            lo = Some(fps);
            if step == Step::Hint {
                galloping_up = true;
            }
        } else {
            hi = Some((candidate, trials.len() - 1));
            galloping_up = false;
        }

        (candidate, step) = match (lo, hi) {
            // Passed at max_fps: nothing above to look for.
            (Some(_), None) => break,
            (None, Some((h, _))) => {
                if h <= min_fps {
                    // Even the lowest rate worth trying failed.
                    break;
                }
                if trials.len() == 1 {
                    // Rates are finite here; `min`/`max` also turn a NaN hint
                    // into 0.999 * h.
                    let hint = trials[0].rx_fps().min(0.999 * h).max(min_fps);
                    (hint, Step::Hint)
                } else {
                    let c = (h * (1.0 - step_down)).max(min_fps);
                    step_down *= 2.0;
                    (c, Step::Down)
                }
            }
            (Some(l), Some((h, _))) => {
                if relative_width(l, h) <= resolution {
                    break;
                }
                let mid = (l + h) / 2.0;
                let up = l * (1.0 + step_up);
                if galloping_up && up < mid {
                    step_up *= 2.0;
                    (up, Step::Up)
                } else {
                    galloping_up = false;
                    (mid, Step::Bisect)
                }
            }
            (None, None) => unreachable!("every trial either passes or fails"),
        };
    }

    let throughput_fps = lo.unwrap_or(0.0);
    // The lowest failing rate was the tester's failure: it lost frames
    // itself, or it passed on loss but its generator paused so long that
    // the rate the device saw was no better than the throughput. Or no
    // rate failed because the first trial passed without the generator
    // holding `max_fps`: the device was never offered more than the rate
    // it showed.
    let tester_limited = match hi {
        Some((_, i)) => {
            let t = &trials[i];
            t.tester_limited() || (t.passed(cfg.allowed_loss_ratio) && !t.held_rate(resolution))
        }
        None => lo.is_some() && throughput_fps < max_fps,
    };
    let mbps = |fps: f64, layer: Layer| match &cfg.mix {
        Some(mix) => mix.mbps(fps, layer),
        None => frame.mbps(fps, layer),
    };
    let mut result = ThroughputResult {
        frame_size: frame.frame(),
        mix: cfg.mix.as_ref().map(MixInfo::of),
        l3_length: frame.l3(),
        throughput_fps,
        throughput_mbps_l2: mbps(throughput_fps, Layer::L2),
        throughput_mbps_l1: mbps(throughput_fps, Layer::L1),
        throughput_mbps_l3: mbps(throughput_fps, Layer::L3),
        throughput_mbps_l4: mbps(throughput_fps, Layer::L4),
        line_rate_fps,
        line_rate_mbps_l2: mbps(line_rate_fps, Layer::L2),
        tester_limited,
        calibrated_ceiling_fps: None,
        trials,
        dut_cpu: None,
        wan: None,
        mlrsearch: None,
        round: None,
        over_rounds: None,
    };
    // The DUT's CPU load at the throughput: that of the trial that showed it.
    let at_throughput = result.throughput_trial();
    let dut_cpu = at_throughput.and_then(|t| t.dut_cpu);
    // Through a VPN peer: the same frames on the WAN, encrypted.
    let wan = at_throughput
        .and_then(|t| t.esp.as_ref())
        .and_then(|esp| linerate_results::ipsec::WanRate::of(esp, throughput_fps));
    (result.dut_cpu, result.wan) = (dut_cpu, wan);
    Ok(result)
}

/// The rate `result`, a trial run at `candidate` frames/s, showed the
/// device to forward within the allowed loss, if any: `candidate` when the
/// generator held it (paused at most `resolution` of the duration); when
/// it paused longer, the rate the device really saw (frames over the time
/// they took, `offered_fps`), which is lower than `candidate` but was shown
/// all the same, and more harshly: the device got the frames at
/// `candidate` between the pauses. None when the trial lost too much.
fn shown_rate(
    result: &TrialResult,
    candidate: f64,
    allowed_loss_ratio: f64,
    resolution: f64,
) -> Option<f64> {
    if !result.passed(allowed_loss_ratio) {
        None
    } else if result.held_rate(resolution) {
        Some(candidate)
    } else {
        Some(result.offered_fps.min(candidate)).filter(|fps| fps.is_finite() && *fps > 0.0)
    }
}

#[cfg(test)]
mod tests;
