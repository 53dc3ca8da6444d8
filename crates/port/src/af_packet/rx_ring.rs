//! PACKET_RX_RING, TPACKET_V3: the kernel fills whole blocks of frames and
//! hands a block over when it is full or its timer expires, so the receiver
//! wakes once per block, not once per frame.

use super::mmap::RingMap;
use super::socket::{bind, packet_socket, set_opt};
use super::AfPacketOptions;
use crate::{PortError, RxQueue};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

/// A block is handed to user space after this long even when not full, so a
/// trickle of frames (or the last frames of a trial) is not held back.
const BLOCK_TIMEOUT_MS: u32 = 2;

pub struct RxRing {
    fd: OwnedFd,
    map: Option<RingMap>,
    ifname: String,
    block_size: usize,
    blocks: usize,
    current: usize,
    ifindex: i32,
}

impl RxRing {
    /// Creates the socket and its ring, not yet bound: it receives nothing
    /// until [`RxRing::bind`], so no frame of another interface slips in.
    pub(crate) fn open(ifname: &str, opts: &AfPacketOptions) -> Result<RxRing, PortError> {
        let mut ring = RxRing {
            fd: packet_socket(ifname)?,
            map: None,
            ifname: ifname.to_string(),
            block_size: opts.rx_block_size,
            blocks: opts.rx_blocks,
            current: 0,
            ifindex: 0,
        };
        ring.configure(opts)?;
        Ok(ring)
    }

    fn configure(&mut self, opts: &AfPacketOptions) -> Result<(), PortError> {
        let name = self.ifname.clone();
        let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        set_opt(
            &self.fd,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &version,
            "selecting TPACKET_V3",
            &name,
        )?;
        // Our own transmissions (ARP replies) are not received frames.
        let one: libc::c_int = 1;
        set_opt(
            &self.fd,
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            &one,
            "ignoring outgoing frames",
            &name,
        )?;
        attach_snaplen_filter(&self.fd, opts.rx_snaplen, &name)?;
        let frame_size = 2048usize;
        let req = libc::tpacket_req3 {
            tp_block_size: self.block_size as u32,
            tp_block_nr: self.blocks as u32,
            tp_frame_size: frame_size as u32,
            tp_frame_nr: (self.block_size / frame_size * self.blocks) as u32,
            tp_retire_blk_tov: BLOCK_TIMEOUT_MS,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        set_opt(
            &self.fd,
            libc::SOL_PACKET,
            libc::PACKET_RX_RING,
            &req,
            "creating the RX ring",
            &name,
        )?;
        self.map = Some(RingMap::new(
            &self.fd,
            self.block_size * self.blocks,
            &name,
        )?);
        Ok(())
    }

    pub(crate) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    pub(crate) fn bind(mut self, ifindex: i32) -> Result<RxRing, PortError> {
        bind(&self.fd, ifindex, libc::ETH_P_ALL as u16, &self.ifname)?;
        self.ifindex = ifindex;
        Ok(self)
    }

    #[inline]
    fn block(&self, i: usize) -> *mut libc::tpacket_block_desc {
        let map = self.map.as_ref().expect("ring mapped at open");
        // SAFETY: i < blocks, so the block lies inside the mapping.
        unsafe { map.at(i * self.block_size).cast() }
    }

    #[inline]
    fn block_ready(&self, i: usize) -> bool {
        // SAFETY: reading the status word of a block header in the mapping;
        // the acquire fence orders the frame reads after it.
        let status = unsafe { std::ptr::read_volatile(&(*self.block(i)).hdr.bh1.block_status) };
        fence(Ordering::Acquire);
        status & libc::TP_STATUS_USER != 0
    }

    fn wait(&self, timeout: Duration) -> Result<(), PortError> {
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN | libc::POLLERR,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: one valid pollfd.
        let rc = unsafe { libc::poll(&mut pfd, 1, ms) };
        if rc < 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EINTR) {
                return Err(PortError::io("waiting for frames", &self.ifname, err));
            }
        }
        Ok(())
    }
}

impl RxQueue for RxRing {
    #[inline]
    fn recv<F: FnMut(&[u8], usize, u64)>(
        &mut self,
        timeout: Duration,
        mut f: F,
    ) -> Result<usize, PortError> {
        if !self.block_ready(self.current) {
            self.wait(timeout)?;
        }
        let mut frames = 0;
        // Take every ready block in ring order, at most one lap.
        for _ in 0..self.blocks {
            if !self.block_ready(self.current) {
                break;
            }
            let block = self.block(self.current);
            // SAFETY: the block is ours while its status says USER; the kernel
            // wrote num_pkts frames starting at offset_to_first_pkt, each frame
            // header giving the offset of the next, all inside the block.
            unsafe {
                let bh = &(*block).hdr.bh1;
                let mut at = block.cast::<u8>().add(bh.offset_to_first_pkt as usize);
                for _ in 0..bh.num_pkts {
                    let hdr = &*(at.cast::<libc::tpacket3_hdr>());
                    let data = std::slice::from_raw_parts(
                        at.add(hdr.tp_mac as usize),
                        hdr.tp_snaplen as usize,
                    );
                    let arrival = hdr.tp_sec as u64 * 1_000_000_000 + hdr.tp_nsec as u64;
                    f(data, hdr.tp_len as usize, arrival);
                    at = at.add(hdr.tp_next_offset as usize);
                }
                frames += bh.num_pkts as usize;
                fence(Ordering::Release);
                std::ptr::write_volatile(
                    &mut (*block).hdr.bh1.block_status,
                    libc::TP_STATUS_KERNEL,
                );
            }
            self.current = (self.current + 1) % self.blocks;
        }
        Ok(frames)
    }

    fn send_control(&mut self, frame: &[u8]) -> Result<(), PortError> {
        // SAFETY: sockaddr_ll is plain old data.
        let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_ifindex = self.ifindex;
        // A control frame may meet a full device queue right after a trial
        // (ENOBUFS): try again briefly, then let the protocol's own retry
        // (ARP asks again) cover it rather than fail the run.
        for _ in 0..5 {
            // SAFETY: frame and addr are valid for the lengths passed.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&addr as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            if rc >= 0 {
                return Ok(());
            }
            let err = std::io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::ENOBUFS) | Some(libc::EAGAIN) | Some(libc::EINTR) => {
                    std::thread::sleep(std::time::Duration::from_millis(1))
                }
                _ => return Err(PortError::io("sending a control frame", &self.ifname, err)),
            }
        }
        Ok(())
    }

    fn take_drops(&mut self) -> Result<u64, PortError> {
        // SAFETY: tpacket_stats_v3 is plain old data.
        let mut stats: libc::tpacket_stats_v3 = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: PACKET_STATISTICS writes at most `len` bytes into `stats`; reading resets the counters.
        let rc = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut stats as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(PortError::io(
                "reading receive statistics",
                &self.ifname,
                std::io::Error::last_os_error(),
            ));
        }
        Ok(stats.tp_drops as u64)
    }
}

/// A one-instruction classic BPF filter, `ret #snaplen`: every frame is
/// accepted but only its first `snaplen` bytes are copied into the ring.
fn attach_snaplen_filter(fd: &OwnedFd, snaplen: u32, ifname: &str) -> Result<(), PortError> {
    let mut code = [libc::sock_filter {
        code: 0x06, /* BPF_RET | BPF_K */
        jt: 0,
        jf: 0,
        k: snaplen,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: code.as_mut_ptr(),
    };
    set_opt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_ATTACH_FILTER,
        &prog,
        "attaching the snap-length filter",
        ifname,
    )
}
