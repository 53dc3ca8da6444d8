//! `linerate tunnels --hold D --rekey T`: the hold, with every tunnel's
//! CHILD_SA rekeyed every T, spread evenly over the tunnels as the packet
//! commands' `--rekey` does (`ike_keeper`): tunnel i first at (i + ½) T / N
//! into the hold, then every T, so the gateway sees N / T rekeys per
//! second (the half keeps the last tunnel's turns off the hold's end when
//! D is a multiple of T: a hold of D rekeys each tunnel D / T times). Rekeys
//! still waiting for their answer when the hold ends get [`DRAIN`] more.
//! The gateway's requests are answered and counted as in a plain hold,
//! and so are the rekeys it starts.
//!
//! With `--traffic` the tunnel's test frames move to the new SA as soon as
//! the gateway answered linerate's rekey (it installed the new SA before
//! answering); after a rekey the gateway started, only once it deleted the
//! old CHILD_SA (at most 1 s later), as RFC 7296 §2.8 and the keeper have
//! it. Each rekey's window (request to [`MARGIN`] after the move) is
//! marked in the tunnel's sequence of test frames; what never arrived of
//! it is the loss around the rekey ([`RekeyRun::record`]).

use super::traffic::{Traffic, TrafficCounts, TunnelMark, UpTunnel};
use crate::peers::reason;
use crate::rekey_schedule::{HeldKeys, RekeySchedule};
use linerate_ike::{Event, Fleet, SaKeys};
use linerate_results::tunnels::{HoldRecord, HoldRekeys, TunnelRekeys};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How long a rekey's window lasts after the tunnel's frames moved to the
/// new SA: frames sent on the old SA still in flight when the gateway
/// deleted it are lost in it.
const MARGIN: Duration = Duration::from_millis(500);

/// Where in its share of the period each tunnel's first rekey falls: the
/// middle, so the last tunnel's turns stay off the hold's end.
const PHASE: f64 = 0.5;

/// How long rekeys still under way when the hold ends may take to be
/// answered; those that are not count as failed.
const DRAIN: Duration = Duration::from_secs(2);

/// The rekeys of the hold, as counted, and (with `--traffic`) the windows
/// marked in each tunnel's frames; the loss is read once the traffic
/// stopped and port A had every frame in flight.
pub(super) struct RekeyRun {
    every: Duration,
    hold_s: f64,
    tunnels: Vec<TunnelRekeys>,
    failed: Vec<(Ipv4Addr, String)>,
    took_ms: Vec<f64>,
    /// Each closed window: the tunnel, where its frames stood at the
    /// window's start and at its end.
    windows: Vec<(usize, TunnelMark, TunnelMark)>,
    /// Each tunnel's frames at the hold's start and end.
    hold_marks: Vec<(TunnelMark, TunnelMark)>,
}

impl RekeyRun {
    /// The report's record: the counts and, with the traffic's counts and
    /// its rate per tunnel, the frames lost in the rekeys' windows and
    /// outside them.
    pub(super) fn record(&self, traffic: Option<(&TrafficCounts, f64)>) -> HoldRekeys {
        let mut tunnels = self.tunnels.clone();
        let mut lost_elsewhere = None;
        if let Some((counts, _)) = traffic {
            let mut in_windows = vec![0u64; tunnels.len()];
            for t in &mut tunnels {
                t.window_sent = Some(0);
                t.lost = Some(0);
            }
            for &(i, from, to) in &self.windows {
                let (sent, lost) = counts.lost_between(i, from, to);
                let t = &mut tunnels[i];
                t.window_sent = Some(t.window_sent.unwrap_or(0) + sent);
                t.lost = Some(t.lost.unwrap_or(0) + lost);
                in_windows[i] += lost;
            }
            let hold_lost: u64 = self
                .hold_marks
                .iter()
                .enumerate()
                .map(|(i, &(from, to))| counts.lost_between(i, from, to).1)
                .sum();
            lost_elsewhere = Some(hold_lost.saturating_sub(in_windows.iter().sum()));
        }
        HoldRekeys::new(
            (self.every.as_secs_f64(), self.hold_s, MARGIN.as_secs_f64()),
            traffic.map(|(_, rate)| rate),
            tunnels,
            &self.failed,
            &self.took_ms,
            lost_elsewhere,
        )
    }
}

/// A rekey under way or just ended, for its window.
#[derive(Clone, Copy)]
struct Window {
    /// When linerate asked (None: the gateway started it).
    asked: Option<Instant>,
    from: TunnelMark,
}

/// What the hold carries from one turn to the next.
struct Rekeying<'a> {
    fleet: &'a mut Fleet,
    traffic: Option<&'a Traffic>,
    peers: &'a [Ipv4Addr],
    /// One kind of rekey: the CHILD_SA's.
    due: RekeySchedule<()>,
    /// Each tunnel's rekey under way.
    open: Vec<Option<Window>>,
    /// After a rekey the gateway started: the new outbound keys, until
    /// the gateway deletes the old CHILD_SA (or their time ran out).
    held: HeldKeys<SaKeys>,
    /// Windows whose rekey ended, to be closed at their time.
    closing: Vec<(Instant, usize, TunnelMark)>,
    record: HoldRecord,
    run: RekeyRun,
}

/// Holds the tunnels for `hold` from `start` (or until interrupted),
/// rekeying each one's CHILD_SA every `every` and answering the gateway.
pub(super) fn hold_rekeying(
    fleet: &mut Fleet,
    peers: &[Ipv4Addr],
    (every, hold): (Duration, Duration),
    traffic: Option<&Traffic>,
    interrupt: &AtomicBool,
    start: Instant,
) -> (HoldRecord, RekeyRun) {
    let n = peers.len();
    let mark = |i: usize| traffic.map_or_else(TunnelMark::default, |t| t.tunnel_mark(i));
    let mut r = Rekeying {
        // One kind: no turn ever waits for another, so no retry.
        due: RekeySchedule::spread(n, &[((), every)], PHASE, start, Duration::ZERO),
        open: vec![None; n],
        held: HeldKeys::new(n),
        closing: Vec::new(),
        record: HoldRecord::default(),
        run: RekeyRun {
            every,
            hold_s: 0.0,
            tunnels: peers.iter().map(|&peer| TunnelRekeys::of(peer)).collect(),
            failed: Vec::new(),
            took_ms: Vec::new(),
            windows: Vec::new(),
            hold_marks: (0..n).map(|i| (mark(i), mark(i))).collect(),
        },
        fleet,
        traffic,
        peers,
    };
    r.turns_until(start + hold, interrupt, true);
    // Rekeys per second are over the hold, not the drain after it.
    r.run.hold_s = start.elapsed().as_secs_f64();
    // Rekeys under way get their answer; those without one failed.
    r.turns_until(Instant::now() + DRAIN, interrupt, false);
    let now = Instant::now();
    for i in 0..n {
        if let Some(w) = r.open[i].take() {
            match w.asked {
                Some(_) => r.failed(i, "no answer before the hold ended".into(), w, now),
                None => r.run.windows.push((i, w.from, mark(i))),
            }
        }
    }
    // Windows still open end with the hold.
    r.close_windows(now, true);
    for i in 0..n {
        r.run.hold_marks[i].1 = mark(i);
    }
    r.record.seconds = start.elapsed().as_secs_f64();
    r.record.up_at_end = r.fleet.established() as u64;
    (r.record, r.run)
}

impl Rekeying<'_> {
    /// Answers the gateway, moves frames, closes windows and (with
    /// `rekeying`) starts the rekeys due until `end`, or until interrupted;
    /// without `rekeying`, ends early once no rekey of linerate's is under
    /// way.
    fn turns_until(&mut self, end: Instant, interrupt: &AtomicBool, rekeying: bool) {
        while Instant::now() < end && !interrupt.load(Ordering::Relaxed) {
            if !rekeying && !self.open.iter().flatten().any(|w| w.asked.is_some()) {
                break;
            }
            let now = Instant::now();
            let wake = self.wake(now).min(end);
            for e in self.fleet.poll(wake.saturating_duration_since(now)) {
                self.on_event(e.peer, e.event);
            }
            let now = Instant::now();
            self.release_held(now);
            self.close_windows(now, false);
            if rekeying {
                self.rekey_due(now);
            }
        }
    }

    fn mark(&self, i: usize) -> TunnelMark {
        self.traffic
            .map_or_else(TunnelMark::default, |t| t.tunnel_mark(i))
    }

    /// The next thing due after `now`: a rekey, a window's end, held keys'
    /// time; at most 100 ms away (the interrupt's check).
    fn wake(&self, now: Instant) -> Instant {
        let mut at = now + Duration::from_millis(100);
        for t in [self.due.next_at(), self.held.next_at()]
            .into_iter()
            .flatten()
        {
            at = at.min(t);
        }
        for &(t, _, _) in &self.closing {
            at = at.min(t);
        }
        at
    }

    /// Acts on what the gateway did to tunnel `i`.
    fn on_event(&mut self, i: usize, event: Event) {
        let now = Instant::now();
        match event {
            Event::LivenessCheck => self.record.liveness_checks += 1,
            Event::ChildRekeyed => self.rekeyed(i, now),
            Event::RekeyedChildDeleted => {
                if let Some(keys) = self.held.release(i) {
                    self.move_frames(i, keys, now);
                }
            }
            Event::RekeyFailed => match self.open.get_mut(i).and_then(Option::take) {
                Some(w) if w.asked.is_some() => {
                    // The gateway's notify, or no answer after the tries.
                    let why = self
                        .fleet
                        .rekey_error(i)
                        .map_or_else(|| "no answer, or refused".into(), |e| reason(&e));
                    self.failed(i, why, w, now)
                }
                other => {
                    self.open[i] = other;
                    self.record.other_requests += 1;
                }
            },
            Event::ChildDeleted | Event::IkeDeleted => {
                self.record.deleted_by_gateway += 1;
                if let Some(w) = self.open.get_mut(i).and_then(Option::take) {
                    if w.asked.is_some() {
                        self.failed(i, "deleted by the gateway".into(), w, now);
                    }
                }
            }
            _ => self.record.other_requests += 1,
        }
    }

    /// Tunnel `i`'s CHILD_SA was rekeyed: linerate's rekey answered (its
    /// frames move now), or the gateway's (they move once it deleted the
    /// old CHILD_SA).
    fn rekeyed(&mut self, i: usize, now: Instant) {
        let Some(keys) = self.fleet.child(i).map(|c| c.outbound.clone()) else {
            return;
        };
        match self.open[i].filter(|w| w.asked.is_some()) {
            Some(w) => {
                let t = &mut self.run.tunnels[i];
                t.completed += 1;
                if let Some(asked) = w.asked {
                    self.run
                        .took_ms
                        .push(now.saturating_duration_since(asked).as_secs_f64() * 1e3);
                }
                self.move_frames(i, keys, now);
            }
            None => {
                self.run.tunnels[i].by_gateway += 1;
                self.open[i] = Some(Window {
                    asked: None,
                    from: self.mark(i),
                });
                self.held.hold(i, keys, now);
            }
        }
    }

    /// Tunnel `i`'s frames go on on `keys`; its window closes a margin on.
    fn move_frames(&mut self, i: usize, keys: SaKeys, now: Instant) {
        if let Some(t) = self.traffic {
            t.tunnel_up(UpTunnel { index: i, keys });
        }
        if let Some(w) = self.open[i].take() {
            self.closing.push((now + MARGIN, i, w.from));
        }
    }

    /// Linerate's rekey of tunnel `i` failed: counted with its reason; its
    /// window closes a margin on.
    fn failed(&mut self, i: usize, why: String, w: Window, now: Instant) {
        self.run.tunnels[i].failed += 1;
        self.run.failed.push((self.peers[i], why));
        self.closing.push((now + MARGIN, i, w.from));
    }

    /// Moves the frames of held keys whose time ran out by `now` (a
    /// gateway that keeps the old CHILD_SA).
    fn release_held(&mut self, now: Instant) {
        for (i, keys) in self.held.release_expired(now) {
            self.move_frames(i, keys, now);
        }
    }

    /// Closes the windows due by `now` (`all`: every one).
    fn close_windows(&mut self, now: Instant, all: bool) {
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.closing)
            .into_iter()
            .partition(|(at, _, _)| all || *at <= now);
        self.closing = later;
        for (_, i, from) in due {
            let to = self.mark(i);
            self.run.windows.push((i, from, to));
        }
    }

    /// Asks for every rekey due by `now` and schedules each tunnel's next;
    /// a tunnel that is down, or whose rekey is still under way, skips its
    /// turn.
    fn rekey_due(&mut self, now: Instant) {
        // A tunnel that is down is as busy as one with a rekey under way.
        while let Some((i, ())) = self.due.next_due(now, |i| {
            (self.open[i].is_some() || self.fleet.child(i).is_none()).then_some(())
        }) {
            let window = Window {
                asked: Some(Instant::now()),
                from: self.mark(i),
            };
            self.run.tunnels[i].attempted += 1;
            match self.fleet.rekey_child(i) {
                Ok(()) => self.open[i] = Some(window),
                Err(e) => self.failed(i, reason(&e), window, Instant::now()),
            }
        }
    }
}
