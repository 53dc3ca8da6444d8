//! The transmit half: the TX ring, the completion ring, and its own half of
//! the UMEM frames.
//!
//! A frame is free (on `free`), written and on the TX ring, taken by the
//! kernel, or completed (on the completion ring, until [`XskTx::reclaim`]
//! puts it back on `free`). The TX ring and the completion ring have as
//! many entries as the half has frames, so neither can overflow.
//!
//! Backing off a full device queue: in copy mode a device that has no room
//! (a veth whose peer's 256-frame queue is full) drops the frame it is
//! offered and the `sendto` returns EBUSY. Kicking again at once loses one
//! more frame per system call until the queue drains: measured on a veth
//! at 64 bytes, about 0.4 M frames/s thrown away that way, tester loss at
//! 100 % and work for nothing (docs/BENCHMARKS.md). So after a drop
//! [`XskTx::flush`] makes no system call until half of the frames the
//! kernel held then have completed (a veth completes a frame when the
//! receiver has taken it). DPDK's AF_XDP PMD instead retries while the
//! call fails with EAGAIN or EBUSY, reclaiming completions in between.

use super::mmap::Umem;
use super::ring::{ConsRing, ProdRing};
use super::socket::{kick_tx, statistics, Kick};
use crate::{PortError, TxQueue};
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Frames shorter than an Ethernet header are not handed to the kernel (a
/// driver would choke on them); they count as refused, as AF_PACKET's
/// kernel refuses them.
const MIN_FRAME_LEN: usize = 14;

/// Longest a flush waits for completions after a drop before it calls the
/// kernel again anyway.
const BACKOFF_MAX: Duration = Duration::from_millis(1);

pub struct XskTx {
    fd: Arc<OwnedFd>,
    umem: Arc<Umem>,
    tx: ProdRing<libc::xdp_desc>,
    completion: ConsRing<u64>,
    /// UMEM addresses of frames this half may write.
    free: Vec<u64>,
    chunk_mask: u64,
    max_frame_len: usize,
    ifname: String,
    /// Frames put on the TX ring, ever.
    queued: u64,
    /// Frames that came back through the completion ring, ever.
    completed: u64,
    /// Descriptors the kernel rejected (tx_invalid_descs), ever: their
    /// frames never come back. None are expected (descriptors are built
    /// here, always valid), but a lost frame must not hang `drain`.
    invalid: u64,
    /// Of `invalid`, how many have been reported by `drain`.
    invalid_reported: u64,
    /// Frames `drain` stopped waiting for at its timeout and that have not
    /// come back since.
    written_off: u64,
    /// Which frames (by index in this half) are written off, so a late
    /// completion is recognised as one. Empty until the first write-off.
    written_off_frames: Vec<bool>,
    /// UMEM address of this half's first frame (its frames are contiguous).
    first_addr: u64,
    frame_count: usize,
    /// Refused frames not yet reported by `drain`.
    refused: u64,
    /// After the device dropped a frame: no system call until `completed`
    /// reaches this (see the module comment), or until the instant, in
    /// case some of the frames never complete (rejected descriptors).
    backoff: Option<(u64, Instant)>,
}

impl XskTx {
    /// `frames`: the UMEM addresses this half owns.
    pub(crate) fn new(
        fd: Arc<OwnedFd>,
        umem: Arc<Umem>,
        tx: ProdRing<libc::xdp_desc>,
        completion: ConsRing<u64>,
        frames: Vec<u64>,
        max_frame_len: usize,
        ifname: &str,
    ) -> XskTx {
        debug_assert!(tx.size() as usize >= frames.len());
        let first_addr = frames.iter().copied().min().unwrap_or(0);
        let chunk = umem.chunk_size() as u64;
        debug_assert!(frames
            .iter()
            .all(|&a| (a - first_addr) / chunk < frames.len() as u64));
        XskTx {
            frame_count: frames.len(),
            first_addr,
            chunk_mask: !(umem.chunk_size() as u64 - 1),
            fd,
            umem,
            tx,
            completion,
            free: frames,
            max_frame_len,
            ifname: ifname.to_string(),
            queued: 0,
            completed: 0,
            invalid: 0,
            invalid_reported: 0,
            written_off: 0,
            written_off_frames: Vec::new(),
            refused: 0,
            backoff: None,
        }
    }

    /// Moves completed frames back to the free list.
    #[inline]
    fn reclaim(&mut self) -> u32 {
        let n = self.completion.available(u32::MAX);
        for i in 0..n {
            // Aligned mode: the address comes back as it was sent; masking
            // to the chunk start keeps `free` exact even if it did not.
            let addr = self.completion.read(i) & self.chunk_mask;
            if self.written_off > 0 {
                let index = self.frame_index(addr);
                if self.written_off_frames[index] {
                    // A frame drain gave up on came back after all.
                    self.written_off_frames[index] = false;
                    self.written_off -= 1;
                }
            }
            self.free.push(addr);
        }
        self.completion.release(n);
        self.completed += n as u64;
        n
    }

    fn frame_index(&self, addr: u64) -> usize {
        ((addr - self.first_addr) / (!self.chunk_mask + 1)) as usize
    }

    /// Frames in the kernel's hands: queued, not completed, not rejected.
    fn live(&self) -> u64 {
        // Saturating: a kernel counting rejections we did not cause must
        // not make this wrap.
        self.queued
            .saturating_sub(self.completed)
            .saturating_sub(self.invalid)
    }

    /// Live frames that have not been given up on.
    fn outstanding(&self) -> u64 {
        self.live().saturating_sub(self.written_off)
    }

    /// Gives up on every live frame: marks all frames not on `free` (a
    /// rejected descriptor's frame is marked too, harmlessly: it never
    /// comes back).
    fn write_off(&mut self) {
        self.written_off_frames.clear();
        self.written_off_frames.resize(self.frame_count, true);
        for i in 0..self.free.len() {
            let index = self.frame_index(self.free[i]);
            self.written_off_frames[index] = false;
        }
        self.written_off = self.live();
    }
}

impl TxQueue for XskTx {
    #[inline]
    fn queue<F: FnMut(usize, &mut [u8]) -> usize>(
        &mut self,
        n: usize,
        mut fill: F,
    ) -> Result<usize, PortError> {
        if self.free.len() < n {
            self.reclaim();
        }
        let room = n
            .min(self.free.len())
            .min(self.tx.free(n.min(u32::MAX as usize) as u32) as usize);
        let mut queued = 0; // frames handed over by `fill`
        let mut on_ring = 0u32; // of those, descriptors written
        let mut result = Ok(());
        while queued < room {
            let addr = *self.free.last().expect("room <= free.len()");
            // SAFETY: the frame is on `free`, so neither the kernel nor any
            // other slice holds it; the slice ends before the next chunk.
            let buf = unsafe { self.umem.frame_mut(addr, self.max_frame_len) };
            let len = fill(queued, buf);
            if len > self.max_frame_len {
                result = Err(PortError::FrameTooLong {
                    len,
                    max: self.max_frame_len,
                });
                break;
            }
            queued += 1;
            if len < MIN_FRAME_LEN {
                self.refused += 1; // the frame stays on `free`
                continue;
            }
            self.free.pop();
            self.tx.write(
                on_ring,
                libc::xdp_desc {
                    addr,
                    len: len as u32,
                    options: 0,
                },
            );
            on_ring += 1;
        }
        // Frames written before a too-long one still go out, as with AF_PACKET.
        self.tx.submit(on_ring);
        self.queued += on_ring as u64;
        result.map(|()| queued)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        // In copy mode the kernel sends in the sendto call, a budget of
        // frames (32 by default) per call, so call until the ring is empty
        // or the kernel makes no progress (device busy: the next flush
        // retries). A zero-copy driver clears the flag while its NAPI loop
        // is polling the ring: then no system call is needed at all.
        if let Some((target, until)) = self.backoff {
            self.reclaim();
            if self.completed < target && Instant::now() < until {
                return Ok(()); // the device is still busy with what it held when it dropped one
            }
            self.backoff = None;
        }
        let mut pending = self.tx.pending();
        while pending > 0 && self.tx.needs_wakeup() {
            let kick = kick_tx(&self.fd, &self.ifname)?;
            let now = self.tx.pending();
            if kick == Kick::Dropped {
                // Frames in the kernel's hands, past the TX ring: only
                // those complete without another call.
                let held = self.live().saturating_sub(now as u64);
                if held > 1 {
                    self.backoff = Some((self.completed + held / 2, Instant::now() + BACKOFF_MAX));
                }
                break;
            }
            if now >= pending {
                break; // no progress: the device is busy, or a zero-copy driver sends asynchronously
            }
            pending = now;
        }
        Ok(())
    }

    /// Waits until every queued frame has completed. AF_XDP has no
    /// per-frame refusal: a descriptor is either sent or rejected as
    /// invalid (tx_invalid_descs; never expected, the descriptors are built
    /// here); rejected ones count as refused, as do frames shorter than an
    /// Ethernet header. If `timeout` passes with frames still outstanding,
    /// those count as refused too (they were not seen to leave) and are not
    /// waited for again; should they complete later, their UMEM frames are
    /// reused as usual.
    fn drain(&mut self, timeout: Duration) -> Result<u64, PortError> {
        let deadline = Instant::now() + timeout;
        loop {
            self.flush()?;
            let progress = self.reclaim();
            if self.outstanding() == 0 {
                break;
            }
            if progress == 0 {
                // Stalled: maybe the kernel rejected descriptors, whose frames never return.
                let stats = statistics(&self.fd, &self.ifname)?;
                self.invalid = stats.tx_invalid_descs;
                let left = self.outstanding();
                if left == 0 {
                    break;
                }
                if Instant::now() >= deadline {
                    self.write_off();
                    self.refused += left;
                    break;
                }
                // Completions come from the receiving side's processing (in
                // copy mode the frame is freed when the peer is done with
                // it): leave it the CPU rather than spin.
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        let invalid = self.invalid.saturating_sub(self.invalid_reported);
        self.invalid_reported = self.invalid;
        Ok(std::mem::take(&mut self.refused) + invalid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::af_xdp::ring::FakeRing;
    use std::sync::atomic::Ordering;

    const EMPTY: libc::xdp_desc = libc::xdp_desc {
        addr: 0,
        len: 0,
        options: 0,
    };

    /// The kernel's part, played by hand: take `n` descriptors off the TX
    /// ring and complete them.
    fn kernel_sends(
        tx: &mut FakeRing<libc::xdp_desc>,
        completion: &mut FakeRing<u64>,
        n: u32,
    ) -> Vec<libc::xdp_desc> {
        let cons = tx.consumer.load(Ordering::Acquire);
        let size = tx.descs.len() as u32;
        let mut sent = Vec::new();
        for i in 0..n {
            let d = tx.descs[(cons.wrapping_add(i) & (size - 1)) as usize];
            let prod = completion.producer.load(Ordering::Relaxed);
            let csize = completion.descs.len() as u32;
            completion.descs[(prod & (csize - 1)) as usize] = d.addr;
            completion
                .producer
                .store(prod.wrapping_add(1), Ordering::Release);
            sent.push(d);
        }
        tx.consumer.store(cons.wrapping_add(n), Ordering::Release);
        sent
    }

    /// The transmit half without a kernel: fake rings (no wake-up flag, so
    /// no system call), a real anonymous UMEM, /dev/null as the socket.
    #[test]
    fn frames_cycle_through_the_rings_and_are_accounted() {
        let mut tx_ring = FakeRing::new(8, u32::MAX - 2, EMPTY);
        let mut completion = FakeRing::new(8, 7, 0u64);
        let umem = Arc::new(Umem::new(8, 2048, "test").unwrap());
        let fd: OwnedFd = std::fs::File::open("/dev/null").unwrap().into();
        let frames: Vec<u64> = (0..8).map(|i| i * 2048).collect();
        // SAFETY: the fake rings outlive `tx`; `tx` is their only user-space party.
        let (prod, cons) = unsafe {
            (
                ProdRing::new(tx_ring.parts(), None),
                ConsRing::new(completion.parts(), None),
            )
        };
        let mut tx = XskTx::new(Arc::new(fd), umem, prod, cons, frames, 1792, "test");

        // Eight frames fit, the ninth and tenth wait for completions.
        let n = tx
            .queue(10, |i, buf| {
                buf[0] = i as u8;
                60
            })
            .unwrap();
        assert_eq!(n, 8);
        assert_eq!(tx.queue(1, |_, _| 60).unwrap(), 0);
        let sent = kernel_sends(&mut tx_ring, &mut completion, 3);
        let mut addrs: Vec<u64> = sent.iter().map(|d| d.addr).collect();
        addrs.sort();
        addrs.dedup();
        assert_eq!(addrs.len(), 3, "distinct frames: {sent:?}");
        assert!(sent.iter().all(|d| d.len == 60 && d.addr % 2048 == 0));

        // A too-long frame is an error, but the frame before it still goes.
        let err = tx
            .queue(3, |i, _| if i == 1 { 5000 } else { 60 })
            .unwrap_err();
        assert!(
            matches!(
                err,
                PortError::FrameTooLong {
                    len: 5000,
                    max: 1792
                }
            ),
            "{err}"
        );
        assert_eq!(tx.queued, 9);
        // A frame shorter than an Ethernet header is queued but refused.
        assert_eq!(tx.queue(2, |i, _| if i == 0 { 10 } else { 60 }).unwrap(), 2);
        assert_eq!(tx.queued, 10);

        // Everything completes: drain reports just the short frame.
        kernel_sends(&mut tx_ring, &mut completion, 7);
        assert_eq!(tx.drain(Duration::from_millis(10)).unwrap(), 1);
        assert_eq!(tx.free.len(), 8, "every frame is free again");
        assert_eq!(tx.drain(Duration::from_millis(10)).unwrap(), 0);
    }

    /// Frames that never complete count as refused once drain's timeout
    /// passes, and are not waited for again. Needs an AF_XDP socket (root)
    /// for the statistics drain reads when it stalls.
    #[test]
    fn drain_writes_off_frames_that_never_complete() {
        let fd = match super::super::socket::xsk_socket("test") {
            Ok(fd) => fd,
            Err(e) => {
                // As every skip: a failure under LINERATE_REQUIRE_ALL=1 (scripts/test.sh).
                if std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1") {
                    panic!("SKIPPED (needs root, an AF_XDP socket): {e}; LINERATE_REQUIRE_ALL=1 makes every skip a failure");
                }
                eprintln!("SKIPPED (needs root, an AF_XDP socket): drain timeout test: {e}");
                return;
            }
        };
        let mut tx_ring = FakeRing::new(8, 0, EMPTY);
        let mut completion = FakeRing::new(8, 0, 0u64);
        let umem = Arc::new(Umem::new(8, 2048, "test").unwrap());
        // SAFETY: the fake rings outlive `tx`; `tx` is their only user-space party.
        let (prod, cons) = unsafe {
            (
                ProdRing::new(tx_ring.parts(), None),
                ConsRing::new(completion.parts(), None),
            )
        };
        let frames = (0..8).map(|i| i * 2048).collect();
        let mut tx = XskTx::new(Arc::new(fd), umem, prod, cons, frames, 1792, "test");
        assert_eq!(tx.queue(5, |_, _| 60).unwrap(), 5);
        kernel_sends(&mut tx_ring, &mut completion, 2);
        let start = Instant::now();
        assert_eq!(tx.drain(Duration::from_millis(50)).unwrap(), 3);
        assert!(start.elapsed() >= Duration::from_millis(50));
        // Not waited for again; if they complete late, their frames come back.
        assert_eq!(tx.drain(Duration::from_millis(50)).unwrap(), 0);
        assert_eq!(tx.queue(2, |_, _| 60).unwrap(), 2);
        kernel_sends(&mut tx_ring, &mut completion, 3);
        // The three late ones are back, the two new ones are still waited for.
        let start = Instant::now();
        assert_eq!(tx.drain(Duration::from_millis(50)).unwrap(), 2);
        assert!(start.elapsed() >= Duration::from_millis(50));
        kernel_sends(&mut tx_ring, &mut completion, 2);
        assert_eq!(tx.drain(Duration::from_millis(50)).unwrap(), 0);
        assert_eq!(tx.free.len(), 8);
        assert_eq!(tx.written_off, 0);
    }
}
