//! The runners every test uses: `run_in_netns` runs code inside a namespace
//! and leaves the calling thread where it was, also when the code panics;
//! `ip` panics with the command line and stderr, `try_ip` returns the
//! failure. Needs root and iproute2 for the namespace parts; without root
//! they print "SKIPPED (needs root): ..." and pass, with
//! `LINERATE_REQUIRE_ALL=1` (scripts/test.sh) they fail.

use linerate_testkit::{
    ip, ip_command, is_root, run_in_netns, skip, spawn_in_netns, try_ip, RunError, Veth,
};

/// The identity of this thread's network namespace.
fn own_netns() -> std::path::PathBuf {
    std::fs::read_link("/proc/thread-self/ns/net").unwrap()
}

#[test]
fn ip_returns_stdout_or_names_the_failure() {
    assert!(ip(None, &["-o", "link", "show", "dev", "lo"]).contains("lo"));
    match try_ip(None, &["link", "show", "dev", "lr-no-such-if"]) {
        Err(RunError::Failed {
            command, stderr, ..
        }) => {
            assert_eq!(command, "ip link show dev lr-no-such-if");
            assert!(stderr.contains("lr-no-such-if"), "{stderr}");
        }
        other => panic!("{other:?}"),
    }
    let panic = std::panic::catch_unwind(|| ip(Some("lr-never-created-ns"), &["link"]))
        .expect_err("ip panics on failure");
    let message = panic.downcast_ref::<String>().unwrap();
    assert!(
        message.starts_with("'ip -n lr-never-created-ns link' failed (exit status: "),
        "{message}"
    );
    let status = ip_command(["-o", "link", "show", "dev", "lo"])
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
}

#[test]
fn code_run_in_a_namespace_runs_inside_and_leaves_the_caller_home() {
    if !is_root() {
        skip("(needs root): in_netns_runs_inside_and_leaves_the_caller_home");
        return;
    }
    let ns = Veth::new("tk0", "tk1").in_one_netns("lrkit");
    let home = own_netns();
    let inside = {
        let _entered = ns.enter();
        own_netns()
    };
    assert_eq!(run_in_netns(ns.name(), own_netns), inside);
    assert_eq!(own_netns(), home);
    // Sockets made inside stay there: tk0 exists for it.
    let index = run_in_netns(ns.name(), || nix::net::if_::if_nametoindex("tk0"));
    assert!(index.is_ok(), "{index:?}");
    assert_eq!(spawn_in_netns(ns.name(), own_netns).join().unwrap(), inside);
    // The code's panic reaches the caller, which stays home.
    let panic = std::panic::catch_unwind(|| run_in_netns(ns.name(), || panic!("inside")))
        .expect_err("the panic goes on");
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"inside"));
    assert_eq!(own_netns(), home);
    let missing = std::panic::catch_unwind(|| run_in_netns("lr-never-created-ns", || ()))
        .expect_err("no such namespace");
    let message = missing.downcast_ref::<String>().unwrap();
    assert!(
        message.contains("'lr-never-created-ns' not found"),
        "{message}"
    );
}
