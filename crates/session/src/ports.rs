//! Opens the test bed a [`BedPlan`] describes: the lab's ports (building a
//! lab for this run when none is up) or the interfaces the user named, with
//! the engine ready on them.

use crate::error::{bail, err, Result, ResultExt};
use crate::ipsec::Direction;
use crate::plan::BedPlan;
use linerate_bpf::generator::MAX_FRAME_LEN as XDP_MAX_FRAME_LEN;
use linerate_engine::backend::{NotDelivered, QueueRx, QueueTx};
use linerate_engine::host::Ipv6Host;
use linerate_engine::xdp::{XdpReceiver, XdpTransmitter};
use linerate_engine::{Engine, HostConfig, LatencySampling, TesterPort};
use linerate_lab::layout::RoutedLayout;
use linerate_lab::Lab;
use linerate_port::af_packet::{AfPacketOptions, AfPacketPort};
use linerate_port::af_xdp::{AfXdpOptions, AfXdpPort};
use linerate_port::Port;
use linerate_results::Placement;
use linerate_wire::{Encap, IpVersion, MacAddr};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::AtomicBool;
use std::time::Duration;

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

/// An interface and the namespace it lives in (None: linerate's own).
pub type PortName = (String, Option<String>);
/// Ports A and B as an engine drives them, and the engine's name.
pub type Ports = (TesterPort, TesterPort, &'static str);

/// `--engine`: which packet I/O engine sends and receives the test frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EngineChoice {
    /// The fastest that works on the ports, said with why.
    Auto,
    /// Frames made and counted in the kernel (XDP).
    Xdp,
    /// AF_XDP sockets.
    AfXdp,
    /// Packet sockets.
    AfPacket,
}

impl EngineChoice {
    /// The engine's name as reports and options write it.
    pub fn name(self) -> &'static str {
        match self {
            EngineChoice::Auto => "auto",
            EngineChoice::Xdp => "xdp",
            EngineChoice::AfXdp => "af_xdp",
            EngineChoice::AfPacket => "af_packet",
        }
    }
}

/// `--receiver`: how port B counts the test frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReceiverChoice {
    /// The in-kernel counter where it attaches, else the engine's socket.
    Auto,
    /// linerate's XDP counter at port B's XDP hook.
    Kernel,
    /// The engine's own socket: every frame up to linerate's receiver.
    Socket,
}

impl ReceiverChoice {
    /// `--pcap` needs the frames in user space: `auto` then means socket.
    pub fn for_capture(self, capture: bool) -> ReceiverChoice {
        match self {
            ReceiverChoice::Auto if capture => ReceiverChoice::Socket,
            other => other,
        }
    }
}

/// Opens both tester ports with the engine asked for; `auto` takes the
/// fastest that works on them and says which it took, and why not faster.
/// Port B counts as `receiver` says. Returns the ports, the engine's name
/// and notes on the choices (why `auto` took the engine, how an af_xdp
/// socket is bound, why the counter did not attach).
/// `threads`: generator threads on each port (above 1 on port A, `auto`
/// means xdp, unless port B is an IPsec peer). `ike_on_b`:
/// port B is an IPsec peer, whose IKE the kernel must still receive
/// while the engine takes the ESP.
pub fn open_engine(
    choice: EngineChoice,
    a: &PortName,
    b: &PortName,
    opts: &AfPacketOptions,
    threads: Threads,
    receiver: ReceiverChoice,
    ike_on_b: bool,
) -> Result<(Ports, Option<String>)> {
    let tx_threads = threads.a;
    let socket = receiver == ReceiverChoice::Socket;
    let threads_mean_xdp = tx_threads > 1 && choice == EngineChoice::Auto && !ike_on_b;
    if socket && (choice == EngineChoice::Xdp || threads_mean_xdp) {
        bail!(BadInput, "the xdp engine counts test frames in the kernel and hands none up: for --receiver socket (or --pcap) use --engine af_xdp or af_packet");
    }
    if threads_mean_xdp {
        return match open_xdp(a, b, opts, receiver) {
            Ok((ports, note)) => {
                let why = Some("--tx-threads above 1 needs xdp".to_string());
                Ok((ports, join_notes(why, note)))
            }
            Err(e) => {
                Err(e
                    .context("--tx-threads above 1 needs the xdp engine, which does not work here"))
            }
        };
    }
    let auto = choice == EngineChoice::Auto;
    let (port_a, name, why) = match choice {
        EngineChoice::AfPacket => (
            open_af_packet_threads(a, opts, tx_threads, threads.rx_a, Ipv4Addr::UNSPECIFIED)?,
            "af_packet",
            None,
        ),
        EngineChoice::Xdp => return open_xdp(a, b, opts, receiver),
        EngineChoice::AfXdp => {
            let (port, note) = open_af_xdp(a, opts, false, tx_threads)?;
            (port, "af_xdp", Some(note))
        }
        EngineChoice::Auto => {
            let mut passed_over = Vec::new();
            if socket {
                passed_over.push(
                    "xdp counts in the kernel, and the frames are wanted in user space".into(),
                );
            } else if opts.max_frame_len > XDP_MAX_FRAME_LEN {
                passed_over.push(format!(
                    "xdp sends frames up to {} bytes",
                    XDP_MAX_FRAME_LEN + 4
                ));
            } else {
                match open_xdp(a, b, opts, receiver) {
                    Ok((ports, note)) => {
                        let why = "the fastest engine that delivers here: the kernel took its probe frames";
                        return Ok((ports, join_notes(Some(why.into()), note)));
                    }
                    Err(e) => passed_over.push(format!("xdp: {}", crate::exit::one_line(&e))),
                }
            }
            let (port, name, why) = auto_socket(a, opts, passed_over)?;
            (port, name, Some(why))
        }
    };
    let (ports, note) = with_receiver(port_a, name, b, opts, receiver, auto, ike_on_b, threads)?;
    Ok((ports, join_notes(why, note)))
}

/// Generator threads on each port: port A's test frames, and port B's
/// when it sends (the reverse direction, or an IPsec peer's ESP); and
/// receiving threads on each (`--rx-threads`, af_packet: a fanout group
/// of packet sockets, one per thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Threads {
    pub a: u16,
    pub b: u16,
    pub rx_a: u16,
    pub rx_b: u16,
    /// Port B's receiving threads take the ESP of linerate's emulated
    /// IPsec peers by its destination: the peer at this address and up,
    /// tunnel i to thread i mod `rx_b` (UNSPECIFIED: no peers).
    pub esp_from: Ipv4Addr,
}

impl Threads {
    /// `n` generator threads on port A; one thread for everything else.
    pub fn on_a(n: u16) -> Threads {
        Threads {
            a: n,
            b: 1,
            rx_a: 1,
            rx_b: 1,
            esp_from: Ipv4Addr::UNSPECIFIED,
        }
    }
}

/// "first; second", either, or none.
fn join_notes(first: Option<String>, second: Option<String>) -> Option<String> {
    match (first, second) {
        (Some(a), Some(b)) => Some(format!("{a}; {b}")),
        (a, b) => a.or(b),
    }
}

/// Opens port B for engine `engine` (port A is open): counted by the
/// in-kernel counter, or by the engine's own socket. With `auto` (the
/// engine was `auto`'s choice), a port B that takes no AF_XDP socket
/// (another XDP program on it) receives through a packet socket instead,
/// and the note says why. `threads.b`: port B's generator threads (an
/// IPsec peer's encrypting ones); `threads.rx_b` its receiving ones.
#[allow(clippy::too_many_arguments)]
fn with_receiver(
    port_a: TesterPort,
    engine: &'static str,
    b: &PortName,
    opts: &AfPacketOptions,
    receiver: ReceiverChoice,
    auto: bool,
    ike_on_b: bool,
    threads: Threads,
) -> Result<(Ports, Option<String>)> {
    let (tx_threads, rx_threads) = (threads.b, threads.rx_b);
    let mut note = None;
    if receiver != ReceiverChoice::Socket {
        // A port that does not open (a wrong name) is that error, whatever
        // counts on it.
        match kernel_counted(b, opts)? {
            Ok(port_b) => return Ok(((port_a, port_b, engine), None)),
            Err(e) if receiver == ReceiverChoice::Auto && engine != "xdp" => {
                note = Some(format!(
                    "the in-kernel counter does not attach to {} ({}): counting through the {engine} socket",
                    b.0,
                    crate::exit::one_line(&e)
                ));
            }
            Err(e) => return Err(counter_refused(b, engine, e)),
        }
    }
    // (The xdp engine never gets here: see open_engine.)
    let port_b = match engine {
        "af_xdp" => match open_af_xdp(b, opts, ike_on_b, tx_threads) {
            Ok((port, mode)) => {
                note = join_notes(Some(mode), note);
                port
            }
            Err(e) if auto => {
                let port =
                    open_af_packet_threads(b, opts, tx_threads, rx_threads, threads.esp_from)?;
                note = join_notes(
                    note,
                    Some(format!(
                        "port B ({}) takes no AF_XDP socket ({}): it receives through a packet socket",
                        b.0,
                        crate::exit::one_line(&e)
                    )),
                );
                port
            }
            Err(e) => return Err(e),
        },
        _ => open_af_packet_threads(b, opts, tx_threads, rx_threads, threads.esp_from)?,
    };
    Ok(((port_a, port_b, engine), note))
}

/// `--engine auto` after xdp: af_xdp, else af_packet, on port A. An engine
/// that fails to open gives way to the next; if the last fails too, its
/// error (a wrong interface name, say) is the one the user sees.
/// `passed_over` says why the faster engines were not taken.
fn auto_socket(
    a: &PortName,
    opts: &AfPacketOptions,
    mut passed_over: Vec<String>,
) -> Result<(TesterPort, &'static str, String)> {
    match open_af_xdp(a, opts, false, 1) {
        Ok((port, note)) => {
            passed_over.push(note);
            return Ok((port, "af_xdp", passed_over.join("; ")));
        }
        Err(e) => passed_over.push(format!("af_xdp: {}", crate::exit::one_line(&e))),
    }
    Ok((
        open_af_packet(a, opts)?,
        "af_packet",
        passed_over.join("; "),
    ))
}

/// AF_XDP sockets on a port, one per receive queue (copy mode on veth,
/// zero-copy where the driver offers it), `tx_threads` of them sending (a
/// generator thread each), and a note on how they are bound.
/// `pass_ike`: IKE goes on to the kernel (an IPsec peer's port B).
fn open_af_xdp(
    p: &PortName,
    opts: &AfPacketOptions,
    pass_ike: bool,
    tx_threads: u16,
) -> Result<(TesterPort, String)> {
    let xdp_opts = AfXdpOptions {
        max_frame_len: opts.max_frame_len,
        generic_xdp: opts.generic_xdp,
        pass_ike,
        tx_queues: tx_threads.max(1) as u32,
        ..AfXdpOptions::default()
    };
    let port = AfXdpPort::open(&p.0, p.1.as_deref(), &xdp_opts)?;
    let queues = match port.rx_queues() {
        1 => String::new(),
        n => format!(", {n} queues"),
    };
    let note = format!(
        "{} {} mode, XDP {}{queues}",
        port.info().ifname,
        port.mode().as_str(),
        port.attach_mode().as_str()
    );
    let (tx, rx, info) = port.split_queues();
    Ok((TesterPort::from_queues(tx, vec![rx], info), note))
}

/// Streams the in-kernel counter keeps per trial.
const XDP_MAX_STREAMS: u16 = 16;

fn open_af_packet(p: &PortName, opts: &AfPacketOptions) -> Result<TesterPort> {
    Ok(TesterPort::from_port(AfPacketPort::open(
        &p.0,
        p.1.as_deref(),
        opts,
    )?))
}

/// The af_packet engine on a port with `threads` generator threads, each
/// with a transmit ring (socket) of its own, and `rx_threads` receiving
/// threads, each with a receive ring in the port's fanout group (ESP
/// steered from `esp_from`, see [`Threads::esp_from`]).
fn open_af_packet_threads(
    p: &PortName,
    opts: &AfPacketOptions,
    threads: u16,
    rx_threads: u16,
    esp_from: Ipv4Addr,
) -> Result<TesterPort> {
    if threads <= 1 && rx_threads <= 1 {
        return open_af_packet(p, opts);
    }
    let port = AfPacketPort::open(&p.0, p.1.as_deref(), opts)?;
    let (tx, rx, info) = port.split_receivers(rx_threads.max(1) as usize, esp_from, opts)?;
    let mut queues = vec![tx];
    queues.extend(AfPacketPort::open_tx_rings(
        &p.0,
        p.1.as_deref(),
        opts,
        threads.max(1) as usize - 1,
    )?);
    Ok(TesterPort::from_queues(queues, rx, info))
}

/// The xdp engine on both ports: port A's in-kernel generator with a
/// packet socket that receives (the reverse direction, ARP), port B counted
/// in the kernel. Before it is used, a few frames must be confirmed as
/// taken by the kernel: a generator that loads is not one that delivers.
/// Port B is opened first, because its counter is what lets a veth peer
/// of port A (a back-to-back pair) take XDP frames. Returns a note when
/// linerate attached a program to port A to make it deliver.
fn open_xdp(
    a: &PortName,
    b: &PortName,
    opts: &AfPacketOptions,
    receiver: ReceiverChoice,
) -> Result<(Ports, Option<String>)> {
    if opts.max_frame_len > XDP_MAX_FRAME_LEN {
        bail!(BadInput,
            "--engine xdp sends frames up to {} bytes (one page per frame in live-frames mode): use --engine af_packet for {}-byte frames",
            XDP_MAX_FRAME_LEN + 4,
            opts.max_frame_len + 4
        );
    }
    let (_, rx_a, info_a) = AfPacketPort::open(&a.0, a.1.as_deref(), opts)?.split();
    let tx = XdpTransmitter::new(&info_a, XDP_MAX_STREAMS)?;
    let port_a = TesterPort {
        tx: Box::new(tx),
        rx: Box::new(QueueRx::new(rx_a, info_a.max_frame_len)),
        info: info_a,
    };
    let (mut ports, note) = with_receiver(
        port_a,
        "xdp",
        b,
        opts,
        receiver,
        false,
        false,
        Threads::on_a(1),
    )?;
    let attached = ports
        .0
        .tx
        .ensure_delivery(&ports.0.info)
        .map_err(|why| match why {
            NotDelivered::Refused(why) => err!(
                Environment,
                "the xdp engine cannot send on {}: {why}; {}",
                ports.0.info.ifname,
                xdp_delivery_fix(&ports.0.info)
            ),
            failed => err!(
                Environment,
                "the xdp engine cannot send on {}: {failed}; use --engine af_xdp or af_packet",
                ports.0.info.ifname
            ),
        })?;
    Ok((ports, join_notes(attached, note)))
}

/// What to do when the xdp engine's frames are refused on `port`.
fn xdp_delivery_fix(port: &linerate_port::PortInfo) -> String {
    let veth = linerate_engine::accounting::link_kind(port.netns.as_deref(), &port.ifname)
        .is_some_and(|k| k.is_veth());
    if veth {
        format!("turn GRO on at the peer of veth {} (ethtool -K PEER gro on) or attach an XDP program there, or use --engine af_xdp or af_packet", port.ifname)
    } else {
        "use --engine af_xdp or af_packet (docs/REAL-DEVICE.md lists what each NIC driver needs)"
            .to_string()
    }
}

/// A receiving port counted by the in-kernel counter, with a packet socket
/// beside it for ARP and for sending (the reverse direction of a
/// bidirectional trial). The counter takes the port's XDP hook, so an
/// AF_XDP socket (whose receive needs the hook too) cannot share the port.
/// Err: the port does not open; Ok(Err): it opens, the counter does not
/// attach.
fn kernel_counted(b: &PortName, opts: &AfPacketOptions) -> Result<Result<TesterPort>> {
    let (tx_b, rx_b, info_b) = AfPacketPort::open(&b.0, b.1.as_deref(), opts)?.split();
    let rx = match XdpReceiver::new(&info_b, rx_b, XDP_MAX_STREAMS, opts.generic_xdp) {
        Ok(rx) => rx,
        Err(e) => return Ok(Err(e.into())),
    };
    Ok(Ok(TesterPort {
        tx: Box::new(QueueTx::new(tx_b, info_b.max_frame_len)),
        rx: Box::new(rx),
        info: info_b,
    }))
}

/// Why port B cannot be counted in the kernel, and what to do: another XDP
/// program on the port is named (and linerate's own, of another run, said
/// to be so); otherwise the cause. The fix is the engine's: the xdp engine
/// counts in the kernel only, so af_packet; the socket engines count
/// through their socket.
fn counter_refused(b: &PortName, engine: &str, e: crate::error::Error) -> crate::error::Error {
    let fix = if engine == "xdp" {
        "use --engine af_packet, which counts through a socket"
    } else {
        "use --receiver socket"
    };
    let port = &b.0;
    match attached_xdp(b) {
        Some(prog) => {
            let whose = if prog.starts_with("'lr_") {
                ", linerate's own: another linerate run may be using this port"
            } else {
                ""
            };
            err!(Environment,
                "port B ({port}) already has an XDP program attached ({prog}{whose}), and linerate's in-kernel counter needs the port's XDP hook: detach it ('ip link set dev {port} xdp off') if nothing needs it, or {fix}"
            )
        }
        None => err!(
            Environment,
            "the in-kernel counter does not attach to port B ({port}): {}: {fix}",
            e.root_cause()
        ),
    }
}

/// The XDP program attached to port `p`, as `'NAME' (id N)`, from
/// `ip -d -j link show`; None when there is none or `ip` cannot tell.
fn attached_xdp(p: &PortName) -> Option<String> {
    let out =
        linerate_helper::ip(p.1.as_deref(), &["-d", "-j", "link", "show", "dev", &p.0]).ok()?;
    let v: serde_json::Value = serde_json::from_str(&out).ok()?;
    xdp_program_of(&v)
}

/// The XDP program in `ip -d -j link show`'s output: `xdp.prog`, or the
/// first of `xdp.attached` when programs are attached in several modes.
fn xdp_program_of(v: &serde_json::Value) -> Option<String> {
    let xdp = v.get(0)?.get("xdp")?;
    let prog = match xdp.get("prog") {
        Some(p) => p,
        None => xdp.get("attached")?.get(0)?.get("prog")?,
    };
    let name = prog.get("name").and_then(|n| n.as_str()).unwrap_or("");
    Some(match prog.get("id").and_then(|i| i.as_u64()) {
        Some(id) => format!("'{name}' (id {id})"),
        None => format!("'{name}'"),
    })
}

/// `--gw-mac-X`: the gateway's own MAC. Test frames are sent to it, so it
/// must be one station's (unicast, not all zeros): frames to a broadcast or
/// multicast address reach the receiving port with no DUT in between, and a
/// trial would "pass" whatever the DUT does.
pub fn parse_gateway_mac(text: &str, side: &str) -> Result<MacAddr> {
    let mac = text
        .parse::<MacAddr>()
        .with_context(|| format!("--gw-mac-{side}"))?;
    let what = if mac.is_broadcast() {
        "the broadcast address"
    } else if mac.is_multicast() {
        "a multicast address (the first octet is odd)"
    } else if mac == MacAddr::ZERO {
        "all zeros"
    } else {
        return Ok(mac);
    };
    bail!(BadInput, "--gw-mac-{side} {text} is {what}, not a gateway's own MAC: give the DUT port's unicast MAC (ip link show on the DUT), or leave the option out to resolve it by ARP")
}

/// Port `side`'s emulated host from `--ip-X`, `--gw-X` and `--gw-mac-X`:
/// addresses of the test frames' IP version (IPv6 with `--ipv6`), the
/// gateway on the host's subnet (IPv4) or prefix (IPv6).
pub fn host_config(
    side: &str,
    ip: &Option<String>,
    gw: &Option<String>,
    gw_mac: &Option<String>,
    encap: &Encap,
) -> Result<HostConfig> {
    let v6 = encap.ip == IpVersion::V6;
    let (version, example, net, bits, set) = if v6 {
        ("IPv6", "2001:2::2/64", "prefix", 128u32, " (--ipv6 is set)")
    } else {
        ("IPv4", "198.18.0.2/24", "subnet", 32u32, "")
    };
    let ip = ip.as_deref().ok_or_else(|| {
        err!(BadInput, "--ip-{side} is missing: give port {side}'s {version} address as ADDR/LEN, e.g. {example}")
    })?;
    let gw = gw.as_deref().ok_or_else(|| {
        err!(
            BadInput,
            "--gw-{side} is missing: give the DUT's {version} address on port {side}'s {net}"
        )
    })?;
    let (addr, len) = ip.split_once('/').ok_or_else(|| {
        err!(
            BadInput,
            "--ip-{side} '{ip}' has no prefix length: write it as ADDR/LEN, e.g. {example}"
        )
    })?;
    let of_version = |text: &str| text.parse::<IpAddr>().ok().filter(|a| a.is_ipv6() == v6);
    let addr = of_version(addr).ok_or_else(|| {
        err!(
            BadInput,
            "--ip-{side} '{ip}': '{addr}' is not an {version} address{set}"
        )
    })?;
    let len: u8 = len
        .parse()
        .ok()
        .filter(|&l| (1..=bits).contains(&u32::from(l)))
        .ok_or_else(|| {
            err!(
                BadInput,
                "--ip-{side} '{ip}': prefix length must be 1..{bits}"
            )
        })?;
    let gateway = of_version(gw).ok_or_else(|| {
        err!(
            BadInput,
            "--gw-{side} '{gw}' is not an {version} address{set}"
        )
    })?;
    let as_bits = |a: IpAddr| match a {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    let mask = u128::MAX << (bits - u32::from(len));
    if as_bits(addr) & mask != as_bits(gateway) & mask {
        bail!(BadInput, "--gw-{side} {gateway} is not in port {side}'s {net} {ip}: the gateway must be reachable without routing");
    }
    if addr == gateway {
        bail!(BadInput, "--ip-{side} and --gw-{side} are both {addr}: the gateway is the DUT's address, not the tester's");
    }
    let gateway_mac = gw_mac
        .as_deref()
        .map(|m| parse_gateway_mac(m, side))
        .transpose()?;
    let host = HostConfig {
        ip: Ipv4Addr::UNSPECIFIED,
        prefix_len: 0,
        gateway: Ipv4Addr::UNSPECIFIED,
        gateway_mac,
        also_answers: None,
        inner: None,
        ipv6: None,
        vlan: encap.vlan,
    };
    Ok(match (addr, gateway) {
        (IpAddr::V4(ip), IpAddr::V4(gateway)) => HostConfig {
            ip,
            prefix_len: len,
            gateway,
            ..host
        },
        (IpAddr::V6(ip), IpAddr::V6(gateway)) => HostConfig {
            ipv6: Some(Ipv6Host {
                ip,
                prefix_len: len,
                gateway,
            }),
            ..host
        },
        _ => bail!(
            BadInput,
            "--ip-{side} and --gw-{side} are of different IP versions: give both as {version}"
        ),
    })
}

/// The addresses port B must answer ARP for so the DUT delivers a
/// `dst-ip` range: the range, when it lies in B's subnet (the DUT then
/// delivers to each destination directly). A range in B's subnet that
/// holds the gateway (the DUT's own address) or the subnet's broadcast
/// address is refused: frames to those are not forwarded. A range outside
/// the subnet needs routes on the DUT towards port B, and is only noted.
fn destinations_to_answer(
    flows: &linerate_wire::Flows,
    host: &HostConfig,
) -> Result<Option<(Ipv4Addr, Ipv4Addr)>> {
    let Some(r) = flows.range(linerate_wire::flows::Field::DstIp) else {
        return Ok(None);
    };
    let (lo, hi) = (r.min as u32, r.max as u32);
    let mask = u32::MAX
        .checked_shl(32 - host.prefix_len as u32)
        .unwrap_or(0);
    let net = u32::from(host.ip) & mask;
    let in_subnet = |a: u32| a & mask == net;
    if !in_subnet(lo) || !in_subnet(hi) {
        errln!(
            "linerate: note: the dst-ip range {}..{} is not inside port B's subnet {}/{}: the DUT needs routes for it towards port B",
            Ipv4Addr::from(lo),
            Ipv4Addr::from(hi),
            Ipv4Addr::from(net),
            host.prefix_len
        );
        return Ok(None);
    }
    let gateway = u32::from(host.gateway);
    let broadcast = net | !mask;
    for (what, a) in [
        ("the DUT's own address", gateway),
        ("the subnet's broadcast address", broadcast),
        ("the network address", net),
    ] {
        if (lo..=hi).contains(&a) {
            bail!(BadInput,
                "--range dst-ip {}..{} includes {what} {}: frames to it are not forwarded; leave it out of the range",
                Ipv4Addr::from(lo),
                Ipv4Addr::from(hi),
                Ipv4Addr::from(a)
            );
        }
    }
    Ok(Some((Ipv4Addr::from(lo), Ipv4Addr::from(hi))))
}

/// Shortest trial worth measuring: below it, start-up and the last batch
/// dominate the figures.
pub const MIN_TRIAL: Duration = Duration::from_millis(100);

/// Parses a trial duration and refuses ones too short to measure anything.
pub fn parse_trial_duration(text: &str, option: &str) -> Result<Duration> {
    let d = parse_duration(text, option)?;
    if d < MIN_TRIAL {
        bail!(
            BadInput,
            "{option} '{text}' is too short to measure: use at least 100ms (RFC 2544 asks for 60s)"
        );
    }
    Ok(d)
}

/// Parses `2s`, `500ms`, `1m` into a duration, with a message naming the option.
pub fn parse_duration(text: &str, option: &str) -> Result<Duration> {
    if text.trim().starts_with('-') {
        bail!(
            BadInput,
            "{option} '{text}' is negative: a duration is 0 or more, written as 2s, 500ms or 1m"
        );
    }
    let d = humantime::parse_duration(text.trim()).map_err(|_| {
        err!(
            BadInput,
            "{option} '{text}' is not a duration: write it as 2s, 500ms or 1m"
        )
    })?;
    if d > LONGEST_DURATION {
        bail!(
            BadInput,
            "{option} '{text}' is longer than a year, longer than any run: give a year (365d) or less"
        );
    }
    Ok(d)
}

/// The longest duration any option takes: a year. Durations are added to
/// clock readings, and one of 500 billion years overflows the clock.
pub const LONGEST_DURATION: Duration = Duration::from_secs(365 * 86_400);

/// Whether a share may be 0 (`--loss 0`) or must be above it
/// (`--resolution`: a search to a zero-wide bracket never ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zero {
    Allowed,
    Refused,
}

/// Parses a share, the one rule of every option taking a percentage or a
/// ratio: `N%` is percent, a bare number is a ratio (`1%` and `0.01` are
/// the same). Returns the ratio, from 0 (if `zero` allows it) to below 1.
/// A bare number above 1 is refused rather than read as percent, so an
/// old `--loss 5` meaning 5 % fails loudly instead of meaning 500 %.
pub fn parse_share(text: &str, option: &str, zero: Zero) -> Result<f64> {
    let t = text.trim();
    let (number, percent) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let lowest = match zero {
        Zero::Allowed => "from 0",
        Zero::Refused => "above 0",
    };
    let v: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| {
            err!(BadInput, "{option} '{text}' is not a percentage or a ratio: write e.g. 1% or 0.01 (the same)")
        })?;
    let ratio = if percent { v / 100.0 } else { v };
    if !percent && v >= 1.0 {
        bail!(BadInput,
            "{option} '{text}': a number without % is a ratio (0.01 = 1 %), so {text} would be {} %: write {number}% for {number} percent",
            v * 100.0
        );
    }
    let in_range = match zero {
        Zero::Allowed => (0.0..1.0).contains(&ratio),
        Zero::Refused => ratio > 0.0 && ratio < 1.0,
    };
    if !in_range {
        bail!(BadInput, "{option} '{text}' is out of range: give a share {lowest} to below 100 %, e.g. 1% or 0.01 (the same)");
    }
    Ok(ratio)
}

mod bed;
mod stop;
pub use stop::{set_up_stop_is_interruption, until};

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    #[test]
    fn host_addresses_are_checked() {
        let s = |v: &str| Some(v.to_string());
        let v4 = Encap::default();
        let ok = host_config("a", &s("198.18.0.2/24"), &s("198.18.0.1"), &None, &v4).unwrap();
        assert_eq!(
            (ok.ip, ok.prefix_len, ok.gateway),
            (
                Ipv4Addr::new(198, 18, 0, 2),
                24,
                Ipv4Addr::new(198, 18, 0, 1)
            )
        );
        for (ip, gw) in [
            ("198.18.0.2", "198.18.0.1"),
            ("198.18.0.2/33", "198.18.0.1"),
            ("x/24", "198.18.0.1"),
            ("198.18.0.2/24", "10.0.0.1"),
            ("198.18.0.2/24", "198.18.0.2"),
        ] {
            assert!(
                host_config("a", &s(ip), &s(gw), &None, &v4).is_err(),
                "{ip} {gw}"
            );
        }
        assert!(host_config(
            "a",
            &s("198.18.0.2/24"),
            &s("198.18.0.1"),
            &s("nonsense"),
            &v4
        )
        .is_err());
        let v6 = Encap {
            ip: IpVersion::V6,
            vlan: None,
        };
        let ok = host_config("a", &s("2001:2::2/64"), &s("2001:2::1"), &None, &v6).unwrap();
        let h = ok.ipv6.expect("an IPv6 host");
        assert_eq!(
            (IpAddr::from(h.ip), h.prefix_len),
            ("2001:2::2".parse::<IpAddr>().unwrap(), 64)
        );
        for (ip, gw) in [
            ("2001:2::2", "2001:2::1"),
            ("2001:2::2/129", "2001:2::1"),
            ("198.18.0.2/24", "198.18.0.1"),
            ("2001:2::2/64", "2001:3::1"),
            ("2001:2::2/64", "2001:2::2"),
        ] {
            assert!(
                host_config("a", &s(ip), &s(gw), &None, &v6).is_err(),
                "{ip} {gw}"
            );
        }
    }

    #[test]
    fn the_xdp_program_on_a_port_is_read_from_ip() {
        let one: serde_json::Value = serde_json::from_str(
            r#"[{"ifname":"p1","xdp":{"mode":1,"prog":{"id":42,"name":"lr_count","tag":"ab","jited":1}}}]"#,
        )
        .unwrap();
        assert_eq!(xdp_program_of(&one).unwrap(), "'lr_count' (id 42)");
        let several: serde_json::Value = serde_json::from_str(
            r#"[{"ifname":"p1","xdp":{"mode":4,"attached":[{"mode":1,"prog":{"id":7,"name":"fw"}},{"mode":2,"prog":{"id":8,"name":"x"}}]}}]"#,
        )
        .unwrap();
        assert_eq!(xdp_program_of(&several).unwrap(), "'fw' (id 7)");
        let none: serde_json::Value =
            serde_json::from_str(r#"[{"ifname":"p1","mtu":1500}]"#).unwrap();
        assert_eq!(xdp_program_of(&none), None);
    }

    #[test]
    fn gateway_macs_are_unicast() {
        assert_eq!(
            parse_gateway_mac("02:00:00:00:00:01", "a").unwrap(),
            MacAddr([2, 0, 0, 0, 0, 1])
        );
        for (bad, says) in [
            ("ff:ff:ff:ff:ff:ff", "broadcast"),
            ("01:00:5e:00:00:01", "multicast"),
            ("33:33:00:00:00:01", "multicast"),
            ("00:00:00:00:00:00", "all zeros"),
        ] {
            let e = parse_gateway_mac(bad, "b").unwrap_err().to_string();
            assert!(e.contains("--gw-mac-b") && e.contains(says), "{bad}: {e}");
        }
        assert!(parse_gateway_mac("nonsense", "a").is_err());
    }

    #[test]
    fn percentages_and_durations_parse() {
        let share = |t: &str, zero| parse_share(t, "--x", zero);
        // One rule: N% is percent, a bare number a ratio.
        for (a, b) in [
            ("1%", "0.01"),
            ("0.5%", "0.005"),
            ("50%", "0.5"),
            (" 2 % ", "0.02"),
        ] {
            let (a, b) = (
                share(a, Zero::Refused).unwrap(),
                share(b, Zero::Refused).unwrap(),
            );
            assert!((a - b).abs() < 1e-15, "{a} {b}");
        }
        assert_eq!(share("0", Zero::Allowed).unwrap(), 0.0);
        assert_eq!(share("0%", Zero::Allowed).unwrap(), 0.0);
        for bad in ["0", "0%", "0.0"] {
            let e = share(bad, Zero::Refused).unwrap_err().to_string();
            assert!(e.contains("above 0") && e.contains("1% or 0.01"), "{e}");
        }
        for bad in ["-1", "-0.5%", "100%", "150%", "abc", "", "%", "nan", "inf"] {
            assert!(share(bad, Zero::Allowed).is_err(), "{bad}");
        }
        // A bare number of 1 or more is not read as percent: it is refused
        // with the spelling that means percent.
        for bad in ["1", "5", "99"] {
            let e = share(bad, Zero::Allowed).unwrap_err().to_string();
            assert!(e.contains(&format!("write {bad}%")), "{e}");
        }
        assert_eq!(
            parse_duration("500ms", "--x").unwrap(),
            Duration::from_millis(500)
        );
        assert!(parse_duration("soon", "--x").is_err());
        assert_eq!(
            parse_duration("365d", "--x").unwrap(),
            LONGEST_DURATION,
            "a year is taken"
        );
        let e = parse_duration("500000000000y", "--rekey").unwrap_err();
        assert!(
            e.to_string()
                .contains("--rekey '500000000000y' is longer than a year"),
            "{e}"
        );
    }
}
