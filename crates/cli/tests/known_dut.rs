//! DUTs whose behaviour is known exactly: the lab's Linux router plus an
//! nftables ruleset in its namespace. linerate must measure what the rules
//! do. Rates stay far below the tester's ceiling (several 100k frames/s
//! here), so the DUT, not the tester, limits. Needs root and nft; run with
//! --test-threads=1.

mod common;

use common::*;

fn trial(lab: &str, loss: &str, json: &TempFile) -> Run {
    linerate(&[
        "trial",
        "--lab",
        "--lab-name",
        lab,
        "--frame-size",
        "128",
        "--rate",
        "20000fps",
        "--duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--loss",
        loss,
        "--json",
        json.arg(),
    ])
}

#[test]
fn exact_loss_pattern_is_counted_exactly() {
    if !root_or_skip("exact_loss_pattern_is_counted_exactly") || !nft_present() {
        return;
    }
    let (lab, _guard) = lab_up("k");
    let dut = format!("lr-{lab}-dut");
    nft_load(&dut, EVERY_100TH);
    assert_eq!(nft_counters(&dut), vec![0, 0]);

    // 1 % loss, 5 % allowed: passes.
    let json = TempFile::new("every100");
    let run = trial(&lab, "5%", &json);
    assert_eq!(run.code, 0, "{}", run.dump());
    let t = json.json();
    assert_trial_consistent(&t);
    let [forwarded, dropped] = nft_counters(&dut)[..] else {
        panic!("two counters expected");
    };
    assert_eq!(u(&t, "intended_frames"), 20_000, "{t}");
    assert_eq!(u(&t, "tx_frames"), 20_000, "{t}");
    // Only the test frames crossed the DUT (ARP is not in the ip hook).
    assert_eq!(forwarded, 20_000, "DUT forwarded other packets too: {t}");
    assert_eq!(dropped, 200, "nft dropped {dropped}");
    assert_eq!(u(&t, "lost_frames"), dropped, "{t}");
    assert_eq!(u(&t, "lost_frames"), u(&t, "intended_frames") / 100, "{t}");
    assert_eq!(u(&t, "rx_frames"), 20_000 - 200, "{t}");
    assert!((f(&t, "loss_ratio") - 0.01).abs() < 1e-12, "{t}");
    // Dropping is not reordering: the rest arrive in order, once.
    assert_eq!((u(&t, "reordered"), u(&t, "duplicated")), (0, 0), "{t}");
    assert_eq!(u(&t, "tester_rx_drops"), 0, "{t}");

    // Same 1 % loss, 0.5 % allowed: exit 1, and the record still written.
    let json2 = TempFile::new("every100b");
    let run = trial(&lab, "0.5%", &json2);
    assert_eq!(run.code, 1, "{}", run.dump());
    assert!(run.stderr.contains("exceeds"), "{}", run.dump());
    assert!(!run.stderr.contains("panicked"), "{}", run.dump());
    let t2 = json2.json();
    let [forwarded2, dropped2] = nft_counters(&dut)[..] else {
        panic!("two counters expected");
    };
    assert_eq!(forwarded2 - forwarded, 20_000, "{t2}");
    assert_eq!(u(&t2, "lost_frames"), dropped2 - dropped, "{t2}");
    assert_eq!(u(&t2, "lost_frames"), 200, "{t2}");
}

/// A policer: packets beyond 100,000/s (after a 1,000-packet burst) dropped.
const POLICER: &str = "table ip t {
    chain c {
        type filter hook forward priority 0; policy accept;
        limit rate over 100000/second burst 1000 packets counter drop
    }
}
";

#[test]
fn policer_rate_is_found() {
    if !root_or_skip("policer_rate_is_found") || !nft_present() {
        return;
    }
    let (lab, _guard) = lab_up("p");
    let dut = format!("lr-{lab}-dut");
    nft_load(&dut, POLICER);
    let json = TempFile::new("policer");
    // af_packet: a veth applies backpressure to a packet socket, so a
    // generator delayed by the machine (a busy 2-core VM stalls it for
    // milliseconds) catches up without a burst. The xdp engine's catch-up
    // bursts are real bursts, which drain the policer's 1,000-packet bucket
    // early; its exact counting is checked in conformance.rs.
    let run = linerate(&[
        "rfc2544",
        "--engine",
        "af_packet",
        "--lab",
        "--lab-name",
        &lab,
        "--sizes",
        "64",
        "--trial-duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--resolution",
        "2%",
        "--max-rate",
        "300000fps",
        "--json",
        json.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    let rep = json.json();
    let r = &rep["results"][0];
    let tput = f(r, "throughput_fps");
    // The token bucket admits at most 100,000 x 1 s + 1,000 (burst) packets
    // per 1 s trial, so no rate above ~101,000/s can pass: 1.02 x 100,000
    // leaves room only for timing jitter of the trial's length. The search
    // stops within 2 % (resolution) below the lowest failing rate, and a
    // rate just under 100,000/s can fail when the sender's bursts drain the
    // bucket early: 0.90 covers both.
    assert!(
        (90_000.0..=102_000.0).contains(&tput),
        "throughput {tput} fps, the policer passes 100,000: {r}"
    );
    assert_eq!(r["tester_limited"], false, "{r}");
    let trials = r["trials"].as_array().expect("trials");
    for t in trials {
        assert_trial_consistent(t);
        assert_eq!(t["generator_short"], false, "tester could not offer: {t}");
    }
    // The first trial at 300,000/s: what got through is the policer's
    // budget for the time the frames really took to send (longer than 1 s
    // when the machine paused the generator; offered_fps is measured over
    // that time) plus the 1,000-packet burst, give or take 1 % of timing.
    let first = &trials[0];
    assert_eq!(f(first, "intended_fps"), 300_000.0, "{first}");
    let sending_s = u(first, "tx_frames") as f64 / f(first, "offered_fps");
    let budget = 100_000.0 * sending_s + 1_000.0;
    let rx = u(first, "rx_frames") as f64;
    assert!(
        (0.95 * budget..=1.01 * budget).contains(&rx),
        "policer let {rx} of 300,000 through in {sending_s:.3} s (budget {budget:.0}): {first}"
    );
    // Every frame lost was dropped by the policer, none elsewhere.
    let total_lost: u64 = trials.iter().map(|t| u(t, "lost_frames")).sum();
    assert_eq!(nft_counters(&dut), vec![total_lost], "{r}");
}

/// `--pcap` writes the first frames of a trial and the frames around each
/// loss: with every 100th packet dropped by the DUT, the file holds pairs
/// of neighbouring frames whose sequence numbers skip the dropped one.
#[test]
fn pcap_holds_the_frames_around_losses() {
    if !root_or_skip("pcap_holds_the_frames_around_losses") || !nft_present() {
        return;
    }
    let (lab, _guard) = lab_up("pc");
    let dut = format!("lr-{lab}-dut");
    nft_load(&dut, EVERY_100TH);
    let pcap = TempFile::new("around");
    let run = linerate(&[
        "trial",
        "--lab",
        "--lab-name",
        &lab,
        "--engine",
        "af_packet",
        "--frame-size",
        "128",
        "--rate",
        "20000fps",
        "--duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--loss",
        "5%",
        "--no-db",
        "--pcap",
        pcap.arg(),
        "--pcap-frames",
        "10",
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    let bytes = std::fs::read(&pcap.0).expect("pcap written");
    // Records: 16-byte header, then the frame (128 - 4 FCS bytes).
    let mut seqs = Vec::new();
    let mut at = 24;
    while at + 16 <= bytes.len() {
        let len = u32::from_ne_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
        let frame = &bytes[at + 16..at + 16 + len];
        if frame.len() >= 50 && frame[42..44] == [0x4C, 0x52] {
            seqs.push(u32::from_be_bytes(frame[46..50].try_into().unwrap()));
        }
        at += 16 + len;
    }
    assert_eq!(at, bytes.len(), "whole records");
    // The first 10 records (frame 0 was the DUT's first drop), then 10
    // gaps (the cap) with 4 frames on each side.
    assert!(seqs.len() >= 10 * 8, "{} frames: {seqs:?}", seqs.len());
    let skips = seqs.windows(2).filter(|w| w[1] == w[0] + 2).count();
    assert_eq!(skips, 10, "gaps of one frame in {seqs:?}");
    // No frame twice.
    let mut sorted = seqs.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), seqs.len(), "{seqs:?}");
}
