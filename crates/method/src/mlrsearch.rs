//! MLRsearch (RFC 9971, draft-ietf-bmwg-mlrsearch; FD.io CSIT's
//! implementation is the reference): several throughputs — typically NDR
//! (no loss) and PDR (e.g. 0.5 % loss) — found in one search, from one
//! shared set of trials.
//!
//! # The RFC's terms, as used here
//!
//! A **search goal** ([`SearchGoal`]) has a Goal Loss Ratio, a Goal Exceed
//! Ratio, a Goal Final Trial Duration, a Goal Duration Sum and a Goal Width
//! (relative here: `(upper − lower) / upper`), plus the optional Goal
//! Initial Trial Duration.
//!
//! Against a goal, a trial is **high-loss** when its loss ratio is above
//! the goal's loss ratio (else low-loss), and **short** when its duration
//! is below the goal's final trial duration (else full-length).
//!
//! A trial whose generator did not hold its rate counts as high-loss too,
//! whatever it lost: held up by the machine, the generator pauses rather
//! than catch up in a burst (`TrialResult::generator_paused_ns`), so the
//! device saw the trial's frames over its duration plus the pauses, at a
//! rate lower than the load by the paused share. A low-loss trial that
//! paused more than the goal's width of its duration
//! (`TrialResult::held_rate`) showed only that the device upholds the
//! goal at a lower load, so it does not count as low-loss at its own
//! (conservatively, it counts as high-loss there). It also counts as a
//! low-loss trial at the rate the device really saw, its frames over the
//! time they took (`offered_fps`, [`Criteria::shown_load`]), as the RFC
//! 2544 search counts it: on a machine whose tester is held up now and
//! then, a search that had only the trials' loads would fail every paused
//! load and wander far below what the device forwarded. Within the width,
//! the rate the device saw differs from the load by less than the
//! precision the goal asks for, and the trial counts at its load. The
//! tolerance is the goal's width at every level of the controller (not an
//! intermediate target's wider one), so a trial's verdict for a goal never
//! changes. A goal whose relevant upper bound is one only because of
//! such trials (counted by their loss alone it would not be) is marked
//! `tester_limited`: the device may uphold the goal above it. A trial that lost more than the goal allows is high-loss
//! anyway, paused or not: pauses never make a failure the tester's.
//!
//! **Load classification** ([`classify`], RFC 9971's Appendix A, "Load
//! Classification Code"): all trials at one intended load make it a
//! *lower bound* (the goal is certain to be upheld there whatever further
//! trials up to the duration sum would show), an *upper bound* (certain
//! to fail) or *undecided*. Short low-loss trials never make a lower bound
//! on their own; with an exceed ratio of 0 any high-loss trial, even
//! short, makes an upper bound. In the RFC's terms, with `er` the exceed
//! ratio: the effective high-loss sum is the full-length high-loss
//! seconds plus the short high-loss seconds beyond `short low-loss × er /
//! (1 − er)`; the effective whole sum is the larger of (full-length
//! low-loss + effective high-loss) and the duration sum; the load is
//! *optimistic* (could still be a lower bound) when the effective
//! high-loss sum is at most `er ×` the whole, and *pessimistic* (a lower
//! bound even if every missing second were high-loss) when the whole minus
//! the full-length low-loss seconds is. Both: lower bound; neither: upper
//! bound; else undecided.
//!
//! The **relevant upper bound** is the smallest load classified as an
//! upper bound; the **relevant lower bound** the largest lower bound below
//! it. A goal result is *regular* when both exist and lie within the goal
//! width. The **conditional throughput** ([`conditional_throughput`],
//! Appendix B) is the relevant lower bound's load times (1 − the loss ratio
//! of its full-length trials at the exceed-ratio quantile): the forwarding
//! rate a trial there typically achieves.
//!
//! # How loads and durations are chosen (the controller)
//!
//! The RFC leaves this free; this one follows CSIT's ideas:
//!
//! - Each goal is reached through a chain of *targets*: the goal itself,
//!   and coarser intermediate targets with half the trial duration and
//!   twice the width each, down to the initial trial duration. Targets are
//!   solved coarse to fine, all goals at one level before the next level,
//!   stricter loss ratios first; every trial counts for every target.
//! - A target searches on *provisional* classes (`provisionally_lower`):
//!   a decided load keeps its class, an undecided one counts as lower
//!   while its effective high-loss seconds are within the exceed ratio of
//!   the seconds measured there. One trial per load is enough to move on;
//!   with an exceed ratio of 0 and the duration sum one trial, provisional
//!   and decided classes are the same.
//! - The first trial runs at Max Load. After a high-loss trial at the
//!   provisional upper bound, the next load is what the device forwarded
//!   there (frames received over the duration and the generator's pauses,
//!   in whole frames, divided by 1 − the goal loss ratio): the
//!   *forwarding-rate hint*, taken whenever it lies more than a width
//!   inside the bracket. Without a lower bound the load then steps down,
//!   without an upper bound up, by the width doubled on each step
//!   (external search). With both, it gallops up from a lower bound that
//!   came from the hint, from another target, or that lies at about what
//!   the device forwarded at the upper bound, while the step stays below
//!   the bracket's geometric middle; else it bisects there (internal
//!   search).
//! - An undecided end of the bracket whose trials disagree (a high-loss
//!   trial at the lower end, a low-loss one at the upper end) is decided
//!   before the search moves away from it: on a noisy device one unlucky
//!   trial would otherwise send the search far off.
//! - Once the provisional bracket is within the width, the target
//!   *confirms* its ends: more trials at the lower end, then at the upper
//!   one, until the RFC's classification decides them. A trial that
//!   changes a provisional class reopens the search there.
//!
//! So a load above what the device forwards gets one trial, except the
//! one that ends as the relevant upper bound, which gets as many as its
//! classification needs (3 with exceed ratio 50 % and a duration sum of
//! four trials). Against a 30,000 packets/s policer from the 64-byte line
//! rate, NDR and PDR at exceed ratio 50 % over 4 × 1 s cost 6 trials:
//! line rate, the hint (30,000), 30,300, and the confirmations.
//!
//! A search at the RFC 2544 compliant goal (loss 0, exceed 0, duration sum
//! = final trial duration) ends with bounds no binary search could improve
//! on for the same width; the NDR and PDR share trials, so the pair costs
//! little more than the NDR alone.

use crate::spec::{constant_rate, mbps, mix_info, run_reported, Step};
use crate::TrialRunner;
use linerate_results::methods::{GoalResultRecord, MlrSearchResult, SearchGoalRecord};
use linerate_results::TrialResult;
use linerate_wire::units::Layer;
use linerate_wire::Frames;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::time::Duration;

/// The search never runs more trials than this (a DUT whose answers change
/// from trial to trial could otherwise keep it going).
pub const MAX_TRIALS: usize = 100;

/// Tolerance of duration sums and load comparisons (floating point).
const EPS: f64 = 1e-9;

/// A search goal of the draft.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchGoal {
    /// "NDR", "PDR", ... (for the report).
    pub name: String,
    /// Goal Loss Ratio: 0 for NDR, e.g. 0.005 for PDR.
    pub loss_ratio: f64,
    /// Goal Exceed Ratio: share of trial-seconds that may be high-loss.
    pub exceed_ratio: f64,
    /// Goal Final Trial Duration.
    pub final_trial_duration: Duration,
    /// Goal Duration Sum: trial-seconds at one load that decide it.
    pub duration_sum: Duration,
    /// Goal Width, relative to the upper bound.
    pub width: f64,
    /// Goal Initial Trial Duration: the shortest trials used for this goal.
    pub initial_trial_duration: Duration,
}

impl SearchGoal {
    /// The RFC 2544 compliant goal of the draft (loss 0, exceed ratio 0,
    /// duration sum = final trial duration) with loss ratio `loss_ratio`.
    pub fn compliant(name: &str, loss_ratio: f64, final_trial: Duration, width: f64) -> Self {
        SearchGoal {
            name: name.to_string(),
            loss_ratio,
            exceed_ratio: 0.0,
            final_trial_duration: final_trial,
            duration_sum: final_trial,
            width,
            initial_trial_duration: final_trial,
        }
    }

    /// Checks the attributes against the RFC's rules.
    pub fn validate(&self) -> Result<(), GoalError> {
        let name = self.name.clone();
        if !(0.0..1.0).contains(&self.loss_ratio) {
            return Err(GoalError::LossRatio(name, self.loss_ratio));
        }
        if !(0.0..1.0).contains(&self.exceed_ratio) {
            return Err(GoalError::ExceedRatio(name, self.exceed_ratio));
        }
        if self.final_trial_duration.is_zero() || self.duration_sum.is_zero() {
            return Err(GoalError::Duration(name));
        }
        if self.initial_trial_duration.is_zero()
            || self.initial_trial_duration > self.final_trial_duration
        {
            return Err(GoalError::InitialDuration(name));
        }
        if !(self.width > 0.0 && self.width <= 0.5) {
            return Err(GoalError::Width(name, self.width));
        }
        Ok(())
    }

    /// The goal's classification criteria.
    pub fn criteria(&self) -> Criteria {
        Criteria {
            loss_ratio: self.loss_ratio,
            exceed_ratio: self.exceed_ratio,
            final_trial_duration_s: self.final_trial_duration.as_secs_f64(),
            duration_sum_s: self.duration_sum.as_secs_f64(),
            rate_tolerance: self.width,
        }
    }

    pub fn record(&self) -> SearchGoalRecord {
        SearchGoalRecord {
            name: self.name.clone(),
            loss_ratio: self.loss_ratio,
            exceed_ratio: self.exceed_ratio,
            final_trial_duration_s: self.final_trial_duration.as_secs_f64(),
            duration_sum_s: self.duration_sum.as_secs_f64(),
            width: self.width,
            initial_trial_duration_s: self.initial_trial_duration.as_secs_f64(),
        }
    }
}

/// Goal attributes the draft does not allow.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum GoalError {
    #[error("goal {0}: loss ratio {1} is out of range: use a fraction from 0 up to 1 (0.005 means 0.5 %)")]
    LossRatio(String, f64),
    #[error("goal {0}: exceed ratio {1} is out of range: use a fraction from 0 up to 1 (0.5 means half the trial-seconds)")]
    ExceedRatio(String, f64),
    #[error("goal {0}: the final trial duration and the duration sum must be longer than zero")]
    Duration(String),
    #[error("goal {0}: the initial trial duration must be above zero and no longer than the final trial duration")]
    InitialDuration(String),
    #[error(
        "goal {0}: width {1} is out of range: use a fraction above 0, at most 0.5 (0.01 means 1 %)"
    )]
    Width(String, f64),
}

/// What load classification needs of a goal (or of an intermediate target).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Criteria {
    pub loss_ratio: f64,
    pub exceed_ratio: f64,
    pub final_trial_duration_s: f64,
    pub duration_sum_s: f64,
    /// Share of a trial's duration its generator may pause and the trial
    /// still count as low-loss (`TrialResult::held_rate`): the goal's
    /// width. `f64::INFINITY` classifies by loss alone.
    pub rate_tolerance: f64,
}

impl Criteria {
    /// True when `t` counts as high-loss: it lost more than the loss ratio,
    /// or its generator did not hold the rate (the module documentation
    /// says why).
    pub fn high_loss(&self, t: &TrialResult) -> bool {
        t.loss_ratio > self.loss_ratio || !t.held_rate(self.rate_tolerance)
    }

    /// Where else than its load `load` trial `t` counts, as a low-loss
    /// trial: the rate it showed the device to forward within the loss
    /// ratio, when its loss was within it but its generator did not hold
    /// the rate (high-loss at `load`, see [`Criteria::high_loss`]). The
    /// device saw the trial's frames over the duration and the pauses,
    /// `offered_fps`, and lost no more than allowed: the rate the RFC 2544
    /// search counts such a trial as a pass at (and more harshly shown:
    /// between the pauses the frames came at `load`). None otherwise.
    pub fn shown_load(&self, t: &TrialResult, load: f64) -> Option<f64> {
        let fps = t.offered_fps.min(load);
        let shown = t.loss_ratio <= self.loss_ratio
            && !t.held_rate(self.rate_tolerance)
            && fps.is_finite()
            && fps > 0.0
            && fps < load;
        shown.then_some(fps)
    }
}

/// The class of a load for a goal, from the trials run at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadClass {
    LowerBound,
    UpperBound,
    Undecided,
}

/// Trial-seconds at a load, split as RFC 9971's Appendix A, "Load Classification Code" splits them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
struct Sums {
    full_low: f64,
    full_high: f64,
    short_low: f64,
    short_high: f64,
}

impl Sums {
    fn of<'a>(c: &Criteria, trials: impl IntoIterator<Item = &'a TrialResult>) -> Sums {
        let mut s = Sums::default();
        for t in trials {
            // The trial effective duration is the trial duration asked for.
            let d = t.duration_s;
            let high = c.high_loss(t);
            let full = d >= c.final_trial_duration_s - EPS;
            match (full, high) {
                (true, false) => s.full_low += d,
                (true, true) => s.full_high += d,
                (false, false) => s.short_low += d,
                (false, true) => s.short_high += d,
            }
        }
        s
    }

    /// The RFC's effective high-loss sum: full-length high-loss seconds
    /// plus the short high-loss seconds not balanced by short low-loss
    /// ones.
    fn effective_high(&self, exceed_ratio: f64) -> f64 {
        let balancing = self.short_low * exceed_ratio / (1.0 - exceed_ratio);
        self.full_high + (self.short_high - balancing).max(0.0)
    }
}

/// Appendix A of RFC 9971: the class of a load from all trials run at it.
pub fn classify<'a>(c: &Criteria, trials: impl IntoIterator<Item = &'a TrialResult>) -> LoadClass {
    let s = Sums::of(c, trials);
    let er = c.exceed_ratio;
    let effective_high = s.effective_high(er);
    let effective_whole = (s.full_low + effective_high).max(c.duration_sum_s);
    let quantile = effective_whole * er;
    let optimistic = effective_high <= quantile + EPS;
    let pessimistic = effective_whole - s.full_low <= quantile + EPS;
    match (optimistic, pessimistic) {
        (true, true) => LoadClass::LowerBound,
        (false, false) => LoadClass::UpperBound,
        _ => LoadClass::Undecided,
    }
}

/// Appendix B of RFC 9971: `load × (1 − q)`, where q is the loss ratio of
/// the full-length trials at the (1 − exceed ratio) quantile of their
/// trial-seconds, counting seconds still missing to the duration sum as
/// total loss. None when no full-length trial ran at the load. Trials
/// whose generator did not hold the rate count as high-loss here too:
/// they come after every trial that did, whatever their loss.
pub fn conditional_throughput<'a>(
    c: &Criteria,
    load_fps: f64,
    trials: impl IntoIterator<Item = &'a TrialResult>,
) -> Option<f64> {
    let mut full: Vec<&TrialResult> = trials
        .into_iter()
        .filter(|t| t.duration_s >= c.final_trial_duration_s - EPS)
        .collect();
    if full.is_empty() {
        return None;
    }
    // By loss; trials that did not hold their rate count as high-loss, so
    // they come after every trial that did.
    full.sort_by(|a, b| {
        (c.high_loss(a).cmp(&c.high_loss(b))).then(a.loss_ratio.total_cmp(&b.loss_ratio))
    });
    let full_sum: f64 = full.iter().map(|t| t.duration_s).sum();
    let mut remaining = full_sum.max(c.duration_sum_s) * (1.0 - c.exceed_ratio);
    let mut quantile_loss: Option<f64> = None;
    let mut exhausted = true;
    for t in &full {
        if quantile_loss.is_none() || remaining > EPS {
            quantile_loss = Some(t.loss_ratio);
            remaining -= t.duration_s;
        } else {
            exhausted = false;
            break;
        }
    }
    if exhausted && remaining > EPS {
        quantile_loss = Some(1.0);
    }
    quantile_loss.map(|q| load_fps * (1.0 - q))
}

/// Settings of one search.
#[derive(Debug, Clone)]
pub struct MlrConfig {
    pub goals: Vec<SearchGoal>,
    /// Max Load, frames/s: normally the line rate for the frame size.
    pub max_fps: f64,
    /// Min Load, frames/s: if it is an upper bound, the goal's throughput
    /// is 0 (an irregular result).
    pub min_fps: f64,
}

impl MlrConfig {
    /// NDR (loss 0) and PDR (`pdr_loss`) goals compliant with RFC 2544 at
    /// `final_trial` and `width`, from `max_fps` down to `max_fps / 10 000`.
    pub fn ndr_pdr(max_fps: f64, final_trial: Duration, width: f64, pdr_loss: f64) -> Self {
        MlrConfig {
            goals: vec![
                SearchGoal::compliant("NDR", 0.0, final_trial, width),
                SearchGoal::compliant("PDR", pdr_loss, final_trial, width),
            ],
            max_fps,
            min_fps: max_fps / 10_000.0,
        }
    }

    /// The goals `rfc2544 --mlrsearch` adds to a zero-loss search of
    /// `trial` trials (whose trials [`search_after`] then counts): NDR
    /// (loss 0) and PDR (0.5 %), each with exceed ratio 50 % over two
    /// trials of that duration, width 1 %. A load is an upper bound only
    /// when more than half of its trial time lost more than the goal
    /// allows, so one stall of the DUT in one trial does not end the
    /// search as it ends the zero-loss one; one passing trial at a load is
    /// enough for a lower bound, one failing trial needs a second.
    pub fn after_zero_loss(max_fps: f64, min_fps: f64, trial: Duration) -> Self {
        let mut cfg = MlrConfig::ndr_pdr(max_fps, trial, 0.01, 0.005);
        cfg.min_fps = min_fps;
        for g in &mut cfg.goals {
            g.exceed_ratio = 0.5;
            g.duration_sum = trial * 2;
        }
        cfg
    }

    pub fn validate(&self) -> Result<(), GoalError> {
        for g in &self.goals {
            g.validate()?;
        }
        Ok(())
    }
}

/// A goal on the way to its final precision: shorter trials, wider width.
#[derive(Debug, Clone)]
struct Target {
    goal: usize,
    criteria: Criteria,
    width: f64,
    duration: Duration,
    /// Steps of `width × 2^k` taken so far in the current external search
    /// (down from an upper bound, up from a lower one, or galloping up).
    expansions: i32,
    /// How this target chose its last load (None: it has chosen none).
    last: Option<Choice>,
    /// "final" or the trial duration of an intermediate level.
    phase: String,
}

/// How a target chose a load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Choice {
    /// The first trial: nothing is known yet.
    MaxLoad,
    /// Another trial at an undecided load, to decide it.
    Confirm,
    /// What the device forwarded in a high-loss trial (overload hint).
    Hint,
    /// External search up from a lower bound, no upper bound above.
    StepUp,
    /// External search down from an upper bound, no lower bound below.
    StepDown,
    /// Up from a lower bound that came from a hint or another target,
    /// with steps that double while they stay below the bracket's middle.
    Gallop,
    /// The geometric middle of the bracket.
    Bisect,
}

impl Choice {
    fn label(self) -> &'static str {
        match self {
            Choice::MaxLoad => "max load",
            Choice::Confirm => "confirm",
            Choice::Hint => "forwarding-rate hint",
            Choice::StepUp => "step up",
            Choice::StepDown => "step down",
            Choice::Gallop => "gallop up",
            Choice::Bisect => "bisect",
        }
    }
}

/// Every trial of the search, at the load it was run at.
#[derive(Default)]
struct Loads {
    /// (intended load, index of the trial).
    measured: Vec<(f64, usize)>,
}

impl Loads {
    fn add(&mut self, load: f64, trial: usize) {
        self.measured.push((load, trial));
    }

    /// The trials grouped by load for criteria `c`: each at its intended
    /// load, and a low-loss trial whose generator did not hold the rate
    /// also at the rate it showed ([`Criteria::shown_load`]), which depends
    /// on the goal.
    fn for_goal<'a>(&self, c: &Criteria, trials: &'a [TrialResult]) -> ByLoad<'a> {
        let mut by_load: BTreeMap<u64, Vec<Cow<'a, TrialResult>>> = BTreeMap::new();
        for &(load, i) in &self.measured {
            let t = &trials[i];
            by_load
                .entry(load.to_bits())
                .or_default()
                .push(Cow::Borrowed(t));
            if let Some(shown) = c.shown_load(t, load) {
                by_load
                    .entry(shown.to_bits())
                    .or_default()
                    .push(Cow::Owned(seen_at(t, shown)));
            }
        }
        ByLoad(by_load)
    }
}

/// Trial `t` as the device saw it: at `fps` (the rate it showed, see
/// [`Criteria::shown_load`]), its pauses in that rate already. Only the
/// classification sees it; the search reports `t` as it ran.
fn seen_at(t: &TrialResult, fps: f64) -> TrialResult {
    TrialResult {
        intended_fps: fps,
        generator_paused_ns: None,
        generator_pauses: None,
        sending_s: None,
        ..t.clone()
    }
}

/// One goal's view of the trials ([`Loads::for_goal`]): keyed by
/// `f64::to_bits` of a positive load, which sorts like the load.
struct ByLoad<'a>(BTreeMap<u64, Vec<Cow<'a, TrialResult>>>);

impl ByLoad<'_> {
    /// Every load with its class for `c`, ascending.
    fn classes(&self, c: &Criteria) -> Vec<(f64, LoadClass)> {
        self.0
            .iter()
            .map(|(bits, at)| (f64::from_bits(*bits), classify(c, at.iter().map(|t| &**t))))
            .collect()
    }

    /// Every load with its provisional class for `c` (true: lower),
    /// ascending.
    fn provisional(&self, c: &Criteria) -> Vec<(f64, bool)> {
        self.0
            .iter()
            .map(|(bits, at)| {
                let load = f64::from_bits(*bits);
                (load, provisionally_lower(c, at.iter().map(|t| &**t)))
            })
            .collect()
    }

    /// The trials at `load`.
    fn at(&self, load: f64) -> Vec<&TrialResult> {
        self.0
            .get(&load.to_bits())
            .map(|at| at.iter().map(|t| &**t).collect())
            .unwrap_or_default()
    }
}

/// The controller's working class of a load: its class where decided;
/// for an undecided load, what its trials so far would make it if they
/// were all the trials there are: lower when the effective high-loss
/// seconds are within the exceed ratio of the effective seconds measured
/// (a load with only short low-loss trials counts as lower). This is not
/// the RFC's classification and never decides a result: it only lets
/// the search move on after one trial at a load and come back to confirm
/// the two loads that end up as the bracket.
fn provisionally_lower<'a>(
    c: &Criteria,
    trials: impl IntoIterator<Item = &'a TrialResult> + Clone,
) -> bool {
    match classify(c, trials.clone()) {
        LoadClass::LowerBound => return true,
        LoadClass::UpperBound => return false,
        LoadClass::Undecided => {}
    }
    let s = Sums::of(c, trials);
    let high = s.effective_high(c.exceed_ratio);
    let measured = s.full_low + high;
    measured <= EPS || high <= measured * c.exceed_ratio + EPS
}

/// The relevant bounds (lower, upper) for `c`.
fn relevant_bounds(classes: &[(f64, LoadClass)]) -> (Option<f64>, Option<f64>) {
    let upper = classes
        .iter()
        .find(|(_, k)| *k == LoadClass::UpperBound)
        .map(|(l, _)| *l);
    let lower = classes
        .iter()
        .filter(|(l, k)| *k == LoadClass::LowerBound && upper.is_none_or(|u| *l < u))
        .map(|(l, _)| *l)
        .next_back();
    (lower, upper)
}

/// `(upper − lower) / upper`.
fn relative_width(lower: f64, upper: f64) -> f64 {
    (upper - lower) / upper
}

/// MLRsearch for one frame size: every goal of `cfg` from one set of
/// trials. `line_rate_fps` is only reported. A runner error ends the
/// search and is returned as is.
pub fn search<R: TrialRunner>(
    runner: &mut R,
    frames: &Frames,
    cfg: &MlrConfig,
    line_rate_fps: f64,
    progress: &mut dyn FnMut(Step),
) -> Result<MlrSearchResult, R::Error> {
    search_after(runner, frames, cfg, line_rate_fps, &[], progress)
}

/// [`search`], counting `earlier` trials of the same frames (another
/// search's, e.g. the RFC 2544 zero-loss search just run) as its own.
/// RFC 9971 classifies a load by every trial result at it, whoever chose
/// the load, and a trial at least the goal's final trial duration long is
/// full-length whatever its duration: so the search starts with the
/// bracket those trials already found and spends its trials only where
/// its goals need more (confirming the loads whose trials disagree or are
/// too few, and the goals' own bounds). The result's `trials` are the new
/// ones; `reused_trials` says how many earlier ones counted.
pub fn search_after<R: TrialRunner>(
    runner: &mut R,
    frames: &Frames,
    cfg: &MlrConfig,
    line_rate_fps: f64,
    earlier: &[TrialResult],
    progress: &mut dyn FnMut(Step),
) -> Result<MlrSearchResult, R::Error> {
    let max_fps = cfg.max_fps;
    let min_fps = cfg
        .min_fps
        .clamp(f64::MIN_POSITIVE, max_fps.max(f64::MIN_POSITIVE));
    let mut targets = targets(&cfg.goals);
    let mut trials: Vec<TrialResult> = Vec::new();
    let mut loads = Loads::default();
    // Only loads this search could have chosen itself: within its range
    // and positive (an interrupted or empty trial has no load to count).
    for t in earlier {
        let load = t.intended_fps;
        if load.is_finite() && load >= min_fps * (1.0 - EPS) && load <= max_fps * (1.0 + EPS) {
            trials.push(t.clone());
            loads.add(load, trials.len() - 1);
        }
    }
    let reused = trials.len();

    while trials.len() - reused < MAX_TRIALS && max_fps.is_finite() && max_fps > 0.0 {
        let mut next = None;
        for t in targets.iter_mut() {
            if let Some((load, choice)) = choose(t, &loads, &trials, max_fps, min_fps) {
                t.last = Some(choice);
                next = Some((
                    load,
                    t.duration,
                    format!("{} {}, {}", cfg.goals[t.goal].name, t.phase, choice.label()),
                ));
                break;
            }
        }
        let Some((load, duration, why)) = next else {
            break;
        };
        let spec = constant_rate(frames, load, duration);
        let goals = &cfg.goals;
        run_reported(
            runner,
            &spec,
            &why,
            &mut trials,
            // "Passed" for the display: low-loss for every goal.
            |t| goals.iter().all(|g| !g.criteria().high_loss(t)),
            progress,
        )?;
        loads.add(load, trials.len() - 1);
    }

    let goals = cfg
        .goals
        .iter()
        .map(|g| goal_result(g, frames, &loads, &trials))
        .collect();
    Ok(MlrSearchResult {
        frame_size: frames.largest().frame(),
        l3_length: frames.largest().l3(),
        mix: mix_info(frames),
        line_rate_fps,
        max_fps,
        min_fps,
        goals,
        trial_seconds: trials[reused..].iter().map(|t| t.duration_s).sum(),
        reused_trials: reused,
        trials: trials.split_off(reused),
    })
}

/// Each goal's chain of targets, coarse to fine; at one level, stricter
/// loss ratios first.
fn targets(goals: &[SearchGoal]) -> Vec<Target> {
    let mut order: Vec<usize> = (0..goals.len()).collect();
    order.sort_by(|&a, &b| goals[a].loss_ratio.total_cmp(&goals[b].loss_ratio));
    let levels = |g: &SearchGoal| {
        let ratio = g.final_trial_duration.as_secs_f64() / g.initial_trial_duration.as_secs_f64();
        (ratio + EPS).log2().floor().max(0.0) as i32
    };
    let deepest = goals.iter().map(levels).max().unwrap_or(0);
    let mut out = Vec::new();
    for level in (0..=deepest).rev() {
        for &gi in &order {
            let g = &goals[gi];
            if level > levels(g) {
                continue;
            }
            let scale = 0.5f64.powi(level);
            let duration = g.final_trial_duration.mul_f64(scale);
            let mut criteria = g.criteria();
            criteria.final_trial_duration_s *= scale;
            criteria.duration_sum_s *= scale;
            out.push(Target {
                goal: gi,
                criteria,
                width: (g.width / scale).min(0.5),
                duration,
                expansions: 0,
                last: None,
                phase: if level == 0 {
                    "final".to_string()
                } else {
                    format!("{} s trials", trim_secs(duration.as_secs_f64()))
                },
            });
        }
    }
    out
}

/// The next step of an external search: `width × 2^k`, at most 0.5.
fn expand(t: &mut Target) -> f64 {
    t.expansions += 1;
    (t.width * 2f64.powi(t.expansions - 1)).min(0.5)
}

/// The most a device forwarded in the trials among `trials` that lost more
/// than the loss ratio (frames/s over the duration and the generator's
/// pauses, the time the device saw the frames over; 0 without any). A
/// trial high-loss only for its pauses forwarded what it was offered and
/// says nothing of the device's limit.
fn forwarded(c: &Criteria, trials: &[&TrialResult]) -> f64 {
    trials
        .iter()
        .filter(|r| r.loss_ratio > c.loss_ratio)
        .map(|r| r.rx_fps())
        .fold(0.0, f64::max)
}

/// The overload hint below `upper`: the most the device forwarded in a
/// high-loss trial there, as the load that loses at most the goal's loss
/// ratio in a trial of `duration_s` if the device forwards that much at
/// most (whole frames: `floor(forwarded × d / (1 − loss ratio)) / d`).
/// Only a hint that lies more than a width inside the bracket (`lower`,
/// `upper`) is worth a trial.
fn hint(
    c: &Criteria,
    width: f64,
    duration_s: f64,
    (lower, upper): (Option<f64>, f64),
    at_upper: &[&TrialResult],
    min_fps: f64,
) -> Option<f64> {
    let h = (forwarded(c, at_upper) * duration_s / (1.0 - c.loss_ratio) + EPS).floor() / duration_s;
    let floor = lower.map_or(min_fps, |l| l * (1.0 + width));
    (h > floor && h < upper * (1.0 - width)).then_some(h)
}

/// The next load a target wants measured and why, or None when it is
/// solved.
///
/// The target works on the provisional classes (`provisionally_lower`):
/// one trial per load while the bracket narrows, then it confirms the two
/// loads of the final bracket with as many trials as the draft's
/// classification needs to decide them. A high-loss trial there stops the
/// search from climbing: the loads above the device's forwarding rate get
/// one trial each, except the one that ends as the relevant upper bound.
fn choose(
    t: &mut Target,
    loads: &Loads,
    trials: &[TrialResult],
    max_fps: f64,
    min_fps: f64,
) -> Option<(f64, Choice)> {
    let c = t.criteria;
    let by_load = loads.for_goal(&c, trials);
    let undecided = |load: f64| classify(&c, by_load.at(load)) == LoadClass::Undecided;
    // Solved: a regular result, or an irregular one at Max or Min Load.
    match relevant_bounds(&by_load.classes(&c)) {
        (Some(l), Some(u)) if relative_width(l, u) <= t.width + EPS => return None,
        (Some(l), None) if l >= max_fps * (1.0 - EPS) => return None,
        (None, Some(u)) if u <= min_fps * (1.0 + EPS) => return None,
        _ => {}
    }
    let prov = by_load.provisional(&c);
    let upper = prov.iter().find(|(_, low)| !low).map(|(l, _)| *l);
    let lower = prov
        .iter()
        .filter(|(l, low)| *low && upper.is_none_or(|u| *l < u))
        .map(|(l, _)| *l)
        .next_back();
    // An undecided end of the bracket whose trials disagree (a high-loss
    // one at the lower end, a low-loss one at the upper end) is decided
    // before the search moves away from it: on a noisy device, one
    // unlucky trial would otherwise send it far off.
    let mixed = |load: f64| {
        let at = by_load.at(load);
        undecided(load) && at.iter().any(|r| c.high_loss(r)) && at.iter().any(|r| !c.high_loss(r))
    };
    if let Some(end) = [lower, upper].into_iter().flatten().find(|&x| mixed(x)) {
        return Some((end, Choice::Confirm));
    }
    match (lower, upper) {
        (None, None) => Some((max_fps, Choice::MaxLoad)),
        (Some(l), None) => {
            if l >= max_fps * (1.0 - EPS) {
                // Max Load passes so far: decide it.
                return Some((l, Choice::Confirm));
            }
            Some(((l * (1.0 + expand(t))).min(max_fps), Choice::StepUp))
        }
        (None, Some(u)) => {
            if u <= min_fps * (1.0 + EPS) {
                return Some((u, Choice::Confirm));
            }
            let d = t.duration.as_secs_f64();
            if let Some(h) = hint(&c, t.width, d, (None, u), &by_load.at(u), min_fps) {
                t.expansions = 0;
                return Some((h, Choice::Hint));
            }
            Some(((u * (1.0 - expand(t))).max(min_fps), Choice::StepDown))
        }
        (Some(l), Some(u)) => {
            if relative_width(l, u) <= t.width + EPS {
                // The bracket is narrow enough: decide its ends, the lower
                // first (if it fails, the upper one is not needed).
                let load = if undecided(l) { l } else { u };
                return Some((load, Choice::Confirm));
            }
            let d = t.duration.as_secs_f64();
            let at_u = by_load.at(u);
            if let Some(h) = hint(&c, t.width, d, (Some(l), u), &at_u, min_fps) {
                t.expansions = 0;
                return Some((h, Choice::Hint));
            }
            // A lower bound found by the hint, by another goal or by a
            // coarser level is usually close below the answer, and so is
            // one at about what the device forwarded at the upper bound:
            // gallop up from it while that stays below the middle of the
            // bracket.
            let mid = (l * u).sqrt();
            let f = forwarded(&c, &at_u);
            let near_forwarded = f >= l * (1.0 - t.width) && f <= l * (1.0 + t.width);
            if near_forwarded || matches!(t.last, None | Some(Choice::Hint | Choice::Gallop)) {
                if t.last != Some(Choice::Gallop) {
                    t.expansions = 0;
                }
                let up = l * (1.0 + expand(t));
                if up < mid {
                    return Some((up, Choice::Gallop));
                }
            }
            t.expansions = 0;
            Some((mid, Choice::Bisect))
        }
    }
}

/// The result of goal `g` from all trials of the search.
fn goal_result(
    g: &SearchGoal,
    frames: &Frames,
    loads: &Loads,
    trials: &[TrialResult],
) -> GoalResultRecord {
    let c = g.criteria();
    let by_load = loads.for_goal(&c, trials);
    let (lower, upper) = relevant_bounds(&by_load.classes(&c));
    let conditional = lower.and_then(|l| conditional_throughput(&c, l, by_load.at(l)));
    let regular =
        matches!((lower, upper), (Some(l), Some(u)) if relative_width(l, u) <= g.width + EPS);
    // The tester's, not the device's: an upper bound where the tester
    // lost frames itself, or one that is an upper bound only because
    // trials there did not hold their rate.
    let by_loss_alone = Criteria {
        rate_tolerance: f64::INFINITY,
        ..c
    };
    let tester_limited = upper.is_some_and(|u| {
        let at_u = by_load.at(u);
        at_u.iter().any(|t| t.tester_limited())
            || classify(&by_loss_alone, at_u.iter().copied()) != LoadClass::UpperBound
    });
    GoalResultRecord {
        goal: g.record(),
        relevant_lower_bound_fps: lower,
        relevant_upper_bound_fps: upper,
        conditional_throughput_fps: conditional,
        relevant_lower_bound_mbps_l2: lower.map(|l| mbps(frames, l, Layer::L2)),
        conditional_throughput_mbps_l2: conditional.map(|c| mbps(frames, c, Layer::L2)),
        conditional_throughput_mbps_l1: conditional.map(|c| mbps(frames, c, Layer::L1)),
        regular,
        tester_limited,
    }
}

fn trim_secs(x: f64) -> String {
    let s = format!("{x:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests;
