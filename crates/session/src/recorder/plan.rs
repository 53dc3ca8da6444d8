//! What a recorder is given: the run's description ([`RunInfo`]), the
//! record options as values ([`RecordPlan`]), and what wraps a `--json`
//! report ([`JsonWrap`]). Plain data, so the output checks
//! (`crate::outputs`) can read a plan without the recorder.

use linerate_engine::capture::CaptureSlot;
use linerate_engine::ReceiverKind;
use linerate_results::Rfc2544Report;
use std::path::PathBuf;

/// What a run is, for the database and the run_started event.
pub struct RunInfo<'a> {
    /// The subcommand: "rfc2544", "trial", "latency", "tcp", ...
    pub command: &'a str,
    pub engine: &'a str,
    /// How port B counts (`--pcap` needs a socket).
    pub receiver: ReceiverKind,
    pub line_speed_bps: u64,
    /// What was tested, in the report's words.
    pub scenario: &'a str,
    /// rfc2544: the report's settings (results empty).
    pub report: Option<&'a Rfc2544Report>,
    /// Frame sizes to measure, in order.
    pub sizes: Vec<u16>,
    pub trial_s: f64,
    pub resolution: f64,
    /// Where `--pcap`'s capture goes: the slot of the run's receiving
    /// port (B), [`Engine::capture_slot`](linerate_engine::Engine::capture_slot);
    /// a command with no test frames gives an empty one of its own.
    pub capture_at: CaptureSlot,
}

/// Where a run is stored and reported, and what it says about the DUT:
/// the record options (`--db`, `--no-db`, `--dut-name`, `--dut-firmware`,
/// `--events`, `--pcap`, `--pcap-frames`, `--quiet`) as values.
#[derive(Debug, Clone)]
pub struct RecordPlan {
    /// The results database; None: the default one.
    pub db: Option<PathBuf>,
    /// Store nothing.
    pub no_db: bool,
    /// The device under test as reports name it, and its firmware.
    pub dut_name: Option<String>,
    pub dut_firmware: Option<String>,
    /// A file for one JSON object per event, or "-" for stdout.
    pub events: Option<String>,
    /// A pcap file for the frames port B received (sampled).
    pub pcap: Option<PathBuf>,
    /// Frames sampled per trial into `pcap`.
    pub pcap_frames: usize,
    /// No progress on stderr.
    pub quiet: bool,
}

impl Default for RecordPlan {
    /// Stored in the default database, progress shown, nothing else.
    fn default() -> RecordPlan {
        RecordPlan {
            db: None,
            no_db: false,
            dut_name: None,
            dut_firmware: None,
            events: None,
            pcap: None,
            pcap_frames: 100,
            quiet: false,
        }
    }
}

/// Builds what a `--json` file holds from a run's report.
pub type JsonWrap = Box<dyn Fn(serde_json::Value) -> serde_json::Value>;
