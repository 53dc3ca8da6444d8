//! `linerate tunnels`: many emulated IPsec peers set up tunnels to one
//! gateway. Against strongSwan's charon built by hand in a router
//! namespace (`common::plain_router`, `common::strongswan`; not the lab's
//! code), and through the lab's vpn-gateway scenario:
//!
//! - 100 peers from 198.19.0.2 upward come up; while linerate holds them,
//!   charon lists 100 IKE SAs, each with one CHILD_SA whose remote
//!   selector is that peer's slice of the network (as linerate's JSON
//!   says); after the run charon has none left and port B no address.
//! - A gateway that accepts only 50 of the peers (its connection's
//!   remote_addrs is a range of 50): 50 established, 50 failed with the
//!   gateway's answer named, exit 1 (a partial result).
//! - 200 tunnels through the lab: exit 0, the gateway's own count agrees,
//!   no namespace left.
//! - `--capacity`: a charon that holds at most 50 IKE SAs
//!   (`charon.ikesa_limit = 50`), stepped 20 at a time to 100 with
//!   traffic: held 40, most up 50 (as many as `swanctl --list-sas` lists
//!   at the peak), step 3's 10 failures named; a router that drops the
//!   decrypted frames of tunnels 41 to 60: step 3 degrades, 20 silent
//!   tunnels named; the lab's gateway stepped 100 at a time to 300 holds
//!   all 300 (exit 0).
//! - `--rekey`: 5 tunnels with traffic held 5 s, each CHILD_SA rekeyed
//!   every second: every rekey completes, charon reports as many
//!   (`child-rekey` events), and each tunnel's frames follow its new SA
//!   (all but those around the rekeys arrive; the router forwarded exactly
//!   what port A counted).
//! - `--ipsec-id @peer{n}.vpn.example`: a charon whose five connections
//!   each want one of those identities brings all five up, and `swanctl
//!   --list-sas` lists each peer with its own.
//!
//! Root only; needs strongSwan (scripts/setup.sh). Run with
//! --test-threads=1.

mod common;

use common::strongswan::*;
use common::*;
use serde_json::Value;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

const GATEWAY: &str = "198.19.0.1";
const LAN: &str = "198.18.0.0/24";
/// The network behind the peers: 100 tunnels get a /24 each.
const REMOTE_NET: &str = "198.19.128.0/17";

/// The gateway's connection for the many peers: any identity, the peers'
/// addresses `remote_addrs`, and a remote selector covering every slice.
fn many_conn(remote_addrs: &str) -> Conn {
    Conn {
        name: "many".into(),
        local_addr: GATEWAY.into(),
        remote_addr: remote_addrs.into(),
        proposals: "aes256-sha256-modp2048, aes128-sha256-x25519, default".into(),
        local_id: GATEWAY.into(),
        remote_id: "%any".into(),
        local_ts: LAN.into(),
        remote_ts: REMOTE_NET.into(),
        esp_proposals: "aes128gcm16".into(),
    }
}

/// The router of `plain_router` with charon accepting `remote_addrs`;
/// fields drop in order: charon, processes, the key, the namespaces.
struct Bed {
    charon: Charon,
    _reaper: ProcessReaper,
    t: String,
    psk: TempFile,
    _guard: NetnsGuard,
}

impl Bed {
    fn new(tag: &str, remote_addrs: &str) -> Bed {
        Bed::with_settings(tag, remote_addrs, "")
    }

    /// A bed whose charon has `settings` too (strongswan.conf's charon
    /// section).
    fn with_settings(tag: &str, remote_addrs: &str, settings: &str) -> Bed {
        Bed::with_conns(tag, &[many_conn(remote_addrs)], settings)
    }

    /// A bed whose charon has the connections `conns`.
    fn with_conns(tag: &str, conns: &[Conn], settings: &str) -> Bed {
        let (t, r, guard) = plain_router(tag);
        for ns in [&t, &r] {
            sh(
                "ip",
                &[
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-qw",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            );
        }
        sh("ip", &["-n", &r, "link", "set", "lo", "up"]);
        let key = linerate_helper::random_hex(16).unwrap();
        let psk = TempFile::new("tunnels-psk");
        std::fs::write(&psk.0, format!("{key}\n")).unwrap();
        std::fs::set_permissions(&psk.0, std::fs::Permissions::from_mode(0o600)).unwrap();
        let charon = Charon::start_with(&r, conns, &key, settings);
        Bed {
            charon,
            _reaper: ProcessReaper(vec![t.clone(), r]),
            t,
            psk,
            _guard: guard,
        }
    }

    fn args<'a>(&'a self, count: &'a str, json: &'a TempFile, extra: &[&'a str]) -> Vec<&'a str> {
        let mut args = vec![
            "tunnels",
            "--no-db",
            "--port-b",
            "tb",
            "--ip-b",
            "198.19.0.2/24",
            "--gw-b",
            GATEWAY,
            "--psk-file",
            self.psk.arg(),
            "--remote-net",
            REMOTE_NET,
            "--local-net",
            LAN,
            "--esp",
            "aes128gcm16",
            "--count",
            count,
            "--json",
            json.arg(),
        ];
        args.extend_from_slice(extra);
        args
    }

    /// After a run: no IKE SA on the gateway, no address on port B, no
    /// process in the tester's namespace.
    fn assert_nothing_left(&self, run: &Run) {
        let sas = self.charon.wait_no_sas();
        assert!(
            sas.is_empty(),
            "the gateway kept {} IKE SAs\n{}",
            sas.len(),
            run.dump()
        );
        let addrs = sh("ip", &["-n", &self.t, "-4", "addr", "show", "dev", "tb"]);
        assert!(
            addrs.trim().is_empty(),
            "port B kept addresses:\n{addrs}\n{}",
            run.dump()
        );
        let left = wait_no_processes(std::slice::from_ref(&self.t), Duration::from_secs(3));
        assert!(left.is_empty(), "processes left: {left:?}");
    }
}

/// The remote selectors of the CHILD_SAs charon lists, one per IKE SA
/// (asserted), with the IKE SAs' peer addresses.
fn gateway_tunnels(charon: &Charon) -> (BTreeSet<String>, BTreeSet<String>) {
    let mut nets = BTreeSet::new();
    let mut peers = BTreeSet::new();
    for (name, ike) in charon.sas() {
        assert_eq!(name, "many");
        assert_eq!(ike.text("state"), "ESTABLISHED", "{ike:?}");
        peers.insert(ike.text("remote-host").to_string());
        let children = ike.get("child-sas").map(|c| c.entries()).unwrap_or(&[]);
        assert_eq!(children.len(), 1, "one CHILD_SA per IKE SA: {ike:?}");
        let child = &children[0].1;
        assert_eq!(child.text("state"), "INSTALLED", "{child:?}");
        match child.get("remote-ts") {
            Some(Vici::List(ts)) => nets.extend(ts.iter().cloned()),
            other => panic!("no remote-ts in {child:?}: {other:?}"),
        }
    }
    (nets, peers)
}

fn tunnels_of(json: &Value) -> &Vec<Value> {
    json["tunnels"].as_array().expect("tunnels")
}

#[test]
fn a_hundred_tunnels_come_up_are_listed_by_the_gateway_and_go() {
    if !root_or_skip("a_hundred_tunnels_come_up_are_listed_by_the_gateway_and_go") {
        return;
    }
    let bed = Bed::new("tu", "198.19.0.0/24");
    let json = TempFile::new("tunnels-100");
    let args = bed.args("100", &json, &["--hold", "4s"]);
    // linerate holds the tunnels for 4 s; meanwhile the gateway is asked.
    let (run, listed) = std::thread::scope(|s| {
        let linerate = s.spawn(|| linerate_in(&bed.t, &args));
        let start = Instant::now();
        let mut listed = None;
        while !linerate.is_finished() && start.elapsed() < Duration::from_secs(60) {
            // Half-open IKE SAs are listed too (unnamed, CONNECTING).
            let up = bed
                .charon
                .sas()
                .iter()
                .filter(|(name, ike)| {
                    name == "many"
                        && ike.text("state") == "ESTABLISHED"
                        && ike
                            .get("child-sas")
                            .is_some_and(|c| !c.entries().is_empty())
                })
                .count();
            if up == 100 {
                // Every handshake answered: the gateway's view, once.
                listed = Some(gateway_tunnels(&bed.charon));
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        (linerate.join().unwrap(), listed)
    });
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    assert_eq!(u(&report, "attempted"), 100, "{}", run.dump());
    assert_eq!(u(&report, "established"), 100, "{}", run.dump());
    assert_eq!(u(&report, "failed"), 0);
    assert!(f(&report, "tunnels_per_s") > 0.0);
    let setup = &report["setup_ms"];
    let (p50, p90, p99, max) = (
        f(setup, "p50"),
        f(setup, "p90"),
        f(setup, "p99"),
        f(setup, "max"),
    );
    assert!(
        0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= max,
        "{setup}"
    );
    // tunnels/s is established over the span from the first attempt to
    // the last CHILD_SA: no faster than all of them in the slowest's time.
    assert!(f(&report, "tunnels_per_s") <= 100.0 / (max / 1000.0) * 1.0001);

    let (nets, peers) = listed.unwrap_or_else(|| {
        panic!(
            "the gateway never listed 100 IKE SAs while linerate held them\n{}\n{}",
            run.dump(),
            bed.charon.log()
        )
    });
    let ours: BTreeSet<String> = tunnels_of(&report)
        .iter()
        .map(|t| t["remote_net"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ours.len(), 100, "each peer its own network");
    assert_eq!(
        nets, ours,
        "the gateway's CHILD_SAs protect linerate's slices"
    );
    let our_peers: BTreeSet<String> = tunnels_of(&report)
        .iter()
        .map(|t| t["peer"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(peers, our_peers, "one IKE SA per peer address");
    assert!(our_peers.contains("198.19.0.2") && our_peers.contains("198.19.0.101"));
    assert!(
        run.stdout.contains("Established          100"),
        "{}",
        run.dump()
    );
    bed.assert_nothing_left(&run);
}

#[test]
fn a_gateway_that_takes_fifty_peers_refuses_the_other_fifty_by_name() {
    if !root_or_skip("a_gateway_that_takes_fifty_peers_refuses_the_other_fifty_by_name") {
        return;
    }
    // The connection matches peers 198.19.0.2 .. 198.19.0.51 only.
    let bed = Bed::new("tf", "198.19.0.2-198.19.0.51");
    let json = TempFile::new("tunnels-50");
    let run = linerate_in(&bed.t, &bed.args("100", &json, &[]));
    // A partial result: the test ran, not every tunnel came up.
    assert_eq!(run.code, 1, "{}", run.dump());
    let report = json.json();
    assert_eq!(u(&report, "established"), 50, "{}", run.dump());
    assert_eq!(u(&report, "failed"), 50, "{}", run.dump());
    for t in tunnels_of(&report) {
        let last: u8 = t["peer"]
            .as_str()
            .unwrap()
            .rsplit('.')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(t["setup_ms"].is_number(), last <= 51, "{t}");
    }
    let failures = report["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    let reason = failures[0]["reason"].as_str().unwrap();
    assert_eq!(u(&failures[0], "count"), 50);
    // charon has no connection for the others and says so in IKE_SA_INIT.
    assert_eq!(reason, "NO_PROPOSAL_CHOSEN", "{failures:?}");
    let line = run.stderr.lines().last().unwrap_or_default();
    assert!(
        line.contains("50 of 100 tunnels failed") && line.contains("NO_PROPOSAL_CHOSEN"),
        "{}",
        run.dump()
    );
    assert!(run.stdout.contains("NO_PROPOSAL_CHOSEN"), "{}", run.dump());
    bed.assert_nothing_left(&run);
}

#[test]
fn two_hundred_tunnels_through_the_lab_gateway() {
    if !root_or_skip("two_hundred_tunnels_through_the_lab_gateway") {
        return;
    }
    let json = TempFile::new("tunnels-lab");
    let db = TempFile::new("tunnels-db");
    let run = linerate(&[
        "tunnels",
        "--lab",
        "--scenario",
        "vpn-gateway",
        "--count",
        "200",
        "--db",
        db.arg(),
        "--json",
        json.arg(),
    ]);
    // The lab built for the run (lr-tun<pid>-*) is gone; other runs on
    // this machine may build labs of their own meanwhile.
    let own = netns_with_prefix(&format!("lr-tun{}-", run.pid));
    assert!(own.is_empty(), "left behind: {own:?}\n{}", run.dump());
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    assert_eq!(u(&report, "established"), 200, "{}", run.dump());
    let checks: Vec<&str> = report["gateway_checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert!(
        checks[0].contains("lists 200 installed CHILD_SAs"),
        "{checks:?}"
    );
    assert!(checks[1].contains("lists no CHILD_SA"), "{checks:?}");
    assert!(report["gateway_note"]
        .as_str()
        .unwrap()
        .contains("kernel-libipsec"));
    // Stored, and shown again from the database.
    let shown = shown_last(&db);
    assert!(
        shown.contains("Established          200") && shown.contains("Tunnels/s"),
        "{shown}"
    );
    let runs = linerate(&["runs", "--db", db.arg()]);
    assert!(
        runs.stdout.contains("200 of 200 tunnels up"),
        "{}",
        runs.dump()
    );
}

/// SIGINT while tunnels are still being set up (a slow attempt rate):
/// linerate stops starting new ones within a moment, deletes those up,
/// removes its lab, exits 130, and its JSON names the peers never
/// finished as interrupted.
#[test]
fn a_signal_during_the_setups_ends_the_run_promptly() {
    if !root_or_skip("a_signal_during_the_setups_ends_the_run_promptly") {
        return;
    }
    let json = TempFile::new("tunnels-int");
    let mut spawned = Spawned::start(&[
        "tunnels",
        "--lab",
        "--scenario",
        "vpn-gateway",
        "--count",
        "200",
        "--rate",
        "10/s",
        "--no-db",
        "--json",
        json.arg(),
    ]);
    let pid = spawned.pid;
    let started = spawned.wait_for_stderr(Duration::from_secs(30), |e| {
        e.contains("bringing up 200 tunnels")
    });
    assert!(started, "{}", spawned.stderr_now());
    std::thread::sleep(Duration::from_secs(2));
    signal(pid, nix::sys::signal::Signal::SIGINT);
    let run = spawned.finish(Duration::from_secs(30));
    let own = netns_with_prefix(&format!("lr-tun{pid}-"));
    assert!(own.is_empty(), "left behind: {own:?}\n{}", run.dump());
    assert_eq!(run.code, 130, "{}", run.dump());
    // 200 at 10/s take 20 s: the signal ended it long before.
    assert!(
        run.elapsed < Duration::from_secs(15),
        "took {:?}\n{}",
        run.elapsed,
        run.dump()
    );
    let report = json.json();
    let up = u(&report, "established");
    assert!((1..200).contains(&up), "{}", run.dump());
    let interrupted = tunnels_of(&report)
        .iter()
        .filter(|t| t["reason"] == "interrupted")
        .count();
    assert_eq!(interrupted as u64 + up, 200, "{report}");
}

/// `--traffic` through the hand-built gateway: port A (`ta`) answers the
/// router's ARP and counts what charon decrypted and the router sent to
/// it, which an nftables counter on the router's egress to port A counts
/// too (after the router resolved port A: frames it really sent).
#[test]
fn traffic_times_every_tunnels_first_packet_through_a_hand_built_gateway() {
    if !root_or_skip("traffic_times_every_tunnels_first_packet_through_a_hand_built_gateway") {
        return;
    }
    let bed = Bed::new("tt", "198.19.0.0/24");
    let r = format!("{}-r", bed.t.strip_suffix("-t").expect("lr-<u>-t"));
    nft_load(
        &r,
        "table netdev lrtraffic {\n  chain out {\n    type filter hook egress device \"ra\" priority 0;\n    udp dport 19538 counter\n  }\n}\n",
    );
    let json = TempFile::new("tunnels-traffic");
    let run = linerate_in(
        &bed.t,
        &bed.args(
            "20",
            &json,
            &[
                "--traffic",
                "--traffic-rate",
                "50/s",
                "--port-a",
                "ta",
                "--ip-a",
                "198.18.0.2/24",
                "--gw-a",
                "198.18.0.1",
                "--hold",
                "2s",
            ],
        ),
    );
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    assert_eq!(u(&report, "established"), 20, "{}", run.dump());
    let traffic = &report["traffic"];
    let frames = traffic["tunnels"].as_array().unwrap();
    assert_eq!(frames.len(), 20);
    for (t, fr) in tunnels_of(&report).iter().zip(frames) {
        let setup = f(t, "setup_ms");
        let ttfp = f(fr, "ttfp_ms");
        // The first frame leaves once the CHILD_SA is installed.
        assert!(ttfp >= setup, "{t} {fr}");
        let (sent, received) = (u(fr, "sent"), u(fr, "received"));
        assert!(0 < received && received <= sent, "{fr}");
        // 50 frames/s for at least the 2-s hold.
        assert!(sent >= 100, "{fr}");
        assert_eq!(u(fr, "errored") + u(fr, "duplicates"), 0, "{fr}");
    }
    let received: u64 = frames.iter().map(|fr| u(fr, "received")).sum();
    assert_eq!(u(traffic, "received"), received);
    assert_eq!(u(traffic, "rx_ring_drops"), 0, "{traffic}");
    // Exactly what the router sent to port A.
    let egress = nft_counters(&r);
    assert_eq!(egress, [received], "{}", run.dump());
    let ttfp = &report["ttfp_ms"];
    let (p50, p90, p99, max) = (
        f(ttfp, "p50"),
        f(ttfp, "p90"),
        f(ttfp, "p99"),
        f(ttfp, "max"),
    );
    assert!(
        0.0 < p50 && p50 <= p90 && p90 <= p99 && p99 <= max,
        "{ttfp}"
    );
    assert!(max >= f(&report["setup_ms"], "max") * 0.999, "{report}");
    assert!(
        run.stdout.contains("Time to first packet [ms]"),
        "{}",
        run.dump()
    );
    assert!(traffic["no_traffic"].as_array().unwrap().is_empty());
    bed.assert_nothing_left(&run);
}

/// `--traffic` through the lab gateway: every tunnel delivers, and charon's
/// own count of what it decrypted on each CHILD_SA (read before the
/// deletes) lies between what linerate sent and received; stored.
#[test]
fn traffic_through_the_lab_gateway_agrees_with_charons_counters() {
    if !root_or_skip("traffic_through_the_lab_gateway_agrees_with_charons_counters") {
        return;
    }
    let json = TempFile::new("tunnels-lab-traffic");
    let db = TempFile::new("tunnels-traffic-db");
    let run = linerate(&[
        "tunnels",
        "--lab",
        "--scenario",
        "vpn-gateway",
        "--count",
        "50",
        "--traffic",
        "--db",
        db.arg(),
        "--json",
        json.arg(),
    ]);
    let own = netns_with_prefix(&format!("lr-tun{}-", run.pid));
    assert!(own.is_empty(), "left behind: {own:?}\n{}", run.dump());
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    assert_eq!(u(&report, "established"), 50, "{}", run.dump());
    let traffic = &report["traffic"];
    let mut decrypted = 0;
    for (t, fr) in tunnels_of(&report)
        .iter()
        .zip(traffic["tunnels"].as_array().unwrap())
    {
        assert!(f(fr, "ttfp_ms") >= f(t, "setup_ms"), "{t} {fr}");
        let (sent, received, gw) = (u(fr, "sent"), u(fr, "received"), u(fr, "gateway_decrypted"));
        assert!(0 < received && received <= gw && gw <= sent, "{fr}");
        decrypted += gw;
    }
    assert_eq!(u(traffic, "gateway_decrypted"), decrypted);
    let checks = report["gateway_checks"].to_string();
    assert!(checks.contains("charon decrypted"), "{checks}");
    let shown = shown_last(&db);
    assert!(shown.contains("Time to first packet [ms]"), "{shown}");
    let runs = linerate(&["runs", "--db", db.arg()]);
    assert!(runs.stdout.contains("first packet p50"), "{}", runs.dump());
}

/// `--traffic` on named ports needs port A; port A's options need
/// `--traffic`: one line each, exit 2, nothing touched.
#[test]
fn traffic_without_port_a_is_refused_in_one_line() {
    let base = [
        "tunnels",
        "--no-db",
        "--port-b",
        "tb",
        "--ip-b",
        "198.19.0.2/24",
        "--gw-b",
        GATEWAY,
        "--psk-file",
        "/nonexistent",
        "--remote-net",
        REMOTE_NET,
        "--local-net",
        LAN,
        "--count",
        "2",
    ];
    for (extra, says) in [
        (&["--traffic"][..], "--traffic needs port A"),
        (
            &["--traffic", "--port-a", "ta"][..],
            "--traffic needs port A",
        ),
        (
            &[
                "--port-a",
                "ta",
                "--ip-a",
                "198.18.0.2/24",
                "--gw-a",
                "198.18.0.1",
            ][..],
            "--port-a is for --traffic",
        ),
        (
            &[
                "--traffic",
                "--port-a",
                "ta",
                "--ip-a",
                "10.9.9.2/24",
                "--gw-a",
                "10.9.9.1",
            ][..],
            "outside the gateway's LAN",
        ),
        (
            &[
                "--traffic",
                "--traffic-rate",
                "0/s",
                "--port-a",
                "ta",
                "--ip-a",
                "198.18.0.2/24",
                "--gw-a",
                "198.18.0.1",
            ][..],
            "1 to 1000",
        ),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        let run = linerate(&args);
        assert_bad_input(&run);
        assert!(run.stderr.contains(says), "{extra:?}: {}", run.dump());
    }
}

/// `--traffic` through the hand-built gateway's LAN side: port A is `ta`.
const PORT_A: [&str; 7] = [
    "--traffic",
    "--port-a",
    "ta",
    "--ip-a",
    "198.18.0.2/24",
    "--gw-a",
    "198.18.0.1",
];

/// The IKE SAs `swanctl --list-sas` lists ESTABLISHED and the CHILD_SAs
/// it lists INSTALLED.
fn listed_by_swanctl(charon: &Charon) -> (usize, usize) {
    let out = charon.swanctl(&["--list-sas"]);
    let ike = out
        .lines()
        .filter(|l| l.contains(", ESTABLISHED, "))
        .count();
    let child = out.lines().filter(|l| l.contains(", INSTALLED, ")).count();
    (ike, child)
}

/// Runs linerate in the bed's tester namespace and meanwhile asks charon
/// (`swanctl --list-sas`, every 100 ms) how many IKE SAs and CHILD_SAs
/// it has; the run and the most it listed at once.
fn run_watching_the_gateway(bed: &Bed, args: &[&str]) -> (Run, (usize, usize)) {
    std::thread::scope(|s| {
        let linerate = s.spawn(|| linerate_in(&bed.t, args));
        let mut peak = (0, 0);
        while !linerate.is_finished() {
            let (ike, child) = listed_by_swanctl(&bed.charon);
            peak = (peak.0.max(ike), peak.1.max(child));
            std::thread::sleep(Duration::from_millis(100));
        }
        (linerate.join().unwrap(), peak)
    })
}

fn steps_of(capacity: &Value) -> &Vec<Value> {
    capacity["steps"].as_array().expect("capacity steps")
}

/// A charon that holds at most 50 IKE SAs (`charon.ikesa_limit = 50`),
/// stepped 20 at a time up to 100 with traffic through every tunnel: steps
/// 1 and 2 hold (20 and 40 up, every tunnel delivering), step 3 brings 10
/// more up and 10 fail, so the largest count held is 40 and the most up
/// at once 50, which is also the most charon itself listed.
#[test]
fn capacity_stops_where_the_gateway_takes_no_more_tunnels() {
    if !root_or_skip("capacity_stops_where_the_gateway_takes_no_more_tunnels") {
        return;
    }
    let bed = Bed::with_settings("tc", "198.19.0.0/24", "  ikesa_limit = 50");
    let json = TempFile::new("tunnels-capacity");
    let mut extra = vec!["--capacity", "--step", "20", "--traffic-rate", "20/s"];
    extra.extend(PORT_A);
    let args = bed.args("100", &json, &extra);
    let (run, peak) = run_watching_the_gateway(&bed, &args);
    // The report, for --nocapture (docs/IPSEC.md shows one).
    println!("linerate {}\n{}{}", args.join(" "), run.stdout, run.stderr);
    // Stopped by the gateway: a result, exit 1.
    assert_eq!(run.code, 1, "{}\n{}", run.dump(), bed.charon.log());
    let report = json.json();
    let c = &report["capacity"];
    assert_eq!(u(c, "held"), 40, "{c}\n{}", run.dump());
    assert_eq!(u(c, "most_up"), 50, "{c}");
    assert_eq!(c["stopped_because"], "setups-failed", "{c}");
    assert_eq!(u(c, "stopped_at_step"), 3, "{c}");
    // charon's own count at its peak is linerate's most up.
    assert_eq!(peak, (50, 50), "swanctl --list-sas at the peak\n{c}");
    let steps = steps_of(c);
    assert_eq!(steps.len(), 3, "{c}");
    for (i, s) in steps.iter().enumerate() {
        let want = if i < 2 { 20 } else { 10 };
        assert_eq!(u(s, "established"), want, "{s}");
        assert_eq!(u(s, "target"), 20 * (i as u64 + 1), "{s}");
        assert_eq!(u(s, "up_after_hold"), [20, 40, 50][i], "{s}");
        assert_eq!(u(s, "deleted_by_gateway"), 0, "{s}");
        let t = &s["traffic"];
        // Every tunnel up through the window, 20 frames/s for 2 s each.
        assert_eq!(u(t, "tunnels"), [20, 40, 50][i], "{s}");
        assert!(u(t, "sent") >= u(t, "tunnels") * 30, "{s}");
        assert_eq!(u(t, "silent"), 0, "{s}");
        assert!(f(t, "loss_pct") <= 1.0, "{s}");
        assert!(f(s, "tunnels_per_s") > 0.0, "{s}");
    }
    assert_eq!(steps[0]["verdict"], "held");
    assert_eq!(steps[1]["verdict"], "held");
    assert_eq!(steps[2]["verdict"], "failed");
    assert_eq!(u(&steps[2], "failed"), 10);
    // charon drops the IKE_SA_INITs over its limit without a word.
    let failures = steps[2]["failures"].as_array().unwrap();
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["reason"], "no answer", "{failures:?}");
    assert_eq!(u(&failures[0], "count"), 10);
    // The peers of steps never run were not attempted.
    assert_eq!(u(&report, "attempted"), 60, "{}", run.dump());
    assert_eq!(u(&report, "established"), 50);
    assert!(
        run.stdout
            .contains("Largest count held        40   (most up at once: 50)"),
        "{}",
        run.dump()
    );
    let line = run.stderr.lines().last().unwrap_or_default();
    assert!(
        line.contains("largest count held 40 tunnels (most up at once 50)")
            && line.contains("10 no answer"),
        "{}",
        run.dump()
    );
    bed.assert_nothing_left(&run);
}

/// A router that drops the decrypted frames of tunnels 41 to 60 (their
/// slices' sources, 198.19.208.0-198.19.247.255, in its forward hook):
/// stepped 20 at a time to 60, steps 1 and 2 hold and step 3 brings its
/// 20 tunnels up but they deliver nothing: traffic degraded, held 40,
/// most up 60, the silent tunnels counted and the first named.
#[test]
fn capacity_stops_where_traffic_through_the_tunnels_degrades() {
    if !root_or_skip("capacity_stops_where_traffic_through_the_tunnels_degrades") {
        return;
    }
    let bed = Bed::new("td", "198.19.0.0/24");
    let r = format!("{}-r", bed.t.strip_suffix("-t").expect("lr-<u>-t"));
    nft_load(
        &r,
        "table inet lrcap {\n  chain drops {\n    type filter hook forward priority 0;\n    ip saddr 198.19.208.0-198.19.247.255 counter drop\n  }\n}\n",
    );
    let json = TempFile::new("tunnels-degrade");
    let mut extra = vec!["--capacity", "--step", "20", "--traffic-rate", "20/s"];
    extra.extend(PORT_A);
    let run = linerate_in(&bed.t, &bed.args("60", &json, &extra));
    assert_eq!(run.code, 1, "{}", run.dump());
    let report = json.json();
    let c = &report["capacity"];
    assert_eq!(u(c, "held"), 40, "{c}");
    assert_eq!(u(c, "most_up"), 60, "{c}");
    assert_eq!(c["stopped_because"], "traffic-degraded", "{c}");
    let steps = steps_of(c);
    assert_eq!(steps.len(), 3, "{c}");
    let last = &steps[2];
    assert_eq!(last["verdict"], "degraded", "{last}");
    assert_eq!((u(last, "established"), u(last, "failed")), (20, 0));
    let t = &last["traffic"];
    assert_eq!(u(t, "tunnels"), 60, "{t}");
    assert_eq!(u(t, "silent"), 20, "{t}");
    assert_eq!(t["silent_peers"][0], "198.19.0.42", "{t}");
    // A third of the window's frames, those of the 20 silent tunnels.
    let loss = f(t, "loss_pct");
    assert!((30.0..=37.0).contains(&loss), "{t}");
    // The router dropped them: its counter has at least the window's loss.
    let dropped = nft_counters(&r);
    assert!(dropped[0] >= u(t, "lost"), "{dropped:?} {t}");
    for s in &steps[..2] {
        assert_eq!(s["verdict"], "held", "{s}");
        assert_eq!(u(&s["traffic"], "silent"), 0, "{s}");
    }
    assert!(
        run.stdout
            .contains("20 tunnels delivered nothing (first 198.19.0.42)"),
        "{}",
        run.dump()
    );
    bed.assert_nothing_left(&run);
}

/// The lab's gateway (no limit of its own) stepped 100 at a time to 300:
/// every step holds, exit 0, the gateway's count after each step's
/// setups agrees, stored and shown again.
#[test]
fn capacity_through_the_lab_gateway_reaches_its_ceiling() {
    if !root_or_skip("capacity_through_the_lab_gateway_reaches_its_ceiling") {
        return;
    }
    let json = TempFile::new("tunnels-lab-capacity");
    let db = TempFile::new("tunnels-capacity-db");
    let run = linerate(&[
        "tunnels",
        "--lab",
        "--scenario",
        "vpn-gateway",
        "--capacity",
        "--step",
        "100",
        "--count",
        "300",
        "--db",
        db.arg(),
        "--json",
        json.arg(),
    ]);
    let own = netns_with_prefix(&format!("lr-tun{}-", run.pid));
    assert!(own.is_empty(), "left behind: {own:?}\n{}", run.dump());
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    let c = &report["capacity"];
    assert_eq!((u(c, "held"), u(c, "most_up")), (300, 300), "{c}");
    assert_eq!(c["stopped_because"], "ceiling", "{c}");
    let steps = steps_of(c);
    assert_eq!(steps.len(), 3);
    for (i, s) in steps.iter().enumerate() {
        let up = 100 * (i as u64 + 1);
        assert_eq!(s["verdict"], "held", "{s}");
        assert_eq!(u(s, "up_after_hold"), up, "{s}");
        assert_eq!(u(s, "gateway_children"), up, "{s}");
    }
    let checks = report["gateway_checks"].to_string();
    assert!(
        checks.contains("after each step's setups charon lists as many"),
        "{checks}"
    );
    assert!(checks.contains("lists no CHILD_SA"), "{checks}");
    let shown = shown_last(&db);
    assert!(shown.contains("Largest count held       300"), "{shown}");
    let runs = linerate(&["runs", "--db", db.arg()]);
    assert!(
        runs.stdout.contains("capacity: 300 tunnels held"),
        "{}",
        runs.dump()
    );
}

/// `--capacity`'s bad combinations: one line each, exit 2, nothing
/// touched (no root needed).
#[test]
fn capacity_bad_combinations_are_refused_in_one_line() {
    let lab = ["tunnels", "--no-db", "--lab", "--scenario", "vpn-gateway"];
    for (extra, says) in [
        (
            &["--capacity", "--step", "0", "--count", "100"][..],
            "--step 0",
        ),
        (
            &["--capacity", "--step", "200", "--count", "100"][..],
            "--step 200 is above --count 100",
        ),
        (
            &["--step", "20", "--count", "100"][..],
            "--step is for --capacity",
        ),
        (
            &["--capacity", "--max-loss", "1", "--count", "100"][..],
            "add --traffic",
        ),
        (
            &["--capacity", "--traffic", "--hold", "1s", "--count", "100"][..],
            "fewer than 2 frames",
        ),
        (&[][..], "needs --count N"),
    ] {
        let mut args = lab.to_vec();
        args.extend_from_slice(extra);
        let run = linerate(&args);
        assert_bad_input(&run);
        assert!(run.stderr.contains(says), "{extra:?}: {}", run.dump());
    }
}

/// `--rekey 1s` through the hand-built gateway with traffic: every
/// tunnel's CHILD_SA is rekeyed about once a second of the 5-s hold, each
/// rekey completes (charon's `child-rekey` events count the same), and
/// the test frames move to each new SA: charon's own byte count of every
/// CHILD_SA, the first ones and every rekey's, is above zero (this
/// charon's kernel-libipsec goes on decrypting a replaced SA's frames, so
/// the loss alone would not show a tunnel left on its old SA).
#[test]
fn every_tunnel_is_rekeyed_during_the_hold_and_its_frames_follow() {
    if !root_or_skip("every_tunnel_is_rekeyed_during_the_hold_and_its_frames_follow") {
        return;
    }
    let bed = Bed::new("tk", "198.19.0.0/24");
    let r = format!("{}-r", bed.t.strip_suffix("-t").expect("lr-<u>-t"));
    nft_load(
        &r,
        "table netdev lrtraffic {\n  chain out {\n    type filter hook egress device \"ra\" priority 0;\n    udp dport 19538 counter\n  }\n}\n",
    );
    let monitor = bed.charon.monitor_events("child-rekey");
    let json = TempFile::new("tunnels-rekey");
    let mut extra = PORT_A.to_vec();
    extra.extend(["--traffic-rate", "100/s", "--hold", "5s", "--rekey", "1s"]);
    let run = linerate_in(&bed.t, &bed.args("5", &json, &extra));
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    let rekeys = &report["rekeys"];
    let (attempted, completed) = (u(rekeys, "attempted"), u(rekeys, "completed"));
    // Tunnel i at (i + ½) / 5 s, then every second: 5 each in 5 s.
    assert_eq!(attempted, 25, "{rekeys}");
    assert_eq!(completed, attempted, "{rekeys}");
    assert_eq!(u(rekeys, "failed"), 0, "{rekeys}");
    let per_s = f(rekeys, "per_s");
    assert!(
        (per_s - completed as f64 / f(rekeys, "hold_s")).abs() < 1e-9,
        "{rekeys}"
    );
    // The gateway saw each of them.
    let deadline = Instant::now() + Duration::from_secs(3);
    while (monitor.events().len() as u64) < completed && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(monitor.events().len() as u64, completed, "{}", run.dump());
    // Every rekey's window held frames (100/s, half a second after the
    // move at least); what was lost in them is the blocked time.
    let (window_sent, lost) = (u(rekeys, "window_sent"), u(rekeys, "lost"));
    assert!(window_sent >= completed * 40, "{rekeys}");
    assert!(lost <= window_sent, "{rekeys}");
    let blocked = f(rekeys, "blocked_ms_per_rekey");
    let expected = 1e3 * lost as f64 / completed as f64 / 100.0;
    assert!((blocked - expected).abs() < 1e-6, "{rekeys}");
    // The frames followed every new SA: each CHILD_SA a rekey replaced
    // (charon logs it closing; the last ones go with their IKE SAs)
    // decrypted some, the first ones and those of earlier rekeys alike.
    let deadline = Instant::now() + Duration::from_secs(3);
    let closed = loop {
        let log = bed.charon.log();
        let closed: Vec<String> = log
            .lines()
            .filter(|l| l.contains("closing CHILD_SA"))
            .map(str::to_string)
            .collect();
        if closed.len() as u64 >= completed || Instant::now() > deadline {
            break closed;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(closed.len() as u64, completed, "{closed:#?}");
    for line in &closed {
        // "closing CHILD_SA lan{6} with SPIs a64af125_i (920 bytes) ..."
        let bytes_in: u64 = line
            .split("_i (")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no inbound byte count in {line}"));
        assert!(
            bytes_in > 0,
            "a CHILD_SA that carried no frame: {line}\n{}",
            run.dump()
        );
    }
    // Nearly every frame arrived.
    let traffic = &report["traffic"];
    for fr in traffic["tunnels"].as_array().unwrap() {
        let (sent, received) = (u(fr, "sent"), u(fr, "received"));
        assert!(sent >= 450, "{fr}");
        assert!(received * 10 >= sent * 9, "{fr}\n{}", run.dump());
    }
    assert_eq!(nft_counters(&r), [u(traffic, "received")], "{}", run.dump());
    assert!(
        run.stdout.contains("Rekeys (each CHILD_SA every 1.00 s"),
        "{}",
        run.dump()
    );
    assert!(
        run.stdout.contains("effective blocked time"),
        "{}",
        run.dump()
    );
    bed.assert_nothing_left(&run);
}

/// `--ipsec-id @peer{n}.vpn.example`: charon has one connection per
/// identity (@peer1.vpn.example .. @peer5.vpn.example), so a peer that
/// sent another identity would find none; all five come up, and while
/// they are held `swanctl --list-sas` lists each peer address with its
/// own identity.
#[test]
fn each_peer_sends_its_own_identity_from_a_template() {
    if !root_or_skip("each_peer_sends_its_own_identity_from_a_template") {
        return;
    }
    let conns: Vec<Conn> = (1..=5)
        .map(|n| Conn {
            name: format!("peer{n}"),
            remote_id: format!("@peer{n}.vpn.example"),
            ..many_conn("198.19.0.0/24")
        })
        .collect();
    let bed = Bed::with_conns("ti", &conns, "");
    let json = TempFile::new("tunnels-ids");
    let args = bed.args(
        "5",
        &json,
        &["--ipsec-id", "@peer{n}.vpn.example", "--hold", "3s"],
    );
    let listed = std::thread::scope(|s| {
        let linerate = s.spawn(|| linerate_in(&bed.t, &args));
        let mut listed = String::new();
        while !linerate.is_finished() {
            let out = bed.charon.swanctl(&["--list-sas"]);
            if out.matches(", ESTABLISHED, ").count() == 5 {
                listed = out;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        (linerate.join().unwrap(), listed)
    });
    let (run, listed) = listed;
    assert_eq!(run.code, 0, "{}", run.dump());
    assert_eq!(u(&json.json(), "established"), 5, "{}", run.dump());
    // "peer3: #3, ESTABLISHED, IKEv2, ..." then "  local  '198.19.0.1' @
    // 198.19.0.1[4500]" and "  remote 'peer3.vpn.example' @ 198.19.0.4[4500]".
    for n in 1..=5 {
        let remote = format!("remote 'peer{n}.vpn.example' @ 198.19.0.{}[", n + 1);
        assert!(
            listed.contains(&remote),
            "no {remote:?} in:\n{listed}\n{}",
            run.dump()
        );
    }
    bed.assert_nothing_left(&run);
}
