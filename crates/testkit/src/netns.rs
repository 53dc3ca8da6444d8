//! A network namespace a test owns: made with `ip netns add` under a name
//! no other test uses, deleted when dropped.

use crate::command::run;
use std::fs::File;
use std::os::fd::AsFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A network namespace this test made; dropping it deletes it, and with it
/// every interface inside (a veth pair goes when either end's namespace
/// goes), also while a failing test unwinds.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

/// `{stem}-{pid}-{n}`: the process id keeps apart the test binaries that
/// run at once, the counter the tests of one binary (libtest runs them in
/// parallel by default).
pub(crate) fn unique_name(stem: &str) -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    format!("{stem}-{}-{n}", std::process::id())
}

impl Netns {
    /// Adds namespace `name`. The guard exists only once `ip netns add`
    /// succeeded, so a name that was somebody else's is never deleted.
    pub(crate) fn add(name: String) -> Netns {
        run(&["ip", "netns", "add", &name]);
        Netns { name }
    }

    /// The name, as `ip netns` and the ports' `netns` argument take it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME args..` (configuring links and addresses inside)
    /// and returns its output; panics when it fails.
    pub fn ip(&self, args: &[&str]) -> String {
        run(&[&["ip", "-n", &self.name], args].concat())
    }

    /// Runs a program inside (`ip netns exec NAME args..`) and returns its
    /// output; panics when it fails.
    pub fn exec(&self, args: &[&str]) -> String {
        run(&[&["ip", "netns", "exec", &self.name], args].concat())
    }

    /// A file as seen from inside, trimmed: /sys/class/net and /proc/net
    /// show the namespace of whoever reads them.
    pub fn read(&self, path: &str) -> String {
        self.exec(&["cat", path]).trim().to_string()
    }

    /// Moves the calling thread into this namespace until the returned
    /// guard drops, for code that opens sockets or attaches programs where
    /// the interfaces are. The guard borrows the namespace, so the thread
    /// is always back out before the namespace is deleted.
    pub fn enter(&self) -> Entered<'_> {
        let home = File::open("/proc/thread-self/ns/net").expect("opening this thread's namespace");
        let target = File::open(format!("/run/netns/{}", self.name))
            .unwrap_or_else(|e| panic!("opening namespace {}: {e}", self.name));
        nix::sched::setns(target.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| panic!("entering namespace {}: {e}", self.name));
        Entered { netns: self, home }
    }
}

impl Drop for Netns {
    /// Never panics: the test may be unwinding already, and a second panic
    /// would abort the test binary and hide the first one's message.
    fn drop(&mut self) {
        match Command::new("ip")
            .args(["netns", "del", &self.name])
            .output()
        {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!(
                "warning: ip netns del {} failed: {}",
                self.name,
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => eprintln!("warning: running ip netns del {}: {e}", self.name),
        }
    }
}

/// The calling thread inside a [`Netns`]; dropping it returns the thread to
/// the namespace it came from (setns changes only the calling thread).
#[derive(Debug)]
pub struct Entered<'a> {
    netns: &'a Netns,
    home: File,
}

impl Drop for Entered<'_> {
    /// Never panics (see [`Netns`]'s drop). Returning cannot reasonably
    /// fail (the thread came from there); if it did, the thread would stay
    /// inside, which only this test's own thread sees: libtest gives every
    /// test a thread of its own.
    fn drop(&mut self) {
        if let Err(e) = nix::sched::setns(self.home.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET) {
            eprintln!(
                "warning: returning from namespace {} failed: {e}",
                self.netns.name
            );
        }
    }
}
