//! A wire: two tester ports joined by a veth pair with nothing between
//! them, for `linerate calibrate` (the tester measured against itself).
//!
//! ```text
//!   lr-<name>-w
//!  +--------------------------+
//!  |  a0 <------ veth ----> b0 |   198.18.0.2 <-> 198.18.0.3, both emulated
//!  +--------------------------+   by linerate; each is the other's gateway
//! ```
//!
//! Offloads as on the lab's tester ports (TSO and GRO off), so frames cross
//! one by one. Removed when dropped.

use crate::names::{validate_name, wire_netns};
use crate::sides::MTU;
use crate::{netns, LabError};
use std::net::Ipv4Addr;

/// Tester port addresses on the wire: each port's gateway is the other.
pub const WIRE_IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
pub const WIRE_IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);

pub struct Wire {
    netns: String,
}

impl Wire {
    /// Builds `lr-<name>-w` with veth a0 <-> b0 (MTU 9000, up).
    pub fn up(name: &str) -> Result<Wire, LabError> {
        validate_name(name)?;
        let ns = wire_netns(name);
        if netns::list().contains(&ns) {
            return Err(LabError::Exists(name.to_string()));
        }
        netns::add(&ns)?;
        // From here on, Drop removes the namespace whatever fails next.
        let wire = Wire { netns: ns.clone() };
        if std::path::Path::new("/proc/sys/net/ipv6").exists() {
            netns::write_in(
                &ns,
                &[
                    ("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1"),
                    ("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1"),
                ],
            )?;
        }
        let mtu = MTU.to_string();
        netns::ip(&[
            "-n", &ns, "link", "add", "a0", "mtu", &mtu, "type", "veth", "peer", "name", "b0",
            "mtu", &mtu,
        ])?;
        for dev in ["lo", "a0", "b0"] {
            netns::ip(&["-n", &ns, "link", "set", dev, "up"])?;
        }
        if let Some(ethtool) = netns::ethtool_path() {
            let ethtool = ethtool.to_string_lossy();
            for dev in ["a0", "b0"] {
                // Best effort: without ethtool the wire still works, with
                // the kernel's default offloads.
                let _ = netns::exec_in(&ns, &[&ethtool, "-K", dev, "tso", "off", "gro", "off"]);
            }
        }
        Ok(wire)
    }

    pub fn netns(&self) -> &str {
        &self.netns
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        if let Err(e) = netns::delete(&self.netns) {
            let name = self
                .netns
                .strip_prefix(crate::PREFIX)
                .and_then(|n| n.strip_suffix("-w"))
                .unwrap_or(&self.netns);
            eprintln!(
                "warning: namespace {} was not removed ({e}); remove it with 'linerate lab down --lab-name {name}'",
                self.netns
            );
        }
    }
}
