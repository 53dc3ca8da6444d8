//! `linerate latency`: RFC 2544 section 26.2. For each frame size (or
//! mix), the throughput search runs first (unless `--rate` gives the base
//! rate), then latency trials at the chosen shares of it.

use crate::driver;
use crate::driver::EngineRunner;
use crate::dut_cpu::DutCpuPlan;
use crate::error::Result;
use crate::exit::Outcome;
use crate::plan::BedPlan;
use crate::ports::TestBed;
use crate::recorder::RecordPlan;
use crate::recorder::Recorder;
use crate::sizes::{each_size, SizeTrials};
use linerate_engine::{Engine, EngineError};
use linerate_method::latency::{self as method, measure_latency};
use linerate_method::Progress;
use linerate_method::{find_throughput, ThroughputConfig};
use linerate_results::calibration::Calibration;
use linerate_results::{
    report, LatencyPoint, LatencyReport, LatencyResult, MixInfo, ThroughputResult,
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
    let mut recorder = Recorder::open(&plan.record)?.json_file(plan.json.as_deref());
    let mut s = driver::open(&plan.bed, &plan.dut_cpu, &plan.frames, "latency", interrupt)?;
    let sizes = size_plans(&plan, &s.bed)?;
    s.ready()?;
    let trial_s = plan.trial_duration.as_secs_f64();
    recorder.begin(s.record_info("latency", &plan.frames, trial_s))?;

    let mut rep = LatencyReport {
        run: s.run.clone(),
        trial_duration_s: trial_s,
        repeat: plan.repeat,
        results: Vec::new(),
        interrupted: None,
    };

    let setup_key = s.bed.setup_key.clone();
    let bed = &mut s.bed;
    let cpu = s.cpu.as_ref();
    let measured = each_size(
        sizes,
        &mut rep,
        &mut recorder,
        |size| size.frames.largest(),
        |search_no, size, trials| {
            let f = size.frames;
            let frame = f.largest();
            let mut runner = EngineRunner::on(bed, interrupt, cpu);
            let (base_fps, base, throughput) = base_rate(&mut runner, search_no, &size, trials)?;
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
            result.points = latency_points(&mut runner, &plan, search_no, f, base_fps, trials)?;
            result.tester_latency_ns =
                tester_latency(&plan.calibration, &setup_key, runner.engine, f);
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

/// One frame size's (or mix's) rates: its line rate, the base rate
/// `--rate` gives (else None: a search finds it), and that search's
/// settings.
struct SizePlan<'p> {
    frames: &'p Frames,
    line_fps: f64,
    given_fps: Option<f64>,
    search: ThroughputConfig,
}

/// The rates per size, checked against the line rate before any frame
/// is sent, and the search's settings, checked before the first trial.
fn size_plans<'p>(plan: &'p LatencyPlan, bed: &TestBed) -> Result<Vec<SizePlan<'p>>> {
    let mut sizes = Vec::new();
    for f in &plan.frames {
        let line_fps = bed.line_rate_fps(f);
        let given_fps = match &plan.rate {
            Some((t, r)) => Some(driver::fps_within_line(bed, *r, t, "--rate", f)?),
            None => None,
        };
        let max_fps = match &plan.max_rate {
            Some((t, r)) => driver::fps_within_line(bed, *r, t, "--max-rate", f)?,
            None => line_fps,
        };
        let mut search = ThroughputConfig::new(max_fps, plan.search_duration);
        search.resolution = plan.resolution;
        search.mix = f.mix().cloned();
        search.validate()?;
        sizes.push(SizePlan {
            frames: f,
            line_fps,
            given_fps,
            search,
        });
    }
    Ok(sizes)
}

/// The rate the latency loads are shares of, what it is ("given" or
/// "throughput"), and the throughput search's result when one ran (each
/// of its trials saved and shown as it ends).
fn base_rate(
    runner: &mut EngineRunner<'_>,
    search_no: usize,
    size: &SizePlan<'_>,
    trials: &mut SizeTrials<'_, LatencyReport>,
) -> Result<(f64, &'static str, Option<ThroughputResult>), EngineError> {
    if let Some(fps) = size.given_fps {
        return Ok((fps, "given", None));
    }
    let f = size.frames;
    let line_fps = size.line_fps;
    errln!("linerate: {}: throughput search first", f.describe());
    let t = find_throughput(runner, f.largest(), &size.search, line_fps, &mut |p| {
        trials.recorder.search_progress(search_no, &p, line_fps);
        if let Progress::TrialDone { result, .. } = p {
            trials.done(result);
        }
    })?;
    Ok((t.throughput_fps, "throughput", Some(t)))
}

/// The latency trials at each load's share of `base_fps`, numbered on
/// after the search's trials, as the other methods' are.
fn latency_points(
    runner: &mut EngineRunner<'_>,
    plan: &LatencyPlan,
    search_no: usize,
    f: &Frames,
    base_fps: f64,
    trials: &mut SizeTrials<'_, LatencyReport>,
) -> Result<Vec<LatencyPoint>, EngineError> {
    let method_plan = method::LatencyPlan {
        base_fps,
        loads: plan.loads.clone(),
        trial_duration: plan.trial_duration,
        repeat: plan.repeat,
        mix: f.mix().cloned(),
    };
    let earlier = trials.count();
    measure_latency(runner, f.largest(), &method_plan, &mut |t| {
        trials.done(t);
        let n = trials.count();
        trials
            .recorder
            .latency_trial(search_no, n, n - earlier, f, t);
    })
}

/// The tester's own latency at this frame size from the calibration (to
/// read beside the DUT's); None for a mix, whose ceiling is not stored.
fn tester_latency(
    calibration: &Calibration,
    setup_key: &str,
    engine: &Engine,
    f: &Frames,
) -> Option<linerate_results::LatencySummary> {
    f.mix()
        .is_none()
        .then(|| {
            calibration
                .ceiling(
                    setup_key,
                    &engine.config().name,
                    engine.receiver().as_str(),
                    f.largest().frame(),
                )
                .and_then(|c| c.latency_ns)
        })
        .flatten()
}
