//! The lab DUT's 802.1Q ports (`bpf/vlan_port.bpf.c`) for kernels without
//! 802.1Q support: tagged frames of one VLAN are untagged on the way in
//! and every frame is tagged on the way out, so the router routes tagged
//! traffic as it would on VLAN subinterfaces.
//!
//! Usage: [`VlanPort::load`] with the tag control information, then
//! [`VlanPort::attach`] for each interface from inside its network
//! namespace (the index is resolved in the calling thread's namespace).
//! Dropping the value detaches the programs (tcx links).

use crate::{bpf_object, load, map, BpfError};
use libbpf_rs::libbpf_sys;
use libbpf_rs::{MapCore, MapFlags};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};

const PROGRAM: &str = "vlan_port";

pub struct VlanPort {
    /// Declared first: links detach before the programs are unloaded.
    links: Vec<OwnedFd>,
    obj: libbpf_rs::Object,
}

impl VlanPort {
    /// Loads the programs for the tag with control information `tci`
    /// (priority << 13 | VLAN id).
    pub fn load(tci: u16) -> Result<VlanPort, BpfError> {
        let obj = load(PROGRAM, bpf_object!("vlan_port"), |_| Ok(()))?;
        map(&obj, "vlan_config")
            .update(
                &0u32.to_ne_bytes(),
                &(tci as u32).to_ne_bytes(),
                MapFlags::ANY,
            )
            .map_err(|source| BpfError::Map {
                what: "configuring the lab's VLAN ports",
                source,
            })?;
        Ok(VlanPort {
            links: Vec::new(),
            obj,
        })
    }

    /// Attaches both programs (tcx ingress and egress) to `ifindex`.
    pub fn attach(&mut self, ifindex: i32, ifname: &str) -> Result<(), BpfError> {
        for (name, attach_type) in [
            ("lr_vlan_ingress", libbpf_sys::BPF_TCX_INGRESS),
            ("lr_vlan_egress", libbpf_sys::BPF_TCX_EGRESS),
        ] {
            let prog = self
                .obj
                .progs()
                .find(|p| p.name() == name)
                .expect("vlan_port.bpf.c defines both programs");
            let opts = libbpf_sys::bpf_link_create_opts {
                sz: std::mem::size_of::<libbpf_sys::bpf_link_create_opts>() as libbpf_sys::size_t,
                ..Default::default()
            };
            // SAFETY: opts is a valid, sized bpf_link_create_opts that
            // outlives the call; the other arguments are plain integers.
            let rc = unsafe {
                libbpf_sys::bpf_link_create(prog.as_fd().as_raw_fd(), ifindex, attach_type, &opts)
            };
            if rc < 0 {
                return Err(BpfError::Attach {
                    program: PROGRAM,
                    ifname: ifname.to_string(),
                    source: libbpf_rs::Error::from_raw_os_error(-rc),
                });
            }
            // SAFETY: rc is a fresh link file descriptor that nobody else owns.
            self.links.push(unsafe { OwnedFd::from_raw_fd(rc) });
        }
        Ok(())
    }
}

impl std::fmt::Debug for VlanPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "VlanPort({} links)", self.links.len())
    }
}
