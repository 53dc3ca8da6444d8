//! Property tests (proptest) of what the receiver does with frames it did
//! not choose: the receive loop fed any mix of test frames, ARP, Neighbor
//! Discovery and random bytes; the host's answers to ARP and ND; the
//! per-stream counts of arbitrary sequence numbers; and `--latency-every`.
//!
//! Bounded case counts (about 2 s in all in a release build) so they run
//! in CI; `PROPTEST_CASES=N` runs each one longer.

use linerate_engine::host::{ArpAction, Ipv6Host};
use linerate_engine::ipsec::TunnelMap;
use linerate_engine::receiver::{receive, ReceiverSignals, RxTally, StreamRange};
use linerate_engine::stats::StreamStats;
use linerate_engine::{HostConfig, LatencySampling};
use linerate_port::{PortError, RxQueue};
use linerate_wire::arp::{arp_frame, ArpOp, ArpRepr};
use linerate_wire::flows::Field;
use linerate_wire::ndp::{self, NdpOp, NdpRepr};
use linerate_wire::{classify, FlowSpec, FrameSize, FrameTemplate, MacAddr, Received, Signature};
use proptest::prelude::*;
use std::collections::HashSet;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

const ME: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb]);
const GW: MacAddr = MacAddr([2, 0, 0, 0, 0, 0x9]);
const IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 2);
const GATEWAY: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);
const IP6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 2);
/// Seven tunnels' slices, 256 addresses each.
const MAP: TunnelMap = TunnelMap {
    first: Ipv4Addr::new(10, 1, 0, 0),
    block: 256,
    count: 7,
};
const GATEWAY6: Ipv6Addr = Ipv6Addr::new(0x2001, 2, 0, 1, 0, 0, 0, 1);
const PORT: u16 = 0x4C52;

fn host(v6: bool, vlan: Option<u16>) -> HostConfig {
    HostConfig {
        ip: IP,
        prefix_len: 24,
        gateway: GATEWAY,
        gateway_mac: None,
        also_answers: Some((Ipv4Addr::new(198, 19, 1, 0), Ipv4Addr::new(198, 19, 1, 255))),
        inner: None,
        ipv6: v6.then_some(Ipv6Host {
            ip: IP6,
            prefix_len: 64,
            gateway: GATEWAY6,
        }),
        vlan: vlan.map(|id| linerate_wire::VlanTag { id, pcp: 0 }),
    }
}

fn ours(h: &HostConfig, ip: Ipv4Addr) -> bool {
    ip == h.ip
        || h.also_answers
            .is_some_and(|(lo, hi)| (lo..=hi).contains(&ip))
}

fn mac() -> impl Strategy<Value = MacAddr> {
    prop_oneof![
        Just(GW),
        Just(MacAddr::BROADCAST),
        Just(MacAddr::ZERO),
        any::<[u8; 6]>().prop_map(MacAddr)
    ]
}

fn ipv4() -> impl Strategy<Value = Ipv4Addr> {
    prop_oneof![
        Just(IP),
        Just(GATEWAY),
        (0u8..=255).prop_map(|x| Ipv4Addr::new(198, 19, 1, x)),
        any::<u32>().prop_map(Ipv4Addr::from)
    ]
}

fn ipv6() -> impl Strategy<Value = Ipv6Addr> {
    prop_oneof![
        Just(IP6),
        Just(GATEWAY6),
        Just(Ipv6Addr::UNSPECIFIED),
        any::<u128>().prop_map(Ipv6Addr::from)
    ]
}

/// Frames a receiving port may see: ARP and ND packets with addresses
/// that are ours, the gateway's or anyone's (tagged or not), and random
/// bytes.
fn control_frame() -> impl Strategy<Value = Vec<u8>> {
    let arp = || {
        (any::<bool>(), mac(), ipv4(), mac(), ipv4(), mac()).prop_map(
            |(req, sm, si, tm, ti, eth_src)| {
                let r = ArpRepr {
                    op: if req { ArpOp::Request } else { ArpOp::Reply },
                    sender_mac: sm,
                    sender_ip: si,
                    target_mac: tm,
                    target_ip: ti,
                };
                arp_frame(&r, eth_src, MacAddr::BROADCAST).to_vec()
            },
        )
    };
    let nd = || {
        (any::<bool>(), mac(), ipv6(), ipv6(), mac()).prop_map(
            |(solicit, link, src, target, their_gw)| {
                if solicit {
                    ndp::solicitation(link, src, target, None)
                } else {
                    let ns = NdpRepr {
                        op: NdpOp::Solicit,
                        src_ip: src,
                        target,
                        link_addr: their_gw,
                    };
                    ndp::advertisement(link, target, &ns, None)
                }
            },
        )
    };
    let tag = |f: Vec<u8>, id: u16| {
        let mut v = f[..12].to_vec();
        v.extend_from_slice(&[0x81, 0x00]);
        v.extend_from_slice(&(id & 0x0FFF).to_be_bytes());
        v.extend_from_slice(&f[12..]);
        v
    };
    prop_oneof![
        arp(),
        nd(),
        (arp(), any::<u16>()).prop_map(move |(f, id)| tag(f, id)),
        (nd(), any::<u16>()).prop_map(move |(f, id)| tag(f, id)),
        proptest::collection::vec(any::<u8>(), 0..100),
    ]
}

proptest! {
    #![proptest_config(config(5000))]

    /// Whatever ARP or ND packet arrives, a host answers only requests for
    /// its own addresses (a well-formed reply, with its tag, to the asker),
    /// learns a gateway MAC only from the gateway and only a unicast one,
    /// and ignores the other protocol's packets.
    #[test]
    fn a_host_answers_and_learns_only_what_it_should(
        frame in control_frame(),
        v6 in any::<bool>(),
        vlan in proptest::option::of(1u16..=4094),
    ) {
        let h = host(v6, vlan);
        match classify(&frame, PORT) {
            Received::Arp(a) => {
                match h.on_arp(ME, &a) {
                    ArpAction::Reply(f) => {
                        prop_assert!(a.op == ArpOp::Request && ours(&h, a.target_ip));
                        let Received::Arp(r) = classify(&f, PORT) else {
                            return Err(TestCaseError::fail(format!("reply is not ARP: {f:?}")));
                        };
                        prop_assert_eq!(
                            r,
                            ArpRepr {
                                op: ArpOp::Reply,
                                sender_mac: ME,
                                sender_ip: a.target_ip,
                                target_mac: a.sender_mac,
                                target_ip: a.sender_ip,
                            }
                        );
                        prop_assert_eq!(&f[0..6], &a.sender_mac.0);
                        check_tag(&f, &h)?;
                    }
                    ArpAction::LearnedGateway(m) => {
                        prop_assert!(!v6 && a.sender_ip == GATEWAY && m == a.sender_mac);
                        prop_assert!(!m.is_multicast() && m != MacAddr::ZERO);
                    }
                    ArpAction::Ignore => {}
                }
            }
            Received::Ndp(n) => {
                match h.on_ndp(ME, &n) {
                    ArpAction::Reply(f) => {
                        prop_assert!(v6 && n.op == NdpOp::Solicit && n.target == IP6);
                        let Received::Ndp(r) = classify(&f, PORT) else {
                            return Err(TestCaseError::fail(format!("reply is not ND: {f:?}")));
                        };
                        prop_assert_eq!(
                            r,
                            NdpRepr { op: NdpOp::Advert, src_ip: IP6, target: IP6, link_addr: ME }
                        );
                        check_tag(&f, &h)?;
                    }
                    ArpAction::LearnedGateway(m) => {
                        let from_gw = match n.op {
                            NdpOp::Advert => n.target == GATEWAY6,
                            NdpOp::Solicit => n.src_ip == GATEWAY6,
                        };
                        prop_assert!(v6 && from_gw && m == n.link_addr);
                        prop_assert!(!m.is_multicast() && m != MacAddr::ZERO);
                    }
                    ArpAction::Ignore => {}
                }
            }
            _ => {}
        }
    }
}

/// A reply carries the host's VLAN tag when it has one, and none otherwise.
fn check_tag(f: &[u8], h: &HostConfig) -> Result<(), TestCaseError> {
    match h.vlan {
        Some(tag) => {
            prop_assert_eq!(&f[12..14], &[0x81, 0x00]);
            prop_assert_eq!(u16::from_be_bytes([f[14], f[15]]), tag.tci());
        }
        None => prop_assert_ne!(&f[12..14], &[0x81, 0x00]),
    }
    Ok(())
}

// ------------------------------------------------------------ the counts

/// Arrivals of one stream: sequence numbers within a thousand of a base
/// (away from 0, below which there is nothing to extend to), in any
/// order, with repeats.
fn arrivals() -> impl Strategy<Value = Vec<u32>> {
    (
        2000u32..=u32::MAX,
        proptest::collection::vec(0u32..1000, 1..300),
    )
        .prop_map(|(base, offs)| {
            offs.into_iter()
                .map(|o| base.wrapping_add(o).wrapping_sub(500))
                .collect()
        })
}

/// What StreamStats must count: distinct numbers, repeats, and distinct
/// numbers that arrived below the highest seen (reordered).
fn model(seqs: &[u32]) -> (u64, u64, u64) {
    let first = seqs[0];
    let mut seen = HashSet::new();
    let (mut dup, mut reordered) = (0, 0);
    let mut highest = i64::MIN;
    for &s in seqs {
        let off = s.wrapping_sub(first) as i32 as i64;
        if !seen.insert(off) {
            dup += 1;
        } else if off < highest {
            reordered += 1;
        }
        highest = highest.max(off);
    }
    (seen.len() as u64, dup, reordered)
}

proptest! {
    #![proptest_config(config(2000))]

    /// Any order of arrivals, across a 32-bit wrap too, is counted
    /// exactly: received distinct, duplicated, reordered.
    #[test]
    fn stream_counts_are_exact_for_any_order(seqs in arrivals()) {
        let mut s = StreamStats::default();
        for &q in &seqs {
            s.record(q, 1000);
        }
        prop_assert_eq!((s.received(), s.duplicated(), s.reordered()), model(&seqs));
    }

    /// Arbitrary 32-bit numbers (jumps of any size) never panic, and
    /// every arrival is counted once: received + duplicated = arrivals.
    #[test]
    fn stream_counts_survive_any_numbers(seqs in proptest::collection::vec(any::<u32>(), 1..200)) {
        let mut s = StreamStats::default();
        for &q in &seqs {
            s.record(q, q as u64);
        }
        prop_assert_eq!(s.received() + s.duplicated(), seqs.len() as u64);
        prop_assert!(s.received() >= 1);
    }

    /// With the stream's length known, a number beyond it is refused and
    /// changes nothing: the other arrivals count as they would alone.
    #[test]
    fn numbers_beyond_what_was_sent_are_refused(
        seqs in proptest::collection::vec(0u32..1000, 1..300),
        wild in proptest::collection::vec((any::<prop::sample::Index>(), 1000u32..=u32::MAX), 0..4),
    ) {
        // 1,000 frames sent; a few numbers at or beyond 1,000 anywhere.
        let mut with_wild = seqs.clone();
        for (at, number) in &wild {
            with_wild.insert(at.index(with_wild.len() + 1), *number);
        }
        let mut s = StreamStats::sending(1000);
        let refused = with_wild.iter().filter(|&&q| !s.record(q, 1)).count();
        prop_assert_eq!(refused, wild.len());
        prop_assert_eq!((s.received(), s.duplicated(), s.reordered()), model(&seqs));
    }

    #[test]
    fn latency_every_parses_powers_of_two_and_auto_only(
        s in prop_oneof![any::<String>(), "[0-9]{0,12}", "(?i)auto"],
        k in 0u32..32,
    ) {
        if let Ok(l) = LatencySampling::parse(&s) {
            prop_assert_eq!(LatencySampling::parse(&l.to_string()), Ok(l));
            if let LatencySampling::Every(n) = l {
                prop_assert!(n.is_power_of_two());
            }
        }
        let n = 1u32 << k;
        if let Ok(l) = LatencySampling::parse(&n.to_string()) {
            prop_assert_eq!(l, LatencySampling::Every(n));
        }
    }
}

// ------------------------------------------------- the whole receive loop

/// Hands the receive loop one batch of frames, then stops it.
struct Feed {
    frames: Vec<Vec<u8>>,
    signals: Arc<ReceiverSignals>,
    sent: Vec<Vec<u8>>,
}

impl RxQueue for Feed {
    fn recv<F: FnMut(&[u8], usize, u64)>(
        &mut self,
        _: Duration,
        mut f: F,
    ) -> Result<usize, PortError> {
        let frames = std::mem::take(&mut self.frames);
        for frame in &frames {
            f(frame, frame.len(), 1_000_000);
        }
        self.signals.stop.store(true, Ordering::Relaxed);
        Ok(frames.len())
    }

    fn send_control(&mut self, frame: &[u8]) -> Result<(), PortError> {
        self.sent.push(frame.to_vec());
        Ok(())
    }

    fn take_drops(&mut self) -> Result<u64, PortError> {
        Ok(0)
    }
}

/// One frame on the receiving port: a test frame of stream `first + k`
/// (k may be outside the trial's streams) with a sequence number, or a
/// control or random frame.
#[derive(Debug, Clone)]
enum Arrival {
    /// From tunnel `tunnel`'s slice (7: past the last tunnel's).
    Test {
        k: u16,
        seq: u32,
        size: u64,
        tunnel: u32,
    },
    Other(Vec<u8>),
}

fn arrival() -> impl Strategy<Value = Arrival> {
    prop_oneof![
        3 => (0u16..6, 5000u32..5400, 64u64..=256, 0u32..8).prop_map(|(k, seq, size, tunnel)| Arrival::Test { k, seq, size, tunnel }),
        1 => control_frame().prop_map(Arrival::Other),
    ]
}

proptest! {
    #![proptest_config(config(1000))]

    /// The receive loop fed any mix of test frames (of this trial's
    /// streams and of others), ARP, ND and random bytes: counts each
    /// stream's distinct frames and duplicates exactly, counts test frames
    /// of other streams as stray, answers ARP requests for its addresses
    /// only, and never panics. Per tunnel (by source address), it counts
    /// each stream's distinct frames where the stream does (a duplicate,
    /// a stray, a frame of a stream beyond the tallied ones or from no
    /// tunnel's slice: none).
    #[test]
    fn the_receive_loop_counts_exactly_whatever_arrives(
        first in any::<u16>(),
        count in 1u16..4,
        tallied in 0u16..4,
        arrivals in proptest::collection::vec(arrival(), 0..120),
    ) {
        let flow = FlowSpec {
            src_mac: GW,
            dst_mac: ME,
            src_ip: Ipv4Addr::new(198, 18, 0, 2).into(),
            dst_ip: IP.into(),
            src_port: PORT,
            dst_port: PORT,
            ttl: 64,
            vlan: None,
        };
        let h = HostConfig { gateway_mac: Some(GW), ..host(false, None) };
        let mut frames = Vec::new();
        let mut per_stream: Vec<Vec<u32>> = vec![Vec::new(); count as usize];
        let (mut stray, mut requests) = (0u64, 0usize);
        for a in &arrivals {
            match a {
                Arrival::Test { k, seq, size, tunnel } => {
                    let src = u32::from(MAP.first) + tunnel * MAP.block + 2;
                    let flow = FlowSpec { src_ip: Ipv4Addr::from(src).into(), ..flow.clone() };
                    let t = FrameTemplate::new(&flow, FrameSize::from_frame(*size).unwrap());
                    let sig = Signature { stream: first.wrapping_add(*k), seq: *seq, tx_ts: 0 };
                    let mut b = vec![0u8; t.len()];
                    t.write(&mut b, sig);
                    frames.push(b);
                    match per_stream.get_mut(*k as usize) {
                        Some(s) => s.push(*seq),
                        None => stray += 1,
                    }
                }
                Arrival::Other(f) => {
                    match classify(f, PORT) {
                        Received::Arp(a) if a.op == ArpOp::Request && ours(&h, a.target_ip) => {
                            requests += 1
                        }
                        Received::Test { sig } => {
                            match sig.stream.wrapping_sub(first) {
                                k if k < count => per_stream[k as usize].push(sig.seq),
                                _ => stray += 1,
                            }
                        }
                        _ => {}
                    }
                    frames.push(f.clone());
                }
            }
        }
        let signals = Arc::new(ReceiverSignals::default());
        let mut feed = Feed { frames, signals: signals.clone(), sent: Vec::new() };
        let range = StreamRange {
            first,
            count,
            udp_port: PORT,
            latency_every: 1,
            check: linerate_wire::FrameCheck::Headers,
            frames: u64::MAX,
            not_before_ns: 0,
            interval_ns: 0,
            tunnels: Some(RxTally { map: MAP, field: Field::SrcIp, streams: tallied }),
        };
        // Each tallied stream's distinct frames, by the tunnel of the
        // first arrival of each number.
        let mut want = vec![0u64; MAP.count as usize];
        let mut seen = HashSet::new();
        for f in &feed.frames {
            if let Received::Test { sig } = classify(f, PORT) {
                let k = sig.stream.wrapping_sub(first);
                if k < count && seen.insert((k, sig.seq)) && k < tallied {
                    if let Some(i) = Field::SrcIp.ipv4_in(f).and_then(|a| MAP.index_of(a)) {
                        want[i] += 1;
                    }
                }
            }
        }
        let counted = receive(&mut feed, ME, &h, range, &signals, || 0, &mut linerate_engine::receiver::AsSent).unwrap();
        prop_assert_eq!(&counted.tunnels, &want);
        prop_assert_eq!(counted.stray, stray);
        for (stats, seqs) in counted.streams.iter().zip(&per_stream) {
            let distinct: HashSet<u32> = seqs.iter().copied().collect();
            prop_assert_eq!(stats.received(), distinct.len() as u64);
            prop_assert_eq!(stats.duplicated(), (seqs.len() - distinct.len()) as u64);
        }
        let total: u64 = counted.streams.iter().map(StreamStats::received).sum();
        prop_assert_eq!(signals.received.load(Ordering::Relaxed), total);
        // The announcement of itself, then one reply per request for its addresses.
        prop_assert_eq!(feed.sent.len(), 1 + requests);
    }
}
