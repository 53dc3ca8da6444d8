//! The initiator: IKE_SA_INIT and IKE_AUTH with a pre-shared key, one
//! CHILD_SA in tunnel mode, then the IKE SA kept alive (the gateway's
//! INFORMATIONAL requests answered) until linerate deletes it.
//!
//! linerate is the gateway's peer for the length of a test, so the
//! session does what a test needs and no more: one IKE SA, one CHILD_SA,
//! ESP in UDP forced (NAT_DETECTION_SOURCE_IP faked, as strongSwan's
//! `encap = yes`) so that the tester's data path sends and receives ESP as
//! UDP datagrams on port 4500, whatever the gateway's kernel does.

use std::collections::VecDeque;
use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use linerate_esp::{EspSuite, SaKeys};
use zeroize::Zeroizing;

use crate::crypto::{
    child_keys, ike_keys, nat_hash, psk_auth, random_bytes, random_u32, random_u64, DhGroup,
    DhPrivate, IkeKeys,
};
use crate::error::{ConfigError, IkeError};
use crate::proposal::{IkeProposals, IkeSuite};
use crate::protect::{open, seal, Keys};
use crate::sa::ChildSa;
use crate::wire::{
    auth_method, exchange, flags, notify, protocol, transform, Delete, Header, Identity, Message,
    Notify, Payload, Proposal, TrafficSelector, Transform,
};

/// A pre-shared key. Never printed (`Debug` shows `<redacted>`), wiped
/// when dropped.
#[derive(Clone)]
pub struct Psk(Zeroizing<Vec<u8>>);

impl Psk {
    /// The key's bytes as they are (strongSwan's `secret = "..."` is the
    /// string's bytes).
    pub fn new(secret: impl Into<Vec<u8>>) -> Psk {
        Psk(Zeroizing::new(secret.into()))
    }

    /// Reads the key from a file that only its owner may read (mode 0600 or
    /// stricter), as a key should not be on a command line where `ps` shows
    /// it. One trailing newline is not part of the key.
    pub fn read_file(path: &Path) -> Result<Psk, ConfigError> {
        let name = path.display();
        let meta = fs::metadata(path)
            .map_err(|e| ConfigError(format!("cannot read the pre-shared key file {name}: {e}")))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(ConfigError(format!(
                "the pre-shared key file {name} is readable by others (mode {mode:04o}): chmod 600 {name}"
            )));
        }
        let mut bytes = Zeroizing::new(fs::read(path).map_err(|e| {
            ConfigError(format!("cannot read the pre-shared key file {name}: {e}"))
        })?);
        if bytes.ends_with(b"\n") {
            bytes.pop();
            if bytes.ends_with(b"\r") {
                bytes.pop();
            }
        }
        if bytes.is_empty() {
            return Err(ConfigError(format!(
                "the pre-shared key file {name} is empty: write the key into it"
            )));
        }
        Ok(Psk(Zeroizing::new(bytes.to_vec())))
    }

    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Psk(<redacted>)")
    }
}

/// UDP ports of IKE (500) and of IKE and ESP after NAT traversal (4500).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    pub ike: u16,
    pub natt: u16,
}

impl Default for Ports {
    fn default() -> Ports {
        Ports {
            ike: 500,
            natt: 4500,
        }
    }
}

/// How often a request is sent before giving up (RFC 7296 §2.1): the
/// first wait, doubled after every try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retransmit {
    pub timeout: Duration,
    pub tries: u32,
}

impl Default for Retransmit {
    /// 0.5 s doubling, 5 tries: 15.5 s until "no answer".
    fn default() -> Retransmit {
        Retransmit {
            timeout: Duration::from_millis(500),
            tries: 5,
        }
    }
}

/// What to negotiate with which gateway.
#[derive(Debug, Clone)]
pub struct Config {
    /// linerate's address: the source of IKE and ESP, the default
    /// identity.
    pub local: Ipv4Addr,
    pub gateway: Ipv4Addr,
    /// The ports [`Session::connect`] binds on `local` (500, 4500; 0 for
    /// any).
    pub local_ports: Ports,
    /// The gateway's ports (500, 4500).
    pub gateway_ports: Ports,
    /// IDi; `None` sends `local` as an IPv4 address identity, strongSwan's
    /// default.
    pub local_id: Option<Identity>,
    /// IDr: when set, it is sent and the gateway must identify as it.
    pub remote_id: Option<Identity>,
    pub psk: Psk,
    pub ike: IkeProposals,
    pub esp: EspSuite,
    /// The traffic selectors proposed: linerate's test network and the one
    /// behind the gateway.
    pub local_ts: TrafficSelector,
    pub remote_ts: TrafficSelector,
    pub retransmit: Retransmit,
    /// Fakes NAT_DETECTION_SOURCE_IP so that the gateway encapsulates ESP
    /// in UDP even without a NAT (RFC 3948; strongSwan's `encap = yes`).
    /// On by default: linerate's data path sends and receives ESP in UDP.
    pub force_encap: bool,
}

impl Config {
    /// A configuration with the defaults: IKE `aes256-sha256-modp2048`,
    /// ESP `aes256gcm16`, ports 500/4500, identities by address, 0.5 s
    /// doubling over 5 tries, ESP in UDP forced.
    pub fn new(
        local: Ipv4Addr,
        gateway: Ipv4Addr,
        psk: Psk,
        local_ts: TrafficSelector,
        remote_ts: TrafficSelector,
    ) -> Config {
        Config {
            local,
            gateway,
            local_ports: Ports::default(),
            gateway_ports: Ports::default(),
            local_id: None,
            remote_id: None,
            psk,
            ike: IkeProposals::default(),
            esp: EspSuite::Aes256Gcm16,
            local_ts,
            remote_ts,
            retransmit: Retransmit::default(),
            force_encap: true,
        }
    }

    fn local_identity(&self) -> Identity {
        self.local_id.clone().unwrap_or(Identity::Ipv4(self.local))
    }
}

/// The two UDP sockets of a session, bound to linerate's address: IKE
/// starts on the first (500) and moves to the second (4500), where ESP in
/// UDP travels too. A caller that must create them elsewhere (in another
/// network namespace, from a thread that entered it) passes them to
/// [`Session::connect_with`].
#[derive(Debug)]
pub struct Sockets {
    pub ike: UdpSocket,
    pub natt: UdpSocket,
}

impl Sockets {
    /// Binds `local` on `ports.ike` and `ports.natt`.
    pub fn bind(local: Ipv4Addr, ports: Ports) -> Result<Sockets, IkeError> {
        let bind = |port: u16| {
            UdpSocket::bind(SocketAddrV4::new(local, port))
                .map_err(|e| IkeError::io(format!("cannot bind UDP {local}:{port}"), e))
        };
        Ok(Sockets {
            ike: bind(ports.ike)?,
            natt: bind(ports.natt)?,
        })
    }
}

/// Something the gateway did while the tunnel was up; each request is
/// answered before it is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// An empty INFORMATIONAL: the gateway checked that linerate is alive
    /// (dead peer detection).
    LivenessCheck,
    /// An INFORMATIONAL with notifications only.
    Informational,
    /// The gateway deleted the CHILD_SA: its keys are void, the IKE SA is
    /// still up.
    ChildDeleted,
    /// The gateway deleted the IKE SA, and with it the CHILD_SA.
    IkeDeleted,
    /// The gateway asked for an exchange linerate does not do (a
    /// CREATE_CHILD_SA: rekeying); it was answered NO_ADDITIONAL_SAS. The
    /// tunnel stays up until the gateway's hard lifetime ends.
    Refused { exchange: u8 },
}

/// The state of an established IKE SA: what later exchanges
/// (INFORMATIONAL now, CREATE_CHILD_SA for rekeying later) need.
struct IkeSa {
    spi_i: u64,
    spi_r: u64,
    suite: IkeSuite,
    keys: IkeKeys,
    ni: Vec<u8>,
    nr: Vec<u8>,
    /// The message ID of our next request.
    next_id: u32,
    /// The message ID the gateway's next request must have.
    peer_id: u32,
    /// Our answer to the gateway's last request, sent again when the
    /// request comes again (RFC 7296 §2.1: the responder retransmits
    /// responses, not recomputes them).
    last_answer: Option<(u32, Vec<u8>)>,
}

impl IkeSa {
    fn out_keys(&self) -> Keys<'_> {
        Keys {
            encr: self.suite.encryption,
            integ: self.suite.integrity,
            encryption_key: &self.keys.sk_ei,
            integrity_key: &self.keys.sk_ai,
        }
    }

    fn in_keys(&self) -> Keys<'_> {
        Keys {
            encr: self.suite.encryption,
            integ: self.suite.integrity,
            encryption_key: &self.keys.sk_er,
            integrity_key: &self.keys.sk_ar,
        }
    }

    fn seal(&self, kind: u8, response: bool, id: u32, payloads: &[Payload]) -> Vec<u8> {
        let f = flags::INITIATOR | if response { flags::RESPONSE } else { 0 };
        let header = Header::new(self.spi_i, self.spi_r, kind, f, id);
        seal(&self.out_keys(), header, payloads)
    }

    /// Opens `data` if it is the answer to our request `id` of `kind`.
    fn open_response(&self, data: &[u8], kind: u8, id: u32) -> Option<Message> {
        let h = Header::parse(data).ok()?;
        if h.spi_i != self.spi_i
            || h.spi_r != self.spi_r
            || !h.is_response()
            || h.from_initiator()
            || h.exchange != kind
            || h.message_id != id
        {
            return None;
        }
        open(&self.in_keys(), data).ok()
    }
}

/// The socket side of a session.
struct Transport {
    sockets: Sockets,
    gateway: Ipv4Addr,
    ports: Ports,
    /// IKE moved to port 4500 (with the non-ESP marker, RFC 3948 §2.2).
    floated: bool,
    buf: Vec<u8>,
}

/// What arrives from the gateway.
enum Datagram {
    Ike(Vec<u8>),
    /// An ESP packet (SPI first) that came in UDP.
    Esp(Vec<u8>),
}

/// The four zero bytes before an IKE message on port 4500, where an ESP
/// packet would have its (never zero) SPI.
const NON_ESP_MARKER: [u8; 4] = [0; 4];
/// A NAT keepalive (RFC 3948 §2.3).
const KEEPALIVE: [u8; 1] = [0xff];
/// How often a keepalive is sent while ESP is in UDP.
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(20);

impl Transport {
    fn remote(&self) -> SocketAddr {
        let port = if self.floated {
            self.ports.natt
        } else {
            self.ports.ike
        };
        SocketAddr::from((self.gateway, port))
    }

    fn send(&self, message: &[u8]) -> Result<(), IkeError> {
        let to = self.remote();
        let sent = if self.floated {
            let mut d = Vec::with_capacity(message.len() + 4);
            d.extend_from_slice(&NON_ESP_MARKER);
            d.extend_from_slice(message);
            self.sockets.natt.send_to(&d, to)
        } else {
            self.sockets.ike.send_to(message, to)
        };
        match sent {
            Ok(_) => Ok(()),
            Err(e) => Err(IkeError::io(format!("cannot send to {to}"), e)),
        }
    }

    fn send_keepalive(&self) {
        let to = SocketAddr::from((self.gateway, self.ports.natt));
        let _ = self.sockets.natt.send_to(&KEEPALIVE, to);
    }

    /// The next IKE message from the gateway before `deadline`; keepalives
    /// and ESP packets (which the data path handles) are skipped.
    fn recv(&mut self, deadline: Instant) -> Result<Option<Vec<u8>>, IkeError> {
        loop {
            match self.recv_any(deadline)? {
                None => return Ok(None),
                Some(Datagram::Ike(message)) => return Ok(Some(message)),
                Some(Datagram::Esp(_)) => {}
            }
        }
    }

    /// The next IKE message or ESP packet from the gateway before
    /// `deadline`. On port 4500 the first four bytes tell them apart: zero
    /// (the non-ESP marker) before IKE, the SPI (never zero) before ESP.
    fn recv_any(&mut self, deadline: Instant) -> Result<Option<Datagram>, IkeError> {
        let socket = if self.floated {
            &self.sockets.natt
        } else {
            &self.sockets.ike
        };
        if self.buf.len() < 65536 {
            self.buf.resize(65536, 0);
        }
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            socket
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .map_err(|e| IkeError::io("cannot set a socket timeout", e))?;
            let (n, from) = match socket.recv_from(&mut self.buf) {
                Ok(x) => x,
                Err(e) => match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => return Ok(None),
                    // An ICMP error for an earlier datagram: keep waiting,
                    // the retransmission counts the tries.
                    io::ErrorKind::Interrupted
                    | io::ErrorKind::ConnectionRefused
                    | io::ErrorKind::ConnectionReset => continue,
                    _ => return Err(IkeError::io("cannot receive from the gateway", e)),
                },
            };
            if from.ip() != self.gateway {
                continue;
            }
            let data = &self.buf[..n];
            if !self.floated {
                return Ok(Some(Datagram::Ike(data.to_vec())));
            }
            if n > 4 && data[..4] == NON_ESP_MARKER {
                return Ok(Some(Datagram::Ike(data[4..].to_vec())));
            }
            // A keepalive is one byte 0xff; ESP has at least an SPI and a
            // sequence number.
            if n >= 8 {
                return Ok(Some(Datagram::Esp(data.to_vec())));
            }
        }
    }

    /// Sends `request` until `is_answer` accepts a datagram, waiting
    /// `retransmit.timeout` after the first try and twice as long after
    /// each next one. Other datagrams go to `is_answer` too, which may
    /// handle them (the gateway's own requests).
    fn transact(
        &mut self,
        request: &[u8],
        retransmit: Retransmit,
        mut is_answer: impl FnMut(&Transport, &[u8]) -> bool,
    ) -> Result<Vec<u8>, IkeError> {
        let tries = retransmit.tries.max(1);
        let mut wait = retransmit.timeout;
        // Datagrams from the gateway that answered nothing: a gateway that
        // speaks something else on the port is told apart from a silent one.
        let mut not_answers = 0u32;
        for _ in 0..tries {
            self.send(request)?;
            let deadline = Instant::now() + wait;
            while let Some(data) = self.recv(deadline)? {
                if is_answer(self, &data) {
                    return Ok(data);
                }
                not_answers += 1;
            }
            wait = wait.saturating_mul(2);
        }
        if not_answers > 0 {
            return Err(IkeError::NoValidAnswer {
                addr: self.remote(),
                tries,
                datagrams: not_answers,
            });
        }
        Err(IkeError::NoAnswer {
            addr: self.remote(),
            tries,
        })
    }

    fn protocol_error(&self, detail: impl Into<String>) -> IkeError {
        IkeError::Protocol {
            addr: self.remote(),
            detail: detail.into(),
        }
    }
}

/// An IKE SA with one CHILD_SA, established with a gateway.
///
/// Own it on a thread that calls [`Session::poll`] while the test runs,
/// so the gateway's liveness checks are answered (a gateway that gets no
/// answer deletes the tunnel), and call [`Session::delete`] when the test
/// ends; dropping a session that is still up sends the Delete once without
/// waiting for the answer.
///
/// ```no_run
/// # use linerate_ike::*;
/// # use std::sync::{atomic::{AtomicBool, Ordering}, Arc};
/// # use std::time::Duration;
/// # fn run(config: Config, stop: Arc<AtomicBool>) -> Result<(), IkeError> {
/// let mut session = Session::connect(config)?;
/// let child = session.child().clone(); // the keys for the data path
/// let keeper = std::thread::spawn(move || {
///     while !stop.load(Ordering::Relaxed) {
///         if let Some(Event::IkeDeleted) = session.poll(Duration::from_millis(200))? {
///             return Ok(());
///         }
///     }
///     session.delete()
/// });
/// # let _ = (child, keeper); Ok(()) }
/// ```
pub struct Session {
    transport: Transport,
    retransmit: Retransmit,
    ike: IkeSa,
    child: ChildSa,
    ike_up: bool,
    child_up: bool,
    events: VecDeque<Event>,
    last_keepalive: Instant,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("gateway", &self.transport.remote())
            .field(
                "ike_spis",
                &format_args!("{:016x}_i {:016x}_r", self.ike.spi_i, self.ike.spi_r),
            )
            .field("suite", &format_args!("{}", self.ike.suite))
            .field("child", &self.child)
            .field("ike_up", &self.ike_up)
            .field("child_up", &self.child_up)
            .finish_non_exhaustive()
    }
}

/// The answer to IKE_SA_INIT, the state IKE_AUTH starts from.
struct Init {
    spi_r: u64,
    suite: IkeSuite,
    keys: IkeKeys,
    ni: Vec<u8>,
    nr: Vec<u8>,
    /// Our last IKE_SA_INIT request and the gateway's answer, as sent:
    /// AUTH signs them.
    request: Vec<u8>,
    response: Vec<u8>,
    /// The gateway sent NAT detection payloads: it does NAT traversal.
    nat_traversal: bool,
    udp_encap: bool,
}

impl Session {
    /// Binds `config.local` on `config.local_ports` and negotiates the
    /// tunnel (see [`Session::connect_with`]).
    pub fn connect(config: Config) -> Result<Session, IkeError> {
        let sockets = Sockets::bind(config.local, config.local_ports)?;
        Session::connect_with(config, sockets)
    }

    /// Negotiates the IKE SA and the CHILD_SA over `sockets`: IKE_SA_INIT
    /// on the first (answering COOKIE and INVALID_KE_PAYLOAD), IKE_AUTH on
    /// the second. Blocks until the tunnel is up or has failed; with the
    /// default retransmission a silent gateway is reported after 15.5 s.
    pub fn connect_with(config: Config, sockets: Sockets) -> Result<Session, IkeError> {
        let mut transport = Transport {
            sockets,
            gateway: config.gateway,
            ports: config.gateway_ports,
            floated: false,
            buf: Vec::new(),
        };
        let spi_i = loop {
            let spi = random_u64();
            if spi != 0 {
                break spi;
            }
        };
        let init = ike_sa_init(&config, &mut transport, spi_i)?;
        // IKE moves to port 4500 whenever the gateway does NAT traversal
        // (RFC 7296 §2.23 allows it without a NAT): ESP in UDP uses the
        // same ports, so a NAT on the way keeps one mapping for both.
        transport.floated = init.nat_traversal;
        let ike = IkeSa {
            spi_i,
            spi_r: init.spi_r,
            suite: init.suite,
            keys: init.keys,
            ni: init.ni,
            nr: init.nr,
            next_id: 1,
            peer_id: 0,
            last_answer: None,
        };
        ike_auth(
            config,
            transport,
            ike,
            &init.request,
            &init.response,
            init.udp_encap,
        )
    }

    /// The CHILD_SA: its keys, the selectors and the addresses.
    pub fn child(&self) -> &ChildSa {
        &self.child
    }

    /// The IKE SA's algorithms (`aes256-sha256-modp2048`), for the report.
    pub fn ike_suite(&self) -> IkeSuite {
        self.ike.suite
    }

    /// The IKE SA's SPIs (initiator's, responder's), as `swanctl
    /// --list-sas` prints them.
    pub fn ike_spis(&self) -> (u64, u64) {
        (self.ike.spi_i, self.ike.spi_r)
    }

    /// Whether the IKE SA and the CHILD_SA are both still up.
    pub fn is_up(&self) -> bool {
        self.ike_up && self.child_up
    }

    /// Waits up to `timeout` for the gateway's requests, answers them and
    /// returns the first; sends a NAT keepalive every 20 s while ESP is in
    /// UDP. `Ok(None)`: nothing happened. An error once the IKE SA is
    /// deleted.
    pub fn poll(&mut self, timeout: Duration) -> Result<Option<Event>, IkeError> {
        if let Some(event) = self.events.pop_front() {
            return Ok(Some(event));
        }
        if !self.ike_up {
            return Err(IkeError::Deleted {
                gateway: self.transport.gateway,
            });
        }
        if self.child.udp_encap && self.last_keepalive.elapsed() >= KEEPALIVE_INTERVAL {
            self.transport.send_keepalive();
            self.last_keepalive = Instant::now();
        }
        let deadline = Instant::now() + timeout;
        while let Some(data) = self.transport.recv(deadline)? {
            if let Some(event) = answer(&mut self.ike, &self.child, &self.transport, &data) {
                self.note(event);
                return Ok(self.events.pop_front());
            }
        }
        Ok(None)
    }

    /// Sends one ESP packet (SPI first, as `linerate_esp::Outbound::seal`
    /// makes it) to the gateway in UDP from the session's port 4500: for
    /// functional checks and low rates, where the data path's own sender
    /// is not needed.
    pub fn send_esp(&self, packet: &[u8]) -> Result<(), IkeError> {
        if !self.child.udp_encap {
            return Err(IkeError::NoUdpEncapsulation {
                gateway: self.transport.gateway,
            });
        }
        self.transport
            .sockets
            .natt
            .send_to(packet, SocketAddr::V4(self.child.remote))
            .map(|_| ())
            .map_err(|e| IkeError::io(format!("cannot send ESP to {}", self.child.remote), e))
    }

    /// Waits up to `timeout` for an ESP packet from the gateway on the
    /// session's port 4500 and returns it (SPI first, for
    /// `linerate_esp::Inbound::open`). The gateway's IKE requests that
    /// arrive meanwhile are answered; `poll` reports them after.
    pub fn recv_esp(&mut self, timeout: Duration) -> Result<Option<Vec<u8>>, IkeError> {
        if !self.child.udp_encap {
            return Err(IkeError::NoUdpEncapsulation {
                gateway: self.transport.gateway,
            });
        }
        let deadline = Instant::now() + timeout;
        while let Some(datagram) = self.transport.recv_any(deadline)? {
            match datagram {
                Datagram::Esp(packet) => return Ok(Some(packet)),
                Datagram::Ike(data) => {
                    if let Some(event) = answer(&mut self.ike, &self.child, &self.transport, &data)
                    {
                        self.note(event);
                    }
                }
            }
        }
        Ok(None)
    }

    fn note(&mut self, event: Event) {
        match event {
            Event::IkeDeleted => {
                self.ike_up = false;
                self.child_up = false;
            }
            Event::ChildDeleted => self.child_up = false,
            _ => {}
        }
        self.events.push_back(event);
    }

    /// Deletes the IKE SA, and with it the CHILD_SA (an INFORMATIONAL with
    /// a Delete payload, RFC 7296 §1.4.1), and waits for the gateway's
    /// answer with the usual retransmission. Does nothing if the SA is
    /// already gone.
    pub fn delete(&mut self) -> Result<(), IkeError> {
        if !self.ike_up {
            return Ok(());
        }
        self.ike_up = false;
        self.child_up = false;
        let mut events = Vec::new();
        let result = send_delete(
            &mut self.ike,
            &self.child,
            &mut self.transport,
            self.retransmit,
            &mut events,
        );
        self.events.extend(events);
        result
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.ike_up {
            let bytes = delete_request(&mut self.ike);
            let _ = self.transport.send(&bytes);
        }
    }
}

fn delete_request(ike: &mut IkeSa) -> Vec<u8> {
    let id = ike.next_id;
    ike.next_id = ike.next_id.wrapping_add(1);
    let delete = Payload::Delete(Delete {
        protocol: protocol::IKE,
        spi_size: 0,
        spis: Vec::new(),
    });
    ike.seal(exchange::INFORMATIONAL, false, id, &[delete])
}

/// Sends the IKE SA's Delete and waits for the answer, answering the
/// gateway's own requests meanwhile.
fn send_delete(
    ike: &mut IkeSa,
    child: &ChildSa,
    transport: &mut Transport,
    retransmit: Retransmit,
    events: &mut Vec<Event>,
) -> Result<(), IkeError> {
    let id = ike.next_id;
    let bytes = delete_request(ike);
    transport
        .transact(&bytes, retransmit, |t, data| {
            if ike
                .open_response(data, exchange::INFORMATIONAL, id)
                .is_some()
            {
                return true;
            }
            if let Some(event) = answer(ike, child, t, data) {
                events.push(event);
                // The gateway deleted the SA first: both deletes cross,
                // which is the end RFC 7296 §1.4.1 expects.
                return event == Event::IkeDeleted;
            }
            false
        })
        .map(|_| ())
}

/// Answers a request of the gateway (an INFORMATIONAL, or a
/// CREATE_CHILD_SA refused) and says what it was; `None` for anything that
/// is not the gateway's next request on this IKE SA (after resending our
/// answer if it was the last one again).
fn answer(ike: &mut IkeSa, child: &ChildSa, transport: &Transport, data: &[u8]) -> Option<Event> {
    let h = Header::parse(data).ok()?;
    if h.spi_i != ike.spi_i || h.spi_r != ike.spi_r || h.is_response() || h.from_initiator() {
        return None;
    }
    if h.message_id != ike.peer_id {
        if let Some((id, bytes)) = &ike.last_answer {
            if *id == h.message_id {
                let _ = transport.send(bytes);
            }
        }
        return None;
    }
    let request = open(&ike.in_keys(), data).ok()?;
    let mut reply = Vec::new();
    let event = match h.exchange {
        exchange::INFORMATIONAL => {
            let mut event = if request.payloads.is_empty() {
                Event::LivenessCheck
            } else {
                Event::Informational
            };
            for p in &request.payloads {
                let Payload::Delete(d) = p else { continue };
                if d.protocol == protocol::IKE {
                    event = Event::IkeDeleted;
                } else if d.protocol == protocol::ESP
                    && d.spis
                        .iter()
                        .any(|s| s[..] == child.outbound.spi.to_be_bytes()[..])
                    && event != Event::IkeDeleted
                {
                    // RFC 7296 §1.4.1: answer with the Delete of our
                    // direction of the pair.
                    reply.push(Payload::Delete(Delete {
                        protocol: protocol::ESP,
                        spi_size: 4,
                        spis: vec![child.inbound.spi.to_be_bytes().to_vec()],
                    }));
                    event = Event::ChildDeleted;
                }
            }
            event
        }
        exchange::CREATE_CHILD_SA => {
            reply.push(Payload::Notify(Notify::new(
                notify::NO_ADDITIONAL_SAS,
                Vec::new(),
            )));
            Event::Refused {
                exchange: exchange::CREATE_CHILD_SA,
            }
        }
        _ => return None,
    };
    let bytes = ike.seal(h.exchange, true, h.message_id, &reply);
    let _ = transport.send(&bytes);
    ike.last_answer = Some((h.message_id, bytes));
    ike.peer_id = ike.peer_id.wrapping_add(1);
    Some(event)
}

/// IKE_SA_INIT (RFC 7296 §1.2), retried with the gateway's cookie (§2.6)
/// or the group it asks for (§1.3 INVALID_KE_PAYLOAD).
fn ike_sa_init(config: &Config, transport: &mut Transport, spi_i: u64) -> Result<Init, IkeError> {
    let offered = config.ike.groups();
    let first = offered.first().copied().unwrap_or(DhGroup::Modp2048);
    let (mut dh, mut public) = DhPrivate::generate(first);
    let ni = random_bytes(32);
    let local_port = transport
        .sockets
        .ike
        .local_addr()
        .map_err(|e| IkeError::io("cannot read the IKE socket's address", e))?
        .port();
    // Faked as strongSwan's encap=yes does: a hash of nothing the gateway
    // can compute, so it sees linerate behind a NAT and encapsulates.
    let nat_source = if config.force_encap {
        random_bytes(20)
    } else {
        nat_hash(spi_i, 0, config.local, local_port)
    };
    let nat_destination = nat_hash(spi_i, 0, config.gateway, config.gateway_ports.ike);
    let mut cookie: Option<Vec<u8>> = None;
    let mut tried_groups = vec![first];
    let mut cookies = 0;
    let (request, response, message) = loop {
        let mut payloads = Vec::new();
        if let Some(c) = &cookie {
            payloads.push(Payload::Notify(Notify::new(notify::COOKIE, c.clone())));
        }
        payloads.extend([
            Payload::Sa(config.ike.to_wire()),
            Payload::Ke {
                group: dh.group().id(),
                data: public.clone(),
            },
            Payload::Nonce(ni.clone()),
            Payload::Notify(Notify::new(
                notify::NAT_DETECTION_SOURCE_IP,
                nat_source.clone(),
            )),
            Payload::Notify(Notify::new(
                notify::NAT_DETECTION_DESTINATION_IP,
                nat_destination.clone(),
            )),
        ]);
        let request = Message {
            header: Header::new(spi_i, 0, exchange::IKE_SA_INIT, flags::INITIATOR, 0),
            payloads,
        }
        .encode();
        let response = transport.transact(&request, config.retransmit, |_, data| {
            Header::parse(data).is_ok_and(|h| {
                h.spi_i == spi_i
                    && h.is_response()
                    && !h.from_initiator()
                    && h.exchange == exchange::IKE_SA_INIT
                    && h.message_id == 0
            })
        })?;
        let message = Message::parse(&response)
            .map_err(|e| transport.protocol_error(format!("IKE_SA_INIT: {e}")))?;
        if let Some(n) = message.notify(notify::COOKIE) {
            cookies += 1;
            if cookies > 3 {
                return Err(transport.protocol_error("it asks for a new cookie again and again"));
            }
            cookie = Some(n.data.clone());
            continue;
        }
        if let Some(n) = message.notify(notify::INVALID_KE_PAYLOAD) {
            let asked = (n.data.len() >= 2).then(|| u16::from_be_bytes([n.data[0], n.data[1]]));
            let group = asked
                .and_then(DhGroup::from_id)
                .filter(|g| offered.contains(g) && !tried_groups.contains(g));
            let Some(group) = group else {
                return Err(IkeError::InvalidKe {
                    group: match asked {
                        Some(id) => DhGroup::from_id(id)
                            .map_or_else(|| id.to_string(), |g| format!("{id} ({})", g.name())),
                        None => "(none named)".into(),
                    },
                    offered: config.ike.to_string(),
                });
            };
            tried_groups.push(group);
            (dh, public) = DhPrivate::generate(group);
            continue;
        }
        if let Some(n) = message.error() {
            return Err(if n.kind == notify::NO_PROPOSAL_CHOSEN {
                IkeError::NoProposalChosen {
                    offered: config.ike.to_string(),
                }
            } else {
                IkeError::Refused {
                    exchange: "IKE_SA_INIT".into(),
                    notify: notify::name(n.kind),
                }
            });
        }
        break (request, response, message);
    };
    let bad = |detail: &str| transport.protocol_error(format!("IKE_SA_INIT: {detail}"));
    let spi_r = message.header.spi_r;
    if spi_r == 0 {
        return Err(bad("no responder SPI"));
    }
    let mut sa = None;
    let mut ke = None;
    let mut nr = None;
    for p in &message.payloads {
        match p {
            Payload::Sa(proposals) => sa = Some(proposals),
            Payload::Ke { group, data } => ke = Some((*group, data)),
            Payload::Nonce(n) => nr = Some(n.clone()),
            _ => {}
        }
    }
    let sa = sa.ok_or_else(|| bad("no SA payload"))?;
    let suite = config
        .ike
        .select(sa)
        .ok_or_else(|| bad("the gateway chose a proposal that linerate did not offer"))?;
    if suite.group != dh.group() {
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
    let shared = dh
        .shared(gateway_public)
        .map_err(|e| bad(&format!("the gateway's KE payload: {e}")))?;
    let keys = ike_keys(
        suite.prf,
        suite.integrity,
        suite.encryption,
        &shared,
        &ni,
        &nr,
        spi_i,
        spi_r,
    );
    // NAT detection (§2.23): a gateway that sends no NAT_DETECTION payload
    // has no NAT traversal; otherwise ESP goes in UDP when either hash
    // does not match (ours was faked when encapsulation is forced).
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
    let gateway_hash = nat_hash(spi_i, spi_r, config.gateway, config.gateway_ports.ike);
    let our_hash = nat_hash(spi_i, spi_r, config.local, local_port);
    let nat = !sources.contains(&&gateway_hash) || !destinations.contains(&&our_hash);
    Ok(Init {
        spi_r,
        suite,
        keys,
        ni,
        nr,
        request,
        response,
        nat_traversal,
        udp_encap: nat_traversal && (nat || config.force_encap),
    })
}

/// The ESP proposal of the suite: one proposal with our inbound SPI, its
/// encryption transform (with the key length), integrity unless AEAD, and
/// no extended sequence numbers.
fn esp_proposal(suite: EspSuite, spi: u32) -> Proposal {
    let (encr, bits) = suite.ikev2_encryption();
    let mut transforms = vec![Transform::with_key_length(transform::ENCR, encr, bits)];
    if let Some(integ) = suite.ikev2_integrity() {
        transforms.push(Transform::new(transform::INTEG, integ));
    }
    transforms.push(Transform::new(transform::ESN, 0));
    Proposal {
        number: 1,
        protocol: protocol::ESP,
        spi: spi.to_be_bytes().to_vec(),
        transforms,
    }
}

/// The gateway's SPI if it accepted our ESP proposal as offered.
fn accepted_esp(suite: EspSuite, chosen: &[Proposal]) -> Option<u32> {
    let [p] = chosen else { return None };
    if p.number != 1 || p.protocol != protocol::ESP || p.spi.len() != 4 {
        return None;
    }
    let offered = esp_proposal(suite, 0).transforms;
    for t in &p.transforms {
        if !offered.contains(t) {
            return None;
        }
    }
    let kinds = |list: &[Transform], kind: u8| list.iter().filter(|t| t.kind == kind).count();
    for kind in [transform::ENCR, transform::INTEG] {
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

/// IKE_AUTH (RFC 7296 §1.2) with the pre-shared key (§2.15) and the
/// CHILD_SA (§1.3, §2.17).
fn ike_auth(
    config: Config,
    mut transport: Transport,
    mut ike: IkeSa,
    init_request: &[u8],
    init_response: &[u8],
    udp_encap: bool,
) -> Result<Session, IkeError> {
    let prf = ike.suite.prf;
    let spi_in = loop {
        // SPIs 1-255 are reserved (RFC 4303 §2.1).
        let spi = random_u32();
        if spi > 255 {
            break spi;
        }
    };
    let idi = config.local_identity();
    let auth = psk_auth(
        prf,
        config.psk.bytes(),
        &ike.keys.sk_pi,
        init_request,
        &ike.nr,
        &idi.payload_body(),
    );
    let mut payloads = vec![Payload::IdI(idi.clone())];
    if let Some(idr) = &config.remote_id {
        payloads.push(Payload::IdR(idr.clone()));
    }
    payloads.extend([
        Payload::Auth {
            method: auth_method::SHARED_KEY_MIC,
            data: auth.to_vec(),
        },
        // linerate has no other SA with this gateway: it may drop what an
        // earlier, killed run left (RFC 7296 §2.4).
        Payload::Notify(Notify::new(notify::INITIAL_CONTACT, Vec::new())),
        Payload::Sa(vec![esp_proposal(config.esp, spi_in)]),
        Payload::TsI(vec![config.local_ts]),
        Payload::TsR(vec![config.remote_ts]),
    ]);
    let id = ike.next_id;
    ike.next_id += 1;
    let request = ike.seal(exchange::IKE_AUTH, false, id, &payloads);
    let mut opened = None;
    transport.transact(&request, config.retransmit, |_, data| {
        opened = ike.open_response(data, exchange::IKE_AUTH, id);
        opened.is_some()
    })?;
    let Some(message) = opened else {
        return Err(transport.protocol_error("IKE_AUTH: no answer could be opened"));
    };
    if message.notify(notify::AUTHENTICATION_FAILED).is_some() {
        return Err(IkeError::AuthenticationFailed {
            identity: idi.to_string(),
        });
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
        return Err(match message.error() {
            Some(n) => IkeError::Refused {
                exchange: "IKE_AUTH".into(),
                notify: notify::name(n.kind),
            },
            None => transport.protocol_error("IKE_AUTH: an answer without AUTH payload"),
        });
    };
    let retransmit = config.retransmit;
    let placeholder = |spi| SaKeys {
        suite: config.esp,
        spi,
        encryption_key: Vec::new(),
        integrity_key: Vec::new(),
    };
    let local_addr = match transport.sockets.natt.local_addr() {
        Ok(SocketAddr::V4(a)) => SocketAddrV4::new(config.local, a.port()),
        _ => SocketAddrV4::new(config.local, config.local_ports.natt),
    };
    let mut session = Session {
        transport,
        retransmit,
        ike,
        child: ChildSa {
            outbound: placeholder(0),
            inbound: placeholder(spi_in),
            local_ts: Vec::new(),
            remote_ts: Vec::new(),
            local: local_addr,
            remote: SocketAddrV4::new(config.gateway, config.gateway_ports.natt),
            udp_encap,
        },
        ike_up: true,
        child_up: false,
        events: VecDeque::new(),
        last_keepalive: Instant::now(),
    };
    // From here the gateway has an IKE SA: every failure deletes it.
    let fail = |mut session: Session, error: IkeError| -> Result<Session, IkeError> {
        let _ = session.delete();
        Err(error)
    };
    let Some(idr) = idr else {
        let e = session
            .transport
            .protocol_error("IKE_AUTH: an answer without IDr payload");
        return fail(session, e);
    };
    if let Some(expected) = &config.remote_id {
        if idr != expected {
            let e = IkeError::GatewayIdentity {
                expected: expected.to_string(),
                got: idr.to_string(),
            };
            return fail(session, e);
        }
    }
    if method != auth_method::SHARED_KEY_MIC {
        let e = session.transport.protocol_error(format!(
            "IKE_AUTH: the gateway authenticates with method {method}, not a pre-shared key (2)"
        ));
        return fail(session, e);
    }
    let expected = psk_auth(
        prf,
        config.psk.bytes(),
        &session.ike.keys.sk_pr,
        init_response,
        &session.ike.ni,
        &idr.payload_body(),
    );
    if !bool::from(subtle::ConstantTimeEq::ct_eq(&expected[..], &auth[..])) {
        return fail(session, IkeError::GatewayAuthentication);
    }
    if let Some(n) = message.error() {
        let e = match n.kind {
            notify::NO_PROPOSAL_CHOSEN => IkeError::NoProposalChosen {
                offered: format!("ESP {}", config.esp),
            },
            notify::TS_UNACCEPTABLE => IkeError::TsUnacceptable {
                local: config.local_ts.to_string(),
                remote: config.remote_ts.to_string(),
            },
            kind => IkeError::Refused {
                exchange: "the CHILD_SA in IKE_AUTH".into(),
                notify: notify::name(kind),
            },
        };
        return fail(session, e);
    }
    if message.notify(notify::USE_TRANSPORT_MODE).is_some() {
        let e = session
            .transport
            .protocol_error("IKE_AUTH: transport mode, where linerate asked for tunnel mode");
        return fail(session, e);
    }
    let Some(spi_out) = sa.and_then(|sa| accepted_esp(config.esp, sa)) else {
        let e = session.transport.protocol_error(format!(
            "IKE_AUTH: no ESP proposal, or not the one offered ({})",
            config.esp
        ));
        return fail(session, e);
    };
    let (Some(tsi), Some(tsr)) = (tsi.filter(|l| !l.is_empty()), tsr.filter(|l| !l.is_empty()))
    else {
        let e = session
            .transport
            .protocol_error("IKE_AUTH: no traffic selectors");
        return fail(session, e);
    };
    let suite = config.esp;
    let [(enc_out, int_out), (enc_in, int_in)] = child_keys(
        prf,
        &session.ike.keys.sk_d,
        None,
        &session.ike.ni,
        &session.ike.nr,
        suite.encryption_keymat_len(),
        suite.integrity_key_len(),
    );
    session.child.outbound = SaKeys {
        suite,
        spi: spi_out,
        encryption_key: enc_out.to_vec(),
        integrity_key: int_out.to_vec(),
    };
    session.child.inbound = SaKeys {
        suite,
        spi: spi_in,
        encryption_key: enc_in.to_vec(),
        integrity_key: int_in.to_vec(),
    };
    // The lengths follow from the suite: KEYMAT was cut by them.
    debug_assert!(session.child.outbound.validate().is_ok());
    debug_assert!(session.child.inbound.validate().is_ok());
    session.child.local_ts = tsi.clone();
    session.child.remote_ts = tsr.clone();
    session.child_up = true;
    Ok(session)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn esp_proposals_carry_the_suites_transforms() {
        for suite in EspSuite::ALL {
            let p = esp_proposal(suite, 0x1234_5678);
            assert_eq!(p.spi, [0x12, 0x34, 0x56, 0x78]);
            assert_eq!(p.protocol, protocol::ESP);
            let (id, bits) = suite.ikev2_encryption();
            assert_eq!(p.transforms[0], Transform::with_key_length(1, id, bits));
            assert_eq!(
                p.transforms.len(),
                if suite.is_aead() { 2 } else { 3 },
                "{suite}"
            );
            // The gateway's answer: the same transforms, its own SPI.
            let mut answer = p.clone();
            answer.spi = vec![0xc1, 0, 0, 2];
            assert_eq!(accepted_esp(suite, &[answer.clone()]), Some(0xc100_0002));
            // Without ESN is fine; another suite, two proposals are not.
            answer.transforms.retain(|t| t.kind != transform::ESN);
            assert_eq!(accepted_esp(suite, &[answer.clone()]), Some(0xc100_0002));
            let other = EspSuite::ALL.into_iter().find(|s| *s != suite).unwrap();
            assert_eq!(accepted_esp(other, &[answer.clone()]), None);
            assert_eq!(accepted_esp(suite, &[answer.clone(), answer.clone()]), None);
            answer.transforms.push(Transform::new(transform::DH, 14));
            assert_eq!(accepted_esp(suite, &[answer]), None);
        }
    }

    /// A session is kept alive from a thread of its own.
    #[test]
    fn sessions_move_to_threads() {
        fn send<T: Send>() {}
        send::<Session>();
        send::<ChildSa>();
        send::<IkeError>();
    }

    #[test]
    fn the_psk_is_never_printed() {
        let psk = Psk::new("hunter2-secret");
        let config = Config::new(
            Ipv4Addr::new(10, 0, 0, 2),
            Ipv4Addr::new(10, 0, 0, 1),
            psk,
            TrafficSelector::parse("198.18.0.0/24").unwrap(),
            TrafficSelector::parse("198.19.0.0/24").unwrap(),
        );
        let text = format!("{config:?} {config:#?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
        let keys = SaKeys {
            suite: EspSuite::Aes128Sha256,
            spi: 0xc0ffee01,
            encryption_key: vec![0xab; 16],
            integrity_key: vec![0xcd; 32],
        };
        let text = format!("{keys:?}");
        assert!(text.contains("0xc0ffee01"), "{text}");
        assert!(!text.contains("171") && !text.contains("ab,"), "{text}");
    }

    #[test]
    fn psk_files_must_be_private() {
        let dir = std::env::temp_dir().join(format!("linerate-ike-psk-{}", std::process::id()));
        let _ = fs::create_dir(&dir);
        let path = dir.join("psk");
        fs::write(&path, "s3cret\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let e = Psk::read_file(&path).unwrap_err().0;
        assert!(e.contains("mode 0644") && e.contains("chmod 600"), "{e}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Psk::read_file(&path).unwrap().bytes(), b"s3cret");
        fs::write(&path, "\n").unwrap();
        assert!(Psk::read_file(&path).unwrap_err().0.contains("empty"));
        let _ = fs::remove_dir_all(&dir);
    }

    /// A silent address: every try is sent, the error names the address
    /// and the count, and the time is the doubling's sum.
    #[test]
    fn a_silent_gateway_is_no_answer_after_the_tries() {
        let lo = Ipv4Addr::LOCALHOST;
        let silent = UdpSocket::bind((lo, 0)).unwrap();
        let port = silent.local_addr().unwrap().port();
        let mut config = Config::new(
            lo,
            lo,
            Psk::new("x"),
            TrafficSelector::parse("198.18.0.0/24").unwrap(),
            TrafficSelector::parse("198.19.0.0/24").unwrap(),
        );
        config.gateway_ports = Ports {
            ike: port,
            natt: port,
        };
        config.local_ports = Ports { ike: 0, natt: 0 };
        config.retransmit = Retransmit {
            timeout: Duration::from_millis(20),
            tries: 3,
        };
        let start = Instant::now();
        let e = Session::connect(config).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("no answer from 127.0.0.1:{port} after 3 tries")
        );
        assert!(start.elapsed() >= Duration::from_millis(140));
        silent.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 2048];
        let mut count = 0;
        while let Ok((n, _)) = silent.recv_from(&mut buf) {
            let m = Message::parse(&buf[..n]).unwrap();
            assert_eq!(m.header.exchange, exchange::IKE_SA_INIT);
            count += 1;
        }
        assert_eq!(count, 3);
    }
}
