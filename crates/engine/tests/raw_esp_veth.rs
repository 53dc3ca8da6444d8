//! Raw ESP (IPv4 protocol 50) through both socket engines on a veth pair:
//! port A encrypts every test frame with a static-key SA (`EspSend`,
//! `Encapsulation::Raw`), port B decrypts and counts (`EspReceive`).
//!
//! - Every frame sealed on one side is opened and counted on the other;
//!   the SAs' counters (totals and the one tunnel's) equal the engine's
//!   frame counts exactly.
//! - Every 97th frame gets one byte flipped on its way (after sealing):
//!   counted as an ICV failure and as errored, never as received.
//! - The frames on the wire are what `linerate overhead` says for raw ESP
//!   (8 bytes fewer than ESP in UDP), from the SA's own byte count.
//! - af_packet leaves the frames to the kernel too: with port B's address
//!   up, a kernel without ESP answers protocol 50 with ICMP "protocol
//!   unreachable"; the engine's `ProtocolSink` stops that (the namespace's
//!   ICMP counter does not move).
//!
//! Needs root and iproute2: without root it prints "SKIPPED (needs root)"
//! and passes; with `LINERATE_REQUIRE_ALL=1` (scripts/test.sh) it fails.

use linerate_engine::esp_sink::{ProtocolSink, IPPROTO_ESP};
use linerate_engine::ipsec::{EspReceive, EspSend, SharedCounts};
use linerate_engine::transform::SendTransform;
use linerate_engine::{Engine, EngineConfig, HostConfig, TesterPort};
use linerate_esp::{Encapsulation, EspSuite, Inbound, Outbound, SaKeys};
use linerate_port::af_packet::{AfPacketOptions, AfPacketPort};
use linerate_port::af_xdp::{AfXdpOptions, AfXdpPort};
use linerate_results::TrialSpec;
use linerate_testkit::{is_root, skip, Netns, Veth};
use linerate_wire::overhead::{Auth, Cipher, Encapsulation as Overhead};
use linerate_wire::FrameSize;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
/// Frames per trial: 20,000 frames/s for 0.5 s.
const FPS: f64 = 20_000.0;
const FRAMES: u64 = 10_000;
/// Every this-many-th sealed frame gets a byte flipped.
const FLIP_EVERY: u64 = 97;

/// A namespace of its own holding veth pair `ra` <-> `rb`, both up, MTU
/// 1600 (room for ESP's growth), without IPv6; deleted on drop, also when
/// the test panics.
fn veth_netns(tag: &str) -> Netns {
    Veth::new("ra", "rb")
        .mtu(1600)
        .in_one_netns(&format!("lrraw-{tag}"))
}

/// ICMP destination-unreachable messages the namespace's kernel sent.
fn icmp_unreachable_sent(ns: &Netns) -> u64 {
    let snmp = ns.read("/proc/net/snmp");
    let mut icmp = snmp.lines().filter(|l| l.starts_with("Icmp:"));
    let (names, values) = (icmp.next().unwrap(), icmp.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "OutDestUnreachs")
        .expect("Icmp: OutDestUnreachs");
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

fn keys(suite: EspSuite) -> SaKeys {
    let enc = (0..suite.encryption_keymat_len() as u8).collect();
    let integ = (0..suite.integrity_key_len() as u8).map(|b| !b).collect();
    SaKeys::new(suite, 0x5eed_0001, enc, integ).unwrap()
}

/// Seals with the inner transform, then flips one byte of every
/// `FLIP_EVERY`-th frame's ESP payload, as a damaging link would.
struct Flipping {
    inner: EspSend,
    sealed: u64,
    flipped: u64,
}

impl SendTransform for Flipping {
    fn apply(&mut self, buf: &mut [u8], len: usize) -> usize {
        let n = self.inner.apply(buf, len);
        self.sealed += 1;
        if self.sealed % FLIP_EVERY == 0 {
            // Behind the 34 bytes of Ethernet and IPv4 and the 8 of SPI
            // and sequence number: in the IV and ciphertext.
            buf[34 + 8 + 4] ^= 0x01;
            self.flipped += 1;
        }
        n
    }
    fn growth(&self, len: usize) -> usize {
        self.inner.growth(len)
    }
    fn frames_left(&self) -> Option<u64> {
        self.inner.frames_left()
    }
    fn describe(&self) -> String {
        format!(
            "{} (every {FLIP_EVERY}th frame flipped)",
            self.inner.describe()
        )
    }
    fn trial_ends(&mut self) {
        self.inner.trial_ends();
    }
}

fn host(ip: Ipv4Addr, gateway: Ipv4Addr) -> HostConfig {
    HostConfig {
        ip,
        prefix_len: 24,
        gateway,
        gateway_mac: None,
        also_answers: None,
        inner: None,
        ipv6: None,
        vlan: None,
    }
}

/// Both ends opened with `engine`; A seals raw ESP (flipping some), B
/// opens it.
fn open(netns: &Netns, engine: &str, suite: EspSuite, counts: &SharedCounts) -> Engine {
    let ns = Some(netns.name());
    let max_frame_len = 1514 + 128;
    let (mut a, mut b) = match engine {
        "af_xdp" => {
            let o = AfXdpOptions {
                max_frame_len,
                ..AfXdpOptions::default()
            };
            (
                TesterPort::from_port(AfXdpPort::open("ra", ns, &o).unwrap()),
                TesterPort::from_port(AfXdpPort::open("rb", ns, &o).unwrap()),
            )
        }
        _ => {
            let o = AfPacketOptions {
                max_frame_len,
                // Decryption needs the whole frame.
                rx_snaplen: u16::MAX as u32,
                ..AfPacketOptions::default()
            };
            (
                TesterPort::from_port(AfPacketPort::open("ra", ns, &o).unwrap()),
                TesterPort::from_port(AfPacketPort::open("rb", ns, &o).unwrap()),
            )
        }
    };
    let send = EspSend::new(
        Outbound::new(keys(suite)).unwrap(),
        IP_A,
        IP_B,
        counts.clone(),
    )
    .encapsulated(Encapsulation::Raw);
    assert!(
        send.describe().contains("raw (IP protocol 50)"),
        "{}",
        send.describe()
    );
    let flipping = Flipping {
        inner: send,
        sealed: 0,
        flipped: 0,
    };
    let receive = EspReceive::new(Inbound::new(keys(suite)).unwrap(), counts.clone())
        .encapsulated(Encapsulation::Raw);
    a.set_transforms(Some(Box::new(flipping)), None, engine)
        .unwrap();
    b.set_transforms(None, Some(Box::new(receive)), engine)
        .unwrap();
    let cfg = EngineConfig {
        straggler_wait: Duration::from_millis(300),
        name: engine.to_string(),
        ..EngineConfig::default()
    };
    let mut e = Engine::new(a, host(IP_A, IP_B), b, host(IP_B, IP_A), cfg);
    e.resolve().unwrap();
    e
}

fn spec(size: u64) -> TrialSpec {
    TrialSpec {
        frame: FrameSize::from_frame(size).unwrap(),
        mix: None,
        intended_fps: FPS,
        duration: Duration::from_secs_f64(FRAMES as f64 / FPS),
    }
}

/// One trial of `engine`: exact counts, the flipped frames as ICV
/// failures, the wire size `overhead` gives.
fn counts_exactly(netns: &Netns, engine: &str, suite: EspSuite, size: u64) {
    let counts = SharedCounts::default();
    let mut e = open(netns, engine, suite, &counts);
    let r = e.run_trial(&spec(size), &AtomicBool::new(false)).unwrap();
    drop(e);
    let c = counts.lock().unwrap().clone();
    let what = format!("{engine} {suite} {size} B: {r:?}\n{c:?}");
    let flipped = r.tx_frames / FLIP_EVERY;
    assert_eq!(r.tx_frames, FRAMES, "{what}");
    assert!(c.raw_esp, "{what}");
    // Every frame sealed, every intact one opened and counted.
    assert_eq!(c.sent.packets, r.tx_frames, "{what}");
    assert_eq!(c.received.icv_failures, flipped, "{what}");
    assert_eq!(c.received.packets, r.tx_frames - flipped, "{what}");
    assert_eq!(r.rx_frames, c.received.packets, "{what}");
    assert_eq!(r.errored_frames, flipped, "{what}");
    assert_eq!(r.lost_frames, flipped, "{what}");
    let other = c.received.replays + c.received.too_old + c.received.malformed;
    assert_eq!((other, c.unknown_spi, c.not_esp), (0, 0, 0), "{what}");
    // The one tunnel's counters are the totals.
    assert_eq!(c.per_tunnel.len(), 1, "{what}");
    assert_eq!(c.per_tunnel[0].sent, c.sent, "{what}");
    assert_eq!(c.per_tunnel[0].received, c.received, "{what}");
    // On the wire: what `linerate overhead --esp SUITE --esp-encap raw`
    // says, from the SA's own bytes (SPI to ICV) + Ethernet, IPv4, FCS.
    let wire = c.sent.esp_bytes / c.sent.packets + 14 + 20 + 4;
    let l3 = size - 18;
    let mut overhead = Overhead {
        esp: Some(match suite {
            EspSuite::Aes128Gcm16 | EspSuite::Aes256Gcm16 => (Cipher::AesGcm, Auth::None),
            _ => (Cipher::AesCbc, Auth::Sha256),
        }),
        ..Overhead::default()
    };
    assert_eq!(wire as usize, overhead.outer_frame(l3 as usize), "{what}");
    overhead.nat_t = true;
    assert_eq!(
        wire as usize + 8,
        overhead.outer_frame(l3 as usize),
        "{what}"
    );
}

#[test]
fn raw_esp_is_sealed_opened_and_counted_exactly_by_both_engines() {
    if !is_root() {
        skip("(needs root): raw_esp_is_sealed_opened_and_counted_exactly_by_both_engines");
        return;
    }
    let netns = veth_netns("c");
    for engine in ["af_xdp", "af_packet"] {
        for (suite, size) in [
            (EspSuite::Aes256Gcm16, 64),
            (EspSuite::Aes128Sha256, 512),
            (EspSuite::Aes128Gcm16, 1518),
        ] {
            counts_exactly(&netns, engine, suite, size);
        }
    }
}

/// With port B's address up (as linerate holds it for IKE), the af_packet
/// engine's frames reach the kernel too. Without ESP in the kernel, it
/// answers raw ESP with ICMP unreachable unless a socket takes protocol 50.
#[test]
fn the_kernel_does_not_answer_raw_esp_while_the_sink_holds_protocol_50() {
    if !is_root() {
        skip("(needs root): the_kernel_does_not_answer_raw_esp_while_the_sink_holds_protocol_50");
        return;
    }
    let netns = veth_netns("i");
    netns.ip(&["addr", "add", "198.18.0.3/24", "dev", "rb"]);
    let trial = |sink: Option<ProtocolSink>| {
        let counts = SharedCounts::default();
        let mut e = open(&netns, "af_packet", EspSuite::Aes256Gcm16, &counts);
        let before = icmp_unreachable_sent(&netns);
        let r = e.run_trial(&spec(64), &AtomicBool::new(false)).unwrap();
        drop(e);
        drop(sink);
        assert_eq!(r.tx_frames, FRAMES);
        icmp_unreachable_sent(&netns) - before
    };
    let kernel_has_esp = std::fs::read_to_string("/proc/net/xfrm_stat").is_ok()
        && Command::new("sh")
            .args([
                "-c",
                "zcat /proc/config.gz | grep -qE '^CONFIG_INET_ESP=(y|m)'",
            ])
            .status()
            .is_ok_and(|s| s.success());
    let unclaimed = trial(None);
    if kernel_has_esp {
        eprintln!("this kernel has ESP (esp4): it drops raw ESP without an SA silently ({unclaimed} ICMP)");
    } else {
        // The check below can fail: without the sink the kernel answers.
        assert!(unclaimed > 0, "no ICMP unreachable without the sink");
    }
    let sink = ProtocolSink::claim(Some(netns.name()), IPPROTO_ESP).unwrap();
    assert_eq!(
        trial(Some(sink)),
        0,
        "the kernel answered raw ESP while the sink held protocol 50"
    );
}
