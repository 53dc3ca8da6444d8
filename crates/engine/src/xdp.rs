//! The `xdp` engine: frames generated and counted inside the kernel.
//!
//! - [`XdpTransmitter`]: the in-kernel generator (linerate-bpf
//!   `generator`), one `BPF_PROG_RUN` call per trial and generator thread,
//!   paced in the program; a watcher thread ends each call when that
//!   thread's frames are out. With `--tx-threads N` there are N generator
//!   threads, each pinned to one CPU and sending a stream of its own at
//!   1/N of the rate (its own copy of the program, so nothing is shared).
//! - [`XdpReceiver`]: the in-kernel counter at the port's XDP hook, which
//!   counts and drops test frames, in front of an AF_PACKET socket that still
//!   sees everything else (ARP) for the host emulation.

use crate::backend::{Clock, NotDelivered, Receiver, ReceiverKind, SendJob, Transmitter};
use crate::generator::Sent;
use crate::host::HostConfig;
use crate::pacer::Pacer;
use crate::receiver::{receive, Counted, ReceiverSignals, StreamRange};
use crate::stats::StreamStats;
use crate::EngineError;
use linerate_bpf::counter::{bucket_range, XdpCounter};
use linerate_bpf::generator::{GenProgress, GenTrial, Stopper, XdpGenerator, MAX_FRAME_LEN};
use linerate_bpf::tx_watch::{TxTally, TxWatch};
use linerate_bpf::xsk::{XdpAttachMode, XskRedirect};
use linerate_port::netns::maybe_in_netns;
use linerate_port::{PortInfo, RxQueue};
use linerate_wire::template::DEFAULT_UDP_PORT;
use linerate_wire::{FlowSpec, FrameSet, FrameTemplate, MacAddr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the watcher looks at the generator's progress.
const WATCH: Duration = Duration::from_millis(1);

/// Sends with the in-kernel generator out of one interface: one generator
/// thread per stream, each with its own copy of the generator program.
pub struct XdpTransmitter {
    /// Loaded as needed: one per generator thread a trial asks for.
    generators: Vec<XdpGenerator>,
    ifindex: u32,
    netns: Option<String>,
    max_streams: u16,
    /// What the kernel did with the frames: only frames it took count as
    /// sent.
    watch: TxWatch,
    /// A pass-everything XDP program linerate attached to the sending port
    /// because its driver transmits XDP frames only then; detached on drop.
    pass: Option<XskRedirect>,
}

impl XdpTransmitter {
    /// Loads the generator for `port` (nothing is attached: each trial
    /// names the interface). A trial may run up to `max_streams` generator
    /// threads (the receiver's stream capacity).
    pub fn new(port: &PortInfo, max_streams: u16) -> Result<XdpTransmitter, EngineError> {
        let ifindex = maybe_in_netns(port.netns.as_deref(), || {
            linerate_port::link::ifindex(&port.ifname)
        })?;
        Ok(XdpTransmitter {
            generators: vec![XdpGenerator::load()?],
            ifindex,
            netns: port.netns.clone(),
            max_streams: max_streams.max(1),
            watch: TxWatch::attach()?,
            pass: None,
        })
    }
}

impl XdpTransmitter {
    /// Sends a few frames and checks that the kernel took every one: an
    /// in-kernel generator that loads is not yet one that delivers (a veth
    /// whose peer has no NAPI, a NIC driver that wants an XDP program on
    /// the sending port). The frames are addressed to the port's own MAC,
    /// so whatever receives them discards them. Returns why not, if not.
    fn probe(&mut self, mac: MacAddr) -> Result<(), NotDelivered> {
        const FRAMES: u64 = 32;
        let flow = FlowSpec {
            src_mac: mac,
            dst_mac: mac,
            src_ip: std::net::Ipv4Addr::new(192, 0, 2, 1).into(),
            dst_ip: std::net::Ipv4Addr::new(192, 0, 2, 2).into(),
            src_port: DEFAULT_UDP_PORT,
            dst_port: DEFAULT_UDP_PORT,
            ttl: 1,
            vlan: None,
        };
        let frames = FrameSet::single(FrameTemplate::new(
            &flow,
            linerate_wire::FrameSize::from_frame(64).expect("64 is a frame size"),
        ));
        let fps = 100_000.0;
        let job = SendJob {
            frames: &frames,
            flows: &linerate_wire::Flows::default(),
            stream: 0,
            streams: 1,
            cpus: &[],
            pacer: Pacer::new(fps, Duration::from_secs_f64(FRAMES as f64 / fps)),
            give_up_after: Duration::from_secs(1),
            max_late: None,
            clock: Clock::Monotonic,
            xdp_batch: linerate_bpf::generator::DEFAULT_BATCH,
        };
        let sent = self
            .send(&job, &AtomicBool::new(false))
            .map_err(|e| NotDelivered::Failed(e.to_string()))?;
        if sent.handed == 0 {
            return Err(NotDelivered::Failed(
                "the in-kernel generator sent nothing".into(),
            ));
        }
        if sent.refused > 0 {
            return Err(NotDelivered::Refused(format!(
                "the kernel refused {} of {} frames: {}",
                sent.refused,
                sent.handed,
                sent.refusal.unwrap_or_else(|| "no reason given".into())
            )));
        }
        Ok(())
    }
}

pub use crate::pacer::share;

impl Transmitter for XdpTransmitter {
    fn send(&mut self, job: &SendJob, stop: &AtomicBool) -> Result<Sent, EngineError> {
        let n = job.streams.max(1);
        if n > self.max_streams {
            return Err(EngineError::TooManyTxThreads {
                asked: n,
                max: self.max_streams,
            });
        }
        while self.generators.len() < n as usize {
            self.generators.push(XdpGenerator::load()?);
        }
        let total = job.pacer.total();
        let clock_offset_ns = job.clock.now_ns().wrapping_sub(Clock::Monotonic.now_ns());
        // Thread k: stream + k, every n-th frame's worth of the rate.
        for (k, generator) in self.generators[..n as usize].iter_mut().enumerate() {
            generator.configure(&GenTrial {
                frames: job.frames,
                flows: job.flows,
                stream: job.stream.wrapping_add(k as u16),
                class_stride: n,
                total: share(total, n, k as u16),
                interval_ns: job.pacer.interval_ns() * n as f64,
                give_up: job.give_up_after,
                max_late: job.max_late,
                clock_offset_ns,
                batch: job.xdp_batch,
            })?;
        }
        let (ifindex, netns, watch) = (self.ifindex, self.netns.as_deref(), &self.watch);
        let progress = if n == 1 {
            // On the engine's generator thread, pinned by the engine.
            vec![run_one(
                &self.generators[0],
                watch,
                ifindex,
                netns,
                job,
                stop,
            )?]
        } else {
            // A thread per generator, each pinned to one CPU of its own.
            let generators = &self.generators[..n as usize];
            crate::cpu::on_pinned_threads(generators, job.cpus, |_, generator| {
                run_one(generator, watch, ifindex, netns, job, stop)
            })?
        };
        // Frames: all threads'; send time: the longest thread's. Only a
        // frame the kernel reports as taken was sent, whatever the program
        // returned: every other frame it handed over was refused.
        let taken = |(p, t): &(GenProgress, TxTally)| (t.sent + t.ring_full).min(p.sent);
        Ok(Sent {
            frames: progress.iter().map(taken).sum(),
            per_thread: progress.iter().map(taken).collect(),
            thread_flows: Vec::new(),
            handed: progress.iter().map(|(p, _)| p.sent).sum(),
            refused: progress.iter().map(|pt| pt.0.sent - taken(pt)).sum(),
            ring_full: progress.iter().map(|(_, t)| t.ring_full).sum(),
            refusal: progress
                .iter()
                .find(|(_, t)| t.last_err != 0)
                .map(|(_, t)| refusal_reason(t.last_err)),
            send_time: progress
                .iter()
                .map(|(p, _)| Duration::from_nanos(p.last_ns.saturating_sub(p.start_ns)))
                .max()
                .unwrap_or_default(),
            max_stall: Duration::from_nanos(
                progress
                    .iter()
                    .map(|(p, _)| p.max_stall_ns)
                    .max()
                    .unwrap_or(0),
            ),
            // The longest thread's pauses: the threads pause independently.
            paused: Duration::from_nanos(
                progress.iter().map(|(p, _)| p.shift_ns).max().unwrap_or(0),
            ),
            pauses: progress.iter().map(|(p, _)| p.shifts).sum(),
        })
    }

    fn max_frame_len(&self) -> usize {
        MAX_FRAME_LEN
    }

    fn max_streams(&self) -> u16 {
        self.max_streams
    }

    /// Makes sure the port delivers (see `XdpTransmitter::probe`). Several
    /// NIC drivers (ixgbe, i40e, ice among them) transmit XDP frames only
    /// while an XDP program is attached to the sending interface itself:
    /// if the first probe fails and the port has no program, a program that
    /// passes every frame on is attached in native mode (the tester's own
    /// port; removed when the transmitter is dropped) and the probe is
    /// repeated. Returns a note when it attached one, or why the port does
    /// not deliver.
    fn ensure_delivery(&mut self, port: &PortInfo) -> Result<Option<String>, NotDelivered> {
        let why = match self.probe(port.mac) {
            Ok(()) => return Ok(None),
            Err(why @ NotDelivered::Refused(_)) => why,
            Err(failed) => return Err(failed),
        };
        let mut pass = XskRedirect::load().map_err(|_| why.clone())?;
        let attached = maybe_in_netns(port.netns.as_deref(), || {
            let ifindex = linerate_port::link::ifindex(&port.ifname)?;
            Ok(pass.attach(ifindex as i32, &port.ifname, false))
        });
        if !matches!(attached, Ok(Ok(()))) || pass.attach_mode() != Some(XdpAttachMode::Native) {
            return Err(why);
        }
        self.pass = Some(pass);
        match self.probe(port.mac) {
            Ok(()) => Ok(Some(format!(
                "attached a pass-through XDP program to {} so that its driver transmits XDP frames",
                port.ifname
            ))),
            Err(_) => {
                self.pass = None;
                Err(why)
            }
        }
    }
}

/// Why the kernel refused XDP frames, from the errno it gave, with the fix.
pub fn refusal_reason(err: i32) -> String {
    match -err {
        libc::EOPNOTSUPP => "the port does not accept XDP frames for transmission (no ndo_xdp_xmit advertised: a veth whose peer has neither an XDP program nor GRO, or a NIC driver that wants an XDP program on the sending port)".into(),
        libc::ENXIO => "the port's peer cannot receive XDP frames (a veth whose peer has no NAPI: no XDP program, GRO off, or down)".into(),
        libc::ENETDOWN => "the port is down".into(),
        libc::EMSGSIZE => "the frame is larger than the port's MTU".into(),
        e => format!("error {e} ({})", std::io::Error::from_raw_os_error(e)),
    }
}

/// Runs one configured generator on the calling thread, in the port's
/// namespace, until its frames are out, the give-up time has passed or
/// `stop` is set; a watcher thread ends the call. Returns where it ended
/// and what the kernel did with the frames.
fn run_one(
    generator: &XdpGenerator,
    watch: &TxWatch,
    ifindex: u32,
    netns: Option<&str>,
    job: &SendJob,
    stop: &AtomicBool,
) -> Result<(GenProgress, TxTally), EngineError> {
    let total = generator.total();
    let (ended, finished) = (AtomicBool::new(false), AtomicBool::new(false));
    let stopper = Stopper::for_current_thread();
    let started = Instant::now();
    let (run, watched, tally) = std::thread::scope(|scope| {
        let watcher = scope.spawn(|| -> Result<(), EngineError> {
            let outcome = loop {
                let p = match generator.progress() {
                    Ok(p) => p,
                    Err(e) => break Err(e.into()),
                };
                let sending_for = if p.start_ns == 0 {
                    started.elapsed()
                } else {
                    Duration::from_nanos(Clock::Monotonic.now_ns().saturating_sub(p.start_ns))
                };
                // Pauses of a shifted schedule do not count, up to a
                // tenth more than the give-up time (pacer::sending_limit).
                let on_schedule = sending_for.saturating_sub(Duration::from_nanos(p.shift_ns));
                if p.sent >= total
                    || on_schedule > job.give_up_after
                    || sending_for > crate::pacer::sending_limit(job.give_up_after)
                    || stop.load(Ordering::Relaxed)
                {
                    break Ok(());
                }
                std::thread::sleep(WATCH);
            };
            stopper.stop(&ended, &finished);
            outcome
        });
        // The flushes that report the frames run on this thread, inside
        // its BPF_PROG_RUN call: it registers before and reads after.
        let run = match watch.start(ifindex) {
            Ok(()) => maybe_in_netns(netns, || Ok(generator.run(ifindex, &ended))),
            Err(e) => Ok(Err(e)),
        };
        let tally = watch.finish();
        finished.store(true, Ordering::Release);
        let watched = watcher
            .join()
            .map_err(|_| EngineError::Thread("the generator's watcher panicked".into()));
        (run, watched, tally)
    });
    run??;
    watched??;
    Ok((generator.progress()?, tally?))
}

// The kernel counts sequence errors under user space's threshold.
const _: () = assert!(crate::stats::BIG_GAP == linerate_bpf::counter::BIG_GAP);

/// Counts with the in-kernel counter; a packet socket behind it handles
/// ARP (the counter passes every frame that is not a test frame).
pub struct XdpReceiver<R> {
    counter: XdpCounter,
    max_streams: u16,
    control: R,
    max_frame_len: usize,
}

impl<R: RxQueue> XdpReceiver<R> {
    /// Loads the counter for up to `max_streams` streams per trial and
    /// attaches it to `port`; `control` is a socket on the same port.
    /// `generic`: the port receives through a CPU's backlog, and the
    /// counter attaches behind it (generic mode), see [`XdpCounter::attach`].
    pub fn new(
        port: &PortInfo,
        control: R,
        max_streams: u16,
        generic: bool,
    ) -> Result<Self, EngineError> {
        let mut counter = XdpCounter::load(max_streams)?;
        maybe_in_netns(port.netns.as_deref(), || {
            let ifindex = linerate_port::link::ifindex(&port.ifname)?;
            Ok(counter.attach(ifindex, &port.ifname, generic))
        })??;
        Ok(XdpReceiver {
            counter,
            max_streams,
            control,
            max_frame_len: port.max_frame_len,
        })
    }
}

impl<R: RxQueue> Receiver for XdpReceiver<R> {
    fn receive(
        &mut self,
        mac: MacAddr,
        host: &HostConfig,
        range: StreamRange,
        signals: &ReceiverSignals,
    ) -> Result<Counted, EngineError> {
        self.counter.start_trial(
            range.first,
            range.count,
            range.udp_port,
            range.latency_every,
            range.check,
            range.frames,
            linerate_bpf::counter::SentFrom {
                not_before_ns: range.not_before_ns,
                interval_ns: range.interval_ns,
            },
        )?;
        let counter = &self.counter;
        // The counter counts in the kernel; its socket sees only ARP.
        let in_kernel = || counter.received().unwrap_or(0);
        let mut counted = receive(
            &mut self.control,
            mac,
            host,
            range,
            signals,
            in_kernel,
            &mut crate::receiver::AsSent,
        )?;
        let kernel = self.counter.read()?;
        for (stats, k) in counted.streams.iter_mut().zip(kernel.streams) {
            let from_kernel = StreamStats::from_counts(
                k.received,
                k.duplicated,
                k.reordered,
                k.seq_errors,
                k.latency_sum_ns,
                (k.latency_min_ns, k.latency_max_ns),
                k.histogram.iter().enumerate().map(|(i, &n)| {
                    let (lo, hi) = bucket_range(i);
                    (lo, hi, n)
                }),
            );
            // Frames the socket saw (none, normally: the program drops them
            // before) are added to the kernel's.
            stats.merge(&from_kernel);
        }
        counted.stray += kernel.stray;
        counted.errored += kernel.errored;
        counted.latency_every = range.latency_every;
        counted.receiver = self.kind();
        Ok(counted)
    }

    fn clock(&self) -> Clock {
        Clock::Monotonic
    }

    fn max_streams(&self) -> u16 {
        self.max_streams
    }

    fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    fn kind(&self) -> ReceiverKind {
        ReceiverKind::Kernel
    }
}

#[cfg(test)]
mod tests {
    use super::share;

    #[test]
    fn shares_add_up_exactly() {
        for (total, n) in [
            (50_000u64, 3u16),
            (100_000, 2),
            (7, 4),
            (1, 2),
            (0, 3),
            (5, 1),
        ] {
            let shares: Vec<u64> = (0..n).map(|k| share(total, n, k)).collect();
            assert_eq!(shares.iter().sum::<u64>(), total, "{total} over {n}");
            let (lo, hi) = (shares.iter().min().unwrap(), shares.iter().max().unwrap());
            assert!(hi - lo <= 1, "{total} over {n}: {shares:?}");
        }
        assert_eq!(
            (0..3).map(|k| share(50_000, 3, k)).collect::<Vec<_>>(),
            [16_667, 16_667, 16_666]
        );
    }
}
