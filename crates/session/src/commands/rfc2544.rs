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
    let mut bed = ports::open(&plan.bed, plan.max_frame_len())?;
    let cpu = dut_cpu::meter_for(&bed, &plan.dut.cpu, &[])?;
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

/// `--tunnels 1,10,100`: one run per count through the same gateway (each
/// a run of its own in the results database, the tunnels brought up anew),
/// each printed as its own table, then the counts side by side. The JSON
/// file holds `{"tunnels": [{"count": N, "report": ...}, ...]}`.
fn by_tunnels(plan: &Rfc2544Plan, interrupt: &AtomicBool) -> Result<Outcome> {
    let mut runs: Vec<(usize, linerate_results::Rfc2544Report)> = Vec::new();
    let mut outcome = Outcome::Passed;
    for &count in &plan.tunnel_counts {
        if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
            outcome = Outcome::Interrupted("results measured so far were kept".into());
            break;
        }
        let one = plan.with_tunnels(count);
        let before = tunnel_runs_json(&runs);
        let mut recorder = Recorder::open(&one.record)?.json_wrapped(
            plan.json.as_deref(),
            Box::new(move |rep| with_tunnel_run(&before, count, rep)),
        );
        errln!(
            "linerate: {count} tunnel{} ({} of {} counts)",
            if count == 1 { "" } else { "s" },
            runs.len() + 1,
            plan.tunnel_counts.len()
        );
        let measured = (|| {
            let mut bed = ports::open(&one.bed, one.max_frame_len())?;
            let cpu = dut_cpu::meter_for(&bed, &one.dut.cpu, &[])?;
            let extras = Extras {
                scenario: None,
                cpu: cpu.as_ref(),
            };
            measure(&one, &mut bed, extras, &mut recorder, interrupt)
        })();
        let (o, rep) = match measured {
            Ok(done) => done,
            Err(e) => {
                if !runs.is_empty() {
                    outp!("{}", report::compare_tunnels::by_tunnels(&runs));
                }
                return Err(e);
            }
        };
        outp!("{}", report::throughput_table_layers(&rep, plan.all_layers));
        outln!();
        recorder.finish_as(matches!(o, Outcome::Interrupted(_)))?;
        runs.push((count, rep));
        if let Outcome::Interrupted(_) = o {
            outcome = o;
            break;
        }
    }
    outp!("{}", report::compare_tunnels::by_tunnels(&runs));
    if let (Some(path), Outcome::Passed) = (&plan.json, &outcome) {
        errln!("linerate: every trial written to {}", path.display());
    }
    Ok(outcome)
}

/// The runs so far, as the JSON file lists them.
pub(crate) fn tunnel_runs_json(
    runs: &[(usize, linerate_results::Rfc2544Report)],
) -> Vec<serde_json::Value> {
    runs.iter()
        .map(|(n, r)| {
            serde_json::json!({
                "count": n,
                "report": serde_json::to_value(r).expect("reports serialize"),
            })
        })
        .collect()
}

/// The JSON file of a comparison over tunnel counts, `report` (of `count`
/// tunnels) after those `before`.
pub(crate) fn with_tunnel_run(
    before: &[serde_json::Value],
    count: usize,
    report: serde_json::Value,
) -> serde_json::Value {
    let mut all = before.to_vec();
    all.push(serde_json::json!({ "count": count, "report": report }));
    serde_json::json!({ "tunnels": all })
}
