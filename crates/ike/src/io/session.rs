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
use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand_core::OsRng;

// The configuration types, at their old paths too.
pub use crate::config::{Config, Ports, Psk, Retransmit};
pub use crate::event::Event;

use crate::crypto::DhGroup;
use crate::error::IkeError;
use crate::initiator::{Initiator, Local, Shared};
use crate::proposal::IkeSuite;
use crate::sa::{ChildInstaller, ChildSa};
use crate::tunnel::{Outbox, Output, NON_ESP_MARKER};

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

/// How often a negotiation looks at its caller's stop flag.
const STOP_CHECK: Duration = Duration::from_millis(50);

/// How long a stopped negotiation waits for the answers that end what the
/// gateway had set up (IKE_AUTH's, then the Delete's).
const STOP_WAIT: Duration = Duration::from_secs(1);

/// The socket side of a session: which socket IKE is on, and what
/// arrives.
struct Transport {
    sockets: Sockets,
    gateway: Ipv4Addr,
    ports: Ports,
    buf: Vec<u8>,
}

/// What arrives from the gateway.
enum Datagram {
    Ike(Vec<u8>),
    /// An ESP packet (SPI first) that came in UDP.
    Esp(Vec<u8>),
}

impl Transport {
    fn send(&self, natt: bool, data: &[u8]) -> Result<(), IkeError> {
        let (socket, port) = if natt {
            (&self.sockets.natt, self.ports.natt)
        } else {
            (&self.sockets.ike, self.ports.ike)
        };
        let to = SocketAddr::from((self.gateway, port));
        socket
            .send_to(data, to)
            .map(|_| ())
            .map_err(|e| IkeError::io(format!("cannot send to {to}"), e))
    }

    /// The next IKE message or ESP packet from the gateway before
    /// `deadline` on the socket IKE is on (`floated`: 4500). On port 4500
    /// the first four bytes tell them apart: zero (the non-ESP marker)
    /// before IKE, the SPI (never zero) before ESP.
    fn recv_any(&mut self, floated: bool, deadline: Instant) -> Result<Option<Datagram>, IkeError> {
        let socket = if floated {
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
            if !floated {
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
}

/// An IKE SA with one CHILD_SA, established with a gateway.
///
/// Own it on a thread that calls [`Session::poll`] while the test runs,
/// so the gateway's liveness checks are answered (a gateway that gets no
/// answer deletes the tunnel), and call [`Session::delete`] when the test
/// ends; dropping a session that is still up sends the Delete once without
/// waiting for the answer.
///
/// The protocol is the sans-IO initiator of `initiator.rs`; a
/// session is its blocking driver over two sockets.
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
    machine: Initiator,
    out: Outbox,
    /// The CHILD_SA as the data path knows it: the newest after a rekey.
    child: ChildSa,
    suite: IkeSuite,
    spis: (u64, u64),
    events: VecDeque<Event>,
    /// Outputs other than events, for the call that waits for them.
    rekey_error: Option<IkeError>,
    deleted: Option<Result<(), IkeError>>,
    /// Where a rekey's new CHILD_SA goes before the gateway may use it.
    installer: Option<ChildInstaller>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (spi_i, spi_r) = self.ike_spis();
        f.debug_struct("Session")
            .field("gateway", &self.machine.remote())
            .field("ike_spis", &format_args!("{spi_i:016x}_i {spi_r:016x}_r"))
            .field("suite", &format_args!("{}", self.ike_suite()))
            .field("child", &self.child)
            .field("ike_up", &self.machine.ike_up())
            .field("child_up", &self.is_up())
            .finish_non_exhaustive()
    }
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
        Session::connect_until(config, sockets, &AtomicBool::new(false))
    }

    /// [`Session::connect_with`] that ends once `stop` is set (a signal),
    /// looked at every [`STOP_CHECK`]: a handshake waiting for IKE_AUTH's
    /// answer waits for it (1 s at most) and deletes the IKE SA it brought
    /// up, so nothing stays up at the gateway; then
    /// [`IkeError::Interrupted`].
    pub fn connect_until(
        config: Config,
        sockets: Sockets,
        stop: &AtomicBool,
    ) -> Result<Session, IkeError> {
        let port = |s: &UdpSocket, or: u16| match s.local_addr() {
            Ok(a) => a.port(),
            Err(_) => or,
        };
        let local = Local {
            addr: config.local,
            ports: Ports {
                ike: port(&sockets.ike, config.local_ports.ike),
                natt: port(&sockets.natt, config.local_ports.natt),
            },
            id: config.local_id.clone(),
            ts: config.local_ts,
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
        let mut machine = Initiator::new(shared, local, Box::new(OsRng));
        let mut out = Outbox::default();
        machine.start(Instant::now(), &mut out);
        let mut transport = Transport {
            sockets,
            gateway: config.gateway,
            ports: config.gateway_ports,
            buf: Vec::new(),
        };
        let mut events = VecDeque::new();
        // When a stop was seen: the end of the wait for what the gateway
        // had to answer.
        let mut stopping: Option<Instant> = None;
        loop {
            while let Some(t) = out.transmits.pop_front() {
                transport.send(t.natt, &t.data)?;
            }
            if stopping.is_none() && stop.load(Ordering::Relaxed) {
                machine.delete(Instant::now(), &mut out);
                stopping = Some(Instant::now() + STOP_WAIT);
                continue;
            }
            if let Some(until) = stopping {
                out.outputs.clear();
                if !machine.deleting() || Instant::now() >= until {
                    return Err(IkeError::Interrupted {
                        gateway: config.gateway,
                    });
                }
            }
            while let Some(o) = out.outputs.pop_front() {
                match o {
                    Output::Established => {
                        let Some(t) = machine.tunnel() else {
                            return Err(IkeError::Protocol {
                                addr: machine.remote(),
                                detail: "IKE_AUTH: no CHILD_SA".into(),
                            });
                        };
                        let (child, suite, spis) =
                            (t.child.clone(), t.ike.suite, (t.ike.spi_i, t.ike.spi_r));
                        return Ok(Session {
                            transport,
                            machine,
                            out,
                            child,
                            suite,
                            spis,
                            events,
                            rekey_error: None,
                            deleted: None,
                            installer: None,
                        });
                    }
                    Output::Failed(e) => return Err(e),
                    Output::Event(e) => events.push_back(e),
                    Output::Deleted(_) | Output::RekeyFailed(_) => {}
                }
            }
            let Some(deadline) = machine.next_deadline() else {
                return Err(IkeError::Protocol {
                    addr: machine.remote(),
                    detail: "the handshake stopped".into(),
                });
            };
            let deadline = deadline.min(Instant::now() + STOP_CHECK);
            match transport.recv_any(machine.floated(), deadline)? {
                Some(Datagram::Ike(data)) => {
                    machine.handle(&data, Instant::now(), &mut out);
                }
                Some(Datagram::Esp(_)) => {}
                None => machine.handle_timeout(Instant::now(), &mut out),
            }
        }
    }

    /// The CHILD_SA: its keys, the selectors and the addresses (the
    /// newest after a rekey).
    pub fn child(&self) -> &ChildSa {
        &self.child
    }

    /// The IKE SA's algorithms (`aes256-sha256-modp2048`), for the report.
    pub fn ike_suite(&self) -> IkeSuite {
        self.suite
    }

    /// The IKE SA's SPIs (initiator's, responder's), as `swanctl
    /// --list-sas` prints them.
    pub fn ike_spis(&self) -> (u64, u64) {
        self.spis
    }

    /// Whether the IKE SA and the CHILD_SA are both still up.
    pub fn is_up(&self) -> bool {
        self.machine
            .tunnel()
            .is_some_and(|t| t.ike_up() && t.child_up())
    }

    /// Has each rekey's new CHILD_SA installed by `installer` before the
    /// datagram that lets the gateway use it leaves (see
    /// [`ChildInstaller`]); [`Event::ChildRekeyed`] still reports the
    /// rekey, after.
    pub fn install_new_children(&mut self, installer: ChildInstaller) {
        self.installer = Some(installer);
    }

    /// Takes the machine's outputs, then sends what it produced: a new
    /// CHILD_SA is installed before the answer or the Delete that lets
    /// the gateway send on it leaves.
    fn flush(&mut self) {
        while let Some(o) = self.out.outputs.pop_front() {
            match o {
                Output::Event(e) => {
                    if e == Event::ChildRekeyed {
                        if let Some(t) = self.machine.tunnel() {
                            self.child = t.child.clone();
                            if let Some(install) = self.installer.as_mut() {
                                install(0, &self.child);
                            }
                        }
                    }
                    if e == Event::IkeRekeyed {
                        if let Some(t) = self.machine.tunnel() {
                            self.spis = (t.ike.spi_i, t.ike.spi_r);
                            self.suite = t.ike.suite;
                        }
                    }
                    self.events.push_back(e);
                }
                Output::RekeyFailed(e) => {
                    self.rekey_error = Some(e);
                    self.events.push_back(Event::RekeyFailed);
                }
                Output::Deleted(r) => self.deleted = Some(r),
                Output::Failed(e) => self.deleted = Some(Err(e)),
                Output::Established => {}
            }
        }
        while let Some(t) = self.out.transmits.pop_front() {
            // As the gateway's own retransmission covers a lost answer,
            // a failed send is not an error here.
            let _ = self.transport.send(t.natt, &t.data);
        }
    }

    /// Waits for a datagram until `deadline` (or the machine's own), and
    /// feeds it or the timeout to the machine. ESP packets are returned.
    fn step(&mut self, deadline: Instant) -> Result<Option<Vec<u8>>, IkeError> {
        let wake = match self.machine.next_deadline() {
            Some(d) => d.min(deadline),
            None => deadline,
        };
        let got = self.transport.recv_any(self.machine.floated(), wake)?;
        let now = Instant::now();
        let esp = match got {
            Some(Datagram::Ike(data)) => {
                self.machine.handle(&data, now, &mut self.out);
                None
            }
            Some(Datagram::Esp(packet)) => Some(packet),
            None => None,
        };
        if self.machine.next_deadline().is_some_and(|d| d <= now) {
            self.machine.handle_timeout(now, &mut self.out);
        }
        self.flush();
        Ok(esp)
    }

    /// Waits up to `timeout` for the gateway's requests, answers them and
    /// returns the first; sends a NAT keepalive every 20 s while ESP is in
    /// UDP, and drives a rekey started by [`Session::rekey_child`].
    /// `Ok(None)`: nothing happened. An error once the IKE SA is deleted,
    /// and when a rekey failed (the error says why; the old CHILD_SA
    /// stays).
    pub fn poll(&mut self, timeout: Duration) -> Result<Option<Event>, IkeError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(event) = self.events.pop_front() {
                if event == Event::RekeyFailed {
                    if let Some(e) = self.rekey_error.take() {
                        return Err(e);
                    }
                }
                return Ok(Some(event));
            }
            if !self.machine.ike_up() {
                return Err(IkeError::Deleted {
                    gateway: self.transport.gateway,
                });
            }
            if Instant::now() >= deadline {
                return Ok(None);
            }
            self.step(deadline)?;
        }
    }

    /// Starts a CREATE_CHILD_SA rekey of the CHILD_SA (RFC 7296 §1.3.3):
    /// new SPIs, new nonces, a new Diffie-Hellman exchange when the ESP
    /// proposal asks for PFS. [`Session::poll`] drives it and reports
    /// [`Event::ChildRekeyed`] (then [`Session::child`] has the new keys,
    /// and the old CHILD_SA is deleted) or the error.
    pub fn rekey_child(&mut self) -> Result<(), IkeError> {
        self.machine.rekey_child(Instant::now(), &mut self.out)?;
        self.flush();
        Ok(())
    }

    /// The Diffie-Hellman group of the rekeys linerate starts (PFS, a KE
    /// payload in CREATE_CHILD_SA), as the gateway's ESP proposal names
    /// it (strongSwan's `esp_proposals = aes256gcm16-x25519`); `None`
    /// (the default): no PFS. Rekeys the gateway starts are answered with
    /// the group it asks for.
    pub fn set_rekey_pfs(&mut self, group: Option<DhGroup>) {
        if let Some(t) = self.machine.tunnel_mut() {
            t.pfs = group;
        }
    }

    /// Rekeys the CHILD_SA and waits up to `timeout` for the end:
    /// [`Session::rekey_child`] then [`Session::poll`] until
    /// [`Event::ChildRekeyed`]; other events stay queued for `poll`.
    pub fn rekey_child_wait(&mut self, timeout: Duration) -> Result<(), IkeError> {
        self.rekey_child()?;
        self.wait_for(Event::ChildRekeyed, "CHILD_SA", timeout)
    }

    /// Starts a CREATE_CHILD_SA rekey of the IKE SA (RFC 7296 §1.3.2,
    /// §2.18): new SPIs, nonces and a Diffie-Hellman exchange of the IKE
    /// SA's group, the same algorithms. [`Session::poll`] drives it and
    /// reports [`Event::IkeRekeyed`] (then [`Session::ike_spis`] are the
    /// new SA's, and linerate deletes the old one) or the error. The
    /// CHILD_SA and its keys stay as they are. A rekey already under way
    /// is not started twice.
    pub fn rekey_ike(&mut self) -> Result<(), IkeError> {
        self.machine.rekey_ike(Instant::now(), &mut self.out)?;
        self.flush();
        Ok(())
    }

    /// Rekeys the IKE SA and waits up to `timeout` for the end:
    /// [`Session::rekey_ike`] then [`Session::poll`] until
    /// [`Event::IkeRekeyed`]; other events stay queued for `poll`.
    pub fn rekey_ike_wait(&mut self, timeout: Duration) -> Result<(), IkeError> {
        self.rekey_ike()?;
        self.wait_for(Event::IkeRekeyed, "IKE SA", timeout)
    }

    /// Drives the session until `done` or [`Event::RekeyFailed`] (the
    /// rekey of `what`), up to `timeout`; other events stay queued.
    fn wait_for(&mut self, done: Event, what: &str, timeout: Duration) -> Result<(), IkeError> {
        let deadline = Instant::now() + timeout;
        let mut others = VecDeque::new();
        let result = loop {
            if let Some(i) = self
                .events
                .iter()
                .position(|e| *e == done || *e == Event::RekeyFailed)
            {
                let e = self.events.remove(i);
                break match (e, self.rekey_error.take()) {
                    (Some(Event::RekeyFailed), Some(err)) => Err(err),
                    _ => Ok(()),
                };
            }
            others.extend(self.events.drain(..));
            if !self.machine.ike_up() {
                break Err(IkeError::Deleted {
                    gateway: self.transport.gateway,
                });
            }
            if Instant::now() >= deadline {
                break Err(IkeError::Protocol {
                    addr: self.machine.remote(),
                    detail: format!(
                        "the {what} rekey did not end within {:.1} s (it goes on; poll reports its end)",
                        timeout.as_secs_f64()
                    ),
                });
            }
            self.step(deadline)?;
        };
        others.extend(self.events.drain(..));
        self.events = others;
        result
    }

    /// From now on, ESP arriving on the session's port 4500 is dropped in
    /// the kernel, before it reaches the socket: while the data path
    /// carries the ESP, the thread that answers the gateway's IKE requests
    /// is not woken by it. [`Session::recv_esp`] then receives nothing.
    pub fn ignore_esp(&self) -> Result<(), IkeError> {
        crate::io::esp_filter::ignore_esp(&self.transport.sockets.natt).map_err(|e| {
            IkeError::io(
                "cannot filter ESP off the IKE socket on port 4500".to_string(),
                e,
            )
        })
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
        while Instant::now() < deadline {
            if let Some(packet) = self.step(deadline)? {
                return Ok(Some(packet));
            }
        }
        Ok(None)
    }

    /// Deletes the IKE SA, and with it the CHILD_SA (an INFORMATIONAL with
    /// a Delete payload, RFC 7296 §1.4.1), and waits for the gateway's
    /// answer with the usual retransmission. Does nothing if the SA is
    /// already gone.
    pub fn delete(&mut self) -> Result<(), IkeError> {
        if !self.machine.ike_up() {
            return Ok(());
        }
        self.deleted = None;
        self.machine.delete(Instant::now(), &mut self.out);
        self.flush();
        loop {
            if let Some(result) = self.deleted.take() {
                return result;
            }
            if self.machine.next_deadline().is_none() {
                return Ok(());
            }
            let far = Instant::now() + Duration::from_secs(3600);
            self.step(far)?;
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if self.machine.ike_up() {
            self.machine.delete_once(&mut self.out);
            while let Some(t) = self.out.transmits.pop_front() {
                let _ = self.transport.send(t.natt, &t.data);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::TrafficSelector;
    use crate::wire::{exchange, Message};

    /// A session is kept alive from a thread of its own.
    #[test]
    fn sessions_move_to_threads() {
        fn send<T: Send>() {}
        send::<Session>();
        send::<ChildSa>();
        send::<IkeError>();
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
