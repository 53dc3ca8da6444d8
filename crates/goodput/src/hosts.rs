//! Kernel addresses on the tester sides for the time of a run.
//!
//! The lab's tester namespaces normally carry no kernel address (linerate's
//! packet engines emulate the hosts in user space, and a kernel address
//! would make the kernel answer and send frames that disturb their counts).
//! TCP and HTTP need the kernel's stack, so [`HostSetup`] adds what is
//! missing (address, a route to the far side, IPv6 on the interfaces of the
//! path) and undoes exactly what it added, in reverse order, when dropped:
//! after the run the lab is as it was.
//!
//! Named ports (an external DUT) are first moved into a namespace of their
//! own (`lr-g<pid>-a`, `-b`): with both ports in one namespace, the kernel
//! would deliver from one local address to the other over loopback and the
//! DUT would never see a packet. A move takes a port down and drops its
//! addresses, its routes and its per-interface sysctls, so each port's
//! state is read first ([`PortState`], in [`crate::port_state`]) and put
//! back after it is moved back when the run ends: up or down, MTU, its
//! bridge or bond, addresses, routes, sysctls. That state is also written
//! down before the move ([`crate::moved_ports`]), for when the run is
//! killed and cannot.

use crate::netns::{ip_in, read_sysctl, write_sysctl};
pub use crate::port_state::PortState;
use crate::{Family, GoodputError};
use std::net::IpAddr;

/// One tester side as the kernel is to see it.
#[derive(Debug, Clone)]
pub struct Side {
    pub netns: Option<String>,
    pub ifname: String,
    pub ip: IpAddr,
    pub prefix_len: u8,
    pub gateway: IpAddr,
}

/// RFC 5180 (IPv6 benchmarking, 2001:2::/48): the lab's IPv6 plan, one /64
/// per side; `::1` is the DUT, `::2` the tester.
pub const LAB_V6: [(&str, &str); 2] = [
    ("2001:2::2", "2001:2::1"),
    ("2001:2:0:1::2", "2001:2:0:1::1"),
];
pub const LAB_V6_PREFIX: u8 = 64;

enum Undo {
    Ip {
        ns: Option<String>,
        args: Vec<String>,
    },
    Sysctl {
        ns: Option<String>,
        path: String,
        value: String,
    },
    /// Moves the port back and restores what it had before.
    MoveBack {
        ns: String,
        state: Box<PortState>,
    },
    DeleteNetns(String),
    /// Removes the record that lets a later run put a moved port back
    /// ([`crate::moved_ports`]); kept when moving a port back failed.
    ForgetRecord(Box<crate::moved_ports::MovedPort>),
}

/// What a run added to the namespaces; removed on drop.
#[derive(Default)]
pub struct HostSetup {
    undo: Vec<Undo>,
}

impl HostSetup {
    pub fn new() -> HostSetup {
        HostSetup::default()
    }

    /// Moves interface `ifname` (in linerate's own namespace) into a new
    /// namespace `lr-g<pid>-<tag>` and brings it up; returns the namespace.
    pub fn adopt_port(&mut self, ifname: &str, tag: &str) -> Result<String, GoodputError> {
        // Asked over netlink, not /sys: /sys shows the interfaces of the
        // namespace it was mounted in, which need not be linerate's (a
        // run started with `nsenter --net`).
        if ip_in(None, &["link", "show", "dev", ifname]).is_err() {
            return Err(GoodputError::Setup(format!(
                "no interface '{ifname}' here: name an existing interface (see 'ip link')"
            )));
        }
        // What the move takes away, read before it.
        let state = PortState::read(ifname)?;
        let ns = format!("lr-g{}-{tag}", std::process::id());
        // Written down before the move: if this run is killed, a later one
        // (or `lab down`) puts the port back from it.
        let record = crate::moved_ports::MovedPort::new(state.clone(), &ns)?;
        record.write()?;
        self.undo.push(Undo::ForgetRecord(Box::new(record)));
        ip_in(None, &["netns", "add", &ns])?;
        self.undo.push(Undo::DeleteNetns(ns.clone()));
        ip_in(None, &["link", "set", "dev", ifname, "netns", &ns])?;
        self.undo.push(Undo::MoveBack {
            ns: ns.clone(),
            state: Box::new(state),
        });
        ip_in(Some(&ns), &["link", "set", "dev", "lo", "up"])?;
        ip_in(Some(&ns), &["link", "set", "dev", ifname, "up"])?;
        Ok(ns)
    }

    /// Gives `side` its kernel address and a route to `peer` via its gateway.
    pub fn configure(&mut self, side: &Side, peer: IpAddr) -> Result<(), GoodputError> {
        let ns = side.netns.as_deref();
        if side.ip.is_ipv6() {
            self.enable_ipv6(ns, &side.ifname)?;
        }
        self.add_address(ns, &side.ifname, side.ip, side.prefix_len)?;
        let host_len = if peer.is_ipv6() { 128 } else { 32 };
        let peer_net = format!("{peer}/{host_len}");
        let gw = side.gateway.to_string();
        let on_link = prefix_contains(side.ip, side.prefix_len, peer);
        if !on_link {
            let args = ["route", "add", &peer_net, "via", &gw, "dev", &side.ifname];
            match ip_in(ns, &args) {
                Ok(_) => self.undo.push(Undo::Ip {
                    ns: side.netns.clone(),
                    args: ["route", "del", &peer_net, "via", &gw, "dev", &side.ifname]
                        .map(String::from)
                        .to_vec(),
                }),
                // A route there already (the scenario set one): use it.
                Err(e) if e.to_string().contains("File exists") => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Prepares the DUT namespace of the lab for IPv6: IPv6 on the
    /// interface holding `gw_v4` (the side's IPv4 gateway), address
    /// `gw_v6/64` on it, and forwarding on.
    pub fn dut_ipv6(
        &mut self,
        dut_ns: &str,
        gw_v4: IpAddr,
        gw_v6: IpAddr,
    ) -> Result<(), GoodputError> {
        let ifname = interface_with_address(Some(dut_ns), gw_v4)?.ok_or_else(|| {
            GoodputError::Setup(format!(
                "no interface in {dut_ns} holds {gw_v4}: this lab scenario has no IPv6 plan linerate knows; run with IPv4"
            ))
        })?;
        self.enable_ipv6(Some(dut_ns), &ifname)?;
        self.set_sysctl(Some(dut_ns), "/proc/sys/net/ipv6/conf/all/forwarding", "1")?;
        self.add_address(Some(dut_ns), &ifname, gw_v6, LAB_V6_PREFIX)
    }

    fn enable_ipv6(&mut self, ns: Option<&str>, ifname: &str) -> Result<(), GoodputError> {
        if !std::path::Path::new("/proc/sys/net/ipv6").exists() {
            return Err(GoodputError::Setup(
                "this kernel has no IPv6 (booted with ipv6.disable=1?): run with IPv4".into(),
            ));
        }
        self.set_sysctl(
            ns,
            &format!("/proc/sys/net/ipv6/conf/{ifname}/disable_ipv6"),
            "0",
        )
    }

    fn set_sysctl(
        &mut self,
        ns: Option<&str>,
        path: &str,
        value: &str,
    ) -> Result<(), GoodputError> {
        let old = read_sysctl(ns, path)?;
        if old == value {
            return Ok(());
        }
        write_sysctl(ns, path, value)?;
        self.undo.push(Undo::Sysctl {
            ns: ns.map(str::to_string),
            path: path.to_string(),
            value: old,
        });
        Ok(())
    }

    fn add_address(
        &mut self,
        ns: Option<&str>,
        ifname: &str,
        ip: IpAddr,
        prefix_len: u8,
    ) -> Result<(), GoodputError> {
        if interface_with_address(ns, ip)?.is_some() {
            return Ok(()); // the scenario configured it: leave it be
        }
        let cidr = format!("{ip}/{prefix_len}");
        let mut args = vec!["addr", "add", &cidr, "dev", ifname];
        if ip.is_ipv6() {
            // No duplicate address detection: the address is usable at once
            // (the path is ours, nobody else holds it).
            args.push("nodad");
        }
        ip_in(ns, &args)?;
        self.undo.push(Undo::Ip {
            ns: ns.map(str::to_string),
            args: ["addr", "del", &cidr, "dev", ifname]
                .map(String::from)
                .to_vec(),
        });
        Ok(())
    }

    /// Undoes everything now (also done on drop); warnings go to stderr.
    pub fn undo(&mut self) {
        // A port not put back keeps its record, for `lab down`.
        let mut port_left = false;
        while let Some(step) = self.undo.pop() {
            let result = match &step {
                Undo::Ip { ns, args } => {
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    ip_in(ns.as_deref(), &args).map(|_| ())
                }
                Undo::Sysctl { ns, path, value } => write_sysctl(ns.as_deref(), path, value),
                Undo::MoveBack { ns, state } => {
                    let pid = std::process::id().to_string();
                    let dev = state.ifname.as_str();
                    match ip_in(Some(ns), &["link", "set", "dev", dev, "netns", &pid]) {
                        Ok(_) => state.restore(),
                        Err(e) => {
                            port_left = true;
                            Err(e)
                        }
                    }
                }
                Undo::DeleteNetns(ns) => ip_in(None, &["netns", "del", ns]).map(|_| ()),
                Undo::ForgetRecord(record) if !port_left => {
                    record.forget();
                    Ok(())
                }
                Undo::ForgetRecord(_) => Ok(()),
            };
            if let Err(e) = result {
                eprintln!("linerate: warning: undoing the run's host set-up: {e}");
            }
        }
    }
}

impl Drop for HostSetup {
    fn drop(&mut self) {
        self.undo();
    }
}

/// The interface in `ns` holding address `ip`, if any.
pub fn interface_with_address(
    ns: Option<&str>,
    ip: IpAddr,
) -> Result<Option<String>, GoodputError> {
    let out = ip_in(ns, &["-j", "addr", "show"])?;
    let json: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    for link in json.as_array().into_iter().flatten() {
        for info in link["addr_info"].as_array().into_iter().flatten() {
            let local = info["local"]
                .as_str()
                .and_then(|s| s.parse::<IpAddr>().ok());
            if local == Some(ip) {
                return Ok(link["ifname"].as_str().map(str::to_string));
            }
        }
    }
    Ok(None)
}

/// MTU of `ifname` in `ns`.
pub fn mtu(ns: Option<&str>, ifname: &str) -> Result<u64, GoodputError> {
    let out = ip_in(ns, &["-j", "link", "show", "dev", ifname])?;
    let json: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
    json[0]["mtu"].as_u64().ok_or_else(|| {
        GoodputError::Setup(format!(
            "could not read the MTU of {ifname} ('ip -j link show')"
        ))
    })
}

/// Link speed `ifname` in `ns` reports, from /sys/class/net/<if>/speed
/// read under `ip netns exec` (which mounts the namespace's own /sys).
pub fn speed_bps(ns: Option<&str>, ifname: &str) -> Option<u64> {
    let path = format!("/sys/class/net/{ifname}/speed");
    let text = match ns {
        Some(ns) => linerate_helper::ip(None, &["netns", "exec", ns, "cat", &path])
            .ok()?
            .trim()
            .to_string(),
        None => std::fs::read_to_string(&path).ok()?.trim().to_string(),
    };
    let mbps: i64 = text.parse().ok()?;
    (mbps > 0).then_some(mbps as u64 * 1_000_000)
}

/// The address family of a side's address.
pub fn family(ip: IpAddr) -> Family {
    if ip.is_ipv6() {
        Family::Ipv6
    } else {
        Family::Ipv4
    }
}

/// Whether `peer` lies in `ip`/`prefix_len`.
pub fn prefix_contains(ip: IpAddr, prefix_len: u8, peer: IpAddr) -> bool {
    match (ip, peer) {
        (IpAddr::V4(a), IpAddr::V4(b)) => {
            let mask = u32::MAX
                .checked_shl(32 - prefix_len.min(32) as u32)
                .unwrap_or(0);
            u32::from(a) & mask == u32::from(b) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(b)) => {
            let mask = u128::MAX
                .checked_shl(128 - prefix_len.min(128) as u32)
                .unwrap_or(0);
            u128::from(a) & mask == u128::from(b) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes() {
        let a: IpAddr = "198.18.0.2".parse().unwrap();
        assert!(prefix_contains(a, 24, "198.18.0.200".parse().unwrap()));
        assert!(!prefix_contains(a, 24, "198.19.0.2".parse().unwrap()));
        assert!(prefix_contains(a, 0, "10.0.0.1".parse().unwrap()));
        let b: IpAddr = "2001:2::2".parse().unwrap();
        assert!(prefix_contains(b, 64, "2001:2::1".parse().unwrap()));
        assert!(!prefix_contains(b, 64, "2001:2:0:1::2".parse().unwrap()));
        assert!(!prefix_contains(a, 24, b));
    }
}
