//! The tester's own ceiling with ESP in the data path: how many frames/s
//! linerate's af_xdp and af_packet engines send and receive when port A
//! encrypts every test frame (`EspSend`) and port B decrypts it
//! (`EspReceive`), next to the same engines without ESP, on one veth pair,
//! in one run.
//!
//! ```text
//! cargo build --release -p linerate-engine --example esp_ceiling
//! sudo target/release/examples/esp_ceiling [--duration 2s] [--sizes 64,512,1518]
//!     [--engines af_xdp,af_packet] [--suites none,aes128gcm16,aes256gcm16,aes128-sha256]
//!     [--runs N] [--line-speed 100G] [--mtu 1600] [--tx-cpu 0] [--rx-cpu 1]
//!     [--threads 1]
//! ```
//! (`scripts/bench-esp.sh` builds and runs it.)
//!
//! As root it builds a network namespace `lrespc-<pid>` holding a veth pair
//! `ea<pid>` (port A, sending) and `eb<pid>` (port B, receiving), removed on
//! exit, error, panic and Ctrl-C, and opens both ends with the engine of
//! each row, back to back (each port's gateway is the other's address).
//! Every row is one `Engine::run_trial` at 100 % of `--line-speed` (far above
//! what one core sends, so the generator sends as fast as it can), with
//! fresh random static keys per engine and suite, shared by A's outbound
//! and B's inbound SA.
//!
//! Counted twice: by the engine (`tx_frames` over the time the frames took,
//! as `offered_fps` is computed; `rx_frames` over the same time) and by the
//! veth's own kernel counters (`ip -s -j link show` in the namespace before
//! and after the trial: port A's tx packets, port B's rx packets, over the
//! same time). A row where the two differ by more than 1 % is flagged.
//!
//! Placement: the engine pins all its threads to one set of CPUs
//! (`EngineConfig::tester_cpus`); it has no separate sending and receiving
//! CPUs. To give each side a core of its own the example pins the engine's
//! threads itself by the order the engine starts them in a trial
//! (crates/engine/src/trial.rs: port A's receiver, port B's receiver, then
//! the generator): port A's threads on `--tx-cpu`, port B's receiver and
//! port B's veth NAPI kthread (threaded NAPI, GRO on) on `--rx-cpu`. A trial
//! in which the engine did not start exactly those three threads (the
//! engine changed) is flagged; threads beyond the third are not pinned.
//!
//! `--threads N` (a list, e.g. `--threads "1 2"`, runs every row with each
//! count): port A sends with N generator threads, each on a queue of its
//! own, as the product does with `--tx-threads N` (and, with ESP, `--ipsec
//! --tunnels N --tx-threads N`). The veth pair is made with as many tx and
//! rx queues on both ends as the largest count asks; port A opens one
//! AF_XDP socket per sending queue (`AfXdpOptions::tx_queues`) or one
//! packet socket per thread (`AfPacketPort::open_tx_rings`), port B
//! receives on every queue with one thread. With ESP the N threads seal
//! with N SAs (`EspSend::many`, tunnel i's inner sources in slice i of
//! 198.19.0.0/16, frames spread over the slices as `--tunnels` spreads
//! them, and the transform dealt out one SA per thread by
//! `SendTransform::split`); port B opens all N (`EspReceive::many`). The
//! engine's `tx_threads` is N, its per-tunnel tally on. Placement with N
//! above 1: generator thread k on the k-th CPU this process may use (as
//! the engine pins it), port B's receiver and NAPI kthreads unpinned; where
//! each thread ran is sampled and printed. Port B's veth counts what each
//! receive queue carried (`ethtool -S`, rx_queue_K_xdp_packets).

use linerate_engine::ipsec::{EspReceive, EspSend, SharedCounts, TunnelMap};
use linerate_engine::{Engine, EngineConfig, HostConfig, TesterPort, TunnelTally};
use linerate_esp::{EspSuite, Inbound, Outbound, SaKeys};
use linerate_port::af_packet::{AfPacketOptions, AfPacketPort};
use linerate_port::af_xdp::{AfXdpOptions, AfXdpPort};
use linerate_port::{Port, PortInfo, RxQueue, TxQueue};
use linerate_results::{TrialResult, TrialSpec};
use linerate_wire::flows::Field;
use linerate_wire::FrameSize;
use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

type Error = Box<dyn std::error::Error>;

/// Set by SIGINT/SIGTERM: the running trial ends, the namespace goes.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// What ESP adds to a frame at most (UDP 8, outer IPv4 20, ESP header 8,
/// IV up to 16, padding up to 15, trailer 2, ICV up to 32), rounded up.
const ESP_ROOM: usize = 128;
/// Two figures further apart than this are flagged.
const AGREE: f64 = 0.01;
const IP_A: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const IP_B: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
/// With N threads and ESP, tunnel i's inner sources are the slice
/// 198.19.i.0/24 (the product's `--tunnels` slices), its test frames from
/// 198.19.i.2.
const SLICES: TunnelMap = TunnelMap {
    first: Ipv4Addr::new(198, 19, 0, 0),
    block: 256,
    count: 1,
};
const SLICE_HOST: u32 = 2;
/// Most generator threads: the queues linerate's AF_XDP program steers.
const MAX_THREADS: u32 = linerate_bpf::xsk::MAX_QUEUES;

const USAGE: &str =
    "usage: esp_ceiling [--duration 2s] [--sizes 64,512,1518] [--engines af_xdp,af_packet]
       [--suites none,aes128gcm16,aes256gcm16,aes128-sha256] [--runs N] [--line-speed 100G]
       [--mtu 1600] [--tx-cpu 0] [--rx-cpu 1] [--straggler-wait 300ms] [--threads 1]
Runs as root. Lists take commas or spaces. --suites takes 'none' (no ESP) and
strongSwan's names: aes128gcm16, aes256gcm16, aes128-sha1, aes128-sha256,
aes256-sha256, aes256-sha512. --threads: port A's generator threads, one
count or a list (\"1 2\": every row with 1 and with 2, and their ratio).";

#[derive(Debug, Clone)]
struct Args {
    duration: Duration,
    sizes: Vec<FrameSize>,
    engines: Vec<String>,
    /// None: no ESP (the plain row every ESP row is compared with).
    suites: Vec<Option<EspSuite>>,
    runs: usize,
    line_bps: u64,
    mtu: u32,
    tx_cpu: usize,
    rx_cpu: usize,
    straggler_wait: Duration,
    /// Generator threads of port A, each count a row of its own ([1]: the
    /// table as it was before the option).
    threads: Vec<u16>,
}

impl Args {
    /// Rows with more than one generator thread, or several counts: the
    /// table gains the columns that tell threads and queues apart.
    fn multi(&self) -> bool {
        self.threads != [1]
    }
    /// The veth's tx and rx queues on each end: one per thread of the
    /// largest count.
    fn queues(&self) -> u16 {
        self.threads.iter().copied().max().unwrap_or(1)
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    let t = text.trim();
    let (number, scale) = if let Some(n) = t.strip_suffix("ms") {
        (n, 1e-3)
    } else if let Some(n) = t.strip_suffix('s') {
        (n, 1.0)
    } else {
        (t, 1.0)
    };
    number
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(|v| Duration::from_secs_f64(v * scale))
        .ok_or_else(|| format!("'{text}' is not a duration (2s, 500ms)"))
}

fn parse_bps(text: &str) -> Result<u64, String> {
    let t = text.trim().to_ascii_uppercase();
    let (number, scale) = match t.chars().last() {
        Some('G') => (&t[..t.len() - 1], 1e9),
        Some('M') => (&t[..t.len() - 1], 1e6),
        Some('K') => (&t[..t.len() - 1], 1e3),
        _ => (&t[..], 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite() && *v > 0.0)
        .map(|v| (v * scale) as u64)
        .ok_or_else(|| format!("'{text}' is not a line speed (10G, 100G)"))
}

fn list(text: &str) -> impl Iterator<Item = &str> {
    text.split([',', ' '])
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

fn parse_args(argv: &[String]) -> Result<Args, String> {
    let mut a = Args {
        duration: Duration::from_secs(2),
        sizes: [64, 512, 1518]
            .iter()
            .map(|&s| FrameSize::from_frame(s).expect("a frame size"))
            .collect(),
        engines: vec!["af_xdp".into(), "af_packet".into()],
        suites: vec![
            None,
            Some(EspSuite::Aes128Gcm16),
            Some(EspSuite::Aes256Gcm16),
            Some(EspSuite::Aes128Sha256),
        ],
        runs: 1,
        line_bps: 100_000_000_000,
        mtu: 1600,
        tx_cpu: 0,
        rx_cpu: 1,
        straggler_wait: Duration::from_millis(300),
        threads: vec![1],
    };
    let mut it = argv.iter();
    while let Some(opt) = it.next() {
        if opt == "-h" || opt == "--help" {
            return Err(String::new());
        }
        let value = it
            .next()
            .ok_or_else(|| format!("{opt} needs a value"))?
            .as_str();
        let bad = |why: String| format!("{opt}: {why}");
        match opt.as_str() {
            "--duration" => a.duration = parse_duration(value).map_err(bad)?,
            "--straggler-wait" => a.straggler_wait = parse_duration(value).map_err(bad)?,
            "--sizes" => {
                a.sizes = list(value)
                    .map(|s| {
                        s.parse::<u64>()
                            .ok()
                            .and_then(|n| FrameSize::from_frame(n).ok())
                            .ok_or_else(|| bad(format!("'{s}' is not a frame size")))
                    })
                    .collect::<Result<_, _>>()?
            }
            "--engines" => {
                a.engines = list(value).map(str::to_string).collect();
                if let Some(e) = a
                    .engines
                    .iter()
                    .find(|e| !matches!(e.as_str(), "af_xdp" | "af_packet"))
                {
                    return Err(bad(format!(
                        "'{e}' is not af_xdp or af_packet (the xdp engine cannot encrypt)"
                    )));
                }
            }
            "--suites" => {
                a.suites = list(value)
                    .map(|s| match s {
                        "none" | "plain" => Ok(None),
                        s => EspSuite::parse(s).map(Some).map_err(|e| bad(e.to_string())),
                    })
                    .collect::<Result<_, _>>()?
            }
            "--runs" => {
                a.runs = value
                    .parse()
                    .ok()
                    .filter(|&n| n >= 1)
                    .ok_or_else(|| bad(format!("'{value}' is not a number >= 1")))?
            }
            "--line-speed" => a.line_bps = parse_bps(value).map_err(bad)?,
            "--mtu" => {
                a.mtu = value
                    .parse()
                    .ok()
                    .filter(|&m| (1500..=65535).contains(&m))
                    .ok_or_else(|| bad(format!("'{value}' is not an MTU of 1500 or more")))?
            }
            "--tx-cpu" => a.tx_cpu = value.parse().map_err(|_| bad(value.to_string()))?,
            "--rx-cpu" => a.rx_cpu = value.parse().map_err(|_| bad(value.to_string()))?,
            "--threads" => {
                let max = MAX_THREADS;
                let mut threads: Vec<u16> = Vec::new();
                for t in list(value) {
                    let n = t
                        .parse::<u16>()
                        .ok()
                        .filter(|&n| n >= 1)
                        .ok_or_else(|| bad(format!("'{t}' is not a number >= 1")))?;
                    if u32::from(n) > max {
                        return Err(bad(format!("{n} generator threads: at most {max} (a queue each, and the af_xdp engine binds at most the {max} queues linerate's XDP program steers)")));
                    }
                    if !threads.contains(&n) {
                        threads.push(n);
                    }
                }
                if threads.is_empty() {
                    return Err(bad("needs a count (1, 2, or a list \"1 2\")".into()));
                }
                a.threads = threads;
            }
            _ => return Err(format!("unknown option '{opt}'")),
        }
    }
    if a.sizes.is_empty() || a.engines.is_empty() || a.suites.is_empty() {
        return Err("--sizes, --engines and --suites need at least one value each".into());
    }
    Ok(a)
}

// --- the namespace --------------------------------------------------------

/// Runs `ip ...` (or another tool) and fails with its stderr.
fn run(cmd: &str, args: &[&str]) -> Result<String, Error> {
    let out = Command::new(cmd).args(args).output()?;
    if !out.status.success() {
        return Err(format!(
            "{cmd} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The namespace and its veth pair; deleting the namespace deletes both
/// ends. Dropped on return, error and panic (unwinding).
struct Bed {
    ns: String,
    a: String,
    b: String,
}

impl Bed {
    /// `queues`: tx and rx queues of each end (1: the veth's default).
    fn build(mtu: u32, queues: u16) -> Result<Bed, Error> {
        let pid = std::process::id();
        let ns = format!("lrespc-{pid}");
        run("ip", &["netns", "add", &ns])?;
        let bed = Bed {
            ns,
            a: format!("ea{pid}"),
            b: format!("eb{pid}"),
        };
        let (ns, a, b) = (bed.ns.as_str(), bed.a.as_str(), bed.b.as_str());
        let mtu = mtu.to_string();
        let q = queues.to_string();
        run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        // No IPv6: no router solicitations or MLD reports in the counters.
        for key in ["all", "default"] {
            let k = format!("net.ipv6.conf.{key}.disable_ipv6=1");
            let _ = run("ip", &["netns", "exec", ns, "sysctl", "-qw", &k]);
        }
        if queues <= 1 {
            run(
                "ip",
                &[
                    "-n", ns, "link", "add", a, "mtu", &mtu, "type", "veth", "peer", "name", b,
                    "mtu", &mtu,
                ],
            )?;
        } else {
            // A queue per generator thread on both ends: veth hands a frame
            // sent on A's tx queue k to B's rx queue k (and its NAPI).
            run(
                "ip",
                &[
                    "-n",
                    ns,
                    "link",
                    "add",
                    a,
                    "mtu",
                    &mtu,
                    "numtxqueues",
                    &q,
                    "numrxqueues",
                    &q,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    b,
                    "mtu",
                    &mtu,
                    "numtxqueues",
                    &q,
                    "numrxqueues",
                    &q,
                ],
            )?;
        }
        // As the lab and bench-engines.sh do: no TSO/GSO on the sender (or
        // veth hands frames over without the receiver's NAPI), GRO on the
        // receiver (which gives it NAPI), its NAPI in a kernel thread that
        // can be pinned to the receiving CPU.
        run("ip", &["-n", ns, "link", "set", a, "up"])?;
        run("ip", &["-n", ns, "link", "set", b, "up"])?;
        run(
            "ip",
            &[
                "netns", "exec", ns, "ethtool", "-K", a, "tso", "off", "gso", "off",
            ],
        )?;
        run(
            "ip",
            &["netns", "exec", ns, "ethtool", "-K", b, "gro", "on"],
        )?;
        let threaded = format!("echo 1 > /sys/class/net/{b}/threaded");
        run("ip", &["netns", "exec", ns, "sh", "-c", &threaded])?;
        Ok(bed)
    }

    /// tx and rx packets (and drops) of both ends, from the kernel.
    fn counters(&self) -> Result<BTreeMap<String, LinkCounts>, Error> {
        let out = run("ip", &["-n", &self.ns, "-s", "-j", "link", "show"])?;
        let v: serde_json::Value = serde_json::from_str(&out)?;
        let mut m = BTreeMap::new();
        for link in v.as_array().into_iter().flatten() {
            let name = link["ifname"].as_str().unwrap_or_default().to_string();
            let s = &link["stats64"];
            let n = |dir: &str, what: &str| s[dir][what].as_u64().unwrap_or(0);
            m.insert(
                name,
                LinkCounts {
                    rx_packets: n("rx", "packets"),
                    rx_dropped: n("rx", "dropped"),
                    tx_packets: n("tx", "packets"),
                    tx_dropped: n("tx", "dropped"),
                },
            );
        }
        Ok(m)
    }

    /// Frames each of port B's receive queues carried (veth's per-queue
    /// counter `rx_queue_K_xdp_packets`, every frame its NAPI took, with or
    /// without an XDP program), index = queue.
    fn rx_queues(&self) -> Result<Vec<u64>, Error> {
        let out = run("ip", &["netns", "exec", &self.ns, "ethtool", "-S", &self.b])?;
        let mut q: Vec<u64> = Vec::new();
        for line in out.lines() {
            let Some((name, value)) = line.trim().split_once(':') else {
                continue;
            };
            let Some(k) = name
                .strip_prefix("rx_queue_")
                .and_then(|r| r.strip_suffix("_xdp_packets"))
                .and_then(|k| k.parse::<usize>().ok())
            else {
                continue;
            };
            if q.len() <= k {
                q.resize(k + 1, 0);
            }
            q[k] = value.trim().parse().unwrap_or(0);
        }
        Ok(q)
    }

    /// The kernel threads running port B's NAPI: `napi/<ifname>-<id>`
    /// (the name cut to 15 characters, as the kernel keeps it).
    fn napi_threads(&self) -> Vec<i32> {
        let want: String = format!("napi/{}-", self.b).chars().take(15).collect();
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm"))
                    .is_ok_and(|c| c.trim_end().starts_with(&want))
            })
            .collect()
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        if let Err(e) = run("ip", &["netns", "del", &self.ns]) {
            eprintln!("esp_ceiling: could not remove namespace {}: {e}", self.ns);
        }
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct LinkCounts {
    rx_packets: u64,
    rx_dropped: u64,
    tx_packets: u64,
    tx_dropped: u64,
}

impl LinkCounts {
    fn since(self, before: LinkCounts) -> LinkCounts {
        LinkCounts {
            rx_packets: self.rx_packets.saturating_sub(before.rx_packets),
            rx_dropped: self.rx_dropped.saturating_sub(before.rx_dropped),
            tx_packets: self.tx_packets.saturating_sub(before.tx_packets),
            tx_dropped: self.tx_dropped.saturating_sub(before.tx_dropped),
        }
    }
}

// --- CPUs -------------------------------------------------------------------

fn pin(tid: i32, cpu: usize) -> bool {
    pin_to(tid, &[cpu])
}

/// Lets task `tid` run on any of `cpus`.
fn pin_to(tid: i32, cpus: &[usize]) -> bool {
    let mut set = CpuSet::new();
    cpus.iter().all(|&c| set.set(c).is_ok())
        && !cpus.is_empty()
        && sched_setaffinity(Pid::from_raw(tid), &set).is_ok()
}

/// A task's time on a CPU and, where the kernel keeps it, its time
/// runnable but waiting for one (another task had the CPU).
#[derive(Debug, Clone, Copy, Default)]
struct Sched {
    run_ns: u64,
    wait_ns: Option<u64>,
}

impl Sched {
    fn since(self, before: Sched) -> Sched {
        Sched {
            run_ns: self.run_ns.saturating_sub(before.run_ns),
            wait_ns: self
                .wait_ns
                .zip(before.wait_ns)
                .map(|(a, b)| a.saturating_sub(b)),
        }
    }
    fn add(self, other: Sched) -> Sched {
        Sched {
            run_ns: self.run_ns + other.run_ns,
            wait_ns: self.wait_ns.zip(other.wait_ns).map(|(a, b)| a + b),
        }
    }
}

/// /proc/.../schedstat (run and wait time), else stat's ticks (run only).
fn sched(task: &str) -> Option<Sched> {
    if let Ok(s) = std::fs::read_to_string(format!("{task}/schedstat")) {
        let mut f = s.split_whitespace().map(|v| v.parse::<u64>().ok());
        if let (Some(Some(run_ns)), Some(wait_ns)) = (f.next(), f.next()) {
            return Some(Sched { run_ns, wait_ns });
        }
    }
    let stat = std::fs::read_to_string(format!("{task}/stat")).ok()?;
    let rest = stat.rsplit_once(") ")?.1;
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    // utime, stime: fields 14 and 15 of stat, 12 and 13 after the name.
    let ticks = f.get(11)? + f.get(12)?;
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64;
    Some(Sched {
        run_ns: ticks * 1_000_000_000 / hz,
        wait_ns: None,
    })
}

fn threads_now() -> HashSet<i32> {
    std::fs::read_dir("/proc/self/task")
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The threads the engine starts in a trial, in that order. With several
/// generator threads the third only starts them (and waits for them): they
/// follow it, one per queue.
const ROLES: [(&str, Side); 3] = [
    ("port A's receiver", Side::A),
    ("port B's receiver", Side::B),
    ("generator", Side::A),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    A,
    B,
}

/// The CPU a task last ran on (field 39 of its stat).
fn last_cpu(task: &str) -> Option<usize> {
    let stat = std::fs::read_to_string(format!("{task}/stat")).ok()?;
    let rest = stat.rsplit_once(") ")?.1;
    // Field 39, 36 after the name (fields 3.. start at 0).
    rest.split_whitespace().nth(36)?.parse().ok()
}

/// One engine thread (or NAPI kthread) as the placer saw it.
#[derive(Debug, Clone, Default)]
struct Seen {
    tid: i32,
    pinned: bool,
    sched_first: Sched,
    sched_last: Sched,
    first: Option<Instant>,
    last: Option<Instant>,
    /// Its CPU time between samples, by the CPU it was on at the sample.
    on_cpu: BTreeMap<usize, u64>,
}

impl Seen {
    /// Shares of its lifetime the thread was on a CPU, and waiting for one.
    fn shares(&self) -> Option<(f64, Option<f64>)> {
        let life = self.last?.duration_since(self.first?).as_secs_f64();
        let used = self.sched_last.since(self.sched_first);
        let share = |ns: u64| ns as f64 / 1e9 / life;
        (life > 0.05).then(|| (share(used.run_ns), used.wait_ns.map(share)))
    }

    /// Takes a sample of `task` (its /proc directory) at `now`.
    fn sample(&mut self, task: &str, now: Instant) {
        let Some(t) = sched(task) else {
            return;
        };
        if self.first.is_none() {
            self.first = Some(now);
            self.sched_first = t;
        } else if let Some(cpu) = last_cpu(task) {
            let ran = t.run_ns.saturating_sub(self.sched_last.run_ns);
            *self.on_cpu.entry(cpu).or_default() += ran;
        }
        self.last = Some(now);
        self.sched_last = t;
    }

    /// Where it ran: "1", or "1 (70 %) 0 (30 %)" (CPUs with 5 % or more of
    /// its sampled CPU time); "-" when it never ran between samples.
    fn ran_on(&self) -> String {
        let total: u64 = self.on_cpu.values().sum();
        if total == 0 {
            return "-".into();
        }
        let mut by: Vec<(usize, u64)> = self.on_cpu.iter().map(|(&c, &ns)| (c, ns)).collect();
        by.sort_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
        let shown: Vec<(usize, u64)> = by
            .iter()
            .enumerate()
            .filter(|(i, (_, ns))| *i == 0 || *ns as f64 >= 0.05 * total as f64)
            .map(|(_, &x)| x)
            .collect();
        if shown.len() == 1 {
            return shown[0].0.to_string();
        }
        shown
            .iter()
            .map(|(c, ns)| format!("{c} ({:.0} %)", *ns as f64 * 100.0 / total as f64))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// Where one trial's threads go.
#[derive(Debug, Clone, Default)]
struct Placement {
    /// Port A's generator threads.
    threads: u16,
    /// One generator thread: port A's threads on .0, port B's on .1 (None:
    /// not pinned).
    cpus: Option<(usize, usize)>,
    /// Several: generator thread k on `gen_cpus[k % len]` (empty: not
    /// pinned); the receivers are not pinned.
    gen_cpus: Vec<usize>,
    /// Port B's NAPI kthreads: watched (pinned or not before the trial).
    napi: Vec<i32>,
}

impl Placement {
    /// How many threads the engine starts in a trial.
    fn expected(&self) -> usize {
        if self.threads <= 1 {
            ROLES.len()
        } else {
            ROLES.len() + self.threads as usize
        }
    }
    /// The CPU the `i`-th thread the engine starts is pinned to.
    fn cpu_of(&self, i: usize) -> Option<usize> {
        if self.threads <= 1 {
            let (tx, rx) = self.cpus?;
            let (_, side) = ROLES.get(i)?;
            Some(if *side == Side::A { tx } else { rx })
        } else {
            let k = i.checked_sub(ROLES.len())?;
            (k < self.threads as usize && !self.gen_cpus.is_empty())
                .then(|| self.gen_cpus[k % self.gen_cpus.len()])
        }
    }
}

/// What the placer did in one trial.
#[derive(Debug, Clone, Default)]
struct Placed {
    plan: Placement,
    threads: Vec<Seen>,
    napi: Vec<Seen>,
}

impl Placed {
    /// One generator thread: every thread seen and pinned. Several: every
    /// thread seen, the generators pinned.
    fn as_expected(&self) -> bool {
        let pinned = |(i, t): (usize, &Seen)| t.pinned || (self.gens() > 1 && i < ROLES.len());
        self.threads.len() == self.plan.expected() && self.threads.iter().enumerate().all(pinned)
    }
    /// Generator threads.
    fn gens(&self) -> usize {
        self.plan.threads.max(1) as usize
    }
    /// The engine's index of generator thread `k`.
    fn gen_role(&self, k: usize) -> usize {
        if self.gens() > 1 {
            ROLES.len() + k
        } else {
            2
        }
    }
    /// Share of its lifetime thread `role` was on a CPU.
    fn busy(&self, role: usize) -> Option<f64> {
        Some(self.threads.get(role)?.shares()?.0)
    }
    /// Share of its lifetime thread `role` waited for a CPU.
    fn waited(&self, role: usize) -> Option<f64> {
        self.threads.get(role)?.shares()?.1
    }
    /// Each generator thread's [`busy`](Self::busy) (or waited) share as
    /// percent: "97" or "97, 95".
    fn gen_percents(&self, waited: bool) -> String {
        (0..self.gens())
            .map(|k| {
                let role = self.gen_role(k);
                percent(if waited {
                    self.waited(role)
                } else {
                    self.busy(role)
                })
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
    /// Where the generators, port B's receiver and its NAPI kthreads ran:
    /// "0, 1 / 1 (60 %) 0 (40 %) / 1, 0".
    fn ran_on(&self) -> String {
        let gens = (0..self.gens())
            .map(|k| {
                self.threads
                    .get(self.gen_role(k))
                    .map_or("-".into(), Seen::ran_on)
            })
            .collect::<Vec<_>>()
            .join(", ");
        let rx_b = self.threads.get(1).map_or("-".into(), Seen::ran_on);
        let napi = if self.napi.is_empty() {
            "-".to_string()
        } else {
            self.napi
                .iter()
                .map(Seen::ran_on)
                .collect::<Vec<_>>()
                .join(", ")
        };
        format!("{gens} / {rx_b} / {napi}")
    }
}

/// Watches this process for the engine's trial threads and pins them as
/// `plan` says (one generator: port A's on `tx`, port B's on `rx`; several:
/// generator thread k on its CPU), and samples port B's NAPI kthreads.
struct Placer {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Placed>,
}

impl Placer {
    fn start(plan: Placement) -> Placer {
        let stop = Arc::new(AtomicBool::new(false));
        let known = threads_now();
        let flag = stop.clone();
        let handle = std::thread::spawn(move || {
            let me = unsafe { libc::gettid() };
            let mut placed = Placed {
                napi: plan
                    .napi
                    .iter()
                    .map(|&tid| Seen {
                        tid,
                        ..Seen::default()
                    })
                    .collect(),
                plan,
                threads: Vec::new(),
            };
            let expected = placed.plan.expected();
            while !flag.load(Ordering::Relaxed) {
                let mut new: Vec<i32> = threads_now()
                    .into_iter()
                    .filter(|t| {
                        *t != me
                            && !known.contains(t)
                            && !placed.threads.iter().any(|s| s.tid == *t)
                    })
                    .collect();
                new.sort_unstable();
                for tid in new {
                    let i = placed.threads.len();
                    let pinned = placed.plan.cpu_of(i).is_some_and(|cpu| pin(tid, cpu));
                    placed.threads.push(Seen {
                        tid,
                        pinned,
                        ..Seen::default()
                    });
                }
                let now = Instant::now();
                for s in &mut placed.threads {
                    s.sample(&format!("/proc/self/task/{}", s.tid), now);
                }
                for s in &mut placed.napi {
                    s.sample(&format!("/proc/{}", s.tid), now);
                }
                // Quick until the generators are found, then a sample now and then.
                std::thread::sleep(if placed.threads.len() < expected {
                    Duration::from_micros(200)
                } else {
                    Duration::from_millis(20)
                });
            }
            placed
        });
        Placer { stop, handle }
    }

    fn finish(self) -> Placed {
        self.stop.store(true, Ordering::Relaxed);
        self.handle.join().unwrap_or_default()
    }
}

// --- one engine on the pair ---------------------------------------------------

fn random_bytes(n: usize) -> Result<Vec<u8>, Error> {
    let mut v = vec![0u8; n];
    let mut at = 0;
    while at < n {
        let got = unsafe { libc::getrandom(v[at..].as_mut_ptr().cast(), n - at, 0) };
        if got < 0 {
            return Err(std::io::Error::last_os_error().into());
        }
        at += got as usize;
    }
    Ok(v)
}

/// Fresh random keys for one SA of `suite` (A's outbound is B's inbound).
fn random_keys(suite: EspSuite) -> Result<SaKeys, Error> {
    let spi = u32::from_be_bytes(random_bytes(4)?.try_into().expect("4 bytes")) | 0x100;
    let enc = random_bytes(suite.encryption_keymat_len())?;
    let integ = random_bytes(suite.integrity_key_len())?;
    Ok(SaKeys::new(suite, spi, enc, integ)?)
}

fn host(ip: Ipv4Addr, gateway: Ipv4Addr) -> HostConfig {
    HostConfig {
        ip,
        prefix_len: 24,
        gateway,
        gateway_mac: None,
        also_answers: None,
        inner: None,
        ipv6: None,
        vlan: None,
    }
}

/// A socket port whose generator threads send on `tx`, one queue each (as
/// the product builds port A with `--tx-threads`).
fn port_of_queues<T, R>(tx: Vec<T>, rx: R, info: PortInfo) -> TesterPort
where
    T: TxQueue + Send + 'static,
    R: RxQueue + 'static,
{
    TesterPort::from_queues(tx, vec![rx], info)
}

/// Opens both ends with `engine`, port A encrypting and port B decrypting
/// with `suite`, port A sending with `threads` generator threads (each on
/// a queue of its own; with ESP, each with an SA of its own); returns the
/// engine and a note on how the ports opened.
fn open(
    bed: &Bed,
    engine: &str,
    suite: Option<EspSuite>,
    threads: u16,
    max_frame_len: usize,
    straggler_wait: Duration,
) -> Result<(Engine, SharedCounts, String), Error> {
    let ns = Some(bed.ns.as_str());
    let opened = |port: &str, e: linerate_port::PortError| -> Error {
        if threads > 1 {
            format!("{engine} on {port} with {threads} generator threads: {e}").into()
        } else {
            e.into()
        }
    };
    let (mut a, mut b, note) = match engine {
        "af_xdp" => {
            let opts = AfXdpOptions {
                max_frame_len,
                ..AfXdpOptions::default()
            };
            let a = if threads > 1 {
                // A socket per sending queue, thread k on queue k (as the
                // product opens af_xdp with --tx-threads).
                let a_opts = AfXdpOptions {
                    tx_queues: u32::from(threads),
                    ..opts
                };
                let a = AfXdpPort::open(&bed.a, ns, &a_opts).map_err(|e| opened(&bed.a, e))?;
                let (tx, rx, info) = a.split_queues();
                port_of_queues(tx, rx, info)
            } else {
                let a = AfXdpPort::open(&bed.a, ns, &opts).map_err(|e| opened(&bed.a, e))?;
                TesterPort::from_port(a)
            };
            let b = AfXdpPort::open(&bed.b, ns, &opts).map_err(|e| opened(&bed.b, e))?;
            let mut note = format!(
                "AF_XDP {} mode, XDP {}",
                b.mode().as_str(),
                b.attach_mode().as_str()
            );
            if b.rx_queues() > 1 {
                let _ = write!(note, ", port B on {} queues", b.rx_queues());
            }
            (a, TesterPort::from_port(b), note)
        }
        _ => {
            let mut opts = AfPacketOptions {
                max_frame_len,
                ..AfPacketOptions::default()
            };
            let note = if suite.is_some() {
                // Decryption needs the whole frame, not its headers.
                opts.rx_snaplen = u16::MAX as u32;
                "receive ring copies whole frames".to_string()
            } else {
                format!("receive ring copies {} bytes of a frame", opts.rx_snaplen)
            };
            let a = AfPacketPort::open(&bed.a, ns, &opts).map_err(|e| opened(&bed.a, e))?;
            let a = if threads > 1 {
                // A transmit ring (socket) per generator thread, as the
                // product opens af_packet with --tx-threads; with qdisc
                // bypass thread k (on CPU k) fills queue k.
                let (tx, rx, info) = a.split();
                let mut queues = vec![tx];
                queues.extend(
                    AfPacketPort::open_tx_rings(&bed.a, ns, &opts, threads as usize - 1)
                        .map_err(|e| opened(&bed.a, e))?,
                );
                port_of_queues(queues, rx, info)
            } else {
                TesterPort::from_port(a)
            };
            let b = AfPacketPort::open(&bed.b, ns, &opts).map_err(|e| opened(&bed.b, e))?;
            (a, TesterPort::from_port(b), note)
        }
    };
    let counts = SharedCounts::default();
    let mut flows = linerate_wire::Flows::default();
    let mut tunnels = None;
    match suite {
        Some(suite) if threads > 1 => {
            // As --ipsec --tunnels N --tx-threads N: N SAs, tunnel i's
            // inner sources in slice i, the frames spread over the slices;
            // port A's QueueTx deals the transform out, tunnel i to thread
            // i (SendTransform::split), and each thread sends its slice
            // only (thread_flows).
            let map = TunnelMap {
                count: u32::from(threads),
                ..SLICES
            };
            let mut outbound = Vec::new();
            let mut inbound = Vec::new();
            for _ in 0..threads {
                let keys = random_keys(suite)?;
                outbound.push((Outbound::new(keys.clone())?, IP_A));
                inbound.push(Inbound::new(keys)?);
            }
            let send = EspSend::many(outbound, IP_B, map, counts.clone());
            let receive = EspReceive::many(inbound, counts.clone());
            a.set_transforms(Some(Box::new(send)), None, engine)?;
            b.set_transforms(None, Some(Box::new(receive)), engine)?;
            flows.ranges.push(map.spread(Field::SrcIp, SLICE_HOST));
            tunnels = Some(TunnelTally {
                map,
                ab: Field::SrcIp,
                ba: Field::DstIp,
            });
        }
        Some(suite) => {
            let keys = random_keys(suite)?;
            let send = EspSend::new(Outbound::new(keys.clone())?, IP_A, IP_B, counts.clone());
            let receive = EspReceive::new(Inbound::new(keys)?, counts.clone());
            a.set_transforms(Some(Box::new(send)), None, engine)?;
            b.set_transforms(None, Some(Box::new(receive)), engine)?;
        }
        None => {}
    }
    let cfg = EngineConfig {
        straggler_wait,
        name: engine.to_string(),
        // Left empty: the engine would pin every thread to the same set
        // (with several generator threads it pins thread k to the k-th CPU
        // this process may use).
        tester_cpus: Vec::new(),
        tx_threads: threads,
        flows,
        tunnels,
        ..EngineConfig::default()
    };
    let e = Engine::new(a, host(IP_A, IP_B), b, host(IP_B, IP_A), cfg);
    Ok((e, counts, note))
}

/// One row of the table.
#[derive(Debug, Clone)]
struct Row {
    engine: String,
    suite: Option<EspSuite>,
    size: u16,
    /// The time the frames took to send (tx_frames / offered_fps).
    send_s: f64,
    tx: u64,
    rx: u64,
    ring_drops: u64,
    errored: u64,
    /// Port A's veth: tx packets; port B's veth: rx packets; and drops.
    veth_tx: u64,
    veth_rx: u64,
    /// Port A's veth tx dropped (port B's veth ring full), port B's veth
    /// rx dropped (an AF_XDP socket's full ring counts there too).
    a_tx_dropped: u64,
    b_rx_dropped: u64,
    icv_failures: u64,
    placed: Placed,
    /// Port B's NAPI kthread(s) over the trial.
    napi: Option<Sched>,
    /// Port A's generator threads.
    threads: u16,
    /// With several threads and ESP: frames each SA sealed (SA k is
    /// thread k's), from the SAs' own counters.
    per_sa: Vec<u64>,
    /// Per tunnel (= SA = thread), what the engine reports sent and
    /// received (`TrialResult::tunnels`).
    tally: Vec<(u64, u64)>,
    /// Frames each of port B's receive queues carried (veth's counter;
    /// with --threads only).
    queue_rx: Vec<u64>,
}

impl Row {
    fn fps(&self, n: u64) -> f64 {
        if self.send_s > 0.0 {
            n as f64 / self.send_s
        } else {
            0.0
        }
    }
    fn sent(&self) -> f64 {
        self.fps(self.tx)
    }
    fn received(&self) -> f64 {
        self.fps(self.rx)
    }
    fn veth_sent(&self) -> f64 {
        self.fps(self.veth_tx)
    }
    fn veth_received(&self) -> f64 {
        self.fps(self.veth_rx)
    }
    /// Sent fps per generator thread, at port A's veth (its tx packets
    /// over the sending time, divided by the threads).
    fn veth_sent_per_thread(&self) -> f64 {
        self.veth_sent() / f64::from(self.threads.max(1))
    }
    fn key(&self) -> RowKey {
        (
            self.engine.clone(),
            self.size,
            suite_name(self.suite).into(),
            self.threads,
        )
    }
    /// The row of the same engine, size and threads without ESP.
    fn is_plain_of(&self, r: &Row) -> bool {
        self.suite.is_none()
            && self.engine == r.engine
            && self.size == r.size
            && self.threads == r.threads
    }
    /// What is wrong with the row's counts, if anything.
    fn flags(&self) -> Vec<String> {
        let mut f = Vec::new();
        let differ = |engine: u64, kernel: u64| {
            let d = (engine as f64 - kernel as f64).abs() / (kernel.max(1) as f64);
            (d > AGREE).then_some(d)
        };
        if let Some(d) = differ(self.tx, self.veth_tx) {
            f.push(format!("sent: engine and veth differ {:.1} %", d * 100.0));
        }
        if let Some(d) = differ(self.rx, self.veth_rx) {
            f.push(format!(
                "received: engine and veth differ {:.1} %",
                d * 100.0
            ));
        }
        if self.errored > 0 || self.icv_failures > 0 {
            f.push(format!(
                "{} errored, {} ICV failures",
                self.errored, self.icv_failures
            ));
        }
        if !self.placed.as_expected() {
            f.push(format!(
                "threads not placed ({} seen)",
                self.placed.threads.len()
            ));
        }
        if self.threads > 1 {
            // Every thread's queue carried frames.
            for k in 0..self.threads as usize {
                if self.queue_rx.get(k).copied().unwrap_or(0) == 0 {
                    f.push(format!("port B's queue {k} carried no frame"));
                }
            }
            // Every SA sealed frames, and the SAs together what was sent.
            if !self.per_sa.is_empty() {
                if let Some(k) = self.per_sa.iter().position(|&n| n == 0) {
                    f.push(format!("SA {k} sealed no frame"));
                }
                let sealed: u64 = self.per_sa.iter().sum();
                if let Some(d) = differ(sealed, self.tx) {
                    f.push(format!(
                        "the SAs sealed {} frames, the engine sent {} ({:.1} % apart)",
                        group(sealed as f64),
                        group(self.tx as f64),
                        d * 100.0
                    ));
                }
            }
        }
        f
    }
}

/// A row's engine, frame size, suite and generator threads: the same row
/// in every run.
type RowKey = (String, u16, String, u16);

fn suite_name(s: Option<EspSuite>) -> &'static str {
    s.map_or("none", EspSuite::name)
}

struct Trial<'a> {
    args: &'a Args,
    bed: &'a Bed,
    cpus: Option<(usize, usize)>,
    /// The CPUs this process may use: generator thread k of several on
    /// the k-th (as the engine pins it).
    allowed: Vec<usize>,
}

impl Trial<'_> {
    fn napi(&self, pids: &[i32]) -> Option<Sched> {
        pids.iter().map(|p| sched(&format!("/proc/{p}"))).try_fold(
            Sched {
                run_ns: 0,
                wait_ns: Some(0),
            },
            |sum, t| Some(sum.add(t?)),
        )
    }

    /// Runs every size of one (engine, suite, threads): one set of open
    /// ports.
    fn rows(
        &self,
        engine: &str,
        suite: Option<EspSuite>,
        threads: u16,
        notes: &mut Vec<String>,
    ) -> Result<Vec<Row>, Error> {
        let largest = self.args.sizes.iter().map(|s| s.buffer_len()).max();
        let max_frame_len = largest.unwrap_or(1514) + ESP_ROOM;
        let (mut e, counts, note) = open(
            self.bed,
            engine,
            suite,
            threads,
            max_frame_len,
            self.args.straggler_wait,
        )?;
        if threads as usize > self.allowed.len() {
            let note = format!(
                "{threads} generator threads on {} CPU(s) {:?}: threads share CPUs",
                self.allowed.len(),
                self.allowed
            );
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        let note = format!("{engine}: {note}");
        if !notes.contains(&note) {
            notes.push(note);
        }
        e.resolve()?;
        // Port B's NAPI thread (re)appears when its XDP program attaches:
        // pinned once the ports are open.
        let mut napi = self.bed.napi_threads();
        napi.sort_unstable();
        if threads > 1 {
            // Where they fall: a row of one thread before may have pinned them.
            for &p in &napi {
                pin_to(p, &self.allowed);
            }
        } else if let Some((_, rx)) = self.cpus {
            for &p in &napi {
                pin(p, rx);
            }
        }
        if napi.is_empty() {
            let note = format!("{engine}: no NAPI kthread found for {}", self.bed.b);
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        let mut rows = Vec::new();
        for &size in &self.args.sizes {
            if INTERRUPTED.load(Ordering::Relaxed) {
                return Err("interrupted".into());
            }
            let spec = TrialSpec {
                frame: size,
                mix: None,
                intended_fps: size.line_rate_fps(self.args.line_bps),
                duration: self.args.duration,
            };
            let before_esp = counts.lock().map(|c| c.received).ok();
            let sa_sent = || -> Vec<u64> {
                counts.lock().map_or(Vec::new(), |c| {
                    c.per_tunnel.iter().map(|t| t.sent.packets).collect()
                })
            };
            let sa_before = sa_sent();
            let multi = self.args.multi();
            let queues_before = if multi {
                self.bed.rx_queues()?
            } else {
                Vec::new()
            };
            let before = self.bed.counters()?;
            let napi_before = self.napi(&napi);
            let placer = Placer::start(Placement {
                threads,
                cpus: self.cpus,
                gen_cpus: self.allowed.clone(),
                napi: napi.clone(),
            });
            let result = e.run_trial(&spec, &INTERRUPTED);
            let placed = placer.finish();
            let after = self.bed.counters()?;
            let napi_after = self.napi(&napi);
            let queue_rx: Vec<u64> = if multi {
                let after = self.bed.rx_queues()?;
                after
                    .iter()
                    .enumerate()
                    .map(|(k, n)| n.saturating_sub(queues_before.get(k).copied().unwrap_or(0)))
                    .collect()
            } else {
                Vec::new()
            };
            let per_sa: Vec<u64> = if threads > 1 && suite.is_some() {
                let after = sa_sent();
                after
                    .iter()
                    .enumerate()
                    .map(|(k, n)| n.saturating_sub(sa_before.get(k).copied().unwrap_or(0)))
                    .collect()
            } else {
                Vec::new()
            };
            let r: TrialResult = result?;
            let delta = |ifname: &str| {
                let get = |m: &BTreeMap<String, LinkCounts>| m.get(ifname).copied();
                get(&after)
                    .unwrap_or_default()
                    .since(get(&before).unwrap_or_default())
            };
            let (a, b) = (delta(&self.bed.a), delta(&self.bed.b));
            let icv_failures = match (counts.lock().ok(), before_esp) {
                (Some(c), Some(b)) => c.received.icv_failures - b.icv_failures,
                _ => 0,
            };
            let send_s = if r.offered_fps > 0.0 {
                r.tx_frames as f64 / r.offered_fps
            } else {
                0.0
            };
            let row = Row {
                engine: engine.to_string(),
                suite,
                size: size.frame(),
                send_s,
                tx: r.tx_frames,
                rx: r.rx_frames,
                ring_drops: r.tester_rx_drops,
                errored: r.errored_frames,
                veth_tx: a.tx_packets,
                veth_rx: b.rx_packets,
                a_tx_dropped: a.tx_dropped,
                b_rx_dropped: b.rx_dropped,
                icv_failures,
                placed,
                napi: napi_before.zip(napi_after).map(|(x, y)| y.since(x)),
                threads,
                per_sa,
                tally: r.tunnels.iter().map(|t| (t.tx, t.rx)).collect(),
                queue_rx,
            };
            let threads_said = if multi {
                format!(", {threads} thread(s)")
            } else {
                String::new()
            };
            eprintln!(
                "esp_ceiling: {engine} {}{threads_said} {} B: sent {} fps, received {} fps in {:.2} s",
                suite_name(suite),
                row.size,
                group(row.sent()),
                group(row.received()),
                row.send_s
            );
            rows.push(row);
        }
        Ok(rows)
    }
}

// --- output -----------------------------------------------------------------

/// 1234567.8 -> "1,234,568".
fn group(v: f64) -> String {
    let s = format!("{:.0}", v.max(0.0));
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn ratio(v: f64, plain: Option<f64>) -> String {
    match plain {
        Some(p) if p > 0.0 => format!("{:.2}", v / p),
        _ => "-".into(),
    }
}

fn percent(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.0}", v * 100.0))
}

/// "612,000 + 598,000": per-thread (or per-queue) figures; "-" for none.
fn plus(v: impl IntoIterator<Item = f64>) -> String {
    let parts: Vec<String> = v.into_iter().map(group).collect();
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" + ")
    }
}

/// Each run's table. `multi`: rows of several thread counts or of more
/// than one thread (the columns telling threads and queues apart); else
/// the table as it was before `--threads`.
fn table(rows: &[Row], multi: bool) -> String {
    let plain = |r: &Row| rows.iter().find(|p| p.is_plain_of(r));
    let mut t = String::new();
    if multi {
        t.push_str("| engine | ESP | threads | frame B | sent fps | sent fps (veth) | sent fps per thread (veth) | received fps | received fps (veth) | lost | drops: A veth tx / B veth rx / B ring | sent vs plain (engine / veth) | received vs plain (engine / veth) | CPU % gen / rx B / NAPI B | waiting for a CPU % gen / NAPI B | ran on CPU: gen / rx B / NAPI B | sent fps by SA (engine) | received fps by B's queue (veth) | sent for s | check |\n");
        t.push_str(
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|--:|--:|---|\n",
        );
    } else {
        t.push_str("| engine | ESP | frame B | sent fps | sent fps (veth) | received fps | received fps (veth) | lost | drops: A veth tx / B veth rx / B ring | sent vs plain (engine / veth) | received vs plain (engine / veth) | CPU % gen / rx B / NAPI B | waiting for a CPU % gen / NAPI B | sent for s | check |\n");
        t.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|\n");
    }
    for r in rows {
        let p = plain(r);
        let over_send = |ns: u64| (r.send_s > 0.0).then(|| ns as f64 / 1e9 / r.send_s);
        let napi_busy = r.napi.and_then(|n| over_send(n.run_ns));
        let napi_waited = r.napi.and_then(|n| n.wait_ns).and_then(over_send);
        let flags = r.flags();
        let mut cells: Vec<String> = vec![r.engine.clone(), suite_name(r.suite).to_string()];
        if multi {
            cells.push(r.threads.to_string());
        }
        cells.extend([r.size.to_string(), group(r.sent()), group(r.veth_sent())]);
        if multi {
            cells.push(group(r.veth_sent_per_thread()));
        }
        cells.extend([
            group(r.received()),
            group(r.veth_received()),
            group(r.tx.saturating_sub(r.rx) as f64),
            format!(
                "{} / {} / {}",
                group(r.a_tx_dropped as f64),
                group(r.b_rx_dropped as f64),
                group(r.ring_drops as f64)
            ),
            format!(
                "{} / {}",
                ratio(r.sent(), p.map(Row::sent)),
                ratio(r.veth_sent(), p.map(Row::veth_sent))
            ),
            format!(
                "{} / {}",
                ratio(r.received(), p.map(Row::received)),
                ratio(r.veth_received(), p.map(Row::veth_received))
            ),
            format!(
                "{} / {} / {}",
                r.placed.gen_percents(false),
                percent(r.placed.busy(1)),
                percent(napi_busy)
            ),
            format!("{} / {}", r.placed.gen_percents(true), percent(napi_waited)),
        ]);
        if multi {
            cells.extend([
                r.placed.ran_on(),
                plus(r.per_sa.iter().map(|&n| r.fps(n))),
                plus(r.queue_rx.iter().map(|&n| r.fps(n))),
            ]);
        }
        cells.extend([
            format!("{:.2}", r.send_s),
            if flags.is_empty() {
                "ok".to_string()
            } else {
                format!("**{}**", flags.join("; "))
            },
        ]);
        let _ = writeln!(t, "| {} |", cells.join(" | "));
    }
    t
}

/// Rows of several threads whose per-tunnel sent counts as the engine
/// reports them (`TrialResult::tunnels`) are not what each tunnel's SA
/// sealed: said below the run's table (the table uses the SAs' counts).
fn tally_note(rows: &[Row]) -> Option<String> {
    let off: Vec<&Row> = rows
        .iter()
        .filter(|r| {
            r.tally.len() == r.per_sa.len()
                && r.tally.iter().zip(&r.per_sa).any(|(&(tx, _), &sa)| {
                    (tx as f64 - sa as f64).abs() > AGREE * (sa.max(1) as f64)
                })
        })
        .collect();
    let first = off.first()?;
    let list = |v: Vec<u64>| plus(v.into_iter().map(|n| n as f64));
    Some(format!(
        "Note: in {} row(s) ({}) the engine's per-tunnel sent counts (TrialResult::tunnels) are not what each tunnel's SA sealed, e.g. {} {} {} threads {} B: the engine says {} frames sent per tunnel, the SAs sealed {}, and port B received {}. The engine counts each thread's frames over the trial's whole spread of tunnels, not over the thread's own tunnels, so when the threads send unequal shares a tunnel's sent count is wrong (and its loss can come out below zero). The table's *sent fps by SA* uses the SAs' own counters.",
        off.len(),
        off.iter()
            .map(|r| format!("{} {} {} threads {} B", r.engine, suite_name(r.suite), r.threads, r.size))
            .collect::<Vec<_>>()
            .join(", "),
        first.engine,
        suite_name(first.suite),
        first.threads,
        first.size,
        list(first.tally.iter().map(|t| t.0).collect()),
        list(first.per_sa.clone()),
        list(first.tally.iter().map(|t| t.1).collect()),
    ))
}

/// Each row's range over the runs.
fn ranges(runs: &[Vec<Row>], multi: bool) -> String {
    let mut by: BTreeMap<RowKey, Vec<(Row, Option<Row>)>> = BTreeMap::new();
    for rows in runs {
        for r in rows {
            let plain = rows.iter().find(|p| p.is_plain_of(r));
            by.entry(r.key())
                .or_default()
                .push((r.clone(), plain.cloned()));
        }
    }
    let span = |v: Vec<f64>, f: &dyn Fn(f64) -> String| {
        let lo = v.iter().cloned().fold(f64::INFINITY, f64::min);
        let hi = v.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        if v.is_empty() {
            "-".to_string()
        } else {
            format!("{} – {}", f(lo), f(hi))
        }
    };
    let mut t = String::new();
    if multi {
        t.push_str("| engine | ESP | threads | frame B | sent fps | sent fps (veth) | sent fps per thread (veth) | received fps | received fps (veth) | received vs plain (engine) | received vs plain (veth) | flagged runs |\n");
        t.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n");
    } else {
        t.push_str("| engine | ESP | frame B | sent fps | received fps | received fps (veth) | received vs plain (engine) | received vs plain (veth) | flagged runs |\n");
        t.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|\n");
    }
    // In the order of the first run's table.
    for r in runs.first().into_iter().flatten() {
        let Some(v) = by.get(&r.key()) else { continue };
        let ratios = |f: fn(&Row) -> f64| -> Vec<f64> {
            v.iter()
                .filter_map(|(r, p)| p.as_ref().filter(|p| f(p) > 0.0).map(|p| f(r) / f(p)))
                .collect()
        };
        let two = |x: f64| format!("{x:.2}");
        let of = |f: fn(&Row) -> f64| span(v.iter().map(|(r, _)| f(r)).collect(), &group);
        let mut cells: Vec<String> = vec![r.engine.clone(), suite_name(r.suite).to_string()];
        if multi {
            cells.push(r.threads.to_string());
        }
        cells.extend([r.size.to_string(), of(Row::sent)]);
        if multi {
            cells.extend([of(Row::veth_sent), of(Row::veth_sent_per_thread)]);
        }
        cells.extend([
            of(Row::received),
            of(Row::veth_received),
            span(ratios(Row::received), &two),
            span(ratios(Row::veth_received), &two),
            format!(
                "{} of {}",
                v.iter().filter(|(r, _)| !r.flags().is_empty()).count(),
                v.len()
            ),
        ]);
        let _ = writeln!(t, "| {} |", cells.join(" | "));
    }
    t
}

/// The issue's target: at least 1 Mframes/s per core at 64 bytes with
/// AES-GCM, both ways (sent: encrypted on one core; received: decrypted on
/// one core). Rows of one generator thread.
fn target(runs: &[Vec<Row>]) -> String {
    let mut t = String::new();
    for rows in runs {
        for r in rows.iter().filter(|r| {
            r.threads == 1
                && r.size == 64
                && matches!(r.suite, Some(EspSuite::Aes128Gcm16 | EspSuite::Aes256Gcm16))
        }) {
            let met = r.sent() >= 1e6 && r.received() >= 1e6;
            let _ = writeln!(
                t,
                "- {} {} 64 B: encrypted {} fps, decrypted {} fps: {}",
                r.engine,
                suite_name(r.suite),
                group(r.sent()),
                group(r.received()),
                if met { "met" } else { "NOT met" }
            );
        }
    }
    if t.is_empty() {
        "- (no 64-byte AES-GCM row in this run)\n".into()
    } else {
        t
    }
}

/// Issue 40's targets for threads: N encrypting threads at least this
/// many times one, and AES-128-GCM 64 B at least this rate per thread.
const THREADS_RATIO: f64 = 1.6;
const PER_THREAD_FPS: f64 = 1.2e6;

/// With several thread counts: each row of N > 1 threads against the row
/// of 1 thread (same engine, suite, size, run), sent and received at the
/// veth over the sending time, one figure per run; the per-thread rate;
/// and issue 40's verdict for AES-128-GCM at 64 bytes.
fn threads_section(runs: &[Vec<Row>]) -> String {
    let mut t = String::new();
    let one = |rows: &[Row], r: &Row| -> Option<Row> {
        rows.iter()
            .find(|o| {
                o.threads == 1 && o.engine == r.engine && o.size == r.size && o.suite == r.suite
            })
            .cloned()
    };
    let each = |v: &[Option<f64>], f: &dyn Fn(f64) -> String| -> String {
        v.iter()
            .map(|x| x.map_or("-".to_string(), f))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let two = |x: f64| format!("{x:.2}");
    t.push_str("| engine | ESP | frame B | threads | sent fps per thread (veth) | sent N / 1 (veth) | received N / 1 (veth) | sent N / 1 (engine) | received N / 1 (engine) |\n");
    t.push_str("|---|---|--:|--:|--:|--:|--:|--:|--:|\n");
    let mut verdicts = String::new();
    let mut any_one = false;
    for r in runs.first().into_iter().flatten().filter(|r| r.threads > 1) {
        // This row in every run, and the one-thread row of that run.
        let per_run: Vec<(Row, Option<Row>)> = runs
            .iter()
            .filter_map(|rows| {
                let same = rows.iter().find(|x| x.key() == r.key())?;
                Some((same.clone(), one(rows, same)))
            })
            .collect();
        any_one |= per_run.iter().any(|(_, o)| o.is_some());
        let ratio_of = |f: fn(&Row) -> f64| -> Vec<Option<f64>> {
            per_run
                .iter()
                .map(|(n, o)| o.as_ref().filter(|o| f(o) > 0.0).map(|o| f(n) / f(o)))
                .collect()
        };
        let per_thread: Vec<Option<f64>> = per_run
            .iter()
            .map(|(n, _)| Some(n.veth_sent_per_thread()))
            .collect();
        let sent_ratio = ratio_of(Row::veth_sent);
        let _ = writeln!(
            t,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.engine,
            suite_name(r.suite),
            r.size,
            r.threads,
            each(&per_thread, &group),
            each(&sent_ratio, &two),
            each(&ratio_of(Row::veth_received), &two),
            each(&ratio_of(Row::sent), &two),
            each(&ratio_of(Row::received), &two),
        );
        if r.size == 64 && r.suite == Some(EspSuite::Aes128Gcm16) {
            let runs_where = |bad: &dyn Fn(usize) -> bool| -> Vec<String> {
                (0..per_run.len())
                    .filter(|&i| bad(i))
                    .map(|i| (i + 1).to_string())
                    .collect()
            };
            let slow = runs_where(&|i| per_thread[i].is_none_or(|v| v < PER_THREAD_FPS));
            let low = runs_where(&|i| sent_ratio[i].is_none_or(|v| v < THREADS_RATIO));
            let mut why = Vec::new();
            if !slow.is_empty() {
                why.push(format!(
                    "below {} per thread in run(s) {}",
                    group(PER_THREAD_FPS),
                    slow.join(", ")
                ));
            }
            let compared = sent_ratio.iter().any(Option::is_some);
            if !compared {
                why.push("no row of one thread to compare with".to_string());
            } else if !low.is_empty() {
                why.push(format!(
                    "below {THREADS_RATIO}x one thread (or no one-thread row) in run(s) {}",
                    low.join(", ")
                ));
            }
            let _ = writeln!(
                verdicts,
                "- {} aes128gcm16 64 B, {} threads, {} run(s): sent (veth) per thread {} fps; against one thread {}: {}",
                r.engine,
                r.threads,
                per_run.len(),
                each(&per_thread, &group),
                if compared {
                    each(&sent_ratio, &|x| format!("{x:.2}x"))
                } else {
                    "-".to_string()
                },
                if why.is_empty() {
                    "met in every run".to_string()
                } else {
                    format!("NOT met ({})", why.join("; "))
                }
            );
        }
    }
    t.push('\n');
    if !any_one {
        t.push_str(
            "(No row of 1 thread to compare with: run with --threads \"1 N\" for the ratios.)\n\n",
        );
    }
    let _ = writeln!(
        t,
        "Target (issue 40): N encrypting threads at least {THREADS_RATIO}x one thread, and AES-128-GCM at 64 bytes at least {} frames/s per thread, in every run (sent: port A's veth tx packets over the sending time; per thread: that over the threads):\n",
        group(PER_THREAD_FPS)
    );
    if verdicts.is_empty() {
        t.push_str("- (no 64-byte AES-128-GCM row of more than one thread in this run)\n");
    } else {
        t.push_str(&verdicts);
    }
    t
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

fn allowed_cpus() -> Vec<usize> {
    let Ok(set) = nix::sched::sched_getaffinity(Pid::from_raw(0)) else {
        return Vec::new();
    };
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,%+@".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

fn catch_signals() {
    use nix::sys::signal::{sigaction, SaFlags, SigAction, SigHandler, SigSet, Signal};
    // A second Ctrl-C kills at once (the namespace then stays: bench-esp.sh
    // removes it).
    let action = SigAction::new(
        SigHandler::Handler(on_signal),
        SaFlags::SA_RESETHAND,
        SigSet::empty(),
    );
    for s in [Signal::SIGINT, Signal::SIGTERM] {
        // SAFETY: the handler only stores to an atomic.
        let _ = unsafe { sigaction(s, &action) };
    }
}

fn main() {
    let argv: Vec<String> = std::env::args().collect();
    let args = match parse_args(&argv[1..]) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return;
        }
        Err(e) => {
            // One line: what is wrong (--help prints the usage).
            eprintln!("esp_ceiling: {e} (see --help)");
            std::process::exit(2);
        }
    };
    if unsafe { libc::geteuid() } != 0 {
        eprintln!(
            "esp_ceiling: run as root (it builds a network namespace and opens packet sockets)"
        );
        std::process::exit(2);
    }
    catch_signals();
    let command: Vec<String> = argv.iter().map(|a| shell_quote(a)).collect();
    if let Err(e) = run_all(&args, &command.join(" ")) {
        eprintln!("esp_ceiling: {e}");
        std::process::exit(if INTERRUPTED.load(Ordering::Relaxed) {
            130
        } else {
            1
        });
    }
}

fn run_all(args: &Args, command: &str) -> Result<(), Error> {
    let start = Instant::now();
    let load_before = loadavg();
    let allowed = allowed_cpus();
    let cpus = (args.tx_cpu != args.rx_cpu
        && allowed.contains(&args.tx_cpu)
        && allowed.contains(&args.rx_cpu))
    .then_some((args.tx_cpu, args.rx_cpu));
    let bed = Bed::build(args.mtu, args.queues())?;
    let trial = Trial {
        args,
        bed: &bed,
        cpus,
        allowed: allowed.clone(),
    };
    let multi = args.multi();
    let mut notes = Vec::new();
    let mut runs: Vec<Vec<Row>> = Vec::new();
    for run in 1..=args.runs {
        let mut rows = Vec::new();
        for engine in &args.engines {
            for &suite in &args.suites {
                for &threads in &args.threads {
                    rows.extend(trial.rows(engine, suite, threads, &mut notes)?);
                }
            }
        }
        eprintln!("esp_ceiling: run {run} of {} done", args.runs);
        runs.push(rows);
    }
    let load_after = loadavg();

    let mut out = String::new();
    let _ = writeln!(
        out,
        "# linerate's ESP ceiling: af_xdp and af_packet with and without ESP, one veth pair\n"
    );
    let _ = writeln!(out, "Command: `{command}`\n");
    let _ = writeln!(
        out,
        "Machine: {}, {} CPUs (this process may use {:?}), kernel {}; load average {} before, {} after; {:.0} s in all.\n",
        cpu_model(),
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        allowed,
        run("uname", &["-r"]).unwrap_or_default().trim(),
        load_before,
        load_after,
        start.elapsed().as_secs_f64()
    );
    let _ = writeln!(
        out,
        "Set-up: namespace {}, veth {} (port A, sends; EspSend encrypts) -> {} (port B, receives; EspReceive decrypts), MTU {} (with MTU 9000 the veth would take the AF_XDP socket's XDP program in generic mode only), back to back ({} <-> {}); ESP in UDP 4500, fresh random static keys per engine and suite; every trial asks 100 % of {} Gbit/s line rate for {} s.",
        bed.ns,
        bed.a,
        bed.b,
        args.mtu,
        IP_A,
        IP_B,
        args.line_bps as f64 / 1e9,
        args.duration.as_secs_f64()
    );
    if multi {
        let _ = writeln!(
            out,
            "Threads: port A sends with {} generator thread(s) per row, each on a queue of its own (af_xdp: an AF_XDP socket per queue; af_packet: a packet socket per thread, which the kernel puts on the queue of its CPU); the veth pair has {} tx and rx queues on both ends; port B receives on every queue with one thread. With ESP and N threads above 1: N SAs, one per thread (tunnel i's inner sources in {}/{} + i * {} addresses, frames spread over them as --tunnels spreads them, dealt out by SendTransform::split), all N opened by port B's EspReceive; with one thread one SA, as without --threads.",
            args.threads
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(" or "),
            args.queues(),
            SLICES.first,
            32 - SLICES.block.trailing_zeros(),
            SLICES.block,
        );
    }
    let several = if args.threads.iter().any(|&n| n > 1) {
        format!(
            "; rows of several generator threads: thread k pinned to the k-th of CPUs {} (those this process may use, as the engine pins them), port A's and port B's receivers and port B's NAPI kthreads not pinned (the scheduler places them; *ran on* says where each ran)",
            allowed
                .iter()
                .map(usize::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "Placement: {}{several}; {}.\n",
        match cpus {
            Some((tx, rx)) => format!("port A's generator (and encryption) and receiver on CPU {tx}, port B's receiver (and decryption) and its veth's NAPI kthread on CPU {rx}, pinned by the example (the engine pins all its threads to one set)"),
            None => "not pinned (the CPUs asked for are the same or not available): the scheduler places every thread".to_string(),
        },
        notes.join("; ")
    );
    for (i, rows) in runs.iter().enumerate() {
        if args.runs > 1 {
            let _ = writeln!(out, "## Run {} of {}\n", i + 1, args.runs);
        }
        out.push_str(&table(rows, multi));
        out.push('\n');
        if let Some(note) = tally_note(rows) {
            let _ = writeln!(out, "{note}\n");
        }
    }
    if args.runs > 1 {
        let _ = writeln!(
            out,
            "## Range of each row over {} runs (min – max)\n",
            args.runs
        );
        out.push_str(&ranges(&runs, multi));
        out.push('\n');
    }
    if args.threads.iter().any(|&n| n > 1) {
        let _ = writeln!(
            out,
            "## Threads: N generator threads against one (each run's figure, in run order)\n"
        );
        out.push_str(&threads_section(&runs));
        out.push('\n');
    }
    let _ = writeln!(out, "Target (issue): at least 1 Mframes/s per core at 64 bytes with AES-GCM, encrypting and decrypting:\n");
    out.push_str(&target(&runs));
    out.push('\n');
    let _ = writeln!(
        out,
        "How to read it: *sent fps* is the engine's tx_frames over the time the frames took to send (its offered_fps): one core building and (with ESP) encrypting frames; *received fps* is rx_frames over the same time: what port B's one core received, decrypted and counted, which cannot exceed what was sent. The *(veth)* columns count the same over the same time with the kernel's counters of the veth pair (port A's tx packets, port B's rx packets, from `ip -s -j link show` before and after each trial; ARP adds a frame or two); a row where engine and kernel differ by more than {:.0} % is flagged. *lost* is sent minus received; *drops* are where the kernel and the engine saw frames go: port A's veth tx dropped (port B's veth queue was full: the frame is gone for af_xdp, sent again by af_packet's ring), port B's veth rx dropped (an AF_XDP socket's full ring is counted there too) and port B's own ring drops as the engine counts them. *vs plain* divides by the row of the same engine and size without ESP. *CPU %* is the share of its lifetime each thread was on a CPU (the generator; port B's receiver) and port B's NAPI kthread's CPU time over the sending time; *waiting for a CPU* is the share of the same time the generator and the NAPI kthread were runnable while another task had their CPU (schedstat): other work on the machine, which lowers that row. *sent for*: the trial's sending time; a generator that cannot keep up with the rate asked for pauses its schedule and sends for at most a tenth longer than the trial's duration; the frames it could not send in that time count as not sent. Without ESP the af_packet engine copies 192 bytes of each received frame into its ring, with ESP the whole frame (decryption needs it). On a shared, busy machine the figures move from run to run: compare rows of one run, or use --runs N and the ranges.",
        AGREE * 100.0
    );
    if multi {
        let _ = writeln!(
            out,
            "\nWith --threads: *threads* is port A's generator threads (each its own queue; with ESP its own SA); *sent fps per thread (veth)* is port A's veth tx packets over the sending time divided by the threads (the sending time is the longest thread's); *vs plain* divides by the row of the same engine, size and threads without ESP. *CPU %* and *waiting* list each generator thread (k = 0, 1, ...); *NAPI B* is the sum over port B's NAPI kthreads (one per queue), so it can pass 100 %. *ran on CPU* says where each generator thread, port B's receiver and each of port B's NAPI kthreads spent its CPU time (sampled every 20 ms; one CPU, or the CPUs with 5 % or more of it). *sent fps by SA* is what each SA (thread k's) sealed, from the SAs' own counters; *received fps by B's queue* is what each receive queue of port B's veth carried (`ethtool -S`, rx_queue_K_xdp_packets, every frame its NAPI took): frames sent on A's queue k arrive on B's queue k, so it shows each thread's frames at the kernel. A row of several threads is flagged when a queue of one of its threads carried no frame, an SA sealed none, or the SAs together sealed more than {:.0} % more or less than the engine sent. The threads table divides each row of N threads by the row of one thread of the same engine, suite, size and run (same veth, same queues).",
            AGREE * 100.0
        );
    }
    print!("{out}");
    Ok(())
}
