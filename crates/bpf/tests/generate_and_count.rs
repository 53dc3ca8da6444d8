//! The generator and the counter against each other over a veth pair in a
//! namespace this test makes (and removes, also when it fails): every frame
//! the generator stamps is counted once, none twice, none out of order.
//! Needs root.

use linerate_bpf::counter::{SentFrom, XdpCounter};
use linerate_bpf::generator::{GenProgress, GenTrial, Stopper, XdpGenerator};
use linerate_testkit::{Netns, Veth};
use linerate_wire::template::DEFAULT_UDP_PORT;
use linerate_wire::{FlowSpec, FrameCheck, FrameSet, FrameSize, FrameTemplate, MacAddr};
use std::fs::File;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// A namespace of its own holding veth pair x0 <-> x1, both up, IPv6 as
/// the kernel has it. A receive queue per CPU: veth hands a frame sent on
/// CPU c to the peer's queue c mod queues, so generators on different CPUs
/// do not share one ring (which a busy machine can overflow).
fn veth_netns() -> Netns {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    Veth::new("x0", "x1")
        .queues(cpus)
        .with_ipv6()
        .in_one_netns("lrbpf")
}

fn flow() -> FlowSpec {
    FlowSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src_ip: "198.18.0.2".parse().unwrap(),
        dst_ip: "198.19.0.2".parse().unwrap(),
        src_port: DEFAULT_UDP_PORT,
        dst_port: DEFAULT_UDP_PORT,
        ttl: 64,
        vlan: None,
    }
}

/// Runs the configured trial on a thread of its own (in this thread's
/// namespace) and stops it once `frames` are out.
fn send_all(generator: &XdpGenerator, ifindex: u32, frames: u64) -> GenProgress {
    let (stop, finished) = (AtomicBool::new(false), AtomicBool::new(false));
    let netns = File::open("/proc/thread-self/ns/net").unwrap();
    let (stop, finished, netns) = (&stop, &finished, &netns);
    std::thread::scope(|s| {
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = s.spawn(move || {
            nix::sched::setns(netns.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            tx.send(Stopper::for_current_thread()).unwrap();
            let r = generator.run(ifindex, stop);
            finished.store(true, Ordering::Release);
            r
        });
        let stopper = rx.recv().unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while generator.progress().unwrap().sent < frames && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        stopper.stop(stop, finished);
        worker.join().unwrap().expect("generator run");
    });
    generator.progress().unwrap()
}

/// One test sends at a time: generators spin on a CPU each, and two
/// tests at once on a small machine starve the receiving side.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Pins the calling thread to CPU `k` modulo the CPUs there are.
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

fn pin_to(k: usize) {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut set = nix::sched::CpuSet::new();
    set.set(k % cpus).unwrap();
    let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
}

fn ifindex(name: &str) -> u32 {
    nix::net::if_::if_nametoindex(name).expect("interface index")
}

/// A counter for up to 4 streams on x1, where the generators' frames
/// arrive; made from inside the namespace.
fn counter_on_x1() -> XdpCounter {
    let mut counter = XdpCounter::load(4).expect("load counter");
    counter
        .attach(ifindex("x1"), "x1", false)
        .expect("attach counter");
    counter
}

#[test]
fn every_generated_frame_is_counted_once() {
    if !linerate_bpf::root_or_skip("every_generated_frame_is_counted_once") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let ns = veth_netns();
    let _inside = ns.enter();
    let mut counter = counter_on_x1();
    let mut generator = XdpGenerator::load().expect("load generator");
    // The third trial samples latency on every 8th frame: seq 0, 8, ..
    // 100 000 of 100 001 frames, 12 501 of them. The last hands its
    // frames to the port every 256 ticks (the lab's batch), the others
    // every 64 (the kernel's).
    use linerate_bpf::generator::{DEFAULT_BATCH, MAX_BATCH};
    for (size, frames, fps, every, sampled, batch) in [
        (64u16, 200_000u64, 1e6, 1u32, 200_000u64, DEFAULT_BATCH),
        // Far above the generator's ceiling: every tick sends, most of the
        // frames on the credit of the last clock read (LR_CREDIT), each
        // stamped with its own scheduled time, never one in the future.
        (64, 20_000, 1e9, 1, 20_000, DEFAULT_BATCH),
        (1518, 50_000, 2e5, 1, 50_000, DEFAULT_BATCH),
        (64, 100_001, 1e6, 8, 12_501, DEFAULT_BATCH),
        (128, 200_000, 1e6, 1, 200_000, MAX_BATCH),
    ] {
        let flows = linerate_wire::Flows::default();
        let set = FrameSet::single(FrameTemplate::new(
            &flow(),
            FrameSize::from_frame(size as u64).unwrap(),
        ));
        let stream = size + every as u16; // any id; a fresh one per trial

        // Frame n leaves no earlier than n intervals after now: a
        // stamp earlier than that would be errored.
        let sent_from = SentFrom {
            not_before_ns: monotonic_ns(),
            interval_ns: (1e9 / fps) as u64,
        };
        counter
            .start_trial(
                stream,
                1,
                DEFAULT_UDP_PORT,
                every,
                FrameCheck::Payload,
                frames,
                sent_from,
            )
            .unwrap();
        generator
            .configure(&GenTrial {
                frames: &set,
                flows: &flows,
                stream,
                class_stride: 1,
                total: frames,
                interval_ns: 1e9 / fps,
                give_up: Duration::from_secs(10),
                max_late: None,
                clock_offset_ns: 0,
                batch,
            })
            .unwrap();
        let progress = send_all(&generator, ifindex("x0"), frames);
        assert_eq!(progress.sent, frames, "{size} B: every frame sent");
        // The schedule held: the last frame left about (frames - 1) / fps after the first.
        let took = (progress.last_ns - progress.start_ns) as f64 / 1e9;
        let planned = (frames - 1) as f64 / fps;
        assert!(
            took >= planned * 0.999 && took < planned + 0.2,
            "{size} B: sent in {took} s, planned {planned} s"
        );
        let deadline = Instant::now() + Duration::from_secs(2);
        while counter.received().unwrap() < frames && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let counts = counter.read().unwrap();
        let s = &counts.streams[0];
        assert_eq!(s.received, frames, "{size} B: every frame counted");
        // The generator's checksums verify: no frame counted damaged.
        assert_eq!(
            (s.duplicated, s.reordered, counts.stray, counts.errored),
            (0, 0, 0, 0),
            "{size} B"
        );
        assert_eq!(s.latency_count, sampled, "{size} B, every {every}");
        assert_eq!(s.histogram.iter().sum::<u64>(), sampled);
        assert!(s.latency_min_ns <= s.latency_max_ns);
        assert!(s.latency_sum_ns >= s.latency_min_ns * sampled);
        assert!(s.latency_sum_ns <= s.latency_max_ns * sampled);
    }
}

/// Two generators (each its own copy of the program and its maps) on two
/// threads at once, one stream each: neither disturbs the other's state,
/// and the counter counts each stream exactly.
#[test]
fn two_generators_send_two_exact_streams() {
    if !linerate_bpf::root_or_skip("two_generators_send_two_exact_streams") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let ns = veth_netns();
    let _inside = ns.enter();
    let mut counter = counter_on_x1();
    let flows = linerate_wire::Flows::default();
    let set = FrameSet::single(FrameTemplate::new(
        &flow(),
        FrameSize::from_frame(64).unwrap(),
    ));
    let (first, shares) = (40u16, [50_001u64, 50_000]);
    // Each generator's own interval bounds its stream's stamps.
    let sent_from = SentFrom {
        not_before_ns: monotonic_ns(),
        interval_ns: 20_000,
    };
    counter
        .start_trial(
            first,
            2,
            DEFAULT_UDP_PORT,
            1,
            FrameCheck::Payload,
            50_001,
            sent_from,
        )
        .unwrap();
    let mut generators: Vec<XdpGenerator> = (0..2)
        .map(|_| XdpGenerator::load().expect("load generator"))
        .collect();
    for (k, g) in generators.iter_mut().enumerate() {
        g.configure(&GenTrial {
            frames: &set,
            flows: &flows,
            stream: first + k as u16,
            class_stride: 1,
            total: shares[k],
            interval_ns: 1e9 / 5e4, // 100 000 frames/s in all
            give_up: Duration::from_secs(10),
            max_late: None,
            clock_offset_ns: 0,
            batch: linerate_bpf::generator::DEFAULT_BATCH,
        })
        .unwrap();
    }
    let index = ifindex("x0");
    let progress: Vec<GenProgress> = std::thread::scope(|s| {
        let handles: Vec<_> = generators
            .iter()
            .zip(shares)
            .enumerate()
            .map(|(k, (g, n))| {
                s.spawn(move || {
                    pin_to(k);
                    send_all(g, index, n)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for (p, n) in progress.iter().zip(shares) {
        assert_eq!(p.sent, n, "each generator sent its own share");
    }
    let deadline = Instant::now() + Duration::from_secs(2);
    while counter.received().unwrap() < shares.iter().sum::<u64>() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let counts = counter.read().unwrap();
    assert_eq!((counts.stray, counts.errored), (0, 0));
    for (k, n) in shares.iter().enumerate() {
        let s = &counts.streams[k];
        assert_eq!(s.received, *n, "stream {k}: every frame counted");
        assert_eq!((s.duplicated, s.reordered), (0, 0), "stream {k}");
    }
}

/// The in-kernel generator builds, byte for byte, the frames the
/// user-space generator builds: every size of a mix, both traffic classes
/// of a drop test (headers and stream ids), every flow field and both
/// checksums (the timestamp taken from the received frame, the one
/// thing no one can predict).
#[test]
fn kernel_frames_match_user_space_frames_for_mixes_and_flows() {
    if !linerate_bpf::root_or_skip("kernel_frames_match_user_space_frames_for_mixes_and_flows") {
        return;
    }
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let ns = veth_netns();
    let _inside = ns.enter();
    for (v6, vlan) in [
        (false, None),
        (true, None),
        (false, Some(100)),
        (true, Some(100)),
    ] {
        same_frames_in_kernel_and_user_space(&ns, v6, vlan);
    }
}

/// One layout of the test above: IPv4 or IPv6 (`v6`), tagged or not. The
/// receiving packet socket sees a tagged frame without its tag (the kernel
/// moves it out of the frame before packet sockets see it), so the tag is
/// taken out of the expected frame too; the lab tests prove it is sent.
fn same_frames_in_kernel_and_user_space(ns: &Netns, v6: bool, vlan: Option<u16>) {
    {
        let mut flow = flow();
        if v6 {
            flow.src_ip = "2001:2::2".parse().unwrap();
            flow.dst_ip = "2001:2:0:1::2".parse().unwrap();
        }
        flow.vlan = vlan.map(|id| linerate_wire::VlanTag { id, pcp: 3 });
        let encap = flow.encap();
        let mix = linerate_wire::FrameMix::parse("genome:cgdcb").unwrap();
        let sizes = mix
            .sizes
            .iter()
            .map(|s| s.in_encap(&encap).unwrap())
            .collect();
        let mix = linerate_wire::FrameMix { sizes, ..mix };
        // Both traffic classes of a drop test: the second from another
        // source address, counted as streams 9 + 3 (class stride 3).
        let other = linerate_wire::FlowSpec {
            src_ip: if v6 {
                "2001:2::c8".parse().unwrap()
            } else {
                "198.18.0.200".parse().unwrap()
            },
            ..flow.clone()
        };
        let set = FrameSet::two_classes(FrameSet::new(&flow, &mix), FrameSet::new(&other, &mix));
        let mut ranges = vec![
            "src-port=53..1000/random",
            "dst-port=100..110",
            "dst-mac=02:00:00:00:00:02..02:00:00:00:01:02/random",
            "src-mac=02:00:00:00:00:10..02:00:00:00:00:f0/dec/step=3",
        ];
        if !v6 {
            ranges.push("dst-ip=198.19.0.2..198.19.0.254");
        }
        let flows =
            linerate_wire::Flows::parse(&ranges.iter().map(|s| s.to_string()).collect::<Vec<_>>())
                .and_then(|f| f.for_encap(encap))
                .unwrap();
        let tag_len = if vlan.is_some() { 4 } else { 0 };
        let so = encap.signature_offset() - tag_len;
        // A veth takes XDP_TX frames only when its peer runs NAPI, which
        // GRO turns on (the counter's XDP program does it in the other tests).
        ns.exec(&["ethtool", "-K", "x1", "gro", "on"]);
        // A raw socket on the receiving end sees every frame as it arrived.
        // SAFETY: plain socket calls on a descriptor this test owns.
        let fd = unsafe {
            libc::socket(
                libc::AF_PACKET,
                libc::SOCK_RAW,
                (libc::ETH_P_ALL as u16).to_be() as i32,
            )
        };
        assert!(fd >= 0, "packet socket");
        let mut sll: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        sll.sll_family = libc::AF_PACKET as u16;
        sll.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        sll.sll_ifindex = ifindex("x1") as i32;
        let rc = unsafe {
            libc::bind(
                fd,
                &sll as *const _ as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        assert_eq!(rc, 0, "bind to x1");
        let buf_size: libc::c_int = 64 << 20;
        unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &buf_size as *const _ as *const libc::c_void,
                4,
            )
        };
        let total = 1_000u64;
        let mut generator = XdpGenerator::load().expect("load generator");
        generator
            .configure(&GenTrial {
                frames: &set,
                flows: &flows,
                stream: 9,
                class_stride: 3,
                total,
                interval_ns: 1e9 / 20_000.0,
                give_up: Duration::from_secs(10),
                max_late: None,
                clock_offset_ns: 0,
                batch: linerate_bpf::generator::DEFAULT_BATCH,
            })
            .unwrap();
        let progress = send_all(&generator, ifindex("x0"), total);
        assert_eq!(progress.sent, total);
        let mut seen = 0u64;
        let mut frame = vec![0u8; 2048];
        let mut want = vec![0u8; 2048];
        loop {
            let n = unsafe {
                libc::recv(
                    fd,
                    frame.as_mut_ptr() as *mut libc::c_void,
                    frame.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n <= 0 {
                break;
            }
            let got = &frame[..n as usize];
            if got.len() < so + 12 || got[so..so + 2] != [0x4C, 0x52] {
                continue; // not a test frame (none expected)
            }
            let seq = u32::from_be_bytes(got[so + 4..so + 8].try_into().unwrap());
            let tx_ts = u32::from_be_bytes(got[so + 8..so + 12].try_into().unwrap());
            let t = set.get(seq as u64);
            let len = t.write(
                &mut want,
                linerate_wire::Signature {
                    stream: 9 + 3 * set.class_of(seq as u64) as u16,
                    seq,
                    tx_ts,
                },
            );
            flows.apply(&mut want[..len], seq as u64);
            let mut want = want[..len].to_vec();
            if vlan.is_some() {
                assert_eq!(&want[12..16], &[0x81, 0x00, 0x60, 100], "{encap}");
                want.drain(12..16);
            }
            assert_eq!(got, &want[..], "{encap}: frame {seq} differs");
            seen += 1;
        }
        unsafe { libc::close(fd) };
        assert_eq!(seen, total, "{encap}: every frame captured and compared");
    }
}
