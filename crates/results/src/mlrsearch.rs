//! The records of MLRsearch (RFC 9971, draft-ietf-bmwg-mlrsearch) for one
//! frame size: its goals as applied and what each found. `linerate
//! mlrsearch` reports them on their own; `rfc2544 --mlrsearch` beside the
//! zero-loss throughput.

use crate::model::{MixInfo, TrialResult};
use serde::{Deserialize, Serialize};

/// A search goal of draft-ietf-bmwg-mlrsearch, as applied.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchGoalRecord {
    /// "NDR", "PDR", ...
    pub name: String,
    /// Goal Loss Ratio: a trial losing more is a high-loss trial.
    pub loss_ratio: f64,
    /// Goal Exceed Ratio: share of trial-seconds at a load that may be
    /// high-loss with the load still a lower bound.
    pub exceed_ratio: f64,
    /// Goal Final Trial Duration, seconds.
    pub final_trial_duration_s: f64,
    /// Goal Duration Sum, seconds.
    pub duration_sum_s: f64,
    /// Goal Width, relative: (upper - lower) / upper.
    pub width: f64,
    /// Shortest trial the search uses for this goal, seconds.
    pub initial_trial_duration_s: f64,
}

/// The result of one search goal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GoalResultRecord {
    pub goal: SearchGoalRecord,
    /// Largest load classified as a lower bound below the relevant upper
    /// bound, frames/s (L2); None when no load was.
    pub relevant_lower_bound_fps: Option<f64>,
    /// Smallest load classified as an upper bound, frames/s (L2); None when
    /// none was (e.g. the maximum load is a lower bound).
    pub relevant_upper_bound_fps: Option<f64>,
    /// Appendix B of the draft, at the relevant lower bound, frames/s (L2).
    pub conditional_throughput_fps: Option<f64>,
    pub relevant_lower_bound_mbps_l2: Option<f64>,
    pub conditional_throughput_mbps_l2: Option<f64>,
    pub conditional_throughput_mbps_l1: Option<f64>,
    /// Both bounds exist and are within the goal width (the draft's
    /// Regular Goal Result); an irregular result's figures are marked.
    pub regular: bool,
    /// The relevant upper bound's trials include one the tester could not
    /// offer in full: the device may do better.
    pub tester_limited: bool,
}

/// MLRsearch for one frame size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlrSearchResult {
    pub frame_size: u16,
    pub l3_length: u16,
    /// The frame-size mix sent (IMIX), when not one size: `frame_size`
    /// is then its largest frame, and Mbps count its mean frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<MixInfo>,
    pub line_rate_fps: f64,
    /// Max Load of the search, frames/s (L2).
    pub max_fps: f64,
    /// Min Load of the search, frames/s (L2).
    pub min_fps: f64,
    pub goals: Vec<GoalResultRecord>,
    /// Sum of the sending durations of the search's own trials, seconds.
    pub trial_seconds: f64,
    /// Trials of an earlier search of the same frames that this one
    /// counted as its own (`rfc2544 --mlrsearch`: the zero-loss search's
    /// trials of the frame size, listed there); 0 for a search on its own.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reused_trials: usize,
    /// Every trial the search ran, in the order run.
    pub trials: Vec<TrialResult>,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}
