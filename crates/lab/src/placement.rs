//! CPU placement: keeping the DUT's forwarding off the tester's CPU.
//!
//! A veth transmit hands the frame straight to the peer's receive path, on
//! the sending CPU. Without care, the DUT's whole forwarding work would run
//! inside linerate's transmit call, on the tester's CPU, and a throughput
//! trial would measure tester and DUT together. So the DUT's veths get
//! NAPI (veth uses it only when GRO or XDP is on), the NAPI instances are
//! made *threaded* (each polled by its own kernel thread, `napi/<ifname>-<id>`)
//! and those threads are pinned to a CPU of their own. The tester then only
//! queues frames into the DUT's ring and the forwarding runs on the DUT CPU.
//!
//! One more condition, easy to miss: veth_xmit() hands a frame to the peer's
//! NAPI only if the *sending* device has TSO off (or the receiver has UDP
//! GRO forwarding on); otherwise it falls back to netif_rx() and the DUT's
//! forwarding runs in softirq on the sender's CPU after all. veth has TSO on
//! by default, so the tester ports get `tso off` (frames linerate sends are
//! never TSO packets anyway).
//!
//! GRO on the DUT's veths does not merge test frames: it only coalesces TCP,
//! and UDP only when UDP GRO forwarding or fraglist GRO is on (both off by
//! default) or a local socket asked for it (the DUT has none).
//!
//! Any failure here leaves the lab usable: the placement then says the CPU
//! is shared, and why, so reports can state it.

use crate::link::link_info_detailed;
use crate::netns;
use crate::text::thousands;
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use std::collections::HashSet;
use std::time::{Duration, Instant};

/// Where the tester and the DUT run.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Placement {
    /// CPUs for linerate's tester threads.
    pub tester_cpus: Vec<usize>,
    /// CPUs the DUT's forwarding runs on.
    pub dut_cpus: Vec<usize>,
    /// True when the DUT's forwarding may run on a tester CPU: results then
    /// include the DUT's cost in the tester's and must be read as such.
    pub shared_core: bool,
    /// One sentence for reports.
    pub note: String,
    /// Frames each crossing between the tester's CPUs and the DUT's can
    /// hold: the depth of the queue that plays the NICs' receive rings.
    pub ring: u32,
}

/// Frames a veth's own receive ring holds (the kernel's VETH_RING_SIZE).
pub const VETH_RING: u32 = 256;

/// The lab's default depth of every CPU crossing: a common NIC ring size.
pub const DEFAULT_RING: u32 = 4096;

/// A threaded-NAPI kernel thread found in /proc.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NapiThread {
    pub pid: i32,
    pub comm: String,
    /// CPUs the thread may run on.
    pub cpus: Vec<usize>,
}

/// One veth link as placement sees it: the tester end sends into the DUT end.
pub(crate) struct Link<'a> {
    pub tester_ns: &'a str,
    pub tester_if: &'a str,
    pub dut_if: &'a str,
}

/// NAPI state of one DUT interface.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct NapiState {
    pub ifname: String,
    /// The tester interface sending into this one (its veth peer).
    pub sender: String,
    /// Whether TSO is off on `sender`, which veth needs to use this
    /// interface's NAPI; None when it could not be read (no ethtool).
    pub sender_tso_off: Option<bool>,
    /// The interface's `threaded` flag; None when it could not be read.
    pub threaded: Option<bool>,
    /// The interface's NAPI threads (`napi/<ifname>-<id>`). The kernel
    /// names them by interface name only and every lab's DUT uses the same
    /// names, so they are the ones the kernel lists for this interface
    /// (`napi_owner`); on a kernel before 6.9, which keeps no such list,
    /// every thread of the name, the other labs' too.
    pub threads: Vec<NapiThread>,
    /// Whether linerate's NIC queue (a deep lab's input ring) is attached;
    /// None when it could not be read.
    pub nic_queue: Option<bool>,
    /// That queue's depth in frames, as the lab was built with it (`lab up
    /// --ring N`); None without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nic_queue_depth: Option<u32>,
    /// The same for the sender (the tester's port, which receives the
    /// DUT's output).
    pub sender_rps_cpus: Option<Vec<usize>>,
}

/// Placement as found on a running lab (for `attach` and `status`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PlacementState {
    pub interfaces: Vec<NapiState>,
}

/// Sets up the placement for the DUT ends of `links` in `dut_ns`, with
/// every CPU crossing `ring` frames deep (see [`deep_queues`]); a `ring`
/// of [`VETH_RING`] or less keeps veth's own rings (the lab before deep
/// queues, for comparison). Never fails: a failure is reported as a
/// shared core in the result. Ends early once `stop` returns true (the
/// lab's build then stops and reports that instead).
pub(crate) fn apply(dut_ns: &str, links: &[Link], ring: u32, stop: &dyn Fn() -> bool) -> Placement {
    let cpus = allowed_cpus();
    let Some((testers, dut_cpu)) = split_cpus(&cpus) else {
        return one_cpu(&cpus);
    };
    let ifaces: Vec<&str> = links.iter().map(|l| l.dut_if).collect();
    if ring > VETH_RING {
        return match deep_queues(dut_ns, links, &testers, dut_cpu, ring, stop) {
            Ok(()) => deep(testers, dut_cpu, ring),
            Err(why) => shared(&cpus, &why),
        };
    }
    match threaded_napi(dut_ns, links, dut_cpu, stop) {
        Ok(()) => separate(testers, dut_cpu, &ifaces),
        Err(why) => shared(&cpus, &why),
    }
}

/// Reads the placement state of a running lab.
pub(crate) fn inspect(dut_ns: &str, links: &[Link]) -> PlacementState {
    let ifaces: Vec<&str> = links.iter().map(|l| l.dut_if).collect();
    let threads = napi_threads(&ifaces);
    let interfaces = links
        .iter()
        .map(|l| NapiState {
            ifname: l.dut_if.to_string(),
            sender: l.tester_if.to_string(),
            sender_tso_off: tso_off(l.tester_ns, l.tester_if).ok(),
            threaded: netns::read_in(dut_ns, &threaded_path(l.dut_if))
                .ok()
                .map(|v| v == "1"),
            threads: {
                // The kernel's own list of the interface's NAPI threads,
                // when it keeps one: the other labs' threads have the
                // same names.
                let owned = netns::run_in(dut_ns, || {
                    let index = netns::ifindex_here(l.dut_if)?;
                    Ok(crate::napi_owner::thread_pids(index as u32))
                })
                .ok()
                .flatten();
                threads
                    .iter()
                    .filter(|t| is_napi_thread_of(&t.comm, l.dut_if))
                    .filter(|t| owned.as_ref().is_none_or(|pids| pids.contains(&t.pid)))
                    .cloned()
                    .collect()
            },
            nic_queue: link_info_detailed(dut_ns, l.dut_if)
                .ok()
                .map(|_| has_nic_queue(dut_ns, l.dut_if)),
            nic_queue_depth: netns::run_in(dut_ns, || {
                Ok(linerate_bpf::nic_queue::depth(netns::ifindex_here(
                    l.dut_if,
                )?))
            })
            .ok()
            .flatten(),
            sender_rps_cpus: read_rps(l.tester_ns, l.tester_if).ok(),
        })
        .collect();
    PlacementState { interfaces }
}

/// Whether TSO is off on `ifname` in `ns`, per `ethtool -k`.
fn tso_off(ns: &str, ifname: &str) -> Result<bool, String> {
    let ethtool = netns::ethtool_path().ok_or(NO_ETHTOOL)?;
    let out = netns::exec_in(ns, &[&ethtool.to_string_lossy(), "-k", ifname])
        .map_err(|e| e.to_string())?;
    feature_on(&out, "tcp-segmentation-offload")
        .map(|on| !on)
        .ok_or_else(|| format!("ethtool -k {ifname} shows no tcp-segmentation-offload"))
}

/// Reads feature `name` ("name: on" / "name: off [fixed]") from `ethtool -k` output.
pub(crate) fn feature_on(ethtool_k: &str, name: &str) -> Option<bool> {
    ethtool_k.lines().find_map(|line| {
        let value = line.trim().strip_prefix(name)?.strip_prefix(':')?.trim();
        match value.split_whitespace().next()? {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        }
    })
}

/// The placement a found state amounts to, for a process allowed on `allowed`.
pub(crate) fn from_state(state: &PlacementState, allowed: &[usize]) -> Placement {
    let Some(_) = split_cpus(allowed) else {
        return one_cpu(allowed);
    };
    if state.interfaces.iter().any(|i| i.nic_queue == Some(true)) {
        // This lab's own depth (its NIC queue's), not the machine's
        // backlog setting, which the last lab built set for all of them.
        let ring = state
            .interfaces
            .iter()
            .find_map(|i| i.nic_queue_depth)
            .or_else(crate::backlog::current)
            .unwrap_or(0);
        return deep_from_state(state, allowed, ring);
    }
    let mut dut_cpu = None;
    for iface in &state.interfaces {
        if iface.sender_tso_off != Some(true) {
            return shared(
                allowed,
                &format!(
                    "TSO is not known to be off on {}, so veth may bypass {}'s NAPI",
                    iface.sender, iface.ifname
                ),
            );
        }
        if iface.threaded != Some(true) {
            return shared(
                allowed,
                &format!("threaded NAPI is off on {}", iface.ifname),
            );
        }
        if iface.threads.is_empty() {
            return shared(
                allowed,
                &format!("no NAPI thread found for {}", iface.ifname),
            );
        }
        for t in &iface.threads {
            match (t.cpus.as_slice(), dut_cpu) {
                ([cpu], None) => dut_cpu = Some(*cpu),
                ([cpu], Some(d)) if *cpu == d => {}
                _ => {
                    return shared(
                        allowed,
                        &format!("NAPI thread {} is not pinned to the DUT CPU", t.comm),
                    )
                }
            }
        }
    }
    let Some(dut_cpu) = dut_cpu else {
        return shared(allowed, "the lab has no DUT interfaces");
    };
    let testers: Vec<usize> = allowed.iter().copied().filter(|&c| c != dut_cpu).collect();
    if testers.is_empty() {
        return shared(
            allowed,
            &format!("the DUT's CPU {dut_cpu} is the only CPU left"),
        );
    }
    let names: Vec<&str> = state.interfaces.iter().map(|i| i.ifname.as_str()).collect();
    separate(testers, dut_cpu, &names)
}

/// The CPUs the lab gives the tester: all it may run on but the last (the
/// DUT's), or all of them with fewer than two.
pub fn tester_cpus() -> Vec<usize> {
    let cpus = allowed_cpus();
    split_cpus(&cpus).map_or(cpus, |(testers, _)| testers)
}

/// CPUs this process may run on (its affinity mask), ascending.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    match sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => cpus_of(&set),
        Err(_) => {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            (0..n).collect()
        }
    }
}

/// Splits CPUs into (tester CPUs, DUT CPU): the DUT takes the last one.
/// None with fewer than two CPUs.
pub(crate) fn split_cpus(cpus: &[usize]) -> Option<(Vec<usize>, usize)> {
    match cpus {
        [testers @ .., dut] if !testers.is_empty() => Some((testers.to_vec(), *dut)),
        _ => None,
    }
}

/// "CPU 0" or "CPUs 0, 2".
pub(crate) fn cpu_list(cpus: &[usize]) -> String {
    let list: Vec<String> = cpus.iter().map(|c| c.to_string()).collect();
    match cpus.len() {
        0 => "no CPU".to_string(),
        1 => format!("CPU {}", list[0]),
        _ => format!("CPUs {}", list.join(", ")),
    }
}

fn separate(testers: Vec<usize>, dut_cpu: usize, ifaces: &[&str]) -> Placement {
    Placement {
        note: format!(
            "DUT forwarding on CPU {dut_cpu} (threaded NAPI on {}); tester on {}",
            ifaces.join(", "),
            cpu_list(&testers)
        ),
        tester_cpus: testers,
        dut_cpus: vec![dut_cpu],
        shared_core: false,
        ring: VETH_RING,
    }
}

/// The placement of a lab whose crossings are `ring`-deep backlogs.
fn deep(testers: Vec<usize>, dut_cpu: usize, ring: u32) -> Placement {
    Placement {
        note: format!(
            "DUT forwarding on CPU {dut_cpu}, tester on {}; NIC rings: {} frames deep on every crossing between them, drained on the receiving CPU (into the DUT: an XDP cpumap queue; into the tester: its RPS backlog)",
            cpu_list(&testers),
            thousands(ring)
        ),
        tester_cpus: testers,
        dut_cpus: vec![dut_cpu],
        shared_core: false,
        ring,
    }
}

fn one_cpu(cpus: &[usize]) -> Placement {
    Placement {
        tester_cpus: cpus.to_vec(),
        dut_cpus: cpus.to_vec(),
        shared_core: true,
        ring: VETH_RING,
        note: format!(
            "DUT forwarding and tester share {}: only one CPU is available, so results include the DUT's forwarding cost",
            cpu_list(cpus)
        ),
    }
}

fn shared(cpus: &[usize], why: &str) -> Placement {
    Placement {
        tester_cpus: cpus.to_vec(),
        dut_cpus: cpus.to_vec(),
        shared_core: true,
        ring: VETH_RING,
        note: format!("DUT forwarding runs on the tester's CPUs because {why}"),
    }
}

fn threaded_path(ifname: &str) -> String {
    format!("/sys/class/net/{ifname}/threaded")
}

const NO_ETHTOOL: &str = "ethtool is not installed (install it with 'apt-get install ethtool')";

/// Err once the lab's build was asked to stop: asked between the steps
/// of a placement, which is about half of a build.
fn go_on(stop: &dyn Fn() -> bool) -> Result<(), String> {
    if stop() {
        Err("the lab's build was stopped".to_string())
    } else {
        Ok(())
    }
}

/// Turns TSO off on the senders, enables threaded NAPI on the DUT ends of
/// `links` and pins the new NAPI threads to `dut_cpu`, then checks that all
/// of it took effect. Err is a reason for a note.
fn threaded_napi(
    dut_ns: &str,
    links: &[Link],
    dut_cpu: usize,
    stop: &dyn Fn() -> bool,
) -> Result<(), String> {
    let ethtool = netns::ethtool_path().ok_or(NO_ETHTOOL)?;
    let ethtool = ethtool.to_string_lossy();
    let ifaces: Vec<&str> = links.iter().map(|l| l.dut_if).collect();
    let ifaces = ifaces.as_slice();
    for l in links {
        go_on(stop)?;
        // GRO off is veth's default; stated so received frames surely reach
        // linerate one by one.
        netns::exec_in(
            l.tester_ns,
            &[&ethtool, "-K", l.tester_if, "tso", "off", "gro", "off"],
        )
        .map_err(|e| format!("TSO could not be turned off on {}: {e}", l.tester_if))?;
    }
    // Threads that exist already belong to other labs (or to labs being torn
    // down); only the ones appearing now are this lab's.
    let before: HashSet<i32> = napi_threads(ifaces).iter().map(|t| t.pid).collect();
    for ifname in ifaces {
        netns::exec_in(dut_ns, &[&ethtool, "-K", ifname, "gro", "on"])
            .map_err(|e| format!("GRO (needed for veth NAPI) could not be enabled: {e}"))?;
    }
    let paths: Vec<String> = ifaces.iter().map(|i| threaded_path(i)).collect();
    let writes: Vec<(&str, &str)> = paths.iter().map(|p| (p.as_str(), "1")).collect();
    netns::write_in(dut_ns, &writes)
        .map_err(|e| format!("threaded NAPI could not be enabled: {e}"))?;

    let mine = new_napi_threads(ifaces, &before);
    for ifname in ifaces {
        if !mine.iter().any(|t| is_napi_thread_of(&t.comm, ifname)) {
            return Err(format!("no NAPI thread appeared for {ifname}"));
        }
    }

    let mut set = CpuSet::new();
    set.set(dut_cpu)
        .map_err(|e| format!("CPU {dut_cpu} cannot be used: {e}"))?;
    for t in &mine {
        sched_setaffinity(Pid::from_raw(t.pid), &set).map_err(|e| {
            format!(
                "{} (pid {}) could not be pinned to CPU {dut_cpu}: {e}",
                t.comm, t.pid
            )
        })?;
        // Best effort: without it the DUT still forwards, only less steadily.
        let _ = set_fifo(t.pid, DUT_NAPI_PRIORITY);
    }

    // Verify: TSO off on the senders, flags read back 1, and the threads
    // stay on the DUT CPU.
    go_on(stop)?;
    for l in links {
        if !tso_off(l.tester_ns, l.tester_if)? {
            return Err(format!("TSO is still on at {}", l.tester_if));
        }
    }
    for (ifname, path) in ifaces.iter().zip(&paths) {
        let value = netns::read_in(dut_ns, path).map_err(|e| e.to_string())?;
        if value != "1" {
            return Err(format!(
                "{ifname}'s threaded flag reads {value:?} after writing 1"
            ));
        }
    }
    for t in &mine {
        let cpus = sched_getaffinity(Pid::from_raw(t.pid))
            .map(|s| cpus_of(&s))
            .map_err(|e| format!("{} (pid {}) vanished: {e}", t.comm, t.pid))?;
        if cpus != [dut_cpu] {
            return Err(format!(
                "{} runs on {} after pinning",
                t.comm,
                cpu_list(&cpus)
            ));
        }
    }
    Ok(())
}

/// Gives every CPU crossing between tester and DUT a queue `ring` frames
/// deep, filled whatever the consumer's CPU is doing and drained on the
/// consumer's CPU, as a NIC's receive ring is filled by DMA:
///
/// - tester → DUT: the DUT's veth end gets linerate-bpf's NIC queue (an
///   XDP program moving every frame into a cpumap queue of `ring` frames
///   drained by a kernel thread on the DUT CPU, `bpf/nic_queue.bpf.c`).
///   The veth end's NAPI, where the program runs, is threaded and pinned to
///   the tester's CPUs, so veth's own 256-frame ring is filled and drained
///   on one CPU. The frames stay XDP frames until the DUT's CPU builds
///   their socket buffers, as a router's driver does;
/// - DUT → tester: the tester's port has no NAPI (GRO off, and receivers
///   attach their XDP programs in generic mode), and its receive steering
///   (RPS) hands the DUT's output to the backlog of the tester's CPU, whose
///   depth is `net.core.netdev_max_backlog` (`backlog.rs`).
///
/// Drops are counted by the NIC queue (frames queued minus delivered) and
/// by the tester port's `rx_dropped` (a full backlog). Err is a reason for
/// a note.
fn deep_queues(
    dut_ns: &str,
    links: &[Link],
    testers: &[usize],
    dut_cpu: usize,
    ring: u32,
    stop: &dyn Fn() -> bool,
) -> Result<(), String> {
    let ethtool = netns::ethtool_path().ok_or(NO_ETHTOOL)?;
    let ethtool = ethtool.to_string_lossy();
    let ifaces: Vec<&str> = links.iter().map(|l| l.dut_if).collect();
    crate::backlog::set(ring)?;
    for l in links {
        go_on(stop)?;
        // TSO off so veth hands frames to the peer's NAPI (see the module
        // doc); GRO off so the tester's port has no NAPI of its own;
        // checksum offload off, since the NIC queue's XDP redirect drops a
        // socket buffer's note that its checksum is still to be completed
        // (kernel TCP of the tcp/http commands; linerate's own test frames
        // always carry full checksums).
        netns::exec_in(
            l.tester_ns,
            &[
                &ethtool,
                "-K",
                l.tester_if,
                "tso",
                "off",
                "gro",
                "off",
                "tx",
                "off",
            ],
        )
        .map_err(|e| format!("TSO could not be turned off on {}: {e}", l.tester_if))?;
        write_rps(l.tester_ns, l.tester_if, testers)?;
    }
    let napi_before: HashSet<i32> = napi_threads(&ifaces).iter().map(|t| t.pid).collect();
    let queue_prefix = format!("cpumap/{dut_cpu}/");
    let queues_before: HashSet<i32> = kernel_threads(&queue_prefix)
        .iter()
        .map(|t| t.pid)
        .collect();
    for ifname in &ifaces {
        go_on(stop)?;
        netns::run_in(dut_ns, || {
            let index = netns::ifindex_here(ifname)?;
            linerate_bpf::nic_queue::install(index, ifname, dut_cpu as u32, ring)
                .map_err(|e| format!("the NIC queue could not be attached to {ifname}: {e}"))
        })?;
        netns::write_in(dut_ns, &[(&threaded_path(ifname), "1")])
            .map_err(|e| format!("threaded NAPI could not be enabled on {ifname}: {e}"))?;
    }
    let mine = new_napi_threads(&ifaces, &napi_before);
    let mut set = CpuSet::new();
    for &c in testers {
        set.set(c)
            .map_err(|e| format!("CPU {c} cannot be used: {e}"))?;
    }
    for ifname in &ifaces {
        if !mine.iter().any(|t| is_napi_thread_of(&t.comm, ifname)) {
            return Err(format!("no NAPI thread appeared for {ifname}"));
        }
    }
    for t in &mine {
        sched_setaffinity(Pid::from_raw(t.pid), &set)
            .map_err(|e| format!("{} could not be pinned: {e}", t.comm))?;
        // Above the generator, which shares the CPU: the ring it fills is
        // drained as soon as it has frames.
        let _ = set_fifo(t.pid, TESTER_NAPI_PRIORITY);
    }
    // The queues' threads (bound to the DUT CPU by the kernel) forward:
    // they get the priority the DUT's forwarding has (see DUT_NAPI_PRIORITY).
    for t in kernel_threads(&queue_prefix) {
        if !queues_before.contains(&t.pid) {
            let _ = set_fifo(t.pid, DUT_NAPI_PRIORITY);
        }
    }
    // Read back what the kernel took.
    go_on(stop)?;
    for l in links {
        if read_rps(l.tester_ns, l.tester_if)? != testers {
            return Err(format!("{}'s RPS does not read back", l.tester_if));
        }
        if !tso_off(l.tester_ns, l.tester_if)? {
            return Err(format!("TSO is still on at {}", l.tester_if));
        }
    }
    for ifname in &ifaces {
        if !has_nic_queue(dut_ns, ifname) {
            return Err(format!("{ifname} shows no NIC queue program"));
        }
    }
    Ok(())
}

/// Whether `ifname` in `ns` has the NIC queue's program attached.
fn has_nic_queue(ns: &str, ifname: &str) -> bool {
    link_info_detailed(ns, ifname)
        .ok()
        .and_then(|info| {
            info.pointer("/xdp/prog/name")
                .and_then(|n| n.as_str())
                .map(|n| n == "lr_nic_rx")
        })
        .unwrap_or(false)
}

/// Kernel threads whose name starts with `prefix`.
fn kernel_threads(prefix: &str) -> Vec<NapiThread> {
    threads_where(|comm| comm.starts_with(prefix))
}

/// The placement a found deep lab amounts to (see [`deep_queues`]).
fn deep_from_state(state: &PlacementState, allowed: &[usize], ring: u32) -> Placement {
    let mut testers: Option<Vec<usize>> = None;
    for iface in &state.interfaces {
        if iface.nic_queue != Some(true) {
            return shared(allowed, &format!("{} has no NIC queue", iface.ifname));
        }
        match (iface.sender_rps_cpus.as_ref(), testers.as_ref()) {
            (Some(c), None) if !c.is_empty() => testers = Some(c.clone()),
            (Some(c), Some(t)) if c == t => {}
            _ => {
                return shared(
                    allowed,
                    &format!("{} does not steer to the tester's CPUs", iface.sender),
                )
            }
        }
    }
    let Some((_, dut_cpu)) = split_cpus(allowed) else {
        return one_cpu(allowed);
    };
    match testers {
        Some(t) if !t.contains(&dut_cpu) => deep(t, dut_cpu, ring),
        _ => shared(allowed, "the lab's receive steering overlaps the DUT's CPU"),
    }
}

fn rps_path(ifname: &str) -> String {
    format!("/sys/class/net/{ifname}/queues/rx-0/rps_cpus")
}

/// The CPUs `ifname`'s first receive queue steers to (empty: RPS off).
fn read_rps(ns: &str, ifname: &str) -> Result<Vec<usize>, String> {
    let text = netns::read_in(ns, &rps_path(ifname)).map_err(|e| e.to_string())?;
    parse_cpu_mask(&text).ok_or_else(|| format!("{} reads {text:?}", rps_path(ifname)))
}

/// Steers `ifname`'s receive to `cpus` (RPS).
fn write_rps(ns: &str, ifname: &str, cpus: &[usize]) -> Result<(), String> {
    netns::write_in(ns, &[(&rps_path(ifname), &format_cpu_mask(cpus))])
        .map_err(|e| format!("RPS could not be set on {ifname}: {e}"))
}

/// A sysfs CPU mask ("3", "00000000,00000004") as CPU numbers, ascending.
pub(crate) fn parse_cpu_mask(text: &str) -> Option<Vec<usize>> {
    let hex: String = text.trim().chars().filter(|&c| c != ',').collect();
    let mut cpus = Vec::new();
    for (i, c) in hex.chars().rev().enumerate() {
        let nibble = c.to_digit(16)?;
        for bit in 0..4 {
            if nibble & (1 << bit) != 0 {
                cpus.push(i * 4 + bit);
            }
        }
    }
    Some(cpus)
}

/// CPU numbers as a sysfs CPU mask, 32-bit groups joined by commas.
pub(crate) fn format_cpu_mask(cpus: &[usize]) -> String {
    let words = cpus.iter().max().map_or(1, |m| m / 32 + 1);
    let mut mask = vec![0u32; words];
    for &c in cpus {
        mask[c / 32] |= 1 << (c % 32);
    }
    mask.iter()
        .rev()
        .map(|w| format!("{w:08x}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Real-time priority of the tester ports' receive NAPI threads: above the
/// DUT's (they run on other CPUs anyway) and above the generator, which
/// shares their CPU and yields to them for the few microseconds a batch of
/// frames takes to count.
pub const TESTER_NAPI_PRIORITY: i32 = 60;

/// Moves the receive processing of lab tester port `ifname` (in namespace
/// `ns`) onto the tester's CPUs. A veth's receive runs in the NAPI of the
/// *receiving* device, scheduled on the CPU that sent into it: for port B
/// that is the DUT's CPU, whose forwarding then also pays for linerate's
/// counting (about 150 ns a frame with the in-kernel counter). Made
/// threaded, pinned to `cpus` and given [`TESTER_NAPI_PRIORITY`], the
/// counting runs on the tester's side as it would on a hardware tester's
/// port. Call it after the port's receiver has attached (a veth has NAPI
/// only while an XDP program or GRO is on); a port without NAPI is left
/// as it is. Err is a reason for a note.
pub fn tester_receive(ns: &str, ifname: &str, cpus: &[usize]) -> Result<bool, String> {
    if cpus.is_empty() {
        return Ok(false);
    }
    let path = threaded_path(ifname);
    if netns::read_in(ns, &path).is_ok_and(|v| v == "1") {
        // Already threaded: its threads exist, find them below.
    } else if netns::write_in(ns, &[(&path, "1")]).is_err() {
        // No NAPI on this port (a socket receiver): nothing runs there.
        return Ok(false);
    }
    // Every lab names its ports alike: this port's threads are the ones
    // whose kernel thread runs for a device in `ns`. The kernel does not
    // say which namespace a NAPI thread serves, so take the threads of the
    // name that are not yet pinned to `cpus` or to another single CPU (the
    // DUT's or another lab's).
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c)
            .map_err(|e| format!("CPU {c} cannot be used: {e}"))?;
    }
    let all = allowed_cpus();
    let mine: Vec<NapiThread> = napi_threads(&[ifname])
        .into_iter()
        .filter(|t| t.cpus == all || t.cpus == cpus)
        .collect();
    if mine.is_empty() {
        return Ok(false);
    }
    for t in &mine {
        sched_setaffinity(Pid::from_raw(t.pid), &set)
            .map_err(|e| format!("{} could not be pinned: {e}", t.comm))?;
        let _ = set_fifo(t.pid, TESTER_NAPI_PRIORITY);
    }
    Ok(true)
}

/// The threaded-NAPI threads of a tester port the user named (not a lab's),
/// raised to [`TESTER_NAPI_PRIORITY`] for a run as a lab's tester ports
/// are: a generator thread sharing their CPU (`--tx-threads` as many as
/// the CPUs) would otherwise take the CPU from the port's receive, and the
/// frames its ring then refuses would be the tester's own loss. Dropping
/// it puts them back to normal scheduling.
#[derive(Debug)]
pub struct RaisedReceive {
    threads: Vec<NapiThread>,
}

impl RaisedReceive {
    /// The threads raised (`napi/<port>-<id>`).
    pub fn threads(&self) -> &[NapiThread] {
        &self.threads
    }
}

impl Drop for RaisedReceive {
    fn drop(&mut self) {
        for t in &self.threads {
            let param = libc::sched_param { sched_priority: 0 };
            // SAFETY: sched_setscheduler reads `param`, which lives across
            // the call; a thread that has gone (its device removed) fails.
            let _ = unsafe { libc::sched_setscheduler(t.pid, libc::SCHED_OTHER, &param) };
        }
    }
}

/// Raises port `ifname`'s receive threads (see [`RaisedReceive`]) when its
/// NAPI is threaded (`/sys/class/net/IF/threaded` is 1, read in the calling
/// thread's namespace); a port whose NAPI runs in softirq needs nothing
/// (softirq already preempts threads). Threads a user gave a policy of
/// their own (real-time) are left as they are. None: nothing was raised.
pub fn raise_receive(ifname: &str) -> Option<RaisedReceive> {
    let threaded = std::fs::read_to_string(threaded_path(ifname)).ok()?;
    if threaded.trim() != "1" {
        return None;
    }
    let threads: Vec<NapiThread> = napi_threads(&[ifname])
        .into_iter()
        // SAFETY: sched_getscheduler only reads the thread's policy.
        .filter(|t| unsafe { libc::sched_getscheduler(t.pid) } == libc::SCHED_OTHER)
        .filter(|t| set_fifo(t.pid, TESTER_NAPI_PRIORITY).is_ok())
        .collect();
    (!threads.is_empty()).then_some(RaisedReceive { threads })
}

/// Real-time priority of the DUT's NAPI threads (SCHED_FIFO).
///
/// A router's forwarding core does nothing else; a NAPI thread of normal
/// priority is time-sliced against whatever else the machine runs on its
/// CPU, and each slice it loses (a scheduler tick, 4 ms at HZ=250) fills the
/// veth's 256-frame receive ring many times over at a few 100k frames/s.
/// Measured on the 2-core development VM (`linerate trial --lab --frame-size
/// 64 --rate 300000fps --duration 10s`, three runs each, docs/METHODS.md):
/// 6,757 / 7,878 / 10,315 frames lost at the DUT's input with normal
/// priority, 2,000 / 82 / 1,116 with SCHED_FIFO. The kernel's real-time
/// throttling (`kernel.sched_rt_runtime_us`, 95 % by default, or the fair
/// server on recent kernels) still leaves other tasks on that CPU their
/// share, so a DUT under overload cannot lock the machine up.
pub const DUT_NAPI_PRIORITY: i32 = 50;

/// Puts thread `pid` in SCHED_FIFO at `priority`.
pub fn set_fifo(pid: i32, priority: i32) -> std::io::Result<()> {
    let param = libc::sched_param {
        sched_priority: priority,
    };
    // SAFETY: sched_setscheduler reads `param`, which lives across the call.
    if unsafe { libc::sched_setscheduler(pid, libc::SCHED_FIFO, &param) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Whether a thread name is a NAPI thread of interface `ifname`
/// (`napi/<ifname>-<napi id>`).
pub(crate) fn is_napi_thread_of(comm: &str, ifname: &str) -> bool {
    comm.strip_prefix("napi/")
        .and_then(|rest| rest.strip_prefix(ifname))
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

/// The NAPI threads of `ifaces` not in `before` (this lab's, just made by
/// turning threaded NAPI on). The write creates the threads before it
/// returns; the wait of up to 2 s only covers a slow /proc.
fn new_napi_threads(ifaces: &[&str], before: &HashSet<i32>) -> Vec<NapiThread> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let mine: Vec<NapiThread> = napi_threads(ifaces)
            .into_iter()
            .filter(|t| !before.contains(&t.pid))
            .collect();
        let all_found = ifaces
            .iter()
            .all(|i| mine.iter().any(|t| is_napi_thread_of(&t.comm, i)));
        if all_found || Instant::now() > deadline {
            return mine;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// NAPI threads of any of `ifaces` (by name, in all namespaces), by pid.
fn napi_threads(ifaces: &[&str]) -> Vec<NapiThread> {
    threads_where(|comm| ifaces.iter().any(|i| is_napi_thread_of(comm, i)))
}

/// Processes (kernel threads among them) whose name passes `wanted`, by pid.
fn threads_where(wanted: impl Fn(&str) -> bool) -> Vec<NapiThread> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut threads: Vec<NapiThread> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            let comm = comm.trim_end().to_string();
            if !wanted(&comm) {
                return None;
            }
            let cpus = sched_getaffinity(Pid::from_raw(pid)).ok()?;
            Some(NapiThread {
                pid,
                comm,
                cpus: cpus_of(&cpus),
            })
        })
        .collect();
    threads.sort_by_key(|t| t.pid);
    threads
}

fn cpus_of(set: &CpuSet) -> Vec<usize> {
    (0..CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_gives_dut_the_last_cpu() {
        assert_eq!(split_cpus(&[0, 1]), Some((vec![0], 1)));
        assert_eq!(split_cpus(&[0, 2, 3]), Some((vec![0, 2], 3)));
        assert_eq!(split_cpus(&[0]), None);
        assert_eq!(split_cpus(&[]), None);
    }

    #[test]
    fn cpu_lists_read_well() {
        assert_eq!(cpu_list(&[0]), "CPU 0");
        assert_eq!(cpu_list(&[0, 2]), "CPUs 0, 2");
    }

    #[test]
    fn napi_thread_names() {
        assert!(is_napi_thread_of("napi/dut-a-258", "dut-a"));
        assert!(!is_napi_thread_of("napi/dut-a-258", "dut-b"));
        assert!(!is_napi_thread_of("napi/dut-ab-258", "dut-a"));
        assert!(!is_napi_thread_of("napi/dut-a-", "dut-a"));
        assert!(!is_napi_thread_of("kworker/dut-a-1", "dut-a"));
    }

    fn state(threaded: bool, cpus: &[&[usize]]) -> PlacementState {
        PlacementState {
            interfaces: ["dut-a", "dut-b"]
                .iter()
                .enumerate()
                .map(|(i, name)| NapiState {
                    ifname: name.to_string(),
                    sender: ["a0", "b0"][i].to_string(),
                    sender_tso_off: Some(true),
                    threaded: Some(threaded),
                    threads: vec![NapiThread {
                        pid: 100 + i as i32,
                        comm: format!("napi/{name}-{}", 258 + i),
                        cpus: cpus[i].to_vec(),
                    }],
                    nic_queue: Some(false),
                    nic_queue_depth: None,
                    sender_rps_cpus: Some(vec![]),
                })
                .collect(),
        }
    }

    #[test]
    fn found_state_pinned_is_separate() {
        let p = from_state(&state(true, &[&[1], &[1]]), &[0, 1]);
        assert!(!p.shared_core);
        assert_eq!(p.tester_cpus, vec![0]);
        assert_eq!(p.dut_cpus, vec![1]);
        assert_eq!(
            p.note,
            "DUT forwarding on CPU 1 (threaded NAPI on dut-a, dut-b); tester on CPU 0"
        );
    }

    #[test]
    fn found_state_not_threaded_or_unpinned_is_shared() {
        let p = from_state(&state(false, &[&[1], &[1]]), &[0, 1]);
        assert!(p.shared_core);
        assert!(
            p.note.contains("threaded NAPI is off on dut-a"),
            "{}",
            p.note
        );
        let p = from_state(&state(true, &[&[1], &[0, 1]]), &[0, 1]);
        assert!(p.shared_core);
        assert!(p.note.contains("napi/dut-b-259"), "{}", p.note);
        let p = from_state(&state(true, &[&[1], &[1]]), &[1]);
        assert!(p.shared_core);
        assert!(p.note.contains("only one CPU"), "{}", p.note);
    }

    #[test]
    fn found_state_with_tso_on_is_shared() {
        let mut st = state(true, &[&[1], &[1]]);
        st.interfaces[1].sender_tso_off = Some(false);
        let p = from_state(&st, &[0, 1]);
        assert!(p.shared_core);
        assert!(
            p.note.contains("TSO is not known to be off on b0"),
            "{}",
            p.note
        );
    }

    #[test]
    fn ethtool_features_parse() {
        let out = "Features for a0:\nrx-checksumming: on\ntcp-segmentation-offload: off\n\
                   \ttx-tcp-segmentation: off\ngeneric-receive-offload: on [fixed]\n";
        assert_eq!(feature_on(out, "tcp-segmentation-offload"), Some(false));
        assert_eq!(feature_on(out, "tx-tcp-segmentation"), Some(false));
        assert_eq!(feature_on(out, "generic-receive-offload"), Some(true));
        assert_eq!(feature_on(out, "rx-gro-list"), None);
    }

    #[test]
    fn cpu_masks_round_trip() {
        assert_eq!(parse_cpu_mask("3\n"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_mask("00000000,00000004"), Some(vec![2]));
        assert_eq!(parse_cpu_mask("0"), Some(vec![]));
        assert_eq!(parse_cpu_mask("xyz"), None);
        assert_eq!(format_cpu_mask(&[1]), "00000002");
        assert_eq!(format_cpu_mask(&[0, 33]), "00000002,00000001");
        for cpus in [vec![0], vec![1, 5], vec![3, 40, 70]] {
            assert_eq!(parse_cpu_mask(&format_cpu_mask(&cpus)), Some(cpus));
        }
    }

    #[test]
    fn deep_state_is_read_back() {
        let mut st = state(true, &[&[0], &[0]]);
        for i in &mut st.interfaces {
            i.nic_queue = Some(true);
            i.sender_rps_cpus = Some(vec![0]);
        }
        let p = from_state(&st, &[0, 1]);
        assert!(!p.shared_core, "{}", p.note);
        assert_eq!(
            (p.tester_cpus.clone(), p.dut_cpus.clone()),
            (vec![0], vec![1])
        );
        st.interfaces[1].sender_rps_cpus = Some(vec![1]);
        assert!(from_state(&st, &[0, 1]).shared_core);
    }

    #[test]
    fn own_affinity_is_not_empty() {
        assert!(!allowed_cpus().is_empty());
    }
}
