//! The measurements, as the JSON output carries them.
//!
//! Goodput is L4 payload: the bytes the receiving application read, per
//! second of the measured window, with no TCP, IP or Ethernet header
//! counted. Link usage is derived from it as the LanTraffic V2 datasheet
//! does (section 5.1): goodput x (MSS + TCP header + IP header + 18) / MSS,
//! the 18 bytes being the Ethernet header and FCS, over the line speed.

use serde::{Deserialize, Serialize};

/// Which way the payload flows. Side A is the LAN side (the clients), side
/// B the WAN side (the servers): download is B to A, upload A to B, as the
/// techpapers' "LAN download / upload" columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Download,
    Upload,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::Download => "download",
            Direction::Upload => "upload",
        }
    }

    /// "download", "upload" or "both" (download, then upload).
    pub fn parse_list(text: &str) -> Option<Vec<Direction>> {
        match text {
            "download" => Some(vec![Direction::Download]),
            "upload" => Some(vec![Direction::Upload]),
            "both" => Some(vec![Direction::Download, Direction::Upload]),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Family {
    Ipv4,
    Ipv6,
}

impl Family {
    pub fn name(self) -> &'static str {
        match self {
            Family::Ipv4 => "IPv4",
            Family::Ipv6 => "IPv6",
        }
    }

    pub fn ip_header(self) -> u64 {
        match self {
            Family::Ipv4 => 20,
            Family::Ipv6 => 40,
        }
    }
}

/// Bytes of Ethernet header (14) and FCS (4) per frame, as LanTraffic counts.
pub const ETHERNET_HEADER_AND_FCS: u64 = 18;
/// TCP header without options, as LanTraffic counts.
pub const TCP_HEADER: u64 = 20;

/// LanTraffic's coefficient from TCP payload to Ethernet frame bytes for a
/// path MTU: (MSS + 20 + IP header + 18) / MSS with MSS = MTU - IP header - 20.
/// MTU 1500, IPv4: 1518 / 1460 = 1.039.
pub fn lantraffic_coefficient(mtu: u64, family: Family) -> f64 {
    let mss = mtu.saturating_sub(family.ip_header() + TCP_HEADER).max(1);
    (mtu + ETHERNET_HEADER_AND_FCS) as f64 / mss as f64
}

/// Link usage in percent of `line_bps` for an L4 goodput, per LanTraffic.
pub fn link_usage_percent(goodput_bps: f64, mtu: u64, family: Family, line_bps: u64) -> f64 {
    100.0 * goodput_bps * lantraffic_coefficient(mtu, family) / line_bps as f64
}

/// What every run shares: the path, the line it is judged against.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PathInfo {
    /// "lab <name>" or "ports <a>/<b>", or the user's --label.
    pub label: String,
    pub family: Family,
    pub client_ip: String,
    pub server_ip: String,
    /// MTU of the tester interface (both sides are checked to match or the
    /// smaller is taken): the basis of the link-usage coefficient.
    pub mtu: u64,
    pub line_bps: u64,
    pub line_speed_source: String,
}

/// One TCP stream of a run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StreamRecord {
    pub stream: usize,
    /// Payload bytes the receiver read in the measured window.
    pub bytes: u64,
    /// L4 payload bits per second over the window.
    pub goodput_bps: f64,
    /// TCP_INFO tcpi_total_retrans of the sending socket, over the
    /// connection's life.
    pub retransmits: u64,
    /// Smoothed RTT the sender saw at the end (TCP_INFO tcpi_rtt), µs.
    pub rtt_us: u64,
    /// The sender's MSS (TCP_INFO tcpi_snd_mss; options such as timestamps
    /// already taken off).
    pub snd_mss: u64,
}

/// One direction of `linerate tcp`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TcpRun {
    pub direction: Direction,
    /// Length of the measured window, seconds (from the moment all streams
    /// were connected, slow start included, as iperf3 counts).
    pub seconds: f64,
    pub bytes: u64,
    /// L4 payload, all streams.
    pub goodput_bps: f64,
    pub retransmits: u64,
    /// Ethernet-frame bits per second the goodput implies (LanTraffic's
    /// coefficient): L2 without preamble and inter-frame gap.
    pub l2_bps: f64,
    pub link_usage_percent: f64,
    pub streams: Vec<StreamRecord>,
    /// Stopped early by SIGINT/SIGTERM: the window is shorter.
    pub interrupted: bool,
}

/// `linerate tcp --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TcpRecord {
    pub test: String,
    pub path: PathInfo,
    pub streams: usize,
    /// Socket buffer asked for with --window (SO_SNDBUF and SO_RCVBUF on
    /// both ends), bytes; None: the kernel's autotuning.
    pub window_bytes: Option<u64>,
    pub duration_s: f64,
    pub port: u16,
    pub runs: Vec<TcpRun>,
}

/// One direction of `linerate http`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HttpRun {
    pub direction: Direction,
    pub seconds: f64,
    /// HTTP body bytes moved in the window (L7 payload; headers not counted).
    pub bytes: u64,
    pub goodput_bps: f64,
    /// Requests completed in the window.
    pub requests: u64,
    pub requests_per_s: f64,
    /// Requests that failed (connection error or status other than 2xx).
    pub errors: u64,
    pub l2_bps: f64,
    pub link_usage_percent: f64,
    pub interrupted: bool,
}

/// `linerate http --json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HttpRecord {
    pub test: String,
    pub path: PathInfo,
    /// "linerate" (built in, hyper) or "nginx".
    pub server: String,
    pub clients: usize,
    pub object_sizes: Vec<u64>,
    pub duration_s: f64,
    pub port: u16,
    pub runs: Vec<HttpRun>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficients_are_the_datasheets() {
        // LanTraffic V2, 5.1: 1518/1460 = 1.039 (IPv4), 1518/1440 (IPv6).
        let v4 = lantraffic_coefficient(1500, Family::Ipv4);
        assert!((v4 - 1518.0 / 1460.0).abs() < 1e-12);
        assert_eq!(format!("{v4:.3}"), "1.040");
        let v6 = lantraffic_coefficient(1500, Family::Ipv6);
        assert!((v6 - 1518.0 / 1440.0).abs() < 1e-12);
    }

    #[test]
    fn link_usage_of_the_datasheets_gigabit_row() {
        // Table 3, 1 TCP, Windows Seven: 940.7 Mb/s (97.7 %).
        let pct = link_usage_percent(940.7e6, 1500, Family::Ipv4, 1_000_000_000);
        assert!((pct - 97.8).abs() < 0.15, "{pct}");
    }

    #[test]
    fn directions_parse() {
        assert_eq!(
            Direction::parse_list("both").unwrap(),
            vec![Direction::Download, Direction::Upload]
        );
        assert!(Direction::parse_list("sideways").is_none());
    }
}
