//! `--traffic`'s receiver thread: port A's frames, each tunnel's test
//! frames counted once (intact, damaged, again), ARP answered for port A's
//! host.

use super::shared::{Shared, TrafficCounts, TunnelTraffic};
use crate::error::{err, Result};
use linerate_engine::host::{ArpAction, HostConfig};
use linerate_port::RxQueue;
use linerate_wire::flows::Field;
use linerate_wire::integrity::intact;
use linerate_wire::template::DEFAULT_UDP_PORT;
use linerate_wire::{classify, FrameCheck, MacAddr, Received};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The receiver: port A's frames until `stop`; ARP answered.
pub(super) fn receive(
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
                        && Field::SrcIp.ipv4_in(frame) == Some(u32::from(sources[i]))
                        && Field::DstIp.ipv4_in(frame) == Some(u32::from(dst));
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
