//! The fixed 40-byte IPv6 header a test frame needs (RFC 8200), without
//! extension headers. IPv6 has no header checksum; the UDP checksum, which
//! covers a pseudo-header with both addresses, is mandatory instead.

use crate::ethernet::read_u16;
use std::net::Ipv6Addr;

pub use crate::lengths::IPV6_HEADER_LEN;

pub const IPPROTO_ICMPV6: u8 = 58;

/// Offsets inside the header.
pub const PAYLOAD_LEN_OFFSET: usize = 4;
pub const NEXT_HEADER_OFFSET: usize = 6;
pub const HOP_LIMIT_OFFSET: usize = 7;
pub const SRC_OFFSET: usize = 8;
pub const DST_OFFSET: usize = 24;

/// The fields of an IPv6 header that a tester sets (traffic class and
/// flow label are 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv6Repr {
    pub src: Ipv6Addr,
    pub dst: Ipv6Addr,
    pub next_header: u8,
    /// Bytes after the 40-byte header.
    pub payload_len: u16,
    pub hop_limit: u8,
}

impl Ipv6Repr {
    /// Writes the header into `buf[..40]`; false, writing nothing, if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        let Some(h) = buf.get_mut(..IPV6_HEADER_LEN) else {
            return false;
        };
        h[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
        h[4..6].copy_from_slice(&self.payload_len.to_be_bytes());
        h[6] = self.next_header;
        h[7] = self.hop_limit;
        h[8..24].copy_from_slice(&self.src.octets());
        h[24..40].copy_from_slice(&self.dst.octets());
        true
    }

    /// Reads a header: None if `packet` is shorter than 40 bytes or not version 6.
    pub fn parse(packet: &[u8]) -> Option<Ipv6Repr> {
        let h = packet.get(..IPV6_HEADER_LEN)?;
        if h[0] >> 4 != 6 {
            return None;
        }
        let addr = |o: usize| -> Option<Ipv6Addr> {
            let a: [u8; 16] = h.get(o..o + 16)?.try_into().ok()?;
            Some(Ipv6Addr::from(a))
        };
        Some(Ipv6Repr {
            src: addr(SRC_OFFSET)?,
            dst: addr(DST_OFFSET)?,
            next_header: h[NEXT_HEADER_OFFSET],
            payload_len: read_u16(h, PAYLOAD_LEN_OFFSET)?,
            hop_limit: h[HOP_LIMIT_OFFSET],
        })
    }
}

/// The solicited-node multicast address of `a` (RFC 4291 2.7.1):
/// ff02::1:ffXX:XXXX with the low 24 bits of `a`.
pub fn solicited_node(a: Ipv6Addr) -> Ipv6Addr {
    let o = a.octets();
    Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | o[13] as u16,
        (o[14] as u16) << 8 | o[15] as u16,
    )
}

/// The Ethernet multicast MAC of an IPv6 multicast address (RFC 2464 7):
/// 33:33 and the low 32 bits.
pub fn multicast_mac(a: Ipv6Addr) -> crate::MacAddr {
    let o = a.octets();
    crate::MacAddr([0x33, 0x33, o[12], o[13], o[14], o[15]])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip_and_bytes() {
        let r = Ipv6Repr {
            src: "2001:2::2".parse().unwrap(),
            dst: "2001:2:0:1::2".parse().unwrap(),
            next_header: 17,
            payload_len: 20,
            hop_limit: 64,
        };
        let mut b = [0u8; 40];
        assert!(r.emit(&mut b));
        assert_eq!(&b[..8], &[0x60, 0, 0, 0, 0, 20, 17, 64]);
        assert_eq!(&b[8..10], &[0x20, 0x01]);
        assert_eq!(b[23], 2);
        assert_eq!(Ipv6Repr::parse(&b), Some(r));
        assert_eq!(Ipv6Repr::parse(&b[..39]), None);
        b[0] = 0x45;
        assert_eq!(Ipv6Repr::parse(&b), None);
        assert!(!r.emit(&mut [0u8; 39]));
    }

    #[test]
    fn solicited_node_multicast() {
        let a: Ipv6Addr = "2001:2::1:abcd:ef12".parse().unwrap();
        assert_eq!(
            solicited_node(a),
            "ff02::1:ffcd:ef12".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(
            multicast_mac(solicited_node(a)).to_string(),
            "33:33:ff:cd:ef:12"
        );
    }
}
