use super::*;
use crate::methods::{GoalResultRecord, MlrSearchResult, SearchGoalRecord};
use crate::model::DutCpu;
use crate::model::LatencySummary;

fn trial(frame: u16, intended_fps: f64, rx_frames: u64, short: bool) -> TrialResult {
    let intended_frames = (intended_fps * 2.0).round() as u64;
    let tx_frames = if short {
        intended_frames * 9 / 10
    } else {
        intended_frames
    };
    let lost = intended_frames - rx_frames;
    TrialResult {
        policy_drops: None,
        loss_where: None,
        tunnels: Vec::new(),
        recovery: None,
        rx_threads: Vec::new(),
        frame_size: frame,
        mix: None,
        flows: Vec::new(),
        directions: Vec::new(),
        l3_length: frame - 18,
        duration_s: 2.0,
        intended_fps,
        offered_fps: tx_frames as f64 / 2.0,
        intended_frames,
        tx_frames,
        rx_frames,
        lost_frames: lost,
        loss_ratio: lost as f64 / intended_frames as f64,
        reordered: 3,
        duplicated: 1,
        sequence_errors: None,
        latency_ns: Some(LatencySummary {
            min: 8_200,
            avg: 15_049,
            max: 812_000,
            p50: 12_300,
            p90: 20_000,
            p99: 40_350,
            p999: 99_999,
            ..Default::default()
        }),
        generator_short: short,
        generator_max_stall_ns: None,
        generator_paused_ns: None,
        generator_pauses: None,
        sending_s: None,
        engine: "af_packet".into(),
        receiver: String::new(),
        ip_version: Default::default(),
        vlan: None,
        tester_rx_drops: 0,
        stray_frames: 0,
        errored_frames: 0,
        frame_check: String::new(),
        dut_cpu: None,
        esp: None,
    }
}

fn result(frame: u16, throughput_fps: f64, tester_limited: bool) -> ThroughputResult {
    let bytes = |b: u16| throughput_fps * b as f64 * 8.0 / 1e6;
    let line_rate_fps = 10e9 / (8.0 * (frame as f64 + 20.0));
    ThroughputResult {
        frame_size: frame,
        mix: None,
        l3_length: frame - 18,
        throughput_fps,
        throughput_mbps_l2: bytes(frame),
        throughput_mbps_l1: bytes(frame + 20),
        throughput_mbps_l3: bytes(frame - 18),
        throughput_mbps_l4: bytes(frame - 46),
        line_rate_fps,
        line_rate_mbps_l2: line_rate_fps * frame as f64 * 8.0 / 1e6,
        tester_limited,
        calibrated_ceiling_fps: None,
        trials: vec![
            trial(
                frame,
                line_rate_fps,
                (throughput_fps * 2.0) as u64,
                tester_limited,
            ),
            trial(
                frame,
                throughput_fps,
                (throughput_fps * 2.0).round() as u64,
                false,
            ),
        ],
        dut_cpu: None,
        wan: None,
        mlrsearch: None,
        round: None,
        over_rounds: None,
    }
}

fn report(results: Vec<ThroughputResult>, placement: Option<Placement>) -> Rfc2544Report {
    Rfc2544Report {
        run: crate::methods::RunInfo {
            linerate_version: "0.1.0".into(),
            started_at: "2025-01-01T12:00:00Z".into(),
            setup: "lab".into(),
            port_a: "lr-a".into(),
            port_b: "lr-b".into(),
            line_speed_bps: 10_000_000_000,
            engine: "af_packet".into(),
            placement,
            description: String::new(),
            ..Default::default()
        },
        trial_duration_s: 2.0,
        resolution: 0.01,
        allowed_loss_ratio: 0.0,
        bidirectional: false,
        results,
        interrupted: None,
        repeat: 1,
        round_results: Vec::new(),
        scenario: None,
        dut_cpu_source: None,
    }
}

fn lab_report() -> Rfc2544Report {
    report(
        vec![
            result(64, 600_000.0, false),
            result(128, 580_400.0, false),
            result(256, 557_000.0, false),
            result(512, 530_000.0, false),
            result(1024, 812_000.0, true),
            result(1280, 95_812.0, false),
            result(1518, 812_743.0, false),
        ],
        Some(Placement {
            tester_cpus: vec![0],
            dut_cpus: vec![1],
            shared_core: false,
            note: "DUT forwarding on CPU 1 (threaded NAPI on dut-a, dut-b); tester on CPU 0".into(),
            ring: None,
        }),
    )
}

#[test]
fn the_table_has_the_lancom_layout() {
    let expected = "\
RFC 2544 throughput, lr-a -> lr-b (lab)                       loss allowed 0 %, trial 2 s, resolution 1 %
Throughput [Mbps] @ frame size [bytes] and frame rate [fps]
                       64         128         256         512        1024      1280      1518
Throughput            307         594       1,140       2,170       6,650*      981     9,870   Mbps (L2)
                  600,000     580,000     557,000     530,000     812,000*   95,800   813,000   Frames/s
Line rate           7,620       8,650       9,280       9,620       9,810     9,850     9,870   Mbps (L2)
               14,900,000   8,450,000   4,530,000   2,350,000   1,200,000   962,000   813,000   Frames/s
Share of line       4.0 %       6.9 %      12.3 %      22.6 %      67.8 %    10.0 %   100.0 %
(*) tester-limited: the tester could not offer the next rate up in full (frames not sent, or its generator paused for longer than the resolution), or the result is within 5 % of the tester's calibrated ceiling; the device may forward more.
DUT forwarding on CPU 1 (threaded NAPI on dut-a, dut-b); tester on CPU 0.   Engine af_packet.   Line speed 10 Gbit/s.
";
    let table = throughput_table(&lab_report());
    assert_eq!(table, expected, "\n{table}");
}

#[test]
fn columns_align_on_their_right_edge() {
    let table = throughput_table(&lab_report());
    let lines: Vec<&str> = table.lines().skip(2).take(6).collect();
    // The last digit of "1518" and of every number beneath it share a column.
    let edge = lines[0].len();
    for line in &lines[1..5] {
        let numbers_end = line.trim_end_matches(|c: char| c.is_alphabetic() || "()/ 2".contains(c));
        assert_eq!(numbers_end.len(), edge, "{line:?}");
    }
}

#[test]
fn without_marks_or_placement_the_notes_are_left_out() {
    let r = report(
        vec![
            result(64, 14_880_952.0, false),
            result(1518, 81_000.0, false),
        ],
        None,
    );
    let expected = "\
RFC 2544 throughput, lr-a -> lr-b (lab)   loss allowed 0 %, trial 2 s, resolution 1 %
Throughput [Mbps] @ frame size [bytes] and frame rate [fps]
                       64      1518
Throughput          7,620       984   Mbps (L2)
               14,900,000    81,000   Frames/s
Line rate           7,620     9,870   Mbps (L2)
               14,900,000   813,000   Frames/s
Share of line     100.0 %    10.0 %
Engine af_packet.   Line speed 10 Gbit/s.
";
    let table = throughput_table(&r);
    assert_eq!(table, expected, "\n{table}");
    assert!(!table.contains('*'));
}

#[test]
fn a_shared_core_is_said_plainly() {
    let mut r = report(
        vec![result(64, 300_000.0, false)],
        Some(Placement {
            tester_cpus: vec![0, 2],
            dut_cpus: vec![0],
            shared_core: true,
            note: String::new(),
            ring: None,
        }),
    );
    r.allowed_loss_ratio = 0.005;
    r.resolution = 0.001;
    r.trial_duration_s = 0.5;
    r.run.line_speed_bps = 2_500_000_000;
    let table = throughput_table(&r);
    assert!(table.starts_with("RFC 2544 throughput, lr-a -> lr-b (lab)   loss allowed 0.5 %, trial 0.5 s, resolution 0.1 %\n"), "{table}");
    assert!(
        table.contains(
            "Tester on CPUs 0, 2, DUT on CPU 0.   Engine af_packet.   Line speed 2.5 Gbit/s.\n"
        ),
        "{table}"
    );
    assert!(
        table.contains("WARNING: tester and DUT shared a CPU core"),
        "{table}"
    );
}

#[test]
fn an_empty_report_still_prints() {
    let table = throughput_table(&report(vec![], None));
    assert!(table.contains("(no frame size was measured)"));
}

#[test]
fn numbers_have_three_significant_digits() {
    for (x, s) in [
        (57.04, "57.0"),
        (63.2, "63.2"),
        (112.6, "113"),
        (983.7, "984"),
        (999.7, "1,000"),
        (99.96, "100"),
        (9.996, "10.0"),
        (1234.5, "1,230"),
        (9_412.0, "9,410"),
        (0.0, "0"),
        (4.56, "4.56"),
        (0.5, "0.500"),
        (110_000.0, "110,000"),
        (95_812.0, "95,800"),
        (122_600.0, "123,000"),
        (14_880_952.0, "14,900,000"),
        (-57.04, "-57.0"),
        (f64::NAN, "-"),
    ] {
        assert_eq!(sig3(x), s, "{x}");
    }
}

#[test]
fn thousands_are_separated() {
    for (n, s) in [
        (0, "0"),
        (999, "999"),
        (1000, "1,000"),
        (14_880_952, "14,880,952"),
    ] {
        assert_eq!(thousands(n), s);
    }
    assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
}

#[test]
fn a_trial_summary_shows_counts_rates_and_latency() {
    let t = trial(64, 1_000_000.0, 1_999_000, false);
    let expected = "\
Trial: 64-byte frames (IP packet 46 bytes), 2 s, engine af_packet
  intended          1,000,000 frames/s        2,000,000 frames
  offered           1,000,000 frames/s  672.0 Mbps L1, 512.0 L2, 368.0 L3, 144.0 L4 (UDP payload) (6.7 % of line rate)
  sent (tx)         2,000,000 frames
  received          1,999,000 frames
  forwarded           999,500 frames/s  671.7 Mbps L1, 511.7 L2, 367.8 L3, 143.9 L4 (UDP payload)
  lost                  1,000 frames  (0.0500 % of intended)
  reordered                 3 frames
  duplicated                1 frames
  latency µs  min 8.2  avg 15.0  max 812.0  p50 12.3  p99 40.4  p99.9 100.0
";
    let summary = trial_summary(&t, 10_000_000_000);
    assert_eq!(summary, expected, "\n{summary}");
    assert!(!trial_summary(&t, 0).contains("of line rate"));
}

#[test]
fn a_short_generator_is_warned_about() {
    let mut t = trial(1518, 800_000.0, 1_440_000, true);
    let summary = trial_summary(&t, 10_000_000_000);
    assert!(
        summary.contains("offered             720,000 frames/s"),
        "{summary}"
    );
    assert!(
        summary.contains("lost                160,000 frames  (10.00 % of intended)"),
        "{summary}"
    );
    assert!(
        summary.contains(
            "WARNING: the tester could not send at the intended rate (90.0 % of intended)"
        ),
        "{summary}"
    );
    t.latency_ns = None;
    t.generator_short = false;
    let summary = trial_summary(&t, 10_000_000_000);
    assert!(summary.contains("no frame was received"));
    assert!(!summary.contains("WARNING"));
}

#[test]
fn a_generator_at_its_ceiling_says_so_and_what_it_sent() {
    let mut t = trial(64, 10_000_000.0, 2_000_000, false);
    t.tx_frames = 4_400_000;
    t.generator_paused_ns = Some(1_800_000_000);
    t.generator_pauses = Some(70_000_000);
    t.sending_s = Some(2.2);
    t.offered_fps = 4_400_000.0 / 2.2;
    let summary = trial_summary(&t, 0);
    assert!(
        summary.contains("the generator's ceiling was reached: it sent 4,400,000 frames at about 2,000,000 frames/s in 2.20 s (a 2.00-s trial); the frames it could not send count as not sent"),
        "{summary}"
    );
    assert!(!summary.contains("held up"), "{summary}");
}

#[test]
fn a_paused_generator_is_noted_with_the_rate_the_device_saw() {
    let mut t = trial(64, 1_000_000.0, 2_000_000, false);
    t.generator_paused_ns = Some(100_000_000);
    t.generator_pauses = Some(3);
    t.generator_max_stall_ns = Some(40_000_000);
    // The engine's offered rate: over the time the frames took.
    t.offered_fps = 2_000_000.0 / 2.1;
    let summary = trial_summary(&t, 0);
    assert!(
        summary.contains("held up 3 time(s) and paused 100.00 ms in all"),
        "{summary}"
    );
    // 100 ms of 2 s: 5 %, so 1,000,000 frames/s reached the device at
    // about 952,381.
    assert!(
        summary.contains("5.00 % of the duration: the device saw about 952,381 frames/s; an RFC 2544 search counts a pass at the rate the device saw once the pauses exceed its resolution"),
        "{summary}"
    );
    // No pause (and no stall): no note.
    t.generator_pauses = Some(0);
    t.generator_paused_ns = Some(0);
    t.generator_max_stall_ns = Some(0);
    assert!(!trial_summary(&t, 0).contains("note"));
}

#[test]
fn json_has_the_documented_keys() {
    let json = to_json(&lab_report());
    assert!(json.contains("\n  \"results\": ["), "pretty-printed");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let r0 = &v["results"][0];
    assert_eq!(r0["frame_size"], 64);
    for key in [
        "throughput_fps",
        "throughput_mbps_l2",
        "throughput_mbps_l1",
        "throughput_mbps_l3",
        "throughput_mbps_l4",
        "line_rate_fps",
        "line_rate_mbps_l2",
        "tester_limited",
    ] {
        assert!(r0.get(key).is_some(), "results[0].{key}");
    }
    let t0 = &r0["trials"][0];
    for key in [
        "intended_fps",
        "offered_fps",
        "tx_frames",
        "rx_frames",
        "lost_frames",
        "loss_ratio",
        "reordered",
        "duplicated",
        "generator_short",
    ] {
        assert!(t0.get(key).is_some(), "results[0].trials[0].{key}");
    }
    for key in ["min", "avg", "max", "p50", "p99", "p999"] {
        assert!(t0["latency_ns"][key].is_u64(), "latency_ns.{key}");
    }
    assert_eq!(
        v["placement"]["note"],
        "DUT forwarding on CPU 1 (threaded NAPI on dut-a, dut-b); tester on CPU 0"
    );
    // And it reads back (floats may differ in their last bit).
    let back: Rfc2544Report = serde_json::from_str(&json).unwrap();
    assert_eq!(back.results.len(), 7);
    assert_eq!(back.results[4].trials[0].tx_frames, 2_155_172);
    assert!(back.results[4].tester_limited);
}

#[test]
fn all_layers_adds_l1_l3_l4_and_the_lantraffic_link_usage() {
    let mut rep = report(vec![result(1518, 812_743.0, false)], None);
    rep.run.line_speed_bps = 10_000_000_000;
    let t = throughput_table_layers(&rep, true);
    for unit in [
        "Mbps (L1)",
        "Mbps (L3, IP)",
        "Mbps (L4, UDP payload)",
        "L2 (LanTraffic)",
    ] {
        assert!(t.contains(unit), "{t}");
    }
    // 812,743 fps of 1518-byte frames: 9,870 Mbps at L2, 98.7 % of 10G.
    assert!(t.contains("98.7 %"), "{t}");
    assert!(!throughput_table(&rep).contains("LanTraffic"));
}

#[test]
fn ordinals_read_as_english() {
    let words: Vec<String> = [1, 2, 3, 4, 8, 11, 12, 13, 16, 21, 32, 64, 112, 1024]
        .into_iter()
        .map(super::ordinal)
        .collect();
    assert_eq!(
        words,
        [
            "1st", "2nd", "3rd", "4th", "8th", "11th", "12th", "13th", "16th", "21st", "32nd",
            "64th", "112th", "1024th"
        ]
    );
}

#[test]
fn the_summary_and_the_footer_say_where_frames_were_lost() {
    let mut t = trial(64, 100_000.0, 199_000, false);
    t.loss_where = Some(crate::LossWhere::from_terms(
        1_000,
        0,
        0,
        10,
        Some(600),
        Some(390),
    ));
    let summary = trial_summary(&t, 10_000_000_000);
    assert!(
        summary.contains("600 dropped at the DUT's input (queue full)"),
        "{summary}"
    );
    assert!(summary.contains("390 dropped inside the DUT"), "{summary}");
    assert!(
        summary.contains("10 dropped at the tester's receiving port"),
        "{summary}"
    );
    // The tester's own loss is a warning: the trial does not measure the device.
    assert!(
        summary.contains("WARNING: the tester lost 10 frames itself"),
        "{summary}"
    );
    assert!(t.tester_limited());
    let line = loss_where_line([&t, &t]).expect("a footer line");
    assert!(
        line.starts_with("Frames lost in all trials: 2,000; 1,200 dropped at the DUT's input"),
        "{line}"
    );
    // No loss: no line.
    let clean = trial(64, 100_000.0, 200_000, false);
    assert_eq!(loss_where_line([&clean]), None);
}

fn goal(name: &str, loss_ratio: f64, fps: Option<f64>, regular: bool) -> GoalResultRecord {
    GoalResultRecord {
        goal: SearchGoalRecord {
            name: name.into(),
            loss_ratio,
            exceed_ratio: 0.5,
            final_trial_duration_s: 1.0,
            duration_sum_s: 2.0,
            width: 0.01,
            initial_trial_duration_s: 1.0,
        },
        relevant_lower_bound_fps: fps,
        relevant_upper_bound_fps: fps.map(|f| f * 1.005),
        conditional_throughput_fps: fps,
        relevant_lower_bound_mbps_l2: fps.map(|f| f * 64.0 * 8.0 / 1e6),
        conditional_throughput_mbps_l2: fps.map(|f| f * 64.0 * 8.0 / 1e6),
        conditional_throughput_mbps_l1: fps.map(|f| f * 84.0 * 8.0 / 1e6),
        regular,
        tester_limited: false,
    }
}

/// An MLRsearch of 64-byte frames beside `r` with `goals`.
fn mlrsearch(r: &ThroughputResult, goals: Vec<GoalResultRecord>) -> MlrSearchResult {
    MlrSearchResult {
        frame_size: 64,
        l3_length: 46,
        mix: None,
        line_rate_fps: r.line_rate_fps,
        max_fps: r.line_rate_fps,
        min_fps: 1_000.0,
        goals,
        trial_seconds: 20.0,
        reused_trials: 0,
        trials: vec![trial(64, 1_020_000.0, 1_020_000, false)],
    }
}

#[test]
fn ndr_and_pdr_sit_beneath_the_zero_loss_throughput() {
    let mut r = result(64, 250_000.0, false);
    r.mlrsearch = Some(mlrsearch(
        &r,
        vec![
            goal("NDR", 0.0, Some(1_020_000.0), true),
            goal("PDR", 0.005, Some(1_570_000.0), false),
        ],
    ));
    let table = throughput_table(&report(vec![r, result(1518, 800_000.0, false)], None));
    let lines: Vec<&str> = table.lines().collect();
    let at = |label: &str| lines.iter().position(|l| l.starts_with(label)).unwrap();
    // Throughput, then NDR and PDR (Mbps, then frames/s), then line rate.
    assert!(at("Throughput") < at("NDR (MLRsearch)"));
    assert!(at("NDR (MLRsearch)") < at("PDR (MLRsearch)"));
    assert!(at("PDR (MLRsearch)") < at("Line rate"));
    assert!(lines[at("NDR (MLRsearch)") + 1].contains("1,020,000"));
    // An irregular goal result is marked; a size without MLRsearch shows "-".
    assert!(lines[at("PDR (MLRsearch)") + 1].contains("1,570,000~"));
    assert!(lines[at("NDR (MLRsearch)")].contains(" -"));
    assert!(table.contains("exceed ratio 50 % of 2 s in trials of 1 s"));
    assert!(!table.contains("(*) tester-limited"), "nothing is marked");
}

#[test]
fn a_tester_limited_goal_is_marked_and_explained() {
    let mut r = result(64, 250_000.0, false);
    let mut pdr = goal("PDR", 0.005, Some(1_570_000.0), true);
    pdr.tester_limited = true;
    r.mlrsearch = Some(mlrsearch(
        &r,
        vec![goal("NDR", 0.0, Some(1_020_000.0), true), pdr],
    ));
    let table = throughput_table(&report(vec![r], None));
    let lines: Vec<&str> = table.lines().collect();
    let at = |label: &str| lines.iter().position(|l| l.starts_with(label)).unwrap();
    assert!(
        lines[at("PDR (MLRsearch)") + 1].contains("1,570,000*"),
        "{table}"
    );
    assert!(!lines[at("NDR (MLRsearch)") + 1].contains('*'), "{table}");
    assert!(
        table.contains("(*) tester-limited"),
        "the mark is explained: {table}"
    );
}

#[test]
fn repeated_rounds_show_each_figure_s_median_and_spread() {
    // Three rounds of 64 and 1518 bytes, round-robin; MLRsearch's NDR of
    // 64 bytes has its median in another round than the zero-loss figure.
    let mut rep = report(Vec::new(), None);
    rep.repeat = 3;
    let rounds = [
        (600_000.0, 500_000.0, 800_000.0),
        (700_000.0, 450_000.0, 790_000.0),
        (500_000.0, 520_000.0, 812_000.0),
    ];
    for (i, &(zero_loss, ndr, big)) in rounds.iter().enumerate() {
        let mut small = result(64, zero_loss, false);
        small.mlrsearch = Some(mlrsearch(
            &small,
            vec![
                goal("NDR", 0.0, Some(ndr), true),
                goal("PDR", 0.005, Some(ndr * 1.1), true),
            ],
        ));
        small.round = Some(i + 1);
        let mut large = result(1518, big, false);
        large.round = Some(i + 1);
        rep.keep(small);
        rep.keep(large);
    }
    assert_eq!(rep.round_results.len(), 6);
    assert_eq!(rep.results.len(), 2);
    // The zero-loss median is round 1's (500 < 600 < 700 thousand).
    assert_eq!(rep.results[0].round, Some(1));
    let table = throughput_table(&rep);
    let lines: Vec<&str> = table.lines().collect();
    let at = |label: &str| lines.iter().position(|l| l.starts_with(label)).unwrap();
    assert!(lines[at("Throughput  ") + 1].contains("600,000"), "{table}");
    assert!(
        lines[at("Throughput  ") + 2].starts_with("  spread"),
        "{table}"
    );
    assert!(lines[at("Throughput  ") + 2].contains("1.40x"), "{table}");
    assert!(lines[at("Throughput  ") + 2].contains("1.03x"), "{table}");
    assert!(table.contains("highest / lowest of 3 rounds"), "{table}");
    // NDR: round 3's 500,000 (450 < 500 < 520 thousand), not round 1's.
    assert!(
        lines[at("NDR (MLRsearch)") + 1].contains("500,000"),
        "{table}"
    );
    assert!(
        lines[at("NDR (MLRsearch)") + 2].contains("1.16x"),
        "{table}"
    );
    assert!(
        lines[at("PDR (MLRsearch)") + 1].contains("550,000"),
        "{table}"
    );
    assert!(at("PDR (MLRsearch)") + 3 == at("Line rate"), "{table}");
    assert!(table.contains("round-robin, 3 rounds;"), "{table}");
    assert!(!table.contains("stopped early"), "{table}");
    // Interrupted after one size of a fourth round: said.
    rep.repeat = 4;
    let mut fourth = result(64, 650_000.0, false);
    fourth.round = Some(4);
    rep.keep(fourth);
    assert!(throughput_table(&rep).contains("stopped early"));
}

/// A run of `tunnels` tunnels: each size's deciding trial (the second)
/// spread over them, `silent` delivering nothing.
fn tunnel_run(fps: &[(u16, f64)], tunnels: usize, silent: Option<usize>) -> Rfc2544Report {
    let results = fps
        .iter()
        .map(|&(frame, f)| {
            let mut r = result(frame, f, false);
            if tunnels > 1 {
                r.trials[1].tunnels = (0..tunnels)
                    .map(|i| crate::ipsec::TunnelFrames {
                        tx: 100,
                        rx: if Some(i) == silent { 0 } else { 100 },
                    })
                    .collect();
            }
            r
        })
        .collect();
    report(results, None)
}

#[test]
fn throughput_is_compared_over_tunnel_counts() {
    let runs = vec![
        (1, tunnel_run(&[(64, 10_000.0), (512, 8_000.0)], 1, None)),
        (10, tunnel_run(&[(64, 9_900.0), (512, 8_000.0)], 10, None)),
        (
            100,
            tunnel_run(&[(64, 9_000.0), (512, 7_200.0)], 100, Some(41)),
        ),
    ];
    let t = compare_tunnels::by_tunnels(&runs);
    assert!(t.starts_with("Frame rate with 1 / 10 / 100 tunnels"), "{t}");
    assert!(t.contains("1 tunnel ") && t.contains("100 tunnels"), "{t}");
    // 9,900 against 10,000: -1.0 %; 7,200 against 8,000: -10.0 %.
    assert!(t.contains("-1.0 %") && t.contains("-10.0 %"), "{t}");
    assert!(t.contains("100..100") && t.contains("0..100"), "{t}");
    assert!(
        t.contains("100 tunnels, 64 B: carried nothing: tunnel 42"),
        "{t}"
    );
    let lines: Vec<&str> = t.lines().collect();
    let header = lines
        .iter()
        .find(|l| l.starts_with("Frame  IP len"))
        .unwrap();
    let row = lines
        .iter()
        .find(|l| l.trim_start().starts_with("64 "))
        .unwrap();
    assert_eq!(row.len(), header.len(), "aligned:\n{t}");
}

/// Loss per rekey over the tunnel's share of the offered rate: 100 frames
/// lost in 5 rekeys is 20 each; at 10,000 frames/s over 10 tunnels (1,000
/// each) that is 20 ms blocked per rekey.
#[test]
fn a_rekey_blocks_its_tunnel_for_its_lost_frames_over_the_tunnels_rate() {
    let r = crate::ipsec::TrialRekeys {
        done: 4,
        by_gateway: 1,
        failed: 2,
        ..Default::default()
    };
    let (each, blocked_ms) = r.per_rekey(100, 10_000.0, 10).unwrap();
    assert_eq!((each, blocked_ms), (20.0, 20.0));
    assert!(crate::ipsec::TrialRekeys::default()
        .per_rekey(100, 10_000.0, 1)
        .is_none());
}

/// The rekeys footer sums the trials that had rekeys, and is left out
/// without any.
#[test]
fn the_rekeys_footer_lists_each_trial_with_rekeys() {
    let plain = trial(64, 1000.0, 1990, false);
    assert!(rekeys_footer([&plain]).is_none());
    let mut rekeyed = trial(128, 1000.0, 1990, false);
    rekeyed.esp = Some(crate::ipsec::EspTrial {
        rekeys: Some(crate::ipsec::TrialRekeys {
            done: 2,
            failed: 1,
            ..Default::default()
        }),
        ..Default::default()
    });
    let text = rekeys_footer([&plain, &rekeyed]).unwrap();
    assert!(text.contains("2 completed, 1 failed"), "{text}");
    // 10 frames lost (2,000 sent, 1,990 received) in 2 rekeys at 1,000
    // frames/s on one tunnel: 5 frames and 5 ms each.
    assert!(
        text.contains(
            "128 B at 1,000 frames/s: 2 rekeys, 5.0 frames lost and 5.00 ms blocked per rekey"
        ),
        "{text}"
    );
}

/// A trial that waited for the DUT to go quiet says so in one line, and the
/// tables list it under them; a quiet start says nothing.
#[test]
fn a_wait_for_the_dut_to_recover_is_said_and_a_run_out_limit_marked() {
    let quiet = crate::Recovery {
        quiet_s: 0.1,
        quiet_frames: 10,
        ..Default::default()
    };
    let mut plain = trial(64, 1000.0, 2000, false);
    plain.recovery = Some(quiet);
    assert!(recovery_note(&quiet).is_none());
    assert!(recovery_footer([&plain]).is_none());
    assert!(!trial_summary(&plain, 0).contains("forwarding earlier frames"));
    let mut waited = trial(64, 20_000.0, 40_000, false);
    waited.recovery = Some(crate::Recovery {
        waited_s: 4.24,
        frames: 123_456,
        ..quiet
    });
    let summary = trial_summary(&waited, 0);
    assert!(
        summary.contains("  note        waited 4.2 s for the DUT to stop forwarding earlier frames before the trial (123,456 frames arrived meanwhile)"),
        "{summary}"
    );
    let mut poisoned = trial(64, 30_000.0, 60_000, false);
    poisoned.recovery = Some(crate::Recovery {
        waited_s: 30.0,
        frames: 9_000_000,
        limit_reached: true,
        ..quiet
    });
    let note = recovery_note(poisoned.recovery.as_ref().unwrap()).unwrap();
    assert!(
        note.contains("after 30.0 s") && note.contains("may be poisoned"),
        "{note}"
    );
    let text = recovery_footer([&plain, &waited, &poisoned]).unwrap();
    assert!(text.starts_with("Before 2 trial(s)"), "{text}");
    assert!(text.contains("1 started with it still sending"), "{text}");
    assert!(
        text.contains(
            "  64 B at 20,000 frames/s: waited 4.2 s (123,456 frames arrived), then quiet"
        ),
        "{text}"
    );
    assert!(text.contains("64 B at 30,000 frames/s: waited 30.0 s (9,000,000 frames arrived), still sending when the limit ran out: the result may be poisoned"), "{text}");
}

#[test]
fn a_short_recovery_wait_reads_in_ms_not_as_zero_seconds() {
    assert_eq!(recovery_wait(0.01), "10 ms");
    assert_eq!(recovery_wait(0.0994), "99 ms");
    assert_eq!(recovery_wait(0.1), "0.1 s");
    assert_eq!(recovery_wait(4.2), "4.2 s");
}

#[test]
fn trial_summary_shows_sequence_errors_when_there_are_any() {
    let mut t = trial(64, 1000.0, 2000, false);
    let line = |t: &TrialResult| {
        trial_summary(t, 10_000_000_000)
            .lines()
            .find(|l| l.contains("seq errors"))
            .map(str::to_string)
    };
    assert_eq!(line(&t), None, "not counted: no line");
    t.sequence_errors = Some(crate::SequenceErrors {
        threshold: 1000,
        ..Default::default()
    });
    assert_eq!(line(&t), None, "none: no line");
    t.sequence_errors = Some(crate::SequenceErrors {
        small: 1234,
        big: 1,
        reverse: 2,
        threshold: 1000,
    });
    assert_eq!(
        line(&t).unwrap(),
        "  seq errors            1,234 small, 1 big (a jump over 1,000 or more numbers), 2 reverse"
    );
    let json = serde_json::to_value(&t).unwrap();
    assert_eq!(
        json["sequence_errors"],
        serde_json::json!({"small": 1234, "big": 1, "reverse": 2, "threshold": 1000})
    );
}

#[test]
fn time_the_hypervisor_took_from_the_dut_is_a_row_only_when_there_was_some() {
    let cpu = |stolen_pct| {
        Some(DutCpu {
            total_pct: 80.0,
            traffic_pct: 79.0,
            stolen_pct,
        })
    };
    let mut rep = lab_report();
    for r in &mut rep.results {
        r.dut_cpu = cpu(Some(0.0));
    }
    let table = throughput_table(&rep);
    assert!(table.contains("DUT CPU total"), "\n{table}");
    assert!(!table.contains("stolen"), "none stolen: no row\n{table}");
    rep.results[0].dut_cpu = cpu(Some(4.26));
    rep.results[1].dut_cpu = cpu(None);
    let table = throughput_table(&rep);
    let row = table
        .lines()
        .find(|l| l.starts_with("  stolen"))
        .unwrap_or_else(|| panic!("a stolen row\n{table}"));
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cells[1..4], ["4.3", "-", "0.0"], "{row}");
    assert!(
        row.ends_with("% taken by the hypervisor for other guests"),
        "{row}"
    );
}

/// IKE SA rekeys get a line of their own, beside the CHILD_SA rekeys or
/// alone.
#[test]
fn ike_sa_rekeys_are_counted_apart() {
    let mut t = trial(128, 1000.0, 2000, false);
    let ike = crate::ipsec::IkeRekeys {
        done: 3,
        by_gateway: 1,
        failed: 0,
    };
    t.esp = Some(crate::ipsec::EspTrial {
        rekeys: Some(crate::ipsec::TrialRekeys {
            ike: Some(ike),
            ..Default::default()
        }),
        ..Default::default()
    });
    let lines = rekeys_lines(&t);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("4 completed (3 by linerate, 1 by the gateway), 0 failed"),
        "{lines:?}"
    );
    if let Some(r) = t.esp.as_mut().and_then(|e| e.rekeys.as_mut()) {
        r.done = 2;
    }
    let lines = rekeys_lines(&t);
    assert!(lines[0].starts_with("  rekeys "), "{lines:?}");
    assert!(lines[1].starts_with("  IKE rekeys "), "{lines:?}");
}
