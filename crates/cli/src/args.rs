//! The command line. Users' scripts depend on these names: keep them.

use crate::record_args::{CompareArgs, ExportArgs, RecordArgs, ReportArgs, RunsArgs, ShowArgs};
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "linerate",
    version,
    about = "RFC 2544 testing of routers, firewalls and VPN gateways, in software"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// RFC 2544 throughput per frame size (section 26.1), printed as the LANCOM techpaper's table.
    Rfc2544(Rfc2544Args),
    /// One fixed-rate trial from port A to port B.
    Trial(TrialArgs),
    /// The frame size on the wire after encapsulation (IPsec, GRE, VXLAN, L2TP, PPPoE, 802.1Q), and the Mbps a frame rate costs on each side.
    Overhead(OverheadArgs),
    /// The tester's own ceiling per engine and frame size, back to back (no DUT); stored and used to flag tester-limited results.
    Calibrate(CalibrateArgs),
    /// The namespace lab: a Linux router between two tester ports.
    Lab {
        #[command(subcommand)]
        action: LabAction,
    },
    /// The runs in the results database: id, date, command, DUT, engine, status, summary.
    Runs(RunsArgs),
    /// A stored run's tables, printed again from the database.
    Show(ShowArgs),
    /// Stored rfc2544 runs side by side, with differences in % against the first.
    Compare(CompareArgs),
    /// A stored run as JSON (schema/run.schema.json) or CSV.
    Export(ExportArgs),
    /// A stored run as one self-contained HTML file with tables and charts.
    Report(ReportArgs),
}

#[derive(Subcommand, Debug)]
pub enum LabAction {
    /// Creates a lab and leaves it up for later runs (`rfc2544 --lab` uses it).
    Up {
        /// Default: 'default', the lab `--lab` uses.
        #[arg(long)]
        lab_name: Option<String>,
    },
    /// Removes a lab; without --lab-name, everything linerate made (namespaces named lr-*), also after a crash.
    Down {
        #[arg(long)]
        lab_name: Option<String>,
    },
    /// Shows the labs present.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// Where the two tester ports are: the lab, or interfaces the user names.
#[derive(Args, Debug, Clone)]
pub struct PortArgs {
    /// Test the lab's Linux router: uses the lab 'default' if it is up (see 'lab up'), else builds one for this run and removes it after.
    #[arg(long, conflicts_with_all = ["port_a", "port_b"])]
    pub lab: bool,
    /// Use this lab (made by 'linerate lab up --lab-name NAME'); it must exist.
    #[arg(long, requires = "lab")]
    pub lab_name: Option<String>,
    /// Tester port A (sends), e.g. enp1s0f0.
    #[arg(long, requires_all = ["port_b", "ip_a", "gw_a", "ip_b", "gw_b"])]
    pub port_a: Option<String>,
    /// Tester port B (receives).
    #[arg(long)]
    pub port_b: Option<String>,
    /// Address port A's emulated host uses, e.g. 198.18.0.2/24.
    #[arg(long)]
    pub ip_a: Option<String>,
    /// The DUT's address on port A's subnet.
    #[arg(long)]
    pub gw_a: Option<String>,
    #[arg(long)]
    pub ip_b: Option<String>,
    #[arg(long)]
    pub gw_b: Option<String>,
    /// Static MAC of gateway A (skips ARP), e.g. 02:00:00:00:00:01.
    #[arg(long)]
    pub gw_mac_a: Option<String>,
    #[arg(long)]
    pub gw_mac_b: Option<String>,
    /// Line speed for % rates and line-rate limits, e.g. 10G, 1G. Default: the speed the link reports, else 10G.
    #[arg(long)]
    pub line_speed: Option<String>,
    /// Packet I/O engine: xdp (frames made and counted in the kernel),
    /// af_xdp, af_packet, or auto (the fastest that works on these ports).
    #[arg(long, default_value = "auto", value_parser = ["auto", "xdp", "af_xdp", "af_packet"])]
    pub engine: String,
    /// After sending, wait this long for frames still in flight (RFC 2544: 2 s).
    #[arg(long, default_value = "2s")]
    pub straggler_wait: String,
    /// Generator threads (xdp engine only), each pinned to a CPU of its own and sending a stream of its own at 1/N of the rate.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub tx_threads: u16,
}

#[derive(Args, Debug)]
pub struct Rfc2544Args {
    #[command(flatten)]
    pub ports: PortArgs,
    /// Frame sizes in bytes, FCS included.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "64,128,256,512,1024,1280,1518",
        conflicts_with = "l3_length"
    )]
    pub sizes: Vec<u64>,
    /// IP packet lengths instead of frame sizes (40..9000, as the Cisco report counts).
    #[arg(long, value_delimiter = ',')]
    pub l3_length: Option<Vec<u64>>,
    /// How long each trial sends.
    #[arg(long, default_value = "2s")]
    pub trial_duration: String,
    /// Stop the search when the bracket is this narrow, relative to its top (1% or 0.01).
    #[arg(long, default_value = "1%")]
    pub resolution: String,
    /// Loss a trial may have and still pass, in percent (RFC 2544: 0).
    #[arg(long, default_value = "0")]
    pub loss: String,
    /// Highest rate tried (default: line rate), e.g. 50%, 2Mpps, 5Gbps.
    #[arg(long)]
    pub max_rate: Option<String>,
    /// RFC 2544 to the letter: 60 s trials.
    #[arg(long)]
    pub rfc2544_strict: bool,
    /// Write every trial and the results as JSON to FILE (rewritten after each trial).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Calibration file ('linerate calibrate'): results within 5 % of the stored tester ceiling are marked tester-limited. Default: ~/.local/share/linerate/calibration.json.
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    #[command(flatten)]
    pub record: RecordArgs,
}

#[derive(Args, Debug)]
pub struct OverheadArgs {
    /// Inner frame size(s) in bytes, FCS included (one, or a list for a table).
    #[arg(
        long,
        value_delimiter = ',',
        required_unless_present = "l3_length",
        conflicts_with = "l3_length"
    )]
    pub frame_size: Option<Vec<u64>>,
    /// Inner IP packet length(s) instead (40..9000).
    #[arg(long, value_delimiter = ',')]
    pub l3_length: Option<Vec<u64>>,
    /// ESP encryption: null, des, 3des, aes (CBC), aes-gcm.
    #[arg(long)]
    pub esp: Option<String>,
    /// ESP integrity: none, md5, sha1, sha256, sha512 (HMAC, truncated as in RFC 2403/2404/4868).
    #[arg(long, requires = "esp")]
    pub auth: Option<String>,
    /// AH with this integrity algorithm: md5, sha1, sha256, sha512.
    #[arg(long)]
    pub ah: Option<String>,
    /// IPsec mode.
    #[arg(long, default_value = "tunnel", value_parser = ["tunnel", "transport"])]
    pub mode: String,
    /// IPsec NAT traversal (UDP encapsulation, RFC 3948).
    #[arg(long)]
    pub nat_t: bool,
    #[arg(long)]
    pub gre: bool,
    #[arg(long)]
    pub vxlan: bool,
    #[arg(long)]
    pub l2tp: bool,
    #[arg(long)]
    pub pppoe: bool,
    /// An 802.1Q tag on the outer frame.
    #[arg(long)]
    pub vlan: bool,
    /// Frame rate whose bandwidth is shown on each side.
    #[arg(long, default_value = "100000")]
    pub fps: f64,
    /// Print JSON instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args, Debug)]
pub struct CalibrateArgs {
    /// Engines to calibrate; each that cannot run here is skipped with the reason.
    #[arg(long, value_delimiter = ',', default_value = "xdp,af_xdp,af_packet", value_parser = ["xdp", "af_xdp", "af_packet"])]
    pub engine: Vec<String>,
    /// Frame sizes in bytes, FCS included.
    #[arg(long, value_delimiter = ',', default_value = "64,512,1518")]
    pub sizes: Vec<u64>,
    /// How long each trial sends.
    #[arg(long, default_value = "1s")]
    pub trial_duration: String,
    /// Stop the search when the bracket is this narrow, relative to its top.
    #[arg(long, default_value = "1%")]
    pub resolution: String,
    /// After sending, wait this long for frames still in flight.
    #[arg(long, default_value = "500ms")]
    pub straggler_wait: String,
    /// Two tester interfaces cabled to each other (default: a veth pair in a namespace linerate makes, which calibrates the lab).
    #[arg(long, requires = "port_b")]
    pub port_a: Option<String>,
    #[arg(long, requires = "port_a")]
    pub port_b: Option<String>,
    /// Line speed for the search's upper bound, e.g. 10G. Default: the speed the link reports, else 10G.
    #[arg(long)]
    pub line_speed: Option<String>,
    /// Where to store the ceilings (entries for the same set-up, engine and size are replaced).
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    /// Generator threads (xdp engine only), each pinned to a CPU of its own and sending a stream of its own at 1/N of the rate.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub tx_threads: u16,
}

#[derive(Args, Debug)]
pub struct TrialArgs {
    #[command(flatten)]
    pub ports: PortArgs,
    /// Frame size in bytes, FCS included.
    #[arg(
        long,
        required_unless_present = "l3_length",
        conflicts_with = "l3_length"
    )]
    pub frame_size: Option<u64>,
    /// IP packet length instead of a frame size.
    #[arg(long)]
    pub l3_length: Option<u64>,
    /// Rate: 50% (of line rate, L1), 100000fps, 1.5Mpps, 300Mbps (L2), 300Mbps@L1.
    #[arg(long)]
    pub rate: String,
    /// How long to send.
    #[arg(long, default_value = "2s")]
    pub duration: String,
    /// Loss allowed before the trial counts as failed (exit 1), in percent.
    #[arg(long, default_value = "0")]
    pub loss: String,
    /// Write the trial as JSON to FILE.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub record: RecordArgs,
}
