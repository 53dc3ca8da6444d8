//! How a test frame is encapsulated: IPv4 or IPv6 (RFC 5180), with or
//! without one 802.1Q VLAN tag. Every header offset follows from it.
//!
//! ```text
//!                      IPv4   IPv4+VLAN   IPv6   IPv6+VLAN
//! IP header at           14          18     14          18
//! UDP header at          34          38     54          58
//! signature at           42          46     62          66
//! smallest frame (FCS)   64          64     78          82
//! ```
//!
//! The smallest frame is the 64-byte Ethernet minimum or, when bigger,
//! the headers + 12-byte signature + 4-byte FCS: 14 + 40 + 8 + 12 + 4 = 78
//! for IPv6 (RFC 5180 section 5.1.1 discusses why 64 bytes cannot carry an
//! IPv6 test frame with a signature).

use crate::ethernet::{MacAddr, ETHERTYPE_IPV4, ETHERTYPE_VLAN, VLAN_TAG_LEN};
use crate::lengths::{
    ETH_HEADER_LEN, FCS_LEN, IPV4_HEADER_LEN, IPV6_HEADER_LEN, MIN_FRAME_SIZE, UDP_HEADER_LEN,
};
use crate::signature::SIGNATURE_LEN;
use serde::{Deserialize, Serialize};
use std::fmt;

/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86DD;

/// The IP version of test frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum IpVersion {
    #[default]
    #[serde(rename = "IPv4")]
    V4,
    #[serde(rename = "IPv6")]
    V6,
}

impl IpVersion {
    pub fn header_len(self) -> usize {
        match self {
            IpVersion::V4 => IPV4_HEADER_LEN,
            IpVersion::V6 => IPV6_HEADER_LEN,
        }
    }

    pub fn ethertype(self) -> u16 {
        match self {
            IpVersion::V4 => ETHERTYPE_IPV4,
            IpVersion::V6 => ETHERTYPE_IPV6,
        }
    }

    /// "IPv4" or "IPv6".
    pub fn name(self) -> &'static str {
        match self {
            IpVersion::V4 => "IPv4",
            IpVersion::V6 => "IPv6",
        }
    }
}

/// One 802.1Q tag: VLAN id (1..4094) and priority code point (0..7).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct VlanTag {
    pub id: u16,
    pub pcp: u8,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--vlan '{0}' is not understood: write the VLAN id 1..4094, optionally with a priority 0..7 as ID:PCP (e.g. 100 or 100:5)")]
pub struct VlanParseError(pub String);

impl VlanTag {
    /// Parses `ID` or `ID:PCP`.
    pub fn parse(text: &str) -> Result<VlanTag, VlanParseError> {
        let bad = || VlanParseError(text.to_string());
        let (id, pcp) = match text.trim().split_once(':') {
            Some((i, p)) => (i, Some(p)),
            None => (text.trim(), None),
        };
        let id: u16 = id.trim().parse().map_err(|_| bad())?;
        let pcp: u8 = match pcp {
            Some(p) => p.trim().parse().map_err(|_| bad())?,
            None => 0,
        };
        if !(1..=4094).contains(&id) || pcp > 7 {
            return Err(bad());
        }
        Ok(VlanTag { id, pcp })
    }

    /// The tag control information: PCP (3 bits), DEI 0, VLAN id (12 bits).
    pub fn tci(self) -> u16 {
        (self.pcp as u16) << 13 | (self.id & 0x0FFF)
    }
}

/// IP version and VLAN tag of the test frames; the default is untagged IPv4.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Encap {
    pub ip: IpVersion,
    pub vlan: Option<VlanTag>,
}

impl Encap {
    /// Ethernet header plus the tag, if any: where the IP header starts.
    #[inline]
    pub fn ip_offset(&self) -> usize {
        ETH_HEADER_LEN + if self.vlan.is_some() { VLAN_TAG_LEN } else { 0 }
    }

    #[inline]
    pub fn udp_offset(&self) -> usize {
        self.ip_offset() + self.ip.header_len()
    }

    /// Where the signature starts: right after the UDP header.
    #[inline]
    pub fn signature_offset(&self) -> usize {
        self.udp_offset() + UDP_HEADER_LEN
    }

    /// Bytes of a frame around its IP packet: Ethernet header, tag and FCS.
    pub fn l2_overhead(&self) -> u16 {
        (self.ip_offset() + FCS_LEN) as u16
    }

    /// Smallest IP packet that carries the signature: IP + UDP headers + 12.
    pub fn min_l3(&self) -> u16 {
        (self.ip.header_len() + UDP_HEADER_LEN + SIGNATURE_LEN) as u16
    }

    /// Smallest frame (FCS included) that carries the signature.
    pub fn min_frame(&self) -> u16 {
        (self.min_l3() + self.l2_overhead()).max(MIN_FRAME_SIZE)
    }

    /// Writes the Ethernet header, with the tag when there is one, for a
    /// payload of `ethertype`; returns its length, or 0 if `buf` is too short.
    pub fn emit_l2(&self, buf: &mut [u8], dst: MacAddr, src: MacAddr, ethertype: u16) -> usize {
        let len = self.ip_offset();
        let Some(h) = buf.get_mut(..len) else {
            return 0;
        };
        h[0..6].copy_from_slice(&dst.0);
        h[6..12].copy_from_slice(&src.0);
        match self.vlan {
            Some(tag) => {
                h[12..14].copy_from_slice(&ETHERTYPE_VLAN.to_be_bytes());
                h[14..16].copy_from_slice(&tag.tci().to_be_bytes());
                h[16..18].copy_from_slice(&ethertype.to_be_bytes());
            }
            None => h[12..14].copy_from_slice(&ethertype.to_be_bytes()),
        }
        len
    }

    /// True for plain IPv4 without a tag (what results omit saying).
    pub fn is_default(&self) -> bool {
        *self == Encap::default()
    }
}

impl fmt::Display for Encap {
    /// "IPv4", "IPv6", "IPv6, VLAN 100", "IPv4, VLAN 100 PCP 5".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.ip.name())?;
        match self.vlan {
            Some(VlanTag { id, pcp: 0 }) => write!(f, ", VLAN {id}"),
            Some(VlanTag { id, pcp }) => write!(f, ", VLAN {id} PCP {pcp}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(ip: IpVersion, vlan: Option<u16>) -> Encap {
        Encap {
            ip,
            vlan: vlan.map(|id| VlanTag { id, pcp: 0 }),
        }
    }

    #[test]
    fn offsets_of_every_layout() {
        // (layout, ip, udp, signature, smallest frame)
        let table = [
            (enc(IpVersion::V4, None), 14, 34, 42, 64),
            (enc(IpVersion::V4, Some(100)), 18, 38, 46, 64),
            (enc(IpVersion::V6, None), 14, 54, 62, 78),
            (enc(IpVersion::V6, Some(100)), 18, 58, 66, 82),
        ];
        for (e, ip, udp, sig, min) in table {
            assert_eq!(
                (
                    e.ip_offset(),
                    e.udp_offset(),
                    e.signature_offset(),
                    e.min_frame()
                ),
                (ip, udp, sig, min),
                "{e}"
            );
        }
        // A tagged 64-byte IPv4 frame still holds the signature: 14+4+20+8+12+4 = 62.
        assert_eq!(enc(IpVersion::V4, Some(1)).min_l3() + 22, 62);
        assert_eq!(enc(IpVersion::V6, None).min_l3(), 60);
    }

    #[test]
    fn vlan_tags_parse_and_print() {
        assert_eq!(VlanTag::parse("100").unwrap(), VlanTag { id: 100, pcp: 0 });
        let t = VlanTag::parse("100:5").unwrap();
        assert_eq!(t.tci(), 0xA064);
        for bad in ["0", "4095", "x", "100:8", "100:", ""] {
            assert!(VlanTag::parse(bad).is_err(), "{bad}");
        }
        let e = Encap {
            ip: IpVersion::V6,
            vlan: Some(t),
        };
        assert_eq!(e.to_string(), "IPv6, VLAN 100 PCP 5");
        assert_eq!(enc(IpVersion::V4, Some(7)).to_string(), "IPv4, VLAN 7");
        assert_eq!(Encap::default().to_string(), "IPv4");
    }

    #[test]
    fn tagged_header_bytes() {
        let mut b = [0u8; 18];
        let e = Encap {
            ip: IpVersion::V6,
            vlan: Some(VlanTag { id: 100, pcp: 5 }),
        };
        assert_eq!(
            e.emit_l2(&mut b, MacAddr([1; 6]), MacAddr([2; 6]), ETHERTYPE_IPV6),
            18
        );
        assert_eq!(&b[12..18], &[0x81, 0x00, 0xA0, 0x64, 0x86, 0xDD]);
        assert_eq!(e.emit_l2(&mut b[..17], MacAddr::ZERO, MacAddr::ZERO, 0), 0);
    }
}
