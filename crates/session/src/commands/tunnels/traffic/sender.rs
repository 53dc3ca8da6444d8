//! `--traffic`'s sender thread: every tunnel that is up sends test
//! frames at the same rate from a timer heap, each sealed with the
//! tunnel's own outbound SA, through port B's AF_PACKET transmit ring.

use super::shared::{SendSide, Shared, UpTunnel, TRAFFIC_FRAME};
use crate::error::{bail, err, Result};
use crate::peers::ip_out;
use linerate_engine::ipsec::{EspCounts, EspSend};
use linerate_engine::transform::SendTransform;
use linerate_esp::Outbound;
use linerate_port::af_packet::TxRing;
use linerate_port::TxQueue;
use linerate_wire::template::DEFAULT_UDP_PORT;
use linerate_wire::{FlowSpec, FrameSize, FrameTemplate, MacAddr, Signature};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One tunnel's sending state.
struct Stream {
    esp: EspSend,
    seq: u32,
    sent: u64,
    refused: u64,
}

/// The sender: frames of every tunnel handed over, each at `rate`, until
/// `stop`. Returns (taken, refused) per tunnel.
pub(super) fn send(
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
pub(super) struct Pacer {
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
    pub(super) fn new(
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
