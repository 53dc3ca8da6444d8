//! `--ipsec --tunnels N`: linerate emulates N VPN peers on port B of a
//! gateway built by hand (not by linerate's lab code): `common::
//! plain_router`'s namespaces with strongSwan's charon in the router
//! namespace, one connection that takes any peer of 198.19.0.0/24 and any
//! network of 198.19.128.0/17 behind it. Every peer has its own IKE SA and
//! CHILD_SA for its own slice of 198.19.128.0/17; a trial's frames are
//! spread evenly over the tunnels.
//!
//! - Decryption and encryption, TUNNELS tunnels each: every tunnel carries
//!   its exact share, and linerate's per-tunnel counts (its ESP SAs' and
//!   the test frames') agree with charon's own per CHILD_SA (its
//!   `child-updown` events carry each CHILD_SA's final packets-in/out, as
//!   in ipsec_peer.rs), with the router's LAN-side counters (an nftables
//!   counter on ra) and its ipsec0 device; afterwards no SA is left on the
//!   gateway and no address on port B.
//! - A gateway that refuses some peers (its connection takes only the
//!   first half of the addresses): the measurement is refused in one line
//!   naming how many failed and why, exit 2, nothing left behind.
//! - `--ipsec-id user{n}@example`: a charon with one connection per peer
//!   and identity (user1@example .. user3@example) takes all three tunnels,
//!   each peer with its own identity (charon's log); an unknown
//!   placeholder is refused in one line, exit 2.
//!
//! Root only; needs strongSwan (scripts/setup.sh). Run with
//! --test-threads=1.

mod common;

use common::strongswan::*;
use common::*;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

const GATEWAY: &str = "198.19.0.1";
const LAN: &str = "198.18.0.0/24";
/// The network behind linerate, split into one slice per tunnel.
const TUNNEL_NETS: &str = "198.19.128.0/17";
/// Tunnels of each run: charon (user space, kernel-libipsec) sets up about
/// 20 a second here with x25519.
const TUNNELS: u64 = 100;
/// Frames of a 1-s trial: 50 per tunnel.
const FRAMES: u64 = 5000;
const IKE: &str = "aes128-sha256-x25519";

fn many_conn(peers: &str) -> Conn {
    Conn {
        name: "many".into(),
        local_addr: GATEWAY.into(),
        remote_addr: peers.into(),
        proposals: "aes128-sha256-x25519, default".into(),
        local_id: GATEWAY.into(),
        remote_id: "%any".into(),
        local_ts: LAN.into(),
        remote_ts: TUNNEL_NETS.into(),
        esp_proposals: "aes256gcm16".into(),
    }
}

struct Bed {
    charon: Charon,
    _reaper: ProcessReaper,
    t: String,
    r: String,
    psk: TempFile,
    _guard: NetnsGuard,
}

impl Bed {
    fn new(tag: &str, peers: &str) -> Bed {
        Bed::with_conns(tag, &[many_conn(peers)])
    }

    /// A bed whose charon has the connections `conns`.
    fn with_conns(tag: &str, conns: &[Conn]) -> Bed {
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
        // The gateway's LAN side, counted: UDP test frames out of ra
        // (decrypted) and into it (to be encrypted).
        nft_load(
            &r,
            "table ip lan {\n  chain out {\n    type filter hook postrouting priority 0;\n    oifname \"ra\" meta l4proto udp counter\n  }\n  chain in {\n    type filter hook prerouting priority 0;\n    iifname \"ra\" meta l4proto udp counter\n  }\n}\n",
        );
        let key = linerate_helper::random_hex(16).unwrap();
        let charon = Charon::start(&r, conns, &key);
        let psk = TempFile::new("tunnels-psk");
        std::fs::write(&psk.0, format!("{key}\n")).unwrap();
        std::fs::set_permissions(&psk.0, std::fs::Permissions::from_mode(0o600)).unwrap();
        Bed {
            charon,
            _reaper: ProcessReaper(vec![t.clone(), r.clone()]),
            t,
            r,
            psk,
            _guard: guard,
        }
    }

    fn trial(&self, extra: &[&str]) -> Run {
        let mut args = vec!["trial", "--no-db"];
        args.extend_from_slice(&HOSTS);
        args.extend_from_slice(&[
            "--ipsec",
            "--psk-file",
            self.psk.arg(),
            "--remote-net",
            TUNNEL_NETS,
            "--ike",
            IKE,
        ]);
        args.extend_from_slice(extra);
        linerate_in(&self.t, &args)
    }

    fn assert_nothing_left(&self, run: &Run) {
        let addrs = sh("ip", &["-n", &self.t, "-4", "addr", "show", "dev", "tb"]);
        assert!(
            addrs.trim().is_empty(),
            "port B kept addresses:\n{addrs}\n{}",
            run.dump()
        );
        let left = wait_no_processes(std::slice::from_ref(&self.t), Duration::from_secs(3));
        assert!(left.is_empty(), "processes left: {left:?}\n{}", run.dump());
        let sas = self.charon.wait_no_sas();
        assert!(
            sas.is_empty(),
            "the gateway kept {} IKE SAs (no Delete arrived)\n{}",
            sas.len(),
            run.dump()
        );
    }
}

/// Frames the gateway's kernel dropped on their way to or from charon (as
/// in ipsec_peer.rs): then counts may differ by those, else exactly.
fn gateway_drops(ns: &str) -> u64 {
    let snmp = sh("ip", &["netns", "exec", ns, "cat", "/proc/net/snmp"]);
    let udp: Vec<&str> = snmp.lines().filter(|l| l.starts_with("Udp:")).collect();
    let (names, values) = (udp[0].split_whitespace(), udp[1].split_whitespace());
    let rcvbuf = names
        .zip(values)
        .find(|(n, _)| *n == "RcvbufErrors")
        .and_then(|(_, v)| v.parse::<u64>().ok())
        .expect("Udp RcvbufErrors");
    let out = sh("ip", &["-n", ns, "-s", "-j", "link", "show", "ipsec0"]);
    let link: serde_json::Value = serde_json::from_str(&out).expect("ip -j");
    rcvbuf + link[0]["stats64"]["tx"]["dropped"].as_u64().unwrap_or(0)
}

/// The tunnel of a CHILD_SA: its remote traffic selector is slice `i` of
/// 198.19.128.0/17 (`/24` each for 100 tunnels: 128 slices).
fn tunnel_of(child: &Vici, slice_bits: u32) -> usize {
    let Some(Vici::List(ts)) = child.get("remote-ts") else {
        panic!("no remote-ts in {child:?}")
    };
    let (addr, _) = ts[0].split_once('/').expect("a network");
    let addr: std::net::Ipv4Addr = addr.parse().unwrap();
    let first = u32::from(std::net::Ipv4Addr::new(198, 19, 128, 0));
    ((u32::from(addr) - first) >> (32 - slice_bits)) as usize
}

/// One `trial --tunnels TUNNELS` in `direction`, checked tunnel by tunnel
/// against charon.
fn carry(bed: &Bed, direction: &str, extra: &[&str]) -> (Run, serde_json::Value) {
    let what = format!("--tunnels {TUNNELS} --direction {direction} {extra:?}");
    let monitor = bed.charon.monitor();
    let drops0 = gateway_drops(&bed.r);
    let lan0 = nft_counters(&bed.r);
    let (tun_rx0, tun_tx0) = link_packets(&bed.r, "ipsec0");
    let json = TempFile::new("tunnels-trial");
    let n = TUNNELS.to_string();
    let rate = format!("{FRAMES}fps");
    let mut args = vec![
        "--tunnels",
        &n,
        "--direction",
        direction,
        "--frame-size",
        "128",
        "--rate",
        &rate,
        "--duration",
        "1s",
        "--json",
        json.arg(),
    ];
    args.extend_from_slice(extra);
    let run = bed.trial(&args);
    let drops = gateway_drops(&bed.r) - drops0;
    let v = json.json();
    assert_eq!(
        run.code,
        if drops > 0 { 1 } else { 0 },
        "{what}: {}\n",
        run.dump()
    );
    assert_trial_consistent(&v);
    assert_eq!(u(&v, "tx_frames"), FRAMES, "{what}: {v}");
    assert_eq!(
        u(&v, "lost_frames"),
        drops,
        "{what}: lost = the gateway's drops"
    );
    // Each tunnel its share.
    let tunnels = v["tunnels"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no per-tunnel counts: {v}"));
    assert_eq!(tunnels.len() as u64, TUNNELS, "{what}");
    let rx: Vec<u64> = tunnels.iter().map(|t| u(t, "rx")).collect();
    for (i, t) in tunnels.iter().enumerate() {
        assert_eq!(u(t, "tx"), FRAMES / TUNNELS, "{what}: tunnel {i}: {t}");
    }
    assert_eq!(rx.iter().sum::<u64>(), u(&v, "rx_frames"), "{what}");
    // Receiving threads (--rx-threads n): thread k counted stream k, the
    // frames of the generator thread that sent tunnels k, k + n, ...
    if let Some(threads) = v.get("rx_threads").and_then(|t| t.as_array()) {
        let n = threads.len();
        for (k, t) in threads.iter().enumerate() {
            let mine: u64 = rx.iter().skip(k).step_by(n).sum();
            assert_eq!(t.as_u64(), Some(mine), "{what}: receiving thread {k}");
        }
    }
    let esp = v["esp"]["per_tunnel"]
        .as_array()
        .unwrap_or_else(|| panic!("{what}: no per-tunnel ESP counts: {}", v["esp"]));
    assert_eq!(esp.len() as u64, TUNNELS, "{what}");
    let esp: Vec<(u64, u64)> = esp
        .iter()
        .map(|p| (p[0].as_u64().unwrap(), p[1].as_u64().unwrap()))
        .collect();
    // The stderr names each tunnel's spread.
    assert!(
        run.stdout.contains(&format!("{TUNNELS} tunnels")),
        "{what}: no per-tunnel line:\n{}",
        run.dump()
    );

    // charon's CHILD_SAs as they went down, one per tunnel.
    let slice_bits = 17 + (TUNNELS as f64).log2().ceil() as u32;
    let wanted = TUNNELS as usize;
    let downs = || -> Vec<ChildEvent> {
        monitor
            .events()
            .iter()
            .flat_map(ChildEvent::of)
            .filter(|c| !c.up)
            .collect()
    };
    let start = std::time::Instant::now();
    while downs().len() < wanted && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let downs = downs();
    assert_eq!(downs.len(), wanted, "{what}: CHILD_SAs down");
    let mut seen = vec![false; wanted];
    let mut gw_out_all = Vec::new();
    let listed: Vec<(usize, u64, u64)> = downs
        .iter()
        .map(|d| {
            (
                tunnel_of(&d.child, slice_bits),
                d.child.number("packets-in"),
                d.child.number("packets-out"),
            )
        })
        .collect();
    let _ = listed;
    for d in &downs {
        let i = tunnel_of(&d.child, slice_bits);
        assert!(
            i < wanted && !seen[i],
            "{what}: CHILD_SA of tunnel {i} twice or beyond"
        );
        seen[i] = true;
        let (gw_in, gw_out) = (d.child.number("packets-in"), d.child.number("packets-out"));
        let peer = format!("198.19.0.{}", 2 + i);
        assert_eq!(d.ike.text("remote-host"), peer, "{what}: tunnel {i}'s peer");
        match direction {
            "decrypt" => {
                // linerate encrypted, the gateway decrypted, port A got.
                assert_eq!(esp[i].0, FRAMES / TUNNELS, "{what}: tunnel {i}");
                if drops == 0 {
                    assert_eq!(gw_in, esp[i].0, "{what}: tunnel {i}: charon's packets-in");
                }
                assert_eq!(gw_in, rx[i], "{what}: tunnel {i}: received at port A");
                assert_eq!(gw_out, 0, "{what}: tunnel {i}");
            }
            _ => {
                // The gateway encrypted, linerate decrypted on this SA.
                assert_eq!(esp[i].1, FRAMES / TUNNELS, "{what}: tunnel {i}");
                assert_eq!(esp[i].1, rx[i], "{what}: tunnel {i}");
                assert_eq!(gw_in, 0, "{what}: tunnel {i}");
                gw_out_all.push((i, gw_out));
            }
        }
    }
    // The LAN side and the tunnel device count the same frames.
    let lan1 = nft_counters(&bed.r);
    let (lan_out, lan_in) = (lan1[0] - lan0[0], lan1[1] - lan0[1]);
    if direction == "encrypt" {
        // Before the trial the engine sends learning frames to the
        // destinations of the spread (RFC 2544 section 23), which the
        // gateway encrypts too: charon's packets-out of each CHILD_SA is
        // the trial's frames of the tunnel (what linerate decrypted) and
        // an equal share of those, exactly.
        let learning = lan_in - FRAMES;
        assert_eq!(
            learning % TUNNELS,
            0,
            "{what}: learning frames spread evenly: {learning}"
        );
        for &(i, out) in &gw_out_all {
            assert_eq!(
                out,
                esp[i].1 + learning / TUNNELS,
                "{what}: tunnel {i}: charon's packets-out against linerate's decrypted and the learning frames ({learning} in all)"
            );
        }
    }
    let (tun_rx1, tun_tx1) = link_packets(&bed.r, "ipsec0");
    let total_rx = u(&v, "rx_frames");
    match direction {
        "decrypt" => {
            assert_eq!(lan_out, total_rx, "{what}: frames out of the LAN port");
            assert_eq!(tun_rx1 - tun_rx0, total_rx, "{what}: ipsec0 rx");
        }
        _ => {
            // Every frame into the LAN port was routed into ipsec0.
            assert_eq!(tun_tx1 - tun_tx0, lan_in, "{what}: ipsec0 tx");
            assert_eq!(total_rx, FRAMES - drops, "{what}");
        }
    }
    bed.assert_nothing_left(&run);
    (run, v)
}

#[test]
fn every_tunnel_carries_its_share_and_the_gateway_counts_the_same() {
    if !root_or_skip("every_tunnel_carries_its_share_and_the_gateway_counts_the_same") {
        return;
    }
    let bed = Bed::new("tn", "198.19.0.0/24");
    for direction in ["decrypt", "encrypt"] {
        carry(&bed, direction, &[]);
    }
}

/// `--tx-threads 2` with `--ipsec --tunnels N`: the tunnels dealt out to
/// two generator threads (tunnel i to thread i mod 2), each encrypting its
/// own tunnels' frames with their SAs, so no SA's sequence numbers cross
/// threads (the gateway's replay window would drop frames that did). The
/// same exact shares and the gateway's own counts per CHILD_SA as with
/// one thread. Fewer tunnels than threads is refused
/// in one line.
#[test]
fn tunnels_dealt_out_to_two_encrypting_threads_keep_exact_counts() {
    if !root_or_skip("tunnels_dealt_out_to_two_encrypting_threads_keep_exact_counts") {
        return;
    }
    let bed = Bed::new("t2", "198.19.0.0/24");
    // Port B's veth has one queue: af_packet's threads share it (af_xdp
    // needs a queue per thread).
    let (run, _) = carry(
        &bed,
        "decrypt",
        &["--tx-threads", "2", "--engine", "af_packet"],
    );
    assert!(
        run.stderr
            .contains("dealt out to 2 generator threads (tunnel i to thread i mod 2)"),
        "{}",
        run.dump()
    );
    // Receiving threads both ways. decrypt: port A counts the gateway's
    // clear frames on two threads, each the stream of one encrypting
    // thread. encrypt: port B decrypts on two threads, tunnel i's ESP on
    // thread i mod 2 (steered by its peer address), each counting the
    // stream of the generator thread that sends its tunnels. `carry`
    // checks each thread's count against its tunnels' frames.
    let threads = [
        "--tx-threads",
        "2",
        "--rx-threads",
        "2",
        "--engine",
        "af_packet",
    ];
    for direction in ["decrypt", "encrypt"] {
        let (run, v) = carry(&bed, direction, &threads);
        assert_eq!(
            v["rx_threads"].as_array().map(Vec::len),
            Some(2),
            "{direction}: {}",
            run.dump()
        );
        assert_eq!(v["esp"]["unknown_spi"], 0, "{direction}: {}", run.dump());
        if direction == "encrypt" {
            assert!(
                run.stderr
                    .contains("port B decrypts on 2 receiving threads"),
                "{}",
                run.dump()
            );
        }
    }
    let run = bed.trial(&["--tunnels", "1", "--tx-threads", "2", "--rate", "1000fps"]);
    assert_eq!(run.code, 2, "{}", run.dump());
    assert!(
        run.stderr
            .contains("--tx-threads 2 with --ipsec deals the tunnels out")
            && run.stderr.contains("give --tunnels 2 or more"),
        "{}",
        run.dump()
    );
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.dump());
}

/// A gateway that takes only some of the peers (198.19.0.0/27: .2 to .31
/// of .2 to .41): the rest fail, the run is refused in one line
/// naming how many and the gateway's answer, and nothing is left.
#[test]
fn tunnels_that_do_not_come_up_refuse_the_measurement() {
    if !root_or_skip("tunnels_that_do_not_come_up_refuse_the_measurement") {
        return;
    }
    let bed = Bed::new("tf", "198.19.0.0/27");
    let run = bed.trial(&[
        "--tunnels",
        "40",
        "--frame-size",
        "128",
        "--rate",
        "1000fps",
        "--duration",
        "1s",
    ]);
    assert_bad_input(&run);
    assert!(
        run.stderr.contains("10 of 40 tunnels did not come up"),
        "{}",
        run.dump()
    );
    bed.assert_nothing_left(&run);
}

/// The lab's vpn-gateway with `rfc2544 --tunnels 1,10`: one run per count
/// (1 tunnel from 198.19.0.2, 10 from 198.19.64.1 upward), each its own
/// table, then the table by tunnel count; the JSON holds both runs, the
/// 10-tunnel one with its peers, SPIs and per-tunnel counts of every trial
/// summing to the trial's; no lab left.
#[test]
fn the_lab_gateway_is_compared_over_tunnel_counts() {
    if !root_or_skip("the_lab_gateway_is_compared_over_tunnel_counts") {
        return;
    }
    let before = netns_list();
    let json = TempFile::new("tunnels-lab");
    let run = linerate(&[
        "rfc2544",
        "--no-db",
        "--scenario",
        "vpn-gateway",
        "--tunnels",
        "1,10",
        "--sizes",
        "64",
        "--trial-duration",
        "1s",
        "--resolution",
        "5%",
        "--max-rate",
        "1%",
        "--json",
        json.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(
        run.stdout.contains("Frame rate with 1 / 10 tunnels"),
        "{}",
        run.dump()
    );
    assert!(run.stdout.contains("10 tunnels"), "{}", run.dump());
    let v = json.json();
    let runs = v["tunnels"].as_array().expect("tunnels runs");
    assert_eq!(runs.len(), 2, "{v}");
    assert_eq!(u(&runs[1], "count"), 10);
    let ipsec = &runs[1]["report"]["ipsec"]["tunnels"];
    assert_eq!(u(ipsec, "count"), 10, "{ipsec}");
    assert_eq!(ipsec["first_peer"], "198.19.64.1", "{ipsec}");
    assert_eq!(ipsec["spi_out"].as_array().map(Vec::len), Some(10));
    for r in runs[1]["report"]["results"].as_array().unwrap() {
        for t in r["trials"].as_array().unwrap() {
            let per: Vec<(u64, u64)> = t["tunnels"]
                .as_array()
                .expect("per-tunnel counts")
                .iter()
                .map(|x| (u(x, "tx"), u(x, "rx")))
                .collect();
            assert_eq!(per.len(), 10);
            assert_eq!(per.iter().map(|p| p.0).sum::<u64>(), u(t, "tx_frames"));
            assert_eq!(per.iter().map(|p| p.1).sum::<u64>(), u(t, "rx_frames"));
        }
    }
    let left = new_lr_netns(&before, &netns_list());
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A gateway built by hand with `rfc2544 --tunnels 1,4` on the ports: one
/// run per count through the same gateway, each with its own tunnels,
/// the counts compared, every frame of every trial in some tunnel's
/// share, and nothing left (port B's addresses, the gateway's SAs).
#[test]
fn a_gateway_on_named_ports_is_compared_over_tunnel_counts() {
    if !root_or_skip("a_gateway_on_named_ports_is_compared_over_tunnel_counts") {
        return;
    }
    let bed = Bed::new("tc", "198.19.0.0/24");
    let json = TempFile::new("tunnels-ports");
    let mut args = vec!["rfc2544", "--no-db"];
    args.extend_from_slice(&HOSTS);
    args.extend_from_slice(&[
        "--ipsec",
        "--psk-file",
        bed.psk.arg(),
        "--remote-net",
        TUNNEL_NETS,
        "--ike",
        IKE,
        "--tunnels",
        "1,4",
        "--sizes",
        "128",
        "--trial-duration",
        "1s",
        "--max-rate",
        "2000fps",
        "--json",
        json.arg(),
    ]);
    let run = linerate_in(&bed.t, &args);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(
        run.stdout.contains("Frame rate with 1 / 4 tunnels"),
        "{}",
        run.dump()
    );
    let v = json.json();
    let runs = v["tunnels"].as_array().expect("tunnels runs");
    assert_eq!(runs.len(), 2, "{v}");
    for (run_json, count) in runs.iter().zip([1u64, 4]) {
        assert_eq!(u(run_json, "count"), count);
        for r in run_json["report"]["results"].as_array().unwrap() {
            assert!(f(r, "throughput_fps") > 0.0, "{r}");
            for t in r["trials"].as_array().unwrap() {
                if count == 1 {
                    continue;
                }
                let per: Vec<u64> = t["tunnels"]
                    .as_array()
                    .expect("per-tunnel counts")
                    .iter()
                    .map(|x| u(x, "rx"))
                    .collect();
                assert_eq!(per.len(), 4);
                assert_eq!(per.iter().sum::<u64>(), u(t, "rx_frames"));
            }
        }
    }
    bed.assert_nothing_left(&run);
}

/// `--tunnels 10 --rekey 2s` in a 10-s trial, each direction: every
/// tunnel's CHILD_SA is rekeyed about every 2 s (50 rekeys spread over the
/// trial, none failed), each tunnel keeps its exact share of the frames
/// across its rekeys, nothing is lost but what the gateway's kernel
/// dropped, the LAN side's counter and ipsec0 agree with linerate, and the
/// CHILD_SA charon takes down at the end of each tunnel is that tunnel's
/// last rekey's.
#[test]
fn every_tunnel_is_rekeyed_under_load_and_keeps_its_share() {
    if !root_or_skip("every_tunnel_is_rekeyed_under_load_and_keeps_its_share") {
        return;
    }
    const N: u64 = 10;
    const FRAMES: u64 = 20_000;
    let bed = Bed::new("tr", "198.19.0.0/24");
    for direction in ["decrypt", "encrypt"] {
        let what = format!("--tunnels {N} --rekey 2s --direction {direction}");
        let monitor = bed.charon.monitor();
        let drops0 = gateway_drops(&bed.r);
        let lan0 = nft_counters(&bed.r);
        let (tun_rx0, _) = link_packets(&bed.r, "ipsec0");
        let json = TempFile::new("tunnels-rekey");
        let run = bed.trial(&[
            "--tunnels",
            &N.to_string(),
            "--rekey",
            "2s",
            "--direction",
            direction,
            "--frame-size",
            "128",
            "--rate",
            "2000fps",
            "--duration",
            "10s",
            "--json",
            json.arg(),
        ]);
        let drops = gateway_drops(&bed.r) - drops0;
        let v = json.json();
        assert_trial_consistent(&v);
        assert_eq!(u(&v, "tx_frames"), FRAMES, "{what}: {}", run.dump());
        assert_eq!(u(&v, "lost_frames"), drops, "{what}: {}", run.dump());
        let rekeys = &v["esp"]["rekeys"];
        let done = u(rekeys, "done");
        // The keeper starts before the trial (its first rekeys are spread
        // from then on), so a tunnel's 5th or 6th may fall in the trial.
        assert!(
            (4 * N..=6 * N).contains(&done) && u(rekeys, "failed") == 0,
            "{what}: {rekeys}"
        );
        // Every tunnel was rekeyed, each 4 to 6 times.
        let list = rekeys["list"].as_array().expect("rekeys listed");
        assert_eq!(list.len() as u64, done, "{what}");
        let mut per_tunnel = vec![0u64; N as usize];
        let mut last_spi = vec![0u64; N as usize];
        for r in list {
            let i = u(r, "tunnel") as usize;
            per_tunnel[i] += 1;
            last_spi[i] = u(r, "spi_out");
        }
        assert!(
            per_tunnel.iter().all(|&c| (4..=6).contains(&c)),
            "{what}: rekeys per tunnel {per_tunnel:?}"
        );
        // Each tunnel its exact share across its rekeys.
        let tunnels = v["tunnels"].as_array().expect("per-tunnel counts");
        for (i, t) in tunnels.iter().enumerate() {
            assert_eq!(u(t, "tx"), FRAMES / N, "{what}: tunnel {i}: {t}");
        }
        let rx: u64 = tunnels.iter().map(|t| u(t, "rx")).sum();
        assert_eq!(rx, u(&v, "rx_frames"), "{what}");

        // charon's last CHILD_SA of each tunnel is its last rekey's.
        let slice_bits = 17 + (N as f64).log2().ceil() as u32;
        let start = std::time::Instant::now();
        let downs = loop {
            let downs: Vec<ChildEvent> = monitor
                .events()
                .iter()
                .flat_map(ChildEvent::of)
                .filter(|c| !c.up)
                .collect();
            if downs.len() >= N as usize || start.elapsed() > Duration::from_secs(10) {
                break downs;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        assert_eq!(downs.len() as u64, N, "{what}: CHILD_SAs down at the end");
        // The keeper goes on rekeying after the trial until the Deletes:
        // the CHILD_SA at the end is the trial's last rekey's, or a later
        // one, never one the trial's rekeys replaced.
        let replaced: std::collections::HashSet<String> = list
            .iter()
            .map(|r| format!("{:08x}", u(r, "spi_out")))
            .collect();
        for d in &downs {
            let i = tunnel_of(&d.child, slice_bits);
            let at_end = d.child.text("spi-in").to_string();
            assert!(
                at_end == format!("{:08x}", last_spi[i]) || !replaced.contains(&at_end),
                "{what}: tunnel {i}'s CHILD_SA at the end ({at_end}) is one a rekey replaced, not its last (0x{:08x})",
                last_spi[i]
            );
        }
        // The gateway's own counts of the clear side.
        let lan1 = nft_counters(&bed.r);
        let (tun_rx1, _) = link_packets(&bed.r, "ipsec0");
        if direction == "decrypt" {
            assert_eq!(lan1[0] - lan0[0], rx, "{what}: frames out of the LAN port");
            assert_eq!(tun_rx1 - tun_rx0, rx, "{what}: ipsec0 rx");
        } else {
            assert_eq!(rx, FRAMES - drops, "{what}");
        }
        bed.assert_nothing_left(&run);
    }
}

/// `--tunnels 3 --ipsec-id user{n}@example`: charon has one connection
/// per peer address and identity (198.19.0.2 as user1@example, ...), so a
/// peer that sent another identity would find none; all three
/// come up (the trial runs), and charon's log names each peer address
/// with its own identity; one tunnel alone is tunnel 1 (user1@example);
/// with one identity for all, two of the three do not come up. `{id}` is
/// no placeholder: refused in one line.
#[test]
fn every_tunnel_sends_its_own_identity_from_a_template() {
    if !root_or_skip("every_tunnel_sends_its_own_identity_from_a_template") {
        return;
    }
    let conns: Vec<Conn> = (1..=3)
        .map(|n| Conn {
            name: format!("user{n}"),
            remote_id: format!("user{n}@example"),
            ..many_conn(&format!("198.19.0.{}", n + 1))
        })
        .collect();
    let bed = Bed::with_conns("ti", &conns);
    let trial = |id: &str| {
        bed.trial(&[
            "--tunnels",
            "3",
            "--ipsec-id",
            id,
            "--frame-size",
            "128",
            "--rate",
            "1000fps",
            "--duration",
            "1s",
        ])
    };
    let run = trial("user{n}@example");
    assert!(run.code == 0 || run.code == 1, "{}", run.dump());
    let log = bed.charon.log();
    for n in 1..=3 {
        // "IKE_SA user2[2] established between 198.19.0.1[198.19.0.1]...198.19.0.3[user2@example]"
        let peer = format!("...198.19.0.{}[user{n}@example]", n + 1);
        assert!(
            log.lines()
                .any(|l| l.contains(&format!("IKE_SA user{n}[")) && l.contains(&peer)),
            "charon's log has no IKE_SA user{n} of {peer}:\n{log}"
        );
    }
    bed.assert_nothing_left(&run);
    // One tunnel (one IKE session, not the fleet): it is tunnel 1.
    let run = bed.trial(&[
        "--ipsec-id",
        "user{n}@example",
        "--frame-size",
        "128",
        "--rate",
        "1000fps",
        "--duration",
        "1s",
    ]);
    assert!(run.code == 0 || run.code == 1, "{}", run.dump());
    // One identity for every peer: charon has a connection for the first
    // only, and the measurement is refused.
    let run = trial("user1@example");
    assert_bad_input(&run);
    assert!(
        run.stderr.contains("2 of 3 tunnels did not come up"),
        "{}",
        run.dump()
    );
    bed.assert_nothing_left(&run);
    let run = trial("user{id}@example");
    assert_bad_input(&run);
    assert!(
        run.stderr.contains("{id} is no placeholder"),
        "{}",
        run.dump()
    );
}
