//! Records of the RFC 2544 latency test (section 26.2).

use crate::model::{
    DutCpu, KeepsUnfinished, LatencySummary, MixInfo, TrialResult, UnfinishedTrials,
};
use crate::throughput::ThroughputResult;
use serde::{Deserialize, Serialize};

/// Latency at one load.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyPoint {
    /// Share of the base rate (1.0: the throughput itself).
    pub load: f64,
    pub intended_fps: f64,
    /// Combined over the load's trials (see linerate_method::latency);
    /// None when no frame arrived.
    pub latency_ns: Option<LatencySummary>,
    /// RFC 5481 packet delay variation at the 99th percentile: p99 - min, ns.
    pub pdv_p99_ns: Option<u64>,
    /// RFC 5481 packet delay variation at the 99.9th percentile: p999 - min, ns.
    pub pdv_p999_ns: Option<u64>,
    /// Frames lost over the load's trials (0 for a valid RFC 2544 figure).
    pub lost_frames: u64,
    /// The DUT's CPU load over the load's trials (their mean), when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_cpu: Option<DutCpu>,
    pub trials: Vec<TrialResult>,
}

/// Latency for one frame size (or mix).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyResult {
    pub frame_size: u16,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<MixInfo>,
    /// The rate the loads are shares of, frames/s.
    pub base_fps: f64,
    /// "throughput" (found by the RFC 2544 search run first) or "given".
    pub base: String,
    /// The search that found the base rate, when one ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<ThroughputResult>,
    pub points: Vec<LatencyPoint>,
    /// The tester's own latency back to back (`linerate calibrate`), to
    /// read the device's figures against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tester_latency_ns: Option<LatencySummary>,
}

/// A whole latency run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LatencyReport {
    /// Where and how the run was made.
    #[serde(flatten)]
    pub run: crate::run::RunInfo,
    pub trial_duration_s: f64,
    pub repeat: usize,
    pub results: Vec<LatencyResult>,
    /// The size that was being measured when the run was interrupted, with
    /// the trials it had finished (search and latency): none is lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interrupted: Option<UnfinishedTrials>,
}

impl KeepsUnfinished for LatencyReport {
    fn unfinished_mut(&mut self) -> &mut Option<UnfinishedTrials> {
        &mut self.interrupted
    }
}
