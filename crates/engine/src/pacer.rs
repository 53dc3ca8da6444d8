//! When to send: a constant-rate schedule, separate from the thing that sends.
//!
//! Frame `i` is due at `i / rate` seconds after the start. Time is passed
//! in, never read here, so the schedule is testable with a manual clock.

use std::time::Duration;

/// How much longer than its give-up time a trial may send because its
/// generator paused (moved its schedule back instead of bursting): a
/// tenth. A short stall of the tester's CPU costs no frame, while a
/// generator that cannot reach the rate still ends near the trial's
/// duration, as a hardware tester's does, with the frames it could not
/// send counted as not sent (the tester's loss), never running on to
/// twice the duration.
pub const PAUSE_ALLOWANCE_DIVISOR: u32 = 10;

/// The wall-clock time a generator may send for, pauses included:
/// `give_up_after` and [`PAUSE_ALLOWANCE_DIVISOR`]'s share of it.
pub fn sending_limit(give_up_after: Duration) -> Duration {
    give_up_after + give_up_after / PAUSE_ALLOWANCE_DIVISOR
}

/// Thread k's share of `total` frames among `n` threads: the remainder goes
/// to the first threads, so the shares add up to `total` exactly.
pub fn share(total: u64, n: u16, k: u16) -> u64 {
    let n = n.max(1) as u64;
    total / n + u64::from((k as u64) < total % n)
}

#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    interval_ns: f64,
    total: u64,
}

impl Pacer {
    /// A schedule of `rate_fps` frames per second for `duration`.
    pub fn new(rate_fps: f64, duration: Duration) -> Pacer {
        let total = (rate_fps * duration.as_secs_f64()).round() as u64;
        Pacer {
            interval_ns: 1e9 / rate_fps,
            total,
        }
    }

    /// Generator thread k's part of this schedule, of `n` threads that
    /// share it: every n-th frame's worth of the rate, and its
    /// [`share`] of the frames (the shares add up to the whole).
    pub fn share(&self, n: u16, k: u16) -> Pacer {
        Pacer {
            interval_ns: self.interval_ns * n.max(1) as f64,
            total: share(self.total, n, k),
        }
    }

    /// Frames the schedule holds: intended rate x duration, rounded.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Nanoseconds between two frames.
    pub fn interval_ns(&self) -> f64 {
        self.interval_ns
    }

    /// Frames due by `elapsed` since the start (frame 0 is due at once).
    #[inline]
    pub fn due(&self, elapsed: Duration) -> u64 {
        // Through u64 (585 years of nanoseconds): a u128 to f64 conversion
        // is a library call, and the generator asks this on every turn of
        // its loop. The value is the same.
        let due = (elapsed.as_nanos() as u64 as f64 / self.interval_ns) as u64 + 1;
        due.min(self.total)
    }

    /// Scheduled send time of frame `i`, in ns after the start.
    #[inline]
    pub fn scheduled_ns(&self, i: u64) -> u64 {
        (i as f64 * self.interval_ns) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_is_rate_times_duration() {
        let p = Pacer::new(1000.0, Duration::from_secs(2));
        assert_eq!(p.total(), 2000);
        assert_eq!(p.due(Duration::ZERO), 1);
        assert_eq!(p.due(Duration::from_micros(999)), 1);
        assert_eq!(p.due(Duration::from_millis(1)), 2);
        assert_eq!(p.due(Duration::from_millis(500)), 501);
        assert_eq!(p.due(Duration::from_secs(5)), 2000);
        assert_eq!(p.scheduled_ns(3), 3_000_000);
    }

    #[test]
    fn threads_share_the_schedule_exactly() {
        let p = Pacer::new(1000.0, Duration::from_millis(1001));
        let parts: Vec<Pacer> = (0..3).map(|k| p.share(3, k)).collect();
        assert_eq!(parts.iter().map(Pacer::total).sum::<u64>(), 1001);
        assert_eq!(
            parts.iter().map(Pacer::total).collect::<Vec<_>>(),
            [334, 334, 333]
        );
        assert_eq!(parts[0].interval_ns(), 3e6);
        assert_eq!(p.share(1, 0).total(), 1001);
    }

    #[test]
    fn fractional_rates_round_the_count() {
        let p = Pacer::new(14_880_952.38, Duration::from_secs(1));
        assert_eq!(p.total(), 14_880_952);
    }
}
