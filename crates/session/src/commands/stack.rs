//! The path `tcp` and `http` measure: two tester sides with kernel
//! addresses for the time of the run (the lab's, or named ports moved into
//! namespaces of their own), shared by both commands.

use crate::error::{bail, err, Result};
use crate::recorder::RecordPlan;
use crate::recorder::Recorder;
use linerate_goodput::hosts::{self, HostSetup, Side, LAB_V6, LAB_V6_PREFIX};
use linerate_goodput::record::{lantraffic_coefficient, PathInfo};
use linerate_goodput::{Endpoint, GoodputError};
use linerate_lab::Lab;
use linerate_wire::cidr::{Cidr, CidrError};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Default line speed when neither the user nor the link says one.
const DEFAULT_LINE_BPS: u64 = 10_000_000_000;

/// A ready path. Fields drop in order: the host set-up is undone before a
/// lab made for this run is removed.
pub struct StackPath {
    pub client: Endpoint,
    pub server: Endpoint,
    /// Where the clients connect (the server's address unless --connect-to).
    pub connect_ip: IpAddr,
    pub info: PathInfo,
    pub connect_timeout: Duration,
    #[allow(dead_code)] // held: undone on drop
    hosts: HostSetup,
    #[allow(dead_code)] // held: a lab made for the run is removed on drop
    lab: Option<Lab>,
    #[allow(dead_code)] // held: named ports are this run's until it ends
    port_locks: Vec<linerate_lab::LabLock>,
}

impl StackPath {
    pub fn connect_to(&self, port: u16) -> SocketAddr {
        SocketAddr::new(self.connect_ip, port)
    }

    /// What the run is, for the results database and the run_started
    /// event: `command` through the kernel's TCP stack, windows of `duration`.
    pub fn record_info<'a>(
        &'a self,
        command: &'a str,
        duration: Duration,
    ) -> crate::recorder::RunInfo<'a> {
        crate::recorder::RunInfo {
            command,
            engine: "kernel TCP",
            // No test frames to sample: --pcap is refused before (see `recorder`).
            receiver: linerate_engine::ReceiverKind::Socket,
            line_speed_bps: self.info.line_bps,
            scenario: &self.info.label,
            report: None,
            sizes: Vec::new(),
            trial_s: duration.as_secs_f64(),
            resolution: 0.0,
            capture_at: Default::default(),
        }
    }

    /// Fills in the L2 rate and link usage of a goodput, per LanTraffic.
    pub fn l2_and_usage(&self, goodput_bps: f64) -> (f64, f64) {
        let l2 = goodput_bps * lantraffic_coefficient(self.info.mtu, self.info.family);
        (l2, 100.0 * l2 / self.info.line_bps as f64)
    }
}

pub fn parse_cidr(text: &str, option: &str) -> Result<(IpAddr, u8)> {
    match text.parse::<Cidr>() {
        Ok(cidr) => Ok((cidr.addr, cidr.prefix_len)),
        Err(CidrError::NoPrefix) => Err(err!(
            BadInput,
            "{option} '{text}' needs a prefix length, e.g. 198.18.0.2/24"
        )),
        Err(CidrError::BadAddress(_)) => Err(err!(
            BadInput,
            "{option} '{text}' is not an IP address with a prefix length"
        )),
        Err(CidrError::BadPrefix { max }) => Err(err!(
            BadInput,
            "{option} '{text}': the prefix length must be 0..{max}"
        )),
    }
}

pub fn parse_ip(text: &str, option: &str) -> Result<IpAddr> {
    text.parse()
        .map_err(|_| err!(BadInput, "{option} '{text}' is not an IP address"))
}

/// The run's output paths (`--db`, `--events`, `--json`), checked before
/// anything is set up. `--pcap` samples the test frames of the packet
/// commands; here the kernel's TCP carries the data, so it is refused.
pub fn check_outputs(
    command: &str,
    record: &RecordPlan,
    json: Option<&std::path::Path>,
) -> Result<()> {
    if let Some(pcap) = &record.pcap {
        bail!(BadInput,
            "--pcap {}: {command} sends through the kernel's TCP stack, not linerate's test frames; capture it with tcpdump on the tester port instead",
            pcap.display()
        );
    }
    crate::outputs::Outputs::new()
        .json(json)
        .record(record)
        .check()
}

/// The run's recorder (`--db`, `--events`, `--json`), its outputs checked
/// by [`check_outputs`] when the plan was made.
pub fn recorder(record: &RecordPlan, json: Option<&std::path::Path>) -> Result<Recorder> {
    Ok(Recorder::open(record)?.json_file(json))
}

/// The run ended (its table printed): the record saved and stored, the
/// run marked complete, or interrupted when a signal shortened it.
pub fn finish(
    mut recorder: Recorder,
    record: &impl serde::Serialize,
    interrupt: &std::sync::atomic::AtomicBool,
) -> Result<crate::exit::Outcome> {
    recorder.save(record)?;
    recorder.result_event(record);
    if interrupt.load(std::sync::atomic::Ordering::Relaxed) {
        recorder.finish_as(true)?;
        return Ok(crate::exit::Outcome::Interrupted(
            "the shortened window is reported above".into(),
        ));
    }
    recorder.finish(linerate_store::RunStatus::Complete)?;
    Ok(crate::exit::Outcome::Passed)
}

/// Where `tcp` and `http` run, checked: the stack port options
/// (`--lab` or `--port-a`/`--port-b` with their addresses, `--connect-to`,
/// `--line-speed`, `--label`, `--connect-timeout`) as values.
#[derive(Debug, Clone)]
pub struct StackPlan {
    pub target: StackTarget,
    /// Where the clients connect, when not the server's address.
    pub connect_to: Option<IpAddr>,
    /// `--line-speed`; None: the speed the link reports, else 10G.
    pub line_speed_bps: Option<u64>,
    /// The row label in the table; None: the lab or the ports.
    pub label: Option<String>,
    pub connect_timeout: Duration,
}

/// The two tester sides.
#[derive(Debug, Clone)]
pub enum StackTarget {
    /// The namespace lab: the one named (it must exist), else the default
    /// lab if it is up, else one built for the run; IPv4, or RFC 5180's
    /// IPv6 addresses.
    Lab { name: Option<String>, ipv6: bool },
    /// Two named interfaces, moved into namespaces of their own for the run.
    Ports { a: StackPort, b: StackPort },
}

/// A named tester interface and its kernel address for the run.
#[derive(Debug, Clone)]
pub struct StackPort {
    pub ifname: String,
    pub ip: IpAddr,
    pub prefix_len: u8,
    pub gateway: IpAddr,
}

/// Sets the path up as `plan` says; undone when the returned value drops.
pub fn open(plan: &StackPlan, stop: &AtomicBool) -> Result<StackPath> {
    if !nix::unistd::geteuid().is_root() {
        bail!(Environment, "not running as root: linerate configures addresses in the tester namespaces; run it with sudo");
    }
    // Declared before the host set-up: ports moved into namespaces are put
    // back (when `hosts` drops) while their locks are still held.
    let mut port_locks = Vec::new();
    let mut hosts = HostSetup::new();
    let sides = match &plan.target {
        StackTarget::Lab { name, ipv6 } => lab_sides(name.as_deref(), *ipv6, &mut hosts, stop)?,
        StackTarget::Ports { a, b } => {
            port_locks =
                crate::ports::lock_ports(&(a.ifname.clone(), None), &(b.ifname.clone(), None))?;
            port_sides(a, b, &mut hosts)?
        }
    };
    let (a, b) = (&sides.a, &sides.b);
    // Of the tester addresses' family (checked in the plan).
    let connect_ip = plan.connect_to.unwrap_or(b.ip);
    hosts.configure(a, connect_ip)?;
    hosts.configure(b, a.ip)?;

    let mtu =
        hosts::mtu(a.netns.as_deref(), &a.ifname)?.min(hosts::mtu(b.netns.as_deref(), &b.ifname)?);
    let (line_bps, line_speed_source) = line_speed(plan.line_speed_bps, sides.reported_speed);
    let info = PathInfo {
        label: plan.label.clone().unwrap_or(sides.label),
        family: hosts::family(a.ip),
        client_ip: a.ip.to_string(),
        server_ip: b.ip.to_string(),
        mtu,
        line_bps,
        line_speed_source,
    };
    Ok(StackPath {
        client: Endpoint {
            netns: sides.a.netns.clone(),
            ip: sides.a.ip,
        },
        server: Endpoint {
            netns: sides.b.netns.clone(),
            ip: sides.b.ip,
        },
        connect_ip,
        info,
        connect_timeout: plan.connect_timeout,
        hosts,
        lab: sides.lab,
        port_locks,
    })
}

/// The two tester sides found, before their addresses are configured.
struct Sides {
    a: Side,
    b: Side,
    /// The table's row label when `--label` gives none.
    label: String,
    /// A lab the run uses (one built for it is removed when it drops).
    lab: Option<Lab>,
    /// Port A's link speed and the interface that reported it.
    reported_speed: Option<(u64, String)>,
}

/// The lab's sides: the one named, else the default lab if it is up,
/// else one built for the run; with `ipv6`, RFC 5180's addresses, the
/// DUT's side of them added to the lab router.
fn lab_sides(
    name: Option<&str>,
    ipv6: bool,
    hosts: &mut HostSetup,
    stop: &AtomicBool,
) -> Result<Sides> {
    let lab = crate::ports::lab_for_run(name, None, stop)?;
    let (a, b) = (
        lab_side(lab.port_a(), ipv6, 0),
        lab_side(lab.port_b(), ipv6, 1),
    );
    if ipv6 {
        for (port, s) in [(lab.port_a(), &a), (lab.port_b(), &b)] {
            hosts.dut_ipv6(lab.dut_netns(), IpAddr::V4(port.gateway), s.gateway)?;
        }
    }
    let reported_speed =
        hosts::speed_bps(a.netns.as_deref(), &a.ifname).map(|s| (s, a.ifname.clone()));
    Ok(Sides {
        a,
        b,
        label: format!("lab '{}'", lab.name()),
        lab: Some(lab),
        reported_speed,
    })
}

/// One lab port as a tester side: the lab's IPv4 addresses, or RFC 5180's
/// IPv6 pair `v6` (0 for port A, 1 for B).
fn lab_side(p: &linerate_lab::LabPort, ipv6: bool, v6: usize) -> Side {
    let (ip, gateway, prefix_len) = if ipv6 {
        let (ip, gw) = LAB_V6[v6];
        (ip.parse().unwrap(), gw.parse().unwrap(), LAB_V6_PREFIX)
    } else {
        (IpAddr::V4(p.ip), IpAddr::V4(p.gateway), p.prefix_len)
    };
    Side {
        netns: Some(p.netns.clone()),
        ifname: p.ifname.clone(),
        ip,
        prefix_len,
        gateway,
    }
}

/// Two named interfaces (locked by the caller) moved into namespaces of
/// their own, with the addresses the user gave. A killed run may have
/// left them in its namespaces: they are put back first (under the
/// ports' locks, so no other run does it at once).
fn port_sides(port_a: &StackPort, port_b: &StackPort, hosts: &mut HostSetup) -> Result<Sides> {
    let (name_a, name_b) = (port_a.ifname.as_str(), port_b.ifname.as_str());
    linerate_goodput::moved_ports::recover_for(&[name_a, name_b])?;
    let reported_speed = hosts::speed_bps(None, name_a).map(|s| (s, name_a.to_string()));
    let ns_a = hosts.adopt_port(name_a, "a")?;
    let ns_b = hosts.adopt_port(name_b, "b")?;
    let side = |netns: String, p: &StackPort| Side {
        netns: Some(netns),
        ifname: p.ifname.clone(),
        ip: p.ip,
        prefix_len: p.prefix_len,
        gateway: p.gateway,
    };
    Ok(Sides {
        a: side(ns_a, port_a),
        b: side(ns_b, port_b),
        label: format!("ports {name_a}/{name_b}"),
        lab: None,
        reported_speed,
    })
}

/// The line speed and where it came from: `--line-speed`, else what port
/// A's link reports, else 10G (said so, for the table).
fn line_speed(given: Option<u64>, reported: Option<(u64, String)>) -> (u64, String) {
    match (given, reported) {
        (Some(bps), _) => (bps, "given with --line-speed".to_string()),
        (None, Some((bps, ifname))) => (bps, format!("reported by {ifname}")),
        (None, None) => (
            DEFAULT_LINE_BPS,
            "not reported by the link; 10G assumed, set --line-speed".to_string(),
        ),
    }
}

/// `--port`: the TCP port the server listens on. Port 0 would let the
/// kernel pick one the clients do not know: bad input, not a DUT that
/// blocks the port.
pub fn check_port(port: u16, default: u16) -> Result<u16> {
    if port == 0 {
        bail!(BadInput, "--port 0 is not a port a server can listen on for the clients: give one of 1..65535, e.g. --port {default}");
    }
    Ok(port)
}

/// `256k`, `1M`, `1500` -> bytes (k, M, G binary, as iperf3 counts).
pub fn parse_size(text: &str, option: &str) -> Result<u64> {
    let t = text.trim();
    let (digits, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1u64 << 10),
        Some('m' | 'M') => (&t[..t.len() - 1], 1 << 20),
        Some('g' | 'G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    digits
        .parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|n| *n > 0)
        .ok_or_else(|| {
            err!(
                BadInput,
                "{option} '{text}' is not a size: write it as 256k, 1M or 1500"
            )
        })
}

/// Maps a goodput error to the outcome: the DUT failing is a test failure
/// (exit 1, one line), anything else an error (exit 2).
pub fn outcome(e: GoodputError) -> Result<crate::exit::Outcome> {
    if e.is_dut_failure() {
        Ok(crate::exit::Outcome::ThresholdFailed(e.to_string()))
    } else {
        Err(e.into())
    }
}

/// Reads records written by earlier runs' `--json` (for `--table-from`).
pub fn read_records<T: serde::de::DeserializeOwned>(
    files: &[std::path::PathBuf],
) -> Result<Vec<T>> {
    files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f)
                .map_err(|e| err!(BadInput, "--table-from {}: {e}", f.display()))?;
            serde_json::from_str(&text).map_err(|e| {
                err!(BadInput,
                    "--table-from {}: not a record of this command ({e}): give files written by its --json",
                    f.display()
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_zero_is_bad_input() {
        let e = check_port(0, 5201).unwrap_err().to_string();
        assert!(e.contains("--port 0") && e.contains("--port 5201"), "{e}");
        assert_eq!(check_port(1, 5201).unwrap(), 1);
        assert_eq!(check_port(65535, 8080).unwrap(), 65535);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("256k", "--window").unwrap(), 256 * 1024);
        assert_eq!(parse_size("10M", "--x").unwrap(), 10 << 20);
        assert_eq!(parse_size("1500", "--x").unwrap(), 1500);
        assert!(parse_size("lots", "--x").is_err());
        assert!(parse_size("0", "--x").is_err());
    }

    #[test]
    fn cidrs() {
        assert_eq!(
            parse_cidr("198.18.0.2/24", "--ip-a").unwrap(),
            ("198.18.0.2".parse().unwrap(), 24)
        );
        assert!(parse_cidr("198.18.0.2", "--ip-a").is_err());
        assert!(parse_cidr("2001:2::2/129", "--ip-a").is_err());
    }
}
