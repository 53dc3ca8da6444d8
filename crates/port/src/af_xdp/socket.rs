//! AF_XDP socket plumbing: creation, UMEM registration, ring setup and
//! mapping, bind, statistics, wake-ups; and the small AF_PACKET socket
//! that sends control frames.

use super::mmap::{Mapping, Umem};
use super::ring::RingParts;
use crate::PortError;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

fn unsupported(msg: String) -> PortError {
    PortError::Unsupported(msg)
}

/// A fresh AF_XDP socket.
pub(crate) fn xsk_socket(ifname: &str) -> Result<OwnedFd, PortError> {
    // SAFETY: plain socket(2); the fd is owned right away.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EAFNOSUPPORT) => unsupported(
                "AF_XDP sockets are not available on this kernel (built without \
                 CONFIG_XDP_SOCKETS, or older than 4.18): use --engine af_packet"
                    .to_string(),
            ),
            _ => PortError::io("opening an AF_XDP socket", ifname, err),
        });
    }
    // SAFETY: fd is a fresh, valid descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A raw packet socket that receives nothing (protocol 0), bound to the
/// interface, for the odd control frame: it bypasses the AF_XDP TX ring,
/// whose frames belong to the generator's thread.
pub(crate) fn control_socket(ifname: &str) -> Result<OwnedFd, PortError> {
    // SAFETY: plain socket(2); the fd is owned right away.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(PortError::io(
            "opening the control packet socket",
            ifname,
            std::io::Error::last_os_error(),
        ));
    }
    // SAFETY: fd is a fresh, valid descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Binds the send-only control socket (ARP replies) to the interface: the
/// packet socket's bind with protocol 0, which taps no received frames.
pub(crate) fn bind_control(fd: &OwnedFd, ifindex: i32, ifname: &str) -> Result<(), PortError> {
    crate::af_packet::socket::bind(fd, ifindex, 0, ifname)
}

/// setsockopt(SOL_XDP, name, value).
pub(crate) fn set_opt<T>(
    fd: &OwnedFd,
    name: libc::c_int,
    value: &T,
    what: &'static str,
    ifname: &str,
) -> Result<(), PortError> {
    crate::af_packet::socket::set_opt(fd, libc::SOL_XDP, name, value, what, ifname)
}

/// getsockopt(SOL_XDP, name) into a zeroed `T`; returns it and the length
/// the kernel wrote (older kernels write shorter versions of some structs).
fn get_opt<T>(
    fd: &OwnedFd,
    name: libc::c_int,
    what: &'static str,
    ifname: &str,
) -> Result<(T, usize), PortError> {
    // SAFETY: every T used here is plain old data; all-zero is valid.
    let mut value: T = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into `value`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_XDP,
            name,
            (&mut value as *mut T).cast(),
            &mut len,
        )
    };
    if rc < 0 {
        return Err(PortError::io(what, ifname, std::io::Error::last_os_error()));
    }
    Ok((value, len as usize))
}

/// Registers `umem` with the socket (aligned chunks, no headroom).
pub(crate) fn register_umem(fd: &OwnedFd, umem: &Umem, ifname: &str) -> Result<(), PortError> {
    // SAFETY: xdp_umem_reg is plain old data; zero flags, headroom and
    // metadata length are what we want (the kernel insists padding is zero).
    let mut reg: libc::xdp_umem_reg = unsafe { std::mem::zeroed() };
    reg.addr = umem.base() as u64;
    reg.len = umem.len() as u64;
    reg.chunk_size = umem.chunk_size();
    set_opt(fd, libc::XDP_UMEM_REG, &reg, "registering the AF_XDP UMEM", ifname).map_err(|e| {
        match e {
            PortError::Io { ref source, .. } if source.raw_os_error() == Some(libc::ENOMEM) => {
                unsupported(format!(
                    "registering {} MiB of AF_XDP UMEM on '{ifname}' failed (ENOMEM): the locked-memory \
                     limit is too low; raise it ('ulimit -l unlimited') or use smaller rings",
                    umem.len() >> 20
                ))
            }
            e => e,
        }
    })
}

/// The ring sizes asked of the kernel (entries, powers of two).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RingSizes {
    pub fill: u32,
    pub completion: u32,
    pub rx: u32,
    pub tx: u32,
}

/// One mapped ring and where its parts are.
pub(crate) struct MappedRing<T> {
    pub map: Mapping,
    pub parts: RingParts<T>,
}

/// The four rings, created and mapped.
pub(crate) struct Rings {
    pub fill: MappedRing<u64>,
    pub completion: MappedRing<u64>,
    pub rx: MappedRing<libc::xdp_desc>,
    pub tx: MappedRing<libc::xdp_desc>,
}

pub(crate) fn create_rings(
    fd: &OwnedFd,
    sizes: RingSizes,
    ifname: &str,
) -> Result<Rings, PortError> {
    set_opt(
        fd,
        libc::XDP_UMEM_FILL_RING,
        &sizes.fill,
        "creating the AF_XDP fill ring",
        ifname,
    )?;
    set_opt(
        fd,
        libc::XDP_UMEM_COMPLETION_RING,
        &sizes.completion,
        "creating the AF_XDP completion ring",
        ifname,
    )?;
    set_opt(
        fd,
        libc::XDP_RX_RING,
        &sizes.rx,
        "creating the AF_XDP RX ring",
        ifname,
    )?;
    set_opt(
        fd,
        libc::XDP_TX_RING,
        &sizes.tx,
        "creating the AF_XDP TX ring",
        ifname,
    )?;

    let (off, len) = get_opt::<libc::xdp_mmap_offsets>(
        fd,
        libc::XDP_MMAP_OFFSETS,
        "reading the AF_XDP ring offsets",
        ifname,
    )?;
    if len < std::mem::size_of::<libc::xdp_mmap_offsets>() {
        // Kernels before 5.4 have no ring flags, hence no need-wakeup.
        return Err(unsupported(format!(
            "this kernel's AF_XDP has no need-wakeup flags (5.4 or later needed) for '{ifname}': \
             use --engine af_packet"
        )));
    }
    let map = |o: &libc::xdp_ring_offset, entries: u32, entry: usize, pgoff: u64| {
        Mapping::ring(
            fd,
            o.desc as usize + entries as usize * entry,
            pgoff,
            ifname,
        )
    };
    let fill = map(&off.fr, sizes.fill, 8, libc::XDP_UMEM_PGOFF_FILL_RING)?;
    let completion = map(
        &off.cr,
        sizes.completion,
        8,
        libc::XDP_UMEM_PGOFF_COMPLETION_RING,
    )?;
    let desc = std::mem::size_of::<libc::xdp_desc>();
    let rx = map(&off.rx, sizes.rx, desc, libc::XDP_PGOFF_RX_RING as u64)?;
    let tx = map(&off.tx, sizes.tx, desc, libc::XDP_PGOFF_TX_RING as u64)?;
    Ok(Rings {
        fill: MappedRing {
            parts: parts(&fill, &off.fr, sizes.fill),
            map: fill,
        },
        completion: MappedRing {
            parts: parts(&completion, &off.cr, sizes.completion),
            map: completion,
        },
        rx: MappedRing {
            parts: parts(&rx, &off.rx, sizes.rx),
            map: rx,
        },
        tx: MappedRing {
            parts: parts(&tx, &off.tx, sizes.tx),
            map: tx,
        },
    })
}

/// Where a ring's parts are inside its mapping.
fn parts<T>(m: &Mapping, o: &libc::xdp_ring_offset, size: u32) -> RingParts<T> {
    RingParts {
        producer: m.at(o.producer),
        consumer: m.at(o.consumer),
        flags: m.at(o.flags),
        descs: m.at(o.desc),
        size,
    }
}

/// Binds the socket to queue `queue_id` of `ifindex` with `flags`
/// (XDP_USE_NEED_WAKEUP plus XDP_ZEROCOPY, XDP_COPY or neither).
pub(crate) fn bind(
    fd: &OwnedFd,
    ifindex: i32,
    queue_id: u32,
    flags: u16,
    ifname: &str,
) -> Result<(), PortError> {
    let addr = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex as u32,
        sxdp_queue_id: queue_id,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: addr is a valid sockaddr_xdp of the size passed.
    let rc = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_xdp).cast(),
            std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        return Ok(());
    }
    let err = std::io::Error::last_os_error();
    let zc = flags & libc::XDP_ZEROCOPY != 0;
    Err(match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) if zc => unsupported(format!(
            "the driver of '{ifname}' does not support zero-copy AF_XDP: allow copy mode \
             (zero-copy auto or off)"
        )),
        Some(libc::EBUSY) => unsupported(format!(
            "queue {queue_id} of '{ifname}' is already used by another AF_XDP socket: \
             stop the other program, or choose another queue"
        )),
        Some(libc::EINVAL) => unsupported(format!(
            "binding an AF_XDP socket to queue {queue_id} of '{ifname}' was refused (EINVAL): \
             the queue may not exist (see 'ethtool -l {ifname}'){}",
            if zc {
                ", or the driver refuses zero-copy with this frame size"
            } else {
                ""
            }
        )),
        _ => PortError::io("binding the AF_XDP socket", ifname, err),
    })
}

/// Whether the bound socket ended up in zero-copy mode.
pub(crate) fn is_zero_copy(fd: &OwnedFd, ifname: &str) -> Result<bool, PortError> {
    let (opts, _) = get_opt::<libc::xdp_options>(
        fd,
        libc::XDP_OPTIONS,
        "reading the AF_XDP bind mode",
        ifname,
    )?;
    Ok(opts.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
}

/// The socket's cumulative statistics (never reset by reading).
pub(crate) fn statistics(fd: &OwnedFd, ifname: &str) -> Result<libc::xdp_statistics, PortError> {
    // On a kernel that writes only the first three fields (before 5.9),
    // rx_ring_full is folded into rx_dropped and the rest read as zero.
    let (stats, _) = get_opt::<libc::xdp_statistics>(
        fd,
        libc::XDP_STATISTICS,
        "reading AF_XDP statistics",
        ifname,
    )?;
    Ok(stats)
}

/// sendto(MSG_DONTWAIT) with no data: tells the kernel to process the TX
/// ring (in copy mode the kernel transmits in this call, up to a budget of
/// frames per call).
pub(crate) fn kick_tx(fd: &OwnedFd, ifname: &str) -> Result<Kick, PortError> {
    // SAFETY: sendto with a null buffer of length 0 and no address.
    let rc = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if rc >= 0 {
        return Ok(Kick::Sent);
    }
    let err = std::io::Error::last_os_error();
    match err.raw_os_error() {
        // EBUSY: the device dropped one frame (a full queue: it completes
        // like a frame lost on the wire), and the call stopped there.
        Some(libc::EBUSY) => Ok(Kick::Dropped),
        // EAGAIN: the per-call budget is used up, the device queue is busy
        // or the send buffer is full; the frames stay in the ring for the
        // next call. ENOBUFS: no memory for a socket buffer.
        Some(libc::EAGAIN) | Some(libc::ENOBUFS) | Some(libc::EINTR) => Ok(Kick::Sent),
        _ => Err(PortError::io(
            "sending from the AF_XDP TX ring",
            ifname,
            err,
        )),
    }
}

/// What a [`kick_tx`] call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kick {
    /// Sent what it could (or nothing, for now).
    Sent,
    /// The device refused a frame for want of room and dropped it.
    Dropped,
}

/// recvfrom(MSG_DONTWAIT) with no buffer: tells a zero-copy driver that the
/// fill ring has buffers again.
pub(crate) fn kick_rx(fd: &OwnedFd, ifname: &str) -> Result<(), PortError> {
    // SAFETY: recvfrom with a null buffer of length 0 and no address.
    let rc = unsafe {
        libc::recvfrom(
            fd.as_raw_fd(),
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) | Some(libc::EINTR) => {}
            _ => return Err(PortError::io("waking the AF_XDP receive path", ifname, err)),
        }
    }
    Ok(())
}

/// Waits up to `timeout` for any of the sockets in `pollfds` to become
/// readable.
pub(crate) fn wait_readable(
    pollfds: &mut [libc::pollfd],
    timeout: std::time::Duration,
    ifname: &str,
) -> Result<(), PortError> {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `pollfds` is a valid array of its length, the timespec is
    // valid, no signal mask change.
    let rc = unsafe {
        libc::ppoll(
            pollfds.as_mut_ptr(),
            pollfds.len() as libc::nfds_t,
            &ts,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EINTR) {
            return Err(PortError::io("waiting for frames", ifname, err));
        }
    }
    Ok(())
}

/// Raises the socket's send buffer past net.core.wmem_max (root may): in
/// copy mode every frame in flight is a socket buffer charged to the AF_XDP
/// socket, and the default (about 200 kB) would cap frames in flight far
/// below the ring size. The limit cannot be raised by sysctl inside a
/// network namespace.
pub(crate) fn force_sndbuf(fd: &OwnedFd, bytes: usize, ifname: &str) -> Result<(), PortError> {
    let v = bytes.min(i32::MAX as usize / 2) as libc::c_int;
    // SAFETY: `v` is an initialised c_int of the size passed.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_SNDBUFFORCE,
            (&v as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        return Err(PortError::io(
            "raising the AF_XDP send buffer",
            ifname,
            std::io::Error::last_os_error(),
        ));
    }
    Ok(())
}
