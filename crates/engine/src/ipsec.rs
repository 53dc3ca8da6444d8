//! linerate as a VPN gateway's peer, in the data path: the transforms that
//! encrypt every test frame as it is sent (the gateway decrypts it) and
//! decrypt what the gateway encrypted before it is counted. ESP in UDP on
//! port 4500 (RFC 3948), which IKEv2 uses behind a NAT and strongSwan's
//! kernel-libipsec always.
//!
//! On send, the frame as built (Ethernet, the inner IPv4 packet with the
//! signature) becomes Ethernet, outer IPv4, UDP, ESP around the inner
//! packet, in the port's own buffer: the inner packet moves once to where
//! ESP wants it and is encrypted there. The outer Ethernet addresses are
//! the built frame's (the port's and its gateway's), so the frame goes to
//! the same next hop.

use crate::transform::{Arrived, ReceiveTransform, SendTransform};
use linerate_esp::frame::UDP_ESP_HEADROOM;
use linerate_esp::{
    decapsulate, EspError, Framer, Inbound, InboundCounters, Outbound, OutboundCounters,
    OuterHeaders, Payload, NEXT_HEADER_IPV4,
};
use linerate_wire::MacAddr;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};

/// The Ethernet header of the frames the engine builds (IPsec frames carry
/// no VLAN tag).
const ETH_LEN: usize = 14;
/// The UDP port ESP travels on (RFC 3948).
pub const ESP_IN_UDP_PORT: u16 = 4500;

/// What an SA's transforms counted, readable while the trial runs and
/// after it (the transforms themselves belong to the port).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EspCounts {
    /// Frames encrypted on the outbound SA.
    pub sent: OutboundCounters,
    /// What the inbound SA accepted and refused.
    pub received: InboundCounters,
    /// ESP frames for another SPI than the inbound SA's.
    pub unknown_spi: u64,
    /// IKE messages and NAT keepalives that arrived during the trial.
    pub ike: u64,
    /// IPv4 frames that arrived outside ESP on the protected port: a
    /// gateway that forwards test frames in clear leaks them.
    pub not_esp: u64,
}

/// Counts shared between a port's transforms and whoever reports them.
pub type SharedCounts = Arc<Mutex<EspCounts>>;

/// Encrypts every test frame with one outbound SA.
pub struct EspSend {
    sa: Outbound,
    outer_src: Ipv4Addr,
    outer_dst: Ipv4Addr,
    /// The outer headers, laid out for the MACs of the frames seen last.
    framer: Option<([u8; 12], Framer)>,
    counts: SharedCounts,
    /// Frames the SA refused (never, when the engine's checks held): sent
    /// as an invalid frame the DUT discards, never in clear.
    failed: u64,
}

impl EspSend {
    /// Encrypts with `sa` from `outer_src` (linerate's tunnel end) to
    /// `outer_dst` (the gateway's).
    pub fn new(
        sa: Outbound,
        outer_src: Ipv4Addr,
        outer_dst: Ipv4Addr,
        counts: SharedCounts,
    ) -> Self {
        EspSend {
            sa,
            outer_src,
            outer_dst,
            framer: None,
            counts,
            failed: 0,
        }
    }

    /// Lays the outer headers out again when the frames' Ethernet
    /// addresses changed (the gateway's MAC is known only once the trial
    /// resolved it): once per trial, not per frame.
    fn update_framer(&mut self, macs: [u8; 12]) {
        if self.framer.as_ref().is_none_or(|(m, _)| *m != macs) {
            let mac = |b: &[u8]| MacAddr([b[0], b[1], b[2], b[3], b[4], b[5]]);
            let headers = OuterHeaders::esp_in_udp(
                mac(&macs[6..12]),
                mac(&macs[0..6]),
                self.outer_src,
                self.outer_dst,
            );
            self.framer = Some((macs, Framer::new(&headers)));
        }
    }

    fn seal(&mut self, buf: &mut [u8], len: usize) -> Result<usize, EspError> {
        self.update_framer(buf[..12].try_into().expect("a frame has MACs"));
        let (Some((_, framer)), sa) = (&self.framer, &mut self.sa) else {
            unreachable!("set above");
        };
        let inner_len = len - ETH_LEN;
        let need = framer.frame_len(sa.sealed_len(inner_len));
        if buf.len() < need {
            return Err(EspError::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        buf.copy_within(ETH_LEN..len, framer.headroom() + sa.payload_offset());
        let esp_len =
            sa.seal_in_place(&mut buf[framer.headroom()..], inner_len, NEXT_HEADER_IPV4)?;
        framer.encapsulate(buf, esp_len)
    }
}

impl SendTransform for EspSend {
    fn apply(&mut self, buf: &mut [u8], len: usize) -> usize {
        match self.seal(buf, len) {
            Ok(n) => {
                if self.sa.counters().packets % 1024 == 0 {
                    self.publish();
                }
                n
            }
            Err(_) => {
                // Unreachable while the engine checks growth and
                // frames_left before the trial; never send the clear frame.
                self.failed += 1;
                buf[..60].fill(0);
                60
            }
        }
    }
    fn growth(&self, len: usize) -> usize {
        let inner = len.saturating_sub(ETH_LEN);
        UDP_ESP_HEADROOM - ETH_LEN + self.sa.sealed_len(inner) - inner
    }
    fn frames_left(&self) -> Option<u64> {
        Some(self.sa.remaining())
    }
    fn trial_ends(&mut self) {
        self.publish();
    }
    fn describe(&self) -> String {
        format!(
            "ESP {} in UDP {ESP_IN_UDP_PORT}, SPI 0x{:08x}, {} -> {}",
            self.sa.suite(),
            self.sa.spi(),
            self.outer_src,
            self.outer_dst
        )
    }
}

impl EspSend {
    /// Copies the SA's counters where reports read them.
    fn publish(&self) {
        if let Ok(mut c) = self.counts.lock() {
            c.sent = *self.sa.counters();
        }
    }
}

impl Drop for EspSend {
    fn drop(&mut self) {
        self.publish();
    }
}

/// Decrypts the frames of one inbound SA before they are counted.
pub struct EspReceive {
    sa: Inbound,
    counts: SharedCounts,
    own: EspCounts,
    seen: u64,
}

impl EspReceive {
    pub fn new(sa: Inbound, counts: SharedCounts) -> Self {
        EspReceive {
            sa,
            counts,
            own: EspCounts::default(),
            seen: 0,
        }
    }

    fn publish(&mut self) {
        self.own.received = *self.sa.counters();
        if let Ok(mut c) = self.counts.lock() {
            c.received = self.own.received;
            c.unknown_spi = self.own.unknown_spi;
            c.ike = self.own.ike;
            c.not_esp = self.own.not_esp;
        }
    }

    fn unwrap<'a>(&mut self, frame: &[u8], scratch: &'a mut [u8]) -> Arrived<'a> {
        // ARP and other non-IPv4 frames go to the host emulation as they are.
        if frame.len() < ETH_LEN || frame[12..14] != [0x08, 0x00] {
            return Arrived::AsIs;
        }
        let len = frame.len().min(scratch.len());
        scratch[..len].copy_from_slice(&frame[..len]);
        let base = scratch.as_ptr() as usize;
        let esp = match decapsulate(&mut scratch[..len], ESP_IN_UDP_PORT) {
            Ok(d) => match d.payload {
                Payload::Esp(esp) => esp,
                Payload::Ike(_) | Payload::NatKeepalive => {
                    self.own.ike += 1;
                    return Arrived::Consumed;
                }
            },
            Err(EspError::NotEsp(_)) => {
                self.own.not_esp += 1;
                return Arrived::Consumed;
            }
            Err(_) => return Arrived::Damaged,
        };
        let (inner_at, inner_len) = match self.sa.open(esp) {
            Ok(o) if o.next_header == NEXT_HEADER_IPV4 => {
                (o.packet.as_ptr() as usize - base, o.packet.len())
            }
            Ok(_) => return Arrived::Damaged,
            Err(EspError::UnknownSpi { .. }) => {
                self.own.unknown_spi += 1;
                return Arrived::Consumed;
            }
            // A duplicate, or a frame later than the window: the SA's
            // counters keep it (RFC 4303 §3.4.3 discards it); not damage.
            Err(EspError::Replay { .. } | EspError::TooOld { .. }) => return Arrived::Consumed,
            Err(_) => return Arrived::Damaged,
        };
        // The inner packet, behind the outer frame's Ethernet header, is
        // the frame the receiver counts.
        scratch.copy_within(inner_at..inner_at + inner_len, ETH_LEN);
        Arrived::Inner(&scratch[..ETH_LEN + inner_len])
    }
}

impl ReceiveTransform for EspReceive {
    fn apply<'a>(&mut self, frame: &[u8], scratch: &'a mut [u8]) -> Arrived<'a> {
        self.seen += 1;
        if self.seen % 1024 == 0 {
            self.publish();
        }
        self.unwrap(frame, scratch)
    }
    fn growth(&self, len: usize) -> usize {
        let inner = len.saturating_sub(ETH_LEN);
        UDP_ESP_HEADROOM - ETH_LEN + inner + self.sa.suite().overhead(inner) - inner
    }
    fn describe(&self) -> String {
        format!(
            "ESP {} in UDP {ESP_IN_UDP_PORT}, SPI 0x{:08x}",
            self.sa.suite(),
            self.sa.spi()
        )
    }
    fn trial_ends(&mut self) {
        self.publish();
    }
}

impl Drop for EspReceive {
    fn drop(&mut self) {
        self.publish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_esp::{EspSuite, SaKeys};
    use linerate_wire::{FlowSpec, FrameSize, FrameTemplate, Received, Signature};

    fn keys(suite: EspSuite) -> SaKeys {
        let enc = vec![0x11; suite.encryption_keymat_len()];
        let integ = vec![0x22; suite.integrity_key_len()];
        SaKeys::new(suite, 0xc0ffee01, enc, integ).unwrap()
    }

    fn test_frame(buf: &mut [u8], size: u64) -> usize {
        let flow = FlowSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: "198.19.1.2".parse().unwrap(),
            dst_ip: "198.18.0.2".parse().unwrap(),
            src_port: 1,
            dst_port: 2,
            ttl: 64,
            vlan: None,
        };
        let t = FrameTemplate::new(&flow, FrameSize::from_frame(size).unwrap());
        t.write(
            buf,
            Signature {
                stream: 7,
                seq: 42,
                tx_ts: 1,
            },
        )
    }

    #[test]
    fn a_sealed_frame_opens_to_the_frame_that_was_built() {
        for suite in EspSuite::ALL {
            for size in [64, 512, 1518] {
                let counts = SharedCounts::default();
                let outer = |s: &str| s.parse::<Ipv4Addr>().unwrap();
                let mut send = EspSend::new(
                    Outbound::new(keys(suite)).unwrap(),
                    outer("198.19.0.2"),
                    outer("198.19.0.1"),
                    counts.clone(),
                );
                let mut receive =
                    EspReceive::new(Inbound::new(keys(suite)).unwrap(), counts.clone());
                let mut buf = vec![0u8; 2048];
                let len = test_frame(&mut buf, size);
                let built = buf[..len].to_vec();
                let sent = send.apply(&mut buf, len);
                assert_eq!(sent, len + send.growth(len), "{suite} {size}");
                // On the wire: ESP in UDP 4500 between the tunnel ends,
                // nothing of the inner packet in clear.
                assert_eq!(&buf[12..14], &[0x08, 0x00]);
                assert_eq!(&buf[26..30], &[198, 19, 0, 2]);
                assert_eq!(&buf[30..34], &[198, 19, 0, 1]);
                assert_eq!(&buf[36..38], &4500u16.to_be_bytes());
                assert_eq!(classify_test(&buf[..sent]), None);
                let mut scratch = vec![0u8; 4096];
                match receive.apply(&buf[..sent], &mut scratch) {
                    Arrived::Inner(inner) => assert_eq!(inner, &built[..]),
                    _ => panic!("{suite} {size}: not opened"),
                }
                // The same frame again is a replay: discarded by the
                // window, not counted twice (and not damage).
                assert!(matches!(
                    receive.apply(&buf[..sent], &mut scratch),
                    Arrived::Consumed
                ));
                // One flipped bit in the next frame fails the ICV.
                let len = test_frame(&mut buf, size);
                let sent = send.apply(&mut buf, len);
                buf[sent - 20] ^= 1;
                assert!(matches!(
                    receive.apply(&buf[..sent], &mut scratch),
                    Arrived::Damaged
                ));
                drop((send, receive));
                let c = counts.lock().unwrap();
                assert_eq!(c.sent.packets, 2);
                assert_eq!(c.received.packets, 1);
                assert_eq!(c.received.replays, 1);
                assert_eq!(c.received.icv_failures, 1);
            }
        }
    }

    #[test]
    fn arp_passes_and_clear_test_frames_are_not_counted() {
        let counts = SharedCounts::default();
        let mut receive = EspReceive::new(
            Inbound::new(keys(EspSuite::Aes128Gcm16)).unwrap(),
            counts.clone(),
        );
        let mut scratch = vec![0u8; 4096];
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(matches!(receive.apply(&arp, &mut scratch), Arrived::AsIs));
        // A test frame the gateway forwarded without encrypting it.
        let mut buf = vec![0u8; 2048];
        let len = test_frame(&mut buf, 64);
        assert!(matches!(
            receive.apply(&buf[..len], &mut scratch),
            Arrived::Consumed
        ));
        drop(receive);
        assert_eq!(counts.lock().unwrap().not_esp, 1);
    }

    fn classify_test(frame: &[u8]) -> Option<Signature> {
        match linerate_wire::classify(frame, linerate_wire::classify::ANY_PORT) {
            Received::Test { sig } => Some(sig),
            _ => None,
        }
    }
}
