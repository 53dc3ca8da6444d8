//! The in-kernel analyzer: counts a trial's test frames at the receiving
//! port's XDP hook and drops them there, so the receive side costs one XDP
//! program run per frame and no copy to user space. See `bpf/xdp_count.bpf.c`
//! for the counting rules (the same as the user-space receiver's).
//!
//! User space configures a trial (its stream ids and a new generation),
//! polls the distinct-frame count while stragglers may arrive, and reads the
//! per-stream state once at the end.

use crate::{as_bytes, bpf_object, load, map, read_words, BpfError};
use libbpf_rs::{MapCore, MapFlags, Object};
use linerate_wire::FrameCheck;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

/// Sequence numbers remembered below the highest seen, per stream
/// (`LR_WINDOW` in the program). Frames later than this are counted as
/// reordered, never as duplicates.
pub const WINDOW: u64 = 1 << 17;
/// Latency below 2^SUB_BITS ns is kept exactly; above, each power of two
/// is cut into 2^SUB_BITS buckets (relative width 0.8 %).
pub const SUB_BITS: u32 = 7;
const SUB: u64 = 1 << SUB_BITS;
/// Histogram buckets per stream (`LR_BUCKETS`).
pub const BUCKETS: usize = ((32 - SUB_BITS + 1) as usize) << SUB_BITS;
/// Fields of `struct stream_state` before the histogram.
const HEADER_WORDS: usize = 12;
/// A jump forward over this many sequence numbers or more is a big
/// sequence error (`LR_SEQ_BIG` in the program).
pub const BIG_GAP: u64 = 1000;

/// Mirrors `struct count_config`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CountConfig {
    first_stream: u16,
    stream_count: u16,
    udp_port: u16,
    /// `LR_CHECK_*`: 0 headers, 1 payload (crates/wire integrity.rs).
    check: u16,
    generation: u32,
    lat_mask: u32,
    /// Every stream's sequence numbers sent are below this.
    sent_below: u64,
    /// The trial's start, CLOCK_MONOTONIC ns.
    not_before: u64,
    /// Frame n of a stream left no earlier than `not_before + n * interval`.
    interval: u64,
}
const _: () = assert!(std::mem::size_of::<CountConfig>() == 40);

/// One stream's counts as the program kept them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelStream {
    pub received: u64,
    pub duplicated: u64,
    pub reordered: u64,
    pub latency_sum_ns: u64,
    pub latency_min_ns: u64,
    pub latency_max_ns: u64,
    /// Frames whose latency was measured (all distinct frames, or each
    /// stream's every n-th: see [`XdpCounter::start_trial`]); the sum,
    /// extremes and histogram are theirs.
    pub latency_count: u64,
    /// Sequence errors against the previous frame's number: jumps forward
    /// over fewer than [`BIG_GAP`] numbers, over more, and back.
    pub seq_errors: [u64; 3],
    /// [`BUCKETS`] counts; bucket `i` holds values in [`bucket_range`]`(i)`.
    pub histogram: Vec<u64>,
}

/// The histogram bucket of a latency (the program's `bucket()`).
pub fn bucket_of(v: u32) -> usize {
    let v = v as u64;
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros() as u64;
    (((e - SUB_BITS as u64 + 1) * SUB) + ((v >> (e - SUB_BITS as u64)) & (SUB - 1))) as usize
}

/// The values bucket `i` holds, `lo..=hi`.
pub fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, i);
    }
    let e = i / SUB + SUB_BITS as u64 - 1;
    let shift = e - SUB_BITS as u64;
    let lo = (SUB + i % SUB) << shift;
    (lo, lo + (1 << shift) - 1)
}

/// A loaded analyzer, attached to at most one interface.
pub struct XdpCounter {
    obj: Object,
    /// The BPF link holding the attachment; closing it detaches.
    link: Option<OwnedFd>,
    max_streams: u16,
    generation: u32,
    stray_at_start: u64,
    errored_at_start: u64,
    streams_in_trial: u16,
    lat_mask: u32,
    check: FrameCheck,
    sent_below: u64,
    sent_from: SentFrom,
}

/// When a trial's frames can have left, in CLOCK_MONOTONIC (the clock
/// `bpf_ktime_get_ns` reads): frame `n` of a stream no earlier than
/// `not_before_ns + n * interval_ns`. A frame whose latency is longer
/// than the time since then carries a timestamp in the future and counts
/// as errored; one the DUT held, even for seconds, counts as received
/// (`plausible_latency` in `linerate_wire::signature`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SentFrom {
    /// The trial's start: no frame left before it.
    pub not_before_ns: u64,
    /// The smallest interval between two frames of one stream, whole ns
    /// rounded down; 0: not known (the trial's start alone bounds).
    pub interval_ns: u64,
}

/// What the program did with one frame ([`XdpCounter::verdict`]).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Not a test frame: passed on to the stack.
    Passed,
    /// An intact test frame, counted (in a stream or as stray) and dropped.
    Counted,
    /// A damaged test frame, counted as errored and dropped.
    Errored,
}

/// What the counter counted in one trial.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrialCounts {
    pub streams: Vec<KernelStream>,
    /// Intact test frames of no stream of the trial.
    pub stray: u64,
    /// Damaged test frames (a check of `linerate_wire::integrity` failed,
    /// or the timestamp was in the future): counted nowhere else.
    pub errored: u64,
}

impl XdpCounter {
    /// Loads the program with room for `max_streams` streams per trial
    /// (each stream costs 1 MiB of window and 26 KiB of state in the kernel).
    pub fn load(max_streams: u16) -> Result<XdpCounter, BpfError> {
        let max_streams = max_streams.max(1);
        let obj = load("xdp_count", bpf_object!("xdp_count"), |open| {
            for mut map in open.maps_mut() {
                match map.name().to_str() {
                    Some("streams") => map.set_max_entries(max_streams as u32)?,
                    Some("window") => map.set_max_entries(max_streams as u32 * WINDOW as u32)?,
                    _ => {}
                }
            }
            Ok(())
        })?;
        Ok(XdpCounter {
            obj,
            link: None,
            max_streams,
            generation: 0,
            stray_at_start: 0,
            errored_at_start: 0,
            streams_in_trial: 0,
            lat_mask: 0,
            check: FrameCheck::default(),
            sent_below: u64::MAX,
            sent_from: SentFrom::default(),
        })
    }

    pub fn max_streams(&self) -> u16 {
        self.max_streams
    }

    /// Attaches to interface `ifindex` (resolved in the calling thread's
    /// network namespace), in the driver (native mode) or, with `generic`,
    /// after the kernel built its socket buffer (generic mode: on a port
    /// that receives through a CPU's backlog, after that backlog, where
    /// native mode would give a veth its own 256-frame ring back). Dropping
    /// the counter detaches it; so does the process ending, however it ends
    /// (the attachment is a BPF link).
    pub fn attach(&mut self, ifindex: u32, ifname: &str, generic: bool) -> Result<(), BpfError> {
        let prog_fd = self
            .obj
            .progs()
            .find(|p| p.name() == "lr_count")
            .expect("xdp_count.bpf.c defines lr_count")
            .as_fd()
            .as_raw_fd();
        // No mode flag: the kernel's choice, native where the driver has
        // it (what libbpf's attach_xdp asks for).
        let flags = if generic {
            libbpf_rs::libbpf_sys::XDP_FLAGS_SKB_MODE
        } else {
            0
        };
        let link = crate::xsk::link_create(prog_fd, ifindex as i32, flags).map_err(|source| {
            BpfError::Attach {
                program: "xdp_count",
                ifname: ifname.to_string(),
                source,
            }
        })?;
        self.link = Some(link);
        Ok(())
    }

    /// Starts counting streams `first .. first + count` (wrapping) carried
    /// to UDP port `udp_port`; frames of other streams count as stray.
    /// Latency is measured on the frames whose sequence number is a
    /// multiple of `latency_every` (a power of two; 1: every frame).
    /// Each test frame is checked as deep as `check` says; a damaged one
    /// counts as errored, as does one numbered at or beyond `frames` (the
    /// most any stream sends; `u64::MAX`: not known), and one whose
    /// timestamp is in the future by `sent_from` (checked on the frames
    /// whose latency is measured).
    #[allow(clippy::too_many_arguments)]
    pub fn start_trial(
        &mut self,
        first: u16,
        count: u16,
        udp_port: u16,
        latency_every: u32,
        check: FrameCheck,
        frames: u64,
        sent_from: SentFrom,
    ) -> Result<(), BpfError> {
        assert!(
            latency_every.is_power_of_two(),
            "latency_every {latency_every} is a power of two"
        );
        self.lat_mask = latency_every - 1;
        self.check = check;
        self.sent_below = frames;
        // The program computes not_before + seq * interval for seq below
        // frames without overflow checks: keep it below 2^64 (a bound
        // user space saturates instead; equal whenever this changes nothing).
        let room = (u64::MAX - sent_from.not_before_ns) / frames.max(1);
        self.sent_from = SentFrom {
            interval_ns: sent_from.interval_ns.min(room),
            ..sent_from
        };
        let count = count.min(self.max_streams);
        let map_err = |source| BpfError::Map {
            what: "preparing the XDP counter for a trial",
            source,
        };
        // Stop counting while the per-stream state is reset.
        self.write_config(first, 0, udp_port).map_err(map_err)?;
        let zero = vec![0u8; (HEADER_WORDS + BUCKETS) * 8];
        let streams = self.map("streams");
        for i in 0..count as u32 {
            streams
                .update(&i.to_ne_bytes(), &zero, MapFlags::ANY)
                .map_err(map_err)?;
        }
        self.generation = self.generation.wrapping_add(1);
        self.stray_at_start = self.total("stray")?;
        self.errored_at_start = self.total("errored")?;
        self.streams_in_trial = count;
        self.write_config(first, count, udp_port).map_err(map_err)
    }

    /// Distinct test frames counted so far in this trial, all streams.
    pub fn received(&self) -> Result<u64, BpfError> {
        let mut total = 0;
        for i in 0..self.streams_in_trial as u32 {
            total += self.stream_words(i, HEADER_WORDS)?[0];
        }
        Ok(total)
    }

    /// The trial's per-stream counts, its stray and its damaged frames.
    pub fn read(&self) -> Result<TrialCounts, BpfError> {
        let mut out = Vec::with_capacity(self.streams_in_trial as usize);
        for i in 0..self.streams_in_trial as u32 {
            let w = self.stream_words(i, HEADER_WORDS + BUCKETS)?;
            out.push(KernelStream {
                received: w[0],
                duplicated: w[1],
                reordered: w[2],
                // w[3]: highest sequence number, internal.
                latency_sum_ns: w[4],
                latency_min_ns: w[5],
                latency_max_ns: w[6],
                latency_count: w[7],
                // w[8]: the expected number, internal.
                seq_errors: [w[9], w[10], w[11]],
                histogram: w[HEADER_WORDS..].to_vec(),
            });
        }
        Ok(TrialCounts {
            streams: out,
            stray: self.total("stray")? - self.stray_at_start,
            errored: self.total("errored")? - self.errored_at_start,
        })
    }

    /// Runs the program once on `frame` without attaching it
    /// (`BPF_PROG_TEST_RUN`), under the current trial's configuration, and
    /// says what it did with it. For the test that holds this classifier
    /// to user space's (`linerate_wire::classify` and `integrity`); the
    /// frame counts as if it had arrived. The kernel refuses frames
    /// shorter than an Ethernet header.
    #[doc(hidden)]
    pub fn verdict(&self, frame: &[u8]) -> Result<Verdict, BpfError> {
        const XDP_DROP: u32 = 1;
        let prog = self
            .obj
            .progs_mut()
            .find(|p| p.name() == "lr_count")
            .expect("xdp_count.bpf.c defines lr_count");
        let input = libbpf_rs::ProgramInput {
            data_in: Some(frame),
            ..Default::default()
        };
        let errored = self.total("errored")?;
        let out = prog.test_run(input).map_err(|source| BpfError::Map {
            what: "running the XDP counter on one frame (BPF_PROG_TEST_RUN)",
            source,
        })?;
        Ok(if out.return_value != XDP_DROP {
            Verdict::Passed
        } else if self.total("errored")? > errored {
            Verdict::Errored
        } else {
            Verdict::Counted
        })
    }

    fn write_config(&self, first: u16, count: u16, udp_port: u16) -> libbpf_rs::Result<()> {
        let cfg = CountConfig {
            first_stream: first,
            stream_count: count,
            udp_port,
            check: match self.check {
                FrameCheck::Headers => 0,
                FrameCheck::Payload => 1,
            },
            generation: self.generation,
            lat_mask: self.lat_mask,
            sent_below: self.sent_below,
            not_before: self.sent_from.not_before_ns,
            interval: self.sent_from.interval_ns,
        };
        self.map("count_config")
            .update(&0u32.to_ne_bytes(), as_bytes(&cfg), MapFlags::ANY)
    }

    /// The first `words` u64 words of stream `i`'s state.
    fn stream_words(&self, i: u32, words: usize) -> Result<Vec<u64>, BpfError> {
        read_words(&self.map("streams"), i, words, "reading the XDP counter")
    }

    /// The running total of the one-counter map `name` (stray, errored).
    fn total(&self, name: &str) -> Result<u64, BpfError> {
        let w = read_words(&self.map(name), 0, 1, "reading the XDP counter's totals")?;
        Ok(w[0])
    }

    fn map(&self, name: &str) -> libbpf_rs::Map<'_> {
        map(&self.obj, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_once_and_in_order() {
        let mut next = 0u64;
        for i in 0..BUCKETS {
            let (lo, hi) = bucket_range(i);
            assert_eq!(lo, next, "bucket {i} starts where the last ended");
            assert!(hi >= lo);
            next = hi + 1;
        }
        assert_eq!(next, 1u64 << 32, "the buckets end at 2^32 ns");
        for v in [
            0u32,
            1,
            127,
            128,
            129,
            255,
            256,
            1000,
            65_535,
            1 << 20,
            u32::MAX,
        ] {
            let (lo, hi) = bucket_range(bucket_of(v));
            assert!((lo..=hi).contains(&(v as u64)), "{v} in bucket {lo}..={hi}");
        }
    }

    #[test]
    fn bucket_width_is_under_one_percent() {
        for i in SUB as usize..BUCKETS {
            let (lo, hi) = bucket_range(i);
            assert!(((hi - lo + 1) as f64) / (lo as f64) <= 1.0 / 128.0 + 1e-12);
        }
    }
}
