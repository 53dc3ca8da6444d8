//! The AF_PACKET backend: one mmap'ed PACKET_TX_RING (TPACKET_V2, qdisc
//! bypass) for the generator and one mmap'ed PACKET_RX_RING (TPACKET_V3) for
//! the receiver, so that frames move in batches through shared memory rather
//! than one system call per frame.

mod fanout;
mod mmap;
mod rx_ring;
pub(crate) mod socket;
mod tx_ring;

pub use rx_ring::RxRing;
pub use tx_ring::TxRing;

use crate::{link, netns, Port, PortError, PortInfo};

/// Sizes of the rings. The defaults hold a few milliseconds of traffic at
/// 10 Gbit/s, enough to ride out a scheduling hiccup of the receiver.
#[derive(Debug, Clone)]
pub struct AfPacketOptions {
    /// Largest frame (without FCS) the transmit slots must hold.
    pub max_frame_len: usize,
    /// Number of transmit slots.
    pub tx_slots: usize,
    /// Receive ring: block size in bytes (a power of two, at least a page).
    pub rx_block_size: usize,
    /// Receive ring: number of blocks.
    pub rx_blocks: usize,
    /// Bytes of each received frame copied into the ring: the headers and
    /// the signature by default, all a receiver with the headers check
    /// reads. A session checking payloads (its default) or decrypting ESP
    /// asks for whole frames. The frame's real length is still reported.
    pub rx_snaplen: u32,
    /// The port receives through a CPU's backlog (a lab port with deep
    /// queues): XDP programs on it (the in-kernel counter, the AF_XDP
    /// redirect) attach in generic mode, behind that backlog, since native
    /// mode would give a veth its own 256-frame ring back.
    pub generic_xdp: bool,
}

impl Default for AfPacketOptions {
    fn default() -> Self {
        AfPacketOptions {
            max_frame_len: 1514,
            tx_slots: 4096,
            rx_block_size: 1 << 20,
            rx_blocks: 64,
            rx_snaplen: 192,
            generic_xdp: false,
        }
    }
}

/// A tester port on a Linux interface through AF_PACKET rings.
pub struct AfPacketPort {
    info: PortInfo,
    tx: TxRing,
    rx: RxRing,
}

impl AfPacketPort {
    /// Opens `ifname`, inside network namespace `netns` when given.
    pub fn open(
        ifname: &str,
        netns: Option<&str>,
        opts: &AfPacketOptions,
    ) -> Result<AfPacketPort, PortError> {
        netns::maybe_in_netns(netns, || {
            let rx = RxRing::open(ifname, opts)?;
            let facts = link::link_facts(rx.fd(), ifname)?;
            if !facts.up {
                return Err(PortError::InterfaceDown(ifname.to_string()));
            }
            let rx = rx.bind(facts.ifindex)?;
            let tx = TxRing::open(ifname, facts.ifindex, opts)?;
            let info = PortInfo::of_link(ifname, netns, &facts, tx.max_frame_len());
            Ok(AfPacketPort { info, tx, rx })
        })
    }
}

impl AfPacketPort {
    /// A port on `ifname` (in `netns` when given) that only sends: its
    /// transmit ring, and no receive ring, so that the kernel's own
    /// traffic on the interface (IKE, ARP) is not copied to linerate too.
    pub fn open_sender(
        ifname: &str,
        netns: Option<&str>,
        opts: &AfPacketOptions,
    ) -> Result<(TxRing, PortInfo), PortError> {
        netns::maybe_in_netns(netns, || {
            let probe = socket::packet_socket(ifname)?;
            let facts = link::link_facts(&probe, ifname)?;
            if !facts.up {
                return Err(PortError::InterfaceDown(ifname.to_string()));
            }
            let tx = TxRing::open(ifname, facts.ifindex, opts)?;
            let info = PortInfo::of_link(ifname, netns, &facts, tx.max_frame_len());
            Ok((tx, info))
        })
    }

    /// `count` more transmit rings on `ifname` (in `netns` when given),
    /// one per extra generator thread: each its own socket, so the threads
    /// share nothing. With qdisc bypass the kernel puts a frame on the
    /// transmit queue of the CPU that sends it (the CPU's number modulo
    /// the queues), so threads pinned to different CPUs fill different
    /// queues.
    pub fn open_tx_rings(
        ifname: &str,
        netns: Option<&str>,
        opts: &AfPacketOptions,
        count: usize,
    ) -> Result<Vec<TxRing>, PortError> {
        netns::maybe_in_netns(netns, || {
            let ifindex = link::ifindex(ifname)? as i32;
            (0..count)
                .map(|_| TxRing::open(ifname, ifindex, opts))
                .collect()
        })
    }

    /// The port split as [`Port::split`] does, its receive side on `count`
    /// rings (at least one), one per receiving thread: the port's own ring
    /// and `count - 1` more, all in one fanout group that gives each ring
    /// whole streams and whole tunnels ([`fanout`]'s steering: ESP to ring
    /// `(destination - esp_base) mod count`, `esp_base` the first address
    /// of linerate's emulated IPsec peers, or 0). The rings take `opts`'
    /// sizes each.
    pub fn split_receivers(
        self,
        count: usize,
        esp_base: std::net::Ipv4Addr,
        opts: &AfPacketOptions,
    ) -> Result<(TxRing, Vec<RxRing>, PortInfo), PortError> {
        let esp_base = u32::from(esp_base);
        let AfPacketPort { info, tx, rx } = self;
        if count <= 1 {
            return Ok((tx, vec![rx], info));
        }
        let mut rings = vec![rx];
        netns::maybe_in_netns(info.netns.as_deref(), || {
            let ifindex = link::ifindex(&info.ifname)? as i32;
            for _ in 1..count {
                rings.push(RxRing::open(&info.ifname, opts)?.bind(ifindex)?);
            }
            Ok(())
        })?;
        let fds: Vec<_> = rings.iter().map(RxRing::fd).collect();
        fanout::join(&fds, esp_base, &info.ifname)?;
        Ok((tx, rings, info))
    }
}

impl Port for AfPacketPort {
    type Tx = TxRing;
    type Rx = RxRing;

    fn info(&self) -> &PortInfo {
        &self.info
    }

    fn split(self) -> (TxRing, RxRing, PortInfo) {
        (self.tx, self.rx, self.info)
    }
}
