//! SIGINT / SIGTERM / SIGHUP during `rfc2544 --lab` on a lab built for the run:
//! linerate exits 130, keeps every finished trial in the JSON file, and
//! removes the lab it built. Needs root; run with --test-threads=1.

mod common;

use common::*;
use nix::sys::signal::Signal;
use std::time::Duration;

fn interrupted_run_keeps_trials_and_cleans_up(test: &str, sig: Signal) {
    if !root_or_skip(test) {
        return;
    }
    if lab_exists("default") {
        skip(&format!(
            "(a lab named 'default' is up; this test needs it absent): {test}"
        ));
        return;
    }
    let json = TempFile::new("interrupt");
    let mut spawned = Spawned::start(&[
        "rfc2544",
        "--lab",
        "--sizes",
        "64,128,256,512,1024,1280,1518",
        "--trial-duration",
        "1s",
        "--straggler-wait",
        "500ms",
        "--json",
        json.arg(),
    ]);
    let pid = spawned.pid;
    let prefix = format!("lr-run{pid}-");
    // Removes the run's lab if linerate does not (the test fails then).
    let _guard = LabGuard(format!("run{pid}"));

    // Wait for the first finished trial (its progress line ends with
    // "pass:" or "FAIL:"), so there is something to keep; the signal then
    // lands in the second trial or its straggler wait.
    let finished_one = spawned.wait_for_stderr(Duration::from_secs(20), |e| {
        e.contains("trial  1:") && (e.contains("pass:") || e.contains("FAIL:"))
    });
    assert!(
        finished_one,
        "no trial finished within 20 s:\n{}",
        spawned.stderr_now()
    );
    assert!(
        !netns_with_prefix(&prefix).is_empty(),
        "the run's lab {prefix}* is not there while it runs"
    );
    signal(pid, sig);
    let run = spawned.finish(Duration::from_secs(20));

    // As a shell reports a process the signal ended: 129 for SIGHUP
    // (the terminal closed); 130 for SIGINT and, as ever, SIGTERM.
    let code = if sig == Signal::SIGHUP { 129 } else { 130 };
    assert_eq!(run.code, code, "{}", run.dump());
    assert!(run.stderr.contains("interrupted"), "{}", run.dump());
    assert!(!run.stderr.contains("panicked"), "{}", run.dump());
    // It ends promptly: the trial stops, no new search starts.
    assert!(
        run.elapsed < Duration::from_secs(30),
        "took {:?}",
        run.elapsed
    );
    let left = netns_with_prefix(&prefix);
    assert!(left.is_empty(), "the run's lab was left behind: {left:?}");

    let rep = json.json();
    assert!(
        !json.tmp_sibling().exists(),
        "half-written {} left",
        json.tmp_sibling().display()
    );
    let finished: usize = rep["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["trials"].as_array().map_or(0, Vec::len))
        .sum();
    let unfinished = rep["interrupted"]["trials"].as_array().map_or(0, Vec::len);
    assert!(
        finished + unfinished >= 1,
        "no trial kept after the signal: {rep}"
    );
    // Every size's search that did not finish is named in `interrupted`.
    let done = rep["results"].as_array().unwrap().len();
    assert!(done < 7, "all 7 sizes finished despite the signal: {rep}");
    assert!(rep["interrupted"].is_object(), "{rep}");
    for t in rep["interrupted"]["trials"]
        .as_array()
        .into_iter()
        .flatten()
    {
        assert_trial_consistent(t);
        assert_eq!(t["frame_size"], rep["interrupted"]["frame_size"], "{rep}");
    }
}

#[test]
fn sigint_keeps_trials_and_removes_the_lab() {
    interrupted_run_keeps_trials_and_cleans_up(
        "sigint_keeps_trials_and_removes_the_lab",
        Signal::SIGINT,
    );
}

#[test]
fn sigterm_keeps_trials_and_removes_the_lab() {
    interrupted_run_keeps_trials_and_cleans_up(
        "sigterm_keeps_trials_and_removes_the_lab",
        Signal::SIGTERM,
    );
}

#[test]
fn sighup_keeps_trials_and_removes_the_lab() {
    interrupted_run_keeps_trials_and_cleans_up(
        "sighup_keeps_trials_and_removes_the_lab",
        Signal::SIGHUP,
    );
}

#[test]
fn sigint_stops_a_long_trial_promptly() {
    let test = "sigint_stops_a_long_trial_promptly";
    if !root_or_skip(test) {
        return;
    }
    if lab_exists("default") {
        skip(&format!(
            "(a lab named 'default' is up; this test needs it absent): {test}"
        ));
        return;
    }
    let json = TempFile::new("interrupt-trial");
    let mut spawned = Spawned::start(&[
        "trial",
        "--lab",
        "--frame-size",
        "64",
        "--rate",
        "10000fps",
        "--duration",
        "30s",
        "--straggler-wait",
        "500ms",
        "--json",
        json.arg(),
    ]);
    let pid = spawned.pid;
    let prefix = format!("lr-run{pid}-");
    let _guard = LabGuard(format!("run{pid}"));
    assert!(
        spawned.wait_for_stderr(Duration::from_secs(20), |e| e.contains("building lab")),
        "{}",
        spawned.stderr_now()
    );
    // The lab is being built; give it time to finish and the trial to start
    // (the trial itself prints nothing until it ends).
    let start = std::time::Instant::now();
    while netns_with_prefix(&prefix).len() < 3 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    signal(pid, Signal::SIGINT);
    let run = spawned.finish(Duration::from_secs(20));
    assert_eq!(run.code, 130, "{}", run.dump());
    assert!(!run.stderr.contains("panicked"), "{}", run.dump());
    // Stopped mid-trial, not after the 30 s the trial asked for.
    assert!(
        run.elapsed < Duration::from_secs(15),
        "took {:?} to stop",
        run.elapsed
    );
    let left = netns_with_prefix(&prefix);
    assert!(left.is_empty(), "the run's lab was left behind: {left:?}");
}

/// A Ctrl-C while the DUT's idle CPU baseline is measured (1 s, just
/// before the first trial) stops the run at once, not after the baseline.
#[test]
fn sigint_during_the_dut_cpu_baseline_stops_at_once() {
    let test = "sigint_during_the_dut_cpu_baseline_stops_at_once";
    if !root_or_skip(test) {
        return;
    }
    let (lab, _guard) = lab_up("base");
    let mut spawned = Spawned::start(&[
        "trial",
        "--lab",
        "--lab-name",
        &lab,
        "--frame-size",
        "64",
        "--rate",
        "10000fps",
        "--duration",
        "10s",
        "--no-db",
    ]);
    // `--engine auto` says which engine it took right before the baseline.
    assert!(
        spawned.wait_for_stderr(Duration::from_secs(20), |e| e.contains("linerate: engine")),
        "{}",
        spawned.stderr_now()
    );
    let signalled = std::time::Instant::now();
    signal(spawned.pid, Signal::SIGINT);
    let run = spawned.finish(Duration::from_secs(20));
    let took = signalled.elapsed();
    assert_eq!(run.code, 130, "{}", run.dump());
    // The baseline alone would hold it a second.
    assert!(
        took < Duration::from_millis(600),
        "stopped {took:?} after the signal"
    );
}

/// A signal while `lab up` builds: what was built is removed and the exit
/// says the command was interrupted, never "up" with a lab half there or
/// exit 0 with a lab the user did not get told about.
#[test]
fn a_signal_during_lab_up_removes_what_was_built() {
    if !root_or_skip("a_signal_during_lab_up_removes_what_was_built") {
        return;
    }
    for (delay_ms, sig) in [
        (5u64, Signal::SIGINT),
        (60, Signal::SIGTERM),
        (300, Signal::SIGINT),
    ] {
        let lab = unique("su");
        let _guard = LabGuard(lab.clone());
        let spawned = Spawned::start(&["lab", "up", "--lab-name", &lab]);
        std::thread::sleep(Duration::from_millis(delay_ms));
        signal(spawned.pid, sig);
        let run = spawned.finish(Duration::from_secs(60));
        assert!(!run.stderr.contains("panicked"), "{}", run.dump());
        // `lab up` takes about 170 ms here: a signal 5 or 60 ms in lands
        // while it builds; one 300 ms in may find it done (exit 0, up).
        // A signal that comes before linerate installed its handler (the
        // first thing it does after parsing its arguments, a few ms after
        // exec on a loaded machine) ends it as the signal does: nothing was
        // built yet, and nothing may be there.
        if run.killed_by == Some(sig as i32) {
            let left = netns_with_prefix(&format!("lr-{lab}-"));
            assert!(
                left.is_empty(),
                "killed by {sig:?} at {delay_ms} ms, left {left:?}"
            );
            continue;
        }
        match run.code {
            0 if delay_ms >= 300 => assert!(lab_exists(&lab), "said up, is not: {}", run.dump()),
            130 => {
                assert!(run.stderr.contains("interrupted"), "{}", run.dump());
                let left = netns_with_prefix(&format!("lr-{lab}-"));
                assert!(left.is_empty(), "{sig:?} after {delay_ms} ms left {left:?}");
            }
            code => panic!("exit {code} after {sig:?} at {delay_ms} ms: {}", run.dump()),
        }
    }
}
