//! Records of the named ports a run moved away, so that a killed run's
//! ports can be put back.
//!
//! [`HostSetup::adopt_port`](crate::hosts::HostSetup::adopt_port) moves a
//! user's port into `lr-g<pid>-<tag>` and moves it back when the run ends.
//! A run killed with SIGKILL runs nothing more: its ports stay in that
//! namespace, down, without their addresses. So before the move the run
//! writes down what is needed to put the port back ([`MovedPort`]: the
//! port, the namespace it came from, its [`PortState`], the run's pid and
//! start time) in a file in the root-only `/run/linerate`, and removes the
//! file once the port is back. A later run on the same port and
//! `linerate lab down` put back the ports of records whose run has ended
//! ([`MovedPort::recover`]); a record of a running run is never touched.
//!
//! A run is known by its pid *and* its start time (`/proc/PID/stat`), so a
//! pid the kernel has since given to another process does not keep a
//! record alive.
//!
//! The files are made as the helper crate makes its own: in a directory
//! only root may enter, new (`O_EXCL`, written under a temporary name and
//! linked into place whole), mode 0600, never through a link; a record that
//! is a link or not root's is refused when read.

use crate::netns::ip_in;
use crate::port_state::PortState;
use crate::GoodputError;
use linerate_helper::in_netns_file;
use serde::{Deserialize, Serialize};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// Record files are `RUN_DIR/moved-<namespace>.json`.
const PREFIX: &str = "moved-";
const SUFFIX: &str = ".json";

/// A run, as the kernel knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    pub pid: u32,
    /// Field 22 of `/proc/PID/stat`: clock ticks after boot.
    pub start_time: u64,
}

impl Owner {
    /// This process.
    pub fn me() -> Result<Owner, GoodputError> {
        let pid = std::process::id();
        let start_time = start_time(pid).ok_or_else(|| {
            GoodputError::Setup(format!(
                "could not read /proc/{pid}/stat: is /proc mounted?"
            ))
        })?;
        Ok(Owner { pid, start_time })
    }

    /// Whether the run is still there: the same pid with the same start
    /// time, and not a zombie (which holds no namespace and restores
    /// nothing).
    pub fn alive(&self) -> bool {
        start_time(self.pid) == Some(self.start_time)
    }
}

/// The start time of process `pid`, None if there is none (or a zombie).
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_start_time(&stat)
}

/// Field 22 of a `/proc/PID/stat` line, None for a zombie or dead task.
/// The command name (field 2) may hold spaces and ')', so fields are
/// counted after its last ')'.
fn parse_start_time(stat: &str) -> Option<u64> {
    let (_, rest) = stat.rsplit_once(')')?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (the state), so field 22 is fields[19].
    if matches!(fields.first(), Some(&("Z" | "X" | "x"))) {
        return None;
    }
    fields.get(19)?.parse().ok()
}

/// What is needed to put one moved port back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MovedPort {
    /// The namespace it was moved into (`lr-g<pid>-<tag>`).
    pub moved_to: String,
    /// The namespace it came from, by the inode of its nsfs file (names
    /// can be reused; the inode lives as long as the namespace).
    pub home_netns: u64,
    /// That namespace for a person: "the host's namespace", or its name
    /// under /run/netns.
    pub home_name: String,
    /// The port (its name, and all that the move takes away).
    pub state: PortState,
    /// The run that moved it.
    pub owner: Owner,
}

impl MovedPort {
    /// The record of this process moving port `state.ifname` from the
    /// calling thread's namespace into `moved_to`.
    pub fn new(state: PortState, moved_to: &str) -> Result<MovedPort, GoodputError> {
        let home_netns = own_netns()?;
        Ok(MovedPort {
            moved_to: moved_to.to_string(),
            home_netns,
            home_name: netns_name(home_netns),
            state,
            owner: Owner::me()?,
        })
    }

    /// Where the record is kept.
    pub fn path(&self) -> PathBuf {
        Path::new(linerate_helper::RUN_DIR).join(format!("{PREFIX}{}{SUFFIX}", self.moved_to))
    }

    /// Writes the record, whole or not at all: into a new temporary file,
    /// then linked to its name, which must not exist yet. Returns its path.
    pub fn write(&self) -> Result<PathBuf, GoodputError> {
        let dir = linerate_helper::run_dir()
            .map_err(|e| GoodputError::io(linerate_helper::RUN_DIR, e))?;
        let path = self.path();
        let tmp = dir.join(format!(".{PREFIX}{}.{}.tmp", self.moved_to, self.owner.pid));
        let io = |what: &str, e| GoodputError::io(format!("{what} {}", path.display()), e);
        let json = serde_json::to_vec_pretty(self).expect("a record serialises");
        let result = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&tmp)
                .map_err(|e| io("writing the record", e))?;
            file.set_permissions(fs::Permissions::from_mode(0o600))
                .and_then(|()| file.write_all(&json))
                .and_then(|()| file.sync_all())
                .map_err(|e| io("writing the record", e))?;
            // link(2) never replaces: an earlier run's record stays as it is.
            fs::hard_link(&tmp, &path).map_err(|e| io("placing the record", e))
        })();
        let _ = fs::remove_file(&tmp);
        result.map(|()| path)
    }

    /// Reads the record at `path`, refusing a link, anything but a regular
    /// file, a file not owned by root, or one others may write.
    pub fn read(path: &Path) -> Result<MovedPort, GoodputError> {
        let refuse = |why: &str| {
            GoodputError::Setup(format!(
                "{} is {why}: linerate will not trust it as a record of a moved port; look at it and remove it",
                path.display()
            ))
        };
        let file = match OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(path)
        {
            Ok(f) => f,
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(refuse("a link")),
            Err(e) => return Err(GoodputError::io(format!("reading {}", path.display()), e)),
        };
        let meta = file
            .metadata()
            .map_err(|e| GoodputError::io(format!("reading {}", path.display()), e))?;
        if !meta.is_file() {
            return Err(refuse("not a regular file"));
        }
        if meta.uid() != 0 {
            return Err(refuse("not owned by root"));
        }
        if meta.mode() & 0o022 != 0 {
            return Err(refuse("writable by others"));
        }
        serde_json::from_reader(std::io::BufReader::new(file))
            .map_err(|e| refuse(&format!("not a record linerate wrote ({e})")))
    }

    /// Removes the record (the port is back, or nothing is left to do).
    pub fn forget(&self) {
        let _ = fs::remove_file(self.path());
    }

    /// One line for a person: which port, where it is, whose it was.
    pub fn describe(&self) -> String {
        format!(
            "port {} stranded in {} by ended run {} (from {})",
            self.state.ifname, self.moved_to, self.owner.pid, self.home_name
        )
    }

    /// Puts the port back into the namespace it came from with the state
    /// it had, deletes the run's namespace and removes the record. For
    /// records whose owner has ended (the caller checks). A port that
    /// exists nowhere any more (a veth deleted with its namespace) has
    /// nothing to put back: the record still goes, the error says so.
    pub fn recover(&self) -> Result<(), GoodputError> {
        let ifname = self.state.ifname.as_str();
        let home = open_netns(self.home_netns).ok_or_else(|| {
            GoodputError::Setup(format!(
                "the namespace port {ifname} came from ({}) is gone: it cannot be put back; remove {} and move the port by hand ('ip -n {} link set dev {ifname} netns NS')",
                self.home_name,
                self.path().display(),
                self.moved_to
            ))
        })?;
        // In the home namespace: `ip` started from this thread is there
        // too, and the thread's id names it to `ip link set netns`.
        let result = in_netns_file(&home, &self.home_name, || Ok(self.put_back()))
            .unwrap_or_else(|e| Err(Stuck(e)));
        let result = match result {
            Err(Stuck(e)) => return Err(e),
            Err(Done(e)) => Err(e),
            Ok(()) => Ok(()),
        };
        if Path::new("/run/netns").join(&self.moved_to).exists() {
            ip_in(None, &["netns", "del", &self.moved_to])?;
        }
        self.forget();
        result
    }

    /// Moves the port into the calling thread's namespace (its home) and
    /// restores its state.
    fn put_back(&self) -> Result<(), Failed> {
        let ifname = self.state.ifname.as_str();
        let present = |ns: Option<&str>| ip_in(ns, &["link", "show", "dev", ifname]).is_ok();
        let moved_ns = Path::new("/run/netns").join(&self.moved_to).exists();
        if moved_ns && present(Some(&self.moved_to)) {
            // SAFETY: gettid has no preconditions.
            let tid = unsafe { libc::gettid() }.to_string();
            // Failing here leaves the namespace and the record as they
            // are: deleting the namespace would lose the port's state.
            ip_in(
                Some(&self.moved_to),
                &["link", "set", "dev", ifname, "netns", &tid],
            )
            .map_err(Stuck)?;
        }
        if !present(None) {
            return Err(Done(GoodputError::Setup(format!(
                "port {ifname} is neither in {} nor back in {}: nothing to put back (a veth goes with its namespace)",
                self.moved_to, self.home_name
            ))));
        }
        // Also when the port was home already (the run was killed before
        // the move, or half-way through putting it back): restoring twice
        // does no harm.
        self.state.restore().map_err(Done)
    }
}

/// How a recovery failed: with the port still in the run's namespace
/// (keep everything), or after it (nothing more to do).
enum Failed {
    Stuck(GoodputError),
    Done(GoodputError),
}
use Failed::{Done, Stuck};

/// Every record in /run/linerate, read; refused ones as errors.
pub fn all() -> Vec<(PathBuf, Result<MovedPort, GoodputError>)> {
    let Ok(entries) = fs::read_dir(linerate_helper::RUN_DIR) else {
        return Vec::new();
    };
    let mut out: Vec<_> = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(PREFIX) && n.ends_with(SUFFIX))
        })
        .map(|e| {
            let path = e.path();
            let record = MovedPort::read(&path);
            (path, record)
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The pid in the name of a record's temporary file (see
/// [`MovedPort::write`]), `.moved-<namespace>.<pid>.tmp`.
fn temporary_owner(name: &str) -> Option<u32> {
    let rest = name.strip_prefix('.')?.strip_prefix(PREFIX)?;
    rest.strip_suffix(".tmp")?.rsplit_once('.')?.1.parse().ok()
}

/// Removes the temporary files of runs killed while writing a record (the
/// instant between creating one and linking it into place). A file whose
/// pid runs stays: it may be that run's, still writing.
fn sweep_temporaries() {
    let Ok(entries) = fs::read_dir(linerate_helper::RUN_DIR) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(temporary_owner) else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// The records whose run has ended: ports to put back. (Temporary files
/// that ended runs left are removed on the way.)
pub fn stranded() -> Vec<MovedPort> {
    sweep_temporaries();
    all()
        .into_iter()
        .filter_map(|(_, r)| r.ok())
        .filter(|r| !r.owner.alive())
        .collect()
}

/// The namespaces that records say hold a moved port: those of running
/// runs (which put their ports back when they end) and those whose port
/// could not be put back. `lab down --all` must not delete them: that
/// would lose the port's state, and a veth with its namespace.
pub fn recorded() -> Vec<String> {
    all()
        .into_iter()
        .filter_map(|(_, r)| r.ok())
        .map(|r| r.moved_to)
        .collect()
}

/// Before a run moves `ifnames` out of this namespace: puts back any of
/// them an ended run left stranded, with a note on stderr. What cannot be
/// put back is a warning: the run then finds the port missing and says so.
pub fn recover_for(ifnames: &[&str]) -> Result<(), GoodputError> {
    let here = own_netns()?;
    for record in stranded() {
        if record.home_netns == here && ifnames.contains(&record.state.ifname.as_str()) {
            eprintln!(
                "linerate: putting back port {} that ended run {} left in {}",
                record.state.ifname, record.owner.pid, record.moved_to
            );
            if let Err(e) = record.recover() {
                eprintln!("linerate: warning: {e}");
            }
        }
    }
    Ok(())
}

/// The inode of the calling thread's network namespace.
fn own_netns() -> Result<u64, GoodputError> {
    fs::metadata("/proc/thread-self/ns/net")
        .map(|m| m.ino())
        .map_err(|e| GoodputError::io("reading /proc/thread-self/ns/net", e))
}

/// The places a namespace can be found by: the host's (pid 1's), this
/// thread's, and the named ones.
fn netns_candidates() -> Vec<(PathBuf, String)> {
    let mut out = vec![
        (
            PathBuf::from("/proc/1/ns/net"),
            "the host's namespace".to_string(),
        ),
        (
            PathBuf::from("/proc/thread-self/ns/net"),
            "linerate's namespace".to_string(),
        ),
    ];
    if let Ok(entries) = fs::read_dir("/run/netns") {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            out.push((e.path(), format!("namespace {name}")));
        }
    }
    out
}

/// A name for namespace `inode`, for messages.
fn netns_name(inode: u64) -> String {
    netns_candidates()
        .into_iter()
        // "linerate's namespace" means nothing to a later run: a named
        // one, or the host's, is better.
        .filter(|(p, _)| p != Path::new("/proc/thread-self/ns/net"))
        .find(|(p, _)| fs::metadata(p).is_ok_and(|m| m.ino() == inode))
        .map_or_else(|| format!("namespace inode {inode}"), |(_, name)| name)
}

/// Namespace `inode` opened, to enter it; None if it no longer exists (or
/// is reachable by no path linerate knows).
fn open_netns(inode: u64) -> Option<File> {
    netns_candidates().into_iter().find_map(|(p, _)| {
        let file = File::open(&p).ok()?;
        // Checked on the open file: the path may change meanwhile.
        (file.metadata().ok()?.ino() == inode).then_some(file)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn sample() -> MovedPort {
        MovedPort {
            moved_to: "lr-g4242-a".into(),
            home_netns: 4026531840,
            home_name: "the host's namespace".into(),
            state: PortState {
                ifname: "enp1s0f0".into(),
                up: true,
                mtu: 9000,
                master: Some("br0".into()),
                addresses: vec![vec!["10.99.0.1/24".into(), "label".into(), "x:1".into()]],
                routes: vec![vec!["-4".into(), "10.98.0.0/16".into()]],
                sysctls: vec![(
                    "/proc/sys/net/ipv4/conf/enp1s0f0/rp_filter".into(),
                    "2".into(),
                )],
            },
            owner: Owner {
                pid: 4242,
                start_time: 123456,
            },
        }
    }

    /// A scratch directory of this test, removed on drop.
    struct Scratch(PathBuf);
    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let dir = std::env::temp_dir().join(format!("lr-moved-{tag}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&dir);
            fs::create_dir(&dir).unwrap();
            Scratch(dir)
        }
    }
    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn is_root() -> bool {
        // SAFETY: geteuid has no preconditions.
        unsafe { libc::geteuid() == 0 }
    }

    #[test]
    fn a_temporary_file_names_its_writer() {
        assert_eq!(
            temporary_owner(&format!(".{PREFIX}lr-g123-a.4567.tmp")),
            Some(4567)
        );
        for other in [
            format!("{PREFIX}lr-g123-a{SUFFIX}"),
            format!(".{PREFIX}lr-g123-a.tmp"),
            format!(".{PREFIX}lr-g123-a.x.tmp"),
            ".other.1.tmp".to_string(),
        ] {
            assert_eq!(temporary_owner(&other), None, "{other}");
        }
    }

    #[test]
    fn temporary_files_of_ended_runs_are_swept_and_a_running_one_s_kept() {
        if !is_root() {
            // /run/linerate is root's; CI (root, LINERATE_REQUIRE_ALL=1) runs it.
            assert_ne!(
                std::env::var("LINERATE_REQUIRE_ALL").as_deref(),
                Ok("1"),
                "SKIPPED (not root) where every test must run"
            );
            return;
        }
        let dir = linerate_helper::run_dir().unwrap();
        // A pid that has ended: a child waited for.
        let ended = std::process::Command::new("true")
            .spawn()
            .and_then(|mut c| c.wait().map(|_| c.id()))
            .unwrap();
        let ns = format!("lr-g{}-sweep", std::process::id());
        let dead = dir.join(format!(".{PREFIX}{ns}.{ended}.tmp"));
        let live = dir.join(format!(".{PREFIX}{ns}.{}.tmp", std::process::id()));
        fs::write(&dead, "{").unwrap();
        fs::write(&live, "{").unwrap();
        sweep_temporaries();
        let (dead_left, live_left) = (dead.exists(), live.exists());
        let _ = fs::remove_file(&dead);
        let _ = fs::remove_file(&live);
        assert!(!dead_left, "{} left", dead.display());
        assert!(
            live_left,
            "{} removed while its run goes on",
            live.display()
        );
    }

    #[test]
    fn a_record_reads_back_as_itself() {
        let r = sample();
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<MovedPort>(&text).unwrap(), r);
        assert!(serde_json::from_str::<MovedPort>("{}").is_err());
        assert_eq!(
            r.path(),
            Path::new("/run/linerate/moved-lr-g4242-a.json"),
            "one record per moved-to namespace"
        );
    }

    #[test]
    fn start_times_come_from_field_22_and_zombies_have_none() {
        let line = |name: &str, state: &str| {
            format!("77 ({name}) {state} 1 77 77 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 98765 1000 200")
        };
        assert_eq!(parse_start_time(&line("linerate", "S")), Some(98765));
        // A command name with spaces and ')' in it.
        assert_eq!(parse_start_time(&line("a) b (c", "R")), Some(98765));
        assert_eq!(parse_start_time(&line("linerate", "Z")), None);
        assert_eq!(parse_start_time("77 (x) S 1"), None);
        // This process is alive; the same pid with another start time is not.
        let me = Owner::me().unwrap();
        assert!(me.alive());
        let other = Owner {
            start_time: me.start_time + 1,
            ..me
        };
        assert!(!other.alive());
    }

    #[test]
    fn a_record_that_is_a_link_or_not_root_s_is_refused() {
        let dir = Scratch::new("refuse");
        let good = dir.0.join("good.json");
        fs::write(&good, serde_json::to_vec(&sample()).unwrap()).unwrap();
        fs::set_permissions(&good, fs::Permissions::from_mode(0o600)).unwrap();
        let link = dir.0.join("link.json");
        symlink(&good, &link).unwrap();
        let err = MovedPort::read(&link).unwrap_err().to_string();
        assert!(err.contains("is a link"), "{err}");
        let sub = dir.0.join("dir.json");
        fs::create_dir(&sub).unwrap();
        let err = MovedPort::read(&sub).unwrap_err().to_string();
        assert!(err.contains("not a regular file"), "{err}");
        if is_root() {
            assert_eq!(MovedPort::read(&good).unwrap(), sample());
            fs::set_permissions(&good, fs::Permissions::from_mode(0o666)).unwrap();
            let err = MovedPort::read(&good).unwrap_err().to_string();
            assert!(err.contains("writable by others"), "{err}");
            fs::set_permissions(&good, fs::Permissions::from_mode(0o600)).unwrap();
            std::os::unix::fs::chown(&good, Some(65534), Some(65534)).unwrap();
        }
        // Not root's: another user's (as root), or this user's (as anyone else).
        let err = MovedPort::read(&good).unwrap_err().to_string();
        assert!(err.contains("not owned by root"), "{err}");
        let junk = dir.0.join("junk.json");
        fs::write(&junk, "{\"moved_to\": 1}").unwrap();
        fs::set_permissions(&junk, fs::Permissions::from_mode(0o600)).unwrap();
        if is_root() {
            let err = MovedPort::read(&junk).unwrap_err().to_string();
            assert!(err.contains("not a record linerate wrote"), "{err}");
        }
    }

    #[test]
    fn a_record_is_written_whole_0600_and_never_over_another() {
        if !is_root() {
            // /run/linerate is root's. As every skip: a failure under
            // LINERATE_REQUIRE_ALL=1 (scripts/test.sh).
            assert!(
                !std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1"),
                "SKIPPED (needs root); LINERATE_REQUIRE_ALL=1 makes every skip a failure"
            );
            eprintln!(
                "SKIPPED (needs root): a_record_is_written_whole_0600_and_never_over_another"
            );
            return;
        }
        let mut r = sample();
        r.moved_to = format!("lr-gtest{}-a", std::process::id());
        // A live owner: no recovery anywhere may take it meanwhile.
        r.owner = Owner::me().unwrap();
        let path = r.write().unwrap();
        let meta = fs::symlink_metadata(&path).unwrap();
        let second = r.write();
        let back = MovedPort::read(&path);
        let listed = recorded().contains(&r.moved_to);
        r.forget();
        assert!(meta.is_file());
        assert_eq!((meta.uid(), meta.mode() & 0o7777), (0, 0o600));
        assert!(second.is_err(), "an existing record was replaced");
        assert_eq!(back.unwrap(), r);
        assert!(listed);
        assert!(!path.exists());
        let leftovers: Vec<_> = fs::read_dir(linerate_helper::RUN_DIR)
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains(&r.moved_to))
            .collect();
        assert!(leftovers.is_empty(), "{leftovers:?}");
    }
}
