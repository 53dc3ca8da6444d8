//! `linerate rfc2544`: the throughput search (RFC 2544 section 26.1) for
//! each frame size, printed as the LANCOM techpaper's table.

use crate::args::Rfc2544Args;
use crate::exit::Outcome;
use crate::ports::{self, check_writable, parse_percent, parse_trial_duration};
use crate::recorder::{Recorder, RunInfo};
use anyhow::{bail, Context, Result};
use linerate_engine::{Engine, EngineError};
use linerate_method::{find_throughput, Progress, ThroughputConfig, TrialRunner};
use linerate_results::calibration::{self, near_ceiling, Calibration};
use linerate_results::{report, InterruptedSearch, Rfc2544Report, TrialResult, TrialSpec};
use linerate_store::RunStatus;
use linerate_wire::{FrameSize, Rate};
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

/// RFC 2544 section 24: trials of at least 60 s.
const STRICT_TRIAL: Duration = Duration::from_secs(60);

/// Lets the throughput search run its trials on the engine.
pub(crate) struct EngineRunner<'a> {
    pub engine: &'a mut Engine,
    pub interrupt: &'a AtomicBool,
}

impl TrialRunner for EngineRunner<'_> {
    type Error = EngineError;
    fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, EngineError> {
        self.engine.run_trial(spec, self.interrupt)
    }
}

pub fn run(args: Rfc2544Args, interrupt: &AtomicBool) -> Result<Outcome> {
    let frames = frame_sizes(&args)?;
    let trial_duration = if args.rfc2544_strict {
        STRICT_TRIAL
    } else {
        parse_trial_duration(&args.trial_duration, "--trial-duration")?
    };
    let resolution = parse_percent(&args.resolution, "--resolution")?;
    let allowed_loss = parse_percent(&args.loss, "--loss")?;
    let max_rate = args
        .max_rate
        .as_deref()
        .map(Rate::parse)
        .transpose()
        .context("--max-rate")?;

    check_writable(args.json.as_deref())?;
    let mut recorder = Recorder::open(&args.record)?;
    let calibration_path = args
        .calibration
        .clone()
        .unwrap_or_else(calibration::default_path);
    let calibration = Calibration::load(&calibration_path)?;
    let max_frame_len = frames.iter().map(|f| f.buffer_len()).max().unwrap_or(0);
    let mut bed = ports::open(&args.ports, max_frame_len)?;
    for f in &frames {
        bed.engine.check_frame(*f)?;
    }
    let line_bps = bed.line_bps;
    // Search bounds per frame size, checked before the first trial.
    let mut plans = Vec::new();
    for &frame in &frames {
        let line_fps = frame.line_rate_fps(line_bps);
        let max_fps = max_rate.map_or(line_fps, |r| r.to_fps(frame, line_bps));
        if max_fps > line_fps * 1.000_001 {
            bail!(
                "--max-rate {} is above the line rate for {}-byte frames ({:.0} frames/s at {}): lower it or set --line-speed",
                args.max_rate.as_deref().unwrap_or_default(),
                frame.frame(),
                line_fps,
                report::line_speed(line_bps)
            );
        }
        let mut cfg = ThroughputConfig::new(max_fps, trial_duration);
        cfg.resolution = resolution;
        cfg.allowed_loss_ratio = allowed_loss;
        cfg.validate()?;
        plans.push((frame, line_fps, cfg));
    }

    eprintln!(
        "linerate: RFC 2544 throughput on {} -> {}, line speed {} ({}), trials of {}",
        describe_port(bed.engine.port_a()),
        describe_port(bed.engine.port_b()),
        report::line_speed(line_bps),
        bed.line_speed_source,
        humantime::format_duration(trial_duration),
    );
    if let Some(p) = &bed.placement {
        eprintln!("linerate: {}", p.note);
    }
    if let Some(why) = &bed.engine_reason {
        eprintln!("linerate: engine {} ({why})", bed.engine.config().name);
    }
    bed.engine.resolve()?;

    let mut rep = Rfc2544Report {
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
        resolution,
        allowed_loss_ratio: allowed_loss,
        engine: bed.engine.config().name.clone(),
        placement: bed.placement.clone(),
        results: Vec::new(),
        interrupted: None,
    };
    recorder.begin(RunInfo {
        command: "rfc2544",
        engine: &rep.engine,
        line_speed_bps: line_bps,
        scenario: &rep.description,
        report: Some(&rep),
        sizes: plans.iter().map(|p| p.0.frame()).collect(),
        trial_s: trial_duration.as_secs_f64(),
        resolution,
        port_b_mac: bed.engine.port_b().mac,
    })?;

    for (search_no, (frame, line_fps, cfg)) in plans.into_iter().enumerate() {
        let mut trials: Vec<TrialResult> = Vec::new();
        let json = args.json.as_deref();
        let mut on_progress = |p: Progress| {
            recorder.search_progress(search_no, &p, line_fps);
            if let Progress::TrialDone { result, .. } = p {
                // Stored as each trial ends: an interrupted run keeps every trial.
                trials.push(result.clone());
                if let Some(path) = json {
                    let mut partial = rep.clone();
                    partial.interrupted = Some(unfinished(frame, trials.clone()));
                    // Checked writable at the start; a failure now (disk full)
                    // must not stop the measurement: the final write reports it.
                    let _ = write_json(path, &partial);
                }
            }
        };
        let mut runner = EngineRunner {
            engine: &mut bed.engine,
            interrupt,
        };
        match find_throughput(&mut runner, frame, &cfg, line_fps, &mut on_progress) {
            Ok(mut result) => {
                let engine = &bed.engine.config().name;
                if let Some(c) = calibration.ceiling(&bed.setup_key, engine, frame.frame()) {
                    result.calibrated_ceiling_fps = Some(c.ceiling_fps);
                    result.tester_limited |= near_ceiling(result.throughput_fps, c.ceiling_fps);
                }
                recorder.result(search_no, &result);
                rep.results.push(result)
            }
            Err(e) => {
                // Interrupted or failed: keep the unfinished search's trials.
                eprintln!();
                rep.interrupted = Some(unfinished(frame, trials));
                if let Some(path) = &args.json {
                    write_json(path, &rep)?;
                }
                if let EngineError::Interrupted = e {
                    recorder.print(&report::throughput_table(&rep));
                    recorder.finish(RunStatus::Interrupted);
                    return Ok(Outcome::Interrupted(
                        "results measured so far were kept".into(),
                    ));
                }
                return Err(e.into());
            }
        }
        if let Some(path) = &args.json {
            write_json(path, &rep)?;
        }
    }
    recorder.print(&report::throughput_table(&rep));
    recorder.finish(RunStatus::Complete);
    if let Some(path) = &args.json {
        eprintln!("linerate: every trial written to {}", path.display());
    }
    Ok(Outcome::Passed)
}

/// The trials of a frame size whose search did not finish.
fn unfinished(frame: FrameSize, trials: Vec<TrialResult>) -> InterruptedSearch {
    InterruptedSearch {
        frame_size: frame.frame(),
        l3_length: frame.l3(),
        trials,
    }
}

fn frame_sizes(args: &Rfc2544Args) -> Result<Vec<FrameSize>> {
    let sizes = match &args.l3_length {
        Some(l3) => l3
            .iter()
            .map(|&n| FrameSize::from_l3(n))
            .collect::<Result<Vec<_>, _>>()?,
        None => args
            .sizes
            .iter()
            .map(|&n| FrameSize::from_frame(n))
            .collect::<Result<Vec<_>, _>>()?,
    };
    if sizes.is_empty() {
        bail!("no frame size given: use --sizes 64,128,... or --l3-length 40,...");
    }
    Ok(sizes)
}

pub fn describe_port(info: &linerate_port::PortInfo) -> String {
    match &info.netns {
        Some(ns) => format!("{ns}/{}", info.ifname),
        None => info.ifname.clone(),
    }
}

/// Writes JSON atomically: a reader never sees half a file.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, report::to_json(value))
        .with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
