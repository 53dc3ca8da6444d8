//! The transmit loop: asks the pacer how many frames are due, writes that
//! many stamped frames straight into the port's buffers and flushes them.
//!
//! When the port is slower than the schedule, frames due pile up and go out
//! in larger batches (at most [`MAX_BURST`]), so the mean rate holds while
//! the system-call cost is shared by more frames. Each frame carries its
//! *scheduled* send time, so latency includes any delay the tester itself
//! added (no coordinated omission).

use crate::pacer::Pacer;
use crate::transform::SendTransform;
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
    /// The flows each thread sent when they were its own (ESP on several
    /// threads: each its tunnels' slice of the spread); empty when every
    /// thread sent the job's flows.
    pub thread_flows: Vec<linerate_wire::Flows>,
    /// From the first frame's scheduled time to when the last left.
    pub send_time: Duration,
    /// Furthest the generator fell behind its schedule (it did not run, or
    /// the port made it wait).
    pub max_stall: Duration,
    /// How far the schedule was moved back in all, instead of catching up
    /// more than [`SendJob::max_late`](crate::SendJob) in a burst: pauses.
    pub paused: Duration,
    /// How many times.
    pub pauses: u64,
}

impl Sent {
    /// What several generator threads sent, each its own stream, thread k
    /// `parts[k]`: frames added, per thread in order, the longest sending
    /// time and stall, and the longest thread's pauses (the threads pause
    /// independently).
    pub fn of_threads(parts: Vec<Sent>) -> Sent {
        let max = |f: fn(&Sent) -> Duration| parts.iter().map(f).max().unwrap_or_default();
        Sent {
            frames: parts.iter().map(|p| p.frames).sum(),
            handed: parts.iter().map(|p| p.handed).sum(),
            refused: parts.iter().map(|p| p.refused).sum(),
            ring_full: parts.iter().map(|p| p.ring_full).sum(),
            refusal: parts.iter().find_map(|p| p.refusal.clone()),
            per_thread: parts.iter().flat_map(|p| p.per_thread.clone()).collect(),
            thread_flows: Vec::new(),
            send_time: max(|p| p.send_time),
            max_stall: max(|p| p.max_stall),
            paused: max(|p| p.paused),
            pauses: parts.iter().map(|p| p.pauses).sum(),
        }
    }
}

/// The transform of clear test frames: none.
pub struct Unchanged;

impl SendTransform for Unchanged {
    #[inline(always)]
    fn apply(&mut self, _buf: &mut [u8], len: usize) -> usize {
        len
    }
    fn growth(&self, _len: usize) -> usize {
        0
    }
    fn describe(&self) -> String {
        "clear frames".into()
    }
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
    /// Stop sending at this point, pauses not counted, even if frames
    /// remain (they count as lost).
    pub give_up_after: Duration,
    /// Furthest behind schedule the generator catches up; beyond it the
    /// schedule moves back (a pause). None: always catch up.
    pub max_late: Option<Duration>,
    /// The receiver's clock at `start`, in ns: the base of the timestamps.
    pub start_clock_ns: u64,
    pub start: Instant,
}

/// Sends `s`'s frames on `tx`, each passed through `transform` after it
/// is built (use [`Unchanged`] for clear frames: it compiles away).
pub fn generate<T: TxQueue, X: SendTransform + ?Sized>(
    tx: &mut T,
    s: &Schedule,
    stop: &AtomicBool,
    transform: &mut X,
) -> Result<Sent, PortError> {
    let total = s.pacer.total();
    let mut seq: u64 = 0;
    let mut max_stall = Duration::ZERO;
    let (mut paused, mut pauses) = (Duration::ZERO, 0u64);
    while seq < total {
        let elapsed = s.start.elapsed();
        let mut on_schedule = elapsed.saturating_sub(paused);
        // How far behind schedule the next frame is.
        let late = on_schedule.saturating_sub(Duration::from_nanos(s.pacer.scheduled_ns(seq)));
        if let Some(max) = s.max_late.filter(|&m| late > m) {
            // Held up too long to catch up without a burst: pause instead.
            // Recorded before the give-up check below: a tester stopped
            // past the trial's end (SIGSTOP, a VM paused) paused and goes
            // on; it does not give up with nothing said.
            paused += late - max;
            pauses += 1;
            on_schedule = elapsed.saturating_sub(paused);
        }
        // Pauses stretch the trial by a tenth at most: a generator that
        // cannot keep up ends near the duration, not at twice it.
        if on_schedule > s.give_up_after
            || elapsed > crate::pacer::sending_limit(s.give_up_after)
            || stop.load(Ordering::Relaxed)
        {
            break;
        }
        let due = s.pacer.due(on_schedule);
        if due > seq {
            max_stall = max_stall.max(late);
            let want = ((due - seq) as usize).min(MAX_BURST);
            let shift = paused.as_nanos() as u64;
            let queued = tx.queue(want, |i, buf| {
                let n = seq + i as u64;
                let ts = s.start_clock_ns + shift + s.pacer.scheduled_ns(n);
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
                transform.apply(buf, len)
            })?;
            seq += queued as u64;
            tx.flush()?;
        } else {
            let next = Duration::from_nanos(s.pacer.scheduled_ns(seq));
            let wait = next.saturating_sub(on_schedule);
            if wait > SPIN_BELOW {
                std::thread::sleep(wait - SPIN_BELOW / 2);
            } else {
                std::hint::spin_loop();
            }
        }
    }
    transform.trial_ends();
    let refused = tx.drain(Duration::from_secs(5))?;
    Ok(Sent {
        frames: seq - refused,
        handed: seq,
        refused,
        ring_full: 0,
        refusal: None,
        per_thread: vec![seq - refused],
        thread_flows: Vec::new(),
        send_time: s.start.elapsed(),
        max_stall,
        paused,
        pauses,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_wire::{FlowSpec, FrameSize, FrameTemplate, MacAddr};

    /// A port that records when each frame was queued and stalls once.
    struct Recorder {
        sent_at: Vec<Instant>,
        stall_at: usize,
        stall: Duration,
    }

    impl TxQueue for Recorder {
        fn queue<F: FnMut(usize, &mut [u8]) -> usize>(
            &mut self,
            n: usize,
            mut fill: F,
        ) -> Result<usize, PortError> {
            let mut buf = [0u8; 128];
            for i in 0..n {
                if self.sent_at.len() == self.stall_at {
                    std::thread::sleep(self.stall);
                }
                fill(i, &mut buf);
                self.sent_at.push(Instant::now());
            }
            Ok(n)
        }
        fn flush(&mut self) -> Result<(), PortError> {
            Ok(())
        }
        fn drain(&mut self, _: Duration) -> Result<u64, PortError> {
            Ok(0)
        }
    }

    /// One 64-byte flow.
    fn frames_64() -> FrameSet {
        let flow = FlowSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: "198.18.0.2".parse().unwrap(),
            dst_ip: "198.19.0.2".parse().unwrap(),
            src_port: 1,
            dst_port: 2,
            ttl: 64,
            vlan: None,
        };
        FrameSet::single(FrameTemplate::new(
            &flow,
            FrameSize::from_frame(64).unwrap(),
        ))
    }

    #[test]
    fn a_stalled_generator_pauses_instead_of_bursting() {
        let frames = frames_64();
        let flows = Flows::default();
        let fps = 20_000.0; // 50 us apart
        let schedule = |max_late| Schedule {
            frames: &frames,
            flows: &flows,
            stream: 1,
            class_stride: 1,
            pacer: Pacer::new(fps, Duration::from_millis(100)),
            give_up_after: Duration::from_secs(2),
            max_late,
            start_clock_ns: 0,
            start: Instant::now(),
        };
        // The longest burst: a run of frames each queued less than a
        // quarter of an interval after the one before.
        let burst = |r: &Recorder| {
            let mut run = 0;
            let mut longest = 0;
            for w in r.sent_at.windows(2) {
                run = if w[1] - w[0] < Duration::from_micros(12) {
                    run + 1
                } else {
                    0
                };
                longest = longest.max(run);
            }
            longest
        };
        let stall = Duration::from_millis(10); // 200 frames' worth
        let mut catch_up = Recorder {
            sent_at: Vec::new(),
            stall_at: 500,
            stall,
        };
        let sent = generate(
            &mut catch_up,
            &schedule(None),
            &AtomicBool::new(false),
            &mut Unchanged,
        )
        .unwrap();
        assert_eq!(sent.frames, 2_000);
        assert_eq!(sent.pauses, 0);
        assert!(
            burst(&catch_up) >= 150,
            "caught up in a burst of {}",
            burst(&catch_up)
        );

        let max_late = Duration::from_secs_f64(32.0 / fps);
        let mut pausing = Recorder {
            sent_at: Vec::new(),
            stall_at: 500,
            stall,
        };
        let sent = generate(
            &mut pausing,
            &schedule(Some(max_late)),
            &AtomicBool::new(false),
            &mut Unchanged,
        )
        .unwrap();
        assert_eq!(sent.frames, 2_000);
        assert!(sent.pauses >= 1);
        assert!(
            sent.paused >= stall - max_late - Duration::from_millis(1),
            "{:?}",
            sent.paused
        );
        assert!(
            burst(&pausing) <= 33,
            "a burst of {} frames",
            burst(&pausing)
        );
    }

    #[test]
    fn a_generator_stopped_past_the_sending_limit_records_the_pause_and_ends() {
        let frames = frames_64();
        let flows = Flows::default();
        let fps = 20_000.0;
        let max_late = Duration::from_secs_f64(32.0 / fps);
        // A 100 ms trial given up 150 ms in (sending limit 165 ms); the
        // process stops for 150 ms (SIGSTOP) after 500 frames (25 ms),
        // past the limit. The pause is recorded and the trial ends there:
        // the frames left are not sent, the trial does not run on to the
        // end of its moved schedule (250 ms).
        let stall = Duration::from_millis(150);
        let mut stopped = Recorder {
            sent_at: Vec::new(),
            stall_at: 500,
            stall,
        };
        let schedule = Schedule {
            frames: &frames,
            flows: &flows,
            stream: 1,
            class_stride: 1,
            pacer: Pacer::new(fps, Duration::from_millis(100)),
            give_up_after: Duration::from_millis(150),
            max_late: Some(max_late),
            start_clock_ns: 0,
            start: Instant::now(),
        };
        let sent = generate(
            &mut stopped,
            &schedule,
            &AtomicBool::new(false),
            &mut Unchanged,
        )
        .unwrap();
        assert!(sent.frames >= 500 && sent.frames < 2_000, "{}", sent.frames);
        assert!(sent.pauses >= 1);
        assert!(
            sent.paused >= stall - max_late - Duration::from_millis(1),
            "{:?}",
            sent.paused
        );
        assert!(sent.send_time >= stall, "{:?}", sent.send_time);
        assert!(
            sent.send_time < Duration::from_millis(240),
            "sent on to the moved schedule's end: {:?}",
            sent.send_time
        );
    }

    /// A port that takes at most one frame per `per_frame`: a generator
    /// held below its rate by the port.
    struct Slow {
        per_frame: Duration,
        taken: u64,
    }

    impl TxQueue for Slow {
        fn queue<F: FnMut(usize, &mut [u8]) -> usize>(
            &mut self,
            n: usize,
            mut fill: F,
        ) -> Result<usize, PortError> {
            let mut buf = [0u8; 128];
            fill(0, &mut buf);
            let _ = n;
            std::thread::sleep(self.per_frame);
            self.taken += 1;
            Ok(1)
        }
        fn flush(&mut self) -> Result<(), PortError> {
            Ok(())
        }
        fn drain(&mut self, _: Duration) -> Result<u64, PortError> {
            Ok(0)
        }
    }

    #[test]
    fn a_generator_below_its_rate_sends_for_the_duration_not_twice_it() {
        let frames = frames_64();
        let flows = Flows::default();
        // 2,000 frames/s asked for 200 ms; the port takes one frame per
        // millisecond at most (under 1,000/s). Under the old rule the
        // pauses ran the trial on to twice the give-up time (~440 ms).
        let fps = 2_000.0;
        let give_up = Duration::from_millis(220);
        let mut slow = Slow {
            per_frame: Duration::from_millis(1),
            taken: 0,
        };
        let schedule = Schedule {
            frames: &frames,
            flows: &flows,
            stream: 1,
            class_stride: 1,
            pacer: Pacer::new(fps, Duration::from_millis(200)),
            give_up_after: give_up,
            max_late: Some(Duration::from_secs_f64(4.0 / fps)),
            start_clock_ns: 0,
            start: Instant::now(),
        };
        let sent = generate(
            &mut slow,
            &schedule,
            &AtomicBool::new(false),
            &mut Unchanged,
        )
        .unwrap();
        assert!(sent.frames < 400, "{}", sent.frames);
        assert_eq!(sent.frames, slow.taken);
        assert!(sent.paused > Duration::ZERO);
        assert!(
            sent.send_time >= give_up && sent.send_time < Duration::from_millis(400),
            "sent for {:?}, limit {:?}",
            sent.send_time,
            crate::pacer::sending_limit(give_up)
        );
    }
}
