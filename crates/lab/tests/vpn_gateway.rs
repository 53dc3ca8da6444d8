//! `vpn-gateway`: the lab's DUT as an IPsec gateway (strongSwan's charon,
//! IKEv2 responder), checked with strongSwan's and the kernel's own tools,
//! and proven to interoperate: a second charon, started by hand in tester
//! B's namespace as the initiator with the gateway's pre-shared key, brings
//! the tunnel up, and a ping from tester A's namespace to an address behind
//! it goes through the gateway's ESP and back. Root only; each lab has a
//! unique name and is removed on drop, also when a test fails.

use linerate_esp::EspSuite;
use linerate_helper::{DieWithParent, PrivateDir};
use linerate_lab::scenario::{Applied, Scenario, VPN_INNER_ADDRESS};
use linerate_lab::{check_environment, Lab};
use linerate_testkit::{ip_command, spawn_in_netns};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Says loudly that (part of) a test is skipped and why; under
/// `LINERATE_REQUIRE_ALL=1` (exported by scripts/test.sh, as in CI) a skip
/// is a failure instead: the test panics with the reason.
fn skip(reason: &str) {
    if std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("SKIPPED {reason}; LINERATE_REQUIRE_ALL=1 makes every skip a failure: provide what the test needs");
    }
    eprintln!("SKIPPED {reason}");
}

fn root(test: &str) -> bool {
    match check_environment() {
        Ok(()) => true,
        Err(e) => {
            skip(&format!("(needs root): {test}: {e}"));
            false
        }
    }
}

/// A lab name unique to this process and call.
fn unique() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "v{}g{}",
        std::process::id() % 100_000,
        N.fetch_add(1, Ordering::Relaxed)
    );
    assert!(name.len() <= 12, "{name}");
    name
}

/// Runs a command; returns (success, stdout, stderr).
fn try_run(program: &str, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn run(program: &str, args: &[&str]) -> String {
    let (ok, stdout, stderr) = try_run(program, args);
    assert!(ok, "{program} {args:?}: {stderr}");
    stdout
}

fn ip(args: &[&str]) -> String {
    run("ip", args)
}

/// Where Debian installs charon; the test fails (not skips) without it.
fn charon() -> &'static str {
    ["/usr/lib/ipsec/charon", "/usr/libexec/ipsec/charon"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("strongSwan's charon is not installed: apt-get install strongswan-charon strongswan-swanctl libcharon-extra-plugins")
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .mode()
        & 0o7777
}

/// The network namespace (inode) process `pid` is in.
fn netns_of_pid(pid: u32) -> u64 {
    std::fs::metadata(format!("/proc/{pid}/ns/net"))
        .unwrap()
        .ino()
}

fn netns_inode(ns: &str) -> u64 {
    std::fs::metadata(format!("/run/netns/{ns}")).unwrap().ino()
}

/// A lab with `spec` applied; the lab goes when dropped (after the Applied).
fn gateway_lab(spec: &str) -> (Lab, Applied) {
    let lab = Lab::up(&unique()).expect("lab up");
    let applied = Scenario::parse(spec)
        .unwrap()
        .apply(&lab)
        .unwrap_or_else(|e| panic!("{spec}: {e}"));
    (lab, applied)
}

/// `swanctl ... --uri` against the gateway's charon.
fn gateway_swanctl(applied: &Applied, args: &[&str]) -> String {
    let peer = applied.vpn_peer().unwrap();
    let uri = format!(
        "unix://{}",
        peer.psk_file
            .parent()
            .unwrap()
            .join("charon.vici")
            .display()
    );
    let mut full = args.to_vec();
    full.extend(["--uri", &uri]);
    run("swanctl", &full)
}

/// Whether `ns` has a route to `addr` (`ip route get`), and through which device.
fn route_dev(ns: &str, addr: &str) -> Option<String> {
    let (ok, out, _) = try_run("ip", &["-j", "-n", ns, "route", "get", addr]);
    if !ok {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v[0]["dev"].as_str().map(str::to_string)
}

#[test]
fn vpn_gateway_waits_for_its_peer_and_leaves_nothing_behind() {
    if !root("vpn_gateway_waits_for_its_peer_and_leaves_nothing_behind") {
        return;
    }
    let (lab, applied) = gateway_lab("vpn-gateway:aes256-sha256");
    let dut = lab.dut_netns().to_string();
    let peer = applied.vpn_peer().expect("a VPN peer").clone();
    assert_eq!(peer.gateway.to_string(), "198.19.0.1");
    assert_eq!(peer.peer.to_string(), "198.19.0.2");
    assert_eq!(peer.peer, lab.port_b().ip);
    assert_eq!(peer.gateway, lab.port_b().gateway);
    assert_eq!(peer.local_net, ("198.18.0.0".parse().unwrap(), 24));
    assert_eq!(peer.remote_net, ("198.19.1.0".parse().unwrap(), 24));
    assert_eq!(peer.inner_address, VPN_INNER_ADDRESS);
    assert_eq!(peer.suite, EspSuite::Aes256Sha256);
    assert_eq!(peer.ike, "aes256-sha256-modp2048");
    // kernel-libipsec's TUN MTU, read from the device.
    assert_eq!(peer.inner_mtu, 1400);

    // charon runs, in the DUT's namespace, and is the data path.
    let pids = applied.data_path_pids();
    assert_eq!(pids.len(), 1, "{pids:?}");
    let pid = pids[0];
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap();
    assert_eq!(comm.trim(), "charon");
    assert_eq!(netns_of_pid(pid), netns_inode(&dut));
    assert!(applied.user_space());
    assert!(applied.wan_counters().unwrap().is_ok());
    let data_path = applied.data_path.clone().unwrap();
    assert!(
        data_path.contains("kernel-libipsec") && data_path.contains("far slower"),
        "{data_path}"
    );

    // The connection as swanctl lists it.
    let conns = gateway_swanctl(&applied, &["--list-conns"]);
    for needle in [
        "linerate: IKEv2, no reauthentication, no rekeying",
        "local:  198.19.0.1",
        "remote: 198.19.0.2",
        "lan: TUNNEL, no rekeying",
        "local:  198.18.0.0/24",
        "remote: 198.19.1.0/24",
    ] {
        assert!(conns.contains(needle), "{needle}: {conns}");
    }
    // strongSwan 5.9's list-conns does not print proposals: the suite is
    // read from the configuration charon loaded (the interop test proves
    // charon negotiates it, and only it).
    let dir = peer.psk_file.parent().unwrap().to_path_buf();
    let conf = std::fs::read_to_string(dir.join("swanctl.conf")).unwrap();
    let esp: Vec<&str> = conf
        .lines()
        .filter(|l| l.contains("esp_proposals"))
        .collect();
    assert_eq!(esp, ["        esp_proposals = aes256-sha256"], "{conf}");

    // No SA before the peer initiates, so nothing to see after "traffic".
    assert_eq!(applied.ipsec_sa_counters().unwrap(), []);
    let err = applied.verify_traffic(&lab).unwrap_err().to_string();
    assert!(err.contains("no CHILD_SA installed"), "{err}");
    // No route to the protected network but through a tunnel not yet there;
    // the test networks are still routed (ARP, IKE).
    assert_eq!(route_dev(&dut, "198.19.1.2"), None);
    assert_eq!(route_dev(&dut, "198.19.0.2").as_deref(), Some("dut-b"));
    assert_eq!(route_dev(&dut, "198.18.0.2").as_deref(), Some("dut-a"));

    // The key: root only, in a root-only directory, never shown.
    let psk = std::fs::read_to_string(&peer.psk_file).unwrap();
    assert_eq!(psk.len(), 64, "32 random bytes as hex");
    assert!(psk.bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(mode(&peer.psk_file), 0o600);
    assert_eq!(std::fs::metadata(&peer.psk_file).unwrap().uid(), 0);
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(dir.parent().unwrap()), 0o700, "/run/linerate");
    assert!(dir.starts_with("/run/linerate"), "{}", dir.display());
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    let shown = format!(
        "{:?} {:?} {} {}",
        applied,
        peer,
        String::from_utf8_lossy(&cmdline),
        Scenario::parse("vpn-gateway:aes256-sha256")
            .unwrap()
            .description()
    );
    assert!(!shown.contains(&psk), "the key is shown");

    // Dropped: charon is gone, and its directory with the key.
    drop(applied);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "charon {pid} still runs"
    );
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert!(!peer.psk_file.exists());
    // And with it kernel-libipsec's TUN and its routes.
    let links = ip(&["-n", &dut, "-br", "link"]);
    assert!(!links.contains("ipsec0"), "{links}");
    assert_eq!(route_dev(&dut, "198.19.1.2"), None);
    drop(lab);
}

/// A charon of the test's own: tester B's namespace as the gateway's peer.
struct Initiator {
    child: Child,
    uri: String,
    _dir: PrivateDir,
}

impl Drop for Initiator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Initiator {
    /// Starts charon in `ns` as the initiator towards the gateway, with
    /// two children: `net` (the gateway's suite) and `wrong` (another).
    fn start(ns: &str, psk: &str, esp: &str, wrong_esp: &str) -> Initiator {
        let dir = PrivateDir::new("test-vpn-peer").unwrap();
        let conf = "charon {\n  load = random nonce openssl kdf aes sha1 sha2 hmac gcm pem pkcs1 pubkey kernel-libipsec kernel-netlink socket-default vici\n  install_virtual_ip = no\n  keep_alive = 0s\n  plugins {\n    vici {\n      socket = unix:///run/charon.vici\n    }\n  }\n}\n";
        let child_conf = |name: &str, esp: &str| {
            format!(
                "      {name} {{\n        local_ts = 198.19.1.0/24\n        remote_ts = 198.18.0.0/24\n        esp_proposals = {esp}\n        mode = tunnel\n        start_action = none\n      }}\n"
            )
        };
        let swanctl = format!(
            "connections {{\n  peer {{\n    version = 2\n    local_addrs = 198.19.0.2\n    remote_addrs = 198.19.0.1\n    proposals = aes256-sha256-modp2048\n    encap = yes\n    mobike = no\n    local {{\n      auth = psk\n      id = 198.19.0.2\n    }}\n    remote {{\n      auth = psk\n      id = 198.19.0.1\n    }}\n    children {{\n{}{}    }}\n  }}\n}}\nsecrets {{\n  ike-peer {{\n    secret = \"{psk}\"\n  }}\n}}\n",
            child_conf("net", esp),
            child_conf("wrong", wrong_esp),
        );
        dir.write("strongswan.conf", conf.as_bytes()).unwrap();
        let file = dir.write("swanctl.conf", swanctl.as_bytes()).unwrap();
        let script = r#"mount --bind "$1" /run && STRONGSWAN_CONF=/run/strongswan.conf exec "$2""#;
        let dir_text = dir.path().to_string_lossy().into_owned();
        let child = ip_command([
            "netns",
            "exec",
            ns,
            "sh",
            "-c",
            script,
            "sh",
            &dir_text,
            charon(),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .die_with_parent()
        .spawn()
        .unwrap();
        let socket = dir.path().join("charon.vici");
        let start = Instant::now();
        while !socket.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the peer's charon did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let initiator = Initiator {
            child,
            uri: format!("unix://{}", socket.display()),
            _dir: dir,
        };
        initiator.swanctl(&["--load-all", "--file", &file.to_string_lossy()]);
        initiator
    }

    fn try_swanctl(&self, args: &[&str]) -> (bool, String, String) {
        let mut full = args.to_vec();
        full.extend(["--uri", &self.uri]);
        try_run("swanctl", &full)
    }

    fn swanctl(&self, args: &[&str]) -> String {
        let (ok, out, err) = self.try_swanctl(args);
        assert!(ok, "swanctl {args:?}: {out} {err}");
        out
    }
}

/// Sends `count` UDP datagrams of `payload` bytes with DF set (the kernel
/// sockets' path MTU discovery: too big is refused, never fragmented)
/// from `a_ip` in `a_ns` to an echo server on `target` in `b_ns`; returns
/// how many echoes came back. `ping` is not a dependency of linerate.
fn udp_echo(
    a_ns: &str,
    a_ip: Ipv4Addr,
    b_ns: &str,
    target: Ipv4Addr,
    count: usize,
    payload: usize,
) -> usize {
    const PORT: u16 = 7007;
    let (tx, rx) = std::sync::mpsc::channel();
    let server = spawn_in_netns(b_ns, move || {
        let s = UdpSocket::bind(SocketAddrV4::new(target, PORT)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(1500)))
            .unwrap();
        tx.send(()).unwrap();
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = s.recv_from(&mut buf) {
            s.send_to(&buf[..n], from).unwrap();
        }
    });
    rx.recv().unwrap();
    let got = spawn_in_netns(a_ns, move || {
        use std::os::fd::AsRawFd;
        let s = UdpSocket::bind(SocketAddrV4::new(a_ip, 0)).unwrap();
        let df: libc::c_int = libc::IP_PMTUDISC_DO;
        // SAFETY: a valid socket and an int option of the right size.
        let rc = unsafe {
            libc::setsockopt(
                s.as_raw_fd(),
                libc::IPPROTO_IP,
                libc::IP_MTU_DISCOVER,
                &df as *const libc::c_int as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(rc, 0, "IP_MTU_DISCOVER");
        s.set_read_timeout(Some(Duration::from_millis(1000)))
            .unwrap();
        let data = vec![0x5au8; payload];
        for _ in 0..count {
            // Too big for the path: refused here once the DUT has said so.
            let _ = s.send_to(&data, SocketAddrV4::new(target, PORT));
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut buf = vec![0u8; 65536];
        let mut got = 0;
        while let Ok(n) = s.recv(&mut buf) {
            assert_eq!(n, payload);
            got += 1;
        }
        got
    })
    .join()
    .unwrap();
    server.join().unwrap();
    got
}

/// `key=value` from `swanctl --list-sas --raw` output, for each CHILD_SA
/// in order: an independent reading of the counters.
fn raw_values(raw: &str, key: &str) -> Vec<u64> {
    raw.split_whitespace()
        .filter_map(|w| w.strip_prefix(&format!("{key}=")))
        .filter_map(|v| v.trim_end_matches('}').parse().ok())
        .collect()
}

#[test]
fn a_strongswan_peer_brings_the_tunnel_up_and_pings_through_it() {
    if !root("a_strongswan_peer_brings_the_tunnel_up_and_pings_through_it") {
        return;
    }
    let (lab, applied) = gateway_lab("vpn-gateway");
    let dut = lab.dut_netns().to_string();
    let peer = applied.vpn_peer().unwrap().clone();
    assert_eq!(peer.suite, EspSuite::Aes128Gcm16, "the default suite");
    let (a, b) = (lab.port_a().clone(), lab.port_b().clone());
    // The tester ports carry no kernel address (linerate is the host
    // there): this test gives them the hosts' addresses, and puts the
    // protected network's host on B's loopback, behind the initiator.
    let b_addr = format!("{}/{}", b.ip, b.prefix_len);
    assert_eq!(
        ip(&["-n", &b.netns, "-br", "addr", "show", "dev", &b.ifname])
            .split_whitespace()
            .nth(2),
        None,
        "port B has no address of its own"
    );
    ip(&["-n", &b.netns, "addr", "add", &b_addr, "dev", &b.ifname]);
    let inner = format!("{}/32", peer.inner_address);
    ip(&["-n", &b.netns, "addr", "add", &inner, "dev", "lo"]);
    let a_addr = format!("{}/{}", a.ip, a.prefix_len);
    ip(&["-n", &a.netns, "addr", "add", &a_addr, "dev", &a.ifname]);
    let gw = a.gateway.to_string();
    ip(&["-n", &a.netns, "route", "add", "default", "via", &gw]);

    let psk = std::fs::read_to_string(&peer.psk_file).unwrap();
    let initiator = Initiator::start(&b.netns, &psk, peer.suite.name(), "aes256gcm16");

    // Another ESP suite is refused: the gateway offers only its own.
    let (ok, out, err) =
        initiator.try_swanctl(&["--initiate", "--child", "wrong", "--timeout", "15"]);
    assert!(!ok, "the gateway accepted aes256gcm16: {out} {err}");
    assert!(
        applied
            .ipsec_sa_counters()
            .unwrap()
            .iter()
            .all(|s| s.state != "INSTALLED"),
        "a CHILD_SA of another suite"
    );
    assert_eq!(route_dev(&dut, "198.19.1.2"), None);

    // Its own suite: up, and routed into the tunnel.
    initiator.swanctl(&["--initiate", "--child", "net", "--timeout", "15"]);
    let sas = applied.ipsec_sa_counters().unwrap();
    let installed: Vec<_> = sas.iter().filter(|s| s.state == "INSTALLED").collect();
    assert_eq!(installed.len(), 1, "{sas:?}");
    let sa = installed[0].clone();
    assert_eq!(sa.ike_sa, "linerate");
    assert_eq!(sa.suite, Some(EspSuite::Aes128Gcm16));
    assert!(sa.encap, "kernel-libipsec sends ESP in UDP");
    assert_eq!(sa.local_ts, ["198.18.0.0/24"]);
    assert_eq!(sa.remote_ts, ["198.19.1.0/24"]);
    assert_ne!(sa.spi_in, 0);
    assert_ne!(sa.spi_out, 0);
    assert_eq!((sa.packets_in, sa.packets_out), (0, 0));
    assert_eq!(route_dev(&dut, "198.19.1.2").as_deref(), Some("ipsec0"));
    // The peer's view of the same SA: its SPIs are the gateway's swapped.
    let peer_sas = initiator.swanctl(&["--list-sas"]);
    for needle in [
        format!("in  {:08x}", sa.spi_out),
        format!("out {:08x}", sa.spi_in),
        "TUNNEL-in-UDP, ESP:AES_GCM_16-128".to_string(),
    ] {
        assert!(peer_sas.contains(&needle), "{needle}: {peer_sas}");
    }

    // A ping from the LAN to the protected host: through the gateway's
    // ESP, the peer's, and back.
    let wan_before = applied.wan_counters().unwrap().unwrap();
    let echo = |count: usize, payload: usize| {
        udp_echo(&a.netns, a.ip, &b.netns, peer.inner_address, count, payload)
    };
    assert_eq!(echo(5, 56), 5, "UDP echoes through the tunnel");
    let after = applied.ipsec_sa_counters().unwrap();
    let sa_after = after.iter().find(|s| s.spi_in == sa.spi_in).unwrap();
    assert_eq!(
        sa_after.packets_out, 5,
        "echo requests encrypted: {sa_after:?}"
    );
    assert_eq!(
        sa_after.packets_in, 5,
        "echo replies decrypted: {sa_after:?}"
    );
    // 84-byte inner packets (20 IP + 8 UDP + 56).
    assert_eq!(sa_after.bytes_out, 5 * 84, "{sa_after:?}");
    assert_eq!(sa_after.bytes_in, 5 * 84, "{sa_after:?}");
    // swanctl reads the same counters.
    let raw = gateway_swanctl(&applied, &["--list-sas", "--raw"]);
    assert_eq!(raw_values(&raw, "packets-in"), [5], "{raw}");
    assert_eq!(raw_values(&raw, "packets-out"), [5], "{raw}");
    assert_eq!(raw_values(&raw, "bytes-in"), [420], "{raw}");
    // On the WAN link: the ESP packets, each 8 (SPI, sequence number) +
    // 8 (IV) + 84 padded with the 2-byte trailer to 88 (4-byte aligned) +
    // 16 (ICV) = 120 bytes of ESP, + 8 (UDP) + 20 (IP) + 14 (Ethernet) =
    // 162 bytes without FCS.
    let wan_after = applied.wan_counters().unwrap().unwrap();
    assert_eq!(wan_after.tx_packets - wan_before.tx_packets, 5);
    assert_eq!(wan_after.tx_bytes - wan_before.tx_bytes, 5 * 162);

    let seen = applied.verify_traffic(&lab).unwrap();
    assert!(
        seen[0].contains(&format!("SPI in {:#010x}", sa.spi_in))
            && seen[0].contains(
                "5 packets in (420 bytes), 5 out (420 bytes) (ESP aes128gcm16, UDP-encapsulated)"
            ),
        "{seen:?}"
    );
    assert!(seen[1].contains("routed into ipsec0 only"), "{seen:?}");

    // The inner MTU the tester is told: 1400-byte packets cross whole,
    // 1401-byte ones with DF set do not.
    let largest = peer.inner_mtu as usize - 28;
    assert_eq!(echo(1, largest), 1, "{}-byte packets", peer.inner_mtu);
    assert_eq!(
        echo(1, largest + 1),
        0,
        "{}-byte packets crossed",
        peer.inner_mtu + 1
    );

    // All down: the peer, then the gateway (charon, its key, its routes).
    drop(initiator);
    let pid = applied.data_path_pids()[0];
    let dir: PathBuf = peer.psk_file.parent().unwrap().to_path_buf();
    drop(applied);
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
    assert!(!dir.exists());
    assert_eq!(route_dev(&dut, "198.19.1.2"), None);
    drop(lab);
}
