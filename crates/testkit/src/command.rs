//! Running the system tools (iproute2, sysctl, ethtool) a fixture or a
//! test needs. `ip` goes through linerate-helper's runner, as linerate's
//! own code does: the same program (found in PATH or the sbin
//! directories), the same `ip [-n NS] args` command line.

use linerate_helper::{ip_path, RunError};
use std::ffi::OsStr;
use std::process::Command;

/// Runs `args[0]` with the rest as its arguments and returns its standard
/// output; panics with its standard error when it fails, so a fixture that
/// could not be built fails the test that asked for it, saying why.
pub fn run(args: &[&str]) -> String {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("running {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `ip [-n ns] args...` and returns its standard output; panics with
/// the command line and all its standard error when it fails.
pub fn ip(ns: Option<&str>, args: &[&str]) -> String {
    try_ip(ns, args).unwrap_or_else(|e| match e {
        RunError::Failed {
            command,
            status,
            stderr,
        } => panic!("'{command}' failed ({status}): {}", stderr.trim_end()),
        other => panic!("{other}"),
    })
}

/// [`ip`] that returns the failure instead of panicking: for a test that
/// expects one (`RunError::Failed`: it ran and exited non-zero) or does not
/// mind one (a clean-up).
pub fn try_ip(ns: Option<&str>, args: &[&str]) -> Result<String, RunError> {
    linerate_helper::ip(ns, args)
}

/// `ip args...` as a [`Command`] to spawn and keep rather than wait for (a
/// daemon under `ip netns exec`, a run the test signals), with the program
/// [`ip`] runs. Panics when iproute2 is missing.
pub fn ip_command<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>) -> Command {
    let program = ip_path().unwrap_or_else(|| panic!("{}", RunError::Missing { program: "ip" }));
    let mut command = Command::new(program);
    command.args(args);
    command
}
