//! The initiator's handshake without sockets (sans-IO, as smoltcp does
//! it): IKE_SA_INIT (answering COOKIE and INVALID_KE_PAYLOAD) and IKE_AUTH
//! with a pre-shared key and one CHILD_SA, then the established
//! [`Tunnel`]. The caller feeds it the peer's datagrams and the time and
//! sends what it produces; [`crate::Session`] does so blocking on two
//! sockets for one gateway, [`crate::Fleet`] for thousands of peers on one
//! pair of sockets.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Instant;

use linerate_esp::{EspSuite, SaKeys};

use crate::config::{Ports, Psk, Retransmit};
use crate::crypto::{
    ike_keys, nat_hash, psk_auth, random_bytes, random_u64, BoxedRng, DhGroup, DhPrivate,
};
use crate::error::IkeError;
use crate::ike_sa::IkeSa;
use crate::proposal::{IkeProposals, IkeSuite};
use crate::sa::ChildSa;
use crate::tunnel::{
    accepted_esp, child_sa_keys_ordered, esp_proposal, new_esp_spi, Outbox, Output, Request,
    Transmit, Tunnel,
};
use crate::wire::{
    auth_method, exchange, flags, notify, Header, Identity, Message, Notify, Payload,
    TrafficSelector,
};

/// What every initiator of one gateway shares.
#[derive(Debug)]
pub(crate) struct Shared {
    pub gateway: Ipv4Addr,
    pub gateway_ports: Ports,
    pub remote_id: Option<Identity>,
    pub psk: Psk,
    pub ike: IkeProposals,
    pub esp: EspSuite,
    pub remote_ts: TrafficSelector,
    pub retransmit: Retransmit,
    pub force_encap: bool,
}

/// One initiator's own side.
#[derive(Debug, Clone)]
pub(crate) struct Local {
    pub addr: Ipv4Addr,
    /// The ports its datagrams leave from (the NAT detection hash and
    /// `ChildSa::local` name them).
    pub ports: Ports,
    pub id: Option<Identity>,
    pub ts: TrafficSelector,
}

impl Local {
    fn identity(&self) -> Identity {
        self.id.clone().unwrap_or(Identity::Ipv4(self.addr))
    }
}

/// IKE_SA_INIT in flight.
struct InitState {
    dh: DhPrivate,
    public: Vec<u8>,
    ni: Vec<u8>,
    nat_source: Vec<u8>,
    cookie: Option<Vec<u8>>,
    tried: Vec<DhGroup>,
    cookies: u8,
    /// The request as last sent (AUTH signs it).
    message: Vec<u8>,
}

/// IKE_AUTH in flight.
struct AuthState {
    ike: IkeSa,
    init_response: Vec<u8>,
    spi_in: u32,
    idi: Identity,
    udp_encap: bool,
}

enum Phase {
    Idle,
    Init(Box<InitState>, Request),
    Auth(Box<AuthState>, Request),
    /// Established, or deleting after IKE_AUTH failed.
    Up(Box<Tunnel>),
    Closed,
}

/// One initiator: its handshake, then its tunnel.
pub(crate) struct Initiator {
    shared: Arc<Shared>,
    local: Local,
    spi_i: u64,
    phase: Phase,
    /// IKE moved to port 4500.
    floated: bool,
    started: Option<Instant>,
    /// The first Diffie-Hellman key pair, made by [`prepare`](Self::prepare)
    /// before the clock of the setup starts.
    prepared: Option<(DhPrivate, Vec<u8>)>,
    /// Deleted while its IKE_AUTH was unanswered: the gateway may install
    /// the tunnel when it answers, so the answer is awaited and the IKE SA
    /// deleted then (never left up at the gateway).
    delete_when_up: bool,
    /// Its SPIs, nonces, IVs and Diffie-Hellman values come from here.
    rng: BoxedRng,
}

impl Initiator {
    /// An initiator whose randomness comes from `rng` (the drivers in
    /// `io` give the operating system's source).
    pub(crate) fn new(shared: Arc<Shared>, local: Local, mut rng: BoxedRng) -> Initiator {
        let spi_i = loop {
            let spi = random_u64(&mut *rng);
            if spi != 0 {
                break spi;
            }
        };
        Initiator {
            shared,
            local,
            spi_i,
            phase: Phase::Idle,
            floated: false,
            started: None,
            prepared: None,
            delete_when_up: false,
            rng,
        }
    }

    /// Makes the first Diffie-Hellman key pair now, so that the setup time
    /// a driver stamps at [`start`](Self::start) begins when the
    /// IKE_SA_INIT is sent, not before the tester's own key generation
    /// (20 ms for modp2048 on a small machine: a batch of peers started
    /// together would otherwise count each other's key generation).
    pub(crate) fn prepare(&mut self) {
        let offered = self.shared.ike.groups();
        let first = offered.first().copied().unwrap_or(DhGroup::Modp2048);
        self.prepared = Some(DhPrivate::generate(first, &mut *self.rng));
    }

    pub(crate) fn spi_i(&self) -> u64 {
        self.spi_i
    }

    /// When the first IKE_SA_INIT was sent.
    pub(crate) fn started(&self) -> Option<Instant> {
        self.started
    }

    /// Whether IKE has moved to port 4500.
    pub(crate) fn floated(&self) -> bool {
        match &self.phase {
            Phase::Up(t) => t.floated,
            _ => self.floated,
        }
    }

    pub(crate) fn remote(&self) -> SocketAddr {
        let ports = self.shared.gateway_ports;
        let port = if self.floated() {
            ports.natt
        } else {
            ports.ike
        };
        SocketAddr::from((self.shared.gateway, port))
    }

    pub(crate) fn tunnel(&self) -> Option<&Tunnel> {
        match &self.phase {
            Phase::Up(t) => Some(t),
            _ => None,
        }
    }

    pub(crate) fn tunnel_mut(&mut self) -> Option<&mut Tunnel> {
        match &mut self.phase {
            Phase::Up(t) => Some(t),
            _ => None,
        }
    }

    /// The CHILD_SA, once established (and while it is up).
    pub(crate) fn child(&self) -> Option<&ChildSa> {
        self.tunnel().filter(|t| t.child_up()).map(|t| &t.child)
    }

    pub(crate) fn ike_up(&self) -> bool {
        self.tunnel().is_some_and(|t| t.ike_up())
    }

    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        match &self.phase {
            Phase::Init(_, r) | Phase::Auth(_, r) => Some(r.deadline),
            Phase::Up(t) => t.next_deadline(),
            _ => None,
        }
    }

    fn protocol_error(&self, detail: impl Into<String>) -> IkeError {
        IkeError::Protocol {
            addr: self.remote(),
            detail: detail.into(),
        }
    }

    /// Sends the first IKE_SA_INIT.
    pub(crate) fn start(&mut self, now: Instant, out: &mut Outbox) {
        let offered = self.shared.ike.groups();
        let first = offered.first().copied().unwrap_or(DhGroup::Modp2048);
        let (dh, public) = self
            .prepared
            .take()
            .unwrap_or_else(|| DhPrivate::generate(first, &mut *self.rng));
        // Faked as strongSwan's encap=yes does: a hash of nothing the
        // gateway can compute, so it sees linerate behind a NAT and
        // encapsulates.
        let nat_source = if self.shared.force_encap {
            random_bytes(&mut *self.rng, 20)
        } else {
            nat_hash(self.spi_i, 0, self.local.addr, self.local.ports.ike)
        };
        let mut state = Box::new(InitState {
            dh,
            public,
            ni: random_bytes(&mut *self.rng, 32),
            nat_source,
            cookie: None,
            tried: vec![first],
            cookies: 0,
            message: Vec::new(),
        });
        self.started = Some(now);
        let request = self.send_init(&mut state, now, out);
        self.phase = Phase::Init(state, request);
    }

    fn send_init(&self, state: &mut InitState, now: Instant, out: &mut Outbox) -> Request {
        let shared = &self.shared;
        let mut payloads = Vec::new();
        if let Some(c) = &state.cookie {
            payloads.push(Payload::Notify(Notify::new(notify::COOKIE, c.clone())));
        }
        payloads.extend([
            Payload::Sa(shared.ike.to_wire()),
            Payload::Ke {
                group: state.dh.group().id(),
                data: state.public.clone(),
            },
            Payload::Nonce(state.ni.clone()),
            Payload::Notify(Notify::new(
                notify::NAT_DETECTION_SOURCE_IP,
                state.nat_source.clone(),
            )),
            Payload::Notify(Notify::new(
                notify::NAT_DETECTION_DESTINATION_IP,
                nat_hash(self.spi_i, 0, shared.gateway, shared.gateway_ports.ike),
            )),
        ]);
        state.message = Message {
            header: Header::new(self.spi_i, 0, exchange::IKE_SA_INIT, flags::INITIATOR, 0),
            payloads,
        }
        .encode();
        Request::send(
            exchange::IKE_SA_INIT,
            0,
            Transmit::ike(false, &state.message),
            shared.retransmit,
            now,
            out,
        )
    }

    pub(crate) fn handle_timeout(&mut self, now: Instant, out: &mut Outbox) {
        let retransmit = self.shared.retransmit;
        let remote = self.remote();
        let failed = match &mut self.phase {
            Phase::Init(_, r) | Phase::Auth(_, r) => {
                if now >= r.deadline && !r.expire(retransmit, now, out) {
                    Some(r.no_answer(remote))
                } else {
                    None
                }
            }
            Phase::Up(t) => {
                t.handle_timeout(now, &mut *self.rng, out);
                None
            }
            _ => None,
        };
        if let Some(e) = failed {
            self.fail(e, out);
        }
    }

    fn fail(&mut self, e: IkeError, out: &mut Outbox) {
        self.phase = Phase::Closed;
        out.outputs.push_back(Output::Failed(e));
    }

    /// Takes an IKE message (without the non-ESP marker) from the
    /// gateway. False if it answered nothing and was no request.
    pub(crate) fn handle(&mut self, data: &[u8], now: Instant, out: &mut Outbox) -> bool {
        match &mut self.phase {
            Phase::Init(_, r) => {
                let spi_i = self.spi_i;
                let answer = Header::parse(data).is_ok_and(|h| {
                    h.spi_i == spi_i
                        && h.is_response()
                        && !h.from_initiator()
                        && h.exchange == exchange::IKE_SA_INIT
                        && h.message_id == 0
                });
                if !answer {
                    r.not_answers += 1;
                    return false;
                }
                let Phase::Init(state, _) = std::mem::replace(&mut self.phase, Phase::Idle) else {
                    return false;
                };
                self.init_answered(state, data, now, out);
                true
            }
            Phase::Auth(state, r) => {
                let Some(message) = state.ike.open_response(data, exchange::IKE_AUTH, r.id) else {
                    r.not_answers += 1;
                    return false;
                };
                let Phase::Auth(state, _) = std::mem::replace(&mut self.phase, Phase::Idle) else {
                    return false;
                };
                self.auth_answered(state, message, now, out);
                true
            }
            Phase::Up(t) => t.handle(data, now, &mut *self.rng, out),
            _ => false,
        }
    }

    fn init_answered(
        &mut self,
        mut state: Box<InitState>,
        data: &[u8],
        now: Instant,
        out: &mut Outbox,
    ) {
        let message = match Message::parse(data) {
            Ok(m) => m,
            Err(e) => return self.fail(self.protocol_error(format!("IKE_SA_INIT: {e}")), out),
        };
        let shared = Arc::clone(&self.shared);
        if let Some(n) = message.notify(notify::COOKIE) {
            state.cookies += 1;
            if state.cookies > 3 {
                return self.fail(
                    self.protocol_error("it asks for a new cookie again and again"),
                    out,
                );
            }
            state.cookie = Some(n.data.clone());
            let request = self.send_init(&mut state, now, out);
            self.phase = Phase::Init(state, request);
            return;
        }
        if let Some(n) = message.notify(notify::INVALID_KE_PAYLOAD) {
            let offered = shared.ike.groups();
            let asked = (n.data.len() >= 2).then(|| u16::from_be_bytes([n.data[0], n.data[1]]));
            let group = asked
                .and_then(DhGroup::from_id)
                .filter(|g| offered.contains(g) && !state.tried.contains(g));
            let Some(group) = group else {
                let detail =
                    invalid_ke_detail(asked, &offered, &state.tried, &shared.ike.to_string());
                return self.fail(IkeError::InvalidKe { detail }, out);
            };
            state.tried.push(group);
            (state.dh, state.public) = DhPrivate::generate(group, &mut *self.rng);
            let request = self.send_init(&mut state, now, out);
            self.phase = Phase::Init(state, request);
            return;
        }
        if let Some(n) = message.error() {
            let e = if n.kind == notify::NO_PROPOSAL_CHOSEN {
                IkeError::NoProposalChosen {
                    offered: shared.ike.to_string(),
                }
            } else {
                IkeError::Refused {
                    exchange: "IKE_SA_INIT".into(),
                    notify: notify::name(n.kind),
                }
            };
            return self.fail(e, out);
        }
        match self.init_keys(&state, &message, data) {
            Ok((ike, nat_traversal, udp_encap)) => {
                // IKE moves to port 4500 whenever the gateway does NAT
                // traversal (RFC 7296 §2.23 allows it without a NAT): ESP
                // in UDP uses the same ports, so a NAT on the way keeps
                // one mapping for both.
                self.floated = nat_traversal;
                self.send_auth(ike, state.message, data.to_vec(), udp_encap, now, out);
            }
            Err(e) => self.fail(e, out),
        }
    }

    /// The IKE SA's keys from the gateway's IKE_SA_INIT answer, and NAT
    /// detection: (the SA, NAT traversal, ESP in UDP).
    fn init_keys(
        &self,
        state: &InitState,
        message: &Message,
        _data: &[u8],
    ) -> Result<(IkeSa, bool, bool), IkeError> {
        let bad = |detail: &str| self.protocol_error(format!("IKE_SA_INIT: {detail}"));
        let shared = &self.shared;
        let spi_r = message.header.spi_r;
        if spi_r == 0 {
            return Err(bad("no responder SPI"));
        }
        let (mut sa, mut ke, mut nr) = (None, None, None);
        for p in &message.payloads {
            match p {
                Payload::Sa(proposals) => sa = Some(proposals),
                Payload::Ke { group, data } => ke = Some((*group, data)),
                Payload::Nonce(n) => nr = Some(n.clone()),
                _ => {}
            }
        }
        let sa = sa.ok_or_else(|| bad("no SA payload"))?;
        let suite: IkeSuite = shared
            .ike
            .select(sa)
            .ok_or_else(|| bad("the gateway chose a proposal that linerate did not offer"))?;
        if suite.group != state.dh.group() {
            return Err(bad(&format!(
                "the gateway chose {} without asking for its KE payload",
                suite.group.name()
            )));
        }
        let (group, gateway_public) = ke.ok_or_else(|| bad("no KE payload"))?;
        if group != suite.group.id() {
            return Err(bad(&format!("a KE payload of group {group}")));
        }
        let nr = nr.ok_or_else(|| bad("no nonce"))?;
        if !(16..=256).contains(&nr.len()) {
            return Err(bad(&format!("a nonce of {} bytes", nr.len())));
        }
        let shared_secret = state
            .dh
            .shared(gateway_public)
            .map_err(|e| bad(&format!("the gateway's KE payload: {e}")))?;
        let keys = ike_keys(
            suite.prf,
            suite.integrity,
            suite.encryption,
            &shared_secret,
            &state.ni,
            &nr,
            self.spi_i,
            spi_r,
        );
        // NAT detection (§2.23): a gateway that sends no NAT_DETECTION
        // payload has no NAT traversal; otherwise ESP goes in UDP when
        // either hash does not match (ours was faked when encapsulation is
        // forced).
        let hashes = |kind: u16| -> Vec<&Vec<u8>> {
            message
                .notifies()
                .filter(|n| n.kind == kind)
                .map(|n| &n.data)
                .collect()
        };
        let sources = hashes(notify::NAT_DETECTION_SOURCE_IP);
        let destinations = hashes(notify::NAT_DETECTION_DESTINATION_IP);
        let nat_traversal = !sources.is_empty() && !destinations.is_empty();
        let gateway_hash = nat_hash(self.spi_i, spi_r, shared.gateway, shared.gateway_ports.ike);
        let our_hash = nat_hash(self.spi_i, spi_r, self.local.addr, self.local.ports.ike);
        let nat = !sources.contains(&&gateway_hash) || !destinations.contains(&&our_hash);
        let ike = IkeSa {
            initiator: true,
            spi_i: self.spi_i,
            spi_r,
            suite,
            keys,
            ni: state.ni.clone(),
            nr,
            next_id: 1,
            peer_id: 0,
            last_answer: None,
        };
        Ok((
            ike,
            nat_traversal,
            nat_traversal && (nat || shared.force_encap),
        ))
    }

    /// IKE_AUTH (RFC 7296 §1.2) with the pre-shared key (§2.15) and the
    /// CHILD_SA (§1.3, §2.17).
    fn send_auth(
        &mut self,
        mut ike: IkeSa,
        init_request: Vec<u8>,
        init_response: Vec<u8>,
        udp_encap: bool,
        now: Instant,
        out: &mut Outbox,
    ) {
        let shared = Arc::clone(&self.shared);
        let spi_in = new_esp_spi(&mut *self.rng);
        let idi = self.local.identity();
        let auth = psk_auth(
            ike.suite.prf,
            shared.psk.bytes(),
            &ike.keys.sk_pi,
            &init_request,
            &ike.nr,
            &idi.payload_body(),
        );
        let mut payloads = vec![Payload::IdI(idi.clone())];
        if let Some(idr) = &shared.remote_id {
            payloads.push(Payload::IdR(idr.clone()));
        }
        payloads.extend([
            Payload::Auth {
                method: auth_method::SHARED_KEY_MIC,
                data: auth.to_vec(),
            },
            // linerate has no other SA with this gateway from this
            // address: it may drop what an earlier, killed run left (RFC
            // 7296 §2.4).
            Payload::Notify(Notify::new(notify::INITIAL_CONTACT, Vec::new())),
            Payload::Sa(vec![esp_proposal(shared.esp, spi_in, None)]),
            Payload::TsI(vec![self.local.ts]),
            Payload::TsR(vec![shared.remote_ts]),
        ]);
        let id = ike.next_id;
        ike.next_id += 1;
        let bytes = ike.seal(exchange::IKE_AUTH, false, id, &payloads, &mut *self.rng);
        let request = Request::send(
            exchange::IKE_AUTH,
            id,
            Transmit::ike(self.floated, &bytes),
            shared.retransmit,
            now,
            out,
        );
        self.phase = Phase::Auth(
            Box::new(AuthState {
                ike,
                init_response,
                spi_in,
                idi,
                udp_encap,
            }),
            request,
        );
    }

    fn auth_answered(
        &mut self,
        state: Box<AuthState>,
        message: Message,
        now: Instant,
        out: &mut Outbox,
    ) {
        let shared = Arc::clone(&self.shared);
        let AuthState {
            ike,
            init_response,
            spi_in,
            idi,
            udp_encap,
        } = *state;
        if message.notify(notify::AUTHENTICATION_FAILED).is_some() {
            return self.fail(
                IkeError::AuthenticationFailed {
                    identity: idi.to_string(),
                },
                out,
            );
        }
        let (mut idr, mut auth, mut sa, mut tsi, mut tsr) = (None, None, None, None, None);
        for p in &message.payloads {
            match p {
                Payload::IdR(id) => idr = Some(id),
                Payload::Auth { method, data } => auth = Some((*method, data)),
                Payload::Sa(proposals) => sa = Some(proposals),
                Payload::TsI(list) => tsi = Some(list),
                Payload::TsR(list) => tsr = Some(list),
                _ => {}
            }
        }
        let Some((method, auth)) = auth else {
            // No IKE SA: the gateway refused IKE_AUTH as a whole.
            let e = match message.error() {
                Some(n) => IkeError::Refused {
                    exchange: "IKE_AUTH".into(),
                    notify: notify::name(n.kind),
                },
                None => self.protocol_error("IKE_AUTH: an answer without AUTH payload"),
            };
            return self.fail(e, out);
        };
        let placeholder = |spi| SaKeys {
            suite: shared.esp,
            spi,
            encryption_key: Vec::new(),
            integrity_key: Vec::new(),
        };
        let child = ChildSa {
            outbound: placeholder(0),
            inbound: placeholder(spi_in),
            local_ts: Vec::new(),
            remote_ts: Vec::new(),
            local: SocketAddrV4::new(self.local.addr, self.local.ports.natt),
            remote: SocketAddrV4::new(shared.gateway, shared.gateway_ports.natt),
            udp_encap,
        };
        let remote = self.remote();
        let mut tunnel = Box::new(Tunnel::new(
            ike,
            child,
            shared.esp,
            None,
            shared.retransmit,
            self.floated,
            remote,
            now,
        ));
        // From here the gateway has an IKE SA: every failure deletes it
        // first.
        let checked = (|| {
            let Some(idr) = idr else {
                return Err(self.protocol_error("IKE_AUTH: an answer without IDr payload"));
            };
            if let Some(expected) = &shared.remote_id {
                if idr != expected {
                    return Err(IkeError::GatewayIdentity {
                        expected: expected.to_string(),
                        got: idr.to_string(),
                    });
                }
            }
            if method != auth_method::SHARED_KEY_MIC {
                return Err(self.protocol_error(format!(
                    "IKE_AUTH: the gateway authenticates with method {method}, not a pre-shared key (2)"
                )));
            }
            let expected = psk_auth(
                tunnel.ike.suite.prf,
                shared.psk.bytes(),
                &tunnel.ike.keys.sk_pr,
                &init_response,
                &tunnel.ike.ni,
                &idr.payload_body(),
            );
            if !bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..], &auth[..])) {
                return Err(IkeError::GatewayAuthentication);
            }
            if let Some(n) = message.error() {
                return Err(match n.kind {
                    notify::NO_PROPOSAL_CHOSEN => IkeError::NoProposalChosen {
                        offered: format!("ESP {}", shared.esp),
                    },
                    notify::TS_UNACCEPTABLE => IkeError::TsUnacceptable {
                        local: self.local.ts.to_string(),
                        remote: shared.remote_ts.to_string(),
                    },
                    kind => IkeError::Refused {
                        exchange: "the CHILD_SA in IKE_AUTH".into(),
                        notify: notify::name(kind),
                    },
                });
            }
            if message.notify(notify::USE_TRANSPORT_MODE).is_some() {
                return Err(self.protocol_error(
                    "IKE_AUTH: transport mode, where linerate asked for tunnel mode",
                ));
            }
            let Some(spi_out) = sa.and_then(|sa| accepted_esp(shared.esp, None, sa)) else {
                return Err(self.protocol_error(format!(
                    "IKE_AUTH: no ESP proposal, or not the one offered ({})",
                    shared.esp
                )));
            };
            let (Some(tsi), Some(tsr)) =
                (tsi.filter(|l| !l.is_empty()), tsr.filter(|l| !l.is_empty()))
            else {
                return Err(self.protocol_error("IKE_AUTH: no traffic selectors"));
            };
            Ok((spi_out, tsi.clone(), tsr.clone()))
        })();
        match checked {
            Ok((spi_out, tsi, tsr)) => {
                let ni = tunnel.ike.ni.clone();
                let nr = tunnel.ike.nr.clone();
                let (outbound, inbound) = child_sa_keys_ordered(
                    &tunnel.ike,
                    shared.esp,
                    None,
                    &ni,
                    &nr,
                    spi_out,
                    spi_in,
                    true,
                );
                tunnel.child.outbound = outbound;
                tunnel.child.inbound = inbound;
                tunnel.child.local_ts = tsi;
                tunnel.child.remote_ts = tsr;
                tunnel.set_child_up();
                if self.delete_when_up {
                    // Deleted while IKE_AUTH was on its way: up at the
                    // gateway now, so deleted at once (Output::Deleted).
                    tunnel.delete(None, now, &mut *self.rng, out);
                    self.phase = Phase::Up(tunnel);
                    return;
                }
                self.phase = Phase::Up(tunnel);
                out.outputs.push_back(Output::Established);
            }
            Err(e) => {
                tunnel.delete(Some(e), now, &mut *self.rng, out);
                self.phase = Phase::Up(tunnel);
            }
        }
    }

    /// Deletes the IKE SA (`Output::Deleted` at the end). A handshake
    /// waiting for IKE_SA_INIT's answer is abandoned; one waiting for
    /// IKE_AUTH's is deleted once answered (`Output::Failed` if it fails).
    pub(crate) fn delete(&mut self, now: Instant, out: &mut Outbox) {
        match &mut self.phase {
            Phase::Up(t) if t.ike_up() => t.delete(None, now, &mut *self.rng, out),
            // The gateway has only a half-open IKE SA, which it times out.
            Phase::Init(..) => self.phase = Phase::Closed,
            // IKE_AUTH is on its way: its answer (or its end without
            // one) ends the handshake, and a tunnel it brought up is
            // deleted then (RFC 7296 §2.3: one request at a time).
            Phase::Auth(..) => self.delete_when_up = true,
            _ => {}
        }
    }

    /// Whether a Delete waits for its answer, or for IKE_AUTH's: the
    /// initiator still has something to end at the gateway.
    pub(crate) fn deleting(&self) -> bool {
        match &self.phase {
            Phase::Auth(..) => self.delete_when_up,
            Phase::Up(t) => t.deleting(),
            _ => false,
        }
    }

    /// The Delete once, without waiting (when dropped).
    pub(crate) fn delete_once(&mut self, out: &mut Outbox) {
        if let Phase::Up(t) = &mut self.phase {
            t.delete_once(&mut *self.rng, out);
        }
    }

    pub(crate) fn rekey_ike(&mut self, now: Instant, out: &mut Outbox) -> Result<(), IkeError> {
        match &mut self.phase {
            Phase::Up(t) => t.rekey_ike(now, &mut *self.rng, out),
            _ => Err(IkeError::Deleted {
                gateway: self.shared.gateway,
            }),
        }
    }

    pub(crate) fn rekey_child(&mut self, now: Instant, out: &mut Outbox) -> Result<(), IkeError> {
        match &mut self.phase {
            Phase::Up(t) => t.rekey_child(now, &mut *self.rng, out),
            _ => Err(IkeError::Deleted {
                gateway: self.shared.gateway,
            }),
        }
    }
}

/// Why an INVALID_KE_PAYLOAD cannot be followed, and what to do: the
/// group it names (`asked`, an IANA number) against the groups linerate
/// `offered` (its IKE proposal, `proposal`) and those it already sent a
/// KE payload of (`tried`).
fn invalid_ke_detail(
    asked: Option<u16>,
    offered: &[DhGroup],
    tried: &[DhGroup],
    proposal: &str,
) -> String {
    let Some(id) = asked else {
        return format!(
            "it names no group, as RFC 7296 §1.2 asks it to: check that the gateway's IKE proposal has a group of {proposal}"
        );
    };
    let Some(group) = DhGroup::from_id(id) else {
        return format!(
            "it asks for group {id}, which linerate does not implement: give the gateway a group of {proposal}, or give --ike a group linerate has"
        );
    };
    let named = format!("group {id} ({})", group.name());
    if tried.contains(&group) {
        return format!(
            "it asks for {named}, the group of the KE payload linerate sent: the gateway contradicts itself; check its IKE proposal and its logs"
        );
    }
    debug_assert!(!offered.contains(&group));
    format!(
        "it asks for {named}, which {proposal} does not offer: add it to the IKE proposal (--ike)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ResponderConfig;
    use crate::crypto::SeededRng;
    use crate::responder::ResponderMachine;
    use crate::test_clock::t0;
    use crate::tunnel::Output;
    use std::net::SocketAddrV4;

    /// Carries the initiator's datagrams to the responder and its answers
    /// back (without the non-ESP marker on 4500), until both are quiet.
    fn shuttle(i: &mut Initiator, r: &mut ResponderMachine, out: &mut Outbox, from: SocketAddrV4) {
        let now = t0();
        for _ in 0..10 {
            let sent: Vec<_> = out.transmits.drain(..).collect();
            if sent.is_empty() {
                return;
            }
            for t in sent {
                r.handle(t.natt, from, &t.data, now);
            }
            for d in r.take_datagrams() {
                let data = if d.natt { &d.data[4..] } else { &d.data[..] };
                i.handle(data, now, out);
            }
        }
    }

    /// A run interrupted while its IKE_AUTH is on the way (issue 41: one
    /// tunnel of 300 stayed ESTABLISHED at the gateway, while linerate said
    /// all were deleted): the answer brings the tunnel up at the gateway,
    /// so the initiator deletes it then, and reports it deleted, never
    /// established.
    #[test]
    fn a_handshake_deleted_during_ike_auth_is_deleted_at_the_gateway() {
        let net = |t: &str| TrafficSelector::parse(t).unwrap();
        let psk = "test key";
        let ike = IkeProposals::parse("aes128-sha256-x25519").unwrap();
        let gateway = Ipv4Addr::new(192, 0, 2, 1);
        let mut responder = ResponderMachine::new(
            ResponderConfig {
                local: gateway,
                ports: Ports {
                    ike: 500,
                    natt: 4500,
                },
                local_id: None,
                psk: Psk::new(psk),
                ike: ike.clone(),
                esp: EspSuite::Aes128Gcm16,
                local_ts: net("198.19.0.0/24"),
                remote_ts: net("198.18.0.0/16"),
                retransmit: Retransmit::default(),
            },
            t0(),
            Box::new(SeededRng::new(2)),
        );
        let peer = Ipv4Addr::new(192, 0, 2, 2);
        let shared = Arc::new(Shared {
            gateway,
            gateway_ports: Ports {
                ike: 500,
                natt: 4500,
            },
            remote_id: None,
            psk: Psk::new(psk),
            ike,
            esp: EspSuite::Aes128Gcm16,
            remote_ts: net("198.19.0.0/24"),
            retransmit: Retransmit::default(),
            force_encap: true,
        });
        let local = Local {
            addr: peer,
            ports: Ports {
                ike: 500,
                natt: 4500,
            },
            id: None,
            ts: net("198.18.1.0/24"),
        };
        let mut initiator = Initiator::new(shared, local, Box::new(SeededRng::new(1)));
        let mut out = Outbox::default();
        let now = t0();
        initiator.start(now, &mut out);
        // IKE_SA_INIT there and back; IKE_AUTH is sent, not yet delivered.
        let init: Vec<_> = out.transmits.drain(..).collect();
        for t in init {
            responder.handle(t.natt, SocketAddrV4::new(peer, 500), &t.data, now);
        }
        for d in responder.take_datagrams() {
            let data = if d.natt { &d.data[4..] } else { &d.data[..] };
            initiator.handle(data, now, &mut out);
        }
        assert!(matches!(initiator.phase, Phase::Auth(..)), "IKE_AUTH sent");
        initiator.delete(now, &mut out);
        assert!(initiator.deleting(), "the handshake still has to end");
        let from = SocketAddrV4::new(peer, 4500);
        let auth: Vec<_> = out.transmits.drain(..).collect();
        for t in auth {
            responder.handle(t.natt, from, &t.data, now);
        }
        assert_eq!(responder.established(), 1, "IKE_AUTH brought it up");
        for d in responder.take_datagrams() {
            let data = if d.natt { &d.data[4..] } else { &d.data[..] };
            initiator.handle(data, now, &mut out);
        }
        shuttle(&mut initiator, &mut responder, &mut out, from);
        assert_eq!(responder.established(), 0, "the Delete took it down");
        let outputs: Vec<_> = out.outputs.drain(..).collect();
        assert!(
            outputs.iter().any(|o| matches!(o, Output::Deleted(Ok(())))),
            "{outputs:?}"
        );
        assert!(!outputs.iter().any(|o| matches!(o, Output::Established)));
        assert!(!initiator.deleting());
    }

    /// An initiator of `group` whose randomness is `SeededRng::new(seed)`.
    fn seeded(group: &str, seed: u64) -> Initiator {
        let net = |t: &str| TrafficSelector::parse(t).unwrap();
        let shared = Arc::new(Shared {
            gateway: Ipv4Addr::new(192, 0, 2, 1),
            gateway_ports: Ports::default(),
            remote_id: None,
            psk: Psk::new("test key"),
            ike: IkeProposals::parse(&format!("aes128-sha256-{group}")).unwrap(),
            esp: EspSuite::Aes128Gcm16,
            remote_ts: net("198.19.0.0/24"),
            retransmit: Retransmit::default(),
            force_encap: true,
        });
        let local = Local {
            addr: Ipv4Addr::new(192, 0, 2, 2),
            ports: Ports::default(),
            id: None,
            ts: net("198.18.1.0/24"),
        };
        Initiator::new(shared, local, Box::new(SeededRng::new(seed)))
    }

    /// The initiator takes its randomness from its caller: two initiators
    /// given the same seeded source send byte-identical IKE_SA_INITs (SPI,
    /// KE, nonce, the faked NAT hash), in every group; another seed, another
    /// message.
    #[test]
    fn a_seeded_random_source_gives_a_byte_identical_ike_sa_init() {
        let now = t0();
        let first = |group: &str, seed: u64| {
            let mut i = seeded(group, seed);
            let mut out = Outbox::default();
            i.start(now, &mut out);
            let sent: Vec<_> = out.transmits.drain(..).collect();
            assert_eq!(sent.len(), 1);
            assert!(!sent[0].natt);
            sent[0].data.clone()
        };
        for group in ["modp2048", "ecp256", "x25519"] {
            let a = first(group, 42);
            assert_eq!(a, first(group, 42), "{group}");
            assert_ne!(a, first(group, 43), "{group}");
            let m = Message::parse(&a).unwrap();
            assert_eq!(m.header.exchange, exchange::IKE_SA_INIT);
        }
    }

    /// An INVALID_KE_PAYLOAD linerate cannot follow says what happened:
    /// a group not offered, the group already sent, an unknown one, none.
    #[test]
    fn an_invalid_ke_payload_that_cannot_be_followed_is_explained() {
        let offered = [DhGroup::from_id(31).unwrap()];
        let proposal = "aes128-sha256-x25519";
        let not_offered = invalid_ke_detail(Some(14), &offered, &offered, proposal);
        assert!(
            not_offered
                .contains("group 14 (modp2048), which aes128-sha256-x25519 does not offer: add it"),
            "{not_offered}"
        );
        let same = invalid_ke_detail(Some(31), &offered, &offered, proposal);
        assert!(
            same.contains("group 31 (x25519), the group of the KE payload linerate sent"),
            "{same}"
        );
        assert!(!same.contains("add it"), "{same}");
        let unknown = invalid_ke_detail(Some(999), &offered, &offered, proposal);
        assert!(
            unknown.contains("group 999, which linerate does not implement"),
            "{unknown}"
        );
        let none = invalid_ke_detail(None, &offered, &offered, proposal);
        assert!(none.contains("names no group"), "{none}");
        assert!(!none.contains("(none named)"), "{none}");
    }
}
