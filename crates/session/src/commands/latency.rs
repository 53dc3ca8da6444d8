//! `linerate latency`: RFC 2544 section 26.2. For each frame size (or
//! mix), the throughput search runs first (unless `--rate` gives the base
//! rate), then latency trials at the chosen shares of it.

use crate::driver;
use crate::driver::EngineRunner;
use crate::dut_cpu::DutCpuPlan;
use crate::error::Result;
use crate::exit::Outcome;
use crate::plan::BedPlan;
use crate::recorder::RecordPlan;
use crate::recorder::Recorder;
use linerate_engine::EngineError;
use linerate_method::latency::{self as method, measure_latency};
use linerate_method::Progress;
use linerate_method::{find_throughput, ThroughputConfig};
use linerate_results::calibration::Calibration;
use linerate_results::{
    report, LatencyReport, LatencyResult, MixInfo, TrialResult, UnfinishedTrials,
};
use linerate_store::RunStatus;
use linerate_wire::{Frames, Rate};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A latency run, checked: everything `linerate latency` was given, as
/// values.
#[derive(Debug, Clone)]
pub struct LatencyPlan {
    pub bed: BedPlan,
    /// The frame sizes or mixes, in order.
    pub frames: Vec<Frames>,
    /// Loads as shares of the base rate (the throughput or `--rate`).
    pub loads: Vec<f64>,
    pub trial_duration: Duration,
    /// Trials per load.
    pub repeat: usize,
    /// Trial duration of the throughput search run first.
    pub search_duration: Duration,
    /// Resolution of that search, as a ratio.
    pub resolution: f64,
    /// `--rate`: the base rate instead of a search, as written and parsed.
    pub rate: Option<(String, Rate)>,
    /// `--max-rate`: the search's highest rate, as written and parsed.
    pub max_rate: Option<(String, Rate)>,
    /// The tester's own latency (an empty calibration when there is none).
    pub calibration: Calibration,
    pub json: Option<PathBuf>,
    pub dut_cpu: DutCpuPlan,
    pub record: RecordPlan,
}

pub fn run(plan: LatencyPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let LatencyPlan {
        bed: bed_plan,
        frames,
        loads,
        trial_duration,
        repeat,
        search_duration,
        resolution,
        rate,
        max_rate,
        calibration,
        json,
        dut_cpu,
        record,
    } = plan;
    let mut recorder = Recorder::open(&record)?.json_file(json.as_deref());
    let mut s = driver::open(&bed_plan, &dut_cpu, &frames, "latency")?;
    // The rates per size, checked against the line rate before any frame.
    let mut plans = Vec::new();
    for f in &frames {
        let line_fps = s.bed.line_rate_fps(f);
        let given_fps = match &rate {
            Some((t, r)) => Some(driver::fps_within_line(&s.bed, *r, t, "--rate", f)?),
            None => None,
        };
        let max_fps = match &max_rate {
            Some((t, r)) => driver::fps_within_line(&s.bed, *r, t, "--max-rate", f)?,
            None => line_fps,
        };
        plans.push((f, line_fps, given_fps, max_fps));
    }
    s.ready()?;
    recorder.begin(s.record_info("latency", &frames, trial_duration.as_secs_f64()))?;

    let mut rep = LatencyReport {
        run: s.run.clone(),
        trial_duration_s: trial_duration.as_secs_f64(),
        repeat,
        results: Vec::new(),
        interrupted: None,
    };

    let interrupted = |rep: &mut LatencyReport,
                       recorder: &mut Recorder,
                       frame: linerate_wire::FrameSize,
                       trials| {
        rep.interrupted = Some(UnfinishedTrials {
            frame_size: frame.frame(),
            l3_length: frame.l3(),
            trials,
        });
        recorder.save(rep)?;
        recorder.print(&report::latency_table(rep));
        Ok(Outcome::Interrupted(
            "the loads measured so far were kept".into(),
        ))
    };
    for (search_no, (f, line_fps, given_fps, max_fps)) in plans.into_iter().enumerate() {
        let frame = f.largest();
        let mut runner = EngineRunner::on(&mut s.bed, interrupt, s.cpu.as_ref());
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
                    recorder.search_progress(search_no, &p, line_fps);
                    if let Progress::TrialDone { result, .. } = p {
                        done.push(result.clone());
                    }
                }) {
                    Err(EngineError::Interrupted) => {
                        return interrupted(&mut rep, &mut recorder, frame, done)
                    }
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
            recorder.save_partial(&rep);
            continue;
        }
        let plan = method::LatencyPlan {
            base_fps,
            loads: loads.clone(),
            trial_duration,
            repeat,
            mix: f.mix().cloned(),
        };
        let earlier = done.len();
        let points = match measure_latency(&mut runner, frame, &plan, &mut |t| {
            done.push(t.clone());
            // Numbered on after the search's trials, as the other methods'.
            recorder.latency_trial(search_no, done.len(), done.len() - earlier, f, t);
        }) {
            Err(EngineError::Interrupted) => {
                return interrupted(&mut rep, &mut recorder, frame, done)
            }
            other => other?,
        };
        let tester_latency_ns = f
            .mix()
            .is_none()
            .then(|| {
                calibration
                    .ceiling(
                        &s.bed.setup_key,
                        &s.bed.engine.config().name,
                        s.bed.engine.receiver().as_str(),
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
        recorder.save_partial(&rep);
    }
    recorder.print(&report::latency_table(&rep));
    recorder.save(&rep)?;
    recorder.finish(RunStatus::Complete)?;
    recorder.saved_note();
    Ok(Outcome::Passed)
}
