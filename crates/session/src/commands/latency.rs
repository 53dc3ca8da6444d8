//! `linerate latency`: RFC 2544 section 26.2. For each frame size (or
//! mix), the throughput search runs first (unless `--rate` gives the base
//! rate), then latency trials at the chosen shares of it.

use super::rfc2544::{describe_port, write_json, EngineRunner};
use crate::args::LatencyArgs;
use crate::exit::Outcome;
use crate::outputs::Outputs;
use crate::ports::{self, parse_share, parse_trial_duration, Zero};
use crate::progress;
use anyhow::{bail, Context, Result};
use linerate_engine::EngineError;
use linerate_method::latency::{measure_latency, parse_loads, LatencyPlan};
use linerate_method::Progress;
use linerate_method::{find_throughput, ThroughputConfig};
use linerate_results::calibration::{self, Calibration};
use linerate_results::{
    report, InterruptedSearch, LatencyReport, LatencyResult, MixInfo, TrialResult,
};
use linerate_wire::Rate;
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

pub fn run(args: LatencyArgs, interrupt: &AtomicBool) -> Result<Outcome> {
    let frames = args.frames.frames(&args.ports.encap.encap()?)?;
    let loads = parse_loads(&args.loads).map_err(anyhow::Error::msg)?;
    let trial_duration = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
    let search_duration = parse_trial_duration(&args.search_duration, "--search-duration")?;
    let resolution = parse_share(&args.resolution, "--resolution", Zero::Refused)?;
    let rate = args
        .rate
        .as_deref()
        .map(Rate::parse)
        .transpose()
        .context("--rate")?;
    let max_rate = args
        .max_rate
        .as_deref()
        .map(Rate::parse)
        .transpose()
        .context("--max-rate")?;
    let calibration_path = args
        .calibration
        .clone()
        .unwrap_or_else(calibration::default_path);
    Outputs::new()
        .json(args.json.as_deref())
        .input("--calibration", Some(&calibration_path))
        .check()?;
    let calibration = Calibration::load(&calibration_path)?;

    let mut bed = ports::open(&args.ports, crate::frame_args::max_frame_len(&frames))?;
    let line_bps = bed.line_bps;
    for f in &frames {
        bed.engine.check_frame(f.largest())?;
        let line_fps = bed.line_rate_fps(f);
        for (what, r) in [("--rate", rate), ("--max-rate", max_rate)] {
            if let Some(r) = r {
                if bed.fps(f, r) > line_fps * 1.000_001 {
                    bail!(
                        "{what} is above the line rate for {} ({line_fps:.0} frames/s at {}): lower it or set --line-speed",
                        f.describe(),
                        report::line_speed(line_bps)
                    );
                }
            }
        }
    }
    if let Some(p) = &bed.placement {
        eprintln!("linerate: {}", p.note);
    }
    if let Some(why) = &bed.engine_reason {
        eprintln!("linerate: engine {} ({why})", bed.engine.config().name);
    }
    // The DUT's CPU load in every trial, as rfc2544 records it.
    let cpu = crate::dut_cpu::meter_for(&bed, &args.dut_cpu, &[])?;
    bed.engine.resolve()?;

    let mut rep = LatencyReport {
        linerate_version: env!("CARGO_PKG_VERSION").to_string(),
        description: if bed.setup == "lab" {
            "LAN-LAN routing, lab Linux router in a network namespace".to_string()
        } else {
            format!(
                "{} -> {} (external DUT)",
                bed.engine.port_a().ifname,
                bed.engine.port_b().ifname
            )
        },
        started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        setup: bed.setup.to_string(),
        port_a: describe_port(bed.engine.port_a()),
        port_b: describe_port(bed.engine.port_b()),
        line_speed_bps: line_bps,
        trial_duration_s: trial_duration.as_secs_f64(),
        repeat: args.repeat as usize,
        engine: bed.engine.config().name.clone(),
        placement: bed.placement.clone(),
        results: Vec::new(),
        interrupted: None,
    };

    let interrupted = |rep: &mut LatencyReport, frame: linerate_wire::FrameSize, trials| {
        rep.interrupted = Some(InterruptedSearch {
            frame_size: frame.frame(),
            l3_length: frame.l3(),
            trials,
        });
        if let Some(path) = &args.json {
            write_json(path, rep)?;
        }
        print!("{}", report::latency_table(rep));
        Ok(Outcome::Interrupted(
            "the loads measured so far were kept".into(),
        ))
    };
    for f in &frames {
        let frame = f.largest();
        let line_fps = bed.line_rate_fps(f);
        // Resolved before the runner borrows the test bed.
        let given_fps = rate.map(|r| bed.fps(f, r));
        let max_fps = max_rate.map_or(line_fps, |r| bed.fps(f, r));
        let mut runner = EngineRunner {
            engine: &mut bed.engine,
            interrupt,
            cpu: cpu.as_ref(),
        };
        // Every finished trial of this size, kept for an interruption.
        let mut done: Vec<TrialResult> = Vec::new();
        let (base_fps, base, throughput) = match given_fps {
            Some(fps) => (fps, "given", None),
            None => {
                let mut cfg = ThroughputConfig::new(max_fps, search_duration);
                cfg.resolution = resolution;
                cfg.mix = f.mix().cloned();
                cfg.validate()?;
                eprintln!("linerate: {}: throughput search first", f.describe());
                let t = match find_throughput(&mut runner, frame, &cfg, line_fps, &mut |p| {
                    progress::show(&p, line_fps);
                    if let Progress::TrialDone { result, .. } = p {
                        done.push(result.clone());
                    }
                }) {
                    Err(EngineError::Interrupted) => return interrupted(&mut rep, frame, done),
                    other => other?,
                };
                (t.throughput_fps, "throughput", Some(t))
            }
        };
        if base_fps <= 0.0 {
            eprintln!(
                "linerate: {}: no rate passed the throughput search, so there is no RFC 2544 latency to measure",
                f.describe()
            );
            rep.results.push(LatencyResult {
                frame_size: frame.frame(),
                mix: f.mix().map(MixInfo::of),
                base_fps,
                base: base.to_string(),
                throughput,
                points: Vec::new(),
                tester_latency_ns: None,
            });
            continue;
        }
        let plan = LatencyPlan {
            base_fps,
            loads: loads.clone(),
            trial_duration,
            repeat: args.repeat as usize,
            mix: f.mix().cloned(),
        };
        let points = match measure_latency(&mut runner, frame, &plan, &mut |t| {
            done.push(t.clone());
            eprintln!(
                "[{}] latency trial at {} fps: rx {} lost {}",
                f.describe(),
                report::thousands(t.intended_fps.round() as u64),
                report::thousands(t.rx_frames),
                report::thousands(t.lost_frames)
            )
        }) {
            Err(EngineError::Interrupted) => return interrupted(&mut rep, frame, done),
            other => other?,
        };
        let tester_latency_ns = f
            .mix()
            .is_none()
            .then(|| {
                calibration
                    .ceiling(
                        &bed.setup_key,
                        &bed.engine.config().name,
                        bed.engine.receiver().as_str(),
                        frame.frame(),
                    )
                    .and_then(|c| c.latency_ns)
            })
            .flatten();
        rep.results.push(LatencyResult {
            frame_size: frame.frame(),
            mix: f.mix().map(MixInfo::of),
            base_fps,
            base: base.to_string(),
            throughput,
            points,
            tester_latency_ns,
        });
        if let Some(path) = &args.json {
            write_json(path, &rep)?;
        }
    }
    print!("{}", report::latency_table(&rep));
    if let Some(path) = &args.json {
        write_json(path, &rep)?;
        eprintln!("linerate: every trial written to {}", path.display());
    }
    Ok(Outcome::Passed)
}
