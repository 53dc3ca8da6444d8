//! Byte lengths of the headers a test frame is built of, and the limits on
//! frame sizes: constants only, the leaf that every module laying out or
//! measuring a frame takes its numbers from. [`units`](crate::units)
//! re-exports them under their old paths.

/// Ethernet II header: destination, source, EtherType.
pub const ETH_HEADER_LEN: usize = 14;
/// Frame check sequence, appended by the NIC.
pub const FCS_LEN: usize = 4;
/// Preamble + SFD (8) and inter-frame gap (12): what a frame costs on the wire beyond itself.
pub const PREAMBLE_AND_GAP: usize = 20;
pub const IPV4_HEADER_LEN: usize = 20;
/// The fixed IPv6 header (test frames carry no extension headers).
pub const IPV6_HEADER_LEN: usize = 40;
pub const UDP_HEADER_LEN: usize = 8;
/// Smallest Ethernet frame (FCS included); shorter frames are padded.
pub const MIN_FRAME_SIZE: u16 = 64;
/// Largest frame accepted: a 9000-byte jumbo MTU plus header and FCS.
pub const MAX_FRAME_SIZE: u16 = 9018;
/// Smallest IP packet accepted: IPv4 + UDP headers + a 12-byte signature.
pub const MIN_L3_LENGTH: u16 = 40;
pub const MAX_L3_LENGTH: u16 = 9000;
/// Bytes around an IP packet in an untagged frame: Ethernet header + FCS.
pub const L2_OVERHEAD: u16 = (ETH_HEADER_LEN + FCS_LEN) as u16;
