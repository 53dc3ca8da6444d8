//! `linerate loss`: frame loss rate vs offered load (RFC 2544 section
//! 26.3), printed as the 100GE report's table: one row per frame size (or
//! mix) and DUT configuration, one column per offered load, loss in the
//! cells. With `--scenario a,b,c` each configuration gets a fresh lab and
//! rows of its own, so configurations compare side by side.

use crate::driver::EngineRunner;
use crate::driver::{self, fps_within_line, Session};
use crate::error::{bail, Result, ResultExt};
use crate::exit::Outcome;
use crate::plan::BedPlan;
use crate::plan::DutPlan;
use crate::recorder::RecordPlan;
use crate::recorder::Recorder;
use crate::scenario_bed::{prepare, record_of, traffic_checks, tunnel_checks};
use crate::sizes::each_size;
use linerate_lab::scenario::{Applied, Scenario};
use linerate_method::frame_loss::{self, Load};
use linerate_method::spec::Step;
use linerate_results::methods::{FrameLossReport, LossSeries};
use linerate_results::{report, MixInfo};
use linerate_store::RunStatus;
use linerate_wire::{Frames, Rate};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// A frame loss run, checked: what every row measures, the DUT
/// configurations compared and the earlier rows shown, parsed and read
/// before any port opens.
#[derive(Debug, Clone)]
pub struct LossPlan {
    pub bed: BedPlan,
    /// The frame sizes or mixes, one row each per DUT configuration.
    pub frames: Vec<Frames>,
    pub duration: Duration,
    /// The loads of a sweep (empty in the RFC 2544 mode), as written and parsed.
    pub loads: Vec<(String, Rate)>,
    /// Step of the RFC 2544 mode, when it runs.
    pub rfc2544_step: Option<f64>,
    pub max_rate: Option<(String, Rate)>,
    pub stop_above_loss: Option<f64>,
    /// The rows' name (`--label`), when no DUT configurations are compared.
    pub label: Option<String>,
    /// The rows of earlier runs (`--rows-from`), printed above this run's.
    pub earlier: Vec<LossSeries>,
    /// The DUT configurations compared (`--scenario`), one fresh lab each;
    /// empty: the lab or the external DUT as it is.
    pub scenarios: Vec<Scenario>,
    pub json: Option<PathBuf>,
    pub dut: DutPlan,
    pub record: RecordPlan,
    /// `--tunnels 1,10,100`: rows of their own for each count (empty: the
    /// count `bed.ipsec` holds, if any).
    pub tunnel_counts: Vec<usize>,
}

impl LossPlan {
    /// `rfc2544` or `sweep`: what the columns mean.
    pub fn mode(&self) -> &'static str {
        if self.rfc2544_step.is_some() {
            "rfc2544"
        } else {
            "sweep"
        }
    }
}

pub fn run(plan: LossPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let earlier = &plan.earlier;
    let units = units(&plan);
    let json = plan.json.as_deref();
    let mut rep: Option<FrameLossReport> = None;
    for (index, unit) in units.iter().enumerate() {
        if interrupt.load(Ordering::Relaxed) {
            break;
        }
        let unit_plan;
        let plan = match unit.count {
            Some(n) => {
                unit_plan = with_tunnels(&plan, n, index);
                &unit_plan
            }
            None => &plan,
        };
        // `applied` (XDP program, tunnel daemons) goes before the test bed,
        // which owns the scenario's lab.
        let record = unit_record(plan, units.len(), index);
        let mut recorder = Recorder::open(&record)?.json_file(json);
        let (applied, mut s) = open(plan, unit.scenario, index, interrupt)?;
        let rep = rep.get_or_insert_with(|| new_report(plan, &s));
        if !plan.scenarios.is_empty() {
            let list = crate::plan::scenario_list(&plan.scenarios);
            rep.run.description = format!("lab Linux router in each DUT configuration of {list}");
        }
        let row_name = row_name(unit.scenario, plan.label.as_ref(), unit.count);
        let rows = rows(plan, &s)?;
        s.ready()?;
        recorder.begin(s.record_info("loss", &plan.frames, plan.duration.as_secs_f64()))?;
        let first_row = rep.series.len();
        let stopped = measure(rows, plan, &mut s, &mut recorder, row_name, rep, interrupt);
        if let (Some(sc), Some(a)) = (unit.scenario, &applied) {
            check_scenario(sc, a, &s, &mut rep.series[first_row..])?;
        }
        drop(applied);
        if let Err(e) = stopped {
            let table = report::frame_loss_table(&with_rows(earlier, rep));
            return driver::stopped(e, &mut recorder, rep, table);
        }
        recorder.save_partial(rep);
        recorder.finish(RunStatus::Complete)?;
    }
    let Some(rep) = rep else {
        return Ok(Outcome::Interrupted("no row was measured".into()));
    };
    outp!("{}", report::frame_loss_table(&with_rows(earlier, &rep)));
    if let Some(path) = json {
        crate::outputs::write_json(path, &rep)?;
        errln!("linerate: every trial written to {}", path.display());
    }
    if interrupt.load(Ordering::Relaxed) {
        return Ok(Outcome::Interrupted(
            "rows measured so far were kept".into(),
        ));
    }
    Ok(Outcome::Passed)
}

/// One group of rows: a DUT configuration (None: the lab or the external
/// DUT as it is) with a tunnel count (None: the count the plan holds).
struct Unit<'p> {
    scenario: Option<&'p Scenario>,
    count: Option<usize>,
}

/// The groups of rows a run measures: each DUT configuration compared
/// with each tunnel count of `--tunnels 1,10,100`, configurations outer.
fn units(plan: &LossPlan) -> Vec<Unit<'_>> {
    let scenarios: Vec<Option<&Scenario>> = if plan.scenarios.is_empty() {
        vec![None]
    } else {
        plan.scenarios.iter().map(Some).collect()
    };
    let counts: Vec<Option<usize>> = if plan.tunnel_counts.len() > 1 {
        plan.tunnel_counts.iter().copied().map(Some).collect()
    } else {
        vec![None]
    };
    scenarios
        .iter()
        .flat_map(|sc| {
            counts.iter().map(move |c| Unit {
                scenario: *sc,
                count: *c,
            })
        })
        .collect()
}

/// The plan with `n` tunnels, for the `index`th group of rows (said on
/// stderr, with its place among the counts).
fn with_tunnels(plan: &LossPlan, n: usize, index: usize) -> LossPlan {
    let mut unit_plan = plan.clone();
    if let Some(i) = unit_plan.bed.ipsec.as_mut() {
        i.tunnels = n;
    }
    let counts = plan.tunnel_counts.len();
    errln!(
        "linerate: {n} tunnel{} ({} of {} counts)",
        if n == 1 { "" } else { "s" },
        index % counts + 1,
        counts
    );
    unit_plan
}

/// Each DUT configuration is a run of its own in the results database,
/// with a capture file of its own when several groups are measured.
fn unit_record(plan: &LossPlan, units: usize, index: usize) -> RecordPlan {
    let mut record = plan.record.clone();
    if units > 1 {
        record.pcap = record
            .pcap
            .as_deref()
            .map(|p| crate::scenario_bed::numbered(p, index + 1));
    }
    record
}

/// The report's header, from the first group's session: every group's
/// rows join it.
fn new_report(plan: &LossPlan, s: &Session) -> FrameLossReport {
    FrameLossReport {
        run: s.run.clone(),
        mode: plan.mode().to_string(),
        step: plan.rfc2544_step,
        trial_duration_s: plan.duration.as_secs_f64(),
        stop_above_loss_ratio: plan.stop_above_loss,
        series: Vec::new(),
        interrupted: None,
    }
}

/// The name a group's rows carry: the configuration's spec (else
/// `--label`), with the tunnel count when several are compared.
fn row_name(
    scenario: Option<&Scenario>,
    label: Option<&String>,
    count: Option<usize>,
) -> Option<String> {
    let name = match scenario {
        Some(sc) => Some(sc.spec.clone()),
        None => label.cloned(),
    };
    match count {
        Some(n) => {
            let t = format!("{n} tunnel{}", if n == 1 { "" } else { "s" });
            Some(match name {
                Some(name) => format!("{name}, {t}"),
                None => t,
            })
        }
        None => name,
    }
}

/// After traffic: did it really go through the configuration? The
/// checks (the tunnels' own counters, else the lab's traffic checks over
/// the group's trials) are recorded on each of the group's rows.
fn check_scenario(sc: &Scenario, a: &Applied, s: &Session, group: &mut [LossSeries]) -> Result<()> {
    let mut record = record_of(sc, a);
    let lab = s
        .bed
        .lab
        .as_ref()
        .ok_or_else(|| crate::error::err!(Failed, "a scenario's test bed holds its lab"))?;
    let done = group
        .iter()
        .flat_map(|row| row.points.iter().map(|p| &p.trial));
    record.traffic_checks = match tunnel_checks(a, s.bed.ipsec.as_ref())? {
        Some(checks) => checks,
        None => traffic_checks(a, lab, done)?,
    };
    for row in group {
        row.scenario = Some(record.clone());
    }
    Ok(())
}

/// The test bed of one row group: a fresh lab configured as `scenario`
/// (the `index`th of the run), or the ports as given.
fn open(
    plan: &LossPlan,
    scenario: Option<&Scenario>,
    index: usize,
    stop: &AtomicBool,
) -> Result<(Option<Applied>, Session)> {
    let what = "frame loss rate";
    let Some(sc) = scenario else {
        return Ok((
            None,
            driver::open(&plan.bed, &plan.dut.cpu, &plan.frames, what, stop)?,
        ));
    };
    let max_frame_len = crate::plan::max_frame_len(&plan.frames);
    let (applied, bed) = prepare(&plan.bed, max_frame_len, sc, index, stop)?;
    let pids = applied.data_path_pids();
    let s = driver::start(bed, &plan.dut.cpu, &pids, &plan.frames, what, stop)?;
    Ok((Some(applied), s))
}

/// A row to measure: its frames, their line rate and the rate 100 % means
/// (frames/s), and the loads of a sweep.
type Row<'a> = (&'a Frames, f64, f64, Vec<Load>);

/// The rows of `plan` on `s`'s ports, every load checked against the line
/// rate before the first trial.
fn rows<'a>(plan: &'a LossPlan, s: &Session) -> Result<Vec<Row<'a>>> {
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
    plan: &LossPlan,
    s: &mut Session,
    recorder: &mut Recorder,
    row_name: Option<String>,
    rep: &mut FrameLossReport,
    interrupt: &AtomicBool,
) -> std::result::Result<(), linerate_engine::EngineError> {
    let several = plan.frames.len() > 1;
    let bed = &mut s.bed;
    let cpu = s.cpu.as_ref();
    each_size(
        rows,
        rep,
        recorder,
        |(frames, ..)| frames.largest(),
        |row_no, (frames, line_fps, max_fps, loads), trials| {
            let frame = frames.largest();
            let label = match (&row_name, several) {
                (Some(l), true) => format!("{l}, {}", driver::label(frames)),
                (Some(l), false) => l.clone(),
                (None, _) => driver::label(frames),
            };
            let mut on_step = |step: Step| {
                trials.recorder.step(row_no, 0, &step, line_fps);
                if let Step::Done { result, .. } = step {
                    trials.done(result);
                }
            };
            let mut runner = EngineRunner::on(bed, interrupt, cpu);
            let d = plan.duration;
            let points = match plan.rfc2544_step {
                Some(step) => {
                    frame_loss::rfc2544(&mut runner, frames, max_fps, step, d, &mut on_step)?
                }
                None => {
                    let stop = plan.stop_above_loss;
                    frame_loss::sweep(&mut runner, frames, &loads, d, stop, &mut on_step)?
                }
            };
            Ok(LossSeries {
                label,
                frame_size: frame.frame(),
                l3_length: frame.l3(),
                mix: frames.mix().map(MixInfo::of),
                line_rate_fps: line_fps,
                max_fps,
                points,
                scenario: None,
            })
        },
        |rep, row| rep.series.push(row),
    )
}

/// The series of earlier runs' JSON files (`--rows-from`), which must be of
/// the same mode: their columns mean the same.
pub fn earlier_rows(files: &[std::path::PathBuf], mode: &str) -> Result<Vec<LossSeries>> {
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
