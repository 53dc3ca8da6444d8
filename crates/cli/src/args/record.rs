//! Command-line options for storing runs and for the commands that read
//! stored runs (`runs`, `show`, `compare`, `export`, `report`). Kept apart
//! from args.rs, which only flattens [`RecordArgs`] into the measuring commands.

use clap::Args;
use linerate_session::commands::stored::ExportFormat;
use linerate_session::plan::RecordPlan;
use std::path::PathBuf;

/// Where a measuring command stores its run, what it says about the DUT,
/// and how it reports progress.
#[derive(Args, Debug, Clone, Default)]
pub struct RecordArgs {
    /// Results database: every trial is stored the moment it ends. Default: ~/.local/share/linerate/results.sqlite.
    #[arg(long, value_name = "FILE", conflicts_with = "no_db")]
    pub db: Option<PathBuf>,
    /// Do not store this run in the results database.
    #[arg(long)]
    pub no_db: bool,
    /// The device under test, as reports should name it, e.g. "LANCOM 1900EF" (one line, at most 200 characters).
    #[arg(long, value_name = "NAME", value_parser = report_text)]
    pub dut_name: Option<String>,
    /// The DUT's firmware or software version, e.g. "LCOS 10.80" (one line, at most 200 characters).
    #[arg(long, value_name = "VERSION", value_parser = report_text)]
    pub dut_firmware: Option<String>,
    /// Stream one JSON object per event (run_started, trial_started, trial_done, result, run_done) to FILE, or to stdout with '-' (the table then goes to stderr).
    #[arg(long, value_name = "FILE|-")]
    pub events: Option<String>,
    /// Write the first frames of each trial, and the frames around each loss, as port B received them to FILE (pcap, for Wireshark); needs a socket engine (--engine af_packet or af_xdp). With several --scenario values, one file each: FILE-1.pcap, FILE-2.pcap, ...
    #[arg(long, value_name = "FILE")]
    pub pcap: Option<PathBuf>,
    /// With --pcap: frames sampled per trial.
    #[arg(long, value_name = "N", default_value_t = 100, requires = "pcap")]
    pub pcap_frames: usize,
    /// No progress on stderr (set-up notes and errors are still printed).
    #[arg(long, short)]
    pub quiet: bool,
}

/// Longest DUT name or firmware a report prints.
const MAX_REPORT_TEXT: usize = 200;

/// A name that goes into reports: one line of at most [`MAX_REPORT_TEXT`]
/// printable characters.
fn report_text(s: &str) -> Result<String, String> {
    let n = s.chars().count();
    if n > MAX_REPORT_TEXT {
        return Err(format!(
            "{n} characters; at most {MAX_REPORT_TEXT} (a name a report can print on one line)"
        ));
    }
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        return Err(format!(
            "holds the control character {}; give one line of printable text",
            c.escape_unicode()
        ));
    }
    Ok(s.to_string())
}

impl RecordArgs {
    /// The options as values.
    pub fn plan(&self) -> RecordPlan {
        RecordPlan {
            db: self.db.clone(),
            no_db: self.no_db,
            dut_name: self.dut_name.clone(),
            dut_firmware: self.dut_firmware.clone(),
            events: self.events.clone(),
            pcap: self.pcap.clone(),
            pcap_frames: self.pcap_frames,
            quiet: self.quiet,
        }
    }
}

/// The results database a reading command uses.
#[derive(Args, Debug, Clone)]
pub struct DbArgs {
    /// Results database. Default: ~/.local/share/linerate/results.sqlite.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

#[derive(Args, Debug)]
pub struct RunsArgs {
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct ShowArgs {
    /// Run id (see 'linerate runs'), or 'last'.
    pub run: String,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
pub struct CompareArgs {
    /// Two or more rfc2544 run ids (or 'last'); the first is the baseline the differences are taken against.
    #[arg(num_args = 2.., required = true)]
    pub runs: Vec<String>,
    #[command(flatten)]
    pub db: DbArgs,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("format").required(true).args(["json", "csv"])))]
pub struct ExportArgs {
    /// Run id, or 'last'.
    pub run: String,
    /// JSON following schema/run.schema.json (version 1).
    #[arg(long)]
    pub json: bool,
    /// CSV: one row per frame size (rfc2544 runs) or per trial (trial runs, or with --trials).
    #[arg(long)]
    pub csv: bool,
    /// With --csv: one row per trial, every count as measured.
    #[arg(long, requires = "csv")]
    pub trials: bool,
    /// Write to FILE instead of stdout.
    #[arg(long, short, value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub db: DbArgs,
}

impl ExportArgs {
    /// The format the flags ask for.
    pub fn format(&self) -> ExportFormat {
        match (self.json, self.trials) {
            (true, _) => ExportFormat::Json,
            (false, true) => ExportFormat::TrialsCsv,
            (false, false) => ExportFormat::Csv,
        }
    }
}

#[derive(Args, Debug)]
pub struct ReportArgs {
    /// Run id, or 'last'.
    pub run: String,
    /// Write a self-contained HTML report (tables and charts, nothing fetched) to FILE.
    #[arg(long, value_name = "FILE", required = true)]
    pub html: PathBuf,
    #[command(flatten)]
    pub db: DbArgs,
}
