//! Is a received test frame the frame that was sent? A tester that counts
//! a damaged frame as received reports a broken DUT as a good one, so every
//! receiver (user space here, the in-kernel counter in
//! `crates/bpf/bpf/xdp_count.bpf.c`, held to this by a property test)
//! checks each test frame before it counts it, as a hardware tester checks
//! each frame's FCS and payload. A damaged frame counts as *errored*: lost,
//! never received, and left out of the sequence and latency statistics.
//!
//! Two depths:
//!
//! * [`FrameCheck::Payload`] (the default): the frame is as long as its IP
//!   header says (no more, but for Ethernet padding of a minimum-size
//!   frame; no less), the UDP length is the IP payload's, the IPv4 header
//!   checksum is right, and so is the UDP checksum over the whole datagram
//!   (pseudo-header, signature and payload), which linerate's generators
//!   always write: it finds a single damaged byte anywhere in the frame, as
//!   a hardware tester checks every frame at line rate. An IPv4 checksum of
//!   zero says "none" (RFC 768) and is accepted; in IPv6 it is mandatory,
//!   so zero is damage. IPv6 has no header checksum: its traffic class,
//!   flow label and hop limit are covered by nothing.
//! * [`FrameCheck::Headers`]: all of that but the UDP checksum, for whoever
//!   needs the last few percent of a receiver's rate (docs/ENGINES.md has
//!   what each costs the in-kernel counter): a damaged payload byte goes
//!   unseen.
//!
//! The receivers add one check of their own: a timestamp in the future
//! (a latency that would be negative) is damage too.

use crate::checksum::{fold, pseudo_header_ipv4, pseudo_header_ipv6, sum16};
use crate::encap::ETHERTYPE_IPV6;
use crate::ethernet::{read_u16, EthernetFrame, ETHERTYPE_IPV4};
use crate::ipv4::{Ipv4Packet, IPPROTO_UDP};
use crate::ipv6::{self, IPV6_HEADER_LEN};
use crate::udp;
use std::net::Ipv6Addr;

/// How much of each test frame the receiver checks before counting it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FrameCheck {
    /// Lengths and the IPv4 header checksum.
    Headers,
    /// Also the UDP checksum over the whole datagram.
    #[default]
    Payload,
}

impl FrameCheck {
    pub fn name(self) -> &'static str {
        match self {
            FrameCheck::Headers => "headers",
            FrameCheck::Payload => "payload",
        }
    }

    /// What the check covers, for reports.
    pub fn describe(self) -> &'static str {
        match self {
            FrameCheck::Headers => {
                "lengths, IPv4 header checksum and timestamp of every frame, not its payload (--frame-check headers)"
            }
            FrameCheck::Payload => {
                "lengths, IPv4 header checksum, timestamp and UDP checksum over the whole payload of every frame"
            }
        }
    }
}

impl std::str::FromStr for FrameCheck {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "headers" => Ok(FrameCheck::Headers),
            "payload" => Ok(FrameCheck::Payload),
            _ => Err(format!(
                "unknown frame check '{s}': use 'headers' (lengths and IPv4 header checksum) or 'payload' (also the UDP checksum)"
            )),
        }
    }
}

/// A frame at most this long (without FCS) may carry Ethernet padding
/// after its IP packet: the 60-byte minimum, or 64 with an 802.1Q tag.
pub const MAX_PADDED_FRAME: usize = 64;

/// Longest UDP datagram the payload check covers: the in-kernel counter
/// sums it in 18 chunks of 512 bytes, enough for the largest test frame
/// (9,018 bytes with FCS: an 8,980-byte datagram). A longer one is no
/// frame linerate sent, so it is damaged.
pub const MAX_CHECKED_DATAGRAM: usize = 18 * 512;

/// True when a frame that [`classify`](crate::classify) took for a test
/// frame is intact. `frame` holds its first bytes (a receiver may copy only
/// the headers: enough for [`FrameCheck::Headers`]; the payload check
/// needs the whole frame), `wire_len` its real length without FCS.
/// Never panics; a frame too short to check is damaged.
pub fn intact(frame: &[u8], wire_len: usize, check: FrameCheck) -> bool {
    let Some((ethertype, l2)) = EthernetFrame::new_checked(frame).and_then(|f| f.network()) else {
        return false;
    };
    let Some(packet) = frame.get(l2..) else {
        return false;
    };
    let on_wire = wire_len.saturating_sub(l2);
    match ethertype {
        ETHERTYPE_IPV4 => intact_v4(packet, on_wire, wire_len, check),
        ETHERTYPE_IPV6 => intact_v6(packet, on_wire, wire_len, check),
        _ => false,
    }
}

/// The IP packet is exactly `total` bytes of the `on_wire` after the
/// Ethernet header, or shorter in a padded minimum-size frame.
fn length_ok(total: usize, on_wire: usize, wire_len: usize) -> bool {
    total == on_wire || (total < on_wire && wire_len <= MAX_PADDED_FRAME)
}

fn intact_v4(packet: &[u8], on_wire: usize, wire_len: usize, check: FrameCheck) -> bool {
    let Some(ip) = Ipv4Packet::new_checked(packet) else {
        return false;
    };
    let (ihl, total) = (ip.header_len(), ip.total_len() as usize);
    let Some(udp_len) = read_u16(packet, ihl + udp::LEN_OFFSET) else {
        return false;
    };
    if !length_ok(total, on_wire, wire_len) || ihl + udp_len as usize != total {
        return false;
    }
    if !ip.verify_checksum() {
        return false;
    }
    if check == FrameCheck::Headers {
        return true;
    }
    let Some(datagram) = packet.get(ihl..total) else {
        return false;
    };
    if datagram.len() > MAX_CHECKED_DATAGRAM {
        return false;
    }
    match read_u16(datagram, udp::CHECKSUM_OFFSET) {
        Some(0) => true,
        Some(_) => {
            let pseudo = pseudo_header_ipv4(ip.src_addr(), ip.dst_addr(), IPPROTO_UDP, udp_len);
            fold(pseudo + sum16(datagram)) == 0
        }
        None => false,
    }
}

fn intact_v6(packet: &[u8], on_wire: usize, wire_len: usize, check: FrameCheck) -> bool {
    let (Some(payload), Some(udp_len)) = (
        read_u16(packet, ipv6::PAYLOAD_LEN_OFFSET),
        read_u16(packet, IPV6_HEADER_LEN + udp::LEN_OFFSET),
    ) else {
        return false;
    };
    let total = IPV6_HEADER_LEN + payload as usize;
    if !length_ok(total, on_wire, wire_len) || udp_len != payload {
        return false;
    }
    if check == FrameCheck::Headers {
        return true;
    }
    let Some(datagram) = packet.get(IPV6_HEADER_LEN..total) else {
        return false;
    };
    if datagram.len() > MAX_CHECKED_DATAGRAM || read_u16(datagram, udp::CHECKSUM_OFFSET) == Some(0)
    {
        return false;
    }
    let addr = |o: usize| -> Ipv6Addr {
        let mut a = [0u8; 16];
        a.copy_from_slice(&packet[o..o + 16]);
        a.into()
    };
    // The addresses are inside the 40-byte header, which `datagram` follows.
    let (src, dst) = (addr(ipv6::SRC_OFFSET), addr(ipv6::DST_OFFSET));
    let pseudo = pseudo_header_ipv6(&src, &dst, IPPROTO_UDP, udp_len as u32);
    fold(pseudo + sum16(datagram)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::template::{FlowSpec, FrameTemplate};
    use crate::units::FrameSize;
    use crate::{classify, MacAddr, Received, Signature, VlanTag};
    use std::net::{IpAddr, Ipv4Addr};

    fn frame(v6: bool, vlan: bool, size: u64) -> Vec<u8> {
        let flow = FlowSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: if v6 {
                IpAddr::V6("2001:db8::2".parse().unwrap())
            } else {
                IpAddr::V4(Ipv4Addr::new(198, 18, 0, 2))
            },
            dst_ip: if v6 {
                IpAddr::V6("2001:db8:1::2".parse().unwrap())
            } else {
                IpAddr::V4(Ipv4Addr::new(198, 19, 0, 2))
            },
            src_port: 19538,
            dst_port: 19538,
            ttl: 64,
            vlan: vlan.then_some(VlanTag { id: 10, pcp: 0 }),
        };
        let size = size.max(flow.encap().min_frame() as u64);
        let size = FrameSize::from_frame_in(size, &flow.encap()).unwrap();
        let t = FrameTemplate::new(&flow, size);
        let mut f = vec![0u8; t.len()];
        t.write(
            &mut f,
            Signature {
                stream: 3,
                seq: 77,
                tx_ts: 123_456,
            },
        );
        assert!(matches!(classify(&f, 19538), Received::Test { .. }));
        f
    }

    fn layouts() -> impl Iterator<Item = (bool, bool, u64)> {
        [(false, false), (false, true), (true, false), (true, true)]
            .into_iter()
            .flat_map(|(v6, vlan)| [64u64, 65, 78, 128, 1518, 9018].map(move |s| (v6, vlan, s)))
    }

    #[test]
    fn frames_as_built_are_intact_at_both_depths() {
        for (v6, vlan, size) in layouts() {
            let f = frame(v6, vlan, size);
            for check in [FrameCheck::Headers, FrameCheck::Payload] {
                assert!(intact(&f, f.len(), check), "{v6} {vlan} {size} {check:?}");
            }
        }
    }

    #[test]
    fn any_flipped_bit_after_the_macs_is_found_by_the_payload_check() {
        for (v6, vlan, size) in layouts().filter(|l| l.2 <= 1518) {
            let f = frame(v6, vlan, size);
            let l2 = if vlan { 18 } else { 14 };
            let end = f.len().min(if size <= 64 { 60 } else { f.len() });
            for at in l2..end {
                // Padding of a minimum-size frame is covered by no checksum.
                let ip_end = l2
                    + if v6 {
                        40 + u16::from_be_bytes([f[l2 + 4], f[l2 + 5]]) as usize
                    } else {
                        u16::from_be_bytes([f[l2 + 2], f[l2 + 3]]) as usize
                    };
                // IPv6 has no header checksum: its traffic class, flow
                // label and hop limit are covered by nothing.
                let v6_unchecked = v6 && (at < l2 + 4 || at == l2 + 7);
                if at >= ip_end || v6_unchecked {
                    continue;
                }
                for bit in [0x01u8, 0x80] {
                    let mut d = f.clone();
                    d[at] ^= bit;
                    if !matches!(classify(&d, 19538), Received::Test { .. }) {
                        continue; // no longer taken for a test frame at all
                    }
                    assert!(
                        !intact(&d, d.len(), FrameCheck::Payload),
                        "{v6} {vlan} {size}: bit {bit:#x} of byte {at} flipped"
                    );
                }
            }
        }
    }

    #[test]
    fn the_headers_check_finds_damaged_headers_and_lengths() {
        let f = frame(false, false, 128);
        // The last payload byte: only the payload check sees it.
        let mut d = f.clone();
        *d.last_mut().unwrap() ^= 0xFF;
        assert!(intact(&d, d.len(), FrameCheck::Headers));
        assert!(!intact(&d, d.len(), FrameCheck::Payload));
        // TTL changed without the header checksum.
        let mut d = f.clone();
        d[22] -= 1;
        assert!(!intact(&d, d.len(), FrameCheck::Headers));
        // Cut short by 20 bytes, the IP length unchanged.
        let cut = &f[..f.len() - 20];
        assert!(!intact(cut, cut.len(), FrameCheck::Headers));
        // A capture of the first 60 bytes of the whole frame is fine for
        // the headers check, not for the payload check.
        assert!(intact(&f[..60], f.len(), FrameCheck::Headers));
        assert!(!intact(&f[..60], f.len(), FrameCheck::Payload));
        // Bytes appended after the packet.
        let mut long = f.clone();
        long.extend_from_slice(&[0; 4]);
        assert!(!intact(&long, long.len(), FrameCheck::Headers));
        // A minimum-size frame padded to 64 bytes (a VLAN tag removed or added).
        let small = frame(false, false, 64);
        let mut padded = small.clone();
        padded.extend_from_slice(&[0; 4]);
        assert!(intact(&padded, padded.len(), FrameCheck::Payload));
        // The UDP length shortened.
        let mut d = f.clone();
        d[39] -= 2;
        assert!(!intact(&d, d.len(), FrameCheck::Headers));
        // A zero IPv4 UDP checksum means none; zero in IPv6 is damage.
        let mut d = f.clone();
        d[40..42].fill(0);
        assert!(intact(&d, d.len(), FrameCheck::Payload));
        let v6 = frame(true, false, 128);
        let mut d = v6.clone();
        d[60..62].fill(0);
        assert!(!intact(&d, d.len(), FrameCheck::Payload));
    }

    #[test]
    fn never_panics_on_any_prefix_or_length() {
        for (v6, vlan, size) in layouts().filter(|l| l.2 <= 128) {
            let f = frame(v6, vlan, size);
            for n in 0..=f.len() {
                for wire in [0, n, f.len(), usize::MAX] {
                    for check in [FrameCheck::Headers, FrameCheck::Payload] {
                        let _ = intact(&f[..n], wire, check);
                    }
                }
            }
        }
    }

    #[test]
    fn frame_check_names_parse_back() {
        for c in [FrameCheck::Headers, FrameCheck::Payload] {
            assert_eq!(c.name().parse::<FrameCheck>(), Ok(c));
        }
        assert!("crc"
            .parse::<FrameCheck>()
            .unwrap_err()
            .contains("'headers'"));
    }
}
