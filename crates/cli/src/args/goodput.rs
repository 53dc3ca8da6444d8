//! Arguments of `linerate tcp` and `linerate http` (kernel TCP stack
//! through the DUT).

use clap::Args;
use std::path::PathBuf;

/// Where the two tester sides are, for tests that use the kernel's TCP
/// stack: the lab, or two interfaces the user names (moved into namespaces
/// of linerate's own for the run, so traffic between them must cross the
/// DUT, and moved back afterwards).
#[derive(Args, Debug, Clone)]
pub struct StackPortArgs {
    /// Test through the lab's DUT: the lab 'default' if it is up, else one built for this run and removed after.
    #[arg(long, conflicts_with_all = ["port_a", "port_b"])]
    pub lab: bool,
    /// Use this lab (made by 'linerate lab up --lab-name NAME'); it must exist.
    #[arg(long, requires = "lab")]
    pub lab_name: Option<String>,
    /// Tester port A (clients, LAN side), e.g. enp1s0f0; it is moved into a namespace for the run and back after it, with its state (up/down, MTU, addresses, routes, sysctls) restored.
    #[arg(long, requires_all = ["port_b", "ip_a", "gw_a", "ip_b", "gw_b"])]
    pub port_a: Option<String>,
    /// Tester port B (server, WAN side).
    #[arg(long)]
    pub port_b: Option<String>,
    /// Kernel address of port A, e.g. 198.18.0.2/24 or 2001:2::2/64.
    #[arg(long)]
    pub ip_a: Option<String>,
    /// The DUT's address on port A's subnet.
    #[arg(long)]
    pub gw_a: Option<String>,
    #[arg(long)]
    pub ip_b: Option<String>,
    #[arg(long)]
    pub gw_b: Option<String>,
    /// In the lab: IPv6 (RFC 5180 addresses 2001:2::/64 on A, 2001:2:0:1::/64 on B; IPv6 is switched on along the path for the run).
    #[arg(long, conflicts_with_all = ["port_a", "port_b"])]
    pub ipv6: bool,
    /// The address the clients connect to, when it is not the server's (a NAT DUT's public address).
    #[arg(long)]
    pub connect_to: Option<String>,
    /// Line speed for the link usage, e.g. 1G, 10G. Default: the speed the link reports, else 10G.
    #[arg(long)]
    pub line_speed: Option<String>,
    /// The row label in the table (default: the lab or the ports).
    #[arg(long)]
    pub label: Option<String>,
    /// A connection not established within this time counts as blocked by the DUT.
    #[arg(long, allow_hyphen_values = true, default_value = "3s")]
    pub connect_timeout: String,
}

/// What `--table-from` (measure nothing, lay out earlier runs) refuses
/// beside the command's own options: where and how to measure, and where
/// to store a run.
const TABLE_CONFLICTS: [&str; 18] = [
    "lab",
    "lab_name",
    "port_a",
    "port_b",
    "ip_a",
    "gw_a",
    "ip_b",
    "gw_b",
    "ipv6",
    "connect_to",
    "line_speed",
    "label",
    "connect_timeout",
    "db",
    "no_db",
    "dut_name",
    "dut_firmware",
    "events",
];

#[derive(Args, Debug)]
pub struct TcpArgs {
    #[command(flatten)]
    pub ports: StackPortArgs,
    /// Parallel TCP streams (the techpapers use 5, as iperf3 -P 5).
    #[arg(long, short = 'P', default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=128))]
    pub streams: u16,
    /// download (B to A), upload (A to B) or both (download, then upload).
    #[arg(long, default_value = "both", value_parser = ["download", "upload", "both"])]
    pub direction: String,
    /// Socket buffer (SO_SNDBUF and SO_RCVBUF) on every socket, e.g. 256k as the LANCOM tests (k, M: binary). Default: kernel autotuning.
    #[arg(long)]
    pub window: Option<String>,
    /// How long each direction measures.
    #[arg(long, allow_hyphen_values = true, default_value = "10s")]
    pub duration: String,
    /// TCP port the server listens on.
    #[arg(long, default_value_t = 5201)]
    pub port: u16,
    /// Write the record as JSON to FILE.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Measure nothing: lay out earlier runs' --json files (one per scenario, labelled with --label when each was measured) as LANCOM Table 14; no other option but --quiet applies.
    #[arg(long, value_delimiter = ',', num_args = 1..,
          conflicts_with_all = ["streams", "direction", "window", "duration", "port", "json"],
          conflicts_with_all = TABLE_CONFLICTS)]
    pub table_from: Vec<PathBuf>,
    #[command(flatten)]
    pub record: crate::args::record::RecordArgs,
}

#[derive(Args, Debug)]
pub struct HttpArgs {
    #[command(flatten)]
    pub ports: StackPortArgs,
    /// Parallel HTTP clients, each on a keep-alive connection of its own.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub clients: u16,
    /// Object sizes, requested in turn, e.g. 1M,10M (k, M: binary).
    #[arg(long, value_delimiter = ',', default_value = "1M")]
    pub object_size: Vec<String>,
    /// download (GET, B to A), upload (POST, A to B; built-in server only) or both.
    #[arg(long, default_value = "download", value_parser = ["download", "upload", "both"])]
    pub direction: String,
    /// How long each direction measures.
    #[arg(long, allow_hyphen_values = true, default_value = "10s")]
    pub duration: String,
    /// TCP port the server listens on.
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// The server: linerate's own (hyper), or nginx (must be installed) run in side B's namespace.
    #[arg(long, default_value = "builtin", value_parser = ["builtin", "nginx"])]
    pub server: String,
    /// Write the record as JSON to FILE.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Measure nothing: lay out earlier runs' --json files (one per scenario) as LANCOM Table 15; no other option but --quiet applies.
    #[arg(long, value_delimiter = ',', num_args = 1..,
          conflicts_with_all = ["clients", "object_size", "direction", "duration", "port", "server", "json"],
          conflicts_with_all = TABLE_CONFLICTS)]
    pub table_from: Vec<PathBuf>,
    #[command(flatten)]
    pub record: crate::args::record::RecordArgs,
}
