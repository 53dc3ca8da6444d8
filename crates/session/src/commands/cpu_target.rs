//! `linerate cpu-target`: the Cisco report's test "the bit rate was set
//! such that the CPU load was approximately 75 %": per frame size, a
//! bisection on the rate, each trial's DUT CPU load (total) compared with
//! the target, until one lands within the tolerance or the trials run out
//! (then the closest trial is reported, marked as such).

use super::rfc2544::{write_json, EngineRunner};
use super::scenarios::{prepare, record_of, traffic_checks};
use crate::args::CpuTargetArgs;
use crate::exit::Outcome;
use crate::ports::{self, parse_trial_duration};
use anyhow::{anyhow, bail, Context, Result};
use linerate_engine::EngineError;
use linerate_lab::scenario::Scenario;
use linerate_method::TrialRunner;
use linerate_results::cpu_target::{cpu_target_table, CpuTargetReport, CpuTargetResult};
use linerate_results::{TrialResult, TrialSpec};
use linerate_wire::{FrameSize, Layer, Rate};
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

pub fn run(args: CpuTargetArgs, interrupt: &AtomicBool) -> Result<Outcome> {
    let target = parse_target(&args.target)?;
    if !(args.tolerance > 0.0 && args.tolerance < 50.0) {
        bail!(
            "--tolerance {} is not a number of percentage points above 0 and below 50, e.g. 5",
            args.tolerance
        );
    }
    let frames = args
        .frames
        .sizes_only("cpu-target", &args.ports.encap.encap()?)?;
    let duration = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
    let max_rate = args
        .max_rate
        .as_deref()
        .map(Rate::parse)
        .transpose()
        .context("--max-rate")?;
    crate::outputs::check_json(args.json.as_deref())?;
    let scenario = match &args.dut.scenario {
        Some(text) => {
            let mut list = Scenario::parse_list(text)?;
            if list.len() != 1 {
                bail!("cpu-target runs one --scenario at a time: run it once per scenario");
            }
            list.pop()
        }
        None => None,
    };
    let max_frame_len = frames.iter().map(|f| f.buffer_len()).max().unwrap_or(0);
    let (applied, mut bed) = match &scenario {
        Some(s) => {
            let (a, b) = prepare(&args.ports, max_frame_len, s, 0)?;
            (Some(a), b)
        }
        None => (None, ports::open(&args.ports, max_frame_len)?),
    };
    let pids = applied
        .as_ref()
        .map(|a| a.data_path_pids())
        .unwrap_or_default();
    let meter = crate::dut_cpu::meter_for(&bed, &args.dut.cpu, &pids)?;
    let meter = meter.ok_or_else(|| {
        anyhow!("cpu-target needs the DUT's CPU load: on an external DUT give --dut-cpu-cmd or --dut-snmp")
    })?;
    let line_bps = bed.line_bps;
    for f in &frames {
        bed.engine.check_frame(*f)?;
        let line_fps = f.line_rate_fps(line_bps);
        if let (Some(rate), Some(text)) = (max_rate, &args.max_rate) {
            let fps = rate.to_fps(*f, line_bps);
            if fps > line_fps * 1.000_001 {
                bail!(
                    "--max-rate {text} is {fps:.0} frames/s, above the line rate for {}-byte frames ({line_fps:.0} frames/s at {}): lower it or set --line-speed",
                    f.frame(),
                    linerate_results::report::line_speed(line_bps)
                );
            }
        }
    }
    bed.engine.resolve()?;
    let mut report = CpuTargetReport {
        linerate_version: env!("CARGO_PKG_VERSION").to_string(),
        description: match (&scenario, bed.setup) {
            (Some(s), _) => s.description(),
            (None, "lab") => "LAN-LAN routing, lab Linux router".to_string(),
            _ => format!(
                "{} -> {} (external DUT)",
                bed.engine.port_a().ifname,
                bed.engine.port_b().ifname
            ),
        },
        started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        target_pct: target,
        tolerance_pct: args.tolerance,
        trial_duration_s: duration.as_secs_f64(),
        engine: bed.engine.config().name.clone(),
        dut_cpu_source: meter.source.clone(),
        scenario: match (&scenario, &applied) {
            (Some(s), Some(a)) => Some(record_of(s, a)),
            _ => None,
        },
        results: Vec::new(),
    };
    let save = |r: &CpuTargetReport| match &args.json {
        Some(path) => write_json(path, r),
        None => Ok(()),
    };
    let mut outcome = Outcome::Passed;
    for frame in frames {
        let line_fps = frame.line_rate_fps(line_bps);
        let max_fps = max_rate.map_or(line_fps, |r| r.to_fps(frame, line_bps));
        let mut runner = EngineRunner {
            engine: &mut bed.engine,
            interrupt,
            cpu: Some(&meter),
        };
        let mut trials = Vec::new();
        let searched = search(
            &mut runner,
            frame,
            max_fps,
            duration,
            target,
            args.tolerance,
            args.max_trials,
            &mut trials,
        );
        if !trials.is_empty() {
            report
                .results
                .push(result_of(frame, target, args.tolerance, trials));
            save(&report)?;
        }
        match searched {
            Ok(()) => {}
            Err(EngineError::Interrupted) => {
                outcome = Outcome::Interrupted("results measured so far were kept".into());
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    if let (Some(a), Some(lab), Some(rec)) = (&applied, bed.lab.as_ref(), report.scenario.as_mut())
    {
        let all = report.results.iter().flat_map(|r| &r.trials);
        rec.traffic_checks = traffic_checks(a, lab, all)?;
    }
    save(&report)?;
    print!("{}", cpu_target_table(&report));
    drop(applied);
    Ok(outcome)
}

/// Bisection on the rate between 0 and `max_fps`: a trial whose CPU load is
/// below the target raises the floor, one above lowers the ceiling. Ends
/// when a trial lands within `tolerance` points, the bracket is narrower
/// than 1 %, or `max_trials` ran. Every trial goes into `trials`.
#[allow(clippy::too_many_arguments)]
fn search<R: TrialRunner<Error = EngineError>>(
    runner: &mut R,
    frame: FrameSize,
    max_fps: f64,
    duration: std::time::Duration,
    target: f64,
    tolerance: f64,
    max_trials: u32,
    trials: &mut Vec<TrialResult>,
) -> Result<(), EngineError> {
    let (mut lo, mut hi) = (0.0f64, max_fps);
    let mut rate = max_fps;
    for n in 0..max_trials {
        let spec = TrialSpec {
            frame,
            mix: None,
            intended_fps: rate,
            duration,
        };
        eprint!(
            "[{:>5} B] cpu-target trial {:>2}: {:>11.0} fps ... ",
            frame.frame(),
            n + 1,
            rate
        );
        let t = runner.run(&spec)?;
        let Some(cpu) = t.dut_cpu else {
            eprintln!("no CPU sample");
            trials.push(t);
            continue;
        };
        eprintln!(
            "CPU {:.1} % (by traffic {:.1} %), loss {:.4} %",
            cpu.total_pct,
            cpu.traffic_pct,
            t.loss_ratio * 100.0
        );
        trials.push(t);
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

/// The trial closest to the target stands for the frame size.
fn result_of(
    frame: FrameSize,
    target: f64,
    tolerance: f64,
    trials: Vec<TrialResult>,
) -> CpuTargetResult {
    let distance = |t: &TrialResult| {
        t.dut_cpu
            .map_or(f64::INFINITY, |c| (c.total_pct - target).abs())
    };
    let best = trials
        .iter()
        .min_by(|a, b| distance(a).total_cmp(&distance(b)))
        .expect("at least one trial")
        .clone();
    CpuTargetResult {
        frame_size: frame.frame(),
        l3_length: frame.l3(),
        reached: distance(&best) <= tolerance,
        rate_fps: best.offered_fps,
        rate_mbps_l1: frame.mbps(best.offered_fps, Layer::L1),
        dut_cpu: best.dut_cpu,
        loss_ratio: best.loss_ratio,
        trials,
    }
}

/// "75%", "75" -> 75.0.
/// `--target`: a CPU load as a share (`75%` or `0.75`), in percent.
fn parse_target(text: &str) -> Result<f64> {
    Ok(100.0 * ports::parse_share(text, "--target", ports::Zero::Refused)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    use linerate_method::sim::SimulatedDut;
    use linerate_results::DutCpu;

    /// A simulated DUT whose CPU load grows with the rate: 10 % idle plus
    /// 1 % per 1,000 frames/s.
    struct Loaded(SimulatedDut);

    impl TrialRunner for Loaded {
        type Error = EngineError;
        fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, EngineError> {
            let mut t = self.0.answer(spec);
            let total = (10.0 + spec.intended_fps / 1000.0).min(100.0);
            t.dut_cpu = Some(DutCpu {
                total_pct: total,
                traffic_pct: total - 10.0,
            });
            Ok(t)
        }
    }

    fn run_search(max_fps: f64, target: f64, tolerance: f64) -> CpuTargetResult {
        let frame = FrameSize::from_frame(64).unwrap();
        let mut dut = Loaded(SimulatedDut::new(1e9));
        let mut trials = Vec::new();
        search(
            &mut dut,
            frame,
            max_fps,
            std::time::Duration::from_secs(1),
            target,
            tolerance,
            10,
            &mut trials,
        )
        .unwrap();
        result_of(frame, target, tolerance, trials)
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

    #[test]
    fn targets_parse() {
        assert_eq!(parse_target("75%").unwrap(), 75.0);
        assert_eq!(parse_target(" 50% ").unwrap(), 50.0);
        // The rule of every share: a bare number is a ratio.
        assert!((parse_target("0.75").unwrap() - 75.0).abs() < 1e-9);
        for bad in ["0", "100%", "x", "-5", "75"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
