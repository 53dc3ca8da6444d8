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
//!
//! A killed run cannot remove its files, so taking a lock (and `lab down`)
//! first removes the lock files no process holds ([`sweep`]). The sweep
//! holds each file's lock while it checks and removes it; a run taking a
//! lock meanwhile would take that for a run using the lab or port. So the
//! sweep holds the directory's own `flock` exclusively, and a run taking a
//! lock holds it shared from opening its file until it has the file's lock:
//! a refusal always names a run.

use crate::LabError;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

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
    // What killed runs left; before the directory lock below is taken (the
    // sweep's, exclusive, would wait for it).
    let _ = sweep();
    // No sweep holds a file's lock while this tries to take it.
    let dir = lock_dir(libc::LOCK_SH).map_err(io)?;
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
        // it (as a holder of a port's lock does when done, and `lab down`
        // does): a lock on a removed file locks nothing, so start again.
        let held = file.metadata().map_err(io)?;
        if linerate_helper::still_at(Path::new(&path), &held) {
            break file;
        }
    };
    drop(dir);
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

/// Whether `name` is that of a lock file in the directory.
fn is_lock_file(name: &str) -> bool {
    (name.starts_with("lab-") || name.starts_with("port-")) && name.ends_with(".lock")
}

/// Takes the directory's own `flock` (`op`: shared or exclusive), waiting
/// for it; held until the file returned is dropped.
fn lock_dir(op: libc::c_int) -> std::io::Result<File> {
    let dir = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(LOCK_DIR)?;
    // SAFETY: flock on a descriptor this function owns.
    while unsafe { libc::flock(dir.as_raw_fd(), op) } != 0 {
        let err = std::io::Error::last_os_error();
        if err.kind() != std::io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(dir)
}

/// Removes the lock files (of labs and ports) that no process holds: those
/// killed runs left, and labs' whose run has ended. A file held stays;
/// links and anything not a regular file of root's stay too, untouched
/// (linerate-helper's `sweep_files`). Returns the files removed.
pub fn sweep() -> std::io::Result<Vec<PathBuf>> {
    linerate_helper::run_dir()?;
    let _dir = lock_dir(libc::LOCK_EX)?;
    linerate_helper::sweep_files(is_lock_file)
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

    /// The tests below one at a time: one's sweep would remove the other's
    /// files made to be swept, and a process one spawns shares the other's
    /// open lock files until it execs (the lock outlives their close).
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

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
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
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

    #[test]
    fn a_sweep_removes_lock_files_nobody_holds_and_nothing_else() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert!(
                !std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1"),
                "SKIPPED (needs root); LINERATE_REQUIRE_ALL=1 makes every skip a failure"
            );
            eprintln!("SKIPPED (needs root): lock file sweep test");
            return;
        }
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        linerate_helper::run_dir().unwrap();
        let id = std::process::id();
        let at = |name: &str| PathBuf::from(format!("{LOCK_DIR}/{name}"));
        // What a killed run leaves: a lab's and a port's file, locked by a
        // process that has ended.
        let stale = [
            at(&format!("lab-sweeptest{id}.lock")),
            at(&format!("port-1-sw{id}.lock")),
        ];
        for file in &stale {
            let status = std::process::Command::new("flock")
                .arg(file)
                .arg("true")
                .status()
                .expect("flock(1)");
            assert!(status.success());
            assert!(file.exists());
        }
        // A live lock, held by this process.
        let ifname = format!("sl{}", id % 100_000);
        let live = lock_port(None, &ifname).expect("port lock");
        // A link named like a lock file, to a file of the victim's: neither
        // is followed, touched nor removed.
        let victim = std::env::temp_dir().join(format!("lr-sweep-victim-{id}"));
        std::fs::write(&victim, "unchanged").unwrap();
        let link = at(&format!("lab-sweeplink{id}.lock"));
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        // A FIFO so named: the sweep does not wait on it, and leaves it.
        let fifo = at(&format!("port-1-sf{id}.lock"));
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        // Another user's file so named: left alone.
        let foreign = at(&format!("port-1-so{id}.lock"));
        std::fs::write(&foreign, "").unwrap();
        std::os::unix::fs::chown(&foreign, Some(65534), Some(65534)).unwrap();

        let removed = sweep().expect("sweep");
        let left = |p: &Path| std::fs::symlink_metadata(p).is_ok();
        let (link_left, fifo_left, foreign_left) = (left(&link), left(&fifo), left(&foreign));
        let victim_text = std::fs::read_to_string(&victim).unwrap_or_default();
        for p in [&link, &fifo, &foreign, &victim] {
            let _ = std::fs::remove_file(p);
        }
        for file in &stale {
            assert!(!file.exists(), "{} left: {removed:?}", file.display());
        }
        let live_path = PathBuf::from(&live.path);
        assert!(!removed.contains(&live_path), "{removed:?}");
        assert!(live_path.exists(), "the held lock's file was removed");
        assert!(link_left, "the link was removed");
        assert_eq!(victim_text, "unchanged");
        assert!(fifo_left && foreign_left, "{removed:?}");
        for p in [&link, &fifo, &foreign] {
            assert!(!removed.contains(p), "{removed:?}");
        }
        // The held lock still holds, and its file goes with it.
        assert!(matches!(
            lock_port(None, &ifname),
            Err(LabError::PortInUse { .. })
        ));
        drop(live);
        assert!(!live_path.exists());
    }

    #[test]
    fn a_lock_taken_during_a_sweep_waits_for_it_instead_of_refusing() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            assert!(
                !std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1"),
                "SKIPPED (needs root); LINERATE_REQUIRE_ALL=1 makes every skip a failure"
            );
            eprintln!("SKIPPED (needs root): lock during a sweep test");
            return;
        }
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        // A lab's lock file stays when its run ends.
        let name = format!("sweepwait{}", std::process::id());
        drop(lock(&name).expect("lock"));
        let file = path(&name);
        assert!(Path::new(&file).exists());
        // A sweep in the middle of removing it: the directory's lock and
        // the file's.
        let dir = lock_dir(libc::LOCK_EX).unwrap();
        let stale = File::open(&file).unwrap();
        // SAFETY: flock on a descriptor this test owns.
        assert_eq!(
            unsafe { libc::flock(stale.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) },
            0
        );
        std::thread::scope(|s| {
            let taker = s.spawn(|| lock(&name));
            std::thread::sleep(std::time::Duration::from_millis(200));
            assert!(!taker.is_finished(), "{:?}", taker.join());
            std::fs::remove_file(&file).unwrap();
            drop(stale);
            drop(dir);
            // Not refused for the sweep's lock: the run gets the lab.
            let taken = taker.join().unwrap().expect("lock after the sweep");
            assert!(linerate_helper::still_at(
                Path::new(&file),
                &taken._file.metadata().unwrap()
            ));
        });
        remove(&name).expect("remove");
    }
}
