//! What the kernel did with the in-kernel generator's frames: taken by the
//! driver, refused because its ring was full, or refused outright (see
//! `bpf/xdp_tx_watch.bpf.c`). The generator's own count is of frames it
//! *returned* XDP_TX for; only this says which of them left.
//!
//! One [`TxWatch`] is attached for the life of a transmitter; each
//! generator thread registers itself with [`TxWatch::start`] before its
//! trial and reads its tally with [`TxWatch::finish`] after it.

use crate::{bpf_object, load, map, BpfError};
use libbpf_rs::{Link, MapCore, MapFlags, Object};

/// Mirrors `struct tx_tally`.
#[repr(C)]
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
struct Tally {
    ifindex: u32,
    last_err: i32,
    sent: u64,
    ring_full: u64,
    refused: u64,
}
const _: () = assert!(std::mem::size_of::<Tally>() == 32);

/// One generator thread's frames, as the kernel reports them.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct TxTally {
    /// Taken by the driver (on a veth: queued on the peer's receive ring).
    pub sent: u64,
    /// Refused by the driver because its ring was full (on a veth: the
    /// peer's receive ring, i.e. the receiving device's input queue).
    pub ring_full: u64,
    /// Refused outright: the device cannot take XDP frames now (no
    /// ndo_xdp_xmit, a veth peer without NAPI, frame above the MTU).
    pub refused: u64,
    /// The last error the kernel gave (negative errno; 0: none).
    pub last_err: i32,
}

/// The attached tracepoint programs.
pub struct TxWatch {
    obj: Object,
    _links: Vec<Link>,
}

impl TxWatch {
    /// Loads and attaches the watch (needs BTF and tp_btf: kernel 5.5+).
    pub fn attach() -> Result<TxWatch, BpfError> {
        let obj = load("xdp_tx_watch", bpf_object!("xdp_tx_watch"), |_| Ok(()))?;
        let mut links = Vec::new();
        for prog in obj.progs_mut() {
            let link = prog.attach().map_err(|source| BpfError::Map {
                what: "attaching the XDP transmit watch to the xdp tracepoints",
                source,
            })?;
            links.push(link);
        }
        Ok(TxWatch { obj, _links: links })
    }

    /// Starts counting the calling thread's frames out of `ifindex` from zero.
    pub fn start(&self, ifindex: u32) -> Result<(), BpfError> {
        let tally = Tally {
            ifindex,
            ..Tally::default()
        };
        map(&self.obj, "tx_tally")
            .update(
                &current_tid().to_ne_bytes(),
                crate::as_bytes(&tally),
                MapFlags::ANY,
            )
            .map_err(|source| BpfError::Map {
                what: "registering a generator thread with the transmit watch",
                source,
            })
    }

    /// The calling thread's tally since [`TxWatch::start`]; stops counting it.
    pub fn finish(&self) -> Result<TxTally, BpfError> {
        let m = map(&self.obj, "tx_tally");
        let key = current_tid().to_ne_bytes();
        let v = m
            .lookup(&key, MapFlags::ANY)
            .map_err(|source| BpfError::Map {
                what: "reading the transmit watch",
                source,
            })?
            .unwrap_or_default();
        let _ = m.delete(&key);
        let word = |i: usize| {
            v.get(i..i + 8)
                .map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        };
        Ok(TxTally {
            last_err: v
                .get(4..8)
                .map_or(0, |b| i32::from_ne_bytes(b.try_into().expect("4 bytes"))),
            sent: word(8),
            ring_full: word(16),
            refused: word(24),
        })
    }
}

fn current_tid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}
