//! Each scenario applied to a real lab, then checked with the kernel's own
//! tools, independently of the scenario code: rule counts with nft, route
//! counts with ip, NAT by the source address the receiver sees, the tunnel
//! by the WAN link's counters growing with the encapsulated size, XDP by
//! the kernel's forwarding counter standing still. Traffic comes from the
//! tester namespaces' kernels (given addresses for the test), as UDP
//! datagrams through the DUT. Root only; labs have unique names and are
//! removed on drop.

use linerate_lab::scenario::Scenario;
use linerate_lab::{check_environment, Lab, LabError};
use linerate_testkit::run_in_netns;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

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

fn unique() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}s{}",
        std::process::id() % 100_000,
        N.fetch_add(1, Ordering::Relaxed)
    )
}

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().expect(program);
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn in_ns(ns: &str, argv: &[&str]) -> String {
    let mut full = vec!["netns", "exec", ns];
    full.extend_from_slice(argv);
    run("ip", &full)
}

/// The rules of every chain in `ns`, as nft lists them.
fn nft_rule_count(ns: &str) -> usize {
    let out = in_ns(ns, &["nft", "-j", "list", "ruleset"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    v["nftables"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i.get("rule").is_some())
        .count()
}

/// Builds a lab and applies `spec`.
fn lab_with(spec: &str) -> (Lab, linerate_lab::scenario::Applied) {
    let scenario = Scenario::parse(spec).unwrap();
    let ring = scenario.ring(linerate_lab::DEFAULT_RING);
    let lab = Lab::up_with_ring(&unique(), ring).expect("lab up");
    let applied = scenario
        .apply(&lab)
        .unwrap_or_else(|e| panic!("{spec}: {e}"));
    (lab, applied)
}

/// Gives the tester namespaces kernel addresses for this test, sends
/// `count` UDP datagrams of `payload` bytes from A to B through the DUT and
/// returns how many arrived and the source address B saw.
fn send_udp(lab: &Lab, count: usize, payload: usize) -> (usize, Option<SocketAddrV4>) {
    let (a, b) = (lab.port_a().clone(), lab.port_b().clone());
    for p in [&a, &b] {
        let addr = format!("{}/{}", p.ip, p.prefix_len);
        run(
            "ip",
            &["-n", &p.netns, "addr", "add", &addr, "dev", &p.ifname],
        );
        let gw = p.gateway.to_string();
        run(
            "ip",
            &["-n", &p.netns, "route", "add", "default", "via", &gw],
        );
    }
    let b_ip = b.ip;
    let receiver = run_in_netns(&b.netns, move || {
        UdpSocket::bind(SocketAddrV4::new(b_ip, 7000)).unwrap()
    });
    receiver
        .set_read_timeout(Some(Duration::from_millis(1500)))
        .unwrap();
    let a_ip = a.ip;
    run_in_netns(&a.netns, move || {
        let s = UdpSocket::bind(SocketAddrV4::new(a_ip, 0)).unwrap();
        let data = vec![0x5au8; payload];
        for _ in 0..count {
            s.send_to(&data, SocketAddrV4::new(b_ip, 7000)).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
    });
    let mut buf = vec![0u8; 65536];
    let mut got = 0;
    let mut from = None;
    while let Ok((_, f)) = receiver.recv_from(&mut buf) {
        got += 1;
        if let std::net::SocketAddr::V4(v4) = f {
            from = Some(v4);
        }
    }
    (got, from)
}

/// Ip: ForwDatagrams of namespace `ns` (the kernel's forwarded packets).
fn forwarded_by_kernel(ns: &str) -> u64 {
    let snmp = in_ns(ns, &["cat", "/proc/net/snmp"]);
    let mut lines = snmp.lines().filter(|l| l.starts_with("Ip:"));
    let (names, values) = (lines.next().unwrap(), lines.next().unwrap());
    let i = names
        .split_whitespace()
        .position(|n| n == "ForwDatagrams")
        .unwrap();
    values.split_whitespace().nth(i).unwrap().parse().unwrap()
}

#[test]
fn acl_lines_are_all_loaded_and_every_packet_passes_them() {
    if !root("acl_lines_are_all_loaded_and_every_packet_passes_them") {
        return;
    }
    let (lab, applied) = lab_with("acl:12");
    // 12 non-matching lines + the permit.
    assert_eq!(nft_rule_count(lab.dut_netns()), 13);
    let (got, _) = send_udp(&lab, 40, 100);
    assert_eq!(got, 40, "the ACL dropped test traffic");
    let seen = applied.verify_traffic(&lab).unwrap();
    assert!(
        seen.iter().any(|s| s.contains("against all 12 rules")),
        "{seen:?}"
    );
    drop(applied);
}

#[test]
fn firewall_policies_are_loaded_with_conntrack() {
    if !root("firewall_policies_are_loaded_with_conntrack") {
        return;
    }
    let (lab, applied) = lab_with("firewall:50");
    // ct state check + 50 policies + permit.
    assert_eq!(nft_rule_count(lab.dut_netns()), 52);
    let (got, _) = send_udp(&lab, 20, 100);
    assert_eq!(got, 20);
    let conntrack = in_ns(lab.dut_netns(), &["cat", "/proc/net/nf_conntrack"]);
    assert!(
        conntrack.contains("src=198.18.0.2"),
        "the firewall tracked no connection: {conntrack}"
    );
    drop(applied);
}

#[test]
fn wan_lan_translates_the_source_address() {
    if !root("wan_lan_translates_the_source_address") {
        return;
    }
    let (lab, applied) = lab_with("wan-lan");
    let (got, from) = send_udp(&lab, 10, 100);
    assert_eq!(got, 10);
    // Tester B sees the DUT's WAN address, not tester A's: masqueraded.
    assert_eq!(from.unwrap().ip(), &Ipv4Addr::new(198, 19, 0, 1));
    let seen = applied.verify_traffic(&lab).unwrap();
    assert!(
        seen.iter().any(|s| s.contains("leaves as 198.19.0.1")),
        "{seen:?}"
    );
}

#[test]
fn routes_are_all_in_the_table_and_traffic_still_flows() {
    if !root("routes_are_all_in_the_table_and_traffic_still_flows") {
        return;
    }
    let (lab, _applied) = lab_with("routes:20000");
    let table = run(
        "ip",
        &["-n", lab.dut_netns(), "route", "show", "proto", "static"],
    );
    assert_eq!(table.lines().count(), 20000);
    // Tester B's address is covered by a host route of the scenario.
    let route = run(
        "ip",
        &["-n", lab.dut_netns(), "route", "show", "198.19.0.2/32"],
    );
    assert!(route.contains("198.19.0.2 via 198.19.0.2"), "{route}");
    let (got, _) = send_udp(&lab, 10, 100);
    assert_eq!(got, 10);
}

#[test]
fn vxlan_tunnel_carries_the_traffic_encapsulated() {
    if !root("vxlan_tunnel_carries_the_traffic_encapsulated") {
        return;
    }
    let (lab, applied) = lab_with("tunnel:vxlan");
    let before = applied.wan_counters().unwrap().unwrap();
    let (got, _) = send_udp(&lab, 50, 100);
    assert_eq!(got, 50, "the tunnel lost datagrams");
    let after = applied.wan_counters().unwrap().unwrap();
    let packets = after.tx_packets - before.tx_packets;
    let bytes = after.tx_bytes - before.tx_bytes;
    assert_eq!(packets, 50, "WAN packets");
    // Inner frame 14 + 20 + 8 + 100 = 142 bytes, plus VXLAN's 50.
    assert_eq!(bytes, 50 * (142 + 50), "WAN bytes");
    // Tester B now hangs off the second DUT.
    let dut2 = format!("{}2", lab.dut_netns());
    let links = run("ip", &["-n", &dut2, "-br", "link"]);
    assert!(links.contains("dut-b") && links.contains("wan2"), "{links}");
    drop(applied);
    drop(lab);
    assert!(
        !std::path::Path::new("/run/netns").join(&dut2).exists(),
        "{dut2} left behind"
    );
}

#[test]
fn xdp_router_forwards_without_the_kernel_stack() {
    if !root("xdp_router_forwards_without_the_kernel_stack") {
        return;
    }
    let (lab, applied) = lab_with("xdp-router");
    // The tester kernel must fill in UDP checksums itself: with veth's
    // checksum offload the frame leaves with a partial checksum, which an
    // XDP redirect (unlike the kernel's forwarding) never completes.
    // (linerate's own frames always carry full checksums.)
    let a = lab.port_a().clone();
    in_ns(&a.netns, &["ethtool", "-K", &a.ifname, "tx", "off"]);
    let kernel_before = forwarded_by_kernel(lab.dut_netns());
    let (got, _) = send_udp(&lab, 30, 100);
    assert_eq!(got, 30, "the XDP router lost datagrams");
    // The kernel's IP forwarding never saw them.
    assert_eq!(forwarded_by_kernel(lab.dut_netns()), kernel_before);
    let seen = applied.verify_traffic(&lab).unwrap();
    assert!(seen[0].contains("forwarded"), "{seen:?}");
    drop(applied);
}

#[test]
fn wireguard_tunnel_carries_the_traffic() {
    if !root("wireguard_tunnel_carries_the_traffic") {
        return;
    }
    let lab = Lab::up(&unique()).expect("lab up");
    let applied = match Scenario::parse("tunnel:wireguard").unwrap().apply(&lab) {
        Ok(a) => a,
        Err(LabError::Unavailable { reason, .. }) => {
            skip(&format!("(no WireGuard here): {reason}"));
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let before = applied.wan_counters().unwrap().unwrap();
    let (got, _) = send_udp(&lab, 20, 100);
    assert_eq!(got, 20, "the tunnel lost datagrams");
    let after = applied.wan_counters().unwrap().unwrap();
    let packets = after.tx_packets - before.tx_packets;
    // 20 data packets, maybe with handshake messages.
    assert!(packets >= 20, "WAN packets {packets}");
    assert!(applied.data_path.as_deref().unwrap().contains("WireGuard"));
}

#[test]
fn gre_builds_or_says_why_not() {
    if !root("gre_builds_or_says_why_not") {
        return;
    }
    let lab = Lab::up(&unique()).expect("lab up");
    match Scenario::parse("tunnel:gre").unwrap().apply(&lab) {
        Ok(applied) => {
            let (got, _) = send_udp(&lab, 10, 100);
            assert_eq!(got, 10);
            drop(applied);
        }
        Err(e @ LabError::Unavailable { .. }) => {
            let text = e.to_string();
            assert!(text.contains("GRE") && text.contains("kernel"), "{text}");
            assert!(!text.contains('\n'));
        }
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn ipsec_tunnel_carries_the_traffic_in_esp() {
    if !root("ipsec_tunnel_carries_the_traffic_in_esp") {
        return;
    }
    let lab = Lab::up(&unique()).expect("lab up");
    let applied = match Scenario::parse("tunnel:ipsec").unwrap().apply(&lab) {
        Ok(a) => a,
        Err(LabError::Unavailable { reason, .. }) => {
            skip(&format!("(no strongSwan here): {reason}"));
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let data_path = applied.data_path.clone().unwrap();
    assert!(data_path.contains("kernel-libipsec"), "{data_path}");
    assert_eq!(applied.data_path_pids().len(), 2, "two charon daemons");
    let before = applied.wan_counters().unwrap().unwrap();
    let (got, _) = send_udp(&lab, 20, 100);
    assert_eq!(got, 20, "the tunnel lost datagrams");
    let after = applied.wan_counters().unwrap().unwrap();
    let packets = after.tx_packets - before.tx_packets;
    let bytes = after.tx_bytes - before.tx_bytes;
    // A 128-byte IP packet in ESP (AES-CBC: IV 16, padded to 144 with the
    // 2-byte trailer; SHA256 ICV 16; header 8), new IP header 20, UDP 8
    // (NAT-T), Ethernet 14: 226 bytes on the wire without FCS.
    assert!(packets >= 20, "WAN packets {packets}");
    if packets == 20 {
        assert_eq!(bytes, 20 * 226, "WAN bytes");
    }
    // charon's directories: private (root only, the key file too), and
    // nowhere else (the temporary directory once held them, world-readable).
    let dirs_of = |base: &std::path::Path| -> Vec<std::path::PathBuf> {
        std::fs::read_dir(base)
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter(|e| e.file_name().to_string_lossy().contains(lab.name()))
                    .map(|e| e.path())
                    .collect()
            })
            .unwrap_or_default()
    };
    let run_dir = std::path::Path::new("/run/linerate");
    assert_eq!(
        dirs_of(&std::env::temp_dir()),
        Vec::<std::path::PathBuf>::new()
    );
    let dirs = dirs_of(run_dir);
    assert_eq!(dirs.len(), 2, "one charon directory per DUT: {dirs:?}");
    let mode = |p: &std::path::Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
    };
    for dir in &dirs {
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
        for file in ["swanctl.conf", "strongswan.conf"] {
            assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
        }
        // charon's own files land there too (the directory is its /run).
        assert!(dir.join("charon.vici").exists() && dir.join("charon.pid").exists());
    }
    drop(applied);
    assert_eq!(
        dirs_of(run_dir).len(),
        0,
        "charon's directories left behind"
    );
}

/// A stop asked for while a scenario is applied ends it before its next
/// part: it returns `Interrupted`, the parts after the stop are never
/// loaded, and the lab's removal takes the rest (the nftables tables go
/// with the DUT's namespace).
#[test]
fn a_stop_while_a_scenario_applies_ends_it_before_the_next_part() {
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;
    let test = "a_stop_while_a_scenario_applies_ends_it_before_the_next_part";
    if !root(test) {
        return;
    }
    let scenario = Scenario::parse("wan-lan+acl:20000+routes:100000").unwrap();
    let lab = Lab::up(&unique()).expect("lab up");
    let (name, dut) = (lab.name().to_string(), lab.dut_netns().to_string());
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let (result, asked, returned) = std::thread::scope(|s| {
        let asker = s.spawn(|| {
            // wan-lan's table is there: the stop comes as the ACL's
            // 20,000 rules load (or just before), routes:N still to come.
            while !in_ns(&dut, &["nft", "list", "tables"]).contains("linerate_nat")
                && started.elapsed() < Duration::from_secs(20)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            stop.store(true, Ordering::SeqCst);
            started.elapsed()
        });
        let result = scenario.apply_until(&lab, &|| stop.load(Ordering::SeqCst));
        (result, asker.join().unwrap(), started.elapsed())
    });
    eprintln!("asked {asked:?} in, returned {returned:?} in");
    match &result {
        Err(LabError::Interrupted { name: n }) => assert_eq!(n, &name),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("applied to its end ({returned:?}) though asked to stop at {asked:?}"),
    }
    let routes = run("ip", &["-n", &dut, "route", "show", "proto", "static"]);
    assert_eq!(routes.lines().count(), 0, "routes:N loaded after the stop");
    drop(result);
    drop(lab);
    let left: Vec<String> = std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|ns| ns.starts_with(&format!("lr-{name}-")))
        .collect();
    assert!(left.is_empty(), "{left:?} left");
}

/// Whether a child of this process runs program `comm` (e.g. "nft").
fn child_runs(comm: &str) -> bool {
    let tasks = std::fs::read_dir("/proc/self/task").into_iter().flatten();
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|c| c.split_whitespace().map(str::to_string).collect::<Vec<_>>())
        .any(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm)
        })
}

/// A stop asked for during one long step of a scenario (loading 30,000
/// ACL lines and reading them back) ends that step's command: the apply
/// returns `Interrupted` soon after, not when the step would have ended.
#[test]
fn a_stop_during_a_long_step_ends_its_command() {
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;
    let test = "a_stop_during_a_long_step_ends_its_command";
    if !root(test) {
        return;
    }
    let scenario = Scenario::parse("acl:30000").unwrap();
    // The whole step here, for scale.
    let whole = {
        let lab = Lab::up(&unique()).expect("lab up");
        let started = Instant::now();
        let _applied = scenario.apply(&lab).expect("acl:30000");
        started.elapsed()
    };
    let lab = Lab::up(&unique()).expect("lab up");
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let (result, asked, returned) = std::thread::scope(|s| {
        let asker = s.spawn(|| {
            // nft runs: loading the rules (or, later, listing them).
            while !child_runs("nft") && started.elapsed() < Duration::from_secs(60) {
                std::thread::sleep(Duration::from_millis(1));
            }
            stop.store(true, Ordering::SeqCst);
            started.elapsed()
        });
        let result = scenario.apply_until(&lab, &|| stop.load(Ordering::SeqCst));
        (result, asker.join().unwrap(), started.elapsed())
    });
    eprintln!("asked {asked:?} in, returned {returned:?} in (the whole step {whole:?})");
    match &result {
        Err(LabError::Interrupted { name }) => assert_eq!(name, lab.name()),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("applied to its end ({returned:?}) though asked to stop at {asked:?}"),
    }
    assert!(
        returned.saturating_sub(asked) < whole / 4,
        "returned {:?} after the stop (the whole step {whole:?})",
        returned.saturating_sub(asked)
    );
    assert!(!child_runs("nft"), "nft still runs");
}
