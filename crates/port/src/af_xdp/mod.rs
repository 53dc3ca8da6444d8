//! The AF_XDP backend: one AF_XDP socket per receive queue of the port,
//! each with its four rings mmap'ed and a UMEM of frames shared with the
//! kernel, so frames move without a system call per frame and (on drivers
//! with zero-copy support) without a copy.
//!
//! The port splits like the AF_PACKET one:
//! - one [`XskTx`] per transmitting queue (the first `tx_queues` bound),
//!   each owning its socket's TX ring, completion ring and the first half
//!   of its UMEM frames: a generator thread each;
//! - one [`XskRx`] owning every socket's RX ring, fill ring and the other
//!   half of its frames, read in turn by one thread; the XDP program that
//!   steers each queue's frames into its socket (`xsk_redirect`, from
//!   linerate-bpf); and a small AF_PACKET socket for control frames (ARP),
//!   which thus never touch a generator's TX ring.
//!
//! Every ring has exactly one user-space party, so the halves share only
//! the sockets' file descriptors and UMEM mappings (disjoint frames).
//!
//! Limits, by design of AF_XDP:
//! - Every receive queue the device reports (`ethtool -l`) is bound, up to
//!   64 from the first; frames of queues beyond go on to the kernel stack.
//!   A driver that reports no channels gets the asked queue only: steer
//!   the test traffic to it (`ethtool -L IF combined 1`, or an ntuple
//!   rule). A veth has one queue unless made with `numrxqueues`.
//! - A transmitting socket needs a queue of its own: `tx_queues` cannot
//!   exceed the queues bound.
//! - A frame must fit one UMEM frame minus the kernel's 256-byte XDP
//!   headroom: 1792 bytes with 2048-byte frames, 3840 with 4096 (chosen when
//!   `max_frame_len` needs it). Jumbo frames would need multi-buffer
//!   AF_XDP; [`PortInfo::max_frame_len`] reports the limit.
//! - With [`AfXdpOptions::pass_ike`], IKE (UDP 500, UDP 4500 with the
//!   non-ESP marker, NAT keepalives, and the later IP fragments of an IKE
//!   datagram) goes to the kernel stack instead of the socket; ESP in UDP
//!   4500 still comes to the socket.
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

use crate::link::{self, QueueCounts};
use crate::{netns, Port, PortError, PortInfo};
use linerate_bpf::xsk::{XskRedirect, MAX_QUEUES};
use mmap::Umem;
use ring::{ConsRing, ProdRing};
use rx::QueueRings;
use socket::RingSizes;
use std::os::fd::{AsFd, OwnedFd};
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
    /// The first receive queue to bind (and transmit on).
    pub queue_id: u32,
    /// How many queues to bind from `queue_id` on, a socket each. None:
    /// every receive queue the device reports from `queue_id` on (at most
    /// 64), so no frame the device spreads over its queues is missed.
    pub queues: Option<u32>,
    /// How many of the bound queues transmit, the first ones: one
    /// generator thread each ([`AfXdpPort::split_queues`]). At least 1.
    pub tx_queues: u32,
    pub zero_copy: ZeroCopy,
    /// UMEM frames of a transmitting queue's half; also its TX and
    /// completion ring sizes, so neither ring can overflow.
    pub tx_frames: u32,
    /// UMEM frames of a queue's receive half; also the RX ring size (the
    /// fill ring gets twice as many entries, so returning frames never
    /// waits for the kernel's lazily published consumer position). With
    /// more than 4 queues each gets `rx_frames * 4 / queues` (at least
    /// 1024): the port never takes more than 4 queues' worth.
    pub rx_frames: u32,
    /// Attach the redirect program in generic mode only: the port
    /// receives through a CPU's backlog (see `AfPacketOptions::generic_xdp`).
    pub generic_xdp: bool,
    /// Pass IKE to the kernel instead of the AF_XDP socket: IPv4 (also
    /// behind one 802.1Q tag) UDP to port 500, and UDP to port 4500 whose
    /// first 4 payload bytes are zero (the non-ESP marker of RFC 3948) and
    /// NAT keepalives (one byte 0xff), with every IP fragment of such a
    /// datagram (the kernel reassembles it). ESP in UDP 4500 still goes to
    /// the socket. For the port of an IPsec peer whose IKE daemon has UDP
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
            queues: None,
            tx_queues: 1,
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

/// The queues a port binds: `first .. first + count`, the first `tx` of
/// them transmitting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct QueuePlan {
    first: u32,
    count: u32,
    tx: u32,
}

impl QueuePlan {
    /// The queues `opts` asks for on a device with `counts` queues (None:
    /// it does not say). Err: the queues asked for are not there.
    fn of(
        opts: &AfXdpOptions,
        counts: Option<QueueCounts>,
        ifname: &str,
    ) -> Result<QueuePlan, PortError> {
        let first = opts.queue_id;
        let tx = opts.tx_queues.max(1);
        if first >= MAX_QUEUES {
            return Err(PortError::Unsupported(format!(
                "queue {first} of '{ifname}' is beyond the {MAX_QUEUES} queues linerate's \
                 AF_XDP program steers: choose a lower queue"
            )));
        }
        let room = MAX_QUEUES - first;
        let Some(counts) = counts else {
            // The device does not say: the queues asked for, else the first.
            return Ok(QueuePlan {
                first,
                count: opts.queues.unwrap_or(1).max(tx).clamp(1, room),
                tx,
            });
        };
        if first >= counts.rx {
            return Err(PortError::Unsupported(format!(
                "'{ifname}' has {} receive queue(s): queue {first} is not one of them",
                counts.rx
            )));
        }
        let count = opts
            .queues
            .unwrap_or(counts.rx - first)
            .clamp(1, counts.rx - first)
            .min(room);
        let sending = count.min(counts.tx.saturating_sub(first));
        if tx > sending {
            return Err(PortError::Unsupported(format!(
                "'{ifname}' has {sending} queue(s) to transmit on from queue {first}, and {tx} \
                 sending sockets need one each: give it {tx} (ethtool -L {ifname} combined {tx}; \
                 a veth: numtxqueues {tx} numrxqueues {tx} on both ends) or send from fewer"
            )));
        }
        Ok(QueuePlan { first, count, tx })
    }

    /// UMEM frames of queue `q`'s receive half (see
    /// [`AfXdpOptions::rx_frames`]).
    fn rx_frames(&self, opts: &AfXdpOptions) -> u32 {
        let per_queue = if self.count <= 4 {
            opts.rx_frames
        } else {
            (opts.rx_frames.saturating_mul(4) / self.count).max(1024)
        };
        ring_frames(per_queue)
    }

    /// UMEM frames of queue `q`'s transmit half: none to speak of for a
    /// queue that only receives (a socket's UMEM needs a completion ring).
    fn tx_frames(&self, opts: &AfXdpOptions, q: u32) -> u32 {
        if q < self.first + self.tx {
            ring_frames(opts.tx_frames)
        } else {
            ring_frames(0)
        }
    }
}

/// A tester port on the queues of a Linux interface through AF_XDP.
pub struct AfXdpPort {
    info: PortInfo,
    mode: XdpBindMode,
    attach_mode: XdpAttachMode,
    /// The transmitting queues', first first.
    tx: Vec<XskTx>,
    rx: XskRx,
}

impl AfXdpPort {
    /// Opens the queues `opts` asks for of `ifname`, inside network namespace
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

    /// How many queues it receives on.
    pub fn rx_queues(&self) -> usize {
        self.rx.queues()
    }

    /// Every transmitting queue (one generator thread each), the receive
    /// side and the port's facts.
    pub fn split_queues(self) -> (Vec<XskTx>, XskRx, PortInfo) {
        (self.tx, self.rx, self.info)
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
    let plan = QueuePlan::of(opts, link::queue_counts(&control, ifname), ifname)?;
    let (chunk, max_frame_len) = frame_layout(opts.max_frame_len);
    // Auto passes neither XDP_ZEROCOPY nor XDP_COPY: the kernel then tries
    // zero-copy and falls back to copy mode by itself on any driver error,
    // on the same socket (re-binding a socket after a failed bind is not
    // something to rely on).
    let mode_flag = match opts.zero_copy {
        ZeroCopy::Auto => 0,
        ZeroCopy::On => libc::XDP_ZEROCOPY,
        ZeroCopy::Off => libc::XDP_COPY,
    };
    let mut tx = Vec::new();
    let mut rx = Vec::new();
    let mut mode = XdpBindMode::ZeroCopy;
    for q in plan.first..plan.first + plan.count {
        let sizes = (plan.tx_frames(opts, q), plan.rx_frames(opts));
        let queue = open_queue(ifname, facts.ifindex, q, chunk, sizes, mode_flag)?;
        if !queue.zero_copy {
            mode = XdpBindMode::Copy;
        }
        if q < plan.first + plan.tx {
            tx.push(XskTx::new(
                Arc::clone(&queue.fd),
                Arc::clone(&queue.umem),
                queue.tx_ring,
                queue.completion,
                queue.tx_addrs,
                max_frame_len,
                ifname,
            ));
        }
        rx.push(queue.rx);
    }

    // Load and attach only now: nothing is steered to a socket before it
    // is bound and in the map (until then frames go to the stack).
    let mut redirect = XskRedirect::load_with(opts.pass_ike).map_err(bpf_error)?;
    redirect
        .attach(facts.ifindex, ifname, opts.generic_xdp)
        .map_err(bpf_error)?;
    for (q, rings) in (plan.first..).zip(&rx) {
        redirect.insert(q, rings.fd().as_fd()).map_err(bpf_error)?;
    }
    let attach_mode = redirect
        .attach_mode()
        .expect("attach succeeded, so a mode is known");
    socket::bind_control(&control, facts.ifindex, ifname)?;
    let rx = XskRx::new(rx, control, redirect, ifname);

    let info = PortInfo::of_link(ifname, netns, &facts, max_frame_len);
    Ok(AfXdpPort {
        info,
        mode,
        attach_mode,
        tx,
        rx,
    })
}

/// One queue's socket, bound, with its rings split into the halves.
struct OpenQueue {
    fd: Arc<OwnedFd>,
    umem: Arc<Umem>,
    zero_copy: bool,
    tx_ring: ProdRing<libc::xdp_desc>,
    completion: ConsRing<u64>,
    tx_addrs: Vec<u64>,
    rx: QueueRings,
}

/// An AF_XDP socket bound to queue `q` of the interface, with a UMEM of
/// `tx_frames + rx_frames` frames of `chunk` bytes, every receive frame
/// on the fill ring.
fn open_queue(
    ifname: &str,
    ifindex: i32,
    q: u32,
    chunk: u32,
    (tx_frames, rx_frames): (u32, u32),
    mode_flag: u16,
) -> Result<OpenQueue, PortError> {
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
    let (tx_ring, completion, rx_ring, mut fill) = unsafe {
        (
            ProdRing::new(rings.tx.parts, Some(rings.tx.map)),
            ConsRing::new(rings.completion.parts, Some(rings.completion.map)),
            ConsRing::new(rings.rx.parts, Some(rings.rx.map)),
            ProdRing::new(rings.fill.parts, Some(rings.fill.map)),
        )
    };
    let addr = |i: u32| i as u64 * chunk as u64;
    let tx_addrs: Vec<u64> = (0..tx_frames).map(addr).collect();

    // Every receive frame goes on the fill ring before the bind, so the
    // first frame to arrive finds a buffer.
    assert!(
        fill.free(rx_frames) >= rx_frames,
        "a new fill ring is empty"
    );
    for (i, a) in (tx_frames..tx_frames + rx_frames).map(addr).enumerate() {
        fill.write(i as u32, a);
    }
    fill.submit(rx_frames);

    socket::bind(
        &fd,
        ifindex,
        q,
        libc::XDP_USE_NEED_WAKEUP | mode_flag,
        ifname,
    )?;
    let zero_copy = socket::is_zero_copy(&fd, ifname)?;
    let fd = Arc::new(fd);
    let umem = Arc::new(umem);
    let rx = QueueRings::new(Arc::clone(&fd), Arc::clone(&umem), rx_ring, fill, rx_frames);
    Ok(OpenQueue {
        fd,
        umem,
        zero_copy,
        tx_ring,
        completion,
        tx_addrs,
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

    /// The first transmitting queue only; see [`AfXdpPort::split_queues`].
    fn split(self) -> (XskTx, XskRx, PortInfo) {
        let tx = self.tx.into_iter().next().expect("a port transmits");
        (tx, self.rx, self.info)
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

    fn counts(rx: u32, tx: u32) -> Option<QueueCounts> {
        Some(QueueCounts { rx, tx })
    }

    fn plan(opts: &AfXdpOptions, c: Option<QueueCounts>) -> Result<QueuePlan, String> {
        QueuePlan::of(opts, c, "eth9").map_err(|e| e.to_string())
    }

    #[test]
    fn every_receive_queue_is_bound_by_default() {
        let opts = AfXdpOptions::default();
        let p = plan(&opts, counts(4, 4)).unwrap();
        assert_eq!((p.first, p.count, p.tx), (0, 4, 1));
        // From the first queue asked for on.
        let from_2 = AfXdpOptions {
            queue_id: 2,
            ..AfXdpOptions::default()
        };
        assert_eq!(plan(&from_2, counts(4, 4)).unwrap().count, 2);
        // A driver that says nothing: the queue asked for.
        assert_eq!(plan(&opts, None).unwrap().count, 1);
        // No more than the program steers.
        assert_eq!(plan(&opts, counts(128, 128)).unwrap().count, MAX_QUEUES);
    }

    #[test]
    fn each_sending_socket_needs_a_queue() {
        let two = AfXdpOptions {
            tx_queues: 2,
            ..AfXdpOptions::default()
        };
        let p = plan(&two, counts(2, 2)).unwrap();
        assert_eq!((p.count, p.tx), (2, 2));
        let e = plan(&two, counts(1, 1)).unwrap_err();
        assert!(e.contains("'eth9' has 1 queue(s) to transmit on"), "{e}");
        assert!(e.contains("numtxqueues 2 numrxqueues 2"), "{e}");
        // Fewer transmit than receive queues: the transmit ones count.
        assert!(plan(&two, counts(4, 1)).is_err());
        // A queue that is not there.
        let from_3 = AfXdpOptions {
            queue_id: 3,
            ..AfXdpOptions::default()
        };
        let e = plan(&from_3, counts(2, 2)).unwrap_err();
        assert!(e.contains("queue 3 is not one of them"), "{e}");
    }

    #[test]
    fn many_queues_share_the_receive_frames() {
        let opts = AfXdpOptions::default();
        let four = plan(&opts, counts(4, 4)).unwrap();
        assert_eq!(four.rx_frames(&opts), 8192);
        let many = plan(&opts, counts(32, 32)).unwrap();
        assert_eq!(many.rx_frames(&opts), 1024);
        // A queue that only receives keeps a token transmit half.
        assert_eq!(four.tx_frames(&opts, 0), 4096);
        assert_eq!(four.tx_frames(&opts, 1), 64);
    }

    #[test]
    fn mode_names() {
        assert_eq!(XdpBindMode::ZeroCopy.as_str(), "zero-copy");
        assert_eq!(XdpBindMode::Copy.as_str(), "copy");
        assert_eq!(ZeroCopy::default(), ZeroCopy::Auto);
    }
}
