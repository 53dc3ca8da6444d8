//! `--tx-threads N`: the xdp engine's generator on N threads, one stream
//! each, counted exactly at the receiver back to back. Needs root for the
//! trials; run with --test-threads=1.

mod common;

use common::*;

/// Like `common::back_to_back`, but the veth pair has one queue per
/// generator thread: veth hands a frame sent on CPU c to the peer's
/// receive queue c mod queues, so with one queue every thread feeds one
/// ring and one NAPI, which a busy machine can starve into dropping frames
/// (the veth's loss, not the generators'). With a queue per CPU each
/// stream has a receive path of its own, as on a multi-queue NIC.
fn back_to_back_multiqueue(tag: &str, queues: usize) -> (String, NetnsGuard) {
    let ns = format!("lr-{}-bb", unique(tag));
    let guard = NetnsGuard(vec![ns.clone()]);
    sh("ip", &["netns", "add", &ns]);
    for sysctl in [
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ] {
        let _ = std::process::Command::new("ip")
            .args(["netns", "exec", &ns, "sysctl", "-qw", sysctl])
            .stderr(std::process::Stdio::null())
            .status();
    }
    let q = queues.to_string();
    sh(
        "ip",
        &[
            "-n",
            &ns,
            "link",
            "add",
            "p0",
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            "p1",
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ],
    );
    for dev in ["lo", "p0", "p1"] {
        sh("ip", &["-n", &ns, "link", "set", dev, "up"]);
    }
    (ns, guard)
}

/// A lossless 1 s trial back to back with `threads` generator threads:
/// every count exact, whatever share of the frames each thread sent.
fn threads_back_to_back_are_exact(threads: u16, fps: u64) -> Run {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (ns, _guard) = back_to_back_multiqueue("mc", cpus.max(threads as usize));
    let threads = threads.to_string();
    let extra = [
        "--engine",
        "xdp",
        "--tx-threads",
        &threads,
        "--frame-size",
        "64",
    ];
    let (run, t) = b2b_trial(&ns, &extra, fps);
    assert_exact(&t, fps);
    assert_eq!(t["engine"], "xdp", "{t}");
    run
}

#[test]
fn two_threads_back_to_back_are_exact() {
    if root_or_skip("two_threads_back_to_back_are_exact") {
        threads_back_to_back_are_exact(2, 100_000);
    }
}

/// 50 000 frames over 3 threads: 16 667 + 16 667 + 16 666, still exact;
/// more threads than this machine may have CPUs is allowed, and said.
#[test]
fn uneven_shares_add_up_exactly() {
    if root_or_skip("uneven_shares_add_up_exactly") {
        let run = threads_back_to_back_are_exact(3, 50_000);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cpus < 3 {
            assert!(
                run.stderr.contains("share CPUs"),
                "no note about shared CPUs: {}",
                run.dump()
            );
        }
    }
}

#[test]
fn socket_engines_refuse_more_threads() {
    for engine in ["af_packet", "af_xdp"] {
        let mut args = vec!["trial", "--engine", engine, "--tx-threads", "2"];
        args.extend_from_slice(&B2B_HOSTS);
        args.extend_from_slice(&["--frame-size", "64", "--rate", "1000fps"]);
        let run = linerate(&args);
        assert_bad_input(&run);
        assert!(
            run.stderr
                .contains("--tx-threads above 1 needs --engine xdp"),
            "{}",
            run.dump()
        );
    }
}

#[test]
fn calibrate_refuses_more_threads_for_socket_engines() {
    let run = linerate(&["calibrate", "--engine", "af_packet", "--tx-threads", "2"]);
    assert_bad_input(&run);
    assert!(
        run.stderr
            .contains("--tx-threads above 1 needs --engine xdp"),
        "{}",
        run.dump()
    );
}
