//! What the lab's namespaces and lab-unique interfaces are called, and the
//! rule for lab names. Every namespace name derives from the lab's name
//! (`lr-<name>-a`, `-b`, `-dut`, `-dut2`, the wire's `-w`), so building,
//! removing, reporting and configuring a lab each find the same names here
//! without asking the module that builds it.

use crate::sides::{Side, SIDES};
use crate::{LabError, PREFIX};
use std::path::PathBuf;

/// The DUT namespace's suffix.
pub(crate) const DUT_SUFFIX: &str = "dut";
/// The second DUT of the two-DUT topologies (tunnel scenarios).
pub(crate) const DUT2_SUFFIX: &str = "dut2";

pub(crate) fn tester_netns(lab: &str, side: &Side) -> String {
    format!("{PREFIX}{lab}-{}", side.suffix)
}

pub(crate) fn dut_netns(lab: &str) -> String {
    format!("{PREFIX}{lab}-{DUT_SUFFIX}")
}

/// The second DUT's namespace: present only while a tunnel scenario runs.
pub(crate) fn dut2_netns(lab: &str) -> String {
    format!("{PREFIX}{lab}-{DUT2_SUFFIX}")
}

/// The namespace of the wire named `name` ([`crate::Wire`]).
pub(crate) fn wire_netns(name: &str) -> String {
    format!("{PREFIX}{name}-w")
}

pub(crate) fn tester_netns_names(lab: &str) -> [String; 2] {
    [tester_netns(lab, &SIDES[0]), tester_netns(lab, &SIDES[1])]
}

/// The three namespaces of lab `name`: A, B, DUT.
pub(crate) fn netns_names(lab: &str) -> [String; 3] {
    [
        tester_netns(lab, &SIDES[0]),
        tester_netns(lab, &SIDES[1]),
        dut_netns(lab),
    ]
}

/// Every namespace lab `name` may have, for `exists` and removal.
pub(crate) fn all_netns_names(lab: &str) -> Vec<String> {
    let mut names = netns_names(lab).to_vec();
    names.push(dut2_netns(lab));
    names
}

/// The WireGuard interface names of lab `lab_name`'s two DUTs
/// (`w<lab>1`, `w<lab>2`): unique to the lab, because boringtun's control
/// socket is named after the interface in the file system all namespaces
/// share ([`boringtun_socket`]).
pub(crate) fn wireguard_ifnames(lab_name: &str) -> [String; 2] {
    [format!("w{lab_name}1"), format!("w{lab_name}2")]
}

/// boringtun's control socket for interface `ifname` (in the file system
/// every namespace shares).
pub(crate) fn boringtun_socket(ifname: &str) -> PathBuf {
    PathBuf::from(format!("/var/run/wireguard/{ifname}.sock"))
}

/// Lab names: `[a-z0-9_-]{1,12}`, short enough that every namespace name
/// stays short and readable, and free of anything a shell or `ip` might
/// read as syntax.
pub(crate) fn validate_name(name: &str) -> Result<(), LabError> {
    let ok = (1..=12).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(LabError::InvalidName(name.to_string()))
    }
}

/// A lab name for a one-shot run, unique per process.
pub fn temporary_name() -> String {
    // Several runs of one process at once (the Python package's threads)
    // each get their own: run<PID>, then run<PID>b, run<PID>c, ... (a
    // letter keeps the name within the 12 characters a lab name may have).
    static MADE: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 26;
    let suffix = match n {
        0 => String::new(),
        n => char::from(b'a' + n as u8).to_string(),
    };
    format!("run{}{suffix}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_rule() {
        for ok in ["a", "lab1", "run4194304", "x_y-z", "abcdefghijkl"] {
            assert!(validate_name(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "abcdefghijklm",
            "Lab",
            "a b",
            "a.b",
            "a/b",
            "ä",
            "lab;rm",
        ] {
            let err = validate_name(bad).unwrap_err();
            assert!(matches!(err, LabError::InvalidName(_)), "{bad}");
            assert!(err.to_string().contains("a-z, 0-9"), "{err}");
        }
    }

    #[test]
    fn temporary_names_are_valid() {
        assert!(validate_name(&temporary_name()).is_ok());
        // The next run of the process gets another name, also valid.
        let (a, b) = (temporary_name(), temporary_name());
        assert_ne!(a, b);
        assert!(validate_name(&b).is_ok() && validate_name(&format!("run{}z", 4_194_304)).is_ok());
        // The largest pid Linux hands out still fits.
        assert!(validate_name(&format!("run{}", 4_194_304)).is_ok());
    }

    #[test]
    fn namespace_names() {
        assert_eq!(
            netns_names("x"),
            [
                "lr-x-a".to_string(),
                "lr-x-b".to_string(),
                "lr-x-dut".to_string()
            ]
        );
    }
}
