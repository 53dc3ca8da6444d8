//! `linerate calibrate` measures the tester back to back and stores the
//! ceiling; `rfc2544` flags results near a stored ceiling. Needs root; run
//! with --test-threads=1.

mod common;

use common::*;

#[test]
fn calibration_is_measured_stored_and_cleaned_up() {
    if !root_or_skip("calibration_is_measured_stored_and_cleaned_up") {
        return;
    }
    let before = netns_list();
    let file = TempFile::new("calibration");
    let run = linerate(&[
        "calibrate",
        "--engine",
        "af_packet,xdp",
        "--sizes",
        "64",
        "--trial-duration",
        "200ms",
        "--straggler-wait",
        "200ms",
        "--resolution",
        "5%",
        "--calibration",
        file.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(
        new_lr_netns(&before, &netns_list()).is_empty(),
        "calibrate left its namespace behind"
    );
    let cal = file.json();
    let entries = cal["entries"].as_array().expect("entries");
    assert_eq!(entries.len(), 2, "{cal}");
    for e in entries {
        assert_eq!(e["setup"], "lab", "{e}");
        assert_eq!(u(e, "frame_size"), 64, "{e}");
        let fps = f(e, "ceiling_fps");
        // Something passed, and nothing above 10G line rate for 64 B.
        assert!(fps > 1_000.0 && fps <= 14_880_953.0, "{e}");
        assert!(e["latency_ns"].is_object(), "{e}");
        assert!(
            run.stdout.contains(e["engine"].as_str().unwrap()),
            "{}",
            run.dump()
        );
    }
}

#[test]
fn results_near_the_calibrated_ceiling_are_flagged() {
    if !root_or_skip("results_near_the_calibrated_ceiling_are_flagged") {
        return;
    }
    let (lab, _guard) = lab_up("cal");
    // A stored ceiling of 20,000 frames/s for af_packet at 64 bytes: a
    // search capped at 20,000/s ends at or near it, so must be flagged.
    let file = TempFile::new("ceiling");
    std::fs::write(
        &file.0,
        r#"{"entries":[{"setup":"lab","engine":"af_packet","frame_size":64,"ceiling_fps":20000.0,
            "latency_ns":null,"measured_at":0,"linerate_version":"test"}]}"#,
    )
    .unwrap();
    let json = TempFile::new("flagged");
    let run = linerate(&[
        "rfc2544",
        "--lab",
        "--lab-name",
        &lab,
        "--engine",
        "af_packet",
        "--sizes",
        "64,128",
        "--max-rate",
        "20000fps",
        "--trial-duration",
        "500ms",
        "--straggler-wait",
        "200ms",
        "--calibration",
        file.arg(),
        "--json",
        json.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    let rep = json.json();
    let r64 = &rep["results"][0];
    assert_eq!(f(r64, "throughput_fps"), 20_000.0, "{r64}");
    assert_eq!(f(r64, "calibrated_ceiling_fps"), 20_000.0, "{r64}");
    assert_eq!(r64["tester_limited"], true, "{r64}");
    // No ceiling stored for 128 bytes: not flagged by calibration.
    let r128 = &rep["results"][1];
    assert!(r128.get("calibrated_ceiling_fps").is_none(), "{r128}");
    assert_eq!(r128["tester_limited"], false, "{r128}");
    assert!(run.stdout.contains("calibrated ceiling"), "{}", run.dump());
}
