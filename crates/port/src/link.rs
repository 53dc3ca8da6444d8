//! Facts about a network interface, asked of the kernel with ioctls on a
//! socket of the interface's namespace.

use crate::PortError;
use linerate_wire::MacAddr;
use std::os::fd::{AsRawFd, OwnedFd};

/// Interface facts linerate needs before it sends anything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkFacts {
    pub ifindex: i32,
    pub mac: MacAddr,
    pub mtu: u32,
    pub up: bool,
    pub speed_bps: Option<u64>,
}

fn ifreq_for(ifname: &str) -> Result<libc::ifreq, PortError> {
    let bytes = ifname.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return Err(PortError::NoSuchInterface(ifname.to_string()));
    }
    // SAFETY: ifreq is plain old data; all-zero is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(bytes) {
        *dst = *src as libc::c_char;
    }
    Ok(req)
}

fn ioctl(
    fd: &OwnedFd,
    ifname: &str,
    request: libc::c_ulong,
    req: &mut libc::ifreq,
) -> Result<(), PortError> {
    // SAFETY: every request used here reads/writes only the ifreq we own.
    let rc = unsafe { libc::ioctl(fd.as_raw_fd(), request as _, req as *mut libc::ifreq) };
    if rc < 0 {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::ENODEV) => PortError::NoSuchInterface(ifname.to_string()),
            _ => PortError::io("querying interface", ifname, err),
        });
    }
    Ok(())
}

/// Reads index, MAC, MTU, state and speed of `ifname` using `fd`, any socket
/// created in the interface's namespace.
pub fn link_facts(fd: &OwnedFd, ifname: &str) -> Result<LinkFacts, PortError> {
    let mut req = ifreq_for(ifname)?;
    ioctl(fd, ifname, libc::SIOCGIFINDEX, &mut req)?;
    // SAFETY: SIOCGIFINDEX filled the ifindex member of the union.
    let ifindex = unsafe { req.ifr_ifru.ifru_ifindex };

    let mut req = ifreq_for(ifname)?;
    ioctl(fd, ifname, libc::SIOCGIFHWADDR, &mut req)?;
    // SAFETY: SIOCGIFHWADDR filled the hwaddr member.
    let hw = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (dst, src) in mac.iter_mut().zip(hw.sa_data.iter()) {
        *dst = *src as u8;
    }

    let mut req = ifreq_for(ifname)?;
    ioctl(fd, ifname, libc::SIOCGIFMTU, &mut req)?;
    // SAFETY: SIOCGIFMTU filled the mtu member.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu } as u32;

    let mut req = ifreq_for(ifname)?;
    ioctl(fd, ifname, libc::SIOCGIFFLAGS, &mut req)?;
    // SAFETY: SIOCGIFFLAGS filled the flags member.
    let flags = unsafe { req.ifr_ifru.ifru_flags } as libc::c_int;
    let up = flags & libc::IFF_UP != 0;

    Ok(LinkFacts {
        ifindex,
        mac: MacAddr(mac),
        mtu,
        up,
        speed_bps: link_speed(fd, ifname),
    })
}

/// The legacy ETHTOOL_GSET reply; enough to read the speed, which every
/// driver that knows its speed (veth says 10000) reports there.
#[repr(C)]
#[derive(Default)]
struct EthtoolCmd {
    cmd: u32,
    supported: u32,
    advertising: u32,
    speed: u16,
    duplex: u8,
    port: u8,
    phy_address: u8,
    transceiver: u8,
    autoneg: u8,
    mdio_support: u8,
    maxtxpkt: u32,
    maxrxpkt: u32,
    speed_hi: u16,
    eth_tp_mdix: u8,
    eth_tp_mdix_ctrl: u8,
    lp_advertising: u32,
    reserved: [u32; 2],
}

const ETHTOOL_GSET: u32 = 0x1;

/// Asks the driver of `ifname` the ethtool command in `data` (whose first
/// field is the command number); None when it does not answer.
///
/// # Safety
///
/// `T` must be the structure the command writes, laid out as the kernel's.
unsafe fn ethtool<T>(fd: &OwnedFd, ifname: &str, data: &mut T) -> Option<()> {
    let mut req = ifreq_for(ifname).ok()?;
    req.ifr_ifru.ifru_data = (data as *mut T).cast();
    // SAFETY: SIOCETHTOOL writes at most a `T` into ifru_data, which
    // points at `data` (the caller's promise).
    let rc = unsafe {
        libc::ioctl(
            fd.as_raw_fd(),
            libc::SIOCETHTOOL as _,
            &mut req as *mut libc::ifreq,
        )
    };
    (rc >= 0).then_some(())
}

/// Link speed in bits/s, or None when the driver does not say.
fn link_speed(fd: &OwnedFd, ifname: &str) -> Option<u64> {
    let mut cmd = EthtoolCmd {
        cmd: ETHTOOL_GSET,
        ..Default::default()
    };
    // SAFETY: ETHTOOL_GSET writes an ethtool_cmd, which EthtoolCmd is.
    unsafe { ethtool(fd, ifname, &mut cmd) }?;
    let mbps = ((cmd.speed_hi as u32) << 16) | cmd.speed as u32;
    // 0 and 0xFFFFFFFF (SPEED_UNKNOWN) both mean "don't know".
    (mbps != 0 && mbps != u32::MAX && mbps != 0xFFFF).then_some(mbps as u64 * 1_000_000)
}

/// The ethtool_channels of ETHTOOL_GCHANNELS.
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// How many receive and transmit queues a device has in use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueCounts {
    pub rx: u32,
    pub tx: u32,
}

/// The queues `ifname` uses (`ethtool -l`: combined channels plus those
/// of one direction), or None when the driver does not say (it then has
/// one queue each way, or does not tell which).
pub fn queue_counts(fd: &OwnedFd, ifname: &str) -> Option<QueueCounts> {
    let mut ch = EthtoolChannels {
        cmd: ETHTOOL_GCHANNELS,
        ..Default::default()
    };
    // SAFETY: ETHTOOL_GCHANNELS writes an ethtool_channels, which
    // EthtoolChannels is.
    unsafe { ethtool(fd, ifname, &mut ch) }?;
    let counts = QueueCounts {
        rx: ch.combined_count.saturating_add(ch.rx_count),
        tx: ch.combined_count.saturating_add(ch.tx_count),
    };
    (counts.rx > 0 && counts.tx > 0).then_some(counts)
}

/// The interface index of `ifname` in the calling thread's network namespace.
pub fn ifindex(ifname: &str) -> Result<u32, PortError> {
    nix::net::if_::if_nametoindex(ifname)
        .map_err(|_| PortError::NoSuchInterface(ifname.to_string()))
}
