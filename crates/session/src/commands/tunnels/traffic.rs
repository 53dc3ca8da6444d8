//! `linerate tunnels --traffic`: each tunnel sends test frames from the
//! moment its CHILD_SA is installed until the hold ends, and port A counts
//! what the gateway delivered, tunnel by tunnel: the time to first packet
//! (the tunnel's IKE_SA_INIT sent to its first intact test frame at port
//! A) and the frames each tunnel carried.
//!
//! Direction: linerate encrypts at port B (each tunnel with its own
//! outbound SA, `EspSend`, from the peer's address to the gateway in UDP
//! 4500), the gateway decrypts and forwards into its LAN, where port A
//! (linerate's host there: it answers ARP for its address) receives. A
//! test frame of tunnel `i` carries stream id `i`, comes from the first
//! host address of the tunnel's slice and goes to port A's address.
//!
//! Two threads besides the fleet's: the sender (one packet socket on port
//! B, every tunnel paced at the same rate from a timer heap) and the
//! receiver (port A's AF_PACKET rings).

use crate::error::{bail, err, Result};
use crate::ipsec::Net;
use crate::peers::ip_out;
use linerate_engine::host::{ArpAction, HostConfig};
use linerate_engine::ipsec::{EspCounts, EspSend};
use linerate_engine::transform::SendTransform;
use linerate_esp::{Outbound, SaKeys};
use linerate_port::af_packet::{AfPacketOptions, AfPacketPort, TxRing};
use linerate_port::{Port, RxQueue, TxQueue};
use linerate_wire::integrity::intact;
use linerate_wire::template::DEFAULT_UDP_PORT;
use linerate_wire::{
    classify, FlowSpec, FrameCheck, FrameSize, FrameTemplate, MacAddr, Received, Signature,
};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The test frames' size (Ethernet, without FCS: 60 bytes handed on at
/// port A).
pub const TRAFFIC_FRAME: u64 = 64;

/// Port A: where the gateway delivers the decrypted frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortA {
    pub netns: Option<String>,
    pub ifname: String,
    /// linerate's host address on port A (answered by ARP; the frames'
    /// destination) and its subnet.
    pub host: Net,
    /// The gateway's LAN address (whose ARP requests are answered).
    pub gateway: Ipv4Addr,
}

/// A tunnel that is up: what the sender needs to encrypt for it.
pub struct UpTunnel {
    pub index: usize,
    pub keys: SaKeys,
}

/// One tunnel's traffic, as the two threads counted it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunnelTraffic {
    /// Frames the kernel took at port B.
    pub sent: u64,
    /// Frames the kernel refused (its queue full).
    pub refused: u64,
    /// Intact test frames of this tunnel at port A, each counted once.
    pub received: u64,
    /// Its frames that arrived damaged, and those that arrived again.
    pub errored: u64,
    pub duplicates: u64,
    /// The first intact frame's arrival (CLOCK_REALTIME, ns).
    pub first_rx_ns: Option<u64>,
}

/// What the two threads counted, all tunnels.
#[derive(Debug, Clone, Default)]
pub struct TrafficCounts {
    pub tunnels: Vec<TunnelTraffic>,
    /// Test frames at port A for no tunnel of this run (a stream or source
    /// address not ours), and ARP replies sent.
    pub foreign: u64,
    pub arp_replies: u64,
    /// Frames port A's own ring dropped (tester-side loss).
    pub rx_ring_drops: u64,
    /// Each tunnel's sequence numbers that arrived intact, a bit each
    /// (for `--rekey`'s windows).
    pub seen: Vec<Vec<u64>>,
}

/// Where one tunnel's frames stood at a moment: its next sequence number
/// and the frames port B's queue refused so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TunnelMark {
    pub next_seq: u64,
    pub refused: u64,
}

impl TrafficCounts {
    /// Tunnel `i`'s frames sent between two marks (the kernel took them)
    /// and how many of those never arrived intact at port A.
    pub fn lost_between(&self, i: usize, from: TunnelMark, to: TunnelMark) -> (u64, u64) {
        let (a, b) = (from.next_seq, to.next_seq.max(from.next_seq));
        let bits = self.seen.get(i).map_or(&[][..], Vec::as_slice);
        let arrived = (a..b)
            .filter(|&seq| {
                let (word, bit) = ((seq / 64) as usize, seq % 64);
                bits.get(word).is_some_and(|w| w & (1 << bit) != 0)
            })
            .count() as u64;
        let sent = (b - a).saturating_sub(to.refused.saturating_sub(from.refused));
        (sent, sent.saturating_sub(arrived))
    }
}

/// The first host address of a tunnel's slice: its frames' source.
pub fn slice_host(net: Net) -> Ipv4Addr {
    let (first, last) = net.range();
    if net.prefix_len >= 31 {
        first
    } else {
        Ipv4Addr::from(u32::from(first) + 1).min(last)
    }
}

/// What both threads share for `--capacity`'s traffic windows: each
/// tunnel's next sequence number and frames refused so far, in one word
/// (the sender's: seq << 32 | refused, read together), and the sequence
/// numbers that arrived (the receiver's, a bit each).
struct Shared {
    progress: Vec<AtomicU64>,
    seen: Mutex<Vec<Vec<u64>>>,
}

/// Where every tunnel's frames stood at one moment: a traffic window's
/// start or end.
#[derive(Debug, Clone)]
pub struct Mark {
    next_seq: Vec<u64>,
    refused: Vec<u64>,
}

/// The running traffic: the sender and the receiver.
pub struct Traffic {
    shared: Arc<Shared>,
    up: Sender<UpTunnel>,
    stop_send: Arc<AtomicBool>,
    stop_receive: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    sender: JoinHandle<Result<Vec<(u64, u64)>>>,
    receiver: JoinHandle<Result<TrafficCounts>>,
}

/// Everything the sender needs.
pub struct SendSide {
    pub netns: Option<String>,
    pub ifname: String,
    /// The gateway's IKE address (the ESP's outer destination, on port
    /// B's subnet: the next hop).
    pub gateway: Ipv4Addr,
    pub peers: Vec<Ipv4Addr>,
    /// Each tunnel's frames' source.
    pub sources: Vec<Ipv4Addr>,
    /// Frames per second per tunnel.
    pub rate: f64,
}

impl Traffic {
    /// Opens port A (answering ARP from now on) and port B's packet
    /// socket, and starts both threads: no frame leaves before a tunnel is
    /// handed over with [`Traffic::tunnel_up`].
    pub fn start(port_a: &PortA, side: SendSide) -> Result<Traffic> {
        let count = side.peers.len();
        // A trickle of frames retires a block every few ms: many small
        // blocks (64 MiB in all) ride out seconds of a busy CPU.
        let opts = AfPacketOptions {
            rx_block_size: 1 << 16,
            rx_blocks: 1024,
            tx_slots: 64,
            ..AfPacketOptions::default()
        };
        let port = AfPacketPort::open(&port_a.ifname, port_a.netns.as_deref(), &opts)
            .map_err(|e| err!(Environment, "port A {}: {e}", port_a.ifname))?;
        let (_tx, rx, info) = port.split();
        // Port B's transmit ring only: IKE and ARP there stay the kernel's.
        let (tx, port_b) = AfPacketPort::open_sender(
            &side.ifname,
            side.netns.as_deref(),
            &AfPacketOptions::default(),
        )
        .map_err(|e| err!(Environment, "port B {}: {e}", side.ifname))?;
        let host = HostConfig {
            ip: port_a.host.address,
            prefix_len: port_a.host.prefix_len,
            gateway: port_a.gateway,
            gateway_mac: None,
            also_answers: None,
            inner: None,
            ipv6: None,
            vlan: None,
        };
        let stop_send = Arc::new(AtomicBool::new(false));
        let stop_receive = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let (up, up_rx) = channel();
        let sources = side.sources.clone();
        let shared = Arc::new(Shared {
            progress: (0..count).map(|_| AtomicU64::new(0)).collect(),
            seen: Mutex::new(vec![Vec::new(); count]),
        });
        let receiver = {
            let stop = Arc::clone(&stop_receive);
            let received = Arc::clone(&received);
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("tunnels-rx".into())
                .spawn(move || receive(rx, info.mac, host, sources, stop, received, shared))
                .map_err(|e| err!(Environment, "cannot start the receiver thread: {e}"))?
        };
        let sender = {
            let stop = Arc::clone(&stop_send);
            let dst = port_a.host.address;
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("tunnels-tx".into())
                .spawn(move || {
                    send(
                        Pacer::new(tx, port_b.mac, side, dst, count, shared),
                        up_rx,
                        stop,
                    )
                })
                .map_err(|e| err!(Environment, "cannot start the sender thread: {e}"))?
        };
        Ok(Traffic {
            shared,
            up,
            stop_send,
            stop_receive,
            received,
            sender,
            receiver,
        })
    }

    /// Starts the frames of a tunnel whose CHILD_SA was just installed;
    /// for a tunnel already sending, moves its frames to the new
    /// CHILD_SA's keys (a rekey), its sequence of test frames going on.
    pub fn tunnel_up(&self, tunnel: UpTunnel) {
        // A sender that ended early says why at `finish`.
        let _ = self.up.send(tunnel);
    }

    /// Where tunnel `i`'s frames stand now (a rekey's window's start or
    /// end).
    pub fn tunnel_mark(&self, i: usize) -> TunnelMark {
        let word = self
            .shared
            .progress
            .get(i)
            .map_or(0, |a| a.load(Ordering::Acquire));
        TunnelMark {
            next_seq: word >> 32,
            refused: word & 0xffff_ffff,
        }
    }

    /// Where every tunnel's frames stand now (a window's start or end).
    pub fn mark(&self) -> Mark {
        let words: Vec<u64> = self
            .shared
            .progress
            .iter()
            .map(|a| a.load(Ordering::Acquire))
            .collect();
        Mark {
            next_seq: words.iter().map(|w| w >> 32).collect(),
            refused: words.iter().map(|w| w & 0xffff_ffff).collect(),
        }
    }

    /// For each tunnel of `tunnels`: the frames it sent between `from` and
    /// `to` (the kernel took them) and how many of exactly those have
    /// arrived at port A so far (by sequence number, each once); and the
    /// frames refused by port B's queue in the window, all tunnels.
    pub fn window(&self, from: &Mark, to: &Mark, tunnels: &[usize]) -> (Vec<(u64, u64)>, u64) {
        let seen = self.shared.seen.lock().unwrap_or_else(|e| e.into_inner());
        let mut refused_all = 0;
        let counts = tunnels
            .iter()
            .map(|&i| {
                let (a, b) = (from.next_seq[i], to.next_seq[i].max(from.next_seq[i]));
                let refused = to.refused[i].saturating_sub(from.refused[i]);
                refused_all += refused;
                let bits = &seen[i];
                let received = (a..b)
                    .filter(|&seq| {
                        let (word, bit) = ((seq / 64) as usize, seq % 64);
                        bits.get(word).is_some_and(|w| w & (1 << bit) != 0)
                    })
                    .count() as u64;
                ((b - a).saturating_sub(refused), received)
            })
            .collect();
        (counts, refused_all)
    }

    /// Stops sending, waits until port A has had what was in flight
    /// (nothing new for 200 ms, at most 2 s), stops receiving, and returns
    /// the counts.
    pub fn finish(self) -> Result<TrafficCounts> {
        self.stop_send.store(true, Ordering::Relaxed);
        drop(self.up);
        let sent = self
            .sender
            .join()
            .map_err(|_| err!(Failed, "the sender thread panicked"))?;
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut last = self.received.load(Ordering::Relaxed);
        while Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(200));
            let now = self.received.load(Ordering::Relaxed);
            if now == last {
                break;
            }
            last = now;
        }
        self.stop_receive.store(true, Ordering::Relaxed);
        let counts = self
            .receiver
            .join()
            .map_err(|_| err!(Failed, "the receiver thread panicked"))?;
        let sent = sent?;
        let mut counts = counts?;
        counts.seen =
            std::mem::take(&mut *self.shared.seen.lock().unwrap_or_else(|e| e.into_inner()));
        for (t, (s, r)) in counts.tunnels.iter_mut().zip(sent) {
            t.sent = s;
            t.refused = r;
        }
        Ok(counts)
    }
}

/// The MAC of `next_hop` from the kernel's neighbour table of port B's
/// namespace (IKE has just crossed to it), waiting up to 2 s for it.
fn neighbour_mac(netns: Option<&str>, ifname: &str, next_hop: Ipv4Addr) -> Result<MacAddr> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let out = ip_out(
            netns,
            &["-4", "neigh", "show", &next_hop.to_string(), "dev", ifname],
        )
        .map_err(|e| err!(Environment, "port B {ifname}: ip neigh: {e}"))?;
        let mac = out
            .split_whitespace()
            .skip_while(|w| *w != "lladdr")
            .nth(1)
            .and_then(|m| m.parse::<MacAddr>().ok());
        if let Some(mac) = mac {
            return Ok(mac);
        }
        if Instant::now() > deadline {
            bail!(Environment, "the gateway {next_hop}'s MAC is not in port B's neighbour table after IKE reached it: check that it is on port B's subnet ({ifname})");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// One tunnel's sending state.
struct Stream {
    esp: EspSend,
    seq: u32,
    sent: u64,
    refused: u64,
}

/// The sender: frames of every tunnel handed over, each at `rate`, until
/// `stop`. Returns (taken, refused) per tunnel.
fn send(
    mut sender: Pacer,
    up: Receiver<UpTunnel>,
    stop: Arc<AtomicBool>,
) -> Result<Vec<(u64, u64)>> {
    while !stop.load(Ordering::Relaxed) {
        // Tunnels just up send their first frame now.
        let Some(arrived) = sender.arrivals(&up, Instant::now()) else {
            break;
        };
        for t in arrived {
            if let Some(i) = sender.start_tunnel(t)? {
                sender.due.push(Reverse((Instant::now(), i)));
            }
        }
        sender.send_due(Instant::now(), &stop)?;
    }
    sender.finish()
}

/// The sender thread's state: every tunnel's stream and frame, and when
/// each sends next. Split from [`send`]'s loop so that each step (wait for
/// tunnels, start one, send what is due) reads on its own.
struct Pacer {
    tx: TxRing,
    /// Port B's MAC: the frames' source.
    mac: MacAddr,
    side: SendSide,
    dst: Ipv4Addr,
    count: usize,
    shared: Arc<Shared>,
    interval: Duration,
    frame: FrameSize,
    streams: Vec<Option<Stream>>,
    templates: Vec<Option<FrameTemplate>>,
    due: BinaryHeap<Reverse<(Instant, usize)>>,
    gateway_mac: Option<MacAddr>,
    counts: Arc<Mutex<EspCounts>>,
}

impl Pacer {
    /// Nothing sending yet: no tunnel is up.
    fn new(
        tx: TxRing,
        mac: MacAddr,
        side: SendSide,
        dst: Ipv4Addr,
        count: usize,
        shared: Arc<Shared>,
    ) -> Pacer {
        Pacer {
            interval: Duration::from_secs_f64(1.0 / side.rate),
            frame: FrameSize::from_frame(TRAFFIC_FRAME).expect("a valid frame size"),
            streams: (0..count).map(|_| None).collect(),
            templates: (0..count).map(|_| None).collect(),
            due: BinaryHeap::new(),
            gateway_mac: None,
            counts: Arc::default(),
            tx,
            mac,
            side,
            dst,
            count,
            shared,
        }
    }

    /// Waits (until the next frame is due at `now`'s reading, 20 ms at
    /// most) for tunnels handed over, and takes every one waiting. None:
    /// the fleet side hung up and no tunnel is sending, so the thread ends.
    fn arrivals(&self, up: &Receiver<UpTunnel>, now: Instant) -> Option<Vec<UpTunnel>> {
        let wait = self
            .due
            .peek()
            .map_or(Duration::from_millis(20), |Reverse((at, _))| {
                at.saturating_duration_since(now)
            })
            .min(Duration::from_millis(20));
        let first = if wait.is_zero() {
            up.try_recv().map_err(|_| RecvTimeoutError::Timeout)
        } else {
            up.recv_timeout(wait)
        };
        let mut arrived: Vec<UpTunnel> = Vec::new();
        match first {
            Ok(t) => arrived.push(t),
            Err(RecvTimeoutError::Disconnected) if self.due.is_empty() => return None,
            Err(_) => {}
        }
        arrived.extend(up.try_iter());
        Some(arrived)
    }

    /// Sets up tunnel `t`'s stream (its ESP SA and frame template; the
    /// gateway's MAC looked up on the first). Its index, for the caller to
    /// schedule its first frame; None for an index out of range, or for a
    /// tunnel already sending, whose stream only takes the new keys (a
    /// rekey: its frames go on, at the same pace, on the new SA).
    fn start_tunnel(&mut self, t: UpTunnel) -> Result<Option<usize>> {
        if t.index >= self.count {
            return Ok(None);
        }
        let side = &self.side;
        if let Some(stream) = self.streams[t.index].as_mut() {
            let sa = Outbound::new(t.keys).map_err(|e| err!(Failed, "tunnel {}: {e}", t.index))?;
            stream.esp = EspSend::new(
                sa,
                side.peers[t.index],
                side.gateway,
                Arc::clone(&self.counts),
            );
            return Ok(None);
        }
        let mac = match self.gateway_mac {
            Some(m) => m,
            None => {
                let m = neighbour_mac(side.netns.as_deref(), &side.ifname, side.gateway)?;
                self.gateway_mac = Some(m);
                m
            }
        };
        let sa = Outbound::new(t.keys).map_err(|e| err!(Failed, "tunnel {}: {e}", t.index))?;
        self.templates[t.index] = Some(FrameTemplate::new(
            &FlowSpec {
                src_mac: self.mac,
                dst_mac: mac,
                src_ip: IpAddr::V4(side.sources[t.index]),
                dst_ip: IpAddr::V4(self.dst),
                src_port: DEFAULT_UDP_PORT,
                dst_port: DEFAULT_UDP_PORT,
                ttl: 64,
                vlan: None,
            },
            self.frame,
        ));
        self.streams[t.index] = Some(Stream {
            esp: EspSend::new(
                sa,
                side.peers[t.index],
                side.gateway,
                Arc::clone(&self.counts),
            ),
            seq: 0,
            sent: 0,
            refused: 0,
        });
        Ok(Some(t.index))
    }

    /// Queues every frame due by `now` (until `stop`) on port B's ring
    /// and hands them to the kernel, and schedules each tunnel's next a
    /// period on; a sender that fell a period behind skips the slots it
    /// missed rather than bursting. A frame the full ring cannot take is
    /// refused, never counted as sent.
    fn send_due(&mut self, now: Instant, stop: &AtomicBool) -> Result<()> {
        while let Some(&Reverse((at, i))) = self.due.peek() {
            if at > now || stop.load(Ordering::Relaxed) {
                break;
            }
            self.due.pop();
            let (Some(s), Some(template)) = (self.streams[i].as_mut(), self.templates[i].as_ref())
            else {
                continue;
            };
            let sig = Signature {
                stream: i as u16,
                seq: s.seq,
                tx_ts: linerate_port::realtime_ns() as u32,
            };
            let esp = &mut s.esp;
            let taken = self
                .tx
                .queue(1, |_, slot| {
                    let len = template.write(slot, sig);
                    esp.apply(slot, len)
                })
                .map_err(|e| err!(Environment, "port B: {e}"))?;
            s.seq = s.seq.wrapping_add(1);
            if taken == 1 {
                s.sent += 1;
            } else {
                s.refused += 1;
            }
            self.shared.progress[i].store(
                u64::from(s.seq) << 32 | (s.refused & 0xffff_ffff),
                Ordering::Release,
            );
            let next = at + self.interval;
            self.due
                .push(Reverse((if next < now { now } else { next }, i)));
        }
        self.tx
            .flush()
            .map_err(|e| err!(Environment, "port B: {e}"))
    }

    /// Sends what the ring still holds, and returns each tunnel's (taken,
    /// refused): what [`send`] returns.
    fn finish(mut self) -> Result<Vec<(u64, u64)>> {
        let malformed = self
            .tx
            .drain(Duration::from_secs(2))
            .map_err(|e| err!(Environment, "port B: {e}"))?;
        if malformed > 0 {
            // The ring does not say whose: no tunnel's count can lose them.
            errln!("linerate: port B's kernel refused {malformed} frames as malformed; they are counted as sent in their tunnels' figures");
        }
        Ok(self
            .streams
            .into_iter()
            .map(|s| s.map_or((0, 0), |s| (s.sent, s.refused)))
            .collect())
    }
}

/// The receiver: port A's frames until `stop`; ARP answered.
fn receive(
    mut rx: linerate_port::af_packet::RxRing,
    mac: MacAddr,
    host: HostConfig,
    sources: Vec<Ipv4Addr>,
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    shared: Arc<Shared>,
) -> Result<TrafficCounts> {
    let count = sources.len();
    let mut counts = TrafficCounts {
        tunnels: vec![TunnelTraffic::default(); count],
        ..TrafficCounts::default()
    };
    let mut replies: Vec<Vec<u8>> = Vec::new();
    let dst = host.ip;
    while !stop.load(Ordering::Relaxed) {
        // Each tunnel's sequence numbers seen, a bit each; `window` reads
        // them between two waits.
        let mut seen = shared.seen.lock().unwrap_or_else(|e| e.into_inner());
        rx.recv(
            Duration::from_millis(20),
            |frame, wire_len, arrival_ns| match classify(frame, DEFAULT_UDP_PORT) {
                Received::Test { sig } => {
                    let i = sig.stream as usize;
                    let ours = i < count
                        && frame.get(26..30) == Some(&sources[i].octets()[..])
                        && frame.get(30..34) == Some(&dst.octets()[..]);
                    if !ours {
                        counts.foreign += 1;
                        return;
                    }
                    let t = &mut counts.tunnels[i];
                    if !intact(frame, wire_len, FrameCheck::Payload) {
                        t.errored += 1;
                        return;
                    }
                    let (word, bit) = ((sig.seq / 64) as usize, sig.seq % 64);
                    let bits = &mut seen[i];
                    if bits.len() <= word {
                        bits.resize(word + 1, 0);
                    }
                    if bits[word] & (1 << bit) != 0 {
                        t.duplicates += 1;
                        return;
                    }
                    bits[word] |= 1 << bit;
                    t.received += 1;
                    received.fetch_add(1, Ordering::Relaxed);
                    t.first_rx_ns = Some(t.first_rx_ns.map_or(arrival_ns, |f| f.min(arrival_ns)));
                }
                Received::Arp(arp) => {
                    if let ArpAction::Reply(reply) = host.on_arp(mac, &arp) {
                        replies.push(reply);
                    }
                }
                _ => {}
            },
        )
        .map_err(|e| err!(Environment, "port A: {e}"))?;
        drop(seen);
        for reply in replies.drain(..) {
            if rx.send_control(&reply).is_ok() {
                counts.arp_replies += 1;
            }
        }
    }
    counts.rx_ring_drops = rx.take_drops().unwrap_or(0);
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_sends_from_its_first_host_address() {
        let net = |t: &str| Net::parse(t, "--remote-net").unwrap();
        assert_eq!(
            slice_host(net("198.19.128.0/25")),
            Ipv4Addr::new(198, 19, 128, 1)
        );
        assert_eq!(
            slice_host(net("198.19.128.2/31")),
            Ipv4Addr::new(198, 19, 128, 2)
        );
        assert_eq!(
            slice_host(net("198.19.128.7/32")),
            Ipv4Addr::new(198, 19, 128, 7)
        );
    }
}
