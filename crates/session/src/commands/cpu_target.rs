//! `linerate cpu-target`: the Cisco report's test "the bit rate was set
//! such that the CPU load was approximately 75 %". The search is
//! linerate-method's (`find_cpu_target`); this parses the options, opens
//! the test bed, runs it per frame size and prints.

use crate::driver::EngineRunner;
use crate::dut_cpu::DutCpuMeter;
use crate::error::{err, Result};
use crate::exit::Outcome;
use crate::plan::BedPlan;
use crate::plan::DutPlan;
use crate::ports::{self};
use crate::recorder::RecordPlan;
use crate::recorder::{Recorder, RunInfo};
use crate::scenario_bed::{prepare, record_of, traffic_checks};
use linerate_engine::EngineError;
use linerate_lab::scenario::{Applied, Scenario};
use linerate_method::cpu_target::Stopped;
use linerate_method::{find_cpu_target, CpuTargetConfig, CpuTargetProgress};
use linerate_results::cpu_target::{cpu_target_table, CpuTargetReport, CpuTargetResult};
use linerate_store::RunStatus;
use linerate_wire::{FrameSize, Rate};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

/// A CPU-target run, checked: everything `linerate cpu-target` was given,
/// as values.
#[derive(Debug, Clone)]
pub struct CpuTargetPlan {
    pub bed: BedPlan,
    /// The search's settings: the target and tolerance in percent, the
    /// trial duration, the most trials per frame size.
    pub config: CpuTargetConfig,
    pub frames: Vec<FrameSize>,
    pub max_rate: Option<Rate>,
    /// `--max-rate` as the user wrote it, for messages.
    pub max_rate_text: Option<String>,
    /// The DUT configuration (`--scenario`, one), parsed.
    pub scenario: Option<Scenario>,
    pub json: Option<PathBuf>,
    pub dut: DutPlan,
    pub record: RecordPlan,
}

pub fn run(plan: CpuTargetPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let max_frame_len = plan
        .frames
        .iter()
        .map(|f| f.buffer_len())
        .max()
        .unwrap_or(0);
    let mut recorder = Recorder::open(&plan.record)?.json_file(plan.json.as_deref());
    let (applied, mut bed) = match &plan.scenario {
        Some(s) => {
            let (a, b) = prepare(&plan.bed, max_frame_len, s, 0, interrupt)?;
            (Some(a), b)
        }
        None => (None, ports::open(&plan.bed, max_frame_len, interrupt)?),
    };
    let pids = applied
        .as_ref()
        .map(|a| a.data_path_pids())
        .unwrap_or_default();
    let meter = crate::dut_cpu::meter_for(&bed, &plan.dut.cpu, &pids, interrupt)?;
    let meter = meter.ok_or_else(|| {
        err!(BadInput, "cpu-target needs the DUT's CPU load: on an external DUT give --dut-cpu-cmd or --dut-snmp")
    })?;
    check_rates(&plan, &bed)?;
    bed.engine.resolve()?;
    let mut report = begin_report(&plan, &bed, applied.as_ref(), &meter, &mut recorder)?;
    let outcome = search_each(
        &plan,
        &mut bed,
        &meter,
        &mut recorder,
        &mut report,
        interrupt,
    )?;
    if let (Some(a), Some(lab), Some(rec)) = (&applied, bed.lab.as_ref(), report.scenario.as_mut())
    {
        let all = report.results.iter().flat_map(|r| &r.trials);
        rec.traffic_checks = traffic_checks(a, lab, all)?;
    }
    recorder.save(&report)?;
    recorder.print(&cpu_target_table(&report));
    if let Outcome::Passed = outcome {
        recorder.finish(RunStatus::Complete)?;
    }
    drop(applied);
    Ok(outcome)
}

/// Every frame size fits the engine and `--max-rate` is within line rate
/// for each: checked before the first trial, so a bad value stops the
/// run before anything is measured.
fn check_rates(plan: &CpuTargetPlan, bed: &ports::TestBed) -> Result<()> {
    for f in &plan.frames {
        bed.engine.check_frame(*f)?;
        if let (Some(rate), Some(text)) = (plan.max_rate, &plan.max_rate_text) {
            let frames = linerate_wire::Frames::Size(*f);
            crate::driver::fps_within_line(bed, rate, text, "--max-rate", &frames)?;
        }
    }
    Ok(())
}

/// Starts the run's record and the report before any result: the set-up,
/// the search's target and tolerance, where the DUT's CPU load comes from
/// and the scenario applied (a scenario's description is the title).
fn begin_report(
    plan: &CpuTargetPlan,
    bed: &ports::TestBed,
    applied: Option<&Applied>,
    meter: &DutCpuMeter,
    recorder: &mut Recorder,
) -> Result<CpuTargetReport> {
    let cfg = &plan.config;
    let description = match &plan.scenario {
        Some(s) => s.description(),
        None => bed.description(),
    };
    recorder.begin(RunInfo {
        command: "cpu-target",
        engine: &bed.engine.config().name,
        receiver: bed.engine.receiver(),
        line_speed_bps: bed.line_bps,
        scenario: &description,
        report: None,
        sizes: plan.frames.iter().map(|f| f.frame()).collect(),
        trial_s: cfg.trial_duration.as_secs_f64(),
        resolution: 0.0,
        capture_at: bed.engine.capture_slot(),
    })?;
    Ok(CpuTargetReport {
        run: crate::driver::run_info(bed, description),
        target_pct: cfg.target_pct,
        tolerance_pct: cfg.tolerance_pct,
        trial_duration_s: cfg.trial_duration.as_secs_f64(),
        dut_cpu_source: meter.source.clone(),
        scenario: match (&plan.scenario, applied) {
            (Some(s), Some(a)) => Some(record_of(s, a)),
            _ => None,
        },
        results: Vec::new(),
    })
}

/// The search for each frame size in turn, each result (a stopped
/// search's partial one too) kept and saved as it ends. A signal ends the
/// run as interrupted with what was measured; an engine error is
/// returned after the report so far is saved.
fn search_each(
    plan: &CpuTargetPlan,
    bed: &mut ports::TestBed,
    meter: &DutCpuMeter,
    recorder: &mut Recorder,
    report: &mut CpuTargetReport,
    interrupt: &AtomicBool,
) -> Result<Outcome> {
    let line_bps = bed.line_bps;
    for (search_no, &frame) in plan.frames.iter().enumerate() {
        let line_fps = frame.line_rate_fps(line_bps);
        let max_fps = plan
            .max_rate
            .map_or(line_fps, |r| r.to_fps(frame, line_bps));
        let mut runner = EngineRunner::on(bed, interrupt, Some(meter));
        let (partial, error) = search_frame(
            &mut runner,
            &plan.config,
            frame,
            max_fps,
            search_no,
            recorder,
        );
        if let Some(result) = partial {
            report.results.push(result);
            recorder.save_partial(report);
        }
        match error {
            None => {}
            Some(EngineError::Interrupted) => {
                return Ok(Outcome::Interrupted(
                    "results measured so far were kept".into(),
                ))
            }
            Some(e) => {
                recorder.save(report)?;
                return Err(e.into());
            }
        }
    }
    Ok(Outcome::Passed)
}

/// One frame size's search, each trial recorded as it starts and ends
/// (and shown with `--verbose`): its result (a stopped search's partial
/// one), and the error that stopped it.
fn search_frame(
    runner: &mut EngineRunner<'_>,
    cfg: &CpuTargetConfig,
    frame: FrameSize,
    max_fps: f64,
    search_no: usize,
    recorder: &mut Recorder,
) -> (Option<CpuTargetResult>, Option<EngineError>) {
    let searched = find_cpu_target(runner, frame, cfg, max_fps, &mut |p| {
        match &p {
            CpuTargetProgress::TrialStarting {
                trial_no,
                intended_fps,
                ..
            } => {
                recorder.trial_starting(search_no, *trial_no as usize, frame.frame(), *intended_fps)
            }
            CpuTargetProgress::TrialDone {
                trial_no, result, ..
            } => recorder.trial_done(search_no, *trial_no as usize, result, None),
        }
        if recorder.verbose() {
            show_progress(p);
        }
    });
    match searched {
        Ok(result) => (result, None),
        Err(Stopped { error, partial }) => (partial, Some(error)),
    }
}

/// One line per trial on stderr: the rate, then its CPU load and loss.
fn show_progress(p: CpuTargetProgress) {
    match p {
        CpuTargetProgress::TrialStarting {
            frame,
            trial_no,
            intended_fps,
        } => errp!(
            "[{:>5} B] cpu-target trial {:>2}: {:>11.0} fps ... ",
            frame.frame(),
            trial_no,
            intended_fps
        ),
        CpuTargetProgress::TrialDone { result: t, .. } => match t.dut_cpu {
            None => errln!("no CPU sample"),
            Some(cpu) => errln!(
                "CPU {:.1} % (by traffic {:.1} %), loss {:.4} %",
                cpu.total_pct,
                cpu.traffic_pct,
                t.loss_ratio * 100.0
            ),
        },
    }
}
