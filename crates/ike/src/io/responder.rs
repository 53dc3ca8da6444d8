//! [`Responder`]: linerate's IKEv2 responder ([`ResponderMachine`], which
//! has no socket) on its own pair of sockets (500 and 4500), for any
//! number of initiators from one thread: the other end of a
//! [`crate::Fleet`] in benchmarks, or a small gateway for a strongSwan
//! initiator. It reads the clock and gives the machine `OsRng`.

use std::io;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use rand_core::OsRng;

use crate::config::{Ports, ResponderConfig};
use crate::error::IkeError;
use crate::io::udp::{recv_to, wait_readable};
use crate::responder::{ResponderEvent, ResponderMachine};

/// The responder on its own sockets: one thread, any number of
/// initiators.
pub struct Responder {
    machine: ResponderMachine,
    ike: UdpSocket,
    natt: UdpSocket,
    buf: Vec<u8>,
    cmsg: Vec<u8>,
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder")
            .field("local", &self.machine.config().local)
            .field("established", &self.machine.established())
            .finish_non_exhaustive()
    }
}

impl Responder {
    /// Binds `config.local` on `config.ports` in the calling thread's
    /// network namespace.
    pub fn bind(config: ResponderConfig) -> Result<Responder, IkeError> {
        let bind = |port: u16| {
            let s = UdpSocket::bind((config.local, port))
                .map_err(|e| IkeError::io(format!("cannot bind UDP {}:{port}", config.local), e))?;
            let size = 8usize << 20;
            use nix::sys::socket::{setsockopt, sockopt};
            if setsockopt(&s, sockopt::RcvBufForce, &size).is_err() {
                let _ = setsockopt(&s, sockopt::RcvBuf, &size);
            }
            Ok::<_, IkeError>(s)
        };
        let ike = bind(config.ports.ike)?;
        let natt = bind(config.ports.natt)?;
        let mut config = config;
        let port = |s: &UdpSocket, or: u16| s.local_addr().map_or(or, |a| a.port());
        config.ports = Ports {
            ike: port(&ike, config.ports.ike),
            natt: port(&natt, config.ports.natt),
        };
        Ok(Responder {
            machine: ResponderMachine::new(config, Instant::now(), Box::new(OsRng)),
            ike,
            natt,
            buf: vec![0; 65536],
            cmsg: nix::cmsg_space!(nix::libc::in_pktinfo),
        })
    }

    /// The ports bound (the kernel's choice for 0).
    pub fn ports(&self) -> Ports {
        self.machine.config().ports
    }

    pub fn machine(&self) -> &ResponderMachine {
        &self.machine
    }

    pub fn machine_mut(&mut self) -> &mut ResponderMachine {
        &mut self.machine
    }

    pub fn established(&self) -> usize {
        self.machine.established()
    }

    /// Answers what arrives for up to `timeout`; returns as soon as
    /// something happened (or at the timeout).
    pub fn poll(&mut self, timeout: Duration) -> Vec<ResponderEvent> {
        let deadline = Instant::now() + timeout;
        loop {
            let got = self.receive();
            if got.is_err() {
                return self.machine.take_events();
            }
            let events = self.machine.take_events();
            if !events.is_empty() || Instant::now() >= deadline {
                return events;
            }
            wait_readable([&self.ike, &self.natt], Some(deadline));
        }
    }

    /// Handles every datagram waiting on both sockets.
    fn receive(&mut self) -> io::Result<()> {
        for natt in [false, true] {
            loop {
                let socket = if natt { &self.natt } else { &self.ike };
                let Some((n, from, _)) = recv_to(socket, &mut self.buf, &mut self.cmsg)? else {
                    break;
                };
                let now = Instant::now();
                self.machine.handle(natt, from, &self.buf[..n], now);
                for d in self.machine.take_datagrams() {
                    let socket = if d.natt { &self.natt } else { &self.ike };
                    let _ = socket.send_to(&d.data, d.to);
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Psk, Retransmit};
    use crate::event::Event;
    use crate::io::session::Session;
    use crate::proposal::IkeProposals;
    use crate::wire::{Identity, TrafficSelector};
    use linerate_esp::EspSuite;
    use std::net::Ipv4Addr;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn responder_config(psk: &str) -> ResponderConfig {
        ResponderConfig {
            local: Ipv4Addr::LOCALHOST,
            ports: Ports { ike: 0, natt: 0 },
            local_id: Some(Identity::parse("gw.test").unwrap()),
            psk: Psk::new(psk),
            ike: IkeProposals::parse("aes256-sha256-x25519-ecp256").unwrap(),
            esp: EspSuite::Aes128Sha256,
            local_ts: TrafficSelector::parse("198.19.0.0/24").unwrap(),
            remote_ts: TrafficSelector::parse("198.18.0.0/24").unwrap(),
            retransmit: Retransmit::default(),
        }
    }

    /// linerate's initiator against linerate's responder on the loopback:
    /// the tunnel comes up on the responder's ports, both derived the same
    /// keys, the initiator's wider selector is narrowed, the responder
    /// answers a rekey and the Delete; a wrong key is refused.
    #[test]
    fn the_initiator_and_the_responder_agree() {
        let responder = Responder::bind(responder_config("right key")).unwrap();
        let ports = responder.ports();
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = Arc::clone(&stop);
        let server = std::thread::spawn(move || {
            let mut responder = responder;
            let mut events = Vec::new();
            while !stop2.load(Ordering::Relaxed) {
                events.extend(responder.poll(Duration::from_millis(20)));
            }
            (responder, events)
        });
        let config = |psk: &str| {
            let mut c = Config::new(
                Ipv4Addr::LOCALHOST,
                Ipv4Addr::LOCALHOST,
                Psk::new(psk),
                TrafficSelector::parse("198.18.0.0/16").unwrap(),
                TrafficSelector::parse("198.19.0.0/24").unwrap(),
            );
            c.ike = IkeProposals::parse("aes256-sha256-ecp256").unwrap();
            c.esp = EspSuite::Aes128Sha256;
            c.gateway_ports = ports;
            c.local_ports = Ports { ike: 0, natt: 0 };
            c.remote_id = Some(Identity::parse("gw.test").unwrap());
            c.retransmit = Retransmit {
                timeout: Duration::from_millis(200),
                tries: 3,
            };
            c
        };
        let mut session = Session::connect(config("right key")).unwrap();
        let child = session.child().clone();
        assert!(child.udp_encap);
        assert_eq!(
            child.local_ts,
            [TrafficSelector::parse("198.18.0.0/24").unwrap()]
        );
        assert_eq!(child.remote.port(), ports.natt);
        session.rekey_child_wait(Duration::from_secs(3)).unwrap();
        let rekeyed = session.child().clone();
        assert_ne!(rekeyed.inbound.spi, child.inbound.spi);
        let e = Session::connect(config("wrong key")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("authentication failed: the gateway answered AUTHENTICATION_FAILED"),
            "{e}"
        );
        // The responder's view before the Delete.
        std::thread::sleep(Duration::from_millis(100));
        stop.store(true, Ordering::Relaxed);
        let (mut responder, mut events) = server.join().unwrap();
        let tunnels: Vec<_> = responder
            .machine()
            .tunnels()
            .map(|(_, _, c)| c.clone())
            .collect();
        assert_eq!(tunnels.len(), 1);
        let theirs = &tunnels[0];
        assert_eq!(theirs.inbound.spi, rekeyed.outbound.spi);
        assert_eq!(
            theirs.inbound.encryption_key,
            rekeyed.outbound.encryption_key
        );
        assert_eq!(theirs.inbound.integrity_key, rekeyed.outbound.integrity_key);
        assert_eq!(theirs.outbound.spi, rekeyed.inbound.spi);
        assert_eq!(
            theirs.outbound.encryption_key,
            rekeyed.inbound.encryption_key
        );
        assert!(events
            .iter()
            .any(|e| matches!(e, ResponderEvent::Established { .. })));
        assert!(events.iter().any(|e| matches!(
            e,
            ResponderEvent::Failed {
                error: IkeError::InitiatorAuthentication { .. },
                ..
            }
        )));
        assert!(events.iter().any(|e| matches!(
            e,
            ResponderEvent::Event {
                event: Event::ChildRekeyed,
                ..
            }
        )));
        // The Delete, answered by the responder polled meanwhile.
        let server = std::thread::spawn(move || {
            let start = Instant::now();
            while start.elapsed() < Duration::from_secs(2) {
                events.extend(responder.poll(Duration::from_millis(20)));
                if responder.established() == 0 {
                    break;
                }
            }
            events
        });
        session.delete().unwrap();
        let events = server.join().unwrap();
        assert!(events.iter().any(|e| matches!(
            e,
            ResponderEvent::Event {
                event: Event::IkeDeleted,
                ..
            }
        )));
    }
}
