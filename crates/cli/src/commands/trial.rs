//! `linerate trial`: one fixed-rate trial from port A to port B.

use super::rfc2544::write_json;
use crate::args::TrialArgs;
use crate::exit::Outcome;
use crate::ports::{self, check_writable, parse_percent, parse_trial_duration};
use crate::recorder::{Recorder, RunInfo};
use anyhow::{bail, Context, Result};
use linerate_engine::EngineError;
use linerate_results::{report, TrialSpec};
use linerate_store::RunStatus;
use linerate_wire::{FrameSize, Rate};
use std::sync::atomic::AtomicBool;

pub fn run(args: TrialArgs, interrupt: &AtomicBool) -> Result<Outcome> {
    let frame = match (args.frame_size, args.l3_length) {
        (Some(n), _) => FrameSize::from_frame(n)?,
        (None, Some(n)) => FrameSize::from_l3(n)?,
        (None, None) => bail!("give --frame-size N (64..9018) or --l3-length N (40..9000)"),
    };
    let rate = Rate::parse(&args.rate).context("--rate")?;
    let duration = parse_trial_duration(&args.duration, "--duration")?;
    check_writable(args.json.as_deref())?;
    let allowed_loss = parse_percent(&args.loss, "--loss")?;
    let mut recorder = Recorder::open(&args.record)?;

    let mut bed = ports::open(&args.ports, frame.buffer_len())?;
    bed.engine.check_frame(frame)?;
    let line_fps = frame.line_rate_fps(bed.line_bps);
    let fps = rate.to_fps(frame, bed.line_bps);
    if fps > line_fps * 1.000_001 {
        bail!(
            "--rate {} is {:.0} frames/s, above the line rate for {}-byte frames ({:.0} frames/s at {}): lower the rate or set --line-speed",
            args.rate,
            fps,
            frame.frame(),
            line_fps,
            report::line_speed(bed.line_bps)
        );
    }
    let spec = TrialSpec {
        frame,
        intended_fps: fps,
        duration,
    };
    // Gateways resolved first: a run that cannot start is not stored.
    bed.engine.resolve()?;
    recorder.begin(RunInfo {
        command: "trial",
        engine: &bed.engine.config().name,
        line_speed_bps: bed.line_bps,
        scenario: &crate::recorder::scenario(&bed),
        report: None,
        sizes: vec![frame.frame()],
        trial_s: duration.as_secs_f64(),
        resolution: 0.0,
        port_b_mac: bed.engine.port_b().mac,
    })?;
    recorder.single_trial_started(frame.frame(), fps, line_fps);
    let result = match bed.engine.run_trial(&spec, interrupt) {
        Err(EngineError::Interrupted) => {
            recorder.finish(RunStatus::Interrupted);
            return Ok(Outcome::Interrupted(
                "the unfinished trial was discarded".into(),
            ));
        }
        other => other?,
    };
    recorder.single_trial_done(&result, result.passed(allowed_loss));
    recorder.print(&report::trial_summary(&result, bed.line_bps));
    recorder.finish(RunStatus::Complete);
    if let Some(path) = &args.json {
        write_json(path, &result)?;
    }
    if result.loss_ratio > allowed_loss {
        return Ok(Outcome::ThresholdFailed(format!(
            "loss {:.4} % exceeds the allowed {:.4} % (--loss)",
            100.0 * result.loss_ratio,
            100.0 * allowed_loss
        )));
    }
    Ok(Outcome::Passed)
}
