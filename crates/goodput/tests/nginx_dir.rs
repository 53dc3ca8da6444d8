//! `--server nginx` works in a directory of its own that no other user can
//! have prepared: a directory planted by another user at the name linerate
//! once used (`$TMPDIR/linerate-nginx-<pid>`), with `nginx.conf` linked to a
//! root-owned file, is neither used nor followed; the directory nginx runs
//! in is new, root's only (0700, files 0600), and gone with nginx after.
//! Root only, needs nginx (scripts/setup.sh installs it).

use linerate_goodput::nginx::Nginx;
use std::io::{Read, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// As every skip: a failure under LINERATE_REQUIRE_ALL=1 (scripts/test.sh).
fn skip(reason: &str) {
    if std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("SKIPPED {reason}; LINERATE_REQUIRE_ALL=1 makes every skip a failure: provide what the test needs");
    }
    eprintln!("SKIPPED {reason}");
}

/// Removes what it holds when dropped, also when the test fails.
struct Cleanup(Vec<PathBuf>);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::fs::remove_dir_all(p);
            let _ = std::fs::remove_file(p);
        }
    }
}

/// The `-p DIR` of every nginx master this process started (its child, or
/// its grandchild under `unshare`), from the title nginx gives itself.
fn nginx_dirs_of_this_process() -> Vec<PathBuf> {
    let me = std::process::id().to_string();
    let parent = |pid: &str| -> Option<String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        stat.rsplit_once(") ")?
            .1
            .split_whitespace()
            .nth(1)
            .map(str::to_string)
    };
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().filter_map(|e| e.ok()) {
        let pid = entry.file_name().to_string_lossy().into_owned();
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let title = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if !title.starts_with("nginx: master process") {
            continue;
        }
        let up = parent(&pid);
        let mine = up.as_deref() == Some(me.as_str())
            || up.and_then(|p| parent(&p)).as_deref() == Some(me.as_str());
        if let (true, Some(dir)) = (mine, title.split(" -p ").nth(1)) {
            dirs.push(PathBuf::from(dir.split_whitespace().next().unwrap()));
        }
    }
    dirs
}

fn get(port: u16, path: &str) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

#[test]
fn nginx_never_uses_a_planted_directory_and_keeps_its_own_private() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        skip("(needs root): nginx_never_uses_a_planted_directory_and_keeps_its_own_private");
        return;
    }
    if linerate_helper::find_tool("nginx").is_none() {
        skip("(nginx not installed; scripts/setup.sh installs it): nginx_never_uses_a_planted_directory_and_keeps_its_own_private");
        return;
    }
    let pid = std::process::id();
    // A root-owned file another user would like overwritten.
    let victim = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("victim-{pid}"));
    // That user's directory at the predictable name, owned by them
    // (nobody), nginx.conf a link to the victim.
    let planted = std::env::temp_dir().join(format!("linerate-nginx-{pid}"));
    let _cleanup = Cleanup(vec![victim.clone(), planted.clone()]);
    std::fs::write(&victim, "precious\n").unwrap();
    std::fs::create_dir(&planted).unwrap();
    std::fs::create_dir(planted.join("www")).unwrap();
    std::os::unix::fs::symlink(&victim, planted.join("nginx.conf")).unwrap();
    for p in [planted.clone(), planted.join("www")] {
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::os::unix::fs::lchown(planted.join("nginx.conf"), Some(65534), Some(65534)).unwrap();

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}").parse().unwrap();
    let server = Nginx::start(None, listen, &[100]).expect("nginx starts");
    let reply = get(port, "/100");
    let dirs = nginx_dirs_of_this_process();
    let victim_after = std::fs::read_to_string(&victim).unwrap();
    let planted_after: Vec<_> = std::fs::read_dir(&planted)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let www_after = std::fs::read_dir(planted.join("www")).unwrap().count();

    assert_eq!(victim_after, "precious\n", "a planted link was followed");
    assert_eq!(planted_after.len(), 2, "the planted directory was used");
    assert_eq!(www_after, 0, "objects written into the planted directory");
    assert!(reply.starts_with(b"HTTP/1.1 200"), "{reply:?}");
    // Object bytes are i % 251: the last of 100 is 99.
    assert!(reply.ends_with(&[99u8]), "the object's last byte");
    assert_eq!(dirs.len(), 1, "one nginx master of this process: {dirs:?}");
    let dir = &dirs[0];
    assert_ne!(dir, &planted);
    let meta = std::fs::symlink_metadata(dir).unwrap();
    assert!(meta.is_dir());
    assert_eq!(
        (meta.uid(), meta.mode() & 0o7777),
        (0, 0o700),
        "{}",
        dir.display()
    );
    for file in ["nginx.conf", "www/100"] {
        assert_eq!(mode(&dir.join(file)), 0o600, "{file}");
    }

    drop(server);
    let start = Instant::now();
    while !nginx_dirs_of_this_process().is_empty() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(nginx_dirs_of_this_process().is_empty(), "nginx still runs");
    assert!(!dir.exists(), "{} left behind", dir.display());
}
