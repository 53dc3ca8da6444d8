//! The per-frame transform stage on the in-memory loopback port: every
//! frame passes the send transform after it is built and the receive
//! transform before it is counted, and what the receive transform refuses
//! counts as errored (the place ESP encryption and decryption sit).

use linerate_engine::transform::{Arrived, ReceiveTransform, SendTransform};
use linerate_engine::{Engine, EngineConfig, EngineError, HostConfig, TesterPort};
use linerate_port::loopback::{pair, Impairment};
use linerate_results::TrialSpec;
use linerate_wire::FrameSize;
use std::net::Ipv4Addr;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The EtherType a wrapped frame carries (IEEE local experimental).
const WRAPPED: [u8; 2] = [0x88, 0xb5];
const IPV4: [u8; 2] = [0x08, 0x00];
/// Every frame after the Ethernet header is XORed with this.
const KEY: u8 = 0xa5;

/// Hides the IPv4 packet (XOR, another EtherType) and appends a 4-byte
/// frame counter, as an encryption would.
struct Wrap {
    sent: u32,
    left: Option<u64>,
    growth: usize,
}

impl SendTransform for Wrap {
    fn apply(&mut self, buf: &mut [u8], len: usize) -> usize {
        if buf[12..14] == IPV4 {
            buf[12..14].copy_from_slice(&WRAPPED);
            buf[14..len].iter_mut().for_each(|b| *b ^= KEY);
        }
        buf[len..len + 4].copy_from_slice(&self.sent.to_be_bytes());
        self.sent += 1;
        len + 4
    }
    fn growth(&self, _len: usize) -> usize {
        self.growth
    }
    fn frames_left(&self) -> Option<u64> {
        self.left
    }
    fn describe(&self) -> String {
        "xor-wrap".into()
    }
}

/// Undoes [`Wrap`]; every `damage_every`-th frame (by its counter) fails
/// its "check".
struct Unwrap {
    damage_every: u32,
}

impl ReceiveTransform for Unwrap {
    fn apply<'a>(&mut self, frame: &[u8], scratch: &'a mut [u8]) -> Arrived<'a> {
        if frame.len() < 18 || frame[12..14] != WRAPPED {
            return Arrived::AsIs;
        }
        let len = frame.len() - 4;
        let counter = u32::from_be_bytes(frame[len..].try_into().unwrap());
        if counter % self.damage_every == self.damage_every - 1 {
            return Arrived::Damaged;
        }
        scratch[..len].copy_from_slice(&frame[..len]);
        scratch[12..14].copy_from_slice(&IPV4);
        scratch[14..len].iter_mut().for_each(|b| *b ^= KEY);
        Arrived::Inner(&scratch[..len])
    }
    fn growth(&self, _len: usize) -> usize {
        4
    }
    fn describe(&self) -> String {
        "xor-unwrap".into()
    }
}

/// Back-to-back loopback ports, port A sending through `send`, port B
/// counting through `receive`.
fn engine(send: Wrap, receive: Option<Unwrap>) -> Engine {
    let cfg = EngineConfig {
        straggler_wait: Duration::from_millis(300),
        name: "loopback".into(),
        // A held-up generator catches up instead of losing its last frames
        // (these tests count, they do not time: see loopback.rs).
        catch_up_frames: 1_000_000_000,
        ..EngineConfig::default()
    };
    engine_with(Some(send), receive, Impairment::default(), cfg)
}

/// [`engine`] on a wire with `imp`, configured by `cfg`.
fn engine_with(
    send: Option<Wrap>,
    receive: Option<Unwrap>,
    imp: Impairment,
    cfg: EngineConfig,
) -> Engine {
    let (a, b) = pair(imp);
    let host = |ip, gateway| HostConfig {
        ip,
        prefix_len: 24,
        gateway,
        gateway_mac: None,
        also_answers: None,
        inner: None,
        ipv6: None,
        vlan: None,
    };
    let (ip_a, ip_b) = (Ipv4Addr::new(198, 18, 0, 2), Ipv4Addr::new(198, 18, 0, 3));
    let mut port_a = TesterPort::from_port(a);
    if let Some(send) = send {
        port_a
            .set_transforms(Some(Box::new(send)), None, "loopback")
            .unwrap();
    }
    let mut port_b = TesterPort::from_port(b);
    if let Some(receive) = receive {
        port_b
            .set_transforms(None, Some(Box::new(receive)), "loopback")
            .unwrap();
    }
    Engine::new(port_a, host(ip_a, ip_b), port_b, host(ip_b, ip_a), cfg)
}

fn spec(size: u64) -> TrialSpec {
    TrialSpec {
        frame: FrameSize::from_frame(size).unwrap(),
        mix: None,
        intended_fps: 50_000.0,
        duration: Duration::from_millis(200),
    }
}

fn wrap() -> Wrap {
    Wrap {
        sent: 0,
        left: None,
        growth: 4,
    }
}

#[test]
fn every_frame_passes_both_transforms_and_refused_ones_are_errored() {
    let mut e = engine(wrap(), Some(Unwrap { damage_every: 50 }));
    let r = e.run_trial(&spec(64), &AtomicBool::new(false)).unwrap();
    assert_eq!(r.tx_frames, 10_000);
    // One frame in 50 fails the receive transform's check: damaged, lost,
    // and said to be damaged; the rest are counted as test frames.
    assert_eq!(r.errored_frames, 200);
    assert_eq!(r.rx_frames, 9_800);
    assert_eq!(r.lost_frames, 200);
    assert_eq!(r.loss_where.expect("attributed").errored, 200);
    assert_eq!((r.reordered, r.duplicated, r.stray_frames), (0, 0, 0));
}

#[test]
fn without_the_receive_transform_nothing_sent_is_a_test_frame() {
    // Proves the send transform ran on every frame: unwrapped, none of
    // them is recognised.
    let mut e = engine(wrap(), None);
    let r = e.run_trial(&spec(64), &AtomicBool::new(false)).unwrap();
    assert_eq!(r.tx_frames, 10_000);
    assert_eq!((r.rx_frames, r.errored_frames), (0, 0));
}

#[test]
fn a_transform_that_runs_out_refuses_the_trial_before_it_starts() {
    let send = Wrap {
        left: Some(9_999),
        ..wrap()
    };
    let mut e = engine(send, Some(Unwrap { damage_every: 50 }));
    let err = e.run_trial(&spec(64), &AtomicBool::new(false)).unwrap_err();
    assert!(
        matches!(
            err,
            EngineError::TransformExhausted {
                left: 9_999,
                frames: 10_000,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("xor-wrap"), "{err}");
}

#[test]
fn what_a_transform_adds_must_fit_the_port() {
    let send = Wrap {
        growth: 100_000,
        ..wrap()
    };
    let mut e = engine(send, Some(Unwrap { damage_every: 50 }));
    let err = e.run_trial(&spec(64), &AtomicBool::new(false)).unwrap_err();
    assert!(
        matches!(
            err,
            EngineError::FrameTooLarge { .. } | EngineError::FrameTooLargeForEngine { .. }
        ),
        "{err}"
    );
}

/// ESP through the whole engine: port A encrypts every frame, port B
/// decrypts and counts; a lossy, duplicating wire is counted exactly, the
/// duplicates discarded by the anti-replay window.
#[test]
fn esp_frames_are_counted_exactly_through_the_engine() {
    use linerate_engine::ipsec::{EspReceive, EspSend, SharedCounts};
    use linerate_esp::{EspSuite, Inbound, Outbound, SaKeys};
    for suite in [EspSuite::Aes256Gcm16, EspSuite::Aes128Sha256] {
        let keys = || {
            let enc = vec![0x5a; suite.encryption_keymat_len()];
            let integ = vec![0xa5; suite.integrity_key_len()];
            SaKeys::new(suite, 0x1234_5678, enc, integ).unwrap()
        };
        let imp = Impairment {
            drop_every: Some(100),
            duplicate_every: Some(250),
            swap_every: Some(333),
        };
        let (a, b) = pair(imp);
        let counts = SharedCounts::default();
        let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
        let mut port_a = TesterPort::from_port(a);
        let send = EspSend::new(
            Outbound::new(keys()).unwrap(),
            ip("198.18.0.2"),
            ip("198.18.0.3"),
            counts.clone(),
        );
        port_a
            .set_transforms(Some(Box::new(send)), None, "loopback")
            .unwrap();
        let mut port_b = TesterPort::from_port(b);
        let receive = EspReceive::new(Inbound::new(keys()).unwrap(), counts.clone());
        port_b
            .set_transforms(None, Some(Box::new(receive)), "loopback")
            .unwrap();
        let host = |ip, gateway| HostConfig {
            ip,
            prefix_len: 24,
            gateway,
            gateway_mac: None,
            also_answers: None,
            inner: None,
            ipv6: None,
            vlan: None,
        };
        let cfg = EngineConfig {
            straggler_wait: Duration::from_millis(300),
            name: "loopback".into(),
            // A held-up generator catches up instead of losing its last frames
            // (these tests count, they do not time: see loopback.rs).
            catch_up_frames: 1_000_000_000,
            ..EngineConfig::default()
        };
        let mut e = Engine::new(
            port_a,
            host(ip("198.18.0.2"), ip("198.18.0.3")),
            port_b,
            host(ip("198.18.0.3"), ip("198.18.0.2")),
            cfg,
        );
        for size in [64, 1518] {
            let r = e.run_trial(&spec(size), &AtomicBool::new(false)).unwrap();
            // As in loopback.rs's known fault pattern: 100 dropped, 20
            // duplicates (refused by the window, not counted), 30 swaps
            // (within the window: received and counted as reordered).
            assert_eq!(r.tx_frames, 10_000, "{suite} {size}");
            assert_eq!(r.rx_frames, 9_900, "{suite} {size}");
            assert_eq!(r.lost_frames, 100, "{suite} {size}");
            assert_eq!(
                (r.duplicated, r.reordered, r.errored_frames),
                (0, 30, 0),
                "{suite} {size}"
            );
        }
        drop(e);
        let c = counts.lock().unwrap();
        assert_eq!(c.sent.packets, 20_000);
        assert_eq!(c.received.packets, 19_800);
        assert_eq!(c.received.replays, 40);
        assert_eq!(c.received.icv_failures, 0);
    }
}

/// Seven tunnels' slices of 256 addresses from 10.1.0.0; frames go to (or
/// come from) host .2 of each.
const MAP: linerate_engine::ipsec::TunnelMap = linerate_engine::ipsec::TunnelMap {
    first: Ipv4Addr::new(10, 1, 0, 0),
    block: 256,
    count: 7,
};

/// Tunnel i's share of `frames` spread round robin: frame n is tunnel
/// n mod 7's.
fn share(frames: u64, i: u64) -> u64 {
    frames / 7 + u64::from(i < frames % 7)
}

/// Many tunnels through the whole engine: port A seals each frame with
/// its source's tunnel SA, port B opens it by SPI; the per-tunnel counts
/// are each tunnel's exact share, add up to the trial's, and match what
/// each tunnel's SAs counted (frames sealed and opened), on a wire that
/// drops, duplicates and swaps frames.
#[test]
fn each_tunnel_carries_its_exact_share_through_the_engine() {
    use linerate_engine::ipsec::{EspReceive, EspSend, SharedCounts};
    use linerate_engine::TunnelTally;
    use linerate_esp::{EspSuite, Inbound, Outbound, SaKeys};
    use linerate_wire::flows::Field;
    let suite = EspSuite::Aes128Gcm16;
    let keys = |i: u32| {
        let enc = vec![i as u8; suite.encryption_keymat_len()];
        SaKeys::new(suite, 0xc000_0100 + i, enc, vec![]).unwrap()
    };
    let imp = Impairment {
        drop_every: Some(100),
        duplicate_every: Some(250),
        swap_every: Some(333),
    };
    let (a, b) = pair(imp);
    let counts = SharedCounts::default();
    let ip = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    let peer = |i: u32| Ipv4Addr::new(198, 18, 1, 10 + i as u8);
    let mut port_a = TesterPort::from_port(a);
    let sas = (0..7)
        .map(|i| (Outbound::new(keys(i)).unwrap(), peer(i)))
        .collect();
    let send = EspSend::many(sas, ip("198.18.0.3"), MAP, counts.clone());
    port_a
        .set_transforms(Some(Box::new(send)), None, "loopback")
        .unwrap();
    let mut port_b = TesterPort::from_port(b);
    let inbound = (0..7).map(|i| Inbound::new(keys(i)).unwrap()).collect();
    let receive = EspReceive::many(inbound, counts.clone());
    port_b
        .set_transforms(None, Some(Box::new(receive)), "loopback")
        .unwrap();
    let host = |ip, gateway| HostConfig {
        ip,
        prefix_len: 24,
        gateway,
        gateway_mac: None,
        also_answers: None,
        inner: None,
        ipv6: None,
        vlan: None,
    };
    let cfg = EngineConfig {
        straggler_wait: Duration::from_millis(300),
        name: "loopback".into(),
        // A held-up generator catches up instead of losing its last frames
        // (these tests count, they do not time: see loopback.rs).
        catch_up_frames: 1_000_000_000,
        flows: linerate_wire::Flows {
            ranges: vec![MAP.spread(Field::SrcIp, 2)],
            ..Default::default()
        },
        tunnels: Some(TunnelTally {
            map: MAP,
            ab: Field::SrcIp,
            ba: Field::DstIp,
        }),
        ..EngineConfig::default()
    };
    let mut e = Engine::new(
        port_a,
        host(ip("198.18.0.2"), ip("198.18.0.3")),
        port_b,
        host(ip("198.18.0.3"), ip("198.18.0.2")),
        cfg,
    );
    let per_tunnel = |c: &SharedCounts| {
        let c = c.lock().unwrap();
        c.per_tunnel
            .iter()
            .map(|t| (t.sent.packets, t.received.packets))
            .collect::<Vec<_>>()
    };
    let mut before = vec![(0, 0); 7];
    for size in [64, 1518] {
        let r = e.run_trial(&spec(size), &AtomicBool::new(false)).unwrap();
        // As in the one-tunnel test: every 100th dropped, duplicates
        // refused by the window, swaps received. (Shares are of the frames
        // really sent: a generator held up on a busy machine gives up on
        // the last few, and tx_frames says so.)
        assert!(r.rx_frames < r.tx_frames, "{size}");
        assert_eq!(r.tunnels.len(), 7, "{size}");
        let after = per_tunnel(&counts);
        for (i, t) in r.tunnels.iter().enumerate() {
            assert_eq!(t.tx, share(r.tx_frames, i as u64), "tunnel {i}, {size}");
            // What tunnel i's outbound SA sealed and its inbound SA opened.
            assert_eq!(t.tx, after[i].0 - before[i].0, "tunnel {i}, {size}");
            assert_eq!(t.rx, after[i].1 - before[i].1, "tunnel {i}, {size}");
        }
        assert_eq!(r.tunnels.iter().map(|t| t.tx).sum::<u64>(), r.tx_frames);
        assert_eq!(r.tunnels.iter().map(|t| t.rx).sum::<u64>(), r.rx_frames);
        // The drops (every 100th frame crossing) fall in several tunnels.
        let losing = r.tunnels.iter().filter(|t| t.rx < t.tx).count();
        assert!(losing >= 2, "{:?}", r.tunnels);
        before = after;
    }
}

/// A frame the receive transform refuses is no tunnel's received frame;
/// both directions of a bidirectional trial are counted per tunnel, each
/// on its own flow ranges (B -> A's from `flows_rev`), and the trial's
/// record sums them.
#[test]
fn tunnel_counts_leave_out_damaged_frames_and_cover_both_directions() {
    use linerate_engine::TunnelTally;
    use linerate_wire::flows::Field;
    let tally = TunnelTally {
        map: MAP,
        ab: Field::DstIp,
        ba: Field::SrcIp,
    };
    // One way, every 50th frame damaged: frames 49, 99, ... (tunnel n mod 7).
    let cfg = EngineConfig {
        straggler_wait: Duration::from_millis(300),
        name: "loopback".into(),
        // A held-up generator catches up instead of losing its last frames
        // (these tests count, they do not time: see loopback.rs).
        catch_up_frames: 1_000_000_000,
        flows: linerate_wire::Flows {
            ranges: vec![MAP.spread(Field::DstIp, 2)],
            ..Default::default()
        },
        tunnels: Some(tally),
        ..EngineConfig::default()
    };
    let unwrap = Some(Unwrap { damage_every: 50 });
    let mut e = engine_with(Some(wrap()), unwrap, Impairment::default(), cfg.clone());
    let r = e.run_trial(&spec(64), &AtomicBool::new(false)).unwrap();
    // Shares are of the frames really sent: a generator held up on a
    // busy machine gives up on the last few, and tx_frames says so.
    assert!(r.errored_frames > 0);
    for (i, t) in r.tunnels.iter().enumerate() {
        let damaged = (0..r.tx_frames)
            .filter(|n| n % 50 == 49 && n % 7 == i as u64)
            .count() as u64;
        assert_eq!(t.tx, share(r.tx_frames, i as u64), "tunnel {i}");
        assert_eq!(t.rx, t.tx - damaged, "tunnel {i}");
    }
    assert_eq!(r.tunnels.iter().map(|t| t.rx).sum::<u64>(), r.rx_frames);

    // Both ways on a wire that drops every 100th frame A -> B (the
    // loopback impairs that direction only).
    let cfg = EngineConfig {
        bidirectional: true,
        flows_rev: linerate_wire::Flows {
            ranges: vec![MAP.spread(Field::SrcIp, 2)],
            ..Default::default()
        },
        ..cfg
    };
    let imp = Impairment {
        drop_every: Some(100),
        ..Impairment::default()
    };
    let mut e = engine_with(None, None, imp, cfg);
    let r = e.run_trial(&spec(64), &AtomicBool::new(false)).unwrap();
    assert_eq!(r.directions.len(), 2);
    for (k, d) in r.directions.iter().enumerate() {
        let tunnels_lost: u64 = d.tunnels.iter().map(|t| t.tx - t.rx).sum();
        assert_eq!(tunnels_lost, d.tx_frames - d.rx_frames);
        assert_eq!(tunnels_lost > 0, k == 0, "only A -> B loses frames");
        assert_eq!(d.tunnels.len(), 7);
        for (i, t) in d.tunnels.iter().enumerate() {
            // Each direction spreads its own frames over every tunnel.
            assert_eq!(t.tx, share(d.tx_frames, i as u64), "tunnel {i}");
            assert!(t.rx <= t.tx);
        }
        assert_eq!(d.tunnels.iter().map(|t| t.tx).sum::<u64>(), d.tx_frames);
        assert_eq!(d.tunnels.iter().map(|t| t.rx).sum::<u64>(), d.rx_frames);
    }
    for (i, t) in r.tunnels.iter().enumerate() {
        let (x, y) = (&r.directions[0].tunnels[i], &r.directions[1].tunnels[i]);
        assert_eq!((t.tx, t.rx), (x.tx + y.tx, x.rx + y.rx));
    }
    assert_eq!(r.tunnels.iter().map(|t| t.tx).sum::<u64>(), r.tx_frames);
    assert_eq!(r.tunnels.iter().map(|t| t.rx).sum::<u64>(), r.rx_frames);
}
