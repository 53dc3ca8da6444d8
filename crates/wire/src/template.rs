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

use crate::checksum::{fold, pseudo_header_ipv4, pseudo_header_ipv6, sum16};
use crate::encap::{Encap, IpVersion, VlanTag};
use crate::ethernet::MacAddr;
use crate::ipv4::{self, Ipv4Repr, IPPROTO_UDP};
use crate::ipv6::Ipv6Repr;
use crate::lengths::{ETH_HEADER_LEN, IPV4_HEADER_LEN, UDP_HEADER_LEN};
use crate::signature::{Signature, SIGNATURE_LEN};
use crate::udp::{self, UdpRepr};
use crate::units::FrameSize;
use std::net::IpAddr;

/// Default UDP source and destination port of test traffic: 0x4C52 ("LR") = 19538.
pub const DEFAULT_UDP_PORT: u16 = 0x4C52;

/// Offset of the IPv4 header in an untagged IPv4 test frame (the default
/// layout; [`Encap`] gives the offsets of every layout).
pub const IPV4_OFFSET: usize = ETH_HEADER_LEN;
/// Offset of the UDP header.
pub const UDP_OFFSET: usize = IPV4_OFFSET + IPV4_HEADER_LEN;
/// Offset of the UDP checksum field.
pub const UDP_CHECKSUM_OFFSET: usize = UDP_OFFSET + udp::CHECKSUM_OFFSET;
/// Offset of the signature (start of the UDP payload).
pub const SIGNATURE_OFFSET: usize = UDP_OFFSET + UDP_HEADER_LEN;
/// First byte after the signature: the filler starts here.
pub const FILLER_OFFSET: usize = SIGNATURE_OFFSET + SIGNATURE_LEN;

/// The bytes [`FrameTemplate::stamp`] writes: UDP checksum through the end
/// of the signature (the same 14 bytes in every layout).
const STAMP_LEN: usize = FILLER_OFFSET - UDP_CHECKSUM_OFFSET;

/// Who talks to whom: the addresses and ports of one test flow. Both
/// addresses are of one IP version, which makes the frames IPv4 or IPv6.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: IpAddr,
    pub dst_ip: IpAddr,
    pub src_port: u16,
    pub dst_port: u16,
    /// TTL (IPv4) or hop limit (IPv6).
    pub ttl: u8,
    /// An 802.1Q tag before the IP header.
    pub vlan: Option<VlanTag>,
}

impl FlowSpec {
    /// The frames' layout: IP version of the addresses, and the tag.
    pub fn encap(&self) -> Encap {
        Encap {
            ip: match self.src_ip {
                IpAddr::V4(_) => IpVersion::V4,
                IpAddr::V6(_) => IpVersion::V6,
            },
            vlan: self.vlan,
        }
    }
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
    /// Where the UDP checksum is: the first of the stamped bytes.
    stamp_at: usize,
}

impl FrameTemplate {
    /// Builds the template for `flow` at `frame` size. Infallible: the
    /// caller sizes frames for the flow's layout ([`FrameSize::from_frame_in`]);
    /// an IP length that does not fit the frame is cut to fit, and a frame
    /// too small for the signature is grown to hold it (the engine refuses
    /// both before a trial, see `Engine::check_frame`).
    pub fn new(flow: &FlowSpec, frame: FrameSize) -> FrameTemplate {
        let encap = flow.encap();
        let ip_off = encap.ip_offset();
        let udp_off = encap.udp_offset();
        let sig_off = encap.signature_offset();
        let filler_off = sig_off + SIGNATURE_LEN;
        let len = frame.buffer_len().max(filler_off);
        let l3 = (frame.l3() as usize)
            .min(len - ip_off)
            .max(encap.min_l3() as usize) as u16;
        let ip_end = ip_off + l3 as usize;
        let udp_len = l3 - encap.ip.header_len() as u16;
        let mut b = vec![0u8; len];

        encap.emit_l2(&mut b, flow.dst_mac, flow.src_mac, encap.ip.ethertype());
        let pseudo = match (flow.src_ip, flow.dst_ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let ip = Ipv4Repr {
                    src,
                    dst,
                    protocol: IPPROTO_UDP,
                    total_len: l3,
                    ident: 0,
                    ttl: flow.ttl,
                    dont_frag: true,
                };
                ip.emit(&mut b[ip_off..]);
                pseudo_header_ipv4(src, dst, IPPROTO_UDP, udp_len)
            }
            (src, dst) => {
                // Both IPv6 (a mixed pair is a caller bug: map the IPv4 one).
                let v6 = |a: IpAddr| match a {
                    IpAddr::V6(a) => a,
                    IpAddr::V4(a) => a.to_ipv6_mapped(),
                };
                let (src, dst) = (v6(src), v6(dst));
                let ip = Ipv6Repr {
                    src,
                    dst,
                    next_header: IPPROTO_UDP,
                    payload_len: udp_len,
                    hop_limit: flow.ttl,
                };
                ip.emit(&mut b[ip_off..]);
                pseudo_header_ipv6(&src, &dst, IPPROTO_UDP, udp_len as u32)
            }
        };
        let u = UdpRepr {
            src_port: flow.src_port,
            dst_port: flow.dst_port,
            len: udp_len,
        };
        u.emit(&mut b[udp_off..]);
        // Magic only: the other signature fields stay zero, so they add
        // nothing to the base sum.
        Signature {
            stream: 0,
            seq: 0,
            tx_ts: 0,
        }
        .emit(&mut b[sig_off..]);
        // Deterministic filler up to the end of the IP packet; padding after it stays zero.
        for (i, x) in b[filler_off..ip_end].iter_mut().enumerate() {
            *x = i as u8;
        }
        // Store the folded sum itself (the complement of a checksum), at most
        // 0xFFFF, so base + five stamped words can never overflow a u32.
        let csum_base = !fold(pseudo + sum16(&b[udp_off..ip_end])) as u32;
        FrameTemplate {
            bytes: b.into_boxed_slice(),
            csum_base,
            stamp_at: udp_off + udp::CHECKSUM_OFFSET,
        }
    }

    /// Where the signature starts in this template's frames.
    pub fn signature_offset(&self) -> usize {
        self.stamp_at + 2
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

    /// The folded ones-complement sum of the pseudo-header and the datagram
    /// with the stamped words at zero: what an in-kernel stamper adds the
    /// signature's words to (see the module doc).
    pub fn checksum_base(&self) -> u32 {
        self.csum_base
    }

    /// The template: signature magic set, stream/seq/tx_ts zero, UDP checksum zero.
    #[inline]
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
        let Some(w) = dst.get_mut(self.stamp_at..self.stamp_at + STAMP_LEN) else {
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
const _: () = assert!(crate::lengths::IPV6_HEADER_LEN == 40);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::checksums_ok;
    use crate::testutil::Rng;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn flow() -> FlowSpec {
        FlowSpec {
            src_mac: MacAddr([0x02, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([0x02, 0, 0, 0, 0, 2]),
            src_ip: Ipv4Addr::new(198, 18, 0, 1).into(),
            dst_ip: Ipv4Addr::new(198, 19, 255, 254).into(),
            src_port: DEFAULT_UDP_PORT,
            dst_port: DEFAULT_UDP_PORT,
            ttl: 64,
            vlan: None,
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
        assert!(ipv4::Ipv4Packet::new_checked(&b[14..]).is_some_and(|p| p.verify_checksum()));
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

    fn flow6(vlan: Option<VlanTag>) -> FlowSpec {
        FlowSpec {
            src_ip: "2001:2::2".parse().unwrap(),
            dst_ip: "2001:2:0:1::2".parse().unwrap(),
            vlan,
            ..flow()
        }
    }

    /// The IPv6 UDP checksum summed byte by byte from the frame alone: the
    /// pseudo-header written out as RFC 8200 8.1 draws it, then the datagram.
    fn udp6_sum_is_zero(frame: &[u8], ip_off: usize) -> bool {
        let ip = &frame[ip_off..];
        let plen = u16::from_be_bytes([ip[4], ip[5]]) as usize;
        let mut bytes: Vec<u8> = Vec::new();
        bytes.extend_from_slice(&ip[8..40]); // source and destination
        bytes.extend_from_slice(&(plen as u32).to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, ip[6]]);
        bytes.extend_from_slice(&ip[40..40 + plen]);
        if bytes.len() % 2 == 1 {
            bytes.push(0);
        }
        let mut acc: u64 = 0;
        for w in bytes.chunks(2) {
            acc += u16::from_be_bytes([w[0], w[1]]) as u64;
        }
        while acc > 0xFFFF {
            acc = (acc & 0xFFFF) + (acc >> 16);
        }
        acc == 0xFFFF
    }

    #[test]
    fn ipv6_frame_layout_and_checksums() {
        let e = flow6(None).encap();
        let size = FrameSize::from_frame_in(78, &e).unwrap();
        let t = FrameTemplate::new(&flow6(None), size);
        assert_eq!(t.len(), 74);
        assert_eq!(t.signature_offset(), 62);
        let b = t.bytes();
        assert_eq!(&b[12..14], &[0x86, 0xDD]);
        // Version 6, payload length 20 (UDP 8 + signature 12), UDP, hop limit 64.
        assert_eq!(&b[14..22], &[0x60, 0, 0, 0, 0, 20, 17, 64]);
        let src: Ipv6Addr = "2001:2::2".parse().unwrap();
        assert_eq!(&b[22..38], &src.octets());
        assert_eq!(&b[54..62], &[0x4C, 0x52, 0x4C, 0x52, 0, 20, 0, 0]);
        assert_eq!(&b[62..64], &[0x4C, 0x52]);
        // A 1518-byte IPv6 frame: 1500-byte packet, UDP payload 1452.
        let big = FrameSize::from_frame_in(1518, &e).unwrap();
        assert_eq!((big.l3(), big.l4_payload()), (1500, 1452));
        assert_eq!(FrameSize::from_udp_payload_in(1452, &e).unwrap(), big);
        let mut rng = Rng::new(6);
        for size in [size, big, FrameSize::from_l3_in(61, &e).unwrap()] {
            let t = FrameTemplate::new(&flow6(None), size);
            let mut buf = vec![0u8; t.len()];
            for _ in 0..2000 {
                let sig = Signature {
                    stream: rng.next() as u16,
                    seq: rng.next() as u32,
                    tx_ts: rng.next() as u32,
                };
                t.write(&mut buf, sig);
                assert!(udp6_sum_is_zero(&buf, 14), "size {size}");
                assert!(checksums_ok(&buf));
                assert_ne!(&buf[60..62], &[0, 0], "IPv6 needs a UDP checksum");
                assert_eq!(Signature::parse(&buf[62..]), Some(sig));
            }
        }
    }

    #[test]
    fn too_small_ipv6_frames_are_refused_with_the_smallest_size() {
        let e = flow6(None).encap();
        let err = FrameSize::from_frame_in(64, &e).unwrap_err().to_string();
        assert!(err.contains("smallest is 78 bytes"), "{err}");
        assert!(err.contains("--frame-size 78"), "{err}");
        assert!(FrameSize::from_frame_in(77, &e).is_err());
        let tagged = flow6(Some(VlanTag { id: 1, pcp: 0 })).encap();
        assert!(FrameSize::from_frame_in(81, &tagged)
            .unwrap_err()
            .to_string()
            .contains("82"));
        assert!(FrameSize::from_l3_in(59, &e).is_err());
        assert!(FrameSize::from_udp_payload_in(11, &e).is_err());
    }

    #[test]
    fn vlan_tag_shifts_every_offset() {
        let tag = VlanTag { id: 100, pcp: 5 };
        // IPv4: a 64-byte tagged frame still carries the signature.
        let mut f4 = flow();
        f4.vlan = Some(tag);
        let size = FrameSize::from_frame_in(64, &f4.encap()).unwrap();
        assert_eq!(size.l3(), 42);
        let t = FrameTemplate::new(&f4, size);
        assert_eq!((t.len(), t.signature_offset()), (60, 46));
        let b = t.bytes();
        assert_eq!(&b[12..20], &[0x81, 0x00, 0xA0, 0x64, 0x08, 0x00, 0x45, 0]);
        assert_eq!(&b[20..22], &[0, 42]);
        assert!(ipv4::Ipv4Packet::new_checked(&b[18..]).is_some_and(|p| p.verify_checksum()));
        let mut buf = vec![0u8; t.len()];
        let sig = Signature {
            stream: 7,
            seq: 8,
            tx_ts: 9,
        };
        t.write(&mut buf, sig);
        assert!(checksums_ok(&buf));
        assert_eq!(Signature::parse(&buf[46..]), Some(sig));
        // IPv6 tagged: signature at 66.
        let f6 = flow6(Some(tag));
        let t = FrameTemplate::new(&f6, FrameSize::from_frame_in(128, &f6.encap()).unwrap());
        assert_eq!(t.signature_offset(), 66);
        t.write(&mut buf, sig);
        let mut buf = vec![0u8; t.len()];
        t.write(&mut buf, sig);
        assert!(udp6_sum_is_zero(&buf, 18));
        assert_eq!(Signature::parse(&buf[66..]), Some(sig));
    }
}
