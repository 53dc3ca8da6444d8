//! `linerate loss`: frame loss rate vs offered load (RFC 2544 section
//! 26.3), printed as the 100GE report's tables.

use super::rfc2544::EngineRunner;
use super::session::{self, fps_within_line, parse_rate};
use crate::exit::Outcome;
use crate::method_args::LossArgs;
use crate::ports::{check_writable, parse_percent, parse_trial_duration};
use anyhow::{bail, Context, Result};
use linerate_method::frame_loss::{self, Load, RFC2544_MAX_STEP};
use linerate_method::spec::Step;
use linerate_results::methods::{FrameLossReport, LossSeries};
use linerate_results::{report, MixInfo, TrialResult};
use linerate_wire::Rate;
use std::sync::atomic::AtomicBool;

pub fn run(args: LossArgs, interrupt: &AtomicBool) -> Result<Outcome> {
    let frames = args.frames.frames()?;
    let duration = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
    let loads: Vec<(String, Rate)> = match &args.loads {
        Some(list) => list
            .iter()
            .map(|t| Ok((t.trim().to_string(), parse_rate(t, "--loads")?)))
            .collect::<Result<_>>()?,
        None => Vec::new(),
    };
    if !args.rfc2544 && loads.is_empty() {
        bail!("no load given: use --loads 0.5Mpps,1Mpps,... (or fps, %, Mbps), or --rfc2544");
    }
    let step = parse_percent(&args.step, "--step")?;
    if args.rfc2544 && !(step > 0.0 && step <= RFC2544_MAX_STEP + 1e-12) {
        bail!("--step {} is out of range: RFC 2544 section 26.3 asks for steps of at most 10 % of the maximum rate", args.step);
    }
    let max_rate = args
        .max_rate
        .as_deref()
        .map(|t| parse_rate(t, "--max-rate"))
        .transpose()?;
    check_writable(args.json.as_deref())?;
    let mode = if args.rfc2544 { "rfc2544" } else { "sweep" };
    let earlier = earlier_rows(&args.rows_from, mode)?;

    let mut s = session::open(&args.ports, &args.dut.cpu, &frames, "frame loss rate")?;
    // Every load checked against the line rate before the first trial.
    let mut plans = Vec::new();
    for frames in &frames {
        let line_fps = s.bed.line_rate_fps(frames);
        let max_fps = match (&max_rate, &args.max_rate) {
            (Some(r), Some(t)) => fps_within_line(&s.bed, *r, t, "--max-rate", frames)?,
            _ => line_fps,
        };
        let mut frame_loads = Vec::new();
        for (text, rate) in &loads {
            let fps = fps_within_line(&s.bed, *rate, text, "--loads", frames)?;
            frame_loads.push(Load {
                label: text.clone(),
                fps,
            });
        }
        plans.push((frames, line_fps, max_fps, frame_loads));
    }

    let several = frames.len() > 1;
    let mut rep = FrameLossReport {
        run: s.run.clone(),
        mode: mode.to_string(),
        step: args.rfc2544.then_some(step),
        trial_duration_s: duration.as_secs_f64(),
        series: Vec::new(),
        interrupted: None,
    };
    let json = args.json.as_deref();
    for (frames, line_fps, max_fps, frame_loads) in plans {
        let frame = frames.largest();
        let label = match (&args.label, several) {
            (Some(l), true) => format!("{l}, {}", session::label(frames)),
            (Some(l), false) => l.clone(),
            (None, _) => session::label(frames),
        };
        let mut trials: Vec<TrialResult> = Vec::new();
        let mut on_step = |step: Step| {
            session::show(&step, line_fps);
            if let Step::Done { result, .. } = step {
                trials.push(result.clone());
                let mut partial = rep.clone();
                partial.interrupted = Some(session::unfinished(frame, trials.clone()));
                session::save_partial(json, &partial);
            }
        };
        let mut runner = EngineRunner {
            engine: &mut s.bed.engine,
            interrupt,
            cpu: s.cpu.as_ref(),
        };
        let outcome = if args.rfc2544 {
            frame_loss::rfc2544(&mut runner, frames, max_fps, step, duration, &mut on_step)
        } else {
            frame_loss::sweep(&mut runner, frames, &frame_loads, duration, &mut on_step)
        };
        match outcome {
            Ok(points) => rep.series.push(LossSeries {
                label,
                frame_size: frame.frame(),
                l3_length: frame.l3(),
                mix: frames.mix().map(MixInfo::of),
                line_rate_fps: line_fps,
                max_fps,
                points,
            }),
            Err(e) => {
                rep.interrupted = Some(session::unfinished(frame, trials));
                let table = report::frame_loss_table(&with_rows(&earlier, &rep));
                return session::stopped(e, json, &rep, table);
            }
        }
        session::save_partial(json, &rep);
    }
    print!("{}", report::frame_loss_table(&with_rows(&earlier, &rep)));
    session::finish(json, &rep)?;
    Ok(Outcome::Passed)
}

/// The series of earlier runs' JSON files (`--rows-from`), which must be of
/// the same mode: their columns mean the same.
fn earlier_rows(files: &[std::path::PathBuf], mode: &str) -> Result<Vec<LossSeries>> {
    let mut rows = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--rows-from {}", path.display()))?;
        let earlier: FrameLossReport = serde_json::from_str(&text).with_context(|| {
            format!(
                "--rows-from {}: not the JSON of 'linerate loss --json'",
                path.display()
            )
        })?;
        if earlier.mode != mode {
            bail!(
                "--rows-from {} is a '{}' run and this one a '{mode}' run: their columns differ; use files of the same mode",
                path.display(),
                earlier.mode
            );
        }
        rows.extend(earlier.series);
    }
    Ok(rows)
}

/// `rep` for printing, with the earlier runs' rows above its own.
fn with_rows(earlier: &[LossSeries], rep: &FrameLossReport) -> FrameLossReport {
    let mut shown = rep.clone();
    shown.series = earlier
        .iter()
        .cloned()
        .chain(rep.series.iter().cloned())
        .collect();
    shown
}
