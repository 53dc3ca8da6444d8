//! The kernel's side of raw ESP at linerate's tunnel end. The gateway's
//! raw ESP (IPv4 protocol 50) is addressed to linerate's outer address,
//! which is on port B while the run lasts (for IKE). A kernel without ESP
//! (no `esp4`, as on this project's VMs) answers every such packet it sees
//! with ICMP "protocol unreachable" when no socket takes protocol 50 —
//! with the af_packet engine it sees them all (AF_XDP keeps them from
//! it). A raw socket for protocol 50 counts as taking them (the kernel
//! then sends no ICMP); its filter drops every packet before it is queued,
//! so it costs no memory and nothing reads it. The engine's own socket
//! still gets every frame.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// IPv4 protocol number of ESP.
pub const IPPROTO_ESP: i32 = 50;

/// A raw socket that claims an IP protocol in one network namespace and
/// drops all it receives; dropping this ends the claim.
#[derive(Debug)]
pub struct ProtocolSink {
    _fd: OwnedFd,
}

impl ProtocolSink {
    /// Claims `protocol` in `netns` (None: this process's namespace).
    pub fn claim(netns: Option<&str>, protocol: i32) -> std::io::Result<ProtocolSink> {
        let fd = linerate_port::netns::maybe_in_netns(netns, || Ok(raw_socket(protocol)))
            .map_err(|e| std::io::Error::other(e.to_string()))??;
        drop_everything(&fd)?;
        Ok(ProtocolSink { _fd: fd })
    }
}

fn raw_socket(protocol: i32) -> std::io::Result<OwnedFd> {
    // SAFETY: socket() has no memory arguments; the result is checked.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, protocol) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor this function owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A one-instruction classic BPF filter, `ret #0`: every packet dropped.
fn drop_everything(fd: &OwnedFd) -> std::io::Result<()> {
    let mut code = [libc::sock_filter {
        code: 0x06, /* BPF_RET | BPF_K */
        jt: 0,
        jf: 0,
        k: 0,
    }];
    let prog = libc::sock_fprog {
        len: 1,
        filter: code.as_mut_ptr(),
    };
    // SAFETY: prog points at `code`, alive for the call; the kernel copies it.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
