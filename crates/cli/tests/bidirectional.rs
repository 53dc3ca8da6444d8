//! Bidirectional trials in the lab: both ports send and receive at once;
//! the record sums both directions and keeps each apart, and the DUT's own
//! counters agree with both. Needs root and nft.

mod common;

use common::*;

#[test]
fn both_directions_are_counted_apart_and_summed() {
    if !root_or_skip("both_directions_are_counted_apart_and_summed") {
        return;
    }
    let (lab, _guard) = lab_up("bd");
    let dut = format!("lr-{lab}-dut");
    for engine in ["af_packet", "xdp"] {
        nft_load(&dut, &format!("flush ruleset\n{EVERY_100TH}"));
        let json = TempFile::new(&format!("bidir{engine}"));
        let run = linerate(&[
            "trial",
            "--lab",
            "--lab-name",
            &lab,
            "--engine",
            engine,
            "--bidirectional",
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
            "--json",
            json.arg(),
        ]);
        assert_eq!(run.code, 0, "{engine}: {}", run.dump());
        let t = json.json();
        assert_trial_consistent(&t);
        let dirs = t["directions"].as_array().expect("two directions");
        assert_eq!(dirs.len(), 2, "{t}");
        for d in dirs {
            assert_trial_consistent(d);
            // Half the rate each way.
            assert_eq!(u(d, "intended_frames"), 10_000, "{engine}: {d}");
            assert_eq!(u(d, "tx_frames"), 10_000, "{engine}: {d}");
        }
        for key in ["intended_frames", "tx_frames", "rx_frames", "lost_frames"] {
            assert_eq!(
                u(&t, key),
                u(&dirs[0], key) + u(&dirs[1], key),
                "{engine}: {key} is the sum: {t}"
            );
        }
        // The DUT forwarded both directions (20,000 packets) and dropped
        // every 100th of them: exactly what the tester counts as lost.
        let [forwarded, dropped] = nft_counters(&dut)[..] else {
            panic!("two counters expected");
        };
        assert_eq!(forwarded, 20_000, "{engine}: {t}");
        assert_eq!(dropped, 200, "{engine}");
        assert_eq!(u(&t, "lost_frames"), dropped, "{engine}: {t}");
        // Both directions lost some: the rule saw both.
        assert!(
            u(&dirs[0], "lost_frames") > 0 && u(&dirs[1], "lost_frames") > 0,
            "{t}"
        );
    }
    nft_load(&dut, "flush ruleset\n");

    // Rates are totals: 100 % is both links' line rate, so 101 % is refused.
    let run = linerate(&[
        "trial",
        "--lab",
        "--lab-name",
        &lab,
        "--bidirectional",
        "--frame-size",
        "64",
        "--rate",
        "101%",
    ]);
    assert_bad_input(&run);
    assert!(run.stderr.contains("above the line rate"), "{}", run.dump());
}
