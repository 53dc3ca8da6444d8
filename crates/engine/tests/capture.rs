//! `--pcap` belongs to the run: two engines in one process, whose ports B
//! have the same MAC, run trials at the same time from two threads, each
//! with its own capture; each file holds its own engine's frames only.

use linerate_engine::capture::{Capture, AROUND, MAX_GAPS};
use linerate_engine::{Engine, EngineConfig, HostConfig, TesterPort};
use linerate_port::loopback::{pair, Impairment};
use linerate_results::TrialSpec;
use linerate_wire::template::DEFAULT_UDP_PORT;
use linerate_wire::{FrameSize, Received};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Back-to-back loopback ports (every pair's port B has the same MAC).
fn engine(imp: Impairment) -> Engine {
    let (a, b) = pair(imp);
    let host = |ip: Ipv4Addr, gateway: Ipv4Addr| HostConfig {
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
    let cfg = EngineConfig {
        straggler_wait: Duration::from_millis(300),
        name: "loopback".into(),
        // A held-up generator catches up instead of losing its last frames
        // (these tests count, they do not time: see loopback.rs).
        catch_up_frames: 1_000_000_000,
        ..EngineConfig::default()
    };
    Engine::new(
        TesterPort::from_port(a),
        host(ip_a, ip_b),
        TesterPort::from_port(b),
        host(ip_b, ip_a),
        cfg,
    )
}

/// Removed when the test ends, also when it fails.
struct TempPcap(PathBuf);

impl Drop for TempPcap {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The records of a pcap file: (original length, bytes kept).
fn records(path: &Path) -> Vec<(usize, Vec<u8>)> {
    let bytes = std::fs::read(path).expect("pcap written");
    let word = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    assert_eq!(word(0), 0xa1b2_3c4d, "pcap magic (ns)");
    let mut out = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        let (kept, orig) = (word(at + 8), word(at + 12));
        out.push((orig, bytes[at + 16..at + 16 + kept].to_vec()));
        at += 16 + kept;
    }
    out
}

#[test]
fn two_runs_at_once_capture_only_their_own_frames() {
    const LIMIT: usize = 20;
    const TRIALS: usize = 2;
    // Run 1 (128-byte frames) loses every 500th frame: its file holds the
    // frames around those losses too. Run 2 (256 bytes) loses none.
    let runs = [
        (
            128u16,
            Impairment {
                drop_every: Some(500),
                ..Impairment::default()
            },
        ),
        (256u16, Impairment::default()),
    ];
    let mut engines: Vec<Engine> = runs.iter().map(|(_, imp)| engine(*imp)).collect();
    assert_eq!(
        engines[0].port_b().mac,
        engines[1].port_b().mac,
        "the same MAC on both ports B: nothing may tell the captures apart by it"
    );
    let files: Vec<TempPcap> = runs
        .iter()
        .map(|(size, _)| {
            TempPcap(std::env::temp_dir().join(format!(
                "lr-engine-capture-{}-{size}.pcap",
                std::process::id()
            )))
        })
        .collect();
    let installed: Vec<_> = engines
        .iter()
        .zip(&files)
        .map(|(e, f)| {
            e.capture_slot()
                .install(Capture::create(&f.0, LIMIT).unwrap())
                .expect("each engine takes its own capture")
        })
        .collect();

    let results = std::thread::scope(|scope| {
        let threads: Vec<_> = engines
            .iter_mut()
            .zip(runs)
            .map(|(e, (size, _))| {
                scope.spawn(move || {
                    let spec = TrialSpec {
                        frame: FrameSize::from_frame(size as u64).unwrap(),
                        mix: None,
                        intended_fps: 20_000.0,
                        duration: Duration::from_millis(250),
                    };
                    (0..TRIALS)
                        .map(|_| e.run_trial(&spec, &AtomicBool::new(false)).unwrap())
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("a run panicked"))
            .collect::<Vec<_>>()
    });

    for (((size, _), trials), (installed, file)) in runs
        .iter()
        .zip(&results)
        .zip(installed.into_iter().zip(&files))
    {
        let lost: u64 = trials.iter().map(|r| r.lost_frames).sum();
        // 5,000 frames intended; a generator that two runs at once (and a
        // loaded machine) hold back may send fewer within the trial's
        // allowance (pacer::sending_limit): what was not sent is counted,
        // and the capture's checks below hold either way.
        assert_eq!(trials[0].intended_frames, 5_000, "{size}");
        assert!(trials[0].tx_frames <= 5_000, "{size}");
        let written = installed.frames_written() as usize;
        drop(installed);
        let recs = records(&file.0);
        assert_eq!(recs.len(), written, "{size}");
        // The first LIMIT of each trial, and around each loss (up to
        // MAX_GAPS per trial) the AROUND before it, the one after the
        // gap and AROUND - 1 more: never fewer, and only with losses more.
        let around = (lost as usize).min(TRIALS * MAX_GAPS) * 2 * AROUND;
        assert!(
            (TRIALS * LIMIT..=TRIALS * LIMIT + around).contains(&written),
            "{size}: {written} frames written, {lost} lost"
        );
        // Frames the generator did not send leave no gap in what arrived
        // (they are the trial's last): only frames lost on the way do, and
        // only they are captured around.
        let lost_on_the_way: u64 = trials
            .iter()
            .map(|r| r.tx_frames.saturating_sub(r.rx_frames))
            .sum();
        if lost_on_the_way == 0 {
            assert_eq!(
                written,
                TRIALS * LIMIT,
                "{size}: nothing lost on the way, first frames only"
            );
        }
        // Every test frame in the file is this run's size (as received:
        // without the 4-byte FCS), none the other run's.
        let test_frames: Vec<usize> = recs
            .iter()
            .filter(|(_, f)| {
                matches!(
                    linerate_wire::classify(f, DEFAULT_UDP_PORT),
                    Received::Test { .. }
                )
            })
            .map(|(orig, _)| *orig)
            .collect();
        assert!(
            test_frames.len() >= TRIALS * LIMIT / 2,
            "{size}: {test_frames:?}"
        );
        assert!(
            test_frames.iter().all(|len| *len == *size as usize - 4),
            "{size}: frames of another run's size in its file: {test_frames:?}"
        );
    }
}
