//! The lab's NIC receive ring on the DUT's input (`bpf/nic_queue.bpf.c`):
//! a cpumap queue, `depth` frames deep, filled in the DUT interface's NAPI
//! on the tester's CPU and drained by a kernel thread on the DUT's CPU.
//!
//! [`install`] attaches the program through netlink, not a BPF link, so it
//! stays for as long as the interface does (a lab outlives `lab up`), and
//! goes with it. [`counts`] finds it again by the interface, from any
//! process: frames queued and frames delivered, whose difference (once the
//! queue has drained) is what the full queue dropped.

use crate::{bpf_object, load, BpfError};
use libbpf_rs::libbpf_sys;
use libbpf_rs::{MapCore, MapFlags, MapHandle};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

const PROGRAM: &str = "nic_queue";

/// Frames the queue took in and frames it handed to the DUT's stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueCounts {
    pub queued: u64,
    pub delivered: u64,
}

impl QueueCounts {
    /// Frames the full queue dropped between `before` and `self` (when the
    /// queue is empty at both moments).
    pub fn dropped_since(&self, before: &QueueCounts) -> u64 {
        let queued = self.queued.saturating_sub(before.queued);
        let delivered = self.delivered.saturating_sub(before.delivered);
        queued.saturating_sub(delivered)
    }
}

/// Loads the program with a queue of `depth` frames drained on CPU `cpu`
/// and attaches it to interface `ifindex` (resolved in the calling
/// thread's network namespace; `ifname` names it in errors) in native mode.
pub fn install(ifindex: i32, ifname: &str, cpu: u32, depth: u32) -> Result<(), BpfError> {
    let cpus = libbpf_rs::num_possible_cpus().unwrap_or(cpu as usize + 1) as u32;
    let obj = load(PROGRAM, bpf_object!("nic_queue"), |open| {
        for mut map in open.maps_mut() {
            if map.name().to_str() == Some("lr_nic_cpus") {
                map.set_max_entries(cpus.max(cpu + 1))?;
            }
        }
        Ok(())
    })?;
    let map_err = |source| BpfError::Map {
        what: "setting up the lab's NIC queue",
        source,
    };
    let prog_fd = |name: &str| {
        obj.progs()
            .find(|p| p.name() == name)
            .expect("nic_queue.bpf.c defines lr_nic_rx and lr_nic_deliver")
            .as_fd()
            .as_raw_fd()
    };
    let map = |name: &str| {
        obj.maps()
            .find(|m| m.name() == name)
            .expect("nic_queue.bpf.c defines its maps")
    };
    map("lr_nic_config")
        .update(&0u32.to_ne_bytes(), &cpu.to_ne_bytes(), MapFlags::ANY)
        .map_err(map_err)?;
    // struct bpf_cpumap_val: the queue size, then the program's fd.
    let mut value = [0u8; 8];
    value[..4].copy_from_slice(&depth.to_ne_bytes());
    value[4..].copy_from_slice(&prog_fd("lr_nic_deliver").to_ne_bytes());
    map("lr_nic_cpus")
        .update(&cpu.to_ne_bytes(), &value, MapFlags::ANY)
        .map_err(map_err)?;
    // SAFETY: plain integers and a null options pointer (no options).
    let rc = unsafe {
        libbpf_sys::bpf_xdp_attach(
            ifindex,
            prog_fd("lr_nic_rx"),
            libbpf_sys::XDP_FLAGS_DRV_MODE,
            std::ptr::null(),
        )
    };
    if rc < 0 {
        return Err(BpfError::Attach {
            program: PROGRAM,
            ifname: ifname.to_string(),
            source: libbpf_rs::Error::from_raw_os_error(-rc),
        });
    }
    Ok(())
}

/// The map `name` of the NIC queue program attached to interface
/// `ifindex` (in the calling thread's network namespace); None when the
/// interface has no such program.
fn attached_map(ifindex: i32, name: &str) -> Option<MapHandle> {
    let mut id = 0u32;
    // SAFETY: `id` outlives the call.
    let rc = unsafe {
        libbpf_sys::bpf_xdp_query_id(ifindex, libbpf_sys::XDP_FLAGS_DRV_MODE as i32, &mut id)
    };
    if rc < 0 || id == 0 {
        return None;
    }
    // SAFETY: a plain id; a non-negative result is a new fd we own.
    let fd = unsafe { libbpf_sys::bpf_prog_get_fd_by_id(id) };
    if fd < 0 {
        return None;
    }
    // SAFETY: fd is fresh and ours.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut map_ids = [0u32; 8];
    // SAFETY: bpf_prog_info is plain data; zero is a valid value.
    let mut info: libbpf_sys::bpf_prog_info = unsafe { std::mem::zeroed() };
    info.nr_map_ids = map_ids.len() as u32;
    info.map_ids = map_ids.as_mut_ptr() as u64;
    let mut len = std::mem::size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: info and map_ids outlive the call; len is info's size.
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(fd.as_raw_fd(), &mut info, &mut len) };
    if rc < 0 {
        return None;
    }
    let n = (info.nr_map_ids as usize).min(map_ids.len());
    map_ids[..n].iter().find_map(|&id| {
        let map = MapHandle::from_map_id(id).ok()?;
        (map.name().to_str() == Some(name)).then_some(map)
    })
}

/// How many frames deep the queue attached to interface `ifindex` is (in
/// the calling thread's network namespace): the cpumap entry's queue size,
/// as [`install`] set it. None when the interface has no NIC queue.
pub fn depth(ifindex: i32) -> Option<u32> {
    let cpu = attached_map(ifindex, "lr_nic_config")?
        .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
        .ok()??;
    let value = attached_map(ifindex, "lr_nic_cpus")?
        .lookup(cpu.get(..4)?, MapFlags::ANY)
        .ok()??;
    Some(u32::from_ne_bytes(value.get(..4)?.try_into().ok()?))
}

/// The counts of the queue attached to interface `ifindex` (in the calling
/// thread's network namespace); None when it has none.
pub fn counts(ifindex: i32) -> Option<QueueCounts> {
    let counts = attached_map(ifindex, "lr_nic_counts")?;
    let read = |key: u32| -> Option<u64> {
        let per_cpu = counts
            .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
            .ok()??;
        Some(
            per_cpu
                .iter()
                .filter_map(|v| v.get(..8))
                .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
                .sum(),
        )
    };
    Some(QueueCounts {
        queued: read(0)?,
        delivered: read(1)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drops_are_queued_minus_delivered() {
        let before = QueueCounts {
            queued: 10,
            delivered: 10,
        };
        let after = QueueCounts {
            queued: 110,
            delivered: 95,
        };
        assert_eq!(after.dropped_since(&before), 15);
        assert_eq!(before.dropped_since(&after), 0);
    }
}
