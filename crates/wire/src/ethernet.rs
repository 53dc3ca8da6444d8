//! Ethernet II addressing and header helpers.
//!
//! Only what a tester needs: MAC addresses that print and parse the way
//! operators write them, and [`EthernetFrame`], a view of a raw frame's
//! header that a receiver can put over any bytes without risking a panic.

use std::fmt;
use std::str::FromStr;

pub use crate::lengths::ETH_HEADER_LEN;

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

/// A zero-copy view of an Ethernet II frame: it borrows the bytes (`&[u8]`
/// to read, `&mut [u8]` to write too) and reads each field where it lies.
/// [`new_checked`](Self::new_checked) makes sure the 14-byte header is
/// there, so the accessors need no check of their own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

/// Where the header's fields lie.
mod field {
    use std::ops::Range;
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    /// After an 802.1Q tag's TPID (at ETHERTYPE) and TCI: the real EtherType.
    pub const TAGGED_ETHERTYPE: Range<usize> = 16..18;
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// A view of `buffer` as it is, header or not: an accessor panics on
    /// a buffer shorter than the 14-byte header.
    #[inline]
    pub fn new_unchecked(buffer: T) -> EthernetFrame<T> {
        EthernetFrame { buffer }
    }

    /// A view of `buffer`, if it holds the 14-byte header.
    #[inline]
    pub fn new_checked(buffer: T) -> Option<EthernetFrame<T>> {
        (buffer.as_ref().len() >= ETH_HEADER_LEN).then_some(EthernetFrame { buffer })
    }

    /// The bytes the view was made of.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    #[inline]
    pub fn dst_addr(&self) -> MacAddr {
        MacAddr(
            self.buffer.as_ref()[field::DST]
                .try_into()
                .expect("6 bytes"),
        )
    }

    #[inline]
    pub fn src_addr(&self) -> MacAddr {
        MacAddr(
            self.buffer.as_ref()[field::SRC]
                .try_into()
                .expect("6 bytes"),
        )
    }

    /// Both addresses as they lie, destination then source: one compare
    /// tells whether two frames go between the same two stations.
    #[inline]
    pub fn addresses(&self) -> [u8; 12] {
        self.buffer.as_ref()[field::DST.start..field::SRC.end]
            .try_into()
            .expect("12 bytes")
    }

    /// The outer EtherType (or TPID, 0x8100, when the frame is VLAN-tagged).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        let b = self.buffer.as_ref();
        u16::from_be_bytes([b[field::ETHERTYPE.start], b[field::ETHERTYPE.start + 1]])
    }

    /// What the frame carries, looking through one 802.1Q tag: its
    /// EtherType and where it starts in the frame (14, or 18 behind a
    /// tag). None: a tagged frame cut short in its tag.
    #[inline]
    pub fn network(&self) -> Option<(u16, usize)> {
        match self.ethertype() {
            ETHERTYPE_VLAN => Some((
                read_u16(self.buffer.as_ref(), field::TAGGED_ETHERTYPE.start)?,
                field::TAGGED_ETHERTYPE.end,
            )),
            et => Some((et, ETH_HEADER_LEN)),
        }
    }

    /// What follows the 14-byte header (a tag, if there is one, included).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[ETH_HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    #[inline]
    pub fn set_dst_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }

    #[inline]
    pub fn set_src_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }

    #[inline]
    pub fn set_ethertype(&mut self, ethertype: u16) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&ethertype.to_be_bytes());
    }

    /// What follows the 14-byte header, to write.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[ETH_HEADER_LEN..]
    }
}

/// Writes an untagged Ethernet II header into `buf[..14]`; false if `buf` is too short.
pub fn emit_header(buf: &mut [u8], dst: MacAddr, src: MacAddr, ethertype: u16) -> bool {
    let Some(mut f) = EthernetFrame::new_checked(buf) else {
        return false;
    };
    f.set_dst_addr(dst);
    f.set_src_addr(src);
    f.set_ethertype(ethertype);
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
        let e = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!((e.dst_addr(), e.src_addr()), (d, s));
        assert_eq!(e.addresses(), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(e.ethertype(), ETHERTYPE_ARP);
        assert_eq!(e.network(), Some((ETHERTYPE_ARP, 14)));
        assert!(e.payload().is_empty());
        assert_eq!(EthernetFrame::new_checked(&f[..13]), None);
        assert_eq!(EthernetFrame::new_checked(&[][..]), None);
        assert!(!emit_header(&mut f[..13], d, s, 0));
        assert_eq!(read_u16(&f, usize::MAX), None);
        assert_eq!(read_u32(&f, usize::MAX - 1), None);
    }

    #[test]
    fn network_layer_is_found_behind_one_tag() {
        let mut f = [0u8; 22];
        f[12..18].copy_from_slice(&[0x81, 0x00, 0x00, 0x64, 0x08, 0x00]);
        let e = EthernetFrame::new_checked(&f[..]).unwrap();
        assert_eq!(e.ethertype(), ETHERTYPE_VLAN);
        assert_eq!(e.network(), Some((ETHERTYPE_IPV4, 18)));
        assert_eq!(e.payload().len(), 8);
        // Cut short in the tag: no EtherType behind it.
        let cut = EthernetFrame::new_checked(&f[..17]).unwrap();
        assert_eq!(cut.network(), None);
        let mut m = EthernetFrame::new_unchecked(&mut f[..]);
        m.set_ethertype(ETHERTYPE_IPV4);
        m.payload_mut()[0] = 0x45;
        assert_eq!(m.network(), Some((ETHERTYPE_IPV4, 14)));
        assert_eq!(f[14], 0x45);
    }
}
