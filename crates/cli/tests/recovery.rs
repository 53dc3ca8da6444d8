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

#[test]
fn a_trial_after_an_overload_waits_for_the_dut_to_drain_and_loses_nothing() {
    if !root_or_skip("a_trial_after_an_overload_waits_for_the_dut_to_drain_and_loses_nothing") {
        return;
    }
    let (t, r, _guard) = plain_router("rc");
    sh(
        "tc",
        &[
            "-n", &r, "qdisc", "add", "dev", "rb", "root", "tbf", "rate", "5mbit", "burst", "1600",
            "limit", "3000000",
        ],
    );
    let before = shaper(&r);
    let json = TempFile::new("recovery");
    // 3,000 frames/s for 1 s, seven times the shaped rate: the queue
    // fills; then 200 frames/s, half of it, which the DUT forwards in full
    // once it has drained.
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
    let started = std::time::Instant::now();
    let run = linerate_in(&t, &args);
    let took = started.elapsed().as_secs_f64();
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    let points = report["series"][0]["points"]
        .as_array()
        .unwrap_or_else(|| panic!("no points: {report}"));
    assert_eq!(points.len(), 2, "{report}");
    let (over, after) = (&points[0]["trial"], &points[1]["trial"]);
    let recovery = |t: &Value| t["recovery"].clone();

    // The first trial found the DUT quiet: checked, nothing waited.
    let r1 = recovery(over);
    assert_eq!(r1["waited_s"].as_f64(), Some(0.0), "{over}");
    assert_eq!(r1["limit_reached"], false, "{over}");
    // It overloaded the shaper: its queue overflowed.
    assert!(u(over, "lost_frames") > 0, "{over}");

    // The second waited for the backlog to drain, then lost nothing.
    let r2 = recovery(after);
    let (waited, drained) = (f(&r2, "waited_s"), u(&r2, "frames"));
    assert_eq!(r2["limit_reached"], false, "{after}");
    assert!(waited > 0.0, "{after}");
    assert_eq!(u(after, "tx_frames"), 200, "{after}");
    assert_eq!(u(after, "lost_frames"), 0, "{after}");
    assert_eq!(u(after, "rx_frames"), 200, "{after}");
    assert_eq!(u(after, "stray_frames"), 0, "{after}");

    // The DUT's own counters: every frame that entered the shaper left it
    // or was dropped, none is left, and what it sent is the two trials'
    // received frames plus the backlog the check saw drain (give or take
    // the few ARP frames of the run and the quiet interval's allowance).
    let end = shaper(&r);
    let sent = end.0 - before.0;
    let dropped = end.1 - before.1;
    assert_eq!(end.2, 0, "the shaper still holds frames");
    let tx = u(over, "tx_frames") + u(after, "tx_frames");
    assert!(
        (sent + dropped).abs_diff(tx) <= 10,
        "shaper sent {sent} and dropped {dropped}, linerate sent {tx}"
    );
    // Trial 1's frames: received, dropped by the shaper, or drained late.
    let first = dropped + u(over, "rx_frames") + drained;
    assert!(
        u(over, "tx_frames").abs_diff(first) <= 10,
        "trial 1 sent {}; received {}, the shaper dropped {dropped}, {drained} drained later",
        u(over, "tx_frames"),
        u(over, "rx_frames")
    );
    let accounted = u(over, "rx_frames") + drained + u(after, "rx_frames");
    assert!(
        sent.abs_diff(accounted) <= 20,
        "the shaper sent {sent}; received in trial 1 {}, drained before trial 2 {drained}, received in trial 2 {}",
        u(over, "rx_frames"),
        u(after, "rx_frames")
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
