//! What `--traffic`'s sender and receiver share and report: the tunnels
//! handed to the sender, each tunnel's counts, and the marks of where its
//! frames stood (for `--capacity`'s traffic windows).

use linerate_esp::SaKeys;
use std::net::Ipv4Addr;
use std::sync::atomic::AtomicU64;
use std::sync::Mutex;

/// The test frames' size (Ethernet, without FCS: 60 bytes handed on at
/// port A).
pub const TRAFFIC_FRAME: u64 = 64;

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

/// What both threads share for `--capacity`'s traffic windows: each
/// tunnel's next sequence number and frames refused so far, in one word
/// (the sender's: seq << 32 | refused, read together), and the sequence
/// numbers that arrived (the receiver's, a bit each).
pub(super) struct Shared {
    pub(super) progress: Vec<AtomicU64>,
    pub(super) seen: Mutex<Vec<Vec<u64>>>,
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
