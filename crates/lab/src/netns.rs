//! Running commands (through linerate-helper: killed with linerate, errors
//! worded as [`LabError`]s) and managing named network namespaces.
//!
//! Configuration goes through iproute2's `ip` (its documented, stable
//! interface) rather than raw netlink: every step is a command a person can
//! rerun by hand, and an error names that command and its stderr.

use crate::LabError;
pub(crate) use linerate_helper::{command_line, find_tool};
use linerate_helper::{first_line, RunError};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Where iproute2 keeps named namespaces (bind-mounted nsfs files); listing
/// it is what `ip netns list` does.
pub(crate) const NETNS_RUN_DIR: &str = "/run/netns";

/// The `ip` program, looked up once.
pub(crate) fn ip_path() -> Result<&'static Path, LabError> {
    linerate_helper::ip_path().ok_or(LabError::IprouteMissing)
}

/// The `ethtool` program, looked up once; optional (only CPU placement uses it).
pub(crate) fn ethtool_path() -> Option<&'static Path> {
    static ETHTOOL: OnceLock<Option<PathBuf>> = OnceLock::new();
    ETHTOOL.get_or_init(|| find_tool("ethtool")).as_deref()
}

/// A command that failed, in the lab's words: the command as a person
/// would type it and its first stderr line.
impl From<RunError> for LabError {
    fn from(e: RunError) -> LabError {
        match e {
            RunError::Missing { .. } => LabError::IprouteMissing,
            RunError::Spawn { command, error } => LabError::Spawn {
                command,
                error: error.to_string(),
            },
            RunError::Failed {
                command,
                status,
                stderr,
            } => LabError::Command {
                command,
                stderr: first_line(stderr.as_bytes(), status),
            },
            RunError::Stopped { command } => LabError::Command {
                command,
                stderr: "stopped: the run was asked to stop".to_string(),
            },
        }
    }
}

/// Runs `program args...` (linerate-helper's `run`: killed with linerate),
/// returns its stdout; errors name the command.
pub(crate) fn run(program: &Path, args: &[&str]) -> Result<String, LabError> {
    Ok(linerate_helper::run(program, args)?)
}

/// [`run`] that ends the command early once `stop` returns true, asked
/// while it runs: for a set-up's long steps (loading 100,000 nftables
/// rules or 900,000 routes), which a Ctrl-C should not wait for. Err when
/// stopped, naming the command.
pub(crate) fn run_until(
    program: &Path,
    args: &[&str],
    stop: &dyn Fn() -> bool,
) -> Result<String, LabError> {
    Ok(linerate_helper::run_until(program, args, stop)?)
}

/// Runs `ip args...`.
pub(crate) fn ip(args: &[&str]) -> Result<String, LabError> {
    Ok(linerate_helper::ip(None, args)?)
}

/// Runs `ip -j args...` and parses its JSON output.
pub(crate) fn ip_json(args: &[&str]) -> Result<serde_json::Value, LabError> {
    let mut full = vec!["-j"];
    full.extend_from_slice(args);
    let out = ip(&full)?;
    // Some `ip -j` commands print nothing at all when there is nothing to list.
    if out.trim().is_empty() {
        return Ok(serde_json::Value::Array(Vec::new()));
    }
    serde_json::from_str(&out).map_err(|e| LabError::Parse {
        command: command_line(Path::new("ip"), &full),
        detail: e.to_string(),
    })
}

/// Runs `argv` inside namespace `ns` (`ip netns exec`, which also mounts
/// the namespace's own /sys, needed for /sys/class/net/<dev>/...).
pub(crate) fn exec_in(ns: &str, argv: &[&str]) -> Result<String, LabError> {
    let mut full = vec!["netns", "exec", ns];
    full.extend_from_slice(argv);
    ip(&full)
}

/// [`exec_in`] that ends the command early once `stop` returns true
/// (see [`run_until`]).
pub(crate) fn exec_in_until(
    ns: &str,
    argv: &[&str],
    stop: &dyn Fn() -> bool,
) -> Result<String, LabError> {
    let mut full = vec!["netns", "exec", ns];
    full.extend_from_slice(argv);
    run_until(ip_path()?, &full, stop)
}

/// Shell script writing value `$2` to file `$1`, for each pair of arguments.
/// Paths and values travel as arguments, never spliced into the script.
const WRITE_SCRIPT: &str =
    r#"while [ "$#" -ge 2 ]; do printf '%s\n' "$2" > "$1" || exit 1; shift 2; done"#;

/// Writes `(path, value)` pairs (sysctls under /proc/sys, or /sys files) as
/// seen from inside namespace `ns`, with one process for all of them.
pub(crate) fn write_in(ns: &str, writes: &[(&str, &str)]) -> Result<(), LabError> {
    let mut argv = vec!["/bin/sh", "-c", WRITE_SCRIPT, "sh"];
    for (path, value) in writes {
        argv.push(path);
        argv.push(value);
    }
    exec_in(ns, &argv).map(|_| ())
}

/// Reads a file (a sysctl or /sys file) as seen from inside namespace `ns`.
pub(crate) fn read_in(ns: &str, path: &str) -> Result<String, LabError> {
    exec_in(ns, &["cat", path]).map(|s| s.trim().to_string())
}

/// Names of all named network namespaces, sorted.
pub(crate) fn list() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(NETNS_RUN_DIR)
        .map(|dir| {
            dir.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

pub(crate) fn exists(name: &str) -> bool {
    Path::new(NETNS_RUN_DIR).join(name).exists()
}

/// `ip netns add name`.
pub(crate) fn add(name: &str) -> Result<(), LabError> {
    ip(&["netns", "add", name]).map(|_| ())
}

/// Deletes namespace `name`; a namespace already gone is fine. Returns
/// whether it was there. Deleting a namespace destroys its interfaces (for
/// a veth, both ends) once no process holds it any more: so the processes
/// still in it (what a killed run started there) are ended first.
pub(crate) fn delete(name: &str) -> Result<bool, LabError> {
    if !exists(name) {
        return Ok(false);
    }
    end_processes(name);
    match ip(&["netns", "del", name]) {
        Ok(_) => Ok(true),
        // Someone else (a concurrent down) removed it meanwhile: fine.
        Err(_) if !exists(name) => Ok(true),
        Err(e) => Err(e),
    }
}

/// The processes in namespace `name`, as `ip netns pids` finds them (their
/// /proc/PID/ns/net is the namespace), but this process and its ancestors
/// (a shell entered with `ip netns exec` that runs `lab down`).
pub(crate) fn pids_in(name: &str) -> Vec<i32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(ns) = std::fs::metadata(Path::new(NETNS_RUN_DIR).join(name)) else {
        return Vec::new();
    };
    let Ok(proc_dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let spared = ancestors();
    proc_dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| !spared.contains(pid))
        .filter(|pid| {
            // A zombie has left its namespaces: no match.
            std::fs::metadata(format!("/proc/{pid}/ns/net"))
                .is_ok_and(|m| (m.dev(), m.ino()) == (ns.dev(), ns.ino()))
        })
        .collect()
}

/// This process and its ancestors up to init.
fn ancestors() -> Vec<i32> {
    let mut pids = vec![std::process::id() as i32];
    while let Some(parent) = pids.last().and_then(|&pid| parent_of(pid)) {
        if parent <= 1 || pids.contains(&parent) {
            break;
        }
        pids.push(parent);
    }
    pids
}

/// The parent of `pid` (the field after the state in /proc/PID/stat).
fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(") ")?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// Ends the processes in namespace `name`: SIGTERM, then SIGKILL to any
/// still there after a second; waits until none is left (at most two
/// seconds more). Returns "process PID (NAME)" for each.
pub(crate) fn end_processes(name: &str) -> Vec<String> {
    use nix::sys::signal::{kill, Signal};
    use std::time::{Duration, Instant};
    let pids = pids_in(name);
    let ended = pids
        .iter()
        .map(|pid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            format!("process {pid} ({})", comm.trim())
        })
        .collect();
    let wait = |limit: Duration| {
        let start = Instant::now();
        while !pids_in(name).is_empty() && start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    for (signal, limit) in [(Signal::SIGTERM, 1), (Signal::SIGKILL, 2)] {
        let left = pids_in(name);
        if left.is_empty() {
            break;
        }
        for pid in left {
            let _ = kill(nix::unistd::Pid::from_raw(pid), signal);
        }
        wait(Duration::from_secs(limit));
    }
    ended
}

/// Runs `f` on a thread of its own inside namespace `ns` (so the caller's
/// thread never moves): for calls that resolve an interface index in the
/// calling thread's namespace (BPF attachment). Err names the namespace.
pub(crate) fn run_in<T: Send>(
    ns: &str,
    f: impl FnOnce() -> Result<T, String> + Send,
) -> Result<T, String> {
    use std::os::fd::AsFd;
    let target = std::fs::File::open(format!("{NETNS_RUN_DIR}/{ns}"))
        .map_err(|e| format!("opening namespace {ns}: {e}"))?;
    std::thread::scope(|s| {
        s.spawn(|| {
            nix::sched::setns(target.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
                .map_err(|e| format!("entering namespace {ns}: {e}"))?;
            f()
        })
        .join()
        .unwrap_or_else(|_| Err(format!("a thread in namespace {ns} panicked")))
    })
}

/// The index of interface `ifname` in the calling thread's namespace.
pub(crate) fn ifindex_here(ifname: &str) -> Result<i32, String> {
    let name = std::ffi::CString::new(ifname).map_err(|e| e.to_string())?;
    // SAFETY: `name` is a valid C string that outlives the call.
    match unsafe { libc::if_nametoindex(name.as_ptr()) } {
        0 => Err(format!("no interface {ifname}")),
        i => Ok(i as i32),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delete_of_missing_namespace_is_ok() {
        assert!(!delete("lr-never-created-namespace").unwrap());
    }
}
