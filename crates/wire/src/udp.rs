//! The UDP header and its checksum over the IPv4 pseudo-header.
//!
//! Test frames always carry a real UDP checksum: some DUTs (and NIC
//! offloads on the receive side) drop or flag datagrams with a bad one, and a
//! zero checksum would hide corruption the DUT introduced.

use crate::checksum::{fold, pseudo_header_ipv4, sum16};
use crate::ethernet::read_u16;
use crate::ipv4::IPPROTO_UDP;
use std::net::Ipv4Addr;

pub use crate::units::UDP_HEADER_LEN;

pub const SRC_PORT_OFFSET: usize = 0;
pub const DST_PORT_OFFSET: usize = 2;
pub const LEN_OFFSET: usize = 4;
pub const CHECKSUM_OFFSET: usize = 6;

/// The UDP header fields a tester sets; the checksum is filled separately.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpRepr {
    pub src_port: u16,
    pub dst_port: u16,
    /// Header plus payload, in bytes.
    pub len: u16,
}

impl UdpRepr {
    /// Writes the 8-byte header with a zero checksum into `buf[..8]`;
    /// false, writing nothing, if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        let Some(h) = buf.get_mut(..UDP_HEADER_LEN) else {
            return false;
        };
        h[0..2].copy_from_slice(&self.src_port.to_be_bytes());
        h[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        h[4..6].copy_from_slice(&self.len.to_be_bytes());
        h[6..8].copy_from_slice(&[0, 0]);
        true
    }
}

/// RFC 768: a computed checksum of zero is transmitted as all ones, since
/// zero on the wire means "no checksum".
#[inline]
pub fn wire_checksum(computed: u16) -> u16 {
    if computed == 0 {
        0xFFFF
    } else {
        computed
    }
}

/// The checksum to put in `datagram` (header + payload, checksum field
/// taken as zero whatever it holds), already mapped 0 -> 0xFFFF.
pub fn checksum(src: Ipv4Addr, dst: Ipv4Addr, datagram: &[u8]) -> u16 {
    let len = datagram.len() as u16;
    let field = read_u16(datagram, CHECKSUM_OFFSET).unwrap_or(0) as u32;
    // Subtract the field by adding its ones-complement.
    let sum = pseudo_header_ipv4(src, dst, IPPROTO_UDP, len) + sum16(datagram) + (!field & 0xFFFF);
    wire_checksum(fold(sum))
}

/// True when the datagram's checksum verifies, or is 0 (absent, allowed in IPv4).
pub fn checksum_ok(src: Ipv4Addr, dst: Ipv4Addr, datagram: &[u8]) -> bool {
    match read_u16(datagram, CHECKSUM_OFFSET) {
        None => false,
        Some(0) => true,
        Some(_) => {
            let len = datagram.len() as u16;
            fold(pseudo_header_ipv4(src, dst, IPPROTO_UDP, len) + sum16(datagram)) == 0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_roundtrip() {
        let src = Ipv4Addr::new(10, 0, 0, 1);
        let dst = Ipv4Addr::new(10, 0, 0, 2);
        let mut d = [0u8; 13];
        assert!(UdpRepr {
            src_port: 1234,
            dst_port: 0x4C52,
            len: 13
        }
        .emit(&mut d));
        d[8..].copy_from_slice(b"hello");
        let c = checksum(src, dst, &d);
        d[6..8].copy_from_slice(&c.to_be_bytes());
        assert!(checksum_ok(src, dst, &d));
        // Recomputing with the field filled gives the same value.
        assert_eq!(checksum(src, dst, &d), c);
        d[12] ^= 1;
        assert!(!checksum_ok(src, dst, &d));
        d[6..8].copy_from_slice(&[0, 0]);
        assert!(checksum_ok(src, dst, &d));
        assert!(!checksum_ok(src, dst, &d[..7]));
        assert!(!UdpRepr {
            src_port: 0,
            dst_port: 0,
            len: 0
        }
        .emit(&mut [0u8; 7]));
    }

    #[test]
    fn zero_is_sent_as_all_ones() {
        assert_eq!(wire_checksum(0), 0xFFFF);
        assert_eq!(wire_checksum(0x1234), 0x1234);
    }
}
