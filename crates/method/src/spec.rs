//! How the methods beyond the throughput search ask for trials, and tell
//! the caller what they are doing.
//!
//! [`constant_rate`] is the one place these methods build a [`TrialSpec`]:
//! a frame size or a frame-size mix (IMIX) goes into the spec here, so
//! every method sends mixes the same way; when the engine's trial gains
//! settings, only this function changes.

use crate::TrialRunner;
use linerate_results::{TrialResult, TrialSpec};
use linerate_wire::units::{FrameSize, Layer};
use linerate_wire::Frames;
use std::time::Duration;

/// A constant-rate trial of `frames` (one size, or a mix sent in its
/// repeating sequence) at `fps` for `duration`.
pub fn constant_rate(frames: &Frames, fps: f64, duration: Duration) -> TrialSpec {
    TrialSpec {
        frame: frames.largest(),
        mix: frames.mix().cloned(),
        intended_fps: fps,
        duration,
    }
}

/// A burst of exactly `frames` frames at `fps`: a constant-rate trial whose
/// duration is `frames / fps` (the engine schedules `round(fps × duration)`
/// frames, which is `frames` to well under half a frame).
pub fn burst(frames: &Frames, fps: f64, count: u64) -> TrialSpec {
    constant_rate(frames, fps, Duration::from_secs_f64(count as f64 / fps))
}

/// Mbps at `layer` of `fps` frames/s of `frames` (a mix counts its mean
/// frame, as the rfc2544 report does).
pub fn mbps(frames: &Frames, fps: f64, layer: Layer) -> f64 {
    fps * frames.bytes_at(layer) * 8.0 / 1e6
}

/// What a method's record says of a mix: None for a single size.
pub fn mix_info(frames: &Frames) -> Option<linerate_results::MixInfo> {
    frames.mix().map(linerate_results::MixInfo::of)
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

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_wire::FrameMix;

    #[test]
    fn a_mix_goes_into_every_spec_and_its_mbps_count_the_mean_frame() {
        let imix1 = FrameMix::parse("imix1").unwrap();
        let frames = Frames::Mix(imix1.clone());
        let spec = constant_rate(&frames, 12_000.0, Duration::from_secs(1));
        assert_eq!(spec.mix.as_ref(), Some(&imix1));
        assert_eq!(spec.frame.frame(), 1418, "the largest frame sizes buffers");
        let b = burst(&frames, 12_000.0, 6_000);
        assert_eq!(
            (b.mix.as_ref(), b.duration),
            (Some(&imix1), Duration::from_millis(500))
        );
        // 27,000 frames/s of IMIX 1's 345.5-byte mean frame: 74.6 Mbps at L2.
        assert!((mbps(&frames, 27_000.0, Layer::L2) - 74.628).abs() < 1e-9);
        assert_eq!(mix_info(&frames).unwrap().name, "IMIX 1");
        let size = Frames::Size(FrameSize::from_frame(64).unwrap());
        assert!(constant_rate(&size, 1.0, Duration::from_secs(1))
            .mix
            .is_none());
        assert_eq!(mbps(&size, 1e6, Layer::L2), 512.0);
    }
}
