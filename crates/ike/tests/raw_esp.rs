//! Raw ESP (no UDP encapsulation) negotiated between linerate's own
//! initiator (`Session`, what `--ipsec --esp-encap raw|auto` runs) and
//! linerate's own responder, in two network namespaces joined by a veth
//! pair with no NAT between: with NAT detection left honest
//! (`force_encap: false`) both ends' CHILD_SA says "no UDP
//! encapsulation"; with it faked (`force_encap: true`, `--esp-encap udp`,
//! the default) both say UDP. IKE itself moves to port 4500 either way
//! (RFC 7296 §2.23 allows it without a NAT).
//!
//! Root only (network namespaces).

mod common;

use common::*;
use linerate_ike::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const PEER_NET: &str = "198.18.0.0/24";

/// linerate's responder in the gateway's namespace, answering until the
/// returned flag is set; the thread hands it back when joined.
fn responder(lab: &Lab, key: &str) -> (Arc<AtomicBool>, std::thread::JoinHandle<Responder>) {
    let config = ResponderConfig {
        local: GW,
        ports: Ports::default(),
        local_id: None,
        psk: Psk::new(key),
        ike: IkeProposals::parse("aes128-sha256-x25519").unwrap(),
        esp: EspSuite::Aes128Gcm16,
        local_ts: TrafficSelector::parse(GW_NET).unwrap(),
        remote_ts: TrafficSelector::parse(PEER_NET).unwrap(),
        retransmit: Retransmit::default(),
    };
    let responder = run_in_netns(&lab.gw, || Responder::bind(config)).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let server = std::thread::spawn(move || {
        let mut responder = responder;
        while !stop2.load(Ordering::Relaxed) {
            responder.poll(Duration::from_millis(20));
        }
        responder
    });
    (stop, server)
}

/// Brings one tunnel up from the peer's namespace with `force_encap`;
/// returns (the initiator's udp_encap, the responder's).
fn negotiate(force_encap: bool) -> (bool, bool) {
    let lab = Lab::new(if force_encap { "u" } else { "r" });
    let key = linerate_helper::random_hex(16).unwrap();
    let (stop, server) = responder(&lab, &key);
    let mut config = Config::new(
        PEER,
        GW,
        Psk::new(key.as_str()),
        TrafficSelector::parse(PEER_NET).unwrap(),
        TrafficSelector::parse(GW_NET).unwrap(),
    );
    config.ike = IkeProposals::parse("aes128-sha256-x25519").unwrap();
    config.esp = EspSuite::Aes128Gcm16;
    config.force_encap = force_encap;
    let session = run_in_netns(&lab.peer, || Session::connect(config));
    let session = session.unwrap_or_else(|e| panic!("force_encap {force_encap}: {e}"));
    let ours = session.child().clone();
    // The responder has the tunnel once its IKE_AUTH answer left.
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let responder = server.join().unwrap();
    let tunnels: Vec<_> = responder.machine().tunnels().collect();
    assert_eq!(tunnels.len(), 1, "force_encap {force_encap}");
    let (_, _, theirs) = tunnels[0];
    // The same CHILD_SA at both ends.
    assert_eq!(theirs.inbound.spi, ours.outbound.spi);
    assert_eq!(theirs.outbound.spi, ours.inbound.spi);
    assert_eq!(theirs.inbound.encryption_key, ours.outbound.encryption_key);
    // IKE on 4500 either way: ESP in UDP would share it.
    assert_eq!(ours.local.port(), 4500);
    assert_eq!(ours.remote.port(), 4500);
    let result = (ours.udp_encap, theirs.udp_encap);
    drop(session);
    result
}

#[test]
fn with_nat_detection_left_honest_the_child_sa_is_raw_esp() {
    if !is_root() {
        return skip("(needs root: network namespaces)");
    }
    assert_eq!(
        negotiate(false),
        (false, false),
        "no NAT, nothing faked: raw ESP"
    );
    // The check can fail: faked NAT detection makes both ends encapsulate.
    assert_eq!(negotiate(true), (true, true), "faked NAT: ESP in UDP");
}
