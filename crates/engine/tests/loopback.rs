//! The engine on the in-memory loopback port: counts must be exact for a
//! known fault pattern.

use linerate_engine::host::Ipv6Host;
use linerate_engine::{Engine, EngineConfig, HostConfig, TesterPort};
use linerate_port::loopback::{pair, Impairment};
use linerate_results::TrialSpec;
use linerate_wire::FrameSize;
use linerate_wire::VlanTag;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

fn engine(imp: Impairment) -> Engine {
    engine_in(imp, None, None)
}

/// Back-to-back loopback ports; with `v6` both hosts are IPv6 hosts (the
/// gateways resolved by Neighbor Discovery), with `vlan` both tag.
fn engine_in(imp: Impairment, v6: Option<()>, vlan: Option<VlanTag>) -> Engine {
    let (a, b) = pair(imp);
    let ip_a = Ipv4Addr::new(198, 18, 0, 2);
    let ip_b = Ipv4Addr::new(198, 18, 0, 3);
    // Back to back: each port's gateway is the other port.
    let host_a = HostConfig {
        ip: ip_a,
        prefix_len: 24,
        gateway: ip_b,
        gateway_mac: None,
        also_answers: None,
        inner: None,
        ipv6: None,
        vlan: None,
    };
    let host_b = HostConfig {
        ip: ip_b,
        prefix_len: 24,
        gateway: ip_a,
        gateway_mac: None,
        also_answers: None,
        inner: None,
        ipv6: None,
        vlan: None,
    };
    let (v6_a, v6_b): (Ipv6Addr, Ipv6Addr) =
        ("2001:2::2".parse().unwrap(), "2001:2::3".parse().unwrap());
    let host_a = HostConfig {
        ipv6: v6.map(|_| Ipv6Host {
            ip: v6_a,
            prefix_len: 64,
            gateway: v6_b,
        }),
        vlan,
        ..host_a
    };
    let host_b = HostConfig {
        ipv6: v6.map(|_| Ipv6Host {
            ip: v6_b,
            prefix_len: 64,
            gateway: v6_a,
        }),
        vlan,
        ..host_b
    };
    let cfg = EngineConfig {
        straggler_wait: Duration::from_millis(300),
        name: "loopback".into(),
        // These tests count a fault pattern, not the generator's schedule:
        // a generator this busy machine held up catches up in one burst
        // (an in-memory port has no input queue to overflow) instead of
        // pausing past the trial's end and losing its last frames.
        catch_up_frames: 1_000_000_000,
        ..EngineConfig::default()
    };
    Engine::new(
        TesterPort::from_port(a),
        host_a,
        TesterPort::from_port(b),
        host_b,
        cfg,
    )
}

fn spec(fps: f64, ms: u64) -> TrialSpec {
    TrialSpec {
        frame: FrameSize::from_frame(64).unwrap(),
        mix: None,
        intended_fps: fps,
        duration: Duration::from_millis(ms),
    }
}

#[test]
fn a_clean_wire_loses_nothing() {
    let mut e = engine(Impairment::default());
    let r = e
        .run_trial(&spec(50_000.0, 200), &AtomicBool::new(false))
        .unwrap();
    assert_eq!(r.intended_frames, 10_000);
    assert_eq!(
        (r.tx_frames, r.rx_frames, r.lost_frames),
        (10_000, 10_000, 0)
    );
    assert_eq!((r.reordered, r.duplicated), (0, 0));
    assert_eq!(r.loss_ratio, 0.0);
    assert!(!r.generator_short);
    // The rate over the time the frames took: 50,000/s unless this
    // (shared, busy) machine paused the generator, which makes it longer.
    let paused_s = r.generator_paused_ns.unwrap_or(0) as f64 / 1e9;
    let expected = 10_000.0 / (0.2 + paused_s);
    assert!(
        (r.offered_fps - expected).abs() / expected < 0.02,
        "offered {} (paused {paused_s} s)",
        r.offered_fps
    );
    let lat = r.latency_ns.expect("latency measured");
    assert!(lat.min <= lat.p50 && lat.p50 <= lat.p99 && lat.p99 <= lat.max);
    assert_eq!(r.engine, "loopback");
}

#[test]
fn a_mix_is_counted_like_one_size() {
    let mut e = engine(Impairment::default());
    let mix = linerate_wire::FrameMix::parse("imix1").unwrap();
    let spec = TrialSpec {
        frame: mix.largest(),
        mix: Some(mix),
        ..spec(60_000.0, 200)
    };
    let r = e.run_trial(&spec, &AtomicBool::new(false)).unwrap();
    assert_eq!(
        (r.tx_frames, r.rx_frames, r.lost_frames),
        (12_000, 12_000, 0)
    );
    assert_eq!(r.frame_size, 1418);
    assert_eq!(r.mix.expect("mix recorded").name, "IMIX 1");
}

#[test]
fn a_known_fault_pattern_is_counted_exactly() {
    let imp = Impairment {
        drop_every: Some(100),
        duplicate_every: Some(250),
        swap_every: Some(333),
    };
    let mut e = engine(imp);
    let r = e
        .run_trial(&spec(50_000.0, 200), &AtomicBool::new(false))
        .unwrap();
    // 10,000 frames: every 100th dropped (100), every 250th doubled (40, of
    // which those at multiples of 500 were dropped first: 20 remain), every
    // 333rd swapped with its successor (30, none of them dropped: 333k is a
    // multiple of 100 only at k=100+, beyond 10,000).
    assert_eq!(r.tx_frames, 10_000);
    assert_eq!(r.lost_frames, 100);
    assert_eq!(r.rx_frames, 9_900);
    assert_eq!(r.duplicated, 20);
    assert_eq!(r.reordered, 30);
    assert!((r.loss_ratio - 0.01).abs() < 1e-12);
}

#[test]
fn later_trials_do_not_count_earlier_frames() {
    let mut e = engine(Impairment::default());
    for _ in 0..3 {
        let r = e
            .run_trial(&spec(20_000.0, 100), &AtomicBool::new(false))
            .unwrap();
        assert_eq!((r.tx_frames, r.rx_frames, r.duplicated), (2_000, 2_000, 0));
    }
}

#[test]
fn an_interrupt_stops_the_trial() {
    let mut e = engine(Impairment::default());
    let stop = AtomicBool::new(true);
    assert!(matches!(
        e.run_trial(&spec(10_000.0, 5_000), &stop),
        Err(linerate_engine::EngineError::Interrupted)
    ));
}

#[test]
fn ipv6_and_vlan_frames_resolve_by_ndp_and_count_exactly() {
    let tag = Some(VlanTag { id: 100, pcp: 0 });
    for (v6, vlan) in [(Some(()), None), (None, tag), (Some(()), tag)] {
        let imp = Impairment {
            drop_every: Some(100),
            ..Impairment::default()
        };
        let mut e = engine_in(imp, v6, vlan);
        let encap = e.encap();
        // Too small for IPv6: a clear error, not a broken frame.
        if v6.is_some() {
            let small = TrialSpec {
                frame: FrameSize::from_frame(64).unwrap(),
                ..spec(1000.0, 200)
            };
            let err = e.run_trial(&small, &AtomicBool::new(false)).unwrap_err();
            let smallest = format!("the smallest is {} bytes", encap.min_frame());
            assert!(err.to_string().contains(&smallest), "{err}");
        }
        let s = TrialSpec {
            frame: FrameSize::from_frame_in(encap.min_frame() as u64, &encap).unwrap(),
            ..spec(50_000.0, 200)
        };
        let r = e.run_trial(&s, &AtomicBool::new(false)).unwrap();
        assert_eq!(
            (r.tx_frames, r.rx_frames, r.lost_frames),
            (10_000, 9_900, 100),
            "{encap}"
        );
        assert_eq!(r.l3_length, s.frame.l3());
        assert_eq!((r.ip_version, r.vlan), (encap.ip, encap.vlan));
    }
}
