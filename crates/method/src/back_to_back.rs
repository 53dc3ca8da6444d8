//! Back-to-back frames (RFC 2544 section 26.4, as updated by RFC 9004): the
//! longest burst of frames at the maximum rate that the device forwards
//! without losing one, repeated, and the buffer time it implies.
//!
//! # One repetition
//!
//! A burst of `N` frames is a constant-rate trial at the burst rate whose
//! duration is `N / rate` ([`crate::spec::burst`]). A burst *passes* when
//! no frame is lost (frames the tester failed to send count as lost).
//!
//! The first repetition starts with the longest burst allowed
//! (`max_burst`); if it fails, the burst is halved until one passes, then
//! the bracket (longest passing, shortest failing) is bisected until it is
//! within `resolution` of the failing length (at least one frame). Later
//! repetitions start at the previous repetition's result and step away
//! from it by steps that double (2, 4, 8 ... × resolution) until the
//! bracket closes again, then bisect: the same answer for fewer trials.
//!
//! # The buffer (RFC 9004)
//!
//! With the mean longest burst `B`, the burst rate `R` and the device's
//! measured throughput `T`:
//!
//! - implied DUT buffer time = `B / R`;
//! - during the burst the device also forwarded `T × B / R` frames, so it
//!   held only `B × (1 − T / R)` of them: the corrected DUT buffer time is
//!   `B / R − (B / R) × T / R = (B / R) × (1 − T / R)`.
//!
//! When the device forwards the burst rate without loss (`T = R`) the test
//! measures no buffer at all (every burst would pass): no burst is run and
//! the result says so.
//!
//! A burst the tester sent slower than the burst rate (`offered_fps` below
//! 99 % of it, or frames missing) is not a valid back-to-back burst: when
//! the longest passing burst was sent so, or the shortest failing one
//! lacked frames the tester did not send, the repetition is marked
//! `tester_limited`. Pauses of the generator count as slowness: held up by
//! the machine, it pauses rather than catch up (`generator_paused_ns`), and
//! the device drains its buffer during a pause, so a burst whose rate
//! over the sending time and the pauses is below 99 % of the burst rate was
//! not back to back either. A failing burst with pauses is still the
//! device's failure (it lost frames though it had time to drain).

use crate::spec::{burst, mix_info, run_reported, Step};
use crate::TrialRunner;
use linerate_results::methods::{BackToBackResult, BurstSearch};
use linerate_results::TrialResult;
use linerate_wire::Frames;

/// RFC 2544 section 26.4: "the trial SHOULD be repeated at least 50 times".
pub const DEFAULT_REPEAT: usize = 50;

/// Trials one repetition may run at most.
pub const MAX_TRIALS_PER_REPETITION: usize = 64;

/// A burst offered below this share of the burst rate is not back to back.
pub const MIN_OFFERED_SHARE: f64 = 0.99;

/// Settings of a back-to-back test.
#[derive(Debug, Clone)]
pub struct BackToBackConfig {
    /// Rate of every burst, frames/s: the line rate (RFC 2544: "minimum
    /// legitimate inter-frame gap"), or lower with `--max-rate`.
    pub burst_fps: f64,
    /// Longest burst tried, frames.
    pub max_burst: u64,
    /// Relative resolution of each repetition's result.
    pub resolution: f64,
    /// Repetitions (RFC 2544: at least 50).
    pub repeat: usize,
}

/// Settings the test cannot work with.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BackToBackError {
    #[error("the burst rate must be a positive number of frames/s, not {0}")]
    Rate(f64),
    #[error("the longest burst must be at least 2 frames, not {0}")]
    MaxBurst(u64),
    #[error("resolution {0} is out of range: use a fraction from 0.0001 to 0.5 (0.01 means 1 %)")]
    Resolution(f64),
    #[error("--repeat must be at least 1")]
    Repeat,
}

impl BackToBackConfig {
    pub fn validate(&self) -> Result<(), BackToBackError> {
        if !(self.burst_fps.is_finite() && self.burst_fps > 0.0) {
            return Err(BackToBackError::Rate(self.burst_fps));
        }
        if self.max_burst < 2 {
            return Err(BackToBackError::MaxBurst(self.max_burst));
        }
        if !(0.0001..=0.5).contains(&self.resolution) {
            return Err(BackToBackError::Resolution(self.resolution));
        }
        if self.repeat == 0 {
            return Err(BackToBackError::Repeat);
        }
        Ok(())
    }
}

/// True when the burst was sent in full at (nearly) the burst rate, the
/// generator's pauses counted: its offered rate (over the time the frames
/// took, pauses included) is at least [`MIN_OFFERED_SHARE`] of the burst
/// rate.
pub fn sent_back_to_back(t: &TrialResult) -> bool {
    !t.tester_limited() && t.offered_fps >= MIN_OFFERED_SHARE * t.intended_fps
}

fn passed(t: &TrialResult) -> bool {
    t.lost_frames == 0
}

/// One repetition: the longest burst that passes, starting from `start`
/// (the previous repetition's result) or from `max_burst`.
pub fn longest_burst<R: TrialRunner>(
    runner: &mut R,
    frames: &Frames,
    cfg: &BackToBackConfig,
    start: Option<u64>,
    label: &str,
    progress: &mut dyn FnMut(Step),
) -> Result<BurstSearch, R::Error> {
    let max = cfg.max_burst.max(1);
    let res = cfg.resolution.clamp(0.0001, 0.5);
    let mut trials: Vec<TrialResult> = Vec::new();
    // Longest burst that passed (0: none yet) and shortest that failed.
    let mut lo: u64 = 0;
    let mut hi: Option<u64> = None;
    let hinted = start.is_some_and(|s| s > 0 && s < max);
    let mut step_up = 2.0 * res;
    let mut step_down = 2.0 * res;
    let mut n = if hinted { start.unwrap_or(max) } else { max };

    while trials.len() < MAX_TRIALS_PER_REPETITION {
        let spec = burst(frames, cfg.burst_fps, n);
        let why = format!("burst of {n} frames, {label}");
        let t = run_reported(runner, &spec, &why, &mut trials, passed, progress)?;
        if passed(&t) {
            lo = lo.max(n);
        } else {
            hi = Some(hi.map_or(n, |h| h.min(n)));
        }
        let next = match hi {
            None if lo >= max => break,
            None => {
                // Passed from a hint: step up until a burst fails.
                let up = ((lo as f64) * (1.0 + step_up)).ceil() as u64;
                step_up *= 2.0;
                up.clamp(lo + 1, max)
            }
            Some(h) if lo == 0 => {
                if h <= 1 {
                    break; // Even a single frame was lost.
                }
                if hinted {
                    let down = ((h as f64) * (1.0 - step_down)).floor() as u64;
                    step_down *= 2.0;
                    down.clamp(1, h - 1)
                } else {
                    h / 2
                }
            }
            Some(h) => {
                let gap = h.saturating_sub(lo);
                if gap <= 1 || (gap as f64) <= res * h as f64 {
                    break;
                }
                lo + gap / 2
            }
        };
        n = next;
    }
    // The two trials that decide the result: a pass the tester sent slower
    // than the burst rate proves nothing, and a failure where the tester
    // did not send every frame may be the tester's.
    let pass_invalid = trials
        .iter()
        .filter(|t| passed(t) && t.intended_frames == lo)
        .any(|t| !sent_back_to_back(t));
    let fail_invalid = hi.is_some_and(|h| {
        trials
            .iter()
            .filter(|t| !passed(t) && t.intended_frames == h)
            .all(|t| t.tester_limited())
    });
    let tester_limited = pass_invalid || fail_invalid;
    Ok(BurstSearch {
        longest_burst_frames: lo,
        shortest_failing_frames: hi,
        at_max_burst: lo >= max,
        tester_limited,
        trials,
    })
}

/// The whole test for one frame size: `cfg.repeat` repetitions and the
/// buffer they imply, given the device's measured throughput.
pub fn back_to_back<R: TrialRunner>(
    runner: &mut R,
    frames: &Frames,
    cfg: &BackToBackConfig,
    throughput_fps: f64,
    line_rate_fps: f64,
    progress: &mut dyn FnMut(Step),
) -> Result<BackToBackResult, R::Error> {
    let mut reps: Vec<BurstSearch> = Vec::new();
    if throughput_fps >= cfg.burst_fps * (1.0 - 1e-9) {
        // Every burst would pass: nothing to measure (RFC 9004 section 5).
        return Ok(summarize(frames, cfg, throughput_fps, line_rate_fps, reps));
    }
    for k in 0..cfg.repeat.max(1) {
        let start = reps.last().map(|r| r.longest_burst_frames);
        let label = format!("repetition {}/{}", k + 1, cfg.repeat.max(1));
        reps.push(longest_burst(runner, frames, cfg, start, &label, progress)?);
    }
    Ok(summarize(frames, cfg, throughput_fps, line_rate_fps, reps))
}

/// Mean, spread and buffer times of the repetitions.
pub fn summarize(
    frames: &Frames,
    cfg: &BackToBackConfig,
    throughput_fps: f64,
    line_rate_fps: f64,
    reps: Vec<BurstSearch>,
) -> BackToBackResult {
    let bursts: Vec<f64> = reps.iter().map(|r| r.longest_burst_frames as f64).collect();
    let n = bursts.len() as f64;
    let mean = if bursts.is_empty() {
        0.0
    } else {
        bursts.iter().sum::<f64>() / n
    };
    let stddev = if bursts.len() > 1 {
        (bursts.iter().map(|b| (b - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
    } else {
        0.0
    };
    let rate = cfg.burst_fps;
    let implied = mean / rate;
    let forwarded_share = (throughput_fps / rate).clamp(0.0, 1.0);
    let not_meaningful = if throughput_fps >= rate * (1.0 - 1e-9) {
        Some("the device forwards the burst rate without loss (its throughput is the burst rate), so bursts measure no buffer (RFC 9004 section 5): raise the burst rate".to_string())
    } else if !reps.is_empty() && reps.iter().all(|r| r.at_max_burst) {
        Some(format!(
            "every burst up to the longest tried ({} frames) passed: the buffer holds at least that; raise --max-burst",
            cfg.max_burst
        ))
    } else {
        None
    };
    BackToBackResult {
        frame_size: frames.largest().frame(),
        l3_length: frames.largest().l3(),
        mix: mix_info(frames),
        line_rate_fps,
        burst_fps: rate,
        max_burst_frames: cfg.max_burst,
        throughput_fps,
        throughput_search: None,
        mean_burst_frames: mean,
        stddev_burst_frames: stddev,
        min_burst_frames: reps
            .iter()
            .map(|r| r.longest_burst_frames)
            .min()
            .unwrap_or(0),
        max_passing_burst_frames: reps
            .iter()
            .map(|r| r.longest_burst_frames)
            .max()
            .unwrap_or(0),
        implied_buffer_time_s: implied,
        corrected_buffer_time_s: implied * (1.0 - forwarded_share),
        buffered_frames: mean * (1.0 - forwarded_share),
        not_meaningful,
        trial_seconds: reps
            .iter()
            .flat_map(|r| &r.trials)
            .map(|t| t.duration_s)
            .sum(),
        repetitions: reps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimulatedDut;

    fn frame() -> linerate_wire::Frames {
        linerate_wire::Frames::Size(linerate_wire::FrameSize::from_frame(64).unwrap())
    }

    fn cfg(repeat: usize) -> BackToBackConfig {
        BackToBackConfig {
            burst_fps: 1_000_000.0,
            max_burst: 2_000_000,
            resolution: 0.001,
            repeat,
        }
    }

    /// Capacity 600k/s, buffer 10,000 frames: a burst of N at 1M/s passes
    /// while N × (1 − 0.6) <= 10,000, i.e. N <= 25,000.
    fn buffered_dut() -> SimulatedDut {
        SimulatedDut::new(600_000.0).with_buffer(10_000)
    }

    #[test]
    fn the_longest_burst_is_found_within_the_resolution() {
        let mut dut = buffered_dut();
        let r = longest_burst(&mut dut, &frame(), &cfg(1), None, "", &mut |_| {}).unwrap();
        let b = r.longest_burst_frames;
        assert!(b <= 25_000 && b as f64 >= 25_000.0 * 0.999, "{b}");
        assert!(r.shortest_failing_frames.unwrap() > 25_000);
        assert!(!r.at_max_burst && !r.tester_limited);
        // Each trial was a burst of exactly the frames asked for.
        for t in &r.trials {
            assert!((t.intended_frames as f64 / 1e6 - t.duration_s).abs() < 1e-6);
        }
    }

    #[test]
    fn the_buffer_follows_from_mean_burst_and_throughput() {
        let mut dut = buffered_dut();
        let r = back_to_back(&mut dut, &frame(), &cfg(5), 600_000.0, 1.488e6, &mut |_| {}).unwrap();
        assert_eq!(r.repetitions.len(), 5);
        // The same device every time: no spread.
        assert_eq!(r.stddev_burst_frames, 0.0);
        assert_eq!(r.min_burst_frames, r.max_passing_burst_frames);
        let b = r.mean_burst_frames;
        assert!((r.implied_buffer_time_s - b / 1e6).abs() < 1e-12);
        // RFC 9004: corrected = implied × (1 − T/R) = B × 0.4 / 1M ≈ 10 ms.
        assert!((r.corrected_buffer_time_s - b * 0.4 / 1e6).abs() < 1e-12);
        assert!(
            (r.buffered_frames - 10_000.0).abs() <= 10.0,
            "{}",
            r.buffered_frames
        );
        assert!(r.not_meaningful.is_none());
        // Later repetitions start at the result: fewer trials than the first.
        let first = r.repetitions[0].trials.len();
        let later = r.repetitions[1].trials.len();
        assert!(later < first, "first {first}, later {later}");
        assert_eq!(
            dut.trials_run,
            r.repetitions.iter().map(|x| x.trials.len()).sum::<usize>()
        );
    }

    #[test]
    fn stddev_is_the_sample_standard_deviation() {
        let rep = |b: u64| BurstSearch {
            longest_burst_frames: b,
            shortest_failing_frames: Some(b + 1),
            at_max_burst: false,
            tester_limited: false,
            trials: vec![],
        };
        let r = summarize(
            &frame(),
            &cfg(3),
            0.0,
            1.488e6,
            vec![rep(10), rep(20), rep(30)],
        );
        assert_eq!(r.mean_burst_frames, 20.0);
        assert!((r.stddev_burst_frames - 10.0).abs() < 1e-12);
        assert_eq!((r.min_burst_frames, r.max_passing_burst_frames), (10, 30));
        // Throughput 0: the whole burst was buffered.
        assert_eq!(r.corrected_buffer_time_s, r.implied_buffer_time_s);
    }

    #[test]
    fn a_device_forwarding_the_burst_rate_has_no_meaningful_buffer() {
        let mut dut = SimulatedDut::new(2_000_000.0);
        let mut c = cfg(2);
        c.max_burst = 100_000;
        // Its throughput is the burst rate: no burst is run.
        let r = back_to_back(&mut dut, &frame(), &c, 1_000_000.0, 1.488e6, &mut |_| {}).unwrap();
        assert_eq!(dut.trials_run, 0);
        assert!(r.repetitions.is_empty());
        assert!(r.not_meaningful.is_some());
        // Told a lower throughput, it runs the bursts, and every one passes.
        let r = back_to_back(&mut dut, &frame(), &c, 500_000.0, 1.488e6, &mut |_| {}).unwrap();
        assert!(r
            .repetitions
            .iter()
            .all(|x| x.at_max_burst && x.trials.len() == 1));
        assert!(r.not_meaningful.unwrap().contains("--max-burst"));
    }

    #[test]
    fn a_device_losing_single_frames_has_no_passing_burst() {
        let mut dut = SimulatedDut::new(2_000_000.0).with_loss_every_nth(1);
        let r = longest_burst(&mut dut, &frame(), &cfg(1), None, "", &mut |_| {}).unwrap();
        assert_eq!(r.longest_burst_frames, 0);
        assert_eq!(r.shortest_failing_frames, Some(1));
    }

    #[test]
    fn a_burst_the_tester_sent_slowly_is_marked() {
        let mut dut = buffered_dut().with_tester_ceiling(900_000.0);
        let r = longest_burst(&mut dut, &frame(), &cfg(1), None, "", &mut |_| {}).unwrap();
        assert!(r.tester_limited);
    }

    #[test]
    fn a_passing_burst_the_generator_paused_in_is_marked() {
        // Every burst paused 5 %: the device drained its buffer meanwhile
        // and passed longer bursts than it holds.
        let mut dut = buffered_dut().with_pauses_above(0.0, 0.05);
        let r = longest_burst(&mut dut, &frame(), &cfg(1), None, "", &mut |_| {}).unwrap();
        assert!(
            r.longest_burst_frames > 25_000,
            "{}",
            r.longest_burst_frames
        );
        assert!(r.tester_limited);
        // Pauses within 1 % of the burst: still back to back.
        let mut dut = buffered_dut().with_pauses_above(0.0, 0.005);
        let r = longest_burst(&mut dut, &frame(), &cfg(1), None, "", &mut |_| {}).unwrap();
        assert!(!r.tester_limited);
    }

    #[test]
    fn a_failing_burst_with_pauses_is_the_device_s() {
        struct PausingFailures(SimulatedDut);
        impl TrialRunner for PausingFailures {
            type Error = std::convert::Infallible;
            fn run(
                &mut self,
                spec: &linerate_results::TrialSpec,
            ) -> Result<TrialResult, Self::Error> {
                let mut t = self.0.run(spec)?;
                if t.lost_frames > 0 {
                    t.generator_paused_ns = Some((t.duration_s * 0.10 * 1e9) as u64);
                }
                Ok(t)
            }
        }
        let mut runner = PausingFailures(buffered_dut());
        let r = longest_burst(&mut runner, &frame(), &cfg(1), None, "", &mut |_| {}).unwrap();
        let b = r.longest_burst_frames;
        assert!(b <= 25_000 && b as f64 >= 25_000.0 * 0.999, "{b}");
        assert!(r.trials.iter().any(|t| t.paused_share() > 0.05));
        assert!(!r.tester_limited);
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(cfg(1).validate().is_ok());
        assert_eq!(
            BackToBackConfig {
                repeat: 0,
                ..cfg(1)
            }
            .validate(),
            Err(BackToBackError::Repeat)
        );
        assert!(matches!(
            BackToBackConfig {
                max_burst: 1,
                ..cfg(1)
            }
            .validate(),
            Err(BackToBackError::MaxBurst(1))
        ));
    }
}
