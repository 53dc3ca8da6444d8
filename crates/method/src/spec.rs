//! How the methods beyond the throughput search ask for trials, and tell
//! the caller what they are doing.
//!
//! [`constant_rate`] is the one place these methods build a [`TrialSpec`]:
//! when the engine's trial gains settings (frame mixes, flows), only this
//! function changes.

use crate::TrialRunner;
use linerate_results::{TrialResult, TrialSpec};
use linerate_wire::units::FrameSize;
use std::time::Duration;

/// A constant-rate trial of `frame`-sized frames at `fps` for `duration`.
pub fn constant_rate(frame: FrameSize, fps: f64, duration: Duration) -> TrialSpec {
    TrialSpec {
        frame,
        mix: None,
        intended_fps: fps,
        duration,
    }
}

/// A burst of exactly `frames` frames at `fps`: a constant-rate trial whose
/// duration is `frames / fps` (the engine schedules `round(fps × duration)`
/// frames, which is `frames` to well under half a frame).
pub fn burst(frame: FrameSize, fps: f64, frames: u64) -> TrialSpec {
    constant_rate(frame, fps, Duration::from_secs_f64(frames as f64 / fps))
}

/// What a method is doing, for a progress display.
#[derive(Debug, Clone, Copy)]
pub enum Step<'a> {
    /// A trial is about to run; `why` says what it is for (e.g. "NDR",
    /// "90 % of max", "burst 1,500 frames, repetition 3/50").
    Starting {
        frame: FrameSize,
        trial_no: usize,
        spec: &'a TrialSpec,
        why: &'a str,
    },
    /// A trial has run; `passed` in the method's own sense (zero loss, or
    /// within a goal's loss ratio).
    Done {
        frame: FrameSize,
        trial_no: usize,
        result: &'a TrialResult,
        passed: bool,
    },
}

/// Runs `spec` and reports it to `progress` before and after; the trial is
/// appended to `trials`. Shared by the methods so that every trial is seen
/// (and can be saved) as soon as it ends.
pub(crate) fn run_reported<R: TrialRunner>(
    runner: &mut R,
    spec: &TrialSpec,
    why: &str,
    trials: &mut Vec<TrialResult>,
    passed: impl Fn(&TrialResult) -> bool,
    progress: &mut dyn FnMut(Step),
) -> Result<TrialResult, R::Error> {
    let trial_no = trials.len() + 1;
    progress(Step::Starting {
        frame: spec.frame,
        trial_no,
        spec,
        why,
    });
    let result = runner.run(spec)?;
    progress(Step::Done {
        frame: spec.frame,
        trial_no,
        result: &result,
        passed: passed(&result),
    });
    trials.push(result.clone());
    Ok(result)
}
