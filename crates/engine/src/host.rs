//! The host a tester port pretends to be, as hardware testers do: it owns an
//! IPv4 address, answers ARP for it, and learns its gateway's MAC by ARP.

use linerate_wire::arp::{arp_frame, ArpOp, ArpRepr};
use linerate_wire::MacAddr;
use std::net::Ipv4Addr;

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
}

/// What a host does with one ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArpAction {
    /// Send this frame (a reply to a request for our address).
    Reply([u8; 60]),
    /// The gateway told us its MAC.
    LearnedGateway(MacAddr),
    Ignore,
}

impl HostConfig {
    /// Decides what to do about an ARP packet seen on a port whose MAC is `mac`.
    pub fn on_arp(&self, mac: MacAddr, arp: &ArpRepr) -> ArpAction {
        let ours = arp.target_ip == self.ip
            || self
                .also_answers
                .is_some_and(|(lo, hi)| (lo..=hi).contains(&arp.target_ip));
        if arp.op == ArpOp::Request && ours {
            let reply = ArpRepr::reply_to(arp, mac);
            return ArpAction::Reply(arp_frame(&reply, mac, arp.sender_mac));
        }
        // A reply from the gateway, or its own request, both carry its MAC.
        if arp.sender_ip == self.gateway
            && !arp.sender_mac.is_multicast()
            && arp.sender_mac != MacAddr::ZERO
        {
            return ArpAction::LearnedGateway(arp.sender_mac);
        }
        ArpAction::Ignore
    }

    /// The broadcast request that asks for the gateway's MAC. The DUT also
    /// learns our MAC from it (RFC 2544 section 23's learning frames).
    pub fn gateway_request(&self, mac: MacAddr) -> [u8; 60] {
        let req = ArpRepr::request(mac, self.ip, self.gateway);
        arp_frame(&req, mac, MacAddr::BROADCAST)
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
}
