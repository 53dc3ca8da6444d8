//! Ethernet II addressing and header helpers.
//!
//! Only what a tester needs: MAC addresses that print and parse the way
//! operators write them, and checked accessors into a raw frame so a
//! receiver can look at any bytes without risking a panic.

use std::fmt;
use std::str::FromStr;

pub use crate::units::ETH_HEADER_LEN;

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_ARP: u16 = 0x0806;
/// IEEE 802.1Q tag protocol identifier: a 4-byte tag sits before the real EtherType.
pub const ETHERTYPE_VLAN: u16 = 0x8100;
/// Length of one 802.1Q tag (TPID + TCI).
pub const VLAN_TAG_LEN: usize = 4;

/// A 48-bit IEEE MAC address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// The I/G bit (least significant bit of the first octet) marks group
    /// addresses; broadcast is a multicast address too.
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Reads a MAC from the first six bytes of `b`, if there are six.
    pub fn from_bytes(b: &[u8]) -> Option<MacAddr> {
        let a: [u8; 6] = b.get(..6)?.try_into().ok()?;
        Some(MacAddr(a))
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let a = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            a[0], a[1], a[2], a[3], a[4], a[5]
        )
    }
}

/// A MAC address that could not be parsed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MAC address '{0}' is not understood: write it as six hex pairs like aa:bb:cc:dd:ee:ff or aa-bb-cc-dd-ee-ff")]
pub struct MacParseError(pub String);

impl FromStr for MacAddr {
    type Err = MacParseError;

    /// Accepts six two-digit hex groups separated by all `:` or all `-`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || MacParseError(s.to_string());
        let t = s.trim();
        let sep = if t.contains(':') { ':' } else { '-' };
        let mut out = [0u8; 6];
        let mut n = 0;
        for part in t.split(sep) {
            if n == 6 || part.len() != 2 || !part.bytes().all(|c| c.is_ascii_hexdigit()) {
                return Err(bad());
            }
            out[n] = u8::from_str_radix(part, 16).map_err(|_| bad())?;
            n += 1;
        }
        if n != 6 {
            return Err(bad());
        }
        Ok(MacAddr(out))
    }
}

/// Destination MAC of a frame, if the frame is long enough to have one.
#[inline]
pub fn dst_mac(frame: &[u8]) -> Option<MacAddr> {
    MacAddr::from_bytes(frame.get(0..6)?)
}

/// Source MAC of a frame.
#[inline]
pub fn src_mac(frame: &[u8]) -> Option<MacAddr> {
    MacAddr::from_bytes(frame.get(6..12)?)
}

/// The outer EtherType (or TPID, 0x8100, when the frame is VLAN-tagged).
#[inline]
pub fn ethertype(frame: &[u8]) -> Option<u16> {
    read_u16(frame, 12)
}

/// Writes an untagged Ethernet II header into `buf[..14]`; false if `buf` is too short.
pub fn emit_header(buf: &mut [u8], dst: MacAddr, src: MacAddr, ethertype: u16) -> bool {
    let Some(h) = buf.get_mut(..ETH_HEADER_LEN) else {
        return false;
    };
    h[0..6].copy_from_slice(&dst.0);
    h[6..12].copy_from_slice(&src.0);
    h[12..14].copy_from_slice(&ethertype.to_be_bytes());
    true
}

/// Big-endian u16 at `off`, or None past the end. Shared by the parsers.
#[inline]
pub(crate) fn read_u16(b: &[u8], off: usize) -> Option<u16> {
    let w: [u8; 2] = b.get(off..off.checked_add(2)?)?.try_into().ok()?;
    Some(u16::from_be_bytes(w))
}

/// Big-endian u32 at `off`, or None past the end.
#[inline]
pub(crate) fn read_u32(b: &[u8], off: usize) -> Option<u32> {
    let w: [u8; 4] = b.get(off..off.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_be_bytes(w))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_prints_and_parses_both_separators() {
        let m = MacAddr([0xaa, 0xbb, 0xcc, 0x01, 0x02, 0xff]);
        assert_eq!(m.to_string(), "aa:bb:cc:01:02:ff");
        assert_eq!("aa:bb:cc:01:02:ff".parse::<MacAddr>().unwrap(), m);
        assert_eq!("AA-BB-CC-01-02-FF".parse::<MacAddr>().unwrap(), m);
        assert_eq!(m.to_string().parse::<MacAddr>().unwrap(), m);
    }

    #[test]
    fn bad_macs_are_refused_with_the_expected_form() {
        for bad in [
            "",
            "aa:bb:cc:dd:ee",
            "aa:bb:cc:dd:ee:ff:00",
            "aa:bb:cc:dd:ee:gg",
            "a:bb:cc:dd:ee:ff",
            "aa:bb-cc:dd:ee:ff",
            "aabbccddeeff",
            "+a:bb:cc:dd:ee:ff",
        ] {
            let e = bad.parse::<MacAddr>().unwrap_err();
            assert!(e.to_string().contains("aa:bb:cc:dd:ee:ff"), "{bad}");
        }
    }

    #[test]
    fn broadcast_and_multicast() {
        assert!(MacAddr::BROADCAST.is_broadcast());
        assert!(MacAddr::BROADCAST.is_multicast());
        assert!(MacAddr([0x01, 0, 0x5e, 0, 0, 1]).is_multicast());
        assert!(!MacAddr([0x02, 0, 0, 0, 0, 1]).is_multicast());
        assert!(!MacAddr::default().is_broadcast());
    }

    #[test]
    fn header_accessors_are_checked() {
        let mut f = [0u8; 14];
        let d = MacAddr([1, 2, 3, 4, 5, 6]);
        let s = MacAddr([7, 8, 9, 10, 11, 12]);
        assert!(emit_header(&mut f, d, s, ETHERTYPE_ARP));
        assert_eq!(dst_mac(&f), Some(d));
        assert_eq!(src_mac(&f), Some(s));
        assert_eq!(ethertype(&f), Some(ETHERTYPE_ARP));
        assert_eq!(ethertype(&f[..13]), None);
        assert_eq!(src_mac(&f[..11]), None);
        assert_eq!(dst_mac(&[]), None);
        assert!(!emit_header(&mut f[..13], d, s, 0));
        assert_eq!(read_u16(&f, usize::MAX), None);
        assert_eq!(read_u32(&f, usize::MAX - 1), None);
    }
}
