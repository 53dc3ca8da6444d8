//! While a run lasts, one thread keeps linerate's side of its IPsec
//! tunnels alive: it answers the gateway's requests (liveness checks, the
//! rekeys the gateway starts), rekeys every tunnel's CHILD_SA every
//! `--rekey` period when asked, and hands each new CHILD_SA's keys to the
//! data path, whose transforms take them at their next frame.
//!
//! Without it, a tunnel the gateway rekeys in a long run would carry the
//! test frames on keys the gateway has deleted: every frame lost, and
//! blamed on the gateway.
//!
//! Rekeys linerate starts are spread evenly over the period: with N
//! tunnels and `--rekey T`, tunnel i is first rekeyed at (i + 1) T / N
//! after the start, then every T, so the gateway sees N / T rekeys per
//! second, not N at once. `--rekey-ike T` rekeys each tunnel's IKE SA on
//! the same kind of schedule; a tunnel has one request in flight at most,
//! so a CHILD_SA rekey and an IKE SA rekey due together go one after the
//! other, the CHILD_SA's first ([`crate::rekey_schedule`], shared with
//! `linerate tunnels --rekey`).

use crate::ipsec::plan::Every;
use crate::peers::reason;
use crate::rekey_schedule::{HeldKeys, RekeySchedule};
use linerate_engine::ipsec::SaInbox;
use linerate_esp::{Inbound, Outbound};
use linerate_ike::{ChildInstaller, ChildSa, Event, Fleet, IkeError, Session};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The IKE side of the run's tunnels: one session, or a fleet of peers.
pub enum Peers {
    One(Box<Session>),
    Many(Box<Fleet>),
}

/// How long the thread waits at most before it looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// What happened to one tunnel's IKE side, as the thread saw it.
enum Outcome {
    Rekeyed,
    RekeyFailed(String),
    /// The gateway deleted the CHILD_SA or the IKE SA.
    Deleted(String),
    /// The gateway deleted the CHILD_SA a rekey replaced.
    OldDeleted,
    /// The IKE SA was rekeyed (the gateway's, answered): the CHILD_SA and
    /// its keys stay, so the data path has nothing to take.
    IkeRekeyed,
}

impl Peers {
    fn count(&self) -> usize {
        match self {
            Peers::One(_) => 1,
            Peers::Many(f) => f.peers(),
        }
    }

    /// Answers the gateway for up to `timeout` and returns what ended.
    fn poll(&mut self, timeout: Duration, gone: &mut bool) -> Vec<(usize, Outcome)> {
        match self {
            Peers::One(s) => {
                if *gone {
                    // The IKE SA is deleted: nothing is left to answer.
                    std::thread::sleep(timeout);
                    return Vec::new();
                }
                match s.poll(timeout) {
                    Ok(Some(Event::ChildRekeyed)) => vec![(0, Outcome::Rekeyed)],
                    Ok(Some(Event::RekeyedChildDeleted)) => vec![(0, Outcome::OldDeleted)],
                    Ok(Some(Event::IkeRekeyed)) => vec![(0, Outcome::IkeRekeyed)],
                    Ok(Some(Event::ChildDeleted)) => {
                        vec![(
                            0,
                            Outcome::Deleted("the gateway deleted the CHILD_SA".into()),
                        )]
                    }
                    Ok(Some(Event::IkeDeleted)) => {
                        *gone = true;
                        vec![(0, Outcome::Deleted("the gateway deleted the IKE SA".into()))]
                    }
                    Ok(_) => Vec::new(),
                    Err(e @ IkeError::Deleted { .. }) => {
                        *gone = true;
                        vec![(0, Outcome::Deleted(reason(&e)))]
                    }
                    Err(e) => vec![(0, Outcome::RekeyFailed(reason(&e)))],
                }
            }
            Peers::Many(f) => f
                .poll(timeout)
                .into_iter()
                .filter_map(|e| {
                    let outcome = match e.event {
                        Event::ChildRekeyed => Outcome::Rekeyed,
                        Event::RekeyedChildDeleted => Outcome::OldDeleted,
                        Event::IkeRekeyed => Outcome::IkeRekeyed,
                        // The gateway's notify, or no answer after the tries.
                        Event::RekeyFailed => Outcome::RekeyFailed(
                            f.rekey_error(e.peer)
                                .map_or_else(|| "no answer, or refused".into(), |e| reason(&e)),
                        ),
                        Event::ChildDeleted => {
                            Outcome::Deleted("the gateway deleted the CHILD_SA".into())
                        }
                        Event::IkeDeleted => {
                            Outcome::Deleted("the gateway deleted the IKE SA".into())
                        }
                        _ => return None,
                    };
                    Some((e.peer, outcome))
                })
                .collect(),
        }
    }

    fn child(&self, tunnel: usize) -> Option<&ChildSa> {
        match self {
            Peers::One(s) => Some(s.child()),
            Peers::Many(f) => f.child(tunnel),
        }
    }

    /// Each rekey's new inbound SA goes into the data path's `inbox`
    /// before the gateway may send on it (the answer to its rekey, or the
    /// Delete of the old CHILD_SA after linerate's, leaves after).
    fn install_inbound_into(&mut self, inbox: Arc<SaInbox<Inbound>>) {
        let install: ChildInstaller = Box::new(move |tunnel, child| {
            if let Ok(sa) = Inbound::new(child.inbound.clone()) {
                inbox.push(tunnel, sa);
            }
        });
        match self {
            Peers::One(s) => s.install_new_children(install),
            Peers::Many(f) => f.install_new_children(install),
        }
    }

    fn rekey(&mut self, tunnel: usize, what: Rekeying) -> Result<(), IkeError> {
        match (self, what) {
            (Peers::One(s), Rekeying::Child) => s.rekey_child(),
            (Peers::Many(f), Rekeying::Child) => f.rekey_child(tunnel),
            (Peers::One(s), Rekeying::Ike) => s.rekey_ike(),
            (Peers::Many(f), Rekeying::Ike) => f.rekey_ike(tunnel),
        }
    }
}

/// What a scheduled rekey replaces; in this order when both are due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Rekeying {
    Child,
    Ike,
}

/// One finished CHILD_SA rekey.
#[derive(Debug, Clone)]
pub struct Rekey {
    pub tunnel: usize,
    /// When it ended (the answer, or the failure).
    pub at: Instant,
    /// From linerate's CREATE_CHILD_SA request to the gateway's answer;
    /// None: the gateway started it (linerate answered at once).
    pub took: Option<Duration>,
    /// The new CHILD_SA's SPIs (linerate sends on the first); None when
    /// it failed.
    pub spis: Option<(u32, u32)>,
    /// Why it failed.
    pub failed: Option<String>,
}

/// Everything the thread did, readable while it runs: running totals
/// (exact however long the run) and the latest rekeys themselves.
#[derive(Debug, Default)]
pub struct RekeyLog {
    pub totals: RekeyTotals,
    /// The latest finished rekeys, oldest first: at most [`KEPT`]; the
    /// first is the `dropped`th rekey of the run.
    pub rekeys: std::collections::VecDeque<Rekey>,
    pub dropped: usize,
    /// Tunnels the gateway took down while the run went on.
    pub deleted: Vec<(usize, String)>,
    /// Each tunnel's SPIs now (out, in).
    pub spis: Vec<(u32, u32)>,
}

/// Rekeys kept in the log (a 1,000-tunnel run rekeyed every 2 s makes
/// 30,000 a minute).
pub const KEPT: usize = 100_000;

/// Counts since the thread started.
#[derive(Debug, Default, Clone, Copy)]
pub struct RekeyTotals {
    /// Rekeys linerate started that the gateway answered, and their
    /// request-to-answer times summed.
    pub done: u64,
    pub took_s: f64,
    /// Rekeys the gateway started.
    pub by_gateway: u64,
    pub failed: u64,
    /// IKE SA rekeys, counted apart from the CHILD_SA rekeys above: those
    /// linerate started (`--rekey-ike`) that the gateway answered, those
    /// the gateway started, and those of linerate's that failed.
    pub ike_done: u64,
    pub ike_by_gateway: u64,
    pub ike_failed: u64,
}

impl RekeyLog {
    /// How many rekeys ended since the start.
    pub fn ended(&self) -> usize {
        self.dropped + self.rekeys.len()
    }

    /// The rekeys that ended `from`..`to` (counted from the start) and
    /// are still kept.
    pub fn between(&self, from: usize, to: usize) -> impl Iterator<Item = &Rekey> {
        let skip = from.saturating_sub(self.dropped);
        let take = to.saturating_sub(self.dropped).saturating_sub(skip);
        self.rekeys.iter().skip(skip).take(take)
    }

    fn push(&mut self, r: Rekey) {
        match (&r.failed, r.took) {
            (Some(_), _) => self.totals.failed += 1,
            (None, Some(took)) => {
                self.totals.done += 1;
                self.totals.took_s += took.as_secs_f64();
            }
            (None, None) => self.totals.by_gateway += 1,
        }
        if self.rekeys.len() == KEPT {
            self.rekeys.pop_front();
            self.dropped += 1;
        }
        self.rekeys.push_back(r);
    }
}

/// Where new keys go: the data path's inboxes, and with `--esp-keys` the
/// file Wireshark reads (one tunnel: its peer and gateway addresses).
pub struct Handoff {
    pub outbound: Arc<SaInbox<Outbound>>,
    pub inbound: Arc<SaInbox<Inbound>>,
    pub esp_keys: Option<(PathBuf, Ipv4Addr, Ipv4Addr)>,
}

/// The running thread.
pub struct Keeper {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Peers>>,
    pub log: Arc<Mutex<RekeyLog>>,
}

impl Keeper {
    /// Starts the thread over `peers`; `every`: rekey each tunnel's
    /// CHILD_SA and IKE SA that often.
    pub fn start(mut peers: Peers, handoff: Handoff, every: Every) -> Keeper {
        peers.install_inbound_into(Arc::clone(&handoff.inbound));
        let stop = Arc::new(AtomicBool::new(false));
        let n = peers.count();
        let spis = (0..n)
            .map(|i| {
                peers
                    .child(i)
                    .map_or((0, 0), |c| (c.outbound.spi, c.inbound.spi))
            })
            .collect();
        let log = Arc::new(Mutex::new(RekeyLog {
            spis,
            ..RekeyLog::default()
        }));
        let thread = {
            let (stop, log) = (stop.clone(), log.clone());
            std::thread::Builder::new()
                .name("ike-keeper".into())
                .spawn(move || keep(peers, handoff, every, &stop, &log))
                .expect("a thread starts")
        };
        Keeper {
            stop,
            thread: Some(thread),
            log,
        }
    }

    /// Whether the thread ended without being stopped: it panicked, and
    /// nothing answers the gateway or rekeys the tunnels any more. A
    /// trial it did not see through measures the tester's failure.
    pub fn died(&self) -> bool {
        !self.stop.load(Ordering::Relaxed) && self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the thread and hands the IKE side back (for the Deletes).
    pub fn stop(mut self) -> Option<Peers> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take()?.join().ok()
    }
}

impl Drop for Keeper {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The thread: answer, rekey on schedule, hand keys over, until `stop`.
fn keep(
    peers: Peers,
    handoff: Handoff,
    every: Every,
    stop: &AtomicBool,
    log: &Mutex<RekeyLog>,
) -> Peers {
    let mut keeping = Keeping::new(peers, handoff, every, Instant::now());
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        let timeout = keeping.wake(now).saturating_duration_since(now);
        for (tunnel, outcome) in keeping.peers.poll(timeout, &mut keeping.gone) {
            keeping.ended(tunnel, outcome, log);
        }
        let now = Instant::now();
        keeping.release_held(now);
        keeping.rekey_due(now, log);
    }
    keeping.peers
}

/// What [`keep`]'s loop carries from one turn to the next, so that each
/// phase of a turn (answer, release held keys, start due rekeys) is its
/// own method.
struct Keeping {
    peers: Peers,
    handoff: Handoff,
    /// Each tunnel's next rekeys, soonest first.
    due: RekeySchedule<Rekeying>,
    /// When linerate asked for each tunnel's pending rekey, and of what.
    asked: Vec<Option<(Instant, Rekeying)>>,
    /// After a rekey the gateway started: the new outbound SA, held back
    /// until the gateway deletes the old CHILD_SA (it installs its new
    /// inbound SA only once it has linerate's answer), or until the time
    /// given, for a gateway that keeps the old one.
    held: HeldKeys<Outbound>,
    /// The one session's IKE SA is deleted.
    gone: bool,
}

impl Keeping {
    /// Schedules the rekeys (with `every`) from `start`: tunnel i first at
    /// (i + 1) `every` / N, so they spread evenly over the period.
    fn new(peers: Peers, handoff: Handoff, every: Every, start: Instant) -> Keeping {
        let n = peers.count();
        let periods: Vec<(Rekeying, Duration)> =
            [(Rekeying::Child, every.child), (Rekeying::Ike, every.ike)]
                .into_iter()
                .filter_map(|(what, period)| Some((what, period?)))
                .collect();
        // A turn waiting for the tunnel's other request is tried again
        // at the loop's next turn.
        let due = RekeySchedule::spread(n, &periods, 1.0, start, STOP_CHECK);
        Keeping {
            peers,
            handoff,
            due,
            asked: vec![None; n],
            held: HeldKeys::new(n),
            gone: false,
        }
    }

    /// When the next turn is due, read at `now`: the next rekey, or the
    /// stop check's period at the latest.
    fn wake(&self, now: Instant) -> Instant {
        self.due
            .next_at()
            .map_or(now + STOP_CHECK, |t| t.min(now + STOP_CHECK))
    }

    /// Acts on what ended for `tunnel`: new keys handed over (or held),
    /// the rekey or the gateway's delete logged.
    fn ended(&mut self, tunnel: usize, outcome: Outcome, log: &Mutex<RekeyLog>) {
        // A rekey's end ends linerate's request for the tunnel, if it
        // made one of that kind (a failure: of either kind); nothing else
        // does.
        let asked = self.asked.get(tunnel).copied().flatten();
        let ends_ours = matches!(
            (&outcome, asked),
            (Outcome::Rekeyed, Some((_, Rekeying::Child)))
                | (Outcome::IkeRekeyed, Some((_, Rekeying::Ike)))
                | (Outcome::RekeyFailed(_), Some(_))
        );
        let (took, what) = match (ends_ours, asked) {
            (true, Some((at, what))) => {
                self.asked[tunnel] = None;
                (Some(at.elapsed()), Some(what))
            }
            _ => (None, None),
        };
        let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
        match outcome {
            Outcome::IkeRekeyed if took.is_some() => log.totals.ike_done += 1,
            Outcome::IkeRekeyed => log.totals.ike_by_gateway += 1,
            Outcome::RekeyFailed(_) if what == Some(Rekeying::Ike) => log.totals.ike_failed += 1,
            Outcome::OldDeleted => {
                if let Some(sa) = self.held.release(tunnel) {
                    self.handoff.outbound.push(tunnel, sa);
                }
            }
            Outcome::Rekeyed => {
                let hold = took.is_none().then_some(&mut self.held);
                let spis = hand_over(&self.peers, tunnel, &self.handoff, hold);
                if let (Some(s), Some(slot)) = (spis, log.spis.get_mut(tunnel)) {
                    *slot = s;
                }
                log.push(Rekey {
                    tunnel,
                    at: Instant::now(),
                    took,
                    spis,
                    failed: spis
                        .is_none()
                        .then(|| "its keys did not fit the data path".into()),
                });
            }
            // An error while no rekey was asked (the socket's): not
            // a rekey's; wait a little rather than spin on it.
            Outcome::RekeyFailed(_) if took.is_none() => {
                drop(log);
                std::thread::sleep(Duration::from_millis(10));
            }
            Outcome::RekeyFailed(why) => log.push(Rekey {
                tunnel,
                at: Instant::now(),
                took,
                spis: None,
                failed: Some(why),
            }),
            Outcome::Deleted(why) => log.deleted.push((tunnel, why)),
        }
    }

    /// Hands the data path the outbound SAs held past their time by `now`
    /// (a gateway that keeps the old CHILD_SA).
    fn release_held(&mut self, now: Instant) {
        for (tunnel, sa) in self.held.release_expired(now) {
            self.handoff.outbound.push(tunnel, sa);
        }
    }

    /// Asks for every rekey due by `now` and schedules each tunnel's next;
    /// a request that cannot be sent is logged as a failed rekey.
    fn rekey_due(&mut self, now: Instant, log: &Mutex<RekeyLog>) {
        // One request at a time per tunnel: a CHILD_SA rekey waits for the
        // IKE SA rekey in flight (or the other way round) and goes right
        // after it; a rekey of the same kind still unanswered skips its
        // turn.
        while let Some((i, what)) = self
            .due
            .next_due(now, |i| self.asked[i].map(|(_, pending)| pending))
        {
            match self.peers.rekey(i, what) {
                Ok(()) => self.asked[i] = Some((Instant::now(), what)),
                Err(_) if what == Rekeying::Ike => {
                    log.lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .totals
                        .ike_failed += 1;
                }
                Err(e) => {
                    let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                    log.push(Rekey {
                        tunnel: i,
                        at: Instant::now(),
                        took: None,
                        spis: None,
                        failed: Some(reason(&e)),
                    });
                }
            }
        }
    }
}

/// Gives tunnel `tunnel`'s new outbound SA to the data path (its inbound
/// SA is there already: [`Peers::install_inbound_into`]), at once or,
/// with `hold`, once the gateway deleted the old CHILD_SA. Its SPIs.
fn hand_over(
    peers: &Peers,
    tunnel: usize,
    handoff: &Handoff,
    hold: Option<&mut HeldKeys<Outbound>>,
) -> Option<(u32, u32)> {
    let child = peers.child(tunnel)?;
    let outbound = Outbound::new(child.outbound.clone()).ok()?;
    match hold {
        Some(held) => held.hold(tunnel, outbound, Instant::now()),
        None => handoff.outbound.push(tunnel, outbound),
    }
    if let Some((path, peer, gateway)) = &handoff.esp_keys {
        let lines = format!(
            "{}\n{}\n",
            child.outbound.wireshark_esp_sa(*peer, *gateway),
            child.inbound.wireshark_esp_sa(*gateway, *peer)
        );
        use std::io::Write;
        // Checked as when the file was first written (never through a
        // link, only the run's own file).
        if let Ok(mut f) = crate::secret_file::open_private(path, true) {
            let _ = f.write_all(lines.as_bytes());
        }
    }
    Some((child.outbound.spi, child.inbound.spi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rekey(tunnel: usize, took: Option<u64>, failed: bool) -> Rekey {
        Rekey {
            tunnel,
            at: Instant::now(),
            took: took.map(Duration::from_millis),
            spis: (!failed).then_some((tunnel as u32, 0)),
            failed: failed.then(|| "no answer".into()),
        }
    }

    /// The totals tell linerate's rekeys, the gateway's and failures
    /// apart, and `between` finds the rekeys of a window by their place
    /// since the start, also once older ones were dropped.
    #[test]
    fn the_log_counts_each_kind_and_finds_a_windows_rekeys() {
        let mut log = RekeyLog::default();
        log.push(rekey(0, Some(2), false));
        log.push(rekey(1, None, false));
        log.push(rekey(2, Some(4), true));
        log.push(rekey(3, Some(6), false));
        let t = log.totals;
        assert_eq!((t.done, t.by_gateway, t.failed), (2, 1, 1));
        assert!((t.took_s - 0.008).abs() < 1e-9);
        assert_eq!(log.ended(), 4);
        let window: Vec<usize> = log.between(1, 3).map(|r| r.tunnel).collect();
        assert_eq!(window, [1, 2]);
        // The two oldest dropped: the window 1..3 keeps only its second.
        log.rekeys.drain(..2);
        log.dropped = 2;
        assert_eq!(log.ended(), 4);
        let window: Vec<usize> = log.between(1, 3).map(|r| r.tunnel).collect();
        assert_eq!(window, [2]);
        let window: Vec<usize> = log.between(2, 4).map(|r| r.tunnel).collect();
        assert_eq!(window, [2, 3]);
    }
}
