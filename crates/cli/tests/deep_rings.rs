//! The lab's NIC-deep rings against stalls of either CPU, injected on
//! purpose rather than waited for: a [`Stalls`] thread stops a chosen CPU
//! with a SCHED_FIFO busy loop for 20 ms every 400 ms while a trial runs at
//! 40,000 frames/s (or half the router's forwarding rate, if lower). The
//! deep lab (the default, 4,096 frames on every crossing) loses nothing; a
//! lab with veth's own 256-frame rings (`lab up --ring 256`) loses frames at
//! the DUT's input when the router's CPU stalls. Needs root and two CPUs;
//! run with --test-threads=1.
//!
//! The margins are the mechanism's, not this machine's speed: a
//! 4,096-frame ring holds a stall of 102 ms at 40,000 frames/s, five times
//! the 20 ms injected (the deep lab must not lose, even when the hypervisor
//! steals the CPU for longer than we do: a run at 5 ms stalls and 300,000
//! frames/s, with a 13 ms margin, failed so). The shallow lab's router
//! stalls for 60 ms: 2,400 frames at 40,000 frames/s, nine times what a
//! 256-frame ring holds, so it must lose even when a busy process beside
//! the test takes most of the generator's CPU meanwhile.

mod common;

use common::*;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A CPU stopped for `stall` every `every`: a thread pinned to it spins at
/// SCHED_FIFO priority 90, above every lab thread (the tester's NAPI at
/// 60, the router's at 50), as a hypervisor's or kernel's stall would.
/// Stops when dropped.
struct Stalls {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU32>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Stalls {
    fn start(cpu: usize, stall: Duration, every: Duration) -> Stalls {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU32::new(0));
        let (s, c) = (stop.clone(), count.clone());
        let thread = std::thread::spawn(move || {
            let mut set = nix::sched::CpuSet::new();
            set.set(cpu).expect("a CPU number");
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
                .expect("pinning the stall thread");
            let param = libc::sched_param { sched_priority: 90 };
            // SAFETY: `param` lives across the call; 0 is this thread.
            let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
            assert_eq!(rc, 0, "SCHED_FIFO for the stall thread");
            while !s.load(Ordering::Relaxed) {
                let start = Instant::now();
                while start.elapsed() < stall {
                    std::hint::spin_loop();
                }
                c.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(every);
            }
        });
        Stalls {
            stop,
            count,
            thread: Some(thread),
        }
    }

    fn count(&self) -> u32 {
        self.count.load(Ordering::Relaxed)
    }
}

impl Drop for Stalls {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// (tester CPU, DUT CPU) as the lab places them: the DUT takes the last
/// CPU this process may use. None with fewer than two.
fn cpus() -> Option<(usize, usize)> {
    let set = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
    let cpus: Vec<usize> = (0..nix::sched::CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect();
    match cpus.as_slice() {
        [first, .., last] => Some((*first, *last)),
        _ => None,
    }
}

fn lab(tag: &str, ring: &str) -> (String, LabGuard) {
    let name = unique(tag);
    let guard = LabGuard(name.clone());
    let run = linerate(&["lab", "up", "--lab-name", &name, "--ring", ring]);
    assert_eq!(run.code, 0, "lab up failed:\n{}", run.dump());
    (name, guard)
}

fn trial(lab: &str, rate: &str, json: &TempFile) -> serde_json::Value {
    let run = linerate(&[
        "trial",
        "--lab",
        "--lab-name",
        lab,
        "--no-db",
        "--frame-size",
        "64",
        "--rate",
        rate,
        "--duration",
        "3s",
        "--loss",
        "99%",
        "--json",
        json.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    let v = json.json();
    assert_trial_consistent(&v);
    v
}

fn term(t: &serde_json::Value, k: &str) -> u64 {
    t["loss_where"][k].as_u64().unwrap_or(0)
}

/// The trial's rate: half the router's forwarding rate under overload
/// (frames received over the time they took to send), at most
/// [`STALL_RATE`], at least 20,000 frames/s (where a 20 ms stall still
/// brings 400 frames, more than a 256-frame ring holds).
fn stall_rate(lab: &str) -> u64 {
    let json = TempFile::new("deep-cap");
    let v = trial(lab, "100%", &json);
    let forwarded = u(&v, "rx_frames") as f64 / f(&v, "sending_s");
    ((forwarded / 2.0) as u64).clamp(20_000, STALL_RATE)
}

/// The rate the stalls are injected at (see the module's comment).
const STALL_RATE: u64 = 40_000;

#[test]
fn deep_rings_absorb_stalls_of_either_cpu_and_veth_rings_do_not() {
    if !root_or_skip("deep_rings_absorb_stalls_of_either_cpu_and_veth_rings_do_not") {
        return;
    }
    let Some((tester_cpu, dut_cpu)) = cpus() else {
        skip("deep_rings_absorb_stalls: the lab needs two CPUs");
        return;
    };
    let (deep, deep_guard) = lab("dd", "4096");
    let status = linerate(&["lab", "status"]);
    assert!(
        status
            .stdout
            .contains("NIC rings: 4,096 frames deep on every crossing"),
        "{}",
        status.dump()
    );
    let rate = format!("{}fps", stall_rate(&deep));
    let json = TempFile::new("deep-stall");
    let every = Duration::from_millis(400);
    let stall = Duration::from_millis(20);

    // The router's CPU stops: the deep queue holds what arrives meanwhile.
    let stalls = Stalls::start(dut_cpu, stall, every);
    let v = trial(&deep, &rate, &json);
    assert!(stalls.count() >= 5, "only {} stalls", stalls.count());
    drop(stalls);
    assert_eq!(
        u(&v, "lost_frames"),
        0,
        "deep lab, DUT CPU stalls at {rate}: {v}"
    );

    // The tester's CPU stops: nothing is lost at port B (the router's
    // output waits in the tester CPU's backlog).
    let stalls = Stalls::start(tester_cpu, stall, every);
    let v = trial(&deep, &rate, &json);
    assert!(stalls.count() >= 5, "only {} stalls", stalls.count());
    drop(stalls);
    assert_eq!(term(&v, "tester_rx"), 0, "tester CPU stalls: {v}");
    assert_eq!(
        u(&v, "lost_frames"),
        0,
        "deep lab, tester CPU stalls at {rate}: {v}"
    );

    // The shallow lab once the deep one is gone: on a kernel before 6.9 a
    // lab cannot tell its NAPI threads from another lab's (see
    // `two_labs_up_each_reads_only_its_own_napi_threads`), and a generator
    // left free to run on the router's CPU is stopped by the stalls too.
    drop(deep_guard);
    let (shallow, _guard) = lab("ds", "256");
    let stalls = Stalls::start(dut_cpu, Duration::from_millis(60), every);
    let v = trial(&shallow, &rate, &json);
    assert!(stalls.count() >= 5, "only {} stalls", stalls.count());
    drop(stalls);
    assert!(
        term(&v, "dut_input") > 0,
        "the 256-frame ring lost nothing at the DUT's input at {rate}: {v}"
    );
    assert_eq!(term(&v, "rest"), 0, "{v}");
}

/// With two labs up, each one's status reads its own NAPI threads only
/// (the kernel names them by interface, and both DUTs have the same
/// names): the shallow lab's router stays on the DUT's CPU, and the two
/// labs name no thread in common. Read by name alone, the shallow lab
/// found the deep lab's threads, pinned to the tester's CPU, took its own
/// placement for shared, and left the generator unpinned.
#[test]
fn two_labs_up_each_reads_only_its_own_napi_threads() {
    if !root_or_skip("two_labs_up_each_reads_only_its_own_napi_threads") {
        return;
    }
    let Some((_, dut_cpu)) = cpus() else {
        skip("two_labs_up: the lab needs two CPUs");
        return;
    };
    let (deep, _g1) = lab("nd", "4096");
    let (shallow, _g2) = lab("ns", "256");
    let status = linerate(&["lab", "status"]);
    assert_eq!(status.code, 0, "{}", status.dump());
    let block = |name: &str| -> String {
        let start = status
            .stdout
            .find(&format!("lab {name} "))
            .unwrap_or_else(|| panic!("no lab {name} in:\n{}", status.dump()));
        let rest = &status.stdout[start..];
        rest[..rest[1..].find("\nlab ").map_or(rest.len(), |e| e + 1)].to_string()
    };
    let napi_threads = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.trim_start().starts_with("napi:"))
            .flat_map(|l| l.split(['(', ',', ' ']))
            .filter(|w| w.starts_with("napi/"))
            .map(str::to_string)
            .collect()
    };
    let (d, s) = (block(&deep), block(&shallow));
    assert!(
        s.contains(&format!("placement: DUT forwarding on CPU {dut_cpu}")),
        "the shallow lab's placement, with the deep lab up:\n{s}"
    );
    let (dt, st) = (napi_threads(&d), napi_threads(&s));
    assert!(!dt.is_empty() && !st.is_empty(), "{d}\n{s}");
    assert!(
        st.iter().all(|t| !dt.contains(t)),
        "threads named by both labs: {dt:?} and {st:?}"
    );
}
