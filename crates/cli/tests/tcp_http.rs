//! `linerate tcp` and `linerate http` through the lab's Linux router: the
//! goodput is above zero and below the path's limit (a token bucket the test
//! puts on the DUT's egress), IPv6 works, a DUT that blocks the port is one
//! clear line and a non-zero exit, and nothing the run added stays behind.
//! Needs root; run with --test-threads=1.

mod common;

use common::*;
use std::time::Duration;

/// The path limit the tests set on the DUT's egress towards each tester.
const LIMIT_MBIT: f64 = 200.0;
/// tbf's bucket ("burst 256kb": tc's kb are 1024 bytes): a full bucket
/// passes at once on top of the rate, so a 1-s run may carry that much
/// more than LIMIT_MBIT allows (with IPv6's 9,000-byte MTU the headers
/// leave too little room below the limit to hide it).
const BURST_BYTES: f64 = 256.0 * 1024.0;

/// Limits the DUT's forwarding to LIMIT_MBIT each way (tbf counts whole
/// frames, so the TCP payload must stay below it, the bucket aside).
fn limit_dut(lab: &str) {
    let dut = format!("lr-{lab}-dut");
    for dev in ["dut-a", "dut-b"] {
        sh(
            "ip",
            &[
                "netns", "exec", &dut, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate",
                "200mbit", "burst", "256kb", "latency", "100ms",
            ],
        );
    }
}

/// What the runs add to the lab must be gone again: no kernel address on
/// the tester ports, IPv6 off on the DUT as the lab made it.
fn assert_lab_as_made(lab: &str) {
    for (ns, dev) in [(format!("lr-{lab}-a"), "a0"), (format!("lr-{lab}-b"), "b0")] {
        let addrs = sh("ip", &["-n", &ns, "addr", "show", "dev", dev]);
        assert!(
            !addrs.contains("inet"),
            "an address stayed on {ns}/{dev}:\n{addrs}"
        );
        let routes = sh("ip", &["-n", &ns, "route", "show"]);
        assert!(routes.trim().is_empty(), "a route stayed in {ns}: {routes}");
    }
    let dut = format!("lr-{lab}-dut");
    let fwd = sh(
        "ip",
        &[
            "netns",
            "exec",
            &dut,
            "sysctl",
            "-n",
            "net.ipv6.conf.all.forwarding",
        ],
    );
    assert_eq!(fwd.trim(), "0", "IPv6 forwarding left on in {dut}");
    let v6 = sh("ip", &["-n", &dut, "-6", "addr", "show"]);
    assert!(
        !v6.contains("2001:2"),
        "an IPv6 address stayed in {dut}: {v6}"
    );
}

fn assert_goodput_in_limit(run: &serde_json::Value, limit_mbit: f64) {
    let mbps = f(run, "goodput_bps") / 1e6;
    assert!(mbps > 0.0, "no goodput: {run}");
    let allowed = limit_mbit + BURST_BYTES * 8.0 / 1e6 / f(run, "seconds");
    assert!(
        mbps < allowed,
        "goodput {mbps} Mbps above the path limit {limit_mbit} and its bucket ({allowed}): {run}"
    );
    assert!(f(run, "seconds") > 0.9, "{run}");
    assert!(u(run, "bytes") > 0, "{run}");
}

#[test]
fn tcp_goodput_is_positive_and_below_the_path_limit() {
    if !root_or_skip("tcp_goodput_is_positive_and_below_the_path_limit") {
        return;
    }
    let (lab, _guard) = lab_up("tc");
    limit_dut(&lab);
    let json = TempFile::new("tcp");
    let db = TempFile::new("tcp-db");
    let run = linerate(&[
        "tcp",
        "--lab",
        "--lab-name",
        &lab,
        "--duration",
        "2s",
        "-P",
        "3",
        "--window",
        "256k",
        "--line-speed",
        "1G",
        "--json",
        json.arg(),
        "--db",
        db.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(run.stdout.contains("Table 12"), "{}", run.dump());
    let rec = json.json();
    // Stored: the record the --json file holds; `show` prints its table.
    let stored = exported_last(&db);
    assert_eq!(stored["run"]["command"], "tcp");
    assert_eq!(stored["run"]["status"], "complete");
    assert_eq!(stored["document"], rec);
    assert!(shown_last(&db).contains("Table 12"));
    assert_eq!(u(&rec, "window_bytes"), 256 * 1024);
    let runs = rec["runs"].as_array().expect("runs");
    let directions: Vec<&str> = runs
        .iter()
        .map(|r| r["direction"].as_str().unwrap())
        .collect();
    assert_eq!(directions, ["download", "upload"]);
    for r in runs {
        assert_goodput_in_limit(r, LIMIT_MBIT);
        let streams = r["streams"].as_array().expect("streams");
        assert_eq!(streams.len(), 3, "{r}");
        let sum: u64 = streams.iter().map(|s| u(s, "bytes")).sum();
        assert_eq!(sum, u(r, "bytes"), "streams do not add up: {r}");
        assert!(
            streams.iter().all(|s| u(s, "bytes") > 0),
            "an idle stream: {r}"
        );
        // Link usage per LanTraffic: goodput x (MTU + 18) / (MTU - 40) over 1G.
        let mtu = u(&rec["path"], "mtu") as f64;
        let expect = 100.0 * f(r, "goodput_bps") * (mtu + 18.0) / (mtu - 40.0) / 1e9;
        assert!((f(r, "link_usage_percent") - expect).abs() < 1e-6, "{r}");
    }
    assert_lab_as_made(&lab);
}

#[test]
fn tcp_over_ipv6_moves_data_and_restores_the_lab() {
    if !root_or_skip("tcp_over_ipv6_moves_data_and_restores_the_lab") {
        return;
    }
    let (lab, _guard) = lab_up("t6");
    limit_dut(&lab);
    let json = TempFile::new("tcp6");
    let run = linerate(&[
        "tcp",
        "--lab",
        "--lab-name",
        &lab,
        "--ipv6",
        "--duration",
        "1s",
        "--direction",
        "upload",
        "--json",
        json.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    let rec = json.json();
    assert_eq!(rec["path"]["family"], "ipv6", "{rec}");
    assert_eq!(rec["path"]["server_ip"], "2001:2:0:1::2", "{rec}");
    assert_goodput_in_limit(&rec["runs"][0], LIMIT_MBIT);
    assert_lab_as_made(&lab);
}

#[test]
fn http_goodput_is_positive_and_below_the_path_limit() {
    if !root_or_skip("http_goodput_is_positive_and_below_the_path_limit") {
        return;
    }
    let (lab, _guard) = lab_up("hc");
    limit_dut(&lab);
    let json = TempFile::new("http");
    let db = TempFile::new("http-db");
    let run = linerate(&[
        "http",
        "--lab",
        "--lab-name",
        &lab,
        "--duration",
        "2s",
        "--clients",
        "4",
        "--object-size",
        "64k,1M",
        "--direction",
        "both",
        "--json",
        json.arg(),
        "--db",
        db.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(run.stdout.contains("Table 13"), "{}", run.dump());
    let rec = json.json();
    let stored = exported_last(&db);
    assert_eq!(stored["run"]["command"], "http");
    assert_eq!(stored["document"], rec);
    assert!(shown_last(&db).contains("Table 13"));
    for r in rec["runs"].as_array().expect("runs") {
        assert_goodput_in_limit(r, LIMIT_MBIT);
        assert!(u(r, "requests") > 0, "{r}");
        assert_eq!(u(r, "errors"), 0, "{r}");
    }
    assert_lab_as_made(&lab);
}

#[test]
fn http_with_nginx_serves_through_the_dut() {
    if !root_or_skip("http_with_nginx_serves_through_the_dut") {
        return;
    }
    if !std::path::Path::new("/usr/sbin/nginx").exists() {
        skip("(nginx not installed; scripts/setup.sh installs it): http_with_nginx_serves_through_the_dut");
        return;
    }
    let (lab, _guard) = lab_up("hn");
    let server_ns = format!("lr-{lab}-b");
    let _reaper = ProcessReaper(vec![server_ns.clone()]);
    limit_dut(&lab);
    let json = TempFile::new("nginx");
    let run = Spawned::start(&[
        "http",
        "--lab",
        "--lab-name",
        &lab,
        "--duration",
        "2s",
        "--server",
        "nginx",
        "--json",
        json.arg(),
    ]);
    let dir = poll(Duration::from_secs(20), || nginx_dir_in(&server_ns));
    let run = run.finish(RUN_LIMIT);
    assert_eq!(run.code, 0, "{}", run.dump());
    let rec = json.json();
    assert_eq!(rec["server"], "nginx");
    assert_goodput_in_limit(&rec["runs"][0], LIMIT_MBIT);
    // nginx stopped and its directory removed.
    let dir = dir.expect("nginx seen running");
    assert!(!dir.exists(), "{} left behind", dir.display());
    assert_eq!(netns_processes(&server_ns), [], "left running");
    assert_lab_as_made(&lab);
}

/// linerate killed with SIGKILL (no Drop runs): nginx, master and workers,
/// ends with it, and `lab down` removes the directory it ran in. While it
/// runs, that directory is root's only.
#[test]
fn nginx_ends_with_a_killed_run_and_lab_down_removes_its_directory() {
    let test = "nginx_ends_with_a_killed_run_and_lab_down_removes_its_directory";
    if !root_or_skip(test) {
        return;
    }
    if !std::path::Path::new("/usr/sbin/nginx").exists() {
        skip(&format!(
            "(nginx not installed; scripts/setup.sh installs it): {test}"
        ));
        return;
    }
    let (lab, _guard) = lab_up("hk");
    let server_ns = format!("lr-{lab}-b");
    // Declared after the lab's guard: ends anything left before lab down.
    let _reaper = ProcessReaper(vec![server_ns.clone()]);
    let dirs = DirGuard::new();
    let run = Spawned::start(&[
        "http",
        "--lab",
        "--lab-name",
        &lab,
        "--duration",
        "60s",
        "--server",
        "nginx",
    ]);
    let dir = poll(Duration::from_secs(20), || nginx_dir_in(&server_ns));
    let Some(dir) = dir else {
        panic!(
            "no nginx seen in {server_ns}: {}",
            run.finish(RUN_LIMIT).dump()
        );
    };
    dirs.add(&dir);
    assert_eq!(mode_of(&dir) & 0o077, 0, "{} open to others", dir.display());
    assert_eq!(mode_of(&dir.join("nginx.conf")) & 0o077, 0);
    let workers = netns_processes(&server_ns);
    assert!(
        workers.iter().filter(|(_, c)| c == "nginx").count() >= 2,
        "a master and its workers: {workers:?}"
    );
    signal(run.pid, nix::sys::signal::Signal::SIGKILL);
    let run = run.finish(RUN_LIMIT);
    assert_eq!(run.code, 128 + 9, "{}", run.dump());
    let left = wait_no_processes(std::slice::from_ref(&server_ns), Duration::from_secs(3));
    assert_eq!(left, [], "outlived the killed run");
    let down = linerate(&["lab", "down", "--lab-name", &lab]);
    assert_eq!(down.code, 0, "{}", down.dump());
    assert!(!dir.exists(), "{} left after lab down", dir.display());
}

/// Drops TCP port 5201 and rejects 8080 in the DUT's forward path.
const BLOCK: &str = "table inet block {
    chain forward {
        type filter hook forward priority 0;
        tcp dport 5201 drop
        tcp dport 8080 reject with tcp reset
    }
}
";

fn assert_dut_failure(run: &Run, port: &str) {
    assert_eq!(run.code, 1, "{}", run.dump());
    assert!(!run.stderr.contains("panicked"), "{}", run.dump());
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(lines.len(), 1, "not one line:\n{}", run.dump());
    assert!(
        lines[0].contains("no TCP connection through the DUT") && lines[0].contains(port),
        "{}",
        run.dump()
    );
    assert!(
        run.stdout.is_empty(),
        "a table for a failed run:\n{}",
        run.dump()
    );
}

#[test]
fn a_dut_that_blocks_the_port_is_a_clear_failure() {
    if !root_or_skip("a_dut_that_blocks_the_port_is_a_clear_failure") {
        return;
    }
    let (lab, _guard) = lab_up("bl");
    nft_load(&format!("lr-{lab}-dut"), BLOCK);
    // Dropped SYNs: a timeout.
    let run = linerate(&[
        "tcp",
        "--lab",
        "--lab-name",
        &lab,
        "--duration",
        "1s",
        "--connect-timeout",
        "1s",
    ]);
    assert_dut_failure(&run, "5201");
    assert!(
        run.stderr.contains("no answer within 1 s"),
        "{}",
        run.dump()
    );
    // Rejected: connection refused.
    let run = linerate(&["http", "--lab", "--lab-name", &lab, "--duration", "1s"]);
    assert_dut_failure(&run, "8080");
    assert!(run.stderr.contains("refused"), "{}", run.dump());
    assert_lab_as_made(&lab);
}

#[test]
fn bad_goodput_input_is_one_line_and_exit_2() {
    for args in [
        &["tcp", "--lab", "--window", "lots"][..],
        &["tcp", "--lab", "--duration", "soon"][..],
        &["http", "--lab", "--object-size", "1M,big"][..],
        &[
            "http",
            "--lab",
            "--server",
            "nginx",
            "--direction",
            "upload",
        ][..],
    ] {
        assert_bad_input(&linerate(args));
    }
}

/// An "external DUT": a router namespace whose two links end in linerate's
/// own namespace as interfaces the test names with --port-a/--port-b.
/// linerate moves them into namespaces of its own for the run (else the
/// kernel would deliver between them locally) and back afterwards.
#[test]
fn tcp_and_http_on_named_ports() {
    if !root_or_skip("tcp_and_http_on_named_ports") {
        return;
    }
    let stem = unique("np");
    let router = format!("lr-{stem}-r");
    let _guard = NetnsGuard(vec![router.clone()]);
    sh("ip", &["netns", "add", &router]);
    let (pa, pb) = (format!("{stem}a"), format!("{stem}b"));
    for (port, inner, addr) in [(&pa, "ra", "198.18.0.1/24"), (&pb, "rb", "198.19.0.1/24")] {
        sh(
            "ip",
            &[
                "-n", &router, "link", "add", inner, "type", "veth", "peer", "name", port,
            ],
        );
        // The outer end to linerate's namespace, still down (sends nothing).
        sh("ip", &["-n", &router, "link", "set", port, "netns", "1"]);
        sh("ip", &["-n", &router, "addr", "add", addr, "dev", inner]);
        sh("ip", &["-n", &router, "link", "set", inner, "up"]);
    }
    sh(
        "ip",
        &[
            "netns",
            "exec",
            &router,
            "sysctl",
            "-qw",
            "net.ipv4.ip_forward=1",
        ],
    );
    let ports = [
        "--port-a",
        &pa,
        "--port-b",
        &pb,
        "--ip-a",
        "198.18.0.2/24",
        "--gw-a",
        "198.18.0.1",
        "--ip-b",
        "198.19.0.2/24",
        "--gw-b",
        "198.19.0.1",
    ];
    let before = netns_list();
    let mut args = vec![
        "tcp",
        "--duration",
        "1s",
        "-P",
        "2",
        "--direction",
        "download",
    ];
    args.extend_from_slice(&ports);
    let tcp = TempFile::new("np-tcp");
    args.extend_from_slice(&["--json", tcp.arg()]);
    let run = linerate(&args);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(f(&tcp.json()["runs"][0], "goodput_bps") > 0.0);
    assert_eq!(tcp.json()["path"]["label"], format!("ports {pa}/{pb}"));

    let mut args = vec!["http", "--duration", "1s"];
    args.extend_from_slice(&ports);
    let run = linerate(&args);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(run.stdout.contains("Table 13"), "{}", run.dump());

    // The ports are back, without addresses, and no namespace stayed.
    for port in [&pa, &pb] {
        let addrs = sh("ip", &["addr", "show", "dev", port]);
        assert!(!addrs.contains("inet "), "{addrs}");
    }
    assert_eq!(netns_list(), before, "namespaces changed");
}

/// SIGINT in the middle of a long window: the shortened window is reported
/// (stdout and JSON), exit 130, and the lab is as it was.
#[test]
fn sigint_reports_the_shortened_window_and_restores_the_lab() {
    if !root_or_skip("sigint_reports_the_shortened_window_and_restores_the_lab") {
        return;
    }
    let (lab, _guard) = lab_up("si");
    limit_dut(&lab);
    let json = TempFile::new("tcp-int");
    let spawned = Spawned::start(&[
        "tcp",
        "--lab",
        "--lab-name",
        &lab,
        "--duration",
        "60s",
        "--direction",
        "both",
        "--json",
        json.arg(),
    ]);
    // The tester address appears when the run has set up; then let data flow.
    let a = format!("lr-{lab}-a");
    let start = std::time::Instant::now();
    while !sh("ip", &["-n", &a, "addr", "show", "dev", "a0"]).contains("inet ")
        && start.elapsed() < std::time::Duration::from_secs(20)
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(1500));
    signal(spawned.pid, nix::sys::signal::Signal::SIGINT);
    let run = spawned.finish(std::time::Duration::from_secs(30));
    assert_eq!(run.code, 130, "{}", run.dump());
    assert!(
        run.elapsed < std::time::Duration::from_secs(30),
        "{}",
        run.dump()
    );
    assert!(run.stdout.contains("interrupted"), "{}", run.dump());
    let rec = json.json();
    let runs = rec["runs"].as_array().expect("runs");
    // Stopped in the download window: no upload run afterwards.
    assert_eq!(runs.len(), 1, "{rec}");
    assert_eq!(runs[0]["interrupted"], true, "{rec}");
    assert!(f(&runs[0], "seconds") < 30.0, "{rec}");
    assert!(u(&runs[0], "bytes") > 0, "{rec}");
    assert_lab_as_made(&lab);
}
