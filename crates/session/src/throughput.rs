//! The RFC 2544 throughput search (section 26.1) for each frame size on a
//! test bed, as `linerate rfc2544` runs it on the bed as it is and on each
//! DUT configuration of `--scenario`.

use crate::driver::{describe_port, EngineRunner};
use crate::dut_cpu::DutCpuMeter;
use crate::error::Result;
use crate::exit::Outcome;
use crate::plan::{BedPlan, DutPlan};
use crate::ports;
use crate::recorder::{RecordPlan, Recorder, RunInfo};
use crate::sizes::{each_size, SizeTrials, Stopped};
use linerate_engine::EngineError;
use linerate_lab::scenario::Scenario;
use linerate_method::mlrsearch::{self, MlrConfig};
use linerate_method::spec::Step;
use linerate_method::{find_throughput, Progress, ThroughputConfig};
use linerate_results::calibration::{near_ceiling, Calibration};
use linerate_results::{report, Rfc2544Report, ThroughputResult};
use linerate_wire::{Frames, Rate};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// An RFC 2544 throughput run, checked: everything `linerate rfc2544` was
/// given, as values, parsed from the arguments before any port opens.
#[derive(Debug, Clone)]
pub struct Rfc2544Plan {
    /// The test bed, checked.
    pub bed: BedPlan,
    /// The DUT configurations to compare (`--scenario`), parsed; empty:
    /// none, the test bed as it is.
    pub scenarios: Vec<Scenario>,
    /// One entry per frame size or mix.
    pub frames: Vec<Frames>,
    pub trial_duration: Duration,
    pub resolution: f64,
    pub allowed_loss: f64,
    pub max_rate: Option<Rate>,
    /// `--max-rate` as the user wrote it, for messages.
    pub max_rate_text: Option<String>,
    pub calibration: Calibration,
    pub all_layers: bool,
    pub mlrsearch: bool,
    /// `--repeat N`: rounds, each searching every size once (1: one search
    /// per size).
    pub repeat: usize,
    pub json: Option<PathBuf>,
    pub dut: DutPlan,
    pub record: RecordPlan,
    /// `--tunnels 1,10,100`: one run per count, compared side by side
    /// (empty: one run, with the count `bed.ipsec` holds).
    pub tunnel_counts: Vec<usize>,
}

impl Rfc2544Plan {
    pub fn max_frame_len(&self) -> usize {
        crate::plan::max_frame_len(&self.frames)
    }

    /// This plan with `count` tunnels.
    pub fn with_tunnels(&self, count: usize) -> Rfc2544Plan {
        let mut plan = self.clone();
        if let Some(ipsec) = plan.bed.ipsec.as_mut() {
            ipsec.tunnels = count;
        }
        plan.tunnel_counts = Vec::new();
        plan
    }
}

/// What a scenario run adds to the report.
#[derive(Default)]
pub struct Extras<'a> {
    pub scenario: Option<linerate_results::scenario::ScenarioRecord>,
    pub cpu: Option<&'a DutCpuMeter>,
}

/// Runs the throughput search for each frame size on `bed`. The report is
/// saved through `recorder` as it grows (after each trial, with the
/// unfinished search in `interrupted`) and at the end; the caller prints.
pub fn measure(
    plan: &Rfc2544Plan,
    bed: &mut ports::TestBed,
    extras: Extras<'_>,
    recorder: &mut Recorder,
    interrupt: &AtomicBool,
) -> Result<(Outcome, Rfc2544Report)> {
    let searches = search_bounds(plan, bed)?;
    // Round-robin: every size once per round, so that a slow minute of
    // the machine falls on one round of several sizes.
    let rounds: Vec<(usize, &SizeSearch<'_>)> = (1..=plan.repeat.max(1))
        .flat_map(|round| searches.iter().map(move |s| (round, s)))
        .collect();
    announce(plan, bed);
    bed.engine.resolve()?;
    let mut rep = new_report(plan, bed, &extras);
    recorder.begin(RunInfo {
        command: "rfc2544",
        engine: &rep.run.engine,
        receiver: bed.engine.receiver(),
        line_speed_bps: bed.line_bps,
        scenario: &rep.run.description,
        report: Some(&rep),
        sizes: rounds
            .iter()
            .map(|(_, s)| s.frames.largest().frame())
            .collect(),
        trial_s: plan.trial_duration.as_secs_f64(),
        resolution: plan.resolution,
        capture_at: bed.engine.capture_slot(),
    })?;

    let measured = each_size(
        rounds,
        &mut rep,
        recorder,
        |(_, s)| s.frames.largest(),
        |search_no, (round, search), trials| {
            let runner = EngineRunner::on(bed, interrupt, extras.cpu);
            let mut result = search_size(runner, search_no, search, trials)?;
            apply_ceiling(&plan.calibration, bed, search.frames, &mut result);
            result.round = (plan.repeat > 1).then_some(round);
            if plan.mlrsearch {
                let runner = EngineRunner::on(bed, interrupt, extras.cpu);
                result = mlrsearch_after(runner, search_no, search, result, trials)?;
            }
            trials.recorder.result(search_no, &result);
            Ok(result)
        },
        |rep, result| rep.keep(result),
    );
    if let Err(e) = measured {
        errln!();
        recorder.save(&rep)?;
        if let EngineError::Interrupted = e {
            return Ok((
                Outcome::Interrupted("results measured so far were kept".into()),
                rep,
            ));
        }
        return Err(e.into());
    }
    recorder.save(&rep)?;
    Ok((Outcome::Passed, rep))
}

/// One frame size's (or mix's) search: its frames, their line rate and
/// the search's bounds.
struct SizeSearch<'p> {
    frames: &'p Frames,
    line_fps: f64,
    cfg: ThroughputConfig,
}

/// The search bounds of every frame size or mix, checked before the
/// first trial, so that a `--max-rate` above line rate or a frame the
/// engine cannot send stops the run before anything is measured.
fn search_bounds<'p>(plan: &'p Rfc2544Plan, bed: &ports::TestBed) -> Result<Vec<SizeSearch<'p>>> {
    for f in &plan.frames {
        bed.engine.check_frame(f.largest())?;
    }
    let mut searches = Vec::new();
    for frames in &plan.frames {
        let line_fps = bed.line_rate_fps(frames);
        let max_fps = match plan.max_rate {
            None => line_fps,
            Some(r) => crate::driver::fps_within_line(
                bed,
                r,
                plan.max_rate_text.as_deref().unwrap_or_default(),
                "--max-rate",
                frames,
            )?,
        };
        let mut cfg = ThroughputConfig::new(max_fps, plan.trial_duration);
        cfg.resolution = plan.resolution;
        cfg.allowed_loss_ratio = plan.allowed_loss;
        cfg.mix = frames.mix().cloned();
        cfg.validate()?;
        searches.push(SizeSearch {
            frames,
            line_fps,
            cfg,
        });
    }
    Ok(searches)
}

/// Says on stderr what is tested, at which line speed (and whence), and
/// where and why the engine runs as it does: the set-up a reader needs to
/// judge the figures that follow.
fn announce(plan: &Rfc2544Plan, bed: &ports::TestBed) {
    errln!(
        "linerate: RFC 2544 throughput on {} -> {}, line speed {} ({}), trials of {}",
        describe_port(bed.engine.port_a()),
        describe_port(bed.engine.port_b()),
        report::line_speed(bed.line_bps),
        bed.line_speed_source,
        humantime::format_duration(plan.trial_duration),
    );
    if plan.repeat > 1 {
        errln!(
            "linerate: {} rounds, every size searched once per round; each figure is its median over the rounds",
            plan.repeat
        );
    }
    if let Some(p) = &bed.placement {
        errln!("linerate: {}", p.note);
    }
    if let Some(why) = &bed.engine_reason {
        errln!("linerate: engine {} ({why})", bed.engine.config().name);
    }
}

/// The report before any result: the run's set-up and the search's
/// parameters. Through a VPN peer the tunnel is the title; otherwise a
/// scenario's description, or the bed's.
fn new_report(plan: &Rfc2544Plan, bed: &ports::TestBed, extras: &Extras<'_>) -> Rfc2544Report {
    let description = match &extras.scenario {
        Some(s) if bed.ipsec.is_none() => s.description.clone(),
        _ => bed.description(),
    };
    Rfc2544Report {
        run: crate::driver::run_info(bed, description),
        trial_duration_s: plan.trial_duration.as_secs_f64(),
        resolution: plan.resolution,
        allowed_loss_ratio: plan.allowed_loss,
        bidirectional: bed.bidirectional,
        results: Vec::new(),
        interrupted: None,
        repeat: plan.repeat.max(1),
        round_results: Vec::new(),
        scenario: extras.scenario.clone(),
        dut_cpu_source: extras.cpu.map(|c| c.source.clone()),
    }
}

/// The zero-loss throughput search of one size, each trial saved and
/// shown as it ends.
fn search_size(
    mut runner: EngineRunner<'_>,
    search_no: usize,
    search: &SizeSearch<'_>,
    trials: &mut SizeTrials<'_, Rfc2544Report>,
) -> Result<ThroughputResult, Stopped<ThroughputResult>> {
    let frame = search.frames.largest();
    let line_fps = search.line_fps;
    let result = find_throughput(&mut runner, frame, &search.cfg, line_fps, &mut |p| {
        trials.recorder.search_progress(search_no, &p, line_fps);
        if let Progress::TrialDone { result, .. } = p {
            trials.done(result);
        }
    })?;
    Ok(result)
}

/// Flags a result near the tester's calibrated ceiling for this set-up,
/// engine, receiver and frame size: there the tester, not the DUT, may
/// be the limit. Calibrations are per frame size; a mix's ceiling is not
/// stored, so a mix is flagged only by the search itself.
fn apply_ceiling(
    calibration: &Calibration,
    bed: &ports::TestBed,
    frames: &Frames,
    result: &mut ThroughputResult,
) {
    let ceiling = calibration
        .ceiling(
            &bed.setup_key,
            &bed.engine.config().name,
            bed.engine.receiver().as_str(),
            frames.largest().frame(),
        )
        .filter(|_| result.mix.is_none());
    if let Some(c) = ceiling {
        result.calibrated_ceiling_fps = Some(c.ceiling_fps);
        result.tester_limited |= near_ceiling(result.throughput_fps, c.ceiling_fps);
    }
}

/// `--mlrsearch`: MLRsearch after the zero-loss search, reusing its
/// trials. The zero-loss result stands whatever happens next; an
/// interrupted MLRsearch keeps its own trials as unfinished.
fn mlrsearch_after(
    mut runner: EngineRunner<'_>,
    search_no: usize,
    search: &SizeSearch<'_>,
    mut result: ThroughputResult,
    trials: &mut SizeTrials<'_, Rfc2544Report>,
) -> Result<ThroughputResult, Stopped<ThroughputResult>> {
    trials.restart();
    let cfg = &search.cfg;
    let cfg = MlrConfig::after_zero_loss(cfg.max_fps, cfg.min_fps, cfg.trial_duration);
    let first_trial_no = result.trials.len();
    let line_fps = search.line_fps;
    let mlr = mlrsearch::search_after(
        &mut runner,
        search.frames,
        &cfg,
        line_fps,
        &result.trials,
        &mut |step: Step| {
            trials
                .recorder
                .step(search_no, first_trial_no, &step, line_fps);
            if let Step::Done { result, .. } = step {
                trials.done(result);
            }
        },
    );
    match mlr {
        Ok(mlr) => {
            result.mlrsearch = Some(mlr);
            Ok(result)
        }
        Err(error) => Err(Stopped {
            error,
            finished: Some(Box::new(result)),
        }),
    }
}
