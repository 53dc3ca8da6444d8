//! Flows: header fields that change from frame to frame, as pktgen-dpdk's
//! `range` command makes them (start, min, max, step; increment,
//! decrement or random), so one stream covers many flows: the 100GE
//! report's "254 destination IP addresses" or "random src ports".
//!
//! A range is written `FIELD=MIN..MAX[/OPTION...]`, options `inc` (the
//! default), `dec`, `random`, `step=N` (default 1; for addresses also
//! dotted, `0.0.0.1`) and `start=V` (default MIN for inc, MAX for dec):
//!
//! ```text
//! dst-ip=198.19.0.2..198.19.0.254          pktgen: range 0 dst ip 198.19.0.2 198.19.0.2 198.19.0.254 0.0.0.1
//! src-port=53..1000/random                 random source ports
//! src-mac=02:00:00:00:00:01..02:00:00:00:00:40/step=2
//! ```
//!
//! Frame `n` of a stream (its sequence number) gets, for each range:
//! - `inc`: `min + (start - min + n * step) mod span`,
//! - `dec`: `max - (max - start + n * step) mod span`,
//! - `random`: `min + h(n) mod span`, `h` a fixed 64-bit mix of `n` and
//!   the field (splitmix64), so every run sends the same "random" flows and
//!   the in-kernel generator computes the very same values,
//!
//! where `span = max - min + 1`. Every range advances with every frame, as
//! pktgen's do. The IPv4 header checksum and the UDP checksum are updated
//! incrementally (RFC 1624) for the fields that enter them.
//!
//! Offsets follow the frames' layout ([`Encap`]: a VLAN tag moves every
//! field after the MACs 4 bytes on, IPv6 moves the ports 20 bytes on).
//! `src-ip`/`dst-ip` ranges take IPv4 addresses only: with IPv6 they are
//! refused ([`Flows::for_encap`]); vary the ports or MACs instead.

use crate::checksum::fold;
use crate::encap::{Encap, IpVersion};
use crate::ethernet::{read_u32, EthernetFrame, ETHERTYPE_IPV4};
use crate::ipv4;
use std::net::Ipv4Addr;

/// Most ranges at once: one per field.
pub const MAX_RANGES: usize = 6;

/// A header field a range can vary.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    SrcMac,
    DstMac,
    SrcIp,
    DstIp,
    SrcPort,
    DstPort,
}

impl Field {
    /// Offset of the field in an untagged IPv4 frame (Ethernet II / IPv4
    /// without options / UDP).
    pub fn offset(self) -> usize {
        self.offset_in(&Encap::default())
    }

    /// Offset of the field in a frame of `encap`'s layout.
    pub fn offset_in(self, encap: &Encap) -> usize {
        match self {
            Field::DstMac => 0,
            Field::SrcMac => 6,
            Field::SrcIp => encap.ip_offset() + ipv4::SRC_OFFSET,
            Field::DstIp => encap.ip_offset() + ipv4::DST_OFFSET,
            Field::SrcPort => encap.udp_offset(),
            Field::DstPort => encap.udp_offset() + 2,
        }
    }

    /// The IPv4 address this field (SrcIp or DstIp) holds in an Ethernet
    /// frame, with or without an 802.1Q tag, as a number; None for another
    /// field, a frame that is not IPv4, or one cut short before it.
    #[inline]
    pub fn ipv4_in(self, frame: &[u8]) -> Option<u32> {
        let at = match self {
            Field::SrcIp => ipv4::SRC_OFFSET,
            Field::DstIp => ipv4::DST_OFFSET,
            _ => return None,
        };
        match EthernetFrame::new_checked(frame)?.network()? {
            (ETHERTYPE_IPV4, ip) => read_u32(frame, ip + at),
            _ => None,
        }
    }

    /// Bytes of the field.
    pub fn width(self) -> usize {
        match self {
            Field::SrcMac | Field::DstMac => 6,
            Field::SrcIp | Field::DstIp => 4,
            Field::SrcPort | Field::DstPort => 2,
        }
    }

    /// Whether the IPv4 header checksum covers it.
    pub fn in_ip_checksum(self) -> bool {
        matches!(self, Field::SrcIp | Field::DstIp)
    }

    /// Whether the UDP checksum covers it (ports, and addresses through
    /// the pseudo-header).
    pub fn in_udp_checksum(self) -> bool {
        !matches!(self, Field::SrcMac | Field::DstMac)
    }

    fn parse(s: &str) -> Option<Field> {
        Some(
            match s.trim().to_ascii_lowercase().replace('_', "-").as_str() {
                "src-mac" => Field::SrcMac,
                "dst-mac" => Field::DstMac,
                "src-ip" => Field::SrcIp,
                "dst-ip" => Field::DstIp,
                "src-port" => Field::SrcPort,
                "dst-port" => Field::DstPort,
                _ => return None,
            },
        )
    }

    /// The number a field's text stands for (a MAC, an address, a port).
    fn value(self, s: &str) -> Option<u64> {
        let s = s.trim();
        match self {
            Field::SrcMac | Field::DstMac => {
                let parts: Vec<&str> = s.split(':').collect();
                if parts.len() != 6 {
                    return None;
                }
                parts.iter().try_fold(0u64, |acc, p| {
                    u8::from_str_radix(p, 16).ok().map(|b| acc << 8 | b as u64)
                })
            }
            Field::SrcIp | Field::DstIp => s.parse::<Ipv4Addr>().ok().map(|a| u32::from(a) as u64),
            Field::SrcPort | Field::DstPort => s.parse::<u16>().ok().map(u64::from),
        }
    }

    /// A value of this field as the user writes it.
    fn format(self, v: u64) -> String {
        match self {
            Field::SrcMac | Field::DstMac => {
                let b = v.to_be_bytes();
                crate::MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]]).to_string()
            }
            Field::SrcIp | Field::DstIp => Ipv4Addr::from(v as u32).to_string(),
            Field::SrcPort | Field::DstPort => v.to_string(),
        }
    }

    /// The field as `--range` names it (`src-ip`).
    pub fn name(self) -> &'static str {
        match self {
            Field::SrcMac => "src-mac",
            Field::DstMac => "dst-mac",
            Field::SrcIp => "src-ip",
            Field::DstIp => "dst-ip",
            Field::SrcPort => "src-port",
            Field::DstPort => "dst-port",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Inc,
    Dec,
    Random,
}

impl Mode {
    /// The number the in-kernel generator uses for the mode.
    pub fn code(self) -> u8 {
        match self {
            Mode::Inc => 0,
            Mode::Dec => 1,
            Mode::Random => 2,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlowError {
    #[error("range '{0}' is not understood: write FIELD=MIN..MAX[/inc|/dec|/random][/step=N][/start=V], FIELD one of src-mac, dst-mac, src-ip, dst-ip, src-port, dst-port (e.g. dst-ip=198.19.0.2..198.19.0.254)")]
    Syntax(String),
    #[error("range '{0}': MIN is above MAX, or START/STEP is outside them: use MIN <= START <= MAX and a step from 1 to MAX - MIN + 1")]
    Bounds(String),
    #[error("range '{0}': this step over so wide a range overflows the 64-bit arithmetic that gives each frame its value: narrow the range or take a smaller step (their product must stay below 2^64)")]
    TooWide(String),
    #[error("field {0} has two ranges: give each field one --range")]
    Twice(&'static str),
    #[error("{0} takes IPv4 addresses and cannot vary IPv6 ones: with --ipv6 vary src-port, dst-port, src-mac or dst-mac instead")]
    Ipv6Address(&'static str),
}

/// One varying field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldRange {
    pub field: Field,
    pub start: u64,
    pub min: u64,
    pub max: u64,
    pub step: u64,
    pub mode: Mode,
}

impl FieldRange {
    pub fn parse(text: &str) -> Result<FieldRange, FlowError> {
        let bad = || FlowError::Syntax(text.to_string());
        let (field, rest) = text.split_once('=').ok_or_else(bad)?;
        let field = Field::parse(field).ok_or_else(bad)?;
        let mut opts = rest.split('/');
        let (lo, hi) = opts
            .next()
            .and_then(|r| r.split_once(".."))
            .ok_or_else(bad)?;
        let min = field.value(lo).ok_or_else(bad)?;
        let max = field.value(hi).ok_or_else(bad)?;
        let (mut mode, mut step, mut start) = (Mode::Inc, 1u64, None);
        for o in opts {
            match o.trim() {
                "inc" => mode = Mode::Inc,
                "dec" => mode = Mode::Dec,
                "random" => mode = Mode::Random,
                o => {
                    if let Some(v) = o.strip_prefix("step=") {
                        step = v
                            .parse::<u64>()
                            .ok()
                            .or_else(|| v.parse::<Ipv4Addr>().ok().map(|a| u32::from(a) as u64))
                            .ok_or_else(bad)?;
                    } else if let Some(v) = o.strip_prefix("start=") {
                        start = Some(field.value(v).ok_or_else(bad)?);
                    } else {
                        return Err(bad());
                    }
                }
            }
        }
        let start = start.unwrap_or(if mode == Mode::Dec { max } else { min });
        if min > max || !(min..=max).contains(&start) || step == 0 || step > max - min + 1 {
            return Err(FlowError::Bounds(text.to_string()));
        }
        // `value` computes (start - min) + (n mod span) * (step mod span)
        // in 64 bits, as the in-kernel generator does: the largest it can
        // be must fit, or a MAC range wider than 2^32 with a large step
        // wraps and its frames no longer step by `step`.
        let span = max - min + 1;
        if (span - 1).checked_mul(step % span + 1).is_none() {
            return Err(FlowError::TooWide(text.to_string()));
        }
        Ok(FieldRange {
            field,
            start,
            min,
            max,
            step,
            mode,
        })
    }

    /// The range in the form it is parsed from, every option spelled out.
    pub fn describe(&self) -> String {
        let mode = match self.mode {
            Mode::Inc => "inc",
            Mode::Dec => "dec",
            Mode::Random => "random",
        };
        let f = self.field;
        let mut s = format!(
            "{}={}..{}/{mode}",
            f.name(),
            f.format(self.min),
            f.format(self.max)
        );
        if self.mode != Mode::Random {
            s += &format!("/step={}/start={}", self.step, f.format(self.start));
        }
        s
    }

    /// How many values the field takes.
    pub fn span(&self) -> u64 {
        self.max - self.min + 1
    }

    /// After how many frames the values repeat, which is also how many
    /// distinct values an inc/dec range takes: span / gcd(step, span) (a
    /// step of `block` over `count * block` addresses visits `count` of
    /// them). None for a random range.
    pub fn period(&self) -> Option<u64> {
        match self.mode {
            Mode::Random => None,
            Mode::Inc | Mode::Dec => Some(self.span() / gcd(self.step % self.span(), self.span())),
        }
    }

    /// The field's value in frame `n`.
    #[inline]
    pub fn value(&self, n: u64) -> u64 {
        let span = self.span();
        match self.mode {
            Mode::Inc => {
                self.min + ((self.start - self.min) + (n % span) * (self.step % span)) % span
            }
            Mode::Dec => {
                self.max - ((self.max - self.start) + (n % span) * (self.step % span)) % span
            }
            Mode::Random => self.min + splitmix64(n ^ (self.field as u64) << 56) % span,
        }
    }
}

/// The greatest common divisor (gcd(a, 0) = a).
pub fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// splitmix64's output function: a fixed, fast 64-bit mix (the xdp
/// generator has the same code).
#[inline]
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The ranges of a stream.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flows {
    pub ranges: Vec<FieldRange>,
    /// The layout of the frames the ranges rewrite (where the fields are).
    pub encap: Encap,
}

impl Flows {
    pub fn parse(texts: &[String]) -> Result<Flows, FlowError> {
        let mut ranges: Vec<FieldRange> = Vec::new();
        for t in texts {
            let r = FieldRange::parse(t)?;
            if ranges.iter().any(|x| x.field == r.field) {
                return Err(FlowError::Twice(r.field.name()));
            }
            ranges.push(r);
        }
        Ok(Flows {
            ranges,
            encap: Encap::default(),
        })
    }

    /// The same ranges for frames of `encap`'s layout; address ranges are
    /// refused for IPv6 (they hold IPv4 addresses).
    pub fn for_encap(self, encap: Encap) -> Result<Flows, FlowError> {
        if encap.ip == IpVersion::V6 {
            if let Some(r) = self.ranges.iter().find(|r| r.field.in_ip_checksum()) {
                return Err(FlowError::Ipv6Address(r.field.name()));
            }
        }
        Ok(Flows { encap, ..self })
    }

    /// Every range, as [`FieldRange::describe`] writes it.
    pub fn describe(&self) -> Vec<String> {
        self.ranges.iter().map(FieldRange::describe).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn range(&self, field: Field) -> Option<&FieldRange> {
        self.ranges.iter().find(|r| r.field == field)
    }

    /// Rewrites the varying fields of a frame built from a template for
    /// frame `n`, and fixes its IPv4 and UDP checksums. The frame must hold
    /// the template's values in those fields (as `FrameTemplate::write`
    /// leaves them).
    ///
    /// Without ranges this is one inlined test: the generators call it for
    /// every frame, and a call that returned at once still cost them about
    /// 4 % of a sending core (perf, af_xdp at 64 bytes).
    #[inline(always)]
    pub fn apply(&self, frame: &mut [u8], n: u64) {
        if !self.ranges.is_empty() {
            self.apply_ranges(frame, n);
        }
    }

    /// [`apply`](Self::apply) with ranges.
    #[inline(never)]
    fn apply_ranges(&self, frame: &mut [u8], n: u64) {
        let udp_offset = self.encap.udp_offset();
        if frame.len() < udp_offset + 8 {
            return;
        }
        // Ones-complement sums of (new - old) words for each checksum.
        let (mut ip_delta, mut udp_delta) = (0u32, 0u32);
        for r in &self.ranges {
            let (off, w) = (r.field.offset_in(&self.encap), r.field.width());
            let new = r.value(n).to_be_bytes();
            let new = &new[8 - w..];
            let mut d = 0u32;
            for i in (0..w).step_by(2) {
                let old = u16::from_be_bytes([frame[off + i], frame[off + i + 1]]);
                let nw = u16::from_be_bytes([new[i], new[i + 1]]);
                d += (!old) as u32 + nw as u32;
            }
            frame[off..off + w].copy_from_slice(new);
            if r.field.in_ip_checksum() {
                ip_delta += d;
            }
            if r.field.in_udp_checksum() {
                udp_delta += d;
            }
        }
        if ip_delta != 0 {
            patch_checksum(frame, self.encap.ip_offset() + 10, ip_delta, false);
        }
        if udp_delta != 0 {
            patch_checksum(frame, udp_offset + 6, udp_delta, true);
        }
    }
}

/// RFC 1624 eqn. 3: HC' = ~(~HC + sum of (~m + m')). A UDP checksum of 0
/// means "none" and is sent as 0xFFFF.
#[inline]
fn patch_checksum(frame: &mut [u8], at: usize, delta: u32, udp: bool) {
    let old = u16::from_be_bytes([frame[at], frame[at + 1]]);
    if udp && old == 0 {
        return; // no checksum in this frame
    }
    // `fold` folds the carries and complements.
    let mut c = fold((!old) as u32 + delta);
    if udp && c == 0 {
        c = 0xFFFF;
    }
    frame[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_step_visits_span_over_gcd_distinct_values() {
        let r = |text: &str| FieldRange::parse(text).unwrap();
        assert_eq!(r("dst-ip=198.19.0.2..198.19.0.254").period(), Some(253));
        // 100 tunnels, one host in each /25: 100 distinct addresses.
        let spread = r("src-ip=198.19.128.2..198.19.178.1/step=128");
        assert_eq!(spread.span(), 12_800);
        assert_eq!(spread.period(), Some(100));
        let distinct: std::collections::BTreeSet<u64> =
            (0..1000).map(|n| spread.value(n)).collect();
        assert_eq!(distinct.len(), 100);
        assert_eq!(r("src-port=1..10/step=10").period(), Some(1));
        assert_eq!(r("src-port=1..10/random").period(), None);
    }

    use super::*;
    use crate::classify::checksums_ok;
    use crate::template::{FlowSpec, FrameTemplate};
    use crate::{FrameSize, MacAddr, Signature};

    fn flows(v: &[&str]) -> Flows {
        Flows::parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn ranges_parse_in_every_form() {
        let r = FieldRange::parse("dst-ip=198.19.0.2..198.19.0.254").unwrap();
        assert_eq!(
            (r.field, r.mode, r.step, r.span()),
            (Field::DstIp, Mode::Inc, 1, 253)
        );
        assert_eq!(r.start, u32::from(Ipv4Addr::new(198, 19, 0, 2)) as u64);
        let r = FieldRange::parse("src-port=53..1000/random").unwrap();
        assert_eq!((r.min, r.max, r.mode), (53, 1000, Mode::Random));
        let r =
            FieldRange::parse("src-mac=02:00:00:00:00:01..02:00:00:00:00:40/step=2/dec").unwrap();
        assert_eq!(
            (r.min, r.max, r.start, r.step),
            (0x0200_0000_0001, 0x0200_0000_0040, 0x0200_0000_0040, 2)
        );
        let r =
            FieldRange::parse("dst-ip=10.0.0.0..10.0.1.255/step=0.0.1.0/start=10.0.0.5").unwrap();
        assert_eq!(r.step, 256);
        for bad in [
            "dst-ip",
            "dst-ip=1.2.3.4",
            "vlan=1..2",
            "dst-port=10..5",
            "dst-port=1..5/fast",
            "dst-port=1..5/step=0",
            "dst-port=1..5/start=9",
        ] {
            assert!(FieldRange::parse(bad).is_err(), "{bad}");
        }
        for text in [
            "dst-ip=198.19.0.2..198.19.0.254/inc/step=1/start=198.19.0.2",
            "src-mac=02:00:00:00:00:01..02:00:00:00:00:40/dec/step=2/start=02:00:00:00:00:3f",
            "src-port=53..1000/random",
        ] {
            let r = FieldRange::parse(text).unwrap();
            assert_eq!(r.describe(), text);
            assert_eq!(FieldRange::parse(&r.describe()).unwrap(), r);
        }
        // Wider than 2^44 with a step of 779043: n * step wrapped 64 bits.
        let wide = "src-mac=00:00:00:00:00:00..18:a1:a7:b9:14:95/step=779043";
        assert_eq!(
            FieldRange::parse(wide),
            Err(FlowError::TooWide(wide.to_string()))
        );
        let all = FieldRange::parse("dst-mac=00:00:00:00:00:00..ff:ff:ff:ff:ff:ff").unwrap();
        assert_eq!(all.value(u64::MAX), u64::MAX % (1 << 48));
        let twice = Flows::parse(&["dst-port=1..2".into(), "dst-port=3..4".into()]);
        assert_eq!(twice, Err(FlowError::Twice("dst-port")));
    }

    #[test]
    fn inc_dec_and_random_walk_their_range() {
        let r = FieldRange::parse("dst-port=10..14/step=2/start=12").unwrap();
        let v: Vec<u64> = (0..6).map(|n| r.value(n)).collect();
        assert_eq!(v, vec![12, 14, 11, 13, 10, 12], "inc wraps to min");
        let r = FieldRange::parse("dst-port=10..14/dec").unwrap();
        let v: Vec<u64> = (0..6).map(|n| r.value(n)).collect();
        assert_eq!(v, vec![14, 13, 12, 11, 10, 14], "dec wraps to max");
        // The 100GE report's 254 destinations: each taken once per 254 frames.
        let r = FieldRange::parse("dst-ip=10.22.23.1..10.22.23.254").unwrap();
        let mut seen: Vec<u64> = (0..254).map(|n| r.value(n)).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), 254);
        // Random: inside the range, reproducible, and spread over it.
        let r = FieldRange::parse("src-port=53..1000/random").unwrap();
        let v: Vec<u64> = (0..10_000).map(|n| r.value(n)).collect();
        assert!(v.iter().all(|x| (53..=1000).contains(x)));
        assert_eq!(v, (0..10_000).map(|n| r.value(n)).collect::<Vec<_>>());
        let mut d = v.clone();
        d.sort();
        d.dedup();
        assert!(d.len() > 900, "only {} distinct ports", d.len());
        // A huge n does not overflow.
        let r = FieldRange::parse("src-mac=00:00:00:00:00:00..ff:ff:ff:ff:ff:ff/step=3").unwrap();
        assert!(r.value(u64::MAX) <= r.max);
    }

    #[test]
    fn rewritten_frames_keep_valid_checksums() {
        let flow = FlowSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: Ipv4Addr::new(198, 18, 0, 2).into(),
            dst_ip: Ipv4Addr::new(198, 19, 0, 2).into(),
            src_port: 0x4C52,
            dst_port: 0x4C52,
            ttl: 64,
            vlan: None,
        };
        let f = flows(&[
            "dst-ip=198.19.0.2..198.19.0.254",
            "src-ip=198.18.0.2..198.18.0.9/random",
            "src-port=53..1000/random",
            "dst-port=1..65535/dec",
            "src-mac=02:00:00:00:00:01..02:00:00:00:00:05",
        ]);
        for size in [64u64, 65, 1518] {
            let t = FrameTemplate::new(&flow, FrameSize::from_frame(size).unwrap());
            let mut buf = vec![0u8; t.len()];
            for n in 0..2_000u64 {
                t.write(
                    &mut buf,
                    Signature {
                        stream: 3,
                        seq: n as u32,
                        tx_ts: (n * 7919) as u32,
                    },
                );
                f.apply(&mut buf, n);
                assert!(checksums_ok(&buf), "size {size} frame {n}");
                let dst = Ipv4Addr::new(buf[30], buf[31], buf[32], buf[33]);
                assert_eq!(u32::from(dst) as u64, f.ranges[0].value(n));
                let sport = u16::from_be_bytes([buf[34], buf[35]]) as u64;
                assert_eq!(sport, f.ranges[2].value(n));
                assert_eq!(buf[11] as u64, 1 + n % 5, "src MAC low byte");
            }
        }
    }

    #[test]
    fn ipv4_addresses_are_read_behind_a_tag_or_none() {
        let mut f = [0u8; 34];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[26..34].copy_from_slice(&[10, 1, 2, 3, 198, 19, 0, 2]);
        assert_eq!(Field::SrcIp.ipv4_in(&f), Some(0x0a01_0203));
        assert_eq!(Field::DstIp.ipv4_in(&f), Some(0xc613_0002));
        assert_eq!(Field::DstIp.ipv4_in(&f[..33]), None);
        assert_eq!(Field::SrcIp.ipv4_in(&f[..30]), Some(0x0a01_0203));
        assert_eq!(Field::SrcPort.ipv4_in(&f), None);
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0x00, 0x00, 0x64]);
        t.extend_from_slice(&f[12..]);
        assert_eq!(Field::DstIp.ipv4_in(&t), Some(0xc613_0002));
        t[16] = 0x86;
        assert_eq!(Field::DstIp.ipv4_in(&t), None);
        assert_eq!(Field::DstIp.ipv4_in(&t[..17]), None);
        f[12] = 0x86;
        assert_eq!(Field::SrcIp.ipv4_in(&f), None);
    }

    #[test]
    fn offsets_follow_the_layout_and_ipv6_refuses_address_ranges() {
        use crate::encap::VlanTag;
        let v6 = Encap {
            ip: IpVersion::V6,
            vlan: Some(VlanTag { id: 100, pcp: 0 }),
        };
        assert_eq!(Field::SrcPort.offset_in(&v6), 58);
        assert_eq!(Field::DstPort.offset_in(&v6), 60);
        assert_eq!(Field::SrcMac.offset_in(&v6), 6);
        assert_eq!(Field::DstIp.offset(), 30);
        let e = flows(&["dst-ip=198.19.0.2..198.19.0.9"])
            .for_encap(v6)
            .unwrap_err();
        assert!(e.to_string().contains("--ipv6"), "{e}");
        // Ports in tagged IPv6 frames keep the UDP checksum valid.
        let flow = FlowSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: "2001:2::2".parse().unwrap(),
            dst_ip: "2001:2:0:1::2".parse().unwrap(),
            src_port: 0x4C52,
            dst_port: 0x4C52,
            ttl: 64,
            vlan: v6.vlan,
        };
        let f = flows(&["src-port=53..1000/random", "dst-port=1..9"])
            .for_encap(v6)
            .unwrap();
        let t = FrameTemplate::new(&flow, FrameSize::from_frame_in(128, &v6).unwrap());
        let mut buf = vec![0u8; t.len()];
        for n in 0..500u64 {
            t.write(
                &mut buf,
                Signature {
                    stream: 1,
                    seq: n as u32,
                    tx_ts: 0,
                },
            );
            f.apply(&mut buf, n);
            assert!(checksums_ok(&buf), "frame {n}");
            assert_eq!(u16::from_be_bytes([buf[60], buf[61]]) as u64, 1 + n % 9);
        }
    }
}
