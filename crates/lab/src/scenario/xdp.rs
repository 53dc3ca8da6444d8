//! `xdp-router`: the DUT forwards with linerate-bpf's XDP router
//! (`bpf_fib_lookup` + `bpf_redirect`) on both of its interfaces, in native
//! mode. Routes and neighbours still come from the kernel (so `routes:N`
//! applies), but nftables never sees a forwarded packet.
//!
//! veth delivers a redirected frame only to a peer whose receive side has
//! NAPI, which veth turns on with GRO or an XDP program: the tester ports
//! get GRO on. GRO merges only TCP (and UDP for sockets that ask), so the
//! tester's UDP test frames still arrive one by one.

use crate::link::link_info;
use crate::names::tester_netns;
use crate::sides::SIDES;
use crate::{netns, Lab, LabError};
use linerate_bpf::router::XdpRouter;

/// The attached program; dropping it detaches it.
pub(crate) struct Router {
    router: XdpRouter,
    before: linerate_bpf::router::RouterStats,
}

pub(crate) fn attach(l: &Lab) -> Result<(Router, String), LabError> {
    let dut = l.dut_netns().to_string();
    let fail = |detail: String| LabError::NotInEffect {
        scenario: String::new(),
        detail,
    };
    if l.placement().ring > crate::VETH_RING {
        return Err(fail(format!(
            "the XDP router needs a lab with veth's own rings (lab up --ring {}): the deep lab's NIC queue holds the DUT ports' XDP hook",
            crate::VETH_RING
        )));
    }
    for side in &SIDES {
        let tester = tester_netns(l.name(), side);
        if let Some(ethtool) = netns::ethtool_path() {
            let ethtool = ethtool.to_string_lossy().into_owned();
            netns::exec_in(&tester, &[&ethtool, "-K", side.tester_if, "gro", "on"])?;
        }
    }
    let mut router = XdpRouter::load().map_err(|e| fail(e.to_string()))?;
    let mut ifindexes = Vec::new();
    for side in &SIDES {
        let info = link_info(&dut, side.dut_if)?;
        let index = info["ifindex"].as_i64().unwrap_or(0) as i32;
        ifindexes.push((index, side.dut_if));
    }
    // Attaching resolves the index in the calling thread's namespace.
    netns::run_in(&dut, || {
        for (index, name) in &ifindexes {
            router.attach(*index, name).map_err(|e| {
                let why =
                    std::error::Error::source(&e).map_or_else(|| e.to_string(), |s| s.to_string());
                format!("attaching the XDP router to {name} in native mode failed: {why}")
            })?;
        }
        Ok(())
    })
    .map_err(fail)?;
    // Read back: the kernel lists the program on each interface.
    for side in &SIDES {
        let info = link_info(&dut, side.dut_if)?;
        if info["xdp"]["prog"]["id"].as_u64().is_none() && info.get("xdp").is_none() {
            return Err(fail(format!(
                "no XDP program on {} after attaching it",
                side.dut_if
            )));
        }
    }
    let before = router.stats().map_err(|e| fail(e.to_string()))?;
    Ok((
        Router { router, before },
        "XDP router attached to dut-a and dut-b in native mode (read back with ip -j link); tester ports' GRO on so veth delivers redirected frames".to_string(),
    ))
}

impl Router {
    /// After traffic: the program redirected frames itself.
    pub(crate) fn traffic_seen(&self) -> Result<String, String> {
        let now = self.router.stats().map_err(|e| e.to_string())?;
        let redirected = now.redirected - self.before.redirected;
        let passed = now.passed - self.before.passed;
        if redirected == 0 {
            return Err(format!(
                "the XDP router redirected no frame ({passed} passed to the kernel stack)"
            ));
        }
        Ok(format!(
            "the XDP router forwarded {redirected} frames itself ({passed} left to the kernel stack)"
        ))
    }
}
