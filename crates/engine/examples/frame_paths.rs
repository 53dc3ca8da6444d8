//! The per-frame parsing on the engine's hot paths, with no port and no
//! namespace: for measuring what a change to it costs in instructions,
//! which, unlike time, a shared machine does not disturb.
//!
//! ```text
//! cargo build --release -p linerate-engine --example frame_paths
//! valgrind --tool=callgrind target/release/examples/frame_paths parse 200000
//! valgrind --tool=callgrind target/release/examples/frame_paths esp 20000
//! ```
//!
//! `parse N`: N rounds over a few prepared frames (IPv4, IPv4 behind an
//! 802.1Q tag, ESP in UDP), each round reading every frame as the
//! receiver does (`classify`, `intact`, the per-tunnel tally) and taking
//! the ESP frame apart (`linerate_esp::decapsulate`). `esp N`: N test
//! frames sealed by `EspSend` over 4 tunnels and opened again by
//! `EspReceive` (the crypto dominates; the framing rides along).
//!
//! Prints a checksum of what it saw, so the work is not optimised away and
//! two builds can be seen to agree.

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use linerate_engine::ipsec::{EspReceive, EspSend, SharedCounts, TunnelMap};
use linerate_engine::receiver::RxTally;
use linerate_engine::transform::{Arrived, ReceiveTransform, SendTransform};
use linerate_esp::{EspSuite, Inbound, Outbound, SaKeys};
use linerate_wire::flows::Field;
use linerate_wire::integrity::intact;
use linerate_wire::{
    classify, FlowSpec, FrameCheck, FrameSize, FrameTemplate, MacAddr, Received, Signature, VlanTag,
};

const MAP: TunnelMap = TunnelMap {
    first: Ipv4Addr::new(10, 1, 0, 0),
    block: 256,
    count: 4,
};

fn template(src: Ipv4Addr, vlan: Option<VlanTag>, size: u64) -> FrameTemplate {
    let flow = FlowSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src_ip: IpAddr::V4(src),
        dst_ip: IpAddr::V4(Ipv4Addr::new(198, 19, 0, 2)),
        src_port: 0x4C52,
        dst_port: 0x4C52,
        ttl: 64,
        vlan,
    };
    let size = FrameSize::from_frame_in(size, &flow.encap()).expect("a frame size");
    FrameTemplate::new(&flow, size)
}

fn keys(i: u32) -> SaKeys {
    let suite = EspSuite::Aes128Gcm16;
    SaKeys::new(
        suite,
        0xc000_0100 + i,
        vec![i as u8 + 1; suite.encryption_keymat_len()],
        vec![],
    )
    .expect("keys")
}

fn sender() -> EspSend {
    let sas = (0..MAP.count)
        .map(|i| {
            let outer = Ipv4Addr::new(198, 18, 1, 10 + i as u8);
            (Outbound::new(keys(i)).expect("SA"), outer)
        })
        .collect();
    EspSend::many(
        sas,
        Ipv4Addr::new(198, 18, 0, 1),
        MAP,
        SharedCounts::default(),
    )
}

fn receiver() -> EspReceive {
    let sas = (0..MAP.count)
        .map(|i| Inbound::new(keys(i)).expect("SA"))
        .collect();
    EspReceive::many(sas, SharedCounts::default())
}

fn sig(n: u64) -> Signature {
    Signature {
        stream: 0,
        seq: n as u32,
        tx_ts: 0,
    }
}

/// One test frame of tunnel `n mod 4`'s source.
fn test_frame(templates: &[FrameTemplate], n: u64) -> Vec<u8> {
    let t = &templates[(n % templates.len() as u64) as usize];
    let mut f = vec![0u8; t.len()];
    t.write(&mut f, sig(n));
    f
}

fn parse(rounds: u64) -> u64 {
    let host = |i: u32| Ipv4Addr::new(10, 1, i as u8, 2);
    let plain: Vec<FrameTemplate> = (0..MAP.count)
        .map(|i| template(host(i), None, 64))
        .collect();
    let tag = Some(VlanTag { id: 100, pcp: 0 });
    let mut frames = vec![
        test_frame(&plain, 0),
        test_frame(&[template(host(1), tag, 64)], 1),
        test_frame(&plain, 2),
    ];
    // An ESP-in-UDP frame of the same test frame.
    let mut send = sender();
    let mut buf = vec![0u8; 256];
    let f = test_frame(&plain, 3);
    buf[..f.len()].copy_from_slice(&f);
    let n = send.apply(&mut buf, f.len());
    buf.truncate(n);
    frames.push(buf);
    let tally = RxTally {
        map: MAP,
        field: Field::SrcIp,
        streams: 1,
    };
    let mut seen = 0u64;
    for _ in 0..rounds {
        for f in &frames {
            let f = black_box(&f[..]);
            if let Received::Test { sig } = classify(f, 0x4C52) {
                seen = seen.wrapping_add(sig.seq as u64);
            }
            seen += intact(f, f.len(), FrameCheck::Headers) as u64;
            seen += tally.tunnel_of(f).map_or(7, |i| i as u64);
        }
        let mut esp = black_box(frames[3].clone());
        if let Ok(d) = linerate_esp::decapsulate(&mut esp, 4500) {
            seen += u32::from(d.src_ip) as u64;
        }
    }
    seen
}

fn esp(frames: u64) -> u64 {
    let host = |i: u32| Ipv4Addr::new(10, 1, i as u8, 2);
    let plain: Vec<FrameTemplate> = (0..MAP.count)
        .map(|i| template(host(i), None, 64))
        .collect();
    let (mut send, mut recv) = (sender(), receiver());
    let mut buf = vec![0u8; 256];
    let mut scratch = vec![0u8; 256];
    let mut seen = 0u64;
    for n in 0..frames {
        let t = &plain[(n % plain.len() as u64) as usize];
        let len = t.write(&mut buf, sig(n));
        let len = send.apply(black_box(&mut buf), len);
        match recv.apply(black_box(&buf[..len]), &mut scratch) {
            Arrived::Inner(f) => {
                if let Received::Test { sig } = classify(f, 0x4C52) {
                    seen = seen.wrapping_add(sig.seq as u64);
                }
            }
            _ => seen += 1 << 40,
        }
    }
    seen
}

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "parse".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let seen = match mode.as_str() {
        "parse" => parse(n),
        "esp" => esp(n),
        _ => {
            eprintln!("usage: frame_paths parse|esp [N]");
            std::process::exit(2);
        }
    };
    println!("{mode} {n}: {seen}");
}
