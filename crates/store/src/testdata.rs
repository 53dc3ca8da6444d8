//! A made-up stored run for the unit tests of the reporters: numbers are
//! invented but consistent (counts add up, latency is ordered).

use crate::model::{Dut, Machine, RunStatus, StoredRun, StoredTrial};
use linerate_results::{LatencySummary, Rfc2544Report, ThroughputResult, TrialResult};

const LINE_BPS: u64 = 1_000_000_000;

pub fn trial(size: u16, fps: f64, loss_ratio: f64) -> TrialResult {
    let intended = fps as u64;
    let lost = (intended as f64 * loss_ratio) as u64;
    TrialResult {
        policy_drops: None,
        loss_where: None,
        tunnels: Vec::new(),
        recovery: None,
        rx_threads: Vec::new(),
        frame_size: size,
        mix: None,
        flows: Vec::new(),
        directions: Vec::new(),
        dut_cpu: None,
        esp: None,
        l3_length: size - 18,
        duration_s: 1.0,
        intended_fps: fps,
        offered_fps: fps,
        intended_frames: intended,
        tx_frames: intended,
        rx_frames: intended - lost,
        lost_frames: lost,
        loss_ratio: lost as f64 / intended as f64,
        reordered: 0,
        duplicated: 0,
        sequence_errors: None,
        latency_ns: Some(LatencySummary {
            min: 8_000,
            avg: 20_000 + size as u64 * 10,
            max: 90_000,
            p50: 18_000,
            p90: 30_000,
            p99: 60_000,
            p999: 80_000,
            ..Default::default()
        }),
        generator_short: false,
        generator_max_stall_ns: None,
        generator_paused_ns: None,
        generator_pauses: None,
        sending_s: None,
        tester_rx_drops: 0,
        stray_frames: 0,
        errored_frames: 0,
        frame_check: String::new(),
        engine: "af_packet".into(),
        receiver: String::new(),
        ip_version: Default::default(),
        vlan: None,
    }
}

/// A complete two-size rfc2544 run (64 and 1518 bytes, 1 Gbit/s).
pub fn run(id: i64, dut: &str, firmware: &str) -> StoredRun {
    let mut results = Vec::new();
    let mut trials = Vec::new();
    for (n, size) in [64u16, 1518].into_iter().enumerate() {
        let line_fps = LINE_BPS as f64 / (8.0 * (size as f64 + 20.0));
        let found = line_fps * 0.4;
        let tried = [
            (line_fps, 0.3, false),
            (line_fps * 0.5, 0.1, false),
            (found, 0.0, true),
        ];
        for (i, (fps, loss, passed)) in tried.into_iter().enumerate() {
            trials.push(StoredTrial {
                search_no: n,
                trial_no: i + 1,
                passed: Some(passed),
                finished_at: "2026-11-21T12:00:00Z".into(),
                result: trial(size, fps, loss),
            });
        }
        let mbps = |bytes: f64| found * bytes * 8.0 / 1e6;
        results.push((
            n,
            ThroughputResult {
                frame_size: size,
                mix: None,
                dut_cpu: None,
                wan: None,
                mlrsearch: None,
                round: None,
                over_rounds: None,
                l3_length: size - 18,
                throughput_fps: found,
                throughput_mbps_l2: mbps(size as f64),
                throughput_mbps_l1: mbps(size as f64 + 20.0),
                throughput_mbps_l3: mbps(size as f64 - 18.0),
                throughput_mbps_l4: mbps(size as f64 - 46.0),
                line_rate_fps: line_fps,
                line_rate_mbps_l2: line_fps * size as f64 * 8.0 / 1e6,
                tester_limited: false,
                calibrated_ceiling_fps: None,
                trials: Vec::new(),
            },
        ));
    }
    StoredRun {
        id,
        started_at: "2026-11-21T12:00:00Z".into(),
        finished_at: Some("2026-11-21T12:01:00Z".into()),
        command: "rfc2544".into(),
        args: vec!["linerate".into(), "rfc2544".into(), "--lab".into()],
        status: RunStatus::Complete,
        pid: 1,
        dut: Dut {
            name: Some(dut.into()),
            firmware: Some(firmware.into()),
            scenario: "LAN-LAN routing".into(),
        },
        machine: Machine {
            hostname: "tester".into(),
            kernel: "6.1.0".into(),
            cpu_model: "Test CPU".into(),
            cpus: 2,
        },
        engine: "af_packet".into(),
        linerate_version: "0.1.0".into(),
        line_speed_bps: LINE_BPS,
        settings: Some(Rfc2544Report {
            run: linerate_results::methods::RunInfo {
                linerate_version: "0.1.0".into(),
                description: "LAN-LAN routing".into(),
                started_at: "2026-11-21T12:00:00Z".into(),
                setup: "lab".into(),
                port_a: "a".into(),
                port_b: "b".into(),
                line_speed_bps: LINE_BPS,
                engine: "af_packet".into(),
                placement: None,
                ..Default::default()
            },
            bidirectional: false,
            scenario: None,
            dut_cpu_source: None,
            trial_duration_s: 1.0,
            resolution: 0.01,
            allowed_loss_ratio: 0.0,
            results: Vec::new(),
            interrupted: None,
            repeat: 1,
            round_results: Vec::new(),
        }),
        results,
        trials,
        document: None,
    }
}

/// A stored `linerate tunnels` run of one tunnel per `(started_ms,
/// setup_ms)` (None: it failed with NO_PROPOSAL_CHOSEN); no tunnel: no
/// report stored.
pub fn tunnels_run(id: i64, tunnels: &[(f64, Option<f64>)]) -> StoredRun {
    use linerate_results::tunnels::{TunnelOutcome, TunnelsReport, TunnelsSettings};
    use std::net::Ipv4Addr;
    let mut run = run(id, "d", "f");
    run.command = "tunnels".into();
    run.settings = None;
    run.results.clear();
    run.trials.clear();
    let peer = |i: usize| Ipv4Addr::from(u32::from(Ipv4Addr::new(198, 19, 64, 1)) + i as u32);
    let settings = TunnelsSettings {
        gateway: Ipv4Addr::new(198, 19, 0, 1),
        ike: "aes256-sha256-modp2048".into(),
        esp: "aes128gcm16".into(),
        local_net: "198.18.0.0/24".into(),
        remote_net: "198.19.128.0/17".into(),
        slice_prefix: 18,
        first_peer: peer(0),
        last_peer: peer(tunnels.len().saturating_sub(1)),
        attempt_rate: None,
        window: 64,
        hold_s: 0.0,
    };
    let outcomes = tunnels
        .iter()
        .enumerate()
        .map(|(i, &(started_ms, setup_ms))| TunnelOutcome {
            peer: peer(i),
            remote_net: "198.19.128.0/18".into(),
            started_ms,
            setup_ms,
            error: setup_ms
                .is_none()
                .then(|| "the gateway answered NO_PROPOSAL_CHOSEN".to_string()),
            reason: setup_ms.is_none().then(|| "NO_PROPOSAL_CHOSEN".to_string()),
        })
        .collect();
    if !tunnels.is_empty() {
        let report = TunnelsReport::new(settings, outcomes);
        run.document = Some(serde_json::to_value(&report).expect("a report serializes"));
    }
    run
}
