//! The outside programs a scenario runs, and what they need from it: the
//! error when one is missing ([`unavailable`]), a private file to hand one
//! its input or key ([`private_file`]), and the user-space daemons a
//! scenario keeps running ([`Daemons`]), pinned to the DUT's CPUs ([`pin`]).
//! Shared by the scenario parts (`nft.rs`, `routes.rs`, `wireguard.rs`,
//! `ipsec.rs`, `vpn.rs`), which each run their own programs.

use crate::LabError;
use linerate_helper::PrivateDir;
use std::path::PathBuf;
use std::process::Child;

/// A scenario that cannot be built here (a tool or a kernel feature is
/// missing), with the fix; the caller fills in the scenario's name.
pub(crate) fn unavailable(reason: &str) -> LabError {
    LabError::Unavailable {
        scenario: String::new(),
        reason: reason.to_string(),
    }
}

/// Writes `text` to file `name` in a new private directory (see
/// linerate-helper: 0700, the file 0600, never through a link) for a
/// `-f`/`-batch` load or a key; the file is removed when the directory is
/// dropped, which the caller does once the command has read it.
pub(crate) fn private_file(name: &str, text: &str) -> Result<(PrivateDir, PathBuf), LabError> {
    let error = |e: std::io::Error| LabError::Spawn {
        command: format!("writing {name} in {}", linerate_helper::RUN_DIR),
        error: e.to_string(),
    };
    let purpose: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let dir = PrivateDir::new(&purpose).map_err(error)?;
    let path = dir.write(name, text.as_bytes()).map_err(error)?;
    Ok((dir, path))
}

/// User-space tunnel daemons (boringtun, charon); killed on drop, and the
/// files and private directories they used removed.
#[derive(Default)]
pub(crate) struct Daemons {
    children: Vec<Child>,
    files: Vec<PathBuf>,
    dirs: Vec<PrivateDir>,
}

impl Daemons {
    /// A daemon and the file it makes (boringtun's control socket).
    pub(crate) fn push(&mut self, child: Child, leftover: PathBuf) {
        self.children.push(child);
        self.files.push(leftover);
    }

    /// A daemon and the private directory it runs in (charon's).
    pub(crate) fn push_with_dir(&mut self, child: Child, dir: PrivateDir) {
        self.children.push(child);
        self.dirs.push(dir);
    }

    /// The daemons' process ids.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }
}

impl Drop for Daemons {
    fn drop(&mut self) {
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
        for file in &self.files {
            let _ = std::fs::remove_file(file);
        }
        // The directories go with `self.dirs`.
    }
}

/// Restricts process `pid` to `cpus` (nothing when the list is empty).
pub(crate) fn pin(pid: u32, cpus: &[usize]) {
    if cpus.is_empty() {
        return;
    }
    let mut set = nix::sched::CpuSet::new();
    for &c in cpus {
        let _ = set.set(c);
    }
    let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(pid as i32), &set);
}
