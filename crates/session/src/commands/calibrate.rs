//! `linerate calibrate`: the tester measured against itself. Back to back
//! (a veth pair in a namespace linerate makes, or two cabled interfaces),
//! per engine and frame size, the RFC 2544 search finds the highest rate
//! the tester sends and receives with zero loss and exact counts; the
//! passing trial at that rate gives the tester's own latency. The ceilings
//! are stored, and `rfc2544` marks any throughput within 5 % of the
//! ceiling as tester-limited.

use crate::driver::EngineRunner;
use crate::error::{bail, Result};
use crate::exit::Outcome;
use crate::ports::{self, EngineChoice, PortName, ReceiverChoice};
use crate::progress;
use linerate_engine::{Engine, EngineConfig, EngineError, HostConfig};
use linerate_lab::{Wire, WIRE_IP_A, WIRE_IP_B};
use linerate_method::{find_throughput, Progress, ThroughputConfig};
use linerate_port::af_packet::AfPacketOptions;
use linerate_results::calibration::{Calibration, CalibrationEntry};
use linerate_results::{report, ThroughputResult};
use linerate_wire::FrameSize;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

/// A calibration, checked: everything `linerate calibrate` was given, as
/// values.
#[derive(Debug, Clone)]
pub struct CalibratePlan {
    /// Engines to calibrate, in order (each that cannot run is skipped).
    pub engines: Vec<EngineChoice>,
    pub receiver: ReceiverChoice,
    pub frames: Vec<FrameSize>,
    pub trial_duration: Duration,
    pub resolution: f64,
    pub straggler_wait: Duration,
    /// Two interfaces cabled to each other (A, B); None: a veth pair in a
    /// namespace linerate makes.
    pub ports: Option<(String, String)>,
    /// `--line-speed`; None: the speed the link reports, else 10G.
    pub line_speed_bps: Option<u64>,
    /// Where the ceilings are stored.
    pub calibration_path: PathBuf,
    /// What that file holds now; the new ceilings join it.
    pub stored: Calibration,
    /// Generator threads (xdp engine only).
    pub tx_threads: u16,
}

pub fn run(plan: CalibratePlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let CalibratePlan {
        engines,
        receiver,
        frames,
        trial_duration,
        resolution,
        straggler_wait,
        ports: named_ports,
        line_speed_bps,
        calibration_path: path,
        mut stored,
        tx_threads,
    } = plan;
    if !nix::unistd::geteuid().is_root() {
        bail!(Environment, "not running as root: linerate opens packet sockets and builds namespaces; run it with sudo");
    }

    // The wire lives until the end of the run; its Drop removes it (also
    // on error, and after SIGINT/SIGTERM stop the running trial).
    let wire;
    // Other runs keep off the named ports until this one ends.
    let _port_locks;
    let (a, b, setup): (PortName, PortName, String) = match &named_ports {
        Some((pa, pb)) => {
            // A wrong name is one error, not every engine skipped for it.
            for name in [pa, pb] {
                linerate_port::link::ifindex(name)?;
            }
            let (a, b) = ((pa.clone(), None), (pb.clone(), None));
            _port_locks = ports::lock_ports(&a, &b)?;
            (a, b, format!("ports {pa}->{pb}"))
        }
        None => {
            linerate_lab::check_environment()?;
            wire = Wire::up(&linerate_lab::temporary_name())?;
            let ns = Some(wire.netns().to_string());
            (("a0".into(), ns.clone()), ("b0".into(), ns), "lab".into())
        }
    };
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
    let opts = AfPacketOptions {
        max_frame_len: frames.iter().map(|f| f.buffer_len()).max().unwrap_or(0),
        ..AfPacketOptions::default()
    };
    errln!(
        "linerate: calibrating {} back to back ({setup}), trials of {}",
        engines
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(", "),
        humantime::format_duration(trial_duration)
    );

    let mut table = Vec::new();
    for name in &engines {
        let (pa, pb, engine_name) =
            match ports::open_engine(*name, &a, &b, &opts, tx_threads, receiver, false) {
                Ok((ports, _)) => ports,
                Err(e) => {
                    errln!(
                        "linerate: {} skipped: {}",
                        name.name(),
                        crate::exit::one_line(&e)
                    );
                    continue;
                }
            };
        let line_bps = line_speed_bps.unwrap_or(pa.info.speed_bps.unwrap_or(10_000_000_000));
        let cfg = EngineConfig {
            straggler_wait,
            tester_cpus: linerate_lab::tester_cpus(),
            name: engine_name.into(),
            tx_threads,
            ..EngineConfig::default()
        };
        if let Some(note) = cfg.tx_placement_note() {
            errln!("linerate: note: {note}");
        }
        let mut engine = Engine::new(
            pa,
            host(WIRE_IP_A, WIRE_IP_B),
            pb,
            host(WIRE_IP_B, WIRE_IP_A),
            cfg,
        );
        engine.resolve()?;
        for &frame in &frames {
            if let Err(e) = engine.check_frame(frame) {
                errln!(
                    "linerate: {engine_name} {}-byte frames skipped: {e}",
                    frame.frame()
                );
                continue;
            }
            let line_fps = frame.line_rate_fps(line_bps);
            let mut cfg = ThroughputConfig::new(line_fps, trial_duration);
            cfg.resolution = resolution;
            cfg.validate()?;
            let mut runner = EngineRunner {
                engine: &mut engine,
                interrupt,
                cpu: None,
                ipsec: None,
            };
            let mut show = |p: Progress| progress::show(&p, line_fps);
            let result = match find_throughput(&mut runner, frame, &cfg, line_fps, &mut show) {
                Ok(r) => r,
                Err(EngineError::Interrupted) => {
                    outp!("{}", calibration_table(&table));
                    return Ok(Outcome::Interrupted(format!(
                        "ceilings measured so far are stored in {}",
                        path.display()
                    )));
                }
                Err(e) => return Err(e.into()),
            };
            let entry = CalibrationEntry {
                setup: setup.clone(),
                engine: engine_name.to_string(),
                receiver: engine.receiver().as_str().to_string(),
                frame_size: frame.frame(),
                ceiling_fps: result.throughput_fps,
                latency_ns: best_pass(&result).and_then(|t| t.latency_ns),
                measured_at: SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs()),
                linerate_version: env!("CARGO_PKG_VERSION").to_string(),
            };
            stored.record(entry.clone());
            stored.save(&path)?;
            table.push((entry, result.throughput_mbps_l2));
        }
    }
    if table.is_empty() {
        bail!(Environment, "no engine could be calibrated here (see the reasons above): check root, the kernel's BPF/XDP support, and the interface names");
    }
    outp!("{}", calibration_table(&table));
    errln!("linerate: ceilings stored in {}", path.display());
    Ok(Outcome::Passed)
}

/// The passing trial at the highest rate: the tester's latency at its ceiling.
fn best_pass(r: &ThroughputResult) -> Option<&linerate_results::TrialResult> {
    r.trials
        .iter()
        .filter(|t| t.loss_ratio == 0.0 && t.intended_fps <= r.throughput_fps)
        .max_by(|x, y| x.intended_fps.total_cmp(&y.intended_fps))
}

fn calibration_table(rows: &[(CalibrationEntry, f64)]) -> String {
    let mut out = String::from(
        "Tester ceiling, back to back (zero loss, exact counts)\n\
         engine      receiver  frame B        frames/s    Mbps (L2)   latency µs min / avg / p99\n",
    );
    for (e, mbps) in rows {
        let lat = e.latency_ns.as_ref().map_or("-".to_string(), |l| {
            format!(
                "{:.1} / {:.1} / {:.1}",
                l.min as f64 / 1e3,
                l.avg as f64 / 1e3,
                l.p99 as f64 / 1e3
            )
        });
        out.push_str(&format!(
            "{:<11} {:<9} {:>7} {:>15} {:>12}   {}\n",
            e.engine,
            e.receiver,
            e.frame_size,
            report::thousands(e.ceiling_fps.round() as u64),
            report::thousands(mbps.round() as u64),
            lat
        ));
    }
    out
}
