//! `linerate rfc2544`: the throughput search (RFC 2544 section 26.1) for
//! each frame size, printed as the LANCOM techpaper's table.

use crate::dut_cpu;
use crate::error::{bail, Result};
use crate::exit::Outcome;
use crate::ports;
use crate::recorder::Recorder;
use crate::throughput::{measure, Extras};
use linerate_results::report;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

pub use crate::throughput::Rfc2544Plan;

/// RFC 2544 section 24: trials of at least 60 s.
pub const STRICT_TRIAL: Duration = Duration::from_secs(60);

pub fn run(plan: Rfc2544Plan, interrupt: &AtomicBool) -> Result<Outcome> {
    if !plan.scenarios.is_empty() {
        // The caller dispatches: one command never calls another.
        bail!(
            Failed,
            "rfc2544 with --scenario runs through commands::scenarios::run"
        );
    }
    if plan.tunnel_counts.len() > 1 {
        return by_tunnels(&plan, interrupt);
    }
    // Opened before the ports: a bad --db or --events costs no trial.
    let mut recorder = Recorder::open(&plan.record)?.json_file(plan.json.as_deref());
    let mut bed = ports::open(&plan.bed, plan.max_frame_len(), interrupt)?;
    let cpu = dut_cpu::meter_for(&bed, &plan.dut.cpu, &[], interrupt)?;
    let extras = Extras {
        scenario: None,
        cpu: cpu.as_ref(),
    };
    let (outcome, rep) = measure(&plan, &mut bed, extras, &mut recorder, interrupt)?;
    recorder.print(&report::throughput_table_layers(&rep, plan.all_layers));
    recorder.finish_as(matches!(outcome, Outcome::Interrupted(_)))?;
    if let Outcome::Passed = outcome {
        recorder.saved_note();
    }
    Ok(outcome)
}

/// `--tunnels 1,10,100` through a gateway on ports the user names: each
/// count measured on the test bed opened anew ([`crate::tunnel_counts`]).
fn by_tunnels(plan: &Rfc2544Plan, interrupt: &AtomicBool) -> Result<Outcome> {
    crate::tunnel_counts::each_count(plan, interrupt, |_, one, wrap| {
        let mut recorder = Recorder::open(&one.record)?.json_wrapped(plan.json.as_deref(), wrap);
        let mut bed = ports::open(&one.bed, one.max_frame_len(), interrupt)?;
        let cpu = dut_cpu::meter_for(&bed, &one.dut.cpu, &[], interrupt)?;
        let extras = Extras {
            scenario: None,
            cpu: cpu.as_ref(),
        };
        let (o, rep) = measure(one, &mut bed, extras, &mut recorder, interrupt)?;
        recorder.finish_as(matches!(o, Outcome::Interrupted(_)))?;
        Ok((o, rep))
    })
}
