//! The outer headers around an ESP packet on an Ethernet link: ESP in UDP
//! (RFC 3948), which every NAT-traversing IPsec peer speaks on port 4500,
//! or raw ESP (IPv4 protocol 50).
//!
//! ```text
//! ESP in UDP:  Ethernet (14) | IPv4 (20, protocol 17) | UDP (8) | ESP ...
//! raw ESP:     Ethernet (14) | IPv4 (20, protocol 50) | ESP ...
//! ```
//!
//! Sending writes the ESP packet at `headroom()` in the frame buffer and the
//! headers in front of it, so the frame is built in place with no copy. The
//! headers are laid out once per SA ([`Framer::new`]); per frame only the
//! lengths and the IPv4 checksum change.
//!
//! On the port 4500 a peer also sends IKE (after a 4-byte zero non-ESP
//! marker, RFC 3948 §2.2) and NAT keepalives (one byte 0xFF, §2.3);
//! [`decapsulate`] tells the three apart.

use std::net::Ipv4Addr;

use linerate_wire::checksum::{fold, sum16};
use linerate_wire::ethernet::{EthernetFrame, MacAddr, ETHERTYPE_IPV4};
use linerate_wire::ipv4::{Ipv4Packet, FLAG_DF, IPPROTO_UDP};
use linerate_wire::udp::UdpPacket;
use linerate_wire::units::{ETH_HEADER_LEN, IPV4_HEADER_LEN, UDP_HEADER_LEN};

use crate::error::{EspError, Malformed};
use crate::sa::Outbound;

/// The UDP port of ESP in UDP and of IKE after NAT detection (RFC 3948).
pub const ESP_UDP_PORT: u16 = 4500;
/// IPv4 protocol number of ESP.
pub const IPPROTO_ESP: u8 = 50;
/// The one-byte payload of a NAT keepalive (RFC 3948 §2.3).
pub const NAT_KEEPALIVE: u8 = 0xFF;
/// The 4 zero bytes that mark an IKE message on the ESP port, where an ESP
/// packet would have its SPI (never 0).
pub const NON_ESP_MARKER: [u8; 4] = [0; 4];

/// Frame bytes before the ESP packet with ESP in UDP.
pub const UDP_ESP_HEADROOM: usize = ETH_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN;
/// Frame bytes before the ESP packet with raw ESP.
pub const RAW_ESP_HEADROOM: usize = ETH_HEADER_LEN + IPV4_HEADER_LEN;

/// How ESP packets travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encapsulation {
    /// In UDP (RFC 3948), normally 4500 to 4500; what IKEv2 uses as soon as
    /// either side is behind a NAT, and what strongSwan can be told to
    /// always use (`encap = yes`).
    Udp { src_port: u16, dst_port: u16 },
    /// As IPv4 protocol 50.
    Raw,
}

impl Encapsulation {
    /// Frame bytes in front of the ESP packet: 42 in UDP, 34 raw.
    pub fn headroom(self) -> usize {
        match self {
            Encapsulation::Udp { .. } => UDP_ESP_HEADROOM,
            Encapsulation::Raw => RAW_ESP_HEADROOM,
        }
    }
}

/// The outer Ethernet and IPv4 (and UDP) headers of one SA's frames.
///
/// The IPv4 header has no options, DF set and identification 0 (allowed
/// for datagrams that are never fragmented, RFC 6864 §4.1): an ESP packet
/// is never fragmented here, so an inner packet must fit the link's MTU
/// with the ESP overhead. The UDP checksum is 0, which RFC 3948 §2.1 asks
/// for (the ICV protects the packet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OuterHeaders {
    pub src_mac: MacAddr,
    pub dst_mac: MacAddr,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    pub encapsulation: Encapsulation,
    pub ttl: u8,
    /// The DSCP and ECN byte of the outer header.
    pub dscp_ecn: u8,
}

impl OuterHeaders {
    /// ESP in UDP from port 4500 to port 4500, TTL 64, DSCP 0.
    pub fn esp_in_udp(
        src_mac: MacAddr,
        dst_mac: MacAddr,
        src_ip: Ipv4Addr,
        dst_ip: Ipv4Addr,
    ) -> OuterHeaders {
        OuterHeaders {
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            encapsulation: Encapsulation::Udp {
                src_port: ESP_UDP_PORT,
                dst_port: ESP_UDP_PORT,
            },
            ttl: linerate_wire::ipv4::DEFAULT_TTL,
            dscp_ecn: 0,
        }
    }

    /// Raw ESP (protocol 50), TTL 64, DSCP 0.
    pub fn raw_esp(
        src_mac: MacAddr,
        dst_mac: MacAddr,
        src_ip: Ipv4Addr,
        dst_ip: Ipv4Addr,
    ) -> OuterHeaders {
        OuterHeaders {
            encapsulation: Encapsulation::Raw,
            ..OuterHeaders::esp_in_udp(src_mac, dst_mac, src_ip, dst_ip)
        }
    }

    /// Where the ESP packet starts in the frame: 42 in UDP, 34 raw.
    pub fn headroom(&self) -> usize {
        self.encapsulation.headroom()
    }
}

/// The outer headers laid out once, for building frames on the hot path.
#[derive(Debug, Clone)]
pub struct Framer {
    template: [u8; UDP_ESP_HEADROOM],
    headroom: usize,
    /// Ones-complement sum of the IPv4 header without its total length and
    /// checksum, which are the per-frame part.
    partial_sum: u32,
}

impl Framer {
    pub fn new(headers: &OuterHeaders) -> Framer {
        let mut t = [0u8; UDP_ESP_HEADROOM];
        let mut eth = EthernetFrame::new_unchecked(&mut t[..]);
        eth.set_dst_addr(headers.dst_mac);
        eth.set_src_addr(headers.src_mac);
        eth.set_ethertype(ETHERTYPE_IPV4);
        let ip = &mut t[ETH_HEADER_LEN..ETH_HEADER_LEN + IPV4_HEADER_LEN];
        ip[0] = 0x45;
        ip[1] = headers.dscp_ecn;
        // 2..4 total length and 4..6 identification 0: set per frame / 0.
        ip[6..8].copy_from_slice(&FLAG_DF.to_be_bytes());
        ip[8] = headers.ttl;
        ip[9] = match headers.encapsulation {
            Encapsulation::Udp { .. } => IPPROTO_UDP,
            Encapsulation::Raw => IPPROTO_ESP,
        };
        ip[12..16].copy_from_slice(&headers.src_ip.octets());
        ip[16..20].copy_from_slice(&headers.dst_ip.octets());
        let partial_sum = sum16(ip);
        if let Encapsulation::Udp { src_port, dst_port } = headers.encapsulation {
            let mut udp = UdpPacket::new_unchecked(&mut t[ETH_HEADER_LEN + IPV4_HEADER_LEN..]);
            udp.set_src_port(src_port);
            udp.set_dst_port(dst_port);
            // The length per frame, the checksum 0.
        }
        Framer {
            template: t,
            headroom: headers.headroom(),
            partial_sum,
        }
    }

    /// Where the ESP packet goes in the frame buffer.
    pub fn headroom(&self) -> usize {
        self.headroom
    }

    /// Frame length for an ESP packet of `esp_len` bytes (without FCS).
    pub fn frame_len(&self, esp_len: usize) -> usize {
        self.headroom + esp_len
    }

    /// Writes the outer headers in front of the `esp_len`-byte ESP packet
    /// at `frame[headroom()..]` and returns the frame's length.
    pub fn encapsulate(&self, frame: &mut [u8], esp_len: usize) -> Result<usize, EspError> {
        let len = self.frame_len(esp_len);
        if frame.len() < len {
            return Err(EspError::BufferTooSmall {
                need: len,
                have: frame.len(),
            });
        }
        let ip_len = len - ETH_HEADER_LEN;
        if ip_len > u16::MAX as usize {
            return Err(EspError::TooLong { len: esp_len });
        }
        let h = &mut frame[..self.headroom];
        h.copy_from_slice(&self.template[..self.headroom]);
        let ip_len = ip_len as u16;
        let (ip, udp) = h[ETH_HEADER_LEN..].split_at_mut(IPV4_HEADER_LEN);
        let mut ip = Ipv4Packet::new_unchecked(ip);
        ip.set_total_len(ip_len);
        ip.set_checksum(fold(self.partial_sum + ip_len as u32));
        if self.headroom == UDP_ESP_HEADROOM {
            UdpPacket::new_unchecked(udp).set_length(ip_len - IPV4_HEADER_LEN as u16);
        }
        Ok(len)
    }

    /// Seals `inner` with `sa` straight into `frame` after the headroom and
    /// writes the headers: the whole send path for one test frame, with the
    /// inner packet copied once (into place) and nothing allocated.
    pub fn seal(
        &self,
        sa: &mut Outbound,
        inner: &[u8],
        next_header: u8,
        frame: &mut [u8],
    ) -> Result<usize, EspError> {
        let need = self.frame_len(sa.sealed_len(inner.len()));
        if frame.len() < need {
            return Err(EspError::BufferTooSmall {
                need,
                have: frame.len(),
            });
        }
        let esp_len = sa.seal(inner, next_header, &mut frame[self.headroom..])?;
        self.encapsulate(frame, esp_len)
    }
}

/// One-shot form of [`Framer::encapsulate`], for frames not on the hot path
/// (a `Framer` kept per SA saves re-laying the headers).
pub fn encapsulate_frame(
    frame: &mut [u8],
    esp_len: usize,
    headers: &OuterHeaders,
) -> Result<usize, EspError> {
    Framer::new(headers).encapsulate(frame, esp_len)
}

/// What a frame on the ESP port (or protocol 50) carries.
#[derive(Debug, PartialEq, Eq)]
pub enum Payload<'a> {
    /// An ESP packet, SPI first, for [`Inbound::open`](crate::Inbound::open).
    Esp(&'a mut [u8]),
    /// An IKE message (the non-ESP marker removed), for the IKE daemon.
    Ike(&'a mut [u8]),
    /// A NAT keepalive, to be ignored.
    NatKeepalive,
}

/// A received frame taken apart.
#[derive(Debug, PartialEq, Eq)]
pub struct Decapsulated<'a> {
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
    /// UDP source and destination ports; None for raw ESP. A NAT between
    /// the peers changes the source port, and replies go back to it.
    pub udp_ports: Option<(u16, u16)>,
    pub payload: Payload<'a>,
}

/// [`EspError::NotEsp`]'s reason for UDP to another port than ESP's: the
/// one kind of frame that can be a test frame the gateway forwarded in
/// clear (the others are fragments, other protocols, datagrams too short
/// for ESP: stray traffic).
pub const UDP_TO_ANOTHER_PORT: &str = "UDP to another port than ESP's";

/// The shortest ESP packet that can be one: SPI and sequence number.
const ESP_HEADER_LEN: usize = 8;

/// Takes a received Ethernet frame apart: ESP in UDP to `esp_port`
/// (normally 4500) or raw ESP, bounded by the IPv4 and UDP lengths so
/// Ethernet padding and FCS are left out.
///
/// The IPv4 header checksum is verified; the UDP checksum is not (RFC 3948
/// §2.1 has senders put 0 there): ESP's ICV covers the ESP packet, and IKE
/// protects its own messages. Frames that are something else (ARP, other
/// ports, fragments) are `NotEsp`, cut-short ones malformed.
pub fn decapsulate(frame: &mut [u8], esp_port: u16) -> Result<Decapsulated<'_>, EspError> {
    let bad = |why| EspError::Malformed(Malformed::Frame(why));
    let eth = EthernetFrame::new_checked(&*frame).ok_or(bad("shorter than an Ethernet header"))?;
    if eth.ethertype() != ETHERTYPE_IPV4 {
        return Err(EspError::NotEsp("not IPv4"));
    }
    let ip =
        Ipv4Packet::new_checked(eth.payload()).ok_or(bad("IPv4 header cut short or invalid"))?;
    if !ip.verify_checksum() {
        return Err(bad("IPv4 header checksum wrong"));
    }
    let (ihl, total) = (ip.header_len(), ip.total_len() as usize);
    if total < ihl || total > eth.payload().len() {
        return Err(bad("IPv4 total length beyond the frame"));
    }
    if ip.is_fragment() {
        return Err(EspError::NotEsp("IPv4 fragment (not reassembled)"));
    }
    let (src_ip, dst_ip, protocol) = (ip.src_addr(), ip.dst_addr(), ip.protocol());
    let l4_start = ETH_HEADER_LEN + ihl;
    let l4_end = ETH_HEADER_LEN + total;
    match protocol {
        IPPROTO_ESP => Ok(Decapsulated {
            src_ip,
            dst_ip,
            udp_ports: None,
            payload: Payload::Esp(&mut frame[l4_start..l4_end]),
        }),
        IPPROTO_UDP => {
            let udp = UdpPacket::new_checked(&frame[l4_start..l4_end])
                .ok_or(bad("UDP header cut short"))?;
            let (src_port, dst_port) = (udp.src_port(), udp.dst_port());
            let udp_len = udp.length() as usize;
            if dst_port != esp_port {
                return Err(EspError::NotEsp(UDP_TO_ANOTHER_PORT));
            }
            if udp_len < UDP_HEADER_LEN || udp_len > l4_end - l4_start {
                return Err(bad("UDP length beyond the IPv4 packet"));
            }
            let payload = &mut frame[l4_start + UDP_HEADER_LEN..l4_start + udp_len];
            let payload = if payload == [NAT_KEEPALIVE] {
                Payload::NatKeepalive
            } else if payload.len() >= 4 && payload[..4] == NON_ESP_MARKER {
                Payload::Ike(&mut payload[4..])
            } else if payload.len() < ESP_HEADER_LEN {
                // No ESP packet is this short (nor any test frame cut
                // short by a link: its headers alone are longer).
                return Err(EspError::NotEsp(
                    "UDP payload on the ESP port shorter than an ESP header",
                ));
            } else {
                Payload::Esp(payload)
            };
            Ok(Decapsulated {
                src_ip,
                dst_ip,
                udp_ports: Some((src_port, dst_port)),
                payload,
            })
        }
        _ => Err(EspError::NotEsp("IPv4 but neither UDP nor ESP")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sa::{Inbound, NEXT_HEADER_IPV4};
    use crate::suite::EspSuite;
    use crate::testutil::keys;
    use linerate_wire::ipv4::Ipv4Repr;
    use linerate_wire::udp::UdpRepr;
    use proptest::prelude::*;

    const TESTER: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x01]);
    const GATEWAY: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0x02]);
    const TESTER_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
    const GATEWAY_IP: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

    fn udp() -> OuterHeaders {
        OuterHeaders::esp_in_udp(TESTER, GATEWAY, TESTER_IP, GATEWAY_IP)
    }

    fn raw() -> OuterHeaders {
        OuterHeaders::raw_esp(TESTER, GATEWAY, TESTER_IP, GATEWAY_IP)
    }

    /// The IPv4 header at the start of `ip` sums to zero.
    fn checksum_ok(ip: &[u8]) -> bool {
        Ipv4Packet::new_checked(ip).is_some_and(|p| p.verify_checksum())
    }

    #[test]
    fn esp_in_udp_headers_field_by_field() {
        let mut frame = vec![0xAAu8; 200];
        let esp_len = 100;
        let len = encapsulate_frame(&mut frame, esp_len, &udp()).unwrap();
        assert_eq!(len, 142);
        assert_eq!(frame[0..6], GATEWAY.0);
        assert_eq!(frame[6..12], TESTER.0);
        assert_eq!(frame[12..14], [0x08, 0x00]);
        let ip = &frame[14..34];
        // The same header as linerate-wire's own IPv4 writer makes.
        let mut want = [0u8; 20];
        let repr = Ipv4Repr {
            src: TESTER_IP,
            dst: GATEWAY_IP,
            protocol: 17,
            total_len: 128,
            ident: 0,
            ttl: 64,
            dont_frag: true,
        };
        repr.emit(&mut want);
        assert_eq!(ip, want);
        assert!(checksum_ok(ip));
        assert_eq!(Ipv4Repr::parse(&frame[14..len]), Some(repr));
        let udp = &frame[34..42];
        assert_eq!(udp, [0x11, 0x94, 0x11, 0x94, 0, 108, 0, 0]);
        assert_eq!(
            UdpRepr::parse(&frame[34..len]),
            Some(UdpRepr {
                src_port: 4500,
                dst_port: 4500,
                len: 108
            })
        );
        // The ESP packet is not touched.
        assert!(frame[42..].iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn raw_esp_headers_and_checksums_for_every_length() {
        let framer = Framer::new(&raw());
        assert_eq!(framer.headroom(), 34);
        let mut frame = vec![0u8; 2000];
        for esp_len in [0, 1, 36, 1000, 1966] {
            let len = framer.encapsulate(&mut frame, esp_len).unwrap();
            assert_eq!(len, 34 + esp_len);
            let ip = &frame[14..34];
            assert_eq!(ip[9], 50);
            assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, 20 + esp_len);
            assert!(checksum_ok(ip), "{esp_len}");
        }
        assert!(matches!(
            framer.encapsulate(&mut frame, 1967),
            Err(EspError::BufferTooSmall { need: 2001, .. })
        ));
        let mut big = vec![0u8; 70000];
        assert!(matches!(
            framer.encapsulate(&mut big, 65516),
            Err(EspError::TooLong { .. })
        ));
    }

    #[test]
    fn dscp_ttl_and_ports_are_the_callers() {
        let headers = OuterHeaders {
            ttl: 7,
            dscp_ecn: 0xb8,
            encapsulation: Encapsulation::Udp {
                src_port: 40000,
                dst_port: 4500,
            },
            ..udp()
        };
        let mut frame = vec![0u8; 100];
        encapsulate_frame(&mut frame, 50, &headers).unwrap();
        assert_eq!((frame[15], frame[22]), (0xb8, 7));
        assert_eq!(frame[34..36], 40000u16.to_be_bytes());
        assert!(checksum_ok(&frame[14..]));
    }

    #[test]
    fn sealed_frames_come_back_through_decapsulate_and_open() {
        for headers in [udp(), raw()] {
            for suite in EspSuite::ALL {
                let framer = Framer::new(&headers);
                let mut out = crate::Outbound::new(keys(suite, 77)).unwrap();
                let mut inb = Inbound::new(keys(suite, 77)).unwrap();
                for inner_len in [46usize, 494, 1500] {
                    let inner: Vec<u8> = (0..inner_len).map(|i| i as u8).collect();
                    let mut frame = vec![0u8; 1700];
                    let len = framer
                        .seal(&mut out, &inner, NEXT_HEADER_IPV4, &mut frame)
                        .unwrap();
                    assert_eq!(
                        len,
                        headers.headroom() + inner_len + suite.overhead(inner_len)
                    );
                    // Received with Ethernet padding/FCS bytes after it.
                    let d = decapsulate(&mut frame[..len + 4], ESP_UDP_PORT).unwrap();
                    assert_eq!((d.src_ip, d.dst_ip), (TESTER_IP, GATEWAY_IP));
                    let Payload::Esp(esp) = d.payload else {
                        panic!("not ESP: {:?}", d.payload)
                    };
                    assert_eq!(esp.len(), len - headers.headroom());
                    assert_eq!(inb.open(esp).unwrap().packet, &inner[..]);
                }
                let mut small = vec![0u8; framer.frame_len(out.sealed_len(46)) - 1];
                assert!(matches!(
                    framer.seal(&mut out, &[0; 46], 4, &mut small),
                    Err(EspError::BufferTooSmall { .. })
                ));
            }
        }
    }

    /// A frame on port 4500 with the given UDP payload.
    fn udp_frame(payload: &[u8]) -> Vec<u8> {
        let mut frame = vec![0u8; UDP_ESP_HEADROOM + payload.len()];
        frame[UDP_ESP_HEADROOM..].copy_from_slice(payload);
        encapsulate_frame(&mut frame, payload.len(), &udp()).unwrap();
        frame
    }

    #[test]
    fn ike_after_the_non_esp_marker_and_nat_keepalives_are_told_apart() {
        let mut ike = udp_frame(&[0, 0, 0, 0, 0x11, 0x22, 0x33]);
        let d = decapsulate(&mut ike, ESP_UDP_PORT).unwrap();
        assert_eq!(d.udp_ports, Some((4500, 4500)));
        assert_eq!(d.payload, Payload::Ike(&mut [0x11, 0x22, 0x33]));

        let mut keepalive = udp_frame(&[0xFF]);
        assert_eq!(
            decapsulate(&mut keepalive, ESP_UDP_PORT).unwrap().payload,
            Payload::NatKeepalive
        );

        let mut esp = udp_frame(&[0, 0, 0, 1, 0, 0, 0, 1]);
        assert!(matches!(
            decapsulate(&mut esp, ESP_UDP_PORT).unwrap().payload,
            Payload::Esp(_)
        ));

        // Too short for any ESP packet: another datagram, not a damaged
        // ESP one.
        for payload in [&[1u8, 2][..], &[0, 0, 0, 1, 0, 0, 0]] {
            let mut short = udp_frame(payload);
            assert!(matches!(
                decapsulate(&mut short, ESP_UDP_PORT),
                Err(EspError::NotEsp(why)) if why != UDP_TO_ANOTHER_PORT
            ));
        }
    }

    #[test]
    fn other_frames_are_not_esp_and_broken_ones_malformed() {
        let base = udp_frame(&[0, 0, 0, 1, 0, 0, 0, 1]);

        let mut other_port = base.clone();
        assert!(matches!(
            decapsulate(&mut other_port, 500),
            Err(EspError::NotEsp(_))
        ));

        let mut arp = base.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(
            decapsulate(&mut arp, ESP_UDP_PORT),
            Err(EspError::NotEsp("not IPv4"))
        );

        // A fragment, checksum fixed up.
        let mut fragment = base.clone();
        fragment[20] |= 0x20;
        refresh_checksum(&mut fragment);
        assert!(matches!(
            decapsulate(&mut fragment, ESP_UDP_PORT),
            Err(EspError::NotEsp(_))
        ));

        let mut tcp = base.clone();
        tcp[23] = 6;
        refresh_checksum(&mut tcp);
        assert!(matches!(
            decapsulate(&mut tcp, ESP_UDP_PORT),
            Err(EspError::NotEsp(_))
        ));

        let mut bad_sum = base.clone();
        bad_sum[24] ^= 1;
        assert_eq!(
            decapsulate(&mut bad_sum, ESP_UDP_PORT),
            Err(Malformed::Frame("IPv4 header checksum wrong").into())
        );

        let mut cut = base.clone();
        cut.truncate(45);
        assert!(decapsulate(&mut cut, ESP_UDP_PORT)
            .unwrap_err()
            .is_malformed());

        let mut udp_len = base.clone();
        udp_len[38..40].copy_from_slice(&100u16.to_be_bytes());
        assert!(decapsulate(&mut udp_len, ESP_UDP_PORT)
            .unwrap_err()
            .is_malformed());

        assert!(decapsulate(&mut [0u8; 10], ESP_UDP_PORT)
            .unwrap_err()
            .is_malformed());
    }

    fn refresh_checksum(frame: &mut [u8]) {
        frame[24..26].copy_from_slice(&[0, 0]);
        let c = fold(sum16(&frame[14..34]));
        frame[24..26].copy_from_slice(&c.to_be_bytes());
    }

    proptest! {
        #[test]
        fn decapsulate_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..120), ipv4 in any::<bool>()) {
            if ipv4 && bytes.len() >= 15 {
                bytes[12] = 0x08;
                bytes[13] = 0x00;
                bytes[14] = 0x45;
            }
            let _ = decapsulate(&mut bytes, ESP_UDP_PORT);
        }
    }
}
