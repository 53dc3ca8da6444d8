//! Frame loss rate vs offered load (RFC 2544 section 26.3).
//!
//! Two ways to choose the loads:
//!
//! - [`sweep`]: one trial at each load the user gives, in the order given
//!   (as the 100GE report's tables: columns of offered Mpps, cells of loss).
//! - [`rfc2544`]: the section 26.3 procedure: the first trial at 100 % of
//!   the maximum rate, then 90 %, 80 %, ... (a step of 10 % of the maximum
//!   rate, finer if asked), until two successive trials lose no frame, or
//!   the next step would reach 0.
//!
//! A trial's loss ratio counts frames the tester failed to send as lost
//! (the engine's `loss_ratio`), so a trial the tester could not offer in
//! full (`generator_short`) never looks better than the device is; the
//! records keep the offered rate beside the intended one.
//!
//! A point is also marked `generator_short` when its generator paused more
//! than [`MAX_PAUSED_SHARE`] of the trial's duration
//! (`TrialResult::held_rate`): a paused generator sends every frame, but
//! later, so the device saw the load lowered by the paused share and the
//! loss is that of a lower load than the point's. The mark says the load
//! was not tested as asked; the loss stays what it was (a loss at a lower
//! load than intended is still the device's).

use crate::spec::{constant_rate, run_reported, Step};
use crate::TrialRunner;
use linerate_results::methods::LossPoint;
use linerate_results::TrialResult;
use linerate_wire::Frames;
use std::time::Duration;

/// RFC 2544 section 26.3: "the maximum granularity of the trials MUST be
/// 10% of the maximum rate".
pub const RFC2544_MAX_STEP: f64 = 0.10;

/// A trial whose generator paused more than this share of its duration did
/// not offer its load (defined with the records, which the report reads).
pub use linerate_results::MAX_PAUSED_SHARE;

/// One load to try: its label (the column of the table) and frames/s.
#[derive(Debug, Clone, PartialEq)]
pub struct Load {
    pub label: String,
    pub fps: f64,
}

/// A point of the curve from its trial.
pub fn point(label: &str, trial: TrialResult) -> LossPoint {
    LossPoint {
        load: label.to_string(),
        intended_fps: trial.intended_fps,
        offered_fps: trial.offered_fps,
        loss_ratio: trial.loss_ratio,
        generator_short: trial.tester_limited() || !trial.held_rate(MAX_PAUSED_SHARE),
        trial,
    }
}

/// One trial at each load, in the order given; after a trial that lost
/// more than `stop_above_loss` (a ratio), the higher loads are left out,
/// as the 100GE report leaves them untested.
pub fn sweep<R: TrialRunner>(
    runner: &mut R,
    frames: &Frames,
    loads: &[Load],
    duration: Duration,
    stop_above_loss: Option<f64>,
    progress: &mut dyn FnMut(Step),
) -> Result<Vec<LossPoint>, R::Error> {
    let mut trials = Vec::new();
    let mut points = Vec::new();
    for load in loads {
        let spec = constant_rate(frames, load.fps, duration);
        let why = format!("load {}", load.label);
        let t = run_reported(
            runner,
            &spec,
            &why,
            &mut trials,
            |t| t.lost_frames == 0,
            progress,
        )?;
        let lost_too_much = stop_above_loss.is_some_and(|stop| t.loss_ratio > stop);
        points.push(point(&load.label, t));
        if lost_too_much {
            break;
        }
    }
    Ok(points)
}

/// The loads of the RFC 2544 mode, highest first: `max_fps × (1 − k × step)`
/// for k = 0, 1, ... while above zero. `step` is kept within 0.001..=0.1.
pub fn rfc2544_loads(max_fps: f64, step: f64) -> Vec<Load> {
    let step = if step.is_finite() {
        step.clamp(0.001, RFC2544_MAX_STEP)
    } else {
        RFC2544_MAX_STEP
    };
    let steps = (1.0 / step + 1e-9).floor() as usize;
    (0..steps)
        .map(|k| 1.0 - k as f64 * step)
        .filter(|share| *share > 1e-9)
        .map(|share| Load {
            label: format!("{}%", trim(share * 100.0)),
            fps: max_fps * share,
        })
        .collect()
}

/// RFC 2544 section 26.3: from 100 % of `max_fps` down by `step` (a share
/// of `max_fps`, at most 0.1) until two successive trials lose no frame.
pub fn rfc2544<R: TrialRunner>(
    runner: &mut R,
    frames: &Frames,
    max_fps: f64,
    step: f64,
    duration: Duration,
    progress: &mut dyn FnMut(Step),
) -> Result<Vec<LossPoint>, R::Error> {
    let mut trials = Vec::new();
    let mut points: Vec<LossPoint> = Vec::new();
    for load in rfc2544_loads(max_fps, step) {
        let spec = constant_rate(frames, load.fps, duration);
        let why = format!("{} of max", load.label);
        let t = run_reported(
            runner,
            &spec,
            &why,
            &mut trials,
            |t| t.lost_frames == 0,
            progress,
        )?;
        points.push(point(&load.label, t));
        if two_successive_zero_loss(&points) {
            break;
        }
    }
    Ok(points)
}

/// The last two points lost nothing (the section 26.3 stopping rule).
pub fn two_successive_zero_loss(points: &[LossPoint]) -> bool {
    points.len() >= 2
        && points[points.len() - 2..]
            .iter()
            .all(|p| p.trial.lost_frames == 0)
}

/// `90`, `92.5`: a percentage without trailing zeros.
fn trim(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimulatedDut;

    fn frame() -> linerate_wire::Frames {
        linerate_wire::Frames::Size(linerate_wire::FrameSize::from_frame(64).unwrap())
    }
    const D: Duration = Duration::from_secs(1);

    #[test]
    fn rfc2544_loads_step_down_from_100_percent() {
        let loads = rfc2544_loads(1_000_000.0, 0.1);
        let labels: Vec<&str> = loads.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(
            labels,
            ["100%", "90%", "80%", "70%", "60%", "50%", "40%", "30%", "20%", "10%"]
        );
        assert!((loads[1].fps - 900_000.0).abs() < 1e-6);
        // A coarser step than 10 % is not allowed: it is made 10 %.
        assert_eq!(rfc2544_loads(1e6, 0.25).len(), 10);
        // A finer one is.
        let fine = rfc2544_loads(1e6, 0.05);
        assert_eq!(fine.len(), 20);
        assert_eq!(fine[1].label, "95%");
    }

    #[test]
    fn rfc2544_stops_after_two_successive_zero_loss_trials() {
        // Capacity 650k of 1M: 100..70 % lose, 60 % and 50 % do not.
        let mut dut = SimulatedDut::new(650_000.0);
        let points = rfc2544(&mut dut, &frame(), 1_000_000.0, 0.1, D, &mut |_| {}).unwrap();
        let labels: Vec<&str> = points.iter().map(|p| p.load.as_str()).collect();
        assert_eq!(labels, ["100%", "90%", "80%", "70%", "60%", "50%"]);
        assert_eq!(dut.trials_run, 6);
        // Loss at 100 %: 350k of 1M frames.
        assert_eq!(points[0].trial.lost_frames, 350_000);
        assert!((points[0].loss_ratio - 0.35).abs() < 1e-12);
        assert!((points[3].loss_ratio - (1.0 - 650.0 / 700.0)).abs() < 1e-6);
        assert_eq!(points[4].trial.lost_frames, 0);
        assert_eq!(points[5].trial.lost_frames, 0);
    }

    #[test]
    fn a_device_that_never_loses_needs_two_trials() {
        let mut dut = SimulatedDut::new(2e6);
        let points = rfc2544(&mut dut, &frame(), 1e6, 0.1, D, &mut |_| {}).unwrap();
        assert_eq!(points.len(), 2);
    }

    #[test]
    fn one_zero_loss_trial_between_losses_does_not_stop() {
        // Every 1000th frame lost at any rate: never two zero-loss trials,
        // so all ten steps run.
        let mut dut = SimulatedDut::new(2e6).with_loss_every_nth(1000);
        let points = rfc2544(&mut dut, &frame(), 1e6, 0.1, D, &mut |_| {}).unwrap();
        assert_eq!(points.len(), 10);
        assert!(points.iter().all(|p| p.trial.lost_frames > 0));
    }

    #[test]
    fn sweep_runs_every_load_in_order_and_keeps_offered_beside_intended() {
        // The tester manages 800k/s at most.
        let mut dut = SimulatedDut::new(600_000.0).with_tester_ceiling(800_000.0);
        let loads: Vec<Load> = [450_000.0, 750_000.0, 1_000_000.0]
            .iter()
            .map(|&fps| Load {
                label: format!("{}", fps / 1e6),
                fps,
            })
            .collect();
        let mut seen = Vec::new();
        let points = sweep(&mut dut, &frame(), &loads, D, None, &mut |s| {
            if let Step::Starting { spec, .. } = s {
                seen.push(spec.intended_fps);
            }
        })
        .unwrap();
        assert_eq!(seen, [450_000.0, 750_000.0, 1_000_000.0]);
        assert_eq!(points[0].loss_ratio, 0.0);
        assert!(!points[0].generator_short);
        // 750k offered, 600k forwarded: 20 % lost, all by the device.
        assert!((points[1].loss_ratio - 0.2).abs() < 1e-12);
        assert_eq!(points[1].offered_fps, 750_000.0);
        // 1M intended, 800k offered: flagged, and offered is what was sent.
        assert!(points[2].generator_short);
        assert_eq!(points[2].offered_fps, 800_000.0);
        assert_eq!(points[2].intended_fps, 1_000_000.0);
        assert!((points[2].loss_ratio - 0.4).abs() < 1e-12);
    }

    #[test]
    fn a_point_whose_generator_paused_more_than_1_percent_is_marked() {
        // A generator that pauses 5 % of every trial above 700k/s.
        let mut dut = SimulatedDut::new(2e6).with_pauses_above(700_000.0, 0.05);
        let loads: Vec<Load> = [500_000.0, 800_000.0]
            .iter()
            .map(|&fps| Load {
                label: format!("{fps}"),
                fps,
            })
            .collect();
        let points = sweep(&mut dut, &frame(), &loads, D, None, &mut |_| {}).unwrap();
        assert!(!points[0].generator_short);
        // No frame lost, all sent: only the pause marks it.
        assert_eq!(points[1].trial.lost_frames, 0);
        assert!(!points[1].trial.tester_limited());
        assert!(points[1].generator_short);
        // Within 1 %: not marked.
        let mut t = points[1].trial.clone();
        t.generator_paused_ns = Some(10_000_000);
        assert!(!point("x", t).generator_short);
    }

    #[test]
    fn a_sweep_stops_after_a_load_that_lost_more_than_the_threshold() {
        let mut dut = SimulatedDut::new(600_000.0);
        let loads: Vec<Load> = [500_000.0, 750_000.0, 1_000_000.0]
            .iter()
            .map(|&fps| Load {
                label: format!("{fps}"),
                fps,
            })
            .collect();
        // 750k/s loses 20 %: above 10 %, so 1M/s is not tried.
        let points = sweep(&mut dut, &frame(), &loads, D, Some(0.1), &mut |_| {}).unwrap();
        assert_eq!(points.len(), 2);
        // Below the threshold the sweep goes on.
        let points = sweep(&mut dut, &frame(), &loads, D, Some(0.25), &mut |_| {}).unwrap();
        assert_eq!(points.len(), 3);
    }
}
