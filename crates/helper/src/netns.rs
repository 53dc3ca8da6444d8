//! Entering a network namespace for the time a call takes.
//!
//! A socket stays in the namespace it was created in, so linerate opens
//! each socket of a lab port inside the port's namespace and then returns
//! to its own: one process drives ports in several namespaces. `setns`
//! changes the namespace of the calling thread only; these functions always
//! switch back, also on error, so the thread goes on working in linerate's
//! own namespace.

use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};

/// Where iproute2 keeps named namespaces (`ip netns add` bind-mounts them
/// there).
const NETNS_RUN_DIR: &str = "/run/netns";

/// The step of entering a namespace that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NetnsStep {
    /// Opening `/run/netns/NAME`: no such namespace.
    Open,
    /// Opening the calling thread's own namespace, to come back to.
    Home,
    /// `setns` into the namespace.
    Enter,
}

/// Why [`in_netns`] or [`in_netns_file`] could not run its function. Each
/// crate words it in its own error type (`From<NetnsError>`).
#[derive(Debug)]
pub struct NetnsError {
    pub step: NetnsStep,
    /// The namespace's name under /run/netns; None for [`in_netns_file`].
    pub name: Option<String>,
    /// The namespace as messages name it: "namespace NAME", or
    /// [`in_netns_file`]'s `what`.
    pub what: String,
    pub error: io::Error,
}

impl NetnsError {
    /// The name when there is one, else `what`.
    pub fn name_or_what(&self) -> &str {
        self.name.as_deref().unwrap_or(&self.what)
    }
}

impl fmt::Display for NetnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.step {
            NetnsStep::Open => write!(
                f,
                "network namespace '{}' not found: list them with 'ip netns list'",
                self.name_or_what()
            ),
            NetnsStep::Home => write!(
                f,
                "opening linerate's own network namespace: {}",
                self.error
            ),
            NetnsStep::Enter => write!(f, "entering {}: {}", self.what, self.error),
        }
    }
}

impl std::error::Error for NetnsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}

/// Runs `f` with the calling thread inside network namespace `name` (a
/// file under /run/netns, as `ip netns add` makes), then switches back.
/// The caller's error type says how a failure to get there reads
/// (`E: From<NetnsError>`).
pub fn in_netns<T, E: From<NetnsError>>(
    name: &str,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let target = File::open(format!("{NETNS_RUN_DIR}/{name}")).map_err(|error| NetnsError {
        step: NetnsStep::Open,
        name: Some(name.to_string()),
        what: format!("namespace {name}"),
        error,
    })?;
    enter(&target, Some(name), &format!("namespace {name}"), f)
}

/// [`in_netns`] for `Some` namespace; `f` in the current one for None.
pub fn maybe_in_netns<T, E: From<NetnsError>>(
    name: Option<&str>,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    match name {
        Some(name) => in_netns(name, f),
        None => f(),
    }
}

/// Runs `f` with the calling thread inside the namespace of nsfs file
/// `target` (`what` names it in errors): for a namespace known by no name,
/// such as the host's (`/proc/1/ns/net`).
pub fn in_netns_file<T, E: From<NetnsError>>(
    target: &File,
    what: &str,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    enter(target, None, what, f)
}

fn enter<T, E: From<NetnsError>>(
    target: &File,
    name: Option<&str>,
    what: &str,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<T, E> {
    let failed = |step, error| NetnsError {
        step,
        name: name.map(str::to_string),
        what: what.to_string(),
        error,
    };
    let home = File::open("/proc/thread-self/ns/net").map_err(|e| failed(NetnsStep::Home, e))?;
    setns(target.as_fd()).map_err(|e| failed(NetnsStep::Enter, e))?;
    let result = f();
    // Coming back cannot reasonably fail (we came from there); if it did,
    // this thread would go on in the wrong namespace, so stop hard.
    setns(home.as_fd()).expect("returning to linerate's own network namespace");
    result
}

/// Moves the calling thread into the network namespace of `fd`.
fn setns(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: setns on a descriptor borrowed for the call; it changes the
    // calling thread's network namespace only.
    if unsafe { libc::setns(fd.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Failed(NetnsError);

    impl From<NetnsError> for Failed {
        fn from(e: NetnsError) -> Failed {
            Failed(e)
        }
    }

    #[test]
    fn a_missing_namespace_fails_before_f_runs() {
        let mut ran = false;
        let err = in_netns("lr-never-created-namespace", || {
            ran = true;
            Ok::<_, Failed>(())
        })
        .unwrap_err()
        .0;
        assert!(!ran);
        assert_eq!(err.step, NetnsStep::Open);
        assert_eq!(err.name_or_what(), "lr-never-created-namespace");
        assert_eq!(
            err.to_string(),
            "network namespace 'lr-never-created-namespace' not found: list them with 'ip netns list'"
        );
    }

    #[test]
    fn none_runs_f_here_and_its_error_passes_through() {
        let here = std::fs::read_link("/proc/thread-self/ns/net").unwrap();
        let seen = maybe_in_netns(None, || {
            Ok::<_, Failed>(std::fs::read_link("/proc/thread-self/ns/net").unwrap())
        })
        .unwrap();
        assert_eq!(seen, here);
        let err = maybe_in_netns(None, || -> Result<(), Failed> {
            Err(Failed(NetnsError {
                step: NetnsStep::Enter,
                name: None,
                what: "f's own".into(),
                error: io::Error::other("x"),
            }))
        })
        .unwrap_err();
        assert_eq!(err.0.what, "f's own");
    }

    #[test]
    fn entering_by_name_or_file_comes_back() {
        if !crate::tests::root("entering_by_name_or_file_comes_back") {
            return;
        }
        let name = format!("lr-helper-test-{}", std::process::id());
        crate::ip(None, &["netns", "add", &name]).unwrap();
        let id = |path: &str| std::fs::read_link(path).unwrap();
        let here = id("/proc/thread-self/ns/net");
        let seen = in_netns(&name, || Ok::<_, Failed>(id("/proc/thread-self/ns/net")));
        let inside = File::open(format!("{NETNS_RUN_DIR}/{name}")).unwrap();
        let by_file = in_netns_file(&inside, "the test's namespace", || {
            Ok::<_, Failed>(id("/proc/thread-self/ns/net"))
        });
        let back = id("/proc/thread-self/ns/net");
        drop(inside);
        let _ = crate::ip(None, &["netns", "del", &name]);
        let (seen, by_file) = (seen.unwrap(), by_file.unwrap());
        assert_ne!(seen, here);
        assert_eq!(by_file, seen);
        assert_eq!(back, here);
    }
}
