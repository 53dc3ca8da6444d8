//! `linerate rfc2544 --scenario LIST`: the RFC 2544 test on the lab DUT in
//! each configuration of the list (a fresh lab for each, the scenario
//! applied and verified before the first trial and the traffic's passage
//! checked after the last), each printed as its own table, then all of them
//! side by side when there are several.

use crate::error::Result;
use crate::exit::Outcome;
use crate::recorder::JsonWrap;
use crate::scenario_bed::{
    numbered, outer_frame, prepare, record_of, traffic_checks, tunnel_checks,
};
use crate::throughput::{measure, Extras, Rfc2544Plan};
use linerate_lab::scenario::{Applied, Scenario};
use linerate_lab::Lab;
use linerate_results::report::{self, compare};
use linerate_results::scenario::OuterRate;
use linerate_results::Rfc2544Report;
use std::sync::atomic::{AtomicBool, Ordering};

pub fn run(plan: Rfc2544Plan, interrupt: &AtomicBool) -> Result<Outcome> {
    linerate_lab::check_environment()?;
    if plan.tunnel_counts.len() > 1 {
        return by_tunnels(&plan, interrupt);
    }
    let scenarios = &plan.scenarios;
    let comparison = scenarios.len() > 1;
    let mut reports: Vec<Rfc2544Report> = Vec::new();
    let mut outcome = Outcome::Passed;
    for (i, scenario) in scenarios.iter().enumerate() {
        if interrupt.load(Ordering::Relaxed) {
            outcome = Outcome::Interrupted("results measured so far were kept".into());
            break;
        }
        let before: Vec<serde_json::Value> = reports
            .iter()
            .map(|r| serde_json::to_value(r).expect("reports serialize"))
            .collect();
        let wrap: JsonWrap = Box::new(move |rep| json_file(&before, rep, comparison));
        let (o, rep) = match run_one(&plan, scenario, i, interrupt, wrap, comparison) {
            Ok(done) => done,
            Err(e) => {
                // What the scenarios before measured stays on screen (and
                // in the JSON file, written after each trial).
                if reports.len() > 1 {
                    outp!("{}", compare::side_by_side(&reports));
                }
                return Err(e);
            }
        };
        outp!("{}", report::throughput_table(&rep));
        if comparison {
            outln!();
        }
        reports.push(rep);
        if let Outcome::Interrupted(_) = o {
            outcome = o;
            break;
        }
    }
    if comparison {
        outp!("{}", compare::side_by_side(&reports));
    }
    if let (Some(path), Outcome::Passed) = (&plan.json, &outcome) {
        errln!("linerate: every trial written to {}", path.display());
    }
    Ok(outcome)
}

/// One scenario: lab up, apply and verify, measure, check the traffic.
fn run_one(
    plan: &Rfc2544Plan,
    scenario: &Scenario,
    index: usize,
    interrupt: &AtomicBool,
    wrap: JsonWrap,
    comparison: bool,
) -> Result<(Outcome, Rfc2544Report)> {
    let (applied, mut bed) = prepare(&plan.bed, plan.max_frame_len(), scenario, index, interrupt)?;
    let cpu = crate::dut_cpu::meter_for(&bed, &plan.dut.cpu, &applied.data_path_pids(), interrupt)?;
    let mut record = record_of(scenario, &applied);
    let extras = Extras {
        scenario: Some(record.clone()),
        cpu: cpu.as_ref(),
    };
    // Each scenario is a run of its own in the results database, with a
    // capture file of its own when several are compared; the JSON file
    // holds the scenarios before it too.
    let mut recording = plan.record.clone();
    if comparison {
        recording.pcap = recording.pcap.as_deref().map(|p| numbered(p, index + 1));
    }
    let mut recorder =
        crate::recorder::Recorder::open(&recording)?.json_wrapped(plan.json.as_deref(), wrap);
    let (outcome, mut rep) = measure(plan, &mut bed, extras, &mut recorder, interrupt)?;

    // After traffic: did it really go through the scenario?
    let lab = bed
        .lab
        .as_ref()
        .expect("a scenario's test bed holds its lab");
    record.traffic_checks = match tunnel_checks(&applied, bed.ipsec.as_ref())? {
        Some(checks) => checks,
        None => verify_traffic(&applied, lab, &rep)?,
    };
    for check in &record.traffic_checks {
        errln!("linerate:   seen: {check}");
    }
    if let Some(kind) = scenario.tunnel() {
        record.outer = rep
            .results
            .iter()
            .map(|r| {
                OuterRate::new(
                    r.frame_size,
                    outer_frame(kind, r.l3_length as usize, applied.user_space()) as u16,
                    r.throughput_fps,
                )
            })
            .collect();
    }
    rep.scenario = Some(record);
    recorder.save(&rep)?;
    recorder.finish_as(matches!(outcome, Outcome::Interrupted(_)))?;
    drop(applied);
    Ok((outcome, rep))
}

/// `--tunnels 1,10,100` on one scenario (vpn-gateway): a fresh lab and
/// gateway for each count ([`crate::tunnel_counts`]).
fn by_tunnels(plan: &Rfc2544Plan, interrupt: &AtomicBool) -> Result<Outcome> {
    let scenario = &plan.scenarios[0];
    crate::tunnel_counts::each_count(plan, interrupt, |i, one, wrap| {
        run_one(one, scenario, i, interrupt, wrap, true)
    })
}

/// The traffic checks, skipped (with a note) when no trial forwarded
/// anything (then there is nothing to see, and the table says so).
fn verify_traffic(applied: &Applied, lab: &Lab, rep: &Rfc2544Report) -> Result<Vec<String>> {
    let trials = rep
        .results
        .iter()
        .flat_map(|r| &r.trials)
        .chain(rep.interrupted.iter().flat_map(|i| &i.trials));
    traffic_checks(applied, lab, trials)
}

/// The JSON file: one report, or `{"comparison": [reports]}` for several.
fn json_file(
    before: &[serde_json::Value],
    report: serde_json::Value,
    comparison: bool,
) -> serde_json::Value {
    if comparison {
        let mut all = before.to_vec();
        all.push(report);
        serde_json::json!({ "comparison": all })
    } else {
        report
    }
}
