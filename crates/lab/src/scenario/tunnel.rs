//! Tunnel scenarios: the LANCOM techpaper's DUT-to-DUT set-up.
//!
//! ```text
//!  lr-<n>-a        lr-<n>-dut                 lr-<n>-dut2         lr-<n>-b
//!  a0 ------ dut-a [DUT 1] wan1 ====== wan2 [DUT 2] dut-b ------ b0
//!                   203.0.113.1/30  203.0.113.2/30
//!                   tunnel 10.255.0.1 <-> 10.255.0.2 over the WAN link
//! ```
//!
//! The lab is built as usual, then the tunnel scenario adds the second DUT
//! namespace, moves dut-b (with its address and tester B's neighbour entry)
//! into it, joins the two DUTs with the WAN veth pair and builds the tunnel
//! across it; each DUT routes the far test network into the tunnel. The
//! WAN link's counters are the outer side: every test frame crosses it
//! encapsulated.
//!
//! The WAN veths have neither TSO off nor NAPI, so a frame DUT 1 sends on
//! wan1 is received by DUT 2 in the same softirq, on DUT 1's CPU: both
//! DUTs' work stays on the DUT CPU, away from the tester's.

use super::ipsec::IpsecSuite;
use super::tools::{unavailable, Daemons};
use crate::link::{format_mac, link_counters, link_info_detailed, read_mac, LinkCounters};
use crate::names::{dut2_netns, tester_netns};
use crate::sides::SIDES;
use crate::{netns, Lab, LabError};

/// A tunnel type of `tunnel:<kind>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TunnelKind {
    Vxlan,
    Wireguard,
    Ipsec(IpsecSuite),
    Gre,
}

impl TunnelKind {
    /// `vxlan`, `wireguard`, `gre`, `ipsec` or `ipsec:<suite>`
    /// (aes-cbc-sha256, the default; aes-gcm; null).
    pub fn parse(text: &str) -> Option<TunnelKind> {
        match text {
            "vxlan" => Some(TunnelKind::Vxlan),
            "wireguard" | "wg" => Some(TunnelKind::Wireguard),
            "gre" => Some(TunnelKind::Gre),
            "ipsec" => Some(TunnelKind::Ipsec(IpsecSuite::AesCbcSha256)),
            _ => text
                .strip_prefix("ipsec:")
                .and_then(IpsecSuite::parse)
                .map(TunnelKind::Ipsec),
        }
    }

    /// As reports name it.
    pub fn label(self) -> String {
        match self {
            TunnelKind::Vxlan => "VXLAN".into(),
            TunnelKind::Wireguard => "WireGuard".into(),
            TunnelKind::Ipsec(suite) => format!("IPsec ({})", suite.label()),
            TunnelKind::Gre => "GRE".into(),
        }
    }
}

/// The WAN link's addresses (RFC 5737 TEST-NET-3) and the tunnel's inner ones.
const WAN_1: &str = "203.0.113.1";
const WAN_2: &str = "203.0.113.2";
const INNER_1: &str = "10.255.0.1";
const INNER_2: &str = "10.255.0.2";
const WAN_IF_1: &str = "wan1";
const WAN_IF_2: &str = "wan2";
/// The WAN link carries the lab's largest frames plus any tunnel header.
const WAN_MTU: &str = "9200";
const VXLAN_ID: &str = "42";
pub(crate) const TUNNEL_IF: &str = "tun-lr";

/// A built tunnel.
pub struct Tunnel {
    pub kind: TunnelKind,
    /// Which implementation carries the traffic, e.g. "kernel VXLAN".
    pub data_path: String,
    /// The data path runs in user space (boringtun): its CPU time is user
    /// time, and its packets are not padded as the kernel's are.
    pub user_space: bool,
    /// What was read back after building it.
    pub check: String,
    /// The first DUT's namespace, where the WAN interface `wan1` is.
    pub wan_netns: String,
    pub wan_ifname: String,
    before: LinkCounters,
    /// User-space tunnel processes (boringtun), stopped on drop.
    _daemons: Daemons,
}

impl Tunnel {
    /// Process ids of the user-space data path (boringtun, charon).
    pub fn daemon_pids(&self) -> Vec<u32> {
        self._daemons.pids()
    }

    /// wan1's counters now (DUT 1's side of the WAN link).
    pub fn wan_counters(&self) -> Result<LinkCounters, LabError> {
        link_counters(&self.wan_netns, &self.wan_ifname)
    }

    /// After traffic: the WAN link carried packets since the tunnel was
    /// built, at the encapsulated size.
    pub(crate) fn traffic_seen(&self) -> Result<String, String> {
        let now = self.wan_counters().map_err(|e| e.to_string())?;
        let packets = now.tx_packets - self.before.tx_packets;
        let bytes = now.tx_bytes - self.before.tx_bytes;
        if packets == 0 {
            return Err(format!(
                "the WAN link ({}) sent no packet: the traffic did not go through the tunnel",
                self.wan_ifname
            ));
        }
        Ok(format!(
            "the WAN link carried {packets} {} packets ({bytes} bytes, {:.0} bytes each on average without FCS)",
            self.kind.label(),
            bytes as f64 / packets as f64
        ))
    }
}

/// Builds the two-DUT topology and the tunnel of `kind`.
pub(crate) fn build(l: &Lab, kind: TunnelKind) -> Result<Tunnel, LabError> {
    let dut1 = l.dut_netns().to_string();
    let dut2 = dut2_netns(l.name());
    second_dut(l, &dut1, &dut2)?;
    let plain = || [TUNNEL_IF.to_string(), TUNNEL_IF.to_string()];
    let (data_path, check, names, daemons) = match kind {
        TunnelKind::Vxlan => {
            let (d, c) = vxlan(&dut1, &dut2)?;
            (d, c, plain(), Default::default())
        }
        TunnelKind::Gre => {
            let (d, c) = gre(&dut1, &dut2)?;
            (d, c, plain(), Default::default())
        }
        TunnelKind::Wireguard => super::wireguard::build(
            l.name(),
            &dut1,
            &dut2,
            [WAN_1, WAN_2],
            [INNER_1, INNER_2],
            &l.placement().dut_cpus,
        )?,
        TunnelKind::Ipsec(suite) => {
            let (d, c, daemons) =
                super::ipsec::build(&dut1, &dut2, [WAN_1, WAN_2], suite, &l.placement().dut_cpus)?;
            let tun = super::ipsec::TUN.to_string();
            (d, c, [tun.clone(), tun], daemons)
        }
    };
    // Each DUT routes the far test network into the tunnel (IPsec: charon
    // did, from its traffic selectors).
    if !matches!(kind, TunnelKind::Ipsec(_)) {
        for (ns, far, via, dev) in [
            (&dut1, "198.19.0.0/24", INNER_2, &names[0]),
            (&dut2, "198.18.0.0/24", INNER_1, &names[1]),
        ] {
            netns::ip(&["-n", ns, "route", "add", far, "via", via, "dev", dev])?;
        }
    }
    let user_space = data_path.starts_with("user-space");
    let route = netns::ip_json(&["-n", &dut1, "route", "get", "198.19.0.2"])?;
    if route[0]["dev"].as_str() != Some(names[0].as_str()) {
        return Err(LabError::NotInEffect {
            scenario: String::new(),
            detail: format!(
                "DUT 1 routes 198.19.0.2 via {}, not the tunnel",
                route[0]["dev"]
            ),
        });
    }
    Ok(Tunnel {
        kind,
        data_path,
        user_space,
        check: format!(
            "{check}; DUT 1 routes 198.19.0.2 into {} (ip route get)",
            names[0]
        ),
        _daemons: daemons,
        before: link_counters(&dut1, WAN_IF_1)?,
        wan_netns: dut1,
        wan_ifname: WAN_IF_1.to_string(),
    })
}

/// The second DUT namespace, dut-b moved into it, and the WAN link.
fn second_dut(l: &Lab, dut1: &str, dut2: &str) -> Result<(), LabError> {
    netns::add(dut2)?;
    let mut sysctls = vec![
        ("/proc/sys/net/ipv4/ip_forward", "1"),
        ("/proc/sys/net/ipv4/conf/all/rp_filter", "0"),
        ("/proc/sys/net/ipv4/conf/default/rp_filter", "0"),
    ];
    if std::path::Path::new("/proc/sys/net/ipv6").exists() {
        sysctls.push(("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1"));
        sysctls.push(("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1"));
    }
    netns::write_in(dut2, &sysctls)?;
    netns::ip(&["-n", dut2, "link", "set", "lo", "up"])?;

    // dut-b moves; a move drops its address, neighbours and up state.
    let b = &SIDES[1];
    netns::ip(&["-n", dut1, "link", "set", b.dut_if, "netns", dut2])?;
    let addr = format!("{}/{}", b.dut_ip, b.prefix_len);
    netns::ip(&["-n", dut2, "addr", "add", &addr, "dev", b.dut_if])?;
    netns::ip(&["-n", dut2, "link", "set", b.dut_if, "up"])?;
    let mac = read_mac(&tester_netns(l.name(), b), b.tester_if)?;
    netns::ip(&[
        "-n",
        dut2,
        "neigh",
        "replace",
        &b.tester_ip.to_string(),
        "lladdr",
        &format_mac(&mac),
        "dev",
        b.dut_if,
        "nud",
        "permanent",
    ])?;

    netns::ip(&[
        "link", "add", WAN_IF_1, "netns", dut1, "mtu", WAN_MTU, "type", "veth", "peer", "name",
        WAN_IF_2, "netns", dut2, "mtu", WAN_MTU,
    ])?;
    for (ns, dev, ip) in [(dut1, WAN_IF_1, WAN_1), (dut2, WAN_IF_2, WAN_2)] {
        netns::ip(&["-n", ns, "addr", "add", &format!("{ip}/30"), "dev", dev])?;
        netns::ip(&["-n", ns, "link", "set", dev, "up"])?;
    }
    // Permanent neighbours on the WAN: no ARP during a trial.
    let mac1 = format_mac(&read_mac(dut1, WAN_IF_1)?);
    let mac2 = format_mac(&read_mac(dut2, WAN_IF_2)?);
    neigh(dut1, WAN_2, &mac2, WAN_IF_1)?;
    neigh(dut2, WAN_1, &mac1, WAN_IF_2)?;
    Ok(())
}

fn neigh(ns: &str, ip: &str, mac: &str, dev: &str) -> Result<(), LabError> {
    netns::ip(&[
        "-n",
        ns,
        "neigh",
        "replace",
        ip,
        "lladdr",
        mac,
        "dev",
        dev,
        "nud",
        "permanent",
    ])
    .map(|_| ())
}

/// Kernel VXLAN (UDP 4789, VNI 42) between the WAN addresses.
fn vxlan(dut1: &str, dut2: &str) -> Result<(String, String), LabError> {
    for (ns, local, remote, dev, inner) in [
        (dut1, WAN_1, WAN_2, WAN_IF_1, INNER_1),
        (dut2, WAN_2, WAN_1, WAN_IF_2, INNER_2),
    ] {
        netns::ip(&[
            "-n", ns, "link", "add", TUNNEL_IF, "type", "vxlan", "id", VXLAN_ID, "local", local,
            "remote", remote, "dstport", "4789", "dev", dev,
        ])?;
        netns::ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{inner}/30"),
            "dev",
            TUNNEL_IF,
        ])?;
        netns::ip(&["-n", ns, "link", "set", TUNNEL_IF, "up"])?;
    }
    // The inner neighbours too: VXLAN carries Ethernet, and an ARP across
    // the tunnel in the first trial would cost frames.
    let mac1 = format_mac(&read_mac(dut1, TUNNEL_IF)?);
    let mac2 = format_mac(&read_mac(dut2, TUNNEL_IF)?);
    neigh(dut1, INNER_2, &mac2, TUNNEL_IF)?;
    neigh(dut2, INNER_1, &mac1, TUNNEL_IF)?;
    let info = link_info_detailed(dut1, TUNNEL_IF)?;
    let kind = info["linkinfo"]["info_kind"].as_str().unwrap_or_default();
    let id = info["linkinfo"]["info_data"]["id"].as_u64();
    if kind != "vxlan" || id != Some(42) {
        return Err(LabError::NotInEffect {
            scenario: String::new(),
            detail: format!("{TUNNEL_IF} is '{kind}' with VNI {id:?}, not vxlan 42"),
        });
    }
    Ok((
        "kernel VXLAN (UDP port 4789) over a veth WAN link".to_string(),
        format!("VXLAN VNI 42 {WAN_1} <-> {WAN_2} on {WAN_IF_1}/{WAN_IF_2} (read back with ip -d -j link)"),
    ))
}

/// Kernel GRE, where the kernel has it (this one may not: the error says so).
fn gre(dut1: &str, dut2: &str) -> Result<(String, String), LabError> {
    for (ns, local, remote, inner, peer) in [
        (dut1, WAN_1, WAN_2, INNER_1, INNER_2),
        (dut2, WAN_2, WAN_1, INNER_2, INNER_1),
    ] {
        match netns::ip(&[
            "-n", ns, "link", "add", TUNNEL_IF, "type", "gre", "local", local, "remote", remote,
            "ttl", "64",
        ]) {
            Ok(_) => {}
            Err(LabError::Command { stderr, .. }) if stderr.contains("Unknown device type") => {
                return Err(unavailable(
                    "GRE cannot be built here: this kernel has no GRE support ('ip link add type gre' answers 'Unknown device type'; CONFIG_NET_IPGRE is not set); use tunnel:vxlan, or a kernel with ip_gre",
                ));
            }
            Err(e) => return Err(e),
        }
        netns::ip(&[
            "-n",
            ns,
            "addr",
            "add",
            inner,
            "peer",
            &format!("{peer}/32"),
            "dev",
            TUNNEL_IF,
        ])?;
        netns::ip(&["-n", ns, "link", "set", TUNNEL_IF, "up"])?;
    }
    Ok((
        "kernel GRE over a veth WAN link".to_string(),
        format!("GRE {WAN_1} <-> {WAN_2}"),
    ))
}
