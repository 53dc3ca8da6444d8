//! Negotiating one tunnel: the plan's values checked against port B
//! (the key read, the gateway's address), and the IKE session brought up
//! from port B's namespace.

use super::plan::{IpsecPlan, Net};
use crate::error::{bail, err, Error, Result};
use linerate_engine::HostConfig;
use linerate_esp::EspSuite;
use linerate_ike::{Config, IkeError, Ports, Psk, Session, Sockets};
use std::net::Ipv4Addr;
use std::sync::atomic::AtomicBool;

/// Negotiates one tunnel's IKE SA and CHILD_SA from port B's address,
/// over sockets bound in port B's namespace (a socket keeps the namespace
/// it was made in).
pub(super) fn connect_one(
    plan: &IpsecPlan,
    netns: Option<&str>,
    host_b: &HostConfig,
    checked: Checked,
    stop: &AtomicBool,
) -> Result<Session> {
    let Checked {
        psk,
        esp,
        gateway,
        remote_net,
        local_net,
        ..
    } = checked;
    let mut config = Config::new(
        host_b.ip,
        gateway,
        psk,
        remote_net.selector(),
        local_net.selector(),
    );
    if let Some(ike) = &plan.ike {
        config.ike = ike.clone();
    }
    config.esp = esp;
    // An `--ipsec-id` template ({n}, {addr}) names the one tunnel tunnel 1.
    crate::peers::check_id_template(plan.local_id.as_ref())?;
    config.local_id = crate::peers::peer_identity(plan.local_id.as_ref(), 0, host_b.ip);
    config.remote_id = plan.remote_id.clone();
    config.retransmit = plan.retransmit();
    config.force_encap = plan.esp_encap.forces_udp();
    let sockets = linerate_port::netns::maybe_in_netns(netns, || {
        Ok(Sockets::bind(host_b.ip, Ports::default()))
    })
    .map_err(|e| err!(Environment, "{e}"))?
    .map_err(|e| err!(Environment, "IPsec: {e}"))?;
    Session::connect_until(config, sockets, stop).map_err(|e| match e {
        IkeError::Interrupted { gateway } => interrupted_negotiation(gateway),
        e => err!(Failed, "IPsec: {e}"),
    })
}

/// A negotiation a signal stopped: the run's interruption (exit 130, see
/// `ports::stop`), with what was done about the gateway.
pub(super) fn interrupted_negotiation(gateway: Ipv4Addr) -> Error {
    Error::from(linerate_engine::EngineError::Interrupted).context(format!(
        "the IPsec tunnels to {gateway} were not set up: interrupted; what the gateway had set up was deleted"
    ))
}

/// What one tunnel and many share of the plan, checked: the key read,
/// the defaults filled in.
pub(super) struct Checked {
    pub(super) psk: Psk,
    pub(super) esp: EspSuite,
    pub(super) gateway: Ipv4Addr,
    pub(super) remote_net: Net,
    pub(super) local_net: Net,
    /// Port B's address and subnet: linerate's (first) tunnel end.
    pub(super) outer: Net,
}

impl Checked {
    /// `remote_net_is`: what `--remote-net` is for, in its refusal.
    pub(super) fn of(
        plan: &IpsecPlan,
        host_b: &HostConfig,
        lan: &HostConfig,
        remote_net_is: &str,
    ) -> Result<Checked> {
        let Some(psk_file) = &plan.psk_file else {
            bail!(BadInput, "--ipsec needs --psk-file FILE: the pre-shared key, in a file only its owner can read");
        };
        let psk = Psk::read_file(psk_file).map_err(|e| err!(BadInput, "{e}"))?;
        let Some(remote_net) = plan.remote_net else {
            bail!(BadInput, "--ipsec needs --remote-net: the network linerate emulates behind itself, {remote_net_is}");
        };
        let gateway = plan.gateway.unwrap_or(host_b.gateway);
        check_gateway_address(gateway, host_b)?;
        Ok(Checked {
            psk,
            esp: plan.esp.unwrap_or(EspSuite::Aes256Gcm16),
            gateway,
            remote_net,
            local_net: plan.local_net.unwrap_or(Net {
                address: lan.ip,
                prefix_len: lan.prefix_len,
            }),
            outer: Net {
                address: host_b.ip,
                prefix_len: host_b.prefix_len,
            },
        })
    }
}

/// Refuses a gateway address IKE cannot talk to from port B (`host_b`):
/// port B's own address (linerate would talk to itself), its subnet's
/// network or broadcast address, a multicast, broadcast or unspecified
/// one. Checked before any datagram is sent.
fn check_gateway_address(gateway: Ipv4Addr, host_b: &HostConfig) -> Result<()> {
    let why = if gateway == host_b.ip {
        Some("is port B's own address, where linerate's peer is: give the gateway's WAN address")
    } else if gateway.is_unspecified() || gateway.is_broadcast() || gateway.is_multicast() {
        Some("is not the address of one host: give the gateway's WAN address")
    } else {
        let subnet = Net {
            address: host_b.ip,
            prefix_len: host_b.prefix_len,
        };
        // /31 and /32 have no network or broadcast address (RFC 3021).
        let edge = (1..=30).contains(&host_b.prefix_len) && subnet.contains(gateway) && {
            let host_part = !subnet.mask();
            let host = u32::from(gateway) & host_part;
            host == 0 || host == host_part
        };
        edge
            .then_some("is the network or broadcast address of port B's subnet, not a host: give the gateway's WAN address")
    };
    match why {
        Some(why) => bail!(
            BadInput,
            "the IPsec gateway {gateway} {why} (--ipsec-gateway, or --gw-b)"
        ),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A gateway address IKE cannot reach from port B is refused before
    /// any datagram: port B's own, its subnet's edges, no host at all.
    #[test]
    fn a_gateway_address_that_is_no_gateway_is_refused() {
        let host_b = HostConfig {
            ip: Ipv4Addr::new(198, 18, 1, 2),
            prefix_len: 24,
            gateway: Ipv4Addr::new(198, 18, 1, 1),
            gateway_mac: None,
            also_answers: None,
            inner: None,
            ipv6: None,
            vlan: None,
        };
        for (bad, why) in [
            ("198.18.1.2", "port B's own address"),
            ("198.18.1.255", "broadcast address of port B's subnet"),
            ("198.18.1.0", "network or broadcast"),
            ("255.255.255.255", "not the address of one host"),
            ("0.0.0.0", "not the address of one host"),
            ("224.0.0.5", "not the address of one host"),
        ] {
            let e = check_gateway_address(bad.parse().unwrap(), &host_b).unwrap_err();
            let e = e.to_string();
            assert!(e.contains(why) && e.contains(bad), "{bad}: {e}");
        }
        for good in ["198.18.1.1", "198.18.1.254", "203.0.113.7"] {
            check_gateway_address(good.parse().unwrap(), &host_b).unwrap();
        }
        let point_to_point = HostConfig {
            prefix_len: 31,
            ip: Ipv4Addr::new(198, 18, 1, 0),
            ..host_b.clone()
        };
        check_gateway_address(Ipv4Addr::new(198, 18, 1, 1), &point_to_point).unwrap();
    }
}
