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
use linerate_wire::units::Layer;
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

pub fn run(mut plan: CalibratePlan, interrupt: &AtomicBool) -> Result<Outcome> {
    if !nix::unistd::geteuid().is_root() {
        bail!(Environment, "not running as root: linerate opens packet sockets and builds namespaces; run it with sudo");
    }
    // The wire lives until the end of the run; its Drop removes it (also
    // on error, and after SIGINT/SIGTERM stop the running trial).
    let bed = back_to_back(plan.ports.as_ref())?;
    let opts = AfPacketOptions {
        max_frame_len: plan
            .frames
            .iter()
            .map(|f| f.buffer_len())
            .max()
            .unwrap_or(0),
        ..AfPacketOptions::default()
    };
    errln!(
        "linerate: calibrating {} back to back ({}), trials of {}",
        plan.engines
            .iter()
            .map(|e| e.name())
            .collect::<Vec<_>>()
            .join(", "),
        bed.setup,
        humantime::format_duration(plan.trial_duration)
    );

    let mut table = Vec::new();
    for &choice in &plan.engines {
        let Some((mut engine, line_bps)) = open_calibrated(&plan, choice, &bed, &opts)? else {
            continue;
        };
        for &frame in &plan.frames {
            if let Err(e) = engine.check_frame(frame) {
                errln!(
                    "linerate: {} {}-byte frames skipped: {e}",
                    engine.config().name,
                    frame.frame()
                );
                continue;
            }
            let Some(result) = measure_ceiling(&plan, &mut engine, frame, line_bps, interrupt)?
            else {
                outp!("{}", calibration_table(&table));
                return Ok(Outcome::Interrupted(format!(
                    "ceilings measured so far are stored in {}",
                    plan.calibration_path.display()
                )));
            };
            let entry = calibration_entry(&bed.setup, &engine, frame, &result, SystemTime::now());
            plan.stored.record(entry.clone());
            plan.stored.save(&plan.calibration_path)?;
            table.push((entry, result.throughput_mbps_l2));
        }
    }
    if table.is_empty() {
        bail!(Environment, "no engine could be calibrated here (see the reasons above): check root, the kernel's BPF/XDP support, and the interface names");
    }
    outp!("{}", calibration_table(&table));
    errln!(
        "linerate: ceilings stored in {}",
        plan.calibration_path.display()
    );
    Ok(Outcome::Passed)
}

/// The two ports calibrated against each other and what holds them for
/// the run: the named ports (locked, so other runs keep off them until
/// this one ends) or a veth pair in a namespace made now (its Drop
/// removes it, also on error and after a signal stopped the trial).
struct BackToBack {
    a: PortName,
    b: PortName,
    /// The key the ceilings are stored under: "lab" or "ports A->B".
    setup: String,
    _wire: Option<Wire>,
    _port_locks: Vec<linerate_lab::LabLock>,
}

/// Finds or makes the back-to-back ports: the named pair, checked by
/// name first (a wrong name is one error, not every engine skipped for
/// it), else a veth pair in a temporary namespace.
fn back_to_back(named_ports: Option<&(String, String)>) -> Result<BackToBack> {
    match named_ports {
        Some((pa, pb)) => {
            for name in [pa, pb] {
                linerate_port::link::ifindex(name)?;
            }
            let (a, b) = ((pa.clone(), None), (pb.clone(), None));
            let port_locks = ports::lock_ports(&a, &b)?;
            Ok(BackToBack {
                a,
                b,
                setup: format!("ports {pa}->{pb}"),
                _wire: None,
                _port_locks: port_locks,
            })
        }
        None => {
            linerate_lab::check_environment()?;
            let wire = Wire::up(&linerate_lab::temporary_name())?;
            let ns = Some(wire.netns().to_string());
            Ok(BackToBack {
                a: ("a0".into(), ns.clone()),
                b: ("b0".into(), ns),
                setup: "lab".into(),
                _wire: Some(wire),
                _port_locks: Vec::new(),
            })
        }
    }
}

/// A back-to-back port's addresses: the wire's /24, the other port as
/// the gateway.
fn wire_host(ip: std::net::Ipv4Addr, gateway: std::net::Ipv4Addr) -> HostConfig {
    HostConfig {
        ip,
        prefix_len: 24,
        gateway,
        gateway_mac: None,
        also_answers: None,
        inner: None,
        ipv6: None,
        vlan: None,
    }
}

/// One engine on the back-to-back ports, resolved and ready, with the
/// line speed its frames are offered against. None: this engine cannot
/// run here (said on stderr), and the calibration goes on without it.
fn open_calibrated(
    plan: &CalibratePlan,
    choice: EngineChoice,
    bed: &BackToBack,
    opts: &AfPacketOptions,
) -> Result<Option<(Engine, u64)>> {
    let opened = ports::open_engine(
        choice,
        &bed.a,
        &bed.b,
        opts,
        ports::Threads::on_a(plan.tx_threads),
        plan.receiver,
        false,
    );
    let (pa, pb, engine_name) = match opened {
        Ok((ports, _)) => ports,
        Err(e) => {
            errln!(
                "linerate: {} skipped: {}",
                choice.name(),
                crate::exit::one_line(&e)
            );
            return Ok(None);
        }
    };
    let line_bps = plan
        .line_speed_bps
        .unwrap_or(pa.info.speed_bps.unwrap_or(10_000_000_000));
    let cfg = EngineConfig {
        straggler_wait: plan.straggler_wait,
        tester_cpus: linerate_lab::tester_cpus(),
        name: engine_name.into(),
        tx_threads: plan.tx_threads,
        ..EngineConfig::default()
    };
    if let Some(note) = cfg.tx_placement_note() {
        errln!("linerate: note: {note}");
    }
    let mut engine = Engine::new(
        pa,
        wire_host(WIRE_IP_A, WIRE_IP_B),
        pb,
        wire_host(WIRE_IP_B, WIRE_IP_A),
        cfg,
    );
    engine.resolve()?;
    Ok(Some((engine, line_bps)))
}

/// The RFC 2544 search up to line rate for one frame size: the tester's
/// ceiling. None: a signal stopped it (the caller keeps what it has).
fn measure_ceiling(
    plan: &CalibratePlan,
    engine: &mut Engine,
    frame: FrameSize,
    line_bps: u64,
    interrupt: &AtomicBool,
) -> Result<Option<ThroughputResult>> {
    let line_fps = frame.line_rate_fps(line_bps);
    let mut cfg = ThroughputConfig::new(line_fps, plan.trial_duration);
    cfg.resolution = plan.resolution;
    cfg.validate()?;
    let mut runner = EngineRunner {
        engine,
        interrupt,
        cpu: None,
        ipsec: None,
    };
    let mut show = |p: Progress| progress::show(&p, line_fps);
    match find_throughput(&mut runner, frame, &cfg, line_fps, &mut show) {
        Ok(r) => Ok(Some(r)),
        Err(EngineError::Interrupted) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The stored ceiling of one engine, receiver and frame size, with the
/// tester's latency at it; `now` is when it was measured.
fn calibration_entry(
    setup: &str,
    engine: &Engine,
    frame: FrameSize,
    result: &ThroughputResult,
    now: SystemTime,
) -> CalibrationEntry {
    CalibrationEntry {
        setup: setup.to_string(),
        engine: engine.config().name.clone(),
        receiver: engine.receiver().as_str().to_string(),
        frame_size: frame.frame(),
        ceiling_fps: result.throughput_fps,
        latency_ns: result.throughput_trial().and_then(|t| t.latency_ns),
        measured_at: now
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs()),
        linerate_version: env!("CARGO_PKG_VERSION").to_string(),
    }
}

fn calibration_table(rows: &[(CalibrationEntry, f64)]) -> String {
    let mut out = format!(
        "Tester ceiling, back to back (zero loss, exact counts)\n\
         engine      receiver  frame B        frames/s    {}   latency µs min / avg / p99\n",
        report::table::mbps(Layer::L2)
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
