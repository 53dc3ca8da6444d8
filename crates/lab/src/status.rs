//! `linerate lab status`: what labs are present and in what state.
//!
//! Status reads, it never repairs: every value that cannot be read is shown
//! as unknown and the reason goes into `problems`.

use crate::lab;
use crate::link;
use crate::names::{dut_netns, netns_names, tester_netns, tester_netns_names};
use crate::placement::{self, PlacementState};
use crate::sides::SIDES;
use crate::{netns, LabError, PREFIX};
use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;

/// One interface of a lab as found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PortStatus {
    pub netns: String,
    pub ifname: String,
    /// "tester" or "dut".
    pub role: String,
    /// The interface's address; for tester ports the one linerate emulates.
    pub ip: Option<Ipv4Addr>,
    pub prefix_len: Option<u8>,
    /// Whether `ip` is configured in the kernel (false for tester ports).
    pub ip_in_kernel: bool,
    pub mac: Option<String>,
    /// Operational state, e.g. "UP"; "missing" when the interface is absent.
    pub state: String,
    pub mtu: Option<u32>,
}

/// One lab as found: its namespaces grouped by lab name.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LabStatus {
    pub name: String,
    /// `lr-<name>-*` namespaces present.
    pub namespaces: Vec<String>,
    /// Namespaces of a complete lab that are absent.
    pub missing: Vec<String>,
    pub ports: Vec<PortStatus>,
    /// The DUT's net.ipv4.ip_forward (1 = routing).
    pub ip_forward: Option<u8>,
    /// Routes in the DUT's main table.
    pub routes: Option<usize>,
    /// Permanent neighbour entries in the DUT (one per tester host).
    pub permanent_neighbours: Option<usize>,
    /// Threaded-NAPI state of the DUT's veths and their threads' CPUs.
    pub placement: Option<PlacementState>,
    /// One-sentence placement summary, as `Lab::placement().note`.
    pub placement_note: Option<String>,
    /// The machine's `net.core.netdev_max_backlog` when the labs changed
    /// it (the depth of a deep lab's queues toward the tester): (found
    /// before, now); restored when the last lab is removed.
    pub netdev_max_backlog: Option<(u32, u32)>,
    /// A lab made for one run (`run<PID>`) whose process has ended (killed:
    /// SIGKILL, a crash) is an orphan: its pid. Nothing will remove it but
    /// `lab down`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub orphan_of_pid: Option<u32>,
    /// What could not be read.
    pub problems: Vec<String>,
}

/// Splits a namespace name into (lab name, role suffix) when it is a lab
/// namespace: lr-<lab>-a, lr-<lab>-b, lr-<lab>-dut or lr-<lab>-dut2. Other lr-* names
/// (strays) give (rest, None).
pub(crate) fn split_netns_name(ns: &str) -> Option<(&str, Option<&str>)> {
    let rest = ns.strip_prefix(PREFIX)?;
    for role in ["a", "b", "dut", "dut2"] {
        if let Some(lab) = rest
            .strip_suffix(role)
            .and_then(|r| r.strip_suffix('-'))
            .filter(|l| !l.is_empty())
        {
            return Some((lab, Some(role)));
        }
    }
    Some((rest, None))
}

/// Labs present: lr-* namespaces grouped by lab name, with their state.
pub fn status() -> Result<Vec<LabStatus>, LabError> {
    crate::check_environment()?;
    let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for ns in netns::list() {
        if let Some((lab, _)) = split_netns_name(&ns) {
            groups.entry(lab.to_string()).or_default().push(ns);
        }
    }
    let allowed = placement::allowed_cpus();
    Ok(groups
        .into_iter()
        .map(|(name, namespaces)| lab_status(name, namespaces, &allowed))
        .collect())
}

fn lab_status(name: String, namespaces: Vec<String>, allowed: &[usize]) -> LabStatus {
    let mut problems = Vec::new();
    let missing: Vec<String> = netns_names(&name)
        .into_iter()
        .filter(|ns| !namespaces.contains(ns))
        .collect();
    let dut_ns = dut_netns(&name);
    let dut_present = namespaces.contains(&dut_ns);

    let mut ports = Vec::new();
    for side in &SIDES {
        let ns = tester_netns(&name, side);
        if namespaces.contains(&ns) {
            let mut port = port_status(&ns, side.tester_if, "tester", &mut problems);
            port.ip = Some(side.tester_ip);
            port.prefix_len = Some(side.prefix_len);
            ports.push(port);
        }
    }
    if dut_present {
        for side in &SIDES {
            let mut port = port_status(&dut_ns, side.dut_if, "dut", &mut problems);
            match kernel_address(&dut_ns, side.dut_if) {
                Ok(Some((ip, len))) => {
                    port.ip = Some(ip);
                    port.prefix_len = Some(len);
                    port.ip_in_kernel = true;
                }
                Ok(None) => {}
                Err(e) => problems.push(e.to_string()),
            }
            ports.push(port);
        }
    }

    let (mut ip_forward, mut routes, mut permanent_neighbours) = (None, None, None);
    let (mut placement_state, mut placement_note) = (None, None);
    if dut_present {
        match netns::read_in(&dut_ns, "/proc/sys/net/ipv4/ip_forward") {
            Ok(v) => ip_forward = v.parse().ok(),
            Err(e) => problems.push(e.to_string()),
        }
        match netns::ip_json(&["-n", &dut_ns, "route", "show"]) {
            Ok(v) => routes = Some(v.as_array().map_or(0, |a| a.len())),
            Err(e) => problems.push(e.to_string()),
        }
        match netns::ip_json(&["-n", &dut_ns, "neigh", "show", "nud", "permanent"]) {
            Ok(v) => permanent_neighbours = Some(v.as_array().map_or(0, |a| a.len())),
            Err(e) => problems.push(e.to_string()),
        }
        let testers = tester_netns_names(&name);
        let state = placement::inspect(&dut_ns, &lab::links(&testers));
        placement_note = Some(placement::from_state(&state, allowed).note);
        placement_state = Some(state);
    }

    LabStatus {
        orphan_of_pid: orphan_of(&name),
        name,
        namespaces,
        missing,
        ports,
        ip_forward,
        routes,
        permanent_neighbours,
        placement: placement_state,
        placement_note,
        netdev_max_backlog: crate::backlog::changed(),
        problems,
    }
}

/// The pid of the ended run lab `name` was made for (a `run<PID>` lab,
/// [`crate::temporary_name`]), or None while that process lives or for a
/// lab made by `lab up`.
fn orphan_of(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("run")?;
    // A second lab of one process ends in a letter (crate::temporary_name).
    let digits = digits
        .strip_suffix(|c: char| c.is_ascii_lowercase())
        .unwrap_or(digits);
    let pid: u32 = digits.parse().ok()?;
    (!std::path::Path::new(&format!("/proc/{pid}")).exists()).then_some(pid)
}

fn port_status(ns: &str, ifname: &str, role: &str, problems: &mut Vec<String>) -> PortStatus {
    let mut port = PortStatus {
        netns: ns.to_string(),
        ifname: ifname.to_string(),
        role: role.to_string(),
        ip: None,
        prefix_len: None,
        ip_in_kernel: false,
        mac: None,
        state: "missing".to_string(),
        mtu: None,
    };
    match link::link_info(ns, ifname) {
        Ok(info) => {
            port.mac = info["address"].as_str().map(str::to_string);
            port.state = info["operstate"].as_str().unwrap_or("UNKNOWN").to_string();
            port.mtu = info["mtu"].as_u64().and_then(|m| u32::try_from(m).ok());
        }
        Err(e) => problems.push(e.to_string()),
    }
    port
}

/// The first IPv4 address of `ifname` in `ns`, if any.
fn kernel_address(ns: &str, ifname: &str) -> Result<Option<(Ipv4Addr, u8)>, LabError> {
    let json = netns::ip_json(&["-n", ns, "-4", "addr", "show", "dev", ifname])?;
    let first = json
        .as_array()
        .and_then(|links| links.first())
        .and_then(|link| link["addr_info"].as_array())
        .and_then(|addrs| addrs.first());
    Ok(first.and_then(|a| {
        let ip = a["local"].as_str()?.parse().ok()?;
        let len = u8::try_from(a["prefixlen"].as_u64()?).ok()?;
        Some((ip, len))
    }))
}

fn or_unknown<T: fmt::Display>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "unknown".to_string(), |v| v.to_string())
}

impl fmt::Display for LabStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let complete = if self.missing.is_empty() {
            "complete".to_string()
        } else {
            format!("incomplete, missing {}", self.missing.join(" "))
        };
        writeln!(f, "lab {} ({complete})", self.name)?;
        if let Some(pid) = self.orphan_of_pid {
            writeln!(
                f,
                "  orphaned: made for run pid {pid}, which has ended; remove it with 'linerate lab down --lab-name {}'",
                self.name
            )?;
        }
        writeln!(f, "  namespaces: {}", self.namespaces.join(" "))?;
        for p in &self.ports {
            let ip = match (p.ip, p.prefix_len) {
                (Some(ip), Some(len)) => format!("{ip}/{len}"),
                _ => "-".to_string(),
            };
            let origin = if p.role == "tester" {
                " (linerate)"
            } else {
                ""
            };
            writeln!(
                f,
                "  {:<6} {:<16} {:<6} {:<28} {:<17} {:<8} mtu {}",
                p.ifname,
                p.netns,
                p.role,
                format!("{ip}{origin}"),
                p.mac.as_deref().unwrap_or("-"),
                p.state,
                or_unknown(&p.mtu)
            )?;
        }
        if self.namespaces.iter().any(|n| n.ends_with("-dut")) {
            writeln!(
                f,
                "  dut: ip_forward={}, {} routes, {} permanent neighbours",
                or_unknown(&self.ip_forward),
                or_unknown(&self.routes),
                or_unknown(&self.permanent_neighbours)
            )?;
        }
        if let Some(state) = &self.placement {
            let parts: Vec<String> = state
                .interfaces
                .iter()
                .map(|i| {
                    let threaded = match i.threaded {
                        Some(true) => "threaded",
                        Some(false) => "not threaded",
                        None => "threaded unknown",
                    };
                    let threads: Vec<String> = i
                        .threads
                        .iter()
                        .map(|t| format!("{} on {}", t.comm, placement::cpu_list(&t.cpus)))
                        .collect();
                    let threads = if threads.is_empty() {
                        "no NAPI thread".to_string()
                    } else {
                        threads.join(", ")
                    };
                    let tso = match i.sender_tso_off {
                        Some(true) => "TSO off",
                        Some(false) => "TSO ON",
                        None => "TSO unknown",
                    };
                    format!("{} {threaded} ({threads}; {} {tso})", i.ifname, i.sender)
                })
                .collect();
            writeln!(f, "  napi: {}", parts.join("; "))?;
        }
        if let Some(note) = &self.placement_note {
            writeln!(f, "  placement: {note}")?;
        }
        if let Some((was, now)) = self.netdev_max_backlog {
            writeln!(f, "  machine setting changed for the labs: net.core.netdev_max_backlog = {now} (was {was}; restored when the last lab is removed)")?;
        }
        for p in &self.problems {
            writeln!(f, "  problem: {p}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_lab_is_an_orphan_once_its_process_has_ended() {
        let me = std::process::id();
        assert_eq!(orphan_of(&format!("run{me}")), None);
        assert_eq!(orphan_of("default"), None);
        // Above the kernel's pid_max (4,194,304 at most): never a live process.
        assert_eq!(orphan_of("run4194305"), Some(4_194_305));
        assert_eq!(orphan_of("run4194305c"), Some(4_194_305));
        assert_eq!(orphan_of(&format!("run{me}b")), None);
    }

    #[test]
    fn namespace_names_group_by_lab() {
        assert_eq!(split_netns_name("lr-x-a"), Some(("x", Some("a"))));
        assert_eq!(split_netns_name("lr-x-b"), Some(("x", Some("b"))));
        assert_eq!(split_netns_name("lr-x-dut"), Some(("x", Some("dut"))));
        // Lab names may hold '-': the role is always the last part.
        assert_eq!(split_netns_name("lr-x-a-dut"), Some(("x-a", Some("dut"))));
        assert_eq!(split_netns_name("lr-x-a-a"), Some(("x-a", Some("a"))));
        assert_eq!(split_netns_name("lr-stray"), Some(("stray", None)));
        assert_eq!(split_netns_name("lr--a"), Some(("-a", None)));
        assert_eq!(split_netns_name("other"), None);
    }

    #[test]
    fn display_is_readable() {
        let s = LabStatus {
            name: "x".into(),
            namespaces: vec!["lr-x-a".into(), "lr-x-dut".into()],
            missing: vec!["lr-x-b".into()],
            ports: vec![PortStatus {
                netns: "lr-x-a".into(),
                ifname: "a0".into(),
                role: "tester".into(),
                ip: Some(Ipv4Addr::new(198, 18, 0, 2)),
                prefix_len: Some(24),
                ip_in_kernel: false,
                mac: Some("02:00:00:00:00:01".into()),
                state: "UP".into(),
                mtu: Some(9000),
            }],
            ip_forward: Some(1),
            routes: Some(2),
            permanent_neighbours: None,
            placement: None,
            placement_note: Some("DUT forwarding on CPU 1".into()),
            netdev_max_backlog: Some((1000, 4096)),
            orphan_of_pid: None,
            problems: vec!["something".into()],
        };
        let text = s.to_string();
        let orphan = LabStatus {
            name: "run4242".into(),
            orphan_of_pid: Some(4242),
            ..s.clone()
        }
        .to_string();
        assert!(
            orphan.contains("orphaned: made for run pid 4242, which has ended; remove it with 'linerate lab down --lab-name run4242'"),
            "{orphan}"
        );
        assert!(
            text.starts_with("lab x (incomplete, missing lr-x-b)\n"),
            "{text}"
        );
        assert!(text.contains("198.18.0.2/24 (linerate)"), "{text}");
        assert!(
            text.contains("ip_forward=1, 2 routes, unknown permanent"),
            "{text}"
        );
        assert!(
            text.contains("placement: DUT forwarding on CPU 1"),
            "{text}"
        );
        assert!(text.contains("problem: something"), "{text}");
        assert!(
            text.contains("netdev_max_backlog = 4096 (was 1000"),
            "{text}"
        );
    }
}
