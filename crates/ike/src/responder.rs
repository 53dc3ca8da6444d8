//! linerate as the IKEv2 responder: IKE_SA_INIT and IKE_AUTH answered
//! with a pre-shared key and one CHILD_SA in tunnel mode, the initiator's
//! traffic selectors narrowed to what the responder is configured with.
//! The protocol is sans-IO ([`ResponderMachine`]: datagrams, their
//! addresses and the time in, datagrams out; its randomness given to
//! it); the socket driver `crate::io::responder::Responder` puts it on a
//! pair of sockets for any number of initiators.
//!
//! Each established tunnel is the same `Tunnel` (tunnel.rs) as the
//! initiator's, so the initiators' liveness checks, Deletes and CHILD_SA
//! rekeys are answered.

use std::collections::HashMap;
use std::net::{SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::config::ResponderConfig;
use crate::crypto::{
    ike_keys, nat_hash, psk_auth, random_bytes, random_u64, BoxedRng, DhPrivate, Rng,
};
use crate::error::IkeError;
use crate::event::Event;
use crate::ike_sa::{receiver_spi, IkeSa};
use crate::protect::open;
use crate::sa::ChildSa;
use crate::tunnel::{
    child_sa_keys_ordered, choose_esp, esp_proposal, new_esp_spi, Outbox, Output, Tunnel,
    NON_ESP_MARKER,
};
use crate::wire::{
    auth_method, exchange, flags, notify, Header, Identity, Message, Notify, Payload,
    TrafficSelector,
};

/// Something that happened to one initiator's tunnel.
#[derive(Debug)]
pub enum ResponderEvent {
    /// IKE_AUTH answered: the CHILD_SA is installed.
    Established { peer: SocketAddrV4, spi_r: u64 },
    /// The initiator's IKE_AUTH was refused (the error says why; it was
    /// answered with the notify named).
    Failed { peer: SocketAddrV4, error: IkeError },
    /// A request of the initiator on an established tunnel, answered.
    Event {
        peer: SocketAddrV4,
        spi_r: u64,
        event: Event,
    },
}

/// A datagram the responder sends: from its port 500 (`natt` false) or
/// 4500 to `to`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    pub natt: bool,
    pub to: SocketAddrV4,
    pub data: Vec<u8>,
}

/// An initiator between IKE_SA_INIT and IKE_AUTH.
struct HalfOpen {
    ike: IkeSa,
    init_request: Vec<u8>,
    init_response: Vec<u8>,
    udp_encap: bool,
    created: Instant,
}

enum Entry {
    HalfOpen(Box<HalfOpen>),
    Up {
        tunnel: Box<Tunnel>,
        /// Where the initiator's IKE comes from on 500 and 4500.
        peer_ike: SocketAddrV4,
        peer_natt: SocketAddrV4,
    },
}

/// How long a half-open IKE SA waits for IKE_AUTH.
const HALF_OPEN_LIFETIME: Duration = Duration::from_secs(30);

/// The responder's protocol for any number of initiators, without
/// sockets.
pub struct ResponderMachine {
    config: Arc<ResponderConfig>,
    /// By our SPI (every message after IKE_SA_INIT names it).
    sas: HashMap<u64, Entry>,
    /// Our SPI of an IKE SA that a rekey replaced -> our SPI of the new
    /// one (its key in `sas`), until the old one is deleted: the
    /// initiator's Delete of the old SA comes on the old SPI.
    rekeyed: HashMap<u64, u64>,
    /// IKE_SA_INIT requests seen: (initiator's SPI, its address) -> ours,
    /// so a retransmitted request gets the same answer.
    inits: HashMap<(u64, SocketAddrV4), u64>,
    out: Outbox,
    events: Vec<ResponderEvent>,
    sent: Vec<Datagram>,
    last_sweep: Instant,
    /// ESP in UDP that arrived, kept for checks when asked.
    keep_esp: bool,
    esp: Vec<(SocketAddrV4, Vec<u8>)>,
    /// Its SPIs, nonces, IVs and Diffie-Hellman values come from here.
    rng: BoxedRng,
}

impl ResponderMachine {
    /// A responder started at `now` (the clock its half-open SAs are
    /// swept by), whose randomness comes from `rng`: the operating
    /// system's source outside tests (`rand_core`'s, re-exported as
    /// `linerate_ike::rand_core`).
    pub fn new(
        config: ResponderConfig,
        now: Instant,
        rng: Box<dyn rand_core::CryptoRngCore + Send>,
    ) -> ResponderMachine {
        ResponderMachine {
            config: Arc::new(config),
            sas: HashMap::new(),
            rekeyed: HashMap::new(),
            inits: HashMap::new(),
            out: Outbox::default(),
            events: Vec::new(),
            sent: Vec::new(),
            last_sweep: now,
            keep_esp: false,
            esp: Vec::new(),
            rng,
        }
    }

    /// The configuration it answers with (the ports a driver bound).
    pub(crate) fn config(&self) -> &ResponderConfig {
        &self.config
    }

    /// Keeps up to 64 ESP packets that arrive in UDP on port 4500 (SPI
    /// first), for functional checks: [`ResponderMachine::take_esp`].
    pub fn keep_esp(&mut self, keep: bool) {
        self.keep_esp = keep;
    }

    /// The ESP packets kept, with their sources.
    pub fn take_esp(&mut self) -> Vec<(SocketAddrV4, Vec<u8>)> {
        std::mem::take(&mut self.esp)
    }

    /// Datagrams to send, in order.
    pub fn take_datagrams(&mut self) -> Vec<Datagram> {
        std::mem::take(&mut self.sent)
    }

    /// What happened since the last call.
    pub fn take_events(&mut self) -> Vec<ResponderEvent> {
        std::mem::take(&mut self.events)
    }

    /// Tunnels with their CHILD_SA up.
    pub fn established(&self) -> usize {
        self.sas
            .values()
            .filter(|e| matches!(e, Entry::Up { tunnel, .. } if tunnel.child_up()))
            .count()
    }

    /// The CHILD_SA of the tunnel with our SPI `spi_r`.
    pub fn child(&self, spi_r: u64) -> Option<&ChildSa> {
        match self.sas.get(&spi_r)? {
            Entry::Up { tunnel, .. } if tunnel.child_up() => Some(&tunnel.child),
            _ => None,
        }
    }

    /// Every established tunnel: the initiator's address, our SPI, the
    /// CHILD_SA.
    pub fn tunnels(&self) -> impl Iterator<Item = (SocketAddrV4, u64, &ChildSa)> {
        self.sas.iter().filter_map(|(spi, e)| match e {
            Entry::Up {
                tunnel, peer_ike, ..
            } if tunnel.child_up() => Some((*peer_ike, *spi, &tunnel.child)),
            _ => None,
        })
    }

    /// Takes a datagram that came to `natt` (4500) or 500 from `from`.
    /// On 4500, IKE follows the non-ESP marker; anything else there (ESP,
    /// keepalives) is not IKE's and ignored.
    pub fn handle(&mut self, natt: bool, from: SocketAddrV4, datagram: &[u8], now: Instant) {
        let data = if natt {
            if datagram.len() <= 4 || datagram[..4] != NON_ESP_MARKER {
                if self.keep_esp && datagram.len() >= 8 && self.esp.len() < 64 {
                    self.esp.push((from, datagram.to_vec()));
                }
                return;
            }
            &datagram[4..]
        } else {
            datagram
        };
        let Ok(h) = Header::parse(data) else {
            return;
        };
        if h.exchange == exchange::IKE_SA_INIT && h.spi_r == 0 {
            if !h.is_response() && h.from_initiator() && h.message_id == 0 {
                self.init(natt, from, &h, data, now);
            }
        } else if let Some((spi_r, entry)) = {
            let ours = receiver_spi(&h);
            let key = self.rekeyed.get(&ours).copied().unwrap_or(ours);
            self.sas.get_mut(&key).map(|e| (key, e))
        } {
            match entry {
                Entry::HalfOpen(_) => {
                    if h.exchange == exchange::IKE_AUTH && h.message_id == 1 && !h.is_response() {
                        self.auth(natt, from, &h, data, now);
                    }
                }
                Entry::Up {
                    tunnel,
                    peer_ike,
                    peer_natt,
                } => {
                    if natt {
                        *peer_natt = from;
                    } else {
                        *peer_ike = from;
                    }
                    tunnel.handle(data, now, &mut *self.rng, &mut self.out);
                    self.flush(spi_r);
                }
            }
        }
        if now.duration_since(self.last_sweep) > HALF_OPEN_LIFETIME {
            self.sweep(now);
        }
    }

    /// Drops half-open SAs that never got their IKE_AUTH.
    fn sweep(&mut self, now: Instant) {
        self.last_sweep = now;
        self.sas.retain(|_, e| match e {
            Entry::HalfOpen(h) => now.duration_since(h.created) < HALF_OPEN_LIFETIME,
            Entry::Up { .. } => true,
        });
        let sas = &self.sas;
        self.inits.retain(|_, spi| sas.contains_key(spi));
    }

    /// Sends a tunnel's datagrams and takes its outputs.
    fn flush(&mut self, spi_r: u64) {
        let Some(Entry::Up {
            peer_ike,
            peer_natt,
            ..
        }) = self.sas.get(&spi_r)
        else {
            self.out.transmits.clear();
            self.out.outputs.clear();
            return;
        };
        let (peer_ike, peer_natt) = (*peer_ike, *peer_natt);
        while let Some(t) = self.out.transmits.pop_front() {
            self.sent.push(Datagram {
                natt: t.natt,
                to: if t.natt { peer_natt } else { peer_ike },
                data: t.data,
            });
        }
        let mut gone = false;
        let mut spi_r = spi_r;
        while let Some(o) = self.out.outputs.pop_front() {
            if let Output::Event(event) = o {
                gone |= event == Event::IkeDeleted;
                if event == Event::IkeRekeyed {
                    spi_r = self.rekeyed_to(spi_r);
                }
                self.events.push(ResponderEvent::Event {
                    peer: peer_ike,
                    spi_r,
                    event,
                });
            }
        }
        if gone {
            self.sas.remove(&spi_r);
            self.rekeyed.retain(|_, new| *new != spi_r);
        }
    }

    /// After the IKE SA kept under `old` was rekeyed: the tunnel moves to
    /// the key of its new SPI, the old one routes to it until deleted
    /// (and the SAs rekeyed before it are gone). The new key.
    fn rekeyed_to(&mut self, old: u64) -> u64 {
        let Some(entry) = self.sas.remove(&old) else {
            return old;
        };
        let new = match &entry {
            Entry::Up { tunnel, .. } => tunnel.own_spis().0,
            Entry::HalfOpen(_) => old,
        };
        self.sas.insert(new, entry);
        self.rekeyed.retain(|_, to| *to != old);
        if new != old {
            self.rekeyed.insert(old, new);
        }
        new
    }

    fn send(&mut self, natt: bool, to: SocketAddrV4, message: &[u8]) {
        let t = crate::tunnel::Transmit::ike(natt, message);
        self.sent.push(Datagram {
            natt,
            to,
            data: t.data,
        });
    }

    /// An IKE_SA_INIT request: answered with our SA, KE, Nr and NAT
    /// detection, or with INVALID_KE_PAYLOAD / NO_PROPOSAL_CHOSEN (no
    /// state kept for those).
    fn init(&mut self, natt: bool, from: SocketAddrV4, h: &Header, data: &[u8], now: Instant) {
        if let Some(spi_r) = self.inits.get(&(h.spi_i, from)) {
            // A retransmission: the same answer again.
            if let Some(Entry::HalfOpen(half)) = self.sas.get(spi_r) {
                if half.init_request == data {
                    let bytes = half.init_response.clone();
                    self.send(natt, from, &bytes);
                }
            }
            return;
        }
        let Ok(request) = Message::parse(data) else {
            return;
        };
        let (mut sa, mut ke, mut ni) = (None, None, None);
        for p in &request.payloads {
            match p {
                Payload::Sa(list) => sa = Some(list),
                Payload::Ke { group, data } => ke = Some((*group, data)),
                Payload::Nonce(n) => ni = Some(n),
                _ => {}
            }
        }
        let refuse = |this: &mut Self, kind: u16, data: Vec<u8>| {
            let answer = Message {
                header: Header::new(h.spi_i, 0, exchange::IKE_SA_INIT, flags::RESPONSE, 0),
                payloads: vec![Payload::Notify(Notify::new(kind, data))],
            }
            .encode();
            this.send(natt, from, &answer);
        };
        let (Some(sa), Some((group, public)), Some(ni)) = (sa, ke, ni) else {
            return refuse(self, notify::INVALID_SYNTAX, Vec::new());
        };
        if !(16..=256).contains(&ni.len()) {
            return refuse(self, notify::INVALID_SYNTAX, Vec::new());
        }
        let config = Arc::clone(&self.config);
        let Some((chosen, suite)) = config.ike.choose(sa, group) else {
            return refuse(self, notify::NO_PROPOSAL_CHOSEN, Vec::new());
        };
        if suite.group.id() != group {
            return refuse(
                self,
                notify::INVALID_KE_PAYLOAD,
                suite.group.id().to_be_bytes().to_vec(),
            );
        }
        let (dh, our_public) = DhPrivate::generate(suite.group, &mut *self.rng);
        let Ok(shared) = dh.shared(public) else {
            return refuse(self, notify::INVALID_SYNTAX, Vec::new());
        };
        let spi_r = loop {
            let spi = random_u64(&mut *self.rng);
            if spi != 0 && !self.sas.contains_key(&spi) {
                break spi;
            }
        };
        let nr = random_bytes(&mut *self.rng, 32);
        let keys = ike_keys(
            suite.prf,
            suite.integrity,
            suite.encryption,
            &shared,
            ni,
            &nr,
            h.spi_i,
            spi_r,
        );
        // NAT detection (RFC 7296 §2.23): the initiator's hashes of its
        // source and of our address, against what arrived. Either one
        // different (a NAT, or one faked to force encapsulation): ESP in
        // UDP.
        let local_port = if natt {
            config.ports.natt
        } else {
            config.ports.ike
        };
        let theirs = nat_hash(h.spi_i, 0, *from.ip(), from.port());
        let ours = nat_hash(h.spi_i, 0, config.local, local_port);
        let hashes = |kind: u16| -> Vec<&Vec<u8>> {
            request
                .notifies()
                .filter(|n| n.kind == kind)
                .map(|n| &n.data)
                .collect()
        };
        let sources = hashes(notify::NAT_DETECTION_SOURCE_IP);
        let destinations = hashes(notify::NAT_DETECTION_DESTINATION_IP);
        let nat_traversal = !sources.is_empty() && !destinations.is_empty();
        let nat = !sources.contains(&&theirs) || !destinations.contains(&&ours);
        let mut payloads = vec![
            Payload::Sa(vec![chosen]),
            Payload::Ke {
                group: suite.group.id(),
                data: our_public,
            },
            Payload::Nonce(nr.clone()),
        ];
        if nat_traversal {
            payloads.push(Payload::Notify(Notify::new(
                notify::NAT_DETECTION_SOURCE_IP,
                nat_hash(h.spi_i, spi_r, config.local, local_port),
            )));
            payloads.push(Payload::Notify(Notify::new(
                notify::NAT_DETECTION_DESTINATION_IP,
                nat_hash(h.spi_i, spi_r, *from.ip(), from.port()),
            )));
        }
        let response = Message {
            header: Header::new(h.spi_i, spi_r, exchange::IKE_SA_INIT, flags::RESPONSE, 0),
            payloads,
        }
        .encode();
        self.send(natt, from, &response);
        let ike = IkeSa {
            initiator: false,
            spi_i: h.spi_i,
            spi_r,
            suite,
            keys,
            ni: ni.clone(),
            nr,
            next_id: 0,
            peer_id: 1,
            last_answer: None,
        };
        self.inits.insert((h.spi_i, from), spi_r);
        self.sas.insert(
            spi_r,
            Entry::HalfOpen(Box::new(HalfOpen {
                ike,
                init_request: data.to_vec(),
                init_response: response,
                udp_encap: nat_traversal && nat,
                created: now,
            })),
        );
    }

    /// IKE_AUTH: the initiator's AUTH verified with the key, ours sent,
    /// the CHILD_SA with its selectors narrowed; AUTHENTICATION_FAILED
    /// (and no SA) when the AUTH does not verify.
    fn auth(&mut self, natt: bool, from: SocketAddrV4, h: &Header, data: &[u8], now: Instant) {
        let Some(Entry::HalfOpen(half)) = self.sas.get(&h.spi_r) else {
            return;
        };
        if h.spi_i != half.ike.spi_i || !h.from_initiator() {
            return;
        }
        let Ok(request) = open(&half.ike.in_keys(), data) else {
            return;
        };
        let Some(Entry::HalfOpen(half)) = self.sas.remove(&h.spi_r) else {
            return;
        };
        let config = Arc::clone(&self.config);
        let mut ike = half.ike;
        let (mut idi, mut auth, mut sa, mut tsi, mut tsr) = (None, None, None, None, None);
        for p in &request.payloads {
            match p {
                Payload::IdI(id) => idi = Some(id),
                Payload::Auth { method, data } => auth = Some((*method, data)),
                Payload::Sa(list) => sa = Some(list),
                Payload::TsI(l) => tsi = Some(l),
                Payload::TsR(l) => tsr = Some(l),
                _ => {}
            }
        }
        let reply = |ike: &IkeSa, payloads: &[Payload], rng: Rng<'_>| {
            ike.seal(exchange::IKE_AUTH, true, 1, payloads, rng)
        };
        let (Some(idi), Some((method, auth))) = (idi, auth) else {
            let bytes = reply(
                &ike,
                &[Payload::Notify(Notify::new(
                    notify::INVALID_SYNTAX,
                    Vec::new(),
                ))],
                &mut *self.rng,
            );
            self.send(natt, from, &bytes);
            return;
        };
        let expected = psk_auth(
            ike.suite.prf,
            config.psk.bytes(),
            &ike.keys.sk_pi,
            &half.init_request,
            &ike.nr,
            &idi.payload_body(),
        );
        let verified = method == auth_method::SHARED_KEY_MIC
            && bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..], &auth[..]));
        if !verified {
            let bytes = reply(
                &ike,
                &[Payload::Notify(Notify::new(
                    notify::AUTHENTICATION_FAILED,
                    Vec::new(),
                ))],
                &mut *self.rng,
            );
            self.send(natt, from, &bytes);
            self.events.push(ResponderEvent::Failed {
                peer: from,
                error: IkeError::InitiatorAuthentication {
                    peer: SocketAddr::V4(from),
                    identity: idi.to_string(),
                },
            });
            return;
        }
        let idr = config
            .local_id
            .clone()
            .unwrap_or(Identity::Ipv4(config.local));
        let our_auth = psk_auth(
            ike.suite.prf,
            config.psk.bytes(),
            &ike.keys.sk_pr,
            &half.init_response,
            &ike.ni,
            &idr.payload_body(),
        );
        let mut payloads = vec![
            Payload::IdR(idr),
            Payload::Auth {
                method: auth_method::SHARED_KEY_MIC,
                data: our_auth.to_vec(),
            },
        ];
        // The CHILD_SA: a suite we take, and the selectors narrowed.
        let esp = sa.and_then(|sa| choose_esp(config.esp, sa));
        let narrow = |list: Option<&Vec<TrafficSelector>>, limit: &TrafficSelector| {
            list.into_iter()
                .flatten()
                .filter_map(|ts| ts.narrow(limit))
                .collect::<Vec<_>>()
        };
        let tsi = narrow(tsi, &config.remote_ts);
        let tsr = narrow(tsr, &config.local_ts);
        let peer = SocketAddr::V4(from);
        let refused = match (&esp, tsi.is_empty() || tsr.is_empty()) {
            (None, _) => Some(notify::NO_PROPOSAL_CHOSEN),
            (_, true) => Some(notify::TS_UNACCEPTABLE),
            _ => None,
        };
        let child = ChildSa {
            outbound: linerate_esp::SaKeys {
                suite: config.esp,
                spi: 0,
                encryption_key: Vec::new(),
                integrity_key: Vec::new(),
            },
            inbound: linerate_esp::SaKeys {
                suite: config.esp,
                spi: 0,
                encryption_key: Vec::new(),
                integrity_key: Vec::new(),
            },
            local_ts: tsr.clone(),
            remote_ts: tsi.clone(),
            local: SocketAddrV4::new(config.local, config.ports.natt),
            remote: SocketAddrV4::new(*from.ip(), if natt { from.port() } else { 4500 }),
            udp_encap: half.udp_encap,
        };
        let mut tunnel = match (refused, esp) {
            (None, Some((number, spi_out, _))) => {
                let spi_in = new_esp_spi(&mut *self.rng);
                let ni = ike.ni.clone();
                let nr = ike.nr.clone();
                let (outbound, inbound) =
                    child_sa_keys_ordered(&ike, config.esp, None, &ni, &nr, spi_out, spi_in, false);
                let mut proposal = esp_proposal(config.esp, spi_in, None);
                proposal.number = number;
                payloads.extend([
                    Payload::Sa(vec![proposal]),
                    Payload::TsI(tsi),
                    Payload::TsR(tsr),
                ]);
                let mut child = child;
                child.outbound = outbound;
                child.inbound = inbound;
                let bytes = reply(&ike, &payloads, &mut *self.rng);
                ike.last_answer = Some((1, bytes.clone()));
                ike.peer_id = 2;
                self.send(natt, from, &bytes);
                let mut t = Tunnel::new(
                    ike,
                    child,
                    config.esp,
                    None,
                    config.retransmit,
                    natt,
                    peer,
                    now,
                );
                t.set_child_up();
                t
            }
            (kind, _) => {
                // The IKE SA stands without a CHILD_SA (RFC 7296 §1.2).
                let kind = kind.unwrap_or(notify::NO_PROPOSAL_CHOSEN);
                payloads.push(Payload::Notify(Notify::new(kind, Vec::new())));
                let bytes = reply(&ike, &payloads, &mut *self.rng);
                ike.last_answer = Some((1, bytes.clone()));
                ike.peer_id = 2;
                self.send(natt, from, &bytes);
                self.events.push(ResponderEvent::Failed {
                    peer: from,
                    error: IkeError::Refused {
                        exchange: "the initiator's CHILD_SA".into(),
                        notify: notify::name(kind),
                    },
                });
                Tunnel::new(
                    ike,
                    child,
                    config.esp,
                    None,
                    config.retransmit,
                    natt,
                    peer,
                    now,
                )
            }
        };
        let up = tunnel.child_up();
        tunnel.floated = natt;
        let spi_r = tunnel.ike.spi_r;
        self.sas.insert(
            spi_r,
            Entry::Up {
                tunnel: Box::new(tunnel),
                peer_ike: if natt {
                    SocketAddrV4::new(*from.ip(), 500)
                } else {
                    from
                },
                peer_natt: from,
            },
        );
        if up {
            self.events
                .push(ResponderEvent::Established { peer: from, spi_r });
        }
    }
}
