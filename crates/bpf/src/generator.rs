//! The in-kernel generator: test frames built, stamped, paced and sent by
//! an XDP program run with `BPF_PROG_RUN` in live-frames mode (the
//! technique of xdp-tools' xdp-trafficgen). See `bpf/xdp_gen.bpf.c` for why
//! the pacing happens in the program.
//!
//! A trial is one long system call on the generator thread
//! ([`XdpGenerator::run`]); another thread watches [`XdpGenerator::progress`]
//! and ends the call when the trial is over with [`Stopper::stop`], which
//! sets a flag and interrupts the call with a signal.
//!
//! Each [`XdpGenerator`] is its own copy of the BPF object, with its own
//! configuration and state maps. Several generator threads (one stream
//! each) therefore each load one: their state never mixes, whichever CPUs
//! they run on (see `bpf/xdp_gen.bpf.c` for why the maps are not per-CPU).

use crate::{as_bytes, bpf_object, load, map, read_words, BpfError};
use libbpf_rs::{MapCore, MapFlags, Object};
use linerate_wire::flows::{Mode, MAX_RANGES};
use linerate_wire::mix::{MAX_SET_SEQUENCE as MAX_SEQUENCE, MAX_SET_TEMPLATES as MAX_SIZES};
use linerate_wire::template::SIGNATURE_OFFSET;
use linerate_wire::Flows;
use linerate_wire::FrameSet;
use std::os::fd::{AsFd, AsRawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;
use std::time::Duration;

/// `BPF_F_TEST_XDP_LIVE_FRAMES`: transmit the frames instead of returning them.
const BPF_F_TEST_XDP_LIVE_FRAMES: u32 = 1 << 1;

/// Largest frame (without FCS) live-frames mode sends: a frame must fit one
/// page together with the XDP headroom and the kernel's bookkeeping
/// (4096 - 256 headroom - 320 skb_shared_info - the page-pool header), with
/// a margin so the figure holds across kernel versions.
pub const MAX_FRAME_LEN: usize = 3_000;

/// After a stall the generator catches up at most this many times faster
/// than the trial's rate (see `bpf/xdp_gen.bpf.c`).
pub const CATCH_UP_FACTOR: f64 = 4.0;

/// Mirrors `struct gen_config` in xdp_gen.bpf.c.
#[repr(C)]
#[derive(Clone, Copy)]
struct GenConfig {
    interval_q16: u64,
    total: u64,
    give_up_ns: u64,
    clock_offset: u64,
    min_gap_ns: u64,
    csum_base: [u32; MAX_SIZES],
    trim: [u32; MAX_SIZES],
    seq_len: u32,
    stream: u16,
    pad: u16,
    sequence: [u8; MAX_SEQUENCE],
    headers: [[u8; SIGNATURE_OFFSET]; MAX_SIZES],
    stream_add: [u16; MAX_SIZES],
    nranges: u32,
    pad2: u32,
    ranges: [Range; MAX_RANGES],
    sig_offset: u32,
    pad3: u32,
    headers_ext: [[u8; HEADERS_EXT]; MAX_SIZES],
    max_late_ns: u64,
}

/// Header bytes past [`SIGNATURE_OFFSET`] in the largest layout (IPv6
/// with a VLAN tag: signature at 66).
const HEADERS_EXT: usize = 66 - SIGNATURE_OFFSET;
// No implicit padding: every byte handed to the kernel is initialised.
const _: () = assert!(
    std::mem::size_of::<GenConfig>()
        == 5 * 8
            + MAX_SIZES * 4
            + MAX_SIZES * 4
            + 4
            + 2
            + 2
            + MAX_SEQUENCE
            + MAX_SIZES * SIGNATURE_OFFSET
            + MAX_SIZES * 2
            + 8
            + MAX_RANGES * 40
            + 8
            + MAX_SIZES * HEADERS_EXT
            + 8
);

/// Mirrors `struct lr_range`: one varying field.
#[repr(C)]
#[derive(Clone, Copy, Default)]
struct Range {
    min: u64,
    span: u64,
    start_off: u64,
    step: u64,
    offset: u16,
    width: u8,
    mode: u8,
    in_ip: u8,
    in_udp: u8,
    field: u8,
    pad: u8,
}
const _: () = assert!(std::mem::size_of::<Range>() == 40);

/// What one trial sends.
pub struct GenTrial<'a> {
    /// One size or a mix (at most `MAX_SIZES` sizes, `MAX_SEQUENCE` long).
    pub frames: &'a FrameSet,
    /// Fields that vary per frame (at most `MAX_RANGES`).
    pub flows: &'a Flows,
    pub stream: u16,
    /// Class `c` frames of the set carry stream `stream + c * class_stride`.
    pub class_stride: u16,
    /// Frames in the trial.
    pub total: u64,
    /// Nanoseconds between frames (1e9 / rate).
    pub interval_ns: f64,
    /// Stop sending this long after the first frame (not counting the
    /// pauses of a shifted schedule) even if frames remain.
    pub give_up: Duration,
    /// Furthest behind schedule the generator catches up; beyond it the
    /// schedule is shifted (a pause) rather than caught up in a burst.
    /// None: always catch up.
    pub max_late: Option<Duration>,
    /// The receiver's clock minus CLOCK_MONOTONIC (wrapping), so timestamps
    /// are in the clock the receiver stamps arrivals with.
    pub clock_offset_ns: u64,
    /// Ticks of the program between two hand-overs of the frames it made
    /// to the port ([`DEFAULT_BATCH`] up to [`MAX_BATCH`]): see
    /// [`XdpGenerator::run`].
    pub batch: u32,
}

/// The kernel's own batch of live frames (NAPI_POLL_WEIGHT).
pub const DEFAULT_BATCH: u32 = 64;
/// The most the kernel takes (TEST_XDP_MAX_BATCH).
pub const MAX_BATCH: u32 = 256;

/// Mirrors `struct gen_state`: where the trial stands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GenProgress {
    /// Frames sent so far.
    pub sent: u64,
    /// CLOCK_MONOTONIC of the first program run (0: not started).
    pub start_ns: u64,
    /// CLOCK_MONOTONIC when the last frame was stamped.
    pub last_ns: u64,
    /// Program runs, sending or idle.
    pub ticks: u64,
    /// Longest time between two program runs while frames remained: the
    /// generator's worst stall (preemption, interrupts), in ns.
    pub max_stall_ns: u64,
    /// How far the schedule was shifted in all (pauses instead of
    /// catch-up bursts), in ns.
    pub shift_ns: u64,
    /// How many times it was shifted.
    pub shifts: u64,
}

/// A loaded generator program. Not attached anywhere: `BPF_PROG_RUN` names
/// the port by interface index. One per generator thread: its maps hold one
/// trial of one stream.
pub struct XdpGenerator {
    obj: Object,
    frame: Vec<u8>,
    total: u64,
    batch: u32,
}

impl XdpGenerator {
    pub fn load() -> Result<XdpGenerator, BpfError> {
        let obj = load("xdp_gen", bpf_object!("xdp_gen"), |_| Ok(()))?;
        install_wake_handler();
        Ok(XdpGenerator {
            obj,
            frame: Vec::new(),
            batch: DEFAULT_BATCH,
            total: 0,
        })
    }

    /// Prepares a trial; its counters restart at zero.
    pub fn configure(&mut self, trial: &GenTrial) -> Result<(), BpfError> {
        let templates = trial.frames.templates();
        let sequence = trial.frames.sequence();
        // FrameMix guarantees these bounds; a FrameSet from elsewhere might not.
        assert!(templates.len() <= MAX_SIZES && (1..=MAX_SEQUENCE).contains(&sequence.len()));
        let largest = trial.frames.largest();
        // The program knows the layouts of crates/wire encap.rs (signature
        // at 42, 46, 62 or 66), all sizes of a trial in the same one.
        let sig_offset = largest.signature_offset();
        assert!(
            [42, 46, 62, 66].contains(&sig_offset)
                && templates.iter().all(|t| t.signature_offset() == sig_offset)
        );
        let mut cfg = GenConfig {
            interval_q16: (trial.interval_ns * 65536.0).round() as u64,
            total: trial.total,
            give_up_ns: trial.give_up.as_nanos() as u64,
            clock_offset: trial.clock_offset_ns,
            // Catching up after a stall at most 4x the rate (see the program).
            min_gap_ns: (trial.interval_ns / CATCH_UP_FACTOR) as u64,
            csum_base: [0; MAX_SIZES],
            trim: [0; MAX_SIZES],
            seq_len: sequence.len() as u32,
            stream: trial.stream,
            pad: 0,
            sequence: [0; MAX_SEQUENCE],
            headers: [[0; SIGNATURE_OFFSET]; MAX_SIZES],
            stream_add: [0; MAX_SIZES],
            nranges: trial.flows.ranges.len() as u32,
            pad2: 0,
            ranges: [Range::default(); MAX_RANGES],
            sig_offset: sig_offset as u32,
            pad3: 0,
            headers_ext: [[0; HEADERS_EXT]; MAX_SIZES],
            max_late_ns: trial.max_late.map_or(0, |d| d.as_nanos().max(1) as u64),
        };
        assert!(trial.flows.ranges.len() <= MAX_RANGES);
        for (slot, r) in cfg.ranges.iter_mut().zip(&trial.flows.ranges) {
            let span = r.span();
            *slot = Range {
                min: r.min,
                span,
                start_off: match r.mode {
                    Mode::Dec => r.max - r.start,
                    _ => r.start - r.min,
                },
                step: r.step % span,
                offset: r.field.offset_in(&trial.flows.encap) as u16,
                width: r.field.width() as u8,
                mode: r.mode.code(),
                in_ip: r.field.in_ip_checksum() as u8,
                in_udp: r.field.in_udp_checksum() as u8,
                field: r.field as u8,
                pad: 0,
            };
        }
        for (k, t) in templates.iter().enumerate() {
            // The program cuts the largest frame down to this size and
            // rewrites only the headers: the rest must already match.
            debug_assert_eq!(
                t.bytes()[sig_offset..],
                largest.bytes()[sig_offset..t.len()]
            );
            cfg.csum_base[k] = t.checksum_base();
            cfg.trim[k] = (largest.len() - t.len()) as u32;
            cfg.headers[k].copy_from_slice(&t.bytes()[..SIGNATURE_OFFSET]);
            cfg.stream_add[k] = trial.frames.template_classes()[k] as u16 * trial.class_stride;
            let ext = sig_offset - SIGNATURE_OFFSET;
            cfg.headers_ext[k][..ext].copy_from_slice(&t.bytes()[SIGNATURE_OFFSET..sig_offset]);
        }
        cfg.sequence[..sequence.len()].copy_from_slice(sequence);
        let zero_state = [0u8; 80]; // struct gen_state: 10 words
        let err = |source| BpfError::Map {
            what: "configuring the XDP generator",
            source,
        };
        self.map("gen_config")
            .update(&0u32.to_ne_bytes(), as_bytes(&cfg), MapFlags::ANY)
            .map_err(err)?;
        self.map("gen_state")
            .update(&0u32.to_ne_bytes(), &zero_state, MapFlags::ANY)
            .map_err(err)?;
        self.frame = largest.bytes().to_vec();
        self.total = trial.total;
        self.batch = trial.batch.clamp(1, MAX_BATCH);
        Ok(())
    }

    /// Frames the configured trial sends.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Runs the configured trial out of interface `ifindex` until `stop`
    /// is set (see [`Stopper`]). The interface index is resolved in the
    /// calling thread's network namespace: call it inside the port's.
    ///
    /// The kernel runs the program in batches of [`GenTrial::batch`] ticks
    /// and hands the frames a batch made to the port at its end (one
    /// flush): a frame waits there for at most a batch's ticks (its
    /// timestamp is its scheduled time, so the wait is in the latency).
    /// Most ticks make no frame when the rate is below the generator's
    /// ceiling, so a small batch flushes a few frames at a time; where a
    /// flush is dear (it wakes a thread, as the lab's NIC queue does) a
    /// larger batch keeps the generator at its rate.
    pub fn run(&self, ifindex: u32, stop: &AtomicBool) -> Result<(), BpfError> {
        // struct xdp_md: data, data_end, data_meta, ingress_ifindex,
        // rx_queue_index, egress_ifindex.
        let md: [u32; 6] = [0, self.frame.len() as u32, 0, ifindex, 0, 0];
        let prog = self
            .obj
            .progs_mut()
            .find(|p| p.name() == "lr_generate")
            .expect("xdp_gen.bpf.c defines lr_generate");
        while !stop.load(Ordering::Acquire) {
            let mut ctx = [0u8; 24];
            for (chunk, v) in ctx.chunks_exact_mut(4).zip(md) {
                chunk.copy_from_slice(&v.to_ne_bytes());
            }
            match run_live(prog.as_fd().as_raw_fd(), &mut ctx, &self.frame, self.batch) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(BpfError::Map {
                        what: "sending frames with BPF_PROG_RUN (live frames)",
                        source: libbpf_rs::Error::from(e),
                    })
                }
            }
        }
        Ok(())
    }

    /// Where the trial stands (one map read; cheap enough to poll).
    pub fn progress(&self) -> Result<GenProgress, BpfError> {
        let w = read_words(
            &self.map("gen_state"),
            0,
            8,
            "reading the XDP generator's state",
        )?;
        Ok(GenProgress {
            sent: w[0],
            start_ns: w[1],
            last_ns: w[2],
            ticks: w[3],
            // w[4]: the previous tick, internal.
            max_stall_ns: w[5],
            shift_ns: w[6],
            shifts: w[7],
        })
    }

    fn map(&self, name: &str) -> libbpf_rs::Map<'_> {
        map(&self.obj, name)
    }
}

/// Ends a running [`XdpGenerator::run`] from another thread.
pub struct Stopper {
    thread: libc::pthread_t,
}

impl Stopper {
    /// A stopper for the calling thread (the one that will call `run`).
    pub fn for_current_thread() -> Stopper {
        // SAFETY: pthread_self has no preconditions.
        Stopper {
            thread: unsafe { libc::pthread_self() },
        }
    }

    /// Sets `stop` and interrupts the generator's system call until
    /// `finished` says the generator thread has left `run`. The signal is
    /// repeated because one sent just before the thread enters the call
    /// would be lost.
    pub fn stop(&self, stop: &AtomicBool, finished: &AtomicBool) {
        stop.store(true, Ordering::Release);
        while !finished.load(Ordering::Acquire) {
            // SAFETY: the thread is alive until it sets `finished`, which
            // it does after leaving `run`; the signal has a no-op handler.
            unsafe { libc::pthread_kill(self.thread, wake_signal()) };
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// The signal that interrupts a generator's system call: a real-time signal
/// nothing else in linerate uses.
fn wake_signal() -> libc::c_int {
    libc::SIGRTMIN() + 3
}

/// Installs a no-op handler without SA_RESTART, so the signal makes the
/// BPF_PROG_RUN call return EINTR instead of killing the process.
fn install_wake_handler() {
    static ONCE: Once = Once::new();
    extern "C" fn wake(_: libc::c_int) {}
    ONCE.call_once(|| {
        // SAFETY: a zeroed sigaction with a handler that does nothing is
        // valid; it is installed once for a signal linerate reserves.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = wake as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            sa.sa_flags = 0;
            libc::sigaction(wake_signal(), &sa, std::ptr::null_mut());
        }
    });
}

/// One BPF_PROG_RUN call of live frames: `u32::MAX` ticks (the call ends
/// early on the stop signal), flushed every `batch` ticks. libbpf-rs's
/// test_run has no batch size, hence libbpf's own call.
fn run_live(prog_fd: i32, ctx: &mut [u8], frame: &[u8], batch: u32) -> std::io::Result<()> {
    // SAFETY: bpf_test_run_opts is plain data; zero is its default.
    let mut opts: libbpf_rs::libbpf_sys::bpf_test_run_opts = unsafe { std::mem::zeroed() };
    opts.sz = std::mem::size_of_val(&opts) as _;
    opts.ctx_in = ctx.as_ptr().cast();
    opts.ctx_size_in = ctx.len() as u32;
    opts.data_in = frame.as_ptr().cast();
    opts.data_size_in = frame.len() as u32;
    opts.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
    opts.repeat = u32::MAX as i32;
    opts.batch_size = batch;
    // SAFETY: the buffers opts points to outlive the call.
    let rc = unsafe { libbpf_rs::libbpf_sys::bpf_prog_test_run_opts(prog_fd, &mut opts) };
    if rc < 0 {
        return Err(std::io::Error::from_raw_os_error(-rc));
    }
    Ok(())
}
