//! The in-kernel counter (`xdp_count.bpf.c`, the `xdp` engine's receiver)
//! and user space's classifier (`linerate_wire::classify`, the socket
//! engines' receiver) must agree on which frames are test frames, or the
//! engines count a damaged or foreign frame differently. A property test
//! (proptest) runs the loaded program on each generated frame with
//! `BPF_PROG_TEST_RUN` (nothing attached, no namespace) and compares.
//! Needs root.
//!
//! Frames: test frames the crate builds (IPv4/IPv6, tagged or not) with
//! one to three bytes of their headers and signature changed, cut short,
//! and random bytes shaped like the headers the classifier reads. Bounded
//! case count so it runs in CI; `PROPTEST_CASES=N` runs it longer.

use linerate_bpf::counter::{SentFrom, Verdict, XdpCounter};
use linerate_wire::classify::ANY_PORT;
use linerate_wire::integrity::intact;
use linerate_wire::template::DEFAULT_UDP_PORT;
use linerate_wire::{
    classify, FlowSpec, FrameCheck, FrameSize, FrameTemplate, MacAddr, Received, Signature, VlanTag,
};
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::{TestCaseError, TestRunner};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000)
}

fn flow() -> impl Strategy<Value = FlowSpec> {
    let addrs = prop_oneof![
        any::<(u32, u32)>().prop_map(|(a, b)| (
            IpAddr::from(Ipv4Addr::from(a)),
            IpAddr::from(Ipv4Addr::from(b))
        )),
        any::<(u128, u128)>().prop_map(|(a, b)| (
            IpAddr::from(Ipv6Addr::from(a)),
            IpAddr::from(Ipv6Addr::from(b))
        )),
    ];
    let vlan = proptest::option::of((1u16..=4094).prop_map(|id| VlanTag { id, pcp: 0 }));
    (addrs, vlan, any::<bool>()).prop_map(|((src_ip, dst_ip), vlan, other_port)| FlowSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src_ip,
        dst_ip,
        src_port: DEFAULT_UDP_PORT,
        dst_port: if other_port { 9 } else { DEFAULT_UDP_PORT },
        ttl: 64,
        vlan,
    })
}

/// A built test frame with up to three bytes among its first 80 changed
/// (headers, lengths, signature), or one anywhere, sometimes cut short.
fn damaged_test_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        flow(),
        prop_oneof![0u64..200, 0u64..3000],
        any::<(u16, u32, u32)>(),
        proptest::collection::vec((0usize..80, any::<u8>()), 0..=3),
        proptest::option::of((any::<Index>(), any::<u8>())),
        proptest::option::of(any::<Index>()),
    )
        .prop_map(
            |(flow, extra, (stream, seq, tx_ts), edits, anywhere, cut)| {
                let encap = flow.encap();
                let size = FrameSize::from_frame_in(encap.min_frame() as u64 + extra, &encap)
                    .expect("a size in range");
                let t = FrameTemplate::new(&flow, size);
                let mut f = vec![0u8; t.len()];
                t.write(&mut f, Signature { stream, seq, tx_ts });
                for (at, v) in edits {
                    if let Some(b) = f.get_mut(at) {
                        *b = v;
                    }
                }
                if let Some((at, v)) = anywhere {
                    let at = at.index(f.len());
                    f[at] = v;
                }
                if let Some(cut) = cut {
                    f.truncate(14 + cut.index(f.len() - 13));
                }
                f
            },
        )
}

/// Random bytes behind an EtherType the classifier looks into.
fn frame_like() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec(any::<u8>(), 14..120),
        prop_oneof![Just(0x0800u16), Just(0x86DD), Just(0x8100), any::<u16>()],
        any::<(u8, u8)>(),
    )
        .prop_map(|(mut b, et, (first, proto))| {
            b[12..14].copy_from_slice(&et.to_be_bytes());
            if b.len() > 24 {
                b[14] = first;
                b[23] = 17 | (proto & 0x80);
            }
            b
        })
}

#[test]
fn the_kernel_counter_takes_and_checks_exactly_the_frames_user_space_does() {
    if !linerate_bpf::root_or_skip("the XDP counter against the classifier") {
        return;
    }
    let mut counter = XdpCounter::load(4).expect("the XDP counter loads (as root)");
    let frames = prop_oneof![3 => damaged_test_frame(), 1 => frame_like()];
    for check in [FrameCheck::Headers, FrameCheck::Payload] {
        for port in [DEFAULT_UDP_PORT, ANY_PORT] {
            // A runner per case: one that has run holds its case count as done.
            let mut runner = TestRunner::new(proptest::test_runner::Config {
                cases: cases(),
                ..Default::default()
            });
            // Latency (and so the timestamp check, which needs the clock)
            // only on sequence numbers that are multiples of 2^31: the
            // frames' timestamps are random, and user space cannot know
            // the kernel's clock.
            counter
                .start_trial(7, 4, port, 1 << 31, check, u64::MAX, SentFrom::default())
                .unwrap();
            let counter = &counter;
            let result = runner.run(&frames, |f| {
                let user = match classify(&f, port) {
                    Received::Test { .. } if intact(&f, f.len(), check) => Verdict::Counted,
                    Received::Test { .. } => Verdict::Errored,
                    _ => Verdict::Passed,
                };
                let kernel = counter
                    .verdict(&f)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?;
                let sampled = matches!(classify(&f, port),
                    Received::Test { sig } if sig.seq & 0x7fff_ffff == 0);
                if sampled && user == Verdict::Counted {
                    return Ok(()); // its timestamp decides
                }
                prop_assert_eq!(
                    kernel,
                    user,
                    "{:?} check, port {}: user space classifies it {:?}; frame {:02x?}",
                    check,
                    port,
                    classify(&f, port),
                    f
                );
                Ok(())
            });
            if let Err(e) = result {
                panic!("{e}");
            }
        }
    }
}

/// `frame` (an IPv4 test frame, untagged or tagged: `l2` bytes of
/// Ethernet) with `n` bytes of IPv4 options (NOPs, then an end of list)
/// after its fixed header: IHL, total length and header checksum follow.
/// The UDP checksum does not cover the IP header, so it stays right.
fn with_ipv4_options(frame: &[u8], l2: usize, n: usize) -> Vec<u8> {
    use linerate_wire::checksum::{fold, sum16};
    let mut opts = vec![1u8; n]; // NOP
    opts[n - 1] = 0; // end of options list
    let mut f = frame[..l2 + 20].to_vec();
    f.extend_from_slice(&opts);
    f.extend_from_slice(&frame[l2 + 20..]);
    let ip = &mut f[l2..];
    ip[0] = 0x40 | ((20 + n) / 4) as u8;
    let total = u16::from_be_bytes([ip[2], ip[3]]) + n as u16;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[10..12].copy_from_slice(&[0, 0]);
    let csum = fold(sum16(&ip[..20 + n]));
    ip[10..12].copy_from_slice(&csum.to_be_bytes());
    f
}

/// The payload check (the UDP checksum) in the kernel against user space
/// at every datagram length from the smallest to past two of the
/// counter's 512-byte pieces (every remainder its binary decomposition
/// and its 0-3 tail bytes can take), around the length where
/// `BPF_PROG_TEST_RUN` starts putting the frame in fragments (the copy
/// path), and the largest frame; IPv4 and IPv6, tagged or not, and IPv4
/// with options: each frame intact is counted, and with one byte of its
/// payload changed (the first after the signature, one in the middle, the
/// last) errored, by both.
#[test]
fn the_payload_check_finds_every_changed_byte_at_every_length_as_user_space_does() {
    if !linerate_bpf::root_or_skip("the XDP counter's payload check") {
        return;
    }
    let mut counter = XdpCounter::load(4).expect("the XDP counter loads (as root)");
    counter
        .start_trial(
            7,
            4,
            DEFAULT_UDP_PORT,
            1 << 31,
            FrameCheck::Payload,
            u64::MAX,
            SentFrom::default(),
        )
        .unwrap();
    let sizes: Vec<u64> = (64..=1200)
        .chain((3300..=3700).step_by(7))
        .chain([4096, 8191, 9017, 9018])
        .collect();
    let v4 = |a: u32| IpAddr::from(Ipv4Addr::from(a));
    let v6 = |a: u128| IpAddr::from(Ipv6Addr::from(a));
    let mut checked = 0u64;
    for (src_ip, dst_ip) in [
        (v4(0xc612_0002), v4(0xc613_0002)),
        (v6(0x2001_0db8 << 96 | 2), v6(0x2001_0db8_0001 << 80 | 2)),
    ] {
        for vlan in [None, Some(VlanTag { id: 10, pcp: 0 })] {
            let flow = FlowSpec {
                src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
                dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
                src_ip,
                dst_ip,
                src_port: DEFAULT_UDP_PORT,
                dst_port: DEFAULT_UDP_PORT,
                ttl: 64,
                vlan,
            };
            let encap = flow.encap();
            let l2 = if vlan.is_some() { 18 } else { 14 };
            for &size in &sizes {
                let Ok(size) = FrameSize::from_frame_in(size, &encap) else {
                    continue; // below this layout's smallest frame
                };
                let t = FrameTemplate::new(&flow, size);
                let mut f = vec![0u8; t.len()];
                let seq = u32::from(size.frame()); // never a multiple of 2^31: no timestamp check
                t.write(
                    &mut f,
                    Signature {
                        stream: 7,
                        seq,
                        tx_ts: 0,
                    },
                );
                let mut frames = vec![f.clone()];
                if src_ip.is_ipv4() {
                    // Options of 4 and 40 bytes, where the frame stays within the largest.
                    for n in [4, 40] {
                        if f.len() + n <= 9014 {
                            frames.push(with_ipv4_options(&f, l2, n));
                        }
                    }
                }
                for f in frames {
                    let udp = if src_ip.is_ipv4() {
                        l2 + (f[l2] & 0x0f) as usize * 4
                    } else {
                        l2 + 40
                    };
                    let payload = udp + 8 + 12; // after UDP header and signature
                    let end = udp + u16::from_be_bytes([f[udp + 4], f[udp + 5]]) as usize;
                    let kernel = counter.verdict(&f).unwrap();
                    assert_eq!(
                        (kernel, intact(&f, f.len(), FrameCheck::Payload)),
                        (Verdict::Counted, true),
                        "{size:?} B {src_ip} {vlan:?} intact, {} B frame",
                        f.len()
                    );
                    let mut at = vec![end - 1];
                    if payload < end {
                        at.extend([payload, (payload + end) / 2]);
                    }
                    for at in at {
                        let mut d = f.clone();
                        d[at] ^= 0x5a;
                        let kernel = counter.verdict(&d).unwrap();
                        assert_eq!(
                            (kernel, intact(&d, d.len(), FrameCheck::Payload)),
                            (Verdict::Errored, false),
                            "{size:?} B {src_ip} {vlan:?}, {} B frame, byte {at} changed",
                            d.len()
                        );
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 4 * 1100, "{checked} frames checked");
}

/// One trial of stream 7 in the kernel counter: the frames it is given
/// and what it must make of them.
struct SeqCase {
    name: &'static str,
    /// Frames the stream sends (a number at or beyond is damage).
    sent: u64,
    /// The sequence numbers received, in order.
    seqs: &'static [u32],
    /// The counter's verdict on each.
    verdicts: &'static [Verdict],
    /// Frames counted as errored.
    errored: u64,
    /// The stream's (received, reordered, duplicated).
    counts: (u64, u64, u64),
    /// The stream's sequence errors: small, big, reverse.
    seq_errors: [u64; 3],
}

/// Sequence numbers in the kernel as in user space (`StreamStats::record`,
/// whose unit test in crates/engine/src/stats.rs has the same numbers):
/// each frame against the number after the previous frame's, and a number
/// the trial never sent is damage that moves nothing.
#[test]
fn sequence_numbers_are_judged_as_in_user_space() {
    if !linerate_bpf::root_or_skip("the XDP counter's sequence numbers") {
        return;
    }
    use Verdict::*;
    let cases = [
        // A sequence number the trial never sent (at or beyond the frames
        // a stream sends) is errored, and it moves nothing, so the frames
        // after it are not counted reordered against it. 1 skips 0, 99
        // skips 3..=98; the refused numbers are not compared.
        SeqCase {
            name: "a sequence number beyond the trial",
            sent: 100,
            seqs: &[1, 100, 0x5a00_0002, 2, 99],
            verdicts: &[Counted, Errored, Errored, Counted, Counted],
            errored: 2,
            counts: (3, 0, 0),
            seq_errors: [2, 0, 0],
        },
        // 5 skips 4 and 1,006 skips 999 (small), 2,007 skips 1,000 (big),
        // 4 comes back (reverse).
        SeqCase {
            name: "sequence errors against the previous frame",
            sent: 10_000,
            seqs: &[0, 1, 2, 3, 5, 4, 5, 6, 1006, 2007],
            verdicts: &[Counted; 10],
            errored: 0,
            counts: (9, 1, 1),
            seq_errors: [2, 1, 1],
        },
    ];
    assert_eq!(linerate_bpf::counter::BIG_GAP, 1000);
    let t = template_128();
    for c in &cases {
        let name = c.name;
        let mut counter = XdpCounter::load(1).expect("the XDP counter loads (as root)");
        counter
            .start_trial(
                7,
                1,
                DEFAULT_UDP_PORT,
                1 << 31,
                FrameCheck::Headers,
                c.sent,
                SentFrom::default(),
            )
            .unwrap();
        let verdicts: Vec<Verdict> = c
            .seqs
            .iter()
            .map(|&seq| {
                let mut f = vec![0u8; t.len()];
                // Timestamps are only read on numbers that are multiples of 2^31.
                t.write(
                    &mut f,
                    Signature {
                        stream: 7,
                        seq,
                        tx_ts: 0,
                    },
                );
                counter.verdict(&f).unwrap()
            })
            .collect();
        assert_eq!(verdicts, c.verdicts, "{name}");
        let counts = counter.read().unwrap();
        assert_eq!(counts.errored, c.errored, "{name}");
        let s = &counts.streams[0];
        assert_eq!(
            (s.received, s.reordered, s.duplicated),
            c.counts,
            "{name}: {s:?}"
        );
        assert_eq!(s.seq_errors, c.seq_errors, "{name}: {s:?}");
    }
}

/// A 128-byte IPv4 test frame's template, stream 7's port.
fn template_128() -> FrameTemplate {
    let flow = FlowSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src_ip: Ipv4Addr::new(198, 18, 0, 2).into(),
        dst_ip: Ipv4Addr::new(198, 19, 0, 2).into(),
        src_port: DEFAULT_UDP_PORT,
        dst_port: DEFAULT_UDP_PORT,
        ttl: 64,
        vlan: None,
    };
    FrameTemplate::new(&flow, FrameSize::from_frame_in(128, &flow.encap()).unwrap())
}

/// CLOCK_MONOTONIC now, the clock of bpf_ktime_get_ns, in ns.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The timestamp rules of user space (`plausible_latency`), in the kernel:
/// a frame held 3 s is late, not damaged; a stamp in the future, one
/// before the trial began and one before the schedule let its frame
/// leave are damaged. Every case but the last is 100 ms or more from its
/// bound, so the kernel's clock reading a few microseconds after user
/// space's decides the same; the last is on its bound in both clocks.
#[test]
fn a_late_frame_is_counted_and_a_future_timestamp_is_errored_as_in_user_space() {
    use linerate_wire::signature::{earliest_send_ns, plausible_latency};
    if !linerate_bpf::root_or_skip("the XDP counter's timestamp rules") {
        return;
    }
    const S: u64 = 1_000_000_000;
    let mut counter = XdpCounter::load(1).expect("the XDP counter loads (as root)");
    let t = template_128();
    let frame = |seq: u32, tx_ts: u64| {
        let mut f = vec![0u8; t.len()];
        let sig = Signature {
            stream: 7,
            seq,
            tx_ts: tx_ts as u32,
        };
        t.write(&mut f, sig);
        f
    };
    // (trial started this long ago, interval, seq, stamp this long ago
    // (negative: in the future), what it is)
    use Verdict::*;
    let cases: [(u64, u64, u32, i64, Verdict); 7] = [
        // Held 3 s, sent 1 s into a trial 10 s old: late. (Before, any
        // latency above 2^31 ns counted as a future stamp.)
        (10 * S, 1_000_000, 1000, 3 * S as i64, Counted),
        // The trial's last frame (it left 1 ms ago at the earliest),
        // stamped 1 s in the future: damaged.
        (10 * S, 1_000_000, 9999, -(S as i64), Errored),
        // Frame 9,500 at 1,000 frames/s left 9.5 s into a 10-s-old trial:
        // it cannot have taken 2 s.
        (10 * S, 1_000_000, 9500, 2 * S as i64, Errored),
        // Frame 9,000 can have taken 0.9 s.
        (10 * S, 1_000_000, 9000, 9 * S as i64 / 10, Counted),
        // No schedule known: the trial's start alone bounds. A trial 2 s
        // old: 2.5 s is impossible, 1.5 s is not.
        (2 * S, 0, 5, 5 * S as i64 / 2, Errored),
        (2 * S, 0, 6, 3 * S as i64 / 2, Counted),
        // Stamped the instant the trial began, as its bound allows exactly.
        (0, 0, 7, 0, Counted),
    ];
    let mut want_errored = 0;
    let mut max_latency = 0;
    for (i, (age, interval, seq, ago, want)) in cases.into_iter().enumerate() {
        let now = monotonic_ns();
        let sent_from = SentFrom {
            not_before_ns: now - age,
            interval_ns: interval,
        };
        // A fresh trial for each case: its first frame, nothing to extend.
        counter
            .start_trial(
                7,
                1,
                DEFAULT_UDP_PORT,
                1,
                FrameCheck::Headers,
                100_000,
                sent_from,
            )
            .unwrap();
        let tx_ts = now.wrapping_add_signed(-ago);
        let earliest = earliest_send_ns(sent_from.not_before_ns, interval, seq as u64);
        let user = match plausible_latency(tx_ts as u32, now, earliest) {
            Some(_) => Counted,
            None => Errored,
        };
        assert_eq!(user, want, "case {i} in user space");
        let kernel = counter.verdict(&frame(seq, tx_ts)).unwrap();
        assert_eq!(kernel, want, "case {i} in the kernel");
        let counts = counter.read().unwrap();
        if want == Errored {
            want_errored += 1;
            assert_eq!((counts.errored, counts.streams[0].received), (1, 0));
        } else {
            let s = &counts.streams[0];
            assert_eq!((counts.errored, s.received, s.latency_count), (0, 1, 1));
            // The latency is the hold, a few microseconds more.
            assert!(
                s.latency_max_ns >= ago as u64 && s.latency_max_ns < ago as u64 + S / 10,
                "case {i}: {s:?}"
            );
            max_latency = max_latency.max(s.latency_max_ns);
        }
    }
    assert_eq!(want_errored, 3);
    assert!(max_latency >= 3 * S, "the 3-s hold measured as such");
}
