//! The generator's hot path: a prebuilt test frame that only needs its
//! signature stamped and its UDP checksum fixed before it is sent.
//!
//! Everything that does not change between frames — headers, the IPv4
//! header checksum, the filler, the padding, and the checksum partial sum of
//! the constant parts of the UDP datagram — is computed once in
//! [`FrameTemplate::new`]. Per frame, [`FrameTemplate::write`] is one
//! `copy_from_slice` plus stores of 14 bytes (checksum + stream + seq +
//! tx_ts).
//!
//! The UDP checksum is updated incrementally in the RFC 1624 sense: instead
//! of applying `HC' = ~(~HC + ~m + m')` word by word against the previous
//! frame's values, the template keeps `~HC` of the datagram with the five
//! stamped words at zero (where `~m = 0xFFFF ≡ 0`), so a frame's checksum is
//! `fold(base + stream + seq_hi + seq_lo + ts_hi + ts_lo)`. That is the same
//! arithmetic, needs no read of the old frame, and is correct whatever the
//! buffer held before.

use crate::checksum::{fold, pseudo_header_ipv4, sum16};
use crate::ethernet::{self, MacAddr, ETHERTYPE_IPV4};
use crate::ipv4::{self, Ipv4Repr, IPPROTO_UDP};
use crate::signature::{Signature, SIGNATURE_LEN};
use crate::udp::{self, UdpRepr};
use crate::units::{FrameSize, ETH_HEADER_LEN, IPV4_HEADER_LEN, UDP_HEADER_LEN};
use std::net::Ipv4Addr;

/// Default UDP source and destination port of test traffic: 0x4C52 ("LR") = 19538.
pub const DEFAULT_UDP_PORT: u16 = 0x4C52;

/// Offset of the IPv4 header in an (untagged) test frame.
pub const IPV4_OFFSET: usize = ETH_HEADER_LEN;
/// Offset of the UDP header.
pub const UDP_OFFSET: usize = IPV4_OFFSET + IPV4_HEADER_LEN;
/// Offset of the UDP checksum field.
pub const UDP_CHECKSUM_OFFSET: usize = UDP_OFFSET + udp::CHECKSUM_OFFSET;
/// Offset of the signature (start of the UDP payload).
pub const SIGNATURE_OFFSET: usize = UDP_OFFSET + UDP_HEADER_LEN;
/// First byte after the signature: the filler starts here.
pub const FILLER_OFFSET: usize = SIGNATURE_OFFSET + SIGNATURE_LEN;

/// The bytes [`FrameTemplate::stamp`] writes: UDP checksum through the end of the signature.
const STAMP_LEN: usize = FILLER_OFFSET - UDP_CHECKSUM_OFFSET;

/// Who talks to whom: the addresses and ports of one test flow.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
    pub ttl: u8,
}

/// A test frame with everything but the signature in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrameTemplate {
    /// The frame without FCS: headers, signature with only the magic set,
    /// filler, padding zeros.
    bytes: Box<[u8]>,
    /// Ones-complement partial sum (folded to 16 bits) of the pseudo-header and
    /// the UDP datagram with checksum, stream, seq and tx_ts all zero.
    csum_base: u32,
}

impl FrameTemplate {
    /// Builds the template for `flow` at `frame` size. Infallible: a
    /// [`FrameSize`] guarantees an L3 length of at least 40 bytes, enough for
    /// IPv4 + UDP + signature.
    pub fn new(flow: &FlowSpec, frame: FrameSize) -> FrameTemplate {
        let len = frame.buffer_len();
        let l3 = frame.l3();
        let udp_len = l3 - IPV4_HEADER_LEN as u16;
        let ip_end = IPV4_OFFSET + l3 as usize;
        // FrameSize invariants: 40 <= l3 and 14 + l3 <= buffer_len.
        debug_assert!(ip_end <= len && FILLER_OFFSET <= ip_end);
        let mut b = vec![0u8; len.max(FILLER_OFFSET)];

        ethernet::emit_header(&mut b, flow.dst_mac, flow.src_mac, ETHERTYPE_IPV4);
        let ip = Ipv4Repr {
            src: flow.src_ip,
            dst: flow.dst_ip,
            protocol: IPPROTO_UDP,
            total_len: l3,
            ident: 0,
            ttl: flow.ttl,
            dont_frag: true,
        };
        ip.emit(&mut b[IPV4_OFFSET..]);
        let u = UdpRepr {
            src_port: flow.src_port,
            dst_port: flow.dst_port,
            len: udp_len,
        };
        u.emit(&mut b[UDP_OFFSET..]);
        // Magic only: the other signature fields stay zero, so they add
        // nothing to the base sum.
        Signature {
            stream: 0,
            seq: 0,
            tx_ts: 0,
        }
        .emit(&mut b[SIGNATURE_OFFSET..]);
        // Deterministic filler up to the end of the IP packet; padding after it stays zero.
        let filler_end = ip_end.min(b.len());
        for (i, x) in b[FILLER_OFFSET..filler_end].iter_mut().enumerate() {
            *x = i as u8;
        }
        let datagram_end = (UDP_OFFSET + udp_len as usize).min(b.len());
        // Store the folded sum itself (the complement of a checksum), at most
        // 0xFFFF, so base + five stamped words can never overflow a u32.
        let pseudo = pseudo_header_ipv4(flow.src_ip, flow.dst_ip, IPPROTO_UDP, udp_len);
        let csum_base = !fold(pseudo + sum16(&b[UDP_OFFSET..datagram_end])) as u32;
        let t = FrameTemplate {
            bytes: b.into_boxed_slice(),
            csum_base,
        };
        debug_assert!(t.bytes.len() == len);
        t
    }

    /// Bytes per frame handed to the NIC: the frame size minus the FCS the
    /// NIC appends, padding included.
    #[inline]
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never true (a frame is at least 60 bytes); here because clippy expects it beside `len`.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The template: signature magic set, stream/seq/tx_ts zero, UDP checksum zero.
    #[inline]
    /// The folded ones-complement sum of the pseudo-header and the datagram
    /// with the stamped words at zero: what an in-kernel stamper adds the
    /// signature's words to (see the module doc).
    pub fn checksum_base(&self) -> u32 {
        self.csum_base
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Copies the template into `dst[..len]` and stamps the signature; the
    /// UDP checksum is fixed incrementally so it is correct for every frame.
    /// Returns the length written, or 0 (writing nothing) when `dst` is
    /// shorter than [`len`](Self::len).
    #[inline]
    pub fn write(&self, dst: &mut [u8], sig: Signature) -> usize {
        let len = self.bytes.len();
        let Some(out) = dst.get_mut(..len) else {
            return 0;
        };
        out.copy_from_slice(&self.bytes);
        self.stamp(out, sig);
        len
    }

    /// Stamps the signature and UDP checksum into a buffer that already holds
    /// this template (from an earlier [`write`](Self::write) or a copy of
    /// [`bytes`](Self::bytes)); cheaper than `write` when buffers are reused.
    /// Does nothing if `dst` is too short to hold a signature.
    #[inline]
    pub fn stamp(&self, dst: &mut [u8], sig: Signature) {
        let Some(w) = dst.get_mut(UDP_CHECKSUM_OFFSET..FILLER_OFFSET) else {
            return;
        };
        let Ok(w) = <&mut [u8; STAMP_LEN]>::try_from(w) else {
            return;
        };
        let csum = udp::wire_checksum(fold(self.csum_base + sig.word_sum()));
        w[0..2].copy_from_slice(&csum.to_be_bytes());
        // w[2..4] is the magic, already in the template.
        w[4..6].copy_from_slice(&sig.stream.to_be_bytes());
        w[6..10].copy_from_slice(&sig.seq.to_be_bytes());
        w[10..14].copy_from_slice(&sig.tx_ts.to_be_bytes());
    }
}

// Keep the offsets honest against the ipv4 module's.
const _: () = assert!(ipv4::CHECKSUM_OFFSET + IPV4_OFFSET == 24);
const _: () = assert!(SIGNATURE_OFFSET == 42 && FILLER_OFFSET == 54 && STAMP_LEN == 14);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::checksums_ok;
    use crate::testutil::Rng;

    fn flow() -> FlowSpec {
        FlowSpec {
            src_mac: MacAddr([0x02, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([0x02, 0, 0, 0, 0, 2]),
            src_ip: Ipv4Addr::new(198, 18, 0, 1),
            dst_ip: Ipv4Addr::new(198, 19, 255, 254),
            src_port: DEFAULT_UDP_PORT,
            dst_port: DEFAULT_UDP_PORT,
            ttl: 64,
        }
    }

    fn sizes() -> Vec<FrameSize> {
        let mut v: Vec<FrameSize> = [64, 65, 127, 128, 1518, 9018]
            .iter()
            .map(|&f| FrameSize::from_frame(f).unwrap())
            .collect();
        v.extend(
            [40, 41, 45, 46, 47, 9000]
                .iter()
                .map(|&l| FrameSize::from_l3(l).unwrap()),
        );
        v
    }

    /// Full recomputation, independent of the template's arithmetic.
    fn verify(frame: &[u8], size: FrameSize) {
        let ip = &frame[14..14 + size.l3() as usize];
        assert_eq!(fold(sum16(&ip[..20])), 0, "IPv4 header checksum");
        let udp_d = &ip[20..];
        let pseudo = pseudo_header_ipv4(
            Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]),
            Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]),
            17,
            udp_d.len() as u16,
        );
        assert_ne!(&udp_d[6..8], &[0, 0], "UDP checksum must be present");
        assert_eq!(fold(pseudo + sum16(udp_d)), 0, "UDP checksum");
        assert!(checksums_ok(frame));
    }

    #[test]
    fn layout_of_a_64_byte_frame() {
        let t = FrameTemplate::new(&flow(), FrameSize::from_frame(64).unwrap());
        let b = t.bytes();
        assert_eq!(t.len(), 60);
        assert!(!t.is_empty());
        assert_eq!(&b[0..6], &[2, 0, 0, 0, 0, 2]);
        assert_eq!(&b[6..12], &[2, 0, 0, 0, 0, 1]);
        assert_eq!(&b[12..14], &[0x08, 0x00]);
        assert_eq!(&b[14..24], &[0x45, 0, 0, 46, 0, 0, 0x40, 0, 64, 17]);
        assert_eq!(&b[26..34], &[198, 18, 0, 1, 198, 19, 255, 254]);
        assert_eq!(&b[34..42], &[0x4C, 0x52, 0x4C, 0x52, 0, 26, 0, 0]);
        assert_eq!(&b[42..54], &[0x4C, 0x52, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[54..60], &[0, 1, 2, 3, 4, 5]);
        assert!(ipv4::header_checksum_ok(&b[14..]));
    }

    #[test]
    fn short_l3_is_padded_with_zeros() {
        let size = FrameSize::from_l3(41).unwrap();
        let t = FrameTemplate::new(&flow(), size);
        assert_eq!(t.len(), 60);
        let b = t.bytes();
        assert_eq!(&b[16..18], &[0, 41]);
        assert_eq!(&b[38..40], &[0, 21]);
        assert_eq!(b[54], 0); // the single filler byte
        assert!(b[55..].iter().all(|&x| x == 0));
        let t = FrameTemplate::new(&flow(), FrameSize::from_l3(45).unwrap());
        assert_eq!(&t.bytes()[54..59], &[0, 1, 2, 3, 4]);
        assert_eq!(t.bytes()[59], 0);
    }

    #[test]
    fn filler_repeats_every_256_bytes() {
        let t = FrameTemplate::new(&flow(), FrameSize::from_frame(1518).unwrap());
        let f = &t.bytes()[FILLER_OFFSET..];
        assert_eq!(f.len(), 1514 - 54);
        for (i, &x) in f.iter().enumerate() {
            assert_eq!(x, i as u8);
        }
    }

    #[test]
    fn stamped_frames_verify_at_every_size() {
        let mut rng = Rng::new(42);
        let mut buf = vec![0u8; 9100];
        for size in sizes() {
            let t = FrameTemplate::new(&flow(), size);
            assert_eq!(t.len(), size.buffer_len());
            let mut reused = t.bytes().to_vec();
            for i in 0..2000 {
                let sig = match i {
                    0 => Signature {
                        stream: 0,
                        seq: 0,
                        tx_ts: 0,
                    },
                    1 => Signature {
                        stream: u16::MAX,
                        seq: u32::MAX,
                        tx_ts: u32::MAX,
                    },
                    _ => Signature {
                        stream: rng.next() as u16,
                        seq: rng.next() as u32,
                        tx_ts: rng.next() as u32,
                    },
                };
                assert_eq!(t.write(&mut buf, sig), t.len());
                let frame = &buf[..t.len()];
                verify(frame, size);
                assert_eq!(Signature::parse(&frame[SIGNATURE_OFFSET..]), Some(sig));
                // Stamping in place over the previous frame gives the same bytes.
                t.stamp(&mut reused, sig);
                assert_eq!(&reused[..], frame);
                // And everything outside the stamped bytes is the template.
                assert_eq!(
                    &frame[..UDP_CHECKSUM_OFFSET],
                    &t.bytes()[..UDP_CHECKSUM_OFFSET]
                );
                assert_eq!(&frame[FILLER_OFFSET..], &t.bytes()[FILLER_OFFSET..]);
            }
        }
    }

    #[test]
    fn a_computed_zero_checksum_is_sent_as_all_ones() {
        for size in sizes() {
            let t = FrameTemplate::new(&flow(), size);
            // Pick the stream so that base + stream folds to 0xFFFF: the
            // complement, i.e. the computed checksum, is then 0.
            let base = t.csum_base as u16; // folded sum of the constant parts
            let sig = Signature {
                stream: !base,
                seq: 0,
                tx_ts: 0,
            };
            let mut buf = vec![0u8; t.len()];
            t.write(&mut buf, sig);
            assert_eq!(
                &buf[UDP_CHECKSUM_OFFSET..UDP_CHECKSUM_OFFSET + 2],
                &[0xFF, 0xFF]
            );
            verify(&buf, size);
            // Same result spread across seq and tx_ts words.
            let s = !base;
            let sig = Signature {
                stream: 0,
                seq: (s as u32) >> 1,
                tx_ts: (s - (s >> 1)) as u32,
            };
            t.write(&mut buf, sig);
            assert_eq!(
                &buf[UDP_CHECKSUM_OFFSET..UDP_CHECKSUM_OFFSET + 2],
                &[0xFF, 0xFF]
            );
            verify(&buf, size);
        }
    }

    #[test]
    fn short_buffers_are_refused_without_panic() {
        let t = FrameTemplate::new(&flow(), FrameSize::from_frame(128).unwrap());
        let sig = Signature {
            stream: 1,
            seq: 2,
            tx_ts: 3,
        };
        let mut small = vec![0u8; t.len() - 1];
        assert_eq!(t.write(&mut small, sig), 0);
        assert!(small.iter().all(|&x| x == 0));
        for n in [0, 1, 41, 53] {
            let mut b = vec![0u8; n];
            t.stamp(&mut b, sig);
            assert!(b.iter().all(|&x| x == 0));
        }
        // A longer buffer is written at its start only.
        let mut big = vec![0xEEu8; t.len() + 10];
        assert_eq!(t.write(&mut big, sig), t.len());
        assert!(big[t.len()..].iter().all(|&x| x == 0xEE));
    }

    #[test]
    fn ttl_and_ports_come_from_the_flow() {
        let mut f = flow();
        f.ttl = 7;
        f.src_port = 1000;
        f.dst_port = 2000;
        let t = FrameTemplate::new(&f, FrameSize::from_frame(64).unwrap());
        assert_eq!(t.bytes()[22], 7);
        assert_eq!(&t.bytes()[34..38], &[0x03, 0xE8, 0x07, 0xD0]);
        let mut buf = [0u8; 60];
        t.write(
            &mut buf,
            Signature {
                stream: 9,
                seq: 9,
                tx_ts: 9,
            },
        );
        verify(&buf, FrameSize::from_frame(64).unwrap());
    }
}
