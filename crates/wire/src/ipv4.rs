//! The minimal IPv4 header a test frame needs, and its checksum.
//!
//! Test packets never carry options, so the header is always 20 bytes,
//! identification 0 and DF set: RFC 2544 frames must cross the DUT whole,
//! and with DF a DUT that would fragment drops instead, which shows as loss.

use crate::checksum::{fold, sum16};
use std::net::Ipv4Addr;

pub use crate::lengths::IPV4_HEADER_LEN;

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

/// A zero-copy view of an IPv4 packet: it borrows the bytes (`&[u8]` to
/// read, `&mut [u8]` to write too) and reads each field where it lies.
/// [`new_checked`](Self::new_checked) makes sure a plausible header is
/// there (version 4, IHL at least 5, the whole header with its options),
/// so the accessors need no check of their own; the packet may be cut
/// short after the header (a receiver may copy only a frame's first
/// bytes), which [`total_len`](Self::total_len) tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// A view of `buffer` as it is: an accessor panics on a buffer shorter
    /// than what it reads.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// A view of `buffer`, if it starts with a plausible IPv4 header:
    /// version 4, IHL >= 5, and the header (options included) all there.
    #[inline]
    pub fn new_checked(buffer: T) -> Option<Ipv4Packet<T>> {
        let b = buffer.as_ref();
        let v = *b.first()?;
        let ihl = (v & 0x0F) as usize * 4;
        if v >> 4 != 4 || ihl < IPV4_HEADER_LEN || b.len() < ihl {
            return None;
        }
        Some(Ipv4Packet { buffer })
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
    fn u32_at(&self, at: usize) -> u32 {
        let b = self.buffer.as_ref();
        u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
    }

    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 4
    }

    /// Header length in bytes, options included (IHL * 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        (self.buffer.as_ref()[0] & 0x0F) as usize * 4
    }

    #[inline]
    pub fn dscp_ecn(&self) -> u8 {
        self.buffer.as_ref()[1]
    }

    /// Header plus payload, in bytes, as the header says.
    #[inline]
    pub fn total_len(&self) -> u16 {
        self.u16_at(TOTAL_LEN_OFFSET)
    }

    #[inline]
    pub fn ident(&self) -> u16 {
        self.u16_at(4)
    }

    /// The flags and fragment offset word.
    #[inline]
    pub fn flags(&self) -> u16 {
        self.u16_at(FLAGS_OFFSET)
    }

    #[inline]
    pub fn dont_frag(&self) -> bool {
        self.flags() & FLAG_DF != 0
    }

    /// A fragment: more fragments follow, or this one is not the first.
    #[inline]
    pub fn is_fragment(&self) -> bool {
        self.flags() & (FLAG_MF | FRAG_OFFSET_MASK) != 0
    }

    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[TTL_OFFSET]
    }

    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[PROTO_OFFSET]
    }

    #[inline]
    pub fn checksum(&self) -> u16 {
        self.u16_at(CHECKSUM_OFFSET)
    }

    /// The source address as a number (what address arithmetic wants).
    #[inline]
    pub fn src_bits(&self) -> u32 {
        self.u32_at(SRC_OFFSET)
    }

    #[inline]
    pub fn dst_bits(&self) -> u32 {
        self.u32_at(DST_OFFSET)
    }

    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.src_bits())
    }

    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.dst_bits())
    }

    /// The header, options included.
    #[inline]
    pub fn header(&self) -> &[u8] {
        &self.buffer.as_ref()[..self.header_len()]
    }

    /// True when the header (options included) sums to zero.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        fold(sum16(self.header())) == 0
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    #[inline]
    fn set_u16_at(&mut self, at: usize, v: u16) {
        self.buffer.as_mut()[at..at + 2].copy_from_slice(&v.to_be_bytes());
    }

    #[inline]
    pub fn set_total_len(&mut self, len: u16) {
        self.set_u16_at(TOTAL_LEN_OFFSET, len);
    }

    #[inline]
    pub fn set_checksum(&mut self, checksum: u16) {
        self.set_u16_at(CHECKSUM_OFFSET, checksum);
    }
}

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
        Ipv4Packet::new_unchecked(h).set_checksum(c);
        true
    }

    /// Reads the header of a whole, unfragmented IPv4 packet (options, if
    /// any, are skipped). None if the header is not plausible
    /// ([`Ipv4Packet::new_checked`]), its checksum is wrong, its total
    /// length is shorter than the header or longer than `packet` (cut
    /// short), or it is a fragment, which this repr cannot describe.
    pub fn parse(packet: &[u8]) -> Option<Ipv4Repr> {
        let p = Ipv4Packet::new_checked(packet)?;
        let total = p.total_len();
        if (total as usize) < p.header_len()
            || total as usize > packet.len()
            || p.is_fragment()
            || !p.verify_checksum()
        {
            return None;
        }
        Some(Ipv4Repr {
            src: p.src_addr(),
            dst: p.dst_addr(),
            protocol: p.protocol(),
            total_len: total,
            ident: p.ident(),
            ttl: p.ttl(),
            dont_frag: p.dont_frag(),
        })
    }
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
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert!(p.verify_checksum());
        assert_eq!((p.version(), p.header_len(), p.total_len()), (4, 20, 0x73));
        assert_eq!((p.ttl(), p.protocol(), p.checksum()), (64, 17, 0xb861));
        assert!(p.dont_frag() && !p.is_fragment());
        assert_eq!(p.src_addr(), repr().src);
        assert_eq!(p.dst_bits(), u32::from(repr().dst));
        b[8] = 1;
        assert!(!Ipv4Packet::new_unchecked(&b[..]).verify_checksum());
    }

    #[test]
    fn emit_then_parse_gives_the_repr_back() {
        for r in [
            repr(),
            Ipv4Repr {
                protocol: 50,
                total_len: 20,
                ident: 0xbeef,
                ttl: 1,
                dont_frag: false,
                ..repr()
            },
        ] {
            let mut b = vec![0u8; r.total_len as usize];
            assert!(r.emit(&mut b));
            assert_eq!(Ipv4Repr::parse(&b), Some(r));
            // Ethernet padding after the packet is no matter.
            b.extend_from_slice(&[0; 6]);
            assert_eq!(Ipv4Repr::parse(&b), Some(r));
        }
    }

    #[test]
    fn parse_refuses_truncated_and_bad_headers() {
        let r = repr();
        let mut b = vec![0u8; r.total_len as usize];
        assert!(r.emit(&mut b));
        // Cut short: in the header, and after it but before the total length.
        assert_eq!(Ipv4Repr::parse(&b[..19]), None);
        assert_eq!(Ipv4Repr::parse(&b[..b.len() - 1]), None);
        assert_eq!(Ipv4Repr::parse(&[]), None);
        let refused = |f: &dyn Fn(&mut [u8])| {
            let mut c = b.clone();
            f(&mut c);
            Ipv4Repr::parse(&c)
        };
        let resum = |c: &mut [u8]| {
            c[10..12].copy_from_slice(&[0, 0]);
            let s = fold(sum16(&c[..20]));
            c[10..12].copy_from_slice(&s.to_be_bytes());
        };
        // IHL below 5, an IHL longer than the packet, version 6.
        assert_eq!(refused(&|c| c[0] = 0x44), None);
        assert_eq!(refused(&|c| c[0] = 0x4F), None);
        assert_eq!(refused(&|c| c[0] = 0x65), None);
        // A total length below the header's, with a checksum that is right.
        assert_eq!(
            refused(&|c| {
                c[2..4].copy_from_slice(&19u16.to_be_bytes());
                resum(c);
            }),
            None
        );
        // A wrong checksum; a fragment.
        assert_eq!(refused(&|c| c[8] ^= 1), None);
        assert_eq!(
            refused(&|c| {
                c[6] |= 0x20;
                resum(c);
            }),
            None
        );
    }

    #[test]
    fn short_or_odd_headers() {
        let ihl = |b: &[u8]| Ipv4Packet::new_checked(b).map(|p| p.header_len());
        assert!(!repr().emit(&mut [0u8; 19]));
        assert_eq!(ihl(&[]), None);
        assert_eq!(ihl(&[0x44; 20]), None);
        assert_eq!(ihl(&[0x65; 20]), None);
        assert_eq!(ihl(&[0x46; 20]), None); // IHL 6 needs 24 bytes
        assert_eq!(ihl(&[0x46; 24]), Some(24));
        assert_eq!(ihl(&[0x45; 3]), None);
    }
}
