//! The Cisco report's test "the bit rate was set such that the CPU load was
//! approximately 75 %": per frame size, a bisection on the rate, each
//! trial's DUT CPU load (total) compared with the target, until one lands
//! within the tolerance or the trials run out (then the closest trial is
//! reported, marked as not reached).
//!
//! # How the rate is searched
//!
//! The bracket starts as `0..max_fps` and the first trial runs at
//! `max_fps`. A trial whose CPU load is below the target raises the floor,
//! one above lowers the ceiling, and the next trial runs in the middle. The
//! search ends when a trial lands within `tolerance_pct` points of the
//! target, when the first trial (the highest rate) does not load the DUT
//! enough (nothing higher to try), when the bracket is narrower than 1 % of
//! its upper end, or after `max_trials` trials. A trial without a CPU
//! sample is kept but does not move the bracket.

use crate::TrialRunner;
use linerate_results::cpu_target::CpuTargetResult;
use linerate_results::{TrialResult, TrialSpec};
use linerate_wire::units::{FrameSize, Layer};
use std::time::Duration;

/// Settings of one CPU-target search, the same for every frame size.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuTargetConfig {
    /// The DUT CPU load (total) to find, in percent: above 0, below 100.
    pub target_pct: f64,
    /// How close to the target counts as reached, in percentage points:
    /// above 0, below 50.
    pub tolerance_pct: f64,
    /// How long each trial sends.
    pub trial_duration: Duration,
    /// Most trials per frame size (at least 1).
    pub max_trials: u32,
}

/// Why a [`CpuTargetConfig`] cannot be searched with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CpuTargetConfigError {
    #[error("the CPU load target {0} % must be above 0 and below 100")]
    Target(f64),
    #[error("the tolerance {0} must be a number of percentage points above 0 and below 50")]
    Tolerance(f64),
    #[error("the trial duration must be longer than zero")]
    Duration,
    #[error("a search needs at least one trial")]
    MaxTrials,
}

impl CpuTargetConfig {
    /// Checks the settings once, before any frame size is searched.
    pub fn validate(&self) -> Result<(), CpuTargetConfigError> {
        if !(self.target_pct > 0.0 && self.target_pct < 100.0) {
            return Err(CpuTargetConfigError::Target(self.target_pct));
        }
        if !(self.tolerance_pct > 0.0 && self.tolerance_pct < 50.0) {
            return Err(CpuTargetConfigError::Tolerance(self.tolerance_pct));
        }
        if self.trial_duration.is_zero() {
            return Err(CpuTargetConfigError::Duration);
        }
        if self.max_trials == 0 {
            return Err(CpuTargetConfigError::MaxTrials);
        }
        Ok(())
    }
}

/// What the search is doing, for a progress display.
#[derive(Debug, Clone, Copy)]
pub enum CpuTargetProgress<'a> {
    /// A trial is about to run (`trial_no` counts from 1).
    TrialStarting {
        frame: FrameSize,
        trial_no: u32,
        intended_fps: f64,
    },
    /// A trial has run.
    TrialDone {
        frame: FrameSize,
        trial_no: u32,
        result: &'a TrialResult,
    },
}

/// A runner error that ended a search, with what the trials before it
/// found (`None` if the first trial failed).
#[derive(Debug)]
pub struct Stopped<E> {
    pub error: E,
    pub partial: Option<CpuTargetResult>,
}

/// The rate at which the DUT's CPU load comes closest to `cfg.target_pct`
/// for one frame size, searched between 0 and `max_fps` (normally the
/// line rate of the frame size, or a lower highest rate the user gave).
/// The caller validates `cfg` first ([`CpuTargetConfig::validate`]).
///
/// Returns `None` when no trial ran (a `max_fps` that is not positive).
/// A runner error ends the search; the trials run before it are returned
/// with the error.
pub fn find_cpu_target<R: TrialRunner>(
    runner: &mut R,
    frame: FrameSize,
    cfg: &CpuTargetConfig,
    max_fps: f64,
    progress: &mut dyn FnMut(CpuTargetProgress),
) -> Result<Option<CpuTargetResult>, Stopped<R::Error>> {
    let mut trials = Vec::new();
    let searched = search(runner, frame, cfg, max_fps, &mut trials, progress);
    let result = (!trials.is_empty()).then(|| result_of(frame, cfg, trials));
    match searched {
        Ok(()) => Ok(result),
        Err(error) => Err(Stopped {
            error,
            partial: result,
        }),
    }
}

/// The bisection (see the module documentation). Every trial goes into
/// `trials`.
fn search<R: TrialRunner>(
    runner: &mut R,
    frame: FrameSize,
    cfg: &CpuTargetConfig,
    max_fps: f64,
    trials: &mut Vec<TrialResult>,
    progress: &mut dyn FnMut(CpuTargetProgress),
) -> Result<(), R::Error> {
    if !(max_fps.is_finite() && max_fps > 0.0) {
        return Ok(());
    }
    let (target, tolerance) = (cfg.target_pct, cfg.tolerance_pct);
    let (mut lo, mut hi) = (0.0f64, max_fps);
    let mut rate = max_fps;
    for n in 0..cfg.max_trials {
        let spec = TrialSpec {
            frame,
            mix: None,
            intended_fps: rate,
            duration: cfg.trial_duration,
        };
        progress(CpuTargetProgress::TrialStarting {
            frame,
            trial_no: n + 1,
            intended_fps: rate,
        });
        let t = runner.run(&spec)?;
        progress(CpuTargetProgress::TrialDone {
            frame,
            trial_no: n + 1,
            result: &t,
        });
        let cpu = t.dut_cpu;
        trials.push(t);
        let Some(cpu) = cpu else {
            continue;
        };
        if (cpu.total_pct - target).abs() <= tolerance {
            break;
        }
        // The highest rate does not load the DUT enough: nothing higher to try.
        if n == 0 && cpu.total_pct < target {
            break;
        }
        if cpu.total_pct < target {
            lo = rate;
        } else {
            hi = rate;
        }
        if hi - lo < hi * 0.01 {
            break;
        }
        rate = (lo + hi) / 2.0;
    }
    Ok(())
}

/// The trial closest to the target stands for the frame size. `trials`
/// is not empty.
fn result_of(frame: FrameSize, cfg: &CpuTargetConfig, trials: Vec<TrialResult>) -> CpuTargetResult {
    let distance = |t: &TrialResult| {
        t.dut_cpu
            .map_or(f64::INFINITY, |c| (c.total_pct - cfg.target_pct).abs())
    };
    let best = trials
        .iter()
        .min_by(|a, b| distance(a).total_cmp(&distance(b)))
        .expect("at least one trial")
        .clone();
    CpuTargetResult {
        frame_size: frame.frame(),
        l3_length: frame.l3(),
        reached: distance(&best) <= cfg.tolerance_pct,
        rate_fps: best.offered_fps,
        rate_mbps_l1: frame.mbps(best.offered_fps, Layer::L1),
        dut_cpu: best.dut_cpu,
        loss_ratio: best.loss_ratio,
        trials,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimulatedDut;
    use linerate_results::DutCpu;

    /// A simulated DUT whose CPU load grows with the rate: 10 % idle plus
    /// 1 % per 1,000 frames/s.
    struct Loaded(SimulatedDut);

    impl TrialRunner for Loaded {
        type Error = std::convert::Infallible;
        fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, Self::Error> {
            let mut t = self.0.answer(spec);
            let total = (10.0 + spec.intended_fps / 1000.0).min(100.0);
            t.dut_cpu = Some(DutCpu {
                total_pct: total,
                traffic_pct: total - 10.0,
                stolen_pct: None,
            });
            Ok(t)
        }
    }

    fn cfg(target_pct: f64, tolerance_pct: f64) -> CpuTargetConfig {
        CpuTargetConfig {
            target_pct,
            tolerance_pct,
            trial_duration: Duration::from_secs(1),
            max_trials: 10,
        }
    }

    fn run_search(max_fps: f64, target: f64, tolerance: f64) -> CpuTargetResult {
        let frame = FrameSize::from_frame(64).unwrap();
        let mut dut = Loaded(SimulatedDut::new(1e9));
        let cfg = cfg(target, tolerance);
        cfg.validate().unwrap();
        let mut seen = 0;
        let r = find_cpu_target(&mut dut, frame, &cfg, max_fps, &mut |p| {
            if let CpuTargetProgress::TrialDone { .. } = p {
                seen += 1
            }
        })
        .unwrap()
        .expect("a trial ran");
        assert_eq!(seen, r.trials.len());
        r
    }

    #[test]
    fn the_search_lands_near_the_target() {
        // 75 % is reached at 65,000 frames/s.
        let r = run_search(200_000.0, 75.0, 2.0);
        assert!(r.reached, "{r:?}");
        let cpu = r.dut_cpu.unwrap().total_pct;
        assert!((cpu - 75.0).abs() <= 2.0, "{cpu}");
        assert!((r.rate_fps - 65_000.0).abs() <= 2_000.0, "{}", r.rate_fps);
        assert!(r.trials.len() <= 10);
    }

    #[test]
    fn a_dut_that_never_gets_busy_enough_stops_after_one_trial() {
        // At most 30 % at the highest rate: nothing higher to try.
        let r = run_search(20_000.0, 75.0, 5.0);
        assert!(!r.reached);
        assert_eq!(r.trials.len(), 1);
        assert_eq!(r.rate_fps, 20_000.0);
    }

    /// An error after some trials returns them with it.
    #[test]
    fn an_error_keeps_the_trials_before_it() {
        struct Failing(Loaded, usize);
        impl TrialRunner for Failing {
            type Error = &'static str;
            fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, &'static str> {
                if self.1 == 0 {
                    return Err("interrupted");
                }
                self.1 -= 1;
                Ok(self.0.run(spec).unwrap())
            }
        }
        let frame = FrameSize::from_frame(64).unwrap();
        let cfg = cfg(75.0, 1.0);
        let mut dut = Failing(Loaded(SimulatedDut::new(1e9)), 2);
        let stopped = find_cpu_target(&mut dut, frame, &cfg, 200_000.0, &mut |_| {}).unwrap_err();
        assert_eq!(stopped.error, "interrupted");
        assert_eq!(stopped.partial.unwrap().trials.len(), 2);
        let mut dut = Failing(Loaded(SimulatedDut::new(1e9)), 0);
        let stopped = find_cpu_target(&mut dut, frame, &cfg, 200_000.0, &mut |_| {}).unwrap_err();
        assert!(stopped.partial.is_none());
    }

    #[test]
    fn bad_settings_are_named() {
        assert_eq!(cfg(75.0, 5.0).validate(), Ok(()));
        for t in [0.0, 100.0, -1.0, f64::NAN] {
            assert!(
                matches!(cfg(t, 5.0).validate(), Err(CpuTargetConfigError::Target(_))),
                "{t}"
            );
        }
        for t in [0.0, 50.0, f64::NAN, f64::INFINITY] {
            assert!(
                matches!(
                    cfg(75.0, t).validate(),
                    Err(CpuTargetConfigError::Tolerance(_))
                ),
                "{t}"
            );
        }
        let zero = CpuTargetConfig {
            trial_duration: Duration::ZERO,
            ..cfg(75.0, 5.0)
        };
        assert_eq!(zero.validate(), Err(CpuTargetConfigError::Duration));
        let none = CpuTargetConfig {
            max_trials: 0,
            ..cfg(75.0, 5.0)
        };
        assert_eq!(none.validate(), Err(CpuTargetConfigError::MaxTrials));
    }

    #[test]
    fn no_rate_to_try_runs_no_trial() {
        let frame = FrameSize::from_frame(64).unwrap();
        let mut dut = Loaded(SimulatedDut::new(1e9));
        for max in [0.0, -1.0, f64::NAN] {
            let r = find_cpu_target(&mut dut, frame, &cfg(75.0, 5.0), max, &mut |_| {});
            assert!(r.unwrap().is_none(), "{max}");
        }
    }
}
