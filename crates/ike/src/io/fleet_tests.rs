//! The fleet against linerate's responder on the loopback
//! ([`crate::io::loopback`]); apart from `fleet.rs`, which the loopback
//! gateway itself uses.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use linerate_esp::EspSuite;

use crate::config::Retransmit;
use crate::error::IkeError;
use crate::event::Event;
use crate::io::fleet::{Fleet, PeerEvent};
use crate::io::loopback::{Answered, LoopbackGateway};

/// linerate's own CHILD_SA rekey: the new SA is installed before the
/// Delete of the old one leaves, so the gateway (which sends on the
/// new SA once the old one is deleted, as charon does) never sends a
/// frame linerate has no SA for. The installer takes 100 ms here: had
/// the Delete left before it, the gateway would have answered it
/// during those 100 ms.
#[test]
fn a_rekeys_new_child_sa_is_installed_before_the_delete_of_the_old_one_leaves() {
    let gateway = LoopbackGateway::start();
    let (mut fleet, addresses) = gateway.fleet_up(1, true, Retransmit::default());
    let installed: Arc<Mutex<Vec<(usize, u32, Instant)>>> = Arc::default();
    let log = Arc::clone(&installed);
    fleet.install_new_children(Box::new(move |peer, child| {
        std::thread::sleep(Duration::from_millis(100));
        let mut log = log.lock().unwrap();
        log.push((peer, child.inbound.spi, Instant::now()));
    }));
    let old_spi = fleet.child(0).expect("up").inbound.spi;
    fleet.rekey_child(0).expect("the rekey starts");
    let rekeyed = PeerEvent {
        peer: 0,
        event: Event::ChildRekeyed,
    };
    let start = Instant::now();
    let mut events = Vec::new();
    while !events.contains(&rekeyed) && start.elapsed() < Duration::from_secs(5) {
        events.extend(fleet.poll(Duration::from_millis(50)));
    }
    assert!(events.contains(&rekeyed), "{events:?}");
    let new_spi = fleet.child(0).expect("up").inbound.spi;
    assert_ne!(new_spi, old_spi);
    let installed = installed.lock().unwrap().clone();
    assert_eq!(installed.len(), 1, "installed once: {installed:?}");
    let (peer, spi, installed_at) = installed[0];
    assert_eq!((peer, spi), (0, new_spi), "the new SA, for peer 0");
    // The gateway's answer to the Delete of the old CHILD_SA.
    let deleted =
        |a: &Answered| a.event == Event::RekeyedChildDeleted && *a.peer.ip() == addresses[0];
    while !gateway.answered().iter().any(deleted) && start.elapsed() < Duration::from_secs(5) {
        fleet.poll(Duration::from_millis(50));
    }
    let answered = gateway.answered();
    let delete = answered.iter().find(|a| deleted(a));
    let delete = delete.unwrap_or_else(|| panic!("no Delete reached the gateway: {answered:?}"));
    assert!(
        delete.at > installed_at,
        "the gateway had the Delete {:?} before the new SA was installed",
        installed_at.saturating_duration_since(delete.at)
    );
}

/// Polls until `peer` reports `Event::RekeyFailed`; its reason.
fn rekey_failure(fleet: &mut Fleet, peer: usize) -> Option<IkeError> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5) {
        let events = fleet.poll(Duration::from_millis(50));
        let failed = PeerEvent {
            peer,
            event: Event::RekeyFailed,
        };
        if events.contains(&failed) {
            return fleet.rekey_error(peer);
        }
    }
    None
}

/// Deletes go through the set-up window and those no answer ended are
/// reported (issue 41: 2,000 Deletes at once overflowed the gateway's
/// receive buffer, and 27 tunnels stayed up, unreported). Answered:
/// every one, none unanswered. With the gateway gone: every one
/// unanswered, and 6 Deletes through a window of 2 take 3 rounds of
/// tries at least, where all at once would take one.
#[test]
fn deletes_are_paced_by_the_window_and_the_unanswered_reported() {
    let mut gateway = LoopbackGateway::start();
    let retransmit = Retransmit {
        timeout: Duration::from_millis(50),
        tries: 2,
    };
    let (mut fleet, _) = gateway.fleet_up(6, false, retransmit);
    fleet.set_window(2);
    let deletes = fleet.delete_all();
    assert_eq!(
        (deletes.asked, deletes.unanswered.len()),
        (6, 0),
        "{deletes:?}"
    );
    assert_eq!(fleet.established(), 0);

    let (mut fleet, _) = gateway.fleet_up(6, false, retransmit);
    fleet.set_window(2);
    gateway.stop();
    let start = Instant::now();
    let deletes = fleet.delete_all();
    let took = start.elapsed();
    assert_eq!(deletes.asked, 6);
    assert_eq!(deletes.unanswered, [0, 1, 2, 3, 4, 5], "took {took:?}");
    // One Delete's tries: 50 ms, then 100 ms.
    let one = Duration::from_millis(150);
    assert!(
        took >= 3 * one,
        "6 Deletes through a window of 2 took {took:?}"
    );
}

/// Two peers against linerate's responder on the loopback: one
/// offers another ESP suite in its CHILD_SA rekey (the responder
/// answers NO_PROPOSAL_CHOSEN), the other rekeys once the responder is
/// gone (no answer after the tries): each failure's reason reaches the
/// caller, once.
#[test]
fn a_failed_rekey_says_why() {
    let mut gateway = LoopbackGateway::start();
    let retransmit = Retransmit {
        timeout: Duration::from_millis(100),
        tries: 2,
    };
    let (mut fleet, _) = gateway.fleet_up(2, false, retransmit);

    // Peer 0 offers a suite the responder does not take.
    fleet.tunnel_mut(0).unwrap().esp = EspSuite::Aes256Sha256;
    fleet.rekey_child(0).unwrap();
    let why = rekey_failure(&mut fleet, 0);
    assert!(
        matches!(why, Some(IkeError::NoProposalChosen { .. })),
        "{why:?}"
    );
    assert!(fleet.rekey_error(0).is_none(), "given once");
    assert!(fleet.child(0).is_some(), "the old CHILD_SA stays");

    gateway.stop();
    fleet.rekey_child(1).unwrap();
    let why = rekey_failure(&mut fleet, 1);
    assert!(
        matches!(why, Some(IkeError::NoAnswer { tries: 2, .. })),
        "{why:?}"
    );
}
