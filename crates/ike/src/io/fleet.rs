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
//!
//! # How
//!
//! Every peer is the sans-IO initiator of `initiator.rs` (a few
//! hundred bytes while it negotiates, about 1 KiB of keys once up; no
//! thread, no buffer of its own). One thread drives them all: it waits
//! in `poll(2)` on the two sockets and on the earliest deadline of a
//! timer heap (retransmissions with back-off, NAT keepalives, the next
//! attempt at `attempt_rate`), and hands each datagram to the peer whose
//! IKE SA it names (the initiator's SPI, ours, is the key).
//!
//! The sockets are bound once, to the wildcard address on 500 and 4500,
//! with `IP_PKTINFO`: each datagram leaves with its peer's address as the
//! source (`ipi_spec_dst`, chosen per `sendmsg`), and the destination of
//! each one received is known. The alternative, a socket per address
//! with `IP_FREEBIND`, costs two file descriptors per peer (20,000 for
//! 10,000 peers, above the usual limit of 1,024) and a `poll` set as
//! large. The peers' addresses must therefore be local in the namespace
//! (on an interface, as `ip addr add` puts them, or a routed /16 on `lo`):
//! [`Fleet::bind`] checks each and names the first that is not.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand_core::OsRng;

use nix::libc;
use nix::sys::socket::{setsockopt, sockopt};

use crate::config::Ports;
pub use crate::config::{FleetConfig, Peer};
use crate::crypto::DhGroup;
use crate::error::IkeError;
use crate::event::Event;
use crate::ike_sa::receiver_spi;
use crate::initiator::{Initiator, Local, Shared};
use crate::io::udp::{recv_to, send_from, wait_readable};
use crate::sa::{ChildInstaller, ChildSa};
use crate::tunnel::{Outbox, Output, NON_ESP_MARKER};
use crate::wire::Header;

/// How often a setup loop looks at its stop flag.
const STOP_CHECK: Duration = Duration::from_millis(100);

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
    /// The CHILD_SA just installed (a copy of `Fleet::child(peer)`, for a
    /// caller that starts its traffic from `on_setup`, while the fleet is
    /// still busy with the others); None when the setup failed.
    pub child: Option<ChildSa>,
}

/// Something that happened to one peer's tunnel after it was up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerEvent {
    pub peer: usize,
    pub event: Event,
}

/// Where a peer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    NotStarted,
    Handshake,
    Up,
    /// Failed, deleted, or deleting.
    Down,
}

struct Slot {
    machine: Option<Initiator>,
    state: State,
    /// The deadline this peer has in the timer heap.
    scheduled: Option<Instant>,
    /// Our Delete is in flight.
    deleting: bool,
    /// Our SPIs in `by_spi` for this peer beside the first: its IKE SA's
    /// after rekeys.
    rekeyed_spis: Vec<u64>,
}

/// After the IKE SA of `peer` was rekeyed: the gateway's messages name
/// the new SA's SPI from now on, and the old SA's until it is deleted; the
/// SPIs of SAs rekeyed before that are gone.
fn follow_ike_rekey(by_spi: &mut HashMap<u64, usize>, slot: &mut Slot, peer: usize) {
    let Some(machine) = slot.machine.as_ref() else {
        return;
    };
    let Some(t) = machine.tunnel() else {
        return;
    };
    let (new, old) = t.own_spis();
    let first = machine.spi_i();
    for spi in std::mem::take(&mut slot.rekeyed_spis) {
        if Some(spi) == old {
            slot.rekeyed_spis.push(spi);
        } else {
            by_spi.remove(&spi);
        }
    }
    if old != Some(first) {
        by_spi.remove(&first);
    }
    by_spi.insert(new, peer);
    slot.rekeyed_spis.push(new);
}

/// The peers' IKE state, driven by one thread.
pub struct Fleet {
    shared: Arc<Shared>,
    peers: Vec<Peer>,
    local_ports: Ports,
    ike: UdpSocket,
    natt: UdpSocket,
    slots: Vec<Slot>,
    by_spi: HashMap<u64, usize>,
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    out: Outbox,
    events: Vec<PeerEvent>,
    /// Why each `Event::RekeyFailed` in `events` failed, in order.
    failed_rekeys: Vec<(usize, IkeError)>,
    /// The reasons of the `Event::RekeyFailed` the last `poll` returned,
    /// for `rekey_error`.
    returned_failures: Vec<(usize, IkeError)>,
    attempt_rate: Option<f64>,
    window: usize,
    in_flight: usize,
    deleting: usize,
    pfs: Option<DhGroup>,
    /// Setups that ended and were not yet returned by `bring_up`.
    setups: Vec<Option<Setup>>,
    buf: Vec<u8>,
    cmsg: Vec<u8>,
    /// Where a rekey's new CHILD_SA goes before the gateway may use it.
    installer: Option<ChildInstaller>,
    /// The peers whose Delete ended without an answer (`delete_all`).
    unanswered_deletes: Vec<usize>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("gateway", &self.shared.gateway)
            .field("peers", &self.peers.len())
            .field("established", &self.established())
            .finish_non_exhaustive()
    }
}

/// Binds the wildcard address on `port` with IP_PKTINFO and a large
/// receive buffer.
fn wildcard_socket(port: u16) -> Result<UdpSocket, IkeError> {
    let socket = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, port))
        .map_err(|e| IkeError::io(format!("cannot bind UDP 0.0.0.0:{port}"), e))?;
    setsockopt(&socket, sockopt::Ipv4PacketInfo, &true).map_err(|e| {
        IkeError::io(
            format!("cannot set IP_PKTINFO on UDP port {port}"),
            io::Error::from(e),
        )
    })?;
    // Bursts of answers from a fast gateway: room for thousands.
    let size = 8 << 20;
    if setsockopt(&socket, sockopt::RcvBufForce, &size).is_err() {
        let _ = setsockopt(&socket, sockopt::RcvBuf, &size);
    }
    let _ = setsockopt(&socket, sockopt::SndBuf, &(4 << 20));
    Ok(socket)
}

impl Fleet {
    /// Binds the fleet's sockets in the calling thread's network namespace
    /// (the peers' addresses must be local there, or routed to it with
    /// IP_FREEBIND/IP_TRANSPARENT as the implementation chooses).
    ///
    /// This implementation binds the wildcard address with IP_PKTINFO
    /// (see the module's documentation): every peer address must be local
    /// in the namespace, which is checked here.
    pub fn bind(config: FleetConfig) -> Result<Fleet, IkeError> {
        let mut seen = HashSet::with_capacity(config.peers.len());
        for peer in &config.peers {
            if !seen.insert(peer.local) {
                return Err(IkeError::Io {
                    what: format!("peer address {} is given twice", peer.local),
                    error: io::Error::from(io::ErrorKind::InvalidInput),
                    hint: "; every peer needs an address of its own",
                });
            }
            UdpSocket::bind((peer.local, 0)).map_err(|e| {
                IkeError::io(format!("cannot use the peer address {}", peer.local), e)
            })?;
        }
        let ike = wildcard_socket(config.local_ports.ike)?;
        let natt = wildcard_socket(config.local_ports.natt)?;
        // The fleet never reads ESP: the peers' ESP is the data path's,
        // and dropped in the kernel rather than queued here.
        crate::io::esp_filter::ignore_esp(&natt).map_err(|e| {
            IkeError::io(
                format!("cannot filter ESP off UDP port {}", config.local_ports.natt),
                e,
            )
        })?;
        let port = |s: &UdpSocket, or: u16| s.local_addr().map_or(or, |a| a.port());
        let local_ports = Ports {
            ike: port(&ike, config.local_ports.ike),
            natt: port(&natt, config.local_ports.natt),
        };
        let shared = Arc::new(Shared {
            gateway: config.gateway,
            gateway_ports: config.gateway_ports,
            remote_id: config.remote_id,
            psk: config.psk,
            ike: config.ike,
            esp: config.esp,
            remote_ts: config.remote_ts,
            retransmit: config.retransmit,
            force_encap: config.force_encap,
        });
        let n = config.peers.len();
        let slots = (0..n)
            .map(|_| Slot {
                machine: None,
                state: State::NotStarted,
                scheduled: None,
                deleting: false,
                rekeyed_spis: Vec::new(),
            })
            .collect();
        Ok(Fleet {
            shared,
            peers: config.peers,
            local_ports,
            ike,
            natt,
            slots,
            by_spi: HashMap::with_capacity(n),
            timers: BinaryHeap::new(),
            out: Outbox::default(),
            events: Vec::new(),
            failed_rekeys: Vec::new(),
            returned_failures: Vec::new(),
            attempt_rate: config.attempt_rate.filter(|r| *r > 0.0 && r.is_finite()),
            window: config.window.max(1),
            in_flight: 0,
            deleting: 0,
            pfs: None,
            setups: (0..n).map(|_| None).collect(),
            buf: vec![0; 65536],
            cmsg: nix::cmsg_space!(libc::in_pktinfo),
            installer: None,
            unanswered_deletes: Vec::new(),
        })
    }

    /// Has each rekey's new CHILD_SA installed by `installer` (with the
    /// peer's index) before the datagram that lets the gateway use it
    /// leaves (see [`ChildInstaller`]); [`Event::ChildRekeyed`] still
    /// reports the rekey, after.
    pub fn install_new_children(&mut self, installer: ChildInstaller) {
        self.installer = Some(installer);
    }

    /// The ports the fleet's sockets are bound to (500 and 4500 unless
    /// configured otherwise; the kernel's choice for 0).
    pub fn local_ports(&self) -> Ports {
        self.local_ports
    }

    /// The Diffie-Hellman group of the rekeys the fleet starts (PFS), as
    /// the gateway's ESP proposal names it; `None` (the default): none.
    pub fn set_rekey_pfs(&mut self, group: Option<DhGroup>) {
        self.pfs = group;
        for slot in &mut self.slots {
            if let Some(t) = slot.machine.as_mut().and_then(|m| m.tunnel_mut()) {
                t.pfs = group;
            }
        }
    }

    /// Sends the datagrams the machine of `peer` produced, from the
    /// peer's address.
    fn send_transmits(&mut self, peer: usize) {
        let local = self.peers[peer].local;
        let gateway = self.shared.gateway;
        let ports = self.shared.gateway_ports;
        while let Some(t) = self.out.transmits.pop_front() {
            let (socket, port) = if t.natt {
                (&self.natt, ports.natt)
            } else {
                (&self.ike, ports.ike)
            };
            // A datagram the kernel did not take is retransmitted like a
            // lost one.
            let _ = send_from(socket, &t.data, local, SocketAddrV4::new(gateway, port));
        }
    }

    /// Takes the outputs of the machine of `peer`, sends what it produced
    /// (a new CHILD_SA installed before the answer or the Delete that
    /// lets the gateway use it leaves) and puts its next deadline in the
    /// timer heap.
    fn after(&mut self, peer: usize, now: Instant, on_setup: &mut dyn FnMut(&Setup)) {
        let slot = &mut self.slots[peer];
        while let Some(o) = self.out.outputs.pop_front() {
            match o {
                Output::Established => {
                    let started = slot
                        .machine
                        .as_ref()
                        .and_then(|m| m.started())
                        .unwrap_or(now);
                    if let Some(t) = slot.machine.as_mut().and_then(|m| m.tunnel_mut()) {
                        t.pfs = self.pfs;
                    }
                    slot.state = State::Up;
                    self.in_flight = self.in_flight.saturating_sub(1);
                    let setup = Setup {
                        peer,
                        started,
                        outcome: Ok(now.saturating_duration_since(started)),
                        child: slot.machine.as_ref().and_then(|m| m.child()).cloned(),
                    };
                    on_setup(&setup);
                    self.setups[peer] = Some(setup);
                }
                Output::Failed(e) => {
                    let started = slot
                        .machine
                        .as_ref()
                        .and_then(|m| m.started())
                        .unwrap_or(now);
                    if slot.state == State::Handshake {
                        self.in_flight = self.in_flight.saturating_sub(1);
                        let setup = Setup {
                            peer,
                            started,
                            outcome: Err(e),
                            child: None,
                        };
                        on_setup(&setup);
                        self.setups[peer] = Some(setup);
                    }
                    // A handshake deleted while its IKE_AUTH was
                    // unanswered, that then failed: nothing is left.
                    if slot.deleting {
                        slot.deleting = false;
                        self.deleting = self.deleting.saturating_sub(1);
                    }
                    slot.state = State::Down;
                }
                Output::Event(event) => {
                    if event == Event::IkeRekeyed {
                        follow_ike_rekey(&mut self.by_spi, slot, peer);
                    }
                    if event == Event::ChildRekeyed {
                        let child = slot.machine.as_ref().and_then(|m| m.child());
                        if let (Some(install), Some(child)) = (self.installer.as_mut(), child) {
                            install(peer, child);
                        }
                    }
                    if event == Event::IkeDeleted {
                        slot.state = State::Down;
                        if slot.deleting {
                            slot.deleting = false;
                            self.deleting = self.deleting.saturating_sub(1);
                        }
                    }
                    self.events.push(PeerEvent { peer, event });
                }
                Output::Deleted(outcome) => {
                    slot.state = State::Down;
                    if slot.deleting {
                        slot.deleting = false;
                        self.deleting = self.deleting.saturating_sub(1);
                        if outcome.is_err() {
                            self.unanswered_deletes.push(peer);
                        }
                    }
                }
                Output::RekeyFailed(e) => {
                    self.failed_rekeys.push((peer, e));
                    self.events.push(PeerEvent {
                        peer,
                        event: Event::RekeyFailed,
                    });
                }
            }
        }
        self.send_transmits(peer);
        let slot = &mut self.slots[peer];
        let next = slot.machine.as_ref().and_then(|m| m.next_deadline());
        if next != slot.scheduled {
            slot.scheduled = next;
            if let Some(at) = next {
                self.timers.push(Reverse((at, peer)));
            }
        }
    }

    /// Starts the handshake of `peer`.
    fn start(&mut self, peer: usize, now: Instant, on_setup: &mut dyn FnMut(&Setup)) {
        let p = &self.peers[peer];
        let local = Local {
            addr: p.local,
            ports: self.local_ports,
            id: p.local_id.clone(),
            ts: p.local_ts,
        };
        let mut machine = Initiator::new(Arc::clone(&self.shared), local.clone(), Box::new(OsRng));
        while self.by_spi.contains_key(&machine.spi_i()) {
            machine = Initiator::new(Arc::clone(&self.shared), local.clone(), Box::new(OsRng));
        }
        self.by_spi.insert(machine.spi_i(), peer);
        // The key pair first: the setup's clock starts as the request goes.
        machine.prepare();
        let now = now.max(Instant::now());
        machine.start(now, &mut self.out);
        let slot = &mut self.slots[peer];
        slot.machine = Some(machine);
        slot.state = State::Handshake;
        self.in_flight += 1;
        self.after(peer, now, on_setup);
    }

    /// Receives every datagram waiting on both sockets and hands each to
    /// its peer.
    fn receive(&mut self, on_setup: &mut dyn FnMut(&Setup)) {
        for natt in [false, true] {
            loop {
                let socket = if natt { &self.natt } else { &self.ike };
                let got = match recv_to(socket, &mut self.buf, &mut self.cmsg) {
                    Ok(Some(g)) => g,
                    Ok(None) | Err(_) => break,
                };
                let (n, from, _to) = got;
                if *from.ip() != self.shared.gateway {
                    continue;
                }
                let mut data = &self.buf[..n];
                if natt {
                    // IKE after the non-ESP marker; keepalives and ESP
                    // (the data path's) are not IKE's.
                    if n <= 4 || data[..4] != NON_ESP_MARKER {
                        continue;
                    }
                    data = &data[4..];
                }
                let Ok(header) = Header::parse(data) else {
                    continue;
                };
                let Some(&peer) = self.by_spi.get(&receiver_spi(&header)) else {
                    continue;
                };
                let Some(machine) = self.slots[peer].machine.as_mut() else {
                    continue;
                };
                let data = data.to_vec();
                let now = Instant::now();
                machine.handle(&data, now, &mut self.out);
                self.after(peer, now, on_setup);
            }
        }
    }

    /// Runs the timers that are due.
    fn fire_timers(&mut self, now: Instant, on_setup: &mut dyn FnMut(&Setup)) {
        while let Some(Reverse((at, peer))) = self.timers.peek().copied() {
            if at > now {
                break;
            }
            self.timers.pop();
            let slot = &mut self.slots[peer];
            if slot.scheduled != Some(at) {
                continue;
            }
            slot.scheduled = None;
            if let Some(m) = slot.machine.as_mut() {
                m.handle_timeout(now, &mut self.out);
            }
            self.after(peer, now, on_setup);
        }
    }

    /// One turn of the loop: waits for a datagram until `until` (or the
    /// first timer), then handles what came and what is due.
    fn turn(&mut self, until: Option<Instant>, on_setup: &mut dyn FnMut(&Setup)) {
        let timer = self.timers.peek().map(|Reverse((at, _))| *at);
        let wake = match (timer, until) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if wake.is_none_or(|w| w > Instant::now()) {
            wait_readable([&self.ike, &self.natt], wake);
        }
        self.receive(on_setup);
        self.fire_timers(Instant::now(), on_setup);
    }

    /// Starts every peer's handshake at `attempt_rate`, at most `window`
    /// in flight, and drives them until each one is established or has
    /// failed; `on_setup` is called as each ends (progress, time to first
    /// packet). Answers the gateway's requests on established tunnels
    /// meanwhile. Returns one `Setup` per peer, in peer order.
    ///
    /// Peers started by an earlier call are not started again (and have
    /// no `Setup` in a later call's result).
    pub fn bring_up(&mut self, on_setup: &mut dyn FnMut(&Setup)) -> Vec<Setup> {
        self.bring_up_until(&AtomicBool::new(false), on_setup)
    }

    /// [`bring_up`](Self::bring_up) that ends early once `stop` is set (a
    /// signal): no new attempt starts, and the peers whose setup has not
    /// ended have no `Setup` in the result (their half-open handshakes are
    /// abandoned; tunnels already up stay up for the caller to delete).
    /// `stop` is looked at between turns of the loop, at least every
    /// 100 ms.
    pub fn bring_up_until(
        &mut self,
        stop: &AtomicBool,
        on_setup: &mut dyn FnMut(&Setup),
    ) -> Vec<Setup> {
        self.bring_up_next_until(usize::MAX, stop, on_setup)
    }

    /// [`bring_up_until`](Self::bring_up_until) for the next `count` peers
    /// not yet started (in peer order) only: a step of `linerate tunnels
    /// --capacity`, the tunnels of earlier steps held (their gateway's
    /// requests answered) meanwhile.
    pub fn bring_up_next_until(
        &mut self,
        count: usize,
        stop: &AtomicBool,
        on_setup: &mut dyn FnMut(&Setup),
    ) -> Vec<Setup> {
        let todo: Vec<usize> = (0..self.slots.len())
            .filter(|&i| self.slots[i].state == State::NotStarted)
            .take(count)
            .collect();
        let first = Instant::now();
        let mut next = 0;
        loop {
            let now = Instant::now();
            // Attempts due at the rate, while the window has room.
            let mut due = None;
            while next < todo.len() && self.in_flight < self.window {
                if let Some(rate) = self.attempt_rate {
                    let at = first + Duration::from_secs_f64(next as f64 / rate);
                    if at > now {
                        due = Some(at);
                        break;
                    }
                }
                self.start(todo[next], now, on_setup);
                next += 1;
            }
            if (next == todo.len() && self.in_flight == 0) || stop.load(Ordering::Relaxed) {
                break;
            }
            let until = if self.in_flight < self.window {
                due
            } else {
                None
            };
            // Woken at least every STOP_CHECK to look at `stop`.
            let check = Instant::now() + STOP_CHECK;
            self.turn(Some(until.map_or(check, |u| u.min(check))), on_setup);
        }
        todo.iter().filter_map(|&i| self.setups[i].take()).collect()
    }

    /// The peer's CHILD_SA (the newest after a rekey), if it is up.
    pub fn child(&self, peer: usize) -> Option<&ChildSa> {
        self.slots.get(peer)?.machine.as_ref()?.child()
    }

    /// How many peers the fleet emulates (up or not).
    pub fn peers(&self) -> usize {
        self.peers.len()
    }

    /// How many tunnels are up now.
    pub fn established(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| s.machine.as_ref().is_some_and(|m| m.child().is_some()))
            .count()
    }

    /// Waits up to `timeout` for the gateway's requests to any peer,
    /// answers them and returns what happened.
    pub fn poll(&mut self, timeout: Duration) -> Vec<PeerEvent> {
        let deadline = Instant::now() + timeout;
        let mut ignore = |_: &Setup| {};
        loop {
            if !self.events.is_empty() {
                // What else is already waiting, without blocking.
                self.receive(&mut ignore);
                self.returned_failures = std::mem::take(&mut self.failed_rekeys);
                return std::mem::take(&mut self.events);
            }
            if Instant::now() >= deadline {
                return Vec::new();
            }
            self.turn(Some(deadline), &mut ignore);
        }
    }

    /// Why a rekey of `peer` failed, for an `Event::RekeyFailed` the last
    /// [`poll`](Self::poll) returned: the gateway's notify
    /// (`NO_PROPOSAL_CHOSEN`, `TS_UNACCEPTABLE`, ...) or no answer after
    /// the tries. Each reason is given once, in the order of the events;
    /// those not asked for are dropped by the next `poll` that returns
    /// events.
    pub fn rekey_error(&mut self, peer: usize) -> Option<IkeError> {
        let at = self
            .returned_failures
            .iter()
            .position(|(p, _)| *p == peer)?;
        Some(self.returned_failures.remove(at).1)
    }

    /// Starts a CREATE_CHILD_SA rekey of the peer's CHILD_SA; `poll`
    /// reports its end (the new CHILD_SA is then `child(peer)`).
    pub fn rekey_child(&mut self, peer: usize) -> Result<(), IkeError> {
        let gateway = self.shared.gateway;
        let Some(machine) = self.slots.get_mut(peer).and_then(|s| s.machine.as_mut()) else {
            return Err(IkeError::Deleted { gateway });
        };
        let now = Instant::now();
        machine.rekey_child(now, &mut self.out)?;
        self.after(peer, now, &mut |_| {});
        Ok(())
    }

    /// Starts a CREATE_CHILD_SA rekey of the peer's IKE SA (RFC 7296
    /// §2.18); `poll` reports its end (`Event::IkeRekeyed`, then the old
    /// IKE SA is deleted; the CHILD_SA and its keys stay).
    pub fn rekey_ike(&mut self, peer: usize) -> Result<(), IkeError> {
        let gateway = self.shared.gateway;
        let Some(machine) = self.slots.get_mut(peer).and_then(|s| s.machine.as_mut()) else {
            return Err(IkeError::Deleted { gateway });
        };
        let now = Instant::now();
        machine.rekey_ike(now, &mut self.out)?;
        self.after(peer, now, &mut |_| {});
        Ok(())
    }

    /// Deletes every IKE SA (and with it its CHILD_SA), waiting for the
    /// gateway's answers with the usual retransmission. The Deletes go
    /// through the set-up window: `window` in flight at most, the next
    /// sent as one ends, so a gateway's receive buffer does not overflow
    /// with thousands at once (which left tunnels up, unreported). The
    /// Deletes no answer ended are returned: those tunnels may still be up
    /// at the gateway.
    pub fn delete_all(&mut self) -> Deletes {
        let mut ignore = |_: &Setup| {};
        let mut todo = std::collections::VecDeque::new();
        for peer in 0..self.slots.len() {
            let slot = &mut self.slots[peer];
            let Some(m) = slot.machine.as_ref() else {
                continue;
            };
            if slot.state == State::Handshake {
                self.in_flight = self.in_flight.saturating_sub(1);
            }
            if m.ike_up() || slot.state == State::Handshake {
                todo.push_back(peer);
            }
            slot.state = State::Down;
        }
        let asked = todo.len();
        self.unanswered_deletes.clear();
        loop {
            while self.deleting < self.window {
                let Some(peer) = todo.pop_front() else {
                    break;
                };
                let now = Instant::now();
                let slot = &mut self.slots[peer];
                if let Some(m) = slot.machine.as_mut() {
                    m.delete(now, &mut self.out);
                    // Up, or its IKE_AUTH unanswered (the gateway may
                    // bring the tunnel up when it answers): waited for
                    // until deleted.
                    if m.deleting() {
                        slot.deleting = true;
                        self.deleting += 1;
                    }
                }
                self.after(peer, now, &mut ignore);
            }
            // Each Delete ends answered, crossed or out of tries.
            if self.deleting == 0 {
                if todo.is_empty() {
                    break;
                }
                continue;
            }
            if self.timers.is_empty() {
                break;
            }
            self.turn(None, &mut ignore);
        }
        Deletes {
            asked,
            unanswered: std::mem::take(&mut self.unanswered_deletes),
        }
    }
}

/// How [`Fleet::delete_all`] ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Deletes {
    /// Tunnels (and handshakes) it deleted.
    pub asked: usize,
    /// The peers whose Delete no answer ended after the retries: their
    /// tunnels may still be up at the gateway.
    pub unanswered: Vec<usize>,
}

impl Drop for Fleet {
    /// Deletes what is still up, so that no tunnel outlives the run (the
    /// Delete sent once, without waiting for the answers).
    fn drop(&mut self) {
        for peer in 0..self.slots.len() {
            let Some(m) = self.slots[peer].machine.as_mut() else {
                continue;
            };
            if m.ike_up() {
                m.delete_once(&mut self.out);
                self.send_transmits(peer);
            }
        }
    }
}

/// For the tests in `fleet_tests.rs`.
#[cfg(test)]
impl Fleet {
    /// At most `window` attempts (and Deletes) in flight.
    pub(crate) fn set_window(&mut self, window: usize) {
        self.window = window;
    }

    /// The tunnel of `peer`, once its IKE SA is up.
    pub(crate) fn tunnel_mut(&mut self, peer: usize) -> Option<&mut crate::tunnel::Tunnel> {
        self.slots[peer].machine.as_mut()?.tunnel_mut()
    }
}
