//! linerate-ike's fleet: many peers from one thread and one pair of
//! sockets, each with its own address, IKE SA and CHILD_SA.
//!
//! - Against strongSwan's charon (a gateway that takes any peer address
//!   and the key for any identity): 20 peers come up, charon lists 20
//!   IKE SAs with each peer's SPIs, a CHILD_SA rekeyed by the fleet shows
//!   the new SPIs in charon, one peer's IKE SA rekeyed by the fleet and
//!   then every peer's by charon (`swanctl --rekey --ike`) leave charon
//!   with one IKE SA per peer, each with new SPIs, a CHILD_SA rekey works
//!   under the new IKE SA, and `delete_all` leaves charon with none.
//!
//! - Failures: a wrong key (AUTHENTICATION_FAILED) and a silent gateway
//!   give each peer the one-line error of a single tunnel; a peer address
//!   that is not local is refused when the fleet binds.
//! - Against linerate's own responder: 200 peers from a routed /16 come
//!   up, each with a setup time above zero, the responder holds 200
//!   tunnels whose keys are the fleet's, three peers' IKE SAs are rekeyed
//!   (the old ones deleted, a CHILD_SA rekey under a new one), and
//!   `delete_all` empties it.
//!
//! Root only; needs strongSwan (scripts/setup.sh installs it).

mod common;

use common::*;
use linerate_ike::*;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn peer_addr(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 77, 0, 100 + i as u8)
}

fn peer_net(i: usize) -> TrafficSelector {
    TrafficSelector::parse(&format!("198.18.{i}.0/24")).unwrap()
}

fn fleet_config(psk: &str, peers: Vec<Peer>, gateway: Ipv4Addr) -> FleetConfig {
    FleetConfig {
        gateway,
        gateway_ports: Ports::default(),
        local_ports: Ports::default(),
        remote_id: Some(Identity::parse(GW_ID).unwrap()),
        psk: Psk::new(psk),
        ike: IkeProposals::parse("aes128-sha256-x25519").unwrap(),
        esp: EspSuite::Aes128Gcm16,
        remote_ts: TrafficSelector::parse(GW_NET).unwrap(),
        retransmit: Retransmit {
            timeout: Duration::from_millis(500),
            tries: 5,
        },
        force_encap: true,
        peers,
        attempt_rate: None,
        window: 8,
    }
}

/// charon taking any peer (`remote_addrs = %any`) with the key for any
/// identity, each peer's network narrowed from 198.18.0.0/16.
fn any_peer_conf(psk: &str) -> String {
    format!(
        "connections {{\n  any {{\n    version = 2\n    local_addrs = {GW}\n    remote_addrs = %any\n    proposals = aes128-sha256-x25519\n    local {{\n      auth = psk\n      id = {GW_ID}\n    }}\n    remote {{\n      auth = psk\n      id = %any\n    }}\n    children {{\n      net {{\n        local_ts = {GW_NET}\n        remote_ts = 198.18.0.0/16\n        esp_proposals = aes128gcm16\n        mode = tunnel\n      }}\n    }}\n  }}\n}}\nsecrets {{\n  ike-any {{\n    secret = \"{psk}\"\n  }}\n}}\n"
    )
}

/// charon's IKE SAs by peer address: (initiator SPI, responder SPI),
/// once all `n` are ESTABLISHED and no other is left (None before).
fn established_ike_spis(charon: &Charon, n: usize) -> Option<Vec<(String, String, String)>> {
    let sas = charon.sas();
    let mut out: Vec<(String, String, String)> = sas
        .iter()
        .filter(|sa| text(&sa.fields, "state") == "ESTABLISHED")
        .map(|sa| {
            (
                text(&sa.fields, "remote-host").to_string(),
                text(&sa.fields, "initiator-spi").to_string(),
                text(&sa.fields, "responder-spi").to_string(),
            )
        })
        .collect();
    out.sort();
    (sas.len() == n && out.len() == n).then_some(out)
}

/// Polls the fleet until charon has its `n` IKE SAs, and only those.
fn wait_established(charon: &Charon, fleet: &mut Fleet, n: usize) -> Vec<(String, String, String)> {
    let start = Instant::now();
    loop {
        fleet.poll(Duration::from_millis(50));
        if let Some(sas) = established_ike_spis(charon, n) {
            return sas;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}\n{}",
            charon.sas(),
            charon.log()
        );
    }
}

/// IKE SA rekeys (RFC 7296 §2.18) of a fleet: one peer's by the fleet,
/// then every peer's by charon at once; after each, charon lists one IKE
/// SA per peer with new SPIs (the old ones deleted), and a CHILD_SA
/// rekey under a new IKE SA goes through.
fn ike_rekeys_keep_the_fleet_up(charon: &Charon, fleet: &mut Fleet, n: usize) {
    let before = wait_established(charon, fleet, n);
    fleet.rekey_ike(5).unwrap();
    let mut events = Vec::new();
    let start = Instant::now();
    let rekeyed = |events: &[PeerEvent], peer| {
        events.contains(&PeerEvent {
            peer,
            event: Event::IkeRekeyed,
        })
    };
    while start.elapsed() < Duration::from_secs(5) && !rekeyed(&events, 5) {
        events.extend(fleet.poll(Duration::from_millis(100)));
    }
    assert!(rekeyed(&events, 5), "{events:?}\n{}", charon.log());
    let after = wait_established(charon, fleet, n);
    let changed: Vec<&String> = before
        .iter()
        .zip(&after)
        .filter(|(b, a)| b != a)
        .map(|(_, a)| &a.0)
        .collect();
    assert_eq!(changed, [&peer_addr(5).to_string()], "{before:?} {after:?}");

    // charon rekeys every peer's IKE SA: each is answered.
    charon.swanctl(&["--rekey", "--ike", "any"]);
    let mut events = Vec::new();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) && !(0..n).all(|i| rekeyed(&events, i)) {
        events.extend(fleet.poll(Duration::from_millis(100)));
    }
    let missing: Vec<usize> = (0..n).filter(|&i| !rekeyed(&events, i)).collect();
    assert!(
        missing.is_empty(),
        "not rekeyed: {missing:?}\n{}",
        charon.log()
    );
    assert!(
        !events
            .iter()
            .any(|e| matches!(e.event, Event::Refused { .. } | Event::IkeDeleted)),
        "{events:?}"
    );
    let again = wait_established(charon, fleet, n);
    for (a, b) in after.iter().zip(&again) {
        assert!(a.0 == b.0 && a.1 != b.1 && a.2 != b.2, "{a:?} -> {b:?}");
    }
    assert_eq!(fleet.established(), n);

    // A CHILD_SA rekey under charon's new IKE SA (linerate its responder).
    let old = fleet.child(7).unwrap().clone();
    fleet.rekey_child(7).unwrap();
    let mut events = Vec::new();
    let start = Instant::now();
    let done = PeerEvent {
        peer: 7,
        event: Event::ChildRekeyed,
    };
    while start.elapsed() < Duration::from_secs(5) && !events.contains(&done) {
        events.extend(fleet.poll(Duration::from_millis(100)));
    }
    assert!(events.contains(&done), "{events:?}\n{}", charon.log());
    assert_ne!(fleet.child(7).unwrap().outbound.spi, old.outbound.spi);
}

#[test]
fn a_fleet_of_20_comes_up_against_charon_and_is_deleted() {
    if !is_root() {
        return skip("(needs root: network namespaces, charon)");
    }
    const N: usize = 20;
    let lab = Lab::new("f");
    for i in 0..N {
        run(
            "ip",
            &[
                "-n",
                &lab.peer,
                "addr",
                "add",
                &format!("{}/24", peer_addr(i)),
                "dev",
                "peer0",
            ],
        );
    }
    let key = linerate_helper::random_hex(16).unwrap();
    let charon = Charon::start(&lab.gw, &any_peer_conf(&key), "");
    let peers: Vec<Peer> = (0..N)
        .map(|i| Peer {
            local: peer_addr(i),
            local_id: None,
            local_ts: peer_net(i),
        })
        .collect();
    let config = fleet_config(&key, peers, GW);
    let mut fleet = run_in_netns(&lab.peer, || Fleet::bind(config)).unwrap();
    let mut ended = 0;
    let setups = fleet.bring_up(&mut |_| ended += 1);
    assert_eq!(ended, N);
    assert_eq!(setups.len(), N);
    for (i, s) in setups.iter().enumerate() {
        assert_eq!(s.peer, i);
        match &s.outcome {
            Ok(d) => assert!(*d > Duration::ZERO, "peer {i}: {d:?}"),
            Err(e) => panic!("peer {i}: {e}\n{}", charon.log()),
        }
    }
    assert_eq!(fleet.established(), N);

    // charon's view: one IKE SA per peer address, each with the CHILD_SA
    // whose SPIs the fleet holds and the peer's own network.
    let sas = charon.sas();
    assert_eq!(sas.len(), N, "{sas:?}");
    for i in 0..N {
        let child = fleet.child(i).unwrap();
        assert_eq!(child.local.to_string(), format!("{}:4500", peer_addr(i)));
        assert_eq!(child.local_ts, [peer_net(i)]);
        let sa = sas
            .iter()
            .find(|sa| text(&sa.fields, "remote-host") == peer_addr(i).to_string())
            .unwrap_or_else(|| panic!("no IKE SA for {}: {sas:?}", peer_addr(i)));
        assert_eq!(text(&sa.fields, "state"), "ESTABLISHED");
        let kids = children(&sa.fields);
        assert_eq!(kids.len(), 1);
        assert_eq!(
            text(kids[0], "spi-in"),
            format!("{:08x}", child.outbound.spi)
        );
        assert_eq!(
            text(kids[0], "spi-out"),
            format!("{:08x}", child.inbound.spi)
        );
        assert_eq!(list(kids[0], "remote-ts"), [peer_net(i).to_string()]);
    }

    // A rekey of peer 3's CHILD_SA: the fleet reports it, and charon has
    // the new SPIs for that peer (the old CHILD_SA deleted by the fleet).
    let old = fleet.child(3).unwrap().clone();
    fleet.rekey_child(3).unwrap();
    let start = Instant::now();
    let mut events = Vec::new();
    while start.elapsed() < Duration::from_secs(5)
        && !events.contains(&PeerEvent {
            peer: 3,
            event: Event::ChildRekeyed,
        })
    {
        events.extend(fleet.poll(Duration::from_millis(100)));
    }
    assert!(
        events.contains(&PeerEvent {
            peer: 3,
            event: Event::ChildRekeyed
        }),
        "{events:?}\n{}",
        charon.log()
    );
    let new = fleet.child(3).unwrap().clone();
    assert_ne!(new.outbound.spi, old.outbound.spi);
    let start = Instant::now();
    loop {
        // The fleet's Delete of the old CHILD_SA goes out as it is polled.
        fleet.poll(Duration::from_millis(50));
        let sas = charon.sas();
        let sa = sas
            .iter()
            .find(|sa| text(&sa.fields, "remote-host") == peer_addr(3).to_string())
            .unwrap();
        // charon keeps a rekeyed CHILD_SA's inbound SA a few seconds
        // (delete_rekeyed_delay), no longer INSTALLED.
        let spis: Vec<String> = children(&sa.fields)
            .iter()
            .filter(|c| text(c, "state") == "INSTALLED")
            .map(|c| text(c, "spi-in").to_string())
            .collect();
        if spis == [format!("{:08x}", new.outbound.spi)] {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "{spis:?}");
    }

    ike_rekeys_keep_the_fleet_up(&charon, &mut fleet, N);

    fleet.delete_all();
    assert_eq!(fleet.established(), 0);
    let left = charon.wait_no_sas();
    assert!(left.is_empty(), "left after delete_all: {left:?}");
}

#[test]
fn a_fleet_of_200_comes_up_against_linerates_responder() {
    if !is_root() {
        return skip("(needs root: network namespaces)");
    }
    const N: usize = 200;
    let lab = Lab::new("g");
    // 10.78.0.0/16 is local in the peers' namespace and routed to it.
    run(
        "ip",
        &[
            "-n",
            &lab.peer,
            "route",
            "add",
            "local",
            "10.78.0.0/16",
            "dev",
            "lo",
        ],
    );
    run(
        "ip",
        &[
            "-n",
            &lab.gw,
            "route",
            "add",
            "10.78.0.0/16",
            "via",
            &PEER.to_string(),
        ],
    );
    let key = linerate_helper::random_hex(16).unwrap();
    let responder = run_in_netns(&lab.gw, || {
        Responder::bind(ResponderConfig {
            local: GW,
            ports: Ports::default(),
            local_id: Some(Identity::parse(GW_ID).unwrap()),
            psk: Psk::new(key.as_str()),
            ike: IkeProposals::parse("aes128-sha256-x25519").unwrap(),
            esp: EspSuite::Aes128Gcm16,
            local_ts: TrafficSelector::parse(GW_NET).unwrap(),
            remote_ts: TrafficSelector::parse("198.18.0.0/16").unwrap(),
            retransmit: Retransmit::default(),
        })
    })
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count2 = Arc::clone(&count);
    let server = std::thread::spawn(move || {
        let mut responder = responder;
        while !stop2.load(Ordering::Relaxed) {
            responder.poll(Duration::from_millis(20));
            count2.store(responder.established(), Ordering::Relaxed);
        }
        responder
    });
    let peers: Vec<Peer> = (0..N)
        .map(|i| Peer {
            local: Ipv4Addr::new(10, 78, (i / 250) as u8, (i % 250 + 1) as u8),
            local_id: None,
            local_ts: peer_net(i),
        })
        .collect();
    let mut config = fleet_config(&key, peers, GW);
    config.window = 64;
    let mut fleet = run_in_netns(&lab.peer, || Fleet::bind(config)).unwrap();
    let setups = fleet.bring_up(&mut |_| {});
    assert_eq!(setups.len(), N);
    for s in &setups {
        match &s.outcome {
            Ok(d) => assert!(*d > Duration::ZERO, "peer {}: {d:?}", s.peer),
            Err(e) => panic!("peer {}: {e}", s.peer),
        }
    }
    assert_eq!(fleet.established(), N);
    // The responder's tunnels: one per peer, with the fleet's keys.
    let start = Instant::now();
    while count.load(Ordering::Relaxed) != N && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let responder = server.join().unwrap();
    assert_eq!(responder.established(), N);
    for i in 0..N {
        let ours = fleet.child(i).unwrap();
        let (_, _, theirs) = responder
            .machine()
            .tunnels()
            .find(|(_, _, c)| c.inbound.spi == ours.outbound.spi)
            .unwrap_or_else(|| panic!("peer {i}: no tunnel at the responder"));
        assert_eq!(theirs.inbound.encryption_key, ours.outbound.encryption_key);
        assert_eq!(theirs.outbound.spi, ours.inbound.spi);
        assert_eq!(theirs.remote_ts, [peer_net(i)]);
    }
    // delete_all while the responder answers.
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let server = std::thread::spawn(move || {
        let mut responder = responder;
        while !stop2.load(Ordering::Relaxed) {
            responder.poll(Duration::from_millis(20));
        }
        responder
    });
    // IKE SA rekeys of three peers, answered by the responder; then a
    // CHILD_SA rekey of one within 5 s: the fleet's Delete of its old IKE
    // SA was answered (it is first in the one-request window, and unanswered
    // it would hold the rekey back 15 s), on the SA's old SPI.
    for peer in 0..3 {
        fleet.rekey_ike(peer).unwrap();
    }
    let mut events = Vec::new();
    let start = Instant::now();
    let want = |peer, event| PeerEvent { peer, event };
    while start.elapsed() < Duration::from_secs(5)
        && !(0..3).all(|p| events.contains(&want(p, Event::IkeRekeyed)))
    {
        events.extend(fleet.poll(Duration::from_millis(50)));
    }
    assert!(
        (0..3).all(|p| events.contains(&want(p, Event::IkeRekeyed))),
        "{events:?}"
    );
    fleet.rekey_child(1).unwrap();
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(5)
        && !events.contains(&want(1, Event::ChildRekeyed))
    {
        events.extend(fleet.poll(Duration::from_millis(50)));
    }
    assert!(events.contains(&want(1, Event::ChildRekeyed)), "{events:?}");
    fleet.delete_all();
    assert_eq!(fleet.established(), 0);
    std::thread::sleep(Duration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let responder = server.join().unwrap();
    assert_eq!(responder.established(), 0);
}

/// Failures carry the gateway's answer in the one-line errors of a single
/// tunnel: a wrong key (linerate's responder answers
/// AUTHENTICATION_FAILED), and no gateway at all (the tries, then "no
/// answer"); no tunnel is counted up.
#[test]
fn fleet_failures_name_the_gateways_answer() {
    if !is_root() {
        return skip("(needs root: network namespaces)");
    }
    const N: usize = 5;
    let lab = Lab::new("e");
    run(
        "ip",
        &[
            "-n",
            &lab.peer,
            "route",
            "add",
            "local",
            "10.78.0.0/16",
            "dev",
            "lo",
        ],
    );
    run(
        "ip",
        &[
            "-n",
            &lab.gw,
            "route",
            "add",
            "10.78.0.0/16",
            "via",
            &PEER.to_string(),
        ],
    );
    let responder = run_in_netns(&lab.gw, || {
        Responder::bind(ResponderConfig {
            local: GW,
            ports: Ports::default(),
            local_id: Some(Identity::parse(GW_ID).unwrap()),
            psk: Psk::new("the responder's key"),
            ike: IkeProposals::parse("aes128-sha256-x25519").unwrap(),
            esp: EspSuite::Aes128Gcm16,
            local_ts: TrafficSelector::parse(GW_NET).unwrap(),
            remote_ts: TrafficSelector::parse("198.18.0.0/16").unwrap(),
            retransmit: Retransmit::default(),
        })
    })
    .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let server = std::thread::spawn(move || {
        let mut responder = responder;
        while !stop2.load(Ordering::Relaxed) {
            responder.poll(Duration::from_millis(20));
        }
    });
    let peers = |first: u8| -> Vec<Peer> {
        (0..N)
            .map(|i| Peer {
                local: Ipv4Addr::new(10, 78, first, i as u8 + 1),
                local_id: None,
                local_ts: peer_net(i),
            })
            .collect()
    };
    let config = fleet_config("another key", peers(0), GW);
    let mut fleet = run_in_netns(&lab.peer, || Fleet::bind(config)).unwrap();
    let setups = fleet.bring_up(&mut |_| {});
    assert_eq!(setups.len(), N);
    for (i, s) in setups.iter().enumerate() {
        let e = s.outcome.as_ref().expect_err("a wrong key fails");
        assert_eq!(
            e.to_string(),
            format!("authentication failed: the gateway answered AUTHENTICATION_FAILED; check the pre-shared key (and that the gateway expects the identity 10.78.0.{})", i + 1)
        );
    }
    assert_eq!(fleet.established(), 0);
    drop(fleet);
    stop.store(true, Ordering::Relaxed);
    server.join().unwrap();

    // Nobody answers: each peer's tries with back-off, then the error.
    let mut config = fleet_config("k", peers(1), GW);
    config.retransmit = Retransmit {
        timeout: Duration::from_millis(50),
        tries: 2,
    };
    let mut fleet = run_in_netns(&lab.peer, || Fleet::bind(config)).unwrap();
    let start = Instant::now();
    let setups = fleet.bring_up(&mut |_| {});
    for s in &setups {
        let e = s.outcome.as_ref().expect_err("nobody answers");
        assert_eq!(
            e.to_string(),
            format!("no answer from {GW}:500 after 2 tries")
        );
    }
    // 50 + 100 ms per peer, all in parallel.
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "{:?}",
        start.elapsed()
    );

    // A peer address that is not local is refused when the fleet binds.
    let config = fleet_config(
        "k",
        vec![Peer {
            local: Ipv4Addr::new(192, 0, 2, 7),
            local_id: None,
            local_ts: peer_net(0),
        }],
        GW,
    );
    let e = run_in_netns(&lab.peer, || Fleet::bind(config)).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("cannot use the peer address 192.0.2.7: "),
        "{e}"
    );
    assert!(
        e.to_string()
            .ends_with("; the address is on no interface of this network namespace"),
        "{e}"
    );
}
