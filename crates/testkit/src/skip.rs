//! Skipping a test that cannot run here, loudly, and never in CI.

/// True when the process runs as root, which namespaces and veth pairs need.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Says loudly that (part of) a test is skipped and why, e.g.
/// `skip("(needs root): name")` prints `SKIPPED (needs root): name`. Under
/// `LINERATE_REQUIRE_ALL=1` (exported by scripts/test.sh, as in CI) a skip
/// is a failure instead: the test panics with the reason, so CI never
/// passes a test that did not run.
pub fn skip(reason: &str) {
    if std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("SKIPPED {reason}; LINERATE_REQUIRE_ALL=1 makes every skip a failure: provide what the test needs");
    }
    eprintln!("SKIPPED {reason}");
}
