//! Drop tests (the 100GE report's "DDoS drop test"): half the offered
//! frames come from a source the DUT drops by policy, and the report keeps
//! those intended drops apart from the loss of the legitimate half.
//!
//! Every count is checked against the DUT's own nftables counters: the
//! frames the tester says it sent to be dropped are exactly the frames the
//! DUT's drop rule dropped, and frames that leak through a DUT without the
//! rule are reported as leaked, not as received. Root only; low rates, so
//! nothing but the policy drops a frame.

mod common;

use common::*;
use linerate_results::report::thousands;
use serde_json::Value;

/// The drop class's source: the lab scenario's, on tester A's subnet.
const DROP_SOURCE: &str = "198.18.0.200";

fn policy(t: &Value) -> (u64, u64) {
    let p = &t["policy_drops"];
    assert!(p.is_object(), "a drop-test trial without policy_drops: {t}");
    (u(p, "tx_frames"), u(p, "leaked_frames"))
}

/// A 1 s trial at 4000 frames/s from the lab `lab`, as JSON.
fn trial(lab: &str, engine: &str, extra: &[&str]) -> (Run, Value) {
    let json = TempFile::new("drop");
    let mut args = vec![
        "trial",
        "--lab",
        "--lab-name",
        lab,
        "--engine",
        engine,
        "--frame-size",
        "64",
        "--rate",
        "4000fps",
        "--duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--no-db",
        "--json",
        json.arg(),
    ];
    args.extend_from_slice(extra);
    let run = linerate(&args);
    assert_eq!(run.code, 0, "{}", run.dump());
    let t = json.json();
    (run, t)
}

#[test]
fn drop_from_counts_intended_drops_and_leaks_against_the_dut_counters() {
    if !root_or_skip("drop_from_counts_intended_drops_and_leaks_against_the_dut_counters") {
        return;
    }
    let (lab, _guard) = lab_up("dt");
    let dut = format!("lr-{lab}-dut");
    for engine in ["af_packet", "xdp"] {
        // No drop rule yet: the DUT forwards both halves, so the drop class
        // is reported as leaked (every frame of it) and not as received.
        let (run, t) = trial(&lab, engine, &["--drop-from", DROP_SOURCE]);
        let (sent, leaked) = policy(&t);
        assert_eq!(u(&t, "intended_frames"), 2000, "{engine}: {t}");
        assert_eq!(sent, 2000, "{engine}: half of 4000 frames: {t}");
        assert_eq!(leaked, sent, "{engine}: nothing dropped them: {t}");
        assert_eq!(u(&t, "rx_frames"), u(&t, "tx_frames"), "{engine}: {t}");
        assert_eq!(u(&t, "lost_frames"), 0, "{engine}: {t}");
        assert!(
            run.stdout.contains("came through the DUT"),
            "{engine}: no leak warning\n{}",
            run.dump()
        );

        // With the rule: every drop-class frame is dropped by it, and the
        // DUT's counter agrees with the tester's count exactly.
        nft_load(
            &dut,
            &format!(
                "table ip dt {{\n chain c {{\n  type filter hook forward priority 0; policy accept;\n  ip saddr {DROP_SOURCE} counter drop\n  ip saddr 198.18.0.2 counter accept\n }}\n}}\n"
            ),
        );
        let (run, t) = trial(&lab, engine, &["--drop-from", DROP_SOURCE]);
        let counters = nft_counters(&dut);
        sh(
            "ip",
            &["netns", "exec", &dut, "nft", "delete", "table", "ip", "dt"],
        );
        let (sent, leaked) = policy(&t);
        assert_eq!(sent, 2000, "{engine}: {t}");
        assert_eq!(leaked, 0, "{engine}: {t}");
        assert_eq!(counters, [sent, u(&t, "tx_frames")], "{engine}: {t}");
        assert_eq!(u(&t, "rx_frames"), u(&t, "tx_frames"), "{engine}: {t}");
        assert_eq!(u(&t, "lost_frames"), 0, "{engine}: {t}");
        assert!(
            run.stdout.contains("dropped by policy"),
            "{engine}: {}",
            run.dump()
        );
        assert!(!run.stdout.contains("came through"), "{}", run.dump());
    }
    // Refused, one line naming the problem: a source range (it would
    // overwrite the drop class's mark), a source of the other IP version.
    for (extra, needle) in [
        (
            &["--range", "src-ip=198.18.0.2..198.18.0.9"][..],
            "--range src-ip",
        ),
        (&["--ipv6", "--frame-size", "128"][..], "IP version"),
    ] {
        let mut args = vec![
            "trial",
            "--lab",
            "--lab-name",
            &lab,
            "--drop-from",
            DROP_SOURCE,
            "--rate",
            "1000fps",
            "--duration",
            "1s",
            "--no-db",
        ];
        args.extend_from_slice(extra);
        if !extra.contains(&"--frame-size") {
            args.extend_from_slice(&["--frame-size", "64"]);
        }
        let run = linerate(&args);
        assert_bad_input(&run);
        assert!(run.stderr.contains(needle), "{extra:?}: {}", run.dump());
    }
    // Both directions at once: refused (the drop class goes A -> B).
    let run = linerate(&[
        "trial",
        "--lab",
        "--lab-name",
        &lab,
        "--drop-from",
        DROP_SOURCE,
        "--bidirectional",
        "--frame-size",
        "64",
        "--rate",
        "1000fps",
    ]);
    assert_eq!(run.code, 2, "{}", run.dump());
    assert!(run.stderr.contains("cannot be used with"), "{}", run.dump());
}

#[test]
fn drop_test_scenario_separates_intended_drops_from_loss() {
    if !root_or_skip("drop_test_scenario_separates_intended_drops_from_loss") {
        return;
    }
    // The 100GE set-up in small: random destinations within a /24, the
    // drop rule beside a 5-policy firewall.
    let json = TempFile::new("scn-drop");
    let run = linerate(&[
        "rfc2544",
        "--scenario",
        "firewall:5+drop-test",
        "--sizes",
        "64",
        "--range",
        "dst-ip=198.19.0.2..198.19.0.254/random",
        "--trial-duration",
        "1s",
        "--straggler-wait",
        "300ms",
        "--max-rate",
        "5000fps",
        "--resolution",
        "50%",
        "--no-db",
        "--json",
        json.arg(),
    ]);
    let left = netns_with_prefix(&format!("lr-s{}-", run.pid));
    assert!(left.is_empty(), "left behind: {left:?}\n{}", run.dump());
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    let trials: Vec<&Value> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["trials"].as_array().unwrap())
        .collect();
    assert!(!trials.is_empty(), "{report}");
    let mut sent_to_drop = 0;
    for t in &trials {
        let (sent, leaked) = policy(t);
        assert_eq!(leaked, 0, "{t}");
        // Frames alternate: the halves differ by at most one.
        assert!(sent.abs_diff(u(t, "tx_frames")) <= 1, "{t}");
        sent_to_drop += sent;
    }
    // Nothing but the policy dropped a frame at these rates, so the DUT's
    // drop rule counted exactly the frames the tester sent to be dropped.
    let checks = report["scenario"]["traffic_checks"].to_string();
    assert!(
        checks.contains(&format!(
            "{sent_to_drop} packets from {DROP_SOURCE} dropped by the drop-test rule"
        )),
        "tester sent {sent_to_drop} to be dropped; {checks}"
    );
    assert!(report["results"][0]["throughput_fps"].as_f64().unwrap() > 0.0);
    assert!(
        run.stdout.contains(&format!(
            "Drop test: every other frame was of the drop class ({} sent",
            thousands(sent_to_drop)
        )),
        "{}",
        run.dump()
    );
}
