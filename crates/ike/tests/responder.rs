//! linerate-ike's responder with strongSwan's charon as the initiator,
//! each in a network namespace of its own joined by a veth pair (charon
//! built by hand, not through the lab): charon's `swanctl --initiate`
//! brings the tunnel up, charon lists linerate's SPIs, derived the same
//! keys (its KEYMAT, logged at level 4, against linerate's), and a UDP
//! datagram that charon encrypts into the tunnel decrypts with linerate's inbound
//! keys; a wrong pre-shared key is refused with AUTHENTICATION_FAILED.
//!
//! Root only; needs strongSwan (scripts/setup.sh installs it).

mod common;

use common::*;
use linerate_ike::*;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const PEER_NET: &str = "198.18.0.0/24";
const PEER_HOST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);

fn charon_conf(psk: &str) -> String {
    format!(
        "connections {{\n  good {{\n    version = 2\n    local_addrs = {PEER}\n    remote_addrs = {GW}\n    encap = yes\n    proposals = aes256-sha256-x25519\n    local {{\n      auth = psk\n      id = {PEER}\n    }}\n    remote {{\n      auth = psk\n      id = {GW_ID}\n    }}\n    children {{\n      net {{\n        local_ts = {PEER_NET}\n        remote_ts = 198.19.0.0/16\n        esp_proposals = aes128gcm16\n        mode = tunnel\n      }}\n    }}\n  }}\n  bad {{\n    version = 2\n    local_addrs = {PEER}\n    remote_addrs = {GW}\n    encap = yes\n    proposals = aes256-sha256-x25519\n    local {{\n      auth = psk\n      id = bad.peer.test\n    }}\n    remote {{\n      auth = psk\n      id = {GW_ID}\n    }}\n    children {{\n      badnet {{\n        local_ts = {PEER_NET}\n        remote_ts = {GW_NET}\n        esp_proposals = aes128gcm16\n        mode = tunnel\n      }}\n    }}\n  }}\n}}\nsecrets {{\n  ike-good {{\n    id = {PEER}\n    secret = \"{psk}\"\n  }}\n  ike-bad {{\n    id = bad.peer.test\n    secret = \"not-{psk}\"\n  }}\n}}\n"
    )
}

#[test]
fn charon_initiates_to_linerates_responder() {
    if !is_root() {
        return skip("(needs root: network namespaces, charon)");
    }
    let lab = Lab::new("s");
    // An address of charon's protected network, for the datagram's source.
    run(
        "ip",
        &[
            "-n",
            &lab.peer,
            "addr",
            "add",
            &format!("{PEER_HOST}/32"),
            "dev",
            "lo",
        ],
    );
    let key = linerate_helper::random_hex(16).unwrap();
    let config = ResponderConfig {
        local: GW,
        ports: Ports::default(),
        local_id: Some(Identity::parse(GW_ID).unwrap()),
        psk: Psk::new(key.as_str()),
        ike: IkeProposals::parse("aes128-aes256-sha256-x25519-ecp256").unwrap(),
        esp: EspSuite::Aes128Gcm16,
        local_ts: TrafficSelector::parse(GW_NET).unwrap(),
        remote_ts: TrafficSelector::parse("198.18.0.0/16").unwrap(),
        retransmit: Retransmit::default(),
    };
    let mut responder = run_in_netns(&lab.gw, || Responder::bind(config)).unwrap();
    responder.machine_mut().keep_esp(true);
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = Arc::clone(&stop);
    let server = std::thread::spawn(move || {
        let mut events = Vec::new();
        let mut esp = Vec::new();
        while !stop2.load(Ordering::Relaxed) {
            events.extend(responder.poll(Duration::from_millis(20)));
            esp.extend(responder.machine_mut().take_esp());
        }
        (responder, events, esp)
    });
    let charon = Charon::start(&lab.peer, &charon_conf(&key), "");
    charon.swanctl(&["--initiate", "--child", "net", "--timeout", "10"]);

    // The wrong key: charon's initiation fails with the notify.
    let bad = Command::new(&charon.swanctl)
        .args([
            "--initiate",
            "--child",
            "badnet",
            "--timeout",
            "10",
            "--uri",
            &charon.uri,
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!bad.status.success(), "a wrong key must fail");
    let log = charon.log();
    assert!(
        log.contains("received AUTHENTICATION_FAILED notify error"),
        "{log}"
    );

    // A datagram into the tunnel: charon encrypts it to linerate's port
    // 4500.
    const DATA: &[u8] = b"charon to linerate's responder";
    run_in_netns(&lab.peer, || {
        let s = std::net::UdpSocket::bind((PEER_HOST, 0)).unwrap();
        s.send_to(DATA, (Ipv4Addr::new(198, 19, 0, 1), 9)).unwrap();
    });
    std::thread::sleep(Duration::from_millis(200));
    let sas = charon.sas();
    stop.store(true, Ordering::Relaxed);
    let (responder, events, esp) = server.join().unwrap();

    let established: Vec<_> = events
        .iter()
        .filter(|e| matches!(e, ResponderEvent::Established { .. }))
        .collect();
    assert_eq!(established.len(), 1, "{events:?}");
    let failed: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            ResponderEvent::Failed { error, .. } => Some(error.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(failed.len(), 1, "{events:?}");
    assert!(
        failed[0].starts_with(&format!(
            "authentication failed: the initiator {PEER}:4500 (@bad.peer.test)"
        )),
        "{failed:?}"
    );

    let tunnels: Vec<_> = responder.machine().tunnels().collect();
    assert_eq!(tunnels.len(), 1);
    let (_, spi_r, child) = tunnels[0];
    let child = child.clone();
    // Narrowed: charon asked for 198.19.0.0/16, linerate has the /24.
    assert_eq!(child.local_ts, [TrafficSelector::parse(GW_NET).unwrap()]);
    assert_eq!(child.remote_ts, [TrafficSelector::parse(PEER_NET).unwrap()]);
    assert!(child.udp_encap);

    // charon's view: one SA, linerate's SPIs.
    assert_eq!(sas.len(), 1, "{sas:?}");
    let sa = &sas[0].fields;
    assert_eq!(text(sa, "state"), "ESTABLISHED");
    assert_eq!(text(sa, "responder-spi"), format!("{spi_r:016x}"));
    let kids = children(sa);
    assert_eq!(kids.len(), 1);
    assert_eq!(
        text(kids[0], "spi-in"),
        format!("{:08x}", child.outbound.spi)
    );
    assert_eq!(
        text(kids[0], "spi-out"),
        format!("{:08x}", child.inbound.spi)
    );
    assert_eq!(list(kids[0], "remote-ts"), [GW_NET]);

    // The keys: charon is the initiator.
    let keys = charon.last_child_keys();
    assert_eq!(
        keys.get("encryption initiator key"),
        Some(&child.inbound.encryption_key)
    );
    assert_eq!(
        keys.get("encryption responder key"),
        Some(&child.outbound.encryption_key)
    );

    // The datagram charon sent decrypts with linerate's inbound keys.
    let mut inbound = linerate_esp::Inbound::new(child.inbound.clone()).unwrap();
    let mut opened = 0;
    for (from, mut packet) in esp {
        assert_eq!(*from.ip(), PEER);
        let o = inbound
            .open(&mut packet)
            .unwrap_or_else(|e| panic!("charon's ESP does not open: {e}"));
        let p = &o.packet[..];
        assert_eq!(&p[12..16], &PEER_HOST.octets());
        assert_eq!(&p[16..20], &[198, 19, 0, 1]);
        assert_eq!(p[9], 17, "UDP");
        assert_eq!(&p[28..], DATA);
        opened += 1;
    }
    assert!(opened >= 1, "no ESP from charon arrived:\n{}", charon.log());
}
