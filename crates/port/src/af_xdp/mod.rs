//! The AF_XDP backend: one AF_XDP socket per port, bound to one receive
//! queue, with the four rings mmap'ed and a UMEM of frames shared with the
//! kernel, so frames move without a system call per frame and (on drivers
//! with zero-copy support) without a copy.
//!
//! The port splits like the AF_PACKET one, but around a single socket:
//! - [`XskTx`] owns the TX ring, the completion ring and the first half of
//!   the UMEM frames;
//! - [`XskRx`] owns the RX ring, the fill ring, the other half of the
//!   frames, the XDP program that steers the queue's frames into the socket
//!   (`xsk_redirect`, from linerate-bpf), and a small AF_PACKET socket for
//!   control frames (ARP), which thus never touch the generator's TX ring.
//!
//! Every ring has exactly one user-space party, so the halves share only
//! the socket's file descriptor and the UMEM mapping (disjoint frames).
//!
//! Limits, by design of AF_XDP:
//! - Only the bound queue is seen. On a multi-queue NIC, steer the test
//!   traffic to that queue (`ethtool -L IF combined 1`, or an ntuple rule);
//!   frames of other queues go on to the kernel stack. veth has one queue.
//! - A frame must fit one UMEM frame minus the kernel's 256-byte XDP
//!   headroom: 1792 bytes with 2048-byte frames, 3840 with 4096 (chosen when
//!   `max_frame_len` needs it). Jumbo frames would need multi-buffer
//!   AF_XDP; [`PortInfo::max_frame_len`] reports the limit.
//! - With [`AfXdpOptions::pass_ike`], IKE (UDP 500, UDP 4500 with the
//!   non-ESP marker, NAT keepalives) goes to the kernel stack instead of
//!   the socket; ESP in UDP 4500 still comes to the socket.
//! - Frames get no kernel timestamp: [`RxQueue::recv`](crate::RxQueue::recv)
//!   stamps each batch (at most 64 frames) when it is picked up.

mod mmap;
mod ring;
mod rx;
mod socket;
mod tx;

pub use linerate_bpf::xsk::XdpAttachMode;
pub use rx::XskRx;
pub use tx::XskTx;

use crate::{link, netns, Port, PortError, PortInfo};
use linerate_bpf::xsk::XskRedirect;
use mmap::Umem;
use ring::{ConsRing, ProdRing};
use socket::RingSizes;
use std::os::fd::AsFd;
use std::sync::Arc;

/// Headroom the kernel keeps in front of every received frame
/// (XDP_PACKET_HEADROOM).
const XDP_PACKET_HEADROOM: usize = 256;

/// Whether to ask for zero-copy mode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ZeroCopy {
    /// Zero-copy if the driver supports it, else copy mode.
    #[default]
    Auto,
    /// Zero-copy or fail.
    On,
    /// Copy mode, even where zero-copy would work.
    Off,
}

/// The mode the socket was bound in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpBindMode {
    /// The driver DMAs straight into and out of the UMEM.
    ZeroCopy,
    /// The kernel copies between its buffers and the UMEM (any driver).
    Copy,
}

impl XdpBindMode {
    pub fn as_str(self) -> &'static str {
        match self {
            XdpBindMode::ZeroCopy => "zero-copy",
            XdpBindMode::Copy => "copy",
        }
    }
}

/// Sizes and modes. Frame counts are rounded up to a power of two (the
/// rings need one), at least 64.
#[derive(Debug, Clone)]
pub struct AfXdpOptions {
    /// Largest frame (without FCS) the port must carry; picks the UMEM
    /// frame size (2048 or 4096 bytes).
    pub max_frame_len: usize,
    /// The receive queue to bind (and transmit on).
    pub queue_id: u32,
    pub zero_copy: ZeroCopy,
    /// UMEM frames of the transmit half; also the TX and completion ring
    /// sizes, so neither ring can overflow.
    pub tx_frames: u32,
    /// UMEM frames of the receive half; also the RX ring size (the fill
    /// ring gets twice as many entries, so returning frames never waits
    /// for the kernel's lazily published consumer position).
    pub rx_frames: u32,
    /// Attach the redirect program in generic mode only: the port
    /// receives through a CPU's backlog (see `AfPacketOptions::generic_xdp`).
    pub generic_xdp: bool,
    /// Pass IKE to the kernel instead of the AF_XDP socket: IPv4 (also
    /// behind one 802.1Q tag) UDP to port 500, and UDP to port 4500 whose
    /// first 4 payload bytes are zero (the non-ESP marker of RFC 3948) and
    /// NAT keepalives (one byte 0xff). ESP in UDP 4500 still goes to the
    /// socket. For the port of an IPsec peer whose IKE daemon has UDP
    /// sockets in the port's namespace: it goes on answering the gateway
    /// (rekeys, DPD) while the trial's ESP takes the fast path. Off: every
    /// frame of the queue goes to the socket.
    pub pass_ike: bool,
}

impl Default for AfXdpOptions {
    /// 4096 transmit frames (8 MiB with 2048-byte frames) and 8192 receive
    /// frames (16 MiB): about 0.5 ms of 64-byte frames at 10 Gbit/s in the
    /// RX ring, more for larger frames.
    fn default() -> Self {
        AfXdpOptions {
            max_frame_len: 1514,
            queue_id: 0,
            zero_copy: ZeroCopy::Auto,
            tx_frames: 4096,
            rx_frames: 8192,
            generic_xdp: false,
            pass_ike: false,
        }
    }
}

/// UMEM frame size for frames up to `max_frame_len` bytes, and the largest
/// frame it carries both ways (the RX side loses the XDP headroom).
pub fn frame_layout(max_frame_len: usize) -> (u32, usize) {
    let chunk = if max_frame_len + XDP_PACKET_HEADROOM <= 2048 {
        2048
    } else {
        4096
    };
    (chunk as u32, chunk - XDP_PACKET_HEADROOM)
}

fn ring_frames(n: u32) -> u32 {
    n.clamp(64, 1 << 20).next_power_of_two()
}

/// A tester port on one queue of a Linux interface through AF_XDP.
pub struct AfXdpPort {
    info: PortInfo,
    mode: XdpBindMode,
    attach_mode: XdpAttachMode,
    tx: XskTx,
    rx: XskRx,
}

impl AfXdpPort {
    /// Opens queue `opts.queue_id` of `ifname`, inside network namespace
    /// `netns` when given (sockets, and the XDP program's attachment by
    /// interface index, belong to the namespace they are made in).
    pub fn open(
        ifname: &str,
        netns: Option<&str>,
        opts: &AfXdpOptions,
    ) -> Result<AfXdpPort, PortError> {
        netns::maybe_in_netns(netns, || open_here(ifname, netns, opts))
    }

    /// Zero-copy or copy: what the kernel granted.
    pub fn mode(&self) -> XdpBindMode {
        self.mode
    }

    /// Native (driver) or generic: how the steering XDP program is attached.
    pub fn attach_mode(&self) -> XdpAttachMode {
        self.attach_mode
    }
}

fn open_here(
    ifname: &str,
    netns: Option<&str>,
    opts: &AfXdpOptions,
) -> Result<AfXdpPort, PortError> {
    let control = socket::control_socket(ifname)?;
    let facts = link::link_facts(&control, ifname)?;
    if !facts.up {
        return Err(PortError::InterfaceDown(ifname.to_string()));
    }
    if opts.queue_id >= linerate_bpf::xsk::MAX_QUEUES {
        return Err(PortError::Unsupported(format!(
            "queue {} of '{ifname}' is beyond the {} queues linerate's AF_XDP program steers: \
             choose a lower queue",
            opts.queue_id,
            linerate_bpf::xsk::MAX_QUEUES
        )));
    }
    let (chunk, max_frame_len) = frame_layout(opts.max_frame_len);
    let tx_frames = ring_frames(opts.tx_frames);
    let rx_frames = ring_frames(opts.rx_frames);

    let fd = socket::xsk_socket(ifname)?;
    let umem = Umem::new(tx_frames + rx_frames, chunk, ifname)?;
    socket::register_umem(&fd, &umem, ifname)?;
    let rings = socket::create_rings(
        &fd,
        RingSizes {
            fill: rx_frames * 2,
            completion: tx_frames,
            rx: rx_frames,
            tx: tx_frames,
        },
        ifname,
    )?;
    socket::force_sndbuf(&fd, tx_frames as usize * (chunk as usize + 1024), ifname)?;

    // SAFETY: each ring's parts point into its own mapping, which moves into
    // the ring value; each ring gets exactly one user-space party (TX and
    // completion: XskTx; RX and fill: XskRx).
    let (tx_ring, completion, rx_ring, fill) = unsafe {
        (
            ProdRing::new(rings.tx.parts, Some(rings.tx.map)),
            ConsRing::new(rings.completion.parts, Some(rings.completion.map)),
            ConsRing::new(rings.rx.parts, Some(rings.rx.map)),
            ProdRing::new(rings.fill.parts, Some(rings.fill.map)),
        )
    };
    let addr = |i: u32| i as u64 * chunk as u64;
    let tx_addrs: Vec<u64> = (0..tx_frames).map(addr).collect();
    let rx_addrs: Vec<u64> = (tx_frames..tx_frames + rx_frames).map(addr).collect();

    let fd = Arc::new(fd);
    let umem = Arc::new(umem);
    let tx = XskTx::new(
        Arc::clone(&fd),
        Arc::clone(&umem),
        tx_ring,
        completion,
        tx_addrs,
        max_frame_len,
        ifname,
    );

    // Every receive frame goes on the fill ring before the bind, so the
    // first frame to arrive finds a buffer.
    let mut fill = fill;
    assert!(
        fill.free(rx_frames) >= rx_frames,
        "a new fill ring is empty"
    );
    for (i, &a) in rx_addrs.iter().enumerate() {
        fill.write(i as u32, a);
    }
    fill.submit(rx_frames);

    // Auto passes neither XDP_ZEROCOPY nor XDP_COPY: the kernel then tries
    // zero-copy and falls back to copy mode by itself on any driver error,
    // on the same socket (re-binding a socket after a failed bind is not
    // something to rely on).
    let mode_flag = match opts.zero_copy {
        ZeroCopy::Auto => 0,
        ZeroCopy::On => libc::XDP_ZEROCOPY,
        ZeroCopy::Off => libc::XDP_COPY,
    };
    socket::bind(
        &fd,
        facts.ifindex,
        opts.queue_id,
        libc::XDP_USE_NEED_WAKEUP | mode_flag,
        ifname,
    )?;
    let mode = if socket::is_zero_copy(&fd, ifname)? {
        XdpBindMode::ZeroCopy
    } else {
        XdpBindMode::Copy
    };

    // Load and attach only now: nothing is steered to the socket before it
    // is bound and in the map (until then frames go to the stack).
    let mut redirect = XskRedirect::load_with(opts.pass_ike).map_err(bpf_error)?;
    redirect
        .attach(facts.ifindex, ifname, opts.generic_xdp)
        .map_err(bpf_error)?;
    redirect
        .insert(opts.queue_id, fd.as_fd())
        .map_err(bpf_error)?;
    let attach_mode = redirect
        .attach_mode()
        .expect("attach succeeded, so a mode is known");
    socket::bind_control(&control, facts.ifindex, ifname)?;
    let rx = XskRx::new(
        fd, umem, rx_ring, fill, rx_frames, control, redirect, ifname,
    );

    let info = PortInfo {
        ifname: ifname.to_string(),
        netns: netns.map(str::to_string),
        mac: facts.mac,
        mtu: facts.mtu,
        speed_bps: facts.speed_bps,
        max_frame_len,
    };
    Ok(AfXdpPort {
        info,
        mode,
        attach_mode,
        tx,
        rx,
    })
}

fn bpf_error(e: linerate_bpf::BpfError) -> PortError {
    // BpfError's message already names the fix (root, kernel, --engine af_packet).
    PortError::Unsupported(e.to_string())
}

impl Port for AfXdpPort {
    type Tx = XskTx;
    type Rx = XskRx;

    fn info(&self) -> &PortInfo {
        &self.info
    }

    fn split(self) -> (XskTx, XskRx, PortInfo) {
        (self.tx, self.rx, self.info)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_sizes_pick_the_umem_frame() {
        assert_eq!(frame_layout(64), (2048, 1792));
        assert_eq!(frame_layout(1514), (2048, 1792));
        assert_eq!(frame_layout(1792), (2048, 1792));
        assert_eq!(frame_layout(1793), (4096, 3840));
        // Jumbo frames do not fit: the limit is reported, not stretched.
        assert_eq!(frame_layout(9000), (4096, 3840));
    }

    #[test]
    fn frame_counts_are_powers_of_two() {
        assert_eq!(ring_frames(0), 64);
        assert_eq!(ring_frames(1000), 1024);
        assert_eq!(ring_frames(4096), 4096);
        assert_eq!(ring_frames(u32::MAX), 1 << 20);
    }

    #[test]
    fn mode_names() {
        assert_eq!(XdpBindMode::ZeroCopy.as_str(), "zero-copy");
        assert_eq!(XdpBindMode::Copy.as_str(), "copy");
        assert_eq!(ZeroCopy::default(), ZeroCopy::Auto);
    }
}
