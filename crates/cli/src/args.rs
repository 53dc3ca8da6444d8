//! The command line. Users' scripts depend on these names: keep them.

use crate::args::frames::FrameArgs;
use crate::args::record::{CompareArgs, ExportArgs, RecordArgs, ReportArgs, RunsArgs, ShowArgs};
use clap::{Args, Parser, Subcommand};
use linerate_session::error::Result;
use linerate_session::plan::{DutCpuPlan, DutPlan};
use linerate_session::plan::{EngineChoice, ReceiverChoice};
use linerate_wire::{Encap, IpVersion, VlanTag};
use std::path::PathBuf;

pub mod frames;
mod goodput;
pub mod ipsec;
pub mod methods;
pub mod record;
pub mod tunnels;
pub use goodput::{HttpArgs, StackPortArgs, TcpArgs};

/// The RFC 2544 frame sizes (section 9.1), the default of the commands that
/// measure per frame size.
pub const ALL_SIZES: &str = "64,128,256,512,1024,1280,1518";

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
    /// RFC 2544 latency (section 26.2) at the throughput rate and at shares of it, with percentiles and delay variation.
    Latency(LatencyArgs),
    /// The tester's own ceiling per engine and frame size, back to back (no DUT); stored and used to flag tester-limited results.
    Calibrate(CalibrateArgs),
    /// Runs the tests of a scenario file (TOML) in order, e.g. a whole study: see docs/TRAFFIC.md, "Scenario files".
    Run {
        /// The scenario file: [defaults] and [[test]] tables whose keys are the commands' long options.
        file: PathBuf,
        /// Print the command line of each test instead of running it.
        #[arg(long)]
        dry_run: bool,
    },
    /// Frame loss rate vs offered load (RFC 2544 26.3): a sweep over given loads, or --rfc2544 from 100 % down; one row per frame size and DUT configuration (--scenario a,b,c), printed as the 100GE report's table.
    // `loss-sweep` was a command of its own before `loss` took --scenario.
    #[command(alias = "loss-sweep")]
    Loss(crate::args::methods::LossArgs),
    /// MLRsearch (draft-ietf-bmwg-mlrsearch): NDR and PDR in one search, with relevant bounds and conditional throughput.
    Mlrsearch(crate::args::methods::MlrsearchArgs),
    /// Back-to-back frames (RFC 2544 26.4, RFC 9004): longest burst without loss, repeated, and the DUT buffer time it implies.
    BackToBack(crate::args::methods::BackToBackArgs),
    /// TCP goodput through the DUT: N parallel streams with the kernel's TCP stack (as iperf3 -P 5), laid out as LANCOM Table 12.
    Tcp(TcpArgs),
    /// HTTP/1.1 goodput and requests/s through the DUT: a server on side B, N clients on side A, laid out as LANCOM Table 13.
    Http(HttpArgs),
    /// The rate that keeps the DUT's CPU load near a target (the Cisco report's 75 % test), per frame size.
    CpuTarget(CpuTargetArgs),
    /// IPsec tunnel setup rate: N emulated peers on port B bring their tunnels up to one VPN gateway (IKEv2, PSK), hold them and delete them; attempts, established, failures by the gateway's answer, tunnels per second and the setup-time percentiles.
    Tunnels(crate::args::tunnels::TunnelsArgs),
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
        /// Frames each crossing between the tester's CPU and the router's holds (the queue that plays the NICs' receive rings; 4096 is a common NIC ring size). 256 keeps veth's own 256-frame rings, whose overflow during a stall of either CPU then counts as loss.
        #[arg(long, default_value_t = linerate_lab::DEFAULT_RING, value_parser = ring_depth())]
        ring: u32,
    },
    /// Removes a lab (--lab-name NAME), or every lab on this machine (--all: everything named lr-*, also after a crash). Without either, lists what --all would remove.
    Down {
        /// The lab to remove, as given to 'lab up --lab-name' ('default' for the lab --lab uses).
        #[arg(long)]
        lab_name: Option<String>,
        /// Remove every lab and namespace named lr-* on this machine, whoever made it (other users' runs too), after putting back the tester ports a killed tcp/http run left in its namespaces; a running tcp/http run's namespaces stay.
        #[arg(long, conflicts_with = "lab_name")]
        all: bool,
    },
    /// Shows the labs present.
    Status {
        /// Print JSON instead of text.
        #[arg(long)]
        json: bool,
    },
}

/// A lab's ring depth in frames: veth's own 256 up to a million.
fn ring_depth() -> clap::builder::RangedI64ValueParser<u32> {
    clap::value_parser!(u32).range(256..=1_048_576)
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
    /// Ring depth of a lab this run builds for itself (see 'lab up --ring'; default 4096); a lab already up keeps its own.
    #[arg(long, conflicts_with = "lab_name", value_parser = ring_depth())]
    pub lab_ring: Option<u32>,
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
    #[arg(long, value_enum, default_value = "auto")]
    pub engine: EngineName,
    /// How port B counts the test frames: kernel (linerate's XDP counter counts and drops them at the port's XDP hook, the cheapest way to receive), socket (every frame goes up to linerate through the engine's own socket; needed for --pcap), or auto (kernel where the counter attaches, else socket).
    #[arg(long, value_enum, default_value = "auto")]
    pub receiver: Receiver,
    /// After sending, wait this long for frames still in flight (RFC 2544: 2 s).
    #[arg(long, allow_hyphen_values = true, default_value = "2s")]
    pub straggler_wait: String,
    /// Before each trial, wait until the DUT has stopped forwarding earlier frames (the previous trial's backlog: each tester port receives at most 10 frames in 100 ms), at most this long; then the trial starts anyway, marked as possibly poisoned. 0 turns the check off (a port that sees steady foreign traffic).
    #[arg(long, allow_hyphen_values = true, default_value = "30s")]
    pub recovery_limit: String,
    /// Generator threads, each pinned to a CPU of its own and sending a stream of its own at 1/N of the rate: xdp, each its own copy of the generator program; af_packet, each its own socket, whose frames the kernel puts on the transmit queue of its CPU; af_xdp, each its own AF_XDP socket on queue k of port A (which needs N queues). With --ipsec --tunnels N (N at least the threads) the tunnels are dealt out to the threads, each encrypting its own.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub tx_threads: u16,
    /// Receiving threads on each port that receives test frames (--engine af_packet): the port's packet socket becomes a fanout group of N sockets, one per thread, and the kernel steers each test frame by its stream number (stream i to thread i mod N), so every stream's sequence, duplicates and latency are judged whole on one thread. Each generator thread sends a stream of its own: give --tx-threads N or more. With --ipsec --tunnels M: --direction decrypt counts the gateway's clear frames on N threads; --direction encrypt decrypts on N threads, tunnel i's ESP steered by its peer address to thread i mod N (--tx-threads a multiple of N). The threads' counts are added; the JSON lists what each counted (rx_threads).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub rx_threads: u16,
    /// Measure latency on every N-th frame of each stream (N a power of two, 1: every frame). auto: every frame up to 1 Mpps per receiving port, above that 0.5-1 million frames a second. Only the in-kernel counter (--receiver kernel) samples, for which reading the clock is a third of a frame's cost; a socket receiver measures every frame. Every frame is counted either way.
    #[arg(long, default_value = "auto", value_name = "auto|N", value_parser = linerate_engine::LatencySampling::parse)]
    pub latency_every: linerate_engine::LatencySampling,
    /// How deep every received test frame is checked before it counts: payload (the frame's length against its IP length, the UDP length, the IPv4 header checksum, and the UDP checksum over the whole frame, which finds any damaged byte) or headers (all but the UDP checksum: a damaged payload goes unseen; for the last few percent of a receiver's rate). A damaged frame, or one whose timestamp is in the future, counts as errored: lost, never received.
    #[arg(long, default_value = "payload", value_name = "headers|payload", value_parser = clap::builder::ValueParser::new(|s: &str| s.parse::<linerate_wire::FrameCheck>()))]
    pub frame_check: linerate_wire::FrameCheck,
    /// A header field that varies per frame, like pktgen's range: FIELD=MIN..MAX[/inc|/dec|/random][/step=N][/start=V], FIELD one of src-mac, dst-mac, src-ip, dst-ip, src-port, dst-port; repeat for several fields. E.g. dst-ip=198.19.0.2..198.19.0.254 (253 destinations), src-port=53..1000/random.
    #[arg(long = "range")]
    pub ranges: Vec<String>,
    /// Both ports send and receive at once (RFC 2544 bidirectional). Rates are totals over both directions, so --rate 100% fills both links; results are summed and kept per direction.
    #[arg(long, conflicts_with = "ranges")]
    pub bidirectional: bool,
    /// A drop test (the 100GE report's DDoS drop test): every other frame is sent from this source address, which the DUT is configured to drop. Those frames are reported as intended drops (and any that come through as leaked), apart from the loss of the other half. --scenario drop-test sets it in the lab.
    #[arg(long, value_name = "IP", conflicts_with = "bidirectional")]
    pub drop_from: Option<std::net::IpAddr>,
    #[command(flatten)]
    pub encap: EncapArgs,
    #[command(flatten)]
    pub ipsec: ipsec::IpsecArgs,
    /// With --ipsec: linerate emulates N VPN peers on port B (1..10000), each with its own outer address (from --ip-b upward, or --peer-addrs), IKE SA and CHILD_SA for its own slice of --remote-net (split in equal blocks), and the test frames are spread evenly over the tunnels; results are kept per tunnel too. On rfc2544 and loss a list (1,10,100) runs once per count and compares them side by side.
    #[arg(long, value_name = "N[,N...]")]
    pub tunnels: Option<String>,
    /// With --tunnels: the peers' outer addresses, FIRST (and upward), FIRST-LAST or ADDRESS/PREFIX. Default: from --ip-b upward (in the lab: 198.19.64.1 upward, which the lab's gateway routes to port B).
    #[arg(long, value_name = "FIRST[-LAST]|CIDR")]
    pub peer_addrs: Option<String>,
}

#[derive(Args, Debug)]
#[command(mut_arg("sizes", |a| a.default_value(ALL_SIZES)))]
pub struct Rfc2544Args {
    #[command(flatten)]
    pub ports: PortArgs,
    #[command(flatten)]
    pub frames: FrameArgs,
    /// Show the throughput at every layer: Mbps at L1, L2, L3 and L4 (UDP payload) and the link usage as LanTraffic computes it.
    #[arg(long)]
    pub all_layers: bool,
    /// After each frame size's search, MLRsearch (RFC 9971) too: the NDR (loss 0 %) and PDR (loss 0.5 %) conditional throughputs, exceed ratio 50 % over two trials of --trial-duration, printed beneath the zero-loss throughput; the zero-loss search's trials count too, so it adds a few trials per size. They repeat better than it on a DUT that stalls now and then.
    #[arg(long)]
    pub mlrsearch: bool,
    /// Search every frame size N times, round-robin (every size once per round), and report each figure (zero-loss throughput, NDR, PDR) as its median over the rounds with its spread (highest over lowest round): figures that repeat on a machine whose speed moves, such as a shared VM. Takes N times as long.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub repeat: u32,
    /// How long each trial sends (default 2s).
    #[arg(long, allow_hyphen_values = true)]
    pub trial_duration: Option<String>,
    /// Stop the search when the bracket is this narrow, relative to its top: 1% or 0.01 (N% is percent, a bare number a ratio).
    #[arg(long, default_value = "1%")]
    pub resolution: String,
    /// Loss a trial may have and still pass (RFC 2544: 0): 0.1% or 0.001 (N% is percent, a bare number a ratio).
    #[arg(long, default_value = "0")]
    pub loss: String,
    /// Highest rate tried (default: line rate), e.g. 50%, 2Mpps, 5Gbps.
    #[arg(long)]
    pub max_rate: Option<String>,
    /// RFC 2544 to the letter: 60 s trials (instead of --trial-duration).
    #[arg(long)]
    pub rfc2544_strict: bool,
    /// Write every trial and the results as JSON to FILE (rewritten after each trial).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Calibration file ('linerate calibrate'): results within 5 % of the stored tester ceiling are marked tester-limited. Default: ~/.local/share/linerate/calibration.json.
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    #[command(flatten)]
    pub dut: DutArgs,
    #[command(flatten)]
    pub record: RecordArgs,
}

#[derive(Args, Debug)]
#[command(mut_arg("sizes", |a| a.default_value("64,512,1518")))]
pub struct CpuTargetArgs {
    #[command(flatten)]
    pub ports: PortArgs,
    /// The DUT CPU load (total) to hold: 75% or 0.75 (N% is percent, a bare number a ratio).
    #[arg(long, default_value = "75%")]
    pub target: String,
    /// How close to the target counts as reached, in percentage points.
    #[arg(long, default_value = "5")]
    pub tolerance: f64,
    #[command(flatten)]
    pub frames: FrameArgs,
    /// How long each trial sends (the CPU load is averaged over it).
    #[arg(long, allow_hyphen_values = true, default_value = "2s")]
    pub trial_duration: String,
    /// Highest rate tried (default: line rate), e.g. 50%, 2Mpps.
    #[arg(long)]
    pub max_rate: Option<String>,
    /// Most trials per frame size.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=30))]
    pub max_trials: u32,
    /// Write the result and every trial as JSON to FILE.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub dut: DutArgs,
    #[command(flatten)]
    pub record: RecordArgs,
}

/// The DUT's configuration (lab scenarios) and CPU load (see docs/SCENARIOS.md).
#[derive(Args, Debug, Clone, Default)]
pub struct DutArgs {
    /// Lab DUT configuration, e.g. lan-lan, wan-lan, acl:12, firewall:50, routes:900000, tunnel:vxlan, xdp-router; parts joined with '+' (wan-lan+acl:12); several separated by ',' are compared side by side. Builds a fresh lab for each.
    #[arg(long, conflicts_with_all = ["port_a", "lab_name", "dut_cpu_cmd", "dut_snmp"])]
    pub scenario: Option<String>,
    #[command(flatten)]
    pub cpu: DutCpuArgs,
}

/// An external DUT's CPU load, recorded in every trial (the lab's is read
/// from the DUT's CPU counters instead; see `commands::dut_cpu_meter`).
#[derive(Args, Debug, Clone, Default)]
pub struct DutCpuArgs {
    /// External DUT: a command printing its CPU load in percent (e.g. "ssh r1 ..."), run towards the end of each trial.
    #[arg(long, conflicts_with = "lab")]
    pub dut_cpu_cmd: Option<String>,
    /// External DUT: its CPU load from SNMP (HOST-RESOURCES-MIB hrProcessorLoad, via snmpwalk), as COMMUNITY@HOST.
    #[arg(long, conflicts_with_all = ["lab", "dut_cpu_cmd"])]
    pub dut_snmp: Option<String>,
}

impl DutArgs {
    /// The options as values (`--scenario` is parsed by the command's plan).
    pub fn plan(&self) -> DutPlan {
        DutPlan {
            cpu: self.cpu.plan(),
        }
    }
}

impl DutCpuArgs {
    /// The options as values.
    pub fn plan(&self) -> DutCpuPlan {
        DutCpuPlan {
            dut_cpu_cmd: self.dut_cpu_cmd.clone(),
            dut_snmp: self.dut_snmp.clone(),
        }
    }
}

#[derive(Args, Debug)]
#[command(mut_arg("sizes", |a| a.default_value(ALL_SIZES)))]
pub struct LatencyArgs {
    #[command(flatten)]
    pub ports: PortArgs,
    #[command(flatten)]
    pub frames: FrameArgs,
    /// Loads as shares of the throughput (or of --rate), e.g. 10%,50%,90%,100%.
    #[arg(long, default_value = "100%")]
    pub loads: String,
    /// Measure at shares of this rate instead of searching the throughput first (e.g. 100kfps, 50%, 1Gbps).
    #[arg(long)]
    pub rate: Option<String>,
    /// How long each latency trial sends (RFC 2544 asks for at least 120 s).
    #[arg(long, allow_hyphen_values = true, default_value = "10s")]
    pub trial_duration: String,
    /// Trials per load (RFC 2544: 20), combined as the RFC averages them.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Trial duration of the throughput search run first (default 2s; no search with --rate).
    #[arg(long, allow_hyphen_values = true)]
    pub search_duration: Option<String>,
    /// Resolution of the throughput search: 1% or 0.01 (N% is percent, a bare number a ratio; default 1%; no search with --rate).
    #[arg(long)]
    pub resolution: Option<String>,
    /// Highest rate the throughput search tries (default: line rate; no search with --rate).
    #[arg(long)]
    pub max_rate: Option<String>,
    /// Write the results with every trial as JSON to FILE.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Calibration file with the tester's own latency (default: ~/.local/share/linerate/calibration.json).
    #[arg(long)]
    pub calibration: Option<PathBuf>,
    #[command(flatten)]
    pub dut_cpu: DutCpuArgs,
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
    /// ESP encryption: null, des, 3des, aes (CBC), aes-gcm; or a proposal as --ipsec takes it (aes256gcm16, aes128-sha256, ...), which names the integrity too.
    #[arg(long)]
    pub esp: Option<String>,
    /// ESP integrity: none, md5, sha1, sha256, sha384, sha512 (HMAC, truncated as in RFC 2403/2404/4868).
    #[arg(long, requires = "esp")]
    pub auth: Option<String>,
    /// AH with this integrity algorithm: md5, sha1, sha256, sha384, sha512.
    #[arg(long)]
    pub ah: Option<String>,
    /// IPsec mode of --esp or --ah: tunnel (the default) or transport.
    #[arg(long, value_parser = ["tunnel", "transport"])]
    pub mode: Option<String>,
    /// IPsec NAT traversal (UDP encapsulation, RFC 3948).
    #[arg(long)]
    pub nat_t: bool,
    /// How --esp travels, as --ipsec's --esp-encap says it: udp (the same as --nat-t) or raw (IP protocol 50, the default here).
    #[arg(long, value_name = "udp|raw")]
    pub esp_encap: Option<String>,
    /// WireGuard (a data message over UDP): the inner packet padded to 16
    /// bytes as the kernel does, or `--wireguard unpadded` as boringtun sends it.
    #[arg(long, num_args = 0..=1, default_missing_value = "padded", value_name = "PADDING")]
    pub wireguard: Option<String>,
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
#[command(mut_arg("sizes", |a| a.default_value("64,512,1518")))]
pub struct CalibrateArgs {
    /// Engines to calibrate; each that cannot run here is skipped with the reason.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "xdp,af_xdp,af_packet"
    )]
    pub engine: Vec<EngineName>,
    /// How port B counts (see 'trial --help'); ceilings are stored per receiver.
    #[arg(long, value_enum, default_value = "auto")]
    pub receiver: Receiver,
    #[command(flatten)]
    pub frames: FrameArgs,
    /// How long each trial sends.
    #[arg(long, allow_hyphen_values = true, default_value = "1s")]
    pub trial_duration: String,
    /// Stop the search when the bracket is this narrow, relative to its top: 1% or 0.01 (N% is percent, a bare number a ratio).
    #[arg(long, default_value = "1%")]
    pub resolution: String,
    /// After sending, wait this long for frames still in flight.
    #[arg(long, allow_hyphen_values = true, default_value = "500ms")]
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
    /// Generator threads, each pinned to a CPU of its own and sending a stream of its own at 1/N of the rate: xdp, each its own copy of the generator program; af_packet, each its own socket, whose frames the kernel puts on the transmit queue of its CPU; af_xdp, each its own AF_XDP socket on queue k of port A (which needs N queues). With --ipsec --tunnels N (N at least the threads) the tunnels are dealt out to the threads, each encrypting its own.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=16))]
    pub tx_threads: u16,
}

#[derive(Args, Debug)]
pub struct TrialArgs {
    #[command(flatten)]
    pub ports: PortArgs,
    /// The frame size or mix: one --frame-size, --l3-length, --udp-payload or --imix.
    #[command(flatten)]
    pub frames: FrameArgs,
    /// Rate: 50% (of line rate, L1), 100000fps, 1.5Mpps, 300Mbps (L2), 300Mbps@L1.
    #[arg(long)]
    pub rate: String,
    /// How long to send.
    #[arg(long, allow_hyphen_values = true, default_value = "2s")]
    pub duration: String,
    /// Send exactly N frames at the rate (per direction), instead of a duration: the trial lasts N / rate (pktgen's count).
    #[arg(long = "frames", value_name = "N", conflicts_with = "duration")]
    pub frame_count: Option<String>,
    /// Loss allowed before the trial counts as failed (exit 1): 0.1% or 0.001 (N% is percent, a bare number a ratio).
    #[arg(long, default_value = "0")]
    pub loss: String,
    /// Write the trial as JSON to FILE.
    #[arg(long)]
    pub json: Option<PathBuf>,
    #[command(flatten)]
    pub dut_cpu: DutCpuArgs,
    #[command(flatten)]
    pub record: RecordArgs,
}

/// The test frames' layout: IP version and 802.1Q tag (`PortArgs` flattens
/// these in, so every packet-engine command has them).
#[derive(Args, Debug, Clone, Default)]
pub struct EncapArgs {
    /// Send IPv6 test frames (RFC 5180): Ethernet + IPv6 + UDP, signature at byte 62; the smallest frame is 78 bytes. The lab routes 2001:2::/64 (A) to 2001:2:0:1::/64 (B); with --port-a/--port-b give IPv6 addresses to --ip-a/--gw-a/--ip-b/--gw-b.
    #[arg(long)]
    pub ipv6: bool,
    /// Tag every frame the tester sends (test frames, ARP, ND) with this 802.1Q VLAN, optionally with a priority: ID or ID:PCP (e.g. 100 or 100:5). In the lab the router routes it on VLAN subinterfaces (tagged ports where the kernel has no 802.1Q).
    #[arg(long, value_name = "ID[:PCP]")]
    pub vlan: Option<String>,
}

impl EncapArgs {
    pub fn encap(&self) -> Result<Encap> {
        Ok(Encap {
            ip: if self.ipv6 {
                IpVersion::V6
            } else {
                IpVersion::V4
            },
            vlan: self.vlan.as_deref().map(VlanTag::parse).transpose()?,
        })
    }
}

/// `--engine`: the packet I/O engine, as the option names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
// No doc comments on the values: `--engine`'s own help explains them.
pub enum EngineName {
    Auto,
    Xdp,
    #[value(name = "af_xdp")]
    AfXdp,
    #[value(name = "af_packet")]
    AfPacket,
}

impl From<EngineName> for EngineChoice {
    fn from(e: EngineName) -> EngineChoice {
        match e {
            EngineName::Auto => EngineChoice::Auto,
            EngineName::Xdp => EngineChoice::Xdp,
            EngineName::AfXdp => EngineChoice::AfXdp,
            EngineName::AfPacket => EngineChoice::AfPacket,
        }
    }
}

/// `--receiver`: how port B counts the test frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Receiver {
    /// The in-kernel counter where it attaches, else the engine's socket.
    Auto,
    /// linerate's XDP counter at port B's XDP hook.
    Kernel,
    /// The engine's own socket: every frame up to linerate's receiver.
    Socket,
}

impl From<Receiver> for ReceiverChoice {
    fn from(r: Receiver) -> ReceiverChoice {
        match r {
            Receiver::Auto => ReceiverChoice::Auto,
            Receiver::Kernel => ReceiverChoice::Kernel,
            Receiver::Socket => ReceiverChoice::Socket,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use linerate_wire::Frames;

    #[test]
    fn the_command_line_is_consistent() {
        // clap's own checks (conflicts naming existing options, ...), which
        // a release build skips.
        Cli::command().debug_assert();
    }

    /// The frame-size options of `argv` as the command parsed them.
    fn frames_of(argv: &[&str]) -> Vec<Frames> {
        let cli = Cli::try_parse_from(std::iter::once("linerate").chain(argv.iter().copied()))
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let frames = match &cli.command {
            Command::Rfc2544(a) => &a.frames,
            Command::Trial(a) => &a.frames,
            Command::Latency(a) => &a.frames,
            Command::Calibrate(a) => &a.frames,
            Command::CpuTarget(a) => &a.frames,
            Command::Loss(a) => &a.frames,
            Command::Mlrsearch(a) => &a.frames,
            Command::BackToBack(a) => &a.frames,
            other => panic!("no frame options in {other:?}"),
        };
        frames.frames(&linerate_wire::Encap::default()).unwrap()
    }

    fn sizes(frames: &[Frames]) -> Vec<u16> {
        frames.iter().map(|f| f.largest().frame()).collect()
    }

    #[test]
    fn each_command_keeps_its_default_sizes() {
        let all = vec![64, 128, 256, 512, 1024, 1280, 1518];
        for (argv, want) in [
            (&["rfc2544", "--lab"][..], all.clone()),
            (&["latency", "--lab"][..], all.clone()),
            (&["mlrsearch", "--lab"][..], all.clone()),
            (&["cpu-target", "--lab"][..], vec![64, 512, 1518]),
            (&["calibrate"][..], vec![64, 512, 1518]),
            (&["loss", "--lab", "--loads", "1%"][..], vec![64]),
            (&["back-to-back", "--lab"][..], vec![64]),
        ] {
            assert_eq!(sizes(&frames_of(argv)), want, "{argv:?}");
            // IPv6 adapts exactly these lists (frame_args::DEFAULT_LISTS).
            let want: Vec<u64> = want.iter().map(|&n| n as u64).collect();
            assert!(
                crate::args::frames::DEFAULT_LISTS.contains(&want.as_slice()),
                "{argv:?}: default {want:?} missing from DEFAULT_LISTS"
            );
        }
    }

    #[test]
    fn each_command_takes_the_options_it_took_before() {
        for (argv, want) in [
            (
                &["rfc2544", "--lab", "--sizes", "64,512"][..],
                vec![64, 512],
            ),
            (&["rfc2544", "--lab", "--l3-length", "46"][..], vec![64]),
            (
                &["rfc2544", "--lab", "--udp-payload", "1472"][..],
                vec![1518],
            ),
            (
                &["trial", "--lab", "--rate", "1%", "--frame-size", "128"][..],
                vec![128],
            ),
            (
                &["trial", "--lab", "--rate", "1%", "--l3-length", "46"][..],
                vec![64],
            ),
            (
                &["trial", "--lab", "--rate", "1%", "--udp-payload", "18"][..],
                vec![64],
            ),
            (
                &["latency", "--lab", "--sizes", "64", "--rate", "1%"][..],
                vec![64],
            ),
            (&["latency", "--lab", "--l3-length", "1500"][..], vec![1518]),
            (
                &["cpu-target", "--lab", "--l3-length", "46,1500"][..],
                vec![64, 1518],
            ),
            (&["calibrate", "--sizes", "128"][..], vec![128]),
            (
                &["loss", "--lab", "--sizes", "64,128", "--loads", "1%"][..],
                vec![64, 128],
            ),
            (
                &["loss", "--lab", "--l3-length", "46", "--loads", "1%"][..],
                vec![64],
            ),
            (&["mlrsearch", "--lab", "--sizes", "512"][..], vec![512]),
            (
                &["back-to-back", "--lab", "--l3-length", "46"][..],
                vec![64],
            ),
        ] {
            assert_eq!(sizes(&frames_of(argv)), want, "{argv:?}");
        }
    }

    #[test]
    fn every_packet_command_takes_mixes() {
        for argv in [
            &["rfc2544", "--lab", "--imix", "imix1"][..],
            &["trial", "--lab", "--rate", "1%", "--imix", "imix1"][..],
            &["latency", "--lab", "--imix", "imix1"][..],
            &["loss", "--lab", "--imix", "imix1", "--loads", "1%"][..],
            &["mlrsearch", "--lab", "--imix", "imix1"][..],
            &["back-to-back", "--lab", "--imix", "imix1"][..],
        ] {
            let frames = frames_of(argv);
            assert_eq!(frames.len(), 1, "{argv:?}");
            assert_eq!(frames[0].mix().unwrap().name, "IMIX 1", "{argv:?}");
        }
    }

    #[test]
    fn two_kinds_of_frame_sizes_are_usage_errors() {
        for argv in [
            &["rfc2544", "--lab", "--sizes", "64", "--l3-length", "40"][..],
            &[
                "trial",
                "--lab",
                "--rate",
                "1%",
                "--frame-size",
                "64",
                "--imix",
                "imix1",
            ][..],
            &[
                "loss",
                "--lab",
                "--loads",
                "1%",
                "--l3-length",
                "46",
                "--imix",
                "imix1",
            ][..],
            &[
                "mlrsearch",
                "--lab",
                "--udp-payload",
                "18",
                "--imix",
                "imix1",
            ][..],
        ] {
            let argv = std::iter::once("linerate").chain(argv.iter().copied());
            assert!(Cli::try_parse_from(argv).is_err());
        }
    }

    #[test]
    fn external_dut_cpu_options_are_on_every_packet_command() {
        for command in [
            "rfc2544",
            "trial",
            "latency",
            "loss",
            "mlrsearch",
            "back-to-back",
            "cpu-target",
        ] {
            let cmd = Cli::command();
            let sub = cmd.find_subcommand(command).unwrap();
            for option in ["dut-cpu-cmd", "dut-snmp"] {
                assert!(
                    sub.get_arguments().any(|a| a.get_long() == Some(option)),
                    "{command} has no --{option}"
                );
            }
        }
    }

    #[test]
    fn frame_sizes_follow_the_layout() {
        let v6 = EncapArgs {
            ipv6: true,
            vlan: None,
        }
        .encap()
        .unwrap();
        let e = linerate_wire::FrameSize::from_frame_in(64, &v6)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("smallest is 78 bytes") && e.contains("--frame-size 78"),
            "{e}"
        );
        assert_eq!(
            linerate_wire::FrameSize::from_udp_payload_in(1452, &v6)
                .unwrap()
                .frame(),
            1518
        );
        let tagged = EncapArgs {
            ipv6: false,
            vlan: Some("100:5".into()),
        }
        .encap()
        .unwrap();
        assert_eq!(
            linerate_wire::FrameSize::from_frame_in(64, &tagged)
                .unwrap()
                .l3(),
            42
        );
        assert_eq!(
            linerate_wire::FrameSize::from_l3_in(40, &tagged)
                .unwrap()
                .frame(),
            64
        );
        assert!(EncapArgs {
            ipv6: false,
            vlan: Some("5000".into())
        }
        .encap()
        .is_err());
    }
}
