//! Which NAPI threads belong to an interface, asked of the kernel.
//!
//! The kernel names a NAPI thread `napi/<ifname>-<napi id>`, and every
//! lab's DUT has the same interface names, so a name says nothing about
//! the lab: with two labs up, a lab's placement read by name finds the
//! other lab's threads too, pinned elsewhere, and takes itself for one
//! that shares the tester's CPUs. The netdev netlink family (Linux 6.9 and
//! later) lists an interface's NAPI instances, each with the pid of its
//! thread: `NETDEV_CMD_NAPI_GET` dumped for one ifindex, in the
//! interface's own namespace.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const GENL_ID_CTRL: u16 = 0x10;
const CTRL_CMD_GETFAMILY: u8 = 3;
const CTRL_ATTR_FAMILY_ID: u16 = 1;
const CTRL_ATTR_FAMILY_NAME: u16 = 2;
const NETDEV_CMD_NAPI_GET: u8 = 11;
const NETDEV_A_NAPI_IFINDEX: u16 = 1;
const NETDEV_A_NAPI_PID: u16 = 4;
const NLMSG_ERROR: u16 = 2;
const NLMSG_DONE: u16 = 3;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_DUMP: u16 = 0x300;
/// nlmsghdr (16 bytes) and genlmsghdr (4 bytes).
const HEADERS: usize = 20;

/// The pids of the NAPI threads of the interface `ifindex` of the calling
/// thread's namespace (none when its NAPI is not threaded). None when the
/// kernel cannot say (no netdev family: before Linux 6.9 it has no pid).
pub(crate) fn thread_pids(ifindex: u32) -> Option<Vec<i32>> {
    let socket = Genl::open()?;
    let family = socket.family_id("netdev")?;
    let mut pids = Vec::new();
    let request = message(
        family,
        NLM_F_REQUEST | NLM_F_DUMP,
        NETDEV_CMD_NAPI_GET,
        &attr(NETDEV_A_NAPI_IFINDEX, &ifindex.to_ne_bytes()),
    );
    socket.exchange(&request, |attrs| {
        if let Some(pid) = find(attrs, NETDEV_A_NAPI_PID).and_then(u32_of) {
            pids.push(pid as i32);
        }
    })?;
    Some(pids)
}

/// A generic netlink socket.
struct Genl(OwnedFd);

impl Genl {
    fn open() -> Option<Genl> {
        // SAFETY: plain socket(2); the descriptor is owned right away.
        let fd = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                libc::NETLINK_GENERIC,
            )
        };
        // SAFETY: a fresh descriptor nobody else owns.
        (fd >= 0).then(|| Genl(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The id of the generic netlink family `name`.
    fn family_id(&self, name: &str) -> Option<u16> {
        let mut text = name.as_bytes().to_vec();
        text.push(0);
        let request = message(
            GENL_ID_CTRL,
            NLM_F_REQUEST,
            CTRL_CMD_GETFAMILY,
            &attr(CTRL_ATTR_FAMILY_NAME, &text),
        );
        let mut id = None;
        self.exchange(&request, |attrs| {
            id = id.or(find(attrs, CTRL_ATTR_FAMILY_ID)
                .and_then(|v| v.get(..2))
                .map(|b| u16::from_ne_bytes([b[0], b[1]])));
        })?;
        id
    }

    /// Sends `request` and hands each answer's attributes to `each` until
    /// the answer ends: one message, or a dump's last. None on an error
    /// (the kernel's or the socket's).
    fn exchange(&self, request: &[u8], mut each: impl FnMut(&[u8])) -> Option<()> {
        let fd = self.0.as_raw_fd();
        // SAFETY: the buffer is valid for its length.
        let sent = unsafe { libc::send(fd, request.as_ptr().cast(), request.len(), 0) };
        if sent != request.len() as isize {
            return None;
        }
        let dump = u16::from_ne_bytes([request[6], request[7]]) & NLM_F_DUMP != 0;
        let mut buf = vec![0u8; 1 << 16];
        loop {
            // SAFETY: the buffer is valid for its length.
            let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), 0) };
            if n <= 0 {
                return None;
            }
            let mut rest = &buf[..n as usize];
            while rest.len() >= 16 {
                let len = u32::from_ne_bytes([rest[0], rest[1], rest[2], rest[3]]) as usize;
                let kind = u16::from_ne_bytes([rest[4], rest[5]]);
                if len < 16 || len > rest.len() {
                    return None;
                }
                match kind {
                    NLMSG_DONE => return Some(()),
                    // An error, or the acknowledgement (error 0) of a request.
                    NLMSG_ERROR => {
                        let code = rest
                            .get(16..20)
                            .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
                        return (code == Some(0)).then_some(());
                    }
                    _ if len >= HEADERS => each(&rest[HEADERS..len]),
                    _ => {}
                }
                if !dump {
                    return Some(());
                }
                rest = &rest[align(len).min(rest.len())..];
            }
        }
    }
}

/// A request: netlink header, generic netlink header, attributes.
fn message(kind: u16, flags: u16, command: u8, attrs: &[u8]) -> Vec<u8> {
    let len = (HEADERS + attrs.len()) as u32;
    let mut m = Vec::with_capacity(len as usize);
    m.extend_from_slice(&len.to_ne_bytes());
    m.extend_from_slice(&kind.to_ne_bytes());
    m.extend_from_slice(&flags.to_ne_bytes());
    m.extend_from_slice(&1u32.to_ne_bytes()); // sequence number
    m.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
    m.extend_from_slice(&[command, 1, 0, 0]); // version 1, reserved
    m.extend_from_slice(attrs);
    m
}

/// One attribute, padded to 4 bytes.
fn attr(kind: u16, value: &[u8]) -> Vec<u8> {
    let len = 4 + value.len();
    let mut a = Vec::with_capacity(align(len));
    a.extend_from_slice(&(len as u16).to_ne_bytes());
    a.extend_from_slice(&kind.to_ne_bytes());
    a.extend_from_slice(value);
    a.resize(align(len), 0);
    a
}

/// The value of the first attribute of type `kind` in `attrs`.
fn find(mut attrs: &[u8], kind: u16) -> Option<&[u8]> {
    while attrs.len() >= 4 {
        let len = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        // The type's top two bits are flags (nested, byte order).
        let this = u16::from_ne_bytes([attrs[2], attrs[3]]) & 0x3fff;
        if len < 4 || len > attrs.len() {
            return None;
        }
        if this == kind {
            return Some(&attrs[4..len]);
        }
        attrs = &attrs[align(len).min(attrs.len())..];
    }
    None
}

fn u32_of(value: &[u8]) -> Option<u32> {
    let b = value.get(..4)?;
    Some(u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

fn align(len: usize) -> usize {
    (len + 3) & !3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attributes_are_padded_and_found_again() {
        let mut attrs = attr(CTRL_ATTR_FAMILY_NAME, b"netdev\0");
        assert_eq!(attrs.len(), 12);
        attrs.extend(attr(NETDEV_A_NAPI_PID, &4242u32.to_ne_bytes()));
        assert_eq!(find(&attrs, CTRL_ATTR_FAMILY_NAME), Some(&b"netdev\0"[..]));
        assert_eq!(find(&attrs, NETDEV_A_NAPI_PID).and_then(u32_of), Some(4242));
        assert_eq!(find(&attrs, NETDEV_A_NAPI_IFINDEX), None);
        // A truncated attribute is not read past the buffer.
        assert_eq!(find(&attrs[..14], NETDEV_A_NAPI_PID), None);
    }

    #[test]
    fn a_request_says_its_own_length() {
        let m = message(GENL_ID_CTRL, NLM_F_REQUEST, CTRL_CMD_GETFAMILY, &[0; 8]);
        assert_eq!(m.len(), 28);
        assert_eq!(u32::from_ne_bytes([m[0], m[1], m[2], m[3]]), 28);
        assert_eq!(m[16], CTRL_CMD_GETFAMILY);
    }
}
