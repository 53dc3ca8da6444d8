//! `linerate loss`: frame loss rate vs offered load (RFC 2544 section
//! 26.3), printed as the 100GE report's table: one row per frame size (or
//! mix) and DUT configuration, one column per offered load, loss in the
//! cells. With `--scenario a,b,c` each configuration gets a fresh lab and
//! rows of its own, so configurations compare side by side.

use super::rfc2544::EngineRunner;
use super::scenarios::{prepare, record_of, traffic_checks};
use super::session::{self, fps_within_line, parse_rate, Session};
use crate::error::{bail, Result, ResultExt};
use crate::exit::Outcome;
use crate::method_args::LossArgs;
use crate::plan::BedPlan;
use crate::ports::{parse_share, parse_trial_duration, Zero};
use crate::recorder::Recorder;
use linerate_lab::scenario::{Applied, Scenario};
use linerate_method::frame_loss::{self, Load, RFC2544_MAX_STEP};
use linerate_method::spec::Step;
use linerate_results::methods::{FrameLossReport, LossSeries};
use linerate_results::{report, MixInfo, TrialResult};
use linerate_store::RunStatus;
use linerate_wire::{Frames, Rate};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// What every row of the run measures, parsed before any port opens.
struct Plan {
    bed: BedPlan,
    frames: Vec<Frames>,
    duration: Duration,
    /// The loads of a sweep (empty in the RFC 2544 mode), as written and parsed.
    loads: Vec<(String, Rate)>,
    /// Step of the RFC 2544 mode, when it runs.
    rfc2544_step: Option<f64>,
    max_rate: Option<(String, Rate)>,
    stop_above_loss: Option<f64>,
}

pub fn run(args: LossArgs, interrupt: &AtomicBool) -> Result<Outcome> {
    let plan = plan(&args)?;
    args.rows_from
        .iter()
        .fold(
            crate::outputs::Outputs::new()
                .json(args.json.as_deref())
                .record(&args.record),
            |o, f| o.input("--rows-from", Some(f)),
        )
        .check()?;
    let mode = if args.rfc2544 { "rfc2544" } else { "sweep" };
    let earlier = earlier_rows(&args.rows_from, mode)?;
    // The DUT configurations compared, one lab each; None: the lab or the
    // external DUT as it is.
    let scenarios: Vec<Option<Scenario>> = match &args.dut.scenario {
        Some(text) => Scenario::parse_list(text)?.into_iter().map(Some).collect(),
        None => vec![None],
    };
    let json = args.json.as_deref();
    let mut rep: Option<FrameLossReport> = None;
    for (index, scenario) in scenarios.iter().enumerate() {
        if interrupt.load(Ordering::Relaxed) {
            break;
        }
        // `applied` (XDP program, tunnel daemons) goes before the test bed,
        // which owns the scenario's lab.
        // Each DUT configuration is a run of its own in the results
        // database, with a capture file of its own when several are compared.
        let mut record_args = args.record.clone();
        if scenarios.len() > 1 {
            record_args.pcap = record_args
                .pcap
                .as_deref()
                .map(|p| super::scenarios::numbered(p, index + 1));
        }
        let mut recorder = Recorder::open(&record_args)?.json_file(json);
        let (applied, mut s) = open(&args, &plan, scenario.as_ref(), index)?;
        let rep = rep.get_or_insert_with(|| FrameLossReport {
            run: s.run.clone(),
            mode: mode.to_string(),
            step: plan.rfc2544_step,
            trial_duration_s: plan.duration.as_secs_f64(),
            stop_above_loss_ratio: plan.stop_above_loss,
            series: Vec::new(),
            interrupted: None,
        });
        if let Some(list) = &args.dut.scenario {
            rep.run.description = format!("lab Linux router in each DUT configuration of {list}");
        }
        let row_name = match (scenario, &args.label) {
            (Some(sc), _) => Some(sc.spec.clone()),
            (None, label) => label.clone(),
        };
        let rows = rows(&plan, &s)?;
        s.ready()?;
        recorder.begin(s.record_info("loss", &plan.frames, plan.duration.as_secs_f64()))?;
        let first_row = rep.series.len();
        let stopped = measure(rows, &plan, &mut s, &mut recorder, row_name, rep, interrupt);
        if let (Some(sc), Some(a)) = (scenario, &applied) {
            // After traffic: did it really go through the configuration?
            let mut record = record_of(sc, a);
            let lab =
                s.bed.lab.as_ref().ok_or_else(|| {
                    crate::error::err!(Failed, "a scenario's test bed holds its lab")
                })?;
            let done = rep.series[first_row..]
                .iter()
                .flat_map(|row| row.points.iter().map(|p| &p.trial));
            record.traffic_checks = traffic_checks(a, lab, done)?;
            for row in &mut rep.series[first_row..] {
                row.scenario = Some(record.clone());
            }
        }
        drop(applied);
        if let Err(e) = stopped {
            let table = report::frame_loss_table(&with_rows(&earlier, rep));
            return session::stopped(e, &mut recorder, rep, table);
        }
        recorder.save_partial(rep);
        recorder.finish(RunStatus::Complete);
    }
    let Some(rep) = rep else {
        return Ok(Outcome::Interrupted("no row was measured".into()));
    };
    print!("{}", report::frame_loss_table(&with_rows(&earlier, &rep)));
    if let Some(path) = json {
        super::rfc2544::write_json(path, &rep)?;
        eprintln!("linerate: every trial written to {}", path.display());
    }
    if interrupt.load(Ordering::Relaxed) {
        return Ok(Outcome::Interrupted(
            "rows measured so far were kept".into(),
        ));
    }
    Ok(Outcome::Passed)
}

fn plan(args: &LossArgs) -> Result<Plan> {
    let bed = args
        .ports
        .plan_with(args.dut.scenario.is_some())?
        .for_capture(args.record.pcap.is_some());
    let frames = args.frames.frames(&bed.encap)?;
    let duration = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
    let loads: Vec<(String, Rate)> = match &args.loads {
        Some(list) => list
            .iter()
            .map(|t| Ok((t.trim().to_string(), parse_rate(t, "--loads")?)))
            .collect::<Result<_>>()?,
        None => Vec::new(),
    };
    if !args.rfc2544 && loads.is_empty() {
        bail!(
            BadInput,
            "no load given: use --loads 0.5Mpps,1Mpps,... (or fps, %, Mbps), or --rfc2544"
        );
    }
    let step = parse_share(&args.step, "--step", Zero::Refused)?;
    if args.rfc2544 && !(step > 0.0 && step <= RFC2544_MAX_STEP + 1e-12) {
        bail!(BadInput, "--step {} is out of range: RFC 2544 section 26.3 asks for steps of at most 10 % of the maximum rate", args.step);
    }
    let max_rate = match &args.max_rate {
        Some(t) => Some((t.clone(), parse_rate(t, "--max-rate")?)),
        None => None,
    };
    let stop_above_loss = args
        .stop_at_loss
        .as_deref()
        .map(|t| parse_share(t, "--stop-at-loss", Zero::Allowed))
        .transpose()?;
    Ok(Plan {
        bed,
        frames,
        duration,
        loads,
        rfc2544_step: args.rfc2544.then_some(step),
        max_rate,
        stop_above_loss,
    })
}

/// The test bed of one row group: a fresh lab configured as `scenario`
/// (the `index`th of the run), or the ports as given.
fn open(
    args: &LossArgs,
    plan: &Plan,
    scenario: Option<&Scenario>,
    index: usize,
) -> Result<(Option<Applied>, Session)> {
    let what = "frame loss rate";
    let Some(sc) = scenario else {
        return Ok((
            None,
            session::open(&plan.bed, &args.dut.cpu, &plan.frames, what)?,
        ));
    };
    let max_frame_len = crate::frame_args::max_frame_len(&plan.frames);
    let (applied, bed) = prepare(&plan.bed, max_frame_len, sc, index)?;
    let pids = applied.data_path_pids();
    let s = session::start(bed, &args.dut.cpu, &pids, &plan.frames, what)?;
    Ok((Some(applied), s))
}

/// A row to measure: its frames, their line rate and the rate 100 % means
/// (frames/s), and the loads of a sweep.
type Row<'a> = (&'a Frames, f64, f64, Vec<Load>);

/// The rows of `plan` on `s`'s ports, every load checked against the line
/// rate before the first trial.
fn rows<'a>(plan: &'a Plan, s: &Session) -> Result<Vec<Row<'a>>> {
    let mut rows = Vec::new();
    for frames in &plan.frames {
        let line_fps = s.bed.line_rate_fps(frames);
        let max_fps = match &plan.max_rate {
            Some((text, rate)) => fps_within_line(&s.bed, *rate, text, "--max-rate", frames)?,
            None => line_fps,
        };
        let mut loads = Vec::new();
        for (text, rate) in &plan.loads {
            loads.push(Load {
                label: text.clone(),
                fps: fps_within_line(&s.bed, *rate, text, "--loads", frames)?,
            });
        }
        rows.push((frames, line_fps, max_fps, loads));
    }
    Ok(rows)
}

/// Measures `rows` on `s` into `rep`; rows are named `row_name` (a DUT
/// configuration), with the frames added when several are measured. Every
/// trial is saved (`--json`, the database) as it ends; on an error or interruption the
/// unfinished row's trials are kept.
#[allow(clippy::too_many_arguments)]
fn measure(
    rows: Vec<Row>,
    plan: &Plan,
    s: &mut Session,
    recorder: &mut Recorder,
    row_name: Option<String>,
    rep: &mut FrameLossReport,
    interrupt: &AtomicBool,
) -> std::result::Result<(), linerate_engine::EngineError> {
    let several = plan.frames.len() > 1;
    for (row_no, (frames, line_fps, max_fps, loads)) in rows.into_iter().enumerate() {
        let frame = frames.largest();
        let label = match (&row_name, several) {
            (Some(l), true) => format!("{l}, {}", session::label(frames)),
            (Some(l), false) => l.clone(),
            (None, _) => session::label(frames),
        };
        let mut trials: Vec<TrialResult> = Vec::new();
        let mut on_step = |step: Step| {
            recorder.step(row_no, 0, &step, line_fps);
            if let Step::Done { result, .. } = step {
                trials.push(result.clone());
                let mut partial = rep.clone();
                partial.interrupted = Some(session::unfinished(frame, trials.clone()));
                recorder.save_partial(&partial);
            }
        };
        let mut runner = EngineRunner {
            engine: &mut s.bed.engine,
            interrupt,
            cpu: s.cpu.as_ref(),
        };
        let d = plan.duration;
        let outcome = match plan.rfc2544_step {
            Some(step) => frame_loss::rfc2544(&mut runner, frames, max_fps, step, d, &mut on_step),
            None => {
                let stop = plan.stop_above_loss;
                frame_loss::sweep(&mut runner, frames, &loads, d, stop, &mut on_step)
            }
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
                scenario: None,
            }),
            Err(e) => {
                rep.interrupted = Some(session::unfinished(frame, trials));
                return Err(e);
            }
        }
        recorder.save_partial(rep);
    }
    Ok(())
}
/// The series of earlier runs' JSON files (`--rows-from`), which must be of
/// the same mode: their columns mean the same.
fn earlier_rows(files: &[std::path::PathBuf], mode: &str) -> Result<Vec<LossSeries>> {
    let mut rows = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("--rows-from {}", path.display()))?;
        let earlier: FrameLossReport = serde_json::from_str(&text)
            .with_context(|| {
                format!(
                    "--rows-from {}: not the JSON of 'linerate loss --json'",
                    path.display()
                )
            })
            .kind(crate::error::Kind::BadInput)?;
        if earlier.mode != mode {
            bail!(BadInput,
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
