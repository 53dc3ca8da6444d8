//! The receive loop of one port: counts the trial's test frames per stream,
//! answers ARP (or, for IPv6, Neighbor Solicitations) for the port's
//! address and learns the gateway's MAC.

use crate::host::{ArpAction, HostConfig};
use crate::stats::StreamStats;
use crate::transform::{Arrived, ReceiveTransform};
use linerate_port::{PortError, RxQueue};
use linerate_wire::integrity::intact;
use linerate_wire::signature::{earliest_send_ns, plausible_latency};
use linerate_wire::{classify, FrameCheck, MacAddr, Received};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How often a port asks again for a gateway that has not answered.
const ARP_RETRY: Duration = Duration::from_millis(200);
/// How long one wait for frames may block, which bounds how late a stop is seen.
const POLL: Duration = Duration::from_millis(5);

/// The streams a trial counts: ids `first .. first + count` (wrapping).
/// Every trial gets fresh ids, so a straggler of an earlier trial is never
/// counted in a later one: it is reported as stray instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamRange {
    pub first: u16,
    pub count: u16,
    /// The UDP destination port the streams' frames go to, or
    /// [`ANY_PORT`](linerate_wire::classify::ANY_PORT) when it varies per
    /// frame (a dst-port flow range).
    pub udp_port: u16,
    /// Measure latency on the frames whose sequence number is a multiple
    /// of this (a power of two; 1: every frame). Only receivers whose kind
    /// [samples latency](crate::ReceiverKind::samples_latency) act on it;
    /// the engine gives the others 1.
    pub latency_every: u32,
    /// How deep each test frame is checked before it counts; a damaged
    /// one counts as errored ([`linerate_wire::integrity`]).
    pub check: FrameCheck,
    /// Frames each stream sends at most (sequence numbers `0 .. frames`),
    /// `u64::MAX` when not known: a test frame numbered beyond it was
    /// damaged on the way and counts as errored, not as reordered.
    pub frames: u64,
    /// The trial's start in the receiver's clock, read before any of its
    /// generators started: no frame of the trial left before it.
    pub not_before_ns: u64,
    /// The smallest interval between two frames of one stream, in whole ns
    /// rounded down (0: not known): frame `n` of a stream left no earlier
    /// than `not_before_ns + n * interval_ns`. With it, a frame's latency
    /// is judged possible or not ([`plausible_latency`]).
    pub interval_ns: u64,
    /// `--tunnels`: count each received frame per tunnel too (None:
    /// nothing per frame is spent on it).
    pub tunnels: Option<RxTally>,
}

/// Counting a trial's received test frames tunnel by tunnel: the tunnel
/// is `map.index` of the frame's address `field`; only streams
/// `first .. first + streams` are counted (a drop test's second class is
/// in no tunnel's share).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RxTally {
    pub map: crate::ipsec::TunnelMap,
    pub field: linerate_wire::flows::Field,
    pub streams: u16,
}

impl RxTally {
    /// The tunnel of a received test frame (None: its address is in no
    /// tunnel's slice, or it is not IPv4).
    #[inline]
    pub fn tunnel_of(&self, frame: &[u8]) -> Option<usize> {
        self.map.index_of(self.field.ipv4_in(frame)?)
    }
}

impl StreamRange {
    #[inline]
    pub fn index(&self, stream: u16) -> Option<usize> {
        let i = stream.wrapping_sub(self.first);
        (i < self.count).then_some(i as usize)
    }
}

/// State a receiver shares with the thread that runs the trial.
#[derive(Default)]
pub struct ReceiverSignals {
    pub stop: AtomicBool,
    /// Set once the receiver counts this trial's streams. The in-kernel
    /// counter is reset and told the new streams first, and a frame that
    /// arrives before that counts as stray of no trial: before the engine
    /// waited for this, an af_packet trial at 20 kfps through the lab with
    /// the counter at port B lost exactly 41 frames in 3 runs of 5.
    pub ready: AtomicBool,
    /// Distinct test frames received so far (for ending the straggler wait early).
    pub received: AtomicU64,
    pub gateway_mac: Mutex<Option<MacAddr>>,
    /// `--pcap`: the run's capture, offered every frame this receiver gets
    /// (None: nothing is sampled, and a frame costs one branch for it).
    /// The engine sets port B's from its [`CaptureSlot`](crate::capture::CaptureSlot).
    pub capture: Option<crate::capture::Tap>,
}

impl ReceiverSignals {
    pub fn gateway_mac(&self) -> Option<MacAddr> {
        *self.gateway_mac.lock().expect("receiver signals poisoned")
    }
}

/// What a receiver counted.
pub struct Counted {
    pub streams: Vec<StreamStats>,
    /// Test frames that belong to no stream of this trial (late frames of
    /// an earlier trial, or another tester's).
    pub stray: u64,
    /// Damaged test frames: a check of [`linerate_wire::integrity`] failed,
    /// or the timestamp was in the future. Counted nowhere else.
    pub errored: u64,
    /// Frames the port's own receive ring dropped: the tester's loss.
    pub ring_drops: u64,
    /// Latency was measured on every n-th frame of each stream.
    pub latency_every: u32,
    /// What counted them.
    pub receiver: crate::ReceiverKind,
    /// With [`StreamRange::tunnels`]: the distinct test frames counted as
    /// received, tunnel by tunnel (index = tunnel); else empty.
    pub tunnels: Vec<u64>,
    /// Received on several threads ([`crate::SplitRx`]): the distinct test
    /// frames each thread counted; else empty.
    pub per_thread: Vec<u64>,
}

/// The receive transform of clear test frames: none.
pub struct AsSent;

impl ReceiveTransform for AsSent {
    #[inline(always)]
    fn apply<'a>(&mut self, _frame: &[u8], _scratch: &'a mut [u8]) -> Arrived<'a> {
        Arrived::AsIs
    }
    fn growth(&self, _len: usize) -> usize {
        0
    }
    fn describe(&self) -> String {
        "clear frames".into()
    }
}

/// Runs until `signals.stop` is set. `counted_elsewhere` says how many
/// distinct test frames were counted outside this loop (by an XDP program
/// in front of the socket); it is added to what `signals.received` reports.
/// Every frame passes `transform` before it is looked at (use [`AsSent`]
/// for clear frames).
pub fn receive<R: RxQueue, X: ReceiveTransform + ?Sized>(
    rx: &mut R,
    mac: MacAddr,
    host: &HostConfig,
    range: StreamRange,
    signals: &ReceiverSignals,
    counted_elsewhere: impl Fn() -> u64,
    transform: &mut X,
) -> Result<Counted, PortError> {
    rx.take_drops()?; // start the trial's count of ring drops at zero
    let capture = signals.capture.as_ref();
    if let Some(c) = capture {
        c.trial_starts();
    }
    signals.ready.store(true, Ordering::Release);
    let mut tally = Tally::new(&range);
    let mut distinct = 0u64;
    let mut replies: Vec<Vec<u8>> = Vec::new();
    let mut gateway = GatewayWatch::new(host.gateway_mac);
    // Always announce ourselves once: the DUT learns our MAC from the request.
    rx.send_control(&host.gateway_request(mac))?;
    gateway.asked(Instant::now());
    // Where a transform puts the frame it unwraps (a jumbo frame fits).
    let mut scratch = vec![0u8; 1 << 16];

    while !signals.stop.load(Ordering::Relaxed) {
        if gateway.learned.is_none() {
            // Another thread of the port may have heard the answer.
            gateway.learned = signals.gateway_mac();
        }
        if gateway.learned.is_none() && gateway.retry_due(Instant::now()) {
            rx.send_control(&host.gateway_request(mac))?;
            gateway.asked(Instant::now());
        }
        rx.recv(POLL, |frame, wire_len, arrival_ns| {
            if let Some(c) = capture {
                c.offer(frame, wire_len, arrival_ns);
            }
            let (frame, wire_len) = match transform.apply(frame, &mut scratch) {
                Arrived::AsIs => (frame, wire_len),
                Arrived::Inner(inner) => (inner, inner.len()),
                Arrived::Consumed => return,
                Arrived::Damaged => {
                    tally.errored += 1;
                    return;
                }
            };
            let action = match classify(frame, range.udp_port) {
                Received::Test { sig } => {
                    tally.test_frame(&range, frame, wire_len, arrival_ns, sig);
                    return;
                }
                Received::Arp(arp) => host.on_arp(mac, &arp),
                Received::Ndp(nd) => host.on_ndp(mac, &nd),
                Received::Other => return,
            };
            gateway.act(action, &mut replies, signals);
        })?;
        for frame in replies.drain(..) {
            rx.send_control(&frame)?;
        }
        let now = tally.received() + counted_elsewhere();
        if now != distinct {
            distinct = now;
            signals.received.store(distinct, Ordering::Release);
        }
    }
    if let Some(c) = capture {
        c.trial_ends();
    }
    transform.trial_ends();
    Ok(Counted {
        streams: tally.streams,
        stray: tally.stray,
        errored: tally.errored,
        ring_drops: rx.take_drops()?,
        latency_every: 1,
        receiver: crate::ReceiverKind::Socket,
        tunnels: tally.tunnels,
        per_thread: Vec::new(),
    })
}

/// What the receive loop counts, frame by frame: the trial's streams,
/// frames of no stream of it, damaged frames and, with `--tunnels`, the
/// frames each tunnel delivered. One struct so that the per-frame step
/// is one inlined method.
struct Tally {
    streams: Vec<StreamStats>,
    stray: u64,
    errored: u64,
    tunnels: Vec<u64>,
}

impl Tally {
    fn new(range: &StreamRange) -> Tally {
        Tally {
            streams: (0..range.count)
                .map(|_| StreamStats::sending(range.frames))
                .collect(),
            stray: 0,
            errored: 0,
            tunnels: vec![0u64; range.tunnels.map_or(0, |t| t.map.count as usize)],
        }
    }

    /// Distinct test frames counted so far.
    fn received(&self) -> u64 {
        self.streams.iter().map(StreamStats::received).sum()
    }

    /// Counts one test frame (after its transform): damaged (integrity,
    /// an impossible timestamp, a number never sent), stray (of no stream
    /// of this trial), or received in its stream, with its latency, and in
    /// its tunnel. Per frame: inlined into the loop.
    #[inline(always)]
    fn test_frame(
        &mut self,
        range: &StreamRange,
        frame: &[u8],
        wire_len: usize,
        arrival_ns: u64,
        sig: linerate_wire::Signature,
    ) {
        if !intact(frame, wire_len, range.check) {
            self.errored += 1;
            return;
        }
        let Some(i) = range.index(sig.stream) else {
            self.stray += 1;
            return;
        };
        let streams = &mut self.streams;
        // A latency longer than the time since the frame could have left
        // means a timestamp in the future: damaged on the way (the sender
        // stamps its schedule, never sends early). A frame the DUT held,
        // even for seconds, is late.
        let seq = streams[i].extended(sig.seq);
        let earliest = earliest_send_ns(range.not_before_ns, range.interval_ns, seq);
        let Some(latency) = plausible_latency(sig.tx_ts, arrival_ns, earliest) else {
            self.errored += 1;
            return;
        };
        let before = streams[i].received();
        if !streams[i].record(sig.seq, latency) {
            // A number the trial never sent: damaged.
            self.errored += 1;
            return;
        }
        // Per tunnel exactly where the stream counted it as received (not
        // a duplicate).
        if let Some(t) = &range.tunnels {
            if i < t.streams as usize && streams[i].received() != before {
                if let Some(n) = t.tunnel_of(frame).and_then(|k| self.tunnels.get_mut(k)) {
                    *n += 1;
                }
            }
        }
    }
}

/// The port's gateway: its MAC once learned (given, or from an ARP or
/// NDP answer), and when it was last asked for, so that an unanswered
/// request is repeated every [`ARP_RETRY`] until it answers.
struct GatewayWatch {
    learned: Option<MacAddr>,
    last_request: Instant,
}

impl GatewayWatch {
    fn new(learned: Option<MacAddr>) -> GatewayWatch {
        GatewayWatch {
            learned,
            last_request: Instant::now(),
        }
    }

    /// A request for the gateway left at `now`.
    fn asked(&mut self, now: Instant) {
        self.last_request = now;
    }

    /// At `now`, the last request has gone unanswered long enough to ask
    /// again.
    fn retry_due(&self, now: Instant) -> bool {
        now.saturating_duration_since(self.last_request) >= ARP_RETRY
    }

    /// Acts on an ARP or NDP frame: a reply to send after the poll, or
    /// the gateway's MAC learned (the first answer, shared through
    /// `signals`). Control frames only, not per test frame.
    #[inline]
    fn act(&mut self, action: ArpAction, replies: &mut Vec<Vec<u8>>, signals: &ReceiverSignals) {
        match action {
            ArpAction::Reply(frame) => replies.push(frame),
            ArpAction::LearnedGateway(gw) => {
                if self.learned.is_none() {
                    self.learned = Some(gw);
                    *signals
                        .gateway_mac
                        .lock()
                        .expect("receiver signals poisoned") = Some(gw);
                }
            }
            ArpAction::Ignore => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_wire::{FlowSpec, FrameSize, FrameTemplate, Signature};
    use std::net::Ipv4Addr;

    const S: u64 = 1_000_000_000;
    const PORT: u16 = linerate_wire::template::DEFAULT_UDP_PORT;

    /// Hands the receive loop its frames, each with its arrival time, then stops it.
    struct Feed<'a> {
        frames: Vec<(Vec<u8>, u64)>,
        signals: &'a ReceiverSignals,
    }

    impl RxQueue for Feed<'_> {
        fn recv<F: FnMut(&[u8], usize, u64)>(
            &mut self,
            _: Duration,
            mut f: F,
        ) -> Result<usize, PortError> {
            let frames = std::mem::take(&mut self.frames);
            for (frame, at) in &frames {
                f(frame, frame.len(), *at);
            }
            self.signals.stop.store(true, Ordering::Relaxed);
            Ok(frames.len())
        }
        fn send_control(&mut self, _: &[u8]) -> Result<(), PortError> {
            Ok(())
        }
        fn take_drops(&mut self) -> Result<u64, PortError> {
            Ok(0)
        }
    }

    /// A test frame of `stream` numbered `seq`, stamped `tx_ns` (low 32 bits).
    fn frame(stream: u16, seq: u32, tx_ns: u64) -> Vec<u8> {
        let flow = FlowSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: Ipv4Addr::new(198, 18, 0, 2).into(),
            dst_ip: Ipv4Addr::new(198, 19, 0, 2).into(),
            src_port: PORT,
            dst_port: PORT,
            ttl: 64,
            vlan: None,
        };
        let t = FrameTemplate::new(&flow, FrameSize::from_frame(128).unwrap());
        let mut b = vec![0u8; t.len()];
        let sig = Signature {
            stream,
            seq,
            tx_ts: tx_ns as u32,
        };
        t.write(&mut b, sig);
        b
    }

    /// Counts `frames` (frame, arrival) as a trial of stream 7 that began
    /// at `start`, `interval` ns between a stream's frames.
    fn count(start: u64, interval: u64, frames: Vec<(Vec<u8>, u64)>) -> Counted {
        let host = HostConfig {
            ip: Ipv4Addr::new(198, 19, 0, 2),
            prefix_len: 24,
            gateway: Ipv4Addr::new(198, 19, 0, 1),
            gateway_mac: Some(MacAddr([2, 0, 0, 0, 0, 9])),
            also_answers: None,
            inner: None,
            ipv6: None,
            vlan: None,
        };
        let range = StreamRange {
            first: 7,
            count: 1,
            udp_port: PORT,
            latency_every: 1,
            check: FrameCheck::Headers,
            frames: 100_000,
            not_before_ns: start,
            interval_ns: interval,
            tunnels: None,
        };
        let signals = ReceiverSignals::default();
        let mut feed = Feed {
            frames,
            signals: &signals,
        };
        let mac = MacAddr([2, 0, 0, 0, 0, 2]);
        receive(&mut feed, mac, &host, range, &signals, || 0, &mut AsSent).unwrap()
    }

    #[test]
    fn a_frame_held_for_seconds_is_received_late_not_damaged() {
        // Sent 1 s into a trial, held 3 s (above 2^31 ns, which before
        // counted as a timestamp in the future), and 4 s: both are late.
        let start = 100 * S;
        let c = count(
            start,
            1_000_000,
            vec![
                (frame(7, 1000, start + S), start + 4 * S),
                (frame(7, 1001, start + S + 1_000_000), start + 5 * S),
            ],
        );
        assert_eq!((c.errored, c.streams[0].received()), (0, 2));
        let l = c.streams[0].latency(1).unwrap();
        // The histogram keeps 3 significant digits.
        assert!(l.min.abs_diff(3 * S) <= 3 * S / 1000, "{l:?}");
        assert!(l.max.abs_diff(4 * S - 1_000_000) <= 4 * S / 1000, "{l:?}");
    }

    #[test]
    fn a_timestamp_in_the_future_is_damaged() {
        // 1 s ahead of a frame that took 10 us: its latency reads 3.29 s,
        // yet the trial is 1.5 s old.
        let start = 100 * S;
        let sent = start + S / 2;
        let c = count(
            start,
            0,
            vec![
                (frame(7, 0, sent + S), sent + 10_000),
                (frame(7, 1, sent), sent + 10_000),
            ],
        );
        assert_eq!((c.errored, c.streams[0].received()), (1, 1));
        let l = c.streams[0].latency(1).unwrap();
        assert_eq!((l.samples, l.min), (1, 10_000));
    }

    #[test]
    fn a_frame_cannot_have_left_before_the_trial_began() {
        // A trial 2 s old: a latency of 2.5 s is impossible, 1.5 s is not.
        let start = 100 * S;
        let now = start + 2 * S;
        let c = count(
            start,
            0,
            vec![
                (frame(7, 5, now - 5 * S / 2), now),
                (frame(7, 6, now - 3 * S / 2), now),
            ],
        );
        assert_eq!((c.errored, c.streams[0].received()), (1, 1));
        // Arrived before the trial began: nothing of it can have been sent.
        let c = count(start, 0, vec![(frame(7, 1, start - 10), start - 5)]);
        assert_eq!((c.errored, c.streams[0].received()), (1, 0));
    }

    #[test]
    fn a_frame_cannot_have_left_before_its_place_in_the_schedule() {
        // 1,000 frames/s, 10 s in: frame 9,500 left 9.5 s in at the
        // earliest, so it cannot have taken 2 s; frame 9,000 can take 0.9 s.
        let start = 100 * S;
        let now = start + 10 * S;
        let c = count(
            start,
            1_000_000,
            vec![
                (frame(7, 9000, now - 9 * S / 10), now),
                (frame(7, 9500, now - 2 * S), now),
            ],
        );
        assert_eq!((c.errored, c.streams[0].received()), (1, 1));
        // Without the schedule, the trial's start alone lets 2 s pass.
        let c = count(start, 0, vec![(frame(7, 9500, now - 2 * S), now)]);
        assert_eq!((c.errored, c.streams[0].received()), (0, 1));
    }

    #[test]
    fn an_earlier_trials_straggler_stays_stray() {
        // Stream 6 is no stream of this trial: stray, whatever its stamp
        // (here from before the trial began).
        let start = 100 * S;
        let c = count(start, 0, vec![(frame(6, 1, start - S), start + S)]);
        assert_eq!((c.stray, c.errored, c.streams[0].received()), (1, 0, 0));
    }
}
