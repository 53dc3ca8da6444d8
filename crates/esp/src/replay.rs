//! The anti-replay window of RFC 4303 §3.4.3, kept as in RFC 6479: a ring
//! of 64-bit words indexed by sequence number, so a packet in order costs a
//! bit set and, once every 64 packets, clearing one word — never a shift of
//! the whole bitmap.

use crate::error::EspError;

/// Sequence numbers accepted behind the highest one received.
///
/// 1024 rather than RFC 4303's minimum of 32 (64 recommended): a gateway
/// that spreads one SA over several cores reorders packets by hundreds at
/// line rate, and a window too small would report that reordering as "too
/// old" loss. Linux and VPP allow windows this size and larger.
pub const REPLAY_WINDOW: u32 = 1024;

const WORD_BITS: u32 = 64;
/// One word more than the window needs, so the word the highest number is in
/// never also holds bits the window still looks at from 1024 numbers back.
const WORDS: usize = (REPLAY_WINDOW / WORD_BITS) as usize + 1;

/// Sequence numbers seen, within `REPLAY_WINDOW` of the highest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ReplayWindow {
    /// Highest sequence number marked so far; 0 before the first packet.
    highest: u32,
    bits: [u64; WORDS],
}

impl Default for ReplayWindow {
    fn default() -> Self {
        ReplayWindow {
            highest: 0,
            bits: [0; WORDS],
        }
    }
}

#[inline]
fn slot(seq: u32) -> (usize, u64) {
    (
        (seq / WORD_BITS) as usize % WORDS,
        1u64 << (seq % WORD_BITS),
    )
}

impl ReplayWindow {
    /// Whether `seq` may be accepted, without marking it: the ICV must be
    /// verified before a number is marked (RFC 4303 §3.4.3), or forged
    /// packets could fill the window and make the real ones look replayed.
    #[inline]
    pub(crate) fn check(&self, seq: u32) -> Result<(), EspError> {
        if seq > self.highest {
            return Ok(());
        }
        if seq == 0 || self.highest - seq >= REPLAY_WINDOW {
            return Err(EspError::TooOld {
                seq,
                highest: self.highest,
                window: REPLAY_WINDOW,
            });
        }
        let (word, bit) = slot(seq);
        if self.bits[word] & bit != 0 {
            return Err(EspError::Replay { seq });
        }
        Ok(())
    }

    /// Marks `seq` as received; call only after `check` passed and the ICV
    /// verified.
    #[inline]
    pub(crate) fn mark(&mut self, seq: u32) {
        if seq > self.highest {
            // Clear the words the window moves into: they still hold bits of
            // numbers 64 * WORDS behind.
            let old_block = self.highest / WORD_BITS;
            let new_block = seq / WORD_BITS;
            let fresh = (new_block - old_block).min(WORDS as u32);
            for i in 1..=fresh {
                self.bits[(old_block + i) as usize % WORDS] = 0;
            }
            self.highest = seq;
        }
        let (word, bit) = slot(seq);
        self.bits[word] |= bit;
    }

    /// The highest sequence number received so far (0 before any).
    pub(crate) fn highest(&self) -> u32 {
        self.highest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn accept(w: &mut ReplayWindow, seq: u32) -> Result<(), EspError> {
        w.check(seq)?;
        w.mark(seq);
        Ok(())
    }

    #[test]
    fn in_order_duplicates_and_the_left_edge() {
        let mut w = ReplayWindow::default();
        assert!(matches!(w.check(0), Err(EspError::TooOld { .. })));
        for seq in 1..=3000 {
            accept(&mut w, seq).unwrap();
        }
        assert_eq!(w.check(3000), Err(EspError::Replay { seq: 3000 }));
        assert_eq!(w.check(3000 - 1023), Err(EspError::Replay { seq: 1977 }));
        assert_eq!(
            w.check(3000 - 1024),
            Err(EspError::TooOld {
                seq: 1976,
                highest: 3000,
                window: REPLAY_WINDOW
            })
        );
        accept(&mut w, 3001).unwrap();
    }

    #[test]
    fn a_jump_forward_forgets_what_fell_out_and_keeps_the_holes_open() {
        let mut w = ReplayWindow::default();
        accept(&mut w, 1).unwrap();
        accept(&mut w, 5).unwrap();
        accept(&mut w, 1000).unwrap();
        // Holes inside the window are still acceptable, once.
        accept(&mut w, 2).unwrap();
        assert_eq!(w.check(2), Err(EspError::Replay { seq: 2 }));
        assert_eq!(w.check(5), Err(EspError::Replay { seq: 5 }));
        // A jump far beyond the window clears everything.
        accept(&mut w, 1_000_000).unwrap();
        assert!(matches!(w.check(1000), Err(EspError::TooOld { .. })));
        for seq in 1_000_000 - 1023..1_000_000 {
            accept(&mut w, seq).unwrap();
        }
        accept(&mut w, u32::MAX).unwrap();
        assert_eq!(w.check(u32::MAX), Err(EspError::Replay { seq: u32::MAX }));
        accept(&mut w, u32::MAX - 1023).unwrap();
    }

    proptest! {
        /// The ring of words agrees with a plain set of everything seen.
        #[test]
        fn matches_a_model(steps in proptest::collection::vec((0u32..3, 0u32..3000), 1..400)) {
            let mut w = ReplayWindow::default();
            let mut seen = std::collections::BTreeSet::new();
            let mut highest = 0u32;
            let mut base = 1u32;
            for (kind, n) in steps {
                // Mostly near the top, sometimes far jumps, sometimes old.
                let seq = match kind {
                    0 => highest.saturating_add(n % 70),
                    1 => highest.saturating_sub(n % 1100),
                    _ => { base = base.saturating_add(n * 7); base }
                };
                let want = if seq == 0 || (seq <= highest && highest - seq >= REPLAY_WINDOW) {
                    "old"
                } else if seen.contains(&seq) {
                    "replay"
                } else {
                    "ok"
                };
                let got = match w.check(seq) {
                    Ok(()) => "ok",
                    Err(EspError::Replay { .. }) => "replay",
                    Err(EspError::TooOld { .. }) => "old",
                    Err(e) => panic!("{e}"),
                };
                prop_assert_eq!(got, want, "seq {} highest {}", seq, highest);
                if got == "ok" {
                    w.mark(seq);
                    seen.insert(seq);
                    highest = highest.max(seq);
                }
            }
        }
    }
}
