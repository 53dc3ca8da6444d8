//! Entering a network namespace to create a socket, and running `ip`.
//!
//! `setns` changes the namespace of the calling thread only; `in_netns`
//! always switches back, so the thread that made a socket goes on working
//! in linerate's own namespace. The socket stays in the namespace it was
//! made in (see the crate docs).

use crate::GoodputError;
use linerate_helper::DieWithParent;
use std::fs::File;
use std::os::fd::AsFd;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Runs `f` with the calling thread inside namespace `name` (a file under
/// /run/netns, as `ip netns add` makes), or in the current one for None.
pub fn in_netns<T>(
    name: Option<&str>,
    f: impl FnOnce() -> Result<T, GoodputError>,
) -> Result<T, GoodputError> {
    let Some(name) = name else { return f() };
    let target = File::open(format!("/run/netns/{name}")).map_err(|_| {
        GoodputError::Setup(format!(
            "network namespace {name} does not exist: is the lab up ('linerate lab status')?"
        ))
    })?;
    in_netns_file(&target, &format!("namespace {name}"), f)
}

/// Runs `f` with the calling thread inside the namespace of nsfs file
/// `target` (`what` names it in errors): for a namespace known by no name,
/// such as the host's (`/proc/1/ns/net`).
pub fn in_netns_file<T>(
    target: &File,
    what: &str,
    f: impl FnOnce() -> Result<T, GoodputError>,
) -> Result<T, GoodputError> {
    let home = File::open("/proc/thread-self/ns/net")
        .map_err(|e| GoodputError::io("opening linerate's own namespace", e))?;
    nix::sched::setns(target.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| GoodputError::io(format!("entering {what}"), e.into()))?;
    let result = f();
    // Coming back cannot reasonably fail (we came from there); if it did,
    // this thread would go on in the wrong namespace, so stop hard.
    nix::sched::setns(home.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
        .expect("returning to linerate's own network namespace");
    result
}

/// Finds a program in PATH or the sbin directories (`ip`, `nginx` live in
/// /usr/sbin, which a non-login PATH may lack).
pub fn find_tool(name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| {
            p.metadata()
                .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
                .unwrap_or(false)
        })
}

/// Runs `ip args...`; the error names the command and its first stderr line.
pub fn ip(args: &[&str]) -> Result<String, GoodputError> {
    let ip = find_tool("ip").ok_or_else(|| {
        GoodputError::Setup("iproute2 not found: install it with 'apt-get install iproute2'".into())
    })?;
    let out = Command::new(ip)
        .args(args)
        .stdin(Stdio::null())
        .die_with_parent()
        .output()
        .map_err(|e| GoodputError::io("running ip", e))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let first = err.lines().map(str::trim).find(|l| !l.is_empty());
    Err(GoodputError::Setup(format!(
        "command 'ip {}' failed: {}",
        args.join(" "),
        first.unwrap_or("no message")
    )))
}

/// `ip [-n ns] args...`.
pub fn ip_in(ns: Option<&str>, args: &[&str]) -> Result<String, GoodputError> {
    match ns {
        Some(ns) => {
            let mut full = vec!["-n", ns];
            full.extend_from_slice(args);
            ip(&full)
        }
        None => ip(args),
    }
}

/// Reads a sysctl file (path under /proc/sys) as seen from namespace `ns`.
pub fn read_sysctl(ns: Option<&str>, path: &str) -> Result<String, GoodputError> {
    in_netns(ns, || {
        // /proc/sys/net resolves against the opening thread's namespace
        // (current->nsproxy), so this reads the namespace just entered.
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .map_err(|e| GoodputError::io(format!("reading {path}"), e))
    })
}

/// Writes a sysctl file as seen from namespace `ns`.
pub fn write_sysctl(ns: Option<&str>, path: &str, value: &str) -> Result<(), GoodputError> {
    in_netns(ns, || {
        std::fs::write(path, value)
            .map_err(|e| GoodputError::io(format!("writing {value} to {path}"), e))
    })
}
