//! Opens the test bed a [`BedPlan`] describes: the lab's ports (building a
//! lab for this run when none is up) or the interfaces the user named, with
//! the engine ready on them.

use crate::error::{bail, Result};
use crate::ipsec::Direction;
use crate::plan::BedPlan;
use linerate_engine::{Engine, LatencySampling};
use linerate_lab::layout::RoutedLayout;
use linerate_lab::Lab;
use linerate_results::Placement;
use std::net::Ipv4Addr;
use std::sync::atomic::AtomicBool;

/// Everything a test runs on. Fields drop in order: the engine's sockets
/// close before a lab made for this run is removed.
pub struct TestBed {
    pub engine: Engine,
    /// `--ipsec`: the tunnel to the gateway; its IKE SA is deleted when the
    /// bed drops (after the engine has let go of the ports, before the lab).
    pub ipsec: Option<crate::ipsec::IpsecPeer>,
    pub line_bps: u64,
    /// Where the line speed came from, for the report.
    pub line_speed_source: String,
    /// Why `--engine auto` took the engine it took, and how an af_xdp
    /// socket is bound (printed by commands that print set-up notes).
    pub engine_reason: Option<String>,
    pub placement: Option<Placement>,
    /// "lab" or "external".
    pub setup: &'static str,
    /// The key calibrations are stored under: "lab", or "ports A->B".
    pub setup_key: String,
    /// Both ports send (--bidirectional): rates are totals over both.
    pub bidirectional: bool,
    /// Held, not read: the lab router's IPv6 addresses and VLAN
    /// subinterfaces for this run, removed when it drops (before the lab).
    #[allow(dead_code)]
    pub routed: Option<RoutedLayout>,
    /// Held, not read: a lab built for this run lives as long as the test
    /// bed and is removed when it drops (also on error, signal or panic).
    #[allow(dead_code)]
    pub lab: Option<Lab>,
    /// Held, not read: the locks of external ports (a lab has its own).
    #[allow(dead_code)]
    pub port_locks: Vec<linerate_lab::LabLock>,
    /// Held, not read: external ports' threaded-NAPI receive threads,
    /// raised above the generator until the bed drops.
    #[allow(dead_code)]
    pub raised_receive: Vec<linerate_lab::RaisedReceive>,
}

impl TestBed {
    /// What this bed tests, in the words a report's title uses (a
    /// scenario's own description replaces it where one is configured).
    pub fn description(&self) -> String {
        if let Some(peer) = &self.ipsec {
            // The techpaper's title: "IPSec routing AES-CBC UDP decryption".
            let r = &peer.record;
            return format!(
                "IPsec routing {} UDP {}, linerate as the VPN peer of {}",
                r.esp_label,
                r.direction.noun(),
                r.gateway
            );
        }
        if self.setup == "lab" {
            "LAN-LAN routing, lab Linux router in a network namespace".to_string()
        } else {
            format!(
                "{} -> {} (external DUT)",
                self.engine.port_a().ifname,
                self.engine.port_b().ifname
            )
        }
    }

    /// The most frames/s these frames can be offered: the line rate, of
    /// both links when both directions send.
    pub fn line_rate_fps(&self, frames: &linerate_wire::Frames) -> f64 {
        frames.line_rate_fps(self.line_bps) * if self.bidirectional { 2.0 } else { 1.0 }
    }

    /// A rate as frames/s over all sending ports: a share of line rate
    /// counts every sending link; fps and bps are totals as written.
    pub fn fps(&self, frames: &linerate_wire::Frames, rate: linerate_wire::Rate) -> f64 {
        let fps = frames.fps(rate, self.line_bps);
        match rate {
            linerate_wire::Rate::PercentOfLine(_) if self.bidirectional => 2.0 * fps,
            _ => fps,
        }
    }
}

/// The lab `linerate lab up` makes when given no name, used by `--lab`.
pub const DEFAULT_LAB: &str = "default";

/// Default line speed when neither the user nor the link says one.
const DEFAULT_LINE_BPS: u64 = 10_000_000_000;

/// Opens the test bed of `plan`: a lab built for the run stops at its
/// next step once `stop` is set (see [`until`]).
pub fn open(plan: &BedPlan, max_frame_len: usize, stop: &AtomicBool) -> Result<TestBed> {
    open_with(plan, max_frame_len, None, stop)
}

/// Like [`open`], on `lab` when one is given (a lab a scenario configured):
/// the test bed then owns it and removes it when dropped.
pub fn open_with(
    plan: &BedPlan,
    max_frame_len: usize,
    given: Option<Lab>,
    stop: &AtomicBool,
) -> Result<TestBed> {
    let mut opts = bed::rx_options(plan, max_frame_len);
    if !nix::unistd::geteuid().is_root() {
        bail!(Environment, "not running as root: linerate opens packet sockets (and builds namespaces for --lab); run it with sudo");
    }
    let bed::Attached {
        a,
        host_a,
        b,
        mut host_b,
        placement,
        held,
    } = bed::attach(plan, given, stop)?;
    let (a_name, b_name) = (a.0.clone(), b.0.clone());
    // IPsec is negotiated before the engine opens the ports: a socket
    // engine's XDP program on port B would take the gateway's answers.
    let mut ipsec = match &plan.ipsec {
        Some(p) => Some(crate::ipsec::IpsecPeer::establish(
            p,
            b.1.as_deref(),
            &b.0,
            &host_b,
            &host_a,
            stop,
        )?),
        None => None,
    };
    // ESP frames are counted after they are decrypted in user space (the
    // plan refused --receiver kernel and --engine xdp with --ipsec).
    let receiver = match &ipsec {
        None if plan.rx_threads > 1 => ReceiverChoice::Socket,
        None => plan.receiver,
        Some(_) => ReceiverChoice::Socket,
    };
    if let Some(peer) = &ipsec {
        host_b.inner = Some(peer.inner);
        errln!("linerate: {}", peer.note());
    }
    // A deep lab's tester ports receive through their CPU's backlog: the
    // receivers' XDP programs attach behind it.
    let deep = placement
        .as_ref()
        .is_some_and(|p| p.ring.is_some_and(|r| r > linerate_lab::VETH_RING));
    opts.generic_xdp = deep;
    let direction = ipsec.as_ref().map(|p| p.record.direction);
    // Port B sends too when it encrypts (decrypt, both), each generator
    // thread encrypting its own tunnels, and in a bidirectional trial:
    // with a queue per generator thread.
    let b_sends =
        plan.bidirectional || matches!(direction, Some(Direction::Decrypt | Direction::Both));
    let ((mut a, mut b, engine_name), engine_reason) = open_engine(
        plan.engine,
        &a,
        &b,
        &opts,
        Threads {
            // Decryption: port B alone sends (port A only receives).
            a: if direction == Some(Direction::Decrypt) {
                1
            } else {
                plan.tx_threads
            },
            b: if b_sends { plan.tx_threads } else { 1 },
            // Port A receives test frames only when port B sends them
            // too (both ways, or through the gateway that decrypts them);
            // port B then only when port A sends them.
            rx_a: if plan.bidirectional || direction == Some(Direction::Decrypt) {
                plan.rx_threads
            } else {
                1
            },
            rx_b: if direction == Some(Direction::Decrypt) {
                1
            } else {
                plan.rx_threads
            },
            esp_from: ipsec
                .as_ref()
                .map_or(Ipv4Addr::UNSPECIFIED, |p| p.record.peer),
        },
        receiver,
        ipsec.is_some(),
    )?;
    bed::install_transforms(ipsec.as_mut(), &mut a, &mut b, engine_name)?;
    if let Some(p) = placement.as_ref().filter(|p| !p.shared_core && !deep) {
        bed::move_tester_receive(p, [&a, &b]);
    }
    let raised_receive = if held.lab.is_none() {
        bed::raise_receive([&a, &b])
    } else {
        Vec::new()
    };
    let (line_bps, line_speed_source) = bed::line_speed(plan.line_speed_bps, &a.info);
    let flows = bed::tunnel_flows(plan, ipsec.as_ref(), &mut host_b)?;
    let cfg = bed::engine_config(plan, flows, placement.as_ref(), engine_name, direction);
    if plan.latency_every != LatencySampling::Auto && !b.rx.kind().samples_latency() {
        errln!(
            "linerate: note: --latency-every {} applies to the in-kernel counter; port B counts through its socket and measures every frame's latency",
            plan.latency_every
        );
    }
    if let Some(note) = cfg.tx_placement_note() {
        errln!("linerate: note: {note}");
    }
    // Decryption: linerate's port B encrypts, the frames go B -> A.
    let engine = if direction == Some(Direction::Decrypt) {
        Engine::new(b, host_b, a, host_a, cfg)
    } else {
        Engine::new(a, host_a, b, host_b, cfg)
    };
    let setup_key = match &held.lab {
        Some(_) => "lab".to_string(),
        None => format!("ports {}->{}", a_name, b_name),
    };
    Ok(TestBed {
        engine,
        ipsec,
        line_bps,
        line_speed_source,
        engine_reason,
        placement,
        bidirectional: plan.bidirectional,
        routed: held.routed,
        setup: if held.lab.is_some() {
            "lab"
        } else {
            "external"
        },
        setup_key,
        lab: held.lab,
        port_locks: held.port_locks,
        raised_receive,
    })
}

/// The lab a run uses: the one named (it must exist: a typo must not test
/// another lab), else the default lab if it is up, else one built for this
/// run, which the caller removes by dropping it (a build stops at its next
/// step once `stop` is set).
pub fn lab_for_run(name: Option<&str>, ring: Option<u32>, stop: &AtomicBool) -> Result<Lab> {
    linerate_lab::check_environment()?;
    Ok(if let Some(name) = name {
        Lab::attach(name)?
    } else if Lab::exists(DEFAULT_LAB) {
        if ring.is_some() {
            bail!(BadInput, "--lab-ring applies to a lab this run builds, and lab '{DEFAULT_LAB}' is up with its own rings: remove it ('linerate lab down --lab-name {DEFAULT_LAB}') or build it with 'linerate lab up --ring N'");
        }
        Lab::attach(DEFAULT_LAB)?
    } else {
        let name = linerate_lab::temporary_name();
        errln!("linerate: building lab '{name}' for this run (namespaces lr-{name}-*)");
        let ring = ring.unwrap_or(linerate_lab::DEFAULT_RING);
        Lab::up_until(&name, ring, &until(stop))?
    })
}

/// Locks both tester ports for this run: a second run on either refuses in
/// one line naming the first, instead of both counting each other's frames.
pub fn lock_ports(a: &PortName, b: &PortName) -> Result<Vec<linerate_lab::LabLock>> {
    let mut locks = Vec::new();
    for (name, netns) in [a, b] {
        locks.push(linerate_lab::lock_port(netns.as_deref(), name)?);
    }
    Ok(locks)
}

mod bed;
mod engines;
mod stop;
pub use engines::{open_engine, EngineChoice, PortName, Ports, ReceiverChoice, Threads};
pub use stop::{set_up_stop_is_interruption, until};
