//! The engine runs one trial at a time: a paced generator on port A, a
//! receiver on each port, exact counts and latency at the end.
//!
//! It never decides rates (the methods do) and never prints (the reporters
//! do): a [`TrialSpec`] goes in, a [`TrialResult`] comes out.

pub mod accounting;
pub mod backend;
pub mod capture;
pub mod cpu;
pub mod generator;
pub mod host;
pub mod latency_sampling;
pub mod pacer;
pub mod receiver;
pub mod stats;
pub mod xdp;

pub use backend::{Clock, Receiver, ReceiverKind, SendJob, TesterPort, Transmitter};
pub use host::HostConfig;
pub use latency_sampling::LatencySampling;
use linerate_port::{PortError, PortInfo};
use linerate_results::{TrialResult, TrialSpec};
use linerate_wire::template::DEFAULT_UDP_PORT;
use linerate_wire::{FlowSpec, FrameSet, FrameTemplate, MacAddr};
use pacer::Pacer;
use receiver::{Counted, ReceiverSignals, StreamRange};
use stats::StreamStats;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Port(#[from] PortError),
    #[error(transparent)]
    Bpf(#[from] linerate_bpf::BpfError),
    #[error("gateway {gateway} did not answer {resolution} on port {port} within {secs} s: check the DUT's address and cabling, or give its MAC with --gw-mac")]
    ArpTimeout {
        port: String,
        gateway: std::net::IpAddr,
        /// "ARP" or "NDP".
        resolution: &'static str,
        secs: u64,
    },
    /// A tester port that cannot carry the test: its state says why (a
    /// gateway that never answered on it, or a port gone mid-trial).
    #[error("tester port {port} is {problem}: {what}")]
    PortUnusable {
        port: String,
        problem: String,
        what: String,
    },
    #[error("a {frame}-byte frame cannot carry {encap} test frames: the smallest is {min} bytes; use --frame-size {min} or larger")]
    FrameTooSmall { frame: u16, encap: String, min: u16 },
    #[error("a {frame}-byte frame does not fit port {port} (MTU {mtu}, frames up to {max} bytes with FCS): use a smaller --frame-size or raise the MTU")]
    FrameTooLarge {
        frame: u16,
        port: String,
        mtu: u32,
        max: usize,
    },
    #[error("the {engine} engine carries frames up to {max} bytes (with FCS), not {frame}: use --engine af_packet for larger frames")]
    FrameTooLargeForEngine {
        frame: u16,
        engine: String,
        max: usize,
    },
    #[error("a trial of {duration_s} s at {fps} frames/s holds no frame: use a longer duration or a higher rate")]
    EmptyTrial { duration_s: f64, fps: f64 },
    #[error("--tx-threads above 1 needs --engine xdp")]
    TxThreads,
    #[error("--tx-threads {asked} is more than the {max} streams the receiver counts per trial: use at most {max}")]
    TooManyTxThreads { asked: u16, max: u16 },
    #[error("a drop test sends from port A only: leave out --bidirectional")]
    DropTestBidirectional,
    #[error("--range src-ip rewrites the source address that marks a drop test's dropped half: vary another field (dst-ip, ports)")]
    DropTestSourceRange,
    #[error("--drop-from {0} is not of the test frames' IP version: give an address of the same version as port A's")]
    DropTestFamily(std::net::IpAddr),
    #[error("interrupted")]
    Interrupted,
    #[error("a tester thread failed: {0}")]
    Thread(String),
}

/// Refuses what a drop test from `source` cannot be combined with: test
/// frames of the other IP version (`test_v6`), both directions at once
/// (the dropped class goes A -> B), a source-address flow range (it would
/// overwrite the mark). The one rule, checked by the CLI before it builds
/// a lab and by the engine before every trial.
pub fn check_drop_test(
    source: std::net::IpAddr,
    test_v6: bool,
    bidirectional: bool,
    flows: &linerate_wire::Flows,
) -> Result<(), EngineError> {
    if source.is_ipv6() != test_v6 {
        return Err(EngineError::DropTestFamily(source));
    }
    if bidirectional {
        return Err(EngineError::DropTestBidirectional);
    }
    if flows.range(linerate_wire::flows::Field::SrcIp).is_some() {
        return Err(EngineError::DropTestSourceRange);
    }
    Ok(())
}

/// Frames of traffic class `class` among those of generator threads that
/// each sent (or were to send) `per_thread[k]` frames of `frames`, every
/// thread from frame 0 of its own sequence.
fn frames_of_class(frames: &FrameSet, per_thread: &[u64], class: u8) -> u64 {
    per_thread
        .iter()
        .map(|&n| frames.frames_of_class(n, class))
        .sum()
}

/// In a drop test, once every legitimate frame is in, the straggler wait
/// ends after this long without a frame arriving: frames the DUT leaks
/// from the dropped class come within it (they travel with the rest), and
/// a DUT that drops them all is not waited on for the whole straggler wait.
const LEAK_QUIET: Duration = Duration::from_millis(20);

/// The most frames a generator that fell behind its schedule sends to
/// catch up (at up to 4 times the rate); held up longer, it pauses
/// instead: the schedule moves back, the DUT sees the trial's rate with a
/// gap, and the trial records the pause. A hardware tester never falls
/// behind; a software one that made up a 3 ms stall at 700 kframes/s would
/// send 2,100 frames at four times the rate into a 256-frame veth ring.
pub const MAX_CATCH_UP_FRAMES: u64 = 32;

/// How the engine behaves between and around trials.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// After the last frame is sent, wait this long for frames still in
    /// flight (RFC 2544: 2 s). The wait ends early once every sent frame has
    /// arrived: nothing can be late then.
    pub straggler_wait: Duration,
    /// CPUs the tester's threads run on (empty: anywhere).
    pub tester_cpus: Vec<usize>,
    pub arp_timeout: Duration,
    /// Name recorded in every result ("af_packet", "af_xdp", "xdp", "loopback").
    pub name: String,
    /// Generator threads per trial, each sending a stream of its own
    /// (above 1 only for transmitters that allow it: the xdp engine).
    pub tx_threads: u16,
    /// Header fields that vary from frame to frame (pktgen-style ranges);
    /// empty: one flow.
    pub flows: linerate_wire::Flows,
    /// Both ports send and receive at once, each at half the trial's
    /// rate; the result sums both directions and keeps each apart.
    pub bidirectional: bool,
    /// A drop test: every other frame from A comes from this source
    /// address, which the DUT is configured to drop. Those frames are
    /// counted apart (as streams of their own) and reported as intended
    /// drops, not loss.
    pub drop_from: Option<std::net::IpAddr>,
    /// Which frames latency is measured on, for receivers that sample
    /// (the in-kernel counter; see [`latency_sampling`]).
    pub latency_sampling: LatencySampling,
    /// How deep every received test frame is checked before it counts.
    pub frame_check: linerate_wire::FrameCheck,
}

impl EngineConfig {
    /// The CPUs generator threads are pinned to, one each in order (thread
    /// k on `cpus[k % len]`): the tester's CPUs, or every CPU this process
    /// may run on when none are set aside. With one thread: the tester's
    /// CPUs as a set, as before (the engine pins the thread to all of them).
    pub fn tx_cpus(&self) -> Vec<usize> {
        if self.tx_threads <= 1 || !self.tester_cpus.is_empty() {
            return self.tester_cpus.clone();
        }
        allowed_cpus()
    }

    /// A note when generator threads have to share CPUs (more threads
    /// than CPUs to pin them to), for the CLI to print.
    pub fn tx_placement_note(&self) -> Option<String> {
        let cpus = self.tx_cpus();
        let n = self.tx_threads as usize;
        (n > 1 && n > cpus.len()).then(|| {
            format!(
                "{n} generator threads on {} CPU(s) {cpus:?}: threads share CPUs, so they cannot all send at full speed",
                cpus.len()
            )
        })
    }
}

/// The CPUs the calling thread may run on (empty if unknown).
fn allowed_cpus() -> Vec<usize> {
    let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) else {
        return Vec::new();
    };
    (0..nix::sched::CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            straggler_wait: Duration::from_secs(2),
            tester_cpus: Vec::new(),
            arp_timeout: Duration::from_secs(3),
            name: String::new(),
            tx_threads: 1,
            flows: linerate_wire::Flows::default(),
            bidirectional: false,
            drop_from: None,
            latency_sampling: LatencySampling::Auto,
            frame_check: linerate_wire::FrameCheck::default(),
        }
    }
}

struct Side {
    port: TesterPort,
    host: HostConfig,
    gateway_mac: Option<MacAddr>,
}

/// Two tester ports and what runs on them. Traffic flows from A to B.
pub struct Engine {
    a: Side,
    b: Side,
    cfg: EngineConfig,
    next_stream: u16,
    /// How lost frames are attributed (read once, at the first trial).
    accounting: Option<accounting::Accounting>,
}

impl Engine {
    pub fn new(
        a: TesterPort,
        host_a: HostConfig,
        b: TesterPort,
        host_b: HostConfig,
        cfg: EngineConfig,
    ) -> Self {
        let side = |port: TesterPort, host: HostConfig| Side {
            gateway_mac: host.gateway_mac,
            port,
            host,
        };
        Engine {
            a: side(a, host_a),
            b: side(b, host_b),
            cfg,
            next_stream: 1,
            accounting: None,
        }
    }

    pub fn port_a(&self) -> &PortInfo {
        &self.a.port.info
    }
    pub fn port_b(&self) -> &PortInfo {
        &self.b.port.info
    }
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    /// How port B counts the test frames.
    pub fn receiver(&self) -> ReceiverKind {
        self.b.port.rx.kind()
    }

    /// Makes the trials drop tests (see [`EngineConfig::drop_from`]),
    /// refusing what a drop test cannot be combined with.
    pub fn set_drop_from(&mut self, source: std::net::IpAddr) -> Result<(), EngineError> {
        let v6 = self.a.host.test_ip().is_ipv6();
        check_drop_test(source, v6, self.cfg.bidirectional, &self.cfg.flows)?;
        self.cfg.drop_from = Some(source);
        Ok(())
    }

    /// The layout of the test frames (IP version, VLAN tag), from port A's host.
    pub fn encap(&self) -> linerate_wire::Encap {
        self.a.host.encap()
    }

    /// Checks that frames of `frame` bytes carry the test frames' headers
    /// and fit both ports.
    pub fn check_frame(&self, frame: linerate_wire::FrameSize) -> Result<(), EngineError> {
        use linerate_wire::units::{ETH_HEADER_LEN, FCS_LEN};
        let encap = self.encap();
        if frame.l3() < encap.min_l3()
            || encap.ip_offset() + frame.l3() as usize > frame.buffer_len()
        {
            return Err(EngineError::FrameTooSmall {
                frame: frame.frame(),
                encap: encap.to_string(),
                min: encap.min_frame(),
            });
        }
        // A tag makes the frame 4 bytes longer than the MTU counts.
        let tag_len = encap.ip_offset() - ETH_HEADER_LEN;
        for side in [&self.a, &self.b] {
            let info = &side.port.info;
            let by_mtu = info.mtu as usize + ETH_HEADER_LEN + tag_len;
            let by_engine = side.port.max_frame_len();
            if frame.buffer_len() <= by_mtu.min(by_engine) {
                continue;
            }
            // Name the limit that binds, so the message names the right fix.
            return Err(if by_engine < by_mtu && frame.buffer_len() <= by_mtu {
                EngineError::FrameTooLargeForEngine {
                    frame: frame.frame(),
                    engine: self.cfg.name.clone(),
                    max: by_engine + FCS_LEN,
                }
            } else {
                EngineError::FrameTooLarge {
                    frame: frame.frame(),
                    port: info.ifname.clone(),
                    mtu: info.mtu,
                    max: by_mtu.min(by_engine) + FCS_LEN,
                }
            });
        }
        Ok(())
    }

    /// Resolves both gateways by ARP (a short trial of receivers only),
    /// then, when the destination address varies, sends learning frames
    /// (RFC 2544 section 23) so the DUT has resolved every destination
    /// before the first measured trial: otherwise that trial would measure
    /// the DUT's neighbour resolution (frames queued, dropped, reordered
    /// while it asks), not its forwarding.
    pub fn resolve(&mut self) -> Result<(), EngineError> {
        let quiet = AtomicBool::new(false);
        self.run(None, &quiet)?;
        if let Some(r) = self.cfg.flows.range(linerate_wire::flows::Field::DstIp) {
            // inc/dec visit every address once per span; random needs
            // more draws to hit them all. At least a second of it, so the
            // DUT's ARP requests (and its retries) are answered while the
            // receiver runs, not in the gap before the first trial.
            let frames = match r.mode {
                linerate_wire::flows::Mode::Random => 8 * r.span(),
                _ => 2 * r.span(),
            }
            .clamp(10_000, 100_000);
            let fps = 10_000.0;
            let encap = self.encap();
            // Learning frames are all legitimate: a DUT's neighbour table
            // needs no frames it drops.
            let drop_from = self.cfg.drop_from.take();
            let spec = TrialSpec {
                frame: linerate_wire::FrameSize::from_frame_in(encap.min_frame() as u64, &encap)
                    .expect("the smallest frame of a layout is a frame size"),
                mix: None,
                intended_fps: fps,
                duration: Duration::from_secs_f64(frames as f64 / fps),
            };
            let learned = self.run(Some(&spec), &quiet);
            self.cfg.drop_from = drop_from;
            learned?;
            // The DUT answers the last ARP replies at its own pace.
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Runs one constant-rate trial from A to B. `interrupt` aborts it.
    pub fn run_trial(
        &mut self,
        spec: &TrialSpec,
        interrupt: &AtomicBool,
    ) -> Result<TrialResult, EngineError> {
        self.check_frame(spec.frame)?;
        if Pacer::new(spec.intended_fps, spec.duration).total() == 0 {
            return Err(EngineError::EmptyTrial {
                duration_s: spec.duration.as_secs_f64(),
                fps: spec.intended_fps,
            });
        }
        Ok(self
            .run(Some(spec), interrupt)?
            .expect("a trial was asked for"))
    }

    fn run(
        &mut self,
        spec: Option<&TrialSpec>,
        interrupt: &AtomicBool,
    ) -> Result<Option<TrialResult>, EngineError> {
        // One stream per generator thread: each thread's sequence numbers
        // stay dense, so the receiver counts every stream exactly.
        let threads = self.cfg.tx_threads.max(1);
        if spec.is_some() && threads > self.a.port.tx.max_streams() {
            return Err(if self.a.port.tx.max_streams() <= 1 {
                EngineError::TxThreads
            } else {
                EngineError::TooManyTxThreads {
                    asked: threads,
                    max: self.a.port.tx.max_streams(),
                }
            });
        }
        // A drop test's second class is counted as streams of its own.
        let drop_from = self.cfg.drop_from.filter(|_| spec.is_some());
        if let Some(source) = drop_from {
            check_drop_test(
                source,
                self.a.host.test_ip().is_ipv6(),
                self.cfg.bidirectional,
                &self.cfg.flows,
            )?;
        }
        let classes: u16 = if drop_from.is_some() { 2 } else { 1 };
        let rx_max = self.b.port.rx.max_streams();
        if spec.is_some() && threads * classes > rx_max {
            return Err(EngineError::TooManyTxThreads {
                asked: threads,
                max: rx_max / classes,
            });
        }
        // Frames to a varying port are told apart by signature alone.
        let udp_port = if self
            .cfg
            .flows
            .range(linerate_wire::flows::Field::DstPort)
            .is_some()
        {
            linerate_wire::classify::ANY_PORT
        } else {
            DEFAULT_UDP_PORT
        };
        // Latency sampling follows the rate each receiving port takes.
        let bidir = self.cfg.bidirectional && spec.is_some();
        let port_fps = spec.map_or(0.0, |s| s.intended_fps / if bidir { 2.0 } else { 1.0 });
        let latency_every = |rx: &dyn Receiver| {
            if rx.kind().samples_latency() {
                self.cfg.latency_sampling.every(port_fps)
            } else {
                1
            }
        };
        let range = StreamRange {
            first: self.next_stream,
            count: threads * classes,
            udp_port,
            latency_every: latency_every(&*self.b.port.rx),
            check: self.cfg.frame_check,
        };
        self.next_stream = self.next_stream.wrapping_add(range.count);
        // Both directions at once: B sends streams of its own, counted at A.
        let range_rev = if bidir {
            let r = StreamRange {
                first: self.next_stream,
                count: threads,
                udp_port: DEFAULT_UDP_PORT,
                latency_every: latency_every(&*self.a.port.rx),
                check: self.cfg.frame_check,
            };
            self.next_stream = self.next_stream.wrapping_add(threads);
            r
        } else {
            range
        };
        // How lost frames are attributed: the tester ports' kinds and the
        // DUT namespace behind them, found once, when the gateways are
        // known (the DUT's MACs identify it).
        let gateways = self.a.gateway_mac.zip(self.b.gateway_mac);
        if let (Some(_), None, Some(gateways)) = (spec, &self.accounting, gateways) {
            let (a, b) = (&self.a.port.info, &self.b.port.info);
            self.accounting = Some(accounting::Accounting::discover(
                (a.netns.clone(), a.ifname.clone()),
                (b.netns.clone(), b.ifname.clone()),
                Some(gateways),
                self.a.host.test_ip().is_ipv6(),
            ));
        }
        let acct = self.accounting.as_ref();
        let tx_cpus = self.cfg.tx_cpus();
        let tx_cpus = &tx_cpus;
        let cfg = &self.cfg;
        // Split each side into what the threads take: the receive queue goes
        // to its receiver, the transmit queue to the generator.
        let Side {
            port:
                TesterPort {
                    tx: tx_a,
                    rx: rxq_a,
                    info: info_a,
                },
            host: host_a,
            gateway_mac: gw_a,
        } = &mut self.a;
        let Side {
            port:
                TesterPort {
                    tx: tx_b,
                    rx: rxq_b,
                    info: info_b,
                },
            host: host_b,
            gateway_mac: gw_b,
        } = &mut self.b;
        let (info_a, host_a, info_b, host_b) = (&*info_a, &*host_a, &*info_b, &*host_b);
        let clock_b = rxq_b.clock();
        let clock_a = rxq_a.clock();
        let signals_a = ReceiverSignals::default();
        let signals_b = ReceiverSignals::default();
        let (signals_a, signals_b) = (&signals_a, &signals_b);

        std::thread::scope(|scope| {
            let rx_a = scope.spawn(move || {
                let _ = cpu::pin_current_thread(&cfg.tester_cpus);
                rxq_a.receive(info_a.mac, host_a, range_rev, signals_a)
            });
            let rx_b = scope.spawn(move || {
                let _ = cpu::pin_current_thread(&cfg.tester_cpus);
                rxq_b.receive(info_b.mac, host_b, range, signals_b)
            });
            let stop_all = || {
                signals_a.stop.store(true, Ordering::Release);
                signals_b.stop.store(true, Ordering::Release);
            };

            // Both gateways must be known, and both receivers counting this
            // trial's streams, before the first test frame leaves.
            let started = Instant::now();
            loop {
                *gw_a = gw_a.or_else(|| signals_a.gateway_mac());
                *gw_b = gw_b.or_else(|| signals_b.gateway_mac());
                let ready = signals_a.ready.load(Ordering::Acquire)
                    && signals_b.ready.load(Ordering::Acquire);
                if gw_a.is_some() && gw_b.is_some() && ready {
                    break;
                }
                let failed = rx_a.is_finished() || rx_b.is_finished();
                if failed
                    || interrupt.load(Ordering::Relaxed)
                    || started.elapsed() > cfg.arp_timeout
                {
                    stop_all();
                    let (ra, rb) = (join(rx_a), join(rx_b));
                    ra?;
                    rb?;
                    if interrupt.load(Ordering::Relaxed) {
                        return Err(EngineError::Interrupted);
                    }
                    let (info, host) = if gw_a.is_none() {
                        (info_a, host_a)
                    } else {
                        (info_b, host_b)
                    };
                    // The ports' own state first: a gateway cannot answer
                    // on a port that is down, loopback or a bridge (nor,
                    // back to back, through one).
                    for port in [info, info_a, info_b] {
                        if let Some(problem) =
                            accounting::port_problem(port.netns.as_deref(), &port.ifname)
                        {
                            return Err(EngineError::PortUnusable {
                                port: port.ifname.clone(),
                                problem,
                                what: format!(
                                    "gateway {} on port {} did not answer {}",
                                    host.test_gateway(),
                                    info.ifname,
                                    host.resolution()
                                ),
                            });
                        }
                    }
                    return Err(EngineError::ArpTimeout {
                        port: info.ifname.clone(),
                        gateway: host.test_gateway(),
                        resolution: host.resolution(),
                        secs: cfg.arp_timeout.as_secs(),
                    });
                }
                std::thread::sleep(Duration::from_millis(1));
            }

            // Which tester ports are interfaces now, to tell one deleted
            // during the trial (one index lookup each).
            let present = [interface_present(info_a), interface_present(info_b)];
            let Some(spec) = spec else {
                stop_all();
                join(rx_a)?;
                join(rx_b)?;
                return Ok(None);
            };

            // Per direction: all of the rate one way, or half each way.
            let per_direction = if bidir {
                spec.intended_fps / 2.0
            } else {
                spec.intended_fps
            };
            let spec_dir = TrialSpec {
                intended_fps: per_direction,
                ..spec.clone()
            };
            let frames_for = |flow: &FlowSpec| match &spec.mix {
                Some(mix) => FrameSet::new(flow, mix),
                None => FrameSet::single(FrameTemplate::new(flow, spec.frame)),
            };
            let flow_ab = FlowSpec {
                src_mac: info_a.mac,
                dst_mac: gw_a.expect("resolved above"),
                src_ip: host_a.test_ip(),
                dst_ip: host_b.test_ip(),
                src_port: DEFAULT_UDP_PORT,
                dst_port: DEFAULT_UDP_PORT,
                ttl: 64,
                vlan: host_a.vlan,
            };
            let frames_ab = match drop_from {
                None => frames_for(&flow_ab),
                Some(src_ip) => FrameSet::two_classes(
                    frames_for(&flow_ab),
                    frames_for(&FlowSpec {
                        src_ip,
                        ..flow_ab.clone()
                    }),
                ),
            };
            let frames_ba = frames_for(&FlowSpec {
                src_mac: info_b.mac,
                dst_mac: gw_b.expect("resolved above"),
                src_ip: host_b.test_ip(),
                dst_ip: host_a.test_ip(),
                src_port: DEFAULT_UDP_PORT,
                dst_port: DEFAULT_UDP_PORT,
                ttl: 64,
                vlan: host_b.vlan,
            });
            let no_flows = linerate_wire::Flows {
                encap: host_b.encap(),
                ..linerate_wire::Flows::default()
            };
            // The kernel's counters around the trial say where frames went.
            // The port counters see both directions and both classes of a
            // drop test: they attribute one direction of one class only.
            let counters_apply = !bidir && frames_ab.classes() == 1;
            let before = acct.map(|a| a.read());
            let pacer = Pacer::new(per_direction, spec.duration);
            // Frames not sent within 1 % (+10 ms) of the duration count as lost.
            let give_up_after = spec.duration + spec.duration / 100 + Duration::from_millis(10);
            // Catching up more than this many frames would be a burst a
            // DUT's input queue may not hold (a veth's ring holds 256): the
            // generator pauses instead.
            let max_late = Some(Duration::from_secs_f64(
                MAX_CATCH_UP_FRAMES as f64 / per_direction,
            ));
            let job_ab = SendJob {
                frames: &frames_ab,
                flows: &cfg.flows,
                stream: range.first,
                streams: threads,
                cpus: tx_cpus,
                pacer,
                give_up_after,
                max_late,
                clock: clock_b,
            };
            let job_ba = SendJob {
                frames: &frames_ba,
                // Flow ranges describe A -> B traffic (the CLI refuses
                // them with --bidirectional).
                flows: &no_flows,
                stream: range_rev.first,
                streams: threads,
                cpus: tx_cpus,
                pacer,
                give_up_after,
                max_late,
                clock: clock_a,
            };
            // Each generator gets a thread of its own so it can be pinned
            // without changing the caller's affinity; both directions send
            // at once.
            let (sent_ab, sent_ba) = std::thread::scope(|gen_scope| {
                let ab = gen_scope.spawn(|| {
                    let _ = cpu::pin_current_thread(&cfg.tester_cpus);
                    tx_a.send(&job_ab, interrupt)
                });
                let ba = bidir.then(|| {
                    gen_scope.spawn(|| {
                        let _ = cpu::pin_current_thread(&cfg.tester_cpus);
                        tx_b.send(&job_ba, interrupt)
                    })
                });
                (ab.join(), ba.map(|h| h.join()))
            });
            let unwrap_sent = |r: std::thread::Result<Result<generator::Sent, EngineError>>| match r
            {
                Ok(r) => r,
                Err(_) => Err(EngineError::Thread("the generator panicked".into())),
            };
            let sent = unwrap_sent(sent_ab)
                .and_then(|ab| sent_ba.map(unwrap_sent).transpose().map(|ba| (ab, ba)));
            let (sent, sent_rev) = match sent {
                Ok(s) => s,
                Err(e) => {
                    stop_all();
                    let _ = (join(rx_a), join(rx_b));
                    return Err(e);
                }
            };

            // Stragglers: wait until every sent frame arrived, or the wait is over.
            // A drop test's second class is not expected back.
            let expected_b = frames_of_class(&frames_ab, &sent.per_thread, 0);
            let all_in = || {
                signals_b.received.load(Ordering::Acquire) >= expected_b
                    && sent_rev
                        .as_ref()
                        .is_none_or(|r| signals_a.received.load(Ordering::Acquire) >= r.frames)
            };
            // A drop test's dropped class never arrives from a DUT that
            // drops it, so it cannot be waited for; frames it leaks come
            // in order with the rest, so once the legitimate class is in,
            // the wait goes on until nothing has arrived for LEAK_QUIET.
            let mut last_count = (signals_b.received.load(Ordering::Acquire), Instant::now());
            let done = |last: &mut (u64, Instant)| {
                if !all_in() {
                    return false;
                }
                if drop_from.is_none() {
                    return true;
                }
                let now = signals_b.received.load(Ordering::Acquire);
                if now != last.0 {
                    *last = (now, Instant::now());
                }
                last.1.elapsed() >= LEAK_QUIET
            };
            // With the DUT's counters readable, the wait also ends once
            // every frame not yet received is counted as dropped somewhere:
            // none is left in flight to straggle in. A trial at overload
            // then takes its duration, not its duration plus the wait.
            let total = pacer.total();
            let all_dropped = || {
                let (Some(acct), Some(before)) = (acct, before.as_ref()) else {
                    return false;
                };
                if !counters_apply || acct.dut.is_none() {
                    return false;
                }
                let now = acct.read();
                let rx = signals_b.received.load(Ordering::Acquire);
                let (w, _) = accounting::attribute(
                    accounting::OwnCounts::new(total.saturating_sub(rx), total, &sent, 0),
                    acct.a_veth,
                    Some((before, &now)),
                );
                w.dut_read && w.rest == 0
            };
            let wait_from = Instant::now();
            // The counters are read every 50 ms (reading the DUT's spawns tc).
            let mut next_check = wait_from + Duration::from_millis(20);
            let mut accounted_for = || {
                if Instant::now() < next_check {
                    return false;
                }
                next_check = Instant::now() + Duration::from_millis(50);
                all_dropped()
            };
            while wait_from.elapsed() < cfg.straggler_wait
                && !done(&mut last_count)
                && !accounted_for()
                && !interrupt.load(Ordering::Relaxed)
                && !rx_b.is_finished()
                && !rx_a.is_finished()
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            stop_all();
            let counted_a = join(rx_a)?;
            let counted_b = join(rx_b)?;
            if interrupt.load(Ordering::Relaxed) {
                return Err(EngineError::Interrupted);
            }
            // A tester port deleted mid-trial made its counts meaningless:
            // the tester's fault, never the DUT's loss. (Only ports that
            // are interfaces: an in-memory port has no index.)
            for ((side, info), was) in [("A", info_a), ("B", info_b)].into_iter().zip(present) {
                if was && !interface_present(info) {
                    return Err(EngineError::PortUnusable {
                        port: format!("{} (port {side})", info.ifname),
                        problem: "gone: it was deleted during the trial".into(),
                        what: "the trial is void (nothing it counted is the DUT's); recreate the port and run again".into(),
                    });
                }
            }
            let after = acct.map(|a| a.read());
            let around = match (&before, &after) {
                (Some(b), Some(a)) if counters_apply => Some((b, a)),
                _ => None,
            };
            let a_veth = acct.map_or(accounting::SendingPort::Nic, |a| a.a_veth);
            let encap = host_a.encap();
            let mut ab = summarize(
                &spec_dir, &frames_ab, &sent, &counted_b, cfg, encap, a_veth, around,
            );
            let result = match sent_rev {
                None => {
                    // Stray frames on A (the sending port) are as telling as on B.
                    ab.stray_frames += counted_a.stray;
                    ab.errored_frames += counted_a.errored;
                    ab
                }
                Some(rev) => {
                    let ba = summarize(
                        &spec_dir, &frames_ba, &rev, &counted_a, cfg, encap, a_veth, None,
                    );
                    both_directions(spec, ab, ba)
                }
            };
            Ok(Some(result))
        })
    }
}

/// Whether tester port `info` is an interface in its namespace (false for
/// an in-memory port, and for one deleted).
fn interface_present(info: &PortInfo) -> bool {
    linerate_port::netns::maybe_in_netns(info.netns.as_deref(), || {
        linerate_port::link::ifindex(&info.ifname)
    })
    .is_ok()
}

fn join(
    handle: std::thread::ScopedJoinHandle<'_, Result<Counted, EngineError>>,
) -> Result<Counted, EngineError> {
    match handle.join() {
        Ok(r) => r,
        Err(_) => Err(EngineError::Thread("a receiver panicked".into())),
    }
}

/// One record for a bidirectional trial: counts and rates summed over the
/// directions, each direction's own record kept in `directions` (A -> B
/// first). Latency: the lower minimum, the higher maximum, the mean
/// weighted by frames received, and each percentile from the worse
/// direction (a summary cannot be merged exactly; this never flatters).
fn both_directions(spec: &TrialSpec, ab: TrialResult, ba: TrialResult) -> TrialResult {
    let latency_ns = match (ab.latency_ns, ba.latency_ns) {
        (Some(x), Some(y)) => {
            let (wx, wy) = (
                x.weight(ab.rx_frames) as u128,
                y.weight(ba.rx_frames) as u128,
            );
            let avg = (x.avg as u128 * wx + y.avg as u128 * wy)
                .checked_div(wx + wy)
                .unwrap_or(0) as u64;
            Some(linerate_results::LatencySummary {
                samples: x.samples + y.samples,
                every: x.every.max(y.every),
                min: x.min.min(y.min),
                avg,
                max: x.max.max(y.max),
                p50: x.p50.max(y.p50),
                p90: x.p90.max(y.p90),
                p99: x.p99.max(y.p99),
                p999: x.p999.max(y.p999),
            })
        }
        (x, y) => x.or(y),
    };
    let intended_frames = ab.intended_frames + ba.intended_frames;
    let lost_frames = ab.lost_frames + ba.lost_frames;
    TrialResult {
        intended_fps: spec.intended_fps,
        offered_fps: ab.offered_fps + ba.offered_fps,
        intended_frames,
        tx_frames: ab.tx_frames + ba.tx_frames,
        rx_frames: ab.rx_frames + ba.rx_frames,
        lost_frames,
        loss_ratio: if intended_frames > 0 {
            lost_frames as f64 / intended_frames as f64
        } else {
            0.0
        },
        reordered: ab.reordered + ba.reordered,
        duplicated: ab.duplicated + ba.duplicated,
        latency_ns,
        generator_short: ab.generator_short || ba.generator_short,
        generator_max_stall_ns: ab.generator_max_stall_ns.max(ba.generator_max_stall_ns),
        generator_paused_ns: ab.generator_paused_ns.max(ba.generator_paused_ns),
        generator_pauses: Some(ab.generator_pauses.unwrap_or(0) + ba.generator_pauses.unwrap_or(0)),
        tester_rx_drops: ab.tester_rx_drops + ba.tester_rx_drops,
        stray_frames: ab.stray_frames + ba.stray_frames,
        errored_frames: ab.errored_frames + ba.errored_frames,
        frame_check: ab.frame_check.clone(),
        directions: Vec::new(),
        dut_cpu: None,
        policy_drops: None,
        loss_where: match (ab.loss_where, ba.loss_where) {
            (Some(x), Some(y)) => Some(x.combine(y)),
            _ => None,
        },
        // Each direction's receiver is in `directions`; "kernel/socket" when
        // they differ (A -> B first).
        receiver: if ab.receiver == ba.receiver {
            ab.receiver.clone()
        } else {
            format!("{}/{}", ab.receiver, ba.receiver)
        },
        ..ab.clone()
    }
    .with_directions(vec![ab, ba])
}

/// Turns the counts of one trial into its result record. With two
/// traffic classes (a drop test) the counts are the legitimate class's and
/// the other class becomes [`PolicyDrops`](linerate_results::PolicyDrops).
#[allow(clippy::too_many_arguments)]
fn summarize(
    spec: &TrialSpec,
    frames: &FrameSet,
    sent: &generator::Sent,
    counted: &Counted,
    cfg: &EngineConfig,
    encap: linerate_wire::Encap,
    a_veth: accounting::SendingPort,
    around: Option<(&accounting::Counters, &accounting::Counters)>,
) -> TrialResult {
    // Thread k sent frames 0 .. sent[k] of its own sequence, of its share
    // of the schedule; stream k counts class 0, stream threads + k class 1.
    let threads = sent.per_thread.len().max(1);
    let total = Pacer::new(spec.intended_fps, spec.duration).total();
    let shares: Vec<u64> = (0..threads as u16)
        .map(|k| xdp::share(total, threads as u16, k))
        .collect();
    let intended_frames = frames_of_class(frames, &shares, 0);
    let mut tx_frames = frames_of_class(frames, &sent.per_thread, 0);
    let mut legit = StreamStats::default();
    for s in counted.streams.iter().take(threads) {
        legit.merge(s);
    }
    let policy_drops = (frames.classes() > 1).then(|| linerate_results::PolicyDrops {
        tx_frames: frames_of_class(frames, &sent.per_thread, 1),
        leaked_frames: counted
            .streams
            .iter()
            .skip(threads)
            .map(StreamStats::received)
            .sum(),
    });
    let rx = legit.received();
    let lost = intended_frames.saturating_sub(rx);
    // The tester's refusals cover every class; a drop test's legitimate
    // class is its share of them (every other frame).
    let mut own = accounting::OwnCounts::new(lost, total, sent, counted.ring_drops);
    // Damaged frames carry no class one can trust: a drop test's
    // legitimate class is its share of them, as of the refusals.
    let mut errored = counted.errored;
    if frames.classes() > 1 {
        let share = intended_frames as f64 / total.max(1) as f64;
        own = own.share(share);
        errored = (errored as f64 * share).round() as u64;
    }
    let (loss_where, not_left) = accounting::attribute(own, a_veth, around);
    let loss_where = loss_where.with_errored(errored);
    tx_frames = tx_frames.saturating_sub(not_left);
    let duration_s = spec.duration.as_secs_f64();
    // Over the time the frames really took: a paused generator made the
    // trial longer, and the device saw the frames at that lower rate.
    let send_s = sent.send_time.as_secs_f64().max(duration_s);
    TrialResult {
        frame_size: spec.frame.frame(),
        mix: spec.mix.as_ref().map(linerate_results::MixInfo::of),
        flows: cfg.flows.describe(),
        directions: Vec::new(),
        l3_length: spec.frame.l3(),
        duration_s,
        intended_fps: spec.intended_fps,
        offered_fps: if send_s > 0.0 {
            sent.frames.saturating_sub(not_left) as f64 / send_s
        } else {
            0.0
        },
        intended_frames,
        tx_frames,
        rx_frames: rx,
        lost_frames: lost,
        loss_ratio: if intended_frames > 0 {
            lost as f64 / intended_frames as f64
        } else {
            0.0
        },
        reordered: legit.reordered(),
        duplicated: legit.duplicated(),
        latency_ns: legit.latency(counted.latency_every),
        generator_short: sent.handed < total,
        generator_max_stall_ns: Some(sent.max_stall.as_nanos() as u64),
        generator_paused_ns: Some(sent.paused.as_nanos() as u64),
        generator_pauses: Some(sent.pauses),
        tester_rx_drops: counted.ring_drops,
        stray_frames: counted.stray,
        errored_frames: counted.errored,
        frame_check: cfg.frame_check.name().to_string(),
        engine: cfg.name.clone(),
        receiver: counted.receiver.as_str().to_string(),
        ip_version: encap.ip,
        vlan: encap.vlan,
        dut_cpu: None,
        policy_drops,
        loss_where: Some(loss_where),
    }
}

#[cfg(test)]
mod tests {
    use super::EngineConfig;

    #[test]
    fn generator_threads_get_cpus_and_sharing_is_said() {
        let cfg = |threads, cpus: &[usize]| EngineConfig {
            tx_threads: threads,
            tester_cpus: cpus.to_vec(),
            ..EngineConfig::default()
        };
        // One thread: the tester's CPUs as before, no note.
        assert_eq!(cfg(1, &[]).tx_cpus(), Vec::<usize>::new());
        assert_eq!(cfg(1, &[0, 1]).tx_cpus(), vec![0, 1]);
        assert_eq!(cfg(1, &[]).tx_placement_note(), None);
        // Enough tester CPUs: one each, no note.
        assert_eq!(cfg(2, &[2, 3]).tx_cpus(), vec![2, 3]);
        assert_eq!(cfg(2, &[2, 3]).tx_placement_note(), None);
        // Too few: shared, and said.
        let note = cfg(3, &[0]).tx_placement_note().expect("a note");
        assert!(note.contains("share CPUs"), "{note}");
        // None set aside: the CPUs this process may use.
        assert!(!cfg(2, &[]).tx_cpus().is_empty());
    }
}
