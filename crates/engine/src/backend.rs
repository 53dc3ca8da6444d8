//! What the engine drives on each tester port, whatever does the work:
//! a [`Transmitter`] sends a trial's frames on schedule, a [`Receiver`]
//! runs the port's receive side (host emulation and counting).
//!
//! Socket backends (AF_PACKET, AF_XDP, the in-memory loopback) plug in
//! through [`QueueTx`] and [`QueueRx`], which run linerate's user-space
//! generator and receiver over the port's `TxQueue`/`RxQueue`. The `xdp`
//! engine ([`crate::xdp`]) does both jobs inside the kernel instead. The
//! engine calls these once per trial, so dynamic dispatch costs nothing;
//! the per-frame loops inside stay monomorphic.

use crate::generator::{generate, Schedule, Sent, Unchanged};
use crate::host::HostConfig;
use crate::pacer::Pacer;
use crate::receiver::{receive, AsSent, Counted, ReceiverSignals, StreamRange};
use crate::transform::{ReceiveTransform, SendTransform};
use crate::EngineError;
use linerate_port::{Port, PortInfo, RxQueue, TxQueue};
use linerate_wire::{Flows, FrameSet, MacAddr};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The clock a receiver stamps arrivals with; the transmitter stamps the
/// frames' scheduled send times in the same clock, so latency is the
/// difference of two readings of one clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    /// CLOCK_REALTIME: what the kernel stamps packet-socket frames with.
    Realtime,
    /// CLOCK_MONOTONIC: what XDP programs read (bpf_ktime_get_ns).
    Monotonic,
}

impl Clock {
    pub fn now_ns(self) -> u64 {
        linerate_port::clock_ns(match self {
            Clock::Realtime => libc::CLOCK_REALTIME,
            Clock::Monotonic => libc::CLOCK_MONOTONIC,
        })
    }
}

/// One trial's sending job.
pub struct SendJob<'a> {
    /// The frames: frame `n` of each stream is built from `frames.get(n)`.
    /// A set of two traffic classes doubles the streams: class 1 frames of
    /// thread k carry stream `stream + streams + k`.
    pub frames: &'a FrameSet,
    /// Fields rewritten in frame `n` (`flows.apply(frame, n)`).
    pub flows: &'a Flows,
    /// The first stream id; a job of `streams` streams sends ids
    /// `stream .. stream + streams` (wrapping), one per generator thread.
    pub stream: u16,
    /// Generator threads, one stream each (1 unless the transmitter's
    /// [`Transmitter::max_streams`] allows more). Thread k sends stream
    /// `stream + k` at `1/streams` of the pacer's rate, its share of the
    /// pacer's frames, so every stream's sequence numbers stay dense.
    pub streams: u16,
    /// With `streams` above 1: thread k runs on CPU `cpus[k % cpus.len()]`
    /// only (empty: where the calling thread may run).
    pub cpus: &'a [usize],
    pub pacer: Pacer,
    /// Stop sending at this point (pauses not counted) even if frames
    /// remain (they count as lost).
    pub give_up_after: Duration,
    /// Furthest behind schedule a generator catches up (in a burst at up
    /// to [`CATCH_UP_FACTOR`](linerate_bpf::generator::CATCH_UP_FACTOR)
    /// times the rate); beyond it the schedule moves back instead (a pause).
    pub max_late: Option<Duration>,
    /// The receiving port's clock: timestamps are written in it.
    pub clock: Clock,
    /// The xdp engine's ticks per hand-over of frames to the port
    /// ([`EngineConfig::xdp_batch`](crate::EngineConfig)); other engines
    /// ignore it.
    pub xdp_batch: u32,
}

/// Sends a trial's frames from one port.
pub trait Transmitter: Send {
    /// Sends `job`'s frames on schedule; `stop` ends the trial early.
    fn send(&mut self, job: &SendJob, stop: &AtomicBool) -> Result<Sent, EngineError>;
    /// Largest frame (without FCS) this transmitter sends.
    fn max_frame_len(&self) -> usize;
    /// Most generator threads (streams) one job may ask for.
    fn max_streams(&self) -> u16 {
        1
    }
    /// Makes sure frames sent on `port` are taken by the kernel, before
    /// the first trial; a note when it changed something to get there, or
    /// why the port does not deliver. Socket transmitters learn of every
    /// refusal from the socket itself, so they have nothing to check.
    fn ensure_delivery(&mut self, _port: &PortInfo) -> Result<Option<String>, NotDelivered> {
        Ok(None)
    }
    /// Passes every frame through `transform` before it is sent. Err: this
    /// transmitter builds its frames where no transform can run (in the
    /// kernel); the transform is handed back.
    fn set_transform(
        &mut self,
        transform: Box<dyn SendTransform>,
    ) -> Result<(), Box<dyn SendTransform>> {
        Err(transform)
    }
    /// The transforms frames pass: none, one, or one share per generator
    /// thread (see [`SendTransform::split`]).
    fn transforms(&self) -> Vec<&dyn SendTransform> {
        Vec::new()
    }
}

/// Why a transmitter does not deliver on a port.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotDelivered {
    /// The kernel refused the frames (the port cannot take them).
    #[error("{0}")]
    Refused(String),
    /// The check itself could not run.
    #[error("the delivery check failed: {0}")]
    Failed(String),
}

/// Runs one port's receive side for a trial.
pub trait Receiver: Send {
    /// Answers ARP, learns the gateway and counts the trial's test frames
    /// until `signals.stop` is set.
    fn receive(
        &mut self,
        mac: MacAddr,
        host: &HostConfig,
        range: StreamRange,
        signals: &ReceiverSignals,
    ) -> Result<Counted, EngineError>;
    /// The clock arrivals are stamped with.
    fn clock(&self) -> Clock;
    /// Most streams one trial may count.
    fn max_streams(&self) -> u16 {
        u16::MAX
    }
    /// Largest frame (without FCS) this receiver takes.
    fn max_frame_len(&self) -> usize;
    /// How it counts.
    fn kind(&self) -> ReceiverKind {
        ReceiverKind::Socket
    }
    /// Passes every arriving frame through `transform` before it is
    /// counted. Err: this receiver counts where no transform can run (in
    /// the kernel); the transform is handed back.
    fn set_transform(
        &mut self,
        transform: Box<dyn ReceiveTransform>,
    ) -> Result<(), Box<dyn ReceiveTransform>> {
        Err(transform)
    }
    /// The transform arriving frames pass, if any (with several
    /// receiving threads, the first thread's share).
    fn transform(&self) -> Option<&dyn ReceiveTransform> {
        None
    }
    /// On how many threads it receives ([`crate::SplitRx`]).
    fn receiving_threads(&self) -> usize {
        1
    }
}

/// How a receiver counts the test frames.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiverKind {
    /// linerate's XDP counter at the port's XDP hook counts and drops them.
    Kernel,
    /// Every frame goes up to linerate's receiver through a socket.
    Socket,
}

impl ReceiverKind {
    /// The name results record ("kernel", "socket").
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiverKind::Kernel => "kernel",
            ReceiverKind::Socket => "socket",
        }
    }

    /// Whether it measures latency on a sample of the frames when the
    /// trial's [`StreamRange::latency_every`] says so. A socket stamps every
    /// frame's arrival for free; the in-kernel counter reads the clock
    /// itself (see [`crate::latency_sampling`]).
    pub fn samples_latency(self) -> bool {
        self == ReceiverKind::Kernel
    }
}

/// The user-space generator over a socket's transmit queues: one
/// generator thread per queue, each its own stream (`--tx-threads`).
pub struct QueueTx<T> {
    /// Queue k is generator thread k's; at least one.
    queues: Vec<T>,
    max_frame_len: usize,
    /// None, one (on one thread), or thread k's share in `transforms[k]`.
    transforms: Vec<Box<dyn SendTransform>>,
}

impl<T> QueueTx<T> {
    /// Sends on `queue` frames up to `max_frame_len` bytes (without FCS).
    pub fn new(queue: T, max_frame_len: usize) -> Self {
        Self::with_queues(vec![queue], max_frame_len)
    }

    /// Sends from one generator thread per queue (thread k on `queues[k]`).
    ///
    /// # Panics
    ///
    /// If `queues` is empty.
    pub fn with_queues(queues: Vec<T>, max_frame_len: usize) -> Self {
        assert!(!queues.is_empty(), "a transmitter needs a queue");
        QueueTx {
            queues,
            max_frame_len,
            transforms: Vec::new(),
        }
    }
}

/// Generator thread k's schedule of a job sent by `n` threads: its own
/// stream (`stream + k`) of `flows`, its share of the pacer's frames at
/// 1/n of the rate, started now.
fn thread_schedule<'a>(job: &'a SendJob, flows: &'a Flows, n: u16, k: u16) -> Schedule<'a> {
    Schedule {
        frames: job.frames,
        flows,
        stream: job.stream.wrapping_add(k),
        class_stride: n,
        pacer: job.pacer.share(n, k),
        give_up_after: job.give_up_after,
        max_late: job.max_late,
        start_clock_ns: job.clock.now_ns(),
        start: Instant::now(),
    }
}

impl<T: TxQueue + Send> Transmitter for QueueTx<T> {
    fn send(&mut self, job: &SendJob, stop: &AtomicBool) -> Result<Sent, EngineError> {
        let n = job.streams.max(1);
        if n > self.max_streams() {
            return Err(if self.max_streams() == 1 {
                EngineError::TxThreads
            } else {
                EngineError::TooManyTxThreads {
                    asked: n,
                    max: self.max_streams(),
                }
            });
        }
        if n == 1 {
            // On the engine's generator thread, pinned by the engine. One
            // loop per transform, each compiled for it: clear frames pay
            // nothing for the stage.
            let schedule = thread_schedule(job, job.flows, 1, 0);
            let queue = &mut self.queues[0];
            return Ok(match self.transforms.first_mut() {
                None => generate(queue, &schedule, stop, &mut Unchanged)?,
                Some(transform) => generate(queue, &schedule, stop, transform.as_mut())?,
            });
        }
        // A thread per queue, each pinned to one CPU of its own, with its
        // share of the transform (if any) and the flows that share can
        // carry: every share a thread, or no thread a tunnel would miss.
        if !self.transforms.is_empty() && self.transforms.len() != n as usize {
            return Err(EngineError::TunnelsNotDealt { threads: n });
        }
        let own_flows = self
            .transforms
            .iter()
            .map(|t| t.thread_flows(job.flows))
            .collect::<Option<Vec<Flows>>>()
            .ok_or(EngineError::TunnelsNotDealt { threads: n })?;
        let mut shares: Vec<Option<&mut Box<dyn SendTransform>>> =
            self.transforms.iter_mut().map(Some).collect();
        shares.resize_with(n as usize, || None);
        let threads = self.queues[..n as usize].iter_mut().zip(shares);
        let parts = crate::cpu::on_pinned_threads(threads, job.cpus, |k, (queue, share)| {
            let flows = own_flows.get(k).unwrap_or(job.flows);
            let schedule = thread_schedule(job, flows, n, k as u16);
            Ok(match share {
                None => generate(queue, &schedule, stop, &mut Unchanged)?,
                Some(t) => generate(queue, &schedule, stop, t.as_mut())?,
            })
        })?;
        let mut sent = Sent::of_threads(parts);
        if !self.transforms.is_empty() {
            sent.thread_flows = own_flows;
        }
        Ok(sent)
    }
    /// One stream per queue; with a transform, one per share of it (one
    /// when it could not be split: an ESP SA's sequence numbers belong to
    /// one thread).
    fn max_streams(&self) -> u16 {
        let streams = match self.transforms.len() {
            0 => self.queues.len(),
            n => n,
        };
        streams.min(u16::MAX as usize) as u16
    }
    fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
    /// With several queues the transform is dealt out to them, one share
    /// per generator thread, where it can be.
    fn set_transform(
        &mut self,
        mut transform: Box<dyn SendTransform>,
    ) -> Result<(), Box<dyn SendTransform>> {
        self.transforms = match self.queues.len() {
            1 => vec![transform],
            n => transform.split(n).unwrap_or_else(|| vec![transform]),
        };
        Ok(())
    }
    fn transforms(&self) -> Vec<&dyn SendTransform> {
        self.transforms.iter().map(|t| t.as_ref()).collect()
    }
}

/// The user-space receiver over a socket's receive queue. Socket backends
/// hand over CLOCK_REALTIME arrival times (the `RxQueue` contract).
pub struct QueueRx<R> {
    queue: R,
    max_frame_len: usize,
    transform: Option<Box<dyn ReceiveTransform>>,
}

impl<R> QueueRx<R> {
    /// Receives on `queue` frames up to `max_frame_len` bytes (without FCS).
    pub fn new(queue: R, max_frame_len: usize) -> Self {
        QueueRx {
            queue,
            max_frame_len,
            transform: None,
        }
    }
}

impl<R: RxQueue> Receiver for QueueRx<R> {
    fn receive(
        &mut self,
        mac: MacAddr,
        host: &HostConfig,
        range: StreamRange,
        signals: &ReceiverSignals,
    ) -> Result<Counted, EngineError> {
        Ok(match self.transform.as_deref_mut() {
            None => receive(
                &mut self.queue,
                mac,
                host,
                range,
                signals,
                || 0,
                &mut AsSent,
            )?,
            Some(t) => receive(&mut self.queue, mac, host, range, signals, || 0, t)?,
        })
    }
    fn clock(&self) -> Clock {
        Clock::Realtime
    }
    fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
    fn set_transform(
        &mut self,
        transform: Box<dyn ReceiveTransform>,
    ) -> Result<(), Box<dyn ReceiveTransform>> {
        self.transform = Some(transform);
        Ok(())
    }
    fn transform(&self) -> Option<&dyn ReceiveTransform> {
        self.transform.as_deref()
    }
}

/// One tester port as the engine drives it.
pub struct TesterPort {
    pub tx: Box<dyn Transmitter>,
    pub rx: Box<dyn Receiver>,
    pub info: PortInfo,
}

impl TesterPort {
    /// A socket port driven by the user-space generator and receiver.
    pub fn from_port<P: Port>(port: P) -> TesterPort
    where
        P::Tx: 'static,
        P::Rx: 'static,
    {
        let (tx, rx, info) = port.split();
        TesterPort::from_queues(vec![tx], vec![rx], info)
    }

    /// A socket port whose generator threads send on `tx`, one queue each
    /// (`--tx-threads`), and whose receiving threads read `rx`, one queue
    /// each (`--rx-threads`: the queues must give each thread whole
    /// streams, see [`crate::SplitRx`]).
    pub fn from_queues<T, R>(tx: Vec<T>, rx: Vec<R>, info: PortInfo) -> TesterPort
    where
        T: TxQueue + Send + 'static,
        R: RxQueue + 'static,
    {
        let max = info.max_frame_len;
        let mut parts: Vec<Box<dyn Receiver>> = rx
            .into_iter()
            .map(|q| Box::new(QueueRx::new(q, max)) as Box<dyn Receiver>)
            .collect();
        let rx = if parts.len() == 1 {
            parts.pop().expect("one receiver")
        } else {
            Box::new(crate::SplitRx::new(parts))
        };
        TesterPort {
            tx: Box::new(QueueTx::with_queues(tx, max)),
            rx,
            info,
        }
    }

    /// Passes every frame this port sends through `send`, and every frame
    /// it receives through `receive`, before it is counted. Refused by an
    /// engine that builds or counts frames in the kernel (`engine` names it
    /// in the error).
    pub fn set_transforms(
        &mut self,
        send: Option<Box<dyn SendTransform>>,
        receive: Option<Box<dyn ReceiveTransform>>,
        engine: &str,
    ) -> Result<(), EngineError> {
        let unsupported = || EngineError::TransformUnsupported {
            engine: engine.to_string(),
        };
        if let Some(t) = send {
            self.tx.set_transform(t).map_err(|_| unsupported())?;
        }
        if let Some(t) = receive {
            self.rx.set_transform(t).map_err(|_| unsupported())?;
        }
        Ok(())
    }

    /// How much longer than the test frame of `len` bytes the longest frame
    /// this port carries is (what its transforms add).
    pub fn growth(&self, len: usize) -> usize {
        let send = self
            .tx
            .transforms()
            .iter()
            .map(|t| t.growth(len))
            .max()
            .unwrap_or(0);
        let receive = self.rx.transform().map_or(0, |t| t.growth(len));
        send.max(receive)
    }

    /// Largest frame both halves handle.
    pub fn max_frame_len(&self) -> usize {
        self.info
            .max_frame_len
            .min(self.tx.max_frame_len())
            .min(self.rx.max_frame_len())
    }
}
