//! `linerate rfc2544 --lab` on the namespace lab's Linux router: on a lab
//! made by `lab up` (kept after the run), and on a lab linerate builds for
//! the run (removed after it). Needs root; run with --test-threads=1.

mod common;

use common::*;

/// Checks one size's result of a lab run against what must hold whatever
/// the machine's speed.
fn assert_sane_result(r: &serde_json::Value, size: u64) {
    assert_eq!(u(r, "frame_size"), size, "{r}");
    let (tput, line) = (f(r, "throughput_fps"), f(r, "line_rate_fps"));
    assert!(tput > 0.0, "the Linux router forwarded nothing: {r}");
    assert!(tput <= line, "throughput above line rate: {r}");
    let trials = r["trials"].as_array().expect("trials");
    assert!(!trials.is_empty(), "no trial: {r}");
    for t in trials {
        assert_trial_consistent(t);
        assert_eq!(u(t, "frame_size"), size, "{t}");
    }
    // The throughput is a rate a trial showed without loss (none allowed):
    // the rate it was run at, or, when its generator paused, the rate the
    // router really saw (its offered rate, below the rate it was run at).
    assert!(
        trials.iter().any(|t| u(t, "lost_frames") == 0
            && (f(t, "intended_fps") == tput
                || (f(t, "offered_fps") == tput && tput < f(t, "intended_fps")))),
        "throughput {tput} is not a rate a passing trial showed: {r}"
    );
}

#[test]
fn rfc2544_on_a_kept_lab_leaves_it_up() {
    if !root_or_skip("rfc2544_on_a_kept_lab_leaves_it_up") {
        return;
    }
    let (name, _guard) = lab_up("r");
    let json = TempFile::new("lab-rfc");
    let run = linerate(&[
        "rfc2544",
        "--lab",
        "--lab-name",
        &name,
        "--sizes",
        "64,1518",
        "--trial-duration",
        "500ms",
        "--straggler-wait",
        "500ms",
        "--resolution",
        "5%",
        "--json",
        json.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(
        !run.stderr.contains("building lab"),
        "built a lab although '{name}' was up:\n{}",
        run.dump()
    );
    assert!(run.stdout.contains("Frames/s"), "{}", run.dump());
    for size in ["64", "1518"] {
        assert!(
            run.stdout.split_whitespace().any(|w| w == size),
            "size {size} not in the table:\n{}",
            run.dump()
        );
    }
    let rep = json.json();
    assert_eq!(rep["setup"], "lab", "{rep}");
    assert!(
        rep["port_a"]
            .as_str()
            .unwrap_or_default()
            .starts_with(&format!("lr-{name}-a")),
        "{rep}"
    );
    assert!(rep.get("interrupted").is_none(), "{rep}");
    let results = rep["results"].as_array().expect("results");
    assert_eq!(results.len(), 2, "{rep}");
    assert_sane_result(&results[0], 64);
    assert_sane_result(&results[1], 1518);

    // Made by `lab up`: the run leaves it in place.
    for s in ["a", "b", "dut"] {
        let ns = format!("lr-{name}-{s}");
        assert!(netns_list().contains(&ns), "{ns} gone after the run");
    }
    let down = linerate(&["lab", "down", "--lab-name", &name]);
    assert_eq!(down.code, 0, "{}", down.dump());
    assert!(down.stdout.contains("removed"), "{}", down.dump());
    let left = netns_with_prefix(&format!("lr-{name}-"));
    assert!(left.is_empty(), "lab down left {left:?}");
}

#[test]
fn rfc2544_builds_and_removes_a_lab_for_the_run() {
    if !root_or_skip("rfc2544_builds_and_removes_a_lab_for_the_run") {
        return;
    }
    if lab_exists("default") {
        skip("(a lab named 'default' is up; this test needs it absent): rfc2544_builds_and_removes_a_lab_for_the_run");
        return;
    }
    let json = TempFile::new("lab-tmp");
    let spawned = Spawned::start(&[
        "rfc2544",
        "--lab",
        "--sizes",
        "128",
        "--trial-duration",
        "500ms",
        "--straggler-wait",
        "500ms",
        "--resolution",
        "5%",
        "--max-rate",
        "20000fps",
        "--json",
        json.arg(),
    ]);
    let pid = spawned.pid;
    let prefix = format!("lr-run{pid}-");
    // Removes the run's lab should linerate leave it behind (the assertion
    // below still fails then).
    let _guard = LabGuard(format!("run{pid}"));
    let run = spawned.finish(RUN_LIMIT);
    let dump = run.dump();
    assert_eq!(run.code, 0, "{dump}");
    assert!(
        run.stderr.contains(&prefix),
        "linerate did not say it builds {prefix}*:\n{dump}"
    );
    let left = netns_with_prefix(&prefix);
    assert!(left.is_empty(), "the run's lab was left behind: {left:?}");
    assert!(!lab_exists("default"), "a lab 'default' appeared");
    let rep = json.json();
    assert_eq!(rep["setup"], "lab", "{rep}");
    let r = &rep["results"][0];
    assert_sane_result(r, 128);
    // 20,000 frames/s of 128 bytes is far below what the lab forwards
    // (a few 100k), even when the machine stalls the DUT for milliseconds.
    assert_eq!(f(r, "throughput_fps"), 20_000.0, "{r}");
}

/// Advice names the lab it is about, and a bare `lab down` removes nothing
/// (it would remove every lab on the machine): it lists what `--all` would
/// remove and asks for a name or `--all`. This test never runs `--all`:
/// other runs' labs may be up.
#[test]
fn lab_down_removes_only_what_is_named() {
    if !root_or_skip("lab_down_removes_only_what_is_named") {
        return;
    }
    let name = unique("d");
    let _guard = LabGuard(name.clone());
    let advice = format!("linerate lab down --lab-name {name}");
    let up = linerate(&["lab", "up", "--lab-name", &name]);
    assert_eq!(up.code, 0, "{}", up.dump());
    assert!(up.stdout.contains(&advice), "{}", up.dump());
    // Up again: refused, with the advice for this lab only.
    let again = linerate(&["lab", "up", "--lab-name", &name]);
    assert_bad_input(&again);
    assert!(again.stderr.contains("already exists"), "{}", again.dump());
    assert!(again.stderr.contains(&advice), "{}", again.dump());

    let bare = linerate(&["lab", "down"]);
    assert_bad_input(&bare);
    assert!(bare.stderr.contains("lab down --all"), "{}", bare.dump());
    assert!(bare.stderr.contains("--lab-name NAME"), "{}", bare.dump());
    for s in ["a", "b", "dut"] {
        let ns = format!("lr-{name}-{s}");
        assert!(
            bare.stdout.contains(&ns),
            "{ns} not listed:\n{}",
            bare.dump()
        );
        assert!(netns_list().contains(&ns), "bare 'lab down' removed {ns}");
    }
    // A name and --all together are a usage error.
    let both = linerate(&["lab", "down", "--all", "--lab-name", &name]);
    assert_eq!(both.code, 2, "{}", both.dump());
    assert!(lab_exists(&name));

    let down = linerate(&["lab", "down", "--lab-name", &name]);
    assert_eq!(down.code, 0, "{}", down.dump());
    assert!(netns_with_prefix(&format!("lr-{name}-")).is_empty());
}
