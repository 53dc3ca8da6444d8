//! linerate against a wire, no DUT: one namespace holds both ends of a veth
//! pair, and each tester port's gateway is the other port's emulated host.
//! A wire loses, reorders and duplicates nothing, so every count is exact.
//! Needs root; run with --test-threads=1 (traffic).

mod common;

use common::*;

/// One fixed-rate trial back to back; returns the JSON record.
fn trial(ns: &str, size_args: &[&str], fps: u64) -> serde_json::Value {
    let (run, t) = b2b_trial(ns, size_args, fps);
    assert!(
        run.stdout.contains("received"),
        "no trial summary on stdout:\n{}",
        run.dump()
    );
    // --engine auto (the default) says which engine it took; the record agrees.
    let engine = t["engine"].as_str().expect("engine recorded").to_string();
    assert!(
        run.stdout.contains(&format!("engine {engine}")),
        "the summary does not name engine {engine}:\n{}",
        run.dump()
    );
    t
}

/// Asserts a lossless trial of `fps` for 1 s: every count exact.
fn assert_clean(t: &serde_json::Value, fps: u64) {
    assert_exact(t, fps);
    assert!(
        ["xdp", "af_xdp", "af_packet"].contains(&t["engine"].as_str().unwrap_or("")),
        "{t}"
    );
    assert!(
        t["latency_ns"].is_object(),
        "no latency although frames arrived: {t}"
    );
}

#[test]
fn trial_64_bytes_is_exact() {
    if !root_or_skip("trial_64_bytes_is_exact") {
        return;
    }
    let (ns, _guard) = back_to_back("b", 9000);
    let t = trial(&ns, &["--frame-size", "64"], 50_000);
    assert_clean(&t, 50_000);
    assert_eq!((u(&t, "frame_size"), u(&t, "l3_length")), (64, 46), "{t}");
}

#[test]
fn trial_1518_bytes_is_exact() {
    if !root_or_skip("trial_1518_bytes_is_exact") {
        return;
    }
    let (ns, _guard) = back_to_back("b", 9000);
    let t = trial(&ns, &["--frame-size", "1518"], 50_000);
    assert_clean(&t, 50_000);
    assert_eq!(
        (u(&t, "frame_size"), u(&t, "l3_length")),
        (1518, 1500),
        "{t}"
    );
}

/// `--frames N` sends exactly N frames at the rate (pktgen's count): the
/// trial is N / rate long, and every count is exact over N.
#[test]
fn a_trial_of_a_frame_count_sends_exactly_that_many() {
    if !root_or_skip("a_trial_of_a_frame_count_sends_exactly_that_many") {
        return;
    }
    let (ns, _guard) = back_to_back("b", 9000);
    let json = TempFile::new("b2b-frames");
    let mut args = vec!["trial"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&[
        "--frame-size",
        "64",
        "--rate",
        "20000fps",
        "--frames",
        "12345",
        "--straggler-wait",
        "500ms",
        "--json",
        json.arg(),
    ]);
    let run = linerate_in(&ns, &args);
    let t = json.json();
    assert!(run.code == 0 || run.code == 1, "{}", run.dump());
    assert_exact(&t, 12_345);
    // 12,345 frames at 20,000 frames/s: 0.61725 s asked for.
    assert!((f(&t, "duration_s") - 0.617_25).abs() < 1e-6, "{t}");
}

#[test]
fn trial_l3_length_40_is_padded_to_64() {
    if !root_or_skip("trial_l3_length_40_is_padded_to_64") {
        return;
    }
    let (ns, _guard) = back_to_back("b", 9000);
    let t = trial(&ns, &["--l3-length", "40"], 50_000);
    assert_clean(&t, 50_000);
    // 40 + 14 header + 4 FCS = 58 < 64: padded to the Ethernet minimum.
    assert_eq!((u(&t, "frame_size"), u(&t, "l3_length")), (64, 40), "{t}");
}

#[test]
fn rfc2544_on_a_wire_passes_at_max_rate_first() {
    if !root_or_skip("rfc2544_on_a_wire_passes_at_max_rate_first") {
        return;
    }
    let (ns, _guard) = back_to_back("b", 9000);
    let json = TempFile::new("b2b-rfc");
    let mut args = vec!["rfc2544"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&[
        "--sizes",
        "64",
        "--trial-duration",
        "500ms",
        "--straggler-wait",
        "500ms",
        "--resolution",
        "5%",
        "--max-rate",
        "100000fps",
        "--json",
        json.arg(),
    ]);
    let run = linerate_in(&ns, &args);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(run.stdout.contains("Frames/s"), "{}", run.dump());
    let rep = json.json();
    assert_eq!(rep["setup"], "external", "{rep}");
    assert!(rep.get("interrupted").is_none(), "{rep}");
    let results = rep["results"].as_array().expect("results");
    assert_eq!(results.len(), 1, "{rep}");
    let r = &results[0];
    assert_eq!(u(r, "frame_size"), 64, "{r}");
    // A wire passes the highest rate tried: the search ends after one trial.
    let trials = r["trials"].as_array().expect("trials");
    assert_eq!(trials.len(), 1, "{r}");
    let t = &trials[0];
    assert_clean_half_second(t, 100_000);
    // Its figure is that rate when the generator held it. When a busy CPU
    // paused the generator for more than the resolution (5 % of the
    // trial), the device saw only the rate the frames really took
    // (`offered_fps`): that is the figure, marked tester-limited.
    let paused_s = t["generator_paused_ns"].as_u64().unwrap_or(0) as f64 / 1e9;
    if paused_s > 0.05 * f(t, "duration_s") {
        assert_eq!(r["tester_limited"], true, "{r}");
        assert_eq!(f(r, "throughput_fps"), f(t, "offered_fps"), "{r}");
        assert!(f(t, "offered_fps") < 100_000.0, "{r}");
        assert!(run.stdout.contains("(*) tester-limited"), "{}", run.dump());
    } else {
        assert_eq!(r["tester_limited"], false, "{r}");
        assert_eq!(f(r, "throughput_fps"), 100_000.0, "{r}");
        assert!(run.stdout.contains("100,000"), "{}", run.dump());
    }
}

/// A 0.5 s trial at `fps`: fps/2 frames, all received.
fn assert_clean_half_second(t: &serde_json::Value, fps: u64) {
    assert_trial_consistent(t);
    assert_eq!(f(t, "intended_fps"), fps as f64, "{t}");
    for key in ["intended_frames", "tx_frames", "rx_frames"] {
        assert_eq!(u(t, key), fps / 2, "{key}: {t}");
    }
    assert_eq!(
        (u(t, "lost_frames"), u(t, "reordered"), u(t, "duplicated")),
        (0, 0, 0),
        "{t}"
    );
}

/// At a rate no generator here reaches (100 % of a 10G line in 64-byte
/// frames), back to back: frames lost to port B's full ring are the
/// tester's, there is no DUT whose input could have dropped them, no loss
/// term is negative (one frame is never counted at two places), the
/// terms add up to the loss, and the trial sends for its duration (a
/// tenth more at most, for pauses), not on to twice it.
#[test]
fn overload_back_to_back_has_no_negative_loss_term_and_no_dut() {
    if !root_or_skip("overload_back_to_back_has_no_negative_loss_term_and_no_dut") {
        return;
    }
    let (ns, _guard) = back_to_back("o", 9000);
    for engine in ["xdp", "af_packet"] {
        let json = TempFile::new("b2b-overload");
        let mut args = vec!["trial"];
        args.extend_from_slice(&B2B_HOSTS);
        args.extend_from_slice(&[
            "--engine",
            engine,
            "--frame-size",
            "64",
            "--rate",
            "100%",
            "--duration",
            "1s",
            "--straggler-wait",
            "500ms",
            "--json",
            json.arg(),
        ]);
        let run = linerate_in(&ns, &args);
        assert!([0, 1].contains(&run.code), "{engine}: {}", run.dump());
        let t = json.json();
        assert_trial_consistent(&t);
        assert!(
            u(&t, "lost_frames") > 0,
            "{engine}: nothing lost at 100 %: {t}"
        );
        let w = &t["loss_where"];
        assert!(w.is_object(), "{engine}: no breakdown: {t}");
        for (term, v) in w.as_object().unwrap() {
            if let Some(n) = v.as_i64() {
                assert!(n >= 0, "{engine}: {term} is {n}: {t}");
            }
        }
        assert!(
            w.get("dut_input").is_none() && w.get("dut_internal").is_none(),
            "{engine}: a DUT's terms back to back: {t}"
        );
        assert!(
            !run.stdout.contains("DUT's input")
                && run.stdout.lines().all(|l| !l.trim_start().starts_with('-')),
            "{engine}: {}",
            run.stdout
        );
        // The duration asked for, the time taken beside it.
        let (asked, took) = (f(&t, "duration_s"), f(&t, "sending_s"));
        assert_eq!(asked, 1.0, "{t}");
        assert!(
            (1.0..1.5).contains(&took),
            "{engine}: sent for {took} s in a 1-s trial: {t}"
        );
        let offered = f(&t, "offered_fps");
        let tx = u(&t, "tx_frames") as f64;
        assert!(
            (offered * took - tx).abs() <= 1.0 + tx * 1e-9,
            "{engine}: offered {offered}/s over {took} s is not the {tx} frames sent: {t}"
        );
    }
}
