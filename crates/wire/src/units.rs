//! Frame sizes and rates at every layer.
//!
//! Frame size means the Ethernet frame including its 4-byte FCS, as RFC 2544
//! and every hardware tester count it. On the wire each frame also costs
//! 8 bytes of preamble/SFD and a 12-byte inter-frame gap (L1). An L3 length
//! (the IP packet, as the Cisco report counts it) is carried in a frame of
//! `l3 + 18` bytes, padded up to the 64-byte Ethernet minimum.

use crate::encap::Encap;
pub use crate::lengths::{
    ETH_HEADER_LEN, FCS_LEN, IPV4_HEADER_LEN, IPV6_HEADER_LEN, L2_OVERHEAD, MAX_FRAME_SIZE,
    MAX_L3_LENGTH, MIN_FRAME_SIZE, MIN_L3_LENGTH, PREAMBLE_AND_GAP, UDP_HEADER_LEN,
};
use serde::{Deserialize, Serialize};
use std::fmt;

/// "14 Ethernet + 4 VLAN + 40 IPv6 + 8 UDP + 12 signature + 4 FCS": why a
/// layout's smallest frame is what it is.
fn layout_text(encap: &Encap) -> String {
    let vlan = if encap.vlan.is_some() {
        " + 4 VLAN"
    } else {
        ""
    };
    format!(
        "14 Ethernet{vlan} + {} {} + 8 UDP + 12 signature + 4 FCS",
        encap.ip.header_len(),
        encap.ip.name()
    )
}

/// The protocol layer a byte or bit count refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Layer {
    /// On the wire: frame + preamble + inter-frame gap.
    L1,
    /// The Ethernet frame including FCS.
    L2,
    /// The IP packet.
    L3,
    /// The UDP payload (application data).
    L4,
}

impl fmt::Display for Layer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Layer::L1 => "L1",
            Layer::L2 => "L2",
            Layer::L3 => "L3",
            Layer::L4 => "L4",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    #[error("frame size {0} is out of range: use 64..9018 bytes (Ethernet frame including the 4-byte FCS)")]
    FrameSize(u64),
    #[error("L3 length {0} is out of range: use 40..9000 bytes (IPv4 + UDP headers + 12-byte signature at least)")]
    L3Length(u64),
    #[error("UDP payload {0} is out of range: use 12..8972 bytes (the 12-byte signature at least; 1472 is the most an IPv4 packet carries unfragmented on a 1500-byte MTU)")]
    UdpPayload(u64),
    #[error("a {frame}-byte frame is too small for {encap} test frames: the smallest is {min} bytes ({layout}); use --frame-size {min} or larger")]
    FrameTooSmall {
        frame: u64,
        encap: String,
        min: u16,
        layout: String,
    },
    #[error("L3 length {l3} is out of range for {encap}: use {min}..9000 bytes (IP + UDP headers + 12-byte signature at least)")]
    L3LengthIn { l3: u64, encap: String, min: u16 },
    #[error("UDP payload {payload} is out of range for {encap}: use 12..{max} bytes (the 12-byte signature at least)")]
    UdpPayloadIn {
        payload: u64,
        encap: String,
        max: u64,
    },
    #[error("rate '{0}' is not understood: write it as 50%, 100000fps, 1.5Mpps, 300Mbps or 1Gbps")]
    RateSyntax(String),
    #[error("rate '{0}' must be greater than zero")]
    RateZero(String),
    #[error("line speed '{0}' is not understood: write it as 10G, 1G, 25G, 100G or 1000M")]
    LineSpeed(String),
}

/// An Ethernet frame size on the wire (FCS included) and the IP packet it carries.
///
/// Built from a frame size (`l3 = frame - 18`) or from an L3 length
/// (`frame = max(64, l3 + 18)`, the difference being Ethernet padding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FrameSize {
    frame: u16,
    l3: u16,
    /// IP header length: 20 (IPv4) or 40 (IPv6); says where the UDP
    /// payload starts for L4 accounting. Absent in older records: IPv4.
    #[serde(default = "ipv4_header", skip_serializing_if = "is_ipv4_header")]
    ip_header: u8,
}

fn ipv4_header() -> u8 {
    IPV4_HEADER_LEN as u8
}

fn is_ipv4_header(h: &u8) -> bool {
    *h == IPV4_HEADER_LEN as u8
}

impl FrameSize {
    /// A frame of exactly `frame` bytes including the FCS (64..=9018).
    pub fn from_frame(frame: u64) -> Result<Self, UnitError> {
        if !(MIN_FRAME_SIZE as u64..=MAX_FRAME_SIZE as u64).contains(&frame) {
            return Err(UnitError::FrameSize(frame));
        }
        let frame = frame as u16;
        Ok(FrameSize {
            frame,
            l3: frame - L2_OVERHEAD,
            ip_header: ipv4_header(),
        })
    }

    /// A frame of exactly `frame` bytes (FCS included) carrying `encap`'s
    /// headers: refused, naming the smallest size, when they and the
    /// signature do not fit (an IPv6 frame needs 78 bytes).
    pub fn from_frame_in(frame: u64, encap: &Encap) -> Result<Self, UnitError> {
        FrameSize::from_frame(frame)?;
        let min = encap.min_frame();
        if frame < min as u64 {
            return Err(UnitError::FrameTooSmall {
                frame,
                encap: encap.to_string(),
                min,
                layout: layout_text(encap),
            });
        }
        let frame = frame as u16;
        Ok(FrameSize {
            frame,
            l3: frame - encap.l2_overhead(),
            ip_header: encap.ip.header_len() as u8,
        })
    }

    /// The frame that carries an IP packet of `l3` bytes in `encap`, padded to 64.
    pub fn from_l3_in(l3: u64, encap: &Encap) -> Result<Self, UnitError> {
        let min = encap.min_l3();
        if !(min as u64..=MAX_L3_LENGTH as u64).contains(&l3) {
            return Err(if encap.is_default() {
                UnitError::L3Length(l3)
            } else {
                UnitError::L3LengthIn {
                    l3,
                    encap: encap.to_string(),
                    min,
                }
            });
        }
        let l3 = l3 as u16;
        Ok(FrameSize {
            frame: (l3 + encap.l2_overhead()).max(MIN_FRAME_SIZE),
            l3,
            ip_header: encap.ip.header_len() as u8,
        })
    }

    /// The frame carrying a UDP payload of `payload` bytes in `encap`
    /// (IPv6: 1452 fills a 1500-byte MTU, a 1518-byte frame).
    pub fn from_udp_payload_in(payload: u64, encap: &Encap) -> Result<Self, UnitError> {
        let headers = (encap.ip.header_len() + UDP_HEADER_LEN) as u64;
        FrameSize::from_l3_in(payload + headers, encap).map_err(|_| {
            if encap.is_default() {
                UnitError::UdpPayload(payload)
            } else {
                UnitError::UdpPayloadIn {
                    payload,
                    encap: encap.to_string(),
                    max: MAX_L3_LENGTH as u64 - headers,
                }
            }
        })
    }

    /// The same frame size carrying `encap`'s headers (the L3 length
    /// shrinks by the tag): for sizes given as frame sizes, such as the
    /// members of a mix.
    pub fn in_encap(self, encap: &Encap) -> Result<Self, UnitError> {
        FrameSize::from_frame_in(self.frame as u64, encap)
    }

    /// The frame that carries an IP packet of `l3` bytes (40..=9000), padded to 64.
    pub fn from_l3(l3: u64) -> Result<Self, UnitError> {
        if !(MIN_L3_LENGTH as u64..=MAX_L3_LENGTH as u64).contains(&l3) {
            return Err(UnitError::L3Length(l3));
        }
        let l3 = l3 as u16;
        Ok(FrameSize {
            frame: (l3 + L2_OVERHEAD).max(MIN_FRAME_SIZE),
            l3,
            ip_header: ipv4_header(),
        })
    }

    /// The frame carrying a UDP payload of `payload` bytes (the size
    /// LanTraffic and iperf set): IPv4 + UDP headers add 28, Ethernet 18.
    /// 1472 is the largest payload a 1500-byte MTU carries unfragmented.
    pub fn from_udp_payload(payload: u64) -> Result<Self, UnitError> {
        let l3 = payload + (IPV4_HEADER_LEN + UDP_HEADER_LEN) as u64;
        FrameSize::from_l3(l3).map_err(|_| UnitError::UdpPayload(payload))
    }

    /// Frame size on the wire including FCS and any padding.
    pub fn frame(self) -> u16 {
        self.frame
    }

    /// IP packet length (IPv4 total length).
    pub fn l3(self) -> u16 {
        self.l3
    }

    /// Bytes the port hands to the NIC: the frame without the FCS the NIC appends.
    pub fn buffer_len(self) -> usize {
        self.frame as usize - FCS_LEN
    }

    /// UDP payload bytes (the signature lives at its start).
    pub fn l4_payload(self) -> u16 {
        self.l3 - self.ip_header as u16 - UDP_HEADER_LEN as u16
    }

    /// True when the frame carries Ethernet padding after the IP packet
    /// (untagged; a tagged frame's header is 4 bytes longer).
    pub fn padded(self) -> bool {
        self.l3 + L2_OVERHEAD < self.frame
    }

    /// Bytes counted per frame at a layer.
    pub fn bytes_at(self, layer: Layer) -> u64 {
        match layer {
            Layer::L1 => self.frame as u64 + PREAMBLE_AND_GAP as u64,
            Layer::L2 => self.frame as u64,
            Layer::L3 => self.l3 as u64,
            Layer::L4 => self.l4_payload() as u64,
        }
    }

    /// Megabits per second that `fps` frames per second make at a layer.
    pub fn mbps(self, fps: f64, layer: Layer) -> f64 {
        fps * self.bytes_at(layer) as f64 * 8.0 / 1e6
    }

    /// The most frames per second a link of `line_bps` carries (L1 accounting).
    pub fn line_rate_fps(self, line_bps: u64) -> f64 {
        line_bps as f64 / (8.0 * self.bytes_at(Layer::L1) as f64)
    }
}

impl fmt::Display for FrameSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.frame)
    }
}

/// A constant rate as the user writes it; turned into frames/s once the
/// frame size and the line speed are known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Rate {
    /// Frames per second.
    Fps(f64),
    /// Bits per second counted at a layer (`300Mbps` is L2, `300Mbps@L1` is L1).
    Bps { bps: f64, layer: Layer },
    /// Percent of line rate, computed at L1 so it means what it means on hardware.
    PercentOfLine(f64),
}

impl Rate {
    /// Parses `50%`, `100000fps`, `100kfps`, `1.5Mpps`, `300Mbps`, `1Gbps`, `300Mbps@L1`.
    pub fn parse(text: &str) -> Result<Rate, UnitError> {
        let bad = || UnitError::RateSyntax(text.to_string());
        let s = text.trim();
        let (s, layer) = match s.rsplit_once('@') {
            Some((v, l)) => (v, parse_layer(l).ok_or_else(bad)?),
            None => (s, Layer::L2),
        };
        let split = s
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
            .ok_or_else(bad)?;
        let (num, unit) = s.split_at(split);
        let value: f64 = num.replace('_', "").parse().map_err(|_| bad())?;
        if !value.is_finite() {
            return Err(bad());
        }
        let unit_lc = unit.trim().to_ascii_lowercase();
        let rate = match unit_lc.as_str() {
            "%" => Rate::PercentOfLine(value),
            "fps" | "pps" => Rate::Fps(value),
            "kfps" | "kpps" => Rate::Fps(value * 1e3),
            "mfps" | "mpps" => Rate::Fps(value * 1e6),
            "bps" => Rate::Bps { bps: value, layer },
            "kbps" => Rate::Bps {
                bps: value * 1e3,
                layer,
            },
            "mbps" => Rate::Bps {
                bps: value * 1e6,
                layer,
            },
            "gbps" => Rate::Bps {
                bps: value * 1e9,
                layer,
            },
            _ => return Err(bad()),
        };
        if value <= 0.0 {
            return Err(UnitError::RateZero(text.to_string()));
        }
        // A finite number times its unit can still overflow (a 300-digit
        // Gbps): an infinite rate is no rate.
        let scaled = match rate {
            Rate::Fps(v) | Rate::PercentOfLine(v) => v,
            Rate::Bps { bps, .. } => bps,
        };
        if !scaled.is_finite() {
            return Err(bad());
        }
        Ok(rate)
    }

    /// Frames per second for frames of `frame` on a link of `line_bps`.
    pub fn to_fps(self, frame: FrameSize, line_bps: u64) -> f64 {
        self.to_fps_mean(|layer| frame.bytes_at(layer) as f64, line_bps)
    }

    /// Frames per second for frames whose mean size at each layer is
    /// `bytes_at(layer)` (a frame-size mix) on a link of `line_bps`.
    pub fn to_fps_mean(self, bytes_at: impl Fn(Layer) -> f64, line_bps: u64) -> f64 {
        match self {
            Rate::Fps(fps) => fps,
            Rate::Bps { bps, layer } => bps / (8.0 * bytes_at(layer)),
            Rate::PercentOfLine(pct) => line_bps as f64 / (8.0 * bytes_at(Layer::L1)) * pct / 100.0,
        }
    }
}

fn parse_layer(s: &str) -> Option<Layer> {
    match s.trim().to_ascii_uppercase().as_str() {
        "L1" => Some(Layer::L1),
        "L2" => Some(Layer::L2),
        "L3" => Some(Layer::L3),
        "L4" => Some(Layer::L4),
        _ => None,
    }
}

/// Parses a line speed: `10G`, `1G`, `100M`, `25000M`, `10000000000` (bits/s).
pub fn parse_line_speed(text: &str) -> Result<u64, UnitError> {
    let bad = || UnitError::LineSpeed(text.to_string());
    let s = text.trim().to_ascii_lowercase();
    let s = s.trim_end_matches("bps").trim_end_matches("bit/s");
    let (num, mult) = match s.chars().last() {
        Some('g') => (&s[..s.len() - 1], 1e9),
        Some('m') => (&s[..s.len() - 1], 1e6),
        Some('k') => (&s[..s.len() - 1], 1e3),
        _ => (s, 1.0),
    };
    let v: f64 = num.trim().parse().map_err(|_| bad())?;
    if !(v.is_finite() && v > 0.0) {
        return Err(bad());
    }
    // Below half a bit per second rounds to 0 (".1bps"): no line speed.
    match (v * mult).round() {
        bps if bps >= 1.0 => Ok(bps as u64),
        _ => Err(bad()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_rate_matches_the_reference_arithmetic() {
        // 10 Gbit/s: 14,880,952 frames/s at 64 bytes, 812,743 at 1518.
        let f64b = FrameSize::from_frame(64).unwrap();
        let f1518 = FrameSize::from_frame(1518).unwrap();
        assert_eq!(f64b.line_rate_fps(10_000_000_000).floor(), 14_880_952.0);
        assert_eq!(f1518.line_rate_fps(10_000_000_000).floor(), 812_743.0);
    }

    #[test]
    fn udp_payload_of_a_512_byte_frame_is_466() {
        let f = FrameSize::from_frame(512).unwrap();
        assert_eq!(f.l3(), 494);
        assert_eq!(f.bytes_at(Layer::L3) - 20, 474); // the UDP datagram
        assert_eq!(f.l4_payload(), 466);
    }

    #[test]
    fn cisco_l1_rate_of_a_64_byte_frame() {
        // 9343 packets/s x 102 bytes on wire... the report counts L3 64 + 38.
        let f = FrameSize::from_l3(64).unwrap();
        assert_eq!(f.frame(), 82);
        assert!((f.mbps(9343.0, Layer::L1) - 7.623888).abs() < 1e-6);
    }

    #[test]
    fn short_l3_packets_are_padded_to_64() {
        let f = FrameSize::from_l3(40).unwrap();
        assert_eq!((f.frame(), f.l3(), f.l4_payload()), (64, 40, 12));
        assert!(f.padded());
        assert!(!FrameSize::from_frame(64).unwrap().padded());
    }

    #[test]
    fn sizes_out_of_range_are_refused() {
        assert!(FrameSize::from_frame(63).is_err());
        assert!(FrameSize::from_frame(9019).is_err());
        assert!(FrameSize::from_l3(39).is_err());
        assert!(FrameSize::from_l3(9001).is_err());
    }

    #[test]
    fn rates_parse_with_their_layer() {
        let f = FrameSize::from_frame(64).unwrap();
        assert_eq!(Rate::parse("100000fps").unwrap(), Rate::Fps(100_000.0));
        assert_eq!(Rate::parse("1.5Mpps").unwrap(), Rate::Fps(1_500_000.0));
        let half = Rate::parse("50%").unwrap().to_fps(f, 10_000_000_000);
        assert!((half - 7_440_476.19).abs() < 0.01);
        let l2 = Rate::parse("512Mbps").unwrap().to_fps(f, 0);
        assert!((l2 - 1_000_000.0).abs() < 1e-6);
        let l1 = Rate::parse("672Mbps@L1").unwrap().to_fps(f, 0);
        assert!((l1 - 1_000_000.0).abs() < 1e-6);
        let huge = format!("1{}Gbps", "0".repeat(305)); // finite, but not times 1e9
        for bad in [
            "",
            "fast",
            "10",
            "-5%",
            "0fps",
            "5 furlongs",
            "1e400fps",
            &huge,
        ] {
            assert!(Rate::parse(bad).is_err(), "{bad} should be refused");
        }
    }

    #[test]
    fn line_speeds_parse() {
        assert_eq!(parse_line_speed("10G").unwrap(), 10_000_000_000);
        assert_eq!(parse_line_speed("1000M").unwrap(), 1_000_000_000);
        assert_eq!(parse_line_speed("25Gbps").unwrap(), 25_000_000_000);
        assert!(parse_line_speed("fast").is_err());
        assert!(parse_line_speed("0G").is_err());
        assert!(parse_line_speed(".1bps").is_err());
    }

    #[test]
    fn udp_payloads_map_to_frames_as_lantraffic_counts() {
        // LanTraffic's largest unfragmented IPv4 UDP payload fills a 1518-byte frame.
        let f = FrameSize::from_udp_payload(1472).unwrap();
        assert_eq!((f.frame(), f.l3(), f.l4_payload()), (1518, 1500, 1472));
        // Its 160-byte packet-rate payload.
        assert_eq!(FrameSize::from_udp_payload(160).unwrap().frame(), 206);
        // 12 bytes (the signature) is the least, padded to 64.
        assert_eq!(FrameSize::from_udp_payload(12).unwrap().frame(), 64);
        assert_eq!(
            FrameSize::from_udp_payload(11),
            Err(UnitError::UdpPayload(11))
        );
        assert_eq!(
            FrameSize::from_udp_payload(8973),
            Err(UnitError::UdpPayload(8973))
        );
    }
}
