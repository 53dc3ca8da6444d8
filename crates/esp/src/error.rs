//! What can go wrong sealing, opening and framing ESP packets.
//!
//! Every error is one line that names the problem, because the receive path
//! counts them and the report prints the first of each kind: "integrity
//! check failed" and "replayed" mean different things about a gateway.

use crate::suite::EspSuite;

/// An ESP packet, key or frame the SA cannot use.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EspError {
    /// The packet carries another SPI than this inbound SA's. Not counted by
    /// the SA (the packet is not its); a demultiplexer should count it.
    #[error("ESP packet with unknown SPI {got:#010x} (this SA is {expected:#010x})")]
    UnknownSpi { expected: u32, got: u32 },
    /// The sequence number was received before (RFC 4303 §3.4.3).
    #[error("replayed ESP packet: sequence number {seq} was already received")]
    Replay { seq: u32 },
    /// The sequence number is left of the anti-replay window, or 0, which no
    /// sender uses (the first packet is 1).
    #[error("ESP sequence number {seq} is too old: left of the {window}-packet anti-replay window ending at {highest}")]
    TooOld { seq: u32, highest: u32, window: u32 },
    /// The ICV did not verify: wrong key, or the packet was altered.
    #[error("ESP integrity check failed (sequence number {seq})")]
    IcvFailure { seq: u32 },
    /// The packet cannot be ESP as the suite defines it.
    #[error("malformed ESP packet: {0}")]
    Malformed(#[from] Malformed),
    /// 2^32 - 1 packets were sent on this SA; without ESN the sequence number
    /// must not wrap (RFC 4303 §3.3.3), so IKE has to rekey.
    #[error("ESP sequence numbers of SPI {spi:#010x} are exhausted (2^32 - 1 packets sent): the SA must be rekeyed")]
    SequenceExhausted { spi: u32 },
    /// The buffer handed to seal or to the framing is too small.
    #[error("buffer of {have} bytes is too small: {need} needed")]
    BufferTooSmall { need: usize, have: usize },
    /// A packet too long for an IPv4 datagram.
    #[error("ESP packet of {len} bytes is longer than an IPv4 datagram can carry")]
    TooLong { len: usize },
    /// Keying material of the wrong length for the suite.
    #[error("{suite} needs a {expected}-byte {what} key, got {got} bytes")]
    KeyLength {
        suite: EspSuite,
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// The operating system's random number generator failed (CBC IVs need it).
    #[error("the system random number generator failed")]
    Random,
    /// A received frame that carries no ESP, IKE or NAT keepalive (another
    /// protocol, another port, an IPv4 fragment).
    #[error("frame is not ESP: {0}")]
    NotEsp(&'static str),
}

/// Why a packet is malformed. Counted together as `malformed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// Shorter than header, IV, one block of payload and trailer, and ICV.
    #[error("{len} bytes, shorter than the {min}-byte minimum")]
    TooShort { len: usize, min: usize },
    /// The encrypted part must be a whole number of cipher blocks (4 bytes
    /// for GCM, RFC 4303 §2.4).
    #[error("encrypted part of {len} bytes is not a multiple of the {block}-byte block")]
    NotBlockMultiple { len: usize, block: usize },
    /// The pad length byte points before the start of the payload.
    #[error("pad length {pad_len} exceeds the {available} bytes before the trailer")]
    PadLength { pad_len: usize, available: usize },
    /// The padding bytes are not 1, 2, 3, ... (RFC 4303 §2.4).
    #[error("padding bytes are not 1, 2, 3, ...")]
    BadPadding,
    /// The outer Ethernet, IPv4 or UDP header is cut short or inconsistent.
    #[error("bad outer header: {0}")]
    Frame(&'static str),
}

impl EspError {
    /// True for the errors an inbound SA counts as `malformed`.
    pub fn is_malformed(&self) -> bool {
        matches!(self, EspError::Malformed(_))
    }
}
