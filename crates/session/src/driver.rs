//! What the measuring commands share, below them: the session on a test
//! bed (its ports open, the run's header, the notes on what runs where),
//! the runner that puts a method's trials on the engine, rates per frame
//! size checked against the line rate, and keeping every trial when a run
//! stops early.

use crate::dut_cpu::DutCpuMeter;
use crate::dut_cpu::DutCpuPlan;
use crate::error::{bail, Result, ResultExt};
use crate::exit::Outcome;
use crate::plan::BedPlan;
use crate::ports::{self, TestBed};
use crate::recorder::Recorder;
use linerate_engine::{Engine, EngineError};
use linerate_method::TrialRunner;
use linerate_results::methods::RunInfo;
use linerate_results::report;
use linerate_results::{TrialResult, TrialSpec};
use linerate_wire::{Frames, Rate};
use std::sync::atomic::AtomicBool;
use std::time::SystemTime;

/// The ports, open, and the header of the run's report. The gateways are
/// resolved by [`Session::ready`], once the command has checked its rates
/// against the line rate.
pub(crate) struct Session {
    pub bed: TestBed,
    pub run: RunInfo,
    /// The DUT's CPU meter (every trial records the DUT's load).
    pub cpu: Option<crate::dut_cpu::DutCpuMeter>,
    /// What runs where, printed by [`Session::ready`]: a run refused for a
    /// bad value prints its one error line and nothing else.
    notes: Vec<String>,
}

impl Session {
    /// The checks passed: says what runs where and resolves the gateways.
    pub fn ready(&mut self) -> Result<()> {
        for note in self.notes.drain(..) {
            errln!("linerate: {note}");
        }
        self.bed.engine.resolve()?;
        Ok(())
    }
}

/// Opens the ports for `frames` and starts a session on them (see [`start`]).
pub(crate) fn open(
    bed_plan: &BedPlan,
    dut_cpu: &DutCpuPlan,
    frames: &[Frames],
    what: &str,
    stop: &AtomicBool,
) -> Result<Session> {
    let bed = ports::open(bed_plan, crate::plan::max_frame_len(frames), stop)?;
    start(bed, dut_cpu, &[], frames, what, stop)
}

/// The header of a report of a run on `bed`, starting now; `description`
/// says what was tested (the bed's own, or a scenario's).
pub(crate) fn run_info(bed: &TestBed, description: String) -> RunInfo {
    RunInfo {
        linerate_version: env!("CARGO_PKG_VERSION").to_string(),
        description,
        started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
        setup: bed.setup.to_string(),
        port_a: describe_port(bed.engine.port_a()),
        port_b: describe_port(bed.engine.port_b()),
        line_speed_bps: bed.line_bps,
        engine: bed.engine.config().name.clone(),
        placement: bed.placement.clone(),
        ip_version: bed.engine.encap().ip,
        vlan: bed.engine.encap().vlan,
        ipsec: bed.ipsec.as_ref().map(|p| p.record.clone()),
    }
}

/// A session on `bed`: checks `frames` fit the ports, notes what runs
/// where (`what` names the test) and starts the DUT's CPU meter (counting
/// a scenario's user-space `data_path_pids`). Call [`Session::ready`]
/// after the command's own checks.
pub(crate) fn start(
    bed: TestBed,
    dut_cpu: &DutCpuPlan,
    data_path_pids: &[u32],
    frames: &[Frames],
    what: &str,
    stop: &AtomicBool,
) -> Result<Session> {
    for f in frames {
        bed.engine.check_frame(f.largest())?;
    }
    let port_a = describe_port(bed.engine.port_a());
    let port_b = describe_port(bed.engine.port_b());
    let mut notes = vec![format!(
        "{what} on {port_a} -> {port_b}, line speed {} ({})",
        report::line_speed(bed.line_bps),
        bed.line_speed_source,
    )];
    if let Some(p) = &bed.placement {
        notes.push(p.note.clone());
    }
    if let Some(why) = &bed.engine_reason {
        notes.push(format!("engine {} ({why})", bed.engine.config().name));
    }
    let run = run_info(&bed, bed.description());
    let cpu = crate::dut_cpu::meter_for(&bed, dut_cpu, data_path_pids, stop)?;
    Ok(Session {
        bed,
        run,
        cpu,
        notes,
    })
}

impl Session {
    /// What the run is, for the results database and the run_started
    /// event: `command` on this bed, `frames` in order, trials of `trial_s`.
    pub fn record_info<'a>(
        &'a self,
        command: &'a str,
        frames: &[Frames],
        trial_s: f64,
    ) -> crate::recorder::RunInfo<'a> {
        crate::recorder::RunInfo {
            command,
            engine: &self.run.engine,
            receiver: self.bed.engine.receiver(),
            line_speed_bps: self.bed.line_bps,
            scenario: &self.run.description,
            report: None,
            sizes: frames.iter().map(|f| f.largest().frame()).collect(),
            trial_s,
            resolution: 0.0,
            capture_at: self.bed.engine.capture_slot(),
        }
    }
}

/// Parses a rate option (`text` as given to `option`).
pub fn parse_rate(text: &str, option: &str) -> Result<Rate> {
    Rate::parse(text).with_context(|| option.to_string())
}

/// An optional rate option, parsed, beside its text as given (for messages).
pub fn parse_optional_rate(text: Option<&str>, option: &str) -> Result<Option<(String, Rate)>> {
    text.map(|t| parse_rate(t, option).map(|r| (t.to_string(), r)))
        .transpose()
}

/// `rate` (`text` as given to `option`) in frames/s of `frames` on `bed`
/// (a mix counts its mean frame; a share of line rate counts every sending
/// link, as rfc2544 counts it), refused above the line rate.
pub(crate) fn fps_within_line(
    bed: &TestBed,
    rate: Rate,
    text: &str,
    option: &str,
    frames: &Frames,
) -> Result<f64> {
    let line_fps = bed.line_rate_fps(frames);
    let fps = bed.fps(frames, rate);
    if fps > line_fps * 1.000_001 {
        bail!(BadInput,
            "{option} {text} is {fps:.0} frames/s, above the line rate for {} ({line_fps:.0} frames/s at {}): lower it or set --line-speed",
            frames.describe(),
            report::line_speed(bed.line_bps)
        );
    }
    Ok(fps)
}

/// A table's name for `frames`: `64 B`, or a mix by its name (`IMIX 1`).
pub(crate) fn label(frames: &Frames) -> String {
    match frames.mix() {
        Some(m) => m.name.clone(),
        None => format!("{} B", frames.largest().frame()),
    }
}

/// A method stopped by `e`: the report (with the unfinished trials) is
/// saved and, when interrupted, the table so far printed.
pub(crate) fn stopped(
    e: EngineError,
    recorder: &mut Recorder,
    report: &impl serde::Serialize,
    table: String,
) -> Result<Outcome> {
    errln!();
    recorder.save(report)?;
    if let EngineError::Interrupted = e {
        recorder.print(&table);
        return Ok(Outcome::Interrupted(
            "results measured so far were kept".into(),
        ));
    }
    Err(e.into())
}

/// Lets the throughput search run its trials on the engine.
pub struct EngineRunner<'a> {
    pub engine: &'a mut Engine,
    pub interrupt: &'a AtomicBool,
    /// Samples the DUT's CPU load over each trial, when it is measured.
    pub cpu: Option<&'a DutCpuMeter>,
    /// `--ipsec`: the tunnel whose ESP counts each trial records.
    pub ipsec: Option<&'a crate::ipsec::IpsecPeer>,
}

impl<'a> EngineRunner<'a> {
    /// Runs trials on `bed`'s engine.
    pub fn on(
        bed: &'a mut TestBed,
        interrupt: &'a AtomicBool,
        cpu: Option<&'a DutCpuMeter>,
    ) -> Self {
        EngineRunner {
            engine: &mut bed.engine,
            interrupt,
            cpu,
            ipsec: bed.ipsec.as_ref(),
        }
    }
}

impl TrialRunner for EngineRunner<'_> {
    type Error = EngineError;
    fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, EngineError> {
        let sample = self.cpu.map(|m| m.begin(spec.duration));
        let esp_before = self.ipsec.map(|p| p.counts());
        let mut result = self.engine.run_trial(spec, self.interrupt)?;
        result.dut_cpu = sample.and_then(|s| s.finish());
        if let (Some(peer), Some(before)) = (self.ipsec, esp_before) {
            peer.account_trial(&before, &mut result)?;
        }
        Ok(result)
    }
}

/// A port as reports name it: `namespace/interface`, or the interface.
pub fn describe_port(info: &linerate_port::PortInfo) -> String {
    match &info.netns {
        Some(ns) => format!("{ns}/{}", info.ifname),
        None => info.ifname.clone(),
    }
}
