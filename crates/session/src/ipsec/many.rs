//! `--tunnels N` (`IpsecPeer::establish_many`) in its phases: the peers
//! and slices checked, the fleet bound and brought up, a tunnel that did
//! not come up refused, every tunnel's first keys taken, the peer made.

use super::negotiate::{interrupted_negotiation, Checked};
use super::plan::{EspEncap, IpsecPlan, Net, Slices};
use super::selectors::check_selectors;
use super::{FirstTunnel, IpsecPeer, Keys, TunnelsRun};
use crate::error::{bail, err, Error, Result};
use crate::peers::FleetSpec;
use crate::peers::PeerAddresses;
use linerate_engine::ipsec::ESP_IN_UDP;
use linerate_engine::HostConfig;
use linerate_esp::{Encapsulation, EspSuite, Inbound, Outbound};
use linerate_ike::{Fleet, IkeProposals, Psk, Setup};
use linerate_results::report::thousands;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Where the N tunnels go, checked before anything is touched: the
/// gateway, the networks, the peers' addresses and their slices.
struct Layout {
    esp: EspSuite,
    gateway: Ipv4Addr,
    remote_net: Net,
    local_net: Net,
    /// Port B's address and subnet, where the peers' addresses go.
    outer: Net,
    ike: IkeProposals,
    peers: Vec<Ipv4Addr>,
    /// The slices' prefix length, the slices, and each one's network.
    prefix: u8,
    slices: Slices,
    nets: Vec<Net>,
}

impl Layout {
    /// Checks the plan for N tunnels (the refusals in their order) and
    /// lays the peers and slices out; the key, read, comes back beside.
    fn of(plan: &IpsecPlan, host_b: &HostConfig, lan: &HostConfig) -> Result<(Layout, Psk)> {
        let count = plan.tunnels;
        crate::peers::check_id_template(plan.local_id.as_ref())?;
        if plan.esp_keys.is_some() {
            bail!(
                BadInput,
                "--esp-keys writes one tunnel's keys: leave it out with --tunnels above 1"
            );
        }
        let Checked {
            psk,
            esp,
            gateway,
            remote_net,
            local_net,
            outer,
        } = Checked::of(
            plan,
            host_b,
            lan,
            "split into one slice per tunnel (e.g. 198.19.128.0/17)",
        )?;
        if !outer.contains(gateway) {
            bail!(BadInput, "the IPsec gateway {gateway} is not on port B's subnet {outer}: give the gateway's WAN address on that subnet (--gw-b or --ipsec-gateway)");
        }
        let prefix = crate::peers::slice_prefix(remote_net, count, "--remote-net")?;
        let peers = match &plan.peer_addrs {
            Some(range) => range.take(count, "--tunnels")?,
            None => super::plan::PeerAddrs::from_first(host_b.ip).take(count, "--tunnels")?,
        };
        for p in [peers[0], peers[count - 1]] {
            if remote_net.contains(p) {
                bail!(BadInput, "--remote-net {remote_net} holds the peer address {p}: the network behind linerate must be another one than the peers' addresses");
            }
        }
        if let Some(p) = peers.iter().find(|&&p| p == gateway) {
            bail!(BadInput, "the peer addresses include the gateway's own address {p}: give --peer-addrs a range without it");
        }
        let (first, _) = remote_net.range();
        let block = 1u32 << (32 - prefix as u32);
        let slices = Slices {
            first,
            block,
            count: count as u32,
            host_offset: 2.min(block - 1),
        };
        let nets: Vec<Net> = (0..count)
            .map(|i| crate::peers::slice(remote_net, prefix, i))
            .collect();
        let layout = Layout {
            esp,
            gateway,
            remote_net,
            local_net,
            outer,
            ike: plan.ike.clone().unwrap_or_default(),
            peers,
            prefix,
            slices,
            nets,
        };
        Ok((layout, psk))
    }

    /// Binds the fleet of peers in port B's namespace, one peer per
    /// address, each for its own slice.
    fn bind_fleet(&self, plan: &IpsecPlan, netns: Option<&str>, psk: Psk) -> Result<Fleet> {
        let spec = FleetSpec {
            plan,
            netns,
            gateway: self.gateway,
            ike: self.ike.clone(),
            esp: self.esp,
            local_net: self.local_net,
            peers: &self.peers,
            slices: &self.nets,
            force_encap: plan.esp_encap.forces_udp(),
            attempt_rate: None,
            window: 64,
        };
        crate::peers::bind_fleet(spec, psk)
    }

    /// Why the measurement is refused when a tunnel did not come up: the
    /// failures counted by reason, and the first one's error. None: all
    /// are up.
    fn refusal(&self, setups: &[Setup], fleet: &Fleet) -> Option<Error> {
        let count = self.peers.len();
        let failed: Vec<&Setup> = setups.iter().filter(|s| s.outcome.is_err()).collect();
        let up = (0..count).filter(|&i| fleet.child(i).is_some()).count();
        if failed.is_empty() && up >= count {
            return None;
        }
        let mut reasons: Vec<(String, u64)> = Vec::new();
        for s in &failed {
            let Err(e) = &s.outcome else { continue };
            let r = crate::peers::reason(e);
            match reasons.iter_mut().find(|(n, _)| *n == r) {
                Some((_, c)) => *c += 1,
                None => reasons.push((r, 1)),
            }
        }
        let named: Vec<String> = reasons
            .iter()
            .map(|(r, c)| format!("{} {r}", thousands(*c)))
            .collect();
        let example = failed
            .first()
            .and_then(|s| s.outcome.as_ref().err().map(|e| (s.peer, e.to_string())))
            .map(|(p, e)| format!("; the first, {}: {e}", self.peers[p]))
            .unwrap_or_default();
        Some(err!(
            Failed,
            "{} of {} tunnels did not come up ({}){example}; the {} up were deleted and nothing was measured",
            thousands((count - up) as u64),
            thousands(count as u64),
            named.join(", "),
            thousands(up as u64)
        ))
    }
}

/// Brings every peer's tunnel up, with progress once a second when the
/// setups take longer than that. The setups, and how long they took (ms).
fn bring_up(
    fleet: &mut Fleet,
    count: usize,
    gateway: Ipv4Addr,
    stop: &AtomicBool,
) -> (Vec<Setup>, u64) {
    let begun = Instant::now();
    let mut shown = begun;
    let (mut up, mut down) = (0u64, 0u64);
    let setups = fleet.bring_up_until(stop, &mut |s| {
        match s.outcome {
            Ok(_) => up += 1,
            Err(_) => down += 1,
        }
        if shown.elapsed() >= std::time::Duration::from_secs(1) {
            shown = Instant::now();
            errln!(
                "linerate: bringing up {} tunnels to {gateway}: {} up, {} failed after {} s",
                thousands(count as u64),
                thousands(up),
                thousands(down),
                begun.elapsed().as_secs()
            );
        }
    });
    (setups, begun.elapsed().as_millis() as u64)
}

/// Every tunnel's first CHILD_SA, made into the data path's SAs, and
/// their SPIs.
struct FirstKeys {
    outbound: Vec<(Outbound, Ipv4Addr)>,
    inbound: Vec<Inbound>,
    spi_out: Vec<u32>,
    spi_in: Vec<u32>,
    /// How every tunnel's ESP travels.
    encapsulation: Encapsulation,
}

impl FirstKeys {
    /// Takes the keys of every tunnel (all up); refuses an encapsulation
    /// `--esp-encap` does not allow, and tunnels that differ in it (the
    /// data path sends all of them one way).
    fn of(
        fleet: &Fleet,
        peers: &[Ipv4Addr],
        gateway: Ipv4Addr,
        esp_encap: EspEncap,
    ) -> Result<FirstKeys> {
        let count = peers.len();
        let mut outbound = Vec::with_capacity(count);
        let mut inbound = Vec::with_capacity(count);
        let (mut spi_out, mut spi_in) = (Vec::with_capacity(count), Vec::with_capacity(count));
        let mut encapsulation = None;
        for (i, &p) in peers.iter().enumerate() {
            let child = fleet.child(i).expect("every tunnel is up");
            let this = esp_encap.outcome(child.udp_encap, gateway)?;
            if *encapsulation.get_or_insert(this) != this {
                bail!(Environment, "--esp-encap auto: the gateway at {gateway} encapsulated ESP in UDP for some tunnels and not for others (the peer {p} differs from {}); give --esp-encap udp or raw", peers[0]);
            }
            outbound.push((
                Outbound::new(child.outbound.clone()).map_err(|e| err!(Failed, "{e}"))?,
                p,
            ));
            inbound.push(Inbound::new(child.inbound.clone()).map_err(|e| err!(Failed, "{e}"))?);
            spi_out.push(child.outbound.spi);
            spi_in.push(child.inbound.spi);
        }
        Ok(FirstKeys {
            outbound,
            inbound,
            spi_out,
            spi_in,
            encapsulation: encapsulation.unwrap_or(ESP_IN_UDP),
        })
    }
}

impl IpsecPeer {
    /// `--tunnels N`: N peers on port B, from its address upward (or
    /// `--peer-addrs`), each with its own IKE SA and CHILD_SA for its own
    /// slice of the network behind linerate, all brought up by one
    /// [`Fleet`]. A tunnel that does not come up refuses the measurement
    /// (those up are deleted).
    pub(super) fn establish_many(
        plan: &IpsecPlan,
        netns: Option<&str>,
        ifname: &str,
        host_b: &HostConfig,
        lan: &HostConfig,
        stop: &AtomicBool,
    ) -> Result<IpsecPeer> {
        let (layout, psk) = Layout::of(plan, host_b, lan)?;
        let addresses = PeerAddresses::add(netns, ifname, layout.outer, &layout.peers)?;
        let mut fleet = layout.bind_fleet(plan, netns, psk)?;
        let (setups, setup_ms) = bring_up(&mut fleet, plan.tunnels, layout.gateway, stop);
        if stop.load(Ordering::Relaxed) {
            // Those up, and those whose IKE_AUTH was on its way, deleted.
            fleet.delete_all();
            drop(fleet);
            drop(addresses);
            return Err(interrupted_negotiation(layout.gateway));
        }
        if let Some(refused) = layout.refusal(&setups, &fleet) {
            fleet.delete_all();
            drop(fleet);
            drop(addresses);
            return Err(refused);
        }
        // Each tunnel's selectors as the gateway answered them must hold
        // its test frames' addresses (those up are deleted otherwise).
        let lan_ip = lan.ip;
        let narrowed = (0..layout.peers.len()).find_map(|i| {
            let child = fleet.child(i)?;
            let frames = plan.frame_addresses(layout.slices.host(i), lan_ip);
            check_selectors(&child.local_ts, &child.remote_ts, &frames, Some(i)).err()
        });
        if let Some(refused) = narrowed {
            fleet.delete_all();
            drop(fleet);
            drop(addresses);
            return Err(refused);
        }
        let keys = FirstKeys::of(&fleet, &layout.peers, layout.gateway, plan.esp_encap)?;
        let mut peer = Self::of_many(plan, netns, ifname, layout, keys, setup_ms);
        // The peers' addresses stay on port B while the trials run, for
        // the keeper's IKE (the fleet's socket filters the ESP off).
        peer.fleet = Some(fleet);
        peer.addresses = Some(addresses);
        Ok(peer)
    }

    /// The peer of N tunnels up, from their layout and first keys (its
    /// fleet and addresses still to be given).
    fn of_many(
        plan: &IpsecPlan,
        netns: Option<&str>,
        ifname: &str,
        layout: Layout,
        keys: FirstKeys,
        setup_ms: u64,
    ) -> IpsecPeer {
        let Layout {
            esp,
            gateway,
            remote_net,
            local_net,
            ike,
            peers,
            prefix,
            slices,
            nets,
            ..
        } = layout;
        let count = peers.len();
        let first = FirstTunnel {
            esp,
            gateway,
            peer: peers[0],
            local_net: nets[0],
            remote_net: local_net,
            inner: slices.host(0),
        };
        let mut peer = Self::unnegotiated(plan, netns, ifname, first);
        let spis = (keys.spi_out[0], keys.spi_in[0]);
        peer.record.tunnels = Some(TunnelsRun {
            count,
            first_peer: peers[0],
            last_peer: peers[count - 1],
            remote_net: remote_net.to_string(),
            slice_prefix: prefix,
            host_offset: slices.host_offset,
            spi_out: keys.spi_out,
            spi_in: keys.spi_in,
            setup_ms,
        });
        peer.slices = Some(slices);
        let first_keys = Keys::Many(keys.outbound, keys.inbound, keys.encapsulation);
        peer.take_keys(first_keys, ike.to_string(), spis);
        peer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipsec::encapsulation_label;
    use linerate_ike::loopback::LoopbackGateway;
    use linerate_ike::Retransmit;

    /// Two peers up against linerate's responder on the loopback (no NAT
    /// between), with NAT detection faked (`force_encap`) or honest.
    fn two_tunnels(force_encap: bool) -> (Fleet, Vec<Ipv4Addr>) {
        LoopbackGateway::start().fleet_up(2, force_encap, Retransmit::default())
    }

    /// Without a NAT and without faked NAT detection the tunnels' ESP is
    /// raw: taken with --esp-encap raw or auto (labelled as raw ESP),
    /// refused with udp; with faked NAT detection it is in UDP, and raw is
    /// refused.
    #[test]
    fn many_tunnels_take_the_encapsulation_the_gateway_negotiated() {
        let gw = Ipv4Addr::LOCALHOST;
        let (fleet, peers) = two_tunnels(false);
        for choice in [EspEncap::Raw, EspEncap::Auto] {
            let keys = FirstKeys::of(&fleet, &peers, gw, choice).unwrap();
            assert_eq!(keys.encapsulation, Encapsulation::Raw);
            assert_eq!(keys.spi_out.len(), 2);
            assert!(encapsulation_label(keys.encapsulation).starts_with("raw ESP"));
        }
        let e = FirstKeys::of(&fleet, &peers, gw, EspEncap::Udp)
            .err()
            .unwrap();
        assert!(e.to_string().contains("--esp-encap raw"), "{e}");

        let (fleet, peers) = two_tunnels(true);
        let keys = FirstKeys::of(&fleet, &peers, gw, EspEncap::Udp).unwrap();
        assert_eq!(keys.encapsulation, ESP_IN_UDP);
        let e = FirstKeys::of(&fleet, &peers, gw, EspEncap::Raw)
            .err()
            .unwrap();
        assert!(e.to_string().contains("negotiated ESP in UDP"), "{e}");
    }
}
