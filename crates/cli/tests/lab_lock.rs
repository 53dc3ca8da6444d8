//! One run at a time on a lab: a second run on a lab in use, and `lab
//! down` of it, refuse in one line (exit 2) instead of mixing their frames
//! and counters; the lock goes with the run. Needs root; run with
//! --test-threads=1.

mod common;

use common::*;
use std::time::Duration;

#[test]
fn a_lab_in_use_is_refused_to_a_second_run_and_to_lab_down() {
    if !root_or_skip("a_lab_in_use_is_refused_to_a_second_run_and_to_lab_down") {
        return;
    }
    let (lab, _guard) = lab_up("lk");
    let trial = |duration: &str| {
        vec![
            "trial".to_string(),
            "--lab".into(),
            "--lab-name".into(),
            lab.clone(),
            "--no-db".into(),
            "--frame-size".into(),
            "128".into(),
            "--rate".into(),
            "10000fps".into(),
            "--duration".into(),
            duration.into(),
        ]
    };
    let first_args = trial("6s");
    let first_args: Vec<&str> = first_args.iter().map(String::as_str).collect();
    let first = Spawned::start(&first_args);
    // It holds the lab from the moment it opens it: its pid is in the
    // lab's lock file.
    let lock_file = format!("/run/linerate/lab-{lab}.lock");
    let holder = format!("pid {}", first.pid);
    let start = std::time::Instant::now();
    while std::fs::read_to_string(&lock_file).unwrap_or_default() != holder {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "the first run did not lock the lab: {}",
            first.stderr_now()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let second_args = trial("1s");
    let second_args: Vec<&str> = second_args.iter().map(String::as_str).collect();
    let second = linerate(&second_args);
    assert_bad_input(&second);
    assert!(
        second.stderr.contains("is in use by another linerate run"),
        "{}",
        second.dump()
    );
    assert!(
        second.stderr.contains(&format!("pid {}", first.pid)),
        "{}",
        second.dump()
    );

    let down = linerate(&["lab", "down", "--lab-name", &lab]);
    assert_bad_input(&down);
    assert!(lab_exists(&lab), "lab down removed a lab in use");

    // The first run was not disturbed, and the lock went with it.
    let first = first.finish(Duration::from_secs(60));
    assert_eq!(first.code, 0, "{}", first.dump());
    assert!(
        first.stdout.contains("lost                      0 frames"),
        "{}",
        first.dump()
    );
    let again = linerate(&second_args);
    assert_eq!(again.code, 0, "{}", again.dump());
}
