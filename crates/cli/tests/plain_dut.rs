//! DUTs linerate's lab code did not build: two namespaces, veth pairs and a
//! Linux router made with plain `ip`, `nft` and `tc` commands and default
//! options (GRO off on the router's veths, so its interfaces cannot take
//! XDP frames), which is what a user's own lab, a VM router or a real device
//! looks like to the tester. linerate runs with no --engine flag, inside the
//! tester's namespace, on ports it did not make, and its counts are
//! compared with the DUT's own counters. Needs root and nft; run with
//! --test-threads=1.

mod common;

use common::*;

fn trial(t: &str, extra: &[&str], json: &TempFile) -> Run {
    let mut args = vec![
        "trial",
        "--no-db",
        "--loss",
        "99%",
        "--straggler-wait",
        "1s",
    ];
    args.extend_from_slice(&HOSTS);
    args.extend_from_slice(extra);
    args.extend_from_slice(&["--json", json.arg()]);
    linerate_in(t, &args)
}

fn term(t: &serde_json::Value, k: &str) -> u64 {
    t["loss_where"][k].as_u64().unwrap_or(0)
}

/// The router's packets dropped on its own counters: (rx dropped of ra,
/// tx packets of rb) from `ip -s -j link`.
fn router_link(r: &str, dev: &str) -> serde_json::Value {
    let out = sh("ip", &["-n", r, "-s", "-j", "link", "show", dev]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("ip -j");
    v[0]["stats64"].clone()
}

#[test]
fn default_engine_delivers_and_a_policy_s_drops_are_the_dut_s() {
    if !root_or_skip("default_engine_delivers_and_a_policy_s_drops_are_the_dut_s") || !nft_present()
    {
        return;
    }
    let (t, r, _guard) = plain_router("pa");
    // Every 37th test frame dropped by the router's forward policy.
    nft_load(
        &r,
        "table inet t {
chain forward { type filter hook forward priority 0; udp dport 19538 counter numgen inc mod 37 == 0 counter drop; }
}
",
    );
    let rb_before = router_link(&r, "rb")["tx"]["packets"].as_u64().unwrap();
    let json = TempFile::new("plain37");
    let run = trial(
        &t,
        &[
            "--frame-size",
            "64",
            "--rate",
            "20000fps",
            "--duration",
            "2s",
        ],
        &json,
    );
    assert_eq!(run.code, 0, "{}", run.dump());
    let v = json.json();
    assert_trial_consistent(&v);
    // auto did not take an engine whose frames the kernel refuses (the
    // router's veths have no NAPI): every frame left.
    assert_ne!(v["engine"], "xdp", "{v}");
    assert_eq!(u(&v, "tx_frames"), 40_000, "{v}");
    let [seen, dropped] = nft_counters(&r)[..] else {
        panic!("two counters expected");
    };
    assert_eq!(seen, 40_000, "the router saw other UDP frames too: {v}");
    assert_eq!(dropped, 40_000 / 37 + 1, "nft dropped {dropped}");
    // Exact loss, exactly attributed: all of it inside the DUT.
    assert_eq!(u(&v, "lost_frames"), dropped, "{v}");
    assert_eq!(term(&v, "dut_internal"), dropped, "{v}");
    assert_eq!(v["loss_where"]["rest"].as_i64(), Some(0), "{v}");
    assert_eq!(v["loss_where"]["dut_read"], true, "{v}");
    assert_eq!(
        term(&v, "tx_refused") + term(&v, "not_sent") + term(&v, "tester_rx"),
        0,
        "{v}"
    );
    // The router's own interface counters agree with what arrived.
    let rb_sent = router_link(&r, "rb")["tx"]["packets"].as_u64().unwrap() - rb_before;
    assert!(
        rb_sent >= u(&v, "rx_frames") && rb_sent <= u(&v, "rx_frames") + 10,
        "router sent {rb_sent} on rb, linerate received {}",
        u(&v, "rx_frames")
    );
    // The summary says where the frames went.
    assert!(
        run.stdout.contains("dropped inside the DUT"),
        "{}",
        run.dump()
    );
}

#[test]
fn xdp_on_a_port_that_cannot_take_xdp_frames_is_refused_before_any_trial() {
    if !root_or_skip("xdp_on_a_port_that_cannot_take_xdp_frames_is_refused_before_any_trial") {
        return;
    }
    let (t, _r, _guard) = plain_router("px");
    let json = TempFile::new("plainxdp");
    let run = trial(
        &t,
        &[
            "--engine",
            "xdp",
            "--frame-size",
            "64",
            "--rate",
            "20000fps",
            "--duration",
            "1s",
        ],
        &json,
    );
    assert_bad_input(&run);
    assert!(run.stderr.contains("cannot send on ta"), "{}", run.dump());
    assert!(run.stderr.contains("gro on"), "{}", run.dump());
    assert!(!json.0.exists(), "a record was written: {}", run.dump());
}

#[test]
fn with_gro_on_the_router_auto_takes_xdp_and_counts_only_what_the_kernel_took() {
    if !root_or_skip("with_gro_on_the_router_auto_takes_xdp_and_counts_only_what_the_kernel_took") {
        return;
    }
    let (t, r, _guard) = plain_router("pg");
    sh(
        "ip",
        &["netns", "exec", &r, "ethtool", "-K", "ra", "gro", "on"],
    );
    let json = TempFile::new("plaingro");
    let run = trial(
        &t,
        &[
            "--frame-size",
            "128",
            "--rate",
            "20000fps",
            "--duration",
            "2s",
        ],
        &json,
    );
    assert_eq!(run.code, 0, "{}", run.dump());
    let v = json.json();
    assert_trial_consistent(&v);
    assert_eq!(v["engine"], "xdp", "{v}");
    let ra_rx = router_link(&r, "ra")["rx"]["packets"].as_u64().unwrap();
    // The router received every frame linerate counts as sent, plus ARP
    // and the 32 delivery-probe frames (addressed to the tester itself).
    assert!(
        ra_rx >= u(&v, "tx_frames") + 32 && ra_rx <= u(&v, "tx_frames") + 32 + 10,
        "router received {ra_rx}, linerate sent {}: {v}",
        u(&v, "tx_frames")
    );
    assert_eq!(term(&v, "tx_refused"), 0, "{v}");
}

#[test]
fn a_policer_and_a_shaper_give_their_rates_and_their_drops_are_the_dut_s() {
    if !root_or_skip("a_policer_and_a_shaper_give_their_rates_and_their_drops_are_the_dut_s")
        || !nft_present()
    {
        return;
    }
    let (t, r, _guard) = plain_router("pp");
    // 10,000 packets/s policer on the router's forward path.
    nft_load(
        &r,
        "table inet t {
chain forward { type filter hook forward priority 0; udp dport 19538 limit rate over 10000/second burst 100 packets counter drop; }
}
",
    );
    let json = TempFile::new("policer");
    let run = trial(
        &t,
        &[
            "--frame-size",
            "64",
            "--rate",
            "20000fps",
            "--duration",
            "3s",
        ],
        &json,
    );
    assert_eq!(run.code, 0, "{}", run.dump());
    let v = json.json();
    assert_trial_consistent(&v);
    let fwd = u(&v, "rx_frames") as f64 / 3.0;
    assert!(
        (fwd / 10_000.0 - 1.0).abs() < 0.02,
        "policer: {fwd} fps forwarded: {v}"
    );
    assert_eq!(nft_counters(&r), vec![u(&v, "lost_frames")], "{v}");
    assert_eq!(term(&v, "dut_internal"), u(&v, "lost_frames"), "{v}");
    assert_eq!(v["loss_where"]["rest"].as_i64(), Some(0), "{v}");

    // A 20 Mbit/s token-bucket shaper on the router's egress: 1514 bytes
    // per frame on the veth (no FCS), so 20e6 / (1514 * 8) = 1,651 fps.
    sh_stdin(
        "ip",
        &["netns", "exec", &r, "nft", "-f", "-"],
        "flush ruleset",
    );
    sh(
        "ip",
        &[
            "netns", "exec", &r, "tc", "qdisc", "add", "dev", "rb", "root", "tbf", "rate",
            "20mbit", "burst", "15kb", "latency", "20ms",
        ],
    );
    let json = TempFile::new("shaper");
    let run = trial(
        &t,
        &[
            "--frame-size",
            "1518",
            "--rate",
            "4000fps",
            "--duration",
            "3s",
        ],
        &json,
    );
    assert_eq!(run.code, 0, "{}", run.dump());
    let v = json.json();
    assert_trial_consistent(&v);
    let fwd = u(&v, "rx_frames") as f64 / 3.0;
    let expected = 20e6 / (1514.0 * 8.0);
    assert!(
        (fwd / expected - 1.0).abs() < 0.02,
        "shaper: {fwd} fps forwarded, {expected} expected: {v}"
    );
    assert_eq!(term(&v, "dut_internal"), u(&v, "lost_frames"), "{v}");
    assert_eq!(v["loss_where"]["rest"].as_i64(), Some(0), "{v}");
}

/// The tester's own port B deleted mid-trial: the trial is void and says
/// so, naming the port, instead of reporting the frames as lost "in the
/// DUT or on the link".
#[test]
fn a_tester_port_deleted_mid_trial_voids_the_trial() {
    if !root_or_skip("a_tester_port_deleted_mid_trial_voids_the_trial") {
        return;
    }
    let (t, _r, _guard) = plain_router("pg");
    let ns = t.clone();
    let deleter = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(2500));
        sh("ip", &["-n", &ns, "link", "del", "tb"]);
    });
    let json = TempFile::new("portgone");
    let run = trial(
        &t,
        &[
            "--frame-size",
            "64",
            "--rate",
            "10000fps",
            "--duration",
            "4s",
        ],
        &json,
    );
    deleter.join().unwrap();
    assert_eq!(run.code, 2, "{}", run.dump());
    assert!(!run.stderr.contains("panicked"), "{}", run.dump());
    assert!(
        run.stderr.contains("tb (port B)") && run.stderr.contains("deleted during the trial"),
        "{}",
        run.dump()
    );
}

/// `rfc2544 --mlrsearch`, default options, through the plain router with
/// a 10,000 packets/s policer: the zero-loss throughput, NDR and PDR are
/// the policer's rate, and every frame any trial of either search lost is
/// one the router's own nft counter dropped, attributed inside the DUT.
#[test]
fn rfc2544_with_mlrsearch_finds_a_policer_and_its_drops_are_the_dut_s() {
    if !root_or_skip("rfc2544_with_mlrsearch_finds_a_policer_and_its_drops_are_the_dut_s")
        || !nft_present()
    {
        return;
    }
    let (t, r, _guard) = plain_router("pm");
    nft_load(
        &r,
        "table inet t {
chain forward { type filter hook forward priority 0; udp dport 19538 limit rate over 10000/second burst 100 packets counter drop; }
}
",
    );
    let json = TempFile::new("plainmlr");
    let mut args = vec![
        "rfc2544",
        "--no-db",
        "--mlrsearch",
        "--sizes",
        "64",
        "--max-rate",
        "40kpps",
        "--trial-duration",
        "1s",
    ];
    args.extend_from_slice(&HOSTS);
    args.extend_from_slice(&["--json", json.arg()]);
    let run = linerate_in(&t, &args);
    assert_eq!(run.code, 0, "{}", run.dump());
    let v = json.json();
    let result = &v["results"][0];
    let mlr = &result["mlrsearch"];
    let policed = 9_500.0..=10_400.0;
    let zero_loss = result["throughput_fps"].as_f64().unwrap();
    assert!(policed.contains(&zero_loss), "zero-loss {zero_loss}: {v}");
    for g in mlr["goals"].as_array().unwrap() {
        let ct = g["conditional_throughput_fps"].as_f64().unwrap();
        assert!(policed.contains(&ct), "{}: {ct}: {v}", g["goal"]["name"]);
    }
    // Both searches' trials: every lost frame is one nft dropped, and
    // each trial says so.
    let trials: Vec<&serde_json::Value> = result["trials"]
        .as_array()
        .unwrap()
        .iter()
        .chain(mlr["trials"].as_array().unwrap())
        .collect();
    let mut lost = 0;
    for tr in &trials {
        assert_trial_consistent(tr);
        assert_eq!(term(tr, "dut_internal"), u(tr, "lost_frames"), "{tr}");
        assert_eq!(tr["loss_where"]["rest"].as_i64(), Some(0), "{tr}");
        lost += u(tr, "lost_frames");
    }
    assert!(lost > 0, "no trial above the policer: {v}");
    assert_eq!(nft_counters(&r), vec![lost], "{v}");
}
