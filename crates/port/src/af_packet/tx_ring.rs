//! PACKET_TX_RING, TPACKET_V2, with qdisc bypass.
//!
//! The generator writes each frame into the next free slot and marks it
//! SEND_REQUEST; one `sendto` then hands every marked slot to the driver.
//! A slot returns to AVAILABLE once the kernel has freed the frame, so the
//! ring doubles as the count of frames in flight. The kernel retries a slot
//! it could not send (no buffer, queue full) on the next `sendto`, so every
//! queued frame leaves exactly once unless it is refused as malformed.
//!
//! Backing off a full device queue: `sendto` stops at the first frame the
//! device refuses (a veth whose peer's 256-frame queue is full, a NIC whose
//! TX ring is full). That frame was built as a socket buffer, offered and
//! freed for nothing, and calling again at once only repeats the waste:
//! measured on a veth at 64 bytes, about one refusal for every three frames
//! delivered (docs/BENCHMARKS.md). So after a refusal [`TxRing::flush`]
//! makes no system call until half of the frames the device held at that
//! moment have completed (their slots are AVAILABLE again: for a veth, the
//! receiver has taken them). The ring itself is not limited: a fast link
//! that never refuses keeps every slot in flight, where the default send
//! buffer (trafgen's way of not being refused on a veth) would cap the
//! rate on real NICs.

use super::mmap::RingMap;
use super::socket::{bind, force_sndbuf, packet_socket, set_opt};
use super::AfPacketOptions;
use crate::{PortError, TxQueue};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};
use std::time::{Duration, Instant};

/// TPACKET_V2 transmit frames start right after the aligned header.
const TX_DATA_OFFSET: usize = 32;
/// `struct virtio_net_hdr`, in front of each frame with PACKET_VNET_HDR.
const VNET_HDR_LEN: usize = 10;
/// Frames up to this long are copied whole into the socket buffer (see
/// [`TxRing::open`]); the rest of a longer one is attached from the ring.
const LINEAR_MAX: usize = 1600;
const _: () =
    assert!(TX_DATA_OFFSET == libc::TPACKET2_HDRLEN - std::mem::size_of::<libc::sockaddr_ll>());

pub struct TxRing {
    fd: OwnedFd,
    map: RingMap,
    ifname: String,
    slot_size: usize,
    slots: usize,
    head: usize,
    max_frame_len: usize,
    /// VNET_HDR_LEN with PACKET_VNET_HDR, else 0.
    vnet: usize,
    refused: u64,
    /// After a refused `sendto`: a slot that was in flight then; no system
    /// call until it has completed (see the module comment).
    backoff: Option<usize>,
}

impl TxRing {
    pub(crate) fn open(
        ifname: &str,
        ifindex: i32,
        opts: &AfPacketOptions,
    ) -> Result<TxRing, PortError> {
        let fd = packet_socket(ifname)?;
        let version = libc::tpacket_versions::TPACKET_V2 as libc::c_int;
        set_opt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &version,
            "selecting TPACKET_V2",
            ifname,
        )?;
        // Bypass the qdisc: the tester wants the driver, not traffic control.
        let one: libc::c_int = 1;
        set_opt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_QDISC_BYPASS,
            &one,
            "enabling qdisc bypass",
            ifname,
        )?;

        // A virtio-net header in front of every frame, whose hdr_len tells
        // the kernel how much of the frame to copy into the socket buffer:
        // without it only the 14-byte Ethernet header is copied and the
        // rest is attached as a page of the ring (zero-copy), which a veth
        // must then copy into a newly allocated page anyway (skb_copy_ubufs,
        // because the buffer leaves for another device) and the receiver
        // must free. Copying the whole frame up front is cheaper on both
        // CPUs (docs/BENCHMARKS.md). Kernels without the option send as
        // before.
        let vnet = if set_opt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_VNET_HDR,
            &one,
            "enabling virtio-net headers",
            ifname,
        )
        .is_ok()
        {
            VNET_HDR_LEN
        } else {
            0
        };
        let slot_size = (TX_DATA_OFFSET + vnet + opts.max_frame_len)
            .next_power_of_two()
            .max(256);
        let block_size = slot_size.max(1 << 16);
        let slots = opts
            .tx_slots
            .max(block_size / slot_size)
            .next_power_of_two();
        let block_nr = slots * slot_size / block_size;
        let req = libc::tpacket_req {
            tp_block_size: block_size as u32,
            tp_block_nr: block_nr as u32,
            tp_frame_size: slot_size as u32,
            tp_frame_nr: slots as u32,
        };
        set_opt(
            &fd,
            libc::SOL_PACKET,
            libc::PACKET_TX_RING,
            &req,
            "creating the TX ring",
            ifname,
        )?;
        force_sndbuf(&fd, slots * (slot_size + 1024), ifname)?;
        let map = RingMap::new(&fd, block_size * block_nr, ifname)?;
        // Protocol 0: this socket sends only, it never taps received frames.
        bind(&fd, ifindex, 0, ifname)?;
        Ok(TxRing {
            fd,
            map,
            ifname: ifname.to_string(),
            slot_size,
            slots,
            head: 0,
            max_frame_len: slot_size - TX_DATA_OFFSET - vnet,
            vnet,
            refused: 0,
            backoff: None,
        })
    }

    pub(crate) fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    #[inline]
    fn header(&self, slot: usize) -> *mut libc::tpacket2_hdr {
        // SAFETY: slot < self.slots, so the offset lies inside the mapping.
        unsafe { self.map.at(slot * self.slot_size).cast() }
    }

    #[inline]
    fn status(&self, slot: usize) -> u32 {
        // SAFETY: the header lies in the mapping; the kernel writes the status
        // concurrently, hence the volatile read followed by an acquire fence.
        let s = unsafe { std::ptr::read_volatile(&(*self.header(slot)).tp_status) };
        fence(Ordering::Acquire);
        s
    }

    fn in_flight(&self) -> bool {
        (0..self.slots)
            .any(|i| self.status(i) & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING) != 0)
    }

    /// Called after the device refused a frame: picks the slot to wait for,
    /// half way through the frames the kernel holds (SENDING). Slots are
    /// filled in order, so the frames in flight are the SENDING run that
    /// ends where the marked but unsent (SEND_REQUEST) slots begin.
    fn back_off(&mut self) {
        // The refused frame and any queued after it are SEND_REQUEST; the
        // ones before it, back to the oldest in flight, SENDING.
        let mut sending = 0;
        let mut slot = self.head;
        for _ in 0..self.slots {
            slot = (slot + self.slots - 1) & (self.slots - 1);
            let status = self.status(slot);
            if status & libc::TP_STATUS_SENDING != 0 {
                sending += 1;
            } else if status & libc::TP_STATUS_SEND_REQUEST == 0 || sending > 0 {
                break; // past the oldest frame in flight
            }
        }
        // `slot` is now just before the oldest SENDING one (or the oldest
        // itself if the whole ring is in flight); wait for the middle one.
        self.backoff = (sending > 1).then(|| (slot + sending / 2 + 1) & (self.slots - 1));
    }
}

impl TxQueue for TxRing {
    #[inline]
    fn queue<F: FnMut(usize, &mut [u8]) -> usize>(
        &mut self,
        n: usize,
        mut fill: F,
    ) -> Result<usize, PortError> {
        let mut queued = 0;
        while queued < n {
            let status = self.status(self.head);
            if status & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING) != 0 {
                break; // the ring is full of frames in flight
            }
            if status & libc::TP_STATUS_WRONG_FORMAT != 0 {
                self.refused += 1;
            }
            let hdr = self.header(self.head);
            // SAFETY: the slot is ours (status AVAILABLE) until we hand it back;
            // its data area is max_frame_len bytes inside the mapping.
            let buf = unsafe {
                std::slice::from_raw_parts_mut(
                    hdr.cast::<u8>().add(TX_DATA_OFFSET + self.vnet),
                    self.max_frame_len,
                )
            };
            let len = fill(queued, buf);
            if len > self.max_frame_len {
                return Err(PortError::FrameTooLong {
                    len,
                    max: self.max_frame_len,
                });
            }
            if self.vnet > 0 {
                // No offloads (flags, gso_type 0); hdr_len: bytes to copy.
                let mut vnet = [0u8; VNET_HDR_LEN];
                vnet[2..4].copy_from_slice(&(len.min(LINEAR_MAX) as u16).to_le_bytes());
                // SAFETY: the header area lies in the slot, before the frame.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        vnet.as_ptr(),
                        hdr.cast::<u8>().add(TX_DATA_OFFSET),
                        VNET_HDR_LEN,
                    )
                };
            }
            // SAFETY: as above; the release fence orders the frame bytes and
            // length before the status that gives the slot to the kernel.
            unsafe {
                (*hdr).tp_len = (self.vnet + len) as u32;
                fence(Ordering::Release);
                std::ptr::write_volatile(&mut (*hdr).tp_status, libc::TP_STATUS_SEND_REQUEST);
            }
            self.head = (self.head + 1) & (self.slots - 1);
            queued += 1;
        }
        Ok(queued)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if let Some(slot) = self.backoff {
            if self.status(slot) & libc::TP_STATUS_SENDING != 0 {
                return Ok(()); // the device is still busy with what it refused to take more of
            }
            self.backoff = None;
        }
        // SAFETY: sendto with no buffer asks the kernel to send the ring's marked slots.
        let rc = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if rc < 0 {
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                // The device refused a frame (queue full: ENOBUFS): the
                // slots stay marked and go out once it has made room.
                Some(libc::ENOBUFS) => self.back_off(),
                // Send buffer full (EAGAIN) or interrupted: the slots stay
                // marked and go out on the next flush.
                Some(libc::EAGAIN) | Some(libc::EINTR) => {}
                _ => return Err(PortError::io("sending from the TX ring", &self.ifname, err)),
            }
        }
        Ok(())
    }

    fn drain(&mut self, timeout: Duration) -> Result<u64, PortError> {
        let deadline = Instant::now() + timeout;
        while self.in_flight() {
            if Instant::now() > deadline {
                return Err(PortError::io(
                    "waiting for the TX ring to empty",
                    &self.ifname,
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "frames still queued: is the link up?",
                    ),
                ));
            }
            self.flush()?;
            std::thread::yield_now();
        }
        for i in 0..self.slots {
            if self.status(i) & libc::TP_STATUS_WRONG_FORMAT != 0 {
                self.refused += 1;
                // SAFETY: the slot is not in flight; resetting it to AVAILABLE is ours to do.
                unsafe {
                    std::ptr::write_volatile(
                        &mut (*self.header(i)).tp_status,
                        libc::TP_STATUS_AVAILABLE,
                    )
                };
            }
        }
        Ok(std::mem::take(&mut self.refused))
    }
}
