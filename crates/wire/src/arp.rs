//! ARP for Ethernet/IPv4, just enough for a tester to resolve the DUT's MAC
//! and to answer the DUT's requests for the tester's addresses.

use crate::ethernet::{self, read_u16, MacAddr, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use crate::lengths::{ETH_HEADER_LEN, FCS_LEN, MIN_FRAME_SIZE};
use std::net::Ipv4Addr;

/// Ethernet/IPv4 ARP packet length.
pub const ARP_LEN: usize = 28;
/// An ARP frame as handed to the NIC: 64-byte minimum frame minus FCS.
pub const ARP_FRAME_LEN: usize = MIN_FRAME_SIZE as usize - FCS_LEN;
const HTYPE_ETHERNET: u16 = 1;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArpOp {
    Request,
    Reply,
}

impl ArpOp {
    fn code(self) -> u16 {
        match self {
            ArpOp::Request => 1,
            ArpOp::Reply => 2,
        }
    }
}

/// An Ethernet/IPv4 ARP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArpRepr {
    pub op: ArpOp,
    pub sender_mac: MacAddr,
    pub sender_ip: Ipv4Addr,
    pub target_mac: MacAddr,
    pub target_ip: Ipv4Addr,
}

impl ArpRepr {
    /// Parses the payload of an Ethernet frame of type ARP. Anything but
    /// Ethernet/IPv4 request or reply is None; trailing padding is ignored.
    pub fn parse(eth_payload: &[u8]) -> Option<ArpRepr> {
        let p = eth_payload.get(..ARP_LEN)?;
        if read_u16(p, 0)? != HTYPE_ETHERNET
            || read_u16(p, 2)? != ETHERTYPE_IPV4
            || p[4] != 6
            || p[5] != 4
        {
            return None;
        }
        let op = match read_u16(p, 6)? {
            1 => ArpOp::Request,
            2 => ArpOp::Reply,
            _ => return None,
        };
        let ip = |o: usize| Ipv4Addr::new(p[o], p[o + 1], p[o + 2], p[o + 3]);
        Some(ArpRepr {
            op,
            sender_mac: MacAddr::from_bytes(&p[8..14])?,
            sender_ip: ip(14),
            target_mac: MacAddr::from_bytes(&p[18..24])?,
            target_ip: ip(24),
        })
    }

    /// Writes the 28-byte ARP packet into `buf[..28]`; false if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        let Some(p) = buf.get_mut(..ARP_LEN) else {
            return false;
        };
        p[0..2].copy_from_slice(&HTYPE_ETHERNET.to_be_bytes());
        p[2..4].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        p[4] = 6;
        p[5] = 4;
        p[6..8].copy_from_slice(&self.op.code().to_be_bytes());
        p[8..14].copy_from_slice(&self.sender_mac.0);
        p[14..18].copy_from_slice(&self.sender_ip.octets());
        p[18..24].copy_from_slice(&self.target_mac.0);
        p[24..28].copy_from_slice(&self.target_ip.octets());
        true
    }

    /// "Who has `target_ip`? Tell `my_ip`." Target MAC is zero, as RFC 826
    /// leaves it unknown; send it to [`MacAddr::BROADCAST`].
    pub fn request(my_mac: MacAddr, my_ip: Ipv4Addr, target_ip: Ipv4Addr) -> ArpRepr {
        ArpRepr {
            op: ArpOp::Request,
            sender_mac: my_mac,
            sender_ip: my_ip,
            target_mac: MacAddr::ZERO,
            target_ip,
        }
    }

    /// The reply to `request` from the owner of its target IP, at `my_mac`.
    /// Send it unicast to `request.sender_mac`.
    pub fn reply_to(request: &ArpRepr, my_mac: MacAddr) -> ArpRepr {
        ArpRepr {
            op: ArpOp::Reply,
            sender_mac: my_mac,
            sender_ip: request.target_ip,
            target_mac: request.sender_mac,
            target_ip: request.sender_ip,
        }
    }
}

/// A complete ARP frame, zero-padded to 60 bytes (a 64-byte frame once the
/// NIC appends the FCS), ready to send.
pub fn arp_frame(repr: &ArpRepr, eth_src: MacAddr, eth_dst: MacAddr) -> [u8; ARP_FRAME_LEN] {
    let mut f = [0u8; ARP_FRAME_LEN];
    ethernet::emit_header(&mut f, eth_dst, eth_src, ETHERTYPE_ARP);
    repr.emit(&mut f[ETH_HEADER_LEN..]);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 1]);
    const DUT: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0xD7]);

    #[test]
    fn request_frame_bytes() {
        let r = ArpRepr::request(
            ME,
            Ipv4Addr::new(198, 18, 0, 1),
            Ipv4Addr::new(198, 18, 0, 254),
        );
        let f = arp_frame(&r, ME, MacAddr::BROADCAST);
        assert_eq!(f.len(), 60);
        assert_eq!(
            &f[0..14],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x08, 0x06]
        );
        assert_eq!(&f[14..22], &[0, 1, 0x08, 0, 6, 4, 0, 1]);
        assert_eq!(&f[22..32], &[2, 0, 0, 0, 0, 1, 198, 18, 0, 1]);
        assert_eq!(&f[32..42], &[0, 0, 0, 0, 0, 0, 198, 18, 0, 254]);
        assert!(f[42..].iter().all(|&x| x == 0));
        assert_eq!(ArpRepr::parse(&f[14..]), Some(r));
    }

    #[test]
    fn reply_swaps_roles() {
        let req = ArpRepr::request(DUT, Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let rep = ArpRepr::reply_to(&req, ME);
        assert_eq!(rep.op, ArpOp::Reply);
        assert_eq!(
            (rep.sender_mac, rep.sender_ip),
            (ME, Ipv4Addr::new(10, 0, 0, 2))
        );
        assert_eq!(
            (rep.target_mac, rep.target_ip),
            (DUT, Ipv4Addr::new(10, 0, 0, 1))
        );
        let f = arp_frame(&rep, ME, DUT);
        assert_eq!(ArpRepr::parse(&f[14..]), Some(rep));
    }

    #[test]
    fn non_ethernet_ipv4_arp_is_refused() {
        let r = ArpRepr::request(ME, Ipv4Addr::LOCALHOST, Ipv4Addr::BROADCAST);
        let mut p = [0u8; 28];
        assert!(r.emit(&mut p));
        assert!(!r.emit(&mut [0u8; 27]));
        for (i, v) in [(1, 6), (3, 0xDD), (4, 8), (5, 16), (7, 3)] {
            let mut q = p;
            q[i] = v;
            assert_eq!(ArpRepr::parse(&q), None, "byte {i}");
        }
        assert_eq!(ArpRepr::parse(&p[..27]), None);
        assert_eq!(ArpRepr::parse(&[]), None);
    }
}
