//! Running `ip` and reading sysctls in a namespace, through linerate-helper
//! (`ip`, `maybe_in_netns`), their errors worded as [`GoodputError`]s.
//!
//! `setns` changes the namespace of the calling thread only;
//! `linerate_helper::in_netns` always switches back, so the thread that made
//! a socket goes on working in linerate's own namespace. The socket stays in
//! the namespace it was made in (see the crate docs).

use crate::GoodputError;
use linerate_helper::{maybe_in_netns, RunError};

/// `ip [-n ns] args...`; the error names the command and its first stderr
/// line.
pub fn ip_in(ns: Option<&str>, args: &[&str]) -> Result<String, GoodputError> {
    linerate_helper::ip(ns, args).map_err(|e| match e {
        RunError::Failed { stderr, .. } => {
            let mut full = ns.map_or(Vec::new(), |ns| vec!["-n", ns]);
            full.extend_from_slice(args);
            let first = stderr.lines().map(str::trim).find(|l| !l.is_empty());
            GoodputError::Setup(format!(
                "command 'ip {}' failed: {}",
                full.join(" "),
                first.unwrap_or("no message")
            ))
        }
        RunError::Spawn { error, .. } => GoodputError::io("running ip", error),
        other => GoodputError::Setup(other.to_string()),
    })
}

/// Reads a sysctl file (path under /proc/sys) as seen from namespace `ns`.
pub fn read_sysctl(ns: Option<&str>, path: &str) -> Result<String, GoodputError> {
    maybe_in_netns(ns, || {
        // /proc/sys/net resolves against the opening thread's namespace
        // (current->nsproxy), so this reads the namespace just entered.
        std::fs::read_to_string(path)
            .map(|s| s.trim().to_string())
            .map_err(|e| GoodputError::io(format!("reading {path}"), e))
    })
}

/// Writes a sysctl file as seen from namespace `ns`.
pub fn write_sysctl(ns: Option<&str>, path: &str, value: &str) -> Result<(), GoodputError> {
    maybe_in_netns(ns, || {
        std::fs::write(path, value)
            .map_err(|e| GoodputError::io(format!("writing {value} to {path}"), e))
    })
}
