//! Records of the test methods beyond the RFC 2544 throughput search: frame
//! loss rate vs offered load (RFC 2544 section 26.3), MLRsearch
//! (draft-ietf-bmwg-mlrsearch) and back-to-back frames (RFC 2544 section
//! 26.4 as updated by RFC 9004). Every rate says its layer in its name;
//! every trial run is kept, in the order run. One search's MLRsearch
//! records live in [`crate::mlrsearch`] and the run header in
//! [`crate::run`]; both are re-exported here.

use crate::model::{KeepsUnfinished, MixInfo, TrialResult, UnfinishedTrials};
use crate::throughput::ThroughputResult;
use serde::{Deserialize, Serialize};

pub use crate::mlrsearch::{GoalResultRecord, MlrSearchResult, SearchGoalRecord};
pub use crate::run::RunInfo;

// ---------------------------------------------------------------- frame loss

/// One load of a frame loss sweep and the trial run at it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossPoint {
    /// The load as asked for: `0.45Mpps`, `50%`, or in the RFC 2544 mode
    /// the share of the maximum rate (`90%`). Also the table's column.
    pub load: String,
    /// Frames/s (L2) the load means for this frame size.
    pub intended_fps: f64,
    /// Frames/s (L2) that really left the tester (`trial.offered_fps`).
    pub offered_fps: f64,
    /// Frames lost over frames intended (`trial.loss_ratio`).
    pub loss_ratio: f64,
    /// The tester did not offer the intended rate: it could not send every
    /// frame (part of the loss is the tester's), or its generator paused
    /// more than 1 % of the trial (the device saw a lower rate).
    pub generator_short: bool,
    pub trial: TrialResult,
}

/// A row of the frame loss table: one frame size (one run), its loads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossSeries {
    /// The row's name: the run or DUT configuration (`--label`), with the
    /// frame size when several were measured.
    pub label: String,
    pub frame_size: u16,
    pub l3_length: u16,
    /// The frame-size mix sent (IMIX), when not one size: `frame_size`
    /// is then its largest frame, and Mbps count its mean frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<MixInfo>,
    /// Theoretical maximum frames/s at the line speed.
    pub line_rate_fps: f64,
    /// The rate 100 % means in the RFC 2544 mode, frames/s (L2).
    pub max_fps: f64,
    pub points: Vec<LossPoint>,
    /// The lab DUT configuration the row measured (`--scenario`), as
    /// applied and verified, with the traffic checks after its trials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<crate::scenario::ScenarioRecord>,
}

/// `linerate loss`: frame loss rate vs offered load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameLossReport {
    #[serde(flatten)]
    pub run: RunInfo,
    /// "sweep" (the loads given) or "rfc2544" (section 26.3: from 100 % of
    /// the maximum rate down in steps until two successive trials lose
    /// nothing).
    pub mode: String,
    /// Step of the RFC 2544 mode, as a share of the maximum rate (0.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<f64>,
    pub trial_duration_s: f64,
    /// In a sweep, each row stopped after a load that lost more than this
    /// share (`--stop-at-loss`); None: every load ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_above_loss_ratio: Option<f64>,
    pub series: Vec<LossSeries>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<UnfinishedTrials>,
}

impl KeepsUnfinished for FrameLossReport {
    fn unfinished_mut(&mut self) -> &mut Option<UnfinishedTrials> {
        &mut self.interrupted
    }
}

// ----------------------------------------------------------------- MLRsearch

/// `linerate mlrsearch`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MlrSearchReport {
    #[serde(flatten)]
    pub run: RunInfo,
    pub results: Vec<MlrSearchResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<UnfinishedTrials>,
}

impl KeepsUnfinished for MlrSearchReport {
    fn unfinished_mut(&mut self) -> &mut Option<UnfinishedTrials> {
        &mut self.interrupted
    }
}

// -------------------------------------------------------------- back-to-back

/// One repetition of the back-to-back search: the longest burst that
/// passed with zero loss, and the trials that found it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BurstSearch {
    /// Longest burst (frames) forwarded without loss; 0 if none was.
    pub longest_burst_frames: u64,
    /// Shortest burst that lost frames, if any did.
    pub shortest_failing_frames: Option<u64>,
    /// The longest burst tried passed: the DUT may take longer ones.
    pub at_max_burst: bool,
    /// The longest passing burst was not sent at the burst rate (offered
    /// below 99 % of it), or the shortest failing one lacked frames the
    /// tester did not send: the result may be the tester's.
    pub tester_limited: bool,
    pub trials: Vec<TrialResult>,
}

/// Back-to-back frames (RFC 2544 section 26.4, RFC 9004) for one frame size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackToBackResult {
    pub frame_size: u16,
    pub l3_length: u16,
    /// The frame-size mix sent (IMIX), when not one size: `frame_size`
    /// is then its largest frame, and Mbps count its mean frame.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<MixInfo>,
    pub line_rate_fps: f64,
    /// Rate of every burst (Max Theoretical Frame Rate in RFC 9004 when it
    /// is the line rate), frames/s (L2).
    pub burst_fps: f64,
    /// Longest burst tried, frames.
    pub max_burst_frames: u64,
    /// Measured throughput, frames/s (L2), used for the corrected buffer
    /// time; from `--throughput` or an RFC 2544 search run first.
    pub throughput_fps: f64,
    /// The throughput search run first, when one was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput_search: Option<ThroughputResult>,
    pub repetitions: Vec<BurstSearch>,
    /// Mean, standard deviation (sample), minimum and maximum of the
    /// repetitions' longest bursts, frames.
    pub mean_burst_frames: f64,
    pub stddev_burst_frames: f64,
    pub min_burst_frames: u64,
    pub max_passing_burst_frames: u64,
    /// RFC 9004: mean burst / burst rate, seconds.
    pub implied_buffer_time_s: f64,
    /// RFC 9004: the implied time less what the DUT forwarded during the
    /// burst: implied × (1 − throughput / burst rate), seconds.
    pub corrected_buffer_time_s: f64,
    /// Frames the DUT held at the end of the mean burst:
    /// mean burst × (1 − throughput / burst rate).
    pub buffered_frames: f64,
    /// Why the buffer figures mean nothing, when they do not (e.g. the DUT
    /// forwards the burst rate without loss, RFC 9004 section 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub not_meaningful: Option<String>,
    pub trial_seconds: f64,
}

/// `linerate back-to-back`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BackToBackReport {
    #[serde(flatten)]
    pub run: RunInfo,
    pub repeat: usize,
    pub resolution: f64,
    pub results: Vec<BackToBackResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<UnfinishedTrials>,
}

impl KeepsUnfinished for BackToBackReport {
    fn unfinished_mut(&mut self) -> &mut Option<UnfinishedTrials> {
        &mut self.interrupted
    }
}
