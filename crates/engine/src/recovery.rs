//! Before each trial, a check that the DUT has stopped forwarding earlier
//! traffic: the previous trial's backlog, or anything else.
//!
//! RFC 2544 section 23 has a trial end with "wait for two seconds for any
//! residual frames to be received" and "wait for at least five seconds
//! for the DUT to restabilize". linerate waits for residual frames (the
//! straggler wait) and, instead of a fixed pause, watches the tester
//! ports' received-frame counters (the kernel's per-interface `rx_packets`
//! plus `rx_dropped`, which every engine and every NIC keeps, whether or
//! not linerate reads the port): the trial starts once each port received
//! at most [`QuietRule::max_frames`] frames (background ARP, NDP, IKE)
//! over [`QuietRule::interval`]. A DUT that drains a deep queue slowly
//! (a VPN gateway in user space, a shaper) is waited for, up to
//! [`QuietRule::limit`]; a quiet one costs at most one interval, and less
//! when the time between trials already covers it (the window starts at
//! the end of the previous trial's straggler wait), and nothing after a
//! trial that received every frame it sent (one reading then shows
//! whether anything arrived since).

use crate::accounting::link_counters;
use crate::EngineError;
use linerate_port::PortInfo;
use linerate_results::Recovery;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// When the DUT counts as quiet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QuietRule {
    /// How long the ports must stay (nearly) silent.
    pub interval: Duration,
    /// The most frames each port may receive in one interval and still be
    /// quiet: background traffic, not a backlog.
    pub max_frames: u64,
    /// The longest the check waits; then the trial starts anyway, marked.
    pub limit: Duration,
}

impl Default for QuietRule {
    /// 100 ms with at most 10 frames per port (100 frames/s: ARP, NDP,
    /// IKE keepalives and DPD stay far below it, a draining DUT sends
    /// thousands a second); at most 30 s: three times the longest drain
    /// seen (a VPN gateway with 1,000 SAs, ~10 s after an overload trial),
    /// and well under what a port with steady foreign traffic should cost
    /// a run before it is told so on every trial.
    fn default() -> Self {
        QuietRule {
            interval: Duration::from_millis(100),
            max_frames: 10,
            limit: Duration::from_secs(30),
        }
    }
}

/// How often the counters are read while waiting.
const POLL: Duration = Duration::from_millis(10);

/// What one reading of the counters says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Not decided yet: read again.
    Wait,
    /// Quiet for a whole interval, or the limit ran out: the trial may start.
    Done(Recovery),
}

/// The quiet detection, fed readings (time since the check began, each
/// port's frame count): no clock, no ports, so it is tested alone.
#[derive(Debug, Clone)]
pub struct QuietWatch<const N: usize> {
    rule: QuietRule,
    /// How long before the check the previous trial ended (zero when
    /// unknown): times below count from then, so they are never negative.
    since: Duration,
    /// The counts then, where the frames since the previous trial begin.
    first: [u64; N],
    /// Where the running quiet window began: its time and counts.
    window: (Duration, [u64; N]),
    /// Every frame the previous trial sent had arrived when it ended: the
    /// DUT holds none of it, so a first reading without frames since is
    /// quiet at once, without a whole interval.
    drained: bool,
}

impl<const N: usize> QuietWatch<N> {
    /// A watch whose window began `since` before the check (the end of the
    /// previous trial; zero when unknown) with the counts `counts` then.
    pub fn new(rule: QuietRule, since: Duration, counts: [u64; N]) -> Self {
        QuietWatch {
            rule,
            since,
            first: counts,
            window: (Duration::ZERO, counts),
            drained: false,
        }
    }

    /// The previous trial received every frame it sent (see `drained`).
    pub fn drained(self, drained: bool) -> Self {
        QuietWatch { drained, ..self }
    }

    /// A reading `at` into the check.
    pub fn sample(&mut self, at: Duration, counts: [u64; N]) -> Verdict {
        let t = self.since + at;
        let busy = counts
            .iter()
            .zip(self.window.1)
            .any(|(&now, then)| now.saturating_sub(then) > self.rule.max_frames);
        if busy {
            // Frames still coming: the window starts again now.
            self.window = (t, counts);
        }
        let done = |limit_reached: bool, waited: Duration, window_counts: [u64; N]| {
            Verdict::Done(Recovery {
                waited_s: waited.as_secs_f64(),
                frames: window_counts
                    .iter()
                    .zip(self.first)
                    .map(|(&c, f)| c.saturating_sub(f))
                    .sum(),
                limit_reached,
                quiet_s: self.rule.interval.as_secs_f64(),
                quiet_frames: self.rule.max_frames,
            })
        };
        let drained = std::mem::take(&mut self.drained) && !busy;
        if drained || t.saturating_sub(self.window.0) >= self.rule.interval {
            return done(
                false,
                self.window.0.saturating_sub(self.since),
                self.window.1,
            );
        }
        if at >= self.rule.limit {
            return done(true, at, counts);
        }
        Verdict::Wait
    }
}

/// The ports' counters at the end of a trial, where the next check's
/// window begins.
#[derive(Debug, Clone, Copy)]
pub struct Mark {
    at: Instant,
    counts: [u64; 2],
    /// Every frame the trial sent had arrived (see [`QuietWatch`]).
    drained: bool,
}

impl Mark {
    /// The mark of a trial whose every frame had arrived (or not).
    pub fn drained(self, drained: bool) -> Mark {
        Mark { drained, ..self }
    }
}

/// Frames tester port `info` has received (the kernel's rx_packets and
/// rx_dropped); None for a port that is no interface (in memory).
fn port_frames(info: &PortInfo) -> Option<u64> {
    let c = link_counters(info.netns.as_deref(), &info.ifname).ok()?;
    Some(c.rx_packets + c.rx_dropped)
}

/// Both ports' counts now (None when either is no interface).
pub fn mark(ports: [&PortInfo; 2]) -> Option<Mark> {
    Some(Mark {
        counts: [port_frames(ports[0])?, port_frames(ports[1])?],
        at: Instant::now(),
        drained: false,
    })
}

/// Waits until the DUT is quiet on both tester ports (see the module),
/// from `previous` (the end of the previous trial) when there is one.
/// None when the ports have no counters to read; an error at the
/// interrupt.
pub fn wait_until_quiet(
    rule: QuietRule,
    ports: [&PortInfo; 2],
    previous: Option<Mark>,
    interrupt: &AtomicBool,
) -> Result<Option<Recovery>, EngineError> {
    let start = Instant::now();
    let Some(first) = previous.or_else(|| mark(ports)) else {
        return Ok(None);
    };
    let mut watch = QuietWatch::new(
        rule,
        start.saturating_duration_since(first.at),
        first.counts,
    )
    .drained(first.drained);
    loop {
        if interrupt.load(Ordering::Relaxed) {
            return Err(EngineError::Interrupted);
        }
        let Some(now) = mark(ports) else {
            return Ok(None);
        };
        if let Verdict::Done(r) = watch.sample(now.at.saturating_duration_since(start), now.counts)
        {
            return Ok(Some(r));
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Feeds `counts(t)` every 10 ms until the watch decides.
    fn run(
        rule: QuietRule,
        since: Duration,
        start: [u64; 2],
        counts: impl Fn(u64) -> [u64; 2],
    ) -> Recovery {
        let mut w = QuietWatch::new(rule, since, start);
        for t in (0..).step_by(10) {
            if let Verdict::Done(r) = w.sample(ms(t), counts(t)) {
                return r;
            }
            assert!(t < 1_000_000, "never decided");
        }
        unreachable!()
    }

    #[test]
    fn a_quiet_dut_is_passed_within_one_interval_and_waits_nothing() {
        let rule = QuietRule::default();
        // Nothing since the previous trial ended 150 ms ago: at once.
        let mut w = QuietWatch::new(rule, ms(150), [5, 7]);
        let Verdict::Done(r) = w.sample(ms(0), [5, 7]) else {
            panic!("quiet for longer than the interval already")
        };
        assert_eq!((r.waited_s, r.frames, r.limit_reached), (0.0, 0, false));
        // Ended 40 ms ago: 60 ms more, and still nothing waited.
        let mut w = QuietWatch::new(rule, ms(40), [5, 7]);
        assert_eq!(w.sample(ms(0), [5, 7]), Verdict::Wait);
        assert_eq!(w.sample(ms(50), [5, 8]), Verdict::Wait);
        let Verdict::Done(r) = w.sample(ms(60), [6, 9]) else {
            panic!("quiet for 100 ms")
        };
        assert_eq!((r.waited_s, r.frames), (0.0, 0));
        // No previous trial: a whole interval from the check's start.
        let r = run(rule, Duration::ZERO, [0, 0], |_| [0, 3]);
        assert_eq!((r.waited_s, r.limit_reached), (0.0, false));
    }

    #[test]
    fn after_a_trial_that_received_every_frame_one_quiet_reading_is_enough() {
        let rule = QuietRule::default();
        // Ended 5 ms ago with every frame in, 3 frames since: at once.
        let mut w = QuietWatch::new(rule, ms(5), [5, 7]).drained(true);
        let Verdict::Done(r) = w.sample(ms(0), [5, 10]) else {
            panic!("nothing of the trial is left in the DUT")
        };
        assert_eq!((r.waited_s, r.frames, r.limit_reached), (0.0, 0, false));
        // Frames arriving all the same (something else): a whole interval.
        let mut w = QuietWatch::new(rule, ms(5), [5, 7]).drained(true);
        assert_eq!(w.sample(ms(0), [5, 500]), Verdict::Wait);
        assert_eq!(w.sample(ms(10), [5, 500]), Verdict::Wait);
        let Verdict::Done(r) = w.sample(ms(100), [5, 500]) else {
            panic!("quiet for 100 ms")
        };
        assert_eq!((r.waited_s, r.frames), (0.0, 493));
    }

    #[test]
    fn background_frames_below_the_bound_do_not_hold_the_trial() {
        let rule = QuietRule::default();
        // 10 frames per 100 ms on each port: quiet.
        let r = run(rule, Duration::ZERO, [0, 0], |t| [t / 10, t / 10]);
        assert_eq!((r.waited_s, r.limit_reached), (0.0, false));
    }

    #[test]
    fn a_draining_dut_is_waited_for_and_its_frames_counted() {
        let rule = QuietRule::default();
        // Port B receives 30 frames per ms for 4.2 s after the check
        // begins (and did for 50 ms before it), then nothing.
        let b = |t: u64| 1_500 + 30 * t.min(4_200);
        let r = run(rule, ms(50), [0, 0], |t| [0, b(t)]);
        assert!(
            (4.2..=4.21).contains(&r.waited_s),
            "waited {} s",
            r.waited_s
        );
        assert_eq!(r.frames, 1_500 + 30 * 4_200);
        assert!(!r.limit_reached);
        assert!(r.waited());
        // Port A draining counts as much as port B (both directions).
        let r = run(rule, Duration::ZERO, [0, 0], |t| [b(t), 0]);
        assert!(r.waited_s >= 4.2);
    }

    #[test]
    fn a_dut_that_never_stops_runs_the_limit_out() {
        let rule = QuietRule {
            limit: Duration::from_secs(3),
            ..QuietRule::default()
        };
        let r = run(rule, Duration::ZERO, [0, 0], |t| [0, 20 * t]);
        assert!(r.limit_reached);
        assert!((3.0..3.02).contains(&r.waited_s), "{}", r.waited_s);
        assert_eq!(r.frames, 20 * 3_000);
    }
}
