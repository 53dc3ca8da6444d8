//! Helpers shared by the `linerate` binary's integration tests.
//!
//! Charter rules these helpers enforce:
//! - every namespace a test makes has a unique name (`lr-t<pid><tag><n>...`)
//!   and a guard that removes it on drop, also when the test panics;
//! - without root, a root test prints `SKIPPED (needs root): <name>` and returns;
//!   with `LINERATE_REQUIRE_ALL=1` (scripts/test.sh, CI) every skip fails
//!   the test instead, with its reason ([`skip`]);
//! - the binary runs with a time limit, so a hang fails the test instead of
//!   blocking the suite.
#![allow(dead_code)]

pub mod strongswan;

use linerate_testkit::{ip_command, try_ip, RunError};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The binary under test.
pub const LINERATE: &str = env!("CARGO_BIN_EXE_linerate");

/// Default time limit of one linerate run.
pub const RUN_LIMIT: Duration = Duration::from_secs(120);

pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// True when every test must run (`LINERATE_REQUIRE_ALL=1`, exported by
/// scripts/test.sh): a skip is then a failure.
pub fn require_all() -> bool {
    std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1")
}

/// Every skip goes through here: says loudly that (part of) a test is
/// skipped and why, e.g. `skip("(needs root): name")` prints `SKIPPED
/// (needs root): name`; under `LINERATE_REQUIRE_ALL=1` it panics with the
/// reason instead, so CI never passes a test that did not run.
pub fn skip(reason: &str) {
    if require_all() {
        panic!("SKIPPED {reason}; LINERATE_REQUIRE_ALL=1 makes every skip a failure: provide what the test needs");
    }
    eprintln!("SKIPPED {reason}");
}

/// True when the test may run; otherwise says loudly that it is skipped.
pub fn root_or_skip(test: &str) -> bool {
    if is_root() {
        true
    } else {
        skip(&format!("(needs root): {test}"));
        false
    }
}

/// True when nft (nftables) is installed; otherwise says loudly that the
/// test needing it is skipped.
pub fn nft_present() -> bool {
    let ok = std::process::Command::new("nft")
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        skip("(needs nft, from the nftables package)");
    }
    ok
}

/// A lab or namespace stem unique to this process and call:
/// `t<pid><tag><n>`, at most 12 characters (the lab name limit).
pub fn unique(tag: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let name = format!(
        "t{}{tag}{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    assert!(
        name.len() <= 12
            && name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'),
        "bad unique name {name}: use a shorter tag"
    );
    name
}

/// The prefix all namespaces made by this test process start with.
pub fn own_prefix() -> String {
    format!("lr-t{}", std::process::id())
}

/// Runs a command, panicking with its stderr when it fails; returns stdout.
pub fn sh(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Sets one sysctl (`key=value`) in namespace `ns`, panicking on failure.
pub fn sysctl(ns: &str, key_value: &str) {
    sh("ip", &["netns", "exec", ns, "sysctl", "-qw", key_value]);
}

/// Runs `program args` with `input` on stdin, panicking on failure.
pub fn sh_stdin(program: &str, args: &[&str], input: &str) -> String {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {program}: {e}"));
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}\ninput:\n{input}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every network namespace present (`ip netns list`).
pub fn netns_list() -> BTreeSet<String> {
    ip_output(&["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

/// The stdout of `ip args`, nothing when it exits with a failure (`ip
/// netns pids` of a namespace already gone); panics when it cannot run.
fn ip_output(args: &[&str]) -> String {
    match try_ip(None, args) {
        Ok(out) => out,
        Err(RunError::Failed { .. }) => String::new(),
        Err(e) => panic!("{e}"),
    }
}

/// Namespaces present whose names start with `prefix`.
pub fn netns_with_prefix(prefix: &str) -> Vec<String> {
    netns_list()
        .into_iter()
        .filter(|n| n.starts_with(prefix))
        .collect()
}

/// `lr-*` namespaces in `after` but not in `before`, leaving out those of
/// other test processes (`lr-t<other pid>...`), which may run concurrently.
pub fn new_lr_netns(before: &BTreeSet<String>, after: &BTreeSet<String>) -> Vec<String> {
    let own = own_prefix();
    after
        .difference(before)
        .filter(|n| n.starts_with("lr-"))
        .filter(|n| !n.starts_with("lr-t") || n.starts_with(&own))
        .cloned()
        .collect()
}

/// Whether any namespace of lab `name` exists.
pub fn lab_exists(name: &str) -> bool {
    let all = netns_list();
    ["a", "b", "dut"]
        .iter()
        .any(|s| all.contains(&format!("lr-{name}-{s}")))
}

/// Removes the namespaces it holds when dropped (also on panic).
pub struct NetnsGuard(pub Vec<String>);

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        for ns in &self.0 {
            let _ = try_ip(None, &["netns", "del", ns]);
        }
    }
}

/// Runs `linerate lab down --lab-name NAME` when dropped (also on panic).
pub struct LabGuard(pub String);

impl Drop for LabGuard {
    fn drop(&mut self) {
        let _ = Command::new(LINERATE)
            .args(["lab", "down", "--lab-name", &self.0])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A file in the target's scratch directory, removed on drop (with the
/// `.json.tmp` linerate writes beside it).
pub struct TempFile(pub PathBuf);

impl TempFile {
    pub fn new(stem: &str) -> TempFile {
        static N: AtomicU32 = AtomicU32::new(0);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
            "{stem}-{}-{}.json",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&path);
        TempFile(path)
    }

    pub fn arg(&self) -> &str {
        self.0.to_str().expect("utf-8 path")
    }

    pub fn json(&self) -> Value {
        read_json(&self.0)
    }

    /// The temporary file linerate's atomic write uses.
    pub fn tmp_sibling(&self) -> PathBuf {
        self.0.with_extension("json.tmp")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(self.tmp_sibling());
        // A results database's journal files (--db).
        for journal in ["-wal", "-shm"] {
            let mut p = self.0.clone().into_os_string();
            p.push(journal);
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The last run of the results database `db`, as `linerate export last
/// --json` prints it.
pub fn exported_last(db: &TempFile) -> Value {
    let r = linerate(&["export", "last", "--json", "--db", db.arg()]);
    assert_eq!(r.code, 0, "{}", r.dump());
    serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("export is not JSON: {e}\n{}", r.stdout))
}

/// `linerate show last --db DB`: what it printed.
pub fn shown_last(db: &TempFile) -> String {
    let r = linerate(&["show", "last", "--db", db.arg()]);
    assert_eq!(r.code, 0, "{}", r.dump());
    r.stdout
}

pub fn read_json(path: &Path) -> Value {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}\n{text}", path.display()))
}

/// A JSON field as u64, panicking with the object when missing.
pub fn u(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("no unsigned '{key}' in {v}"))
}

/// A JSON field as f64, panicking with the object when missing.
pub fn f(v: &Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number '{key}' in {v}"))
}

/// The outcome of one linerate run.
#[derive(Debug)]
pub struct Run {
    /// The exit code, or 128 + signal when a signal ended it.
    pub code: i32,
    /// The signal that ended it, when one did (the process never exited).
    pub killed_by: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    /// The process id linerate ran with.
    pub pid: u32,
    pub elapsed: Duration,
}

impl Run {
    /// Everything, for assertion messages.
    pub fn dump(&self) -> String {
        format!(
            "exit {} after {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// The signal that ended a process, when it did not exit on its own.
pub fn killed_by(status: ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

pub fn exit_code(status: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

/// Collects a pipe in a thread, so a chatty child never blocks on it.
fn collect(mut pipe: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = pipe.read_to_end(&mut buf);
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// Waits for `child` at most `limit`; kills it and panics when it takes longer.
pub fn wait_limited(child: &mut Child, limit: Duration, what: &str) -> ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("waiting for child") {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not end within {limit:?}; killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `program args` (stdin closed) with a time limit.
pub fn run_program(program: &str, args: &[&str], limit: Duration) -> Run {
    let start = Instant::now();
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {program}: {e}"));
    let pid = child.id();
    let out = collect(child.stdout.take().unwrap());
    let err = collect(child.stderr.take().unwrap());
    let status = wait_limited(&mut child, limit, &format!("{program} {args:?}"));
    let run = Run {
        code: exit_code(status),
        killed_by: killed_by(status),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        pid,
        elapsed: start.elapsed(),
    };
    eprintln!("$ {program} {}\n{}", args.join(" "), run.dump());
    run
}

/// Runs linerate with `args`.
pub fn linerate(args: &[&str]) -> Run {
    run_program(LINERATE, args, RUN_LIMIT)
}

/// Runs linerate inside namespace `ns` (`ip netns exec ns linerate args`).
/// `pid` is then that of `ip`, which execs linerate: the same process.
pub fn linerate_in(ns: &str, args: &[&str]) -> Run {
    let mut full = vec!["netns", "exec", ns, LINERATE];
    full.extend_from_slice(args);
    run_program("ip", &full, RUN_LIMIT)
}

/// Asserts the run is a clean failure on bad input: exit 2, one stderr
/// line `linerate: error: ...`, no panic.
pub fn assert_bad_input(run: &Run) {
    assert_bad_input_of("bad input", run);
}

/// [`assert_bad_input`] for one of several cases: a failure names `case`.
pub fn assert_bad_input_of(case: &str, run: &Run) {
    assert_eq!(run.code, 2, "{case}: {}", run.dump());
    assert!(!run.stderr.contains("panicked"), "{case}: {}", run.dump());
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{case}: stderr is not one line:\n{}",
        run.dump()
    );
    assert!(
        lines[0].starts_with("linerate: error:"),
        "{case}: {}",
        run.dump()
    );
}

/// Creates namespace `lr-<uniq>-bb` holding both ends of a veth pair p0 <->
/// p1 with the given MTU, up, no addresses, IPv6 off (so the kernel sends
/// nothing on them). The guard is created before anything can fail.
pub fn back_to_back(tag: &str, mtu: u32) -> (String, NetnsGuard) {
    let ns = format!("lr-{}-bb", unique(tag));
    let guard = NetnsGuard(vec![ns.clone()]);
    sh("ip", &["netns", "add", &ns]);
    for sysctl in [
        "net.ipv6.conf.all.disable_ipv6=1",
        "net.ipv6.conf.default.disable_ipv6=1",
    ] {
        // Absent on kernels without IPv6: fine.
        let _ = try_ip(None, &["netns", "exec", &ns, "sysctl", "-qw", sysctl]);
    }
    let mtu = mtu.to_string();
    sh(
        "ip",
        &[
            "-n", &ns, "link", "add", "p0", "mtu", &mtu, "type", "veth", "peer", "name", "p1",
            "mtu", &mtu,
        ],
    );
    for dev in ["lo", "p0", "p1"] {
        sh("ip", &["-n", &ns, "link", "set", dev, "up"]);
    }
    (ns, guard)
}

/// Host arguments for a back-to-back pair: each port's gateway is the other
/// port (linerate answers ARP for its emulated hosts).
pub const B2B_HOSTS: [&str; 12] = [
    "--port-a",
    "p0",
    "--port-b",
    "p1",
    "--ip-a",
    "198.18.0.2/24",
    "--gw-a",
    "198.18.0.3",
    "--ip-b",
    "198.18.0.3/24",
    "--gw-b",
    "198.18.0.2",
];

/// Builds a lab with `linerate lab up`; the guard (created first) removes it.
pub fn lab_up(tag: &str) -> (String, LabGuard) {
    let name = unique(tag);
    let guard = LabGuard(name.clone());
    let run = linerate(&["lab", "up", "--lab-name", &name]);
    assert_eq!(run.code, 0, "lab up failed:\n{}", run.dump());
    assert!(lab_exists(&name), "lab {name} not there after lab up");
    (name, guard)
}

/// Loads an nftables ruleset into namespace `ns`.
pub fn nft_load(ns: &str, ruleset: &str) {
    sh_stdin("ip", &["netns", "exec", ns, "nft", "-f", "-"], ruleset);
}

/// The packet counts of every `counter` in namespace `ns`'s ruleset, in
/// rule order, from `nft -j list ruleset`.
pub fn nft_counters(ns: &str) -> Vec<u64> {
    let out = sh("ip", &["netns", "exec", ns, "nft", "-j", "list", "ruleset"]);
    let v: Value = serde_json::from_str(&out).expect("nft JSON");
    let mut counts = Vec::new();
    for item in v["nftables"].as_array().expect("nftables array") {
        for expr in item["rule"]["expr"].as_array().into_iter().flatten() {
            if let Some(p) = expr["counter"]["packets"].as_u64() {
                counts.push(p);
            }
        }
    }
    counts
}

/// Checks a trial's JSON record for internal consistency.
/// A tester namespace `lr-<u>-t` (ports ta, tb; no addresses) and a router
/// namespace `lr-<u>-r` (ra 198.18.0.1/24, rb 198.19.0.1/24, forwarding on),
/// joined by two veth pairs. Returns (tester ns, router ns, guard).
pub fn plain_router(tag: &str) -> (String, String, NetnsGuard) {
    let u = unique(tag);
    let (t, r) = (format!("lr-{u}-t"), format!("lr-{u}-r"));
    let guard = NetnsGuard(vec![t.clone(), r.clone()]);
    sh("ip", &["netns", "add", &t]);
    sh("ip", &["netns", "add", &r]);
    for (tp, rp) in [("ta", "ra"), ("tb", "rb")] {
        sh(
            "ip",
            &[
                "link", "add", tp, "netns", &t, "type", "veth", "peer", "name", rp, "netns", &r,
            ],
        );
        sh("ip", &["-n", &t, "link", "set", tp, "up"]);
        sh("ip", &["-n", &r, "link", "set", rp, "up"]);
    }
    sysctl(&r, "net.ipv4.ip_forward=1");
    sh(
        "ip",
        &["-n", &r, "addr", "add", "198.18.0.1/24", "dev", "ra"],
    );
    sh(
        "ip",
        &["-n", &r, "addr", "add", "198.19.0.1/24", "dev", "rb"],
    );
    (t, r, guard)
}

pub const HOSTS: [&str; 12] = [
    "--port-a",
    "ta",
    "--port-b",
    "tb",
    "--ip-a",
    "198.18.0.2/24",
    "--gw-a",
    "198.18.0.1",
    "--ip-b",
    "198.19.0.2/24",
    "--gw-b",
    "198.19.0.1",
];

pub fn assert_trial_consistent(t: &Value) {
    let (intended, tx, rx, lost) = (
        u(t, "intended_frames"),
        u(t, "tx_frames"),
        u(t, "rx_frames"),
        u(t, "lost_frames"),
    );
    assert!(tx >= rx, "received more than sent: {t}");
    assert!(tx <= intended, "sent more than intended: {t}");
    assert_eq!(lost, intended - rx, "lost != intended - rx: {t}");
    let ratio = f(t, "loss_ratio");
    assert!(
        (ratio - lost as f64 / intended as f64).abs() < 1e-9,
        "loss_ratio does not match: {t}"
    );
    // Where the frames were lost adds up to the loss, exactly.
    let w = &t["loss_where"];
    if !w.is_null() {
        let term = |k: &str| w[k].as_i64().unwrap_or(0);
        let sum = [
            "not_sent",
            "tx_refused",
            "tester_rx",
            "dut_input",
            "dut_internal",
            "errored",
            "rest",
        ]
        .iter()
        .map(|k| term(k))
        .sum::<i64>();
        assert_eq!(
            sum, lost as i64,
            "loss_where does not add up to the loss: {t}"
        );
    }
    if rx > 0 {
        let l = &t["latency_ns"];
        let (min, p50, p99, max) = (u(l, "min"), u(l, "p50"), u(l, "p99"), u(l, "max"));
        assert!(
            min <= p50 && p50 <= p99 && p99 <= max,
            "latency not ordered: {l}"
        );
    } else {
        assert!(t["latency_ns"].is_null(), "latency without frames: {t}");
    }
}

/// Sends `sig` to process `pid`.
pub fn signal(pid: u32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), sig).expect("kill");
}

/// A linerate started in the background; its stderr is collected as it
/// comes (progress lines end only when a trial does), stdout at the end.
pub struct Spawned {
    pub child: Child,
    pub pid: u32,
    stderr: std::sync::Arc<std::sync::Mutex<String>>,
    stderr_thread: Option<JoinHandle<()>>,
    stdout_thread: Option<JoinHandle<String>>,
    start: Instant,
}

impl Spawned {
    pub fn start(args: &[&str]) -> Spawned {
        Spawned::start_command(Command::new(LINERATE).args(args))
    }

    /// linerate started in network namespace `ns` (`ip netns exec`, which
    /// execs it: the pid is linerate's, for signals).
    pub fn start_in(ns: &str, args: &[&str]) -> Spawned {
        Spawned::start_command(ip_command(["netns", "exec", ns, LINERATE]).args(args))
    }

    fn start_command(command: &mut Command) -> Spawned {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting linerate");
        let pid = child.id();
        let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = stderr.clone();
        let stderr_thread = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        let stdout_thread = collect(child.stdout.take().unwrap());
        Spawned {
            child,
            pid,
            stderr,
            stderr_thread: Some(stderr_thread),
            stdout_thread: Some(stdout_thread),
            start: Instant::now(),
        }
    }

    /// Stderr so far.
    pub fn stderr_now(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until stderr satisfies `pred` (true) or `limit` passes, or the
    /// process ends (false).
    pub fn wait_for_stderr(&mut self, limit: Duration, pred: impl Fn(&str) -> bool) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            if pred(&self.stderr_now()) {
                return true;
            }
            if let Ok(Some(_)) = self.child.try_wait() {
                return pred(&self.stderr_now());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Waits for the end (killing it after `limit`) and collects the output.
    pub fn finish(mut self, limit: Duration) -> Run {
        let status = wait_limited(&mut self.child, limit, "linerate");
        let stdout = self.stdout_thread.take().unwrap().join().unwrap();
        self.stderr_thread.take().unwrap().join().unwrap();
        let run = Run {
            code: exit_code(status),
            killed_by: killed_by(status),
            stdout,
            stderr: self.stderr_now(),
            pid: self.pid,
            elapsed: self.start.elapsed(),
        };
        eprintln!("$ linerate (pid {})\n{}", self.pid, run.dump());
        run
    }
}

impl Drop for Spawned {
    /// A test that panics before `finish` must not leave linerate running.
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// One 1 s trial back to back in namespace `ns` (ports p0/p1, see
/// [`back_to_back`]) at `fps`, with `extra` arguments (engine, frame size).
/// Asserts exit 0 and returns the run and its JSON record.
pub fn b2b_trial(ns: &str, extra: &[&str], fps: u64) -> (Run, Value) {
    let json = TempFile::new("b2b-trial");
    let rate = format!("{fps}fps");
    let mut args = vec!["trial"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(extra);
    args.extend_from_slice(&[
        "--rate",
        &rate,
        "--duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--json",
        json.arg(),
    ]);
    let run = linerate_in(ns, &args);
    // Exit 1 (loss) only for the tester's own shortfall: see assert_exact.
    assert!(
        run.code == 0 || (run.code == 1 && only_the_testers_shortfall(&json.json())),
        "{extra:?}: {}",
        run.dump()
    );
    let t = json.json();
    (run, t)
}

/// Whether a trial's only loss is frames its generator did not send: a
/// busy CPU paused it for longer than the trial's allowance (a tenth of
/// its duration), and the trial says so (`generator_short`).
fn only_the_testers_shortfall(t: &Value) -> bool {
    let short = u(t, "intended_frames").saturating_sub(u(t, "tx_frames"));
    short > 0 && stated_as_the_testers(t, short) && u(t, "lost_frames") == short
}

/// Whether `short` frames not sent are said to be the tester's: the
/// generator paused, the trial marked `generator_short`, and the loss
/// breakdown names exactly them as not sent.
fn stated_as_the_testers(t: &Value, short: u64) -> bool {
    t["generator_short"] == true
        && t["loss_where"]["not_sent"].as_u64() == Some(short)
        && t["generator_paused_ns"].as_u64().unwrap_or(0) > 0
}

/// The frames of a trial that its generator did not send, asserted to be
/// the tester's own shortfall, said as such (see [`assert_exact`]); 0 when
/// every intended frame was sent. A test whose DUT acts on the frames it
/// sees counts on the frames sent (`tx_frames`), whose sequence numbers
/// run 0 .. tx_frames - 1: the frames not sent are the trial's last.
pub fn testers_shortfall(t: &Value) -> u64 {
    let short = u(t, "intended_frames").saturating_sub(u(t, "tx_frames"));
    if short == 0 {
        assert_eq!(t["generator_short"], false, "{t}");
    } else {
        assert!(
            stated_as_the_testers(t, short),
            "{short} frames not sent, not said to be the tester's: {t}"
        );
    }
    short
}

/// Asserts a lossless trial of `frames` intended frames: every frame sent
/// arrives once, in order, and nothing else, as a wire (nothing between
/// the ports) must give. The one loss allowed is the tester's own, said
/// as such: frames not sent because a busy CPU paused the generator
/// beyond the trial's allowance (a verdict on the machine's load, not on
/// the counts, which stay exact). Callers count on `tx_frames`.
pub fn assert_exact(t: &Value, frames: u64) {
    assert_trial_consistent(t);
    assert_eq!(u(t, "intended_frames"), frames, "intended_frames: {t}");
    let tx = u(t, "tx_frames");
    assert_eq!(u(t, "rx_frames"), tx, "rx_frames: {t}");
    for key in ["reordered", "duplicated", "tester_rx_drops", "stray_frames"] {
        assert_eq!(u(t, key), 0, "{key}: {t}");
    }
    if tx < frames {
        assert!(
            only_the_testers_shortfall(t),
            "{} frames not sent: {t}",
            frames - tx
        );
    } else {
        assert_eq!(u(t, "lost_frames"), 0, "lost_frames: {t}");
        assert_eq!(f(t, "loss_ratio"), 0.0, "{t}");
        assert_eq!(t["generator_short"], false, "{t}");
    }
}

/// An nftables ruleset for the lab DUT: the first rule counts every
/// forwarded packet, the second drops every 100th (numgen counts 0, 1, 2,
/// ...; 0, 100, 200, ... match). (Chain name: `fwd` is an nft keyword.)
pub const EVERY_100TH: &str = "table ip t {
    chain c {
        type filter hook forward priority 0; policy accept;
        counter
        numgen inc mod 100 0 counter drop
    }
}
";

/// The processes in namespace `ns` (`ip netns pids`), each with its name
/// (/proc/PID/comm).
pub fn netns_processes(ns: &str) -> Vec<(i32, String)> {
    ip_output(&["netns", "pids", ns])
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .map(|pid: i32| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            (pid, comm.trim().to_string())
        })
        .collect()
}

/// Waits up to `limit` until no process is left in any of `namespaces`;
/// returns those still there.
pub fn wait_no_processes(namespaces: &[String], limit: Duration) -> Vec<(i32, String)> {
    let start = Instant::now();
    loop {
        let left: Vec<_> = namespaces
            .iter()
            .flat_map(|ns| netns_processes(ns))
            .collect();
        if left.is_empty() || start.elapsed() > limit {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Kills (SIGKILL) every process in its namespaces when dropped, also when
/// the test fails: a test of leftovers never leaves one itself. Declare it
/// after the lab's guard, so it runs first.
pub struct ProcessReaper(pub Vec<String>);

impl Drop for ProcessReaper {
    fn drop(&mut self) {
        for ns in &self.0 {
            for (pid, _) in netns_processes(ns) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// Directories it holds are removed when dropped (if still there).
pub struct DirGuard(pub std::sync::Mutex<Vec<PathBuf>>);

impl DirGuard {
    pub fn new() -> DirGuard {
        DirGuard(std::sync::Mutex::new(Vec::new()))
    }

    pub fn add(&self, dir: &Path) {
        self.0.lock().unwrap().push(dir.to_path_buf());
    }
}

impl Drop for DirGuard {
    fn drop(&mut self) {
        for dir in self.0.lock().unwrap().iter() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// Mode bits (permissions) of `path`, not following a link.
pub fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .mode()
        & 0o7777
}

/// The directory (`-p DIR`) of the nginx master running in namespace `ns`,
/// from the title nginx gives itself ("nginx: master process ... -p DIR").
pub fn nginx_dir_in(ns: &str) -> Option<PathBuf> {
    netns_processes(ns).into_iter().find_map(|(pid, _)| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let title = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !title.starts_with("nginx: master process") {
            return None;
        }
        let dir = title.split(" -p ").nth(1)?.split_whitespace().next()?;
        Some(PathBuf::from(dir))
    })
}

/// Polls `f` every 50 ms until it gives Some, at most `limit`.
pub fn poll<T>(limit: Duration, mut f: impl FnMut() -> Option<T>) -> Option<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Some(v);
        }
        if start.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
