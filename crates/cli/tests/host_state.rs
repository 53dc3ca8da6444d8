//! What linerate changes on the host for a run on external ports is put
//! back after it, however the run ends. A tester namespace holds two plain
//! veth ports (made with `ip`, carrying state a user might have given
//! them: addresses, a label, routes, an MTU, promiscuous mode, per-port
//! sysctls, a bridge) whose peers are in a DUT namespace routing between
//! them. Each
//! command that takes external ports runs on them, and a snapshot of the
//! tester namespace taken before must equal one taken after: the ports'
//! `ip -d link` (state, flags, MTU, XDP, master, namespace), every address and
//! route, and every net.* sysctl. Needs root; run with --test-threads=1.

mod common;

use common::*;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The tester namespace (ports ta, tb) and the DUT namespace (ra
/// 198.18.0.1/24, rb 198.19.0.1/24, forwarding), joined by veth pairs.
struct Bed {
    t: String,
    _guard: NetnsGuard,
}

/// The lock files of the bed's ports (`port-<netns inode>-<port>.lock`,
/// see linerate-lab's lock_port).
fn port_lock_files(b: &Bed) -> Vec<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let ns = std::fs::metadata(format!("/run/netns/{}", b.t)).unwrap();
    ["ta", "tb"]
        .iter()
        .map(|dev| format!("/run/linerate/port-{}-{dev}.lock", ns.ino()).into())
        .collect()
}

/// A killed run cannot remove its ports' lock files; the next run that
/// takes a lock, or `lab down` of any lab, removes them (no process holds
/// them).
fn assert_lab_down_sweeps_the_lock_files(b: &Bed) {
    let files = port_lock_files(b);
    for f in &files {
        assert!(f.exists(), "the killed run left no {}", f.display());
    }
    let down = linerate(&["lab", "down", "--lab-name", &unique("sw")]);
    assert_eq!(down.code, 0, "{}", down.dump());
    for f in &files {
        assert!(!f.exists(), "{} left after lab down", f.display());
    }
}

fn bed(tag: &str) -> Bed {
    let u = unique(tag);
    let (t, r) = (format!("lr-{u}-t"), format!("lr-{u}-r"));
    let guard = NetnsGuard(vec![t.clone(), r.clone()]);
    sh("ip", &["netns", "add", &t]);
    sh("ip", &["netns", "add", &r]);
    for (tp, rp) in [("ta", "ra"), ("tb", "rb")] {
        sh(
            "ip",
            &[
                "link", "add", tp, "netns", &t, "type", "veth", "peer", "name", rp, "netns", &r,
            ],
        );
        sh("ip", &["-n", &r, "link", "set", rp, "up"]);
    }
    sh("ip", &["-n", &t, "link", "set", "lo", "up"]);
    sh(
        "ip",
        &[
            "netns",
            "exec",
            &r,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ],
    );
    sh(
        "ip",
        &["-n", &r, "addr", "add", "198.18.0.1/24", "dev", "ra"],
    );
    sh(
        "ip",
        &["-n", &r, "addr", "add", "198.19.0.1/24", "dev", "rb"],
    );
    // What a user's tester ports might carry. None of it is in the test
    // subnets, so the runs are not disturbed by it.
    for args in [
        &["link", "set", "ta", "mtu", "1480", "up"][..],
        &["addr", "add", "10.99.0.1/24", "dev", "ta"],
        &[
            "addr",
            "add",
            "10.99.1.1/24",
            "dev",
            "ta",
            "label",
            "ta:one",
        ],
        &["addr", "add", "2001:db8:99::1/64", "dev", "ta", "nodad"],
        &[
            "route",
            "add",
            "10.98.0.0/16",
            "via",
            "10.99.0.254",
            "dev",
            "ta",
        ],
        &[
            "-6",
            "route",
            "add",
            "2001:db8:98::/48",
            "via",
            "2001:db8:99::fe",
            "dev",
            "ta",
        ],
        &["link", "add", "br9", "type", "bridge"],
        &["link", "set", "br9", "up"],
        &["link", "set", "tb", "master", "br9", "promisc", "on", "up"],
        &["addr", "add", "10.97.0.1/24", "dev", "tb"],
    ] {
        let mut full = vec!["-n", &t];
        full.extend_from_slice(args);
        sh("ip", &full);
    }
    for sysctl in [
        "net.ipv4.conf.ta.rp_filter=2",
        "net.ipv4.conf.ta.arp_ignore=1",
        "net.ipv6.conf.ta.accept_ra=0",
        "net.ipv6.conf.tb.disable_ipv6=1",
        "net.ipv4.conf.tb.forwarding=1",
    ] {
        sh("ip", &["netns", "exec", &t, "sysctl", "-qw", sysctl]);
    }
    Bed { t, _guard: guard }
}

fn ip_json(ns: &str, args: &[&str]) -> Value {
    let mut full = vec!["-n", ns, "-j"];
    full.extend_from_slice(args);
    serde_json::from_str(&sh("ip", &full)).expect("ip -j")
}

/// The keys of `v` that say what the host has configured (not counters,
/// lifetimes or a DAD in progress).
fn pick(v: &Value, keys: &[&str]) -> Value {
    let mut out = serde_json::Map::new();
    for k in keys {
        if let Some(x) = v.get(*k) {
            out.insert(k.to_string(), x.clone());
        }
    }
    Value::Object(out)
}

/// Everything about the tester namespace a run could change, as lines.
fn snapshot(t: &str) -> Vec<String> {
    let mut lines = Vec::new();
    for dev in ["ta", "tb"] {
        let link = ip_json(t, &["-d", "link", "show", "dev", dev]);
        let l = &link[0];
        let keep = pick(
            l,
            &[
                "ifindex",
                "ifname",
                "flags",
                "operstate",
                "mtu",
                "xdp",
                "promiscuity",
                "allmulti",
                "address",
                "master",
                "qdisc",
                "txqlen",
                "group",
                "link_netnsid",
                "inet6_addr_gen_mode",
            ],
        );
        lines.push(format!("link {keep}"));
    }
    for link in ip_json(t, &["addr"]).as_array().unwrap() {
        for a in link["addr_info"].as_array().into_iter().flatten() {
            let keep = pick(
                a,
                &[
                    "family",
                    "local",
                    "address",
                    "prefixlen",
                    "broadcast",
                    "scope",
                    "label",
                    "dynamic",
                    "noprefixroute",
                ],
            );
            lines.push(format!("addr {} {keep}", link["ifname"]));
        }
    }
    for family in ["-4", "-6"] {
        for r in ip_json(t, &[family, "route", "show", "table", "all"])
            .as_array()
            .unwrap()
        {
            let mut r = r.clone();
            // "linkdown" follows the peer's carrier, not this host.
            if let Some(flags) = r.get_mut("flags").and_then(Value::as_array_mut) {
                flags.retain(|f| f != "linkdown");
            }
            lines.push(format!("route {family} {r}"));
        }
    }
    let sysctls = sh("ip", &["netns", "exec", t, "sysctl", "-a"]);
    lines.extend(
        sysctls
            .lines()
            .filter(|l| l.starts_with("net."))
            // Counters and random keys that move by themselves.
            .filter(|l| {
                !l.starts_with("net.netfilter.nf_conntrack_count")
                    && !l.contains("stable_secret")
                    && !l.starts_with("net.ipv4.tcp_fastopen_key")
            })
            .map(|l| format!("sysctl {l}")),
    );
    lines.sort();
    lines
}

/// Waits (up to 10 s) for the IPv6 addresses to leave DAD and the ports'
/// state to settle, then takes the snapshot.
fn settled_snapshot(t: &str) -> Vec<String> {
    let start = Instant::now();
    loop {
        let tentative = ip_json(t, &["addr"])
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|l| l["addr_info"].as_array().cloned().unwrap_or_default())
            .any(|a| a["tentative"] == json!(true));
        if !tentative || start.elapsed() > Duration::from_secs(10) {
            return snapshot(t);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn assert_same(what: &str, before: &[String], after: &[String]) {
    let gone: Vec<_> = before.iter().filter(|l| !after.contains(l)).collect();
    let new: Vec<_> = after.iter().filter(|l| !before.contains(l)).collect();
    assert!(
        gone.is_empty() && new.is_empty(),
        "{what} changed the host:\n  before only: {gone:#?}\n  after only: {new:#?}"
    );
}

const HOSTS: [&str; 12] = [
    "--port-a",
    "ta",
    "--port-b",
    "tb",
    "--ip-a",
    "198.18.0.2/24",
    "--gw-a",
    "198.18.0.1",
    "--ip-b",
    "198.19.0.2/24",
    "--gw-b",
    "198.19.0.1",
];

fn args<'a>(cmd: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![cmd];
    v.extend_from_slice(&HOSTS);
    v.extend_from_slice(extra);
    v
}

/// Runs `argv` in the tester namespace and checks how it ended and that
/// the host is as before; no namespace of the run is left.
fn check_run(b: &Bed, what: &str, argv: &[&str], want_code: i32, before: &[String]) {
    let ns_before = netns_list();
    let run = linerate_in(&b.t, argv);
    assert_eq!(run.code, want_code, "{what}: {}", run.dump());
    assert!(
        !run.stderr.contains("warning: undoing"),
        "{what}: {}",
        run.dump()
    );
    let left = new_lr_netns(&ns_before, &netns_list());
    assert!(left.is_empty(), "{what} left {left:?}");
    assert_same(what, before, &settled_snapshot(&b.t));
}

#[test]
fn runs_on_external_ports_leave_the_host_as_they_found_it() {
    if !root_or_skip("runs_on_external_ports_leave_the_host_as_they_found_it") {
        return;
    }
    let b = bed("hs");
    let before = settled_snapshot(&b.t);
    // The snapshot sees what it must.
    for needle in [
        "\"ta:one\"",
        "10.98.0.0/16",
        "2001:db8:98::/48",
        "net.ipv4.conf.ta.rp_filter = 2",
        "net.ipv6.conf.tb.disable_ipv6 = 1",
        "\"mtu\":1480",
        "\"PROMISC\"",
        "\"master\":\"br9\"",
    ] {
        assert!(
            before.iter().any(|l| l.contains(needle)),
            "{needle} not in the snapshot: {before:#?}"
        );
    }
    check_run(
        &b,
        "trial",
        &args(
            "trial",
            &[
                "--no-db",
                "--frame-size",
                "128",
                "--rate",
                "5000fps",
                "--duration",
                "1s",
                "--straggler-wait",
                "300ms",
            ],
        ),
        0,
        &before,
    );
    check_run(
        &b,
        "rfc2544",
        &args(
            "rfc2544",
            &[
                "--no-db",
                "--sizes",
                "64",
                "--max-rate",
                "5000fps",
                "--trial-duration",
                "500ms",
                "--straggler-wait",
                "300ms",
            ],
        ),
        0,
        &before,
    );
    check_run(
        &b,
        "trial --engine af_packet --receiver kernel",
        &args(
            "trial",
            &[
                "--no-db",
                "--engine",
                "af_packet",
                "--receiver",
                "kernel",
                "--frame-size",
                "64",
                "--rate",
                "5000fps",
                "--duration",
                "1s",
                "--straggler-wait",
                "300ms",
            ],
        ),
        0,
        &before,
    );
    check_run(
        &b,
        "tcp",
        &args("tcp", &["--duration", "1s", "--streams", "2"]),
        0,
        &before,
    );
    check_run(
        &b,
        "http",
        &args("http", &["--duration", "1s", "--clients", "2"]),
        0,
        &before,
    );
    // An error after the ports were moved: --connect-to of the other family.
    check_run(
        &b,
        "tcp failing after set-up",
        &args("tcp", &["--duration", "1s", "--connect-to", "2001:db8::1"]),
        2,
        &before,
    );
}

/// The same when the run is stopped by SIGINT in the middle of a
/// measurement (ports moved, addresses on, streams running).
#[test]
fn a_stopped_tcp_run_leaves_the_host_as_it_found_it() {
    if !root_or_skip("a_stopped_tcp_run_leaves_the_host_as_it_found_it") {
        return;
    }
    let b = bed("hi");
    let before = settled_snapshot(&b.t);
    let mut full = vec!["netns", "exec", &b.t, LINERATE];
    full.extend(args("tcp", &["--duration", "20s", "--direction", "upload"]));
    let child = linerate_testkit::ip_command(&full)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut child = Kill(child);
    let pid = child.0.id();
    // Measuring: both ports moved and configured, then a second more.
    let start = Instant::now();
    let own = format!("lr-g{pid}-b");
    while !netns_list().contains(&own) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "never moved the ports"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    signal(pid, nix::sys::signal::Signal::SIGINT);
    let status = wait_limited(&mut child.0, Duration::from_secs(30), "tcp after SIGINT");
    assert_eq!(exit_code(status), 130, "{status}");
    assert!(netns_with_prefix(&format!("lr-g{pid}-")).is_empty());
    assert_same("tcp stopped by SIGINT", &before, &settled_snapshot(&b.t));
}

/// nsenter's option to run in the tester namespace. Runs that are to be
/// killed enter only the network namespace, not a mount namespace of
/// their own as `ip netns exec` makes: the namespaces a run makes
/// (`lr-g<pid>-*`) are mounts under /run/netns, and a mount made in a
/// mount namespace of the run's own would go with the run, and the ports
/// (veths here) with it.
fn netns_arg(b: &Bed) -> String {
    format!("--net=/run/netns/{}", b.t)
}

/// What a killed tcp run left (its namespaces, its records of the moved
/// ports) is removed when dropped, also when the test fails.
struct Stranded(u32);

impl Stranded {
    fn netns(&self) -> [String; 2] {
        ["a", "b"].map(|t| format!("lr-g{}-{t}", self.0))
    }

    fn records(&self) -> Vec<std::path::PathBuf> {
        self.netns()
            .iter()
            .map(|ns| std::path::Path::new("/run/linerate").join(format!("moved-{ns}.json")))
            .collect()
    }
}

impl Drop for Stranded {
    fn drop(&mut self) {
        drop(NetnsGuard(self.netns().to_vec()));
        for r in self.records() {
            let _ = std::fs::remove_file(r);
        }
    }
}

/// Starts `linerate argv` in the bed's tester namespace, through nsenter
/// (not `ip netns exec`, whose mount namespace dies with a killed run),
/// with no input or output.
fn spawn_in_bed(b: &Bed, argv: &[&str]) -> std::process::Child {
    let ns = netns_arg(b);
    std::process::Command::new("nsenter")
        .arg(&ns)
        .arg(LINERATE)
        .args(argv)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap()
}

/// Starts a long tcp run on the bed's ports, waits until it measures and
/// kills it with SIGKILL; checks that its ports are stranded (in its
/// namespaces, recorded) and returns what it left.
fn kill_a_tcp_run(b: &Bed) -> Stranded {
    let mut child = spawn_in_bed(
        b,
        &args("tcp", &["--duration", "60s", "--direction", "upload"]),
    );
    let left = Stranded(child.id());
    let own = &left.netns()[1];
    let start = Instant::now();
    while !netns_list().contains(own) && start.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(50));
    }
    if netns_list().contains(own) {
        std::thread::sleep(Duration::from_secs(2));
    }
    let _ = child.kill(); // SIGKILL
    let _ = child.wait();
    assert!(
        netns_list().contains(own),
        "the tcp run never moved the ports"
    );
    for (dev, ns) in ["ta", "tb"].iter().zip(left.netns()) {
        // It ran and failed: no such device there.
        let home = linerate_testkit::try_ip(Some(&b.t), &["link", "show", "dev", dev]);
        assert!(
            matches!(home, Err(linerate_testkit::RunError::Failed { .. })),
            "{dev} is still home after the kill: {home:?}"
        );
        sh("ip", &["-n", &ns, "link", "show", "dev", dev]);
    }
    for r in left.records() {
        assert!(r.exists(), "no record {}", r.display());
    }
    left
}

/// Runs `linerate args` with only this test's namespaces and records in
/// sight (a mount namespace of its own, private /run/netns and
/// /run/linerate holding bind mounts of its namespaces and copies of its
/// records), so that `lab down --all` cannot touch what other tests run
/// meanwhile. Deleting a namespace there removes its bind mount only; what
/// is left in there is printed to stderr ("left: NAME").
fn linerate_isolated(b: &Bed, stranded: &Stranded, args: &[&str]) -> Run {
    let mut names = b._guard.0.clone();
    names.extend(stranded.netns());
    // Its mount points; plain directories again outside, removed after.
    let dir = std::env::temp_dir().join(format!("lr-{}", unique("i")));
    std::fs::create_dir(&dir).unwrap();
    let _dir = DirGuard::new();
    _dir.add(&dir);
    // Staged on tmpfs mounts under `dir`, then moved over /run/netns and
    // /run/linerate whole (a bind of the staging tree would leave the
    // namespaces' mounts busy twice, and `ip netns del` could not remove
    // them).
    let mut script = format!(
        "set -e; d={}; mount --make-rprivate /; mkdir $d/netns $d/run; \
         mount -t tmpfs -o mode=755 none $d/netns; mount -t tmpfs -o mode=700 none $d/run; ",
        dir.display()
    );
    for ns in &names {
        script += &format!("touch $d/netns/{ns}; mount --bind /run/netns/{ns} $d/netns/{ns}; ");
    }
    for r in stranded.records() {
        script += &format!("cp -p {} $d/run/; ", r.display());
    }
    script += "mount --move $d/netns /run/netns; mount --move $d/run /run/linerate; set +e; \
               \"$0\" \"$@\"; rc=$?; \
               for f in /run/linerate/moved-* /run/netns/lr-g*; do \
                 [ -e \"$f\" ] && echo \"left: $f\" >&2; done; exit $rc";
    let mut full = vec!["--mount", "sh", "-c", &script, LINERATE];
    full.extend_from_slice(args);
    run_program("unshare", &full, RUN_LIMIT)
}

/// A tcp run on named ports killed with SIGKILL leaves them in its
/// namespaces, down and without their addresses. `lab down` lists them,
/// and the next tcp run on them puts them back first, as they were; so
/// does `lab down --all`.
#[test]
fn the_ports_of_a_killed_tcp_run_are_put_back() {
    if !root_or_skip("the_ports_of_a_killed_tcp_run_are_put_back") {
        return;
    }
    let b = bed("hk");
    let before = settled_snapshot(&b.t);

    // The next run on the ports.
    let left = kill_a_tcp_run(&b);
    let listed = linerate_in(&b.t, &["lab", "down"]);
    for (dev, ns) in ["ta", "tb"].iter().zip(left.netns()) {
        assert!(
            listed
                .stdout
                .contains(&format!("port {dev} stranded in {ns}")),
            "{}",
            listed.dump()
        );
    }
    let ns = netns_arg(&b);
    let mut full = vec![ns.as_str(), LINERATE];
    full.extend(args("tcp", &["--duration", "1s"]));
    let next = run_program("nsenter", &full, RUN_LIMIT);
    assert_eq!(next.code, 0, "{}", next.dump());
    for dev in ["ta", "tb"] {
        assert!(
            next.stderr.contains(&format!(
                "putting back port {dev} that ended run {}",
                left.0
            )),
            "{}",
            next.dump()
        );
    }
    assert!(!next.stderr.contains("warning"), "{}", next.dump());
    assert!(netns_with_prefix(&format!("lr-g{}-", left.0)).is_empty());
    for r in left.records() {
        assert!(!r.exists(), "{} left", r.display());
    }
    assert_same(
        "tcp after a killed tcp run",
        &before,
        &settled_snapshot(&b.t),
    );
    drop(left);

    // `lab down --all`, seeing only this test's namespaces.
    let left = kill_a_tcp_run(&b);
    let down = linerate_isolated(&b, &left, &["lab", "down", "--all"]);
    assert_eq!(down.code, 0, "{}", down.dump());
    assert!(
        !down.stderr.contains("left:"),
        "records left: {}",
        down.dump()
    );
    for ns in left.netns() {
        assert!(
            down.stdout.contains(&format!("{ns} (port")),
            "{}",
            down.dump()
        );
    }
    assert_same(
        "lab down --all after a killed tcp run",
        &before,
        &settled_snapshot(&b.t),
    );
    // Outside the test's mount namespace, the run's namespaces (empty now)
    // and the originals of the records are still there: `left` removes them.
    // The killed run's lock files too, which `lab down` (outside) sweeps.
    assert_lab_down_sweeps_the_lock_files(&b);
}

/// Whether a program is attached at the XDP hook of `dev` in namespace `t`.
fn xdp_attached(t: &str, dev: &str) -> bool {
    ip_json(t, &["link", "show", "dev", dev])[0]
        .get("xdp")
        .is_some()
}

/// A packet run on named ports killed with SIGKILL in the middle of its
/// trial: the ports are as before. Its XDP programs (generator, counter,
/// AF_XDP redirect) hang on BPF links, which the kernel detaches when the
/// process dies; it changes nothing else on a named port.
#[test]
fn a_killed_packet_run_leaves_the_ports_as_it_found_them() {
    if !root_or_skip("a_killed_packet_run_leaves_the_ports_as_it_found_them") {
        return;
    }
    let b = bed("hx");
    let before = settled_snapshot(&b.t);
    for engine in ["xdp", "af_xdp"] {
        let mut child = spawn_in_bed(
            &b,
            &args(
                "trial",
                &[
                    "--no-db",
                    "--engine",
                    engine,
                    "--frame-size",
                    "128",
                    "--rate",
                    "5000fps",
                    "--duration",
                    "60s",
                ],
            ),
        );
        // Sending: a program at port B's hook (the counter or the redirect).
        let start = Instant::now();
        while !xdp_attached(&b.t, "tb") && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(50));
        }
        let attached = xdp_attached(&b.t, "tb");
        std::thread::sleep(Duration::from_millis(500));
        let _ = child.kill(); // SIGKILL
        let _ = child.wait();
        assert!(
            attached,
            "{engine}: the run never attached its program to tb"
        );
        assert_same(
            &format!("trial --engine {engine}, killed"),
            &before,
            &settled_snapshot(&b.t),
        );
    }
    assert_lab_down_sweeps_the_lock_files(&b);
}
