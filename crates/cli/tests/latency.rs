//! `linerate latency` in the lab: the throughput search first, then
//! latency trials at shares of it; the JSON holds every trial and the
//! figures are consistent with them. Needs root; run with --test-threads=1.

mod common;

use common::*;
use serde_json::Value;

fn latency_is_consistent(p: &Value) {
    let l = &p["latency_ns"];
    let (min, avg, max) = (u(l, "min"), u(l, "avg"), u(l, "max"));
    let (p50, p90, p99, p999) = (u(l, "p50"), u(l, "p90"), u(l, "p99"), u(l, "p999"));
    assert!(min <= avg && avg <= max, "{p}");
    assert!(min <= p50 && p50 <= p90 && p90 <= p99 && p99 <= p999, "{p}");
    // Percentiles come from a histogram with 0.8 %-wide buckets; the top
    // one can sit a bucket above the exact maximum.
    assert!(p999 as f64 <= max as f64 * 1.01, "{p}");
    assert_eq!(u(p, "pdv_p999_ns"), p999 - min, "{p}");
    assert_eq!(u(p, "pdv_p99_ns"), p99 - min, "{p}");
    let trials = p["trials"].as_array().expect("trials");
    let lost: u64 = trials.iter().map(|t| u(t, "lost_frames")).sum();
    assert_eq!(u(p, "lost_frames"), lost, "{p}");
    for t in trials {
        assert_trial_consistent(t);
        assert_eq!(f(t, "intended_fps"), f(p, "intended_fps"), "{p}");
    }
}

#[test]
fn latency_is_measured_at_shares_of_the_throughput() {
    if !root_or_skip("latency_is_measured_at_shares_of_the_throughput") {
        return;
    }
    let (lab, _guard) = lab_up("lat");
    let json = TempFile::new("latency");
    let db = TempFile::new("latency-db");
    // --max-rate far below what the lab forwards: the search passes its
    // first trial, so the base rate is exactly 20,000 frames/s.
    let run = linerate(&[
        "latency",
        "--lab",
        "--lab-name",
        &lab,
        "--sizes",
        "128",
        "--max-rate",
        "20000fps",
        "--search-duration",
        "1s",
        "--loads",
        "50%,10%",
        "--repeat",
        "2",
        "--trial-duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--json",
        json.arg(),
        "--db",
        db.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    let rep = json.json();
    let r = &rep["results"][0];
    assert_eq!(r["base"], "throughput", "{r}");
    // Stored as it ran: the report the --json file holds, every trial
    // (the search's, judged, then the four latency trials, not judged),
    // and `show` prints the latency table from it.
    let stored = exported_last(&db);
    assert_eq!(stored["run"]["command"], "latency");
    assert_eq!(stored["run"]["status"], "complete");
    assert_eq!(stored["document"], rep);
    let trials = stored["trials"].as_array().expect("trials");
    let search = r["throughput"]["trials"].as_array().expect("search trials");
    assert_eq!(trials.len(), search.len() + 4, "{stored}");
    assert!(trials[..search.len()]
        .iter()
        .all(|t| t["passed"].is_boolean()));
    assert!(trials[search.len()..].iter().all(|t| t["passed"].is_null()));
    let numbers: Vec<u64> = trials.iter().map(|t| u(t, "trial_no")).collect();
    assert_eq!(numbers, (1..=trials.len() as u64).collect::<Vec<_>>());
    assert_eq!(shown_last(&db).matches("RFC 2544 latency").count(), 1);
    assert_eq!(
        f(r, "base_fps"),
        f(&r["throughput"], "throughput_fps"),
        "{r}"
    );
    let base = f(r, "base_fps");
    assert!(base > 0.0, "{r}");
    let points = r["points"].as_array().expect("points");
    // Lowest load first, each run twice.
    assert_eq!(points.len(), 2, "{r}");
    for (p, load) in points.iter().zip([0.1, 0.5]) {
        assert_eq!(f(p, "load"), load, "{p}");
        assert!((f(p, "intended_fps") - base * load).abs() < 1e-6, "{p}");
        assert_eq!(p["trials"].as_array().unwrap().len(), 2, "{p}");
        latency_is_consistent(p);
    }
    assert!(run.stdout.contains("RFC 2544 latency"), "{}", run.dump());
    assert!(run.stdout.contains("10 % NDR"), "{}", run.dump());
    assert!(run.stdout.contains("PDV99.9"), "{}", run.dump());
    // The lab DUT's CPU load is recorded in every latency trial and shown.
    assert!(run.stdout.contains("DUT CPU %"), "{}", run.dump());
    for p in points {
        for t in p["trials"].as_array().unwrap() {
            let cpu = f(&t["dut_cpu"], "total_pct");
            assert!((0.0..=100.0).contains(&cpu), "{t}");
        }
    }
}

#[test]
fn a_given_rate_replaces_the_search_and_a_rate_above_line_is_refused() {
    if !root_or_skip("a_given_rate_replaces_the_search_and_a_rate_above_line_is_refused") {
        return;
    }
    let (lab, _guard) = lab_up("lar");
    let json = TempFile::new("latrate");
    let run = linerate(&[
        "latency",
        "--lab",
        "--lab-name",
        &lab,
        "--sizes",
        "64",
        "--rate",
        "10000fps",
        "--loads",
        "100%",
        "--trial-duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--json",
        json.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    let r = &json.json()["results"][0];
    assert_eq!(r["base"], "given", "{r}");
    assert!(r.get("throughput").is_none(), "no search ran: {r}");
    let p = &r["points"][0];
    assert_eq!(f(p, "intended_fps"), 10_000.0, "{p}");
    assert_eq!(u(&p["trials"][0], "tx_frames"), 10_000, "{p}");
    latency_is_consistent(p);

    let run = linerate(&[
        "latency",
        "--lab",
        "--lab-name",
        &lab,
        "--sizes",
        "64",
        "--rate",
        "20Mpps",
    ]);
    assert_bad_input(&run);
    assert!(run.stderr.contains("above the line rate"), "{}", run.dump());
}
