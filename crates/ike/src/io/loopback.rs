//! Test support (this crate's tests, and other crates' through the
//! `test-support` feature): peers of a [`Fleet`] on 127.0.0.2 upward,
//! brought up against linerate's own [`Responder`] on 127.0.0.1, with no
//! NAT and no namespace between, so unit tests need neither root nor a
//! gateway.
//!
//! The responder is polled by a thread that [`LoopbackGateway`] stops and
//! joins when it is stopped or dropped, so a failing test leaves no thread
//! behind.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use linerate_esp::EspSuite;

use crate::config::{FleetConfig, Peer, Ports, Psk, ResponderConfig, Retransmit};
use crate::event::Event;
use crate::io::fleet::Fleet;
use crate::io::responder::Responder;
use crate::proposal::IkeProposals;
use crate::responder::ResponderEvent;
use crate::wire::TrafficSelector;

/// The ESP suite both ends offer.
pub const ESP: EspSuite = EspSuite::Aes128Gcm16;
/// The key both ends hold.
const PSK: &str = "loopback test key";
/// The IKE suite both ends offer (quick: X25519).
const IKE: &str = "aes128-sha256-x25519";
/// The network behind the gateway, and the one its peers' slices are in.
const GATEWAY_NET: &str = "198.19.0.0/24";
const PEERS_NET: &str = "198.18.0.0/16";

fn selector(net: &str) -> TrafficSelector {
    TrafficSelector::parse(net).expect("a valid network")
}

/// linerate's responder on 127.0.0.1 (ports the kernel picks), answering
/// from a thread until [`stop`](Self::stop) or drop.
pub struct LoopbackGateway {
    ports: Ports,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    /// The requests of established peers the responder answered, with
    /// when its thread saw them.
    answered: Arc<Mutex<Vec<Answered>>>,
}

/// A request of an established peer that the gateway answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Answered {
    pub at: Instant,
    pub peer: SocketAddrV4,
    pub event: Event,
}

impl LoopbackGateway {
    /// Binds the responder and starts its thread.
    pub fn start() -> LoopbackGateway {
        let mut responder = Responder::bind(ResponderConfig {
            local: Ipv4Addr::LOCALHOST,
            ports: Ports { ike: 0, natt: 0 },
            local_id: None,
            psk: Psk::new(PSK),
            ike: IkeProposals::parse(IKE).expect("a valid IKE suite"),
            esp: ESP,
            local_ts: selector(GATEWAY_NET),
            remote_ts: selector(PEERS_NET),
            retransmit: Retransmit::default(),
        })
        .expect("the responder binds on the loopback");
        let ports = responder.ports();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let answered = Arc::new(Mutex::new(Vec::new()));
        let log = Arc::clone(&answered);
        let thread = std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                for e in responder.poll(Duration::from_millis(20)) {
                    if let ResponderEvent::Event { peer, event, .. } = e {
                        let at = Instant::now();
                        let mut log = log.lock().unwrap_or_else(|p| p.into_inner());
                        log.push(Answered { at, peer, event });
                    }
                }
            }
        });
        LoopbackGateway {
            ports,
            stop,
            thread: Some(thread),
            answered,
        }
    }

    /// The requests of established peers answered so far, in order.
    pub fn answered(&self) -> Vec<Answered> {
        self.answered
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Where the responder listens.
    pub fn ports(&self) -> Ports {
        self.ports
    }

    /// Stops answering (the responder and its sockets are gone once this
    /// returns); again is a no-op.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let Some(thread) = self.thread.take() else {
            return;
        };
        // A panic in the responder fails the test, unless it is failing
        // already (a second panic would abort and hide the first).
        if thread.join().is_err() && !std::thread::panicking() {
            panic!("the loopback responder's thread panicked");
        }
    }

    /// `count` peers, 127.0.0.2 upward, peer `i` for 198.18.`i`.0/24,
    /// bound and all brought up against this gateway (asserted); their
    /// addresses beside. `force_encap` fakes NAT detection (ESP in UDP);
    /// `retransmit` is the peers' (a stopped gateway fails after it).
    pub fn fleet_up(
        &self,
        count: u8,
        force_encap: bool,
        retransmit: Retransmit,
    ) -> (Fleet, Vec<Ipv4Addr>) {
        let addresses: Vec<Ipv4Addr> = (0..count)
            .map(|i| Ipv4Addr::new(127, 0, 0, 2 + i))
            .collect();
        let mut fleet = Fleet::bind(FleetConfig {
            gateway: Ipv4Addr::LOCALHOST,
            gateway_ports: self.ports,
            local_ports: Ports { ike: 0, natt: 0 },
            remote_id: None,
            psk: Psk::new(PSK),
            ike: IkeProposals::parse(IKE).expect("a valid IKE suite"),
            esp: ESP,
            remote_ts: selector(GATEWAY_NET),
            retransmit,
            force_encap,
            peers: addresses
                .iter()
                .enumerate()
                .map(|(i, &local)| Peer {
                    local,
                    local_id: None,
                    local_ts: selector(&format!("198.18.{i}.0/24")),
                })
                .collect(),
            attempt_rate: None,
            window: count as usize,
        })
        .expect("the fleet binds on the loopback");
        let setups = fleet.bring_up(&mut |_| {});
        assert!(setups.iter().all(|s| s.outcome.is_ok()), "{setups:?}");
        (fleet, addresses)
    }
}

impl Drop for LoopbackGateway {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::panic::{catch_unwind, AssertUnwindSafe};

    /// A test that fails with the gateway up still stops and joins its
    /// thread: the responder's sockets are closed, their ports free.
    #[test]
    fn a_failing_test_leaves_no_gateway_behind() {
        let mut ports = None;
        let failed = catch_unwind(AssertUnwindSafe(|| {
            let gateway = LoopbackGateway::start();
            ports = Some(gateway.ports());
            panic!("a test that fails with the gateway up");
        }));
        assert!(failed.is_err());
        let ports = ports.expect("the gateway started");
        for port in [ports.ike, ports.natt] {
            UdpSocket::bind((Ipv4Addr::LOCALHOST, port))
                .unwrap_or_else(|e| panic!("port {port} still held: {e}"));
        }
    }
}
