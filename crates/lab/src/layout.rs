//! IPv6 and 802.1Q test traffic through the lab router.
//!
//! A lab routes untagged IPv4 as built. For a run with another frame
//! layout, [`Lab::route_layout`] reconfigures the DUT namespace for the
//! run and puts everything back when the returned guard drops:
//!
//! * VLAN `ID`: each tester-facing interface gets a VLAN subinterface
//!   (`ip link add link dut-a name dut-a.ID type vlan id ID`) and the
//!   router's addresses move onto it, so tagged frames are really routed
//!   (untagged test frames are not, for the run). A kernel built without
//!   802.1Q (CONFIG_VLAN_8021Q unset: "Unknown device type") has no VLAN
//!   subinterfaces; there the router's interfaces become tagged ports
//!   instead, by a tcx program (`linerate_bpf::vlan_port`) that removes
//!   the tag of frames of VLAN `ID` on the way in (and drops every other
//!   frame) and tags every frame on the way out; routing is the kernel's
//!   as before. Transmit VLAN offload is turned off on the veths so tags
//!   travel inside the frame data, where every tester engine sees them.
//! * IPv6 (RFC 5180, addresses from the benchmarking range 2001:2::/48):
//!   IPv6 on the routing interfaces, `2001:2::1/64` on side A and
//!   `2001:2:0:1::1/64` on side B, the tester hosts `2001:2::2` and
//!   `2001:2:0:1::2` (emulated by linerate, which answers Neighbor
//!   Solicitations), permanent neighbour entries for them as for IPv4, and
//!   forwarding on. Duplicate address detection is off on these
//!   interfaces so the addresses are usable at once.

use crate::link::{format_mac, link_info};
use crate::sides::{Side, SIDES};
use crate::{netns, Lab, LabError};
use linerate_bpf::vlan_port::VlanPort;
use std::net::Ipv6Addr;
use std::os::fd::AsFd;

/// Prefix length of the lab's IPv6 subnets.
pub const LAB_IPV6_PREFIX: u8 = 64;

/// The lab's IPv6 plan (RFC 5180: 2001:2::/48), per side: (tester host, router).
pub const LAB_IPV6: [(Ipv6Addr, Ipv6Addr); 2] = [
    (
        Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 2),
        Ipv6Addr::new(0x2001, 2, 0, 0, 0, 0, 0, 1),
    ),
    (
        Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 2),
        Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1),
    ),
];

/// Undoes a layout's changes to the DUT when dropped (in reverse order).
#[derive(Debug)]
pub struct RoutedLayout {
    dut_ns: String,
    /// Each entry: an `ip` command, or a sysctl and the value to restore.
    undo: Vec<Undo>,
    /// The interfaces that route the test traffic (dut-a or dut-a.ID, ...).
    routing_ifs: [String; 2],
    /// The tagged ports' programs, where the kernel has no 802.1Q (dropped
    /// last: detached after the undo steps).
    vlan_ports: Option<VlanPort>,
    /// What was done, for the run's notes.
    description: String,
}

#[derive(Debug)]
enum Undo {
    Ip(Vec<String>),
    Sysctl(String, String),
    Ethtool(String, &'static str),
}

impl RoutedLayout {
    /// The router's interface towards each tester port, A then B.
    pub fn routing_interfaces(&self) -> &[String; 2] {
        &self.routing_ifs
    }

    /// One sentence on how the router routes the run's frames.
    pub fn describe(&self) -> &str {
        &self.description
    }

    fn ip(&mut self, args: &[&str], undo: Option<&[&str]>) -> Result<(), LabError> {
        let mut full = vec!["-n", self.dut_ns.as_str()];
        full.extend_from_slice(args);
        netns::ip(&full)?;
        if let Some(u) = undo {
            let mut v = vec!["-n".to_string(), self.dut_ns.clone()];
            v.extend(u.iter().map(|s| s.to_string()));
            self.undo.push(Undo::Ip(v));
        }
        Ok(())
    }

    fn sysctl(&mut self, path: &str, value: &str) -> Result<(), LabError> {
        let old = netns::read_in(&self.dut_ns, path)?;
        if old != value {
            netns::write_in(&self.dut_ns, &[(path, value)])?;
            self.undo.push(Undo::Sysctl(path.to_string(), old));
        }
        Ok(())
    }

    /// Tags inside the frame data, not beside it (veth's transmit VLAN
    /// offload would hand the tag to the peer out of band, where XDP
    /// programs do not see it). Without ethtool the offload stays on.
    fn txvlan_off(&mut self, ifname: &str) {
        let Some(ethtool) = netns::ethtool_path() else {
            return;
        };
        let e = ethtool.to_string_lossy().to_string();
        if netns::exec_in(&self.dut_ns, &[&e, "-K", ifname, "txvlan", "off"]).is_ok() {
            self.undo.push(Undo::Ethtool(ifname.to_string(), "on"));
        }
    }
}

impl Drop for RoutedLayout {
    fn drop(&mut self) {
        for u in self.undo.drain(..).rev() {
            let _ = match u {
                Undo::Ip(args) => {
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    netns::ip(&args).map(|_| ())
                }
                Undo::Sysctl(path, value) => netns::write_in(&self.dut_ns, &[(&path, &value)]),
                Undo::Ethtool(ifname, value) => match netns::ethtool_path() {
                    Some(e) => netns::exec_in(
                        &self.dut_ns,
                        &[&e.to_string_lossy(), "-K", &ifname, "txvlan", value],
                    )
                    .map(|_| ()),
                    None => Ok(()),
                },
            };
        }
    }
}

impl Lab {
    /// Makes the DUT route IPv6 and/or VLAN-tagged test frames until the
    /// guard drops (see the module doc). Nothing changes for untagged IPv4.
    pub fn route_layout(&self, ipv6: bool, vlan: Option<u16>) -> Result<RoutedLayout, LabError> {
        let mut r = RoutedLayout {
            dut_ns: self.dut_netns().to_string(),
            undo: Vec::new(),
            routing_ifs: [SIDES[0].dut_if.to_string(), SIDES[1].dut_if.to_string()],
            vlan_ports: None,
            description: String::new(),
        };
        for (i, (side, port)) in SIDES.iter().zip([self.port_a(), self.port_b()]).enumerate() {
            let mac = format_mac(&port.mac);
            if let Some(id) = vlan {
                r.txvlan_off(side.dut_if);
                if r.vlan_ports.is_none() && !r.vlan_subinterface(side, &mac, id)? {
                    // No 802.1Q in this kernel: tagged ports on both sides.
                    r.vlan_ports = Some(tagged_ports(&r.dut_ns, id)?);
                }
                if r.vlan_ports.is_none() {
                    r.routing_ifs[i] = format!("{}.{id}", side.dut_if);
                }
            }
            if ipv6 {
                if !std::path::Path::new("/proc/sys/net/ipv6").exists() {
                    return Err(LabError::Parse {
                        command: "IPv6 set-up".into(),
                        detail:
                            "this kernel has no IPv6 (booted with ipv6.disable=1?): run with IPv4"
                                .into(),
                    });
                }
                let ifname = r.routing_ifs[i].clone();
                let (host, router) = LAB_IPV6[i];
                r.sysctl(&format!("/proc/sys/net/ipv6/conf/{ifname}/accept_dad"), "0")?;
                r.sysctl(
                    &format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"),
                    "0",
                )?;
                r.sysctl("/proc/sys/net/ipv6/conf/all/forwarding", "1")?;
                let addr = format!("{router}/{LAB_IPV6_PREFIX}");
                // replace, not add: a run killed before its undo left it.
                r.ip(
                    &["-6", "addr", "replace", &addr, "dev", &ifname, "nodad"],
                    Some(&["-6", "addr", "del", &addr, "dev", &ifname]),
                )?;
                let host = host.to_string();
                r.ip(
                    &[
                        "-6",
                        "neigh",
                        "replace",
                        &host,
                        "lladdr",
                        &mac,
                        "dev",
                        &ifname,
                        "nud",
                        "permanent",
                    ],
                    Some(&["-6", "neigh", "del", &host, "dev", &ifname]),
                )?;
            }
        }
        let [a, b] = &r.routing_ifs;
        r.description = match (vlan, &r.vlan_ports, ipv6) {
            (Some(id), Some(_), _) => format!(
                "{a} and {b} as tagged ports of VLAN {id} (this kernel has no 802.1Q subinterfaces){}",
                if ipv6 { ", IPv6 2001:2::1/64 and 2001:2:0:1::1/64 on them" } else { "" }
            ),
            (Some(_), None, _) => format!(
                "VLAN subinterfaces {a} and {b}{}",
                if ipv6 { " with IPv6 2001:2::1/64 and 2001:2:0:1::1/64" } else { "" }
            ),
            (None, _, true) => format!("IPv6 2001:2::1/64 on {a} and 2001:2:0:1::1/64 on {b}"),
            (None, _, false) => "untagged IPv4 as built".to_string(),
        };
        Ok(r)
    }
}

impl RoutedLayout {
    /// Makes `side`'s VLAN subinterface and moves the router's IPv4
    /// address onto it. False (nothing changed) when the kernel has no
    /// 802.1Q support.
    fn vlan_subinterface(&mut self, side: &Side, mac: &str, id: u16) -> Result<bool, LabError> {
        let sub = format!("{}.{id}", side.dut_if);
        let id_text = id.to_string();
        let add = [
            "link",
            "add",
            "link",
            side.dut_if,
            "name",
            &sub,
            "type",
            "vlan",
            "id",
            &id_text,
        ];
        match self.ip(&add, Some(&["link", "del", "dev", &sub])) {
            Ok(()) => {}
            Err(e) if e.to_string().contains("Unknown device type") => return Ok(false),
            Err(e) => return Err(e),
        }
        // The router's IPv4 address moves to the subinterface for the run
        // (one subnet, one interface).
        let v4 = format!("{}/{}", side.dut_ip, side.prefix_len);
        self.ip(
            &["addr", "del", &v4, "dev", side.dut_if],
            Some(&["addr", "add", &v4, "dev", side.dut_if]),
        )?;
        self.sysctl(&format!("/proc/sys/net/ipv4/conf/{sub}/rp_filter"), "0")?;
        self.ip(&["addr", "add", &v4, "dev", &sub], None)?;
        self.ip(&["link", "set", &sub, "up"], None)?;
        let host = side.tester_ip.to_string();
        self.ip(
            &[
                "neigh",
                "replace",
                &host,
                "lladdr",
                mac,
                "dev",
                &sub,
                "nud",
                "permanent",
            ],
            None,
        )?;
        Ok(true)
    }
}

/// Attaches the tagged-port programs to both of the router's tester-facing
/// interfaces, from a thread inside the DUT's namespace (attaching resolves
/// interface indexes in the calling thread's namespace).
fn tagged_ports(dut_ns: &str, id: u16) -> Result<VlanPort, LabError> {
    let fail = |detail: String| LabError::Parse {
        command: "attaching the lab's VLAN port programs".into(),
        detail,
    };
    let mut ports = VlanPort::load(id).map_err(|e| fail(e.to_string()))?;
    let mut indexes = Vec::new();
    for side in &SIDES {
        let info = link_info(dut_ns, side.dut_if)?;
        indexes.push((info["ifindex"].as_i64().unwrap_or(0) as i32, side.dut_if));
    }
    let target = std::fs::File::open(format!("{}/{dut_ns}", netns::NETNS_RUN_DIR))
        .map_err(|e| fail(format!("opening namespace {dut_ns}: {e}")))?;
    std::thread::scope(|s| {
        s.spawn(|| -> Result<(), LabError> {
            nix::sched::setns(target.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| fail(format!("entering namespace {dut_ns}: {e}")))?;
            for (index, name) in &indexes {
                ports
                    .attach(*index, name)
                    .map_err(|e| fail(e.to_string()))?;
            }
            Ok(())
        })
        .join()
        .unwrap_or_else(|_| Err(fail("attaching the VLAN port programs panicked".into())))
    })?;
    Ok(ports)
}
