//! When linerate rekeys its tunnels itself, and what it does with new keys
//! meanwhile: the part `linerate tunnels --rekey` (commands/tunnels/rekey.rs)
//! and the packet commands' keeper ([`crate::ike_keeper`]) share, so both
//! spread their rekeys and hold keys by the same rules.
//!
//! The schedule spreads N tunnels' rekeys evenly over the period T: tunnel
//! i is first due at (i + `phase`) T / N after the start, then every T, so
//! the gateway sees N / T rekeys per second, not N at once. A tunnel has
//! one request in flight at most: a turn that finds one of the same kind
//! under way is skipped, one that finds the other kind under way goes
//! right after it. Turns due at the same time go by tunnel, then by kind
//! (the kind's order: the keeper's CHILD_SA before its IKE SA).
//!
//! [`HeldKeys`] keeps, after a rekey the gateway started, the new outbound
//! keys back until the gateway deleted the old CHILD_SA (RFC 7296 §2.8:
//! it installs its new inbound SA only once it has linerate's answer), or
//! until [`HOLD_KEYS_AT_MOST`] for a gateway that keeps the old one.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

/// How long new outbound keys are held at most after a rekey the gateway
/// started, waiting for its Delete of the old CHILD_SA.
pub(crate) const HOLD_KEYS_AT_MOST: Duration = Duration::from_secs(1);

/// Each tunnel's next rekeys of each kind `K`, soonest first.
pub(crate) struct RekeySchedule<K> {
    due: BinaryHeap<Reverse<(Instant, usize, K)>>,
    periods: Vec<(K, Duration)>,
    /// How soon a turn that waits for the tunnel's other request is tried
    /// again.
    retry: Duration,
}

impl<K: Copy + Ord> RekeySchedule<K> {
    /// `tunnels` tunnels rekeyed from `start`, each kind every its period:
    /// tunnel i first at (i + `phase`) period / `tunnels`. `retry`: how
    /// soon a turn waiting for the tunnel's other kind is tried again.
    pub(crate) fn spread(
        tunnels: usize,
        periods: &[(K, Duration)],
        phase: f64,
        start: Instant,
        retry: Duration,
    ) -> RekeySchedule<K> {
        let mut due = BinaryHeap::new();
        for &(kind, period) in periods {
            for i in 0..tunnels {
                let first = start + period.mul_f64((i as f64 + phase) / tunnels as f64);
                due.push(Reverse((first, i, kind)));
            }
        }
        RekeySchedule {
            due,
            periods: periods.to_vec(),
            retry,
        }
    }

    /// When the next turn is due, if any.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.due.peek().map(|Reverse((t, _, _))| *t)
    }

    /// The next rekey to ask for by `now`, (tunnel, kind), its next turn
    /// scheduled; turns due meanwhile that `in_flight` (the kind of the
    /// tunnel's request under way, if any) holds back are rescheduled.
    pub(crate) fn next_due(
        &mut self,
        now: Instant,
        in_flight: impl Fn(usize) -> Option<K>,
    ) -> Option<(usize, K)> {
        while let Some(&Reverse((t, i, kind))) = self.due.peek() {
            if t > now {
                return None;
            }
            self.due.pop();
            match in_flight(i) {
                // The other kind under way: this one goes right after it.
                Some(pending) if pending != kind => {
                    self.due.push(Reverse((now + self.retry, i, kind)));
                }
                // The same kind still unanswered: this turn is skipped.
                Some(_) => self.due.push(Reverse((t + self.period(kind), i, kind))),
                None => {
                    self.due.push(Reverse((t + self.period(kind), i, kind)));
                    return Some((i, kind));
                }
            }
        }
        None
    }

    fn period(&self, kind: K) -> Duration {
        // Never missing for a kind on the schedule; an hour keeps
        // `Instant` arithmetic far from overflow if it were.
        self.periods
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(Duration::from_secs(3600), |&(_, p)| p)
    }
}

/// Each tunnel's new outbound keys held back after a rekey the gateway
/// started, with the time they go out at the latest.
pub(crate) struct HeldKeys<T> {
    slots: Vec<Option<(T, Instant)>>,
}

impl<T> HeldKeys<T> {
    pub(crate) fn new(tunnels: usize) -> HeldKeys<T> {
        HeldKeys {
            slots: (0..tunnels).map(|_| None).collect(),
        }
    }

    /// Holds tunnel `i`'s new `keys` from `now` (replacing any held).
    pub(crate) fn hold(&mut self, i: usize, keys: T, now: Instant) {
        if let Some(slot) = self.slots.get_mut(i) {
            *slot = Some((keys, now + HOLD_KEYS_AT_MOST));
        }
    }

    /// Tunnel `i`'s held keys, released: the gateway deleted the old
    /// CHILD_SA.
    pub(crate) fn release(&mut self, i: usize) -> Option<T> {
        self.slots.get_mut(i)?.take().map(|(keys, _)| keys)
    }

    /// The held keys whose time ran out by `now`, released, by tunnel.
    pub(crate) fn release_expired(&mut self, now: Instant) -> Vec<(usize, T)> {
        let mut expired = Vec::new();
        for (i, slot) in self.slots.iter_mut().enumerate() {
            if slot.as_ref().is_some_and(|(_, until)| *until <= now) {
                if let Some((keys, _)) = slot.take() {
                    expired.push((i, keys));
                }
            }
        }
        expired
    }

    /// When the first held keys' time runs out, if any are held.
    pub(crate) fn next_at(&self) -> Option<Instant> {
        self.slots.iter().flatten().map(|(_, until)| *until).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Every turn due by `now`, with nothing in flight.
    fn all_due(s: &mut RekeySchedule<u8>, now: Instant) -> Vec<(usize, u8)> {
        std::iter::from_fn(|| s.next_due(now, |_| None)).collect()
    }

    /// Four tunnels every 4 s with phase ½: first at 0.5, 1.5, 2.5, 3.5 s,
    /// then each again 4 s later; with phase 1: at 1, 2, 3, 4 s.
    #[test]
    fn turns_spread_evenly_over_the_period_from_the_phase() {
        let start = Instant::now();
        let mut half = RekeySchedule::spread(4, &[(0u8, 4 * S)], 0.5, start, ms(50));
        assert_eq!(half.next_at(), Some(start + ms(500)));
        assert!(all_due(&mut half, start + ms(499)).is_empty());
        assert_eq!(all_due(&mut half, start + ms(1500)), [(0, 0), (1, 0)]);
        assert_eq!(all_due(&mut half, start + ms(4499)), [(2, 0), (3, 0)]);
        assert_eq!(all_due(&mut half, start + ms(4500)), [(0, 0)]);
        let mut whole = RekeySchedule::spread(4, &[(0u8, 4 * S)], 1.0, start, ms(50));
        assert_eq!(whole.next_at(), Some(start + S));
        assert_eq!(
            all_due(&mut whole, start + 4 * S),
            [(0, 0), (1, 0), (2, 0), (3, 0)]
        );
        assert_eq!(whole.next_at(), Some(start + 5 * S));
    }

    /// A turn that finds the same kind under way is skipped (next one a
    /// period on); one that finds the other kind under way comes back
    /// after `retry`; kinds due together go in their order.
    #[test]
    fn one_request_in_flight_per_tunnel_and_the_first_kind_first() {
        let start = Instant::now();
        let mut s = RekeySchedule::spread(1, &[(0u8, 2 * S), (1u8, 2 * S)], 1.0, start, ms(50));
        let now = start + 2 * S;
        // Both due together: kind 0 (the CHILD_SA) first, then kind 1.
        assert_eq!(all_due(&mut s, now), [(0, 0), (0, 1)]);
        // Kind 0 in flight at the next turns: its own turn is skipped,
        // kind 1's comes back 50 ms later.
        let later = start + 4 * S;
        assert_eq!(s.next_due(later, |_| Some(0)), None);
        assert_eq!(s.next_at(), Some(later + ms(50)));
        assert_eq!(all_due(&mut s, later + ms(50)), [(0, 1)]);
        assert_eq!(s.next_at(), Some(start + 6 * S));
        // Each kind's next turn is a period after the one it took.
        assert_eq!(all_due(&mut s, start + 6 * S), [(0, 0)]);
        assert_eq!(all_due(&mut s, start + 6 * S + ms(50)), [(0, 1)]);
    }

    /// Held keys go out when the gateway deleted the old CHILD_SA, or
    /// once their time ran out, each once.
    #[test]
    fn held_keys_go_out_on_the_delete_or_after_their_time() {
        let start = Instant::now();
        let mut held = HeldKeys::new(3);
        assert_eq!(held.next_at(), None);
        held.hold(0, "a", start);
        held.hold(2, "c", start + ms(200));
        held.hold(7, "out of range", start);
        assert_eq!(held.next_at(), Some(start + HOLD_KEYS_AT_MOST));
        assert_eq!(held.release(0), Some("a"));
        assert_eq!(held.release(0), None);
        assert_eq!(held.release(1), None);
        assert!(held.release_expired(start + HOLD_KEYS_AT_MOST).is_empty());
        let at = start + ms(200) + HOLD_KEYS_AT_MOST;
        assert_eq!(held.release_expired(at), [(2, "c")]);
        assert_eq!(held.next_at(), None);
    }
}
