//! strongSwan's charon as a VPN gateway built by hand in a test's router
//! namespace (not by linerate's lab code), and a small client of its vici
//! socket: the IKE SAs it has, and the events it raises (a CHILD_SA's
//! `child-updown` carries its packet counters when it goes down).
//!
//! charon runs with a private /run: a [`PrivateDir`] (0700, files 0600)
//! holding strongswan.conf, swanctl.conf with the key, its vici socket and
//! its log, bound over /run inside the mount namespace `ip netns exec`
//! gives it. It dies with the test ([`DieWithParent`]) and is killed when
//! dropped. This kernel has no ESP, so charon runs with kernel-libipsec
//! (user-space ESP on a TUN device `ipsec0`, ESP in UDP 4500), and 5.9.8
//! needs its `kdf` plugin. The approach is crates/ike/tests/strongswan.rs's.
#![allow(dead_code)]

use linerate_helper::{DieWithParent, PrivateDir};
use std::io::{self, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const CHARON: [&str; 2] = ["/usr/lib/ipsec/charon", "/usr/libexec/ipsec/charon"];
const LIBIPSEC: [&str; 2] = [
    "/usr/lib/ipsec/plugins/libstrongswan-kernel-libipsec.so",
    "/usr/libexec/ipsec/plugins/libstrongswan-kernel-libipsec.so",
];
const SWANCTL: [&str; 3] = ["/usr/sbin/swanctl", "/sbin/swanctl", "/usr/bin/swanctl"];
const PLUGINS: &str = "random nonce openssl kdf aes sha1 sha2 hmac gcm pem pkcs1 pubkey \
kernel-libipsec kernel-netlink socket-default vici";

fn first_existing(paths: &[&'static str]) -> Option<&'static str> {
    paths.iter().copied().find(|p| Path::new(p).exists())
}

/// One connection of the gateway (a `connections` entry of swanctl.conf)
/// with one CHILD_SA `lan` in tunnel mode, pre-shared key on both sides.
#[derive(Debug, Clone)]
pub struct Conn {
    pub name: String,
    pub local_addr: String,
    pub remote_addr: String,
    /// IKE proposals, strongSwan's syntax, comma-separated.
    pub proposals: String,
    pub local_id: String,
    pub remote_id: String,
    /// The gateway's protected LAN and the peer's network.
    pub local_ts: String,
    pub remote_ts: String,
    /// ESP proposals, comma-separated.
    pub esp_proposals: String,
}

impl Conn {
    fn swanctl(&self) -> String {
        format!(
            "  {name} {{\n    version = 2\n    local_addrs = {la}\n    remote_addrs = {ra}\n    proposals = {p}\n    local {{\n      auth = psk\n      id = \"{lid}\"\n    }}\n    remote {{\n      auth = psk\n      id = \"{rid}\"\n    }}\n    children {{\n      lan {{\n        local_ts = {lts}\n        remote_ts = {rts}\n        esp_proposals = {esp}\n        mode = tunnel\n      }}\n    }}\n  }}\n",
            name = self.name,
            la = self.local_addr,
            ra = self.remote_addr,
            p = self.proposals,
            lid = self.local_id,
            rid = self.remote_id,
            lts = self.local_ts,
            rts = self.remote_ts,
            esp = self.esp_proposals,
        )
    }
}

/// swanctl.conf for `conns`, all with pre-shared key `psk`.
pub fn swanctl_conf(conns: &[Conn], psk: &str) -> String {
    let mut conf = String::from("connections {\n");
    for c in conns {
        conf += &c.swanctl();
    }
    conf += &format!("}}\nsecrets {{\n  ike-test {{\n    secret = \"{psk}\"\n  }}\n}}\n");
    conf
}

/// charon in a namespace with a private /run, killed when dropped.
pub struct Charon {
    child: Child,
    dir: PrivateDir,
    socket: PathBuf,
    uri: String,
    swanctl: &'static str,
}

impl Charon {
    /// Starts charon in `ns` and loads `conns` with key `psk`. A missing
    /// strongSwan is a failure that names scripts/setup.sh (never a skip).
    pub fn start(ns: &str, conns: &[Conn], psk: &str) -> Charon {
        Charon::start_with(ns, conns, psk, "")
    }

    /// [`start`](Self::start) with more of charon's settings, lines of
    /// strongswan.conf's `charon` section (e.g. `ikesa_limit = 50`).
    pub fn start_with(ns: &str, conns: &[Conn], psk: &str, settings: &str) -> Charon {
        let charon = first_existing(&CHARON).unwrap_or_else(|| {
            panic!("strongSwan's charon is missing ({}): run scripts/setup.sh (it installs strongswan-charon, strongswan-swanctl, libcharon-extra-plugins)", CHARON.join(" or "))
        });
        if first_existing(&LIBIPSEC).is_none() {
            panic!("strongSwan's kernel-libipsec plugin is missing: run scripts/setup.sh (libcharon-extra-plugins)");
        }
        let swanctl = first_existing(&SWANCTL)
            .unwrap_or_else(|| panic!("swanctl is missing: run scripts/setup.sh"));
        let dir = PrivateDir::new(&format!("ipsec-test-{ns}")).unwrap();
        let conf = format!(
            "charon {{\n  load = {PLUGINS}\n  install_virtual_ip = no\n{settings}\n  filelog {{\n    test {{\n      path = /run/charon.log\n      default = 1\n      flush_line = yes\n    }}\n  }}\n  plugins {{\n    vici {{\n      socket = unix:///run/charon.vici\n    }}\n  }}\n}}\n"
        );
        dir.write("strongswan.conf", conf.as_bytes()).unwrap();
        let conf_file = dir
            .write("swanctl.conf", swanctl_conf(conns, psk).as_bytes())
            .unwrap();
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
            socket,
            uri,
            swanctl,
        };
        let start = Instant::now();
        while !charon.socket.exists() {
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

    /// Runs swanctl against this charon; its stdout, or a panic.
    pub fn swanctl(&self, args: &[&str]) -> String {
        let out = Command::new(self.swanctl)
            .args(args)
            .args(["--uri", &self.uri])
            .stdin(Stdio::null())
            .output()
            .unwrap_or_else(|e| panic!("swanctl: {e}"));
        assert!(
            out.status.success(),
            "swanctl {args:?} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// charon's log so far (level 1 of every subsystem).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("charon.log")).unwrap_or_default()
    }

    /// The IKE SAs charon has now (vici `list-sas`): each as its `list-sa`
    /// event's section, named by the connection.
    pub fn sas(&self) -> Vec<(String, Vici)> {
        let mut vici = ViciConn::connect(&self.socket).expect("vici");
        vici.register("list-sa").expect("vici register list-sa");
        vici.send(CMD_REQUEST, Some("list-sas"), &[])
            .expect("vici list-sas");
        let mut sas = Vec::new();
        loop {
            let (kind, name, msg) = vici.read().expect("vici list-sas answer");
            match kind {
                EVENT if name.as_deref() == Some("list-sa") => {
                    if let Vici::Section(entries) = msg {
                        sas.extend(entries);
                    }
                }
                CMD_RESPONSE => return sas,
                other => panic!("vici: unexpected packet type {other} in list-sas"),
            }
        }
    }

    /// Waits up to 5 s for charon to have no IKE SA left; those left.
    pub fn wait_no_sas(&self) -> Vec<(String, Vici)> {
        let start = Instant::now();
        loop {
            let sas = self.sas();
            if sas.is_empty() || start.elapsed() > Duration::from_secs(5) {
                return sas;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Subscribes to charon's `child-updown` events: from the return on,
    /// none is missed (charon has confirmed the registration).
    pub fn monitor(&self) -> Monitor {
        Monitor::new(&self.socket, "child-updown")
    }

    /// Subscribes to charon's events named `event` (e.g. `child-rekey`).
    pub fn monitor_events(&self, event: &str) -> Monitor {
        Monitor::new(&self.socket, event)
    }

    /// How many IKE messages charon received so far (its log's lines).
    pub fn received_packets(&self) -> usize {
        self.log().matches("received packet").count()
    }
}

impl Drop for Charon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

// ---- vici (strongSwan's control protocol) ----
//
// A packet: 32-bit length (big-endian), then its type; the named types
// carry a name (8-bit length); requests, responses and events a message:
// elements SECTION_START name, SECTION_END, KEY_VALUE name value (16-bit
// length), LIST_START name, LIST_ITEM value, LIST_END.

const CMD_REQUEST: u8 = 0;
const CMD_RESPONSE: u8 = 1;
const EVENT_REGISTER: u8 = 3;
const EVENT_CONFIRM: u8 = 5;
const EVENT: u8 = 7;

/// A vici message, as a tree: `key=value`, `key=[a b]`, `name { ... }`.
#[derive(Debug, Clone, PartialEq)]
pub enum Vici {
    Text(String),
    List(Vec<String>),
    Section(Vec<(String, Vici)>),
}

impl Vici {
    /// The entry `key` of a section.
    pub fn get(&self, key: &str) -> Option<&Vici> {
        match self {
            Vici::Section(entries) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The text of entry `key`; a panic naming the message when missing.
    pub fn text(&self, key: &str) -> &str {
        match self.get(key) {
            Some(Vici::Text(t)) => t,
            other => panic!("no text '{key}' in {self:?}: {other:?}"),
        }
    }

    /// A number of entry `key`.
    pub fn number(&self, key: &str) -> u64 {
        let t = self.text(key);
        t.parse()
            .unwrap_or_else(|_| panic!("'{key}' = {t} is not a number in {self:?}"))
    }

    /// The entries of a section (empty for a text or a list).
    pub fn entries(&self) -> &[(String, Vici)] {
        match self {
            Vici::Section(entries) => entries,
            _ => &[],
        }
    }
}

fn parse_message(mut data: &[u8]) -> io::Result<Vici> {
    fn bad(what: &str) -> io::Error {
        io::Error::new(io::ErrorKind::InvalidData, format!("vici: {what}"))
    }
    fn take<'a>(data: &mut &'a [u8], n: usize) -> io::Result<&'a [u8]> {
        if data.len() < n {
            return Err(bad("message cut short"));
        }
        let (head, rest) = data.split_at(n);
        *data = rest;
        Ok(head)
    }
    fn name(data: &mut &[u8]) -> io::Result<String> {
        let n = take(data, 1)?[0] as usize;
        Ok(String::from_utf8_lossy(take(data, n)?).into_owned())
    }
    fn value(data: &mut &[u8]) -> io::Result<String> {
        let len = take(data, 2)?;
        let n = u16::from_be_bytes([len[0], len[1]]) as usize;
        Ok(String::from_utf8_lossy(take(data, n)?).into_owned())
    }
    // A stack of open sections; the bottom one is the message.
    let mut stack: Vec<(String, Vec<(String, Vici)>)> = vec![(String::new(), Vec::new())];
    while !data.is_empty() {
        match take(&mut data, 1)?[0] {
            1 => {
                let n = name(&mut data)?;
                stack.push((n, Vec::new()));
            }
            2 => {
                if stack.len() < 2 {
                    return Err(bad("section end without start"));
                }
                let (n, entries) = stack.pop().unwrap();
                stack
                    .last_mut()
                    .unwrap()
                    .1
                    .push((n, Vici::Section(entries)));
            }
            3 => {
                let k = name(&mut data)?;
                let v = value(&mut data)?;
                stack.last_mut().unwrap().1.push((k, Vici::Text(v)));
            }
            4 => {
                let k = name(&mut data)?;
                let mut items = Vec::new();
                loop {
                    match take(&mut data, 1)?[0] {
                        5 => items.push(value(&mut data)?),
                        6 => break,
                        other => return Err(bad(&format!("element {other} in a list"))),
                    }
                }
                stack.last_mut().unwrap().1.push((k, Vici::List(items)));
            }
            other => return Err(bad(&format!("unknown element {other}"))),
        }
    }
    if stack.len() != 1 {
        return Err(bad("section not closed"));
    }
    Ok(Vici::Section(stack.pop().unwrap().1))
}

/// One connection to charon's vici socket.
struct ViciConn(UnixStream);

impl ViciConn {
    fn connect(socket: &Path) -> io::Result<ViciConn> {
        let s = UnixStream::connect(socket)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(ViciConn(s))
    }

    fn send(&mut self, kind: u8, name: Option<&str>, message: &[u8]) -> io::Result<()> {
        let mut body = vec![kind];
        if let Some(n) = name {
            body.push(n.len() as u8);
            body.extend_from_slice(n.as_bytes());
        }
        body.extend_from_slice(message);
        let mut packet = (body.len() as u32).to_be_bytes().to_vec();
        packet.extend_from_slice(&body);
        self.0.write_all(&packet)
    }

    /// The next packet: its type, name and message.
    fn read(&mut self) -> io::Result<(u8, Option<String>, Vici)> {
        let mut len = [0u8; 4];
        self.0.read_exact(&mut len)?;
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        self.0.read_exact(&mut body)?;
        let Some((&kind, mut rest)) = body.split_first() else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "vici: empty packet",
            ));
        };
        let mut name = None;
        if matches!(kind, CMD_REQUEST | EVENT_REGISTER | 4 | EVENT) {
            let n = *rest.first().unwrap_or(&0) as usize;
            if rest.len() < 1 + n {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "vici: name cut short",
                ));
            }
            name = Some(String::from_utf8_lossy(&rest[1..1 + n]).into_owned());
            rest = &rest[1 + n..];
        }
        Ok((kind, name, parse_message(rest)?))
    }

    /// Registers for event `name`; returns once charon confirmed it.
    fn register(&mut self, event: &str) -> io::Result<()> {
        self.send(EVENT_REGISTER, Some(event), &[])?;
        let (kind, _, _) = self.read()?;
        if kind != EVENT_CONFIRM {
            return Err(io::Error::other(format!(
                "vici: registering for {event} answered with type {kind}"
            )));
        }
        Ok(())
    }
}

/// Collects charon's events of one name in a thread.
pub struct Monitor {
    stream: UnixStream,
    events: Arc<Mutex<Vec<Vici>>>,
    thread: Option<JoinHandle<()>>,
}

impl Monitor {
    fn new(socket: &Path, event: &str) -> Monitor {
        let mut conn = ViciConn::connect(socket).expect("vici");
        conn.register(event)
            .unwrap_or_else(|e| panic!("vici register {event}: {e}"));
        conn.0.set_read_timeout(None).unwrap();
        let stream = conn.0.try_clone().unwrap();
        let events = Arc::new(Mutex::new(Vec::new()));
        let sink = events.clone();
        let thread = std::thread::spawn(move || {
            while let Ok((kind, _, msg)) = conn.read() {
                if kind == EVENT {
                    sink.lock().unwrap().push(msg);
                }
            }
        });
        Monitor {
            stream,
            events,
            thread: Some(thread),
        }
    }

    /// The events so far.
    pub fn events(&self) -> Vec<Vici> {
        self.events.lock().unwrap().clone()
    }

    /// Waits up to `limit` for an event that `pred` accepts.
    pub fn wait_for(&self, limit: Duration, pred: impl Fn(&Vici) -> bool) -> Option<Vici> {
        let start = Instant::now();
        loop {
            if let Some(e) = self.events().into_iter().find(|e| pred(e)) {
                return Some(e);
            }
            if start.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// One CHILD_SA of a `child-updown` event: the IKE SA's name and fields,
/// the CHILD_SA's fields, and whether it came up (else it went down).
#[derive(Debug, Clone)]
pub struct ChildEvent {
    pub up: bool,
    pub ike_name: String,
    pub ike: Vici,
    pub child: Vici,
}

impl ChildEvent {
    /// The CHILD_SAs of a `child-updown` event (one, in practice).
    pub fn of(event: &Vici) -> Vec<ChildEvent> {
        let up = matches!(event.get("up"), Some(Vici::Text(t)) if t == "yes");
        let mut out = Vec::new();
        for (name, ike) in event.entries() {
            let Some(children) = ike.get("child-sas") else {
                continue;
            };
            for (_, child) in children.entries() {
                out.push(ChildEvent {
                    up,
                    ike_name: name.clone(),
                    ike: ike.clone(),
                    child: child.clone(),
                });
            }
        }
        out
    }
}

/// RX and TX packet counts of interface `dev` in namespace `ns` (`ip -s
/// -j link show`).
pub fn link_packets(ns: &str, dev: &str) -> (u64, u64) {
    let out = super::sh("ip", &["-n", ns, "-s", "-j", "link", "show", dev]);
    let v: serde_json::Value = serde_json::from_str(&out).expect("ip -j");
    let s = &v[0]["stats64"];
    (
        s["rx"]["packets"].as_u64().expect("rx packets"),
        s["tx"]["packets"].as_u64().expect("tx packets"),
    )
}
