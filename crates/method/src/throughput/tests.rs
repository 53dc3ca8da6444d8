use super::*;
use crate::sim::{PausingDut, SimulatedDut};
use std::convert::Infallible;

/// 64-byte frames at 10 Gbit/s.
const LINE_64B_10G: f64 = 14_880_952.380_952_38;

fn frame64() -> FrameSize {
    FrameSize::from_frame(64).unwrap()
}

fn config(resolution: f64) -> ThroughputConfig {
    ThroughputConfig {
        max_fps: LINE_64B_10G,
        min_fps: 100.0,
        resolution,
        allowed_loss_ratio: 0.0,
        trial_duration: Duration::from_secs(1),
        mix: None,
    }
}

fn search(dut: &mut SimulatedDut, cfg: &ThroughputConfig) -> ThroughputResult {
    let result: Result<_, Infallible> =
        find_throughput(dut, frame64(), cfg, LINE_64B_10G, &mut |_| {});
    result.unwrap()
}

/// Frames the schedule calls for at `fps` over the config's duration.
fn frames_at(fps: f64, cfg: &ThroughputConfig) -> u64 {
    (fps * cfg.trial_duration.as_secs_f64()).round() as u64
}

const CAPACITIES: [f64; 16] = [
    1_000.0,
    1_500.0,
    10_000.0,
    77_777.0,
    100_000.0,
    250_000.0,
    600_000.0,
    1_000_000.0,
    2_345_678.0,
    5_000_000.0,
    7_440_476.0,
    10_000_000.0,
    12_345_678.0,
    14_000_000.0,
    14_800_000.0,
    14_880_000.0,
];

#[test]
fn relative_width_is_relative_to_the_upper_end() {
    assert_eq!(relative_width(99.0, 100.0), 0.01);
    assert_eq!(relative_width(0.0, 100.0), 1.0);
    assert_eq!(relative_width(5.0, 5.0), 0.0);
    assert_eq!(relative_width(0.0, 0.0), 0.0);
}

#[test]
fn a_line_rate_device_passes_at_max_after_one_trial() {
    for capacity in [LINE_64B_10G, 20_000_000.0] {
        let mut dut = SimulatedDut::new(capacity);
        let r = search(&mut dut, &config(0.01));
        assert_eq!(r.throughput_fps, LINE_64B_10G);
        assert_eq!(r.trials.len(), 1);
        assert_eq!(dut.trials_run, 1);
        assert!(!r.tester_limited);
    }
}

#[test]
fn throughput_is_within_resolution_below_capacity_and_never_above() {
    for resolution in [0.001, 0.01, 0.05] {
        for overload in [1.0, 0.9, 0.5, 0.0] {
            for capacity in CAPACITIES {
                let cfg = config(resolution);
                let mut dut = SimulatedDut::new(capacity).with_overload_forwarding(overload);
                let r = search(&mut dut, &cfg);
                let what =
                    format!("capacity {capacity}, resolution {resolution}, overload {overload}");
                // Never above: the device carries every frame of the reported rate.
                assert!(
                    frames_at(r.throughput_fps, &cfg) <= dut.capacity_frames(1.0),
                    "{what}: {} is above capacity",
                    r.throughput_fps
                );
                // Within resolution below (one frame of rounding aside).
                assert!(
                    r.throughput_fps >= capacity * (1.0 - resolution) - 1.0,
                    "{what}: {} is too far below",
                    r.throughput_fps
                );
                // The reported rate is that of a trial that passed, and the
                // rate just above it failed.
                let best = r
                    .trials
                    .iter()
                    .find(|t| t.intended_fps == r.throughput_fps)
                    .unwrap();
                assert_eq!(best.lost_frames, 0, "{what}");
                let above = r
                    .trials
                    .iter()
                    .filter(|t| t.intended_fps > r.throughput_fps)
                    .map(|t| t.intended_fps)
                    .fold(f64::INFINITY, f64::min);
                assert!(
                    relative_width(r.throughput_fps, above) <= resolution,
                    "{what}"
                );
                assert!(!r.tester_limited, "{what}");
                assert!(r.trials.len() <= 32, "{what}: {} trials", r.trials.len());
            }
        }
    }
}

#[test]
fn an_honest_overload_hint_keeps_the_search_short() {
    // A device that forwards its capacity when overloaded: line rate, hint,
    // one step up, at most one bisection.
    for resolution in [0.001, 0.01, 0.05] {
        for capacity in CAPACITIES {
            let mut dut = SimulatedDut::new(capacity);
            let r = search(&mut dut, &config(resolution));
            assert!(
                r.trials.len() <= 4,
                "capacity {capacity}, resolution {resolution}: {} trials",
                r.trials.len()
            );
        }
    }
    // Devices that forward less when overloaded, at 1 % resolution.
    for overload in [0.9, 0.5] {
        for capacity in CAPACITIES {
            let mut dut = SimulatedDut::new(capacity).with_overload_forwarding(overload);
            let r = search(&mut dut, &config(0.01));
            assert!(
                r.trials.len() <= 14,
                "capacity {capacity}, overload {overload}: {} trials",
                r.trials.len()
            );
        }
    }
}

#[test]
fn print_trial_counts() {
    // For information: `cargo test -p linerate-method print_trial_counts -- --nocapture`.
    println!("trials per search, 64-byte frames, line rate 14,880,952 fps, min 100 fps");
    println!(
        "{:>12}  {:>28}  {:>28}  {:>28}",
        "", "res 0.1 %", "res 1 %", "res 5 %"
    );
    println!(
        "{:>12}  {:>28}  {:>28}  {:>28}",
        "capacity",
        "overload fwd 1.0/0.9/0.5/0",
        "overload fwd 1.0/0.9/0.5/0",
        "overload fwd 1.0/0.9/0.5/0"
    );
    for capacity in CAPACITIES {
        let mut line = format!("{capacity:>12}");
        for resolution in [0.001, 0.01, 0.05] {
            let counts: Vec<String> = [1.0, 0.9, 0.5, 0.0]
                .iter()
                .map(|&o| {
                    let mut dut = SimulatedDut::new(capacity).with_overload_forwarding(o);
                    search(&mut dut, &config(resolution))
                        .trials
                        .len()
                        .to_string()
                })
                .collect();
            line += &format!("  {:>28}", counts.join("/"));
        }
        println!("{line}");
    }
}

#[test]
fn capacity_below_the_lowest_rate_gives_zero() {
    let mut cfg = ThroughputConfig::new(LINE_64B_10G, Duration::from_secs(1));
    assert!((cfg.min_fps - 1488.095).abs() < 0.001);
    cfg.resolution = 0.01;
    for overload in [1.0, 0.0] {
        let mut dut = SimulatedDut::new(1_000.0).with_overload_forwarding(overload);
        let r = search(&mut dut, &cfg);
        assert_eq!(r.throughput_fps, 0.0);
        assert_eq!(r.throughput_mbps_l2, 0.0);
        assert!(!r.tester_limited);
        assert_eq!(r.trials.len(), 2, "line rate, then min_fps");
        assert_eq!(r.trials[1].intended_fps, cfg.min_fps);
    }
}

#[test]
fn allowed_loss_lets_a_slightly_lossy_device_pass_at_max() {
    let mut cfg = config(0.01);
    cfg.allowed_loss_ratio = 0.005;
    let mut dut = SimulatedDut::new(20_000_000.0).with_loss_every_nth(1000);
    let r = search(&mut dut, &cfg);
    assert_eq!(r.throughput_fps, LINE_64B_10G);
    assert_eq!(r.trials.len(), 1);
    assert!((r.trials[0].loss_ratio - 0.001).abs() < 1e-5);
}

#[test]
fn allowed_loss_applies_below_capacity_too() {
    let mut cfg = config(0.01);
    cfg.allowed_loss_ratio = 0.005;
    let mut dut = SimulatedDut::new(3_000_000.0).with_loss_every_nth(1000);
    let r = search(&mut dut, &cfg);
    assert!(r.throughput_fps <= 3_000_000.0 && r.throughput_fps >= 2_970_000.0);
}

#[test]
fn without_allowed_loss_a_device_that_always_drops_has_zero_throughput() {
    let mut cfg = config(0.01);
    // Below 1000 frames per trial the pattern drops nothing: stay above.
    cfg.min_fps = 10_000.0;
    let mut dut = SimulatedDut::new(20_000_000.0).with_loss_every_nth(1000);
    let r = search(&mut dut, &cfg);
    assert_eq!(r.throughput_fps, 0.0);
    assert!(r.trials.iter().all(|t| t.lost_frames > 0));
    assert_eq!(r.trials.last().unwrap().intended_fps, cfg.min_fps);
    assert!(r.trials.len() <= 16, "{} trials", r.trials.len());
    assert!(!r.tester_limited);
    println!("always-lossy device: {} trials to give up", r.trials.len());
}

#[test]
fn a_tester_ceiling_below_capacity_marks_the_result_tester_limited() {
    for resolution in [0.001, 0.01, 0.05] {
        for ceiling in [1_000_000.0, 5_000_000.0, 7_999_000.0] {
            let cfg = config(resolution);
            let mut dut = SimulatedDut::new(8_000_000.0).with_tester_ceiling(ceiling);
            let r = search(&mut dut, &cfg);
            assert!(
                r.tester_limited,
                "ceiling {ceiling}, resolution {resolution}"
            );
            assert!(r.throughput_fps <= ceiling);
            assert!(r.throughput_fps >= ceiling * (1.0 - resolution) - 1.0);
            assert!(r.trials.iter().any(|t| t.generator_short));
        }
    }
}

#[test]
fn a_tester_ceiling_well_above_capacity_is_not_reported() {
    let cfg = config(0.01);
    let mut dut = SimulatedDut::new(8_000_000.0).with_tester_ceiling(9_000_000.0);
    let r = search(&mut dut, &cfg);
    assert!(!r.tester_limited);
    assert!(r.throughput_fps <= 8_000_000.0 && r.throughput_fps >= 7_920_000.0);
    // The line-rate trial was short, but it is not the bound above the result.
    assert!(r.trials[0].generator_short);
}

#[test]
fn a_tester_that_cannot_even_send_the_lowest_rate_is_reported() {
    let mut dut = SimulatedDut::new(8_000_000.0).with_tester_ceiling(50.0);
    let r = search(&mut dut, &config(0.01));
    assert_eq!(r.throughput_fps, 0.0);
    assert!(r.tester_limited);
}

#[test]
fn a_pass_the_generator_did_not_hold_counts_at_the_rate_the_device_saw() {
    // A 100,000 frames/s policer behind a generator that pauses 5 % of
    // every trial above 95,000 frames/s: the device sees 5 % less, so it
    // passes up to 105,000 frames/s on loss alone. A lossless trial at
    // 104,000 showed 104,000 / 1.05 = 99,048 frames/s, not 104,000: the
    // throughput is such a rate, never above the policer's, and better
    // than the 95,000 the generator held.
    for resolution in [0.001, 0.01, 0.02] {
        let cfg = config(resolution);
        let mut dut = SimulatedDut::new(100_000.0).with_pauses_above(95_000.0, 0.05);
        let mut verdicts = Vec::new();
        let r = find_throughput(&mut dut, frame64(), &cfg, LINE_64B_10G, &mut |p| {
            if let Progress::TrialDone { result, passed, .. } = p {
                verdicts.push((result.intended_fps, passed));
            }
        })
        .unwrap();
        assert!(
            r.throughput_fps <= 100_000.0 && r.throughput_fps > 95_000.0,
            "resolution {resolution}: {}",
            r.throughput_fps
        );
        // Shown by a lossless trial that paused: its offered rate.
        let shown = r.throughput_trial().unwrap();
        assert_eq!(shown.lost_frames, 0, "resolution {resolution}");
        assert!(shown.paused_share() > resolution);
        assert_eq!(shown.offered_fps, r.throughput_fps);
        assert!(shown.intended_fps > r.throughput_fps);
        assert!(r.dut_cpu.is_some() || shown.dut_cpu.is_none());
        // Every lossless paused trial passed only where it showed a rate
        // above the best so far; the display said what the search used.
        assert_eq!(verdicts.len(), r.trials.len());
        let mut best = 0.0f64;
        for (t, (fps, passed)) in r.trials.iter().zip(&verdicts) {
            assert_eq!(t.intended_fps, *fps);
            let seen = if t.paused_share() > resolution {
                t.offered_fps
            } else {
                t.intended_fps
            };
            let shows = t.lost_frames == 0 && seen > best;
            assert_eq!(*passed, shows, "resolution {resolution}: {fps}");
            if shows {
                best = seen;
            }
        }
        assert_eq!(best, r.throughput_fps);
    }
}

#[test]
fn a_paused_pass_that_shows_nothing_new_is_the_tester_s_failure() {
    // The generator pauses 30 % of every trial above 50,000 frames/s in
    // front of a device that forwards 1,000,000: from 50,000 on, the
    // device sees at most 0.7 of the trial's rate, so the search ends
    // against the tester, within its resolution of a rate it showed.
    let cfg = config(0.01);
    let mut dut = SimulatedDut::new(1_000_000.0).with_pauses_above(50_000.0, 0.30);
    let r = search(&mut dut, &cfg);
    assert!(r.tester_limited);
    let shown = r.throughput_trial().unwrap();
    assert_eq!(shown.lost_frames, 0);
    assert!(r.throughput_fps <= 1_000_000.0);
    assert!(r.trials.len() <= MAX_TRIALS);
}

#[test]
fn the_overload_hint_counts_the_pauses() {
    // A 100,000 fps policer; the line-rate trial paused 10 %, so the device
    // forwarded its 110,000 frames over 1.1 s: 100,000 fps, not 110,000.
    let cfg = config(0.01);
    let mut dut = SimulatedDut::new(100_000.0).with_pauses_above(100_000.0, 0.10);
    let r = search(&mut dut, &cfg);
    assert_eq!(r.trials[0].rx_frames, 110_000);
    assert!((r.trials[1].intended_fps - 100_000.0).abs() < 1e-6);
    assert!((r.throughput_fps - 100_000.0).abs() < 1e-6);
}

#[test]
fn a_pause_within_the_resolution_changes_nothing() {
    for resolution in [0.01, 0.02] {
        let cfg = config(resolution);
        let plain = search(&mut SimulatedDut::new(1_000_000.0), &cfg);
        let mut runner = PausingDut {
            dut: SimulatedDut::new(1_000_000.0),
            share: resolution * 0.9,
            on: |t| t.lost_frames == 0,
        };
        let paused =
            find_throughput(&mut runner, frame64(), &cfg, LINE_64B_10G, &mut |_| {}).unwrap();
        assert_eq!(paused.throughput_fps, plain.throughput_fps);
        assert_eq!(paused.trials.len(), plain.trials.len());
        assert!(!paused.tester_limited);
    }
}

#[test]
fn a_failure_with_pauses_is_still_the_device_s() {
    // Every failing trial paused 10 %: the device lost frames at an even
    // lower rate than intended, so the result stands and is not marked.
    for capacity in [100_000.0, 1_000_000.0, 7_440_476.0] {
        let cfg = config(0.01);
        let mut runner = PausingDut {
            dut: SimulatedDut::new(capacity),
            share: 0.10,
            on: |t| t.lost_frames > 0,
        };
        let r = find_throughput(&mut runner, frame64(), &cfg, LINE_64B_10G, &mut |_| {}).unwrap();
        let tp = r.throughput_fps;
        assert!(
            tp <= capacity && tp >= capacity * 0.99,
            "capacity {capacity}: {tp}"
        );
        assert!(!r.tester_limited, "capacity {capacity}");
        assert!(r.trials.iter().any(|t| t.paused_share() > 0.05));
    }
}

#[test]
fn the_result_is_filled_at_every_layer() {
    let frame = FrameSize::from_frame(512).unwrap();
    let line = frame.line_rate_fps(10_000_000_000);
    let cfg = ThroughputConfig {
        max_fps: line,
        min_fps: 100.0,
        resolution: 0.01,
        allowed_loss_ratio: 0.0,
        trial_duration: Duration::from_secs(2),
        mix: None,
    };
    let mut dut = SimulatedDut::new(1_000_000.0);
    let r = find_throughput(&mut dut, frame, &cfg, line, &mut |_| {}).unwrap();
    let tp = r.throughput_fps;
    assert!(tp > 990_000.0 && tp <= 1_000_000.0);
    assert_eq!((r.frame_size, r.l3_length), (512, 494));
    assert_eq!(r.throughput_mbps_l2, tp * 512.0 * 8.0 / 1e6);
    assert_eq!(r.throughput_mbps_l1, tp * 532.0 * 8.0 / 1e6);
    assert_eq!(r.throughput_mbps_l3, tp * 494.0 * 8.0 / 1e6);
    assert_eq!(r.throughput_mbps_l4, tp * 466.0 * 8.0 / 1e6);
    assert_eq!(r.line_rate_fps, line);
    assert_eq!(r.line_rate_mbps_l2, line * 512.0 * 8.0 / 1e6);
    assert_eq!(r.trials[0].intended_fps, line);
    assert!(r
        .trials
        .iter()
        .all(|t| t.duration_s == 2.0 && t.frame_size == 512));
    assert_eq!(dut.trials_run, r.trials.len());
}

#[test]
fn progress_is_reported_once_per_trial_and_every_rate_is_inside_the_bracket() {
    for overload in [1.0, 0.5, 0.0] {
        let cfg = config(0.01);
        let mut dut = SimulatedDut::new(2_000_000.0).with_overload_forwarding(overload);
        let mut starting = Vec::new();
        let mut done = Vec::new();
        let r = find_throughput(&mut dut, frame64(), &cfg, LINE_64B_10G, &mut |p| match p {
            Progress::TrialStarting {
                trial_no,
                intended_fps,
                lo,
                hi,
                frame,
                ..
            } => {
                assert_eq!(frame, frame64());
                starting.push((trial_no, intended_fps, lo, hi));
            }
            Progress::TrialDone {
                trial_no,
                result,
                passed,
                ..
            } => {
                done.push((trial_no, result.intended_fps, passed));
            }
        })
        .unwrap();
        let n = r.trials.len();
        assert_eq!(starting.len(), n);
        assert_eq!(done.len(), n);
        for (i, ((s_no, s_fps, lo, hi), (d_no, d_fps, passed))) in
            starting.iter().zip(&done).enumerate()
        {
            assert_eq!((*s_no, *d_no), (i + 1, i + 1));
            assert_eq!(*s_fps, r.trials[i].intended_fps);
            assert_eq!(*d_fps, r.trials[i].intended_fps);
            assert_eq!(*passed, r.trials[i].lost_frames == 0);
            if i == 0 {
                assert_eq!((*s_fps, *lo, *hi), (LINE_64B_10G, 0.0, LINE_64B_10G));
            } else {
                assert!(
                    lo < s_fps && s_fps < hi,
                    "trial {}: {lo} < {s_fps} < {hi}",
                    i + 1
                );
            }
        }
    }
}

#[test]
fn a_runner_error_ends_the_search() {
    struct Failing(usize);
    impl TrialRunner for Failing {
        type Error = String;
        fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, String> {
            self.0 += 1;
            if self.0 == 3 {
                return Err("link down".into());
            }
            Ok(SimulatedDut::new(1_000_000.0).answer(spec))
        }
    }
    let mut runner = Failing(0);
    let err = find_throughput(
        &mut runner,
        frame64(),
        &config(0.01),
        LINE_64B_10G,
        &mut |_| {},
    );
    assert_eq!(err.unwrap_err(), "link down");
    assert_eq!(runner.0, 3);
}

#[test]
fn the_search_ends_whatever_the_runner_answers() {
    // A runner whose verdicts are noise, and whose counts are nonsense.
    struct Noise(u64);
    impl TrialRunner for Noise {
        type Error = Infallible;
        fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, Infallible> {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let mut t = SimulatedDut::new(f64::INFINITY).answer(spec);
            t.rx_frames = self.0 >> 20;
            t.duration_s = if self.0 % 7 == 0 { 0.0 } else { t.duration_s };
            t.loss_ratio = if (self.0 >> 33) % 2 == 0 { 0.0 } else { 0.5 };
            t.generator_short = self.0 % 3 == 0;
            Ok(t)
        }
    }
    for seed in 0..200 {
        for resolution in [1e-9, 1e-6, 0.001, 0.01, 0.5, 2.0, f64::NAN] {
            let mut cfg = config(resolution);
            cfg.min_fps = if seed % 5 == 0 { 0.0 } else { 1.0 };
            let r = find_throughput(&mut Noise(seed), frame64(), &cfg, LINE_64B_10G, &mut |_| {})
                .unwrap();
            assert!(r.trials.len() <= MAX_TRIALS);
            assert!(r.throughput_fps >= 0.0 && r.throughput_fps <= LINE_64B_10G);
            assert!(r.trials.iter().all(|t| t.intended_fps > 0.0));
        }
    }
}

#[test]
fn an_unusable_max_rate_runs_no_trial() {
    for max in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let mut cfg = config(0.01);
        cfg.max_fps = max;
        let mut dut = SimulatedDut::new(1_000.0);
        let r = search(&mut dut, &cfg);
        assert_eq!(r.throughput_fps, 0.0);
        assert!(r.trials.is_empty());
    }
}

#[test]
fn configs_are_validated() {
    let ok = ThroughputConfig::new(LINE_64B_10G, Duration::from_secs(2));
    assert_eq!(ok.validate(), Ok(()));
    let mut c = ok.clone();
    c.max_fps = 0.0;
    assert!(matches!(c.validate(), Err(ConfigError::MaxRate(_))));
    let mut c = ok.clone();
    c.min_fps = c.max_fps * 2.0;
    assert!(matches!(c.validate(), Err(ConfigError::MinRate { .. })));
    let mut c = ok.clone();
    c.resolution = 0.0;
    assert!(matches!(c.validate(), Err(ConfigError::Resolution(_))));
    let mut c = ok.clone();
    c.allowed_loss_ratio = 1.5;
    assert!(matches!(c.validate(), Err(ConfigError::AllowedLoss(_))));
    let mut c = ok;
    c.trial_duration = Duration::ZERO;
    assert_eq!(c.validate(), Err(ConfigError::Duration));
    assert!(ConfigError::Resolution(0.0)
        .to_string()
        .contains("0.01 means 1 %"));
}

#[test]
fn a_mix_is_searched_in_frames_per_second_and_reported_in_its_mean_bytes() {
    let mix = linerate_wire::FrameMix::parse("simple").unwrap();
    let mut cfg = config(0.01);
    cfg.max_fps = mix.line_rate_fps(10_000_000_000);
    cfg.mix = Some(mix.clone());
    let mut dut = SimulatedDut::new(1_000_000.0);
    let r = find_throughput(&mut dut, mix.largest(), &cfg, cfg.max_fps, &mut |_| {}).unwrap();
    assert!(r.throughput_fps > 990_000.0 && r.throughput_fps <= 1_000_000.0);
    // The runner saw the mix in every trial spec, and the result carries it.
    assert!(r
        .trials
        .iter()
        .all(|t| t.mix.as_ref().unwrap().name == "simple IMIX"));
    let mean = mix.mean_bytes(Layer::L2);
    assert!((r.throughput_mbps_l2 - r.throughput_fps * mean * 8e-6).abs() < 1e-6);
    assert!((r.throughput_mbps_l1 - r.throughput_fps * (mean + 20.0) * 8e-6).abs() < 1e-6);
}

#[test]
fn a_line_rate_pass_the_generator_could_not_hold_is_the_tester_s_ceiling() {
    // A device that forwards everything behind a generator that pauses
    // 40 % of every trial: the line-rate trial loses nothing but the
    // device saw only 1 / 1.4 of line rate. That is all the search can
    // show: it ends after that trial, at that rate, marked as the tester's
    // ceiling (it was once reported unmarked, as if the device had failed
    // above it).
    let cfg = config(0.01);
    let mut dut = SimulatedDut::new(LINE_64B_10G).with_pauses_above(0.0, 0.40);
    let r = search(&mut dut, &cfg);
    assert_eq!(r.trials.len(), 1);
    assert_eq!(r.trials[0].lost_frames, 0);
    assert!(
        r.throughput_fps < LINE_64B_10G * 0.75,
        "{}",
        r.throughput_fps
    );
    assert_eq!(r.throughput_fps, r.trials[0].offered_fps);
    assert!(r.tester_limited);
    // A line-rate pass the generator held is the device's: not marked.
    let held = search(&mut SimulatedDut::new(LINE_64B_10G), &cfg);
    assert_eq!(held.throughput_fps, LINE_64B_10G);
    assert!(!held.tester_limited);
}
