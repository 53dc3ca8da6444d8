//! A port the user named with threaded NAPI: its receive threads run above
//! the generator for the run (real-time priority 60, as a lab's tester
//! ports do) and go back to normal scheduling after it. Needs root; run
//! with --test-threads=1.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The kernel threads named `napi/<ifname>-<id>`, by pid.
fn napi_threads_of(ifname: &str) -> Vec<i32> {
    let prefix = format!("napi/{ifname}-");
    let mut pids: Vec<i32> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|c| c.trim_end().starts_with(&prefix))
        })
        .collect();
    pids.sort();
    pids
}

/// A thread's scheduling policy and real-time priority.
fn policy(pid: i32) -> (i32, i32) {
    // SAFETY: both calls only read the thread's scheduling; param lives
    // across the call.
    unsafe {
        let mut param: libc::sched_param = std::mem::zeroed();
        libc::sched_getparam(pid, &mut param);
        (libc::sched_getscheduler(pid), param.sched_priority)
    }
}

/// Port B (p1 in `ns`) with threaded NAPI on or off, as a user sets it.
fn set_threaded(ns: &str, on: bool) {
    let write = format!("echo {} > /sys/class/net/p1/threaded", u8::from(on));
    sh("ip", &["netns", "exec", ns, "sh", "-c", &write]);
}

#[test]
fn a_named_ports_threaded_receive_runs_above_the_generator_and_is_put_back() {
    if !root_or_skip("a_named_ports_threaded_receive_runs_above_the_generator_and_is_put_back") {
        return;
    }
    let (ns, _guard) = back_to_back("rp", 1500);
    // Port B's NAPI made threaded as a user would (GRO on gives a veth its
    // NAPI, and so its threads).
    sh(
        "ip",
        &["netns", "exec", &ns, "ethtool", "-K", "p1", "gro", "on"],
    );
    set_threaded(&ns, true);
    let threads = napi_threads_of("p1");
    assert!(!threads.is_empty(), "no napi/p1-* thread after threaded=1");
    for &pid in &threads {
        assert_eq!(
            policy(pid),
            (libc::SCHED_OTHER, 0),
            "napi thread {pid} before the run"
        );
    }
    // Watch the threads while the trial runs: the policy the run set.
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let (stop, threads) = (stop.clone(), threads.clone());
        std::thread::spawn(move || {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                for &pid in &threads {
                    let p = policy(pid);
                    if !seen.contains(&(pid, p)) {
                        seen.push((pid, p));
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            seen
        })
    };
    let (run, t) = b2b_trial(&ns, &["--engine", "xdp", "--frame-size", "64"], 2_000);
    stop.store(true, Ordering::Relaxed);
    let seen = watcher.join().expect("the watcher");
    assert_exact(&t, 2_000);
    for &pid in &threads {
        assert!(
            seen.contains(&(pid, (libc::SCHED_FIFO, 60))),
            "napi thread {pid} never ran at SCHED_FIFO 60 during the run: {seen:?}\n{}",
            run.dump()
        );
        assert_eq!(
            policy(pid),
            (libc::SCHED_OTHER, 0),
            "napi thread {pid} after the run"
        );
    }
    assert!(
        run.stderr.contains("p1's receive threads (napi/p1-")
            && run
                .stderr
                .contains("run at real-time priority 60 until the run ends"),
        "{}",
        run.dump()
    );
    // A port without threaded NAPI is left alone, and says nothing.
    set_threaded(&ns, false);
    let (run, t) = b2b_trial(&ns, &["--engine", "xdp", "--frame-size", "64"], 2_000);
    assert_exact(&t, 2_000);
    assert!(!run.stderr.contains("real-time priority"), "{}", run.dump());
}
