//! The transmit loop: asks the pacer how many frames are due, writes that
//! many stamped frames straight into the port's buffers and flushes them.
//!
//! When the port is slower than the schedule, frames due pile up and go out
//! in larger batches (at most [`MAX_BURST`]), so the mean rate holds while
//! the system-call cost is shared by more frames. Each frame carries its
//! *scheduled* send time, so latency includes any delay the tester itself
//! added (no coordinated omission).

use crate::pacer::Pacer;
use linerate_port::{PortError, TxQueue};
use linerate_wire::{Flows, FrameSet, Signature};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Most frames handed to the port in one go.
pub const MAX_BURST: usize = 64;
/// Waits longer than this sleep; shorter ones spin (sleeping is too coarse).
const SPIN_BELOW: Duration = Duration::from_micros(200);

pub struct Sent {
    /// Frames handed to the port and accepted by it (the kernel took them).
    pub frames: u64,
    /// Frames the generator handed to the kernel, taken or not.
    pub handed: u64,
    /// Of those, frames the kernel refused outright: the tester's loss.
    pub refused: u64,
    /// Frames the port's driver took but could not queue because its ring
    /// was full (the xdp engine; counted in `frames`). On a veth that ring
    /// is the peer's receive ring: the DUT's input; on a NIC the tester's
    /// own transmit ring.
    pub ring_full: u64,
    /// Why the kernel refused frames, when it did and said why.
    pub refusal: Option<String>,
    /// The same per generator thread (stream), in order: thread k sent
    /// frames `0 .. per_thread[k]` of its own sequence.
    pub per_thread: Vec<u64>,
    /// From the first frame's scheduled time to when the last left.
    pub send_time: Duration,
    /// Furthest the generator fell behind its schedule (it did not run, or
    /// the port made it wait); what was due meanwhile went out in a burst.
    pub max_stall: Duration,
}

pub struct Schedule<'a> {
    /// Frame `n` is built from `frames.get(n)` (one size, or a mix).
    pub frames: &'a FrameSet,
    /// Fields rewritten per frame (flows); empty for one flow.
    pub flows: &'a Flows,
    /// Stream id of class 0; class `c` frames carry `stream + c * class_stride`.
    pub stream: u16,
    pub class_stride: u16,
    pub pacer: Pacer,
    /// Stop sending at this point even if frames remain (they count as lost).
    pub give_up_after: Duration,
    /// The receiver's clock at `start`, in ns: the base of the timestamps.
    pub start_clock_ns: u64,
    pub start: Instant,
}

pub fn generate<T: TxQueue>(
    tx: &mut T,
    s: &Schedule,
    stop: &AtomicBool,
) -> Result<Sent, PortError> {
    let total = s.pacer.total();
    let mut seq: u64 = 0;
    let mut max_stall = Duration::ZERO;
    while seq < total {
        let elapsed = s.start.elapsed();
        if elapsed > s.give_up_after || stop.load(Ordering::Relaxed) {
            break;
        }
        let due = s.pacer.due(elapsed);
        if due > seq {
            // How far behind schedule the next frame is.
            let late = elapsed.saturating_sub(Duration::from_nanos(s.pacer.scheduled_ns(seq)));
            max_stall = max_stall.max(late);
            let want = ((due - seq) as usize).min(MAX_BURST);
            let queued = tx.queue(want, |i, buf| {
                let n = seq + i as u64;
                let ts = s.start_clock_ns + s.pacer.scheduled_ns(n);
                let k = s.frames.template_index(n);
                let class = s.frames.template_classes()[k] as u16;
                let len = s.frames.templates()[k].write(
                    buf,
                    Signature {
                        stream: s.stream.wrapping_add(class * s.class_stride),
                        seq: n as u32,
                        tx_ts: ts as u32,
                    },
                );
                s.flows.apply(&mut buf[..len], n);
                len
            })?;
            seq += queued as u64;
            tx.flush()?;
        } else {
            let next = Duration::from_nanos(s.pacer.scheduled_ns(seq));
            let wait = next.saturating_sub(elapsed);
            if wait > SPIN_BELOW {
                std::thread::sleep(wait - SPIN_BELOW / 2);
            } else {
                std::hint::spin_loop();
            }
        }
    }
    let refused = tx.drain(Duration::from_secs(5))?;
    Ok(Sent {
        frames: seq - refused,
        handed: seq,
        refused,
        ring_full: 0,
        refusal: None,
        per_thread: vec![seq - refused],
        send_time: s.start.elapsed(),
        max_stall,
    })
}
