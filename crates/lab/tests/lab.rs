//! Root integration tests: they build real labs with unique names and only
//! ever touch namespaces they made. Without root each test prints
//! "SKIPPED (needs root ...)" and passes; with `LINERATE_REQUIRE_ALL=1`
//! (scripts/test.sh) it fails instead.

use linerate_lab::{check_environment, down_lab, down_matching, status, Lab, LabError};
use linerate_testkit::run_in_netns;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::path::Path;
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

/// True when the test can run; otherwise says loudly why it is skipped.
fn root() -> bool {
    match check_environment() {
        Ok(()) => true,
        Err(e) => {
            skip(&format!("(needs root and iproute2): {e}"));
            false
        }
    }
}

/// A lab name unique to this process and call: t<pid><n>.
fn unique(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "t{}{tag}{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    assert!(name.len() <= 12, "{name}");
    name
}

fn netns_exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

fn all_netns(name: &str) -> [String; 3] {
    [
        format!("lr-{name}-a"),
        format!("lr-{name}-b"),
        format!("lr-{name}-dut"),
    ]
}

fn ip(args: &[&str]) -> String {
    let out = Command::new("/usr/sbin/ip")
        .args(args)
        .output()
        .expect("running ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn json(args: &[&str]) -> serde_json::Value {
    let mut full = vec!["-j"];
    full.extend_from_slice(args);
    serde_json::from_str(&ip(&full)).expect("ip JSON")
}

/// Removes lab `.0` when dropped, also when the test panics; for labs no
/// `Lab` owns (kept ones, or made by hand).
struct Cleanup(String);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = down_lab(&self.0);
    }
}

/// Removes namespaces starting with `.0` when dropped.
struct Strays(String);

impl Drop for Strays {
    fn drop(&mut self) {
        let _ = down_matching(&self.0);
    }
}

fn nproc() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn up_builds_the_topology_and_down_removes_it() {
    if !root() {
        return;
    }
    let name = unique("u");
    let mut lab = Lab::up(&name).expect("lab up");
    assert_eq!(lab.name(), name);
    for ns in all_netns(&name) {
        assert!(netns_exists(&ns), "{ns} missing");
    }
    assert_eq!(lab.dut_netns(), format!("lr-{name}-dut"));

    let (a, b) = (lab.port_a().clone(), lab.port_b().clone());
    assert_eq!(
        (a.netns.as_str(), a.ifname.as_str()),
        (all_netns(&name)[0].as_str(), "a0")
    );
    assert_eq!(
        (b.netns.as_str(), b.ifname.as_str()),
        (all_netns(&name)[1].as_str(), "b0")
    );
    assert_eq!(a.ip, Ipv4Addr::new(198, 18, 0, 2));
    assert_eq!(a.gateway, Ipv4Addr::new(198, 18, 0, 1));
    assert_eq!(b.ip, Ipv4Addr::new(198, 19, 0, 2));
    assert_eq!(b.gateway, Ipv4Addr::new(198, 19, 0, 1));
    assert_eq!((a.prefix_len, b.prefix_len), (24, 24));

    // Tester ports: up, MTU 9000, the MAC reported, no address at all.
    for port in [&a, &b] {
        let link = &json(&["-n", &port.netns, "link", "show", "dev", &port.ifname])[0];
        assert_eq!(link["mtu"], 9000);
        assert!(link["flags"].as_array().unwrap().iter().any(|f| f == "UP"));
        let mac: Vec<String> = port.mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(link["address"], mac.join(":"));
        let addrs = &json(&["-n", &port.netns, "addr", "show", "dev", &port.ifname])[0];
        assert_eq!(addrs["addr_info"].as_array().map_or(0, |a| a.len()), 0);
        let v6 = ip(&[
            "netns",
            "exec",
            &port.netns,
            "cat",
            "/proc/sys/net/ipv6/conf/all/disable_ipv6",
        ]);
        assert_eq!(v6.trim(), "1");
    }

    // DUT: forwarding on, rp_filter off, both subnets routed, addresses
    // and permanent neighbours for both tester hosts, MTU 9000.
    assert_eq!(
        lab.dut_exec(&["cat", "/proc/sys/net/ipv4/ip_forward"])
            .unwrap()
            .trim(),
        "1"
    );
    assert_eq!(
        lab.dut_exec(&["cat", "/proc/sys/net/ipv4/conf/all/rp_filter"])
            .unwrap()
            .trim(),
        "0"
    );
    let dut = lab.dut_netns().to_string();
    let routes = json(&["-n", &dut, "route", "show"]);
    let dsts: Vec<&str> = routes
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["dst"].as_str())
        .collect();
    assert!(
        dsts.contains(&"198.18.0.0/24") && dsts.contains(&"198.19.0.0/24"),
        "{dsts:?}"
    );
    for (port, ifname, addr) in [(&a, "dut-a", "198.18.0.1"), (&b, "dut-b", "198.19.0.1")] {
        let link = &json(&["-n", &dut, "addr", "show", "dev", ifname])[0];
        assert_eq!(link["mtu"], 9000);
        assert_eq!(link["addr_info"][0]["local"], addr);
        let neigh = json(&[
            "-n",
            &dut,
            "neigh",
            "show",
            "dev",
            ifname,
            "nud",
            "permanent",
        ]);
        let entry = neigh
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["dst"] == port.ip.to_string())
            .unwrap_or_else(|| panic!("no permanent neighbour for {} on {ifname}", port.ip));
        let mac: Vec<String> = port.mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(entry["lladdr"], mac.join(":"));
    }
    // No veth leaked into the root namespace.
    let root_veths = json(&["link", "show", "type", "veth"]);
    for l in root_veths.as_array().unwrap() {
        let n = l["ifname"].as_str().unwrap_or_default();
        assert!(
            !["a0", "b0", "dut-a", "dut-b"].contains(&n),
            "{n} in the root namespace"
        );
    }

    // Placement: on >= 2 CPUs every crossing has a deep queue: the DUT
    // ports' NAPI (where the NIC queue's program fills the cpumap queue)
    // is threaded and pinned to the tester's CPU, the queue drains on the
    // DUT's, and the tester ports steer their receive to the tester's CPU.
    let p = lab.placement().clone();
    eprintln!("placement: {p:?}");
    if nproc() >= 2 {
        assert!(!p.shared_core, "{}", p.note);
        assert_eq!(p.ring, linerate_lab::DEFAULT_RING);
        let dut_cpu = *p.dut_cpus.first().unwrap();
        assert_eq!(dut_cpu, nproc() - 1);
        assert!(!p.tester_cpus.contains(&dut_cpu));
        // As /proc's Cpus_allowed_list writes a single CPU.
        let one_tester = match p.tester_cpus[..] {
            [c] => Some(c.to_string()),
            _ => None,
        };
        for ifname in ["dut-a", "dut-b"] {
            let threaded = lab
                .dut_exec(&["cat", &format!("/sys/class/net/{ifname}/threaded")])
                .unwrap();
            assert_eq!(threaded.trim(), "1", "{ifname}");
            // Its NAPI thread(s) exist and may run only on the tester's CPUs.
            let threads = napi_threads(ifname);
            assert!(!threads.is_empty(), "no napi/{ifname}-* thread");
            for (pid, allowed) in threads {
                assert_ne!(allowed, dut_cpu.to_string(), "pid {pid}");
                if let Some(t) = &one_tester {
                    assert_eq!(&allowed, t, "pid {pid}");
                }
            }
            let info = lab
                .dut_exec(&["ip", "-d", "-j", "link", "show", "dev", ifname])
                .unwrap();
            assert!(
                info.contains("lr_nic_rx"),
                "no NIC queue on {ifname}: {info}"
            );
        }
        assert_eq!(
            std::fs::read_to_string("/proc/sys/net/core/netdev_max_backlog")
                .unwrap()
                .trim(),
            linerate_lab::DEFAULT_RING.to_string()
        );
        assert!(
            p.note
                .starts_with(&format!("DUT forwarding on CPU {dut_cpu}")),
            "{}",
            p.note
        );
    } else {
        assert!(p.shared_core);
    }

    lab.down().expect("down");
    for ns in all_netns(&name) {
        assert!(!netns_exists(&ns), "{ns} left behind");
    }
    assert!(!Lab::exists(&name));
    lab.down().expect("second down is fine");
}

/// (pid, Cpus_allowed_list) of the threads named napi/<ifname>-<id>.
fn napi_threads(ifname: &str) -> Vec<(i32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim_end().starts_with(&format!("napi/{ifname}-")) {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            if let Some(line) = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
                found.push((
                    pid,
                    line.split_whitespace().nth(1).unwrap_or("").to_string(),
                ));
            }
        }
    }
    found
}

/// Times the napi/<ifname>-* threads were scheduled in (from schedstat).
fn napi_runs(ifname: &str) -> u64 {
    napi_threads(ifname)
        .iter()
        .filter_map(|(pid, _)| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).ok()?;
            stat.split_whitespace().nth(2)?.parse::<u64>().ok()
        })
        .sum()
}

#[test]
fn dut_forwards_between_the_tester_subnets() {
    if !root() {
        return;
    }
    let name = unique("f");
    let lab = Lab::up(&name).expect("lab up");
    let (a, b) = (lab.port_a().clone(), lab.port_b().clone());
    // For this check only, let the tester kernels be the hosts: address and
    // default route through the DUT. (linerate does this in user space.)
    for p in [&a, &b] {
        ip(&[
            "-n",
            &p.netns,
            "addr",
            "add",
            &format!("{}/{}", p.ip, p.prefix_len),
            "dev",
            &p.ifname,
        ]);
        ip(&[
            "-n",
            &p.netns,
            "route",
            "add",
            "default",
            "via",
            &p.gateway.to_string(),
        ]);
    }
    let b_ip = b.ip;
    let receiver = run_in_netns(&b.netns, move || {
        UdpSocket::bind(SocketAddrV4::new(b_ip, 7000)).unwrap()
    });
    receiver
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    let a_ip = a.ip;
    let napi_runs_before = napi_runs("dut-a");
    let tester_cpus = lab.placement().tester_cpus.clone();
    let sent = run_in_netns(&a.netns, move || {
        // Send from a tester CPU, as linerate does.
        let mut set = nix::sched::CpuSet::new();
        set.set(tester_cpus[0]).unwrap();
        nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set).unwrap();
        let s = UdpSocket::bind(SocketAddrV4::new(a_ip, 0)).unwrap();
        for _ in 0..100 {
            s.send_to(b"linerate", SocketAddrV4::new(b_ip, 7000))
                .unwrap();
            std::thread::sleep(Duration::from_millis(1));
        }
        s.local_addr().unwrap()
    });
    let mut buf = [0u8; 64];
    let (n, from) = receiver
        .recv_from(&mut buf)
        .expect("datagram forwarded by the DUT");
    assert_eq!(&buf[..n], b"linerate");
    assert_eq!(from, sent, "source address unchanged: routed, not NATed");
    if !lab.placement().shared_core {
        // The frames went through dut-a's NAPI thread (on the DUT CPU), not
        // through netif_rx on the sender's CPU. (Other tests' labs have
        // napi/dut-a threads too, but no traffic.)
        let after = napi_runs("dut-a");
        assert!(
            after > napi_runs_before,
            "napi/dut-a threads did not run: {napi_runs_before} -> {after}"
        );
    }
    drop(lab);
    assert!(!Lab::exists(&name));
}

#[test]
fn drop_removes_the_lab_even_on_panic() {
    if !root() {
        return;
    }
    let name = unique("d");
    {
        let _lab = Lab::up(&name).expect("lab up");
        assert!(Lab::exists(&name));
    }
    assert!(!Lab::exists(&name), "drop left the lab");

    let name = unique("p");
    let n2 = name.clone();
    let result = std::panic::catch_unwind(move || {
        let _lab = Lab::up(&n2).expect("lab up");
        panic!("test body fails with the lab up");
    });
    assert!(result.is_err());
    for ns in all_netns(&name) {
        assert!(!netns_exists(&ns), "{ns} left after a panic");
    }
}

#[test]
fn up_twice_fails_cleanly_and_keeps_the_first() {
    if !root() {
        return;
    }
    let name = unique("x");
    let first = Lab::up(&name).expect("lab up");
    let err = Lab::up(&name).expect_err("second up must fail");
    assert!(matches!(err, LabError::Exists(_)), "{err}");
    // The advice names this lab: a bare 'lab down' would be every lab's.
    assert!(
        err.to_string()
            .contains(&format!("linerate lab down --lab-name {name}")),
        "{err}"
    );
    for ns in all_netns(&name) {
        assert!(netns_exists(&ns), "{ns} removed by the failed up");
    }
    let again = Lab::attach(&name).expect("first lab still intact");
    assert_eq!(again.port_a(), first.port_a());
    assert_eq!(again.port_b(), first.port_b());
}

#[test]
fn attach_opens_a_kept_lab_and_leaves_it_on_drop() {
    if !root() {
        return;
    }
    let name = unique("k");
    let lab = Lab::up(&name).expect("lab up");
    let (a, b, placement) = (
        lab.port_a().clone(),
        lab.port_b().clone(),
        lab.placement().clone(),
    );
    lab.keep();
    // A kept lab is no longer removed by Lab's drop: remove it if this test fails.
    let _cleanup = Cleanup(name.clone());
    assert!(Lab::exists(&name), "keep() must leave the lab");

    {
        let attached = Lab::attach(&name).expect("attach");
        assert_eq!(attached.port_a(), &a);
        assert_eq!(attached.port_b(), &b);
        assert_eq!(attached.dut_netns(), format!("lr-{name}-dut"));
        // The placement read back agrees with the one set up.
        assert_eq!(attached.placement().shared_core, placement.shared_core);
        assert_eq!(attached.placement().dut_cpus, placement.dut_cpus);
        if !placement.shared_core {
            assert_eq!(attached.placement().note, placement.note);
        }
    }
    assert!(Lab::exists(&name), "dropping an attached lab must leave it");

    // Status reports it.
    let labs = status().expect("status");
    let s = labs.iter().find(|s| s.name == name).expect("lab in status");
    assert_eq!(s.namespaces.len(), 3);
    assert!(s.missing.is_empty());
    assert_eq!(s.ip_forward, Some(1));
    assert_eq!(s.routes, Some(2));
    assert_eq!(s.permanent_neighbours, Some(2));
    assert_eq!(s.ports.len(), 4);
    assert!(
        s.ports
            .iter()
            .all(|p| p.state == "UP" && p.mtu == Some(9000)),
        "{s}"
    );
    let text = s.to_string();
    eprintln!("{text}");
    assert!(
        text.starts_with(&format!("lab {name} (complete)")),
        "{text}"
    );

    let mut attached = Lab::attach(&name).expect("attach");
    attached.down().expect("down of an attached lab");
    assert!(!Lab::exists(&name));
}

#[test]
fn down_lab_removes_a_half_made_lab() {
    if !root() {
        return;
    }
    let name = unique("h");
    let _cleanup = Cleanup(name.clone());
    let dut = format!("lr-{name}-dut");
    ip(&["netns", "add", &dut]);
    // Half a lab: attach refuses it, up refuses the name, down_lab removes it.
    assert!(matches!(Lab::attach(&name), Err(LabError::NotFound { .. })));
    assert!(matches!(Lab::up(&name), Err(LabError::Exists(_))));
    assert_eq!(down_lab(&name).unwrap(), vec![dut.clone()]);
    assert!(!netns_exists(&dut));
    assert_eq!(down_lab(&name).unwrap(), Vec::<String>::new());
}

#[test]
fn attach_of_a_missing_lab_fails() {
    if !root() {
        return;
    }
    let name = unique("m");
    let err = Lab::attach(&name).expect_err("no such lab");
    assert!(matches!(err, LabError::NotFound { .. }), "{err}");
    assert!(err.to_string().contains("linerate lab up"), "{err}");
    assert!(!Lab::exists(&name));
    // Nothing of it made on the host: not even the lock file.
    let lock = format!("/run/linerate/lab-{name}.lock");
    let left = std::path::Path::new(&lock).exists();
    let _ = std::fs::remove_file(&lock);
    assert!(!left, "{lock} left behind");
}

#[test]
fn down_matching_removes_stray_namespaces() {
    if !root() {
        return;
    }
    // As after a crash: namespaces with the prefix but no lab object.
    let prefix = format!("lr-{}-", unique("s"));
    let strays = [format!("{prefix}one"), format!("{prefix}two")];
    let _cleanup = Strays(prefix.clone());
    for ns in &strays {
        ip(&["netns", "add", ns]);
    }
    let mut removed = down_matching(&prefix).expect("down_matching");
    removed.sort();
    assert_eq!(removed, strays.to_vec());
    for ns in &strays {
        assert!(!netns_exists(ns));
    }
    assert_eq!(down_matching(&prefix).unwrap(), Vec::<String>::new());
}

#[test]
fn errors_are_one_line_with_a_fix() {
    let err = Lab::up("Bad Name").expect_err("invalid name");
    assert!(matches!(err, LabError::InvalidName(_)));
    let text = err.to_string();
    assert!(!text.contains('\n') && text.contains("a-z"), "{text}");
}

/// Packets the DUT sent out of `ifname` so far.
fn tx_packets(dut_ns: &str, ifname: &str) -> u64 {
    let v = json(&["-s", "-n", dut_ns, "link", "show", "dev", ifname]);
    v[0]["stats64"]["tx"]["packets"]
        .as_u64()
        .expect("tx packets")
}

#[test]
fn vlan_ports_refuse_untagged_frames_and_ipv6_vlan_layouts_are_undone() {
    if !root() {
        return;
    }
    let name = unique("v");
    let lab = Lab::up(&name).expect("lab up");
    let (a, b) = (lab.port_a().clone(), lab.port_b().clone());
    // The tester kernels as plain (untagged) IPv4 hosts, as in the test above.
    for p in [&a, &b] {
        let addr = format!("{}/{}", p.ip, p.prefix_len);
        ip(&["-n", &p.netns, "addr", "add", &addr, "dev", &p.ifname]);
        let gw = p.gateway.to_string();
        ip(&["-n", &p.netns, "route", "add", "default", "via", &gw]);
    }
    let (a_ip, b_ip) = (a.ip, b.ip);
    let send = move || {
        let s = UdpSocket::bind(SocketAddrV4::new(a_ip, 0)).unwrap();
        for _ in 0..20 {
            let _ = s.send_to(b"linerate", SocketAddrV4::new(b_ip, 7000));
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let dut = lab.dut_netns().to_string();
    {
        let layout = lab.route_layout(true, Some(100)).expect("IPv6 + VLAN 100");
        let routing = layout.routing_interfaces().clone();
        let v6 = ip(&["-n", &dut, "-6", "addr", "show", "dev", &routing[0]]);
        assert!(v6.contains("2001:2::1/64"), "{v6}");
    }
    {
        // VLAN only: with IPv6 on, the router sends its own ICMPv6 (MLD).
        let layout = lab.route_layout(false, Some(100)).expect("VLAN 100");
        let routing = layout.routing_interfaces().clone();
        // Untagged frames (the tester kernel's ARP and datagrams) do not
        // get through the router's VLAN 100 ports: nothing is forwarded.
        let before = tx_packets(&dut, &routing[1]);
        run_in_netns(&a.netns, send);
        assert_eq!(
            tx_packets(&dut, &routing[1]),
            before,
            "{}: the router forwarded untagged frames",
            layout.describe()
        );
    }
    // Undone: the router routes untagged IPv4 again, without IPv6.
    let addrs = ip(&["-n", &dut, "-br", "addr"]);
    assert!(
        !addrs.contains("2001:2:") && !addrs.contains(".100"),
        "{addrs}"
    );
    let receiver = run_in_netns(&b.netns, move || {
        UdpSocket::bind(SocketAddrV4::new(b_ip, 7000)).unwrap()
    });
    receiver
        .set_read_timeout(Some(Duration::from_secs(3)))
        .unwrap();
    run_in_netns(&a.netns, send);
    let mut buf = [0u8; 64];
    let (n, _) = receiver.recv_from(&mut buf).expect("forwarded after undo");
    assert_eq!(&buf[..n], b"linerate");
    drop(lab);
    assert!(!Lab::exists(&name));
}

/// Two labs of different depths: each, attached again later, says its own
/// depth (its NIC queue's), not the machine's backlog setting, which the
/// deeper lab raised for both.
#[test]
fn an_attached_lab_tells_its_own_ring_depth() {
    if !root() || nproc() < 2 {
        return;
    }
    let (shallow, deep) = (unique("r"), unique("r"));
    let _cleanup = (Cleanup(shallow.clone()), Cleanup(deep.clone()));
    let first = Lab::up_with_ring(&shallow, 1024).expect("lab up --ring 1024");
    assert_eq!(first.placement().ring, 1024, "{:?}", first.placement());
    let second = Lab::up_with_ring(&deep, 8192).expect("lab up --ring 8192");
    assert_eq!(second.placement().ring, 8192, "{:?}", second.placement());
    for (name, ring) in [(&shallow, 1024), (&deep, 8192)] {
        let again = Lab::attach(name).expect("attach");
        assert_eq!(
            again.placement().ring,
            ring,
            "{name}: {:?}",
            again.placement()
        );
    }
    drop((first, second));
}

/// Whether interface `ifname` is in namespace `ns` (false while `ns` is not).
fn link_exists(ns: &str, ifname: &str) -> bool {
    Command::new("/usr/sbin/ip")
        .args(["-n", ns, "link", "show", "dev", ifname])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// BPF objects pinned on the machine (the lab pins none: its programs go
/// with the interfaces they are attached to).
fn pinned_bpf() -> std::collections::BTreeSet<String> {
    std::fs::read_dir("/sys/fs/bpf")
        .map(|d| {
            d.filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
                .collect()
        })
        .unwrap_or_default()
}

/// Fails when anything of lab `name` is left: a namespace, one of its
/// veths in the root namespace, a BPF object pinned since `pinned`.
fn assert_nothing_left(name: &str, pinned: &std::collections::BTreeSet<String>, when: &str) {
    let prefix = format!("lr-{name}-");
    let left: Vec<String> = std::fs::read_dir("/run/netns")
        .into_iter()
        .flatten()
        .filter_map(|e| Some(e.ok()?.file_name().to_string_lossy().into_owned()))
        .filter(|ns| ns.starts_with(&prefix))
        .collect();
    assert!(left.is_empty(), "stopped when {when}: {left:?} left");
    let veths = json(&["link", "show", "type", "veth"]);
    let ours: Vec<&str> = veths
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|l| l["ifname"].as_str())
        .filter(|i| ["a0", "b0", "dut-a", "dut-b"].contains(i) || i.starts_with("lr"))
        .collect();
    assert!(
        ours.is_empty(),
        "stopped when {when}: veths {ours:?} left in the root namespace"
    );
    assert_eq!(&pinned_bpf(), pinned, "stopped when {when}: BPF pinned");
}

/// When the stop comes, given the lab's name, the time since its build
/// started and how long a whole build takes.
type Moment = fn(&str, Duration, Duration) -> bool;

/// A stop asked for while a lab builds ends the build at its next step:
/// it returns `Interrupted`, soon after the stop and well before a whole
/// build would have ended, and nothing of the lab is left.
#[test]
fn a_stop_while_up_builds_ends_the_build_at_its_next_step() {
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;
    if !root() {
        return;
    }
    let pinned = pinned_bpf();
    // A whole build here, for scale (about 0.2 s on a 2-core VM).
    let whole = {
        let name = unique("w");
        let _cleanup = Cleanup(name.clone());
        let started = Instant::now();
        let _lab = Lab::up(&name).expect("lab up");
        started.elapsed()
    };
    let moments: [(&str, Moment); 4] = [
        ("the first namespace appeared", |name, _, _| {
            netns_exists(&format!("lr-{name}-a"))
        }),
        ("the DUT's namespace appeared", |name, _, _| {
            netns_exists(&format!("lr-{name}-dut"))
        }),
        ("port A's link appeared", |name, _, _| {
            link_exists(&format!("lr-{name}-dut"), "dut-a")
        }),
        ("half a whole build had passed", |_, since, whole| {
            since >= whole / 2
        }),
    ];
    for (when, reached) in moments {
        let name = unique("s");
        // Removes the lab if the build ran on (the test fails then).
        let _cleanup = Cleanup(name.clone());
        let stop = AtomicBool::new(false);
        let started = Instant::now();
        let (result, returned, asked) = std::thread::scope(|s| {
            let asker = s.spawn(|| {
                while !reached(&name, started.elapsed(), whole)
                    && started.elapsed() < Duration::from_secs(20)
                {
                    std::thread::sleep(Duration::from_millis(1));
                }
                stop.store(true, Ordering::SeqCst);
                started.elapsed()
            });
            let result = Lab::up_until(&name, linerate_lab::DEFAULT_RING, &|| {
                stop.load(Ordering::SeqCst)
            });
            let returned = started.elapsed();
            (result, returned, asker.join().unwrap())
        });
        match &result {
            Err(LabError::Interrupted { name: n }) => assert_eq!(n, &name),
            Err(e) => panic!("stopped when {when}: another error: {e}"),
            Ok(_) => panic!(
                "stopped when {when} ({asked:?} in): the build ran to its end ({returned:?}; a whole build {whole:?})"
            ),
        }
        eprintln!(
            "stopped when {when}: asked {asked:?} in, returned {returned:?} in (a whole build {whole:?})"
        );
        // The rest of a step and the removal of what was made, not the
        // rest of the build.
        assert!(
            returned.saturating_sub(asked) < whole / 2,
            "stopped when {when}: asked {asked:?} in, returned only {returned:?} in (a whole build {whole:?})"
        );
        let message = result.unwrap_err().to_string();
        assert!(
            message.contains(&format!("lab '{name}' was not set up")) && !message.contains('\n'),
            "{message}"
        );
        assert_nothing_left(&name, &pinned, when);
    }
}
