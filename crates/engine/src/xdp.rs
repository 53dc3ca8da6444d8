//! The `xdp` engine: frames generated and counted inside the kernel.
//!
//! - [`XdpTransmitter`]: the in-kernel generator (linerate-bpf
//!   `generator`), one `BPF_PROG_RUN` call per trial on the engine's
//!   generator thread, paced in the program; a watcher thread ends the call
//!   when the trial's frames are out.
//! - [`XdpReceiver`]: the in-kernel counter at the port's XDP hook, which
//!   counts and drops test frames, in front of an AF_PACKET socket that still
//!   sees everything else (ARP) for the host emulation.

use crate::backend::{Clock, Receiver, SendJob, Transmitter};
use crate::generator::Sent;
use crate::host::HostConfig;
use crate::receiver::{receive, Counted, ReceiverSignals, StreamRange};
use crate::stats::StreamStats;
use crate::EngineError;
use linerate_bpf::counter::{bucket_range, XdpCounter};
use linerate_bpf::generator::{GenTrial, Stopper, XdpGenerator, MAX_FRAME_LEN};
use linerate_port::netns::maybe_in_netns;
use linerate_port::{PortInfo, RxQueue};
use linerate_wire::template::DEFAULT_UDP_PORT;
use linerate_wire::MacAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the watcher looks at the generator's progress.
const WATCH: Duration = Duration::from_millis(1);

/// Sends with the in-kernel generator out of one interface.
pub struct XdpTransmitter {
    generator: XdpGenerator,
    ifindex: u32,
    netns: Option<String>,
}

impl XdpTransmitter {
    /// Loads the generator for `port` (nothing is attached: each trial
    /// names the interface).
    pub fn new(port: &PortInfo) -> Result<XdpTransmitter, EngineError> {
        let ifindex = maybe_in_netns(port.netns.as_deref(), || {
            linerate_port::link::ifindex(&port.ifname)
        })?;
        Ok(XdpTransmitter {
            generator: XdpGenerator::load()?,
            ifindex,
            netns: port.netns.clone(),
        })
    }
}

impl Transmitter for XdpTransmitter {
    fn send(&mut self, job: &SendJob, stop: &AtomicBool) -> Result<Sent, EngineError> {
        let total = job.pacer.total();
        let clock_offset_ns = job.clock.now_ns().wrapping_sub(Clock::Monotonic.now_ns());
        self.generator.configure(&GenTrial {
            template: job.template,
            stream: job.stream,
            total,
            interval_ns: job.pacer.interval_ns(),
            give_up: job.give_up_after,
            clock_offset_ns,
        })?;
        let generator = &self.generator;
        let (ended, finished) = (AtomicBool::new(false), AtomicBool::new(false));
        let stopper = Stopper::for_current_thread();
        let started = Instant::now();
        // The call runs on this thread (pinned by the engine); a watcher
        // ends it once every frame is out, the give-up time has passed, or
        // the trial is interrupted.
        let run = std::thread::scope(|scope| {
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
                    if p.sent >= total
                        || sending_for > job.give_up_after
                        || stop.load(Ordering::Relaxed)
                    {
                        break Ok(());
                    }
                    std::thread::sleep(WATCH);
                };
                stopper.stop(&ended, &finished);
                outcome
            });
            let run = maybe_in_netns(self.netns.as_deref(), || {
                Ok(generator.run(self.ifindex, &ended))
            });
            finished.store(true, Ordering::Release);
            let watched = watcher
                .join()
                .map_err(|_| EngineError::Thread("the generator's watcher panicked".into()));
            (run, watched)
        });
        let (run, watched) = run;
        run??;
        watched??;
        let p = self.generator.progress()?;
        if std::env::var_os("LINERATE_DEBUG").is_some() {
            eprintln!("xdp generator: {p:?}");
        }
        Ok(Sent {
            frames: p.sent,
            send_time: Duration::from_nanos(p.last_ns.saturating_sub(p.start_ns)),
        })
    }

    fn max_frame_len(&self) -> usize {
        MAX_FRAME_LEN
    }
}

/// Counts with the in-kernel counter; a packet socket behind it handles
/// ARP (the counter passes every frame that is not a test frame).
pub struct XdpReceiver<R> {
    counter: XdpCounter,
    control: R,
    max_frame_len: usize,
}

impl<R: RxQueue> XdpReceiver<R> {
    /// Loads the counter for up to `max_streams` streams per trial and
    /// attaches it to `port`; `control` is a socket on the same port.
    pub fn new(port: &PortInfo, control: R, max_streams: u16) -> Result<Self, EngineError> {
        let mut counter = XdpCounter::load(max_streams)?;
        maybe_in_netns(port.netns.as_deref(), || {
            let ifindex = linerate_port::link::ifindex(&port.ifname)?;
            Ok(counter.attach(ifindex, &port.ifname))
        })??;
        Ok(XdpReceiver {
            counter,
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
        self.counter
            .start_trial(range.first, range.count, DEFAULT_UDP_PORT)?;
        let counter = &self.counter;
        let mut counted = receive(&mut self.control, mac, host, range, signals, || {
            counter.received().unwrap_or(0)
        })?;
        let (kernel, stray) = self.counter.read()?;
        for (stats, k) in counted.streams.iter_mut().zip(kernel) {
            let from_kernel = StreamStats::from_counts(
                k.received,
                k.duplicated,
                k.reordered,
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
        counted.stray += stray;
        Ok(counted)
    }

    fn clock(&self) -> Clock {
        Clock::Monotonic
    }

    fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
}
