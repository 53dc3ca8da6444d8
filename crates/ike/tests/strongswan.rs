//! linerate-ike against strongSwan's charon as the gateway (IKEv2
//! responder), each in a network namespace of its own joined by a veth
//! pair: the tunnel comes up for every ESP suite with three IKE proposals
//! (MODP 2048, Curve25519, ECP 256), charon shows a CHILD_SA with linerate's
//! SPIs and algorithms and derived the same ESP keys (its KEYMAT, logged
//! at level 4, against linerate's), a ping sealed by linerate-esp with
//! those keys is answered through the tunnel, and linerate's Delete
//! removes it; the
//! gateway's liveness checks are answered; a wrong pre-shared key, a
//! proposal the gateway does not have and a silent address give their
//! one-line errors; INVALID_KE_PAYLOAD and COOKIE are followed.
//!
//! Root only; needs strongSwan (charon with the kernel-libipsec, kdf and
//! vici plugins, swanctl): scripts/setup.sh installs them. This kernel has
//! no ESP, so charon runs with kernel-libipsec, which takes ESP in UDP on
//! port 4500; linerate forces that encapsulation anyway.

mod common;

use common::*;
use linerate_ike::*;
use std::time::{Duration, Instant};

/// linerate's test network and the one behind the gateway.
const PEER_NET: &str = "198.18.0.0/24";
const PROPOSALS: [&str; 3] = [
    "aes256-sha256-modp2048",
    "aes128-sha256-x25519",
    "aes256-sha512-ecp256",
];

/// One connection of the gateway: a remote identity and its ESP suite.
struct Conn {
    name: String,
    /// The identity linerate sends (None: its address, the default).
    peer_id: Option<Identity>,
    esp: EspSuite,
    dpd: bool,
}

/// charon with `conns`, each for the peer's address or identity, and the
/// key `psk` (in its private, 0600 swanctl.conf).
fn start_charon(ns: &str, conns: &[Conn], psk: &str, extra: &str) -> Charon {
    let mut swanctl_conf = String::from("connections {\n");
    for c in conns {
        let remote_id = match &c.peer_id {
            Some(id) => id.to_string(),
            None => PEER.to_string(),
        };
        let dpd = if c.dpd { "    dpd_delay = 1s\n" } else { "" };
        swanctl_conf += &format!(
            "  {name} {{\n    version = 2\n    local_addrs = {GW}\n    remote_addrs = {PEER}\n    proposals = {props}\n{dpd}    local {{\n      auth = psk\n      id = {GW_ID}\n    }}\n    remote {{\n      auth = psk\n      id = \"{remote_id}\"\n    }}\n    children {{\n      net {{\n        local_ts = {GW_NET}\n        remote_ts = {PEER_NET}\n        esp_proposals = {esp}\n        mode = tunnel\n      }}\n    }}\n  }}\n",
            name = c.name,
            props = PROPOSALS.join(", "),
            esp = c.esp,
        );
    }
    swanctl_conf += &format!("}}\nsecrets {{\n  ike-test {{\n    secret = \"{psk}\"\n  }}\n}}\n");
    Charon::start(ns, &swanctl_conf, extra)
}

/// strongSwan's names of linerate's ESP suites: (encr-alg, encr-keysize,
/// integ-alg), as vici's list-sas gives them.
fn strongswan_esp(suite: EspSuite) -> (&'static str, &'static str, Option<&'static str>) {
    let (encr, keysize) = match suite.cipher {
        EspCipher::AesGcm16 { key_len: 16 } => ("AES_GCM_16", "128"),
        EspCipher::AesGcm16 { .. } => ("AES_GCM_16", "256"),
        EspCipher::AesCbc { key_len: 16 } => ("AES_CBC", "128"),
        EspCipher::AesCbc { key_len: 24 } => ("AES_CBC", "192"),
        EspCipher::AesCbc { .. } => ("AES_CBC", "256"),
        EspCipher::TripleDesCbc => ("3DES_CBC", ""),
        EspCipher::DesCbc => ("DES_CBC", ""),
        EspCipher::Null => ("NULL", ""),
    };
    let integ = match suite.integrity {
        EspIntegrity::Aead => None,
        EspIntegrity::Md5 => Some("HMAC_MD5_96"),
        EspIntegrity::Sha1 => Some("HMAC_SHA1_96"),
        EspIntegrity::Sha256 => Some("HMAC_SHA2_256_128"),
        EspIntegrity::Sha384 => Some("HMAC_SHA2_384_192"),
        EspIntegrity::Sha512 => Some("HMAC_SHA2_512_256"),
    };
    (encr, keysize, integ)
}

fn strongswan_group(group: DhGroup) -> &'static str {
    match group {
        DhGroup::Modp2048 => "MODP_2048",
        DhGroup::Ecp256 => "ECP_256",
        DhGroup::Curve25519 => "CURVE_25519",
    }
}

fn psk() -> String {
    linerate_helper::random_hex(16).unwrap()
}

fn config(psk: &str, proposal: &str, esp: EspSuite, id: Option<Identity>) -> Config {
    let mut c = Config::new(
        PEER,
        GW,
        Psk::new(psk),
        TrafficSelector::parse(PEER_NET).unwrap(),
        TrafficSelector::parse(GW_NET).unwrap(),
    );
    c.ike = IkeProposals::parse(proposal).unwrap();
    c.esp = esp;
    c.local_id = id;
    c.remote_id = Some(Identity::parse(GW_ID).unwrap());
    c.retransmit = Retransmit {
        timeout: Duration::from_millis(500),
        tries: 4,
    };
    c
}

fn connect(lab: &Lab, config: Config) -> Result<Session, IkeError> {
    let sockets = run_in_netns(&lab.peer, || Sockets::bind(PEER, Ports::default()))?;
    Session::connect_with(config, sockets)
}

/// The connection of each suite, with an identity of each type linerate
/// sends: its address (the default), a key ID, host names.
fn conns() -> Vec<Conn> {
    EspSuite::ALL
        .iter()
        .enumerate()
        .map(|(i, &esp)| Conn {
            name: format!("c-{esp}"),
            peer_id: match i {
                0 => None,
                1 => Some(Identity::parse("keyid:#6c696e6572617465").unwrap()),
                _ => Some(Identity::parse(&format!("@{esp}.peer.test")).unwrap()),
            },
            esp,
            dpd: i == 0,
        })
        .collect()
}

/// Every ESP suite with every IKE proposal: the tunnel is up, charon has
/// the CHILD_SA with linerate's SPIs, algorithms, selectors and keys, and
/// linerate's Delete removes it.
#[test]
fn tunnels_come_up_for_every_suite_and_proposal() {
    if !is_root() {
        return skip("(needs root: network namespaces, charon)");
    }
    let lab = Lab::new("a");
    let key = psk();
    let conns = conns();
    let charon = start_charon(&lab.gw, &conns, &key, "");
    for conn in &conns {
        for proposal in PROPOSALS {
            let what = format!("{} with IKE {proposal}", conn.esp);
            let mut session = connect(&lab, config(&key, proposal, conn.esp, conn.peer_id.clone()))
                .unwrap_or_else(|e| panic!("{what}: {e}\ncharon's log:\n{}", charon.log()));
            assert!(session.is_up());
            assert_eq!(session.ike_suite().to_string(), proposal);
            let child = session.child().clone();
            assert_eq!(child.outbound.suite, conn.esp);
            assert!(child.udp_encap, "{what}: ESP in UDP");
            assert_eq!(child.local.to_string(), format!("{PEER}:4500"));
            assert_eq!(child.remote.to_string(), format!("{GW}:4500"));
            assert_eq!(
                child.local_ts,
                [TrafficSelector::parse(PEER_NET).unwrap()],
                "{what}"
            );
            assert_eq!(child.remote_ts, [TrafficSelector::parse(GW_NET).unwrap()]);

            let sas = charon.sas();
            assert_eq!(sas.len(), 1, "{what}: {sas:?}");
            let sa = &sas[0].fields;
            assert_eq!(sas[0].name, conn.name, "{what}");
            assert_eq!(text(sa, "state"), "ESTABLISHED");
            let (spi_i, spi_r) = session.ike_spis();
            assert_eq!(text(sa, "initiator-spi"), format!("{spi_i:016x}"));
            assert_eq!(text(sa, "responder-spi"), format!("{spi_r:016x}"));
            assert_eq!(
                text(sa, "dh-group"),
                strongswan_group(session.ike_suite().group)
            );
            let expected_id = conn.peer_id.as_ref().map_or(PEER.to_string(), |i| match i {
                // charon prints printable key IDs as text.
                Identity::Fqdn(name) => name.clone(),
                Identity::KeyId(bytes) => String::from_utf8(bytes.clone()).unwrap(),
                other => other.to_string(),
            });
            assert_eq!(text(sa, "remote-id"), expected_id, "{what}");
            assert_eq!(text(sa, "remote-port"), "4500");
            let kids = children(sa);
            assert_eq!(kids.len(), 1, "{what}: {sa:?}");
            let c = kids[0];
            assert_eq!(text(c, "state"), "INSTALLED");
            assert_eq!(text(c, "mode"), "TUNNEL");
            assert_eq!(text(c, "encap"), "yes", "{what}: ESP in UDP");
            // charon's inbound SA is linerate's outbound one.
            assert_eq!(text(c, "spi-in"), format!("{:08x}", child.outbound.spi));
            assert_eq!(text(c, "spi-out"), format!("{:08x}", child.inbound.spi));
            let (encr, bits, integ) = strongswan_esp(conn.esp);
            assert_eq!(text(c, "encr-alg"), encr, "{what}");
            // No key size for the fixed-length ciphers (3DES, DES, NULL).
            match get(c, "encr-keysize") {
                None => assert_eq!(bits, "", "{what}"),
                Some(_) => assert_eq!(text(c, "encr-keysize"), bits, "{what}"),
            }
            if let Some(integ) = integ {
                assert_eq!(text(c, "integ-alg"), integ, "{what}");
            } else {
                assert!(get(c, "integ-alg").is_none(), "{what}");
            }
            assert_eq!(list(c, "local-ts"), [GW_NET]);
            assert_eq!(list(c, "remote-ts"), [PEER_NET]);

            // The keys: linerate is the initiator.
            let keys = charon.last_child_keys();
            if conn.esp.encryption_keymat_len() == 0 {
                // NULL encryption: no key, and charon logs none.
                assert!(child.outbound.encryption_key.is_empty(), "{what}");
                assert!(child.inbound.encryption_key.is_empty(), "{what}");
            } else {
                assert_eq!(
                    keys.get("encryption initiator key"),
                    Some(&child.outbound.encryption_key),
                    "{what}: outbound encryption key"
                );
                assert_eq!(
                    keys.get("encryption responder key"),
                    Some(&child.inbound.encryption_key),
                    "{what}: inbound encryption key"
                );
            }
            if conn.esp.is_aead() {
                assert!(child.outbound.integrity_key.is_empty());
            } else {
                assert_eq!(
                    keys.get("integrity initiator key"),
                    Some(&child.outbound.integrity_key),
                    "{what}: outbound integrity key"
                );
                assert_eq!(
                    keys.get("integrity responder key"),
                    Some(&child.inbound.integrity_key),
                    "{what}: inbound integrity key"
                );
            }

            // Data through the tunnel: a ping to the gateway's address
            // 198.19.0.1, sealed by linerate-esp with the outbound keys,
            // decrypted by charon's libipsec; the reply, sealed by charon,
            // opens with the inbound keys.
            ping_through(&mut session, &child, &what);

            if conn.dpd && proposal == PROPOSALS[0] {
                // dpd_delay = 1s: charon checks that linerate is alive;
                // linerate answers, and the tunnel stays.
                let start = Instant::now();
                let mut checks = 0;
                while start.elapsed() < Duration::from_secs(4) && checks < 2 {
                    if let Some(event) = session.poll(Duration::from_millis(200)).unwrap() {
                        assert_eq!(event, Event::LivenessCheck);
                        checks += 1;
                    }
                }
                assert_eq!(checks, 2, "{what}: charon's liveness checks");
                assert!(session.is_up());
                assert_eq!(charon.sas().len(), 1, "{what}: still up after DPD");
            }

            session
                .delete()
                .unwrap_or_else(|e| panic!("{what}: delete: {e}"));
            assert!(!session.is_up());
            let left = no_sas_but_half_open(&charon);
            assert!(left.is_empty(), "{what}: left after delete: {left:?}");
        }
    }
}

/// Wrong key, no common proposal, no responder: each its one-line error;
/// a group the gateway does not want (INVALID_KE_PAYLOAD) and a cookie
/// are followed to an established tunnel.
#[test]
fn failures_say_what_the_gateway_answered() {
    if !is_root() {
        return skip("(needs root: network namespaces, charon)");
    }
    let lab = Lab::new("b");
    let key = psk();
    let conns = conns();
    // One half-open IKE SA makes charon ask every next initiator for a
    // cookie.
    let charon = start_charon(&lab.gw, &conns[..1], &key, "cookie_threshold = 1");
    let esp = conns[0].esp;

    // A bare IKE_SA_INIT that is never followed up: charon keeps a
    // half-open SA.
    half_open_init(&lab);

    // The groups x25519 then ecp256 with aes256-sha512: charon's only
    // proposal with these algorithms has ecp256, it asks for that group.
    let mut session = connect(&lab, config(&key, "aes256-sha512-x25519-ecp256", esp, None))
        .unwrap_or_else(|e| panic!("INVALID_KE_PAYLOAD: {e}\n{}", charon.log()));
    assert_eq!(session.ike_suite().group, DhGroup::Ecp256);
    let log = charon.log();
    assert!(
        log.contains("N(INVAL_KE)"),
        "charon asked for a group:\n{log}"
    );
    assert!(
        log.contains("N(COOKIE)"),
        "charon asked for a cookie:\n{log}"
    );
    session.delete().unwrap();
    // Its sockets hold ports 500 and 4500 until it is dropped.
    drop(session);
    assert!(no_sas_but_half_open(&charon).is_empty());

    let e = connect(&lab, config("not the key", PROPOSALS[0], esp, None))
        .expect_err("a wrong key fails");
    assert_eq!(
        e.to_string(),
        format!("authentication failed: the gateway answered AUTHENTICATION_FAILED; check the pre-shared key (and that the gateway expects the identity {PEER})")
    );

    let e = connect(&lab, config(&key, "aes128-sha1-modp2048", esp, None))
        .expect_err("no common IKE proposal");
    assert_eq!(
        e.to_string(),
        "no common proposal: offered aes128-sha1-modp2048, the gateway answered NO_PROPOSAL_CHOSEN"
    );

    let other = EspSuite::ALL.into_iter().find(|s| *s != esp).unwrap();
    let e =
        connect(&lab, config(&key, PROPOSALS[0], other, None)).expect_err("no common ESP proposal");
    assert_eq!(
        e.to_string(),
        format!("no common proposal: offered ESP {other}, the gateway answered NO_PROPOSAL_CHOSEN")
    );
    // The IKE SA that came up without its CHILD_SA is deleted again.
    assert!(no_sas_but_half_open(&charon).is_empty());

    let mut wrong_ts = config(&key, PROPOSALS[0], esp, None);
    wrong_ts.remote_ts = TrafficSelector::parse("192.0.2.0/24").unwrap();
    let e = connect(&lab, wrong_ts).expect_err("selectors refused");
    assert_eq!(
        e.to_string(),
        format!("the gateway refused the traffic selectors (TS_UNACCEPTABLE): offered local {PEER_NET}, remote 192.0.2.0/24; the gateway's connection must have them as remote_ts and local_ts")
    );
    assert!(no_sas_but_half_open(&charon).is_empty());

    let mut wrong_gw = config(&key, PROPOSALS[0], esp, None);
    wrong_gw.remote_id = Some(Identity::parse("@other.gateway").unwrap());
    let e = connect(&lab, wrong_gw).expect_err("another gateway identity");
    // charon has no connection for an IDr it does not have.
    assert!(
        e.to_string()
            .starts_with("authentication failed: the gateway answered AUTHENTICATION_FAILED"),
        "{e}"
    );

    // No IKE daemon at the address: the tries with back-off, then the
    // error. (The veth peer answers with ICMP port unreachable, which
    // does not end the waiting.)
    drop(charon);
    let mut silent = config(&key, PROPOSALS[0], esp, None);
    silent.retransmit = Retransmit {
        timeout: Duration::from_millis(100),
        tries: 3,
    };
    let start = Instant::now();
    let e = run_in_netns(&lab.peer, || Session::connect(silent)).expect_err("nobody answers");
    assert_eq!(
        e.to_string(),
        format!("no answer from {GW}:500 after 3 tries")
    );
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(700) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
}

const HALF_OPEN_SPI: u64 = 0x1111_2222_3333_4444;

/// charon's IKE SAs once they are gone, but the half-open one of
/// [`half_open_init`], which charon keeps until it times out.
fn no_sas_but_half_open(charon: &Charon) -> Vec<Sa> {
    charon
        .wait_no_sas_but(|sa| text(&sa.fields, "initiator-spi") == format!("{HALF_OPEN_SPI:016x}"))
}

/// Sends one IKE_SA_INIT with linerate-ike's encoder and reads the
/// answer, without going on: charon keeps the SA half-open.
fn half_open_init(lab: &Lab) {
    use linerate_ike::wire::*;
    let socket = run_in_netns(&lab.peer, || std::net::UdpSocket::bind((PEER, 0))).unwrap();
    let request = Message {
        header: Header::new(HALF_OPEN_SPI, 0, exchange::IKE_SA_INIT, flags::INITIATOR, 0),
        payloads: vec![
            Payload::Sa(vec![Proposal {
                number: 1,
                protocol: protocol::IKE,
                spi: Vec::new(),
                transforms: vec![
                    Transform::with_key_length(transform::ENCR, 12, 128),
                    Transform::new(transform::PRF, 5),
                    Transform::new(transform::INTEG, 12),
                    Transform::new(transform::DH, 31),
                ],
            }]),
            // Any 32 bytes are a Curve25519 public value.
            Payload::Ke {
                group: 31,
                data: vec![9; 32],
            },
            Payload::Nonce(vec![7; 32]),
        ],
    };
    socket.send_to(&request.encode(), (GW, 500)).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut buf = [0u8; 4096];
    let (n, _) = socket
        .recv_from(&mut buf)
        .expect("charon answers IKE_SA_INIT");
    let answer = Message::parse(&buf[..n]).unwrap();
    assert!(answer.header.spi_r != 0, "{answer:?}");
    assert!(
        answer
            .payloads
            .iter()
            .any(|p| matches!(p, Payload::Ke { .. })),
        "{answer:?}"
    );
}
