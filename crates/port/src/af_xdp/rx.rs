//! The receive half: for each bound queue the RX ring, the fill ring and
//! its own half of that socket's UMEM frames; the XDP program that steers
//! each queue's frames to its socket; and a small AF_PACKET socket for
//! control frames.
//!
//! A frame is on the fill ring (waiting for a received frame), on the RX
//! ring (holding one), or briefly in [`XskRx::recv`]'s hands, which gives it
//! straight back to the fill ring after the callback has seen it.

use super::mmap::Umem;
use super::ring::{ConsRing, ProdRing};
use super::socket::{kick_rx, statistics, wait_readable};
use crate::{realtime_ns, PortError, RxQueue};
use linerate_bpf::xsk::XskRedirect;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Arc;
use std::time::Duration;

/// Frames handed over per timestamp (and per ring update): small enough
/// that one arrival time stands for frames that arrived close together.
const BATCH: u32 = 64;

/// The receive rings of one queue's socket and the UMEM frames they own.
pub(crate) struct QueueRings {
    fd: Arc<OwnedFd>,
    umem: Arc<Umem>,
    rx: ConsRing<libc::xdp_desc>,
    fill: ProdRing<u64>,
    /// Frames received but not yet back on the fill ring (it looked full:
    /// the kernel publishes its consumer position lazily). Empty in practice,
    /// the fill ring has twice the entries of the half's frames.
    refill: Vec<u64>,
    chunk_mask: u64,
    /// How many UMEM frames this half owns.
    frames: u32,
    /// rx_dropped + rx_ring_full at the last `take_drops`.
    drops_seen: u64,
}

impl QueueRings {
    pub(crate) fn new(
        fd: Arc<OwnedFd>,
        umem: Arc<Umem>,
        rx: ConsRing<libc::xdp_desc>,
        fill: ProdRing<u64>,
        frames: u32,
    ) -> QueueRings {
        QueueRings {
            chunk_mask: !(umem.chunk_size() as u64 - 1),
            frames,
            fd,
            umem,
            rx,
            fill,
            refill: Vec::with_capacity(frames as usize),
            drops_seen: 0,
        }
    }

    /// The queue's socket.
    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// Puts received frames (and any left over) back on the fill ring.
    /// Returns false if some did not fit (they stay on `refill`).
    fn refill(&mut self, ifname: &str) -> Result<bool, PortError> {
        if self.refill.is_empty() {
            return Ok(true);
        }
        let want = self.refill.len().min(u32::MAX as usize) as u32;
        let n = self.fill.free(want).min(want);
        for i in 0..n {
            let addr = self.refill.pop().expect("n <= refill.len()");
            self.fill.write(i, addr);
        }
        self.fill.submit(n);
        if n > 0 && self.fill.needs_wakeup() {
            // A zero-copy driver that ran out of buffers sleeps until told.
            kick_rx(&self.fd, ifname)?;
        }
        Ok(self.refill.is_empty())
    }

    /// Hands over one batch of at most BATCH frames; returns its size.
    #[inline]
    fn batch<F: FnMut(&[u8], usize, u64)>(&mut self, f: &mut F) -> u32 {
        let n = self.rx.available(BATCH);
        if n == 0 {
            return 0;
        }
        // AF_XDP carries no per-frame kernel timestamp: the batch's frames
        // all get the time they were picked up, at most a batch late.
        let now = realtime_ns();
        for i in 0..n {
            let desc = self.rx.read(i);
            // SAFETY: the descriptor is ours until released below; the kernel
            // wrote `len` bytes at `addr` and does not touch the frame again
            // until it is back on the fill ring.
            let frame = unsafe { self.umem.frame(desc.addr, desc.len as usize) };
            f(frame, frame.len(), now);
            // In aligned mode the address points past the headroom; the
            // fill ring takes the chunk's start.
            self.refill.push(desc.addr & self.chunk_mask);
        }
        self.rx.release(n);
        n
    }

    /// Hands over what the queue holds: batches while frames are ready, at
    /// most one ring's worth, so the caller gets to its own work (ARP
    /// replies, the stop flag, the other queues).
    #[inline]
    fn drain<F: FnMut(&[u8], usize, u64)>(
        &mut self,
        f: &mut F,
        ifname: &str,
    ) -> Result<u32, PortError> {
        let mut total = 0;
        while total < self.frames {
            let n = self.batch(f);
            if n == 0 {
                break;
            }
            total += n;
            self.refill(ifname)?;
        }
        Ok(total)
    }

    /// rx_dropped + rx_ring_full since the last call.
    fn take_drops(&mut self, ifname: &str) -> Result<u64, PortError> {
        let stats = statistics(&self.fd, ifname)?;
        let total = stats.rx_dropped + stats.rx_ring_full;
        let delta = total.saturating_sub(self.drops_seen);
        self.drops_seen = total;
        Ok(delta)
    }
}

/// The port's receive side: one socket per bound queue, read in turn by
/// one thread, so frames the device spreads over its queues (RSS, or a
/// veth's per-CPU queues) all reach the receiver.
pub struct XskRx {
    /// Keeps the program attached while frames are received. Declared first
    /// so it is detached before the sockets close: no frame is steered to a
    /// socket on its way out.
    _redirect: XskRedirect,
    queues: Vec<QueueRings>,
    /// The sockets to wait on, in `queues`' order.
    pollfds: Vec<libc::pollfd>,
    control: OwnedFd,
    ifname: String,
}

impl XskRx {
    /// # Panics
    ///
    /// If `queues` is empty.
    pub(crate) fn new(
        queues: Vec<QueueRings>,
        control: OwnedFd,
        redirect: XskRedirect,
        ifname: &str,
    ) -> XskRx {
        assert!(!queues.is_empty(), "a receiver needs a queue");
        let pollfds = queues
            .iter()
            .map(|q| libc::pollfd {
                fd: q.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        XskRx {
            queues,
            pollfds,
            control,
            ifname: ifname.to_string(),
            _redirect: redirect,
        }
    }

    /// How many queues it receives on.
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// Every queue's frames that are ready.
    #[inline]
    fn drain_all<F: FnMut(&[u8], usize, u64)>(&mut self, f: &mut F) -> Result<u32, PortError> {
        let mut total = 0;
        for q in &mut self.queues {
            total += q.drain(f, &self.ifname)?;
        }
        Ok(total)
    }
}

impl RxQueue for XskRx {
    #[inline]
    fn recv<F: FnMut(&[u8], usize, u64)>(
        &mut self,
        timeout: Duration,
        mut f: F,
    ) -> Result<usize, PortError> {
        let mut total = self.drain_all(&mut f)?;
        if total == 0 {
            let mut starved = false;
            for q in &mut self.queues {
                starved |= !q.refill(&self.ifname)?;
            }
            if starved {
                // Buffers are short: do not sleep on a queue starved of them.
                std::thread::yield_now();
                return Ok(0);
            }
            // poll also wakes a zero-copy driver that waits for the fill
            // ring; in copy mode it also sends what the TX ring holds (the
            // kernel serialises that with the generator's sendto).
            wait_readable(&mut self.pollfds, timeout, &self.ifname)?;
            total = self.drain_all(&mut f)?;
        }
        Ok(total as usize)
    }

    fn send_control(&mut self, frame: &[u8]) -> Result<(), PortError> {
        // A control frame may meet a full device queue right after a trial
        // (ENOBUFS): try again briefly, then let the protocol's own retry
        // (ARP asks again) cover it rather than fail the run.
        for _ in 0..5 {
            // SAFETY: frame is valid for its length; the socket is bound to
            // the interface, so no address is needed.
            let rc = unsafe {
                libc::send(
                    self.control.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                )
            };
            if rc >= 0 {
                return Ok(());
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                _ => return Err(PortError::io("sending a control frame", &self.ifname, err)),
            }
        }
        Ok(())
    }

    /// Frames the sockets dropped since the last call: `rx_dropped` (no
    /// fill buffer available, or a frame longer than a UMEM frame) plus
    /// `rx_ring_full` (the RX ring was full: the receiver fell behind),
    /// summed over the queues. `rx_fill_ring_empty_descs` is not added: in
    /// copy mode the same events are already in `rx_dropped`, and in
    /// zero-copy mode it counts the driver's failed attempts to take a
    /// buffer, not frames (the frames a NIC then drops show in its own
    /// counters).
    fn take_drops(&mut self) -> Result<u64, PortError> {
        let mut drops = 0;
        for q in &mut self.queues {
            drops += q.take_drops(&self.ifname)?;
        }
        Ok(drops)
    }
}
