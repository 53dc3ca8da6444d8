//! A stored run as JSON (versioned: schema/run.schema.json) or CSV.

use crate::model::StoredRun;
use linerate_results::{ThroughputResult, TrialResult};
use serde_json::{json, Value};
use std::fmt::Write as _;

/// The version of the exported JSON document; bump it (and the schema's
/// `$id`) when a field changes meaning or goes away. New optional fields do
/// not need a new version.
pub const JSON_SCHEMA_VERSION: u32 = 1;

/// The run as one JSON document: who/what/where, the RFC 2544 report as
/// `--json` writes it (rfc2544 runs), and every trial in the order run.
pub fn to_json(run: &StoredRun) -> Value {
    let trials: Vec<Value> = run
        .trials
        .iter()
        .map(|t| {
            json!({
                "search_no": t.search_no,
                "trial_no": t.trial_no,
                "passed": t.passed,
                "finished_at": t.finished_at,
                "result": t.result,
            })
        })
        .collect();
    json!({
        "schema_version": JSON_SCHEMA_VERSION,
        "run": {
            "id": run.id,
            "command": run.command,
            "args": run.args,
            "status": run.status.key(),
            "started_at": run.started_at,
            "finished_at": run.finished_at,
            "dut": run.dut,
            "machine": run.machine,
            "engine": run.engine,
            "linerate_version": run.linerate_version,
            "line_speed_bps": run.line_speed_bps,
        },
        "report": run.report(),
        "document": run.document,
        "trials": trials,
    })
}

/// Header of the per-size CSV.
const RESULT_COLUMNS: &str = "run,frame_size,l3_length,throughput_fps,throughput_mbps_l1,throughput_mbps_l2,throughput_mbps_l3,throughput_mbps_l4,line_rate_fps,share_of_line,tester_limited,trials";

/// Header of the per-trial CSV.
const TRIAL_COLUMNS: &str = "run,search_no,trial_no,frame_size,l3_length,duration_s,intended_fps,offered_fps,intended_frames,tx_frames,rx_frames,lost_frames,loss_ratio,passed,reordered,duplicated,latency_min_ns,latency_avg_ns,latency_max_ns,latency_p50_ns,latency_p90_ns,latency_p99_ns,latency_p999_ns,generator_short,tester_rx_drops,stray_frames,engine,seq_small,seq_big,seq_reverse,recovery_waited_s,recovery_frames,recovery_limit_reached";

/// One row per finished frame size (the throughput table, unrounded).
pub fn results_csv(run: &StoredRun) -> String {
    let mut out = format!("{RESULT_COLUMNS}\n");
    let trials = |n: usize| run.trials.iter().filter(|t| t.search_no == n).count();
    for (n, r) in &run.results {
        let r: &ThroughputResult = r;
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            run.id,
            r.frame_size,
            r.l3_length,
            r.throughput_fps,
            r.throughput_mbps_l1,
            r.throughput_mbps_l2,
            r.throughput_mbps_l3,
            r.throughput_mbps_l4,
            r.line_rate_fps,
            if r.line_rate_fps > 0.0 {
                r.throughput_fps / r.line_rate_fps
            } else {
                0.0
            },
            r.tester_limited,
            trials(*n)
        );
    }
    out
}

/// One row per trial, every count as measured. A measurement the trial
/// did not make (latency, sequence errors, the recovery check) leaves its
/// columns empty.
pub fn trials_csv(run: &StoredRun) -> String {
    let mut out = format!("{TRIAL_COLUMNS}\n");
    for t in &run.trials {
        let r: &TrialResult = &t.result;
        let lat = |f: fn(&linerate_results::LatencySummary) -> u64| {
            r.latency_ns
                .as_ref()
                .map(|l| f(l).to_string())
                .unwrap_or_default()
        };
        let seq = |f: fn(&linerate_results::SequenceErrors) -> u64| {
            r.sequence_errors
                .as_ref()
                .map(|s| f(s).to_string())
                .unwrap_or_default()
        };
        let recovery = |f: fn(&linerate_results::Recovery) -> String| {
            r.recovery.as_ref().map(f).unwrap_or_default()
        };
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            run.id,
            t.search_no,
            t.trial_no,
            r.frame_size,
            r.l3_length,
            r.duration_s,
            r.intended_fps,
            r.offered_fps,
            r.intended_frames,
            r.tx_frames,
            r.rx_frames,
            r.lost_frames,
            r.loss_ratio,
            t.passed.map(|p| p.to_string()).unwrap_or_default(),
            r.reordered,
            r.duplicated,
            lat(|l| l.min),
            lat(|l| l.avg),
            lat(|l| l.max),
            lat(|l| l.p50),
            lat(|l| l.p90),
            lat(|l| l.p99),
            lat(|l| l.p999),
            r.generator_short,
            r.tester_rx_drops,
            r.stray_frames,
            csv_field(&r.engine),
            seq(|s| s.small),
            seq(|s| s.big),
            seq(|s| s.reverse),
            recovery(|r| r.waited_s.to_string()),
            recovery(|r| r.frames.to_string()),
            recovery(|r| r.limit_reached.to_string()),
        );
    }
    out
}

/// A text field quoted when it holds a comma, quote or line break.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_fields_are_quoted_when_needed() {
        assert_eq!(csv_field("af_packet"), "af_packet");
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
    }

    /// The schema checked into the repository.
    pub fn schema() -> serde_json::Value {
        serde_json::from_str(include_str!("../../../schema/run.schema.json")).unwrap()
    }

    /// Every schema violation, one per line.
    fn violations(doc: &serde_json::Value) -> String {
        let validator = jsonschema::validator_for(&schema()).expect("the schema compiles");
        validator
            .iter_errors(doc)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn exported_json_follows_the_schema() {
        let run = crate::testdata::run(7, "x", "1");
        let doc = to_json(&run);
        assert_eq!(violations(&doc), "");
        // A run cut short: trials of an unfinished search, no result.
        let mut cut = run.clone();
        cut.results.pop();
        cut.status = crate::RunStatus::Died;
        let doc = to_json(&cut);
        assert_eq!(violations(&doc), "");
        assert_eq!(doc["run"]["status"], "died");
        assert_eq!(doc["report"]["interrupted"]["frame_size"], 1518);
    }

    #[test]
    fn a_repeated_run_exports_its_rounds_and_medians_by_the_schema() {
        // The two searches as two rounds of 64 bytes.
        let mut run = crate::testdata::run(7, "x", "1");
        run.settings.as_mut().unwrap().repeat = 2;
        for (round, (_, r)) in run.results.iter_mut().enumerate() {
            r.frame_size = 64;
            r.l3_length = 46;
            r.round = Some(round + 1);
        }
        let doc = to_json(&run);
        assert_eq!(violations(&doc), "");
        let report = &doc["report"];
        assert_eq!(report["round_results"].as_array().unwrap().len(), 2);
        let results = report["results"].as_array().unwrap();
        assert_eq!(results.len(), 1, "{report}");
        assert_eq!(results[0]["over_rounds"]["count"], 2);
        assert_eq!(results[0]["trials"].as_array().unwrap().len(), 3);
    }

    #[test]
    fn the_schema_rejects_what_it_should() {
        let run = crate::testdata::run(7, "x", "1");
        let mut doc = to_json(&run);
        doc["schema_version"] = 2.into();
        doc["trials"][0]["result"]["loss_ratio"] = 1.5.into();
        doc["run"]["status"] = "done".into();
        let v = violations(&doc);
        assert_eq!(v.lines().count(), 3, "{v}");
    }

    /// A trial's sequence errors and recovery check fill their columns;
    /// a trial without them leaves them empty.
    #[test]
    fn trial_rows_carry_sequence_errors_and_the_recovery_check() {
        let mut run = crate::testdata::run(7, "x", "1");
        run.trials[1].result.sequence_errors = Some(linerate_results::SequenceErrors {
            small: 3,
            big: 1,
            reverse: 2,
            threshold: 1000,
        });
        run.trials[1].result.recovery = Some(linerate_results::Recovery {
            waited_s: 4.25,
            frames: 1981,
            limit_reached: true,
            quiet_s: 0.1,
            quiet_frames: 10,
        });
        let csv = trials_csv(&run);
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap().split(',').collect();
        let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
        let cell = |row: &[&str], name: &str| {
            let i = header
                .iter()
                .position(|h| *h == name)
                .unwrap_or_else(|| panic!("no column {name}"));
            row[i].to_string()
        };
        let names = [
            "seq_small",
            "seq_big",
            "seq_reverse",
            "recovery_waited_s",
            "recovery_frames",
            "recovery_limit_reached",
        ];
        let got: Vec<String> = names.iter().map(|n| cell(&rows[1], n)).collect();
        assert_eq!(got, ["3", "1", "2", "4.25", "1981", "true"], "{csv}");
        let empty: Vec<String> = names.iter().map(|n| cell(&rows[0], n)).collect();
        assert!(empty.iter().all(String::is_empty), "{csv}");
    }

    #[test]
    fn header_and_rows_have_the_same_number_of_columns() {
        let run = crate::testdata::run(7, "x", "1");
        for csv in [results_csv(&run), trials_csv(&run)] {
            let mut lines = csv.lines();
            let n = lines.next().unwrap().split(',').count();
            let mut rows = 0;
            for l in lines {
                assert_eq!(l.split(',').count(), n, "{l}");
                rows += 1;
            }
            assert!(rows > 0, "{csv}");
        }
    }
}
