//! One trial, phase by phase: plan the streams, wait for the DUT to stop
//! forwarding earlier frames (`recovery`), start the receivers, wait for
//! both gateways, build the frame sets, run the generators, wait for
//! stragglers, read the counts. [`Engine::run`] reads as that list; each
//! phase is a function here, and those that decide by time are given their
//! deadline.

use crate::accounting::{self, Accounting, Counters};
use crate::backend::{Clock, SendJob, Transmitter};
use crate::generator::Sent;
use crate::host::HostConfig;
use crate::pacer::Pacer;
use crate::receiver::{Counted, ReceiverSignals, RxTally, StreamRange};
use crate::summary::{both_directions, frames_of_class, summarize, Direction};
use crate::{cpu, recovery, Engine, EngineConfig, EngineError, ReceiverKind, Side, TunnelTally};
use linerate_port::PortInfo;
use linerate_results::{TrialResult, TrialSpec};
use linerate_wire::flows::Field;
use linerate_wire::template::DEFAULT_UDP_PORT;
use linerate_wire::{FlowSpec, FrameSet, FrameTemplate, MacAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{Scope, ScopedJoinHandle};
use std::time::{Duration, Instant};

/// In a drop test, once every legitimate frame is in, the straggler wait
/// ends after this long without a frame arriving: frames the DUT leaks
/// from the dropped class come within it (they travel with the rest), and
/// a DUT that drops them all is not waited on for the whole straggler wait.
const LEAK_QUIET: Duration = Duration::from_millis(20);

/// The streams one trial counts, and how.
struct Streams {
    /// Generator threads, one stream each.
    threads: u16,
    /// A drop test's source of the dropped class (trials only).
    drop_from: Option<std::net::IpAddr>,
    /// Both directions at once (trials only).
    bidir: bool,
    /// What port B counts (A -> B).
    range: StreamRange,
    /// What port A counts (B -> A; `range` again when one-way).
    range_rev: StreamRange,
}

/// What both directions' stream ranges share: the rate each receiving
/// port takes and what follows from it.
struct RangeShape {
    /// Generator threads, one stream each.
    threads: u16,
    /// Frames/s one direction sends (half the rate both ways).
    port_fps: f64,
    /// Every stream's sequence numbers stay below its direction's frames:
    /// one beyond them was damaged on the way.
    frames: u64,
    /// No frame n of a stream leaves before n intervals after the trial's
    /// start (the pacer never sends early): what tells a late frame from
    /// a timestamp in the future. 0: no rate.
    interval_ns: u64,
}

impl RangeShape {
    fn of(spec: Option<&TrialSpec>, threads: u16, bidir: bool) -> RangeShape {
        let port_fps = spec.map_or(0.0, |s| s.intended_fps / if bidir { 2.0 } else { 1.0 });
        RangeShape {
            threads,
            port_fps,
            frames: spec.map_or(u64::MAX, |s| Pacer::new(port_fps, s.duration).total()),
            interval_ns: if port_fps > 0.0 {
                (1e9 / port_fps) as u64
            } else {
                0
            },
        }
    }
}

/// The receivers of both ports, running for the trial.
struct Receivers<'scope, 'sig> {
    a: ScopedJoinHandle<'scope, Result<Counted, EngineError>>,
    b: ScopedJoinHandle<'scope, Result<Counted, EngineError>>,
    signals_a: &'sig ReceiverSignals,
    signals_b: &'sig ReceiverSignals,
}

impl Receivers<'_, '_> {
    fn stop(&self) {
        self.signals_a.stop.store(true, Ordering::Release);
        self.signals_b.stop.store(true, Ordering::Release);
    }
    /// Whether either receiver has ended (it failed: they run until stopped).
    fn any_ended(&self) -> bool {
        self.a.is_finished() || self.b.is_finished()
    }
    /// Stops both and takes their counts (A's, B's).
    fn finish(self) -> (Result<Counted, EngineError>, Result<Counted, EngineError>) {
        self.stop();
        (join(self.a), join(self.b))
    }
}

/// How the wait for the gateways ended.
enum Waited {
    Ready,
    /// The interrupt, a receiver that ended or the deadline: the trial
    /// cannot start.
    NotReady,
}

/// The frames each direction sends.
struct FrameSets {
    ab: FrameSet,
    ba: FrameSet,
}

/// What the phases of one trial share.
struct Trial<'a> {
    cfg: &'a EngineConfig,
    acct: Option<&'a Accounting>,
    streams: Streams,
    /// Port A's and port B's.
    ports: [&'a PortInfo; 2],
    hosts: [&'a HostConfig; 2],
    interrupt: &'a AtomicBool,
}

impl Engine {
    /// Runs the receivers (ARP only, when `spec` is None: resolving the
    /// gateways) or a whole trial.
    pub(crate) fn run(
        &mut self,
        spec: Option<&TrialSpec>,
        interrupt: &AtomicBool,
    ) -> Result<Option<TrialResult>, EngineError> {
        // First, as the streams' plan marks the time no frame leaves before.
        let recovered = match (spec, self.cfg.recovery) {
            (Some(_), Some(rule)) => self.wait_for_recovery(rule, interrupt)?,
            _ => None,
        };
        let streams = self.plan_streams(spec)?;
        if let Some(spec) = spec {
            self.check_transforms(spec)?;
            self.discover_accounting();
        }
        let result = self.run_phases(spec, streams, interrupt);
        // The next trial's check watches from here (after the straggler
        // wait): the time between trials counts towards its quiet interval.
        // Nothing of a trial whose every frame arrived is left in the DUT.
        let drained = matches!(&result, Ok(Some(r)) if r.rx_frames >= r.tx_frames);
        self.last_end =
            recovery::mark([&self.a.port.info, &self.b.port.info]).map(|m| m.drained(drained));
        result.map(|r| {
            r.map(|mut r| {
                r.recovery = recovered;
                r
            })
        })
    }

    /// Waits until the DUT has stopped forwarding earlier frames (the
    /// previous trial's backlog, or traffic of something else), up to the
    /// rule's limit: what it waited, or None for ports without counters.
    fn wait_for_recovery(
        &mut self,
        rule: recovery::QuietRule,
        interrupt: &AtomicBool,
    ) -> Result<Option<linerate_results::Recovery>, EngineError> {
        let ports = [&self.a.port.info, &self.b.port.info];
        recovery::wait_until_quiet(rule, ports, self.last_end.take(), interrupt)
    }

    /// The phases of [`Engine::run`] from the receivers' start on.
    fn run_phases(
        &mut self,
        spec: Option<&TrialSpec>,
        streams: Streams,
        interrupt: &AtomicBool,
    ) -> Result<Option<TrialResult>, EngineError> {
        let Engine {
            a,
            b,
            cfg,
            accounting,
            capture,
            ..
        } = self;
        let clocks = [a.port.rx.clock(), b.port.rx.clock()];
        let trial = Trial {
            cfg,
            acct: accounting.as_ref(),
            streams,
            ports: [&a.port.info, &b.port.info],
            hosts: [&a.host, &b.host],
            interrupt,
        };
        // Port B's frames go to the run's capture, if it has one.
        let signals = [
            ReceiverSignals::default(),
            ReceiverSignals {
                capture: capture.tap(),
                ..ReceiverSignals::default()
            },
        ];
        std::thread::scope(|scope| {
            let rx = Receivers {
                a: trial.spawn_receiver(
                    scope,
                    &mut a.port.rx,
                    0,
                    trial.streams.range_rev,
                    &signals[0],
                ),
                b: trial.spawn_receiver(scope, &mut b.port.rx, 1, trial.streams.range, &signals[1]),
                signals_a: &signals[0],
                signals_b: &signals[1],
            };
            // Both gateways must be known, and both receivers counting this
            // trial's streams, before the first test frame leaves.
            let deadline = Instant::now() + cfg.arp_timeout;
            let (gw_a, gw_b) = (&mut a.gateway_mac, &mut b.gateway_mac);
            if let Waited::NotReady = wait_for_gateways(&rx, gw_a, gw_b, deadline, interrupt) {
                let (ra, rb) = rx.finish();
                ra?;
                rb?;
                if interrupt.load(Ordering::Relaxed) {
                    return Err(EngineError::Interrupted);
                }
                let side = if gw_a.is_none() { 0 } else { 1 };
                return Err(trial.unresolved_gateway(side));
            }
            let Some(spec) = spec else {
                let (ra, rb) = rx.finish();
                ra?;
                rb?;
                return Ok(None);
            };
            let gateways = [gw_a.expect("resolved"), gw_b.expect("resolved")];
            let tx = [&mut a.port.tx, &mut b.port.tx];
            trial.measure(spec, rx, gateways, tx, clocks).map(Some)
        })
    }

    /// Checks the trial's streams against what the ports send and count,
    /// and gives them fresh ids (one stream per generator thread: each
    /// thread's sequence numbers stay dense, so the receiver counts every
    /// stream exactly).
    fn plan_streams(&mut self, spec: Option<&TrialSpec>) -> Result<Streams, EngineError> {
        let threads = self.cfg.tx_threads.max(1);
        let drop_from = self.check_stream_capacity(spec, threads)?;
        let classes: u16 = if drop_from.is_some() { 2 } else { 1 };
        let bidir = self.cfg.bidirectional && spec.is_some();
        if spec.is_some() {
            self.check_tunnel_counting(bidir)?;
        }
        let shape = RangeShape::of(spec, threads, bidir);
        let cfg = &self.cfg;
        let range = self.stream_range(
            &self.b,
            self.next_stream,
            threads * classes,
            &cfg.flows,
            cfg.tunnels.map_or(Field::DstIp, |t| t.ab),
            &shape,
        );
        let mut next = self.next_stream.wrapping_add(range.count);
        // Both directions at once: B sends streams of its own, counted at A.
        let range_rev = if bidir {
            let r = self.stream_range(
                &self.a,
                next,
                threads,
                &cfg.flows_rev,
                cfg.tunnels.map_or(Field::SrcIp, |t| t.ba),
                &shape,
            );
            next = next.wrapping_add(threads);
            r
        } else {
            range
        };
        self.next_stream = next;
        Ok(Streams {
            threads,
            drop_from,
            bidir,
            range,
            range_rev,
        })
    }

    /// A trial's streams fit the ports: port A sends one stream per
    /// generator thread, port B counts them (twice as many in a drop test,
    /// whose second class is counted as streams of its own), and a drop
    /// test's set-up is one it can run. Returns the drop test's source of
    /// the dropped class (trials only).
    fn check_stream_capacity(
        &self,
        spec: Option<&TrialSpec>,
        threads: u16,
    ) -> Result<Option<std::net::IpAddr>, EngineError> {
        let max_tx = self.a.port.tx.max_streams();
        if spec.is_some() && threads > max_tx {
            return Err(if max_tx <= 1 {
                EngineError::TxThreads
            } else {
                EngineError::TooManyTxThreads {
                    asked: threads,
                    max: max_tx,
                }
            });
        }
        let drop_from = self.cfg.drop_from.filter(|_| spec.is_some());
        if let Some(source) = drop_from {
            let v6 = self.a.host.test_ip().is_ipv6();
            crate::check_drop_test(source, v6, self.cfg.bidirectional, &self.cfg.flows)?;
        }
        let classes: u16 = if drop_from.is_some() { 2 } else { 1 };
        let rx_max = self.b.port.rx.max_streams();
        if spec.is_some() && threads * classes > rx_max {
            return Err(EngineError::TooManyTxThreads {
                asked: threads,
                max: rx_max / classes,
            });
        }
        Ok(drop_from)
    }

    /// `--tunnels` needs a receiver that sees each frame's address: the
    /// in-kernel counter counts streams, not tunnels, so a port that
    /// counts this trial's frames (B; A too both ways) must not use it.
    fn check_tunnel_counting(&self, bidir: bool) -> Result<(), EngineError> {
        if self.cfg.tunnels.is_none() {
            return Ok(());
        }
        let counting = [(&self.b, true), (&self.a, bidir)];
        if let Some((side, _)) = counting
            .iter()
            .find(|(side, counts)| *counts && side.port.rx.kind() == ReceiverKind::Kernel)
        {
            return Err(EngineError::TunnelsInKernel {
                port: side.port.info.ifname.clone(),
            });
        }
        Ok(())
    }

    /// The streams `first .. first + count` that `side` counts, of frames
    /// with `flows` (frames to a varying port are told apart by signature
    /// alone), latency sampled at the rate the port takes, and per tunnel
    /// by the address `field`. The trial's start is read from the port's
    /// clock now: no frame of the trial has left yet.
    fn stream_range(
        &self,
        side: &Side,
        first: u16,
        count: u16,
        flows: &linerate_wire::Flows,
        field: Field,
        shape: &RangeShape,
    ) -> StreamRange {
        let cfg = &self.cfg;
        StreamRange {
            first,
            count,
            udp_port: if flows.range(Field::DstPort).is_some() {
                linerate_wire::classify::ANY_PORT
            } else {
                DEFAULT_UDP_PORT
            },
            latency_every: if side.port.rx.kind().samples_latency() {
                cfg.latency_sampling.every(shape.port_fps)
            } else {
                1
            },
            check: cfg.frame_check,
            frames: shape.frames,
            not_before_ns: side.port.rx.clock().now_ns(),
            interval_ns: shape.interval_ns,
            // Per tunnel, the frames of class 0 (a drop test's dropped
            // class is in no tunnel's share).
            tunnels: cfg.tunnels.map(|t| RxTally {
                map: t.map,
                field,
                streams: shape.threads,
            }),
        }
    }

    /// Refuses a trial longer than a port's transform can carry (an ESP
    /// SA whose sequence numbers would run out: it must be rekeyed first).
    fn check_transforms(&self, spec: &TrialSpec) -> Result<(), EngineError> {
        let frames = Pacer::new(spec.intended_fps, spec.duration).total();
        for side in [&self.a, &self.b] {
            let shares = side.port.tx.transforms();
            // Each share sends 1/n of the frames (the pacer's share).
            let frames = frames.div_ceil(shares.len().max(1) as u64);
            for t in shares {
                let Some(left) = t.frames_left().filter(|&left| left < frames) else {
                    continue;
                };
                return Err(EngineError::TransformExhausted {
                    port: side.port.info.ifname.clone(),
                    transform: t.describe(),
                    left,
                    frames,
                });
            }
        }
        Ok(())
    }

    /// Finds, once the gateways are known (the DUT's MACs identify it), how
    /// lost frames are attributed: the tester ports' kinds and the DUT
    /// namespace behind them.
    fn discover_accounting(&mut self) {
        let gateways = self.a.gateway_mac.zip(self.b.gateway_mac);
        let (Some(gateways), None) = (gateways, &self.accounting) else {
            return;
        };
        let (a, b) = (&self.a.port.info, &self.b.port.info);
        self.accounting = Some(Accounting::discover(
            (a.netns.clone(), a.ifname.clone()),
            (b.netns.clone(), b.ifname.clone()),
            Some(gateways),
            self.a.host.test_ip().is_ipv6(),
        ));
    }
}

impl<'a> Trial<'a> {
    fn spawn_receiver<'scope>(
        &'scope self,
        scope: &'scope Scope<'scope, '_>,
        rx: &'scope mut Box<dyn crate::Receiver>,
        side: usize,
        range: StreamRange,
        signals: &'scope ReceiverSignals,
    ) -> ScopedJoinHandle<'scope, Result<Counted, EngineError>> {
        let (mac, host, cpus) = (
            self.ports[side].mac,
            self.hosts[side],
            &self.cfg.tester_cpus,
        );
        scope.spawn(move || {
            let _ = cpu::pin_current_thread(cpus);
            rx.receive(mac, host, range, signals)
        })
    }

    /// Why the gateway of port `side` did not answer: the ports' own state
    /// first (a gateway cannot answer on a port that is down, loopback or
    /// a bridge, nor, back to back, through one), else a timeout.
    fn unresolved_gateway(&self, side: usize) -> EngineError {
        let (info, host) = (self.ports[side], self.hosts[side]);
        for port in [info, self.ports[0], self.ports[1]] {
            if let Some(problem) = accounting::port_problem(port.netns.as_deref(), &port.ifname) {
                return EngineError::PortUnusable {
                    port: port.ifname.clone(),
                    problem,
                    what: format!(
                        "gateway {} on port {} did not answer {}",
                        host.test_gateway(),
                        info.ifname,
                        host.resolution()
                    ),
                };
            }
        }
        EngineError::ArpTimeout {
            port: info.ifname.clone(),
            gateway: host.test_gateway(),
            resolution: host.resolution(),
            secs: self.cfg.arp_timeout.as_secs(),
        }
    }

    /// The measured part of a trial, once the gateways are known and the
    /// receivers count: build the frames, send them, wait for stragglers,
    /// read the counts.
    fn measure(
        &self,
        spec: &TrialSpec,
        rx: Receivers,
        gateways: [MacAddr; 2],
        tx: [&mut Box<dyn Transmitter>; 2],
        clocks: [Clock; 2],
    ) -> Result<TrialResult, EngineError> {
        let (cfg, streams, host_b) = (self.cfg, &self.streams, self.hosts[1]);
        // Which tester ports are interfaces now, to tell one deleted
        // during the trial (one index lookup each).
        let present = self.ports.map(interface_present);
        let frames = self.frame_sets(spec, gateways);
        // The kernel's counters around the trial say where frames went.
        // The port counters see both directions and both classes of a
        // drop test: they attribute one direction of one class only.
        let counters_apply = cfg.dut_counters && !streams.bidir && frames.ab.classes() == 1;
        let before = self.acct.map(Accounting::read);
        let pacer = Pacer::new(self.per_direction(spec), spec.duration);
        // B -> A's own ranges, in the layout of B's frames.
        let flows_rev = linerate_wire::Flows {
            encap: host_b.encap(),
            ranges: cfg.flows_rev.ranges.clone(),
        };
        let (sent, sent_rev) = match self.send(spec, &frames, &flows_rev, pacer, tx, clocks) {
            Ok(sent) => sent,
            Err(e) => {
                let _ = rx.finish();
                return Err(e);
            }
        };
        // A drop test's second class is not expected back.
        let expected = (
            frames_of_class(&frames.ab, &sent.per_thread, 0),
            sent_rev.as_ref().map(|r| r.frames),
        );
        let all_dropped = || {
            let received = rx.signals_b.received.load(Ordering::Acquire);
            counters_apply
                && every_loss_counted(self.acct, before.as_ref(), pacer.total(), received, &sent)
        };
        let deadline = Instant::now() + cfg.straggler_wait;
        let drop_test = streams.drop_from.is_some();
        wait_for_stragglers(
            &rx,
            expected,
            drop_test,
            all_dropped,
            deadline,
            self.interrupt,
        );
        let (counted_a, counted_b) = rx.finish();
        let counted = [counted_a?, counted_b?];
        if self.interrupt.load(Ordering::Relaxed) {
            return Err(EngineError::Interrupted);
        }
        check_ports_still_there(self.ports, present)?;
        let after = self.acct.map(Accounting::read);
        let around = match (&before, &after) {
            (Some(b), Some(a)) if counters_apply => Some((b, a)),
            _ => None,
        };
        Ok(self.results(
            spec,
            &frames,
            (&sent, sent_rev.as_ref()),
            counted,
            around,
            &flows_rev,
        ))
    }

    /// The frames each direction sends, addressed through the gateways
    /// just resolved; a drop test's second class goes A -> B only.
    fn frame_sets(&self, spec: &TrialSpec, gateways: [MacAddr; 2]) -> FrameSets {
        let [host_a, host_b] = self.hosts;
        FrameSets {
            ab: frame_set(
                spec,
                &flow(self.ports[0], gateways[0], host_a, host_b),
                self.streams.drop_from,
            ),
            ba: frame_set(
                spec,
                &flow(self.ports[1], gateways[1], host_b, host_a),
                None,
            ),
        }
    }

    /// Sends the trial's frames: A's job, and B's at once both ways, each
    /// on the schedule `pacer` gives, stamped from the receiving port's
    /// clock. What each direction sent, or why it could not.
    fn send(
        &self,
        spec: &TrialSpec,
        frames: &FrameSets,
        flows_rev: &linerate_wire::Flows,
        pacer: Pacer,
        tx: [&mut Box<dyn Transmitter>; 2],
        clocks: [Clock; 2],
    ) -> Result<(Sent, Option<Sent>), EngineError> {
        let (cfg, streams) = (self.cfg, &self.streams);
        let per_direction = self.per_direction(spec);
        let tx_cpus = cfg.tx_cpus();
        let job = |frames, flows, stream, clock| SendJob {
            frames,
            flows,
            stream,
            streams: streams.threads,
            cpus: &tx_cpus,
            pacer,
            // Frames not sent within 1 % (+10 ms) of the duration count as lost.
            give_up_after: spec.duration + spec.duration / 100 + Duration::from_millis(10),
            // Catching up more than this many frames would be a burst a
            // DUT's input queue may not hold: the generator pauses instead.
            max_late: Some(Duration::from_secs_f64(
                cfg.catch_up_frames.max(1) as f64 / per_direction,
            )),
            clock,
            xdp_batch: cfg.xdp_batch,
        };
        let job_ab = job(&frames.ab, &cfg.flows, streams.range.first, clocks[1]);
        let job_ba = job(&frames.ba, flows_rev, streams.range_rev.first, clocks[0]);
        let [tx_a, tx_b] = tx;
        let reverse = streams.bidir.then_some((tx_b, &job_ba));
        run_generators(tx_a, &job_ab, reverse, cfg, self.interrupt)
    }

    /// Each direction's rate: all of it one way, half each way.
    fn per_direction(&self, spec: &TrialSpec) -> f64 {
        spec.intended_fps / if self.streams.bidir { 2.0 } else { 1.0 }
    }

    /// The trial's record from what was sent and counted (`counted`: at
    /// port A, at port B).
    fn results(
        &self,
        spec: &TrialSpec,
        frames: &FrameSets,
        (sent, sent_rev): (&Sent, Option<&Sent>),
        [counted_a, counted_b]: [Counted; 2],
        around: Option<(&Counters, &Counters)>,
        flows_rev: &linerate_wire::Flows,
    ) -> TrialResult {
        let a_veth = self.acct.map_or(accounting::SendingPort::Nic, |a| a.a_veth);
        let encap = self.hosts[0].encap();
        let spec_dir = TrialSpec {
            intended_fps: self.per_direction(spec),
            ..spec.clone()
        };
        let cfg = self.cfg;
        let tally = |field: fn(&TunnelTally) -> Field| cfg.tunnels.map(|t| (t.map, field(&t)));
        let ab_dir = Direction {
            flows: &cfg.flows,
            tunnels: tally(|t| t.ab),
        };
        let mut ab = summarize(
            &spec_dir, &frames.ab, sent, &counted_b, cfg, &ab_dir, encap, a_veth, around,
        );
        match sent_rev {
            None => {
                // Stray frames on A (the sending port) are as telling as on B.
                ab.stray_frames += counted_a.stray;
                ab.errored_frames += counted_a.errored;
                ab
            }
            Some(rev) => {
                let ba_dir = Direction {
                    flows: flows_rev,
                    tunnels: tally(|t| t.ba),
                };
                let ba = summarize(
                    &spec_dir, &frames.ba, rev, &counted_a, cfg, &ba_dir, encap, a_veth, None,
                );
                both_directions(spec, ab, ba)
            }
        }
    }
}

/// Waits until both gateways are known and both receivers count the
/// trial's streams, learning the gateways' MACs as the receivers hear them.
fn wait_for_gateways(
    rx: &Receivers,
    gw_a: &mut Option<MacAddr>,
    gw_b: &mut Option<MacAddr>,
    deadline: Instant,
    interrupt: &AtomicBool,
) -> Waited {
    loop {
        *gw_a = gw_a.or_else(|| rx.signals_a.gateway_mac());
        *gw_b = gw_b.or_else(|| rx.signals_b.gateway_mac());
        let ready = rx.signals_a.ready.load(Ordering::Acquire)
            && rx.signals_b.ready.load(Ordering::Acquire);
        if gw_a.is_some() && gw_b.is_some() && ready {
            return Waited::Ready;
        }
        if rx.any_ended() || interrupt.load(Ordering::Relaxed) || Instant::now() > deadline {
            return Waited::NotReady;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The test flow from port `info` (its gateway `gw`, its host `from`) to
/// the host `to` behind the other port.
fn flow(info: &PortInfo, gw: MacAddr, from: &HostConfig, to: &HostConfig) -> FlowSpec {
    FlowSpec {
        src_mac: info.mac,
        dst_mac: gw,
        src_ip: from.test_ip(),
        dst_ip: to.test_ip(),
        src_port: DEFAULT_UDP_PORT,
        dst_port: DEFAULT_UDP_PORT,
        ttl: 64,
        vlan: from.vlan,
    }
}

/// The frames of `spec` on `flow`: one size or the mix, and with
/// `drop_from`, a second class of the same frames from that source.
fn frame_set(spec: &TrialSpec, flow: &FlowSpec, drop_from: Option<std::net::IpAddr>) -> FrameSet {
    let frames_for = |flow: &FlowSpec| match &spec.mix {
        Some(mix) => FrameSet::new(flow, mix),
        None => FrameSet::single(FrameTemplate::new(flow, spec.frame)),
    };
    match drop_from {
        None => frames_for(flow),
        Some(src_ip) => FrameSet::two_classes(
            frames_for(flow),
            frames_for(&FlowSpec {
                src_ip,
                ..flow.clone()
            }),
        ),
    }
}

/// Runs the generators, each on a thread of its own so it can be pinned
/// without changing the caller's affinity: A's job, and B's at once when
/// both directions send.
fn run_generators(
    tx_a: &mut Box<dyn Transmitter>,
    job_ab: &SendJob,
    reverse: Option<(&mut Box<dyn Transmitter>, &SendJob)>,
    cfg: &EngineConfig,
    interrupt: &AtomicBool,
) -> Result<(Sent, Option<Sent>), EngineError> {
    let (sent_ab, sent_ba) = std::thread::scope(|scope| {
        let ab = scope.spawn(|| {
            let _ = cpu::pin_current_thread(&cfg.tester_cpus);
            tx_a.send(job_ab, interrupt)
        });
        let ba = reverse.map(|(tx_b, job_ba)| {
            scope.spawn(move || {
                let _ = cpu::pin_current_thread(&cfg.tester_cpus);
                tx_b.send(job_ba, interrupt)
            })
        });
        (ab.join(), ba.map(|h| h.join()))
    });
    let unwrap = |r: std::thread::Result<Result<Sent, EngineError>>| {
        r.unwrap_or_else(|_| Err(EngineError::Thread("the generator panicked".into())))
    };
    let ab = unwrap(sent_ab)?;
    let ba = sent_ba.map(unwrap).transpose()?;
    Ok((ab, ba))
}

/// Waits for frames still in flight until `deadline`: it ends early once
/// every sent frame is in (`expected`: B's and, both ways, A's count), once
/// `all_dropped` says every frame not in is counted as dropped somewhere
/// (none is left to straggle in: a trial at overload then takes its
/// duration, not its duration plus the wait), at the interrupt, or when a
/// receiver fails. A drop test's dropped class never arrives from a DUT
/// that drops it, so it cannot be waited for; frames it leaks come in order
/// with the rest, so once the legitimate class is in, the wait goes on
/// until nothing has arrived for [`LEAK_QUIET`].
fn wait_for_stragglers(
    rx: &Receivers,
    expected: (u64, Option<u64>),
    drop_test: bool,
    mut all_dropped: impl FnMut() -> bool,
    deadline: Instant,
    interrupt: &AtomicBool,
) {
    let received = |s: &ReceiverSignals| s.received.load(Ordering::Acquire);
    let all_in = || {
        received(rx.signals_b) >= expected.0
            && expected.1.is_none_or(|n| received(rx.signals_a) >= n)
    };
    let mut last_arrival = (received(rx.signals_b), Instant::now());
    // The counters are read every 50 ms (reading the DUT's spawns tc).
    let mut next_check = Instant::now() + Duration::from_millis(20);
    loop {
        let now = Instant::now();
        if now >= deadline || interrupt.load(Ordering::Relaxed) || rx.any_ended() {
            return;
        }
        if all_in() {
            if !drop_test {
                return;
            }
            let count = received(rx.signals_b);
            if count != last_arrival.0 {
                last_arrival = (count, now);
            }
            if now - last_arrival.1 >= LEAK_QUIET {
                return;
            }
        }
        if now >= next_check {
            next_check = now + Duration::from_millis(50);
            if all_dropped() {
                return;
            }
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Whether every frame of `total` not among the `received` is counted as
/// dropped by the DUT's (and the ports') counters since `before`.
fn every_loss_counted(
    acct: Option<&Accounting>,
    before: Option<&Counters>,
    total: u64,
    received: u64,
    sent: &Sent,
) -> bool {
    let (Some(acct), Some(before)) = (acct, before) else {
        return false;
    };
    if acct.dut.is_none() {
        return false;
    }
    let now = acct.read();
    let (w, _) = accounting::attribute(
        accounting::OwnCounts::new(total.saturating_sub(received), total, sent, 0),
        acct.a_veth,
        Some((before, &now)),
    );
    w.dut_read && w.rest == 0
}

/// A tester port deleted mid-trial made its counts meaningless: the
/// tester's fault, never the DUT's loss. (Only ports that were interfaces:
/// an in-memory port has no index.)
fn check_ports_still_there(ports: [&PortInfo; 2], were: [bool; 2]) -> Result<(), EngineError> {
    for ((side, info), was) in ["A", "B"].into_iter().zip(ports).zip(were) {
        if was && !interface_present(info) {
            return Err(EngineError::PortUnusable {
                port: format!("{} (port {side})", info.ifname),
                problem: "gone: it was deleted during the trial".into(),
                what: "the trial is void (nothing it counted is the DUT's); recreate the port and run again".into(),
            });
        }
    }
    Ok(())
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
    handle: ScopedJoinHandle<'_, Result<Counted, EngineError>>,
) -> Result<Counted, EngineError> {
    handle
        .join()
        .unwrap_or_else(|_| Err(EngineError::Thread("a receiver panicked".into())))
}
