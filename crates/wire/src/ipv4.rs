//! The minimal IPv4 header a test frame needs, and its checksum.
//!
//! Test packets never carry options, so the header is always 20 bytes,
//! identification 0 and DF set: RFC 2544 frames must cross the DUT whole,
//! and with DF a DUT that would fragment drops instead, which shows as loss.

use crate::checksum::{fold, sum16};
use crate::ethernet::read_u16;
use std::net::Ipv4Addr;

pub use crate::units::IPV4_HEADER_LEN;

pub const IPPROTO_UDP: u8 = 17;
pub const DEFAULT_TTL: u8 = 64;
/// Don't Fragment, in the flags/fragment-offset word.
pub const FLAG_DF: u16 = 0x4000;
/// More Fragments.
pub const FLAG_MF: u16 = 0x2000;
/// Fragment offset mask.
pub const FRAG_OFFSET_MASK: u16 = 0x1FFF;

/// Offsets inside the header.
pub const TOTAL_LEN_OFFSET: usize = 2;
pub const FLAGS_OFFSET: usize = 6;
pub const TTL_OFFSET: usize = 8;
pub const PROTO_OFFSET: usize = 9;
pub const CHECKSUM_OFFSET: usize = 10;
pub const SRC_OFFSET: usize = 12;
pub const DST_OFFSET: usize = 16;

/// The fields of an option-less IPv4 header that a tester sets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ipv4Repr {
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub protocol: u8,
    /// Header plus payload, in bytes.
    pub total_len: u16,
    pub ident: u16,
    pub ttl: u8,
    pub dont_frag: bool,
}

impl Ipv4Repr {
    /// Writes a 20-byte header (version 4, IHL 5, DSCP/ECN 0) with its
    /// checksum into `buf[..20]`. False, writing nothing, if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        let Some(h) = buf.get_mut(..IPV4_HEADER_LEN) else {
            return false;
        };
        h[0] = 0x45;
        h[1] = 0;
        h[2..4].copy_from_slice(&self.total_len.to_be_bytes());
        h[4..6].copy_from_slice(&self.ident.to_be_bytes());
        let flags = if self.dont_frag { FLAG_DF } else { 0 };
        h[6..8].copy_from_slice(&flags.to_be_bytes());
        h[8] = self.ttl;
        h[9] = self.protocol;
        h[10..12].copy_from_slice(&[0, 0]);
        h[12..16].copy_from_slice(&self.src.octets());
        h[16..20].copy_from_slice(&self.dst.octets());
        let c = fold(sum16(h));
        h[10..12].copy_from_slice(&c.to_be_bytes());
        true
    }
}

/// Header length in bytes from the IHL field, if `packet` starts with a
/// plausible IPv4 header (version 4, IHL >= 5, header present).
#[inline]
pub fn header_len(packet: &[u8]) -> Option<usize> {
    let v = *packet.first()?;
    let ihl = (v & 0x0F) as usize * 4;
    if v >> 4 != 4 || ihl < IPV4_HEADER_LEN || packet.len() < ihl {
        return None;
    }
    Some(ihl)
}

/// True when the header (IHL honoured) sums to zero.
pub fn header_checksum_ok(packet: &[u8]) -> bool {
    match header_len(packet).and_then(|l| packet.get(..l)) {
        Some(h) => fold(sum16(h)) == 0,
        None => false,
    }
}

/// The total length field.
#[inline]
pub fn total_len(packet: &[u8]) -> Option<u16> {
    read_u16(packet, TOTAL_LEN_OFFSET)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repr() -> Ipv4Repr {
        Ipv4Repr {
            src: Ipv4Addr::new(192, 168, 0, 1),
            dst: Ipv4Addr::new(192, 168, 0, 199),
            protocol: IPPROTO_UDP,
            total_len: 0x73,
            ident: 0,
            ttl: DEFAULT_TTL,
            dont_frag: true,
        }
    }

    #[test]
    fn emits_a_known_header() {
        let mut b = [0xAAu8; 20];
        assert!(repr().emit(&mut b));
        assert_eq!(
            b,
            [
                0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
                0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7
            ]
        );
        assert!(header_checksum_ok(&b));
        assert_eq!(header_len(&b), Some(20));
        assert_eq!(total_len(&b), Some(0x73));
        b[8] = 1;
        assert!(!header_checksum_ok(&b));
    }

    #[test]
    fn short_or_odd_headers() {
        assert!(!repr().emit(&mut [0u8; 19]));
        assert_eq!(header_len(&[]), None);
        assert_eq!(header_len(&[0x44; 20]), None);
        assert_eq!(header_len(&[0x65; 20]), None);
        assert_eq!(header_len(&[0x46; 20]), None); // IHL 6 needs 24 bytes
        assert_eq!(header_len(&[0x46; 24]), Some(24));
        assert!(!header_checksum_ok(&[0x45; 3]));
    }
}
