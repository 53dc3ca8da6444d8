//! Keeps ESP off an IKE socket on port 4500 while a test runs.
//!
//! ESP in UDP (RFC 3948) and IKE share port 4500; a datagram whose first
//! four bytes are zero (the non-ESP marker) is IKE, any other is ESP. While
//! the test frames run, the gateway's ESP arrives at linerate's tunnel
//! address at up to millions per second. The engine takes it from the port
//! before the kernel sees it (AF_XDP), but a packet-socket engine receives
//! a copy while the kernel delivers the original to the IKE socket: without
//! a filter, the thread that answers the gateway's IKE requests would wake
//! for every ESP packet. A classic BPF socket filter drops those in the
//! kernel, before they are queued.

use std::io;
use std::os::fd::AsRawFd;

use nix::libc;

/// The filter: accept a datagram whose 32 bits after the UDP header are
/// zero (IKE behind the non-ESP marker), drop everything else (ESP, NAT
/// keepalives, anything too short to carry a marker: a load past the end
/// ends the program with 0, "drop"). A UDP socket's filter sees the
/// datagram from its UDP header on, so the marker is at offset 8.
const IKE_ONLY: [libc::sock_filter; 4] = [
    // A = the 32-bit word at offset 8 (the marker).
    libc::sock_filter {
        code: (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16,
        jt: 0,
        jf: 0,
        k: 8,
    },
    // A == 0: next instruction (accept), else skip one (drop).
    libc::sock_filter {
        code: (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16,
        jt: 0,
        jf: 1,
        k: 0,
    },
    libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: u32::MAX,
    },
    libc::sock_filter {
        code: (libc::BPF_RET | libc::BPF_K) as u16,
        jt: 0,
        jf: 0,
        k: 0,
    },
];

/// Attaches the IKE-only filter to `socket` (a UDP socket on port 4500).
pub fn ignore_esp(socket: &impl AsRawFd) -> io::Result<()> {
    let program = libc::sock_fprog {
        len: IKE_ONLY.len() as u16,
        filter: IKE_ONLY.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `program` points at a valid filter array that outlives the
    // call (the kernel copies it), and its size is passed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_FILTER,
            &program as *const libc::sock_fprog as *const libc::c_void,
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::Duration;

    /// On loopback: of an ESP packet, a NAT keepalive and an IKE message
    /// behind the marker, only the IKE message reaches a filtered socket;
    /// an unfiltered one gets all three (the filter, not the sender, made
    /// the difference).
    #[test]
    fn only_ike_behind_the_marker_reaches_the_socket() {
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        let received = |filtered: bool| {
            let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
            if filtered {
                ignore_esp(&socket).unwrap();
            }
            socket
                .set_read_timeout(Some(Duration::from_millis(200)))
                .unwrap();
            let to = socket.local_addr().unwrap();
            sender
                .send_to(&[0xc1, 0x01, 0x02, 0x03, 0, 0, 0, 1], to)
                .unwrap();
            sender.send_to(&[0xff], to).unwrap();
            sender.send_to(&[0, 0, 0, 0, 0x11, 0x22, 0x33], to).unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 64];
            while let Ok(n) = socket.recv(&mut buf) {
                got.push(buf[..n].to_vec());
            }
            got
        };
        assert_eq!(received(true), vec![vec![0, 0, 0, 0, 0x11, 0x22, 0x33]]);
        assert_eq!(received(false).len(), 3);
    }
}
