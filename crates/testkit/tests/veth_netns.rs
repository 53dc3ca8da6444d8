//! The fixture does what the crates' tests rely on: the pair's settings
//! are there, entering moves only this thread and comes back, and nothing
//! is left behind, also when the test panics. Needs root and iproute2;
//! without root each test prints "SKIPPED (needs root): ..." and passes,
//! with `LINERATE_REQUIRE_ALL=1` (scripts/test.sh) it fails.

use linerate_testkit::{is_root, skip, Veth};
use std::path::Path;

fn exists(ns: &str) -> bool {
    Path::new("/run/netns").join(ns).exists()
}

/// The identity of this thread's network namespace.
fn own_netns() -> std::path::PathBuf {
    std::fs::read_link("/proc/thread-self/ns/net").unwrap()
}

#[test]
fn one_netns_holds_the_pair_as_configured_and_goes_on_drop() {
    if !is_root() {
        skip("(needs root): one_netns_holds_the_pair_as_configured_and_goes_on_drop");
        return;
    }
    let ns = Veth::new("tk0", "tk1")
        .mtu(1600)
        .queues(3)
        .in_one_netns("lrkit");
    let name = ns.name().to_string();
    assert!(exists(&name), "{name} made");
    for end in ["tk0", "tk1"] {
        assert_eq!(ns.read(&format!("/sys/class/net/{end}/mtu")), "1600");
        let queues = ns.exec(&["ls", &format!("/sys/class/net/{end}/queues")]);
        let mut queues: Vec<&str> = queues.split_whitespace().collect();
        queues.sort();
        assert_eq!(queues, ["rx-0", "rx-1", "rx-2", "tx-0", "tx-1", "tx-2"]);
        // Up on both ends: the carrier is there only when both are.
        assert_eq!(ns.read(&format!("/sys/class/net/{end}/carrier")), "1");
    }
    assert_eq!(
        ns.read("/proc/sys/net/ipv6/conf/tk0/disable_ipv6"),
        "1",
        "IPv6 off by default"
    );
    let home = own_netns();
    {
        let _inside = ns.enter();
        assert_ne!(own_netns(), home, "inside");
        assert!(nix::net::if_::if_nametoindex("tk0").is_ok());
    }
    assert_eq!(own_netns(), home, "back out");
    drop(ns);
    assert!(!exists(&name), "{name} deleted");
}

#[test]
fn two_netns_hold_one_end_each_and_both_go_on_drop() {
    if !is_root() {
        skip("(needs root): two_netns_hold_one_end_each_and_both_go_on_drop");
        return;
    }
    let (a, b) = Veth::new("tka", "tkb")
        .with_ipv6()
        .across_two_netns("lrkit");
    let names = [a.name().to_string(), b.name().to_string()];
    assert!(
        names[0].ends_with("-a") && names[1].ends_with("-b"),
        "{names:?}"
    );
    let links = |ns: &linerate_testkit::Netns| ns.ip(&["-o", "link", "show", "type", "veth"]);
    assert!(links(&a).contains("tka@") && !links(&a).contains("tkb@"));
    assert!(links(&b).contains("tkb@") && !links(&b).contains("tka@"));
    assert_eq!(a.read("/sys/class/net/tka/carrier"), "1");
    assert_eq!(
        b.read("/proc/sys/net/ipv6/conf/tkb/disable_ipv6"),
        "0",
        "IPv6 left on"
    );
    drop((a, b));
    assert!(names.iter().all(|n| !exists(n)), "{names:?} deleted");
}

#[test]
fn a_panicking_test_leaves_its_thread_home_and_no_namespace() {
    if !is_root() {
        skip("(needs root): a_panicking_test_leaves_its_thread_home_and_no_namespace");
        return;
    }
    let home = own_netns();
    let mut name = String::new();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let ns = Veth::new("tk0", "tk1").in_one_netns("lrkit");
        name = ns.name().to_string();
        let _inside = ns.enter();
        panic!("a failing test");
    }));
    assert!(result.is_err());
    assert!(!name.is_empty());
    assert_eq!(own_netns(), home, "the thread is back out");
    assert!(!exists(&name), "{name} deleted while unwinding");
}
