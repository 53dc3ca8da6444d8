//! `rfc2544 --tunnels 1,10,100`: one run per tunnel count through the same
//! gateway (each a run of its own in the results database, the tunnels
//! brought up anew), each printed as its own table as it ends, then the
//! counts side by side. The JSON file holds `{"tunnels": [{"count": N,
//! "report": ...}, ...]}`, rewritten after every trial. Shared by the
//! `rfc2544` command (a gateway on ports the user names) and by its
//! scenarios (the lab's vpn-gateway), which differ only in how one count
//! is measured.

use crate::error::Result;
use crate::exit::Outcome;
use crate::recorder::JsonWrap;
use crate::throughput::Rfc2544Plan;
use linerate_results::report;
use linerate_results::Rfc2544Report;
use std::sync::atomic::{AtomicBool, Ordering};

/// Runs `measure_count` for each of the plan's tunnel counts (its index,
/// the plan for that count, and how its report sits in the JSON file) and
/// prints each table and then the comparison. An interruption keeps the
/// counts measured so far; an error prints their comparison first.
pub(crate) fn each_count(
    plan: &Rfc2544Plan,
    interrupt: &AtomicBool,
    mut measure_count: impl FnMut(usize, &Rfc2544Plan, JsonWrap) -> Result<(Outcome, Rfc2544Report)>,
) -> Result<Outcome> {
    let mut runs: Vec<(usize, Rfc2544Report)> = Vec::new();
    let mut outcome = Outcome::Passed;
    for (i, &count) in plan.tunnel_counts.iter().enumerate() {
        if interrupt.load(Ordering::Relaxed) {
            outcome = Outcome::Interrupted("results measured so far were kept".into());
            break;
        }
        errln!(
            "linerate: {count} tunnel{} ({} of {} counts)",
            if count == 1 { "" } else { "s" },
            i + 1,
            plan.tunnel_counts.len()
        );
        let before = runs_json(&runs);
        let wrap: JsonWrap = Box::new(move |rep| with_run(&before, count, rep));
        let one = plan.with_tunnels(count);
        let (o, rep) = match measure_count(i, &one, wrap) {
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
fn runs_json(runs: &[(usize, Rfc2544Report)]) -> Vec<serde_json::Value> {
    runs.iter()
        .map(|(n, r)| {
            serde_json::json!({
                "count": n,
                "report": serde_json::to_value(r).expect("reports serialize"),
            })
        })
        .collect()
}

/// The JSON file of a comparison over tunnel counts: `report` (of `count`
/// tunnels) after those `before`.
fn with_run(
    before: &[serde_json::Value],
    count: usize,
    report: serde_json::Value,
) -> serde_json::Value {
    let mut all = before.to_vec();
    all.push(serde_json::json!({ "count": count, "report": report }));
    serde_json::json!({ "tunnels": all })
}
