//! An established IKE SA with its CHILD_SA, without sockets (sans-IO):
//! datagrams and the time go in, datagrams to send and what happened come
//! out. The same for both roles: the initiator's handshake
//! ([`crate::initiator`]) and the responder's ([`crate::responder`]) end
//! in a [`Tunnel`], which answers the peer's requests (liveness checks,
//! deletes, CREATE_CHILD_SA rekeys), retransmits its own (Delete, rekey)
//! with back-off and sends NAT keepalives.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use linerate_esp::{EspSuite, SaKeys};

use crate::config::Retransmit;
use crate::crypto::{child_keys, random_bytes, random_u32, DhGroup, DhPrivate, Rng};
use crate::error::IkeError;
use crate::event::Event;
use crate::ike_rekey::{self, IkeRekeyState};
use crate::ike_sa::IkeSa;
use crate::protect::open;
use crate::sa::ChildSa;
use crate::wire::{
    exchange, notify, protocol, transform, Delete, Header, Message, Notify, Payload, Proposal,
    Transform,
};

/// The four zero bytes before an IKE message on port 4500, where an ESP
/// packet would have its (never zero) SPI.
pub(crate) const NON_ESP_MARKER: [u8; 4] = [0; 4];
/// A NAT keepalive (RFC 3948 §2.3).
pub(crate) const KEEPALIVE: [u8; 1] = [0xff];
/// How often a keepalive is sent while ESP is in UDP.
pub(crate) const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(20);

/// A datagram to send to the peer: on the IKE port (500) or the NAT-T
/// port (4500); `data` is the UDP payload as it goes out (with the
/// non-ESP marker before IKE on 4500).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Transmit {
    pub natt: bool,
    pub data: Vec<u8>,
}

impl Transmit {
    pub(crate) fn ike(natt: bool, message: &[u8]) -> Transmit {
        let data = if natt {
            let mut d = Vec::with_capacity(message.len() + 4);
            d.extend_from_slice(&NON_ESP_MARKER);
            d.extend_from_slice(message);
            d
        } else {
            message.to_vec()
        };
        Transmit { natt, data }
    }
}

/// What a machine reports.
#[derive(Debug)]
pub(crate) enum Output {
    /// The handshake ended with the CHILD_SA installed.
    Established,
    /// The handshake failed (after deleting what the peer had, if it had
    /// anything).
    Failed(IkeError),
    /// The peer did something (answered before it is reported), or a
    /// rekey ended.
    Event(Event),
    /// Our Delete was answered (or crossed the peer's), or got no answer.
    Deleted(Result<(), IkeError>),
    /// Our rekey failed; the old CHILD_SA stays.
    RekeyFailed(IkeError),
}

/// Datagrams to send and outputs, filled by the machines.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    pub transmits: VecDeque<Transmit>,
    pub outputs: VecDeque<Output>,
}

/// A request of ours, sent until answered: after `retransmit.timeout`,
/// then twice as long after each next try.
pub(crate) struct Request {
    pub kind: u8,
    pub id: u32,
    pub transmit: Transmit,
    pub sent: u32,
    pub wait: Duration,
    pub deadline: Instant,
    /// Datagrams from the peer that answered nothing: a peer that speaks
    /// something else is told apart from a silent one.
    pub not_answers: u32,
}

impl Request {
    /// Sends `transmit` now (into `out`) and waits for the answer.
    pub(crate) fn send(
        kind: u8,
        id: u32,
        transmit: Transmit,
        retransmit: Retransmit,
        now: Instant,
        out: &mut Outbox,
    ) -> Request {
        out.transmits.push_back(transmit.clone());
        Request {
            kind,
            id,
            transmit,
            sent: 1,
            wait: retransmit.timeout,
            deadline: now + retransmit.timeout,
            not_answers: 0,
        }
    }

    /// At the deadline: sends again (true), or gives up (false) after
    /// `tries`.
    pub(crate) fn expire(
        &mut self,
        retransmit: Retransmit,
        now: Instant,
        out: &mut Outbox,
    ) -> bool {
        if self.sent >= retransmit.tries.max(1) {
            return false;
        }
        self.sent += 1;
        self.wait = self.wait.saturating_mul(2);
        self.deadline = now + self.wait;
        out.transmits.push_back(self.transmit.clone());
        true
    }

    /// The error once the tries are spent.
    pub(crate) fn no_answer(&self, addr: std::net::SocketAddr) -> IkeError {
        if self.not_answers > 0 {
            IkeError::NoValidAnswer {
                addr,
                tries: self.sent,
                datagrams: self.not_answers,
            }
        } else {
            IkeError::NoAnswer {
                addr,
                tries: self.sent,
            }
        }
    }
}

/// A new inbound ESP SPI (1-255 are reserved, RFC 4303 §2.1).
pub(crate) fn new_esp_spi(rng: Rng<'_>) -> u32 {
    loop {
        let spi = random_u32(rng);
        if spi > 255 {
            break spi;
        }
    }
}

/// The ESP proposal of the suite: one proposal with our inbound SPI, its
/// encryption transform (with the key length), integrity unless AEAD, the
/// Diffie-Hellman group for PFS when given, and no extended sequence
/// numbers.
pub(crate) fn esp_proposal(suite: EspSuite, spi: u32, pfs: Option<DhGroup>) -> Proposal {
    let (encr, bits) = suite.ikev2_encryption();
    // A key length for AES only (RFC 7296 §3.3.5).
    let mut transforms = vec![Transform {
        kind: transform::ENCR,
        id: encr,
        key_length: bits,
    }];
    if let Some(integ) = suite.ikev2_integrity() {
        transforms.push(Transform::new(transform::INTEG, integ));
    }
    if let Some(group) = pfs {
        transforms.push(Transform::new(transform::DH, group.id()));
    }
    transforms.push(Transform::new(transform::ESN, 0));
    Proposal {
        number: 1,
        protocol: protocol::ESP,
        spi: spi.to_be_bytes().to_vec(),
        transforms,
    }
}

/// The peer's SPI if it accepted our ESP proposal as offered.
pub(crate) fn accepted_esp(
    suite: EspSuite,
    pfs: Option<DhGroup>,
    chosen: &[Proposal],
) -> Option<u32> {
    let [p] = chosen else { return None };
    if p.number != 1 || p.protocol != protocol::ESP || p.spi.len() != 4 {
        return None;
    }
    let offered = esp_proposal(suite, 0, pfs).transforms;
    for t in &p.transforms {
        if !offered.contains(t) {
            return None;
        }
    }
    let kinds = |list: &[Transform], kind: u8| list.iter().filter(|t| t.kind == kind).count();
    for kind in [transform::ENCR, transform::INTEG, transform::DH] {
        if kinds(&p.transforms, kind) != kinds(&offered, kind) {
            return None;
        }
    }
    if kinds(&p.transforms, transform::ESN) > 1 {
        return None;
    }
    let spi = u32::from_be_bytes([p.spi[0], p.spi[1], p.spi[2], p.spi[3]]);
    (spi != 0).then_some(spi)
}

/// The proposal of an initiator's SA payload that `suite` (with `pfs`, or
/// any group when the initiator offers one and we were not told) can take:
/// its number, the initiator's SPI and the group it asks for.
pub(crate) fn choose_esp(
    suite: EspSuite,
    proposals: &[Proposal],
) -> Option<(u8, u32, Option<DhGroup>)> {
    for p in proposals {
        if p.protocol != protocol::ESP || p.spi.len() != 4 {
            continue;
        }
        let groups: Vec<Option<DhGroup>> = {
            let named: Vec<u16> = p
                .transforms
                .iter()
                .filter(|t| t.kind == transform::DH && t.id != 0)
                .map(|t| t.id)
                .collect();
            if named.is_empty() {
                vec![None]
            } else {
                named
                    .into_iter()
                    .filter_map(DhGroup::from_id)
                    .map(Some)
                    .collect()
            }
        };
        let (encr, bits) = suite.ikev2_encryption();
        let has = |kind: u8, id: u16, key: Option<u16>| {
            p.transforms
                .iter()
                .any(|t| t.kind == kind && t.id == id && t.key_length == key)
        };
        if !has(transform::ENCR, encr, bits) {
            continue;
        }
        if let Some(integ) = suite.ikev2_integrity() {
            if !has(transform::INTEG, integ, None) {
                continue;
            }
        } else if p
            .transforms
            .iter()
            .any(|t| t.kind == transform::INTEG && t.id != 0)
        {
            // An AEAD suite with integrity is another suite.
            if !p
                .transforms
                .iter()
                .any(|t| t.kind == transform::INTEG && t.id == 0)
            {
                continue;
            }
        }
        let esn_ok =
            !p.transforms.iter().any(|t| t.kind == transform::ESN) || has(transform::ESN, 0, None);
        if !esn_ok {
            continue;
        }
        let Some(group) = groups.first().copied() else {
            continue;
        };
        let spi = u32::from_be_bytes([p.spi[0], p.spi[1], p.spi[2], p.spi[3]]);
        if spi == 0 {
            continue;
        }
        return Some((p.number, spi, group));
    }
    None
}

/// What our request in flight is for.
enum Purpose {
    /// Deleting the IKE SA; `then`: the handshake's failure to report
    /// after (instead of `Deleted`).
    Delete { then: Option<IkeError> },
    /// A CREATE_CHILD_SA rekeying the CHILD_SA.
    Rekey(Box<RekeyState>),
    /// Deleting the old CHILD_SA after a rekey.
    DeleteChild,
    /// A CREATE_CHILD_SA rekeying the IKE SA.
    RekeyIke(Box<IkeRekeyState>),
    /// Deleting the old IKE SA after our rekey of it (sent on the old SA).
    DeleteOldIke,
}

/// Our side of a CHILD_SA rekey, until the answer.
struct RekeyState {
    spi_in: u32,
    nonce: Vec<u8>,
    /// With PFS: our private value and the public one sent.
    dh: Option<(DhPrivate, Vec<u8>)>,
}

/// Where a tunnel's IKE SA and CHILD_SA are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The IKE SA is up, its CHILD_SA is not: before the handshake
    /// installs it (`set_child_up`), or after the peer deleted it.
    IkeUp,
    /// The IKE SA and its CHILD_SA are up.
    ChildUp,
    /// We deleted the IKE SA; our Delete (the request in flight,
    /// `Purpose::Delete`) waits for its answer.
    Deleting,
    /// The IKE SA is gone: the peer deleted it, or our Delete was
    /// answered, got no answer, or was sent once without waiting.
    Down,
}

/// An established IKE SA and its CHILD_SA.
pub(crate) struct Tunnel {
    pub ike: IkeSa,
    pub child: ChildSa,
    /// The ESP suite and the PFS group of rekeys (the ESP proposal's DH
    /// group, if it names one).
    pub esp: EspSuite,
    pub pfs: Option<DhGroup>,
    pub retransmit: Retransmit,
    /// IKE is on port 4500 (with the non-ESP marker).
    pub floated: bool,
    /// Where the peer is, for errors.
    pub peer: std::net::SocketAddr,
    state: State,
    /// Our request in flight: a Delete (while `Deleting`), a rekey, the
    /// Delete of what a rekey replaced.
    request: Option<(Request, Purpose)>,
    /// Our requests waiting for the one in flight (window size 1).
    queued: VecDeque<Purpose>,
    /// The CHILD_SA replaced by a rekey, until its Delete is answered.
    old_child: Option<Box<ChildSa>>,
    /// The IKE SA replaced by a rekey, until its Delete (the peer's, or
    /// ours after our rekey) is answered.
    old_ike: Option<Box<IkeSa>>,
    keepalive_at: Option<Instant>,
}

impl Tunnel {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        ike: IkeSa,
        child: ChildSa,
        esp: EspSuite,
        pfs: Option<DhGroup>,
        retransmit: Retransmit,
        floated: bool,
        peer: std::net::SocketAddr,
        now: Instant,
    ) -> Tunnel {
        let keepalive_at = (child.udp_encap && ike.initiator).then(|| now + KEEPALIVE_INTERVAL);
        Tunnel {
            ike,
            child,
            esp,
            pfs,
            retransmit,
            floated,
            peer,
            state: State::IkeUp,
            request: None,
            queued: VecDeque::new(),
            old_child: None,
            old_ike: None,
            keepalive_at,
        }
    }

    /// The CHILD_SA is up: installed by the handshake, or replaced by a
    /// rekey; not once the IKE SA is deleted.
    pub(crate) fn set_child_up(&mut self) {
        if self.state == State::IkeUp {
            self.state = State::ChildUp;
        }
    }

    pub(crate) fn ike_up(&self) -> bool {
        matches!(self.state, State::IkeUp | State::ChildUp)
    }

    pub(crate) fn child_up(&self) -> bool {
        self.state == State::ChildUp
    }

    /// Whether its Delete of the IKE SA waits for the answer.
    pub(crate) fn deleting(&self) -> bool {
        self.state == State::Deleting
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        let r = self.request.as_ref().map(|(r, _)| r.deadline);
        match (r, self.keepalive_at.filter(|_| self.ike_up())) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn send_request(&mut self, purpose: Purpose, now: Instant, rng: Rng<'_>, out: &mut Outbox) {
        if self.request.is_some() {
            self.queued.push_back(purpose);
            return;
        }
        let (kind, payloads) = match &purpose {
            Purpose::Delete { .. } => (
                exchange::INFORMATIONAL,
                vec![Payload::Delete(Delete {
                    protocol: protocol::IKE,
                    spi_size: 0,
                    spis: Vec::new(),
                })],
            ),
            Purpose::DeleteChild => {
                let Some(old) = &self.old_child else {
                    return;
                };
                (
                    exchange::INFORMATIONAL,
                    vec![Payload::Delete(Delete {
                        protocol: protocol::ESP,
                        spi_size: 4,
                        spis: vec![old.inbound.spi.to_be_bytes().to_vec()],
                    })],
                )
            }
            Purpose::Rekey(state) => {
                let mut p = vec![
                    Payload::Notify(Notify {
                        protocol: protocol::ESP,
                        spi: self.child.inbound.spi.to_be_bytes().to_vec(),
                        kind: notify::REKEY_SA,
                        data: Vec::new(),
                    }),
                    Payload::Sa(vec![esp_proposal(self.esp, state.spi_in, self.pfs)]),
                    Payload::Nonce(state.nonce.clone()),
                ];
                if let Some((dh, public)) = &state.dh {
                    p.push(Payload::Ke {
                        group: dh.group().id(),
                        data: public.clone(),
                    });
                }
                // TSi is the side of the exchange's initiator: ours.
                p.push(Payload::TsI(self.child.local_ts.clone()));
                p.push(Payload::TsR(self.child.remote_ts.clone()));
                (exchange::CREATE_CHILD_SA, p)
            }
            Purpose::RekeyIke(state) => (exchange::CREATE_CHILD_SA, state.request(self.ike.suite)),
            Purpose::DeleteOldIke => (
                exchange::INFORMATIONAL,
                vec![Payload::Delete(Delete {
                    protocol: protocol::IKE,
                    spi_size: 0,
                    spis: Vec::new(),
                })],
            ),
        };
        // The old IKE SA's Delete travels on the old SA, with its IDs.
        let sa = match (&purpose, self.old_ike.as_deref_mut()) {
            (Purpose::DeleteOldIke, Some(old)) => old,
            (Purpose::DeleteOldIke, None) => return,
            _ => &mut self.ike,
        };
        let id = sa.next_id;
        sa.next_id = sa.next_id.wrapping_add(1);
        let bytes = sa.seal(kind, false, id, &payloads, rng);
        let request = Request::send(
            kind,
            id,
            Transmit::ike(self.floated, &bytes),
            self.retransmit,
            now,
            out,
        );
        self.request = Some((request, purpose));
    }

    /// Deletes the IKE SA: `Output::Deleted` when answered (or
    /// `Output::Failed(then)` when `then` is given).
    pub(crate) fn delete(
        &mut self,
        then: Option<IkeError>,
        now: Instant,
        rng: Rng<'_>,
        out: &mut Outbox,
    ) {
        if !self.ike_up() {
            return;
        }
        self.state = State::Deleting;
        // Whatever was in flight is moot.
        self.request = None;
        self.queued.clear();
        self.send_request(Purpose::Delete { then }, now, rng, out);
    }

    /// The Delete once, without waiting for its answer (when dropped).
    pub(crate) fn delete_once(&mut self, rng: Rng<'_>, out: &mut Outbox) {
        if !self.ike_up() {
            return;
        }
        self.state = State::Down;
        let id = self.ike.next_id;
        self.ike.next_id = self.ike.next_id.wrapping_add(1);
        let delete = Payload::Delete(Delete {
            protocol: protocol::IKE,
            spi_size: 0,
            spis: Vec::new(),
        });
        let bytes = self
            .ike
            .seal(exchange::INFORMATIONAL, false, id, &[delete], rng);
        out.transmits.push_back(Transmit::ike(self.floated, &bytes));
    }

    /// Starts a CREATE_CHILD_SA rekey of the CHILD_SA (RFC 7296 §1.3.3):
    /// its end is `Event::ChildRekeyed` or `Output::RekeyFailed`.
    pub(crate) fn rekey_child(
        &mut self,
        now: Instant,
        rng: Rng<'_>,
        out: &mut Outbox,
    ) -> Result<(), IkeError> {
        if !self.ike_up() {
            return Err(IkeError::Deleted {
                gateway: match self.peer {
                    std::net::SocketAddr::V4(a) => *a.ip(),
                    _ => std::net::Ipv4Addr::UNSPECIFIED,
                },
            });
        }
        if !self.child_up() {
            return Err(IkeError::Protocol {
                addr: self.peer,
                detail: "there is no CHILD_SA to rekey (the peer deleted it)".into(),
            });
        }
        let busy = self
            .queued
            .iter()
            .chain(self.request.as_ref().map(|(_, p)| p))
            .any(|p| matches!(p, Purpose::Rekey(_)));
        if busy {
            return Ok(());
        }
        let state = RekeyState {
            spi_in: new_esp_spi(rng),
            nonce: random_bytes(rng, 32),
            dh: self.pfs.map(|group| DhPrivate::generate(group, rng)),
        };
        self.send_request(Purpose::Rekey(Box::new(state)), now, rng, out);
        Ok(())
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, rng: Rng<'_>, out: &mut Outbox) {
        if let Some(at) = self.keepalive_at {
            if now >= at && self.ike_up() {
                out.transmits.push_back(Transmit {
                    natt: true,
                    data: KEEPALIVE.to_vec(),
                });
                self.keepalive_at = Some(now + KEEPALIVE_INTERVAL);
            }
        }
        let expired = match &mut self.request {
            Some((r, _)) if now >= r.deadline => !r.expire(self.retransmit, now, out),
            _ => false,
        };
        if expired {
            let Some((r, purpose)) = self.request.take() else {
                return;
            };
            let e = r.no_answer(self.peer);
            match purpose {
                Purpose::Delete { then } => {
                    self.state = State::Down;
                    out.outputs.push_back(match then {
                        Some(first) => Output::Failed(first),
                        None => Output::Deleted(Err(e)),
                    })
                }
                Purpose::Rekey(_) | Purpose::RekeyIke(_) => {
                    out.outputs.push_back(Output::RekeyFailed(e))
                }
                Purpose::DeleteChild => self.old_child = None,
                Purpose::DeleteOldIke => self.old_ike = None,
            }
            self.next_request(now, rng, out);
        }
    }

    fn next_request(&mut self, now: Instant, rng: Rng<'_>, out: &mut Outbox) {
        if self.request.is_none() {
            if let Some(p) = self.queued.pop_front() {
                self.send_request(p, now, rng, out);
            }
        }
    }

    /// Takes an IKE message from the peer: the answer to our request, or
    /// a request of the peer (answered). False if it was neither.
    pub(crate) fn handle(
        &mut self,
        data: &[u8],
        now: Instant,
        rng: Rng<'_>,
        out: &mut Outbox,
    ) -> bool {
        if let Some((r, purpose)) = &self.request {
            let sa = match purpose {
                Purpose::DeleteOldIke => self.old_ike.as_deref(),
                _ => Some(&self.ike),
            };
            if let Some(message) = sa.and_then(|sa| sa.open_response(data, r.kind, r.id)) {
                let Some((_, purpose)) = self.request.take() else {
                    return true;
                };
                self.on_answer(purpose, message, out);
                self.next_request(now, rng, out);
                return true;
            }
        }
        let handled =
            self.answer(data, now, rng, out) || self.answer_on_old_ike(data, now, rng, out);
        if !handled {
            if let Some((r, _)) = &mut self.request {
                r.not_answers += 1;
            }
        }
        handled
    }

    fn on_answer(&mut self, purpose: Purpose, message: Message, out: &mut Outbox) {
        match purpose {
            Purpose::Delete { then } => {
                self.state = State::Down;
                out.outputs.push_back(match then {
                    Some(e) => Output::Failed(e),
                    None => Output::Deleted(Ok(())),
                })
            }
            Purpose::DeleteChild => self.old_child = None,
            Purpose::Rekey(state) => match self.rekeyed(*state, &message) {
                Ok(()) => {
                    out.outputs.push_back(Output::Event(Event::ChildRekeyed));
                    // The old CHILD_SA goes (§1.3.3: the initiator of the
                    // rekey deletes it).
                    self.queued.push_front(Purpose::DeleteChild);
                }
                Err(e) => out.outputs.push_back(Output::RekeyFailed(e)),
            },
            Purpose::RekeyIke(state) => match ike_rekey::answered(&self.ike, *state, &message) {
                Ok(new) => {
                    self.switch_ike(new);
                    out.outputs.push_back(Output::Event(Event::IkeRekeyed));
                    // §2.18: the initiator of the rekey deletes the old
                    // IKE SA.
                    self.queued.push_front(Purpose::DeleteOldIke);
                }
                Err(detail) => out
                    .outputs
                    .push_back(Output::RekeyFailed(IkeError::Protocol {
                        addr: self.peer,
                        detail: format!("the IKE SA rekey (CREATE_CHILD_SA): {detail}"),
                    })),
            },
            Purpose::DeleteOldIke => self.old_ike = None,
        }
    }

    /// The new IKE SA replaces the current one, which is kept until its
    /// Delete; the CHILD_SAs move under the new SA as they are (their
    /// keys do not change, §2.18), and its message IDs start at 0.
    fn switch_ike(&mut self, new: IkeSa) {
        let old = std::mem::replace(&mut self.ike, new);
        self.old_ike = Some(Box::new(old));
    }

    /// Starts a CREATE_CHILD_SA rekey of the IKE SA (RFC 7296 §1.3.2):
    /// its end is `Event::IkeRekeyed` (then the old IKE SA is deleted) or
    /// `Output::RekeyFailed`.
    pub(crate) fn rekey_ike(
        &mut self,
        now: Instant,
        rng: Rng<'_>,
        out: &mut Outbox,
    ) -> Result<(), IkeError> {
        if !self.ike_up() {
            return Err(IkeError::Deleted {
                gateway: match self.peer {
                    std::net::SocketAddr::V4(a) => *a.ip(),
                    _ => std::net::Ipv4Addr::UNSPECIFIED,
                },
            });
        }
        let busy = self
            .queued
            .iter()
            .chain(self.request.as_ref().map(|(_, p)| p))
            .any(|p| matches!(p, Purpose::RekeyIke(_) | Purpose::DeleteOldIke));
        if busy {
            return Ok(());
        }
        let state = IkeRekeyState::new(self.ike.suite, rng);
        self.send_request(Purpose::RekeyIke(Box::new(state)), now, rng, out);
        Ok(())
    }

    /// Our SPIs of the current IKE SA and of the one it replaced (while
    /// that is not yet deleted): the peer's messages name one of them.
    pub(crate) fn own_spis(&self) -> (u64, Option<u64>) {
        (
            self.ike.own_spi(),
            self.old_ike.as_ref().map(|o| o.own_spi()),
        )
    }

    /// A request of the peer on the IKE SA a rekey replaced: its Delete
    /// (§2.18) and liveness checks are answered, anything else with
    /// TEMPORARY_FAILURE. False if it was none.
    fn answer_on_old_ike(
        &mut self,
        data: &[u8],
        now: Instant,
        rng: Rng<'_>,
        out: &mut Outbox,
    ) -> bool {
        let Some(old) = self.old_ike.as_deref_mut() else {
            return false;
        };
        let Ok(h) = Header::parse(data) else {
            return false;
        };
        if !old.is_peer_request(&h) {
            return false;
        }
        if h.message_id != old.peer_id {
            if let Some((id, bytes)) = &old.last_answer {
                if *id == h.message_id {
                    out.transmits.push_back(Transmit::ike(self.floated, bytes));
                }
            }
            return false;
        }
        let Ok(request) = open(&old.in_keys(), data) else {
            return false;
        };
        let informational = h.exchange == exchange::INFORMATIONAL;
        let deleted = informational
            && request
                .payloads
                .iter()
                .any(|p| matches!(p, Payload::Delete(d) if d.protocol == protocol::IKE));
        let reply = if informational {
            Vec::new()
        } else {
            vec![Payload::Notify(Notify::new(
                notify::TEMPORARY_FAILURE,
                Vec::new(),
            ))]
        };
        let bytes = old.seal(h.exchange, true, h.message_id, &reply, rng);
        out.transmits.push_back(Transmit::ike(self.floated, &bytes));
        old.last_answer = Some((h.message_id, bytes));
        old.peer_id = old.peer_id.wrapping_add(1);
        if deleted {
            self.old_ike = None;
            // Our own Delete of it crossed the peer's: nothing to wait for.
            if matches!(self.request, Some((_, Purpose::DeleteOldIke))) {
                self.request = None;
                self.next_request(now, rng, out);
            }
        }
        true
    }

    fn protocol_error(&self, detail: impl Into<String>) -> IkeError {
        IkeError::Protocol {
            addr: self.peer,
            detail: detail.into(),
        }
    }

    /// The answer to our CREATE_CHILD_SA: the new CHILD_SA replaces the
    /// old, which is kept until deleted.
    fn rekeyed(&mut self, state: RekeyState, message: &Message) -> Result<(), IkeError> {
        if let Some(n) = message.error() {
            return Err(match n.kind {
                notify::NO_PROPOSAL_CHOSEN => IkeError::NoProposalChosen {
                    offered: format!("ESP {} in CREATE_CHILD_SA", self.esp),
                },
                kind => IkeError::Refused {
                    exchange: "the CHILD_SA rekey (CREATE_CHILD_SA)".into(),
                    notify: notify::name(kind),
                },
            });
        }
        let (mut sa, mut nonce, mut ke, mut tsi, mut tsr) = (None, None, None, None, None);
        for p in &message.payloads {
            match p {
                Payload::Sa(list) => sa = Some(list),
                Payload::Nonce(n) => nonce = Some(n),
                Payload::Ke { group, data } => ke = Some((*group, data)),
                Payload::TsI(l) => tsi = Some(l),
                Payload::TsR(l) => tsr = Some(l),
                _ => {}
            }
        }
        let spi_out = sa
            .and_then(|sa| accepted_esp(self.esp, self.pfs, sa))
            .ok_or_else(|| {
                self.protocol_error("CREATE_CHILD_SA: no ESP proposal, or not the one offered")
            })?;
        let nr = nonce.ok_or_else(|| self.protocol_error("CREATE_CHILD_SA: no nonce"))?;
        if !(16..=256).contains(&nr.len()) {
            return Err(
                self.protocol_error(format!("CREATE_CHILD_SA: a nonce of {} bytes", nr.len()))
            );
        }
        let shared = match &state.dh {
            Some((dh, _)) => {
                let (group, public) = ke
                    .ok_or_else(|| self.protocol_error("CREATE_CHILD_SA: no KE payload for PFS"))?;
                if group != dh.group().id() {
                    return Err(self.protocol_error(format!(
                        "CREATE_CHILD_SA: a KE payload of group {group}"
                    )));
                }
                Some(dh.shared(public).map_err(|e| {
                    self.protocol_error(format!("CREATE_CHILD_SA: the KE payload: {e}"))
                })?)
            }
            None => None,
        };
        // We started this exchange: our nonce is Ni (§2.17).
        let (outbound, inbound) = child_sa_keys_ordered(
            &self.ike,
            self.esp,
            shared.as_deref().map(|s| &s[..]),
            &state.nonce,
            nr,
            spi_out,
            state.spi_in,
            true,
        );
        let mut new = self.child.clone();
        new.outbound = outbound;
        new.inbound = inbound;
        if let Some(l) = tsi.filter(|l| !l.is_empty()) {
            new.local_ts = l.clone();
        }
        if let Some(l) = tsr.filter(|l| !l.is_empty()) {
            new.remote_ts = l.clone();
        }
        let old = std::mem::replace(&mut self.child, new);
        self.old_child = Some(Box::new(old));
        self.set_child_up();
        Ok(())
    }

    /// Answers a request of the peer; false for anything that is not the
    /// peer's next request on this IKE SA (after resending our answer if
    /// it was the last one again).
    fn answer(&mut self, data: &[u8], now: Instant, rng: Rng<'_>, out: &mut Outbox) -> bool {
        let _ = now;
        let Ok(h) = Header::parse(data) else {
            return false;
        };
        if !self.ike.is_peer_request(&h) {
            return false;
        }
        if h.message_id != self.ike.peer_id {
            if let Some((id, bytes)) = &self.ike.last_answer {
                if *id == h.message_id {
                    out.transmits.push_back(Transmit::ike(self.floated, bytes));
                }
            }
            return false;
        }
        let Ok(request) = open(&self.ike.in_keys(), data) else {
            return false;
        };
        let mut reply = Vec::new();
        let mut switch_to = None;
        let event = match h.exchange {
            exchange::INFORMATIONAL => self.answer_informational(&request, &mut reply),
            exchange::CREATE_CHILD_SA if ike_rekey::is_ike_rekey(&request) => {
                match self.answer_ike_rekey(&request, rng) {
                    Ok((payloads, new)) => {
                        reply = payloads;
                        switch_to = Some(new);
                        Event::IkeRekeyed
                    }
                    Err(n) => {
                        reply.push(Payload::Notify(n));
                        Event::Refused {
                            exchange: exchange::CREATE_CHILD_SA,
                        }
                    }
                }
            }
            exchange::CREATE_CHILD_SA => match self.answer_rekey(&request, rng) {
                Ok((payloads, new)) => {
                    reply = payloads;
                    let old = std::mem::replace(&mut self.child, *new);
                    self.old_child = Some(Box::new(old));
                    self.set_child_up();
                    Event::ChildRekeyed
                }
                Err(kind) => {
                    reply.push(Payload::Notify(Notify::new(kind, Vec::new())));
                    Event::Refused {
                        exchange: exchange::CREATE_CHILD_SA,
                    }
                }
            },
            _ => return false,
        };
        let bytes = self.ike.seal(h.exchange, true, h.message_id, &reply, rng);
        out.transmits.push_back(Transmit::ike(self.floated, &bytes));
        self.ike.last_answer = Some((h.message_id, bytes));
        self.ike.peer_id = self.ike.peer_id.wrapping_add(1);
        // The answer went on the old SA; from now on the new one is used
        // (the peer's Delete of the old one is answered on it).
        if let Some(new) = switch_to {
            self.switch_ike(new);
        }
        match event {
            Event::IkeDeleted => {
                self.state = State::Down;
                // Both Deletes crossed: the end §1.4.1 expects.
                if let Some((_, Purpose::Delete { then })) = self.request.take() {
                    out.outputs.push_back(match then {
                        Some(e) => Output::Failed(e),
                        None => Output::Deleted(Ok(())),
                    });
                }
            }
            Event::ChildDeleted if self.state == State::ChildUp => self.state = State::IkeUp,
            _ => {}
        }
        out.outputs.push_back(Output::Event(event));
        true
    }

    /// The peer's INFORMATIONAL: a liveness check, notifications, or
    /// Deletes (of the IKE SA, of the CHILD_SA, of the CHILD_SA a rekey
    /// replaced), with our side of each deleted pair in `reply`.
    fn answer_informational(&mut self, request: &Message, reply: &mut Vec<Payload>) -> Event {
        let mut event = if request.payloads.is_empty() {
            Event::LivenessCheck
        } else {
            Event::Informational
        };
        for p in &request.payloads {
            let Payload::Delete(d) = p else { continue };
            if d.protocol == protocol::IKE {
                event = Event::IkeDeleted;
            } else if d.protocol == protocol::ESP && event != Event::IkeDeleted {
                let ours = |c: &ChildSa| {
                    d.spis
                        .iter()
                        .any(|s| s[..] == c.outbound.spi.to_be_bytes()[..])
                };
                if ours(&self.child) {
                    // RFC 7296 §1.4.1: answer with the Delete of
                    // our direction of the pair.
                    reply.push(Payload::Delete(Delete {
                        protocol: protocol::ESP,
                        spi_size: 4,
                        spis: vec![self.child.inbound.spi.to_be_bytes().to_vec()],
                    }));
                    event = Event::ChildDeleted;
                } else if let Some(old) = self.old_child.take() {
                    if ours(&old) {
                        // The old CHILD_SA of a rekey, deleted by
                        // the peer: the new one stays.
                        reply.push(Payload::Delete(Delete {
                            protocol: protocol::ESP,
                            spi_size: 4,
                            spis: vec![old.inbound.spi.to_be_bytes().to_vec()],
                        }));
                        if event != Event::ChildDeleted {
                            event = Event::RekeyedChildDeleted;
                        }
                    } else {
                        self.old_child = Some(old);
                    }
                }
            }
        }
        event
    }

    /// The peer's IKE SA rekey: answered as `ike_rekey::answer` does,
    /// unless a request of ours is in flight on the current SA (ours
    /// would cross the switch; a simultaneous IKE SA rekey would make two
    /// new SAs): then TEMPORARY_FAILURE, which RFC 7296 §2.25 lets a
    /// responder send while it is itself rekeying, and the peer tries
    /// again a little later.
    fn answer_ike_rekey(
        &self,
        request: &Message,
        rng: Rng<'_>,
    ) -> Result<(Vec<Payload>, IkeSa), Notify> {
        if self.request.is_some() {
            return Err(Notify::new(notify::TEMPORARY_FAILURE, Vec::new()));
        }
        ike_rekey::answer(&self.ike, request, rng)
    }

    /// The peer's CREATE_CHILD_SA: a rekey of our CHILD_SA (REKEY_SA with
    /// one of its SPIs) is answered with a new one; anything else (a new
    /// CHILD_SA, an IKE SA rekey) with NO_ADDITIONAL_SAS.
    #[allow(clippy::type_complexity)]
    fn answer_rekey(
        &self,
        request: &Message,
        rng: Rng<'_>,
    ) -> Result<(Vec<Payload>, Box<ChildSa>), u16> {
        let rekeyed = request.notifies().find(|n| n.kind == notify::REKEY_SA);
        let Some(rekeyed) = rekeyed else {
            return Err(notify::NO_ADDITIONAL_SAS);
        };
        if rekeyed.protocol != protocol::ESP
            // The sender names the SA by its inbound SPI: our outbound.
            || rekeyed.spi[..] != self.child.outbound.spi.to_be_bytes()[..]
            || !self.child_up()
        {
            return Err(notify::CHILD_SA_NOT_FOUND);
        }
        let (mut sa, mut nonce, mut ke) = (None, None, None);
        for p in &request.payloads {
            match p {
                Payload::Sa(list) => sa = Some(list),
                Payload::Nonce(n) => nonce = Some(n),
                Payload::Ke { group, data } => ke = Some((*group, data)),
                _ => {}
            }
        }
        let (Some(sa), Some(ni)) = (sa, nonce) else {
            return Err(notify::INVALID_SYNTAX);
        };
        if !(16..=256).contains(&ni.len()) {
            return Err(notify::INVALID_SYNTAX);
        }
        let Some((number, spi_out, group)) = choose_esp(self.esp, sa) else {
            return Err(notify::NO_PROPOSAL_CHOSEN);
        };
        let mut shared = None;
        let mut ke_reply = None;
        if let Some(group) = group {
            let Some((g, public)) = ke else {
                return Err(notify::INVALID_SYNTAX);
            };
            if g != group.id() {
                return Err(notify::INVALID_KE_PAYLOAD);
            }
            let (dh, ours) = DhPrivate::generate(group, rng);
            shared = Some(dh.shared(public).map_err(|_| notify::INVALID_SYNTAX)?);
            ke_reply = Some((group, ours));
        }
        let spi_in = new_esp_spi(rng);
        let nr = random_bytes(rng, 32);
        // The peer started this exchange: its nonce is Ni, and KEYMAT's
        // first keys are for the direction from the exchange's initiator.
        let (outbound, inbound) = child_sa_keys_ordered(
            &self.ike,
            self.esp,
            shared.as_deref().map(|s| &s[..]),
            ni,
            &nr,
            spi_out,
            spi_in,
            false,
        );
        let mut proposal = esp_proposal(self.esp, spi_in, group);
        proposal.number = number;
        let mut payloads = vec![Payload::Sa(vec![proposal]), Payload::Nonce(nr)];
        if let Some((group, data)) = ke_reply {
            payloads.push(Payload::Ke {
                group: group.id(),
                data,
            });
        }
        // From the exchange's initiator's view: its TSi is our remote side.
        payloads.push(Payload::TsI(self.child.remote_ts.clone()));
        payloads.push(Payload::TsR(self.child.local_ts.clone()));
        let mut new = self.child.clone();
        new.outbound = outbound;
        new.inbound = inbound;
        Ok((payloads, Box::new(new)))
    }
}

/// KEYMAT of a CHILD_SA negotiated in an exchange that we started
/// (`we_started`) or the peer started: the first keys are for the
/// direction from the exchange's initiator (RFC 7296 §2.17).
#[allow(clippy::too_many_arguments)]
pub(crate) fn child_sa_keys_ordered(
    ike: &IkeSa,
    suite: EspSuite,
    dh: Option<&[u8]>,
    ni: &[u8],
    nr: &[u8],
    spi_out: u32,
    spi_in: u32,
    we_started: bool,
) -> (SaKeys, SaKeys) {
    let [(enc_ir, int_ir), (enc_ri, int_ri)] = child_keys(
        ike.suite.prf,
        &ike.keys.sk_d,
        dh,
        ni,
        nr,
        suite.encryption_keymat_len(),
        suite.integrity_key_len(),
    );
    let ((enc_out, int_out), (enc_in, int_in)) = if we_started {
        ((enc_ir, int_ir), (enc_ri, int_ri))
    } else {
        ((enc_ri, int_ri), (enc_ir, int_ir))
    };
    (
        SaKeys {
            suite,
            spi: spi_out,
            encryption_key: enc_out.to_vec(),
            integrity_key: int_out.to_vec(),
        },
        SaKeys {
            suite,
            spi: spi_in,
            encryption_key: enc_in.to_vec(),
            integrity_key: int_in.to_vec(),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn esp_proposals_carry_the_suites_transforms() {
        for suite in EspSuite::ALL {
            let p = esp_proposal(suite, 0x1234_5678, None);
            assert_eq!(p.spi, [0x12, 0x34, 0x56, 0x78]);
            assert_eq!(p.protocol, protocol::ESP);
            let (id, bits) = suite.ikev2_encryption();
            assert_eq!(
                p.transforms[0],
                Transform {
                    kind: 1,
                    id,
                    key_length: bits
                }
            );
            assert_eq!(
                p.transforms.len(),
                if suite.is_aead() { 2 } else { 3 },
                "{suite}"
            );
            // The gateway's answer: the same transforms, its own SPI.
            let mut answer = p.clone();
            answer.spi = vec![0xc1, 0, 0, 2];
            assert_eq!(
                accepted_esp(suite, None, &[answer.clone()]),
                Some(0xc100_0002)
            );
            // The responder's choice among proposals takes it too.
            assert_eq!(
                choose_esp(suite, &[answer.clone()]),
                Some((1, 0xc100_0002, None))
            );
            // Without ESN is fine; another suite, two proposals are not.
            answer.transforms.retain(|t| t.kind != transform::ESN);
            assert_eq!(
                accepted_esp(suite, None, &[answer.clone()]),
                Some(0xc100_0002)
            );
            let other = EspSuite::ALL.into_iter().find(|s| *s != suite).unwrap();
            assert_eq!(accepted_esp(other, None, &[answer.clone()]), None);
            assert_eq!(choose_esp(other, &[answer.clone()]), None);
            assert_eq!(
                accepted_esp(suite, None, &[answer.clone(), answer.clone()]),
                None
            );
            // A DH group where none was offered (PFS) is refused; offered,
            // it must be there.
            answer.transforms.push(Transform::new(transform::DH, 14));
            assert_eq!(accepted_esp(suite, None, &[answer.clone()]), None);
            assert_eq!(
                accepted_esp(suite, Some(DhGroup::Modp2048), &[answer.clone()]),
                Some(0xc100_0002)
            );
            assert_eq!(
                choose_esp(suite, &[answer]),
                Some((1, 0xc100_0002, Some(DhGroup::Modp2048)))
            );
        }
    }
}

/// Two tunnels, linerate's initiator and responder sides of one IKE SA,
/// rekey it both ways in memory (`ike_rekey.rs` through `Tunnel`): the derivation (§2.18) is checked by
/// both sides arriving at the same keys, and by the CHILD_SA rekey and
/// the Delete that the new keys then carry.
#[cfg(test)]
mod ike_rekey_tests {
    use super::*;
    use crate::crypto::{ike_keys, Encr, Integ, Prf, SeededRng};
    use crate::proposal::IkeSuite;
    use crate::test_clock::t0;
    use std::net::{Ipv4Addr, SocketAddrV4};

    fn suite() -> IkeSuite {
        IkeSuite {
            encryption: Encr::AesCbc128,
            integrity: Integ::HmacSha256_128,
            prf: Prf::HmacSha256,
            group: DhGroup::Curve25519,
        }
    }

    fn sa(initiator: bool) -> IkeSa {
        let (ni, nr) = (vec![1u8; 32], vec![2u8; 32]);
        let keys = ike_keys(
            Prf::HmacSha256,
            Integ::HmacSha256_128,
            Encr::AesCbc128,
            &[7u8; 32],
            &ni,
            &nr,
            0x1111,
            0x2222,
        );
        IkeSa {
            initiator,
            spi_i: 0x1111,
            spi_r: 0x2222,
            suite: suite(),
            keys,
            ni,
            nr,
            next_id: 2,
            peer_id: 2,
            last_answer: None,
        }
    }

    fn tunnel(initiator: bool) -> Tunnel {
        let keys = |spi| SaKeys {
            suite: EspSuite::Aes256Gcm16,
            spi,
            encryption_key: vec![0; 36],
            integrity_key: Vec::new(),
        };
        let (a, b) = (SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4500), 0x1000);
        let child = ChildSa {
            outbound: keys(if initiator { b } else { b + 1 }),
            inbound: keys(if initiator { b + 1 } else { b }),
            local_ts: Vec::new(),
            remote_ts: Vec::new(),
            local: a,
            remote: a,
            udp_encap: true,
        };
        let mut t = Tunnel::new(
            sa(initiator),
            child,
            EspSuite::Aes256Gcm16,
            None,
            Retransmit::default(),
            false,
            std::net::SocketAddr::V4(a),
            t0(),
        );
        t.set_child_up();
        t
    }

    /// Carries every datagram between the two until both are quiet; the
    /// events each reported, and the rekeys that failed.
    fn exchange(a: &mut Tunnel, b: &mut Tunnel, first: Outbox) -> [Vec<Event>; 2] {
        let mut events = [Vec::new(), Vec::new()];
        let mut boxes = [first, Outbox::default()];
        let mut rng = SeededRng::new(100);
        for _ in 0..20 {
            for side in 0..2 {
                let datagrams: Vec<_> = boxes[side].transmits.drain(..).collect();
                let outputs: Vec<_> = boxes[side].outputs.drain(..).collect();
                for o in outputs {
                    match o {
                        Output::Event(e) => events[side].push(e),
                        Output::RekeyFailed(_) => events[side].push(Event::RekeyFailed),
                        other => panic!("{other:?}"),
                    }
                }
                let (to, out) = if side == 0 {
                    (&mut *b, &mut boxes[1])
                } else {
                    (&mut *a, &mut boxes[0])
                };
                for d in datagrams {
                    assert!(to.handle(&d.data, t0(), &mut rng, out), "unhandled");
                }
            }
        }
        events
    }

    fn same_sa(a: &Tunnel, b: &Tunnel) {
        assert_eq!((a.ike.spi_i, a.ike.spi_r), (b.ike.spi_i, b.ike.spi_r));
        assert_ne!(a.ike.initiator, b.ike.initiator);
        assert_eq!(*a.ike.keys.sk_d, *b.ike.keys.sk_d);
        assert_eq!(*a.ike.keys.sk_ei, *b.ike.keys.sk_ei);
        assert_eq!(*a.ike.keys.sk_ar, *b.ike.keys.sk_ar);
        assert_eq!(a.own_spis().1, None, "the old SA is deleted");
        assert_eq!(b.own_spis().1, None, "the old SA is deleted");
    }

    #[test]
    fn both_sides_of_an_ike_rekey_derive_the_same_new_sa() {
        let (mut a, mut b) = (tunnel(true), tunnel(false));
        let old_sk_d = a.ike.keys.sk_d.clone();
        let mut out = Outbox::default();
        a.rekey_ike(t0(), &mut SeededRng::new(11), &mut out)
            .unwrap();
        let events = exchange(&mut a, &mut b, out);
        assert_eq!(events, [vec![Event::IkeRekeyed], vec![Event::IkeRekeyed]]);
        same_sa(&a, &b);
        assert!(a.ike.initiator, "the rekey's initiator is the new SA's");
        assert_ne!(a.ike.spi_i, 0x1111);
        assert_ne!(*a.ike.keys.sk_d, *old_sk_d);
        // Message IDs restarted at 0; the Delete of the old SA went on it.
        assert_eq!((a.ike.next_id, b.ike.peer_id), (0, 0));

        // The other side rekeys: it becomes the new SA's initiator.
        let mut out = Outbox::default();
        b.rekey_ike(t0(), &mut SeededRng::new(12), &mut out)
            .unwrap();
        let events = exchange(&mut b, &mut a, out);
        assert_eq!(events, [vec![Event::IkeRekeyed], vec![Event::IkeRekeyed]]);
        same_sa(&a, &b);
        assert!(b.ike.initiator && !a.ike.initiator);

        // The new SK_d makes the CHILD_SA rekey's keys on both sides.
        let mut out = Outbox::default();
        a.rekey_child(t0(), &mut SeededRng::new(13), &mut out)
            .unwrap();
        let events = exchange(&mut a, &mut b, out);
        assert_eq!(events[0], [Event::ChildRekeyed]);
        assert_eq!(events[1], [Event::ChildRekeyed, Event::RekeyedChildDeleted]);
        assert_eq!(a.child.outbound.spi, b.child.inbound.spi);
        assert_eq!(
            a.child.outbound.encryption_key,
            b.child.inbound.encryption_key
        );
        assert_eq!(
            a.child.inbound.encryption_key,
            b.child.outbound.encryption_key
        );
    }

    /// Both sides start an IKE SA rekey at once: each answers the other's
    /// with TEMPORARY_FAILURE, both report the failure, nothing is
    /// wedged: the next rekey goes through.
    #[test]
    fn simultaneous_ike_rekeys_fail_cleanly_and_the_next_one_works() {
        let (mut a, mut b) = (tunnel(true), tunnel(false));
        let mut out = Outbox::default();
        a.rekey_ike(t0(), &mut SeededRng::new(14), &mut out)
            .unwrap();
        let mut theirs = Outbox::default();
        b.rekey_ike(t0(), &mut SeededRng::new(15), &mut theirs)
            .unwrap();
        // b's request reaches a while a's is in flight, and the reverse.
        for d in theirs.transmits.drain(..) {
            assert!(a.handle(&d.data, t0(), &mut SeededRng::new(20), &mut out));
        }
        let events = exchange(&mut a, &mut b, out);
        assert!(events[0].contains(&Event::RekeyFailed), "{events:?}");
        assert!(events[1].contains(&Event::RekeyFailed), "{events:?}");
        assert!(a.ike_up() && b.ike_up());
        assert_eq!(a.ike.spi_i, 0x1111);
        let mut out = Outbox::default();
        a.rekey_ike(t0(), &mut SeededRng::new(16), &mut out)
            .unwrap();
        let events = exchange(&mut a, &mut b, out);
        assert_eq!(events, [vec![Event::IkeRekeyed], vec![Event::IkeRekeyed]]);
        same_sa(&a, &b);
    }
}
