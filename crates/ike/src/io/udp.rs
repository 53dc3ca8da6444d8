//! The datagram calls the fleet and the responder share: a send from a
//! chosen source address and a receive that tells the destination
//! (`IP_PKTINFO`), and a wait for either of two sockets.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;

use nix::errno::Errno;
use nix::libc;
use nix::poll::{PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    recvmsg, sendmsg, ControlMessage, ControlMessageOwned, MsgFlags, SockaddrIn,
};

/// Sends `data` from `from` to `to` (the source chosen by IP_PKTINFO).
pub(crate) fn send_from(
    socket: &UdpSocket,
    data: &[u8],
    from: Ipv4Addr,
    to: SocketAddrV4,
) -> io::Result<()> {
    let info = libc::in_pktinfo {
        ipi_ifindex: 0,
        ipi_spec_dst: libc::in_addr {
            s_addr: u32::from(from).to_be(),
        },
        ipi_addr: libc::in_addr { s_addr: 0 },
    };
    let dst = SockaddrIn::from(to);
    sendmsg(
        socket.as_raw_fd(),
        &[IoSlice::new(data)],
        &[ControlMessage::Ipv4PacketInfo(&info)],
        MsgFlags::empty(),
        Some(&dst),
    )
    .map(|_| ())
    .map_err(io::Error::from)
}

/// One datagram without waiting: its length, source and destination
/// address; `None` when there is none.
pub(crate) fn recv_to(
    socket: &UdpSocket,
    buf: &mut [u8],
    cmsg: &mut Vec<u8>,
) -> io::Result<Option<(usize, SocketAddrV4, Option<Ipv4Addr>)>> {
    let mut iov = [IoSliceMut::new(buf)];
    loop {
        let msg = match recvmsg::<SockaddrIn>(
            socket.as_raw_fd(),
            &mut iov,
            Some(cmsg),
            MsgFlags::MSG_DONTWAIT,
        ) {
            Ok(m) => m,
            Err(Errno::EAGAIN) => return Ok(None),
            Err(Errno::EINTR | Errno::ECONNREFUSED) => continue,
            Err(e) => return Err(e.into()),
        };
        let Some(from) = msg.address.map(SocketAddrV4::from) else {
            continue;
        };
        let mut to = None;
        if let Ok(list) = msg.cmsgs() {
            for c in list {
                if let ControlMessageOwned::Ipv4PacketInfo(info) = c {
                    to = Some(Ipv4Addr::from(u32::from_be(info.ipi_addr.s_addr)));
                }
            }
        }
        return Ok(Some((msg.bytes, from, to)));
    }
}

/// Waits until one of `sockets` is readable or `until`.
pub(crate) fn wait_readable(sockets: [&UdpSocket; 2], until: Option<Instant>) {
    let timeout = match until {
        None => PollTimeout::NONE,
        Some(t) => {
            let left = t.saturating_duration_since(Instant::now());
            // Round up to the millisecond poll counts in.
            let ms = left.as_micros().div_ceil(1000).min(60_000) as u16;
            PollTimeout::from(ms)
        }
    };
    let mut fds = [
        PollFd::new(sockets[0].as_fd(), PollFlags::POLLIN),
        PollFd::new(sockets[1].as_fd(), PollFlags::POLLIN),
    ];
    let _ = nix::poll::poll(&mut fds, timeout);
}
