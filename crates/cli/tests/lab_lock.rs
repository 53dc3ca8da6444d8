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
    // Nor does `lab down --all`: it keeps the lab and names the run.
    let all = linerate(&["lab", "down", "--all"]);
    assert_eq!(all.code, 0, "{}", all.dump());
    assert!(lab_exists(&lab), "lab down --all removed a lab in use");
    assert!(
        all.stdout.contains("kept, in use by a run: ") && all.stdout.contains(&holder),
        "{}",
        all.dump()
    );

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

/// The same for external ports: a second run on a port a run is using
/// (either port, with any engine) refuses in one line naming the first
/// run, instead of blaming the in-kernel counter or, with af_packet,
/// measuring each other's frames; the first run's counts stay exact, and
/// the ports are free again after it.
#[test]
fn external_ports_in_use_are_refused_to_a_second_run() {
    if !root_or_skip("external_ports_in_use_are_refused_to_a_second_run") {
        return;
    }
    let (ns, _guard) = back_to_back("lp", 1500);
    let trial = |ports: [&str; 2], extra: &[&str]| {
        let mut v: Vec<String> = [
            "netns",
            "exec",
            &ns,
            LINERATE,
            "trial",
            "--port-a",
            ports[0],
            "--port-b",
            ports[1],
            "--ip-a",
            "198.18.0.2/24",
            "--gw-a",
            "198.18.0.3",
            "--ip-b",
            "198.18.0.3/24",
            "--gw-b",
            "198.18.0.2",
            "--frame-size",
            "64",
            "--rate",
            "1000fps",
            "--no-db",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    let first_args = trial(
        ["p0", "p1"],
        &[
            "--duration",
            "5s",
            "--engine",
            "af_packet",
            "--receiver",
            "socket",
        ],
    );
    let first = linerate_testkit::ip_command(&first_args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    struct Kill(std::process::Child);
    impl Drop for Kill {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let mut first = Kill(first);
    let pid = first.0.id();
    // It holds both ports once its lock files name it.
    let holder = format!("pid {pid}");
    let start = std::time::Instant::now();
    let held = || {
        std::fs::read_dir("/run/linerate")
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("port-"))
            .filter(|e| std::fs::read_to_string(e.path()).unwrap_or_default() == holder)
            .count()
    };
    while held() < 2 {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the first run did not lock its ports"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    for (ports, engine) in [
        (["p0", "p1"], "auto"),
        (["p0", "p1"], "af_packet"),
        (["p1", "p0"], "af_xdp"),
        (["p0", "p1"], "xdp"),
    ] {
        let args = trial(ports, &["--duration", "1s", "--engine", engine]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let second = run_program("ip", &args, RUN_LIMIT);
        assert_bad_input(&second);
        assert!(
            second.stderr.contains("is in use by another linerate run")
                && second.stderr.contains(&holder),
            "{engine}: {}",
            second.dump()
        );
        assert!(!second.stderr.contains("counter"), "{}", second.dump());
    }
    let out = wait_limited(&mut first.0, Duration::from_secs(60), "first run");
    let mut stdout = String::new();
    use std::io::Read;
    first
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    assert!(out.success(), "first run: {out}\n{stdout}");
    for line in [
        "received              5,000 frames",
        "duplicated                0 frames",
    ] {
        assert!(stdout.contains(line), "{line}: {stdout}");
    }
    assert_eq!(held(), 0, "lock files left");
    // Free again.
    let args = trial(["p0", "p1"], &["--duration", "1s"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let again = run_program("ip", &args, RUN_LIMIT);
    assert_eq!(again.code, 0, "{}", again.dump());
}
