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

use linerate_helper::{DieWithParent, PrivateDir};
use linerate_ike::*;
use std::collections::BTreeMap;
use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const GW: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// linerate's test network and the one behind the gateway.
const PEER_NET: &str = "198.18.0.0/24";
const GW_NET: &str = "198.19.0.0/24";
const GW_LAN: &str = "198.19.0.1/32";
const GW_ID: &str = "gw.linerate.test";
const PROPOSALS: [&str; 3] = [
    "aes256-sha256-modp2048",
    "aes128-sha256-x25519",
    "aes256-sha512-ecp256",
];
const CHARON: [&str; 2] = ["/usr/lib/ipsec/charon", "/usr/libexec/ipsec/charon"];
const LIBIPSEC: [&str; 2] = [
    "/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so",
    "/usr/libexec/ipsec/plugins/libstrongswan-kernel-libipsec.so",
];
const PLUGINS: &str = "random nonce openssl kdf aes sha1 sha2 hmac gcm pem pkcs1 pubkey \
kernel-libipsec kernel-netlink socket-default vici";

/// As every skip: a failure under LINERATE_REQUIRE_ALL=1 (scripts/test.sh).
fn skip(reason: &str) {
    if std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("SKIPPED {reason}; LINERATE_REQUIRE_ALL=1 makes every skip a failure: provide what the test needs");
    }
    eprintln!("SKIPPED {reason}");
}

fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

fn first_existing(paths: &[&'static str]) -> Option<&'static str> {
    paths.iter().copied().find(|p| Path::new(p).exists())
}

/// Runs a command; its stdout, or a panic naming it and its stderr.
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{program} {}: {e}", args.join(" ")));
    if !out.status.success() {
        panic!(
            "{program} {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
    }
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Two namespaces joined by a veth pair, removed when dropped (also when
/// the test fails).
struct Lab {
    gw: String,
    peer: String,
}

impl Lab {
    fn new(tag: &str) -> Lab {
        let pid = std::process::id();
        let lab = Lab {
            gw: format!("ike-t{pid}{tag}-gw"),
            peer: format!("ike-t{pid}{tag}-peer"),
        };
        for ns in [&lab.gw, &lab.peer] {
            run("ip", &["netns", "add", ns]);
            run("ip", &["-n", ns, "link", "set", "lo", "up"]);
        }
        run(
            "ip",
            &[
                "-n", &lab.gw, "link", "add", "gw0", "type", "veth", "peer", "name", "peer0",
                "netns", &lab.peer,
            ],
        );
        for (ns, dev, addr) in [(&lab.gw, "gw0", GW), (&lab.peer, "peer0", PEER)] {
            run(
                "ip",
                &["-n", ns, "addr", "add", &format!("{addr}/24"), "dev", dev],
            );
            run("ip", &["-n", ns, "link", "set", dev, "up"]);
        }
        // An address of the network behind the gateway: charon routes the
        // peer's network into its TUN device from it.
        run("ip", &["-n", &lab.gw, "addr", "add", GW_LAN, "dev", "lo"]);
        lab
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        for ns in [&self.gw, &self.peer] {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Runs `f` on a thread inside the namespace `ns`: sockets it makes stay
/// in that namespace, whichever thread uses them after.
fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/run/netns/{ns}");
    std::thread::scope(|s| {
        s.spawn(|| {
            let file = File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
            nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                .unwrap_or_else(|e| panic!("setns {path}: {e}"));
            f()
        })
        .join()
        .unwrap()
    })
}

/// One connection of the gateway: a remote identity and its ESP suite.
struct Conn {
    name: String,
    /// The identity linerate sends (None: its address, the default).
    peer_id: Option<Identity>,
    esp: EspSuite,
    dpd: bool,
}

/// charon in the gateway's namespace with a private /run (the directory
/// holding its strongswan.conf, swanctl.conf with the key, 0600, its vici
/// socket and log), killed and removed when dropped.
struct Charon {
    child: Child,
    dir: PrivateDir,
    uri: String,
    swanctl: PathBuf,
}

impl Charon {
    fn start(ns: &str, conns: &[Conn], psk: &str, extra: &str) -> Charon {
        let charon = first_existing(&CHARON).unwrap_or_else(|| {
            panic!("strongSwan's charon is missing: run scripts/setup.sh (it installs strongswan-charon, strongswan-swanctl, libcharon-extra-plugins)")
        });
        if first_existing(&LIBIPSEC).is_none() {
            panic!("strongSwan's kernel-libipsec plugin is missing: run scripts/setup.sh (libcharon-extra-plugins)");
        }
        let swanctl = ["/usr/sbin/swanctl", "/sbin/swanctl", "/usr/bin/swanctl"]
            .iter()
            .map(PathBuf::from)
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("swanctl is missing: run scripts/setup.sh"));
        let dir = PrivateDir::new(&format!("ike-test-{ns}")).unwrap();
        // Level 4 of CHD logs the CHILD_SA's keys: the test compares them.
        let conf = format!(
            "charon {{\n  load = {PLUGINS}\n  install_virtual_ip = no\n  {extra}\n  filelog {{\n    test {{\n      path = /run/charon.log\n      default = 1\n      chd = 4\n      flush_line = yes\n    }}\n  }}\n  plugins {{\n    vici {{\n      socket = unix:///run/charon.vici\n    }}\n  }}\n}}\n"
        );
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
        swanctl_conf +=
            &format!("}}\nsecrets {{\n  ike-test {{\n    secret = \"{psk}\"\n  }}\n}}\n");
        dir.write("strongswan.conf", conf.as_bytes()).unwrap();
        let conf_file = dir.write("swanctl.conf", swanctl_conf.as_bytes()).unwrap();
        // `ip netns exec` gives the command a mount namespace of its own:
        // there the private directory becomes /run, for this charon only.
        let script = r#"mount --bind "$1" /run && STRONGSWAN_CONF=/run/strongswan.conf exec "$2""#;
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "sh", "-c", script, "sh"])
            .arg(dir.path())
            .arg(charon)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .die_with_parent()
            .spawn()
            .unwrap();
        let socket = dir.path().join("charon.vici");
        let uri = format!("unix://{}", socket.display());
        let mut charon = Charon {
            child,
            dir,
            uri,
            swanctl,
        };
        let start = Instant::now();
        while !socket.exists() {
            if let Ok(Some(status)) = charon.child.try_wait() {
                panic!("charon ended ({status}) in {ns}: {}", charon.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "charon did not start in {ns} (no vici socket after 10 s): {}",
                charon.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        charon.swanctl(&["--load-all", "--file", &conf_file.to_string_lossy()]);
        charon
    }

    fn swanctl(&self, args: &[&str]) -> String {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--uri", &self.uri]);
        run(&self.swanctl.to_string_lossy(), &all)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("charon.log")).unwrap_or_default()
    }

    /// The IKE SAs charon has, from `swanctl --list-sas --raw`.
    fn sas(&self) -> Vec<Sa> {
        let raw = self.swanctl(&["--list-sas", "--raw"]);
        let mut sas = Vec::new();
        for line in raw.lines() {
            let Some(body) = line.trim().strip_prefix("list-sa event") else {
                continue;
            };
            if let Value::Section(top) = parse_raw(body) {
                for (name, sa) in top {
                    sas.push(Sa { name, fields: sa });
                }
            }
        }
        sas
    }

    /// Waits up to 5 s for charon to have no IKE SA left (but the
    /// half-open one of [`half_open_init`]).
    fn wait_no_sas(&self) -> Vec<Sa> {
        let start = Instant::now();
        loop {
            let mut sas = self.sas();
            sas.retain(|sa| text(&sa.fields, "initiator-spi") != format!("{HALF_OPEN_SPI:016x}"));
            if sas.is_empty() || start.elapsed() > Duration::from_secs(5) {
                return sas;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The CHILD_SA keys charon logged last (its chd level 4): encryption
    /// and integrity, initiator's then responder's.
    fn last_child_keys(&self) -> BTreeMap<String, Vec<u8>> {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        let mut keys = BTreeMap::new();
        for (i, line) in lines.iter().enumerate() {
            for what in [
                "encryption initiator key",
                "encryption responder key",
                "integrity initiator key",
                "integrity responder key",
            ] {
                let Some(rest) = line.split(&format!("{what} => ")).nth(1) else {
                    continue;
                };
                let len: usize = rest.split_whitespace().next().unwrap().parse().unwrap();
                keys.insert(what.to_string(), hexdump(&lines[i + 1..], len));
            }
        }
        keys
    }
}

impl Drop for Charon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The bytes of a strongSwan `%B` dump: lines `   0: 12 34 ...  ascii`
/// after the one that names the length.
fn hexdump(lines: &[&str], len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for line in lines {
        if out.len() >= len {
            break;
        }
        let Some((_, dump)) = line.split_once(": ") else {
            break;
        };
        for token in dump.split_whitespace().take(16) {
            match u8::from_str_radix(token, 16) {
                Ok(b) if token.len() == 2 => out.push(b),
                _ => break,
            }
        }
    }
    out.truncate(len);
    out
}

/// A value of vici's raw dump: `key=value`, `key=[a b]`, `name {...}`.
#[derive(Debug, Clone)]
enum Value {
    Text(String),
    List(Vec<String>),
    Section(Vec<(String, Value)>),
}

fn parse_raw(text: &str) -> Value {
    let tokens: Vec<String> = text
        .replace('{', " { ")
        .replace('}', " } ")
        .replace('[', " [ ")
        .replace(']', " ] ")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let mut pos = 0;
    // The dump is one section: `{ ... }`.
    assert_eq!(tokens.first().map(String::as_str), Some("{"), "{text}");
    pos += 1;
    parse_section(&tokens, &mut pos)
}

fn parse_section(tokens: &[String], pos: &mut usize) -> Value {
    let mut entries = Vec::new();
    while *pos < tokens.len() {
        let t = &tokens[*pos];
        *pos += 1;
        if t == "}" {
            break;
        }
        if tokens.get(*pos).map(String::as_str) == Some("{") {
            *pos += 1;
            entries.push((t.clone(), parse_section(tokens, pos)));
        } else if let Some(key) = t.strip_suffix('=') {
            // `key=[ a b ]`
            assert_eq!(tokens[*pos], "[");
            *pos += 1;
            let mut list = Vec::new();
            while tokens[*pos] != "]" {
                list.push(tokens[*pos].clone());
                *pos += 1;
            }
            *pos += 1;
            entries.push((key.to_string(), Value::List(list)));
        } else if let Some((k, v)) = t.split_once('=') {
            entries.push((k.to_string(), Value::Text(v.to_string())));
        }
    }
    Value::Section(entries)
}

/// An IKE SA as charon lists it.
#[derive(Debug)]
struct Sa {
    name: String,
    fields: Value,
}

fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let Value::Section(entries) = v else {
        return None;
    };
    entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    match get(v, key) {
        Some(Value::Text(t)) => t,
        other => panic!("no {key} in {v:?}: {other:?}"),
    }
}

fn list(v: &Value, key: &str) -> Vec<String> {
    match get(v, key) {
        Some(Value::List(l)) => l.clone(),
        other => panic!("no list {key} in {v:?}: {other:?}"),
    }
}

fn children(v: &Value) -> Vec<&Value> {
    match get(v, "child-sas") {
        Some(Value::Section(entries)) => entries.iter().map(|(_, c)| c).collect(),
        _ => Vec::new(),
    }
}

/// strongSwan's names of linerate's ESP suites: (encr-alg, encr-keysize,
/// integ-alg).
fn strongswan_esp(suite: EspSuite) -> (&'static str, &'static str, Option<&'static str>) {
    match suite {
        EspSuite::Aes128Gcm16 => ("AES_GCM_16", "128", None),
        EspSuite::Aes256Gcm16 => ("AES_GCM_16", "256", None),
        EspSuite::Aes128Sha1 => ("AES_CBC", "128", Some("HMAC_SHA1_96")),
        EspSuite::Aes128Sha256 => ("AES_CBC", "128", Some("HMAC_SHA2_256_128")),
        EspSuite::Aes256Sha256 => ("AES_CBC", "256", Some("HMAC_SHA2_256_128")),
        EspSuite::Aes256Sha512 => ("AES_CBC", "256", Some("HMAC_SHA2_512_256")),
    }
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
    let sockets = in_netns(&lab.peer, || Sockets::bind(PEER, Ports::default()))?;
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
    let charon = Charon::start(&lab.gw, &conns, &key, "");
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
            assert_eq!(text(c, "encr-keysize"), bits, "{what}");
            if let Some(integ) = integ {
                assert_eq!(text(c, "integ-alg"), integ, "{what}");
            } else {
                assert!(get(c, "integ-alg").is_none(), "{what}");
            }
            assert_eq!(list(c, "local-ts"), [GW_NET]);
            assert_eq!(list(c, "remote-ts"), [PEER_NET]);

            // The keys: linerate is the initiator.
            let keys = charon.last_child_keys();
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
            let left = charon.wait_no_sas();
            assert!(left.is_empty(), "{what}: left after delete: {left:?}");
        }
    }
}

/// The Internet checksum (RFC 1071).
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 ICMP packet of `kind` (8: echo request, 0: reply).
fn icmp(src: Ipv4Addr, dst: Ipv4Addr, kind: u8, id: u16, seq: u16, data: &[u8]) -> Vec<u8> {
    let total = (20 + 8 + data.len()) as u16;
    let mut p = vec![0x45, 0];
    p.extend_from_slice(&total.to_be_bytes());
    p.extend_from_slice(&[0x12, 0x34, 0x40, 0, 64, 1, 0, 0]);
    p.extend_from_slice(&src.octets());
    p.extend_from_slice(&dst.octets());
    let c = checksum(&p);
    p[10..12].copy_from_slice(&c.to_be_bytes());
    let mut m = vec![kind, 0, 0, 0];
    m.extend_from_slice(&id.to_be_bytes());
    m.extend_from_slice(&seq.to_be_bytes());
    m.extend_from_slice(data);
    let c = checksum(&m);
    m[2..4].copy_from_slice(&c.to_be_bytes());
    p.extend_from_slice(&m);
    p
}

/// Pings the gateway's 198.19.0.1 from 198.18.0.2 through the tunnel,
/// ESP by linerate-esp with the keys IKE derived.
fn ping_through(session: &mut Session, child: &ChildSa, what: &str) {
    let src = Ipv4Addr::new(198, 18, 0, 2);
    let dst = Ipv4Addr::new(198, 19, 0, 1);
    let data = b"linerate-ike through the tunnel";
    let request = icmp(src, dst, 8, 0x4c52, 1, data);
    let mut out = linerate_esp::Outbound::new(child.outbound.clone()).unwrap();
    let mut inb = linerate_esp::Inbound::new(child.inbound.clone()).unwrap();
    let mut esp = vec![0u8; out.sealed_len(request.len())];
    let n = out
        .seal(&request, linerate_esp::NEXT_HEADER_IPV4, &mut esp)
        .unwrap();
    session.send_esp(&esp[..n]).unwrap();
    let mut reply = session
        .recv_esp(Duration::from_secs(3))
        .unwrap()
        .unwrap_or_else(|| panic!("{what}: no ESP answer to the ping"));
    assert_eq!(
        linerate_esp::spi_of(&reply),
        Some(child.inbound.spi),
        "{what}"
    );
    let opened = inb
        .open(&mut reply)
        .unwrap_or_else(|e| panic!("{what}: the gateway's ESP does not open: {e}"));
    assert_eq!(opened.next_header, linerate_esp::NEXT_HEADER_IPV4);
    let p = &opened.packet[..];
    assert_eq!(&p[12..16], &dst.octets(), "{what}: from the gateway");
    assert_eq!(&p[16..20], &src.octets(), "{what}: to linerate");
    assert_eq!(p[9], 1, "{what}: ICMP");
    let icmp_reply = &p[20..];
    assert_eq!(icmp_reply[0], 0, "{what}: an echo reply");
    assert_eq!(
        &icmp_reply[4..8],
        &[0x4c, 0x52, 0, 1],
        "{what}: id and sequence"
    );
    assert_eq!(&icmp_reply[8..], data, "{what}: the data back");
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
    let charon = Charon::start(&lab.gw, &conns[..1], &key, "cookie_threshold = 1");
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
    assert!(charon.wait_no_sas().is_empty());

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
    assert!(charon.wait_no_sas().is_empty());

    let mut wrong_ts = config(&key, PROPOSALS[0], esp, None);
    wrong_ts.remote_ts = TrafficSelector::parse("192.0.2.0/24").unwrap();
    let e = connect(&lab, wrong_ts).expect_err("selectors refused");
    assert_eq!(
        e.to_string(),
        format!("the gateway refused the traffic selectors (TS_UNACCEPTABLE): offered local {PEER_NET}, remote 192.0.2.0/24; the gateway's connection must have them as remote_ts and local_ts")
    );
    assert!(charon.wait_no_sas().is_empty());

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
    let e = in_netns(&lab.peer, || Session::connect(silent)).expect_err("nobody answers");
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

/// Sends one IKE_SA_INIT with linerate-ike's encoder and reads the
/// answer, without going on: charon keeps the SA half-open.
fn half_open_init(lab: &Lab) {
    use linerate_ike::wire::*;
    let socket = in_netns(&lab.peer, || std::net::UdpSocket::bind((PEER, 0))).unwrap();
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
