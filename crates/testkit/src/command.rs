//! Running the system tools (iproute2, sysctl, ethtool) a fixture needs.

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
