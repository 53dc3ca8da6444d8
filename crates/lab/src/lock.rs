//! One run at a time on a lab.
//!
//! Two runs sending through the same lab at once see each other's frames
//! and counters: one reported 1,274 "duplicated" frames, the other 66 %
//! "loss", both exiting 0. So a run holds an exclusive lock on its lab for
//! as long as it uses it, and a second run (or `lab down` of that lab)
//! refuses in one line. The lock is a `flock` on a file in a root-only
//! directory: the kernel drops it when the process ends, however it ends,
//! so a killed run never leaves a lab locked.

use crate::LabError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;

/// Where the lock files live (created 0700, root only; see linerate-helper).
const LOCK_DIR: &str = linerate_helper::RUN_DIR;

/// A held lock on one lab; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct LabLock {
    _file: File,
    name: String,
}

impl LabLock {
    /// Releases the lock and removes its file: the lab turned out not to
    /// exist, and nothing of it may stay behind.
    pub(crate) fn discard(self) {
        let _ = std::fs::remove_file(path(&self.name));
    }
}

fn path(name: &str) -> String {
    format!("{LOCK_DIR}/lab-{name}.lock")
}

/// Takes lab `name`'s lock, or says which process holds it.
pub fn lock(name: &str) -> Result<LabLock, LabError> {
    let io = |e: std::io::Error| LabError::Lock {
        name: name.to_string(),
        error: e.to_string(),
    };
    // Made if missing, and refused when it is a link or not root's.
    linerate_helper::run_dir().map_err(io)?;
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        // Never through a link someone planted.
        .custom_flags(libc::O_NOFOLLOW)
        .open(path(name))
        .map_err(io)?;
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(io(err));
        }
        let mut holder = String::new();
        let _ = file.read_to_string(&mut holder);
        return Err(LabError::InUse {
            name: name.to_string(),
            holder: holder.trim().to_string(),
        });
    }
    // Who holds it, for the message a second run prints.
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    let _ = write!(file, "pid {}", std::process::id());
    Ok(LabLock {
        _file: file,
        name: name.to_string(),
    })
}

/// Removes lab `name`'s lock file if no run holds the lock (for `lab
/// down`); Err names the run using the lab.
pub fn remove(name: &str) -> Result<(), LabError> {
    if !std::path::Path::new(&path(name)).exists() {
        return Ok(());
    }
    let held = lock(name)?;
    let _ = std::fs::remove_file(path(name));
    drop(held);
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
        drop(first);
        let again = lock(&name).expect("lock after release");
        drop(again);
        remove(&name).expect("remove");
        assert!(!std::path::Path::new(&path(&name)).exists());
    }
}
