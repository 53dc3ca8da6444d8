//! `linerate run FILE.toml`: a scenario file's tests run in order, each
//! exactly as its command line would; a bad test anywhere in the file
//! stops the run before the first trial. Needs root for the lab.

mod common;

use common::*;

fn scenario(text: &str, stem: &str) -> TempFile {
    let f = TempFile::new(stem);
    std::fs::write(&f.0, text).expect("write scenario");
    f
}

#[test]
fn a_scenario_file_runs_its_tests_in_order() {
    if !root_or_skip("a_scenario_file_runs_its_tests_in_order") {
        return;
    }
    let (lab, _guard) = lab_up("rf");
    let (j1, j2) = (TempFile::new("run1"), TempFile::new("run2"));
    let file = scenario(
        &format!(
            r#"
[defaults]
lab = true
lab-name = "{lab}"
straggler-wait = "300ms"

[[test]]
name = "one trial"
command = "trial"
frame-size = 128
rate = "2000fps"
duration = "1s"
json = "{j1}"

[[test]]
name = "IMIX at a capped rate"
command = "rfc2544"
imix = ["imix1"]
max-rate = "3000fps"
trial-duration = "1s"
json = "{j2}"
"#,
            j1 = j1.arg(),
            j2 = j2.arg()
        ),
        "scen",
    );
    let run = linerate(&["run", file.arg()]);
    assert_eq!(run.code, 0, "{}", run.dump());
    let t = j1.json();
    assert_eq!(u(&t, "tx_frames"), 2_000, "{t}");
    assert_eq!(u(&t, "frame_size"), 128, "{t}");
    let r = &j2.json()["results"][0];
    assert_eq!(r["mix"]["name"], "IMIX 1", "{r}");
    let first = run.stdout.find("== one trial ==").expect("first heading");
    let second = run
        .stdout
        .find("== IMIX at a capped rate ==")
        .expect("second heading");
    assert!(first < second, "{}", run.dump());

    // --dry-run prints the command lines and runs nothing.
    let dry = linerate(&["run", "--dry-run", file.arg()]);
    assert_eq!(dry.code, 0, "{}", dry.dump());
    assert!(
        dry.stdout
            .contains("linerate trial --duration 1s --frame-size 128"),
        "{}",
        dry.dump()
    );
}

#[test]
fn a_bad_test_stops_the_file_before_anything_runs() {
    if !root_or_skip("a_bad_test_stops_the_file_before_anything_runs") {
        return;
    }
    let j1 = TempFile::new("runbad");
    let file = scenario(
        &format!(
            r#"
[[test]]
command = "trial"
lab = true
frame-size = 64
rate = "1000fps"
json = "{}"

[[test]]
command = "rfc2544"
lab = true
sizez = [64]
"#,
            j1.arg()
        ),
        "scenbad",
    );
    let before = netns_list();
    let run = linerate(&["run", file.arg()]);
    assert_bad_input(&run);
    assert!(run.stderr.contains("test 2"), "{}", run.dump());
    assert!(run.stderr.contains("sizez"), "{}", run.dump());
    assert!(!j1.0.exists(), "the first test ran");
    assert_eq!(netns_list(), before, "a lab was built");
    let missing = linerate(&["run", "/nonexistent/plan.toml"]);
    assert_bad_input(&missing);
}

/// A value the command line parser accepts but the command refuses (here
/// `--resolution 0` and an HMAC on an AEAD cipher) stops the file before
/// its first test runs, and `--dry-run` finds it too (exit 2). Needs no
/// root: nothing is touched.
#[test]
fn a_bad_value_in_a_later_test_stops_the_file_and_the_dry_run() {
    let j1 = TempFile::new("runval");
    for (bad, says) in [
        (
            "command = \"rfc2544\"\nlab = true\nresolution = \"0\"",
            "--resolution",
        ),
        ("command = \"rfc2544\"\nlab = true\nloss = 5", "--loss"),
        (
            "command = \"overhead\"\nl3-length = 46\nesp = \"aes-gcm\"\nauth = \"sha1\"",
            "AEAD",
        ),
        ("command = \"tcp\"\nlab = true\nport = 0", "--port 0"),
    ] {
        let file = scenario(
            &format!(
                "[[test]]\ncommand = \"trial\"\nlab = true\nframe-size = 64\nrate = \"1000fps\"\njson = \"{}\"\n\n[[test]]\nname = \"second\"\n{bad}\n",
                j1.arg()
            ),
            "scenval",
        );
        for dry in [true, false] {
            let mut args = vec!["run", file.arg()];
            if dry {
                args.push("--dry-run");
            }
            let run = linerate(&args);
            assert_bad_input(&run);
            assert!(run.stderr.contains("test 2 (second)"), "{}", run.dump());
            assert!(run.stderr.contains(says), "{}", run.dump());
            assert!(run.stdout.is_empty(), "{}", run.dump());
            assert!(!j1.0.exists(), "the first test ran");
            // Tests running beside this one build labs: look for this run's.
            let own = netns_with_prefix(&format!("lr-run{}-", run.pid));
            assert!(own.is_empty(), "a lab was built: {own:?}");
        }
    }
}
