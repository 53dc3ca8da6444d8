//! Per-stream receive statistics in fixed memory: exact counts of distinct,
//! duplicated and reordered frames, and a latency histogram.
//!
//! Sequence numbers on the wire are 32 bits; they are extended to 64 bits
//! against the highest seen so far. Which numbers were seen is kept in a
//! bitmap window of the last [`WINDOW`] numbers below the highest: within it
//! duplicates are told apart from late frames exactly; a frame older than
//! the window (more than a million frames late) is counted as reordered.
//!
//! A stream knows how many frames its trial sends at most: a number at or
//! beyond that was never sent, so it was damaged on the way (RFC 4737
//! would count it a sequence discontinuity, and every frame after it
//! "reordered" against it). Such a frame is refused ([`StreamStats::record`]
//! returns false, the receiver counts it errored) and moves nothing: the
//! frames after it are judged against the numbers really sent.

use hdrhistogram::Histogram;
use linerate_results::{LatencySummary, SequenceErrors};
use linerate_wire::signature::extend_seq;

/// Sequence numbers remembered below the highest one seen (128 KiB of bits).
pub const WINDOW: u64 = 1 << 20;
/// A jump forward over this many numbers or more is a big sequence error
/// ([`SequenceErrors`]); the in-kernel counter's `LR_SEQ_BIG`.
pub const BIG_GAP: u64 = 1000;
const WORDS: usize = (WINDOW / 64) as usize;

pub struct StreamStats {
    received: u64,
    duplicated: u64,
    reordered: u64,
    highest: Option<u64>,
    /// The number after the previous frame's (0 before the first).
    expected: u64,
    /// Jumps forward over fewer than [`BIG_GAP`] numbers, over more, back.
    seq_errors: [u64; 3],
    /// Sequence numbers sent on this stream are below this.
    sent_below: u64,
    seen: Box<[u64; WORDS]>,
    latency: Histogram<u64>,
    latency_sum: u128,
}

impl Default for StreamStats {
    fn default() -> Self {
        StreamStats {
            received: 0,
            duplicated: 0,
            reordered: 0,
            highest: None,
            expected: 0,
            seq_errors: [0; 3],
            sent_below: u64::MAX,
            seen: vec![0u64; WORDS]
                .into_boxed_slice()
                .try_into()
                .expect("window size"),
            // 1 ns .. 2^32 ns (the signature's timestamp range), 3 significant digits.
            latency: Histogram::new_with_bounds(1, u32::MAX as u64, 3).expect("histogram bounds"),
            latency_sum: 0,
        }
    }
}

impl StreamStats {
    /// A stream whose trial sends at most `frames` frames (sequence
    /// numbers `0 .. frames`); [`Default`] is a stream of unknown length.
    pub fn sending(frames: u64) -> StreamStats {
        StreamStats {
            sent_below: frames,
            ..StreamStats::default()
        }
    }

    /// Distinct frames received.
    pub fn received(&self) -> u64 {
        self.received
    }
    pub fn duplicated(&self) -> u64 {
        self.duplicated
    }
    pub fn reordered(&self) -> u64 {
        self.reordered
    }
    /// Sequence errors against the previous frame's number ([`SequenceErrors`]).
    pub fn sequence_errors(&self) -> SequenceErrors {
        let [small, big, reverse] = self.seq_errors;
        SequenceErrors {
            small,
            big,
            reverse,
            threshold: BIG_GAP,
        }
    }

    /// The 64-bit sequence number a 32-bit one stands for, against the
    /// highest seen (what [`record`](Self::record) counts it as).
    #[inline]
    pub fn extended(&self, seq32: u32) -> u64 {
        match self.highest {
            None => seq32 as u64,
            Some(h) => extend_seq(h, seq32),
        }
    }

    #[inline]
    fn bit(&mut self, seq: u64) -> (&mut u64, u64) {
        let i = (seq % WINDOW) as usize;
        (&mut self.seen[i / 64], 1u64 << (i % 64))
    }

    /// Records one arrived frame with its 32-bit sequence number and
    /// latency. False, and nothing counted, when the number lies beyond
    /// what the stream sent: the frame was damaged (the caller counts it
    /// errored).
    #[inline]
    pub fn record(&mut self, seq32: u32, latency_ns: u64) -> bool {
        let seq = self.extended(seq32);
        if seq >= self.sent_below {
            return false;
        }
        // Against the previous frame's number, duplicates included.
        if seq != self.expected {
            let kind = match seq.checked_sub(self.expected) {
                None => 2,
                Some(skipped) if skipped >= BIG_GAP => 1,
                Some(_) => 0,
            };
            self.seq_errors[kind] += 1;
        }
        self.expected = seq + 1;
        match self.highest {
            Some(h) if seq <= h => {
                if h - seq >= WINDOW {
                    // Too old to tell apart from a duplicate: count it late.
                    self.reordered += 1;
                } else {
                    let (word, mask) = self.bit(seq);
                    if *word & mask != 0 {
                        self.duplicated += 1;
                        return true;
                    }
                    *word |= mask;
                    self.reordered += 1;
                }
            }
            _ => {
                // A new highest: forget the numbers that slide out of the window.
                let from = self.highest.map_or(seq, |h| h + 1);
                if seq - from >= WINDOW {
                    self.seen.fill(0);
                } else {
                    for s in from..seq {
                        let (word, mask) = self.bit(s);
                        *word &= !mask;
                    }
                }
                let (word, mask) = self.bit(seq);
                *word |= mask;
                self.highest = Some(seq);
            }
        }
        self.received += 1;
        self.latency_sum += latency_ns as u128;
        self.latency.saturating_record(latency_ns.max(1));
        true
    }

    /// Counts kept elsewhere (by the XDP counter): distinct, duplicated and
    /// reordered frames, the sequence errors (small, big, reverse), the
    /// exact latency sum, min and max, and a
    /// histogram as (lowest value, highest value, count) buckets. Each
    /// bucket's frames are recorded at its midpoint, clamped to [min, max],
    /// so the percentiles carry the bucket's precision; min and max stay exact.
    pub fn from_counts(
        received: u64,
        duplicated: u64,
        reordered: u64,
        seq_errors: [u64; 3],
        latency_sum: u64,
        (min, max): (u64, u64),
        buckets: impl Iterator<Item = (u64, u64, u64)>,
    ) -> StreamStats {
        let mut s = StreamStats {
            received,
            duplicated,
            reordered,
            seq_errors,
            latency_sum: latency_sum as u128,
            ..StreamStats::default()
        };
        for (lo, hi, mut count) in buckets.filter(|b| b.2 > 0) {
            // The extremes are known exactly: the bucket holding the
            // minimum (maximum) records one frame at it.
            for extreme in [min, max] {
                if count > 0 && (lo..=hi).contains(&extreme) && (extreme != max || min != max) {
                    s.latency.saturating_record(extreme.max(1));
                    count -= 1;
                }
            }
            let mid = (lo + (hi - lo) / 2).clamp(min, max).max(1);
            s.latency.saturating_record_n(mid, count);
        }
        s
    }

    /// Adds another stream's counts (used to total a trial's streams).
    pub fn merge(&mut self, other: &StreamStats) {
        self.received += other.received;
        self.duplicated += other.duplicated;
        self.reordered += other.reordered;
        for (mine, theirs) in self.seq_errors.iter_mut().zip(other.seq_errors) {
            *mine += theirs;
        }
        self.latency_sum += other.latency_sum;
        self.latency
            .add(&other.latency)
            .expect("histograms of equal bounds");
    }

    /// Latency summary of the distinct frames whose latency was measured,
    /// None if there are none. `every` is what the summary says it was
    /// measured on (every n-th frame of each stream).
    pub fn latency(&self, every: u32) -> Option<LatencySummary> {
        let h = &self.latency;
        if h.is_empty() {
            return None;
        }
        Some(LatencySummary {
            samples: h.len(),
            every,
            min: h.min(),
            avg: (self.latency_sum / h.len() as u128) as u64,
            max: h.max(),
            p50: h.value_at_quantile(0.50),
            p90: h.value_at_quantile(0.90),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_frames_are_counted_once() {
        let mut s = StreamStats::default();
        for seq in 0..1000 {
            s.record(seq, 1000);
        }
        assert_eq!((s.received(), s.duplicated(), s.reordered()), (1000, 0, 0));
        let l = s.latency(1).unwrap();
        assert_eq!((l.min, l.avg, l.max), (1000, 1000, 1000));
    }

    #[test]
    fn duplicates_and_late_frames_are_told_apart() {
        let mut s = StreamStats::default();
        for seq in [0, 1, 3, 2, 3, 4, 1, 6] {
            s.record(seq, 10);
        }
        // 2 arrived late (reordered), 3 and 1 twice (duplicates), 5 never.
        assert_eq!((s.received(), s.duplicated(), s.reordered()), (6, 2, 1));
    }

    #[test]
    fn sequence_numbers_wrap_past_32_bits() {
        let mut s = StreamStats::default();
        for seq in (u32::MAX - 10)..=u32::MAX {
            s.record(seq, 1);
        }
        for seq in 0..10u32 {
            s.record(seq, 1);
        }
        assert_eq!((s.received(), s.duplicated(), s.reordered()), (21, 0, 0));
    }

    #[test]
    fn window_slides_without_false_duplicates() {
        let mut s = StreamStats::default();
        for seq in 0..(3 * WINDOW as u32) {
            s.record(seq, 1);
        }
        s.record(3 * WINDOW as u32 - 5, 1); // a true duplicate inside the window
        s.record(5, 1); // far too old: counted late
        assert_eq!(s.received(), 3 * WINDOW + 1);
        assert_eq!((s.duplicated(), s.reordered()), (1, 1));
    }

    #[test]
    fn a_number_beyond_what_was_sent_is_damaged_not_a_discontinuity() {
        // 1,000 frames sent; frame 500's high byte damaged (+2^24): it was
        // never sent. Before, it became the highest and the 499 frames
        // after it counted as reordered.
        let mut s = StreamStats::sending(1000);
        let mut refused = 0;
        for seq in 0..1000u32 {
            let wire = if seq == 500 { seq | 1 << 24 } else { seq };
            if !s.record(wire, 10) {
                refused += 1;
            }
        }
        assert_eq!(refused, 1);
        assert_eq!((s.received(), s.duplicated(), s.reordered()), (999, 0, 0));
        // The last number sent is counted; one past it is not.
        let mut s = StreamStats::sending(10);
        assert!(s.record(9, 1));
        assert!(!s.record(10, 1));
        // A damaged number that wraps below 0 (a high bit flipped in the
        // first frames) lies beyond the sent ones too.
        assert!(s.record(3, 1));
        assert!(!s.record(u32::MAX - 5, 1));
        assert_eq!((s.received(), s.reordered()), (2, 1));
        let l = s.latency(1).unwrap();
        assert_eq!(l.samples, 2, "refused frames have no latency");
    }

    #[test]
    fn real_reordering_within_the_sent_numbers_is_still_counted() {
        let mut s = StreamStats::sending(8);
        for seq in [0, 2, 1, 3, 5, 4, 6, 7] {
            assert!(s.record(seq, 1));
        }
        assert_eq!((s.received(), s.duplicated(), s.reordered()), (8, 0, 2));
        // Without a known length, the old behaviour: the wild number is
        // the highest and what follows it is late.
        let mut s = StreamStats::default();
        for seq in [0, 1 << 24, 1, 2] {
            assert!(s.record(seq, 1));
        }
        assert_eq!(s.reordered(), 2);
    }

    fn errors(s: &StreamStats) -> (u64, u64, u64) {
        let e = s.sequence_errors();
        (e.small, e.big, e.reverse)
    }

    #[test]
    fn sequence_errors_compare_each_frame_with_the_previous_one() {
        let mut s = StreamStats::sending(10_000);
        // 0..=3 in order; 5 skips 4 (small); 4 comes back (reverse); 5
        // again (a duplicate: in sequence after 4); 6, then 1,006 skips
        // 999 numbers (small), 2,007 skips 1,000 (big).
        for seq in [0, 1, 2, 3, 5, 4, 5, 6, 1006, 2007] {
            assert!(s.record(seq, 1));
        }
        assert_eq!(errors(&s), (2, 1, 1));
        assert_eq!(s.sequence_errors().threshold, BIG_GAP);
        assert_eq!((s.duplicated(), s.reordered()), (1, 1));
        // A stream that does not start at 0 jumped from the start.
        let mut s = StreamStats::sending(10_000);
        s.record(3, 1);
        assert_eq!(errors(&s), (1, 0, 0));
        // Refused numbers (never sent) are not compared.
        let mut s = StreamStats::sending(10);
        for seq in [0, 1, 50, 2] {
            s.record(seq, 1);
        }
        assert_eq!(errors(&s), (0, 0, 0));
    }

    #[test]
    fn one_wild_number_within_the_sent_ones_costs_two_sequence_errors() {
        // Frame 100's number damaged to 900 (within the 1,000 sent, so
        // not refused): RFC 4737 counts the 799 frames after it below
        // 900 as reordered; the sequence errors, the jump to it and back.
        let mut s = StreamStats::sending(1000);
        for seq in 0..1000u32 {
            s.record(if seq == 100 { 900 } else { seq }, 1);
        }
        assert_eq!(s.reordered(), 799);
        assert_eq!(s.duplicated(), 1, "the real 900");
        assert_eq!(errors(&s), (1, 0, 1));
        // Beyond the big-gap threshold, the jump there is big.
        let mut s = StreamStats::sending(5000);
        for seq in 0..5000u32 {
            s.record(if seq == 100 { 4000 } else { seq }, 1);
        }
        assert_eq!(errors(&s), (0, 1, 1));
    }

    #[test]
    fn merged_streams_add_their_sequence_errors() {
        let mut a = StreamStats::sending(100);
        let mut b = StreamStats::sending(100);
        for seq in [0, 2, 1] {
            a.record(seq, 1);
        }
        b.record(50, 1);
        a.merge(&b);
        assert_eq!(errors(&a), (2, 0, 1));
        let k = StreamStats::from_counts(1, 0, 0, [4, 5, 6], 1, (1, 1), std::iter::empty());
        assert_eq!(errors(&k), (4, 5, 6));
    }

    #[test]
    fn latency_percentiles_come_from_the_histogram() {
        let mut s = StreamStats::default();
        for seq in 0..1000u32 {
            s.record(seq, (seq as u64 + 1) * 1000);
        }
        let l = s.latency(1).unwrap();
        assert_eq!(l.min, 1000);
        assert!(l.max >= 1_000_000 && l.max <= 1_001_000);
        assert!((l.p50 as i64 - 500_000).abs() <= 1000);
        assert!((l.p99 as i64 - 990_000).abs() <= 1000);
        assert_eq!(l.avg, 500_500);
    }
}
