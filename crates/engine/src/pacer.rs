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
        let due = (elapsed.as_nanos() as f64 / self.interval_ns) as u64 + 1;
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
    fn fractional_rates_round_the_count() {
        let p = Pacer::new(14_880_952.38, Duration::from_secs(1));
        assert_eq!(p.total(), 14_880_952);
    }
}
