//! What linerate's helper programs need on the host, and nothing left after.
//!
//! linerate runs as root and starts helpers (nginx, strongSwan's charon,
//! boringtun, and `ip`, `nft`, `wg` for single commands) that read files:
//! configurations, objects to serve, pre-shared and private keys. A
//! predictable name in a world-writable directory such as /tmp lets another
//! user plant a directory or a link there first, so these files live in
//! [`PrivateDir`]s instead:
//!
//! - under [`RUN_DIR`] (`/run/linerate`), which only root may enter: made
//!   0700 and refused when it is a link or another user's;
//! - each new, with a random name (`mkdir` fails rather than reuse an
//!   existing directory), mode 0700;
//! - files created with `O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600: never an
//!   existing file, never through a link;
//! - removed when dropped. A run killed with SIGKILL cannot do that, so each
//!   directory is locked (`flock`) while its owner lives; the kernel drops
//!   the lock when the process ends, however it ends, and [`sweep`] (called
//!   by `linerate lab down` and whenever a new private directory is made)
//!   removes the unlocked ones. [`sweep_files`] does the same for the lock
//!   files of labs and ports (linerate-lab's `lock`).
//!
//! Helper processes die with linerate: [`DieWithParent`]. The single
//! commands linerate waits for (`ip [-n NS] ...`, `nft`, `ethtool`) run
//! through [`ip`], [`run`] and [`run_until`], found with [`find_tool`]
//! (PATH, then the sbin directories), killed with linerate, their output
//! captured and their stderr in the error ([`RunError`]). [`in_netns`]
//! runs a function with the calling thread in a network namespace and
//! switches back.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

mod netns;
mod tool;

pub use netns::{in_netns, in_netns_file, maybe_in_netns, NetnsError, NetnsStep};
pub use tool::{
    command_line, find_tool, first_line, ip, ip_path, ip_query, ip_with_input, run, run_until,
    RunError,
};

/// The root-only directory that holds linerate's private directories (and
/// the labs' lock files).
pub const RUN_DIR: &str = "/run/linerate";

/// Characters of the random part of a private directory's name.
const ALPHABET: &[u8; 32] = b"abcdefghijklmnopqrstuvwxyz234567";
/// Length of the random part: 60 bits.
const RANDOM_LEN: usize = 12;

/// [`RUN_DIR`], made (0700) if missing, and checked: a directory, not a
/// link, owned by this user; its mode is set back to 0700 if it was wider.
pub fn run_dir() -> io::Result<&'static Path> {
    let dir = Path::new(RUN_DIR);
    match fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    let meta = fs::symlink_metadata(dir)?;
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    if !meta.file_type().is_dir() || meta.uid() != me {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("{RUN_DIR} is not a directory owned by uid {me} (a link, or another user's): linerate will not use it; remove it"),
        ));
    }
    if meta.mode() & 0o7777 != 0o700 {
        // Only root can make entries in /run: no one can swap it meanwhile.
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700))?;
    }
    Ok(dir)
}

/// A private directory: `RUN_DIR/<purpose>.<random>`, mode 0700, made new
/// for this value and removed when it is dropped.
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
    /// The directory itself, opened and `flock`ed: while it is held,
    /// [`sweep`] leaves the directory alone.
    _lock: File,
}

impl PrivateDir {
    /// Makes a new private directory for `purpose` (letters, digits, '-'
    /// and '_', e.g. "nginx" or "ipsec-lr-lab1-dut"; it names the
    /// directory for a person reading `ls /run/linerate`). Removes what
    /// killed runs left first ([`sweep`]).
    pub fn new(purpose: &str) -> io::Result<PrivateDir> {
        if !valid_purpose(purpose) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("'{purpose}' is not a private directory's purpose: use letters, digits, '-' and '_'"),
            ));
        }
        let base = run_dir()?;
        let _ = sweep();
        for _ in 0..16 {
            let path = base.join(format!("{purpose}.{}", random_name()?));
            match fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
            // A sweep in another process may take the new directory before
            // it is locked here; then it is (being) removed: take another.
            if let Some(lock) = lock_entry(&path, Kind::Dir)? {
                // Exactly 0700 whatever the umask.
                lock.set_permissions(fs::Permissions::from_mode(0o700))?;
                return Ok(PrivateDir { path, _lock: lock });
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("no new private directory could be made in {RUN_DIR}"),
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes a new file `name` holding `data`: mode 0600; fails if
    /// anything, a link included, is there already.
    pub fn write(&self, name: &str, data: &[u8]) -> io::Result<PathBuf> {
        let path = self.entry(name)?;
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&path)?;
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
        file.write_all(data)?;
        Ok(path)
    }

    /// Makes a new subdirectory `name`, mode 0700; fails if anything is
    /// there already.
    pub fn subdir(&self, name: &str) -> io::Result<PathBuf> {
        let path = self.entry(name)?;
        fs::DirBuilder::new().mode(0o700).create(&path)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o700))?;
        Ok(path)
    }

    /// `name` inside the directory: plain names, joined with '/' for a
    /// subdirectory made with [`PrivateDir::subdir`] ("www/64"); no "..".
    fn entry(&self, name: &str) -> io::Result<PathBuf> {
        let plain = name
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && !c.contains('\0'));
        if !plain {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("'{name}' is not a name inside a private directory"),
            ));
        }
        Ok(self.path.join(name))
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        // remove_dir_all follows no link it meets.
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// What [`lock_entry`] opens: a directory or a regular file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
}

/// Opens `path` (never through a link) and takes its lock without waiting.
/// None when it is gone, not of `kind` or not this user's, locked by
/// someone else, or no longer at `path` once locked (removed, by a sweep or
/// by the holder before, between the open and the lock: a lock on it locks
/// nothing).
fn lock_entry(path: &Path, kind: Kind) -> io::Result<Option<File>> {
    let flags = match kind {
        Kind::Dir => libc::O_DIRECTORY | libc::O_NOFOLLOW,
        // O_NONBLOCK: a FIFO planted under the name does not block the open.
        Kind::File => libc::O_NOFOLLOW | libc::O_NONBLOCK,
    };
    let file = match OpenOptions::new().read(true).custom_flags(flags).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    let of_kind = match kind {
        Kind::Dir => meta.file_type().is_dir(),
        Kind::File => meta.file_type().is_file(),
    };
    // SAFETY: geteuid has no preconditions.
    if !of_kind || meta.uid() != unsafe { libc::geteuid() } {
        return Ok(None);
    }
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let err = io::Error::last_os_error();
        if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
            return Ok(None);
        }
        return Err(err);
    }
    if !still_at(path, &meta) {
        return Ok(None);
    }
    Ok(Some(file))
}

/// Whether `path` (not followed) is the file `held` describes: the same
/// device and inode.
pub fn still_at(path: &Path, held: &fs::Metadata) -> bool {
    fs::symlink_metadata(path).is_ok_and(|m| m.dev() == held.dev() && m.ino() == held.ino())
}

/// Removes the private directories whose owner has ended (their lock is
/// free): what runs killed with SIGKILL left. Those of running runs stay.
/// Returns the directories removed.
pub fn sweep() -> io::Result<Vec<PathBuf>> {
    sweep_entries(Kind::Dir, is_private_name)
}

/// Removes the files in [`RUN_DIR`] whose name `matches` and whose `flock`
/// no process holds: lock files whose run has ended (the lock went with the
/// process, the file stayed). A file is removed only while this holds its
/// lock and the name still leads to it, so a run that opened it meanwhile
/// finds it gone once it has the lock, and must start again with a new
/// one. Links (not followed), other kinds of file and other users' files
/// stay. Returns the files removed.
pub fn sweep_files(matches: impl Fn(&str) -> bool) -> io::Result<Vec<PathBuf>> {
    sweep_entries(Kind::File, matches)
}

/// Removes the entries of [`RUN_DIR`] of `kind` whose name `matches` and
/// whose lock [`lock_entry`] gets, while holding it.
fn sweep_entries(kind: Kind, matches: impl Fn(&str) -> bool) -> io::Result<Vec<PathBuf>> {
    let base = run_dir()?;
    let mut removed = Vec::new();
    for entry in fs::read_dir(base)? {
        let Ok(entry) = entry else { continue };
        // Not followed: a link is a link here (checked again when opened).
        let of_kind = entry.file_type().is_ok_and(|t| match kind {
            Kind::Dir => t.is_dir(),
            Kind::File => t.is_file(),
        });
        if !of_kind || !entry.file_name().to_str().is_some_and(&matches) {
            continue;
        }
        let path = entry.path();
        if let Ok(Some(_held)) = lock_entry(&path, kind) {
            let gone = match kind {
                Kind::Dir => fs::remove_dir_all(&path),
                Kind::File => fs::remove_file(&path),
            };
            if gone.is_ok() {
                removed.push(path);
            }
        }
    }
    Ok(removed)
}

fn valid_purpose(purpose: &str) -> bool {
    (1..=64).contains(&purpose.len())
        && purpose
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// `<purpose>.<random>` as [`PrivateDir::new`] names directories.
fn is_private_name(name: &str) -> bool {
    name.rsplit_once('.').is_some_and(|(purpose, random)| {
        valid_purpose(purpose)
            && random.len() == RANDOM_LEN
            && random.bytes().all(|b| ALPHABET.contains(&b))
    })
}

fn random_bytes(buf: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < buf.len() {
        // SAFETY: getrandom writes at most the given length into the buffer.
        let n =
            unsafe { libc::getrandom(buf[filled..].as_mut_ptr().cast(), buf.len() - filled, 0) };
        if n < 0 {
            let err = io::Error::last_os_error();
            if err.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(err);
        }
        filled += n as usize;
    }
    Ok(())
}

fn random_name() -> io::Result<String> {
    let mut bytes = [0u8; RANDOM_LEN];
    random_bytes(&mut bytes)?;
    // 256 is a multiple of 32: every character equally likely.
    Ok(bytes
        .iter()
        .map(|b| ALPHABET[(*b % 32) as usize] as char)
        .collect())
}

/// `bytes` random bytes from the kernel, as hex: for keys and secrets.
pub fn random_hex(bytes: usize) -> io::Result<String> {
    let mut buf = vec![0u8; bytes];
    random_bytes(&mut buf)?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// A helper process must not outlive linerate, even when linerate is
/// killed (SIGKILL) or crashes.
pub trait DieWithParent {
    /// The child gets SIGKILL when its parent ends (`PR_SET_PDEATHSIG`).
    ///
    /// The kernel sends it when the *thread* that spawned the child ends.
    /// linerate starts its helpers from the thread that runs the command
    /// (the main thread, which lives as long as the process) or, for a
    /// single command, from a thread that waits for it; either lives at
    /// least as long as the helper should.
    ///
    /// The setting survives `exec` (of `ip netns exec`, `sh -c 'exec ...'`,
    /// `unshare`), as none of the helpers is set-user-ID; it does not pass
    /// to the helper's own children: a helper that forks workers (nginx)
    /// needs more (it runs as PID 1 of a PID namespace of its own, see
    /// linerate-goodput's nginx module).
    fn die_with_parent(&mut self) -> &mut Self;
}

impl DieWithParent for Command {
    fn die_with_parent(&mut self) -> &mut Self {
        use std::os::unix::process::CommandExt;
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: prctl and getppid are async-signal-safe and touch only
        // the child.
        unsafe {
            self.pre_exec(move || {
                if libc::prctl(
                    libc::PR_SET_PDEATHSIG,
                    libc::SIGKILL as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                    0 as libc::c_ulong,
                ) != 0
                {
                    return Err(io::Error::last_os_error());
                }
                // linerate ended between the fork and the prctl: no signal
                // will come, so do not start.
                if libc::getppid() != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// Root only (/run/linerate is root's). As every skip: a failure under
    /// LINERATE_REQUIRE_ALL=1 (scripts/test.sh).
    pub(crate) fn root(test: &str) -> bool {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            return true;
        }
        assert!(
            !std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1"),
            "SKIPPED (needs root): {test}; LINERATE_REQUIRE_ALL=1 makes every skip a failure"
        );
        eprintln!("SKIPPED (needs root): {test}");
        false
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    #[test]
    fn names_are_recognised_only_as_made() {
        let name = format!("nginx.{}", random_name().unwrap());
        assert!(is_private_name(&name), "{name}");
        for other in [
            "lab-x.lock",
            "nginx",
            "nginx.abc",
            "nginx.ABCDEFGHIJKL",
            ".abcdefghijkl",
            "a/b.abcdefghijkl",
        ] {
            assert!(!is_private_name(other), "{other}");
        }
        assert_ne!(random_name().unwrap(), random_name().unwrap());
        assert_eq!(random_hex(16).unwrap().len(), 32);
    }

    #[test]
    fn a_private_dir_is_new_root_only_and_removed_on_drop() {
        if !root("a_private_dir_is_new_root_only_and_removed_on_drop") {
            return;
        }
        assert_eq!(mode(Path::new(RUN_DIR)), 0o700);
        let a = PrivateDir::new("test").unwrap();
        let b = PrivateDir::new("test").unwrap();
        assert_ne!(a.path(), b.path());
        for dir in [&a, &b] {
            assert_eq!(dir.path().parent(), Some(Path::new(RUN_DIR)));
            let meta = fs::symlink_metadata(dir.path()).unwrap();
            assert!(meta.is_dir());
            assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o700));
        }
        let sub = a.subdir("www").unwrap();
        assert_eq!(mode(&sub), 0o700);
        assert!(a.subdir("www").is_err(), "an existing subdirectory reused");
        assert_eq!(mode(&a.write("www/64", b"x").unwrap()), 0o600);
        for bad in ["", ".", "..", "../x", "www/../x", "/etc/x", "www/"] {
            assert!(a.write(bad, b"x").is_err(), "{bad}");
        }
        assert!(PrivateDir::new("no.dots").is_err());
        assert!(PrivateDir::new("../up").is_err());
        let path = a.path().to_path_buf();
        drop(a);
        assert!(!path.exists(), "{} left behind", path.display());
    }

    #[test]
    fn files_are_0600_and_never_written_through_a_link_or_over_a_file() {
        if !root("files_are_0600_and_never_written_through_a_link_or_over_a_file") {
            return;
        }
        let dir = PrivateDir::new("test").unwrap();
        let file = dir.write("key", b"secret").unwrap();
        assert_eq!(mode(&file), 0o600);
        assert_eq!(fs::read(&file).unwrap(), b"secret");
        assert!(
            dir.write("key", b"other").is_err(),
            "an existing file reused"
        );
        assert_eq!(fs::read(&file).unwrap(), b"secret");
        // A link planted where a file is to be written: not followed.
        let victim = PrivateDir::new("test").unwrap();
        let target = victim.write("victim", b"unchanged").unwrap();
        std::os::unix::fs::symlink(&target, dir.path().join("nginx.conf")).unwrap();
        assert!(dir.write("nginx.conf", b"overwritten").is_err());
        assert_eq!(fs::read(&target).unwrap(), b"unchanged");
        // Removing the directory removes the link, not its target.
        drop(dir);
        assert_eq!(fs::read(&target).unwrap(), b"unchanged");
    }

    #[test]
    fn sweep_removes_what_ended_runs_left_and_nothing_else() {
        if !root("sweep_removes_what_ended_runs_left_and_nothing_else") {
            return;
        }
        // What a killed run leaves: a private directory nobody holds.
        let stale = Path::new(RUN_DIR).join(format!("test.{}", random_name().unwrap()));
        fs::create_dir(&stale).unwrap();
        fs::write(stale.join("swanctl.conf"), "secret").unwrap();
        // Not linerate's naming: left alone.
        let foreign = Path::new(RUN_DIR).join(format!("test-{}", std::process::id()));
        fs::create_dir_all(&foreign).unwrap();
        // A live one (locked by this process).
        let live = PrivateDir::new("test").unwrap();
        let removed = sweep().unwrap();
        let (foreign_left, stale_left) = (foreign.exists(), stale.exists());
        let _ = fs::remove_dir_all(&foreign);
        let _ = fs::remove_dir_all(&stale);
        // (Another test's PrivateDir::new may have swept it first.)
        assert!(!stale_left, "{removed:?}");
        assert!(!removed.iter().any(|p| p == live.path()), "{removed:?}");
        assert!(live.path().exists());
        assert!(foreign_left);
    }

    #[test]
    fn a_helper_dies_with_the_process_that_started_it() {
        // A shell standing in for linerate starts `sleep` (the helper) with
        // die_with_parent; the shell is killed with SIGKILL.
        let exe = std::env::current_exe().unwrap();
        let mut parent = Command::new(exe)
            .args([
                "--exact",
                "tests::spawn_a_helper_and_wait",
                "--nocapture",
                "--ignored",
            ])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = parent.stdout.take().unwrap();
        let helper = {
            use std::io::Read;
            let mut text = String::new();
            let mut byte = [0u8; 1];
            let start = Instant::now();
            while !text.contains("helper pid ") || !text.ends_with('\n') {
                assert!(start.elapsed() < Duration::from_secs(10), "{text}");
                if out.read(&mut byte).unwrap() == 0 {
                    break;
                }
                text.push(byte[0] as char);
            }
            let pid: i32 = text
                .split("helper pid ")
                .nth(1)
                .and_then(|t| t.trim().parse().ok())
                .unwrap_or_else(|| panic!("no helper pid in {text:?}"));
            pid
        };
        parent.kill().unwrap();
        parent.wait().unwrap();
        let start = Instant::now();
        let gone = loop {
            // A zombie (not yet reaped by init) counts as gone.
            let state = fs::read_to_string(format!("/proc/{helper}/stat")).unwrap_or_default();
            let alive = state
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z'));
            if !alive {
                break true;
            }
            if start.elapsed() > Duration::from_secs(5) {
                break false;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        if !gone {
            // SAFETY: kill on a pid this test started.
            unsafe { libc::kill(helper, libc::SIGKILL) };
        }
        assert!(gone, "the helper {helper} outlived its parent");
    }

    /// Run by the test above in a child process.
    #[test]
    #[ignore = "a part of a_helper_dies_with_the_process_that_started_it"]
    fn spawn_a_helper_and_wait() {
        let mut child = Command::new("sleep")
            .arg("60")
            .die_with_parent()
            .spawn()
            .unwrap();
        println!("helper pid {}", child.id());
        // The parent test kills this process long before sleep ends.
        let _ = child.wait();
    }
}
