//! A network namespace a test owns: made with `ip netns add` under a name
//! no other test uses, deleted when dropped; and code run inside any named
//! namespace ([`run_in_netns`], [`spawn_in_netns`]).

use crate::command::{ip, try_ip};
use linerate_helper::NetnsError;
use std::fs::File;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::JoinHandle;

/// Runs `f` on a thread of its own inside network namespace `ns` (a name
/// under /run/netns) and returns what it returns: sockets it makes stay in
/// that namespace, whichever thread uses them after. The entry is
/// linerate-helper's [`in_netns`](linerate_helper::in_netns); the calling
/// thread never moves, also when `f` panics (the panic goes on in the
/// caller). Panics when the namespace cannot be entered.
pub fn run_in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> T {
    let entered = std::thread::scope(|s| {
        s.spawn(|| linerate_helper::in_netns(ns, || Ok::<T, NetnsError>(f())))
            .join()
    });
    match entered {
        Ok(Ok(value)) => value,
        Ok(Err(e)) => panic!("running a test's code in {ns}: {e}"),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// [`run_in_netns`] in the background: `f` starts on a new thread inside `ns`
/// (a server the test then talks to) and the thread is returned to join.
/// Panics here, not on that thread, when the namespace does not exist.
pub fn spawn_in_netns<T: Send + 'static>(
    ns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> JoinHandle<T> {
    let path = format!("/run/netns/{ns}");
    let target = File::open(&path).unwrap_or_else(|e| panic!("opening namespace {path}: {e}"));
    let what = format!("namespace {ns}");
    std::thread::spawn(move || {
        linerate_helper::in_netns_file(&target, &what, || Ok::<T, NetnsError>(f()))
            .unwrap_or_else(|e| panic!("running a test's code in {what}: {e}"))
    })
}

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
        ip(None, &["netns", "add", &name]);
        Netns { name }
    }

    /// The name, as `ip netns` and the ports' `netns` argument take it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `ip -n NAME args..` (configuring links and addresses inside)
    /// and returns its output; panics when it fails.
    pub fn ip(&self, args: &[&str]) -> String {
        ip(Some(&self.name), args)
    }

    /// Runs a program inside (`ip netns exec NAME args..`) and returns its
    /// output; panics when it fails.
    pub fn exec(&self, args: &[&str]) -> String {
        ip(None, &[&["netns", "exec", &self.name], args].concat())
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
        if let Err(e) = try_ip(None, &["netns", "del", &self.name]) {
            eprintln!("warning: {e}");
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
