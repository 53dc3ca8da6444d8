//! The lab topology: building, opening and removing a lab.

use crate::link::{format_mac, link_info, read_mac};
use crate::names::{
    all_netns_names, boringtun_socket, dut_netns, netns_names, tester_netns, tester_netns_names,
    validate_name, wire_netns, wireguard_ifnames, DUT_SUFFIX,
};
use crate::placement::{self, Placement};
use crate::sides::{Side, MTU, SIDES};
use crate::stop::StopCheck;
use crate::{netns, LabError, PREFIX};
use std::net::Ipv4Addr;
use std::sync::Mutex;

/// The lab's veth links as placement sees them; `names` from [`tester_netns_names`].
pub(crate) fn links(names: &[String; 2]) -> [placement::Link<'_>; 2] {
    [0, 1].map(|i| placement::Link {
        tester_ns: &names[i],
        tester_if: SIDES[i].tester_if,
        dut_if: SIDES[i].dut_if,
    })
}

/// One tester port of the lab: the interface lives in its own namespace.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LabPort {
    pub netns: String,
    pub ifname: String,
    /// The tester host's address. It is not configured in the kernel:
    /// linerate emulates the host in user space (and answers ARP for it).
    pub ip: Ipv4Addr,
    pub prefix_len: u8,
    /// The DUT's address on this port's subnet.
    pub gateway: Ipv4Addr,
    /// The MAC of the tester interface; the DUT has a permanent neighbour
    /// entry for `ip` with this MAC.
    pub mac: [u8; 6],
}

impl LabPort {
    fn read(lab: &str, side: &Side) -> Result<LabPort, LabError> {
        let ns = tester_netns(lab, side);
        Ok(LabPort {
            mac: read_mac(&ns, side.tester_if)?,
            netns: ns,
            ifname: side.tester_if.to_string(),
            ip: side.tester_ip,
            prefix_len: side.prefix_len,
            gateway: side.dut_ip,
        })
    }
}

/// A lab: two tester namespaces and a routing DUT namespace between them.
///
/// A lab made by [`Lab::up`] is removed when dropped unless [`Lab::keep`]
/// is called; one opened by [`Lab::attach`] is left in place.
#[derive(Debug)]
pub struct Lab {
    name: String,
    port_a: LabPort,
    port_b: LabPort,
    dut_netns: String,
    placement: Placement,
    /// Remove the lab on drop.
    owned: bool,
    /// This run's exclusive use of the lab (see `lock.rs`).
    _lock: Option<crate::lock::LabLock>,
}

/// Serialises lab creation within this process: namespace mounts are set up
/// on first use by `ip`, and placement tells this lab's NAPI threads from
/// others' by which ones appear while it sets up.
static CREATE: Mutex<()> = Mutex::new(());

/// Namespaces created so far by a `Lab::up` in progress; removes them when
/// dropped armed (on error or panic), so a half-made lab never stays behind.
struct Rollback {
    made: Vec<String>,
    armed: bool,
}

impl Drop for Rollback {
    fn drop(&mut self) {
        if self.armed {
            for ns in self.made.iter().rev() {
                let _ = netns::delete(ns);
            }
            // The placement of a deep lab may have raised it already.
            restore_backlog_unless_labs_left();
        }
    }
}

impl Lab {
    /// Creates lab `name` (namespaces `lr-<name>-a`, `lr-<name>-b`,
    /// `lr-<name>-dut`). Fails if it exists. If creation fails half-way,
    /// removes what it made before returning the error.
    pub fn up(name: &str) -> Result<Lab, LabError> {
        Lab::up_with_ring(name, crate::DEFAULT_RING)
    }

    /// [`Lab::up`] with every CPU crossing between tester and DUT `ring`
    /// frames deep (the queue that plays the NICs' receive rings);
    /// [`crate::VETH_RING`] or less keeps veth's own 256-frame rings.
    pub fn up_with_ring(name: &str, ring: u32) -> Result<Lab, LabError> {
        Lab::up_until(name, ring, &|| false)
    }

    /// [`Lab::up_with_ring`] that stops building once `stop` returns true
    /// (it is asked between the build's steps: each namespace, each link,
    /// the CPU placement): it then removes what it made and returns
    /// [`LabError::Interrupted`].
    pub fn up_until(name: &str, ring: u32, stop: &dyn Fn() -> bool) -> Result<Lab, LabError> {
        validate_name(name)?;
        crate::check_environment()?;
        let _serial = CREATE.lock().unwrap_or_else(|e| e.into_inner());
        if Lab::exists(name) {
            return Err(LabError::Exists(name.to_string()));
        }
        let mut rollback = Rollback {
            made: Vec::new(),
            armed: true,
        };
        let stop = StopCheck {
            lab: name,
            requested: stop,
        };
        let lab = build(name, ring, &mut rollback, &stop).map_err(|e| stop.or_interrupted(e))?;
        rollback.armed = false;
        Ok(lab)
    }

    /// Opens an existing lab made by an earlier `up` (e.g. `linerate lab
    /// up`); dropping it leaves the lab in place.
    pub fn attach(name: &str) -> Result<Lab, LabError> {
        validate_name(name)?;
        crate::check_environment()?;
        let lock = crate::lock::lock(name)?;
        for ns in netns_names(name) {
            if !netns::exists(&ns) {
                // No lab: no lock file of it stays either.
                lock.discard();
                return Err(LabError::NotFound {
                    name: name.to_string(),
                    missing: ns,
                });
            }
        }
        let broken = |e: LabError| LabError::Broken {
            name: name.to_string(),
            detail: e.to_string(),
        };
        let port_a = LabPort::read(name, &SIDES[0]).map_err(broken)?;
        let port_b = LabPort::read(name, &SIDES[1]).map_err(broken)?;
        let dut_ns = dut_netns(name);
        for side in &SIDES {
            link_info(&dut_ns, side.dut_if).map_err(broken)?;
        }
        let testers = tester_netns_names(name);
        let state = placement::inspect(&dut_ns, &links(&testers));
        Ok(Lab {
            name: name.to_string(),
            port_a,
            port_b,
            placement: placement::from_state(&state, &placement::allowed_cpus()),
            dut_netns: dut_ns,
            owned: false,
            _lock: Some(lock),
        })
    }

    /// Whether any namespace of lab `name` exists.
    pub fn exists(name: &str) -> bool {
        all_netns_names(name).iter().any(|ns| netns::exists(ns))
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn port_a(&self) -> &LabPort {
        &self.port_a
    }

    pub fn port_b(&self) -> &LabPort {
        &self.port_b
    }

    pub fn dut_netns(&self) -> &str {
        &self.dut_netns
    }

    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// Marks a lab made by `up` as kept (not removed on drop) — for
    /// `linerate lab up`.
    pub fn keep(mut self) {
        self.owned = false;
    }

    /// Removes this lab's namespaces (idempotent; a namespace already gone
    /// is fine). Works on attached labs too.
    pub fn down(&mut self) -> Result<(), LabError> {
        self.owned = false;
        self._lock = None;
        // The lock just released can stay taken for a moment: a child this
        // process forked shares the lock's open file until it execs. Only
        // our own lab's lock is waited for, briefly.
        for _ in 0..20 {
            match down_lab(&self.name) {
                Err(LabError::InUse { .. }) => {
                    std::thread::sleep(std::time::Duration::from_millis(25))
                }
                other => return other.map(|_| ()),
            }
        }
        down_lab(&self.name).map(|_| ())
    }

    /// Runs a command inside the DUT namespace (e.g. nft rules in tests);
    /// returns its stdout. The error names the command and its stderr.
    pub fn dut_exec(&self, argv: &[&str]) -> Result<String, LabError> {
        netns::exec_in(&self.dut_netns, argv)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // Drop must never panic (it may run during unwinding, where a second
        // panic aborts): contain one, and only warn on failure.
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.down()));
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!(
                "warning: lab '{0}' was not removed ({e}); remove it with 'linerate lab down --lab-name {0}'",
                self.name
            ),
            Err(_) => eprintln!(
                "warning: removing lab '{0}' panicked; remove it with 'linerate lab down --lab-name {0}'",
                self.name
            ),
        }
    }
}

/// Sysctls for every lab namespace: IPv6 off so no neighbour discovery or
/// router solicitation adds frames to the counts. `default` covers the
/// interfaces created afterwards, `all` the loopback already there.
fn base_sysctls() -> Vec<(&'static str, &'static str)> {
    // A kernel booted with ipv6.disable=1 has no IPv6 sysctls (and no IPv6).
    if !std::path::Path::new("/proc/sys/net/ipv6").exists() {
        return Vec::new();
    }
    vec![
        ("/proc/sys/net/ipv6/conf/all/disable_ipv6", "1"),
        ("/proc/sys/net/ipv6/conf/default/disable_ipv6", "1"),
    ]
}

/// Builds lab `name` step by step, asking `stop` before each step;
/// `rollback` learns each namespace as it is made.
fn build(
    name: &str,
    ring: u32,
    rollback: &mut Rollback,
    stop: &StopCheck,
) -> Result<Lab, LabError> {
    let dut_ns = dut_netns(name);
    for ns in netns_names(name) {
        stop.go_on()?;
        add_netns(&ns, ns == dut_ns, rollback)?;
    }
    let mut ports = Vec::new();
    for side in &SIDES {
        stop.go_on()?;
        ports.push(link_side(name, side, stop)?);
    }
    stop.go_on()?;
    // Placement also sets the tester ports' offloads (TSO and GRO off).
    // It asks the stop between its own steps, and ends early on it.
    let testers = tester_netns_names(name);
    let placement = placement::apply(&dut_ns, &links(&testers), ring, stop.requested);
    stop.go_on()?;
    let port_b = ports.pop().expect("two sides");
    let port_a = ports.pop().expect("two sides");
    Ok(Lab {
        name: name.to_string(),
        port_a,
        port_b,
        dut_netns: dut_ns,
        placement,
        owned: true,
        // Made by this run under a name of its own, or kept for later
        // runs, which lock it when they attach.
        _lock: None,
    })
}

/// Makes namespace `ns` (the DUT's when `dut`) with its sysctls and
/// loopback up; `rollback` learns it as soon as it exists.
fn add_netns(ns: &str, dut: bool, rollback: &mut Rollback) -> Result<(), LabError> {
    let added = netns::add(ns);
    // An `ip netns add` killed half-way (a terminal's Ctrl-C reaches
    // the whole process group) may have made the namespace though it
    // failed: none of these names was there (Lab::exists), so one there
    // now is this run's, unless `ip` refused it as made meanwhile.
    let refused = match &added {
        Err(LabError::Command { stderr, .. }) => stderr.contains("File exists"),
        _ => false,
    };
    if added.is_ok() || (netns::exists(ns) && !refused) {
        rollback.made.push(ns.to_string());
    }
    added?;
    let mut sysctls = base_sysctls();
    if dut {
        // The DUT routes between its two subnets. rp_filter off: the
        // lab's test traffic may use source addresses the DUT has no
        // route back for (e.g. several emulated hosts); the effective
        // value is the max of `all` and the interface's, so set all.
        sysctls.extend([
            ("/proc/sys/net/ipv4/ip_forward", "1"),
            ("/proc/sys/net/ipv4/conf/all/rp_filter", "0"),
            ("/proc/sys/net/ipv4/conf/default/rp_filter", "0"),
        ]);
    }
    if !sysctls.is_empty() {
        netns::write_in(ns, &sysctls)?;
    }
    netns::ip(&["-n", ns, "link", "set", "lo", "up"])?;
    Ok(())
}

/// Links `side`'s tester namespace to the DUT of lab `name`: the veth,
/// the DUT's address and its neighbour entry for the tester host. Asks
/// `stop` halfway (about seven commands in all).
fn link_side(name: &str, side: &Side, stop: &StopCheck) -> Result<LabPort, LabError> {
    let tester_ns = tester_netns(name, side);
    let dut_ns = dut_netns(name);
    let mtu = MTU.to_string();
    // Created directly inside the namespaces: the root namespace never
    // sees these names, so labs cannot clash with each other or the host.
    netns::ip(&[
        "link",
        "add",
        side.tester_if,
        "netns",
        &tester_ns,
        "mtu",
        &mtu,
        "type",
        "veth",
        "peer",
        "name",
        side.dut_if,
        "netns",
        &dut_ns,
        "mtu",
        &mtu,
    ])?;
    // No address on the tester side: linerate is the host there.
    netns::ip(&["-n", &tester_ns, "link", "set", side.tester_if, "up"])?;
    let dut_addr = format!("{}/{}", side.dut_ip, side.prefix_len);
    netns::ip(&["-n", &dut_ns, "addr", "add", &dut_addr, "dev", side.dut_if])?;
    stop.go_on()?;
    netns::write_in(
        &dut_ns,
        &[(
            &format!("/proc/sys/net/ipv4/conf/{}/rp_filter", side.dut_if),
            "0",
        )],
    )?;
    let port = LabPort::read(name, side)?;
    // A permanent neighbour entry for the tester host: the DUT then
    // never ARPs during a trial, so forwarding does not depend on ARP
    // timing (linerate still answers ARP for its hosts).
    netns::ip(&[
        "-n",
        &dut_ns,
        "neigh",
        "replace",
        &side.tester_ip.to_string(),
        "lladdr",
        &format_mac(&port.mac),
        "dev",
        side.dut_if,
        "nud",
        "permanent",
    ])?;
    netns::ip(&["-n", &dut_ns, "link", "set", side.dut_if, "up"])?;
    Ok(port)
}

/// Removes the namespaces of lab `name` that are present, without opening
/// it first: works on a half-made or half-removed lab, where `attach`
/// fails; also the back-to-back wire of a `calibrate` run of that name
/// ([`crate::Wire`]). What a killed run left goes too: the processes still
/// in the lab's namespaces (nginx, charon, boringtun), boringtun's control
/// sockets, and the private directories and lock files under /run/linerate
/// whose run has ended (linerate-helper's `sweep`, [`crate::lock::sweep`]).
/// Returns the namespaces removed and the processes ended ("process PID
/// (NAME)"); empty if none was there.
pub fn down_lab(name: &str) -> Result<Vec<String>, LabError> {
    validate_name(name)?;
    // Never from under a run that uses it.
    crate::lock::remove(name)?;
    // The second DUT first: its veths' peers live in the first.
    let mut names = all_netns_names(name);
    names.rotate_right(1);
    names.push(wire_netns(name));
    let removed = delete_all(names);
    remove_leftover_files(&[name.to_string()]);
    removed
}

/// Files a killed run left: boringtun's sockets for labs `labs`, and every
/// private directory and lock file whose run has ended.
fn remove_leftover_files(labs: &[String]) {
    for lab in labs {
        remove_leftover_sockets(lab);
    }
    let _ = linerate_helper::sweep();
    let _ = crate::lock::sweep();
    restore_backlog_unless_labs_left();
}

/// Removes the control sockets boringtun left for lab `lab_name` when it was
/// killed (it removes them itself when it ends normally; see
/// `scenario/wireguard.rs`).
fn remove_leftover_sockets(lab_name: &str) {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    for name in wireguard_ifnames(lab_name) {
        let path = boringtun_socket(&name);
        // Only a socket of root's, never through a link.
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_socket() && m.uid() == 0)
        {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// The backlog depth is the machine's: back to what it was once no lab is
/// left to need it.
fn restore_backlog_unless_labs_left() {
    let labs_left = netns::list()
        .iter()
        .any(|ns| ns.starts_with(PREFIX) && ns.ends_with(&format!("-{DUT_SUFFIX}")));
    crate::backlog::restore_unless(labs_left);
}

/// Ends the processes in every namespace given, then deletes it, even if one
/// fails, then reports the first error; otherwise returns the namespaces
/// that existed and were removed, and the processes ended.
fn delete_all(names: impl IntoIterator<Item = String>) -> Result<Vec<String>, LabError> {
    let mut removed = Vec::new();
    let mut ended = Vec::new();
    let mut first_error = None;
    for ns in names {
        ended.extend(netns::end_processes(&ns));
        match netns::delete(&ns) {
            Ok(true) => removed.push(ns),
            Ok(false) => {}
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    removed.extend(ended);
    first_error.map_or(Ok(removed), Err)
}

/// Removes every namespace whose name starts with `prefix` (which must
/// start with [`PREFIX`]). Returns the namespaces removed.
pub fn down_matching(prefix: &str) -> Result<Vec<String>, LabError> {
    if !prefix.starts_with(PREFIX) {
        return Err(LabError::InvalidPrefix(prefix.to_string()));
    }
    delete_all(netns::list().into_iter().filter(|n| n.starts_with(prefix)))
}

/// What [`down_all`] would remove: every namespace whose name starts with
/// [`PREFIX`] but those in `keep`, then any veth in the root namespace
/// whose name starts with "lr" (as `veth NAME`).
pub fn leftovers(keep: &[String]) -> Result<Vec<String>, LabError> {
    crate::check_environment()?;
    let mut all: Vec<String> = netns::list()
        .into_iter()
        .filter(|n| n.starts_with(PREFIX) && !keep.contains(n))
        .collect();
    all.extend(root_veths()?.into_iter().map(|v| format!("veth {v}")));
    Ok(all)
}

/// Veths in the root namespace whose name starts with "lr". This crate
/// never makes any there, but a crashed older version or a hand-made
/// experiment might have.
fn root_veths() -> Result<Vec<String>, LabError> {
    let links = netns::ip_json(&["link", "show", "type", "veth"])?;
    Ok(links
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|link| link["ifname"].as_str())
        .filter(|ifname| ifname.starts_with("lr"))
        .map(str::to_string)
        .collect())
}

/// What [`down_all`] did.
#[derive(Debug, Default)]
pub struct DownAll {
    /// Namespaces, veths and processes removed.
    pub removed: Vec<String>,
    /// Labs left in place because a live run uses them: "NAME (pid N)".
    pub in_use: Vec<String>,
}

/// Removes every namespace whose name starts with [`PREFIX`] (and any stray
/// veth in the root namespace whose name starts with "lr"), even after a
/// crash: every lab on the machine, whoever made it, but those a live run
/// holds (their lock, as `lab down --lab-name` respects it: removing a lab
/// under a run makes its trial report the tester's own port as lossy).
/// Namespaces in `keep` stay too: those holding a running goodput run's
/// named ports, which that run moves back when it ends (deleting the
/// namespace would lose them).
pub fn down_all(keep: &[String]) -> Result<DownAll, LabError> {
    crate::check_environment()?;
    // The labs whose files to look for: those with a DUT namespace.
    let labs: Vec<String> = netns::list()
        .iter()
        .filter_map(|ns| {
            ns.strip_prefix(PREFIX)?
                .strip_suffix(&format!("-{DUT_SUFFIX}"))
        })
        .map(str::to_string)
        .collect();
    // Hold every lab's lock while removing it; a lab whose lock a run
    // holds keeps all its namespaces.
    let mut keep = keep.to_vec();
    let mut held = Vec::new();
    let mut gone = Vec::new();
    let mut in_use = Vec::new();
    for lab in labs {
        match crate::lock::lock(&lab) {
            Ok(lock) => {
                held.push(lock);
                gone.push(lab);
            }
            Err(LabError::InUse { holder, .. }) => {
                in_use.push(format!("{lab} ({holder})"));
                keep.extend(all_netns_names(&lab));
                keep.push(wire_netns(&lab));
            }
            Err(e) => return Err(e),
        }
    }
    let mut removed = delete_all(
        netns::list()
            .into_iter()
            .filter(|n| n.starts_with(PREFIX) && !keep.contains(n)),
    )?;
    held.into_iter().for_each(crate::lock::LabLock::discard);
    remove_leftover_files(&gone);
    for ifname in root_veths()? {
        let ifname = ifname.as_str();
        // Deleting one end removes its peer too, which may then be gone
        // when the loop reaches it: tolerate that.
        match netns::ip(&["link", "del", "dev", ifname]) {
            Ok(_) => removed.push(ifname.to_string()),
            Err(e) if netns::ip(&["link", "show", "dev", ifname]).is_ok() => return Err(e),
            Err(_) => {}
        }
    }
    Ok(DownAll { removed, in_use })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn down_matching_refuses_foreign_prefixes() {
        for prefix in ["", "l", "lr", "foo-"] {
            assert!(matches!(
                down_matching(prefix),
                Err(LabError::InvalidPrefix(_))
            ));
        }
    }

    #[test]
    fn rollback_removes_what_a_failed_up_made() {
        if let Err(e) = crate::check_environment() {
            // As every skip: a failure under LINERATE_REQUIRE_ALL=1 (scripts/test.sh).
            if std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1") {
                panic!(
                    "SKIPPED (needs root): {e}; LINERATE_REQUIRE_ALL=1 makes every skip a failure"
                );
            }
            eprintln!("SKIPPED (needs root): {e}");
            return;
        }
        let ns = format!("{PREFIX}rb{}-a", std::process::id());
        {
            let mut rollback = Rollback {
                made: Vec::new(),
                armed: true,
            };
            netns::add(&ns).unwrap();
            rollback.made.push(ns.clone());
            assert!(netns::exists(&ns));
        } // dropped armed, as when build() returns an error or panics
        assert!(!netns::exists(&ns), "{ns} left behind");
    }
}
