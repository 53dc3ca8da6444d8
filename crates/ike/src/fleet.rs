//! Many emulated VPN peers from one thread: the initiators of `linerate
//! tunnels` and of `--tunnels N`. Each peer has its own outer address, its
//! own IKE SA and its own CHILD_SA; all of them share one event loop and a
//! pair of sockets (500 and 4500), so thousands of tunnels cost no thread
//! each.
//!
//! API CONTRACT (written before the implementation so that the command
//! and the protocol can be built in parallel): the signatures below are
//! what `linerate-session` calls. The implementation may add items but
//! should keep these.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use linerate_esp::EspSuite;

use crate::error::IkeError;
use crate::proposal::IkeProposals;
use crate::sa::ChildSa;
use crate::session::{Event, Ports, Psk, Retransmit};
use crate::wire::{Identity, TrafficSelector};

/// One emulated peer.
#[derive(Debug, Clone)]
pub struct Peer {
    /// Its outer address: the source of its IKE and ESP in UDP.
    pub local: Ipv4Addr,
    /// IDi; `None` sends `local` as an IPv4 address identity.
    pub local_id: Option<Identity>,
    /// The network this peer protects (its TSi): its share of the test
    /// network behind linerate.
    pub local_ts: TrafficSelector,
}

/// What every peer negotiates with the one gateway, and how fast.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub gateway: Ipv4Addr,
    pub gateway_ports: Ports,
    /// The ports the fleet binds (on every peer address, or on the
    /// wildcard address with the source chosen per datagram).
    pub local_ports: Ports,
    /// IDr: when set, sent, and the gateway must identify as it.
    pub remote_id: Option<Identity>,
    pub psk: Psk,
    pub ike: IkeProposals,
    pub esp: EspSuite,
    /// The gateway's protected network (TSr), the same for every peer.
    pub remote_ts: TrafficSelector,
    pub retransmit: Retransmit,
    /// As `Config::force_encap`: ESP in UDP even without a NAT.
    pub force_encap: bool,
    pub peers: Vec<Peer>,
    /// New handshakes (IKE_SA_INIT sent) per second; `None`: as fast as
    /// `window` allows.
    pub attempt_rate: Option<f64>,
    /// Handshakes in flight at most (at least 1).
    pub window: usize,
}

/// How one peer's setup ended.
#[derive(Debug)]
pub struct Setup {
    /// Index into `FleetConfig::peers`.
    pub peer: usize,
    /// When its first IKE_SA_INIT was sent.
    pub started: Instant,
    /// From that moment until the CHILD_SA was installed (IKE_AUTH's
    /// answer verified), or why it failed (the gateway's notify named).
    pub outcome: Result<Duration, IkeError>,
}

/// Something that happened to one peer's tunnel after it was up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerEvent {
    pub peer: usize,
    pub event: Event,
}

/// The peers' IKE state, driven by one thread.
pub struct Fleet {
    _private: (),
}

impl Fleet {
    /// Binds the fleet's sockets in the calling thread's network namespace
    /// (the peers' addresses must be local there, or routed to it with
    /// IP_FREEBIND/IP_TRANSPARENT as the implementation chooses).
    pub fn bind(config: FleetConfig) -> Result<Fleet, IkeError> {
        let _ = config;
        todo!("ike::fleet is being implemented")
    }

    /// Starts every peer's handshake at `attempt_rate`, at most `window`
    /// in flight, and drives them until each one is established or has
    /// failed; `on_setup` is called as each ends (progress, time to first
    /// packet). Answers the gateway's requests on established tunnels
    /// meanwhile. Returns one `Setup` per peer, in peer order.
    pub fn bring_up(&mut self, on_setup: &mut dyn FnMut(&Setup)) -> Vec<Setup> {
        let _ = on_setup;
        todo!("ike::fleet is being implemented")
    }

    /// The peer's CHILD_SA (the newest after a rekey), if it is up.
    pub fn child(&self, peer: usize) -> Option<&ChildSa> {
        let _ = peer;
        todo!("ike::fleet is being implemented")
    }

    /// How many tunnels are up now.
    pub fn established(&self) -> usize {
        todo!("ike::fleet is being implemented")
    }

    /// Waits up to `timeout` for the gateway's requests to any peer,
    /// answers them (liveness, deletes, rekeys) and returns what happened.
    pub fn poll(&mut self, timeout: Duration) -> Vec<PeerEvent> {
        let _ = timeout;
        todo!("ike::fleet is being implemented")
    }

    /// Starts a CREATE_CHILD_SA rekey of the peer's CHILD_SA; `poll`
    /// reports its end (the new CHILD_SA is then `child(peer)`).
    pub fn rekey_child(&mut self, peer: usize) -> Result<(), IkeError> {
        let _ = peer;
        todo!("ike::fleet is being implemented")
    }

    /// Deletes every IKE SA (and with it its CHILD_SA), waiting for the
    /// gateway's answers with the usual retransmission, all in parallel.
    pub fn delete_all(&mut self) {
        todo!("ike::fleet is being implemented")
    }
}

impl Drop for Fleet {
    /// Deletes what is still up, so that no tunnel outlives the run.
    fn drop(&mut self) {}
}
