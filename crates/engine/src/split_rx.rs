//! One port's receive side on several threads (`--rx-threads`): each
//! thread runs the receive loop on a queue of its own, and their counts
//! add up to the port's.
//!
//! The queues must split the frames so that each thread sees whole
//! streams (af_packet's fanout group steers a test frame by its stream
//! number): a stream's duplicates, reordering and sequence errors are
//! judged against all of its frames, so a stream counted on two threads
//! would be judged on neither. The threads' counts are then added, stream
//! by stream ([`StreamStats::merge`]: exact when each stream was counted
//! on one thread).
//!
//! The trial talks to one receiver through one [`ReceiverSignals`]; each
//! thread gets signals of its own, and this receiver relays between them
//! every [`RELAY`]: the stop down, the distinct frames counted (summed),
//! readiness (all threads), and the gateway's MAC (learned by whichever
//! thread receives the answer: ARP goes to the first queue) both ways.

use crate::backend::{Clock, Receiver};
use crate::host::HostConfig;
use crate::receiver::{Counted, ReceiverSignals, StreamRange};
use crate::EngineError;
use linerate_wire::MacAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// How often the threads' signals are relayed: what a stop may wait for
/// on top of the receive loop's own poll.
const RELAY: Duration = Duration::from_millis(1);

/// A receiver made of several, each on its own thread.
pub struct SplitRx {
    parts: Vec<Box<dyn Receiver>>,
    /// A transform dealt out to the parts, kept (emptied) while they run.
    _holds: Option<Box<dyn crate::transform::ReceiveTransform>>,
}

impl SplitRx {
    /// `parts` receive the port's frames between them, each its own share
    /// of the streams; at least one.
    pub fn new(parts: Vec<Box<dyn Receiver>>) -> SplitRx {
        assert!(!parts.is_empty(), "a port receives on one thread at least");
        SplitRx {
            parts,
            _holds: None,
        }
    }
}

impl Receiver for SplitRx {
    fn receive(
        &mut self,
        mac: MacAddr,
        host: &HostConfig,
        range: StreamRange,
        signals: &ReceiverSignals,
    ) -> Result<Counted, EngineError> {
        let subs: Vec<ReceiverSignals> = self
            .parts
            .iter()
            .map(|_| {
                let s = ReceiverSignals::default();
                *s.gateway_mac.lock().expect("fresh signals") = signals.gateway_mac();
                s
            })
            .collect();
        let results = std::thread::scope(|scope| {
            let handles: Vec<_> = self
                .parts
                .iter_mut()
                .zip(&subs)
                .map(|(part, sub)| scope.spawn(move || part.receive(mac, host, range, sub)))
                .collect();
            loop {
                let ended = handles.iter().any(|h| h.is_finished());
                if signals.stop.load(Ordering::Relaxed) || ended {
                    // A thread that failed ends the others: the trial
                    // reports its error.
                    for sub in &subs {
                        sub.stop.store(true, Ordering::Relaxed);
                    }
                }
                relay(signals, &subs);
                if handles.iter().all(|h| h.is_finished()) {
                    break;
                }
                std::thread::sleep(RELAY);
            }
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or(Err(EngineError::Thread(
                        "a receiving thread panicked".into(),
                    )))
                })
                .collect::<Vec<_>>()
        });
        let mut total: Option<Counted> = None;
        let mut per_thread = Vec::with_capacity(results.len());
        for counted in results {
            let counted = counted?;
            per_thread.push(counted.streams.iter().map(|s| s.received()).sum());
            match &mut total {
                None => total = Some(counted),
                Some(t) => add(t, &counted),
            }
        }
        let mut total = total.expect("one part at least");
        total.per_thread = per_thread;
        Ok(total)
    }

    fn clock(&self) -> Clock {
        self.parts[0].clock()
    }

    fn max_streams(&self) -> u16 {
        self.parts
            .iter()
            .map(|p| p.max_streams())
            .min()
            .unwrap_or(u16::MAX)
    }

    fn max_frame_len(&self) -> usize {
        self.parts
            .iter()
            .map(|p| p.max_frame_len())
            .min()
            .unwrap_or(0)
    }

    fn kind(&self) -> crate::ReceiverKind {
        self.parts[0].kind()
    }

    /// The transform dealt out to the threads, a share each (ESP: tunnel
    /// i's SAs to thread i mod n, as the port's fanout steers tunnel i's
    /// frames). One that cannot be split is handed back.
    fn set_transform(
        &mut self,
        mut transform: Box<dyn crate::transform::ReceiveTransform>,
    ) -> Result<(), Box<dyn crate::transform::ReceiveTransform>> {
        let Some(shares) = transform.split(self.parts.len()) else {
            return Err(transform);
        };
        for (part, share) in self.parts.iter_mut().zip(shares) {
            part.set_transform(share)?;
        }
        // The emptied original keeps what it holds (the claim on raw ESP)
        // as long as the shares run.
        self._holds = Some(transform);
        Ok(())
    }

    fn transform(&self) -> Option<&dyn crate::transform::ReceiveTransform> {
        self.parts[0].transform()
    }

    fn receiving_threads(&self) -> usize {
        self.parts.len()
    }
}

/// One relay step between the trial's signals and the threads'.
fn relay(signals: &ReceiverSignals, subs: &[ReceiverSignals]) {
    let received = subs
        .iter()
        .map(|s| s.received.load(Ordering::Acquire))
        .sum();
    signals.received.store(received, Ordering::Release);
    if subs.iter().all(|s| s.ready.load(Ordering::Acquire)) {
        signals.ready.store(true, Ordering::Release);
    }
    let learned = signals
        .gateway_mac()
        .or_else(|| subs.iter().find_map(|s| s.gateway_mac()));
    if let Some(gw) = learned {
        for s in std::iter::once(signals).chain(subs) {
            let mut m = s.gateway_mac.lock().expect("receiver signals poisoned");
            if m.is_none() {
                *m = Some(gw);
            }
        }
    }
}

/// Adds one thread's counts to the port's.
fn add(total: &mut Counted, part: &Counted) {
    for (t, p) in total.streams.iter_mut().zip(&part.streams) {
        t.merge(p);
    }
    total.stray += part.stray;
    total.errored += part.errored;
    total.ring_drops += part.ring_drops;
    if total.tunnels.len() < part.tunnels.len() {
        total.tunnels.resize(part.tunnels.len(), 0);
    }
    for (t, p) in total.tunnels.iter_mut().zip(&part.tunnels) {
        *t += p;
    }
}
