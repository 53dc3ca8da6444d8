//! Command-line arguments of the methods beyond the throughput search:
//! `loss`, `mlrsearch`, `back-to-back`. Users' scripts depend on these
//! names: keep them.

use crate::args::frames::FrameArgs;
use crate::args::{DutArgs, DutCpuArgs, PortArgs, ALL_SIZES};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug)]
#[command(mut_arg("sizes", |a| a.default_value("64")))]
pub struct LossArgs {
    #[command(flatten)]
    pub ports: PortArgs,
    #[command(flatten)]
    pub frames: FrameArgs,
    /// Offered loads, one trial each, in the order given: 0.45Mpps,1Mpps or 100000fps or 10%,50% (of line rate) or 1Gbps.
    #[arg(
        long,
        value_delimiter = ',',
        alias = "rates",
        required_unless_present = "rfc2544",
        conflicts_with = "rfc2544"
    )]
    pub loads: Option<Vec<String>>,
    /// RFC 2544 section 26.3: from 100 % of the maximum rate down in steps of --step until two successive trials lose nothing.
    #[arg(long)]
    pub rfc2544: bool,
    /// Step of the --rfc2544 mode, a share of the maximum rate (at most 10 %): 10% or 0.1 (N% is percent, a bare number a ratio; default 10%).
    #[arg(long)]
    pub step: Option<String>,
    /// The rate 100 % means in the --rfc2544 mode (default: line rate), e.g. 2Mpps, 50%.
    #[arg(long)]
    pub max_rate: Option<String>,
    /// How long each trial sends.
    #[arg(long, allow_hyphen_values = true, default_value = "2s")]
    pub trial_duration: String,
    /// Name of the table's row: the DUT or its configuration (e.g. "Linux, 50 rules"); the frame size is added when several are measured. With --scenario the rows are named after the scenarios.
    #[arg(long)]
    pub label: Option<String>,
    /// Write every trial and the table's data as JSON to FILE (rewritten after each trial).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Print the rows of earlier 'loss --json' files above this run's (other DUTs or configurations, as the 100GE report compares routers).
    #[arg(long, value_delimiter = ',')]
    pub rows_from: Vec<PathBuf>,
    /// In a sweep, a row stops after a load that lost more than this (50% or 0.5; N% is percent, a bare number a ratio), as the 100GE report leaves higher loads untested (default: every load runs).
    #[arg(long, conflicts_with = "rfc2544")]
    pub stop_at_loss: Option<String>,
    #[command(flatten)]
    pub dut: DutArgs,
    #[command(flatten)]
    pub record: crate::args::record::RecordArgs,
}

#[derive(Args, Debug)]
#[command(mut_arg("sizes", |a| a.default_value(ALL_SIZES)))]
pub struct MlrsearchArgs {
    #[command(flatten)]
    pub ports: PortArgs,
    #[command(flatten)]
    pub frames: FrameArgs,
    /// Goal Final Trial Duration: how long the trials that decide the result send.
    #[arg(long, allow_hyphen_values = true, default_value = "2s")]
    pub trial_duration: String,
    /// Goal Initial Trial Duration: the shortest trials of the coarse search (default: the final trial duration, no short trials).
    #[arg(long, allow_hyphen_values = true)]
    pub initial_trial_duration: Option<String>,
    /// Goal Duration Sum: trial-seconds at one load that decide it (default: the final trial duration).
    #[arg(long, allow_hyphen_values = true)]
    pub duration_sum: Option<String>,
    /// Goal Exceed Ratio: share of those trial-seconds that may lose more than the goal's loss ratio (RFC 2544 compliant: 0; TST009-like: 50% or 0.5; N% is percent, a bare number a ratio).
    #[arg(long, default_value = "0")]
    pub exceed_ratio: String,
    /// Goal Width: stop when (upper bound - lower bound) / upper bound is at most this: 1% or 0.01 (N% is percent, a bare number a ratio).
    #[arg(long, default_value = "1%")]
    pub width: String,
    /// Loss ratio of the PDR goal (the NDR goal's is 0): 0.5% or 0.005 (N% is percent, a bare number a ratio).
    #[arg(long, default_value = "0.5%")]
    pub pdr_loss: String,
    /// Max Load (default: line rate), e.g. 50%, 2Mpps, 5Gbps.
    #[arg(long)]
    pub max_rate: Option<String>,
    /// Write every trial and the results as JSON to FILE (rewritten after each trial).
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub dut_cpu: DutCpuArgs,
    #[command(flatten)]
    pub record: crate::args::record::RecordArgs,
}

#[derive(Args, Debug)]
#[command(mut_arg("sizes", |a| a.default_value("64")))]
pub struct BackToBackArgs {
    #[command(flatten)]
    pub ports: PortArgs,
    #[command(flatten)]
    pub frames: FrameArgs,
    /// Rate of the bursts (default: line rate, the minimum inter-frame gap), e.g. 300000fps, 50%.
    #[arg(long)]
    pub max_rate: Option<String>,
    /// Longest burst tried: frames (100000) or a time at the burst rate (2s, 500ms).
    #[arg(long, default_value = "2s")]
    pub max_burst: String,
    /// Repetitions of the search for the longest burst (RFC 2544: at least 50).
    #[arg(long, default_value_t = 50)]
    pub repeat: usize,
    /// Stop each repetition when the bracket is this narrow, relative to the failing burst (at least 1 frame): 1% or 0.01 (N% is percent, a bare number a ratio).
    #[arg(long, default_value = "1%")]
    pub resolution: String,
    /// The device's throughput for the corrected buffer time (RFC 9004), e.g. 100000fps; default: an RFC 2544 throughput search is run first.
    #[arg(long)]
    pub throughput: Option<String>,
    /// Trial duration of that throughput search (default 2s; no search with --throughput).
    #[arg(long, allow_hyphen_values = true)]
    pub trial_duration: Option<String>,
    /// Write every trial and the results as JSON to FILE (rewritten after each trial).
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub dut_cpu: DutCpuArgs,
    #[command(flatten)]
    pub record: crate::args::record::RecordArgs,
}
