use super::*;
use crate::sim::{PausingDut, SimulatedDut};

fn trial(duration_s: f64, loss_ratio: f64) -> TrialResult {
    let intended = (1_000_000.0 * duration_s) as u64;
    let lost = (intended as f64 * loss_ratio).round() as u64;
    TrialResult {
        policy_drops: None,
        loss_where: None,
        tunnels: Vec::new(),
        recovery: None,
        rx_threads: Vec::new(),
        mix: None,
        flows: Vec::new(),
        directions: Vec::new(),
        dut_cpu: None,
        esp: None,
        frame_size: 64,
        l3_length: 46,
        duration_s,
        intended_fps: 1e6,
        offered_fps: 1e6,
        intended_frames: intended,
        tx_frames: intended,
        rx_frames: intended - lost,
        lost_frames: lost,
        loss_ratio,
        reordered: 0,
        duplicated: 0,
        sequence_errors: None,
        latency_ns: None,
        generator_short: false,
        generator_max_stall_ns: None,
        generator_paused_ns: None,
        generator_pauses: None,
        sending_s: None,
        tester_rx_drops: 0,
        stray_frames: 0,
        errored_frames: 0,
        frame_check: String::new(),
        engine: "test".into(),
        receiver: String::new(),
        ip_version: Default::default(),
        vlan: None,
    }
}

fn criteria(loss: f64, exceed: f64, final_s: f64, sum_s: f64) -> Criteria {
    Criteria {
        loss_ratio: loss,
        exceed_ratio: exceed,
        final_trial_duration_s: final_s,
        duration_sum_s: sum_s,
        rate_tolerance: 0.01,
    }
}

use LoadClass::*;

#[test]
fn rfc2544_compliant_goal_one_full_trial_decides() {
    let c = criteria(0.0, 0.0, 1.0, 1.0);
    assert_eq!(classify(&c, &[]), Undecided);
    assert_eq!(classify(&c, &[trial(1.0, 0.0)]), LowerBound);
    assert_eq!(classify(&c, &[trial(1.0, 1e-6)]), UpperBound);
    // A longer trial is full-length too.
    assert_eq!(classify(&c, &[trial(2.0, 0.0)]), LowerBound);
}

#[test]
fn short_trials_make_upper_bounds_but_never_lower_bounds() {
    let c = criteria(0.0, 0.0, 1.0, 1.0);
    assert_eq!(classify(&c, &[trial(0.25, 0.0)]), Undecided);
    assert_eq!(
        classify(&c, &[trial(0.25, 0.0), trial(0.5, 0.0)]),
        Undecided
    );
    assert_eq!(classify(&c, &[trial(0.25, 0.01)]), UpperBound);
    // The full-length trial then decides.
    assert_eq!(
        classify(&c, &[trial(0.25, 0.0), trial(1.0, 0.0)]),
        LowerBound
    );
    // Exceed ratio 0: one loss anywhere is enough for an upper bound.
    assert_eq!(
        classify(&c, &[trial(1.0, 0.0), trial(0.25, 0.01)]),
        UpperBound
    );
}

#[test]
fn the_goal_loss_ratio_separates_low_and_high_loss() {
    let pdr = criteria(0.005, 0.0, 1.0, 1.0);
    assert_eq!(classify(&pdr, &[trial(1.0, 0.003)]), LowerBound);
    assert_eq!(classify(&pdr, &[trial(1.0, 0.005)]), LowerBound);
    assert_eq!(classify(&pdr, &[trial(1.0, 0.0051)]), UpperBound);
}

#[test]
fn tst009_goal_exceed_half_of_two_trials() {
    // The draft's TST009 example: final 1 s, sum 2 s, exceed ratio 0.5.
    let c = criteria(0.0, 0.5, 1.0, 2.0);
    // One zero-loss trial: even a lossy second one would still fit.
    assert_eq!(classify(&c, &[trial(1.0, 0.0)]), LowerBound);
    // One lossy trial: a second is needed.
    assert_eq!(classify(&c, &[trial(1.0, 0.1)]), Undecided);
    assert_eq!(
        classify(&c, &[trial(1.0, 0.1), trial(1.0, 0.0)]),
        LowerBound
    );
    assert_eq!(
        classify(&c, &[trial(1.0, 0.1), trial(1.0, 0.2)]),
        UpperBound
    );
}

#[test]
fn short_low_loss_trials_balance_short_high_loss_ones() {
    // Exceed ratio 0.5: a short low-loss second cancels a short high-loss one.
    let c = criteria(0.0, 0.5, 2.0, 2.0);
    assert_eq!(classify(&c, &[trial(1.0, 0.1), trial(1.0, 0.0)]), Undecided);
    // Without the balancing one, the short lossy second counts: whole sum
    // is the duration sum 2, quantile 1, effective high 1: optimistic.
    assert_eq!(classify(&c, &[trial(1.0, 0.1)]), Undecided);
    assert_eq!(
        classify(&c, &[trial(1.0, 0.1), trial(1.0, 0.1), trial(1.0, 0.1)]),
        UpperBound
    );
}

#[test]
fn conditional_throughput_follows_appendix_b() {
    let c = criteria(0.005, 0.0, 1.0, 1.0);
    assert_eq!(
        conditional_throughput(&c, 1e6, &[trial(1.0, 0.0)]),
        Some(1e6)
    );
    let ct = conditional_throughput(&c, 1e6, &[trial(1.0, 0.003)]).unwrap();
    assert!((ct - 997_000.0).abs() < 1e-6, "{ct}");
    // No full-length trial: none.
    assert_eq!(conditional_throughput(&c, 1e6, &[trial(0.5, 0.0)]), None);
    // Exceed 0.5 over 2 s: the better half decides.
    let c = criteria(0.005, 0.5, 1.0, 2.0);
    let ct = conditional_throughput(&c, 1e6, &[trial(1.0, 0.004), trial(1.0, 0.001)]).unwrap();
    assert!((ct - 999_000.0).abs() < 1e-6, "{ct}");
    // Exceed 0 with seconds missing to the sum: counted as total loss.
    let c = criteria(0.005, 0.0, 1.0, 2.0);
    assert_eq!(
        conditional_throughput(&c, 1e6, &[trial(1.0, 0.0)]),
        Some(0.0)
    );
}

fn frame() -> linerate_wire::Frames {
    linerate_wire::Frames::Size(linerate_wire::FrameSize::from_frame(64).unwrap())
}

const LINE_64: f64 = 14_880_952.380_952_38;

fn run(dut: &mut SimulatedDut, cfg: &MlrConfig) -> MlrSearchResult {
    search(dut, &frame(), cfg, LINE_64, &mut |_| {}).unwrap()
}

fn bounds(r: &MlrSearchResult, goal: usize) -> (f64, f64) {
    let g = &r.goals[goal];
    (
        g.relevant_lower_bound_fps.expect("lower bound"),
        g.relevant_upper_bound_fps.expect("upper bound"),
    )
}

#[test]
fn ideal_device_ndr_within_goal_width_of_its_capacity() {
    let capacity = 1_000_000.0;
    let width = 0.01;
    let cfg = MlrConfig::ndr_pdr(LINE_64, Duration::from_secs(1), width, 0.005);
    let mut dut = SimulatedDut::new(capacity);
    let r = run(&mut dut, &cfg);
    let (lo, hi) = bounds(&r, 0);
    assert!(lo <= capacity && hi > capacity, "NDR [{lo}, {hi}]");
    assert!((capacity - lo) / capacity <= width, "NDR {lo}");
    assert!(r.goals[0].regular && r.goals[1].regular);
    // Ideal device: loss above capacity is 1 - C/r, within 0.5 % up to
    // C / 0.995.
    let (plo, phi) = bounds(&r, 1);
    assert!(
        plo >= lo && plo <= capacity / 0.995 && phi > plo,
        "PDR [{plo}, {phi}]"
    );
    // The conditional throughput is what the device forwards: its capacity.
    let ct = r.goals[1].conditional_throughput_fps.unwrap();
    assert!(
        ct <= capacity + 1.0 && ct >= capacity * (1.0 - width),
        "{ct}"
    );
    assert_eq!(r.trials.len(), dut.trials_run);
    assert!(r.trials.len() < 15, "{} trials", r.trials.len());
    assert_eq!(r.trial_seconds, r.trials.len() as f64);
}

#[test]
fn device_losing_a_little_above_a_rate_has_distinct_ndr_and_pdr() {
    // Capacity 1M/s; above 800k/s it loses every 333rd frame (0.3 %).
    let capacity = 1_000_000.0;
    let width = 0.01;
    let cfg = MlrConfig::ndr_pdr(LINE_64, Duration::from_secs(1), width, 0.005);
    let mut dut = SimulatedDut::new(capacity).with_loss_above(800_000.0, 333);
    let r = run(&mut dut, &cfg);
    let (lo, hi) = bounds(&r, 0);
    assert!(lo <= 800_000.0 && hi > 800_000.0, "NDR [{lo}, {hi}]");
    assert!((800_000.0 - lo) / 800_000.0 <= width, "NDR {lo}");
    // 0.3 % is within the PDR's 0.5 % up to where overload adds 0.2 %:
    // r (1 - 0.005) = C (1 - 1/333).
    let pdr_max = capacity * (1.0 - 1.0 / 333.0) / 0.995;
    let (plo, phi) = bounds(&r, 1);
    assert!(
        plo <= pdr_max && phi > pdr_max * 0.999,
        "PDR [{plo}, {phi}]"
    );
    assert!(plo >= capacity * (1.0 - 2.0 * width), "PDR {plo}");
    assert!(r.goals.iter().all(|g| g.regular));
    // At the PDR bound the device loses 0.3 % or more.
    let ct = r.goals[1].conditional_throughput_fps.unwrap();
    assert!(ct <= plo * (1.0 - 0.0029), "{ct} vs {plo}");
}

#[test]
fn one_search_costs_less_than_two_binary_searches() {
    use crate::throughput::{find_throughput, ThroughputConfig};
    let capacity = 3_000_000.0;
    let d = Duration::from_secs(1);
    let mut ndr = SimulatedDut::new(capacity).with_loss_above(2_000_000.0, 333);
    let mut cfg = ThroughputConfig::new(LINE_64, d);
    find_throughput(&mut ndr, frame().largest(), &cfg, LINE_64, &mut |_| {}).unwrap();
    cfg.allowed_loss_ratio = 0.005;
    let mut pdr = SimulatedDut::new(capacity).with_loss_above(2_000_000.0, 333);
    find_throughput(&mut pdr, frame().largest(), &cfg, LINE_64, &mut |_| {}).unwrap();
    let mut mlr = SimulatedDut::new(capacity).with_loss_above(2_000_000.0, 333);
    let r = run(&mut mlr, &MlrConfig::ndr_pdr(LINE_64, d, 0.01, 0.005));
    assert!(r.goals.iter().all(|g| g.regular));
    assert!(
        mlr.trials_run < ndr.trials_run + pdr.trials_run,
        "MLRsearch {} trials, binary searches {} + {}",
        mlr.trials_run,
        ndr.trials_run,
        pdr.trials_run
    );
}

#[test]
fn short_initial_trials_save_trial_seconds_and_final_bounds_are_full_length() {
    // A device that forwards only half its capacity when overloaded: the
    // overload hint misleads, and the coarse search with short trials pays.
    let capacity = 1_000_000.0;
    let dut = || SimulatedDut::new(capacity).with_overload_forwarding(0.5);
    let final_trial = Duration::from_secs(4);
    let mut cfg = MlrConfig::ndr_pdr(LINE_64, final_trial, 0.01, 0.005);
    let mut plain = dut();
    let all_final = run(&mut plain, &cfg);
    for g in &mut cfg.goals {
        g.initial_trial_duration = Duration::from_millis(500);
    }
    let mut dut = dut();
    let r = run(&mut dut, &cfg);
    assert!(r.trials.iter().any(|t| t.duration_s < 4.0));
    assert!(
        r.trial_seconds < all_final.trial_seconds,
        "{} s with short trials, {} s without",
        r.trial_seconds,
        all_final.trial_seconds
    );
    let (lo, hi) = bounds(&r, 0);
    assert!(lo <= capacity && hi > capacity && (capacity - lo) / capacity <= 0.01);
    // The lower bound stands on a full-length zero-loss trial.
    assert!(r
        .trials
        .iter()
        .any(|t| t.intended_fps == lo && t.duration_s == 4.0 && t.lost_frames == 0));
}

#[test]
fn max_load_lower_bound_ends_at_once_irregular() {
    let cfg = MlrConfig::ndr_pdr(500_000.0, Duration::from_secs(1), 0.01, 0.005);
    let mut dut = SimulatedDut::new(1_000_000.0);
    let r = run(&mut dut, &cfg);
    assert_eq!(dut.trials_run, 1);
    for g in &r.goals {
        assert_eq!(g.relevant_lower_bound_fps, Some(500_000.0));
        assert_eq!(g.relevant_upper_bound_fps, None);
        assert!(!g.regular);
    }
}

#[test]
fn loss_at_every_rate_fails_ndr_down_to_a_few_frames_but_not_pdr() {
    // Every 1000th forwarded frame lost at any rate (0.1 %): only trials
    // of fewer than 1000 frames lose nothing.
    let cfg = MlrConfig::ndr_pdr(1_000_000.0, Duration::from_secs(1), 0.01, 0.005);
    let mut dut = SimulatedDut::new(2_000_000.0).with_loss_every_nth(1000);
    let r = run(&mut dut, &cfg);
    let ndr = &r.goals[0];
    let (lo, hi) = bounds(&r, 0);
    assert!(lo < 1000.0 && hi >= 1000.0, "NDR [{lo}, {hi}]");
    assert!(ndr.regular);
    let pdr = &r.goals[1];
    assert_eq!(pdr.relevant_lower_bound_fps, Some(1_000_000.0));
    assert!(r.trials.len() < MAX_TRIALS, "{}", r.trials.len());
}

#[test]
fn an_upper_bound_the_tester_could_not_offer_is_marked() {
    let cfg = MlrConfig::ndr_pdr(LINE_64, Duration::from_secs(1), 0.01, 0.005);
    let mut dut = SimulatedDut::new(5e6).with_tester_ceiling(1e6);
    let r = run(&mut dut, &cfg);
    assert!(r.goals[0].tester_limited, "{:?}", r.goals[0]);
    let mut dut = SimulatedDut::new(1e6).with_tester_ceiling(5e6);
    let r = run(&mut dut, &cfg);
    assert!(!r.goals[0].tester_limited, "{:?}", r.goals[0]);
}

/// `trial(d, loss)` whose generator paused `share` of its duration.
fn paused(duration_s: f64, loss_ratio: f64, share: f64) -> TrialResult {
    let mut t = trial(duration_s, loss_ratio);
    t.generator_paused_ns = Some((duration_s * share * 1e9) as u64);
    t.generator_pauses = Some(1);
    t
}

#[test]
fn a_low_loss_trial_whose_generator_did_not_hold_the_rate_counts_as_high_loss() {
    // Compliant goal, tolerance 1 %: a 5 % pause makes an upper bound, a
    // 0.5 % one changes nothing, and by loss alone the pause is ignored.
    let c = criteria(0.0, 0.0, 1.0, 1.0);
    assert_eq!(classify(&c, &[paused(1.0, 0.0, 0.05)]), UpperBound);
    assert_eq!(classify(&c, &[paused(1.0, 0.0, 0.005)]), LowerBound);
    let by_loss = Criteria {
        rate_tolerance: f64::INFINITY,
        ..c
    };
    assert_eq!(classify(&by_loss, &[paused(1.0, 0.0, 0.05)]), LowerBound);
    // Exceed ratio 50 % over two trials: a held trial balances a paused one.
    let c = criteria(0.005, 0.5, 1.0, 2.0);
    let both = [paused(1.0, 0.0, 0.05), trial(1.0, 0.003)];
    assert_eq!(classify(&c, &both), LowerBound);
    // The conditional throughput is the held trial's, not the paused one's.
    let ct = conditional_throughput(&c, 1e6, &both).unwrap();
    assert!((ct - 1e6 * (1.0 - 0.003)).abs() < 1e-6, "{ct}");
}

#[test]
fn a_low_loss_trial_that_paused_counts_at_the_rate_it_showed_and_marks_the_goal() {
    // A 100,000 fps policer behind a generator that pauses 5 % of every
    // trial above 95,000 fps: the device sees 5 % less than the load, so
    // on loss alone it passes up to 105,000 fps. Such a trial is high-loss
    // at its load and a low-loss trial at the rate the device saw (load /
    // 1.05): the bounds are rates some trial really showed, never above
    // the policer, and the goal is marked: the tester, not the device,
    // failed at the upper bound.
    for cfg in [
        MlrConfig::ndr_pdr(LINE_64, Duration::from_secs(1), 0.01, 0.005),
        rfc2544_mlrsearch_goals(),
    ] {
        let mut dut = SimulatedDut::new(100_000.0).with_pauses_above(95_000.0, 0.05);
        let mut verdicts = Vec::new();
        let r = search(&mut dut, &frame(), &cfg, LINE_64, &mut |s| {
            if let Step::Done { result, passed, .. } = s {
                verdicts.push((result.intended_fps, passed));
            }
        })
        .unwrap();
        assert!(r.trials.len() <= 6, "{}", summary(&r));
        for (gi, g) in r.goals.iter().enumerate() {
            let (lo, hi) = bounds(&r, gi);
            let name = &g.goal.name;
            // Above 95,000: the 100,000-fps trial showed 95,238.
            assert!((95_000.0..=100_000.0).contains(&lo), "{name}: {lo}");
            // Shown by a trial: held at its load, or the rate a paused
            // one offered.
            assert!(
                r.trials.iter().any(|t| {
                    (t.intended_fps == lo && t.paused_share() == 0.0) || t.offered_fps == lo
                }),
                "{name}: {lo} {}",
                summary(&r)
            );
            assert!(relative_width(lo, hi) <= 0.01 + 1e-9, "{name}: {lo} {hi}");
            assert!(g.tester_limited, "{:?}", g);
            let ct = g.conditional_throughput_fps.unwrap();
            assert!(ct <= lo, "{name}: {ct}");
        }
        // Trials above 95,000 fps lost nothing, yet the display did not
        // call them passed: not at the load they were run at.
        assert!(r
            .trials
            .iter()
            .any(|t| t.lost_frames == 0 && t.intended_fps > 95_000.0));
        for (t, (fps, passed)) in r.trials.iter().zip(&verdicts) {
            assert_eq!(t.intended_fps, *fps);
            assert_eq!(*passed, t.lost_frames == 0 && t.intended_fps <= 95_000.0);
        }
    }
}

#[test]
fn a_pause_within_the_width_changes_nothing() {
    let cfg = MlrConfig::ndr_pdr(LINE_64, Duration::from_secs(1), 0.01, 0.005);
    for capacity in [100_000.0, 1_000_000.0] {
        let plain = run(&mut SimulatedDut::new(capacity), &cfg);
        // Low-loss trials paused within the width (1 %).
        let mut runner = PausingDut {
            dut: SimulatedDut::new(capacity),
            share: 0.009,
            on: |t| t.loss_ratio <= 0.005,
        };
        let r = search(&mut runner, &frame(), &cfg, LINE_64, &mut |_| {}).unwrap();
        assert!(r.trials.iter().any(|t| t.paused_share() > 0.0));
        for (g, p) in r.goals.iter().zip(&plain.goals) {
            assert_eq!(g.relevant_lower_bound_fps, p.relevant_lower_bound_fps);
            assert_eq!(g.relevant_upper_bound_fps, p.relevant_upper_bound_fps);
            assert!(!g.tester_limited, "{capacity}: {g:?}");
        }
        assert_eq!(r.trials.len(), plain.trials.len());
    }
}

#[test]
fn failures_with_pauses_stay_the_device_s() {
    // Trials high-loss for every goal paused 10 %: the device lost frames
    // at an even lower rate than the load, so the bounds stand unmarked.
    let cfg = MlrConfig::ndr_pdr(LINE_64, Duration::from_secs(1), 0.01, 0.005);
    for capacity in [100_000.0, 1_000_000.0] {
        let mut runner = PausingDut {
            dut: SimulatedDut::new(capacity),
            share: 0.10,
            on: |t| t.loss_ratio > 0.005,
        };
        let r = search(&mut runner, &frame(), &cfg, LINE_64, &mut |_| {}).unwrap();
        assert!(r.trials.iter().any(|t| t.paused_share() > 0.05));
        assert_finds(&r, 0, capacity);
        assert_finds(&r, 1, capacity / 0.995);
        assert!(r.goals.iter().all(|g| !g.tester_limited), "{r:?}");
    }
}

#[test]
fn the_forwarding_rate_hint_counts_the_pauses() {
    // A 100,000 fps policer; trials above it pause 10 %, so the device
    // forwards 110,000 frames in a 1-s trial there, over 1.1 s: the hint
    // is 100,000 fps, not 110,000.
    let cfg = MlrConfig::ndr_pdr(LINE_64, Duration::from_secs(1), 0.01, 0.005);
    let mut dut = SimulatedDut::new(100_000.0).with_pauses_above(100_000.0, 0.10);
    let r = run(&mut dut, &cfg);
    assert_eq!(r.trials[0].rx_frames, 110_000);
    assert!(
        (r.trials[1].intended_fps - 100_000.0).abs() < 1.0,
        "{}",
        summary(&r)
    );
    assert_finds(&r, 0, 100_000.0);
}

#[test]
fn goals_outside_the_draft_are_refused() {
    let mut g = SearchGoal::compliant("X", 0.0, Duration::from_secs(1), 0.01);
    assert!(g.validate().is_ok());
    g.loss_ratio = 1.0;
    assert!(matches!(g.validate(), Err(GoalError::LossRatio(..))));
    g.loss_ratio = 0.0;
    g.width = 0.0;
    assert!(matches!(g.validate(), Err(GoalError::Width(..))));
    g.width = 0.01;
    g.initial_trial_duration = Duration::from_secs(2);
    assert!(matches!(g.validate(), Err(GoalError::InitialDuration(..))));
}

#[test]
fn rfc9971_example_search_classifies_as_the_rfc_does() {
    // RFC 9971's example search (its appendix "Example Search"): one load,
    // four goals, six points in time; the RFC's tables give the classes.
    let rfc2544 = criteria(0.0, 0.0, 60.0, 60.0);
    let tst009 = criteria(0.0, 0.5, 60.0, 120.0);
    let one_s = criteria(0.005, 0.5, 1.0, 120.0);
    let exceed20 = criteria(0.005, 0.2, 60.0, 60.0);
    let goals = [rfc2544, tst009, one_s, exceed20];
    let mut trials = Vec::new();
    let mut at = |add: &[(usize, f64, f64)], expected: [LoadClass; 4]| {
        for &(n, d, l) in add {
            trials.extend((0..n).map(|_| trial(d, l)));
        }
        for (g, want) in goals.iter().zip(expected) {
            assert_eq!(
                classify(g, &trials),
                want,
                "{g:?} after {} trials",
                trials.len()
            );
        }
    };
    // Point 1: 59 short good.
    at(&[(59, 1.0, 0.0)], [Undecided; 4]);
    // Point 2: first short bad.
    at(
        &[(1, 1.0, 0.01)],
        [UpperBound, Undecided, Undecided, Undecided],
    );
    // Point 3: last short bad.
    at(
        &[(59, 1.0, 0.01)],
        [UpperBound, Undecided, Undecided, UpperBound],
    );
    // Point 4: last short good.
    at(
        &[(1, 1.0, 0.0)],
        [UpperBound, Undecided, LowerBound, UpperBound],
    );
    // Point 5: first long bad (0.1 %). The RFC's table says Lower Bound
    // for the "20 % exceed" goal here and at point 6, but its own figures
    // there (optimistic exceed ratio 42.857 % and 27.273 %, both above the
    // goal's 20 %) and its pseudocode make it an Upper Bound: the
    // pseudocode is what this follows.
    at(
        &[(1, 60.0, 0.001)],
        [UpperBound, Undecided, LowerBound, UpperBound],
    );
    // Point 6: first long good.
    at(
        &[(1, 60.0, 0.0)],
        [UpperBound, LowerBound, LowerBound, UpperBound],
    );
    // Its conditional throughputs at 1,000,000 frames/s: goals 2 and 3
    // 1,000,000, goal 4 999,000.
    let ct = |g: &Criteria| conditional_throughput(g, 1e6, &trials).unwrap();
    assert!((ct(&tst009) - 1e6).abs() < 1e-6);
    assert!((ct(&one_s) - 1e6).abs() < 1e-6);
    assert!((ct(&exceed20) - 999_000.0).abs() < 1e-6);
}

/// One goal named `name`: loss ratio, exceed ratio, final trial 1 s,
/// duration sum `sum_s`, width 1 %.
fn goal(name: &str, loss: f64, exceed: f64, sum_s: u64) -> SearchGoal {
    SearchGoal {
        exceed_ratio: exceed,
        duration_sum: Duration::from_secs(sum_s),
        ..SearchGoal::compliant(name, loss, Duration::from_secs(1), 0.01)
    }
}

/// CSIT-like goals: NDR and PDR (RFC 2544 compliant, exceed ratio 0),
/// and the same loss ratios with exceed ratio 50 % over 4 trial-seconds.
fn csit_goals() -> Vec<SearchGoal> {
    vec![
        goal("NDR", 0.0, 0.0, 1),
        goal("PDR", 0.005, 0.0, 1),
        goal("NDR50", 0.0, 0.5, 4),
        goal("PDR50", 0.005, 0.5, 4),
    ]
}

fn search_goals(dut: &mut SimulatedDut, goals: Vec<SearchGoal>) -> MlrSearchResult {
    let cfg = MlrConfig {
        goals,
        max_fps: LINE_64,
        min_fps: LINE_64 / 10_000.0,
    };
    run(dut, &cfg)
}

/// Asserts that goal `gi` is regular, its lower bound at most `answer`
/// and within the goal width of it, its upper bound above it (to 5
/// frames/s: the trials send whole frames, and a rare loss moves a loss
/// ratio's edge by a few).
fn assert_finds(r: &MlrSearchResult, gi: usize, answer: f64) {
    let g = &r.goals[gi];
    let (lo, hi) = bounds(r, gi);
    assert!(g.regular, "{}: {g:?}", g.goal.name);
    assert!(
        lo <= answer + 5.0 && hi > answer - 5.0 && (answer - lo) / answer <= g.goal.width + 1e-6,
        "{}: [{lo}, {hi}], answer {answer}, trials {}",
        g.goal.name,
        summary(r)
    );
}

/// Trials run above `fps`.
fn trials_above(r: &MlrSearchResult, fps: f64) -> usize {
    r.trials.iter().filter(|t| t.intended_fps > fps).count()
}

/// A fresh simulated DUT.
type MakeDut = fn() -> SimulatedDut;

/// The trial bound the issue asks for: every goal, alone or together.
const TRIAL_BOUND: usize = 30;

#[test]
fn issue_15_exceed_ratio_50_converges_against_a_30_kpps_policer() {
    // linerate mlrsearch --sizes 64 --trial-duration 1s --duration-sum 4s
    // --exceed-ratio 50: NDR and PDR with exceed ratio 50 %, 1 s trials,
    // 4 trial-seconds per load, width 1 %, Max Load the 64-byte line rate,
    // against a DUT that polices at 30,000 packets/s.
    let policer = 30_000.0;
    let mut cfg = MlrConfig::ndr_pdr(LINE_64, Duration::from_secs(1), 0.01, 0.005);
    for g in &mut cfg.goals {
        g.exceed_ratio = 0.5;
        g.duration_sum = Duration::from_secs(4);
    }
    let mut dut = SimulatedDut::new(policer);
    let r = run(&mut dut, &cfg);
    assert_finds(&r, 0, policer);
    assert_finds(&r, 1, policer / 0.995);
    let ct = r.goals[0].conditional_throughput_fps.unwrap();
    assert!(ct <= policer && ct >= policer * 0.99, "{ct}");
    // One trial at line rate, the hint at 30,000, the three at 30,300 that
    // make it an upper bound: the device's rate is found at once.
    assert!(r.trials.len() <= 8, "{} trials", r.trials.len());
    assert!(trials_above(&r, policer) <= 4, "{:?}", r.trials);
}

#[test]
fn a_policer_is_found_for_every_csit_goal_alone_and_together() {
    let policer = 30_000.0;
    let answers = [policer, policer / 0.995, policer, policer / 0.995];
    let goals = csit_goals();
    for (gi, g) in goals.iter().enumerate() {
        let mut dut = SimulatedDut::new(policer);
        let r = search_goals(&mut dut, vec![g.clone()]);
        assert_finds(&r, 0, answers[gi]);
        assert!(
            r.trials.len() <= TRIAL_BOUND,
            "{}: {}",
            g.name,
            r.trials.len()
        );
        assert!(
            trials_above(&r, answers[gi]) <= 4,
            "{}: {:?}",
            g.name,
            r.trials
        );
    }
    let mut dut = SimulatedDut::new(policer);
    let r = search_goals(&mut dut, goals);
    assert_eq!(r.trials.len(), 6, "{}", summary(&r));
    for (gi, a) in answers.iter().enumerate() {
        assert_finds(&r, gi, *a);
    }
    assert!(r.trials.len() <= TRIAL_BOUND, "{}", r.trials.len());
}

#[test]
fn rare_random_losses_below_the_knee_exceed_ratio_50_finds_the_knee() {
    // Up to 1 Mpps a trial loses 3 frames with probability 0.1 (a stall
    // now and then); above, everything beyond 1 Mpps is lost. The PDR (3
    // frames are far below 0.5 %) and both exceed-ratio-50 % goals have a
    // known answer; the NDR with exceed ratio 0 takes whatever load was
    // lucky, so it is only bounded.
    let knee = 1_000_000.0;
    let answers = [knee, knee / 0.995, knee, knee / 0.995];
    for seed in 0..20u64 {
        let dut = || SimulatedDut::new(knee).with_rare_loss(0.1, 3, seed);
        for (gi, g) in csit_goals().into_iter().enumerate() {
            let name = g.name.clone();
            let mut d = dut();
            let r = search_goals(&mut d, vec![g]);
            assert!(
                r.trials.len() <= TRIAL_BOUND,
                "seed {seed} {name}: {}",
                r.trials.len()
            );
            if gi == 0 {
                let (lo, hi) = bounds(&r, 0);
                assert!(r.goals[0].regular && lo <= knee && lo >= 0.8 * knee && hi > lo);
            } else {
                assert_finds(&r, 0, answers[gi]);
            }
        }
        // Both exceed-ratio-50 % goals in one search.
        let mut d = dut();
        let r = search_goals(&mut d, csit_goals()[2..].to_vec());
        assert!(
            r.trials.len() <= TRIAL_BOUND,
            "seed {seed}: {}",
            summary(&r)
        );
        assert_finds(&r, 0, answers[2]);
        assert_finds(&r, 1, answers[3]);
        // All four: every further trial the exceed-ratio-50 % goals run
        // at a load is another chance for a rare loss to make it an upper
        // bound of the exceed-ratio-0 NDR, which then steps down again;
        // the others still find their answers.
        let mut d = dut();
        let r = search_goals(&mut d, csit_goals());
        assert!(r.trials.len() <= 40, "seed {seed}: {}", summary(&r));
        for (gi, a) in answers.iter().enumerate().skip(1) {
            assert_finds(&r, gi, *a);
        }
    }
}

/// The trials as "load/lost" for an assertion's message.
fn summary(r: &MlrSearchResult) -> String {
    r.trials
        .iter()
        .map(|t| format!("{:.0}/{}", t.intended_fps, t.lost_frames))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The trial counts docs/METHODS.md quotes: `cargo test -p
/// linerate-method trial_counts -- --ignored --nocapture`
/// (`crates/method/scripts/csit_crosscheck.py` prints CSIT's for the same
/// DUTs and goals).
#[test]
#[ignore]
fn trial_counts() {
    let goals = csit_goals();
    let sets: Vec<(&str, Vec<SearchGoal>)> = goals
        .iter()
        .map(|g| (g.name.as_str(), vec![g.clone()]))
        .chain([
            ("NDR+PDR", goals[..2].to_vec()),
            ("NDR50+PDR50", goals[2..].to_vec()),
            ("all four", goals.clone()),
        ])
        .collect();
    let duts: [(&str, MakeDut); 4] = [
        ("policer 30 kpps", || SimulatedDut::new(30_000.0)),
        ("policer 30 kpps, 1000-packet bucket", || {
            SimulatedDut::new(30_000.0).with_buffer(1_000)
        }),
        ("collapsing", || {
            SimulatedDut::new(1e6).with_overload_forwarding(0.5)
        }),
        ("lossy above 800k", || {
            SimulatedDut::new(1e6).with_loss_above(800_000.0, 333)
        }),
    ];
    for (dut_name, dut) in duts {
        for (name, set) in &sets {
            let mut d = dut();
            let r = search_goals(&mut d, set.clone());
            println!(
                "{dut_name}, {name}: {} trials: {}",
                r.trials.len(),
                summary(&r)
            );
        }
    }
    for (name, set) in &sets {
        let mut counts: Vec<usize> = (0..200u64)
            .map(|seed| {
                let mut d = SimulatedDut::new(1e6).with_rare_loss(0.1, 3, seed);
                search_goals(&mut d, set.clone()).trials.len()
            })
            .collect();
        counts.sort();
        let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
        println!(
            "rare losses, {name}: over 200 seeds mean {mean:.1} median {} p90 {} max {}",
            counts[100], counts[180], counts[199]
        );
    }
    // `rfc2544 --mlrsearch`: the zero-loss search (1-s trials), then NDR
    // and PDR at exceed ratio 50 % over 2 s, alone and counting it.
    let cfg = rfc2544_mlrsearch_goals();
    for (dut_name, dut) in duts {
        let mut d = dut();
        let zero_loss = zero_loss_trials(&mut d, 1);
        let after = run_after(&mut d, &cfg, &zero_loss);
        let alone = run(&mut dut(), &cfg);
        println!(
            "{dut_name}, rfc2544 --mlrsearch: zero-loss search {} trials, then MLRsearch {} (alone {})",
            zero_loss.len(),
            after.trials.len(),
            alone.trials.len()
        );
    }
    let stats = |counts: &mut Vec<usize>| {
        counts.sort();
        let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
        format!("mean {mean:.1} max {}", counts[counts.len() - 1])
    };
    let (mut zero, mut after, mut alone) = (Vec::new(), Vec::new(), Vec::new());
    for seed in 0..200u64 {
        let dut = || SimulatedDut::new(1e6).with_rare_loss(0.1, 3, seed);
        let mut d = dut();
        let z = zero_loss_trials(&mut d, 1);
        zero.push(z.len());
        after.push(run_after(&mut d, &cfg, &z).trials.len());
        alone.push(run(&mut dut(), &cfg).trials.len());
    }
    println!(
        "rare losses, rfc2544 --mlrsearch over 200 seeds: zero-loss search {}, then MLRsearch {} (alone {})",
        stats(&mut zero),
        stats(&mut after),
        stats(&mut alone)
    );
}

#[test]
fn collapsing_and_slightly_lossy_devices_converge_for_every_csit_goal() {
    // A device that forwards half its capacity when overloaded (the hint
    // misleads: the search gallops up from it), and one that loses every
    // 333rd frame above 800 kpps (0.3 %: NDR and PDR apart).
    let c = 1_000_000.0;
    let pdr_lossy = c * (1.0 - 1.0 / 333.0) / 0.995;
    let cases: [(&str, MakeDut, [f64; 4]); 2] = [
        (
            "collapsing",
            || SimulatedDut::new(1e6).with_overload_forwarding(0.5),
            [c, c, c, c],
        ),
        (
            "lossy above 800k",
            || SimulatedDut::new(1e6).with_loss_above(800_000.0, 333),
            [800_000.0, pdr_lossy, 800_000.0, pdr_lossy],
        ),
    ];
    for (name, dut, answers) in cases {
        for (gi, g) in csit_goals().into_iter().enumerate() {
            let goal = g.name.clone();
            let mut d = dut();
            let r = search_goals(&mut d, vec![g]);
            assert!(
                r.trials.len() <= TRIAL_BOUND,
                "{name} {goal}: {}",
                summary(&r)
            );
            assert_finds(&r, 0, answers[gi]);
        }
        let mut d = dut();
        let r = search_goals(&mut d, csit_goals());
        assert!(r.trials.len() <= TRIAL_BOUND, "{name}: {}", summary(&r));
        for (gi, a) in answers.iter().enumerate() {
            assert_finds(&r, gi, *a);
        }
    }
}

#[test]
fn a_policer_with_a_bucket_passes_its_burst_too() {
    // The lab's nft policer: 30,000 packets/s with a 1,000-packet bucket,
    // so a 1 s trial gets 31,000 frames through. The issue's goals.
    let mut cfg = MlrConfig::ndr_pdr(LINE_64, Duration::from_secs(1), 0.01, 0.005);
    for g in &mut cfg.goals {
        g.exceed_ratio = 0.5;
        g.duration_sum = Duration::from_secs(4);
    }
    let mut dut = SimulatedDut::new(30_000.0).with_buffer(1_000);
    let r = run(&mut dut, &cfg);
    assert_finds(&r, 0, 31_000.0);
    assert_finds(&r, 1, 31_000.0 / 0.995);
    assert_eq!(r.trials.len(), 6, "{}", summary(&r));
}

/// `rfc2544 --mlrsearch`'s goals after 1-s trials: NDR and PDR, exceed
/// ratio 50 % over 2 s, width 1 %.
fn rfc2544_mlrsearch_goals() -> MlrConfig {
    MlrConfig::after_zero_loss(LINE_64, LINE_64 / 10_000.0, Duration::from_secs(1))
}

/// The zero-loss binary search's trials (1-s trials, resolution 1 %)
/// against `dut`, as `rfc2544` runs it before `--mlrsearch`.
fn zero_loss_trials(dut: &mut SimulatedDut, trial_s: u64) -> Vec<TrialResult> {
    use crate::throughput::{find_throughput, ThroughputConfig};
    let cfg = ThroughputConfig::new(LINE_64, Duration::from_secs(trial_s));
    find_throughput(dut, frame().largest(), &cfg, LINE_64, &mut |_| {})
        .unwrap()
        .trials
}

fn run_after(dut: &mut SimulatedDut, cfg: &MlrConfig, earlier: &[TrialResult]) -> MlrSearchResult {
    search_after(dut, &frame(), cfg, LINE_64, earlier, &mut |_| {}).unwrap()
}

#[test]
fn earlier_trials_count_and_save_trials_with_the_same_answers() {
    // Devices with a known NDR and PDR: a policer, a policer with a
    // bucket, one that loses 0.3 % above 800k/s, and rare stalls.
    let makes: [(&str, MakeDut, f64, f64); 4] = [
        (
            "policer",
            || SimulatedDut::new(30_000.0),
            30_000.0,
            30_000.0 / 0.995,
        ),
        (
            "bucket",
            || SimulatedDut::new(30_000.0).with_buffer(1_000),
            31_000.0,
            31_000.0 / 0.995,
        ),
        (
            "lossy",
            || SimulatedDut::new(1_000_000.0).with_loss_above(800_000.0, 333),
            800_000.0,
            1_000_000.0 * (1.0 - 1.0 / 333.0) / 0.995,
        ),
        (
            "stalls",
            || SimulatedDut::new(1_000_000.0).with_rare_loss(0.1, 3, 7),
            1_000_000.0,
            1_000_000.0 / 0.995,
        ),
    ];
    for (name, make, ndr, pdr) in makes {
        let cfg = rfc2544_mlrsearch_goals();
        let mut alone = make();
        let fresh = run(&mut alone, &cfg);
        let mut dut = make();
        let earlier = zero_loss_trials(&mut dut, 1);
        let before = dut.trials_run;
        let r = run_after(&mut dut, &cfg, &earlier);
        // The earlier trials are counted, not run again nor listed again.
        assert_eq!(r.reused_trials, earlier.len(), "{name}");
        assert_eq!(r.trials.len(), dut.trials_run - before, "{name}");
        assert_eq!(r.trial_seconds, r.trials.len() as f64, "{name}");
        assert_finds(&r, 0, ndr);
        assert_finds(&r, 1, pdr);
        assert!(
            r.trials.len() < fresh.trials.len(),
            "{name}: {} trials after the zero-loss search, {} alone ({})",
            r.trials.len(),
            fresh.trials.len(),
            summary(&r)
        );
    }
}

#[test]
fn earlier_trials_longer_than_the_final_duration_are_full_length() {
    // 2-s trials of the zero-loss search decide a load for goals of 1-s
    // trials over 2 s: a passing one is a lower bound, a failing one an
    // upper bound, so against a policer nothing is left to measure.
    let mut dut = SimulatedDut::new(30_000.0);
    let earlier = zero_loss_trials(&mut dut, 2);
    let cfg = rfc2544_mlrsearch_goals();
    let r = run_after(&mut dut, &cfg, &earlier);
    assert_finds(&r, 0, 30_000.0);
    let ndr_new = r
        .trials
        .iter()
        .filter(|t| t.intended_fps <= 30_300.0)
        .count();
    assert_eq!(
        ndr_new,
        0,
        "the NDR's bracket came decided: {}",
        summary(&r)
    );
}

#[test]
fn earlier_trials_outside_the_search_range_are_not_counted() {
    // A trial above Max Load (another search's range) or at no load is
    // none of this search's business.
    let mut dut = SimulatedDut::new(30_000.0);
    let mut earlier = zero_loss_trials(&mut dut, 1);
    let mut above = earlier[0].clone();
    above.intended_fps = LINE_64 * 2.0;
    let mut nothing = earlier[0].clone();
    nothing.intended_fps = f64::NAN;
    earlier.push(above);
    earlier.push(nothing);
    let r = run_after(&mut dut, &rfc2544_mlrsearch_goals(), &earlier);
    assert_eq!(r.reused_trials, earlier.len() - 2);
    assert_finds(&r, 0, 30_000.0);
}

#[test]
fn paused_trials_shown_below_their_load_converge_for_every_csit_goal() {
    // A 100,000 fps policer; every trial above 90,000 fps pauses 5 %.
    // Goals that need several trials at one load for a lower bound (4
    // trial-seconds, exceed ratio 50 %) get one trial at each shown rate:
    // the search must still end, within the trial bound, with a lower
    // bound the device upholds, within the goal's width of its upper one.
    let goals = csit_goals();
    for g in goals.iter().map(|g| vec![g.clone()]).chain([goals.clone()]) {
        let mut dut = SimulatedDut::new(100_000.0).with_pauses_above(90_000.0, 0.05);
        let r = search_goals(&mut dut, g);
        assert!(r.trials.len() <= TRIAL_BOUND, "{}", summary(&r));
        for (gi, goal) in r.goals.iter().enumerate() {
            let (lo, hi) = bounds(&r, gi);
            assert!(lo <= 100_000.0 / (1.0 - goal.goal.loss_ratio), "{lo}");
            assert!(
                lo >= 90_000.0 * 0.99,
                "{}: {lo} {}",
                goal.goal.name,
                summary(&r)
            );
            assert!(relative_width(lo, hi) <= 0.01 + 1e-9, "{lo} {hi}");
        }
    }
}
