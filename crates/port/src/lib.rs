//! Ports: where test frames leave the tester and where they come back.
//!
//! A port is split in two halves so that the generator and the receiver run
//! on their own threads without sharing anything:
//! - [`TxQueue`]: the generator writes frames straight into the port's
//!   transmit buffers (no copy through an intermediate `Vec`), then flushes.
//! - [`RxQueue`]: the receiver is handed each arrived frame with its
//!   arrival timestamp, and can send the odd control frame (an ARP reply).
//!
//! Backends: [`af_packet`] (mmap'ed PACKET_TX_RING / PACKET_RX_RING on a real
//! interface) and [`loopback`] (in-memory, for unit tests).
//! And [`af_xdp`]: an AF_XDP socket (UMEM and rings, zero-copy where the
//! driver can) on one queue of an interface.

pub mod af_packet;
pub mod af_xdp;
pub mod link;
pub mod loopback;
pub mod netns;

use std::time::Duration;

/// Errors name the interface and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    #[error(
        "interface '{0}' not found: check the name with 'ip link' (inside the namespace, if any)"
    )]
    NoSuchInterface(String),
    #[error("interface '{0}' is down: bring it up with 'ip link set {0} up'")]
    InterfaceDown(String),
    #[error("network namespace '{0}' not found: list them with 'ip netns list'")]
    NoSuchNetns(String),
    #[error("opening a packet socket needs root (CAP_NET_RAW): run linerate as root")]
    NotPermitted,
    #[error("{what} on '{ifname}' failed: {source}")]
    Io {
        what: &'static str,
        ifname: String,
        #[source]
        source: std::io::Error,
    },
    #[error("frame of {len} bytes does not fit the port's {max}-byte buffers")]
    FrameTooLong { len: usize, max: usize },
    /// The backend cannot work here (kernel, driver, queue, BPF); the message names the fix.
    #[error("{0}")]
    Unsupported(String),
}

/// A namespace that could not be entered, in the words
/// `netns::in_netns` always used.
impl From<linerate_helper::NetnsError> for PortError {
    fn from(e: linerate_helper::NetnsError) -> PortError {
        use linerate_helper::NetnsStep;
        let name = e.name_or_what().to_string();
        match e.step {
            NetnsStep::Open => PortError::NoSuchNetns(name),
            NetnsStep::Home => PortError::io("opening own namespace", &name, e.error),
            NetnsStep::Enter => PortError::io("entering namespace", &name, e.error),
        }
    }
}

impl PortError {
    pub fn io(what: &'static str, ifname: &str, source: std::io::Error) -> PortError {
        if source.raw_os_error() == Some(libc::EPERM) {
            return PortError::NotPermitted;
        }
        PortError::Io {
            what,
            ifname: ifname.to_string(),
            source,
        }
    }
}

/// What a port is: the facts a test report and the host emulation need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// Interface name.
    pub ifname: String,
    /// Network namespace the interface lives in (None: linerate's own).
    pub netns: Option<String>,
    pub mac: linerate_wire::MacAddr,
    pub mtu: u32,
    /// Link speed in bits/s as the driver reports it, if it reports one.
    pub speed_bps: Option<u64>,
    /// Largest frame (without FCS) the port's buffers hold.
    pub max_frame_len: usize,
}

impl PortInfo {
    /// A port on `ifname` (in `netns`) as its link reports it, whose
    /// buffers hold frames up to `max_frame_len`.
    pub(crate) fn of_link(
        ifname: &str,
        netns: Option<&str>,
        facts: &link::LinkFacts,
        max_frame_len: usize,
    ) -> PortInfo {
        PortInfo {
            ifname: ifname.to_string(),
            netns: netns.map(str::to_string),
            mac: facts.mac,
            mtu: facts.mtu,
            speed_bps: facts.speed_bps,
            max_frame_len,
        }
    }
}

/// The transmit half of a port.
pub trait TxQueue: Send {
    /// Fills up to `n` free transmit buffers: `fill(i, buf)` writes frame `i`
    /// into `buf` and returns its length. Returns how many frames were
    /// queued, fewer than `n` when the buffers are all in flight.
    fn queue<F: FnMut(usize, &mut [u8]) -> usize>(
        &mut self,
        n: usize,
        fill: F,
    ) -> Result<usize, PortError>;

    /// Hands the queued frames to the kernel/NIC.
    fn flush(&mut self) -> Result<(), PortError>;

    /// Waits until every queued frame has left and returns the number of
    /// frames the kernel refused (malformed) since the last call. Frames
    /// queued minus refused are the frames sent.
    fn drain(&mut self, timeout: Duration) -> Result<u64, PortError>;
}

/// The receive half of a port.
pub trait RxQueue: Send {
    /// Calls `f(frame, wire_len, arrival_ns)` for frames that have arrived,
    /// waiting up to `timeout` when none has. `frame` may be only the
    /// frame's first bytes (a port that copies only headers); `wire_len` is
    /// its whole length without FCS. `arrival_ns` is CLOCK_REALTIME in ns.
    /// Returns how many frames were handed over.
    fn recv<F: FnMut(&[u8], usize, u64)>(
        &mut self,
        timeout: Duration,
        f: F,
    ) -> Result<usize, PortError>;

    /// Sends one control frame (an ARP request or reply) from this port.
    fn send_control(&mut self, frame: &[u8]) -> Result<(), PortError>;

    /// Frames the port itself dropped because its receive buffers were full
    /// since the last call: tester-side loss, never the device's.
    fn take_drops(&mut self) -> Result<u64, PortError>;
}

/// A port that can be split into its two halves.
pub trait Port {
    type Tx: TxQueue;
    type Rx: RxQueue;
    fn info(&self) -> &PortInfo;
    fn split(self) -> (Self::Tx, Self::Rx, PortInfo);
}

/// CLOCK_REALTIME now, in nanoseconds: the clock the kernel stamps received frames with.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Clock `id` (CLOCK_REALTIME, CLOCK_MONOTONIC, ...) now, in nanoseconds.
pub fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we pass; the vDSO makes it cheap.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
