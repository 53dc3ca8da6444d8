//! Flows (`--range`) through the lab router on every engine: the DUT's
//! own nftables sets record which destinations and source ports crossed it,
//! so the test checks what the device saw. Needs root and nft.

mod common;

use common::*;
use serde_json::Value;

/// A per-destination counter and the set of source ports, filled by the
/// DUT as packets are forwarded.
const SEEN: &str = "flush ruleset
table ip t {
    set dsts { type ipv4_addr; size 65535; flags dynamic; counter; }
    set sports { type inet_service; size 65535; flags dynamic; }
    set dports { type inet_service; size 65535; flags dynamic; }
    chain c {
        type filter hook forward priority 0; policy accept;
        update @dsts { ip daddr }
        update @sports { udp sport }
        update @dports { udp dport }
    }
}
";

fn set_elements(ns: &str, set: &str) -> Vec<Value> {
    let out = sh(
        "ip",
        &[
            "netns", "exec", ns, "nft", "-j", "list", "set", "ip", "t", set,
        ],
    );
    let v: Value = serde_json::from_str(&out).expect("nft -j output");
    v["nftables"]
        .as_array()
        .expect("nftables")
        .iter()
        .find_map(|x| x.get("set"))
        .and_then(|s| s.get("elem"))
        .and_then(|e| e.as_array().cloned())
        .unwrap_or_default()
}

#[test]
fn every_destination_and_port_of_a_range_crosses_the_dut() {
    if !root_or_skip("every_destination_and_port_of_a_range_crosses_the_dut") {
        return;
    }
    let (lab, _guard) = lab_up("fl");
    let dut = format!("lr-{lab}-dut");
    for engine in ["af_packet", "af_xdp", "xdp"] {
        nft_load(&dut, SEEN);
        let json = TempFile::new(&format!("flows{engine}"));
        // 40 frames for each of the 253 destinations.
        let run = linerate(&[
            "trial",
            "--lab",
            "--lab-name",
            &lab,
            "--engine",
            engine,
            "--frame-size",
            "64",
            "--rate",
            "10120fps",
            "--duration",
            "1s",
            "--straggler-wait",
            "500ms",
            "--range",
            "dst-ip=198.19.0.2..198.19.0.254",
            "--range",
            "src-port=53..1000/random",
            // A varying destination port: the receivers must recognise
            // test frames by their signature, whatever the port.
            "--range",
            "dst-port=1024..2047/random",
            "--json",
            json.arg(),
        ]);
        assert_eq!(run.code, 0, "{engine}: {}", run.dump());
        let t = json.json();
        assert_trial_consistent(&t);
        assert_eq!(u(&t, "rx_frames"), 10_120, "{engine}: {t}");
        // After the learning frames every destination is resolved: nothing
        // waits in the DUT's neighbour queue, so nothing is reordered.
        assert_eq!(u(&t, "reordered"), 0, "{engine}: {t}");
        assert_eq!(
            t["flows"][0], "dst-ip=198.19.0.2..198.19.0.254/inc/step=1/start=198.19.0.2",
            "{t}"
        );
        let dsts = set_elements(&dut, "dsts");
        assert_eq!(dsts.len(), 253, "{engine}: destinations seen by the DUT");
        // Learning frames and the trial both cycle through the range: every
        // destination got the same count, give or take one.
        let counts: Vec<u64> = dsts
            .iter()
            .map(|e| e["elem"]["counter"]["packets"].as_u64().expect("counter"))
            .collect();
        let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
        assert!(
            hi - lo <= 1 && *lo >= 40,
            "{engine}: per-destination {lo}..{hi}"
        );
        assert!(counts.iter().sum::<u64>() >= 10_120, "{engine}");
        // Random source ports from 53..1000: nearly all 948 of them.
        let ports = set_elements(&dut, "sports").len();
        assert!(
            (900..=948).contains(&ports),
            "{engine}: {ports} source ports"
        );
        let ports = set_elements(&dut, "dports").len();
        assert!(
            (1000..=1024).contains(&ports),
            "{engine}: {ports} destination ports"
        );
    }
    nft_load(&dut, "flush ruleset\n");
}

#[test]
fn a_destination_range_over_the_dut_itself_is_refused() {
    if !root_or_skip("a_destination_range_over_the_dut_itself_is_refused") {
        return;
    }
    let (lab, _guard) = lab_up("fr");
    for range in [
        "dst-ip=198.19.0.1..198.19.0.10",
        "dst-ip=198.19.0.200..198.19.0.255",
        "dst-port=9..3",
        "colour=1..2",
    ] {
        let run = linerate(&[
            "trial",
            "--lab",
            "--lab-name",
            &lab,
            "--frame-size",
            "64",
            "--rate",
            "1000fps",
            "--range",
            range,
        ]);
        assert_bad_input(&run);
        assert!(run.stderr.contains("--range"), "{range}: {}", run.dump());
    }
}
