//! The host a tester port pretends to be, as hardware testers do: it owns
//! an IPv4 address (answers ARP for it, learns its gateway's MAC by ARP)
//! or, for IPv6 tests, an IPv6 address (the same by Neighbor Discovery).
//! With a VLAN, its control frames carry the tag too.

use linerate_wire::arp::{arp_frame, ArpOp, ArpRepr};
use linerate_wire::ndp::{self, NdpOp, NdpRepr};
use linerate_wire::{Encap, IpVersion, MacAddr, VlanTag};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Addresses of one emulated host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostConfig {
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    /// The DUT interface the port sends to.
    pub gateway: Ipv4Addr,
    /// A static gateway MAC: skips ARP resolution.
    pub gateway_mac: Option<MacAddr>,
    /// More addresses this host answers ARP for, first..=last: the
    /// destinations of a `dst-ip` flow range, so the DUT can deliver to
    /// each of them (the 100GE report's 254 destinations).
    pub also_answers: Option<(Ipv4Addr, Ipv4Addr)>,
    /// A VPN peer's inner address: the test frames come from (and go to)
    /// this address in the network the peer protects, while `ip` is the
    /// tunnel's outer end, which the host answers ARP for and IKE and ESP
    /// use. None: the test frames use `ip`.
    pub inner: Option<Ipv4Addr>,
    /// IPv6 tests: the host's IPv6 address and gateway; the test frames
    /// are IPv6 and the gateway is resolved by Neighbor Discovery.
    pub ipv6: Option<Ipv6Host>,
    /// The 802.1Q tag on every frame this host sends.
    pub vlan: Option<VlanTag>,
}

/// The IPv6 side of a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Host {
    pub ip: Ipv6Addr,
    pub prefix_len: u8,
    pub gateway: Ipv6Addr,
}

/// What a host does with one ARP or ND packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArpAction {
    /// Send this frame (a reply to a request for our address).
    Reply(Vec<u8>),
    /// The gateway told us its MAC.
    LearnedGateway(MacAddr),
    Ignore,
}

impl HostConfig {
    /// The layout of this host's test frames.
    pub fn encap(&self) -> Encap {
        Encap {
            ip: if self.ipv6.is_some() {
                IpVersion::V6
            } else {
                IpVersion::V4
            },
            vlan: self.vlan,
        }
    }

    /// The address test frames come from (to this host: go to).
    pub fn test_ip(&self) -> IpAddr {
        match (&self.ipv6, self.inner) {
            (Some(v6), _) => v6.ip.into(),
            (None, Some(inner)) => inner.into(),
            (None, None) => self.ip.into(),
        }
    }

    /// The gateway the test frames go through.
    pub fn test_gateway(&self) -> IpAddr {
        match &self.ipv6 {
            Some(v6) => v6.gateway.into(),
            None => self.gateway.into(),
        }
    }

    /// "ARP" or "NDP": how the gateway is resolved, for messages.
    pub fn resolution(&self) -> &'static str {
        if self.ipv6.is_some() {
            "NDP"
        } else {
            "ARP"
        }
    }

    /// Decides what to do about an ARP packet seen on a port whose MAC is `mac`.
    pub fn on_arp(&self, mac: MacAddr, arp: &ArpRepr) -> ArpAction {
        let ours = arp.target_ip == self.ip
            || self
                .also_answers
                .is_some_and(|(lo, hi)| (lo..=hi).contains(&arp.target_ip));
        if arp.op == ArpOp::Request && ours {
            let reply = ArpRepr::reply_to(arp, mac);
            return ArpAction::Reply(self.tagged(&arp_frame(&reply, mac, arp.sender_mac)));
        }
        // A reply from the gateway, or its own request, both carry its MAC
        // (only an IPv4 test resolves its gateway by ARP).
        if self.ipv6.is_none()
            && arp.sender_ip == self.gateway
            && !arp.sender_mac.is_multicast()
            && arp.sender_mac != MacAddr::ZERO
        {
            return ArpAction::LearnedGateway(arp.sender_mac);
        }
        ArpAction::Ignore
    }

    /// Decides what to do about a Neighbor Solicitation or Advertisement.
    pub fn on_ndp(&self, mac: MacAddr, nd: &NdpRepr) -> ArpAction {
        let Some(v6) = &self.ipv6 else {
            return ArpAction::Ignore;
        };
        if nd.op == NdpOp::Solicit && nd.target == v6.ip {
            return ArpAction::Reply(ndp::advertisement(mac, v6.ip, nd, self.vlan));
        }
        // The gateway's advertisement of itself, or its own solicitation.
        let from_gateway = match nd.op {
            NdpOp::Advert => nd.target == v6.gateway,
            NdpOp::Solicit => nd.src_ip == v6.gateway,
        };
        if from_gateway && !nd.link_addr.is_multicast() && nd.link_addr != MacAddr::ZERO {
            return ArpAction::LearnedGateway(nd.link_addr);
        }
        ArpAction::Ignore
    }

    /// The request that asks for the gateway's MAC: a broadcast ARP
    /// request, or a Neighbor Solicitation for IPv6. The DUT also learns
    /// our MAC from it (RFC 2544 section 23's learning frames).
    pub fn gateway_request(&self, mac: MacAddr) -> Vec<u8> {
        match &self.ipv6 {
            Some(v6) => ndp::solicitation(mac, v6.ip, v6.gateway, self.vlan),
            None => {
                let req = ArpRepr::request(mac, self.ip, self.gateway);
                self.tagged(&arp_frame(&req, mac, MacAddr::BROADCAST))
            }
        }
    }

    /// An untagged 60-byte ARP frame with this host's tag inserted after
    /// the MACs (64 bytes then, the padding kept).
    fn tagged(&self, frame: &[u8]) -> Vec<u8> {
        match self.vlan {
            None => frame.to_vec(),
            Some(tag) => {
                let mut v = Vec::with_capacity(frame.len() + 4);
                v.extend_from_slice(&frame[..12]);
                v.extend_from_slice(&[0x81, 0x00]);
                v.extend_from_slice(&tag.tci().to_be_bytes());
                v.extend_from_slice(&frame[12..]);
                v
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn host() -> HostConfig {
        HostConfig {
            ip: Ipv4Addr::new(198, 18, 0, 2),
            prefix_len: 24,
            gateway: Ipv4Addr::new(198, 18, 0, 1),
            gateway_mac: None,
            also_answers: None,
            inner: None,
            ipv6: None,
            vlan: None,
        }
    }
    const ME: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const GW: MacAddr = MacAddr([2, 0, 0, 0, 0, 9]);

    #[test]
    fn answers_requests_for_its_address_only() {
        let h = host();
        let ask = ArpRepr::request(GW, h.gateway, h.ip);
        match h.on_arp(ME, &ask) {
            ArpAction::Reply(frame) => {
                assert_eq!(frame.len(), 60);
                let reply = ArpRepr::parse(&frame[14..]).unwrap();
                assert_eq!(
                    (reply.op, reply.sender_mac, reply.sender_ip),
                    (ArpOp::Reply, ME, h.ip)
                );
                assert_eq!((reply.target_mac, reply.target_ip), (GW, h.gateway));
            }
            other => panic!("expected a reply, got {other:?}"),
        }
        let other = ArpRepr::request(GW, h.gateway, Ipv4Addr::new(198, 18, 0, 3));
        assert_eq!(h.on_arp(ME, &other), ArpAction::LearnedGateway(GW));
        let stranger = ArpRepr::request(GW, Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        assert_eq!(h.on_arp(ME, &stranger), ArpAction::Ignore);
    }

    #[test]
    fn learns_the_gateway_from_its_reply() {
        let h = host();
        let req = ArpRepr::request(ME, h.ip, h.gateway);
        let reply = ArpRepr::reply_to(&req, GW);
        assert_eq!(h.on_arp(ME, &reply), ArpAction::LearnedGateway(GW));
    }

    fn host6(vlan: Option<VlanTag>) -> HostConfig {
        HostConfig {
            ipv6: Some(Ipv6Host {
                ip: "2001:2::2".parse().unwrap(),
                prefix_len: 64,
                gateway: "2001:2::1".parse().unwrap(),
            }),
            vlan,
            ..host()
        }
    }

    fn parse_nd(frame: &[u8]) -> NdpRepr {
        match linerate_wire::classify(frame, 0x4C52) {
            linerate_wire::Received::Ndp(n) => n,
            other => panic!("not ND: {other:?}"),
        }
    }

    #[test]
    fn ipv6_host_answers_solicitations_and_learns_the_gateway() {
        let tag = VlanTag { id: 100, pcp: 0 };
        for vlan in [None, Some(tag)] {
            let h = host6(vlan);
            let v6 = h.ipv6.unwrap();
            assert_eq!(
                h.encap().to_string(),
                if vlan.is_some() {
                    "IPv6, VLAN 100"
                } else {
                    "IPv6"
                }
            );
            // Our solicitation for the gateway, tagged when the host is.
            let ns = h.gateway_request(ME);
            assert_eq!(ns[12..14] == [0x81, 0x00], vlan.is_some());
            let asked = parse_nd(&ns);
            assert_eq!(
                (asked.op, asked.target, asked.link_addr),
                (NdpOp::Solicit, v6.gateway, ME)
            );
            // The gateway asks for us: we advertise our MAC to it.
            let theirs = NdpRepr {
                op: NdpOp::Solicit,
                src_ip: v6.gateway,
                target: v6.ip,
                link_addr: GW,
            };
            match h.on_ndp(ME, &theirs) {
                ArpAction::Reply(f) => {
                    assert_eq!(&f[0..6], &GW.0);
                    let na = parse_nd(&f);
                    assert_eq!((na.op, na.target, na.link_addr), (NdpOp::Advert, v6.ip, ME));
                }
                other => panic!("expected an advertisement, got {other:?}"),
            }
            // The gateway's advertisement teaches us its MAC.
            let na = NdpRepr {
                op: NdpOp::Advert,
                src_ip: v6.gateway,
                target: v6.gateway,
                link_addr: GW,
            };
            assert_eq!(h.on_ndp(ME, &na), ArpAction::LearnedGateway(GW));
            // Someone else's address: ignored.
            let other = NdpRepr {
                target: "2001:2::99".parse().unwrap(),
                src_ip: "2001:2::98".parse().unwrap(),
                ..theirs
            };
            assert_eq!(h.on_ndp(ME, &other), ArpAction::Ignore);
            // An IPv6 host learns nothing from ARP, and an IPv4 host ignores ND.
            let arp_reply = ArpRepr::reply_to(&ArpRepr::request(ME, h.ip, h.gateway), GW);
            assert_eq!(h.on_arp(ME, &arp_reply), ArpAction::Ignore);
            assert_eq!(host().on_ndp(ME, &na), ArpAction::Ignore);
        }
    }

    #[test]
    fn tagged_ipv4_host_tags_its_arp() {
        let h = HostConfig {
            vlan: Some(VlanTag { id: 100, pcp: 3 }),
            ..host()
        };
        let req = h.gateway_request(ME);
        assert_eq!(req.len(), 64);
        assert_eq!(&req[12..18], &[0x81, 0x00, 0x60, 0x64, 0x08, 0x06]);
        match linerate_wire::classify(&req, 0x4C52) {
            linerate_wire::Received::Arp(a) => assert_eq!(a.target_ip, h.gateway),
            other => panic!("{other:?}"),
        }
    }
}
