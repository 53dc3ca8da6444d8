//! `linerate trial`: one fixed-rate trial from port A to port B.

use crate::dut_cpu::DutCpuPlan;
use crate::error::Result;
use crate::exit::Outcome;
use crate::outputs::write_json;
use crate::plan::BedPlan;
use crate::ports::{self};
use crate::recorder::RecordPlan;
use crate::recorder::{Recorder, RunInfo};
use linerate_engine::EngineError;
use linerate_method::TrialRunner;
use linerate_results::{report, TrialSpec};
use linerate_store::RunStatus;
use linerate_wire::{Frames, Rate};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A trial, checked: everything `linerate trial` was given, as values.
#[derive(Debug, Clone)]
pub struct TrialPlan {
    pub bed: BedPlan,
    /// One frame size or one mix.
    pub frames: Frames,
    pub rate: Rate,
    /// The rate as the user wrote it, for messages.
    pub rate_text: String,
    /// How long the trial sends: for a duration, or `--frames N`.
    pub length: TrialLength,
    /// Loss the trial may have and still pass, as a ratio.
    pub allowed_loss: f64,
    pub json: Option<PathBuf>,
    pub dut_cpu: DutCpuPlan,
    pub record: RecordPlan,
}

/// How long a trial sends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrialLength {
    /// For this long.
    Duration(Duration),
    /// Exactly this many frames (per direction) at the rate: for as long as
    /// they take (pktgen's count).
    Frames(u64),
}

impl TrialLength {
    /// The sending time at `fps`. For N frames: N / fps, which the pacer's
    /// schedule (`fps` x duration, rounded) turns back into exactly N; a
    /// nanosecond's rounding moves it by far less than one frame.
    pub fn at(self, fps: f64) -> Duration {
        match self {
            TrialLength::Duration(d) => d,
            TrialLength::Frames(n) => Duration::from_secs_f64(n as f64 / fps),
        }
    }
}

pub fn run(plan: TrialPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let TrialPlan {
        bed: bed_plan,
        frames,
        rate,
        rate_text,
        length,
        allowed_loss,
        json,
        dut_cpu,
        record,
    } = plan;
    let frame = frames.largest();
    let mut recorder = Recorder::open(&record)?.json_file(json.as_deref());

    let mut bed = ports::open(&bed_plan, frame.buffer_len(), interrupt)?;
    bed.engine.check_frame(frame)?;
    let line_fps = bed.line_rate_fps(&frames);
    let fps = crate::driver::fps_within_line(&bed, rate, &rate_text, "--rate", &frames)?;
    let duration = length.at(fps);
    // ARP, and learning frames when the destination varies.
    bed.engine.resolve()?;
    // Why this engine, and how the ports count (auto's choice, a port
    // that took no counter or socket), once the trial will run: an error
    // before stays one line.
    if let Some(why) = &bed.engine_reason {
        errln!("linerate: engine {} ({why})", bed.engine.config().name);
    }
    let spec = TrialSpec {
        frame,
        mix: frames.mix().cloned(),
        intended_fps: fps,
        duration,
    };
    // The DUT's CPU load over the trial (the idle baseline first).
    let cpu = crate::dut_cpu::meter_for(&bed, &dut_cpu, &[], interrupt)?;
    recorder.begin(RunInfo {
        command: "trial",
        engine: &bed.engine.config().name,
        receiver: bed.engine.receiver(),
        line_speed_bps: bed.line_bps,
        scenario: &bed.description(),
        report: None,
        sizes: vec![frame.frame()],
        trial_s: duration.as_secs_f64(),
        resolution: 0.0,
        capture_at: bed.engine.capture_slot(),
    })?;
    recorder.single_trial_started(&frames, fps, line_fps);
    // The trial as every method runs one: the DUT's CPU sampled over it,
    // the tunnels' ESP counts accounted.
    let mut runner = crate::driver::EngineRunner::on(&mut bed, interrupt, cpu.as_ref());
    let result = match runner.run(&spec) {
        Err(EngineError::Interrupted) => {
            recorder.finish_as(true)?;
            return Ok(Outcome::Interrupted(
                "the unfinished trial was discarded".into(),
            ));
        }
        other => other?,
    };
    // The share of line rate counts every sending link.
    let line_bps = if bed.bidirectional {
        2 * bed.line_bps
    } else {
        bed.line_bps
    };
    recorder.single_trial_done(&result, result.passed(allowed_loss));
    recorder.print(&report::trial_summary(&result, line_bps));
    // The JSON first: it is the record when the database failed.
    if let Some(path) = &json {
        write_json(path, &result)?;
    }
    recorder.finish(RunStatus::Complete)?;
    if result.loss_ratio > allowed_loss {
        return Ok(Outcome::ThresholdFailed(format!(
            "loss {:.4} % exceeds the allowed {:.4} % (--loss)",
            100.0 * result.loss_ratio,
            100.0 * allowed_loss
        )));
    }
    Ok(Outcome::Passed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// N frames at any rate: the pacer's schedule, fps x duration rounded,
    /// gives back exactly N.
    #[test]
    fn a_frame_count_gives_back_exactly_its_frames() {
        for fps in [1.0, 333.3, 14_880_952.38, 1e9 / 7.0, 81_274.0] {
            for n in [1u64, 7, 12_345, 1_000_000, 123_456_789] {
                let d = TrialLength::Frames(n).at(fps);
                assert_eq!((fps * d.as_secs_f64()).round() as u64, n, "{n} at {fps}");
            }
        }
        let d = Duration::from_millis(1500);
        assert_eq!(TrialLength::Duration(d).at(1e6), d);
    }
}
