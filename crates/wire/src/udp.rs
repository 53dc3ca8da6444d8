//! The UDP header and its checksum over the IPv4 pseudo-header.
//!
//! Test frames always carry a real UDP checksum: some DUTs (and NIC
//! offloads on the receive side) drop or flag datagrams with a bad one, and a
//! zero checksum would hide corruption the DUT introduced.

use crate::checksum::{fold, pseudo_header_ipv4, sum16};
use crate::ethernet::read_u16;
use crate::ipv4::IPPROTO_UDP;
use std::net::Ipv4Addr;

pub use crate::lengths::UDP_HEADER_LEN;

pub const SRC_PORT_OFFSET: usize = 0;
pub const DST_PORT_OFFSET: usize = 2;
pub const LEN_OFFSET: usize = 4;
pub const CHECKSUM_OFFSET: usize = 6;

/// A zero-copy view of a UDP datagram: it borrows the bytes (`&[u8]` to
/// read, `&mut [u8]` to write too) and reads each field where it lies.
/// [`new_checked`](Self::new_checked) makes sure the 8-byte header is
/// there, so the accessors need no check of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
    /// A view of `buffer` as it is: an accessor panics on a buffer shorter
    /// than the 8-byte header.
    #[inline]
    pub fn new_unchecked(buffer: T) -> UdpPacket<T> {
        UdpPacket { buffer }
    }

    /// A view of `buffer`, if it holds the 8-byte header.
    #[inline]
    pub fn new_checked(buffer: T) -> Option<UdpPacket<T>> {
        (buffer.as_ref().len() >= UDP_HEADER_LEN).then_some(UdpPacket { buffer })
    }

    /// The bytes the view was made of.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    fn u16_at(&self, at: usize) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[at], b[at + 1]])
    }

    #[inline]
    pub fn src_port(&self) -> u16 {
        self.u16_at(SRC_PORT_OFFSET)
    }

    #[inline]
    pub fn dst_port(&self) -> u16 {
        self.u16_at(DST_PORT_OFFSET)
    }

    /// Header plus payload, in bytes, as the header says.
    #[inline]
    pub fn length(&self) -> u16 {
        self.u16_at(LEN_OFFSET)
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        self.u16_at(CHECKSUM_OFFSET)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    #[inline]
    fn set_u16_at(&mut self, at: usize, v: u16) {
        self.buffer.as_mut()[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn set_src_port(&mut self, port: u16) {
        self.set_u16_at(SRC_PORT_OFFSET, port);
    }

    #[inline]
    pub fn set_dst_port(&mut self, port: u16) {
        self.set_u16_at(DST_PORT_OFFSET, port);
    }

    #[inline]
    pub fn set_length(&mut self, len: u16) {
        self.set_u16_at(LEN_OFFSET, len);
    }

    #[inline]
    pub fn set_checksum(&mut self, checksum: u16) {
        self.set_u16_at(CHECKSUM_OFFSET, checksum);
    }
}

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
        let Some(mut u) = UdpPacket::new_checked(buf) else {
            return false;
        };
        u.set_src_port(self.src_port);
        u.set_dst_port(self.dst_port);
        u.set_length(self.len);
        u.set_checksum(0);
        true
    }

    /// Reads the header of a whole datagram (the checksum, which needs the
    /// IP addresses, is not checked: [`checksum_ok`]). None if `datagram`
    /// is shorter than the header, or its length field is shorter than
    /// the header or longer than `datagram` (cut short).
    pub fn parse(datagram: &[u8]) -> Option<UdpRepr> {
        let u = UdpPacket::new_checked(datagram)?;
        let len = u.length();
        if (len as usize) < UDP_HEADER_LEN || len as usize > datagram.len() {
            return None;
        }
        Some(UdpRepr {
            src_port: u.src_port(),
            dst_port: u.dst_port(),
            len,
        })
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
    fn emit_then_parse_gives_the_repr_back() {
        let r = UdpRepr {
            src_port: 4500,
            dst_port: 0x4C52,
            len: 13,
        };
        let mut d = [0xAAu8; 16];
        assert!(r.emit(&mut d[..13]));
        let u = UdpPacket::new_checked(&d[..]).unwrap();
        assert_eq!(
            (u.src_port(), u.dst_port(), u.length(), u.checksum()),
            (4500, 0x4C52, 13, 0)
        );
        assert_eq!(UdpRepr::parse(&d[..13]), Some(r));
        // Padding after the datagram is no matter.
        assert_eq!(UdpRepr::parse(&d), Some(r));
    }

    #[test]
    fn parse_refuses_truncated_and_bad_lengths() {
        let r = UdpRepr {
            src_port: 1,
            dst_port: 2,
            len: 12,
        };
        let mut d = [0u8; 12];
        assert!(r.emit(&mut d));
        assert_eq!(UdpRepr::parse(&d[..11]), None); // cut short in the payload
        assert_eq!(UdpRepr::parse(&d[..7]), None); // in the header
        assert_eq!(UdpPacket::new_checked(&d[..7]), None);
        for bad in [0u16, 7] {
            let mut u = UdpPacket::new_unchecked(&mut d[..]);
            u.set_length(bad);
            assert_eq!(UdpRepr::parse(&d), None, "length {bad}");
        }
    }

    #[test]
    fn zero_is_sent_as_all_ones() {
        assert_eq!(wire_checksum(0), 0xFFFF);
        assert_eq!(wire_checksum(0x1234), 0x1234);
    }
}
