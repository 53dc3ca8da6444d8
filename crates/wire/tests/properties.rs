//! Property tests (proptest) of every parser here that reads untrusted
//! input: received frames (the classifier, the signature, ARP, Neighbor
//! Discovery) and the strings users write (rates, line speeds, frame
//! mixes, flow ranges, MAC addresses, VLAN tags).
//!
//! Each property runs `CASES` cases from a new random seed every run (all
//! of them in about 2.5 s of a release build on the 2-core VM), so they run
//! with every `cargo test` and in CI. `PROPTEST_CASES=300000 cargo test
//! --release -p linerate-wire --test properties` runs each one longer
//! (about 80 s). A failure prints the smallest input found, and proptest
//! records its seed in `tests/properties.proptest-regressions`, replayed
//! first on every later run: commit that file with the fix.

use linerate_wire::arp::{arp_frame, ArpOp, ArpRepr};
use linerate_wire::classify::{checksums_ok, classify, Received, ANY_PORT};
use linerate_wire::flows::{FieldRange, Flows, Mode};
use linerate_wire::mix::{FrameMix, Frames, MixError, MAX_SEQUENCE, MAX_SIZES};
use linerate_wire::ndp::{self, NdpOp, NdpRepr};
use linerate_wire::signature::{Signature, SIGNATURE_LEN, SIGNATURE_MAGIC};
use linerate_wire::units::{parse_line_speed, MAX_FRAME_SIZE, MIN_FRAME_SIZE};
use linerate_wire::{FlowSpec, FrameSize, FrameTemplate, Layer, MacAddr, Rate, VlanTag};
use proptest::prelude::*;
use proptest::sample::Index;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Cases per property unless `PROPTEST_CASES` says otherwise.
const CASES: u32 = 10_000;

fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------- strategies

fn mac() -> impl Strategy<Value = MacAddr> {
    any::<[u8; 6]>().prop_map(MacAddr)
}

fn vlan() -> impl Strategy<Value = Option<VlanTag>> {
    proptest::option::of((1u16..=4094, 0u8..=7).prop_map(|(id, pcp)| VlanTag { id, pcp }))
}

fn signature() -> impl Strategy<Value = Signature> {
    any::<(u16, u32, u32)>().prop_map(|(stream, seq, tx_ts)| Signature { stream, seq, tx_ts })
}

fn addresses() -> impl Strategy<Value = (IpAddr, IpAddr)> {
    prop_oneof![
        any::<(u32, u32)>().prop_map(|(a, b)| (Ipv4Addr::from(a).into(), Ipv4Addr::from(b).into())),
        any::<(u128, u128)>()
            .prop_map(|(a, b)| (Ipv6Addr::from(a).into(), Ipv6Addr::from(b).into())),
    ]
}

fn flow() -> impl Strategy<Value = FlowSpec> {
    (mac(), mac(), addresses(), any::<(u16, u16, u8)>(), vlan()).prop_map(
        |(src_mac, dst_mac, (src_ip, dst_ip), (src_port, dst_port, ttl), vlan)| FlowSpec {
            src_mac,
            dst_mac,
            src_ip,
            dst_ip,
            src_port,
            dst_port,
            ttl,
            vlan,
        },
    )
}

/// A flow and a frame size its layout can carry: mostly up to 1518 bytes,
/// sometimes jumbo.
fn flow_and_size(max: u16) -> impl Strategy<Value = (FlowSpec, FrameSize)> {
    flow().prop_flat_map(move |f| {
        let encap = f.encap();
        let min = encap.min_frame() as u64;
        let sizes = prop_oneof![
            4 => min..=1518u64.min(max as u64),
            1 => min..=max as u64,
        ];
        (Just(f), sizes).prop_map(move |(f, s)| {
            let size = FrameSize::from_frame_in(s, &encap).expect("a size in range");
            (f, size)
        })
    })
}

fn built(flow: &FlowSpec, size: FrameSize, sig: Signature) -> (Vec<u8>, usize) {
    let t = FrameTemplate::new(flow, size);
    let mut b = vec![0u8; t.len()];
    assert_eq!(t.write(&mut b, sig), t.len());
    (b, t.signature_offset())
}

/// Inserts an 802.1Q tag after the MAC addresses.
fn tagged(f: &[u8], tci: u16) -> Vec<u8> {
    let mut v = f[..12].to_vec();
    v.extend_from_slice(&[0x81, 0x00]);
    v.extend_from_slice(&tci.to_be_bytes());
    v.extend_from_slice(&f[12..]);
    v
}

/// Random bytes shaped, more often than chance would, like the headers
/// the classifier looks into (EtherTypes, a VLAN tag, IPv4/IPv6 with UDP
/// or ICMPv6, hop limit 255, the signature magic), so its deeper branches
/// see random input too.
fn frame_like() -> impl Strategy<Value = Vec<u8>> {
    let ethertype = prop_oneof![
        Just(0x0800u16),
        Just(0x86DD),
        Just(0x0806),
        Just(0x8100),
        any::<u16>()
    ];
    (
        proptest::collection::vec(any::<u8>(), 0..200),
        ethertype,
        prop_oneof![Just(0x0800u16), Just(0x86DD), Just(0x0806), any::<u16>()],
        any::<(bool, bool, u8)>(),
    )
        .prop_map(|(mut b, et, inner, (magic, icmp, ihl))| {
            let put = |b: &mut Vec<u8>, at: usize, v: &[u8]| {
                if b.len() >= at + v.len() {
                    b[at..at + v.len()].copy_from_slice(v);
                }
            };
            put(&mut b, 12, &et.to_be_bytes());
            let l3 = if et == 0x8100 {
                put(&mut b, 16, &inner.to_be_bytes());
                18
            } else {
                14
            };
            let l3_type = if et == 0x8100 { inner } else { et };
            match l3_type {
                0x0800 => {
                    put(&mut b, l3, &[0x40 | (ihl & 0x0F)]);
                    put(&mut b, l3 + 6, &[0, 0]);
                    put(&mut b, l3 + 9, &[17]);
                    if magic {
                        let at = l3 + (ihl as usize & 0x0F) * 4 + 8;
                        put(&mut b, at, &SIGNATURE_MAGIC.to_be_bytes());
                    }
                }
                0x86DD => {
                    put(&mut b, l3, &[0x60]);
                    put(&mut b, l3 + 6, &[if icmp { 58 } else { 17 }, 255]);
                    if icmp {
                        put(&mut b, l3 + 40, &[135 + (ihl & 1), 0]);
                    } else if magic {
                        put(&mut b, l3 + 48, &SIGNATURE_MAGIC.to_be_bytes());
                    }
                }
                0x0806 => put(&mut b, l3, &[0, 1, 8, 0, 6, 4, 0, 1 + (ihl & 1)]),
                _ => {}
            }
            b
        })
}

// ------------------------------------------------ received frames: no panics

proptest! {
    #![proptest_config(config(CASES))]

    /// Whatever arrives, the classifier and the checksum check answer.
    #[test]
    fn classifier_never_panics_on_arbitrary_bytes(
        b in proptest::collection::vec(any::<u8>(), 0..300),
        port in any::<u16>(),
    ) {
        let _ = classify(&b, port);
        let _ = classify(&b, ANY_PORT);
        let _ = checksums_ok(&b);
    }

    #[test]
    fn classifier_never_panics_on_frame_like_bytes(b in frame_like(), port in any::<u16>()) {
        let _ = classify(&b, port);
        let _ = classify(&b, ANY_PORT);
        let _ = checksums_ok(&b);
    }

    /// A signature is read from any 12 bytes with the magic, and from
    /// nothing else; what is written is read back.
    #[test]
    fn signature_parses_only_with_its_magic_and_round_trips(
        b in proptest::collection::vec(any::<u8>(), 0..32),
        sig in signature(),
        tail in proptest::collection::vec(any::<u8>(), 0..8),
    ) {
        let parsed = Signature::parse(&b);
        let expected = b.len() >= SIGNATURE_LEN && b[..2] == SIGNATURE_MAGIC.to_be_bytes();
        prop_assert_eq!(parsed.is_some(), expected);
        let mut buf = vec![0u8; SIGNATURE_LEN];
        prop_assert!(sig.emit(&mut buf));
        buf.extend_from_slice(&tail);
        prop_assert_eq!(Signature::parse(&buf), Some(sig));
        prop_assert_eq!(Signature::parse(&buf[..SIGNATURE_LEN - 1]), None);
    }
}

// ------------------------------------------------- test frames of our own

proptest! {
    #![proptest_config(config(CASES))]

    /// A frame the crate builds, in any layout and size, is a test frame
    /// with the signature it was stamped with, to its port and to any
    /// port, and its checksums verify; to another port it is not ours.
    #[test]
    fn built_frames_classify_as_their_signature(
        (flow, size) in flow_and_size(MAX_FRAME_SIZE),
        sig in signature(),
        other_port in any::<u16>(),
    ) {
        let (f, _) = built(&flow, size, sig);
        prop_assert_eq!(f.len(), size.frame() as usize - 4);
        prop_assert_eq!(classify(&f, flow.dst_port), Received::Test { sig });
        prop_assert_eq!(classify(&f, ANY_PORT), Received::Test { sig });
        prop_assert!(checksums_ok(&f));
        if other_port != flow.dst_port && other_port != ANY_PORT {
            prop_assert_eq!(classify(&f, other_port), Received::Other);
        }
    }

    /// A receiver that copies only the first bytes of each frame still
    /// recognises it as long as the whole signature is inside the copy,
    /// and never when it is cut.
    #[test]
    fn truncated_captures_are_recognised_exactly_when_the_signature_is_in(
        (flow, size) in flow_and_size(1518),
        sig in signature(),
        cut in any::<Index>(),
    ) {
        let (f, sig_at) = built(&flow, size, sig);
        let n = cut.index(f.len() + 1);
        let want = if n >= sig_at + SIGNATURE_LEN {
            Received::Test { sig }
        } else {
            Received::Other
        };
        prop_assert_eq!(classify(&f[..n], flow.dst_port), want);
    }

    /// One byte changed anywhere in a test frame (a bit error the FCS did
    /// not catch, or a DUT that rewrites what it should not).
    ///
    /// By design the hot path checks the magic, the lengths and the port,
    /// not the checksums: a changed stream, sequence or timestamp byte is
    /// read as that other signature. What the design guarantees, and this
    /// checks: a frame the classifier takes for a *different* test frame
    /// always fails `checksums_ok` (the UDP checksum covers the signature,
    /// the IPv4 header checksum the header), a changed magic is never a
    /// test frame, and changed MAC addresses change nothing.
    #[test]
    fn a_corrupted_byte_is_never_a_different_valid_test_frame(
        (flow, size) in flow_and_size(1518),
        sig in signature(),
        at in any::<Index>(),
        flip in 1u8..=255,
    ) {
        let (f, sig_at) = built(&flow, size, sig);
        let i = at.index(f.len());
        let mut g = f.clone();
        g[i] ^= flip;
        let got = classify(&g, flow.dst_port);
        if let Received::Test { sig: s } = got {
            if s != sig {
                prop_assert!(!checksums_ok(&g), "byte {} ^ {:#x}: read as {:?}", i, flip, s);
            }
        }
        if (sig_at..sig_at + 2).contains(&i) {
            prop_assert_eq!(got, Received::Other, "magic byte {}", i);
        }
        if (sig_at + 2..sig_at + SIGNATURE_LEN).contains(&i) {
            let other_sig = matches!(got, Received::Test { sig: s } if s != sig);
            prop_assert!(other_sig, "byte {}: {:?}", i, got);
            prop_assert!(!checksums_ok(&g));
        }
        if i < 12 {
            prop_assert_eq!(got, Received::Test { sig });
            prop_assert!(checksums_ok(&g));
        }
    }

    /// Frames whose addresses and ports vary per frame (`--range`) keep
    /// their signature, verify, and carry each range's value for frame n.
    #[test]
    fn frames_with_flow_ranges_keep_signature_and_checksums(
        (flow, size) in flow_and_size(1518),
        sig in signature(),
        texts in flow_ranges(),
        n in any::<u64>(),
    ) {
        let Ok(flows) = Flows::parse(&texts) else {
            return Ok(());
        };
        let encap = flow.encap();
        let Ok(flows) = flows.for_encap(encap) else {
            prop_assert!(encap.ip == linerate_wire::IpVersion::V6);
            return Ok(());
        };
        let (mut f, _) = built(&flow, size, sig);
        flows.apply(&mut f, n);
        prop_assert_eq!(classify(&f, ANY_PORT), Received::Test { sig });
        prop_assert!(checksums_ok(&f));
        for r in &flows.ranges {
            let (off, w) = (r.field.offset_in(&encap), r.field.width());
            let v = r.value(n).to_be_bytes();
            prop_assert_eq!(&f[off..off + w], &v[8 - w..]);
        }
    }
}

// ------------------------------------------------------------------ ARP, ND

fn arp_repr() -> impl Strategy<Value = ArpRepr> {
    (any::<bool>(), mac(), any::<u32>(), mac(), any::<u32>()).prop_map(|(req, sm, si, tm, ti)| {
        ArpRepr {
            op: if req { ArpOp::Request } else { ArpOp::Reply },
            sender_mac: sm,
            sender_ip: si.into(),
            target_mac: tm,
            target_ip: ti.into(),
        }
    })
}

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn arp_parse_never_panics(b in proptest::collection::vec(any::<u8>(), 0..64)) {
        if let Some(a) = ArpRepr::parse(&b) {
            // Only Ethernet/IPv4 requests and replies are taken.
            prop_assert_eq!(&b[..6], &[0, 1, 8, 0, 6, 4]);
            prop_assert_eq!(a.sender_mac.0, <[u8; 6]>::try_from(&b[8..14]).unwrap());
        }
    }

    /// Every ARP packet written is read back as it was, behind any
    /// padding, and a whole ARP frame, tagged or not, classifies as ARP.
    #[test]
    fn arp_round_trips_and_classifies(
        r in arp_repr(),
        src in mac(),
        dst in mac(),
        pad in proptest::collection::vec(any::<u8>(), 0..20),
        tci in any::<u16>(),
        port in any::<u16>(),
    ) {
        let mut p = vec![0u8; 28];
        prop_assert!(r.emit(&mut p));
        p.extend_from_slice(&pad);
        prop_assert_eq!(ArpRepr::parse(&p), Some(r));
        let f = arp_frame(&r, src, dst);
        prop_assert_eq!(classify(&f, port), Received::Arp(r));
        prop_assert_eq!(classify(&tagged(&f, tci), port), Received::Arp(r));
        prop_assert!(!checksums_ok(&f));
    }

    #[test]
    fn nd_parse_never_panics(
        b in proptest::collection::vec(any::<u8>(), 0..120),
        shape in any::<(bool, u8, u16)>(),
        eth_src in mac(),
    ) {
        // Half the inputs look like NS/NA (version 6, ICMPv6, hop limit
        // 255, type 135/136) with random lengths, so the option walk sees
        // random input.
        let mut b = b;
        let (shaped, ty, payload) = shape;
        if shaped && b.len() >= 42 {
            b[0] = 0x60;
            b[4..6].copy_from_slice(&(payload % 128).to_be_bytes());
            b[6] = 58;
            b[7] = 255;
            b[40] = 135 + (ty & 1);
            b[41] = 0;
        }
        if let Some(n) = NdpRepr::parse(&b, eth_src) {
            prop_assert_eq!(n.target.octets(), <[u8; 16]>::try_from(&b[48..64]).unwrap());
        }
    }

    /// A solicitation and the advertisement answering it, as the crate
    /// builds them, classify as Neighbor Discovery with their addresses.
    #[test]
    fn nd_frames_round_trip_through_the_classifier(
        (me, gw) in (mac(), mac()),
        (src, target) in any::<(u128, u128)>(),
        vlan in vlan(),
        port in any::<u16>(),
    ) {
        let (src, target) = (Ipv6Addr::from(src), Ipv6Addr::from(target));
        let ns = ndp::solicitation(me, src, target, vlan);
        let want = NdpRepr { op: NdpOp::Solicit, src_ip: src, target, link_addr: me };
        prop_assert_eq!(classify(&ns, port), Received::Ndp(want));
        let asked = NdpRepr { link_addr: gw, ..want };
        let na = ndp::advertisement(me, target, &asked, vlan);
        let got = classify(&na, port);
        let want = NdpRepr { op: NdpOp::Advert, src_ip: target, target, link_addr: me };
        prop_assert_eq!(got, Received::Ndp(want));
    }
}

// ------------------------------------------------------ strings users write

/// Text made of what the number parsers look at: random characters, small
/// fractions, and numbers of hundreds of digits (near where an f64 turns
/// into infinity).
fn rate_like() -> impl Strategy<Value = String> {
    let unit = "[ ]?(fps|pps|kfps|kpps|mfps|Mpps|bps|kbps|Mbps|Gbps|%|G|M|k|)(@L[0-9]|@l1|@|)";
    let re = |r: String| proptest::string::string_regex(&r).expect("a valid regex");
    prop_oneof![
        re(format!("[0-9._]{{0,12}}{unit}")),
        re(format!("0?\\.[0-9]{{1,8}}{unit}")),
        re(format!("[1-9][0-9]{{295,315}}{unit}")),
    ]
}

proptest! {
    #![proptest_config(config(CASES))]

    /// Any text is a rate or an error; a rate is finite and above zero
    /// (a 300-digit Gbps, finite as a number, was infinite as a rate).
    #[test]
    fn rate_parse_accepts_only_finite_positive_rates(
        s in prop_oneof![any::<String>(), rate_like()],
    ) {
        if let Ok(r) = Rate::parse(&s) {
            let v = match r {
                Rate::Fps(v) | Rate::PercentOfLine(v) => v,
                Rate::Bps { bps, .. } => bps,
            };
            prop_assert!(v.is_finite() && v > 0.0, "'{}' gave {:?}", s, r);
            // Frames/s may overflow for absurd percentages (1e300%): the
            // commands refuse any rate above the line rate, infinity too;
            // never NaN, never 0.
            let fps = r.to_fps(FrameSize::from_frame(64).unwrap(), 10_000_000_000);
            prop_assert!(fps > 0.0, "'{}' gave {} fps", s, fps);
        }
    }

    /// A rate written with any number and unit is read as that number
    /// times the unit, at the layer given.
    #[test]
    fn rates_are_read_as_written(
        int in 0u64..10_000_000,
        frac in proptest::option::of(0u32..1000),
        unit in prop::sample::select(vec![
            ("fps", 1.0), ("pps", 1.0), ("kfps", 1e3), ("kpps", 1e3), ("Mfps", 1e6),
            ("Mpps", 1e6), ("bps", 1.0), ("kbps", 1e3), ("Mbps", 1e6), ("Gbps", 1e9), ("%", 1.0),
        ]),
        layer in prop::sample::select(vec![None, Some(Layer::L1), Some(Layer::L2), Some(Layer::L3), Some(Layer::L4)]),
    ) {
        let num = match frac {
            Some(f) => format!("{int}.{f:03}"),
            None => int.to_string(),
        };
        let at = layer.map(|l| format!("@{l}")).unwrap_or_default();
        let text = format!("{num}{}{at}", unit.0);
        let value: f64 = num.parse().unwrap();
        let parsed = Rate::parse(&text);
        if value == 0.0 {
            prop_assert!(parsed.is_err());
            return Ok(());
        }
        let want = value * unit.1;
        let r = parsed.unwrap();
        match r {
            Rate::PercentOfLine(v) => prop_assert!(unit.0 == "%" && v == want),
            Rate::Fps(v) => prop_assert!(unit.0.ends_with("ps") && !unit.0.ends_with("bps") && v == want),
            Rate::Bps { bps, layer: l } => {
                prop_assert!(unit.0.ends_with("bps"));
                prop_assert_eq!(bps, want);
                prop_assert_eq!(l, layer.unwrap_or(Layer::L2));
            }
        }
    }

    /// A line speed is a whole number of bits per second above zero.
    #[test]
    fn line_speed_parse_accepts_only_positive_speeds(
        s in prop_oneof![any::<String>(), rate_like()],
        g in 1u64..=400,
    ) {
        if let Ok(bps) = parse_line_speed(&s) {
            prop_assert!(bps > 0, "'{}' gave {} bit/s", s, bps);
        }
        prop_assert_eq!(parse_line_speed(&format!("{g}G")), Ok(g * 1_000_000_000));
        prop_assert_eq!(parse_line_speed(&format!("{g}000M")), Ok(g * 1_000_000_000));
    }

    #[test]
    fn mac_addresses_print_and_parse_back(m in mac(), s in any::<String>()) {
        let _ = s.parse::<MacAddr>();
        prop_assert_eq!(m.to_string().parse::<MacAddr>(), Ok(m));
        let dashed = m.to_string().to_uppercase().replace(':', "-");
        prop_assert_eq!(dashed.parse::<MacAddr>(), Ok(m));
    }

    #[test]
    fn vlan_tags_parse_only_valid_ids(
        s in prop_oneof![any::<String>(), "[0-9+ -]{0,8}(:[0-9+ -]{0,4})?"],
        id in 1u16..=4094,
        pcp in 0u8..=7,
    ) {
        if let Ok(t) = VlanTag::parse(&s) {
            prop_assert!((1..=4094).contains(&t.id) && t.pcp <= 7, "'{}' gave {:?}", s, t);
        }
        prop_assert_eq!(VlanTag::parse(&format!("{id}:{pcp}")), Ok(VlanTag { id, pcp }));
        prop_assert_eq!(VlanTag::parse(&id.to_string()), Ok(VlanTag { id, pcp: 0 }));
    }
}

// ---------------------------------------------------------------- frame mixes

/// `SIZE:WEIGHT,...` with sizes near and out of range and weights up to
/// u32::MAX, where sums overflow.
fn weights_text() -> impl Strategy<Value = String> {
    let size = prop_oneof![
        prop::sample::select(vec![64u64, 128, 1518]),
        0u64..100,
        60u64..2000,
        9000u64..9100,
        any::<u64>()
    ];
    let weight = prop_oneof![
        1u64..200,
        any::<u32>().prop_map(u64::from),
        (0u64..4).prop_map(|d| u32::MAX as u64 - d),
        any::<u64>()
    ];
    proptest::collection::vec((size, weight), 1..10).prop_map(|v| {
        v.iter()
            .map(|(s, w)| format!("{s}:{w}"))
            .collect::<Vec<_>>()
            .join(",")
    })
}

fn check_mix(m: &FrameMix) -> Result<(), TestCaseError> {
    prop_assert!(!m.sequence.is_empty() && m.sequence.len() <= MAX_SEQUENCE);
    prop_assert!(!m.sizes.is_empty() && m.sizes.len() <= MAX_SIZES);
    prop_assert!(m.sequence.iter().all(|&i| (i as usize) < m.sizes.len()));
    prop_assert!(m
        .sizes
        .iter()
        .all(|s| (MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&s.frame())));
    // Every size is sent.
    prop_assert!(m.counts().iter().all(|&c| c > 0));
    Ok(())
}

proptest! {
    #![proptest_config(config(CASES))]

    /// Any text is a mix or an error; a mix is one the generator can send.
    #[test]
    fn mix_parse_never_panics_and_makes_sendable_mixes(
        s in prop_oneof![
            any::<String>(),
            weights_text(),
            "genome:[a-k z]{0,140}",
            "(imix[0-3]|simple|IMIX 1|genome:|:|,){0,4}",
        ],
    ) {
        if let Ok(m) = FrameMix::parse(&s) {
            check_mix(&m)?;
        }
        let _ = Frames::parse_mixes(std::slice::from_ref(&s));
    }

    /// Written back as SIZE:COUNT for each size, a weighted mix is read
    /// as the same sizes in the same order.
    #[test]
    fn weighted_mixes_round_trip(
        w in proptest::collection::vec((64u64..=9018, 1u32..=40), 1..=MAX_SIZES),
    ) {
        let text = w.iter().map(|(s, n)| format!("{s}:{n}")).collect::<Vec<_>>().join(",");
        let Ok(m) = FrameMix::parse(&text) else {
            // Only refused when the reduced sequence is too long.
            let total: u32 = w.iter().map(|&(_, n)| n).sum();
            prop_assert!(total as usize > MAX_SEQUENCE);
            return Ok(());
        };
        check_mix(&m)?;
        let again: String = m
            .sizes
            .iter()
            .zip(m.counts())
            .map(|(s, c)| format!("{}:{c}", s.frame()))
            .collect::<Vec<_>>()
            .join(",");
        let back = FrameMix::parse(&again).unwrap();
        prop_assert_eq!(&back.sizes, &m.sizes);
        prop_assert_eq!(&back.sequence, &m.sequence);
    }

    /// Each size of a weighted mix gets exactly its share of the
    /// sequence: its weights (summed when a size repeats) over all weights,
    /// however large they are.
    #[test]
    fn weighted_mixes_give_each_size_its_exact_share(
        w in proptest::collection::vec(
            (
                prop::sample::select(vec![64u64, 128, 1518]),
                prop_oneof![1u32..50, (0u32..3).prop_map(|d| u32::MAX - d), Just(1u32 << 31)],
            ),
            1..6,
        ),
    ) {
        let text = w.iter().map(|(s, n)| format!("{s}:{n}")).collect::<Vec<_>>().join(",");
        let Ok(m) = FrameMix::parse(&text) else {
            return Ok(());
        };
        check_mix(&m)?;
        let total: u128 = w.iter().map(|&(_, n)| n as u128).sum();
        let len = m.sequence.len() as u128;
        for (size, count) in m.sizes.iter().zip(m.counts()) {
            let weight: u128 = w
                .iter()
                .filter(|&&(s, _)| s == size.frame() as u64)
                .map(|&(_, n)| n as u128)
                .sum();
            prop_assert_eq!(count as u128 * total, weight * len, "{} in '{}'", size, text);
        }
    }

    /// A genome is sent exactly as written, unless it has more sizes
    /// than a mix may have.
    #[test]
    fn genomes_are_sent_letter_by_letter(g in "[a-i]{1,128}") {
        let parsed = FrameMix::parse(&format!("genome:{g}"));
        let mut letters: Vec<u8> = g.bytes().collect();
        letters.sort_unstable();
        letters.dedup();
        if letters.len() > MAX_SIZES {
            prop_assert!(matches!(parsed, Err(MixError::TooManySizes(_))));
            return Ok(());
        }
        let m = parsed.unwrap();
        check_mix(&m)?;
        let sizes = [64u16, 128, 256, 512, 1024, 1280, 1518, 2112, 9000];
        for (n, c) in g.bytes().enumerate() {
            prop_assert_eq!(m.size_of(n as u64).frame(), sizes[(c - b'a') as usize]);
        }
    }
}

// ---------------------------------------------------------------- flow ranges

#[derive(Debug, Clone, Copy)]
enum Kind {
    Mac,
    Ip,
    Port,
}

fn value_text(kind: Kind, v: u64) -> String {
    match kind {
        Kind::Mac => {
            let b = v.to_be_bytes();
            MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]]).to_string()
        }
        Kind::Ip => Ipv4Addr::from(v as u32).to_string(),
        Kind::Port => v.to_string(),
    }
}

/// A range as a user writes it, valid or nearly so: any field, bounds in
/// either order, any step (up to the field's width), start and mode.
fn range_text() -> impl Strategy<Value = String> {
    let field = prop::sample::select(vec![
        ("src-mac", Kind::Mac, 48),
        ("dst-mac", Kind::Mac, 48),
        ("src-ip", Kind::Ip, 32),
        ("dst-ip", Kind::Ip, 32),
        ("src-port", Kind::Port, 16),
        ("dst-port", Kind::Port, 16),
    ]);
    field.prop_flat_map(|(name, kind, bits)| {
        let v = move || any::<u64>().prop_map(move |x| x & ((1u64 << bits) - 1));
        (
            v(),
            v(),
            proptest::option::of(v()),
            proptest::option::of(v()),
            prop::sample::select(vec!["", "/inc", "/dec", "/random"]),
        )
            .prop_map(move |(lo, hi, step, start, mode)| {
                let mut s = format!(
                    "{name}={}..{}{mode}",
                    value_text(kind, lo),
                    value_text(kind, hi)
                );
                if let Some(step) = step {
                    s += &format!("/step={step}");
                }
                if let Some(start) = start {
                    s += &format!("/start={}", value_text(kind, start));
                }
                s
            })
    })
}

fn flow_ranges() -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(range_text(), 0..3)
}

proptest! {
    #![proptest_config(config(CASES))]

    #[test]
    fn range_parse_never_panics(
        s in prop_oneof![
            any::<String>(),
            "(src|dst)-(ip|mac|port)=[0-9a-f.:]{0,20}\\.\\.[0-9a-f.:]{0,20}(/(inc|dec|random|step=[0-9.]{0,12}|start=[0-9a-f.:]{0,18})){0,3}",
        ],
    ) {
        let _ = FieldRange::parse(&s);
    }

    /// A range that is accepted has its start and step inside its bounds,
    /// reads back as written from its description, gives every frame a
    /// value inside the bounds, and steps by exactly its step from one
    /// frame to the next (modulo the span), whatever the frame number.
    #[test]
    fn ranges_stay_in_bounds_step_exactly_and_round_trip(
        text in range_text(),
        n in any::<u64>(),
    ) {
        let Ok(r) = FieldRange::parse(&text) else {
            return Ok(());
        };
        prop_assert!(r.min <= r.start && r.start <= r.max);
        prop_assert!(r.step >= 1 && r.step <= r.span());
        let back = FieldRange::parse(&r.describe()).unwrap();
        if r.mode == Mode::Random {
            prop_assert_eq!((back.field, back.min, back.max, back.mode), (r.field, r.min, r.max, r.mode));
        } else {
            prop_assert_eq!(back, r);
        }
        let (a, b) = (r.value(n), r.value(n.wrapping_add(1)));
        prop_assert!((r.min..=r.max).contains(&a) && (r.min..=r.max).contains(&b));
        let span = r.span() as u128;
        let step = (r.step as u128) % span;
        let (a, b) = ((a - r.min) as u128, (b - r.min) as u128);
        // The module doc's formulas, in exact arithmetic.
        let off = (r.start - r.min) as u128;
        let k = (n as u128 % span) * step;
        let exact = match r.mode {
            Mode::Inc => Some(r.min as u128 + (off + k) % span),
            Mode::Dec => Some(r.max as u128 - ((r.max - r.start) as u128 + k) % span),
            Mode::Random => None,
        };
        if let Some(exact) = exact {
            prop_assert_eq!(r.value(n) as u128, exact, "{} at frame {}", text, n);
        }
        let (first, last) = (r.value(0), r.value(u64::MAX));
        prop_assert!((r.min..=r.max).contains(&first) && (r.min..=r.max).contains(&last));
        if n != u64::MAX {
            match r.mode {
                Mode::Inc => prop_assert_eq!((a + step) % span, b, "{} at frame {}", text, n),
                Mode::Dec => prop_assert_eq!((b + step) % span, a, "{} at frame {}", text, n),
                Mode::Random => {}
            }
        }
        // Frame 0 starts at the start.
        if r.mode != Mode::Random {
            prop_assert_eq!(first, r.start);
        }
    }
}
