//! The check before each trial that the DUT has stopped forwarding the
//! previous trial's frames. The DUT is a router built here with plain `ip`
//! and `tc` (not the lab code) whose egress towards port B is shaped by a
//! token bucket with a deep queue: an overload trial leaves it several
//! seconds of backlog to drain, as a VPN gateway in user space does. Needs
//! root; run with --test-threads=1.

mod common;

use common::*;
use serde_json::Value;

/// The shaper on the router's egress towards port B: 5 Mbit/s, so
/// 1518-byte frames (1,514 bytes without the FCS, as tc counts them) leave
/// at 5e6 / 8 / 1514 = 412.8 frames/s; the queue holds 3,000,000 bytes,
/// 1,981 of those frames: 4.8 s of backlog.
const SHAPED_FPS: f64 = 5e6 / 8.0 / 1514.0;

/// The shaper's own counters: (packets sent, packets dropped, packets
/// queued) from `tc -s -j qdisc`.
fn shaper(r: &str) -> (u64, u64, u64) {
    let out = sh("tc", &["-n", r, "-s", "-j", "qdisc", "show", "dev", "rb"]);
    let v: Value = serde_json::from_str(&out).expect("tc -j");
    let q = v
        .as_array()
        .and_then(|a| a.iter().find(|q| q["kind"] == "tbf"))
        .unwrap_or_else(|| panic!("no tbf on rb: {out}"));
    let n = |k: &str| q[k].as_u64().unwrap_or_else(|| panic!("{k} in {q}"));
    (n("packets"), n("drops"), n("qlen"))
}

/// A router (plain `ip`) whose egress towards port B is the shaper.
fn shaped_router(tag: &str) -> (String, String, NetnsGuard) {
    let (t, r, guard) = plain_router(tag);
    // IPv6 off on the shaped port: its router solicitations, MLD reports
    // and DAD come at times of the kernel's choosing and would pass the
    // shaper beside the test frames, whose count the test compares with
    // the shaper's own (ARP alone stays within the allowance).
    sysctl(&r, "net.ipv6.conf.rb.disable_ipv6=1");
    sh(
        "tc",
        &[
            "-n", &r, "qdisc", "add", "dev", "rb", "root", "tbf", "rate", "5mbit", "burst", "1600",
            "limit", "3000000",
        ],
    );
    (t, r, guard)
}

/// `linerate loss` in tester namespace `t` with two 1-s trials of
/// 1518-byte frames: 3,000 frames/s, seven times the shaped rate (the
/// queue fills), then 200 frames/s, half of it, which the DUT forwards in
/// full once it has drained. The run and both trials' records.
fn overload_then_light(t: &str, extra: &[&str]) -> (Run, Value, Value) {
    let json = TempFile::new("recovery");
    let mut args = vec![
        "loss",
        "--no-db",
        "--sizes",
        "1518",
        "--loads",
        "3000fps,200fps",
        "--trial-duration",
        "1s",
        "--straggler-wait",
        "1s",
        "--json",
        json.arg(),
    ];
    args.extend_from_slice(&HOSTS);
    args.extend_from_slice(extra);
    let run = linerate_in(t, &args);
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    let points = report["series"][0]["points"]
        .as_array()
        .unwrap_or_else(|| panic!("no points: {report}"));
    assert_eq!(points.len(), 2, "{report}");
    let trial = |i: usize| points[i]["trial"].clone();
    (run, trial(0), trial(1))
}

#[test]
fn a_trial_after_an_overload_waits_for_the_dut_to_drain_and_loses_nothing() {
    if !root_or_skip("a_trial_after_an_overload_waits_for_the_dut_to_drain_and_loses_nothing") {
        return;
    }
    let (t, r, _guard) = shaped_router("rc");
    let before = shaper(&r);
    let started = std::time::Instant::now();
    let (run, over, after) = overload_then_light(&t, &[]);
    let took = started.elapsed().as_secs_f64();
    let recovery = |t: &Value| t["recovery"].clone();

    // The first trial found the DUT quiet: checked, nothing waited.
    let r1 = recovery(&over);
    assert_eq!(r1["waited_s"].as_f64(), Some(0.0), "{over}");
    assert_eq!(r1["limit_reached"], false, "{over}");
    // It overloaded the shaper: its queue overflowed.
    assert!(u(&over, "lost_frames") > 0, "{over}");

    // The second waited for the backlog to drain, then lost nothing.
    let r2 = recovery(&after);
    let (waited, drained) = (f(&r2, "waited_s"), u(&r2, "frames"));
    assert_eq!(r2["limit_reached"], false, "{after}");
    assert!(waited > 0.0, "{after}");
    assert_eq!(u(&after, "tx_frames"), 200, "{after}");
    assert_eq!(u(&after, "lost_frames"), 0, "{after}");
    assert_eq!(u(&after, "rx_frames"), 200, "{after}");
    assert_eq!(u(&after, "stray_frames"), 0, "{after}");

    // The DUT's own counters: every frame that entered the shaper left it
    // or was dropped, none is left, and what it sent is the two trials'
    // received frames plus the backlog the check saw drain (give or take
    // the few ARP frames of the run and the quiet interval's allowance).
    let end = shaper(&r);
    let sent = end.0 - before.0;
    let dropped = end.1 - before.1;
    assert_eq!(end.2, 0, "the shaper still holds frames");
    let tx = u(&over, "tx_frames") + u(&after, "tx_frames");
    assert!(
        (sent + dropped).abs_diff(tx) <= 10,
        "shaper sent {sent} and dropped {dropped}, linerate sent {tx}"
    );
    // Trial 1's frames: received, dropped by the shaper, or drained late.
    // `drained` leaves out the last quiet interval's frames (at most 10,
    // the quiet rule's allowance) and any that arrived between the
    // receiver's stop and the check's first reading: 20 in all.
    let first = dropped + u(&over, "rx_frames") + drained;
    assert!(
        u(&over, "tx_frames").abs_diff(first) <= 20,
        "trial 1 sent {}; received {}, the shaper dropped {dropped}, {drained} drained later",
        u(&over, "tx_frames"),
        u(&over, "rx_frames")
    );
    let accounted = u(&over, "rx_frames") + drained + u(&after, "rx_frames");
    assert!(
        sent.abs_diff(accounted) <= 20,
        "the shaper sent {sent}; received in trial 1 {}, drained before trial 2 {drained}, received in trial 2 {}",
        u(&over, "rx_frames"),
        u(&after, "rx_frames")
    );

    // The backlog drained at the shaped rate while the check waited, and
    // was longer than a trial and its straggler wait: without the check
    // the second trial's frames would have queued behind it past the
    // straggler wait and been lost.
    let drain_s = drained as f64 / SHAPED_FPS;
    assert!(
        drain_s > 2.0,
        "{drained} frames are {drain_s:.2} s of backlog"
    );
    assert!(
        (waited - drain_s).abs() < 0.25 * drain_s,
        "waited {waited:.2} s for {drained} frames ({drain_s:.2} s at the shaped rate)"
    );
    // The run took the trials, their straggler waits and the drain, not
    // much more: a quiet DUT cost next to nothing.
    assert!(
        took < 2.0 * 2.0 + waited + 3.0,
        "the run took {took:.1} s, waiting {waited:.1} s"
    );

    // Said in the progress line and under the table.
    assert!(
        run.stderr
            .contains("s first for the DUT to stop forwarding earlier frames"),
        "{}",
        run.dump()
    );
    assert!(
        run.stdout
            .contains("Before 1 trial(s) the DUT was still forwarding earlier frames"),
        "{}",
        run.dump()
    );
    assert!(
        run.stdout.contains(&format!(
            "1518 B at 200 frames/s: waited {waited:.1} s ({} frames arrived), then quiet",
            linerate_results::report::thousands(drained)
        )),
        "{}",
        run.dump()
    );
}

/// The same two trials with the check off: the light trial's frames queue
/// behind the backlog and most are lost, the backlog's frames arrive during
/// it as strays. What the check prevents, shown.
#[test]
fn without_the_check_the_light_trial_is_lost_behind_the_backlog() {
    if !root_or_skip("without_the_check_the_light_trial_is_lost_behind_the_backlog") {
        return;
    }
    let (t, _r, _guard) = shaped_router("rn");
    let (run, over, after) = overload_then_light(&t, &["--recovery-limit", "0"]);
    assert!(over["recovery"].is_null(), "{over}");
    assert!(after["recovery"].is_null(), "{after}");
    // ~1,570 frames (3.8 s) were queued when the light trial began: its
    // 200 frames leave the shaper after its straggler wait has ended.
    assert!(u(&after, "lost_frames") >= 150, "{after}");
    assert!(u(&after, "stray_frames") >= 400, "{after}");
    assert!(
        !run.stdout.contains("forwarding earlier frames"),
        "{}",
        run.dump()
    );
}

/// A limit shorter than the drain: the trial starts with the DUT still
/// sending, and is marked so.
#[test]
fn a_limit_that_runs_out_marks_the_trial() {
    if !root_or_skip("a_limit_that_runs_out_marks_the_trial") {
        return;
    }
    let (t, _r, _guard) = shaped_router("rl");
    let (run, _over, after) = overload_then_light(&t, &["--recovery-limit", "1s"]);
    let r2 = &after["recovery"];
    assert_eq!(r2["limit_reached"], true, "{after}");
    let waited = f(r2, "waited_s");
    assert!((1.0..1.2).contains(&waited), "{after}");
    // It drained at the shaped rate meanwhile (counted from the previous
    // trial's end, the limit from the check's start).
    assert!(
        u(r2, "frames") as f64 >= 0.8 * SHAPED_FPS * waited,
        "{after}"
    );
    assert!(
        run.stdout.contains("1518 B at 200 frames/s: waited 1.0 s")
            && run
                .stdout
                .contains("still sending when the limit ran out: the result may be poisoned"),
        "{}",
        run.dump()
    );
    assert!(
        run.stderr.contains(
            "(the DUT was still forwarding earlier frames after 1.0 s: result may be poisoned)"
        ),
        "{}",
        run.dump()
    );
}

/// A limit that is no duration is refused in one line before anything runs.
#[test]
fn a_bad_recovery_limit_is_refused() {
    for bad in ["soon", "-1s"] {
        let run = linerate(&[
            "loss",
            "--no-db",
            "--loads",
            "1000fps",
            "--recovery-limit",
            bad,
            "--port-a",
            "xx0",
            "--port-b",
            "xx1",
            "--ip-a",
            "198.18.0.2/24",
            "--gw-a",
            "198.18.0.1",
            "--ip-b",
            "198.19.0.2/24",
            "--gw-b",
            "198.19.0.1",
        ]);
        assert_bad_input(&run);
        assert!(run.stderr.contains("--recovery-limit"), "{}", run.dump());
    }
}
