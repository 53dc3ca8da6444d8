//! Frames the DUT damages are counted as errored, never as received: a
//! router built by hand (plain `ip`, see `common::plain_router`) runs a tc
//! BPF program on its egress towards port B that damages one test frame in
//! 256 (those whose sequence number's low byte is 7) and counts what it
//! damaged in a map of its own. linerate's errored count must equal the
//! program's, the damaged frames must be lost (not received, not
//! reordered), and the loss breakdown must name them. Needs root and
//! clang; run with --test-threads=1.

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The damage program; `MODE` picks what it does to a chosen frame.
const DAMAGE_C: &str = r#"
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lr_damaged SEC(".maps");

#if MODE == 6
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lr_seen SEC(".maps");
#endif

/* Untagged IPv4, IHL 5: the signature at IP offset 28 (magic), 32 (seq), 36 (tx_ts). */
#define IP 14
SEC("tc")
int damage(struct __sk_buff *skb)
{
	__u16 magic;
	__u8 seq_low;
#if MODE == 5 /* dropped: frames whose low byte is 7, and 10,000 ..= 11,999 */
	__u32 seq;
	if (skb->protocol != bpf_htons(ETH_P_IP) ||
	    bpf_skb_load_bytes(skb, IP + 28, &magic, 2) || magic != bpf_htons(0x4C52) ||
	    bpf_skb_load_bytes(skb, IP + 32, &seq, 4))
		return TC_ACT_OK;
	seq = bpf_ntohl(seq);
	if ((seq & 0xff) != 7 && (seq < 10000 || seq >= 12000))
		return TC_ACT_OK;
	__u32 key = 0;
	__u64 *dropped = bpf_map_lookup_elem(&lr_damaged, &key);
	if (dropped)
		__sync_fetch_and_add(dropped, 1);
	return TC_ACT_SHOT;
#endif
#if MODE == 6 /* every 50th UDP packet: byte 100 of the IP packet inverted, checksums left */
	/* Knows nothing of linerate's frames: counts UDP packets, damages one in 50. */
	__u8 proto, b;
	if (skb->protocol != bpf_htons(ETH_P_IP) ||
	    bpf_skb_load_bytes(skb, IP + 9, &proto, 1) || proto != 17 ||
	    bpf_skb_load_bytes(skb, IP + 100, &b, 1))
		return TC_ACT_OK;
	__u32 k = 0;
	__u64 *seen = bpf_map_lookup_elem(&lr_seen, &k);
	if (!seen || __sync_fetch_and_add(seen, 1) % 50 != 49)
		return TC_ACT_OK;
	b ^= 0xff;
	bpf_skb_store_bytes(skb, IP + 100, &b, 1, 0);
	__u64 *hit = bpf_map_lookup_elem(&lr_damaged, &k);
	if (hit)
		__sync_fetch_and_add(hit, 1);
	return TC_ACT_OK;
#endif
	if (skb->protocol != bpf_htons(ETH_P_IP) ||
	    bpf_skb_load_bytes(skb, IP + 28, &magic, 2) || magic != bpf_htons(0x4C52) ||
	    bpf_skb_load_bytes(skb, IP + 35, &seq_low, 1) || seq_low != 7)
		return TC_ACT_OK;
#if MODE == 1 /* the last payload byte flipped, checksums left as they were */
	__u8 v;
	__u32 last = skb->len - 1;
	if (bpf_skb_load_bytes(skb, last, &v, 1))
		return TC_ACT_OK;
	v ^= 0xff;
	bpf_skb_store_bytes(skb, last, &v, 1, 0);
#elif MODE == 2 /* the timestamp moved 1 s into the future */
	__u32 ts;
	if (bpf_skb_load_bytes(skb, IP + 36, &ts, 4))
		return TC_ACT_OK;
	ts = bpf_htonl(bpf_ntohl(ts) + 1000000000);
	bpf_skb_store_bytes(skb, IP + 36, &ts, 4, 0);
#elif MODE == 3 /* cut 20 bytes short, the IP length unchanged */
	if (bpf_skb_change_tail(skb, skb->len - 20, 0))
		return TC_ACT_OK;
#elif MODE == 4 /* the sequence number's high byte damaged */
	__u8 hi = 0x5a;
	bpf_skb_store_bytes(skb, IP + 32, &hi, 1, 0);
#endif
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&lr_damaged, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "GPL";
"#;

/// Compiles the program for `mode` into the test's scratch directory.
fn compile(mode: u32, dir: &TempFile) -> PathBuf {
    std::fs::create_dir_all(&dir.0).unwrap();
    let src = dir.0.join("damage.bpf.c");
    std::fs::write(&src, DAMAGE_C).unwrap();
    let obj = dir.0.join(format!("damage{mode}.o"));
    let arch = std::env::consts::ARCH;
    sh(
        "clang",
        &[
            "-O2",
            "-g",
            "-target",
            "bpf",
            &format!("-DMODE={mode}"),
            &format!("-I/usr/include/{arch}-linux-gnu"),
            "-c",
            src.to_str().unwrap(),
            "-o",
            obj.to_str().unwrap(),
        ],
    );
    obj
}

/// Attaches the program on the router's egress towards port B.
fn attach(r: &str, obj: &Path) {
    sh(
        "ip",
        &[
            "netns", "exec", r, "tc", "qdisc", "add", "dev", "rb", "clsact",
        ],
    );
    sh(
        "ip",
        &[
            "netns",
            "exec",
            r,
            "tc",
            "filter",
            "add",
            "dev",
            "rb",
            "egress",
            "bpf",
            "da",
            "obj",
            obj.to_str().unwrap(),
            "sec",
            "tc",
        ],
    );
}

/// Frames the program damaged: its own counter, found through the
/// filter on `r`'s rb and read with bpftool.
fn damaged(r: &str) -> u64 {
    let json = |program: &str, args: &[&str]| -> Value {
        serde_json::from_str(&sh(program, args)).expect("JSON output")
    };
    let filters = json(
        "ip",
        &[
            "netns", "exec", r, "tc", "-j", "filter", "show", "dev", "rb", "egress",
        ],
    );
    let prog = filters
        .as_array()
        .expect("filters")
        .iter()
        .find_map(|f| f["options"]["prog"]["id"].as_u64())
        .expect("the damage program's id");
    let info = json("bpftool", &["-j", "prog", "show", "id", &prog.to_string()]);
    let map = info["map_ids"]
        .as_array()
        .expect("the program's maps")
        .iter()
        .filter_map(Value::as_u64)
        .find(|id| {
            json("bpftool", &["-j", "map", "show", "id", &id.to_string()])["name"] == "lr_damaged"
        })
        .expect("the program's map lr_damaged");
    let dump = json("bpftool", &["-j", "map", "dump", "id", &map.to_string()]);
    let value = &dump[0]["value"];
    // A u64 with BTF is a number; without, bytes.
    value.as_u64().unwrap_or_else(|| {
        let bytes: Vec<u8> = value
            .as_array()
            .expect("map value")
            .iter()
            .map(|b| u8::from_str_radix(b.as_str().unwrap().trim_start_matches("0x"), 16).unwrap())
            .collect();
        u64::from_le_bytes(bytes[..8].try_into().unwrap())
    })
}

/// One trial through a router that damages frames in `mode`; returns the
/// result and what the program damaged.
fn run(tag: &str, mode: u32, extra: &[&str]) -> (Value, u64) {
    run_for(tag, mode, "1s", extra)
}

/// [`run`] for `duration` (at 20,000 frames/s).
fn run_for(tag: &str, mode: u32, duration: &str, extra: &[&str]) -> (Value, u64) {
    let (t, r, _guard) = plain_router(tag);
    let dir = TempFile::new(&format!("damage{tag}"));
    attach(&r, &compile(mode, &dir));
    let json = TempFile::new(&format!("damaged{tag}"));
    let mut args = vec![
        "trial",
        "--no-db",
        "--loss",
        "99%",
        "--straggler-wait",
        "1s",
        "--frame-size",
        "128",
        "--rate",
        "20000fps",
        "--duration",
        duration,
        "--json",
        json.arg(),
    ];
    args.extend_from_slice(&HOSTS);
    args.extend_from_slice(extra);
    let out = linerate_in(&t, &args);
    assert_eq!(out.code, 0, "{}", out.dump());
    let v = json.json();
    assert_trial_consistent(&v);
    let n = damaged(&r);
    let _ = std::fs::remove_dir_all(&dir.0);
    (v, n)
}

/// The frames the seq-keyed modes (1-4) damage: those whose sequence
/// number's low byte is 7 (frames 7, 263, ...).
fn low_byte_7(seq: u64) -> bool {
    seq & 0xff == 7
}

/// The frames mode 6 damages, knowing nothing of linerate's frames: every
/// 50th UDP packet it sees (the 50th, 100th, ...), here frames 49, 99, ...
fn every_50th(seq: u64) -> bool {
    seq % 50 == 49
}

/// The damaged frames, and only they, are errored and lost, in the trial
/// of `case` (20,000 frames intended, one in 256 damaged: 79 of them).
fn assert_errored_in(case: &str, v: &Value, damaged: u64) {
    assert_errored_of(case, v, damaged, 20_000, low_byte_7)
}

/// [`assert_errored_in`] of a trial of `intended` frames, those of them
/// that `damages` picks damaged. A generator that a busy machine paused
/// past the trial's allowance sends fewer, and says so
/// ([`testers_shortfall`]): the DUT damaged what it saw of the frames
/// sent, and every count stays exact over those.
fn assert_errored_of(case: &str, v: &Value, damaged: u64, intended: u64, damages: fn(u64) -> bool) {
    let not_sent = testers_shortfall(v);
    let sent = intended - not_sent;
    let want = (0..sent).filter(|&seq| damages(seq)).count() as u64;
    assert_eq!(damaged, want, "{case}: the program damaged {damaged}: {v}");
    assert_eq!(u(v, "tx_frames"), sent, "{case}: {v}");
    assert_eq!(u(v, "errored_frames"), damaged, "{case}: {v}");
    assert_eq!(u(v, "rx_frames"), sent - damaged, "{case}: {v}");
    assert_eq!(u(v, "lost_frames"), damaged + not_sent, "{case}: {v}");
    assert_eq!(
        v["loss_where"]["errored"].as_u64(),
        Some(damaged),
        "{case}: {v}"
    );
    assert_eq!(
        (u(v, "reordered"), u(v, "duplicated")),
        (0, 0),
        "{case}: {v}"
    );
}

/// The program damaged the frames `damages` picks of the 20,000 intended
/// (of those sent: see [`assert_errored_of`]), and the check that ran
/// saw none of it: every frame sent counts as received.
fn assert_unseen(v: &Value, damaged: u64, damages: fn(u64) -> bool) {
    let sent = 20_000 - testers_shortfall(v);
    let want = (0..sent).filter(|&seq| damages(seq)).count() as u64;
    assert_eq!(
        (damaged, u(v, "errored_frames"), u(v, "rx_frames")),
        (want, 0, sent),
        "{v}"
    );
}

/// One kind of damage (the program's `MODE`), a trial through it with
/// `extra` by either receiver, and the frame check the record must name.
/// Every case: the damaged frames, and only they, are errored and lost.
struct Damage {
    name: &'static str,
    tag: &'static str,
    mode: u32,
    extra: &'static [&'static str],
    frame_check: &'static str,
    /// Also: no latency at or below 1 µs (a stamp in the future was not
    /// counted as a latency of 0 or 1 ns).
    latency_above_1us: bool,
}

const DAMAGES: &[Damage] = &[
    Damage {
        name: "a flipped payload byte, with the payload check",
        tag: "dp",
        mode: 1,
        extra: &["--frame-check", "payload"],
        frame_check: "payload",
        latency_above_1us: false,
    },
    // With the headers check, so that the timestamp rule finds it (the
    // default check finds it by the UDP checksum, which covers the stamp).
    Damage {
        name: "a timestamp in the future, kept out of latency",
        tag: "dt",
        mode: 2,
        extra: &["--frame-check", "headers"],
        frame_check: "headers",
        latency_above_1us: true,
    },
    Damage {
        name: "a frame cut short, by the default check",
        tag: "dc",
        mode: 3,
        extra: &[],
        frame_check: "payload",
        latency_above_1us: false,
    },
    // Errored, not reordered.
    Damage {
        name: "a damaged sequence number, with the payload check",
        tag: "ds",
        mode: 4,
        extra: &["--frame-check", "payload"],
        frame_check: "payload",
        latency_above_1us: false,
    },
    // With the headers check (the payload not read, so the broken UDP
    // checksum unseen), a sequence number beyond what the trial sent is
    // still damaged: every receiver knows how many frames each stream
    // sends. Before, each such number became the stream's highest and the
    // frames after it counted as reordered (RFC 4737's discontinuity).
    Damage {
        name: "a sequence number beyond the trial, by the headers check",
        tag: "dq",
        mode: 4,
        extra: &["--frame-check", "headers"],
        frame_check: "headers",
        latency_above_1us: false,
    },
];

#[test]
fn damaged_frames_are_errored_and_lost_by_either_receiver() {
    if !root_or_skip("damaged_frames_are_errored_and_lost_by_either_receiver") {
        return;
    }
    for d in DAMAGES {
        for receiver in ["kernel", "socket"] {
            let case = format!("{} (--receiver {receiver})", d.name);
            let mut extra = d.extra.to_vec();
            extra.extend_from_slice(&["--receiver", receiver]);
            let (v, n) = run(d.tag, d.mode, &extra);
            assert_eq!(v["frame_check"], d.frame_check, "{case}: {v}");
            assert_errored_in(&case, &v, n);
            if d.latency_above_1us {
                assert!(u(&v["latency_ns"], "min") > 1_000, "{case}: {v}");
            }
        }
    }
}

/// The headers check does not read the payload: a flipped payload byte
/// goes unseen, and the record says which check ran.
#[test]
fn a_flipped_payload_byte_is_not_seen_by_the_headers_check() {
    if !root_or_skip("a_flipped_payload_byte_is_not_seen_by_the_headers_check") {
        return;
    }
    let (v, n) = run("dh", 1, &["--frame-check", "headers"]);
    assert_eq!(v["frame_check"], "headers", "{v}");
    assert_unseen(&v, n, low_byte_7);
}

/// With default options, a DUT that damages the payload of every 50th
/// UDP packet, knowing nothing of linerate's frames (a tc program on the
/// router's egress towards port B that counts UDP packets and inverts
/// byte 100 of every 50th one's IP packet, inside the UDP payload of a
/// 128-byte frame, checksums left as they were): every frame it damaged
/// is errored and lost, by the receiver the defaults pick and by the
/// other one, and the record says the payload was checked. With the
/// headers check they all count as received.
#[test]
fn payload_damage_is_errored_and_lost_with_default_options() {
    if !root_or_skip("payload_damage_is_errored_and_lost_with_default_options") {
        return;
    }
    for (tag, extra) in [("pd", &[][..]), ("ps", &["--receiver", "socket"][..])] {
        let case = format!("default options {extra:?}");
        let (v, n) = run(tag, 6, extra);
        assert_eq!(v["frame_check"], "payload", "{case}: {v}");
        // 20,000 frames, every 50th damaged; a UDP packet that is no test
        // frame would show as a mismatch below.
        assert_errored_of(&case, &v, n, 20_000, every_50th);
    }
    // The same DUT with the headers check: nothing seen.
    let (v, n) = run("ph", 6, &["--frame-check", "headers"]);
    assert_eq!(v["frame_check"], "headers", "{v}");
    assert_unseen(&v, n, every_50th);
}

/// In a trial longer than the timestamp's 4.29-s wrap, a stamp 1 s in
/// the future is still told from a late frame, with the headers check
/// (the UDP checksum, which covers the stamp, not read): frame n left no
/// earlier than n intervals into the trial, so it cannot have taken the
/// 3.29 s its stamp reads. With the trial's start alone as the bound,
/// the frames damaged after the first 3.29 s counted as received with
/// a 3.29-s latency.
#[test]
fn a_timestamp_in_the_future_is_errored_late_in_a_trial_longer_than_its_wrap() {
    if !root_or_skip("a_timestamp_in_the_future_is_errored_late_in_a_trial_longer_than_its_wrap") {
        return;
    }
    for receiver in ["kernel", "socket"] {
        let (v, n) = run_for(
            "dw",
            2,
            "5s",
            &["--receiver", receiver, "--frame-check", "headers"],
        );
        assert_eq!(v["frame_check"], "headers", "{v}");
        // Frames 7, 263, ... of 100,000: 391 of them.
        assert_errored_of(
            &format!("--receiver {receiver}"),
            &v,
            n,
            100_000,
            low_byte_7,
        );
        assert!(u(&v["latency_ns"], "max") < 1_000_000_000, "{v}");
    }
}

/// Frames a slow-draining DUT holds for more than 2.15 s are late, not
/// damaged: received, with their latency. Before, any latency above 2^31
/// ns (2.15 s) was taken for a timestamp in the future and the frame
/// counted as errored. The DUT: the hand-built router shaping UDP (the
/// test frames; ARP goes by) on its egress towards port B to about half
/// the offered rate, with a queue deep enough to hold every frame (htb, a
/// bfifo): 6,000 frames offered over 3 s drain in about 6 s, the last ones
/// held about 3 s. The straggler wait lets them in. The router's own count
/// of what its queue passed on must match what linerate received.
#[test]
fn a_frame_the_dut_holds_for_seconds_is_received_late_not_damaged() {
    if !root_or_skip("a_frame_the_dut_holds_for_seconds_is_received_late_not_damaged") {
        return;
    }
    for receiver in ["kernel", "socket"] {
        let (t, r, _guard) = plain_router("hold");
        let tc = |args: &[&str]| {
            let mut full = vec!["netns", "exec", &r, "tc"];
            full.extend_from_slice(args);
            sh("ip", &full)
        };
        tc(&[
            "qdisc", "add", "dev", "rb", "root", "handle", "1:", "htb", "default", "20",
        ]);
        // 2,000 frames/s of 124 bytes (no FCS) are 1.98 Mbit/s.
        tc(&[
            "class", "add", "dev", "rb", "parent", "1:", "classid", "1:10", "htb", "rate", "1mbit",
            "burst", "2k", "quantum", "1600",
        ]);
        tc(&[
            "class", "add", "dev", "rb", "parent", "1:", "classid", "1:20", "htb", "rate", "1gbit",
            "quantum", "60000",
        ]);
        tc(&[
            "qdisc", "add", "dev", "rb", "parent", "1:10", "handle", "10:", "bfifo", "limit",
            "4000000",
        ]);
        tc(&[
            "filter", "add", "dev", "rb", "parent", "1:", "protocol", "ip", "prio", "1", "u32",
            "match", "ip", "protocol", "17", "0xff", "flowid", "1:10",
        ]);
        let json = TempFile::new("hold");
        let mut args = vec![
            "trial",
            "--no-db",
            "--loss",
            "99%",
            "--straggler-wait",
            "6s",
            "--frame-size",
            "128",
            "--rate",
            "2000fps",
            "--duration",
            "3s",
            "--receiver",
            receiver,
            "--json",
            json.arg(),
        ];
        args.extend_from_slice(&HOSTS);
        let out = linerate_in(&t, &args);
        assert_eq!(out.code, 0, "{}", out.dump());
        let v = json.json();
        assert_trial_consistent(&v);
        // What the DUT's queue passed on: its own count.
        let stats: Value =
            serde_json::from_str(&tc(&["-s", "-j", "qdisc", "show", "dev", "rb"])).unwrap();
        let queue = stats
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["kind"] == "bfifo")
            .unwrap_or_else(|| panic!("the bfifo on rb: {stats}"));
        assert_eq!(u(queue, "drops"), 0, "{queue}");
        assert_eq!(
            u(queue, "packets"),
            6000,
            "the queue passed every test frame: {queue}"
        );
        assert_eq!(u(&v, "tx_frames"), 6000, "{v}");
        assert_eq!(u(&v, "rx_frames"), 6000, "{receiver}: {v}");
        assert_eq!(
            (u(&v, "errored_frames"), u(&v, "lost_frames")),
            (0, 0),
            "{receiver}: {v}"
        );
        // Held well past 2^31 ns, and below the stamp's 4.29-s wrap.
        let l = &v["latency_ns"];
        eprintln!("{receiver}: rx {} of 6000, latency {l}", u(&v, "rx_frames"));
        assert!(
            u(l, "max") > 2_500_000_000 && u(l, "max") < 4_000_000_000,
            "{receiver}: {v}"
        );
    }
}

/// Sequence errors against the DUT's own count of what it dropped: one
/// frame in 256 (a gap of one number each: a small error) and the 2,000
/// frames 10,000 ..= 11,999 (one jump over 2,000 numbers: a big error, the
/// threshold being 1,000). 7 of the single frames fall in the burst:
/// 72 small errors, 1 big, none reverse; nothing reordered.
#[test]
fn dropped_frames_are_small_and_big_sequence_errors_by_either_receiver() {
    if !root_or_skip("dropped_frames_are_small_and_big_sequence_errors_by_either_receiver") {
        return;
    }
    for receiver in ["kernel", "socket"] {
        let (v, n) = run("dd", 5, &["--receiver", receiver]);
        let not_sent = testers_shortfall(&v);
        let sent = 20_000 - not_sent;
        let (dropped, small, big) = drops_seen(sent);
        assert_eq!(n, dropped, "the program dropped {n}: {v}");
        assert_eq!(u(&v, "tx_frames"), sent, "{v}");
        assert_eq!(u(&v, "lost_frames"), n + not_sent, "{receiver}: {v}");
        assert_eq!(u(&v, "rx_frames"), sent - n, "{receiver}: {v}");
        assert_eq!(u(&v, "errored_frames"), 0, "{receiver}: {v}");
        assert_eq!((u(&v, "reordered"), u(&v, "duplicated")), (0, 0), "{v}");
        assert_eq!(
            v["sequence_errors"],
            serde_json::json!({"small": small, "big": big, "reverse": 0, "threshold": 1000}),
            "{receiver}: {v}"
        );
    }
}

/// What mode 5 drops of frames 0 .. `sent` (those whose low byte is 7,
/// and 10,000 ..= 11,999), and the sequence errors a receiver sees of it:
/// each run of dropped frames that a later frame reveals is one gap, small
/// below the threshold of 1,000 frames, big from it. All 20,000 sent:
/// 79 + 2,000 - 7 dropped, 72 small, 1 big.
fn drops_seen(sent: u64) -> (u64, u64, u64) {
    let drops = |seq: u64| low_byte_7(seq) || (10_000..12_000).contains(&seq);
    let (mut dropped, mut small, mut big, mut run) = (0, 0, 0, 0);
    for seq in 0..sent {
        if drops(seq) {
            dropped += 1;
            run += 1;
            continue;
        }
        match run {
            0 => {}
            1..=999 => small += 1,
            _ => big += 1,
        }
        run = 0;
    }
    (dropped, small, big)
}

/// The expected counts computed from the frames sent give, when every
/// intended frame was sent, the figures the cases document.
#[test]
fn the_expected_counts_are_the_documented_ones() {
    let picked = |sent: u64, damages: fn(u64) -> bool| (0..sent).filter(|&s| damages(s)).count();
    assert_eq!(picked(20_000, low_byte_7), 79);
    assert_eq!(picked(100_000, low_byte_7), 391);
    assert_eq!(picked(20_000, every_50th), 400);
    assert_eq!(drops_seen(20_000), (79 + 2000 - 7, 72, 1));
    // Cut short inside the burst: the trailing run is no gap yet.
    assert_eq!(drops_seen(11_000), (43 + 1000 - 3, 40, 0));
}
