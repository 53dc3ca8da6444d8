//! One run at a time on a lab, and on a tester port.
//!
//! Two runs sending through the same lab at once see each other's frames
//! and counters: one reported 1,274 "duplicated" frames, the other 66 %
//! "loss", both exiting 0. So a run holds an exclusive lock on its lab for
//! as long as it uses it, and a second run (or `lab down` of that lab)
//! refuses in one line. The lock is a `flock` on a file in a root-only
//! directory: the kernel drops it when the process ends, however it ends,
//! so a killed run never leaves a lab locked. Runs on external ports lock
//! each port the same way ([`lock_port`]); a port's lock file is removed
//! when the run lets go of it.

use crate::LabError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};

/// Where the lock files live (created 0700, root only; see linerate-helper).
const LOCK_DIR: &str = linerate_helper::RUN_DIR;

/// A held lock on one lab or port; released when dropped (or when the
/// process ends).
#[derive(Debug)]
pub struct LabLock {
    _file: File,
    path: String,
    /// Remove the file on drop, while the lock is still held (a run that
    /// opened it meanwhile sees it gone and starts again): a port's lock,
    /// or a lab's that turned out not to exist.
    remove: bool,
}

impl LabLock {
    /// Releases the lock and removes its file: the lab turned out not to
    /// exist, and nothing of it may stay behind.
    pub(crate) fn discard(mut self) {
        self.remove = true;
    }
}

impl Drop for LabLock {
    fn drop(&mut self) {
        if self.remove {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

fn path(name: &str) -> String {
    format!("{LOCK_DIR}/lab-{name}.lock")
}

/// Takes lab `name`'s lock, or says which process holds it.
pub fn lock(name: &str) -> Result<LabLock, LabError> {
    lock_file(path(name), &format!("lab '{name}'"), |holder| {
        LabError::InUse {
            name: name.to_string(),
            holder,
        }
    })
}

/// Takes the lock of tester port `ifname` in network namespace `netns` (a
/// name under /run/netns; None: the caller's), or says which process
/// holds it. A run on external ports holds both its ports' locks, as a run
/// on a lab holds the lab's: two runs sending through one port see each
/// other's frames. The namespace is known by its inode, so a port is the
/// same however the namespace is reached.
pub fn lock_port(netns: Option<&str>, ifname: &str) -> Result<LabLock, LabError> {
    let port = match netns {
        Some(ns) => format!("'{ifname}' (namespace {ns})"),
        None => format!("'{ifname}'"),
    };
    let what = format!("tester port {port}");
    let ns_path = match netns {
        Some(ns) => format!("/run/netns/{ns}"),
        None => "/proc/thread-self/ns/net".to_string(),
    };
    let ns_id = std::fs::metadata(&ns_path)
        .map_err(|e| LabError::Lock {
            what: what.clone(),
            error: format!("{ns_path}: {e}"),
        })?
        .ino();
    // Interface names hold no '/' (the kernel refuses them).
    let file = format!("{LOCK_DIR}/port-{ns_id}-{ifname}.lock");
    let mut lock = lock_file(file, &what, |holder| LabError::PortInUse {
        port: port.clone(),
        holder,
    })?;
    lock.remove = true;
    Ok(lock)
}

/// Takes the lock in file `path` (`what` it locks, for errors); `in_use`
/// makes the error naming the holder.
fn lock_file(
    path: String,
    what: &str,
    in_use: impl FnOnce(String) -> LabError,
) -> Result<LabLock, LabError> {
    let io = |e: std::io::Error| LabError::Lock {
        what: what.to_string(),
        error: e.to_string(),
    };
    // Made if missing, and refused when it is a link or not root's.
    linerate_helper::run_dir().map_err(io)?;
    let mut file = loop {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            // Never through a link someone planted.
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)
            .map_err(io)?;
        // SAFETY: flock on a descriptor this function owns.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(io(err));
            }
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            return Err(in_use(holder.trim().to_string()));
        }
        // The holder before may have removed the file after this opened
        // it: a lock on a removed file locks nothing, so start again.
        let held = file.metadata().map_err(io)?.ino();
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.ino() == held) {
            break file;
        }
    };
    // Who holds it, for the message a second run prints.
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    let _ = write!(file, "pid {}", std::process::id());
    Ok(LabLock {
        _file: file,
        path,
        remove: false,
    })
}

/// Removes lab `name`'s lock file if no run holds the lock (for `lab
/// down`); Err names the run using the lab.
pub fn remove(name: &str) -> Result<(), LabError> {
    if !std::path::Path::new(&path(name)).exists() {
        return Ok(());
    }
    lock(name)?.discard();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_a_lab_is_refused_and_the_first_is_released_on_drop() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            // /run/linerate is root's. As every skip: a failure under
            // LINERATE_REQUIRE_ALL=1 (scripts/test.sh).
            assert!(
                !std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1"),
                "SKIPPED (needs root); LINERATE_REQUIRE_ALL=1 makes every skip a failure"
            );
            eprintln!("SKIPPED (needs root): lab lock test");
            return;
        }
        let name = format!("locktest{}", std::process::id());
        let first = lock(&name).expect("first lock");
        // flock locks belong to the open file: a second open in the same
        // process conflicts just as another process's would.
        match lock(&name) {
            Err(LabError::InUse { holder, .. }) => {
                assert_eq!(holder, format!("pid {}", std::process::id()))
            }
            other => panic!("second lock: {other:?}"),
        }
        assert!(matches!(remove(&name), Err(LabError::InUse { .. })));
        // Ports: by namespace and name; the lock file goes with the lock.
        let ifname = format!("lt{}", std::process::id() % 100_000);
        let port = lock_port(None, &ifname).expect("port lock");
        match lock_port(None, &ifname) {
            Err(LabError::PortInUse { port, holder }) => {
                assert!(port.contains(&ifname), "{port}");
                assert_eq!(holder, format!("pid {}", std::process::id()));
            }
            other => panic!("second port lock: {other:?}"),
        }
        let file = port.path.clone();
        assert!(std::path::Path::new(&file).exists());
        drop(port);
        assert!(!std::path::Path::new(&file).exists(), "{file} left");
        let port = lock_port(None, &ifname).expect("port lock after release");
        drop(port);
        drop(first);
        let again = lock(&name).expect("lock after release");
        drop(again);
        remove(&name).expect("remove");
        assert!(!std::path::Path::new(&path(&name)).exists());
    }
}
