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
//! Two threads besides the fleet's: the sender (`traffic/sender.rs`: port
//! B's AF_PACKET transmit ring, every tunnel paced at the same rate from a
//! timer heap) and the receiver (`traffic/receiver.rs`: port A's
//! AF_PACKET rings); what they share and count is in `traffic/shared.rs`.

mod receiver;
mod sender;
mod shared;

use crate::error::{err, Result};
use crate::ipsec::Net;
use linerate_engine::host::HostConfig;
use linerate_port::af_packet::{AfPacketOptions, AfPacketPort};
use linerate_port::Port;
use receiver::receive;
use sender::{send, Pacer};
use shared::Shared;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use shared::{SendSide, TrafficCounts, TunnelMark, UpTunnel, TRAFFIC_FRAME};

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

/// The first host address of a tunnel's slice: its frames' source.
pub fn slice_host(net: Net) -> Ipv4Addr {
    let (first, last) = net.range();
    if net.prefix_len >= 31 {
        first
    } else {
        Ipv4Addr::from(u32::from(first) + 1).min(last)
    }
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
