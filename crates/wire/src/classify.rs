//! What the receiver does with each frame: is it one of ours (and which),
//! an ARP or Neighbor Discovery packet to answer or learn from, or
//! something to ignore. Test frames are IPv4 or IPv6 (RFC 5180), each
//! optionally behind one 802.1Q tag.
//!
//! This runs once per received frame at line rate, so it reads only the
//! fields it needs and never verifies checksums; [`checksums_ok`] is there
//! for tests and diagnostics. It must also survive anything the wire
//! delivers, so every read is checked: any input gives an answer, never a panic.

use crate::arp::ArpRepr;
use crate::checksum::{fold, pseudo_header_ipv6, sum16};
use crate::encap::ETHERTYPE_IPV6;
use crate::ethernet::{read_u16, EthernetFrame, ETHERTYPE_ARP, ETHERTYPE_IPV4};
use crate::ipv4::{Ipv4Packet, IPPROTO_UDP};
use crate::ipv6::{self, IPV6_HEADER_LEN};
use crate::lengths::UDP_HEADER_LEN;
use crate::ndp::NdpRepr;
use crate::signature::{Signature, SIGNATURE_LEN};
use crate::udp;
use std::net::Ipv6Addr;

/// A `test_udp_port` that takes test frames to any UDP port (for trials
/// whose destination port varies per frame); the magic and the stream id
/// still have to match.
pub const ANY_PORT: u16 = 0;

/// The receiver's verdict on one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Received {
    /// A test frame carrying this signature.
    Test { sig: Signature },
    /// An Ethernet/IPv4 ARP packet.
    Arp(ArpRepr),
    /// An IPv6 Neighbor Solicitation or Advertisement.
    Ndp(NdpRepr),
    /// Anything else.
    Other,
}

/// Classifies a received frame (without FCS). Never panics on any input.
///
/// A test frame is IPv4 (any IHL >= 5, not a fragment) or IPv6 (next
/// header UDP, no extension headers), optionally behind one 802.1Q tag,
/// UDP to `test_udp_port` (or any port: [`ANY_PORT`]), with the whole signature inside the IP length
/// and the UDP length, and the right magic.
///
/// `frame` may be a truncated capture (receivers copy only the first bytes
/// of each frame): only the signature itself must lie inside it.
#[inline]
pub fn classify(frame: &[u8], test_udp_port: u16) -> Received {
    let Some((ethertype, payload)) = l3_payload(frame) else {
        return Received::Other;
    };
    match ethertype {
        ETHERTYPE_IPV4 => match test_signature(payload, test_udp_port) {
            Some(sig) => Received::Test { sig },
            None => Received::Other,
        },
        ETHERTYPE_IPV6 => match test_signature_v6(payload, test_udp_port) {
            Some(sig) => Received::Test { sig },
            None => {
                // l3_payload saw the whole header.
                let src = EthernetFrame::new_unchecked(frame).src_addr();
                match NdpRepr::parse(payload, src) {
                    Some(n) => Received::Ndp(n),
                    None => Received::Other,
                }
            }
        },
        ETHERTYPE_ARP => match ArpRepr::parse(payload) {
            Some(a) => Received::Arp(a),
            None => Received::Other,
        },
        _ => Received::Other,
    }
}

/// The EtherType and what follows it, looking through one VLAN tag.
#[inline]
fn l3_payload(frame: &[u8]) -> Option<(u16, &[u8])> {
    let (et, at) = EthernetFrame::new_checked(frame)?.network()?;
    Some((et, frame.get(at..)?))
}

/// Header length and total length of an IPv4 packet that is UDP and not a
/// fragment (a fragment's payload has no signature to trust).
#[inline]
fn unfragmented_udp(packet: &[u8]) -> Option<(usize, usize)> {
    let p = Ipv4Packet::new_checked(packet)?;
    if p.protocol() != IPPROTO_UDP || p.is_fragment() {
        return None;
    }
    Some((p.header_len(), p.total_len() as usize))
}

/// The IP header length and the UDP datagram of an unfragmented IPv4/UDP
/// packet, bounded by both the total length and the UDP length fields.
#[inline]
fn udp_datagram(packet: &[u8]) -> Option<(usize, &[u8])> {
    let (ihl, total) = unfragmented_udp(packet)?;
    // Padding may follow the packet in the frame, so the total length, not
    // the frame, says where it ends; a frame shorter than that is truncated.
    let ip_payload = packet.get(ihl..total)?;
    let udp_len = read_u16(ip_payload, udp::LEN_OFFSET)? as usize;
    if udp_len < UDP_HEADER_LEN {
        return None;
    }
    Some((ihl, ip_payload.get(..udp_len)?))
}

/// The signature of a test packet. Bounds come from the length fields; the
/// bytes read must be in `packet`, which may be cut short after them.
#[inline]
fn test_signature(packet: &[u8], port: u16) -> Option<Signature> {
    let (ihl, total) = unfragmented_udp(packet)?;
    let udp_len = read_u16(packet, ihl + udp::LEN_OFFSET)? as usize;
    if udp_len < UDP_HEADER_LEN + SIGNATURE_LEN || ihl + udp_len > total {
        return None;
    }
    if port != ANY_PORT && read_u16(packet, ihl + udp::DST_PORT_OFFSET)? != port {
        return None;
    }
    let at = ihl + UDP_HEADER_LEN;
    Signature::parse(packet.get(at..at + SIGNATURE_LEN)?)
}

/// The signature of an IPv6 test packet: UDP straight after the fixed
/// header, the signature inside the payload length and the UDP length.
#[inline]
fn test_signature_v6(packet: &[u8], port: u16) -> Option<Signature> {
    if *packet.first()? >> 4 != 6 || *packet.get(ipv6::NEXT_HEADER_OFFSET)? != IPPROTO_UDP {
        return None;
    }
    let payload = read_u16(packet, ipv6::PAYLOAD_LEN_OFFSET)? as usize;
    let udp_len = read_u16(packet, IPV6_HEADER_LEN + udp::LEN_OFFSET)? as usize;
    if udp_len < UDP_HEADER_LEN + SIGNATURE_LEN || udp_len > payload {
        return None;
    }
    if port != ANY_PORT && read_u16(packet, IPV6_HEADER_LEN + udp::DST_PORT_OFFSET)? != port {
        return None;
    }
    let at = IPV6_HEADER_LEN + UDP_HEADER_LEN;
    Signature::parse(packet.get(at..at + SIGNATURE_LEN)?)
}

/// True when an IPv6/UDP packet's UDP checksum verifies; in IPv6 it is
/// mandatory, so a zero checksum fails.
fn checksums_ok_v6(packet: &[u8]) -> bool {
    let Some(ip) = ipv6::Ipv6Repr::parse(packet) else {
        return false;
    };
    if ip.next_header != IPPROTO_UDP {
        return false;
    }
    let Some(d) = packet.get(IPV6_HEADER_LEN..IPV6_HEADER_LEN + ip.payload_len as usize) else {
        return false;
    };
    let Some(udp_len) = read_u16(d, udp::LEN_OFFSET) else {
        return false;
    };
    let Some(d) = d.get(..udp_len as usize) else {
        return false;
    };
    if read_u16(d, udp::CHECKSUM_OFFSET) == Some(0) {
        return false;
    }
    let (src, dst): (Ipv6Addr, Ipv6Addr) = (ip.src, ip.dst);
    fold(pseudo_header_ipv6(&src, &dst, IPPROTO_UDP, d.len() as u32) + sum16(d)) == 0
}

/// True when `frame` is an IPv6/UDP frame whose UDP checksum verifies, or
/// an IPv4/UDP frame (both optionally VLAN-tagged) whose IPv4
/// header checksum and UDP checksum both verify; a zero UDP checksum
/// (absent) counts as valid, as IPv4 allows. False for anything else. Not
/// for the hot path.
pub fn checksums_ok(frame: &[u8]) -> bool {
    let packet = match l3_payload(frame) {
        Some((ETHERTYPE_IPV4, packet)) => packet,
        Some((ETHERTYPE_IPV6, packet)) => return checksums_ok_v6(packet),
        _ => return false,
    };
    let Some((_, d)) = udp_datagram(packet) else {
        return false;
    };
    // udp_datagram saw a plausible header.
    let ip = Ipv4Packet::new_unchecked(packet);
    ip.verify_checksum() && udp::checksum_ok(ip.src_addr(), ip.dst_addr(), d)
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    #[test]
    fn any_port_takes_test_frames_to_every_port() {
        let flow = crate::FlowSpec {
            src_mac: crate::MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: crate::MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: Ipv4Addr::new(198, 18, 0, 2).into(),
            dst_ip: Ipv4Addr::new(198, 19, 0, 2).into(),
            src_port: 9,
            dst_port: 4321,
            ttl: 64,
            vlan: None,
        };
        let t = crate::FrameTemplate::new(&flow, crate::FrameSize::from_frame(64).unwrap());
        let sig = Signature {
            stream: 3,
            seq: 7,
            tx_ts: 11,
        };
        let mut buf = [0u8; 64];
        let len = t.write(&mut buf, sig);
        assert_eq!(classify(&buf[..len], 4321), Received::Test { sig });
        assert_eq!(classify(&buf[..len], 1234), Received::Other);
        assert_eq!(classify(&buf[..len], ANY_PORT), Received::Test { sig });
    }

    use super::*;
    use crate::arp::{arp_frame, ArpOp};
    use crate::ethernet::MacAddr;
    use crate::template::{FlowSpec, FrameTemplate, DEFAULT_UDP_PORT};
    use crate::testutil::Rng;
    use crate::units::FrameSize;

    const PORT: u16 = DEFAULT_UDP_PORT;

    fn flow() -> FlowSpec {
        FlowSpec {
            src_mac: MacAddr([0x02, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([0x02, 0, 0, 0, 0, 2]),
            src_ip: Ipv4Addr::new(198, 18, 0, 1).into(),
            dst_ip: Ipv4Addr::new(198, 19, 0, 1).into(),
            src_port: PORT,
            dst_port: PORT,
            ttl: 64,
            vlan: None,
        }
    }

    #[test]
    fn truncated_captures_of_test_frames_are_recognised() {
        let sig = Signature {
            stream: 3,
            seq: 99,
            tx_ts: 7,
        };
        let f = frame(FrameSize::from_frame(1518).unwrap(), sig);
        assert_eq!(classify(&f[..192], PORT), Received::Test { sig });
        // Cut inside the signature: not recognisable.
        assert_eq!(classify(&f[..50], PORT), Received::Other);
    }

    fn frame(size: FrameSize, sig: Signature) -> Vec<u8> {
        let t = FrameTemplate::new(&flow(), size);
        let mut b = vec![0u8; t.len()];
        t.write(&mut b, sig);
        b
    }

    /// Inserts an 802.1Q tag after the MAC addresses.
    fn tagged(f: &[u8]) -> Vec<u8> {
        let mut v = f[..12].to_vec();
        v.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        v.extend_from_slice(&f[12..]);
        v
    }

    /// Rewrites the IPv4 header checksum after a test edits the header.
    fn fix_ip_csum(f: &mut [u8], ip_off: usize) {
        let ihl = (f[ip_off] & 0xF) as usize * 4;
        f[ip_off + 10..ip_off + 12].copy_from_slice(&[0, 0]);
        let c = fold(sum16(&f[ip_off..ip_off + ihl]));
        f[ip_off + 10..ip_off + 12].copy_from_slice(&c.to_be_bytes());
    }

    const SIG: Signature = Signature {
        stream: 3,
        seq: 0xDEAD_BEEF,
        tx_ts: 12345,
    };

    #[test]
    fn test_frames_are_recognised() {
        for s in [
            FrameSize::from_frame(64).unwrap(),
            FrameSize::from_l3(40).unwrap(),
        ] {
            let f = frame(s, SIG);
            assert_eq!(classify(&f, PORT), Received::Test { sig: SIG });
            assert!(checksums_ok(&f));
            let t = tagged(&f);
            assert_eq!(classify(&t, PORT), Received::Test { sig: SIG });
            assert!(checksums_ok(&t));
            assert_eq!(classify(&f, PORT + 1), Received::Other);
        }
    }

    #[test]
    fn ip_options_are_skipped() {
        let f = frame(FrameSize::from_frame(128).unwrap(), SIG);
        // Insert 4 bytes of options (NOP x4) and grow the total length.
        let mut g = f[..34].to_vec();
        g.extend_from_slice(&[1, 1, 1, 1]);
        g.extend_from_slice(&f[34..]);
        g[14] = 0x46;
        let tl = u16::from_be_bytes([g[16], g[17]]) + 4;
        g[16..18].copy_from_slice(&tl.to_be_bytes());
        fix_ip_csum(&mut g, 14);
        assert_eq!(classify(&g, PORT), Received::Test { sig: SIG });
        assert!(checksums_ok(&g));
    }

    #[test]
    fn fragments_and_non_udp_are_other() {
        let f = frame(FrameSize::from_frame(64).unwrap(), SIG);
        let edits: [(usize, u8); 6] = [
            (20, 0x60), // DF + MF
            (21, 0x01), // offset 1 (with DF)
            (23, 6),    // TCP
            (14, 0x44), // IHL 4
            (14, 0x65), // version 6
            (12, 0x86), // EtherType 0x8600
        ];
        for (i, v) in edits {
            let mut g = f.clone();
            g[i] = v;
            assert_eq!(classify(&g, PORT), Received::Other, "byte {i} = {v:#x}");
        }
        // A wrong magic.
        let mut g = f.clone();
        g[42] = b'X';
        assert_eq!(classify(&g, PORT), Received::Other);
    }

    #[test]
    fn signature_must_fit_in_the_packet_and_frame() {
        let f = frame(FrameSize::from_l3(40).unwrap(), SIG);
        // Total length 39: the signature runs past the IP packet (into padding).
        let mut g = f.clone();
        g[17] = 39;
        fix_ip_csum(&mut g, 14);
        assert_eq!(classify(&g, PORT), Received::Other);
        // UDP length 19.
        let mut g = f.clone();
        g[39] = 19;
        assert_eq!(classify(&g, PORT), Received::Other);
        // UDP length below its own header.
        let mut g = f.clone();
        g[39] = 7;
        assert_eq!(classify(&g, PORT), Received::Other);
        // Truncated frames.
        for n in 0..54 {
            assert_eq!(classify(&f[..n], PORT), Received::Other, "len {n}");
            assert!(!checksums_ok(&f[..n]));
        }
        assert_eq!(classify(&f[..54], PORT), Received::Test { sig: SIG });
    }

    #[test]
    fn arp_is_recognised() {
        let r = crate::arp::ArpRepr::request(
            MacAddr([2, 0, 0, 0, 0, 9]),
            Ipv4Addr::new(10, 0, 0, 9),
            Ipv4Addr::new(10, 0, 0, 1),
        );
        let f = arp_frame(&r, r.sender_mac, MacAddr::BROADCAST);
        assert_eq!(classify(&f, PORT), Received::Arp(r));
        assert_eq!(classify(&tagged(&f), PORT), Received::Arp(r));
        assert!(matches!(classify(&f, PORT), Received::Arp(a) if a.op == ArpOp::Request));
        assert!(!checksums_ok(&f));
    }

    #[test]
    fn checksums_ok_catches_corruption() {
        let f = frame(FrameSize::from_frame(256).unwrap(), SIG);
        assert!(checksums_ok(&f));
        let mut g = f.clone();
        g[100] ^= 0x10;
        assert!(!checksums_ok(&g));
        assert_eq!(classify(&g, PORT), Received::Test { sig: SIG }); // no checksum in the hot path
        let mut g = f.clone();
        g[22] ^= 1; // TTL
        assert!(!checksums_ok(&g));
        let mut g = f.clone();
        g[40..42].copy_from_slice(&[0, 0]); // no UDP checksum
        assert!(checksums_ok(&g));
    }

    #[test]
    fn never_panics_on_random_or_mutated_input() {
        let mut rng = Rng::new(7);
        let mut buf = [0u8; 200];
        let mut seen_test = 0;
        for _ in 0..100_000 {
            let n = (rng.next() % 200) as usize;
            for b in &mut buf[..n] {
                *b = rng.next() as u8;
            }
            // Nudge a quarter of them towards plausible headers so the deeper
            // branches get random input too.
            if n >= 14 && rng.next() & 3 == 0 {
                buf[12..14].copy_from_slice(&[0x08, 0x00]);
                if n > 24 {
                    buf[14] = 0x40 | (rng.next() as u8 & 0x0F);
                    buf[23] = 17;
                }
            }
            let _ = classify(&buf[..n], PORT);
            let _ = checksums_ok(&buf[..n]);
        }
        let bases = [
            frame(FrameSize::from_frame(64).unwrap(), SIG),
            frame(FrameSize::from_l3(40).unwrap(), SIG),
            frame(FrameSize::from_frame(128).unwrap(), SIG),
            tagged(&frame(FrameSize::from_frame(64).unwrap(), SIG)),
            arp_frame(
                &crate::arp::ArpRepr::request(
                    MacAddr::ZERO,
                    Ipv4Addr::LOCALHOST,
                    Ipv4Addr::LOCALHOST,
                ),
                MacAddr::ZERO,
                MacAddr::BROADCAST,
            )
            .to_vec(),
        ];
        for i in 0..100_000 {
            let mut g = bases[i % bases.len()].clone();
            for _ in 0..1 + rng.next() % 4 {
                let at = (rng.next() as usize) % g.len();
                g[at] = rng.next() as u8;
            }
            let n = if rng.next() % 3 == 1 {
                (rng.next() as usize) % (g.len() + 1)
            } else {
                g.len()
            };
            if let Received::Test { .. } = classify(&g[..n], PORT) {
                seen_test += 1;
            }
            let _ = checksums_ok(&g[..n]);
        }
        // Mutations mostly hit the filler, so plenty should still classify.
        assert!(seen_test > 1000);
    }

    #[test]
    fn ipv6_and_tagged_test_frames_are_recognised() {
        use crate::encap::VlanTag;
        for vlan in [None, Some(VlanTag { id: 100, pcp: 0 })] {
            let f6 = FlowSpec {
                src_ip: "2001:2::2".parse().unwrap(),
                dst_ip: "2001:2:0:1::2".parse().unwrap(),
                vlan,
                ..flow()
            };
            for size in [78, 82, 1518] {
                let Ok(size) = FrameSize::from_frame_in(size, &f6.encap()) else {
                    continue;
                };
                let t = FrameTemplate::new(&f6, size);
                let mut b = vec![0u8; t.len()];
                t.write(&mut b, SIG);
                assert_eq!(classify(&b, PORT), Received::Test { sig: SIG });
                assert!(checksums_ok(&b));
                assert_eq!(classify(&b, PORT + 1), Received::Other);
                // A wrong next header, or the UDP length past the payload.
                let ip = f6.encap().ip_offset();
                let mut g = b.clone();
                g[ip + 6] = 6;
                assert_eq!(classify(&g, PORT), Received::Other);
                let mut g = b.clone();
                g[ip + 5] = g[ip + 5].wrapping_sub(1);
                assert_eq!(classify(&g, PORT), Received::Other);
                // Truncated inside the signature.
                let end = t.signature_offset() + SIGNATURE_LEN;
                assert_eq!(classify(&b[..end - 1], PORT), Received::Other);
                assert_eq!(classify(&b[..end], PORT), Received::Test { sig: SIG });
                // The checksum catches corruption; zero is not allowed in IPv6.
                let mut g = b.clone();
                *g.last_mut().unwrap() ^= 1;
                assert!(!checksums_ok(&g));
                let mut g = b.clone();
                let c = t.signature_offset() - 2;
                g[c..c + 2].copy_from_slice(&[0, 0]);
                assert!(!checksums_ok(&g));
            }
        }
    }
}
