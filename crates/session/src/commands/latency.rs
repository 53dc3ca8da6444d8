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
use crate::sizes::each_size;
use linerate_method::latency::{self as method, measure_latency};
use linerate_method::Progress;
use linerate_method::{find_throughput, ThroughputConfig};
use linerate_results::calibration::Calibration;
use linerate_results::{report, LatencyReport, LatencyResult, MixInfo};
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
        // The search's settings, checked before the first trial.
        let mut search = ThroughputConfig::new(max_fps, search_duration);
        search.resolution = resolution;
        search.mix = f.mix().cloned();
        search.validate()?;
        plans.push((f, line_fps, given_fps, search));
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

    let setup_key = s.bed.setup_key.clone();
    let bed = &mut s.bed;
    let cpu = s.cpu.as_ref();
    let measured = each_size(
        plans,
        &mut rep,
        &mut recorder,
        |(f, ..)| f.largest(),
        |search_no, (f, line_fps, given_fps, search), trials| {
            let frame = f.largest();
            let mut runner = EngineRunner::on(bed, interrupt, cpu);
            let (base_fps, base, throughput) = match given_fps {
                Some(fps) => (fps, "given", None),
                None => {
                    errln!("linerate: {}: throughput search first", f.describe());
                    let t = find_throughput(&mut runner, frame, &search, line_fps, &mut |p| {
                        trials.recorder.search_progress(search_no, &p, line_fps);
                        if let Progress::TrialDone { result, .. } = p {
                            trials.done(result);
                        }
                    })?;
                    (t.throughput_fps, "throughput", Some(t))
                }
            };
            let mut result = LatencyResult {
                frame_size: frame.frame(),
                mix: f.mix().map(MixInfo::of),
                base_fps,
                base: base.to_string(),
                throughput,
                points: Vec::new(),
                tester_latency_ns: None,
            };
            if base_fps <= 0.0 {
                errln!(
                    "linerate: {}: no rate passed the throughput search, so there is no RFC 2544 latency to measure",
                    f.describe()
                );
                return Ok(result);
            }
            let plan = method::LatencyPlan {
                base_fps,
                loads: loads.clone(),
                trial_duration,
                repeat,
                mix: f.mix().cloned(),
            };
            let earlier = trials.count();
            result.points = measure_latency(&mut runner, frame, &plan, &mut |t| {
                trials.done(t);
                // Numbered on after the search's trials, as the other methods'.
                let n = trials.count();
                trials
                    .recorder
                    .latency_trial(search_no, n, n - earlier, f, t);
            })?;
            result.tester_latency_ns = f
                .mix()
                .is_none()
                .then(|| {
                    calibration
                        .ceiling(
                            &setup_key,
                            &runner.engine.config().name,
                            runner.engine.receiver().as_str(),
                            frame.frame(),
                        )
                        .and_then(|c| c.latency_ns)
                })
                .flatten();
            Ok(result)
        },
        |rep, result| rep.results.push(result),
    );
    if let Err(e) = measured {
        let table = report::latency_table(&rep);
        return driver::stopped(e, &mut recorder, &rep, table);
    }
    recorder.print(&report::latency_table(&rep));
    recorder.save(&rep)?;
    recorder.finish(RunStatus::Complete)?;
    recorder.saved_note();
    Ok(Outcome::Passed)
}
