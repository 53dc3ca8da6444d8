//! RFC 2544 section 26.2 latency: constant-rate trials at the throughput
//! rate (and at chosen shares of it, e.g. 10/50/90 %), each frame's latency
//! measured from its *scheduled* send time to its arrival.
//!
//! RFC 2544 times one tagged frame per trial and repeats the trial 20
//! times; linerate times every frame of every trial (the engine's
//! histogram), so one trial already gives the distribution. With
//! `repeat > 1` each load is run that many times and the figures are
//! combined as the RFC averages them: the mean of the trials' averages and
//! percentiles, weighted by frames received, with the lowest minimum and
//! the highest maximum.
//!
//! Packet delay variation follows RFC 5481's PDV: the spread of one-way
//! delay above the minimum, reported at the 99th and 99.9th percentiles
//! (`p99 - min`, `p999 - min`).
//!
//! A latency trial that lost frames is reported as it is, with its loss:
//! latency at a rate the device does not forward is not RFC 2544 latency,
//! and the report says so rather than hiding it.

use crate::TrialRunner;
pub use linerate_results::LatencyPoint;
use linerate_results::{LatencySummary, TrialResult, TrialSpec};
use linerate_wire::{FrameMix, FrameSize};
use std::time::Duration;

/// What to measure for one frame size (or mix).
#[derive(Debug, Clone)]
pub struct LatencyPlan {
    /// The rate the loads are shares of: normally the throughput found by
    /// the RFC 2544 search, frames/s.
    pub base_fps: f64,
    /// Shares of `base_fps` to measure at, e.g. `[0.1, 0.5, 0.9, 1.0]`.
    pub loads: Vec<f64>,
    pub trial_duration: Duration,
    /// Trials per load (RFC 2544: 20; linerate's default 1, since every
    /// frame is timed).
    pub repeat: usize,
    pub mix: Option<FrameMix>,
}

/// Runs the plan's trials, lowest load first, and reports each load.
pub fn measure_latency<R: TrialRunner>(
    runner: &mut R,
    frame: FrameSize,
    plan: &LatencyPlan,
    on_trial: &mut dyn FnMut(&TrialResult),
) -> Result<Vec<LatencyPoint>, R::Error> {
    let mut loads = plan.loads.clone();
    loads.sort_by(|a, b| a.total_cmp(b));
    let mut points = Vec::new();
    for load in loads {
        let spec = TrialSpec {
            frame,
            mix: plan.mix.clone(),
            intended_fps: plan.base_fps * load,
            duration: plan.trial_duration,
        };
        let mut trials = Vec::new();
        for _ in 0..plan.repeat.max(1) {
            let t = runner.run(&spec)?;
            on_trial(&t);
            trials.push(t);
        }
        let latency_ns = combine(&trials);
        points.push(LatencyPoint {
            load,
            intended_fps: spec.intended_fps,
            pdv_p99_ns: latency_ns.map(|l| l.p99.saturating_sub(l.min)),
            pdv_p999_ns: latency_ns.map(|l| l.p999.saturating_sub(l.min)),
            latency_ns,
            lost_frames: trials.iter().map(|t| t.lost_frames).sum(),
            dut_cpu: linerate_results::DutCpu::mean(&trials),
            trials,
        });
    }
    Ok(points)
}

/// Combines trials' summaries: lowest min, highest max, and the other
/// figures averaged with each trial weighted by its latency samples.
pub fn combine(trials: &[TrialResult]) -> Option<LatencySummary> {
    let with: Vec<(&LatencySummary, u64)> = trials
        .iter()
        .filter_map(|t| t.latency_ns.as_ref().map(|l| (l, l.weight(t.rx_frames))))
        .collect();
    if with.is_empty() {
        return None;
    }
    let weight: u128 = with.iter().map(|&(_, w)| w as u128).sum();
    let mean = |f: fn(&LatencySummary) -> u64| -> u64 {
        let sum: u128 = with.iter().map(|&(l, w)| f(l) as u128 * w as u128).sum();
        ((sum + weight / 2) / weight) as u64
    };
    Some(LatencySummary {
        samples: with.iter().map(|(l, _)| l.samples).sum(),
        every: with.iter().map(|(l, _)| l.every).max().unwrap_or(1),
        min: with.iter().map(|(l, _)| l.min).min().unwrap_or(0),
        max: with.iter().map(|(l, _)| l.max).max().unwrap_or(0),
        avg: mean(|l| l.avg),
        p50: mean(|l| l.p50),
        p90: mean(|l| l.p90),
        p99: mean(|l| l.p99),
        p999: mean(|l| l.p999),
    })
}

/// Parses `10%,50%,90%,100%` (or fractions `0.1,...`) into shares.
pub fn parse_loads(text: &str) -> Result<Vec<f64>, String> {
    let bad = |p: &str| {
        format!("load '{p}' is not understood: write shares of the throughput as 10%,50%,100% (above 0, at most 100%)")
    };
    let mut out = Vec::new();
    for p in text.split(',') {
        let p = p.trim();
        let v = match p.strip_suffix('%') {
            Some(n) => n.trim().parse::<f64>().map(|v| v / 100.0),
            None => p.parse::<f64>(),
        }
        .map_err(|_| bad(p))?;
        if !(v > 0.0 && v <= 1.0) {
            return Err(bad(p));
        }
        out.push(v);
    }
    if out.is_empty() {
        return Err(bad(text));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimulatedDut;

    fn trial(rx: u64, l: LatencySummary) -> TrialResult {
        let mut dut = SimulatedDut::new(1e6);
        let mut t = dut
            .run(&TrialSpec {
                frame: FrameSize::from_frame(64).unwrap(),
                mix: None,
                intended_fps: rx as f64,
                duration: Duration::from_secs(1),
            })
            .unwrap();
        t.latency_ns = Some(l);
        t
    }

    fn summary(min: u64, avg: u64, max: u64) -> LatencySummary {
        LatencySummary {
            min,
            avg,
            max,
            p50: avg,
            p90: avg + 10,
            p99: avg + 20,
            p999: avg + 30,
            ..Default::default()
        }
    }

    #[test]
    fn repeats_combine_as_weighted_means_with_extreme_min_and_max() {
        let a = trial(1000, summary(10, 100, 500));
        let b = trial(3000, summary(20, 200, 900));
        let c = combine(&[a, b]).unwrap();
        assert_eq!((c.min, c.max), (10, 900));
        assert_eq!(c.avg, 175, "(100 x 1000 + 200 x 3000) / 4000");
        assert_eq!(c.p999, 205);
        let mut none = trial(10, summary(1, 1, 1));
        none.latency_ns = None;
        assert_eq!(combine(&[none]), None);
    }

    #[test]
    fn loads_run_lowest_first_at_their_share_of_the_base_rate() {
        let mut dut = SimulatedDut::new(1_000_000.0);
        let plan = LatencyPlan {
            base_fps: 800_000.0,
            loads: vec![1.0, 0.1, 0.5],
            trial_duration: Duration::from_secs(1),
            repeat: 2,
            mix: None,
        };
        let mut seen = Vec::new();
        let points = measure_latency(
            &mut dut,
            FrameSize::from_frame(64).unwrap(),
            &plan,
            &mut |t| seen.push(t.intended_fps),
        )
        .unwrap();
        assert_eq!(
            seen,
            vec![80_000.0, 80_000.0, 400_000.0, 400_000.0, 800_000.0, 800_000.0]
        );
        assert_eq!(points.len(), 3);
        assert!(points
            .iter()
            .all(|p| p.trials.len() == 2 && p.lost_frames == 0));
        let l = points[2].latency_ns.unwrap();
        assert_eq!(points[2].pdv_p999_ns, Some(l.p999 - l.min));
    }

    #[test]
    fn loads_parse_as_percent_or_fraction() {
        assert_eq!(parse_loads("10%,50%, 100%").unwrap(), vec![0.1, 0.5, 1.0]);
        assert_eq!(parse_loads("0.9").unwrap(), vec![0.9]);
        assert!(parse_loads("120%").is_err());
        assert!(parse_loads("0").is_err());
        assert!(parse_loads("fast").unwrap_err().contains("10%,50%,100%"));
    }
}
