//! The AF_XDP port on a veth pair in a namespace of its own: every frame
//! sent arrives exactly once, control frames get through, and (ignored by
//! default) a transmit-rate measurement against a plain kernel receiver.
//!
//! Needs root and iproute2; without root each test prints
//! "SKIPPED (needs root): ..." and passes; with `LINERATE_REQUIRE_ALL=1`
//! (scripts/test.sh) it fails instead.

use linerate_port::af_xdp::{AfXdpOptions, AfXdpPort};
use linerate_port::{Port, RxQueue, TxQueue};
use linerate_testkit::{is_root, skip, Netns, Veth};
use linerate_wire::arp::arp_frame;
use linerate_wire::{
    classify, ArpRepr, FlowSpec, FrameSize, FrameTemplate, MacAddr, Received, Signature,
};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A namespace of its own holding veth pair `xa` <-> `xb`, both up, MTU
/// 1500, without IPv6 (so the kernel sends no router solicitations of its
/// own). Dropping it deletes the namespace, and with it the pair, also when
/// a test panics.
fn veth_netns(tag: &str) -> Netns {
    Veth::new("xa", "xb")
        .mtu(1500)
        .in_one_netns(&format!("lrxsk-{tag}"))
}

fn flow(src: MacAddr, dst: MacAddr) -> FlowSpec {
    FlowSpec {
        src_mac: src,
        dst_mac: dst,
        src_ip: Ipv4Addr::new(198, 18, 0, 1).into(),
        dst_ip: Ipv4Addr::new(198, 19, 0, 1).into(),
        src_port: linerate_wire::template::DEFAULT_UDP_PORT,
        dst_port: linerate_wire::template::DEFAULT_UDP_PORT,
        ttl: 64,
        vlan: None,
    }
}

/// What the receiving side saw.
struct Seen {
    /// Distinct sequence numbers of our stream.
    distinct: u64,
    /// Frames of our stream whose sequence number had been seen before.
    duplicates: u64,
    /// Frames of our stream with a sequence number beyond what was sent.
    out_of_range: u64,
    /// Test frames of another stream, ARP, anything else.
    other: u64,
    /// Frames of our stream whose length was not the template's.
    wrong_len: u64,
    drops: u64,
}

const STREAM: u16 = 0x5A5A;

/// Sends `total` frames of `size` from `xa` to `xb` and counts what arrives.
/// The sender stays at most `WINDOW` frames ahead of the receiver: this test
/// is about exactness, not speed, so no buffer on the way may overflow.
fn send_and_count(ns: &Netns, size: u64, total: u64) -> (u64, Seen) {
    const WINDOW: u64 = 1024;
    let a = AfXdpPort::open("xa", Some(ns.name()), &AfXdpOptions::default()).expect("open xa");
    let b = AfXdpPort::open("xb", Some(ns.name()), &AfXdpOptions::default()).expect("open xb");
    eprintln!(
        "xa: bind mode {}, XDP {}; xb: bind mode {}, XDP {}",
        a.mode().as_str(),
        a.attach_mode().as_str(),
        b.mode().as_str(),
        b.attach_mode().as_str()
    );
    let frame = FrameSize::from_frame(size).unwrap();
    let template = FrameTemplate::new(&flow(a.info().mac, b.info().mac), frame);
    let expected_len = template.len();
    assert!(expected_len <= a.info().max_frame_len);
    let (mut tx, _rx_a, _) = a.split();
    let (_tx_b, mut rx, _) = b.split();

    let received = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let receiver = {
        let received = Arc::clone(&received);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut seen = vec![false; total as usize];
            let mut s = Seen {
                distinct: 0,
                duplicates: 0,
                out_of_range: 0,
                other: 0,
                wrong_len: 0,
                drops: 0,
            };
            rx.take_drops().unwrap();
            while !stop.load(Ordering::Relaxed) {
                rx.recv(Duration::from_millis(5), |f, _len, _ts| {
                    match classify(f, linerate_wire::template::DEFAULT_UDP_PORT) {
                        Received::Test { sig } if sig.stream == STREAM => {
                            if f.len() != expected_len {
                                s.wrong_len += 1;
                            }
                            match seen.get_mut(sig.seq as usize) {
                                Some(true) => s.duplicates += 1,
                                Some(slot) => {
                                    *slot = true;
                                    s.distinct += 1;
                                }
                                None => s.out_of_range += 1,
                            }
                        }
                        _ => s.other += 1,
                    }
                })
                .unwrap();
                received.store(s.distinct, Ordering::Release);
            }
            s.drops = rx.take_drops().unwrap();
            s
        })
    };

    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seq = 0u64;
    while seq < total {
        assert!(
            Instant::now() < deadline,
            "sending stalled at {seq} of {total} frames ({} received)",
            received.load(Ordering::Acquire)
        );
        let ahead = seq - received.load(Ordering::Acquire);
        if ahead >= WINDOW {
            std::thread::yield_now();
            continue;
        }
        let want = (total - seq).min(WINDOW - ahead).min(64) as usize;
        let n = tx
            .queue(want, |i, buf| {
                template.write(
                    buf,
                    Signature {
                        stream: STREAM,
                        seq: (seq + i as u64) as u32,
                        tx_ts: 0,
                    },
                )
            })
            .unwrap();
        seq += n as u64;
        tx.flush().unwrap();
    }
    let refused = tx.drain(Duration::from_secs(5)).unwrap();

    // Wait for the last frames, then a little longer for any extra one.
    let wait = Instant::now() + Duration::from_secs(5);
    while received.load(Ordering::Acquire) < total - refused && Instant::now() < wait {
        std::thread::sleep(Duration::from_millis(1));
    }
    std::thread::sleep(Duration::from_millis(200));
    stop.store(true, Ordering::Relaxed);
    (refused, receiver.join().unwrap())
}

fn check_exact(size: u64) {
    if !is_root() {
        skip(&format!("(needs root): af_xdp {size}-byte frames test"));
        return;
    }
    let ns = veth_netns(&format!("x{size}"));
    const TOTAL: u64 = 100_000;
    let (refused, seen) = send_and_count(&ns, size, TOTAL);
    eprintln!(
        "{size} B: sent {TOTAL}, refused {refused}, received {} distinct, {} duplicates, \
         {} out of range, {} wrong length, {} other, {} dropped by the socket",
        seen.distinct, seen.duplicates, seen.out_of_range, seen.wrong_len, seen.other, seen.drops
    );
    assert_eq!(refused, 0, "the kernel refused frames");
    assert_eq!(seen.distinct, TOTAL, "every frame arrives");
    assert_eq!(seen.duplicates, 0, "no frame arrives twice");
    assert_eq!(seen.out_of_range, 0);
    assert_eq!(seen.wrong_len, 0, "frames arrive whole");
    assert_eq!(seen.other, 0, "nothing but the test frames arrives");
    assert_eq!(seen.drops, 0, "the receiving socket dropped nothing");
}

#[test]
fn every_64_byte_frame_arrives_exactly_once() {
    check_exact(64);
}

#[test]
fn every_1518_byte_frame_arrives_exactly_once() {
    check_exact(1518);
}

#[test]
fn control_frames_get_through_both_ways() {
    if !is_root() {
        skip("(needs root): af_xdp control frame test");
        return;
    }
    let ns = veth_netns("ctl");
    let a = AfXdpPort::open("xa", Some(ns.name()), &AfXdpOptions::default()).expect("open xa");
    let b = AfXdpPort::open("xb", Some(ns.name()), &AfXdpOptions::default()).expect("open xb");
    let (mac_a, mac_b) = (a.info().mac, b.info().mac);
    let (_ta, mut rx_a, _) = a.split();
    let (_tb, mut rx_b, _) = b.split();
    let ip_a = Ipv4Addr::new(198, 18, 0, 2);
    let ip_b = Ipv4Addr::new(198, 18, 0, 1);
    let request = arp_frame(
        &ArpRepr::request(mac_a, ip_a, ip_b),
        mac_a,
        MacAddr::BROADCAST,
    );
    let reply = arp_frame(
        &ArpRepr::reply_to(&ArpRepr::request(mac_a, ip_a, ip_b), mac_b),
        mac_b,
        mac_a,
    );

    let expect = |rx: &mut linerate_port::af_xdp::XskRx, want: &[u8]| {
        let mut got: Vec<Vec<u8>> = Vec::new();
        let until = Instant::now() + Duration::from_secs(2);
        while got.is_empty() && Instant::now() < until {
            rx.recv(Duration::from_millis(10), |f, _, _| got.push(f.to_vec()))
                .unwrap();
        }
        // A little longer: a second copy would be a bug too.
        rx.recv(Duration::from_millis(50), |f, _, _| got.push(f.to_vec()))
            .unwrap();
        assert_eq!(got.len(), 1, "exactly one frame arrives: {got:02x?}");
        assert_eq!(got[0], want);
    };
    rx_a.send_control(&request).unwrap();
    expect(&mut rx_b, &request);
    rx_b.send_control(&reply).unwrap();
    expect(&mut rx_a, &reply);
    // The sender does not see its own control frame.
    let mut echoed = 0;
    rx_a.recv(Duration::from_millis(20), |_, _, _| echoed += 1)
        .unwrap();
    assert_eq!(echoed, 0);
}

#[test]
fn opening_a_missing_interface_names_it() {
    if !is_root() {
        skip("(needs root): af_xdp missing-interface test");
        return;
    }
    let ns = veth_netns("miss");
    let err = AfXdpPort::open("nosuch0", Some(ns.name()), &AfXdpOptions::default())
        .err()
        .expect("no such interface");
    assert!(err.to_string().contains("nosuch0"), "{err}");
    // A busy queue: a second socket on the same queue is refused, by name.
    let _a = AfXdpPort::open("xa", Some(ns.name()), &AfXdpOptions::default()).expect("open xa");
    let err = AfXdpPort::open("xa", Some(ns.name()), &AfXdpOptions::default())
        .err()
        .expect("queue 0 of xa is taken");
    eprintln!("second open: {err}");
    assert!(err.to_string().contains("xa"), "{err}");
}

/// A measurement, not a check: how many 64-byte frames per second the
/// transmit half gets onto a veth whose peer is a plain kernel receiver
/// (GRO on and threaded NAPI on the peer). Run with
/// `cargo test -p linerate-port --release --test af_xdp -- --ignored --nocapture tx_rate`.
///
/// Note: veth hands a frame to the peer's NAPI only if the sending device
/// has TSO off or the frame's socket buffer is an ordinary socket's; AF_XDP
/// copy-mode buffers are not, so by default the peer's receive work runs
/// inline in the sender's system call (the rate then includes it). Set
/// LR_XSK_TSO_OFF=1 to turn TSO off on the sender, so the peer's NAPI
/// thread does that work (and veth drops frames when it falls behind:
/// they show as xa tx_dropped).
#[test]
#[ignore]
fn tx_rate_64_bytes_to_a_kernel_receiver() {
    if !is_root() {
        skip("(needs root): af_xdp TX rate measurement");
        return;
    }
    let ns = veth_netns("rate");
    ns.exec(&["ethtool", "-K", "xb", "gro", "on"]);
    ns.exec(&["sh", "-c", "echo 1 > /sys/class/net/xb/threaded"]);
    if std::env::var_os("LR_XSK_TSO_OFF").is_some() {
        ns.exec(&["ethtool", "-K", "xa", "tso", "off"]);
    }
    let a = AfXdpPort::open("xa", Some(ns.name()), &AfXdpOptions::default()).expect("open xa");
    eprintln!(
        "xa: bind mode {}, XDP {}",
        a.mode().as_str(),
        a.attach_mode().as_str()
    );
    // Addressed to a MAC nobody has: xb's stack drops the frames early.
    let template = FrameTemplate::new(
        &flow(a.info().mac, MacAddr([0x02, 0, 0, 0, 0, 0x99])),
        FrameSize::from_frame(64).unwrap(),
    );
    let (mut tx, _rx, _) = a.split();
    let rx_before: u64 = ns
        .read("/sys/class/net/xb/statistics/rx_packets")
        .parse()
        .unwrap();
    let drop_before: u64 = ns
        .read("/sys/class/net/xa/statistics/tx_dropped")
        .parse()
        .unwrap();
    let start = Instant::now();
    let mut seq = 0u64;
    while start.elapsed() < Duration::from_secs(3) {
        let n = tx
            .queue(64, |i, buf| {
                template.write(
                    buf,
                    Signature {
                        stream: STREAM,
                        seq: (seq + i as u64) as u32,
                        tx_ts: 0,
                    },
                )
            })
            .unwrap();
        seq += n as u64;
        tx.flush().unwrap();
    }
    let refused = tx.drain(Duration::from_secs(5)).unwrap();
    let secs = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(100));
    let rx_after: u64 = ns
        .read("/sys/class/net/xb/statistics/rx_packets")
        .parse()
        .unwrap();
    let drop_after: u64 = ns
        .read("/sys/class/net/xa/statistics/tx_dropped")
        .parse()
        .unwrap();
    let sent = seq - refused;
    eprintln!(
        "AF_XDP TX, 64 B, {secs:.2} s: {sent} frames completed = {:.0} frames/s; \
         xb received {} ({:.0} frames/s); xa tx_dropped {}",
        sent as f64 / secs,
        rx_after - rx_before,
        (rx_after - rx_before) as f64 / secs,
        drop_after - drop_before
    );
    assert!(sent > 0);
}

/// Two namespaces joined by a veth pair: `xa` in `a` (the AF_XDP port,
/// 198.18.0.2/24; on VLAN 100 when tagged), `xb` in `b` (the sender of raw
/// frames), both up, MTU 1500, without IPv6. Dropping it deletes both
/// namespaces, and with them the pair, also when a test panics.
struct NetnsPair {
    a: Netns,
    b: Netns,
    /// Tagged: the program that untags VLAN 100 on xa's ingress (after
    /// XDP), as a VLAN subinterface would on kernels that have them (this
    /// one may not: CONFIG_VLAN_8021Q).
    _vlan: Option<linerate_bpf::vlan_port::VlanPort>,
}

/// The VLAN of the tagged runs.
const VLAN: u16 = 100;

impl NetnsPair {
    fn new(tag: &str, tagged: bool) -> NetnsPair {
        let (a, b) = Veth::new("xa", "xb")
            .mtu(1500)
            .across_two_netns(&format!("lrxsk-{tag}"));
        a.ip(&["addr", "add", "198.18.0.2/24", "dev", "xa"]);
        let mut vlan = None;
        if tagged {
            let ifindex: i32 = a
                .read("/sys/class/net/xa/ifindex")
                .parse()
                .expect("xa's ifindex");
            let mut port =
                linerate_bpf::vlan_port::VlanPort::load(VLAN).expect("loading vlan_port");
            linerate_port::netns::in_netns(a.name(), || {
                port.attach(ifindex, "xa")
                    .map_err(|e| linerate_port::PortError::Unsupported(e.to_string()))
            })
            .expect("attaching vlan_port to xa");
            vlan = Some(port);
        }
        NetnsPair { a, b, _vlan: vlan }
    }
}

/// An Ethernet frame from `src` to `dst` (tagged with VLAN `vlan` when
/// given): IPv4 198.18.0.1 -> 198.18.0.2 (with 4 bytes of IP options when
/// `options`), UDP to `port` carrying `payload`, padded to 60 bytes.
fn udp_frame(
    (dst, src): (MacAddr, MacAddr),
    vlan: Option<u16>,
    port: u16,
    payload: &[u8],
    options: bool,
) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(&dst.0);
    f.extend_from_slice(&src.0);
    if let Some(id) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&id.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let ip_at = f.len();
    let ihl = if options { 6 } else { 5 };
    let total = (ihl * 4 + 8 + payload.len()) as u16;
    f.extend_from_slice(&[0x40 | ihl as u8, 0]);
    f.extend_from_slice(&total.to_be_bytes());
    f.extend_from_slice(&[0, 1, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[198, 18, 0, 1, 198, 18, 0, 2]);
    if options {
        // NOP, NOP, NOP, end of options.
        f.extend_from_slice(&[1, 1, 1, 0]);
    }
    let mut sum = 0u32;
    for w in f[ip_at..].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[ip_at + 10..ip_at + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    // UDP: source port = destination port (as IKE does), no checksum.
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&(8 + payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(payload);
    if f.len() < 60 {
        f.resize(60, 0);
    }
    f
}

/// `frame` (from [`udp_frame`], no IP options, unpadded) as two IP
/// fragments with IP id `id`: the first carries the UDP header and
/// `first_len` bytes of the IP payload (a multiple of 8), the second the
/// rest; each padded to 60 bytes.
fn ip_fragments(frame: &[u8], vlan: Option<u16>, id: u16, first_len: usize) -> [Vec<u8>; 2] {
    let ip_at = if vlan.is_some() { 18 } else { 14 };
    let data = &frame[ip_at + 20..];
    assert!(first_len % 8 == 0 && first_len < data.len());
    let piece = |part: &[u8], offset: usize, more: bool| {
        let mut f = frame[..ip_at + 20].to_vec();
        let ip = &mut f[ip_at..];
        ip[2..4].copy_from_slice(&((20 + part.len()) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&id.to_be_bytes());
        let flags = if more { 0x2000 } else { 0 } | (offset / 8) as u16;
        ip[6..8].copy_from_slice(&flags.to_be_bytes());
        ip[10..12].copy_from_slice(&[0, 0]);
        let mut sum = 0u32;
        for w in ip[..20].chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
        f.extend_from_slice(part);
        if f.len() < 60 {
            f.resize(60, 0);
        }
        f
    };
    [
        piece(&data[..first_len], 0, true),
        piece(&data[first_len..], first_len, false),
    ]
}

/// Where a frame should end up with pass_ike on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Goes {
    /// The kernel's UDP socket on this port.
    Kernel(u16),
    /// The kernel, as a later IP fragment of the datagram before it.
    KernelFragment,
    Xsk,
}

/// A frame to send: what it is, its bytes, the UDP payload, where it goes.
type IkeCase = (&'static str, Vec<u8>, Vec<u8>, Goes);

fn ike_frames(macs: (MacAddr, MacAddr), vlan: Option<u16>) -> Vec<IkeCase> {
    // An IKE header's start: the initiator's SPI (non-zero).
    let ike = |tag: u8| {
        let mut p = vec![0x5e, 0xc1, 0x7a, tag, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0];
        p.extend_from_slice(&[0x21, 0x20, 0x22, 0x08]);
        p
    };
    let marked = |tag: u8| [&[0u8; 4][..], &ike(tag)].concat();
    let esp = |tag: u8| vec![0xc0, 0xff, 0xee, tag, 0, 0, 0, 1, 0xaa, 0xbb, 0xcc, 0xdd];
    let case = |name, port, payload: Vec<u8>, options, goes| {
        let frame = udp_frame(macs, vlan, port, &payload, options);
        (name, frame, payload, goes)
    };
    // A datagram of 200 payload bytes in two IP fragments (the first with
    // the UDP header and 96 bytes): the second arrives with no UDP header.
    let fragmented = |names: [&'static str; 2], id, port, payload: Vec<u8>, goes: [Goes; 2]| {
        let frame = udp_frame(macs, vlan, port, &payload, false);
        let [first, second] = ip_fragments(&frame, vlan, id, 104);
        [
            (names[0], first, payload, goes[0]),
            (names[1], second, Vec::new(), goes[1]),
        ]
    };
    let long = |mut p: Vec<u8>| {
        p.resize(200, 0x5a);
        p
    };
    let mut cases = vec![
        case("IKE on 500", 500, ike(1), false, Goes::Kernel(500)),
        case(
            "IKE on 4500 behind the non-ESP marker",
            4500,
            marked(2),
            false,
            Goes::Kernel(4500),
        ),
        case("NAT keepalive", 4500, vec![0xff], false, Goes::Kernel(4500)),
        case(
            "IKE on 500 behind IP options",
            500,
            ike(3),
            true,
            Goes::Kernel(500),
        ),
        case(
            "IKE on 4500 behind IP options",
            4500,
            marked(4),
            true,
            Goes::Kernel(4500),
        ),
        case("ESP in UDP 4500", 4500, esp(5), false, Goes::Xsk),
        case(
            "ESP in UDP 4500 behind IP options",
            4500,
            esp(6),
            true,
            Goes::Xsk,
        ),
        // Zero, but 2 bytes of payload: neither a marker nor a keepalive.
        case("2 zero bytes to 4500", 4500, vec![0, 0], false, Goes::Xsk),
        case("one byte 0xfe to 4500", 4500, vec![0xfe], false, Goes::Xsk),
        case("UDP to port 9", 9, ike(7), false, Goes::Xsk),
        case("UDP to port 501", 501, ike(8), false, Goes::Xsk),
    ];
    cases.extend(fragmented(
        [
            "IKE on 500, first IP fragment",
            "IKE on 500, second IP fragment",
        ],
        0x1f01,
        500,
        long(ike(9)),
        [Goes::Kernel(500), Goes::KernelFragment],
    ));
    cases.extend(fragmented(
        [
            "IKE on 4500, first IP fragment",
            "IKE on 4500, second IP fragment",
        ],
        0x1f02,
        4500,
        long(marked(10)),
        [Goes::Kernel(4500), Goes::KernelFragment],
    ));
    cases.extend(fragmented(
        [
            "ESP in UDP 4500, first IP fragment",
            "ESP in UDP 4500, second IP fragment",
        ],
        0x1f03,
        4500,
        long(esp(11)),
        [Goes::Xsk, Goes::Xsk],
    ));
    cases
}

/// What one run saw: per frame, its name, whether it reached the AF_XDP
/// socket and where it should have gone with pass_ike; what the kernel's
/// UDP sockets received (port, payload).
type IkeRun = (Vec<(&'static str, bool, Goes)>, Vec<(u16, Vec<u8>)>);

/// Opens xa with `pass_ike`, sends every frame of [`ike_frames`] from xb
/// and reports where each went.
fn send_ike_frames(pair: &NetnsPair, pass_ike: bool, vlan: Option<u16>) -> IkeRun {
    let opts = AfXdpOptions {
        pass_ike,
        ..AfXdpOptions::default()
    };
    let a = AfXdpPort::open("xa", Some(pair.a.name()), &opts).expect("open xa");
    let b = AfXdpPort::open("xb", Some(pair.b.name()), &AfXdpOptions::default()).expect("open xb");
    eprintln!(
        "pass_ike {pass_ike}, VLAN {vlan:?}: xa bind mode {}, XDP {}",
        a.mode().as_str(),
        a.attach_mode().as_str()
    );
    let frames = ike_frames((a.info().mac, b.info().mac), vlan);
    let sockets: Vec<(u16, std::net::UdpSocket)> = [500u16, 4500]
        .into_iter()
        .map(|port| {
            let s = linerate_port::netns::in_netns(pair.a.name(), || {
                std::net::UdpSocket::bind(("0.0.0.0", port))
                    .map_err(|e| linerate_port::PortError::io("binding a UDP socket", "xa", e))
            })
            .expect("a UDP socket in xa's namespace");
            s.set_nonblocking(true).unwrap();
            (port, s)
        })
        .collect();
    let (_ta, mut rx_a, _) = a.split();
    let (mut tx_b, _rb, _) = b.split();
    let n = tx_b
        .queue(frames.len(), |i, buf| {
            let f = &frames[i].1;
            buf[..f.len()].copy_from_slice(f);
            f.len()
        })
        .unwrap();
    assert_eq!(n, frames.len());
    tx_b.flush().unwrap();
    assert_eq!(tx_b.drain(Duration::from_secs(5)).unwrap(), 0);

    let mut at_xsk: Vec<Vec<u8>> = Vec::new();
    let mut kernel: Vec<(u16, Vec<u8>)> = Vec::new();
    let mut collect = |at_xsk: &mut Vec<Vec<u8>>, kernel: &mut Vec<(u16, Vec<u8>)>| {
        rx_a.recv(Duration::from_millis(10), |f, _, _| at_xsk.push(f.to_vec()))
            .unwrap();
        for (port, s) in &sockets {
            let mut buf = [0u8; 2048];
            while let Ok(n) = s.recv(&mut buf) {
                kernel.push((*port, buf[..n].to_vec()));
            }
        }
    };
    let (want_xsk, want_kernel) = if pass_ike {
        let xsk = frames.iter().filter(|f| f.3 == Goes::Xsk).count();
        let datagrams = frames
            .iter()
            .filter(|f| matches!(f.3, Goes::Kernel(_)))
            .count();
        (xsk, datagrams)
    } else {
        (frames.len(), 0)
    };
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until && (at_xsk.len() < want_xsk || kernel.len() < want_kernel) {
        collect(&mut at_xsk, &mut kernel);
    }
    // A little longer: a frame in both places, or twice, would show.
    let until = Instant::now() + Duration::from_millis(200);
    while Instant::now() < until {
        collect(&mut at_xsk, &mut kernel);
    }
    let seen = frames
        .iter()
        .map(|(name, bytes, _, goes)| {
            let times = at_xsk.iter().filter(|f| *f == bytes).count();
            assert!(times <= 1, "{name} reached the AF_XDP socket {times} times");
            (*name, times == 1, *goes)
        })
        .collect();
    let strays: Vec<_> = at_xsk
        .iter()
        .filter(|f| !frames.iter().any(|c| c.1 == **f))
        .collect();
    if !strays.is_empty() {
        eprintln!("other frames at the AF_XDP socket: {strays:02x?}");
    }
    eprintln!("the kernel's UDP sockets received: {kernel:02x?}");
    (seen, kernel)
}

fn check_pass_ike(tag: &str, vlan: Option<u16>) {
    let pair = NetnsPair::new(tag, vlan.is_some());
    let (seen, kernel) = send_ike_frames(&pair, true, vlan);
    for (name, at_xsk, goes) in &seen {
        assert_eq!(
            *at_xsk,
            *goes == Goes::Xsk,
            "{name} (VLAN {vlan:?}): at the AF_XDP socket {at_xsk}, expected {goes:?}"
        );
    }
    // Each IKE frame reached the UDP socket of its port, once, and nothing
    // else reached either.
    let mut expected: Vec<(u16, Vec<u8>)> = ike_frames((MacAddr([0; 6]), MacAddr([0; 6])), vlan)
        .into_iter()
        .filter_map(|(_, _, payload, goes)| match goes {
            Goes::Kernel(port) => Some((port, payload)),
            Goes::KernelFragment | Goes::Xsk => None,
        })
        .collect();
    let mut got = kernel;
    expected.sort();
    got.sort();
    assert_eq!(
        got, expected,
        "what the kernel's UDP sockets received (VLAN {vlan:?})"
    );
}

fn check_no_pass_ike(tag: &str, vlan: Option<u16>) {
    let pair = NetnsPair::new(tag, vlan.is_some());
    let (seen, kernel) = send_ike_frames(&pair, false, vlan);
    for (name, at_xsk, _) in &seen {
        assert!(
            *at_xsk,
            "{name} (VLAN {vlan:?}) did not reach the AF_XDP socket"
        );
    }
    assert!(
        kernel.is_empty(),
        "the kernel's UDP sockets received {kernel:02x?}"
    );
}

#[test]
fn with_pass_ike_ike_reaches_the_kernel_and_esp_the_socket() {
    if !is_root() {
        skip("(needs root): af_xdp pass_ike test");
        return;
    }
    check_pass_ike("ike", None);
    check_pass_ike("ikev", Some(VLAN));
}

#[test]
fn without_pass_ike_every_frame_reaches_the_socket() {
    if !is_root() {
        skip("(needs root): af_xdp pass_ike off test");
        return;
    }
    check_no_pass_ike("noike", None);
    check_no_pass_ike("noikev", Some(VLAN));
}
