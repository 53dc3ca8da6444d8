//! The receive loop of one port: counts the trial's test frames per stream,
//! answers ARP (or, for IPv6, Neighbor Solicitations) for the port's
//! address and learns the gateway's MAC.

use crate::host::{ArpAction, HostConfig};
use crate::stats::StreamStats;
use crate::transform::{Arrived, ReceiveTransform};
use linerate_port::{PortError, RxQueue};
use linerate_wire::integrity::intact;
use linerate_wire::signature::elapsed32;
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
        self.map.index_of(ipv4_field(frame, self.field)?)
    }
}

/// The IPv4 address `field` (SrcIp or DstIp) of an Ethernet frame, with
/// or without an 802.1Q tag; None for another field or another protocol.
#[inline]
pub fn ipv4_field(frame: &[u8], field: linerate_wire::flows::Field) -> Option<u32> {
    use linerate_wire::flows::Field;
    let ip = match frame.get(12..14)? {
        [0x81, 0x00] if frame.get(16..18)? == [0x08, 0x00] => 18,
        [0x08, 0x00] => 14,
        _ => return None,
    };
    let at = match field {
        Field::SrcIp => ip + 12,
        Field::DstIp => ip + 16,
        _ => return None,
    };
    Some(u32::from_be_bytes(frame.get(at..at + 4)?.try_into().ok()?))
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
    let mut streams: Vec<StreamStats> = (0..range.count)
        .map(|_| StreamStats::sending(range.frames))
        .collect();
    let mut stray = 0u64;
    let mut errored = 0u64;
    let mut distinct = 0u64;
    let mut tunnels = vec![0u64; range.tunnels.map_or(0, |t| t.map.count as usize)];
    let mut replies: Vec<Vec<u8>> = Vec::new();
    let mut learned = host.gateway_mac;
    // Always announce ourselves once: the DUT learns our MAC from the request.
    rx.send_control(&host.gateway_request(mac))?;
    let mut last_request = Instant::now();
    // Where a transform puts the frame it unwraps (a jumbo frame fits).
    let mut scratch = vec![0u8; 1 << 16];

    while !signals.stop.load(Ordering::Relaxed) {
        if learned.is_none() && last_request.elapsed() >= ARP_RETRY {
            rx.send_control(&host.gateway_request(mac))?;
            last_request = Instant::now();
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
                    errored += 1;
                    return;
                }
            };
            let action = match classify(frame, range.udp_port) {
                Received::Test { sig } => {
                    if !intact(frame, wire_len, range.check) {
                        errored += 1;
                        return;
                    }
                    let Some(i) = range.index(sig.stream) else {
                        stray += 1;
                        return;
                    };
                    // A timestamp in the future (latency wrapped negative)
                    // was damaged on the way: the sender stamps before it sends.
                    let latency = elapsed32(sig.tx_ts, arrival_ns);
                    if latency > u32::MAX as u64 / 2 {
                        errored += 1;
                        return;
                    }
                    let before = streams[i].received();
                    if !streams[i].record(sig.seq, latency) {
                        // A number the trial never sent: damaged.
                        errored += 1;
                        return;
                    }
                    // Per tunnel exactly where the stream counted it as
                    // received (not a duplicate).
                    if let Some(t) = &range.tunnels {
                        if i < t.streams as usize && streams[i].received() != before {
                            if let Some(n) = t.tunnel_of(frame).and_then(|k| tunnels.get_mut(k)) {
                                *n += 1;
                            }
                        }
                    }
                    return;
                }
                Received::Arp(arp) => host.on_arp(mac, &arp),
                Received::Ndp(nd) => host.on_ndp(mac, &nd),
                Received::Other => return,
            };
            match action {
                ArpAction::Reply(frame) => replies.push(frame),
                ArpAction::LearnedGateway(gw) => {
                    if learned.is_none() {
                        learned = Some(gw);
                        *signals
                            .gateway_mac
                            .lock()
                            .expect("receiver signals poisoned") = Some(gw);
                    }
                }
                ArpAction::Ignore => {}
            }
        })?;
        for frame in replies.drain(..) {
            rx.send_control(&frame)?;
        }
        let now = streams.iter().map(StreamStats::received).sum::<u64>() + counted_elsewhere();
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
        streams,
        stray,
        errored,
        ring_drops: rx.take_drops()?,
        latency_every: 1,
        receiver: crate::ReceiverKind::Socket,
        tunnels,
    })
}
