//! The XDP router (`bpf/xdp_router.bpf.c`): the lab DUT's XDP data plane for
//! the `xdp-router` scenario. Each frame is routed with `bpf_fib_lookup`
//! (the kernel's own routing table and neighbour cache) and sent with
//! `bpf_redirect`; what the program cannot forward goes on to the stack.
//!
//! Usage: [`XdpRouter::load`] once, [`XdpRouter::attach`] for each DUT
//! interface from inside the DUT's network namespace (the index is resolved
//! in the calling thread's namespace), [`XdpRouter::stats`] for the check.
//! Dropping the value detaches the program (BPF links).

use crate::xsk::{link_create, XdpAttachMode};
use crate::{bpf_object, load, map, BpfError};
use libbpf_rs::libbpf_sys;
use libbpf_rs::{MapCore, MapFlags};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};

const PROGRAM: &str = "xdp_router";

/// Frames the program forwarded itself and frames it left to the kernel.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RouterStats {
    pub redirected: u64,
    pub passed: u64,
}

/// The loaded router program and its attachments.
pub struct XdpRouter {
    /// Declared first: links detach before the program is unloaded.
    links: Vec<(OwnedFd, String, XdpAttachMode)>,
    obj: libbpf_rs::Object,
}

impl XdpRouter {
    pub fn load() -> Result<XdpRouter, BpfError> {
        let obj = load(PROGRAM, bpf_object!("xdp_router"), |_| Ok(()))?;
        Ok(XdpRouter {
            links: Vec::new(),
            obj,
        })
    }

    /// Attaches to interface `ifindex` (named `ifname` in errors) in native
    /// (driver) mode: veth forwards redirected frames only between native
    /// XDP programs. Returns the mode attached in.
    pub fn attach(&mut self, ifindex: i32, ifname: &str) -> Result<XdpAttachMode, BpfError> {
        let prog = self
            .obj
            .progs()
            .find(|p| p.name() == PROGRAM)
            .expect("xdp_router.bpf.c defines the program xdp_router");
        let fd = link_create(
            prog.as_fd().as_raw_fd(),
            ifindex,
            libbpf_sys::XDP_FLAGS_DRV_MODE,
        )
        .map_err(|source| BpfError::Attach {
            program: PROGRAM,
            ifname: ifname.to_string(),
            source,
        })?;
        self.links
            .push((fd, ifname.to_string(), XdpAttachMode::Native));
        Ok(XdpAttachMode::Native)
    }

    /// Interfaces the program is attached to.
    pub fn interfaces(&self) -> Vec<String> {
        self.links.iter().map(|(_, n, _)| n.clone()).collect()
    }

    /// The program's counters, summed over CPUs.
    pub fn stats(&self) -> Result<RouterStats, BpfError> {
        let stats = map(&self.obj, "stats");
        let read = |key: u32| -> Result<u64, BpfError> {
            let per_cpu = stats
                .lookup_percpu(&key.to_ne_bytes(), MapFlags::ANY)
                .map_err(|source| BpfError::Map {
                    what: "reading the XDP router's counters",
                    source,
                })?
                .unwrap_or_default();
            Ok(per_cpu
                .iter()
                .filter_map(|v| v.get(..8))
                .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
                .sum())
        };
        Ok(RouterStats {
            redirected: read(0)?,
            passed: read(1)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Loading needs root (CAP_BPF); without it the test is skipped
    /// (a failure under LINERATE_REQUIRE_ALL=1).
    #[test]
    fn loads_and_counts_nothing_before_traffic() {
        if !crate::root_or_skip("loads_and_counts_nothing_before_traffic") {
            return;
        }
        // As root, a load error is a failure.
        let router = XdpRouter::load().expect("loading the program as root");
        assert_eq!(router.stats().unwrap(), RouterStats::default());
        assert!(router.interfaces().is_empty());
    }
}
