//! IMIX through the lab router on every engine: the DUT itself counts the
//! packets of each size (nftables counters on the IP length), so the test
//! checks what really crossed the device, not what linerate says it sent.
//! Needs root and nft; run with --test-threads=1.

mod common;

use common::*;

/// One counter per IP length of `genome:aaaaaaaddddg` (64, 512, 1518-byte
/// frames carry 46, 494, 1500-byte packets), and one for anything else.
const BY_LENGTH: &str = "table ip t {
    chain c {
        type filter hook forward priority 0; policy accept;
        ip length 46 counter accept
        ip length 494 counter accept
        ip length 1500 counter accept
        counter accept
    }
}
";

fn imix_trial(lab: &str, engine: &str, mix: &str, json: &TempFile) -> Run {
    linerate(&[
        "trial",
        "--lab",
        "--lab-name",
        lab,
        "--engine",
        engine,
        "--imix",
        mix,
        "--rate",
        "12000fps",
        "--duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--json",
        json.arg(),
    ])
}

#[test]
fn every_engine_sends_a_genome_with_its_exact_sizes() {
    if !root_or_skip("every_engine_sends_a_genome_with_its_exact_sizes") || !nft_present() {
        return;
    }
    let (lab, _guard) = lab_up("im");
    let dut = format!("lr-{lab}-dut");
    for engine in ["af_packet", "af_xdp", "xdp"] {
        // Fresh counters for each engine.
        nft_load(&dut, &format!("flush ruleset\n{BY_LENGTH}"));
        let json = TempFile::new(&format!("imix{engine}"));
        let run = imix_trial(&lab, engine, "genome:aaaaaaaddddg", &json);
        assert_eq!(run.code, 0, "{engine}: {}", run.dump());
        let t = json.json();
        assert_trial_consistent(&t);
        // 12,000 frames = 1,000 repetitions of 7 x 64, 4 x 512, 1 x 1518.
        assert_eq!(u(&t, "tx_frames"), 12_000, "{engine}: {t}");
        assert_eq!(u(&t, "rx_frames"), 12_000, "{engine}: {t}");
        assert_eq!(
            nft_counters(&dut),
            vec![7_000, 4_000, 1_000, 0],
            "{engine}: the DUT saw other sizes than the genome's"
        );
        let mix = &t["mix"];
        assert_eq!(mix["name"], "genome aaaaaaaddddg", "{t}");
        let mean = (7.0 * 64.0 + 4.0 * 512.0 + 1518.0) / 12.0;
        assert!((f(mix, "mean_frame_size") - mean).abs() < 1e-9, "{t}");
        assert_eq!(u(&t, "frame_size"), 1518, "largest size: {t}");
        // The summary states the mix and its L1/L2 rates from the mean frame.
        assert!(
            run.stdout
                .contains("genome aaaaaaaddddg (7x64 4x512 1x1518"),
            "{}",
            run.dump()
        );
    }
    nft_load(&dut, "flush ruleset\n");
}

#[test]
fn imix_throughput_table_has_a_column_per_pattern() {
    if !root_or_skip("imix_throughput_table_has_a_column_per_pattern") {
        return;
    }
    let (lab, _guard) = lab_up("it");
    let json = TempFile::new("imixtable");
    // Rates far below what the lab forwards: each search passes its first
    // trial at --max-rate, so the table shows exactly that rate.
    let run = linerate(&[
        "rfc2544",
        "--lab",
        "--lab-name",
        &lab,
        "--imix",
        "imix0,imix1,imix2",
        "--imix",
        "64:7,594:4,1518:1",
        "--max-rate",
        "10000fps",
        "--trial-duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--json",
        json.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    let header = run
        .stdout
        .lines()
        .find(|l| l.contains("IMIX 0"))
        .unwrap_or_else(|| panic!("no header: {}", run.dump()));
    for name in ["IMIX 0", "IMIX 1", "IMIX 2", "64:7,594:4,1518:1"] {
        assert!(header.contains(name), "{header}");
    }
    assert!(run.stdout.contains("Mbps (L1)"), "{}", run.dump());
    assert!(
        run.stdout
            .contains("IMIX 2: 29x90 1x92 12x594 8x1418 per 50 frames"),
        "{}",
        run.dump()
    );
    let rep = json.json();
    let results = rep["results"].as_array().expect("results");
    assert_eq!(results.len(), 4, "{rep}");
    for r in results {
        let mix = &r["mix"];
        let mean = f(mix, "mean_frame_size");
        let fps = f(r, "throughput_fps");
        assert_eq!(fps, 10_000.0, "{r}");
        // Mbps count the mix's mean frame: L2 = fps x mean x 8, L1 adds 20 bytes.
        assert!(
            (f(r, "throughput_mbps_l2") - fps * mean * 8e-6).abs() < 1e-6,
            "{r}"
        );
        assert!(
            (f(r, "throughput_mbps_l1") - fps * (mean + 20.0) * 8e-6).abs() < 1e-6,
            "{r}"
        );
        for t in r["trials"].as_array().expect("trials") {
            assert_trial_consistent(t);
        }
    }
}
