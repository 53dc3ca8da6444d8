//! CREATE_CHILD_SA rekeying of the CHILD_SA (RFC 7296 §1.3.3) against
//! strongSwan's charon as the gateway, with PFS (the gateway's ESP
//! proposal names x25519, so every rekey carries a KE payload):
//!
//! - linerate rekeys: charon lists the new SPIs and not the old ones
//!   (linerate deleted the old CHILD_SA), a ping sealed with the new keys
//!   is answered through the tunnel and charon counts it on the new
//!   CHILD_SA;
//! - charon rekeys (`swanctl --rekey`): linerate answers with a new
//!   CHILD_SA instead of NO_ADDITIONAL_SAS, charon deletes the old one,
//!   and the new keys carry a ping both ways;
//! - a fleet peer rekeys: charon shows the new SPIs for that peer.
//!
//! and of the IKE SA (RFC 7296 §1.3.2, §2.18):
//!
//! - charon rekeys it (`swanctl --rekey --ike`): linerate answers, charon
//!   lists only the new IKE SA (new SPIs), the CHILD_SA is the same and
//!   still carries ESP (charon's packet counter grows), and CHILD_SA
//!   rekeys both ways work under the new IKE SA (its SK_d, SK_e, SK_a);
//! - linerate rekeys it (`Session::rekey_ike`): charon lists the new IKE
//!   SA and not the old one, which linerate deleted.
//!
//! Root only; needs strongSwan (scripts/setup.sh installs it).

mod common;

use common::*;
use linerate_ike::*;
use std::time::{Duration, Instant};

const PEER_NET: &str = "198.18.0.0/24";

fn conf(psk: &str) -> String {
    format!(
        "connections {{\n  peer {{\n    version = 2\n    local_addrs = {GW}\n    remote_addrs = {PEER}\n    proposals = aes128-sha256-x25519\n    local {{\n      auth = psk\n      id = {GW_ID}\n    }}\n    remote {{\n      auth = psk\n      id = {PEER}\n    }}\n    children {{\n      net {{\n        local_ts = {GW_NET}\n        remote_ts = {PEER_NET}\n        esp_proposals = aes256gcm16-x25519\n        mode = tunnel\n      }}\n    }}\n  }}\n}}\nsecrets {{\n  ike-peer {{\n    secret = \"{psk}\"\n  }}\n}}\n"
    )
}

fn config(psk: &str) -> Config {
    let mut c = Config::new(
        PEER,
        GW,
        Psk::new(psk),
        TrafficSelector::parse(PEER_NET).unwrap(),
        TrafficSelector::parse(GW_NET).unwrap(),
    );
    c.ike = IkeProposals::parse("aes128-sha256-x25519").unwrap();
    c.esp = EspSuite::Aes256Gcm16;
    c.remote_id = Some(Identity::parse(GW_ID).unwrap());
    c
}

/// charon's CHILD_SAs: (spi-in, spi-out, packets-in).
fn charon_children(charon: &Charon) -> Vec<(String, String, u64)> {
    let mut out = Vec::new();
    for sa in charon.sas() {
        for c in children(&sa.fields) {
            let packets = match get(c, "packets-in") {
                Some(Value::Text(t)) => t.parse().unwrap_or(0),
                _ => 0,
            };
            if text(c, "state") == "INSTALLED" {
                out.push((
                    text(c, "spi-in").to_string(),
                    text(c, "spi-out").to_string(),
                    packets,
                ));
            }
        }
    }
    out
}

/// Drives the session (answering charon, sending linerate's Delete of
/// the old CHILD_SA) until charon has only the CHILD_SA of `child`.
fn wait_only(
    charon: &Charon,
    session: &mut Session,
    child: &ChildSa,
) -> Vec<(String, String, u64)> {
    let want = (
        format!("{:08x}", child.outbound.spi),
        format!("{:08x}", child.inbound.spi),
    );
    let start = Instant::now();
    loop {
        let kids = charon_children(charon);
        if kids.len() == 1 && (kids[0].0.clone(), kids[0].1.clone()) == want {
            return kids;
        }
        if start.elapsed() > Duration::from_secs(5) {
            panic!(
                "charon's CHILD_SAs {kids:?}, expected only {want:?}\n{}",
                charon.log()
            );
        }
        while let Ok(Some(_)) = session.poll(Duration::from_millis(100)) {}
    }
}

#[test]
fn the_child_sa_is_rekeyed_by_linerate_and_by_the_gateway() {
    if !is_root() {
        return skip("(needs root: network namespaces, charon)");
    }
    let lab = Lab::new("r");
    let key = linerate_helper::random_hex(16).unwrap();
    let charon = Charon::start(&lab.gw, &conf(&key), "");
    let sockets = run_in_netns(&lab.peer, || Sockets::bind(PEER, Ports::default())).unwrap();
    let mut session = Session::connect_with(config(&key), sockets)
        .unwrap_or_else(|e| panic!("{e}\n{}", charon.log()));
    let first = session.child().clone();
    wait_only(&charon, &mut session, &first);

    // linerate rekeys, with PFS as the gateway's ESP proposal asks.
    session.set_rekey_pfs(Some(DhGroup::Curve25519));
    session
        .rekey_child_wait(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("rekey: {e}\n{}", charon.log()));
    let second = session.child().clone();
    assert_ne!(second.outbound.spi, first.outbound.spi);
    assert_ne!(second.inbound.spi, first.inbound.spi);
    assert_ne!(
        second.outbound.encryption_key,
        first.outbound.encryption_key
    );
    assert_eq!(second.local_ts, first.local_ts);
    assert!(session.is_up());
    // The old CHILD_SA is gone from charon, the new one is there.
    wait_only(&charon, &mut session, &second);
    ping_through(&mut session, &second, "after linerate's rekey");
    let kids = charon_children(&charon);
    assert_eq!(kids.len(), 1);
    assert!(
        kids[0].2 >= 1,
        "charon counted the ping on the new CHILD_SA: {kids:?}"
    );
    let log = charon.log();
    assert!(log.contains("CREATE_CHILD_SA"), "{log}");

    // charon rekeys: linerate answers with a new CHILD_SA.
    charon.swanctl(&["--rekey", "--child", "net"]);
    let start = Instant::now();
    let mut rekeyed = false;
    while start.elapsed() < Duration::from_secs(5) && !rekeyed {
        if let Some(e) = session.poll(Duration::from_millis(100)).unwrap() {
            assert_ne!(e, Event::ChildDeleted, "{}", charon.log());
            rekeyed = e == Event::ChildRekeyed;
        }
    }
    assert!(rekeyed, "no rekey by charon:\n{}", charon.log());
    let third = session.child().clone();
    assert_ne!(third.outbound.spi, second.outbound.spi);
    assert_ne!(third.inbound.spi, second.inbound.spi);
    assert!(session.is_up());
    wait_only(&charon, &mut session, &third);
    ping_through(&mut session, &third, "after charon's rekey");

    session.delete().unwrap();
    assert!(charon.wait_no_sas().is_empty());
}

/// charon's IKE SAs: (initiator SPI, responder SPI, state).
fn charon_ike_sas(charon: &Charon) -> Vec<(String, String, String)> {
    charon
        .sas()
        .iter()
        .map(|sa| {
            (
                text(&sa.fields, "initiator-spi").to_string(),
                text(&sa.fields, "responder-spi").to_string(),
                text(&sa.fields, "state").to_string(),
            )
        })
        .collect()
}

/// Drives the session until charon has only the session's IKE SA, as it
/// is now (the old one of a rekey deleted).
fn wait_only_ike(charon: &Charon, session: &mut Session) {
    let (spi_i, spi_r) = session.ike_spis();
    let want = (format!("{spi_i:016x}"), format!("{spi_r:016x}"));
    let start = Instant::now();
    loop {
        let sas = charon_ike_sas(charon);
        if sas.len() == 1 && (sas[0].0.clone(), sas[0].1.clone()) == want {
            assert_eq!(sas[0].2, "ESTABLISHED", "{sas:?}");
            return;
        }
        if start.elapsed() > Duration::from_secs(5) {
            panic!(
                "charon's IKE SAs {sas:?}, expected only {want:?}\n{}",
                charon.log()
            );
        }
        while let Ok(Some(_)) = session.poll(Duration::from_millis(100)) {}
    }
}

/// The ESP packets charon counted in on its one CHILD_SA.
fn packets_in(charon: &Charon) -> u64 {
    let kids = charon_children(charon);
    assert_eq!(kids.len(), 1, "{kids:?}");
    kids[0].2
}

/// After an IKE SA rekey: CHILD_SA rekeys by linerate and by charon go
/// through under the new IKE SA, each new CHILD_SA carrying a ping.
fn child_rekeys_work(charon: &Charon, session: &mut Session, what: &str) {
    let before = session.child().clone();
    session
        .rekey_child_wait(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("{what}: CHILD_SA rekey: {e}\n{}", charon.log()));
    let mine = session.child().clone();
    assert_ne!(mine.outbound.spi, before.outbound.spi);
    wait_only(charon, session, &mine);
    ping_through(
        session,
        &mine,
        &format!("{what}: linerate's CHILD_SA rekey"),
    );

    charon.swanctl(&["--rekey", "--child", "net"]);
    let start = Instant::now();
    let mut rekeyed = false;
    while start.elapsed() < Duration::from_secs(5) && !rekeyed {
        if let Some(e) = session.poll(Duration::from_millis(100)).unwrap() {
            rekeyed = e == Event::ChildRekeyed;
        }
    }
    assert!(
        rekeyed,
        "{what}: no CHILD_SA rekey by charon:\n{}",
        charon.log()
    );
    let theirs = session.child().clone();
    wait_only(charon, session, &theirs);
    ping_through(
        session,
        &theirs,
        &format!("{what}: charon's CHILD_SA rekey"),
    );
}

#[test]
fn the_gateways_ike_sa_rekey_is_answered() {
    if !is_root() {
        return skip("(needs root: network namespaces, charon)");
    }
    let lab = Lab::new("i");
    let key = linerate_helper::random_hex(16).unwrap();
    let charon = Charon::start(&lab.gw, &conf(&key), "");
    let sockets = run_in_netns(&lab.peer, || Sockets::bind(PEER, Ports::default())).unwrap();
    let mut session = Session::connect_with(config(&key), sockets)
        .unwrap_or_else(|e| panic!("{e}\n{}", charon.log()));
    session.set_rekey_pfs(Some(DhGroup::Curve25519));
    let child = session.child().clone();
    wait_only(&charon, &mut session, &child);
    wait_only_ike(&charon, &mut session);
    let mut out = linerate_esp::Outbound::new(child.outbound.clone()).unwrap();
    let mut inb = linerate_esp::Inbound::new(child.inbound.clone()).unwrap();
    ping_with(
        &mut session,
        &mut out,
        &mut inb,
        child.inbound.spi,
        "before",
    );
    let packets = packets_in(&charon);
    assert!(packets >= 1, "charon counted the first ping");
    let old = session.ike_spis();

    charon.swanctl(&["--rekey", "--ike", "peer"]);
    let start = Instant::now();
    let mut rekeyed = false;
    while start.elapsed() < Duration::from_secs(5) && !rekeyed {
        match session.poll(Duration::from_millis(100)) {
            Ok(Some(e)) => {
                assert!(
                    !matches!(
                        e,
                        Event::Refused { .. } | Event::IkeDeleted | Event::ChildDeleted
                    ),
                    "{e:?}\n{}",
                    charon.log()
                );
                rekeyed = e == Event::IkeRekeyed;
            }
            Ok(None) => {}
            Err(e) => panic!("{e}\n{}", charon.log()),
        }
    }
    assert!(rekeyed, "no IKE SA rekey by charon:\n{}", charon.log());
    let new = session.ike_spis();
    assert!(new.0 != old.0 && new.1 != old.1, "{old:x?} -> {new:x?}");
    // charon deletes the old IKE SA itself, and keeps the CHILD_SA.
    wait_only_ike(&charon, &mut session);
    assert!(session.is_up());
    assert_eq!(session.child().outbound.spi, child.outbound.spi);
    wait_only(&charon, &mut session, &child);
    // The CHILD_SA's keys did not change: ESP goes on, sequence numbers
    // too.
    ping_with(&mut session, &mut out, &mut inb, child.inbound.spi, "after");
    let after = packets_in(&charon);
    assert!(after > packets, "charon's packets-in {packets} -> {after}");

    child_rekeys_work(&charon, &mut session, "after charon's IKE SA rekey");
    // A second IKE SA rekey (linerate is now the new SA's responder).
    charon.swanctl(&["--rekey", "--ike", "peer"]);
    let start = Instant::now();
    while session.ike_spis() == new && start.elapsed() < Duration::from_secs(5) {
        let _ = session.poll(Duration::from_millis(100));
    }
    assert_ne!(session.ike_spis(), new, "{}", charon.log());
    wait_only_ike(&charon, &mut session);

    session.delete().unwrap();
    assert!(charon.wait_no_sas().is_empty());
}

#[test]
fn linerate_rekeys_the_ike_sa() {
    if !is_root() {
        return skip("(needs root: network namespaces, charon)");
    }
    let lab = Lab::new("k");
    let key = linerate_helper::random_hex(16).unwrap();
    let charon = Charon::start(&lab.gw, &conf(&key), "");
    let sockets = run_in_netns(&lab.peer, || Sockets::bind(PEER, Ports::default())).unwrap();
    let mut session = Session::connect_with(config(&key), sockets)
        .unwrap_or_else(|e| panic!("{e}\n{}", charon.log()));
    session.set_rekey_pfs(Some(DhGroup::Curve25519));
    let child = session.child().clone();
    wait_only(&charon, &mut session, &child);
    let mut out = linerate_esp::Outbound::new(child.outbound.clone()).unwrap();
    let mut inb = linerate_esp::Inbound::new(child.inbound.clone()).unwrap();
    ping_with(
        &mut session,
        &mut out,
        &mut inb,
        child.inbound.spi,
        "before",
    );
    let packets = packets_in(&charon);
    let old = session.ike_spis();

    session
        .rekey_ike_wait(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("IKE SA rekey: {e}\n{}", charon.log()));
    let new = session.ike_spis();
    assert!(new.0 != old.0 && new.1 != old.1, "{old:x?} -> {new:x?}");
    // linerate deleted the old IKE SA: charon has only the new one.
    wait_only_ike(&charon, &mut session);
    let log = charon.log();
    assert!(log.contains("CREATE_CHILD_SA"), "{log}");
    assert!(session.is_up());
    wait_only(&charon, &mut session, &child);
    ping_with(&mut session, &mut out, &mut inb, child.inbound.spi, "after");
    let after = packets_in(&charon);
    assert!(after > packets, "charon's packets-in {packets} -> {after}");

    child_rekeys_work(&charon, &mut session, "after linerate's IKE SA rekey");
    // And again, from the new SA.
    session
        .rekey_ike_wait(Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("second IKE SA rekey: {e}\n{}", charon.log()));
    assert_ne!(session.ike_spis(), new);
    wait_only_ike(&charon, &mut session);

    session.delete().unwrap();
    assert!(charon.wait_no_sas().is_empty());
}
