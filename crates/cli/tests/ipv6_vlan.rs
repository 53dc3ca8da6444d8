//! IPv6 (RFC 5180) and 802.1Q test frames through the lab router, on
//! every engine (af_packet, af_xdp, xdp). The router's own nftables
//! counters prove the frames were routed as IPv6 / as IPv4, and tagged
//! frames only get through because the router's ports take VLAN 100 (VLAN
//! subinterfaces, or tagged-port programs where the kernel has no 802.1Q).
//! Needs root and nft; run with --test-threads=1.

mod common;

use common::*;

/// Counts forwarded test datagrams (UDP to 19538) by IP version, then
/// anything else forwarded.
const BY_VERSION: &str = "table inet t {
    chain c {
        type filter hook forward priority 0; policy accept;
        meta nfproto ipv6 udp dport 19538 counter accept
        meta nfproto ipv4 udp dport 19538 counter accept
        counter accept
    }
}
";

/// Layout options, frame size, IP version, VLAN id, and which router
/// counter must see the frames.
type Case = (
    &'static [&'static str],
    &'static str,
    &'static str,
    Option<u64>,
    usize,
);

fn trial(lab: &str, engine: &str, layout: &[&str], frame: &str, json: &TempFile) -> Run {
    let mut args = vec![
        "trial",
        "--lab",
        "--lab-name",
        lab,
        "--engine",
        engine,
        "--frame-size",
        frame,
        "--rate",
        "2000fps",
        "--duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--json",
        json.arg(),
    ];
    args.extend_from_slice(layout);
    linerate(&args)
}

/// The router's addresses after a run: IPv6 and VLAN changes are undone.
fn assert_router_restored(dut: &str) {
    let addrs = sh("ip", &["-n", dut, "-br", "addr"]);
    assert!(
        !addrs.contains("2001:2:"),
        "IPv6 left on the router:\n{addrs}"
    );
    assert!(
        addrs.contains("198.18.0.1/24") && addrs.contains("198.19.0.1/24"),
        "IPv4 not back:\n{addrs}"
    );
    assert!(!addrs.contains(".100"), "VLAN subinterface left:\n{addrs}");
}

#[test]
fn ipv6_and_vlan_trials_are_routed_and_counted_exactly() {
    if !root_or_skip("ipv6_and_vlan_trials_are_routed_and_counted_exactly") || !nft_present() {
        return;
    }
    let (lab, _guard) = lab_up("v6");
    let dut = format!("lr-{lab}-dut");
    let cases: [Case; 4] = [
        (&["--ipv6"], "78", "IPv6", None, 0),
        (&["--vlan", "100"], "64", "IPv4", Some(100), 1),
        (&["--ipv6", "--vlan", "100:5"], "1518", "IPv6", Some(100), 0),
        (&["--ipv6"], "1518", "IPv6", None, 0),
    ];
    for engine in ["af_packet", "af_xdp", "xdp"] {
        for (layout, frame, version, vlan, counter) in cases {
            let what = format!("{engine} {layout:?} {frame}");
            nft_load(&dut, &format!("flush ruleset\n{BY_VERSION}"));
            let json = TempFile::new(&format!("v6{engine}{frame}"));
            let run = trial(&lab, engine, layout, frame, &json);
            assert_eq!(run.code, 0, "{what}: {}", run.dump());
            let t = json.json();
            assert_exact(&t, 2_000);
            assert_eq!(t["engine"], engine, "{what}: {t}");
            assert_eq!(t["ip_version"], version, "{what}: {t}");
            assert_eq!(t["vlan"]["id"].as_u64(), vlan, "{what}: {t}");
            // The router forwarded exactly the frames linerate counted, as
            // the IP version asked for, and nothing else of ours.
            let mut expected = vec![0, 0, 0];
            expected[counter] = 2_000;
            assert_eq!(nft_counters(&dut), expected, "{what}: router counters");
            // L3 length: the IPv6 packet (40-byte header), minus the tag.
            let tag = if vlan.is_some() { 4 } else { 0 };
            let l3 = frame.parse::<u64>().unwrap() - 18 - tag;
            assert_eq!(u(&t, "l3_length"), l3, "{what}: {t}");
            let layout_text = if vlan.is_some() {
                format!("{version}, VLAN 100")
            } else {
                version.to_string()
            };
            assert!(run.stdout.contains(&layout_text), "{what}: {}", run.dump());
            assert_router_restored(&dut);
        }
    }
    nft_load(&dut, "flush ruleset\n");
}

#[test]
fn a_tagged_imix_with_flows_is_counted_exactly_on_the_xdp_engine() {
    // The in-kernel generator cuts each size from the largest frame and
    // rewrites the headers at the tagged layout's offsets.
    if !root_or_skip("a_tagged_imix_with_flows_is_counted_exactly_on_the_xdp_engine")
        || !nft_present()
    {
        return;
    }
    let (lab, _guard) = lab_up("vx");
    let dut = format!("lr-{lab}-dut");
    nft_load(&dut, &format!("flush ruleset\n{BY_VERSION}"));
    let json = TempFile::new("v6xdpmix");
    let run = linerate(&[
        "trial",
        "--lab",
        "--lab-name",
        &lab,
        "--engine",
        "xdp",
        "--ipv6",
        "--vlan",
        "100",
        "--imix",
        "genome:bbbbbbbddddg",
        "--range",
        "src-port=53..1000/random",
        "--rate",
        "6000fps",
        "--duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--json",
        json.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_exact(&json.json(), 6_000);
    assert_eq!(nft_counters(&dut), vec![6_000, 0, 0], "router counters");
    nft_load(&dut, "flush ruleset\n");
}

#[test]
fn a_frame_too_small_for_ipv6_is_one_line_naming_the_smallest() {
    // Refused before any port opens: no root needed.
    for (args, min) in [
        (&["--ipv6", "--frame-size", "64"][..], "78"),
        (&["--ipv6", "--vlan", "7", "--frame-size", "78"][..], "82"),
        (&["--ipv6", "--l3-length", "40"][..], "60"),
    ] {
        let mut full = vec!["trial", "--lab", "--rate", "1000fps", "--duration", "1s"];
        full.extend_from_slice(args);
        let run = linerate(&full);
        assert_bad_input(&run);
        assert!(run.stderr.contains(min), "{args:?}: {}", run.dump());
    }
    let run = linerate(&[
        "trial",
        "--lab",
        "--rate",
        "1000fps",
        "--duration",
        "1s",
        "--ipv6",
        "--frame-size",
        "64",
    ]);
    assert!(
        run.stderr.contains("use --frame-size 78 or larger"),
        "{}",
        run.dump()
    );
}
