use super::*;
use crate::sim::SimulatedDut;

fn trial(duration_s: f64, loss_ratio: f64) -> TrialResult {
    let intended = (1_000_000.0 * duration_s) as u64;
    let lost = (intended as f64 * loss_ratio).round() as u64;
    TrialResult {
        policy_drops: None,
        loss_where: None,
        mix: None,
        flows: Vec::new(),
        directions: Vec::new(),
        dut_cpu: None,
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
        latency_ns: None,
        generator_short: false,
        generator_max_stall_ns: None,
        generator_paused_ns: None,
        generator_pauses: None,
        tester_rx_drops: 0,
        stray_frames: 0,
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
