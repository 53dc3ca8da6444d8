//! The test signature carried at the start of every test frame's UDP payload.
//!
//! ```text
//!  0      2        4                8               12
//! +------+--------+----------------+----------------+
//! | 'LR' | stream |      seq       |     tx_ts      |   all big-endian
//! +------+--------+----------------+----------------+
//! ```
//!
//! Why 12 bytes: it must fit the smallest packet the Cisco report uses, a
//! 40-byte IPv4 packet (20 IP + 8 UDP + 12 payload). That leaves room for
//! only 32-bit sequence numbers and timestamps:
//!
//! * `seq` is 32 bits on the wire; the receiver extends it to 64 bits with
//!   [`extend_seq`], the way RTP does, so a trial can exceed 2^32 frames.
//! * `tx_ts` is the low 32 bits of a nanosecond clock. It wraps every
//!   2^32 ns = 4.29 s, so [`elapsed32`] measures latency correctly only below
//!   4.29 s; anything slower aliases. RFC 2544 latency on a working DUT is
//!   orders of magnitude smaller, and frames held that long count as lost
//!   once the trial's drain time ends anyway.
//!
//! # A late frame or a damaged timestamp?
//!
//! A 32-bit stamp alone cannot tell a frame held 3 s from one whose stamp
//! was moved 1.29 s into the future: both read 3 s. What tells them apart
//! is when the frame could have left ([`plausible_latency`]). The
//! generators stamp frame `n` of a stream with its scheduled send time
//! and never send a frame before it, so frame `n` left no earlier than
//! the trial's start plus `n` times the smallest interval between a
//! stream's frames ([`earliest_send_ns`]). A latency longer than the time
//! since then is impossible: the stamp lies in the future (or the past)
//! and the frame was damaged. So:
//!
//! * a frame the DUT held for any time up to 4.29 s is a late frame with
//!   its true latency, however long the trial;
//! * a stamp moved `d` into the future is caught whenever `d` exceeds the
//!   frame's latency and is below 4.29 s minus the sender's slack (how far
//!   behind its schedule the frame left, a pause of the generator
//!   included); a stamp moved `d` into the past is caught when `d` exceeds
//!   that slack. Smaller moves read as a shorter (longer) latency: no
//!   receiver can tell them from one;
//! * a frame whose earliest send time lies more than 4.29 s before its
//!   arrival cannot be judged (every 32-bit reading is possible): it
//!   counts with the latency it reads, modulo 4.29 s. With a known
//!   schedule this only happens to a frame held more than 4.29 s.
//!
//! With the payload check (`--frame-check payload`) the UDP checksum also
//! covers `tx_ts`, so a damaged stamp fails that check first.
//!
//! The magic lets the receiver tell our frames from other UDP traffic to the
//! same port without checksums in the hot path.

use crate::ethernet::{read_u16, read_u32};

pub const SIGNATURE_LEN: usize = 12;
/// "LR" in ASCII.
pub const SIGNATURE_MAGIC: u16 = 0x4C52;

/// Byte offsets of the fields inside the signature.
pub const MAGIC_OFFSET: usize = 0;
pub const STREAM_OFFSET: usize = 2;
pub const SEQ_OFFSET: usize = 4;
pub const TX_TS_OFFSET: usize = 8;

/// The per-frame fields a receiver needs: which stream, which frame, when sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signature {
    pub stream: u16,
    pub seq: u32,
    /// Low 32 bits of the transmit time in nanoseconds.
    pub tx_ts: u32,
}

impl Signature {
    /// Writes the signature, magic included, into `buf[..12]`.
    /// Returns false (writing nothing) when `buf` is shorter than 12 bytes.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) -> bool {
        let Some(b) = buf.get_mut(..SIGNATURE_LEN) else {
            return false;
        };
        b[0..2].copy_from_slice(&SIGNATURE_MAGIC.to_be_bytes());
        b[2..4].copy_from_slice(&self.stream.to_be_bytes());
        b[4..8].copy_from_slice(&self.seq.to_be_bytes());
        b[8..12].copy_from_slice(&self.tx_ts.to_be_bytes());
        true
    }

    /// Reads a signature from `buf[..12]`; None if too short or the magic differs.
    #[inline]
    pub fn parse(buf: &[u8]) -> Option<Signature> {
        if read_u16(buf, MAGIC_OFFSET)? != SIGNATURE_MAGIC {
            return None;
        }
        Some(Signature {
            stream: read_u16(buf, STREAM_OFFSET)?,
            seq: read_u32(buf, SEQ_OFFSET)?,
            tx_ts: read_u32(buf, TX_TS_OFFSET)?,
        })
    }

    /// The 16-bit words a frame's checksum covers that change per frame:
    /// stream, seq high/low, tx_ts high/low. Their sum is added to the
    /// template's precomputed partial sum.
    #[inline]
    pub(crate) fn word_sum(&self) -> u32 {
        self.stream as u32
            + (self.seq >> 16)
            + (self.seq & 0xFFFF)
            + (self.tx_ts >> 16)
            + (self.tx_ts & 0xFFFF)
    }
}

/// Extends a 32-bit sequence number to 64 bits: returns the value closest to
/// `highest` (the highest extended sequence seen so far) whose low 32 bits are
/// `seq32`, like RTP's extended sequence number.
///
/// Values up to 2^31 - 1 ahead or 2^31 behind `highest` are reachable, so
/// wrap is handled in both directions (a late frame from before a wrap maps
/// below it). Near 0 there is nothing below, so the candidate above is taken
/// instead of underflowing; near `u64::MAX` likewise the one below.
#[inline]
pub fn extend_seq(highest: u64, seq32: u32) -> u64 {
    // Signed distance from highest's low 32 bits, in -2^31..2^31.
    let delta = seq32.wrapping_sub(highest as u32) as i32 as i128;
    let v = highest as i128 + delta;
    if v < 0 {
        (v + (1 << 32)) as u64
    } else if v > u64::MAX as i128 {
        (v - (1 << 32)) as u64
    } else {
        v as u64
    }
}

/// Nanoseconds between a 32-bit transmit timestamp and a full receive time,
/// modulo 2^32 ns (4.29 s): see the module doc for why that bounds latency.
#[inline]
pub fn elapsed32(tx_ts: u32, rx_ns: u64) -> u64 {
    (rx_ns as u32).wrapping_sub(tx_ts) as u64
}

/// The earliest frame number `seq` of a stream can have left: the
/// trial's start `not_before_ns` plus `seq` times `interval_ns`, the
/// smallest interval between two frames of one stream (0: not known).
/// Saturates instead of overflowing.
#[inline]
pub fn earliest_send_ns(not_before_ns: u64, interval_ns: u64, seq: u64) -> u64 {
    not_before_ns.saturating_add(seq.saturating_mul(interval_ns))
}

/// The latency of a frame stamped `tx_ts` that arrived at `rx_ns`, if it
/// is possible for a frame that left no earlier than `earliest_ns`
/// ([`earliest_send_ns`]): at most the time since then. None when it is
/// longer, or the frame arrived before it could have left: the timestamp
/// is in the future, so the frame was damaged. Every clock here is the
/// receiver's, in ns.
#[inline]
pub fn plausible_latency(tx_ts: u32, rx_ns: u64, earliest_ns: u64) -> Option<u64> {
    let latency = elapsed32(tx_ts, rx_ns);
    (latency <= rx_ns.checked_sub(earliest_ns)?).then_some(latency)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emit_parse_roundtrip() {
        let s = Signature {
            stream: 0xBEEF,
            seq: 0x0102_0304,
            tx_ts: 0xA0B0_C0D0,
        };
        let mut b = [0u8; 12];
        assert!(s.emit(&mut b));
        assert_eq!(
            b,
            [0x4C, 0x52, 0xBE, 0xEF, 1, 2, 3, 4, 0xA0, 0xB0, 0xC0, 0xD0]
        );
        assert_eq!(Signature::parse(&b), Some(s));
        assert_eq!(Signature::parse(&b[..11]), None);
        b[0] = 0;
        assert_eq!(Signature::parse(&b), None);
        assert!(!s.emit(&mut [0u8; 11]));
        assert_eq!(Signature::parse(&[]), None);
    }

    #[test]
    fn extend_seq_follows_wraps() {
        const W: u64 = 1 << 32;
        assert_eq!(extend_seq(0, 0), 0);
        assert_eq!(extend_seq(0, 5), 5);
        assert_eq!(extend_seq(100, 90), 90);
        // Forward across a wrap.
        assert_eq!(extend_seq(W - 2, 3), W + 3);
        // A late frame from before the wrap.
        assert_eq!(extend_seq(W + 3, u32::MAX - 1), W - 2);
        // Near zero: nothing below, no underflow.
        assert_eq!(extend_seq(5, u32::MAX), u32::MAX as u64);
        assert_eq!(extend_seq(0, 0x8000_0000), 0x8000_0000);
        // Near the top: nothing above, no overflow.
        assert_eq!(extend_seq(u64::MAX, 0), u64::MAX - (W - 1));
        assert_eq!(extend_seq(u64::MAX, u32::MAX), u64::MAX);
        // Many wraps in.
        assert_eq!(extend_seq(7 * W + 10, 20), 7 * W + 20);
        assert_eq!(
            extend_seq(7 * W + 10, 0x7FFF_FFFF + 10),
            7 * W + 0x7FFF_FFFF + 10
        );
        assert_eq!(
            extend_seq(7 * W + 10, 0x8000_0000 + 10),
            6 * W + 0x8000_0000 + 10
        );
    }

    #[test]
    fn extend_seq_always_matches_low_bits() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let highest = x.rotate_left(x as u32 % 64) >> (x % 64);
            let seq = (x >> 11) as u32;
            let e = extend_seq(highest, seq);
            assert_eq!(e as u32, seq);
            assert!(e.abs_diff(highest) <= 1 << 32);
        }
    }

    #[test]
    fn elapsed_wraps_every_4_29_seconds() {
        assert_eq!(elapsed32(1000, 1500), 500);
        // Transmitted just before the 32-bit clock wrapped.
        assert_eq!(elapsed32(u32::MAX - 9, (1u64 << 32) + 10), 20);
        assert_eq!(elapsed32(0, 5 * (1u64 << 32) + 7), 7);
    }

    #[test]
    fn a_frame_held_longer_than_half_the_wrap_is_late_not_damaged() {
        const S: u64 = 1_000_000_000;
        let start = 1000 * S;
        // Sent 0.5 s into the trial, held 3 s by the DUT: elapsed32 is
        // above 2^31 ns, yet it left 3.5 s ago at the earliest.
        let sent = start + S / 2;
        let rx = sent + 3 * S;
        assert_eq!(plausible_latency(sent as u32, rx, start), Some(3 * S));
        // The same reading with a trial that began only 2 s ago: damaged.
        assert_eq!(plausible_latency(sent as u32, rx, rx - 2 * S), None);
        // A stamp 1 s in the future of a frame that took 10 us.
        let rx = sent + 10_000;
        assert_eq!(plausible_latency((sent + S) as u32, rx, start), None);
        // Exactly the time since the earliest send is possible, 1 ns more not.
        assert_eq!(plausible_latency(start as u32, start + 7, start), Some(7));
        assert_eq!(
            plausible_latency((start - 1) as u32, start + 7, start),
            None
        );
        // Arrived before it could have left.
        assert_eq!(plausible_latency(start as u32, start - 1, start), None);
    }

    #[test]
    fn the_schedule_bounds_each_frames_send_time() {
        const S: u64 = 1_000_000_000;
        let start = 50 * S;
        // 1,000 frames/s: frame 9,000 left 9 s into the trial at the
        // earliest. A trial 10 s old: its stamp reads at most 1 s.
        let earliest = earliest_send_ns(start, 1_000_000, 9000);
        assert_eq!(earliest, start + 9 * S);
        let rx = start + 10 * S;
        assert_eq!(plausible_latency((rx - S) as u32, rx, earliest), Some(S));
        // A stamp moved 2 s into the future reads 4.29 - 1 s: caught by
        // the schedule, not by the trial's start alone.
        let moved = (rx - S + 2 * S) as u32;
        assert_eq!(plausible_latency(moved, rx, earliest), None);
        assert!(plausible_latency(moved, rx, start).is_some());
        // No interval known: the trial's start alone.
        assert_eq!(earliest_send_ns(start, 0, 9000), start);
        assert_eq!(earliest_send_ns(u64::MAX - 1, 2, u64::MAX), u64::MAX);
    }
}
