//! What the interop tests share: two namespaces joined by a veth pair,
//! strongSwan's charon started by hand in one of them, its SAs read back
//! through `swanctl --list-sas --raw`.
#![allow(dead_code)]

use linerate_helper::{DieWithParent, PrivateDir};
use linerate_ike::{ChildSa, Session};
use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use linerate_testkit::run_in_netns;

pub const GW: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
pub const PEER: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
pub const GW_NET: &str = "198.19.0.0/24";
pub const GW_LAN: &str = "198.19.0.1/32";
pub const GW_ID: &str = "gw.linerate.test";

const CHARON: [&str; 2] = ["/usr/lib/ipsec/charon", "/usr/libexec/ipsec/charon"];
pub const LIBIPSEC: [&str; 2] = [
    "/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so",
    "/usr/libexec/ipsec/plugins/libstrongswan-kernel-libipsec.so",
];
pub const PLUGINS: &str = "random nonce openssl kdf aes sha1 sha2 hmac gcm pem pkcs1 pubkey \
kernel-libipsec kernel-netlink socket-default vici";

/// As every skip: a failure under LINERATE_REQUIRE_ALL=1 (scripts/test.sh).
pub fn skip(reason: &str) {
    if std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("SKIPPED {reason}; LINERATE_REQUIRE_ALL=1 makes every skip a failure: provide what the test needs");
    }
    eprintln!("SKIPPED {reason}");
}

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

pub fn first_existing(paths: &[&'static str]) -> Option<&'static str> {
    paths.iter().copied().find(|p| Path::new(p).exists())
}

/// Runs a command; its stdout, or a panic naming it and its stderr.
pub fn run(program: &str, args: &[&str]) -> String {
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
pub struct Lab {
    pub gw: String,
    pub peer: String,
}

impl Lab {
    pub fn new(tag: &str) -> Lab {
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
            let _ = linerate_testkit::try_ip(None, &["netns", "del", ns]);
        }
    }
}

/// charon in the gateway's namespace with a private /run (the directory
/// holding its strongswan.conf, swanctl.conf with the key, 0600, its vici
/// socket and log), killed and removed when dropped.
pub struct Charon {
    pub child: Child,
    pub dir: PrivateDir,
    pub uri: String,
    pub swanctl: PathBuf,
}

impl Charon {
    pub fn start(ns: &str, swanctl_conf: &str, extra: &str) -> Charon {
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
        dir.write("strongswan.conf", conf.as_bytes()).unwrap();
        let conf_file = dir.write("swanctl.conf", swanctl_conf.as_bytes()).unwrap();
        // `ip netns exec` gives the command a mount namespace of its own:
        // there the private directory becomes /run, for this charon only.
        let script = r#"mount --bind "$1" /run && STRONGSWAN_CONF=/run/strongswan.conf exec "$2""#;
        let child = linerate_testkit::ip_command(["netns", "exec", ns, "sh", "-c", script, "sh"])
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

    pub fn swanctl(&self, args: &[&str]) -> String {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["--uri", &self.uri]);
        run(&self.swanctl.to_string_lossy(), &all)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("charon.log")).unwrap_or_default()
    }

    /// The IKE SAs charon has, from `swanctl --list-sas --raw`.
    pub fn sas(&self) -> Vec<Sa> {
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

    /// Waits up to 5 s for charon to have no IKE SA left.
    pub fn wait_no_sas(&self) -> Vec<Sa> {
        self.wait_no_sas_but(|_| false)
    }

    /// Waits up to 5 s for charon to have no IKE SA left but those
    /// `ignored` picks (a half-open SA a test made on purpose).
    pub fn wait_no_sas_but(&self, ignored: impl Fn(&Sa) -> bool) -> Vec<Sa> {
        let start = Instant::now();
        loop {
            let mut sas = self.sas();
            sas.retain(|sa| !ignored(sa));
            if sas.is_empty() || start.elapsed() > Duration::from_secs(5) {
                return sas;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The CHILD_SA keys charon logged last (its chd level 4): encryption
    /// and integrity, initiator's then responder's.
    pub fn last_child_keys(&self) -> BTreeMap<String, Vec<u8>> {
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
pub fn hexdump(lines: &[&str], len: usize) -> Vec<u8> {
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
pub enum Value {
    Text(String),
    List(Vec<String>),
    Section(Vec<(String, Value)>),
}

pub fn parse_raw(text: &str) -> Value {
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

pub fn parse_section(tokens: &[String], pos: &mut usize) -> Value {
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
pub struct Sa {
    pub name: String,
    pub fields: Value,
}

pub fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let Value::Section(entries) = v else {
        return None;
    };
    entries.iter().find(|(k, _)| k == key).map(|(_, v)| v)
}

pub fn text<'a>(v: &'a Value, key: &str) -> &'a str {
    match get(v, key) {
        Some(Value::Text(t)) => t,
        other => panic!("no {key} in {v:?}: {other:?}"),
    }
}

pub fn list(v: &Value, key: &str) -> Vec<String> {
    match get(v, key) {
        Some(Value::List(l)) => l.clone(),
        other => panic!("no list {key} in {v:?}: {other:?}"),
    }
}

pub fn children(v: &Value) -> Vec<&Value> {
    match get(v, "child-sas") {
        Some(Value::Section(entries)) => entries.iter().map(|(_, c)| c).collect(),
        _ => Vec::new(),
    }
}

/// The Internet checksum (RFC 1071).
pub fn checksum(data: &[u8]) -> u16 {
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
pub fn icmp(src: Ipv4Addr, dst: Ipv4Addr, kind: u8, id: u16, seq: u16, data: &[u8]) -> Vec<u8> {
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
pub fn ping_through(session: &mut Session, child: &ChildSa, what: &str) {
    let mut out = linerate_esp::Outbound::new(child.outbound.clone()).unwrap();
    let mut inb = linerate_esp::Inbound::new(child.inbound.clone()).unwrap();
    ping_with(session, &mut out, &mut inb, child.inbound.spi, what);
}

/// [`ping_through`] on SAs the caller keeps: ESP sequence numbers go on
/// from the last ping, so several pings on one CHILD_SA are not replays.
pub fn ping_with(
    session: &mut Session,
    out: &mut linerate_esp::Outbound,
    inb: &mut linerate_esp::Inbound,
    inbound_spi: u32,
    what: &str,
) {
    let src = Ipv4Addr::new(198, 18, 0, 2);
    let dst = Ipv4Addr::new(198, 19, 0, 1);
    let data = b"linerate-ike through the tunnel";
    let request = icmp(src, dst, 8, 0x4c52, 1, data);
    let mut esp = vec![0u8; out.sealed_len(request.len())];
    let n = out
        .seal(&request, linerate_esp::NEXT_HEADER_IPV4, &mut esp)
        .unwrap();
    session.send_esp(&esp[..n]).unwrap();
    let mut reply = session
        .recv_esp(Duration::from_secs(3))
        .unwrap()
        .unwrap_or_else(|| panic!("{what}: no ESP answer to the ping"));
    assert_eq!(linerate_esp::spi_of(&reply), Some(inbound_spi), "{what}");
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
