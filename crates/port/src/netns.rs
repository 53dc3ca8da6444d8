//! Entering a network namespace for the time it takes to open a socket.
//!
//! A socket stays in the namespace it was created in, so linerate opens each
//! lab port inside the port's namespace and then returns to its own: one
//! process drives ports in several namespaces. `setns` only affects the
//! calling thread, and this module always switches back, also on error.

use crate::PortError;
use std::fs::File;
use std::os::fd::AsFd;

/// Runs `f` with the calling thread inside network namespace `name`
/// (a file under /run/netns, as `ip netns add` makes), then switches back.
pub fn in_netns<T>(name: &str, f: impl FnOnce() -> Result<T, PortError>) -> Result<T, PortError> {
    let target = File::open(format!("/run/netns/{name}"))
        .map_err(|_| PortError::NoSuchNetns(name.to_string()))?;
    let home = File::open("/proc/thread-self/ns/net")
        .map_err(|e| PortError::io("opening own namespace", name, e))?;
    nix::sched::setns(target.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
        .map_err(|e| PortError::io("entering namespace", name, e.into()))?;
    let result = f();
    // Switching back cannot reasonably fail (we came from there); if it did,
    // this thread would keep working in the wrong namespace, so stop hard.
    nix::sched::setns(home.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
        .expect("returning to linerate's own network namespace");
    result
}

/// Runs `f` in namespace `netns` when one is given, else in the current one.
pub fn maybe_in_netns<T>(
    netns: Option<&str>,
    f: impl FnOnce() -> Result<T, PortError>,
) -> Result<T, PortError> {
    match netns {
        Some(name) => in_netns(name, f),
        None => f(),
    }
}
