//! The AF_XDP redirect program (`bpf/xsk_redirect.bpf.c`): hands every frame
//! of a receive queue to the AF_XDP socket registered for that queue in
//! `xsks_map`; frames of queues without a socket go on to the stack.
//!
//! Usage (linerate-port's AF_XDP backend): [`XskRedirect::load`], then
//! [`XskRedirect::attach`] inside the interface's network namespace (the
//! index is resolved in the calling thread's namespace), then
//! [`XskRedirect::insert`] once the socket is bound. Dropping the value
//! detaches the program: it is attached through a BPF link, which the kernel
//! removes when its last file descriptor closes, so a crashed linerate
//! leaves no program behind on the interface either.
//!
//! [`XskRedirect::load_with`]`(true)` loads it so that IKE goes to the
//! kernel instead of the socket (the port of an IPsec peer whose IKE daemon
//! has UDP sockets on ports 500 and 4500 in the port's namespace): IPv4,
//! untagged or behind one 802.1Q tag, UDP to port 500; UDP to port 4500
//! whose first 4 payload bytes are zero (the non-ESP marker of RFC 3948);
//! NAT keepalives (UDP 4500, one payload byte 0xff), and the later IP
//! fragments of such a datagram (an `ike_frags` map notes each first
//! fragment's source, destination and IP id), so the kernel reassembles an
//! IKE message larger than the MTU. ESP in UDP 4500 (fragments included)
//! and everything else still go to the socket. The flag is read-only data
//! set before the program is loaded: without it the verifier removes the
//! check.

use crate::{bpf_object, BpfError};
use libbpf_rs::libbpf_sys;
use libbpf_rs::{MapCore, MapFlags};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

const PROGRAM: &str = "xsk_redirect";
const MAP: &str = "xsks_map";
/// `max_entries` of `xsks_map` in the C source.
pub const MAX_QUEUES: u32 = 64;

/// Where on the receive path the program runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XdpAttachMode {
    /// In the driver, before a socket buffer is built (XDP_FLAGS_DRV_MODE).
    /// On veth this is also what gives the device a NAPI context.
    Native,
    /// In the core stack after the socket buffer is built
    /// (XDP_FLAGS_SKB_MODE): slower, but every driver has it.
    Generic,
}

impl XdpAttachMode {
    pub fn as_str(self) -> &'static str {
        match self {
            XdpAttachMode::Native => "native",
            XdpAttachMode::Generic => "generic",
        }
    }
}

/// The loaded redirect program; attached to at most one interface.
pub struct XskRedirect {
    /// The BPF link holding the attachment. libbpf-rs 0.27's
    /// `Program::attach_xdp` takes no mode flags (the kernel would pick
    /// native or generic silently), so the link is created with
    /// `bpf_link_create` and kept as its file descriptor: closing it detaches.
    /// Declared first so it is dropped (detached) before the program is unloaded.
    link: Option<(OwnedFd, XdpAttachMode)>,
    obj: libbpf_rs::Object,
}

impl XskRedirect {
    /// Loads the embedded program and its map into the kernel (not attached
    /// yet); every frame of a queue with a socket goes to the socket.
    pub fn load() -> Result<XskRedirect, BpfError> {
        XskRedirect::load_with(false)
    }

    /// [`load`](Self::load), but with `pass_ike` IKE and NAT keepalives go
    /// to the kernel (see the module's doc).
    pub fn load_with(pass_ike: bool) -> Result<XskRedirect, BpfError> {
        let obj = crate::load(PROGRAM, bpf_object!("xsk_redirect"), |open| {
            set_pass_ike(open, pass_ike)
        })?;
        Ok(XskRedirect { link: None, obj })
    }

    /// Attaches the program to interface `ifindex` (named `ifname` in
    /// errors), in native mode if the driver takes it, else in generic mode;
    /// [`XskRedirect::attach_mode`] says which. `generic_only`: generic
    /// mode only (a port that receives through a CPU's backlog).
    pub fn attach(
        &mut self,
        ifindex: i32,
        ifname: &str,
        generic_only: bool,
    ) -> Result<(), BpfError> {
        let prog = self
            .obj
            .progs()
            .find(|p| p.name() == PROGRAM)
            .expect("xsk_redirect.bpf.c defines the program xsk_redirect");
        let prog_fd = prog.as_fd().as_raw_fd();
        let attach_err = |source| BpfError::Attach {
            program: PROGRAM,
            ifname: ifname.to_string(),
            source,
        };
        // Native first: it runs before any socket buffer exists. Drivers
        // without XDP support (and veth with an MTU too large for a
        // single-buffer program) refuse it; generic mode works everywhere.
        let generic = || link_create(prog_fd, ifindex, libbpf_sys::XDP_FLAGS_SKB_MODE);
        let link = if generic_only {
            (generic().map_err(attach_err)?, XdpAttachMode::Generic)
        } else {
            match link_create(prog_fd, ifindex, libbpf_sys::XDP_FLAGS_DRV_MODE) {
                Ok(fd) => (fd, XdpAttachMode::Native),
                Err(native) => match generic() {
                    Ok(fd) => (fd, XdpAttachMode::Generic),
                    // Report the native attempt's reason: it is the mode we
                    // wanted, and a conflict (another program attached)
                    // shows up there too.
                    Err(_) => return Err(attach_err(native)),
                },
            }
        };
        self.link = Some(link);
        Ok(())
    }

    /// The mode [`XskRedirect::attach`] got, None before attaching.
    pub fn attach_mode(&self) -> Option<XdpAttachMode> {
        self.link.as_ref().map(|(_, mode)| *mode)
    }

    /// Registers the bound AF_XDP socket `xsk_fd` for receive queue `queue_id`.
    pub fn insert(&self, queue_id: u32, xsk_fd: BorrowedFd<'_>) -> Result<(), BpfError> {
        let what = "adding the AF_XDP socket to xsks_map";
        if queue_id >= MAX_QUEUES {
            return Err(BpfError::Map {
                what,
                source: libbpf_rs::Error::from(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("queue {queue_id} is beyond the map's {MAX_QUEUES} entries"),
                )),
            });
        }
        let map = self
            .obj
            .maps()
            .find(|m| m.name() == MAP)
            .expect("xsk_redirect.bpf.c defines the map xsks_map");
        let fd = xsk_fd.as_raw_fd() as u32;
        map.update(&queue_id.to_ne_bytes(), &fd.to_ne_bytes(), MapFlags::ANY)
            .map_err(|source| BpfError::Map { what, source })
    }
}

/// Writes `pass_ike` into the object's read-only data (its only variable,
/// a `__u32` at offset 0) before it is loaded.
fn set_pass_ike(open: &mut libbpf_rs::OpenObject, pass_ike: bool) -> Result<(), libbpf_rs::Error> {
    let mut rodata = open
        .maps_mut()
        .find(|m| m.name().to_string_lossy().ends_with(".rodata"))
        .ok_or_else(|| layout_error("no .rodata map"))?;
    let data = rodata
        .initial_value_mut()
        .ok_or_else(|| layout_error(".rodata has no initial value"))?;
    let Some(flag) = data.get_mut(..4) else {
        return Err(layout_error(".rodata is shorter than pass_ike"));
    };
    flag.copy_from_slice(&u32::from(pass_ike).to_ne_bytes());
    Ok(())
}

/// The embedded object is not laid out as this file expects: a build bug.
fn layout_error(what: &str) -> libbpf_rs::Error {
    libbpf_rs::Error::from(std::io::Error::other(format!(
        "xsk_redirect.bpf.o: {what} (pass_ike)"
    )))
}

/// `bpf_link_create(prog, ifindex, BPF_XDP, flags)`: a link attachment in
/// the given XDP mode.
pub(crate) fn link_create(
    prog_fd: i32,
    ifindex: i32,
    flags: u32,
) -> Result<OwnedFd, libbpf_rs::Error> {
    let opts = libbpf_sys::bpf_link_create_opts {
        sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as libbpf_sys::size_t,
        flags,
        ..Default::default()
    };
    // SAFETY: opts is a valid, sized bpf_link_create_opts that outlives the call;
    // the other arguments are plain integers.
    let rc = unsafe { libbpf_sys::bpf_link_create(prog_fd, ifindex, libbpf_sys::BPF_XDP, &opts) };
    if rc < 0 {
        // libbpf 1.x returns -errno.
        return Err(libbpf_rs::Error::from_raw_os_error(-rc));
    }
    // SAFETY: rc is a fresh link file descriptor that nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(rc) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mode_names() {
        assert_eq!(XdpAttachMode::Native.as_str(), "native");
        assert_eq!(XdpAttachMode::Generic.as_str(), "generic");
    }

    /// Loading needs root (CAP_BPF); without it the test is skipped
    /// (a failure under LINERATE_REQUIRE_ALL=1).
    #[test]
    fn loads_and_rejects_a_queue_beyond_the_map() {
        if !crate::root_or_skip("loads_and_rejects_a_queue_beyond_the_map") {
            return;
        }
        // As root, a load error is a failure.
        let prog = XskRedirect::load().expect("loading the program as root");
        assert_eq!(prog.attach_mode(), None);
        // Any fd will do: the range check comes before the kernel sees it.
        let err = prog
            .insert(MAX_QUEUES, std::io::stdin().as_fd())
            .expect_err("queue 64 is outside the map");
        assert!(err.to_string().contains("xsks_map"), "{err}");
        // With the IKE check: the verifier takes its bounds checks.
        // The flag the kernel holds is the one asked for, both ways.
        for pass_ike in [false, true] {
            let prog = XskRedirect::load_with(pass_ike).expect("loading the program as root");
            let rodata = prog
                .obj
                .maps()
                .find(|m| m.name().to_string_lossy().ends_with(".rodata"))
                .expect("a .rodata map");
            let v = rodata
                .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
                .unwrap()
                .expect("one entry");
            assert_eq!(v, u32::from(pass_ike).to_ne_bytes(), "pass_ike {pass_ike}");
        }
    }
}
