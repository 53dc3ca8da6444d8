//! Packet socket plumbing shared by the two rings.

use crate::PortError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// A raw packet socket that receives nothing until bound with a protocol.
pub(crate) fn packet_socket(ifname: &str) -> Result<OwnedFd, PortError> {
    // SAFETY: plain socket(2) call; the fd is owned right away.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(PortError::io(
            "opening a packet socket",
            ifname,
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: fd is a fresh, valid descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub(crate) fn set_opt<T>(
    fd: &OwnedFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
    what: &'static str,
    ifname: &str,
) -> Result<(), PortError> {
    // SAFETY: `value` points at a properly sized, initialised option value.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (value as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(PortError::io(what, ifname, std::io::Error::last_os_error()));
    }
    Ok(())
}

/// Binds the socket to one interface; `protocol` 0 means send-only.
pub(crate) fn bind(
    fd: &OwnedFd,
    ifindex: i32,
    protocol: u16,
    ifname: &str,
) -> Result<(), PortError> {
    // SAFETY: sockaddr_ll is plain old data.
    let mut addr: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    addr.sll_family = libc::AF_PACKET as u16;
    addr.sll_protocol = protocol.to_be();
    addr.sll_ifindex = ifindex;
    // SAFETY: addr is a valid sockaddr_ll of the size we pass.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(PortError::io(
            "binding the packet socket",
            ifname,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}

/// Raises the socket's send buffer past net.core.wmem_max (root may), so
/// that frames in flight on a fast link do not stall the ring: the limit
/// cannot be raised by sysctl inside a network namespace.
pub(crate) fn force_sndbuf(fd: &OwnedFd, bytes: usize, ifname: &str) -> Result<(), PortError> {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    set_opt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_SNDBUFFORCE,
        &v,
        "raising the send buffer",
        ifname,
    )
}
