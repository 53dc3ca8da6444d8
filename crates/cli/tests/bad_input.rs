//! Bad input and bad environments: linerate exits 2 with one line saying
//! what to fix, never panics, and leaves no namespace behind. Cases that
//! only parse arguments run without root; the others need it.

mod common;

use common::*;
use std::time::Duration;

/// Runs linerate with `args` (inside `ns` if given) and checks the common
/// contract: exit 2, one `linerate: error:` line, no panic, no new `lr-`
/// namespace (also none named after the run's pid). Returns the run; a
/// failure names the command line.
fn expect_error(ns: Option<&str>, args: &[&str]) -> Run {
    expect_error_of(&format!("linerate {}", args.join(" ")), ns, args)
}

/// [`expect_error`] for one of several cases: a failure names `case`.
fn expect_error_of(case: &str, ns: Option<&str>, args: &[&str]) -> Run {
    let before = netns_list();
    let run = match ns {
        Some(ns) => linerate_in(ns, args),
        None => linerate(args),
    };
    assert_bad_input_of(case, &run);
    let after = netns_list();
    let new = new_lr_netns(&before, &after);
    assert!(
        new.is_empty(),
        "{case}: left behind: {new:?}\n{}",
        run.dump()
    );
    let own = netns_with_prefix(&format!("lr-run{}-", run.pid));
    assert!(own.is_empty(), "{case}: left behind: {own:?}");
    run
}

/// `trial` on two interfaces that do not exist, with `extra` appended.
fn trial_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec!["trial", "--port-a", "nosuch0", "--port-b", "nosuch1"];
    // The hosts of common::HOSTS, without its ports.
    v.extend_from_slice(&HOSTS[4..]);
    v.extend_from_slice(extra);
    v
}

fn mentions(run: &Run, words: &[&str]) {
    for w in words {
        assert!(run.stderr.contains(w), "'{w}' not in:\n{}", run.dump());
    }
}

/// One case of bad input: its name, the command line, the words its one
/// line of error must hold.
type Refusal<'a> = (&'a str, Vec<&'a str>, &'a [&'a str]);

/// `args` (outside any namespace) are refused as [`expect_error`] checks,
/// in a line holding every word of `words`; a failure names `case`.
fn refuses(case: &str, args: &[&str], words: &[&str]) {
    let run = expect_error_of(case, None, args);
    for w in words {
        assert!(
            run.stderr.contains(w),
            "{case}: '{w}' not in:\n{}",
            run.dump()
        );
    }
}

/// Every case refused ([`refuses`]), one after the other.
fn expect_refusals(cases: &[Refusal]) {
    for (case, args, words) in cases {
        refuses(case, args, words);
    }
}

// ---- argument checks (no root needed: they come before any socket) ----

/// Values out of their range, or not understood: refused in one line that
/// names the value (and the range).
#[test]
fn trial_values_out_of_range_are_refused() {
    expect_refusals(&[
        (
            "a frame size below the minimum",
            trial_args(&["--frame-size", "60", "--rate", "1000fps"]),
            &["60", "64..9018"],
        ),
        (
            "a frame size above the maximum",
            trial_args(&["--frame-size", "9019", "--rate", "1000fps"]),
            &["9019", "64..9018"],
        ),
        (
            "an L3 length below the minimum",
            trial_args(&["--l3-length", "39", "--rate", "1000fps"]),
            &["39", "40..9000"],
        ),
        (
            "a malformed rate",
            trial_args(&["--frame-size", "64", "--rate", "fast"]),
            &["--rate", "fast"],
        ),
    ]);
}

/// A usage error of clap's (its own lines of usage): exit 2, no panic, the
/// words named, no namespace made.
fn expect_usage_error(args: &[&str], words: &[&str]) {
    let before = netns_list();
    let run = linerate(args);
    assert_eq!(run.code, 2, "{}", run.dump());
    assert!(!run.stderr.contains("panicked"), "{}", run.dump());
    mentions(&run, words);
    assert!(new_lr_netns(&before, &netns_list()).is_empty());
}

#[test]
fn report_texts_are_one_bounded_line() {
    let long = "A".repeat(65_536);
    expect_usage_error(
        &trial_args(&["--dut-name", &long]),
        &["--dut-name", "65536 characters", "at most 200"],
    );
    expect_usage_error(
        &trial_args(&["--dut-firmware", "1.0\n\u{1b}[2J"]),
        &["--dut-firmware", "control character"],
    );
}

#[test]
fn unknown_frame_check() {
    expect_usage_error(
        &trial_args(&["--frame-check", "crc"]),
        &["--frame-check", "'headers'", "'payload'"],
    );
}

/// Durations not above 0 and a resolution above 100 %, refused in one
/// line naming the option. The rfc2544 cases use --lab with a lab name
/// that does not exist: were the check late, linerate would build a lab
/// first (the namespace check would see it).
#[test]
fn bad_durations_and_resolution_are_refused() {
    let lab = unique("z");
    let on_lab = |option: &'static str, value: &'static str| {
        vec![
            "rfc2544",
            "--lab",
            "--lab-name",
            lab.as_str(),
            option,
            value,
        ]
    };
    let trial = |duration: &'static str| {
        trial_args(&[
            "--frame-size",
            "64",
            "--rate",
            "1000fps",
            "--duration",
            duration,
        ])
    };
    // Negative: the option's own one-line error (before, clap took "-1"
    // for an option: "unexpected argument '-1' found" and its usage).
    expect_refusals(&[
        (
            "rfc2544 --trial-duration 0s",
            on_lab("--trial-duration", "0s"),
            &["--trial-duration"],
        ),
        ("trial --duration 0s", trial("0s"), &["--duration"]),
        (
            "rfc2544 --trial-duration -1",
            on_lab("--trial-duration", "-1"),
            &["--trial-duration", "-1", "negative"],
        ),
        (
            "rfc2544 --straggler-wait -2s",
            on_lab("--straggler-wait", "-2s"),
            &["--straggler-wait", "-2s", "negative"],
        ),
        (
            "trial --duration -1",
            trial("-1"),
            &["--duration '-1' is negative"],
        ),
        (
            "rfc2544 --resolution 200%",
            on_lab("--resolution", "200%"),
            &["--resolution", "200%"],
        ),
    ]);
}

/// What no gateway can take, and durations past any run, are refused in
/// one line before a lab, a port or a gateway is touched (issue 41: a
/// rekey period of 500 billion years panicked a thread, 300 proposals
/// and a 70,000-byte identity failed after 16 s, the last with a
/// half-open IKE SA left on the gateway).
#[test]
fn ipsec_input_no_gateway_takes_is_refused_before_any_gateway() {
    let proposals = vec!["aes256-sha256-modp2048"; 300].join(",");
    let long_id = format!("@{}", "a".repeat(70_000));
    let tunnels = |extra: &[&'static str]| {
        let mut v = vec![
            "tunnels",
            "--count",
            "5",
            "--lab",
            "--scenario",
            "vpn-gateway",
        ];
        v.extend_from_slice(extra);
        v
    };
    let mut with_ike = tunnels(&[]);
    with_ike.extend(["--ike", proposals.as_str()]);
    let mut with_long_id = tunnels(&[]);
    with_long_id.extend(["--ipsec-id", long_id.as_str()]);
    expect_refusals(&[
        (
            "tunnels --hold 500000000000y --rekey 400000000000y",
            tunnels(&["--hold", "500000000000y", "--rekey", "400000000000y"]),
            &["--hold '500000000000y' is longer than a year"],
        ),
        (
            "tunnels --rekey 500000000000y",
            tunnels(&["--hold", "10s", "--rekey", "500000000000y"]),
            &["--rekey '500000000000y' is longer than a year"],
        ),
        (
            "trial --duration 500000000000y",
            trial_args(&[
                "--frame-size",
                "64",
                "--rate",
                "1000fps",
                "--duration",
                "500000000000y",
            ]),
            &["--duration", "longer than a year"],
        ),
        (
            "tunnels --ike (300 proposals)",
            with_ike,
            &["--ike: 300 proposals take", "offer fewer"],
        ),
        (
            "tunnels --ipsec-id (70,000 bytes)",
            with_long_id,
            &["--ipsec-id is 70001 bytes long"],
        ),
        (
            "tunnels --ipsec-id ''",
            tunnels(&["--ipsec-id", ""]),
            &["--ipsec-id is empty"],
        ),
        (
            "tunnels --ipsec-id with a newline",
            tunnels(&["--ipsec-id", "@peer\n"]),
            &["--ipsec-id holds a control character"],
        ),
    ]);
}

/// Every option taking a percentage or a ratio follows one rule (`N%` is
/// percent, a bare number a ratio) and refuses what is out of range before
/// any lab is built (the lab name does not exist: a late check would
/// complain about the lab instead).
#[test]
fn shares_out_of_range_are_refused_before_any_lab() {
    let lab = unique("z");
    let on_lab = |cmd: &[&'static str], extra: &[&str]| {
        let mut v: Vec<String> = cmd.iter().map(|s| s.to_string()).collect();
        v.extend(["--lab".into(), "--lab-name".into(), lab.clone()]);
        v.extend(extra.iter().map(|s| s.to_string()));
        v
    };
    for (cmd, option, value, says) in [
        (&["rfc2544"][..], "--resolution", "0", "above 0"),
        (&["rfc2544"][..], "--resolution", "0%", "above 0"),
        (&["rfc2544"][..], "--resolution", "1", "write 1%"),
        (&["rfc2544"][..], "--loss", "5", "write 5%"),
        (&["rfc2544"][..], "--loss", "100%", "below 100 %"),
        (
            &["trial", "--frame-size", "64", "--rate", "1000fps"][..],
            "--loss",
            "0.5%x",
            "1% or 0.01",
        ),
        (
            &["trial", "--frame-size", "64", "--rate", "1000fps"][..],
            "--loss",
            "99",
            "write 99%",
        ),
        (&["latency"][..], "--resolution", "0", "above 0"),
        (&["back-to-back"][..], "--resolution", "0", "above 0"),
        (&["mlrsearch"][..], "--width", "0", "above 0"),
        (&["mlrsearch"][..], "--exceed-ratio", "50", "write 50%"),
        (&["mlrsearch"][..], "--pdr-loss", "150%", "below 100 %"),
        (
            &["loss", "--loads", "1%"][..],
            "--stop-at-loss",
            "50",
            "write 50%",
        ),
        (&["loss", "--rfc2544"][..], "--step", "0", "above 0"),
        (&["cpu-target"][..], "--target", "75", "write 75%"),
    ] {
        let args = on_lab(cmd, &[option, value]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        refuses(
            &format!("{} {option} {value}", cmd.join(" ")),
            &args,
            &[option, value, says],
        );
    }
    // calibrate builds its own wire: the check comes first there too.
    let run = expect_error(None, &["calibrate", "--resolution", "0"]);
    if is_root() {
        mentions(&run, &["--resolution", "above 0"]);
    }
}

#[test]
fn malformed_flags_are_usage_errors() {
    // clap's own errors: several lines of usage, exit 2, no panic.
    for args in [
        &[
            "trial",
            "--lab",
            "--frame-size",
            "sixty",
            "--rate",
            "1000fps",
        ][..],
        &["trial", "--lab", "--frame-size", "64"][..],
        &[
            "trial",
            "--lab",
            "--port-a",
            "x",
            "--frame-size",
            "64",
            "--rate",
            "1%",
        ][..],
        &["rfc2544", "--lab", "--sizes", "64", "--l3-length", "40"][..],
        &["nosuchcommand"][..],
    ] {
        let before = netns_list();
        let run = linerate(args);
        assert_eq!(run.code, 2, "{}", run.dump());
        assert!(!run.stderr.contains("panicked"), "{}", run.dump());
        assert!(run.stderr.contains("error"), "{}", run.dump());
        let new = new_lr_netns(&before, &netns_list());
        assert!(new.is_empty(), "left behind: {new:?}");
    }
}

#[test]
fn not_root() {
    let args = trial_args(&["--frame-size", "64", "--rate", "1000fps"]);
    let run = if is_root() {
        if std::process::Command::new("setpriv")
            .arg("--help")
            .output()
            .is_err()
        {
            skip("(needs setpriv, from util-linux, to drop root): not_root");
            return;
        }
        let mut full = vec!["--reuid=65534", "--regid=65534", "--clear-groups", LINERATE];
        full.extend_from_slice(&args);
        let before = netns_list();
        let run = run_program("setpriv", &full, RUN_LIMIT);
        assert!(new_lr_netns(&before, &netns_list()).is_empty());
        run
    } else {
        expect_error(None, &args)
    };
    assert_bad_input(&run);
    mentions(&run, &["root"]);
    // The lab says so too.
    if is_root() {
        let lab = unique("n");
        let _guard = LabGuard(lab.clone());
        let run = run_program(
            "setpriv",
            &[
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                LINERATE,
                "lab",
                "up",
                "--lab-name",
                &lab,
            ],
            RUN_LIMIT,
        );
        assert_bad_input(&run);
        mentions(&run, &["root"]);
        assert!(!lab_exists(&lab));
    }
}

// ---- checks that need root (sockets, namespaces) ----

#[test]
fn unknown_interface() {
    if !root_or_skip("unknown_interface") {
        return;
    }
    let run = expect_error(
        None,
        &trial_args(&["--frame-size", "64", "--rate", "1000fps"]),
    );
    mentions(&run, &["nosuch0"]);
}

/// The xdp engine counts in the kernel and hands no frame up: a socket
/// receiver, or a capture that needs one, is refused before a port opens.
#[test]
fn xdp_engine_cannot_count_through_a_socket() {
    if !root_or_skip("xdp_engine_cannot_count_through_a_socket") {
        return;
    }
    let pcap = TempFile::new("refused");
    let xdp = |extra: &[&'static str]| {
        let mut args = vec!["--engine", "xdp", "--frame-size", "64", "--rate", "1000fps"];
        args.extend_from_slice(extra);
        args
    };
    for (case, args, words) in [
        (
            "--engine xdp --receiver socket",
            xdp(&["--receiver", "socket"]),
            &["counts test frames in the kernel", "--engine af_xdp"][..],
        ),
        (
            "--engine xdp --pcap",
            [xdp(&[]), vec!["--pcap", pcap.arg(), "--no-db"]].concat(),
            &["--pcap", "counts them in the kernel", "--engine af_xdp"],
        ),
    ] {
        refuses(case, &trial_args(&args), words);
    }
}

#[test]
fn ip_without_prefix_length() {
    if !root_or_skip("ip_without_prefix_length") {
        return;
    }
    let run = expect_error(
        None,
        &[
            "trial",
            "--port-a",
            "nosuch0",
            "--port-b",
            "nosuch1",
            "--ip-a",
            "198.18.0.2",
            "--gw-a",
            "198.18.0.1",
            "--ip-b",
            "198.19.0.2/24",
            "--gw-b",
            "198.19.0.1",
            "--frame-size",
            "64",
            "--rate",
            "1000fps",
        ],
    );
    mentions(&run, &["--ip-a", "198.18.0.2", "prefix"]);
}

#[test]
fn bad_lab_name() {
    if !root_or_skip("bad_lab_name") {
        return;
    }
    expect_refusals(&[
        (
            "a name with a space and a '!'",
            vec!["lab", "up", "--lab-name", "Bad Name!"],
            &["Bad Name!", "a-z"],
        ),
        (
            "a name too long for the 12-character rule",
            vec!["lab", "up", "--lab-name", "abcdefghijklm"],
            &["abcdefghijklm"],
        ),
    ]);
}

#[test]
fn rate_above_line_rate() {
    if !root_or_skip("rate_above_line_rate") {
        return;
    }
    let (ns, _guard) = back_to_back("l", 9000);
    let mut args = vec!["trial"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&["--frame-size", "64", "--rate", "101%", "--duration", "1s"]);
    let run = expect_error(Some(&ns), &args);
    mentions(&run, &["101%", "line rate"]);
    // The same for the search's upper bound.
    let mut args = vec!["rfc2544"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&["--sizes", "64", "--max-rate", "101%"]);
    let run = expect_error(Some(&ns), &args);
    mentions(&run, &["--max-rate", "line rate"]);
}

#[test]
fn gateway_not_answering_arp() {
    if !root_or_skip("gateway_not_answering_arp") {
        return;
    }
    let (ns, _guard) = back_to_back("g", 9000);
    let args = [
        "trial",
        "--port-a",
        "p0",
        "--port-b",
        "p1",
        "--ip-a",
        "198.18.0.2/24",
        "--gw-a",
        "198.18.0.77", // nobody has it
        "--ip-b",
        "198.18.0.3/24",
        "--gw-b",
        "198.18.0.2",
        "--frame-size",
        "64",
        "--rate",
        "1000fps",
        "--duration",
        "1s",
    ];
    let run = expect_error(Some(&ns), &args);
    mentions(&run, &["ARP", "198.18.0.77"]);
    assert!(
        run.elapsed < Duration::from_secs(6),
        "gave up on ARP only after {:?}",
        run.elapsed
    );
}

/// A port that cannot reach any gateway is named with its state, not
/// blamed on a gateway that did not answer: no carrier (its veth peer
/// down), down, the loopback interface, a bridge.
#[test]
fn an_unusable_port_is_named_with_its_state() {
    if !root_or_skip("an_unusable_port_is_named_with_its_state") {
        return;
    }
    let (ns, _guard) = back_to_back("us", 1500);
    let run_with = |a: &str, b: &str| {
        let mut args = vec!["trial", "--port-a", a, "--port-b", b];
        args.extend_from_slice(&B2B_HOSTS[4..]);
        args.extend_from_slice(&["--frame-size", "64", "--rate", "1000fps", "--no-db"]);
        expect_error(Some(&ns), &args)
    };
    // p2 up, its peer p3 down: p2 has no carrier.
    sh(
        "ip",
        &[
            "-n", &ns, "link", "add", "p2", "type", "veth", "peer", "name", "p3",
        ],
    );
    sh("ip", &["-n", &ns, "link", "set", "p2", "up"]);
    let run = run_with("p2", "p1");
    mentions(&run, &["p2", "without carrier"]);
    assert!(!run.stderr.contains("check the DUT"), "{}", run.dump());
    let run = run_with("p0", "lo");
    mentions(&run, &["lo", "loopback"]);
    sh("ip", &["-n", &ns, "link", "add", "br0", "type", "bridge"]);
    sh("ip", &["-n", &ns, "link", "set", "br0", "up"]);
    let run = run_with("p0", "br0");
    mentions(&run, &["br0", "a bridge"]);
}

#[test]
fn frame_bigger_than_mtu() {
    if !root_or_skip("frame_bigger_than_mtu") {
        return;
    }
    let (ns, _guard) = back_to_back("m", 1500);
    let mut args = vec!["trial"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&["--frame-size", "9000", "--rate", "1000fps"]);
    let run = expect_error(Some(&ns), &args);
    mentions(&run, &["MTU", "9000"]);
    // One byte over: 1500 + 14 + 4 = 1518 fits, 1519 does not.
    let mut args = vec!["trial"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&["--frame-size", "1519", "--rate", "1000fps"]);
    let run = expect_error(Some(&ns), &args);
    mentions(&run, &["MTU", "1519"]);
    // rfc2544 checks every size before the first trial.
    let mut args = vec!["rfc2544"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&["--sizes", "64,9000"]);
    let run = expect_error(Some(&ns), &args);
    mentions(&run, &["MTU"]);
    assert!(run.stdout.is_empty(), "{}", run.dump());
}

// ---- known linerate bugs: these assert the intended behaviour and fail
// until the bug is fixed; run them with --ignored. ----

#[test]
fn trial_too_short_for_one_frame_is_refused() {
    if !root_or_skip("trial_too_short_for_one_frame_is_refused") {
        return;
    }
    let (ns, _guard) = back_to_back("s", 9000);
    let mut args = vec!["rfc2544"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&[
        "--sizes",
        "64",
        "--trial-duration",
        "1ns",
        "--straggler-wait",
        "100ms",
    ]);
    let run = expect_error(Some(&ns), &args);
    mentions(&run, &["--trial-duration"]);
    let mut args = vec!["trial"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&[
        "--frame-size",
        "64",
        "--rate",
        "1000fps",
        "--duration",
        "1ns",
    ]);
    let run = expect_error(Some(&ns), &args);
    mentions(&run, &["--duration"]);
}

#[test]
fn unwritable_json_path_is_refused_before_any_trial() {
    if !root_or_skip("unwritable_json_path_is_refused_before_any_trial") {
        return;
    }
    let (ns, _guard) = back_to_back("j", 9000);
    let mut args = vec!["rfc2544"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&[
        "--sizes",
        "64",
        "--trial-duration",
        "500ms",
        "--straggler-wait",
        "200ms",
        "--max-rate",
        "10000fps",
        "--json",
        "/nonexistent-dir/x.json",
    ]);
    let run = expect_error(Some(&ns), &args);
    mentions(&run, &["/nonexistent-dir/x.json"]);
    assert!(
        !run.stderr.contains("trial  1"),
        "ran a trial first:\n{}",
        run.dump()
    );
}

/// Runs linerate with `args`, reads the first line of its output and closes
/// the pipe, as `linerate ... | head -1` does. Returns how it ended and
/// what it wrote to stderr.
fn first_line_then_close(args: &[&str]) -> (String, std::process::ExitStatus, String) {
    use std::io::{BufRead, BufReader, Read};
    let mut child = std::process::Command::new(LINERATE)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("starting linerate");
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader (and the pipe's read end) is gone here.
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let status = child.wait().unwrap();
    (first, status, stderr)
}

/// A reader that goes away ends linerate quietly, as it ends other tools
/// (SIGPIPE): no panic, no backtrace, no message. The outputs are larger
/// than a pipe holds, so linerate is still writing when the reader leaves.
#[test]
fn a_closed_pipe_ends_linerate_quietly() {
    use std::os::unix::process::ExitStatusExt;
    let mut toml = String::new();
    for i in 0..3000 {
        toml.push_str(&format!(
            "[[test]]\nname = \"t{i}\"\ncommand = \"overhead\"\nframe-size = [64, 1518]\nesp = \"aes\"\nauth = \"sha1\"\n"
        ));
    }
    let file = TempFile::new("big-toml");
    std::fs::write(&file.0, toml).unwrap();
    let sizes: Vec<String> = (64..=9018).step_by(2).map(|n| n.to_string()).collect();
    let sizes = sizes.join(",");
    for args in [
        &["run", "--dry-run", file.arg()][..],
        &["overhead", "--frame-size", &sizes][..],
        &["overhead", "--json", "--frame-size", &sizes][..],
    ] {
        let (first, status, stderr) = first_line_then_close(args);
        assert!(!first.is_empty(), "{args:?}: no output");
        assert!(
            stderr.is_empty(),
            "{args:?}: wrote to stderr ({status}):\n{stderr}"
        );
        assert_eq!(
            status.signal(),
            Some(nix::libc::SIGPIPE),
            "{args:?}: ended by {status}, not by SIGPIPE"
        );
    }
}

/// `--port 0` is bad input (exit 2), not a DUT that blocks the port
/// (exit 1); refused before any lab is built.
#[test]
fn port_zero_is_bad_input() {
    let lab = unique("z");
    for cmd in ["tcp", "http"] {
        refuses(
            &format!("{cmd} --port 0"),
            &[
                cmd,
                "--lab",
                "--lab-name",
                &lab,
                "--duration",
                "1s",
                "--port",
                "0",
            ],
            &["--port 0", "1..65535"],
        );
    }
}

/// A gateway MAC that is not one station's (broadcast, multicast, all
/// zeros) would deliver test frames with no DUT in between: refused before
/// any port opens.
#[test]
fn non_unicast_gateway_mac_is_refused() {
    // The root check comes first.
    if !root_or_skip("non_unicast_gateway_mac_is_refused") {
        return;
    }
    for (option, mac) in [
        ("--gw-mac-a", "ff:ff:ff:ff:ff:ff"),
        ("--gw-mac-b", "01:00:5e:00:00:01"),
        ("--gw-mac-a", "00:00:00:00:00:00"),
    ] {
        refuses(
            &format!("{option} {mac}"),
            &trial_args(&["--frame-size", "64", "--rate", "1000fps", option, mac]),
            &[option, mac, "unicast"],
        );
    }
}

// ---- the test gate: under LINERATE_REQUIRE_ALL=1 a skip fails ----

/// Skips when asked to (by `a_skip_fails_when_every_test_must_run`), else
/// does nothing.
#[test]
fn skip_probe() {
    if std::env::var("LINERATE_SKIP_PROBE").is_ok() {
        skip("(probe): skip_probe");
    }
}

/// scripts/test.sh (CI) exports LINERATE_REQUIRE_ALL=1: every skip is then
/// a failure with its reason; without it a skip says SKIPPED and passes.
#[test]
fn a_skip_fails_when_every_test_must_run() {
    let probe = |require_all: &str| {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["skip_probe", "--exact", "--nocapture", "--test-threads=1"])
            .env("LINERATE_SKIP_PROBE", "1")
            .env("LINERATE_REQUIRE_ALL", require_all)
            .output()
            .unwrap()
    };
    let failed = probe("1");
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(!failed.status.success(), "a skip passed:\n{err}");
    assert!(
        err.contains("SKIPPED (probe): skip_probe") && err.contains("LINERATE_REQUIRE_ALL=1"),
        "{err}"
    );
    let skipped = probe("0");
    let err = String::from_utf8_lossy(&skipped.stderr);
    assert!(skipped.status.success(), "{err}");
    assert!(err.contains("SKIPPED (probe): skip_probe"), "{err}");
}

/// A tester port that does not exist is named as such, whatever counts on
/// the other port: not blamed on the in-kernel counter ("does not attach
/// ... use --engine af_xdp or af_packet"), which never got to try.
#[test]
fn a_missing_port_is_named_not_blamed_on_the_counter() {
    if !root_or_skip("a_missing_port_is_named_not_blamed_on_the_counter") {
        return;
    }
    let (ns, _guard) = back_to_back("x", 1500);
    for (a, b, missing) in [("p0", "nosuch", "nosuch"), ("nosuch", "p1", "nosuch")] {
        for engine in [
            &["--engine", "xdp"][..],
            &["--engine", "af_packet", "--receiver", "kernel"],
            &["--engine", "af_xdp", "--receiver", "kernel"],
            &["--engine", "auto"],
        ] {
            let mut args = vec![
                "trial",
                "--port-a",
                a,
                "--port-b",
                b,
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
            ];
            args.extend_from_slice(engine);
            let run = expect_error(Some(&ns), &args);
            mentions(&run, &[&format!("interface '{missing}' not found")]);
            assert!(!run.stderr.contains("counter"), "{}", run.dump());
        }
    }
}

/// Another XDP program on port B (a user's firewall, say) keeps the
/// in-kernel counter off the port: the error names that program and gives
/// the fix that works with the engine asked for (the xdp engine counts in
/// the kernel only: af_packet; a socket engine: --receiver socket), not
/// one that fails the same way. Needs clang, which builds linerate's own
/// XDP programs.
#[test]
fn another_xdp_program_on_port_b_is_named() {
    if !root_or_skip("another_xdp_program_on_port_b_is_named") {
        return;
    }
    let (ns, _guard) = back_to_back("f", 1500);
    let dir = Scratch::new("xdp");
    let (src, obj) = (dir.path("fw.c"), dir.path("fw.o"));
    std::fs::write(
        &src,
        "__attribute__((section(\"xdp\"), used)) int user_fw(void *ctx) { return 2; }\n\
         char _license[] __attribute__((section(\"license\"), used)) = \"GPL\";\n",
    )
    .unwrap();
    sh("clang", &["-O2", "-target", "bpf", "-c", &src, "-o", &obj]);
    sh(
        "ip",
        &[
            "-n",
            &ns,
            "link",
            "set",
            "dev",
            "p1",
            "xdpgeneric",
            "obj",
            &obj,
            "sec",
            "xdp",
        ],
    );
    for (engine, fix) in [
        (&["--engine", "xdp"][..], "--engine af_packet"),
        (
            &["--engine", "af_packet", "--receiver", "kernel"],
            "--receiver socket",
        ),
    ] {
        let mut args = vec!["trial"];
        args.extend_from_slice(&B2B_HOSTS);
        args.extend_from_slice(&["--frame-size", "64", "--rate", "1000fps", "--no-db"]);
        args.extend_from_slice(engine);
        let run = expect_error(Some(&ns), &args);
        mentions(
            &run,
            &[
                "port B (p1) already has an XDP program attached",
                "'user_fw'",
                fix,
            ],
        );
        assert!(!run.stderr.contains("af_xdp"), "{}", run.dump());
    }
    // --engine auto (the default) finds a way, and says why it counts
    // through a socket.
    let mut args = vec!["trial"];
    args.extend_from_slice(&B2B_HOSTS);
    args.extend_from_slice(&["--frame-size", "64", "--rate", "1000fps", "--no-db"]);
    let run = linerate_in(&ns, &args);
    assert!(!run.stderr.contains("panicked"), "{}", run.dump());
    // user_fw passes every frame on (XDP_PASS), so they reach the socket.
    assert_eq!(run.code, 0, "{}", run.dump());
    mentions(
        &run,
        &["the in-kernel counter does not attach to p1", "user_fw"],
    );
    // The same with the user's program in the driver (native mode), where
    // port B takes no AF_XDP socket either: a packet socket then.
    sh(
        "ip",
        &["-n", &ns, "link", "set", "dev", "p1", "xdpgeneric", "off"],
    );
    sh(
        "ip",
        &[
            "-n", &ns, "link", "set", "dev", "p1", "xdpdrv", "obj", &obj, "sec", "xdp",
        ],
    );
    let run = linerate_in(&ns, &args);
    assert!(!run.stderr.contains("panicked"), "{}", run.dump());
    assert_eq!(run.code, 0, "{}", run.dump());
    mentions(&run, &["user_fw"]);
    // The user's program is left as it was.
    let link = sh("ip", &["-n", &ns, "-d", "-j", "link", "show", "dev", "p1"]);
    assert!(link.contains("user_fw"), "{link}");
}

/// A directory of the test's own for the files the cases name, removed on
/// drop; its listing before and after a run tells whether linerate wrote
/// anything.
struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(tag: &str) -> Scratch {
        let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("bad-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).to_str().unwrap().to_string()
    }

    /// Every file and directory below it, with sizes (a file rewritten in
    /// place shows too), sorted.
    fn listing(&self) -> Vec<String> {
        fn walk(dir: &std::path::Path, base: &std::path::Path, out: &mut Vec<String>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                let m = std::fs::symlink_metadata(&p).unwrap();
                let rel = p.strip_prefix(base).unwrap().display().to_string();
                out.push(format!("{rel} {}", if m.is_dir() { 0 } else { m.len() }));
                if m.is_dir() {
                    walk(&p, base, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&self.0, &self.0, &mut out);
        out.sort();
        out
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every file a command writes is checked, together, before anything runs:
/// a directory, a missing directory, a device or pipe where a file is
/// replaced whole, and two options naming one file (also through a hard
/// link, or an output over a file the command reads) are refused in one
/// line naming the option, and nothing is written, not even a temporary
/// file. The checks come before the lab (which does not exist here) and
/// before root is needed.
#[test]
fn output_paths_are_checked_together_before_anything_runs() {
    let s = Scratch::new("outputs");
    std::fs::create_dir(s.0.join("adir")).unwrap();
    std::fs::write(s.0.join("old.json"), "{}").unwrap();
    std::fs::hard_link(s.0.join("old.json"), s.0.join("link.sqlite")).unwrap();
    nix::unistd::mkfifo(&s.0.join("fifo"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let lab = unique("o");
    let trial = |extra: &[&str]| {
        let mut v: Vec<String> = [
            "trial",
            "--lab",
            "--lab-name",
            &lab,
            "--frame-size",
            "64",
            "--rate",
            "1000fps",
        ]
        .iter()
        .map(|a| a.to_string())
        .collect();
        v.extend(extra.iter().map(|a| a.to_string()));
        v
    };
    let p = |n: &str| s.path(n);
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            trial(&["--no-db", "--json", &p("adir")]),
            vec!["--json", "is a directory", "adir/results.json"],
        ),
        (
            trial(&["--no-db", "--json", &p("nodir/x.json")]),
            vec!["--json", "nodir", "does not exist"],
        ),
        (
            trial(&["--no-db", "--json", &p("fifo")]),
            vec!["--json", "a named pipe", "not a regular file"],
        ),
        (
            trial(&["--json", &p("x.json"), "--db", &p("x.json")]),
            vec!["--json", "--db", "same file"],
        ),
        (
            trial(&["--json", &p("old.json"), "--db", &p("link.sqlite")]),
            vec!["--json", "--db", "same file"],
        ),
        (
            trial(&[
                "--no-db",
                "--events",
                &p("e.jsonl"),
                "--json",
                &p("./e.jsonl"),
            ]),
            vec!["--events", "--json", "same file"],
        ),
        (
            trial(&["--no-db", "--pcap", &p("f.pcap"), "--events", &p("f.pcap")]),
            vec!["--events", "--pcap", "same file"],
        ),
        (trial(&["--db", &p("adir")]), vec!["--db", "is a directory"]),
        (
            vec![
                "rfc2544".into(),
                "--lab".into(),
                "--lab-name".into(),
                lab.clone(),
                "--no-db".into(),
                "--json".into(),
                p("old.json"),
                "--calibration".into(),
                p("old.json"),
            ],
            vec!["--json", "also the --calibration file"],
        ),
        (
            vec!["calibrate".into(), "--calibration".into(), p("adir")],
            vec!["--calibration", "is a directory"],
        ),
        (
            [
                "export",
                "last",
                "--json",
                "--db",
                &p("none.sqlite"),
                "-o",
                &p("adir"),
            ]
            .iter()
            .map(|a| a.to_string())
            .collect(),
            vec!["--output", "is a directory"],
        ),
        (
            [
                "report",
                "last",
                "--db",
                &p("none.sqlite"),
                "--html",
                &p("adir"),
            ]
            .iter()
            .map(|a| a.to_string())
            .collect(),
            vec!["--html", "is a directory"],
        ),
    ];
    for (argv, says) in cases {
        let before = s.listing();
        let args: Vec<&str> = argv.iter().map(String::as_str).collect();
        let run = expect_error(None, &args);
        mentions(&run, &says);
        assert_eq!(s.listing(), before, "wrote something:\n{}", run.dump());
    }
}

// ---- the bad-input suite: every packet command with every bad case that
// applies to it, each refused before anything is built, sent or written ----

/// A packet command as the suite drives it.
struct Cmd {
    name: &'static str,
    /// Valid options besides ports, frame sizes and outputs, as option and
    /// value pairs; a case that gives an option replaces its pair.
    base: &'static [&'static str],
    /// The frame size option (`--frame-size` or `--sizes`), if any.
    frames: Option<&'static str>,
    /// Takes --ip-a/--gw-a/--ip-b/--gw-b with --port-a/--port-b.
    hosts: bool,
    /// Takes --gw-mac-a.
    gw_mac: bool,
    /// Takes --lab (--lab-name).
    lab: bool,
    /// The option of the file it writes (`--json`, calibrate's `--calibration`).
    writes: &'static str,
    /// Takes the record options (--db, --events, --pcap).
    record: bool,
    /// An option and value above the line rate.
    over_line: Option<(&'static str, &'static str)>,
    /// An out-of-range share: option, value, what the error says.
    share: Option<(&'static str, &'static str, &'static str)>,
    /// The duration option.
    duration: &'static str,
    /// Takes --port (a TCP port).
    tcp_port: bool,
}

const COMMANDS: &[Cmd] = &[
    Cmd {
        name: "trial",
        base: &["--rate", "1000fps", "--duration", "1s"],
        frames: Some("--frame-size"),
        hosts: true,
        gw_mac: true,
        lab: true,
        writes: "--json",
        record: true,
        over_line: Some(("--rate", "101%")),
        share: Some(("--loss", "5", "write 5%")),
        duration: "--duration",
        tcp_port: false,
    },
    Cmd {
        name: "rfc2544",
        base: &["--trial-duration", "1s"],
        frames: Some("--sizes"),
        hosts: true,
        gw_mac: true,
        lab: true,
        writes: "--json",
        record: true,
        over_line: Some(("--max-rate", "101%")),
        share: Some(("--resolution", "0", "above 0")),
        duration: "--trial-duration",
        tcp_port: false,
    },
    Cmd {
        name: "loss",
        base: &["--loads", "10%", "--trial-duration", "1s"],
        frames: Some("--sizes"),
        hosts: true,
        gw_mac: true,
        lab: true,
        writes: "--json",
        record: true,
        over_line: Some(("--loads", "101%")),
        share: Some(("--stop-at-loss", "50", "write 50%")),
        duration: "--trial-duration",
        tcp_port: false,
    },
    Cmd {
        name: "latency",
        base: &["--rate", "1000fps", "--trial-duration", "1s"],
        frames: Some("--sizes"),
        hosts: true,
        gw_mac: true,
        lab: true,
        writes: "--json",
        record: true,
        over_line: Some(("--rate", "101%")),
        // --resolution is the search's, and --rate runs none (refused as
        // out of its mode): shares_out_of_range_are_refused_before_any_lab
        // checks it without --rate.
        share: None,
        duration: "--trial-duration",
        tcp_port: false,
    },
    Cmd {
        name: "mlrsearch",
        base: &["--trial-duration", "1s"],
        frames: Some("--sizes"),
        hosts: true,
        gw_mac: true,
        lab: true,
        writes: "--json",
        record: true,
        over_line: Some(("--max-rate", "101%")),
        share: Some(("--exceed-ratio", "50", "write 50%")),
        duration: "--trial-duration",
        tcp_port: false,
    },
    Cmd {
        name: "back-to-back",
        // No --throughput: --trial-duration is its search's (a throughput
        // given runs none, and --trial-duration is then refused).
        base: &["--repeat", "1", "--trial-duration", "1s"],
        frames: Some("--sizes"),
        hosts: true,
        gw_mac: true,
        lab: true,
        writes: "--json",
        record: true,
        over_line: Some(("--max-rate", "101%")),
        share: Some(("--resolution", "0", "above 0")),
        duration: "--trial-duration",
        tcp_port: false,
    },
    Cmd {
        name: "calibrate",
        base: &["--engine", "af_packet", "--trial-duration", "1s"],
        frames: Some("--sizes"),
        hosts: false,
        gw_mac: false,
        lab: false,
        writes: "--calibration",
        record: false,
        over_line: None,
        share: Some(("--resolution", "0", "above 0")),
        duration: "--trial-duration",
        tcp_port: false,
    },
    Cmd {
        name: "cpu-target",
        base: &["--trial-duration", "1s"],
        frames: Some("--sizes"),
        hosts: true,
        gw_mac: true,
        lab: true,
        writes: "--json",
        record: true,
        over_line: Some(("--max-rate", "101%")),
        share: Some(("--target", "75", "write 75%")),
        duration: "--trial-duration",
        tcp_port: false,
    },
    Cmd {
        name: "tcp",
        base: &["--duration", "1s"],
        frames: None,
        hosts: true,
        gw_mac: false,
        lab: true,
        writes: "--json",
        record: true,
        over_line: None,
        share: None,
        duration: "--duration",
        tcp_port: true,
    },
    Cmd {
        name: "http",
        base: &["--duration", "1s"],
        frames: None,
        hosts: true,
        gw_mac: false,
        lab: true,
        writes: "--json",
        record: true,
        over_line: None,
        share: None,
        duration: "--duration",
        tcp_port: true,
    },
];

/// Where a case's command runs.
#[derive(Clone, Copy, PartialEq)]
enum Bed {
    /// A lab that does not exist: a check made after the test bed would
    /// fail on the lab instead (calibrate: two missing interfaces).
    NoLab,
    /// Two interfaces that do not exist.
    Missing,
    /// A veth pair back to back in a namespace of the test's (ports p0, p1).
    Wire,
}

struct Case {
    what: &'static str,
    cmd: &'static Cmd,
    bed: Bed,
    /// Options of the case (the bad value).
    extra: Vec<String>,
    /// The frame size given (a bad one for the frame size case).
    frame: &'static str,
    /// The output file's option value (a directory, say) or None for the
    /// usual scratch file.
    output: Option<String>,
    /// The record options instead of the usual scratch files.
    record: Option<Vec<String>>,
    /// What stderr must mention.
    says: Vec<String>,
}

impl Case {
    fn new(what: &'static str, cmd: &'static Cmd, bed: Bed) -> Case {
        Case {
            what,
            cmd,
            bed,
            extra: Vec::new(),
            frame: "64",
            output: None,
            record: None,
            says: Vec::new(),
        }
    }

    fn extra(mut self, args: &[&str]) -> Case {
        self.extra.extend(args.iter().map(|s| s.to_string()));
        self
    }

    fn says(mut self, words: &[&str]) -> Case {
        self.says.extend(words.iter().map(|s| s.to_string()));
        self
    }

    /// The command line (without the program), for a lab named `lab` and
    /// files in `s`.
    fn argv(&self, lab: &str, s: &Scratch) -> Vec<String> {
        let c = self.cmd;
        let mut v = vec![c.name.to_string()];
        let strs = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match (self.bed, c.lab) {
            (Bed::NoLab, true) => v.extend(strs(&["--lab", "--lab-name", lab])),
            (Bed::Wire, _) => v.extend(strs(&B2B_HOSTS)),
            _ => {
                v.extend(strs(&["--port-a", "nosuch0", "--port-b", "nosuch1"]));
                if c.hosts {
                    v.extend(strs(&HOSTS[4..]));
                }
            }
        }
        if let Some(opt) = c.frames {
            v.extend([opt.to_string(), self.frame.to_string()]);
        }
        // The valid options, but for those the case gives itself.
        for pair in c.base.chunks(2) {
            if !self.extra.iter().any(|a| a == pair[0]) {
                v.extend(strs(pair));
            }
        }
        if c.name == "cpu-target" && !(self.bed == Bed::NoLab && c.lab) {
            // An external DUT's CPU load (the lab's is read from the DUT).
            v.extend(strs(&["--dut-cpu-cmd", "echo 10"]));
        }
        let out = self.output.clone().unwrap_or_else(|| s.path("out.json"));
        v.extend([c.writes.to_string(), out]);
        if c.record {
            v.extend(self.record.clone().unwrap_or_else(|| {
                vec![
                    "--db".into(),
                    s.path("results.sqlite"),
                    "--events".into(),
                    s.path("events.jsonl"),
                ]
            }));
        }
        v.extend(self.extra.iter().cloned());
        v
    }

    /// Whether the command checks the bad value before touching the
    /// machine (a scenario file's check then finds it too).
    fn found_by_checking(&self) -> bool {
        self.bed == Bed::NoLab
    }
}

/// Every case of the issue that applies to `c`; `s` holds the files.
fn cases_of(c: &'static Cmd, s: &Scratch) -> Vec<Case> {
    let mut v = Vec::new();
    v.push(Case::new("unknown interface", c, Bed::Missing).says(&["nosuch"]));
    if c.gw_mac {
        v.push(
            Case::new("broadcast gateway MAC", c, Bed::Missing)
                .extra(&["--gw-mac-a", "ff:ff:ff:ff:ff:ff"])
                .says(&["--gw-mac-a", "ff:ff:ff:ff:ff:ff", "unicast"]),
        );
    }
    if c.frames.is_some() {
        let mut k = Case::new("frame too small", c, Bed::NoLab).says(&["60", "64..9018"]);
        k.frame = "60";
        v.push(k);
    }
    if let Some((opt, value)) = c.over_line {
        v.push(
            Case::new("rate above line rate", c, Bed::Wire)
                .extra(&[opt, value, "--line-speed", "1G"])
                .says(&[opt, "line rate"]),
        );
    }
    if let Some((opt, value, says)) = c.share {
        v.push(
            Case::new("bad ratio or percent", c, Bed::NoLab)
                .extra(&[opt, value])
                .says(&[opt, value, says]),
        );
    }
    v.push(
        Case::new("duration zero", c, Bed::NoLab)
            .extra(&[c.duration, "0s"])
            .says(&[c.duration]),
    );
    // A bare 0, and negative ones: one line naming the option, never
    // clap's "unexpected argument '-1'" with its usage block.
    v.push(
        Case::new("duration bare zero", c, Bed::NoLab)
            .extra(&[c.duration, "0"])
            .says(&[c.duration, "'0'"]),
    );
    for negative in ["-1", "-5s", "-0.5"] {
        v.push(
            Case::new("duration negative", c, Bed::NoLab)
                .extra(&[c.duration, negative])
                .says(&[c.duration, negative, "negative"]),
        );
    }
    let mut k = Case::new("output to a directory", c, Bed::NoLab).says(&[c.writes, "directory"]);
    k.output = Some(s.path("adir"));
    v.push(k);
    let mut k = Case::new("output in a missing directory", c, Bed::NoLab)
        .says(&[c.writes, "does not exist"]);
    k.output = Some(s.path("nodir/out.json"));
    v.push(k);
    if c.record {
        let same = s.path("same.json");
        let mut k =
            Case::new("json same as db", c, Bed::NoLab).says(&["--json", "--db", "same file"]);
        k.output = Some(same.clone());
        k.record = Some(vec!["--db".into(), same.clone()]);
        v.push(k);
        let mut k = Case::new("json same as events", c, Bed::NoLab).says(&[
            "--json",
            "--events",
            "same file",
        ]);
        k.output = Some(same.clone());
        k.record = Some(vec!["--no-db".into(), "--events".into(), same]);
        v.push(k);
        let mut k = Case::new("db is a directory", c, Bed::NoLab).says(&["--db", "directory"]);
        k.record = Some(vec!["--db".into(), s.path("adir")]);
        v.push(k);
        let mut k =
            Case::new("events to a directory", c, Bed::NoLab).says(&["--events", "directory"]);
        k.record = Some(vec!["--no-db".into(), "--events".into(), s.path("adir")]);
        v.push(k);
    }
    if c.tcp_port {
        v.push(
            Case::new("port 0", c, Bed::NoLab)
                .extra(&["--port", "0"])
                .says(&["--port 0"]),
        );
        // The kernel's TCP carries the data: no test frames to sample.
        let pcap = s.path("tcp.pcap");
        v.push(
            Case::new("pcap of a TCP test", c, Bed::NoLab)
                .extra(&["--pcap", &pcap])
                .says(&["--pcap", "tcpdump"]),
        );
    }
    v
}

/// The files in /run/linerate with their modification times.
fn lock_files() -> Vec<(String, Option<std::time::SystemTime>)> {
    std::fs::read_dir("/run/linerate")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let modified = e.metadata().and_then(|m| m.modified()).ok();
            (e.file_name().to_string_lossy().into_owned(), modified)
        })
        .collect()
}

/// The same test as a scenario file: a valid first test (a trial on the
/// lab that does not exist, which would fail if it ran) and the bad one
/// second; `argv` is the bad test's command line.
fn scenario_file(lab: &str, argv: &[String]) -> String {
    let quote = |s: &str| format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""));
    let mut t = format!(
        "[[test]]\ncommand = \"trial\"\nlab = true\nlab-name = \"{lab}\"\nframe-size = 64\nrate = \"1000fps\"\nno-db = true\n\n[[test]]\ncommand = \"{}\"\n",
        argv[0]
    );
    let mut i = 1;
    while i < argv.len() {
        let key = argv[i].trim_start_matches("--");
        match argv.get(i + 1).filter(|v| !v.starts_with("--")) {
            Some(value) => {
                t.push_str(&format!("{key} = {}\n", quote(value)));
                i += 2;
            }
            None => {
                t.push_str(&format!("{key} = true\n"));
                i += 1;
            }
        }
    }
    t
}

/// Every packet command (and `run` with it in a scenario file), with every
/// case of bad input that applies to it: exit 2, exactly one line on
/// stderr starting "linerate: error:" that names the problem, nothing on
/// stdout, no namespace left (none with the test's lab name, none of
/// linerate's own temporary ones), no lock file left in /run/linerate,
/// and no file written: the scratch
/// directory every output points into holds after the run exactly what it
/// held before. Nothing is sent: each case fails before the first frame.
#[test]
fn every_packet_command_refuses_bad_input_and_leaves_nothing() {
    if !root_or_skip("every_packet_command_refuses_bad_input_and_leaves_nothing") {
        return;
    }
    let s = Scratch::new("suite");
    std::fs::create_dir(s.0.join("adir")).unwrap();
    let lab = unique("q");
    let (ns, _guard) = back_to_back("w", 1500);
    // The lock files of the wire's ports start so (see linerate-lab's lock_port).
    let wire_locks = format!(
        "port-{}-",
        std::os::unix::fs::MetadataExt::ino(
            &std::fs::metadata(format!("/run/netns/{ns}")).unwrap()
        )
    );
    let mut failures = Vec::new();
    let mut count = 0;
    for c in COMMANDS {
        for case in cases_of(c, &s) {
            let argv = case.argv(&lab, &s);
            let mut runs = vec![(format!("{} {}", c.name, case.what), argv.clone(), None)];
            if case.found_by_checking() {
                let file = s.path(&format!("scenario-{count}.toml"));
                std::fs::write(&file, scenario_file(&lab, &argv)).unwrap();
                runs.push((
                    format!("run: {} {}", c.name, case.what),
                    vec!["run".into(), file],
                    Some("test 2"),
                ));
            }
            for (label, argv, also) in runs {
                count += 1;
                let before = s.listing();
                let ns_before = netns_list();
                let locks_before = lock_files();
                let args: Vec<&str> = argv.iter().map(String::as_str).collect();
                let run = match case.bed {
                    Bed::Wire => linerate_in(&ns, &args),
                    _ => linerate(&args),
                };
                let mut wrong = Vec::new();
                let lines: Vec<&str> = run.stderr.lines().collect();
                if run.code != 2 {
                    wrong.push(format!("exit {}", run.code));
                }
                if lines.len() != 1 || !lines[0].starts_with("linerate: error:") {
                    wrong.push("stderr is not one 'linerate: error:' line".to_string());
                }
                for w in case.says.iter().map(String::as_str).chain(also) {
                    if !run.stderr.contains(w) {
                        wrong.push(format!("does not say '{w}'"));
                    }
                }
                if !run.stdout.is_empty() {
                    wrong.push("wrote to stdout".into());
                }
                let left: Vec<String> = new_lr_netns(&ns_before, &netns_list())
                    .into_iter()
                    .chain(netns_with_prefix(&format!("lr-{lab}")))
                    .chain(netns_with_prefix(&format!("lr-run{}-", run.pid)))
                    .chain(netns_with_prefix(&format!("lr-g{}-", run.pid)))
                    .collect();
                if !left.is_empty() {
                    wrong.push(format!("left namespaces {left:?}"));
                }
                // Nor a lock file of the lab (or of a port) it never used.
                // One left earlier by a killed run (a SIGKILL test) whose
                // namespace inode the kernel has since reused is not this
                // run's (runs sweep such files only when they take a lock,
                // which these fail before): only files made or rewritten by
                // it count.
                let locks: Vec<String> = lock_files()
                    .into_iter()
                    .filter(|l| !locks_before.contains(l))
                    .map(|(n, _)| n)
                    .filter(|n| {
                        n.contains(&lab) || n.contains("-nosuch") || n.starts_with(&wire_locks)
                    })
                    .collect();
                if !locks.is_empty() {
                    wrong.push(format!("left lock files {locks:?}"));
                }
                let after = s.listing();
                if after != before {
                    let new: Vec<_> = after.iter().filter(|f| !before.contains(f)).collect();
                    wrong.push(format!("wrote {new:?}"));
                }
                if !wrong.is_empty() {
                    failures.push(format!(
                        "{label}: {}\n  linerate {}\n  {}",
                        wrong.join("; "),
                        argv.join(" "),
                        run.stderr.trim_end().replace('\n', "\n  ")
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {count} runs went wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert!(count >= 100, "only {count} runs");
}

/// Options for ports the user names mean nothing in the lab: every command
/// that takes them refuses each in one line instead of ignoring it (a
/// gateway MAC of ff:ff:ff:ff:ff:ff used to run and pass).
#[test]
fn port_options_are_refused_in_the_lab_by_every_command() {
    let commands: [&[&str]; 9] = [
        &["trial", "--rate", "1000fps"],
        &["rfc2544"],
        &["loss", "--loads", "10%"],
        &["latency", "--rate", "10%"],
        &["mlrsearch"],
        &["back-to-back"],
        &["cpu-target", "--target", "50%"],
        &["tcp"],
        &["http"],
    ];
    let goodput = |cmd: &str| cmd == "tcp" || cmd == "http";
    for command in commands {
        let mut options = vec![
            ["--ip-a", "198.18.0.2/24"],
            ["--gw-a", "198.18.0.1"],
            ["--ip-b", "198.19.0.2/24"],
            ["--gw-b", "198.19.0.1"],
        ];
        if !goodput(command[0]) {
            options.push(["--gw-mac-a", "ff:ff:ff:ff:ff:ff"]);
            options.push(["--gw-mac-b", "02:00:00:00:00:01"]);
        }
        for [option, value] in options {
            let mut args = command.to_vec();
            args.extend(["--lab", option, value]);
            refuses(&args.join(" "), &args, &[option, "--lab"]);
        }
    }
    // With a scenario (which builds a lab of its own) the same.
    let run = expect_error(
        None,
        &["rfc2544", "--scenario", "acl:1", "--gw-a", "198.18.0.1"],
    );
    mentions(&run, &["--gw-a", "--scenario"]);
}

/// The IPsec options: refused without --ipsec, and --ipsec refused where it
/// cannot work, each in one line before anything is touched.
#[test]
fn ipsec_options_outside_their_mode() {
    let trial = |extra: &[&'static str]| trial_args(&[&["--rate", "1000fps"][..], extra].concat());
    // --rekey: only with --ipsec, a duration, and not shorter than a
    // rekey takes.
    expect_refusals(&[
        (
            "--psk-file without --ipsec",
            trial(&["--psk-file", "/nonexistent"]),
            &["--psk-file", "--ipsec"],
        ),
        (
            "--direction without --ipsec",
            trial(&["--direction", "encrypt"]),
            &["--direction", "--ipsec"],
        ),
        (
            "--ipsec in the lab without the vpn-gateway scenario",
            vec!["trial", "--lab", "--rate", "1000fps", "--ipsec"],
            &["--scenario vpn-gateway"],
        ),
        (
            "an unknown --direction",
            trial(&["--ipsec", "--direction", "sideways"]),
            &["sideways", "encrypt, decrypt or both"],
        ),
        (
            "an unknown --esp",
            trial(&["--ipsec", "--esp", "camellia128-sha256"]),
            &["camellia128-sha256", "aes256gcm16", "3des"],
        ),
        (
            "an unknown --ike",
            trial(&["--ipsec", "--ike", "aes256-md5-modp1024"]),
            &["--ike"],
        ),
        (
            "--remote-net without a prefix",
            trial(&["--ipsec", "--remote-net", "198.19.1.0"]),
            &["--remote-net", "ADDRESS/PREFIX"],
        ),
        (
            "--ipsec with --vlan",
            trial(&["--ipsec", "--vlan", "100"]),
            &["--ipsec", "IPv4"],
        ),
        (
            "--rekey without --ipsec",
            trial(&["--rekey", "2s"]),
            &["--rekey", "--ipsec"],
        ),
        (
            "--rekey not a duration",
            trial(&["--ipsec", "--rekey", "often"]),
            &["--rekey 'often'", "2s"],
        ),
        (
            "--rekey shorter than a rekey takes",
            trial(&["--ipsec", "--rekey", "50ms"]),
            &["--rekey 50ms", "200ms or more"],
        ),
        // --esp-encap: udp, raw or auto; raw not where the gateway can
        // only do UDP (the lab's charon with kernel-libipsec).
        (
            "an unknown --esp-encap",
            trial(&["--ipsec", "--esp-encap", "bogus"]),
            &["--esp-encap bogus", "udp, raw or auto"],
        ),
        (
            "--esp-encap without --ipsec",
            trial(&["--esp-encap", "raw"]),
            &["--esp-encap", "--ipsec"],
        ),
        (
            "--esp-encap raw in the lab",
            vec!["rfc2544", "--scenario", "vpn-gateway", "--esp-encap", "raw"],
            &["--esp-encap raw", "kernel-libipsec", "udp"],
        ),
        // --ipsec-id templates: checked as the plan is made, before the
        // ports or the lab.
        (
            "--ipsec-id with an unknown placeholder",
            trial(&["--ipsec", "--ipsec-id", "user{id}@example"]),
            &["--ipsec-id user{id}@example", "{id}", "{n}", "{addr}"],
        ),
        (
            "--ipsec-id with a brace left open, in the lab",
            vec![
                "rfc2544",
                "--scenario",
                "vpn-gateway",
                "--ipsec-id",
                "@peer{n.vpn.example",
            ],
            &["--ipsec-id peer{n.vpn.example", "without its '}'"],
        ),
        // --ipsec-timeout: a duration above 0.
        (
            "--ipsec-timeout 0s",
            trial(&["--ipsec", "--ipsec-timeout", "0s"]),
            &["--ipsec-timeout 0s", "above 0"],
        ),
        (
            "--ipsec-timeout not a duration",
            trial(&["--ipsec", "--ipsec-timeout", "soon"]),
            &["--ipsec-timeout 'soon'", "2s"],
        ),
        (
            "--ipsec-timeout without --ipsec",
            trial(&["--ipsec-timeout", "2s"]),
            &["--ipsec-timeout", "--ipsec"],
        ),
    ]);
}

/// An option that means nothing in the mode the other options chose is
/// refused in one line that names it (and the option that chose the
/// mode), before anything is touched: one case per rule, over every
/// command that has the option.
#[test]
fn options_out_of_their_mode_are_refused_by_every_command() {
    let ports = |cmd: &'static [&'static str], extra: &[&'static str]| {
        let mut v = cmd.to_vec();
        v.extend_from_slice(&["--port-a", "nosuch0", "--port-b", "nosuch1"]);
        v.extend_from_slice(&HOSTS[4..]);
        v.extend_from_slice(extra);
        v
    };
    let packet: [&'static [&'static str]; 7] = [
        &["trial", "--rate", "1000fps", "--frame-size", "64"],
        &["rfc2544"],
        &["loss", "--loads", "10%"],
        &["latency", "--rate", "10%"],
        &["mlrsearch"],
        &["back-to-back"],
        &["cpu-target"],
    ];
    let mut cases: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
    for cmd in packet {
        // Lab-building options without a lab.
        cases.push((
            ports(cmd, &["--lab-ring", "512"]),
            vec!["--lab-ring", "--lab"],
        ));
        // IPsec options without --ipsec.
        cases.push((
            ports(cmd, &["--local-net", "198.18.0.0/24"]),
            vec!["--local-net", "--ipsec"],
        ));
        cases.push((
            ports(cmd, &["--peer-addrs", "198.19.0.10"]),
            vec!["--peer-addrs", "--ipsec"],
        ));
        // A gateway you name, in the lab.
        let mut lab = cmd.to_vec();
        lab.extend_from_slice(&["--lab", "--ipsec", "--ipsec-gateway", "198.19.0.1"]);
        cases.push((lab, vec!["--ipsec-gateway", "--lab"]));
        // The in-kernel counter's sampling with a socket receiver.
        let mut socket = cmd.to_vec();
        socket.extend_from_slice(&["--lab", "--engine", "af_packet", "--receiver", "socket"]);
        socket.extend_from_slice(&["--latency-every", "4"]);
        cases.push((socket, vec!["--latency-every", "--receiver socket"]));
    }
    for cmd in ["rfc2544", "loss", "cpu-target"] {
        // IPsec options on a scenario that makes no VPN gateway.
        let mut v = vec![cmd, "--scenario", "acl:1", "--ipsec"];
        if cmd == "loss" {
            v.extend_from_slice(&["--loads", "10%"]);
        }
        cases.push((v, vec!["--ipsec", "--scenario acl:1", "vpn-gateway"]));
    }
    // The lab of a vpn-gateway scenario makes port B an IPsec peer, which
    // linerate serves in user space: no xdp engine, no in-kernel counter.
    for (option, value) in [("--engine", "xdp"), ("--receiver", "kernel")] {
        cases.push((
            vec!["rfc2544", "--scenario", "vpn-gateway", option, value],
            vec![option, "--scenario vpn-gateway", "user space"],
        ));
    }
    // Its encrypting threads each take tunnels of their own.
    cases.push((
        vec!["rfc2544", "--scenario", "vpn-gateway", "--tx-threads", "2"],
        vec![
            "--tx-threads 2",
            "--scenario vpn-gateway",
            "give --tunnels 2",
        ],
    ));
    // Receiving threads: packet sockets in a fanout group, a stream each.
    let rx = ["trial", "--lab", "--rate", "10%", "--rx-threads", "2"];
    for (extra, words) in [
        (
            &["--tx-threads", "2"][..],
            &["--rx-threads", "--engine af_packet"][..],
        ),
        (
            &[
                "--engine",
                "af_packet",
                "--tx-threads",
                "2",
                "--receiver",
                "kernel",
            ],
            &["--rx-threads", "--receiver kernel"],
        ),
        (
            &["--engine", "af_packet"],
            &["--rx-threads", "give --tx-threads 2"],
        ),
        (
            &[
                "--engine",
                "af_packet",
                "--tx-threads",
                "2",
                "--pcap",
                "/tmp/x.pcap",
            ],
            &["--pcap", "--rx-threads"],
        ),
    ] {
        cases.push(([&rx[..], extra].concat(), words.to_vec()));
    }
    cases.push((
        vec![
            "rfc2544",
            "--scenario",
            "vpn-gateway",
            "--engine",
            "af_packet",
            "--tunnels",
            "2",
            "--tx-threads",
            "2",
            "--rx-threads",
            "2",
        ],
        vec![
            "--rx-threads",
            "decrypts the gateway's ESP on one receiving thread",
        ],
    ));
    cases.push((
        [
            &rx[..],
            &[
                "--engine",
                "af_packet",
                "--tx-threads",
                "2",
                "--ipsec",
                "--tunnels",
                "2",
                "--direction",
                "both",
            ],
        ]
        .concat(),
        vec!["--rx-threads", "--direction both"],
    ));
    cases.push((
        [
            &rx[..],
            &[
                "--engine",
                "af_packet",
                "--tx-threads",
                "3",
                "--ipsec",
                "--tunnels",
                "3",
                "--direction",
                "encrypt",
            ],
        ]
        .concat(),
        vec!["--rx-threads", "give --tx-threads a multiple of 2"],
    ));
    for (args, words) in [
        (
            &[
                "rfc2544",
                "--lab",
                "--rfc2544-strict",
                "--trial-duration",
                "5s",
            ][..],
            &["--trial-duration", "--rfc2544-strict"][..],
        ),
        (
            &[
                "latency",
                "--lab",
                "--rate",
                "10%",
                "--search-duration",
                "1s",
            ],
            &["--search-duration", "--rate"],
        ),
        (
            &["latency", "--lab", "--rate", "10%", "--resolution", "2%"],
            &["--resolution", "--rate"],
        ),
        (
            &["latency", "--lab", "--rate", "10%", "--max-rate", "50%"],
            &["--max-rate", "--rate"],
        ),
        (
            &[
                "back-to-back",
                "--lab",
                "--throughput",
                "1000fps",
                "--trial-duration",
                "1s",
            ],
            &["--trial-duration", "--throughput"],
        ),
        (
            &["loss", "--lab", "--loads", "10%", "--step", "5%"],
            &["--step", "--rfc2544"],
        ),
        (
            &["loss", "--lab", "--loads", "10%", "--max-rate", "50%"],
            &["--max-rate", "--rfc2544"],
        ),
        (
            &[
                "loss",
                "--scenario",
                "acl:1,acl:2",
                "--loads",
                "10%",
                "--label",
                "x",
            ],
            &["--label", "--scenario"],
        ),
        (
            &["tcp", "--lab", "--ip-b", "198.19.0.2/24"],
            &["--ip-b", "--lab"],
        ),
        (
            &["http", "--lab", "--gw-a", "198.18.0.1"],
            &["--gw-a", "--lab"],
        ),
        (
            &["overhead", "--frame-size", "64", "--mode", "transport"],
            &["--mode", "--esp or --ah"],
        ),
        (
            &["calibrate", "--engine", "xdp", "--receiver", "socket"],
            &["--receiver socket", "xdp engine"],
        ),
        (
            &[
                "trial",
                "--lab",
                "--rate",
                "1%",
                "--frame-size",
                "64",
                "--engine",
                "xdp",
                "--receiver",
                "socket",
            ],
            &["--receiver socket", "xdp engine"],
        ),
        (
            &[
                "tunnels",
                "--lab",
                "--scenario",
                "vpn-gateway",
                "--count",
                "5",
                "--ipsec",
            ],
            &["--ipsec", "implied"],
        ),
        (
            &[
                "tunnels",
                "--lab",
                "--scenario",
                "vpn-gateway",
                "--count",
                "5",
                "--ipsec-gateway",
                "198.19.0.1",
            ],
            &["--ipsec-gateway", "--lab"],
        ),
        (
            &[
                "tunnels",
                "--lab",
                "--scenario",
                "vpn-gateway",
                "--count",
                "5",
                "--step",
                "2",
            ],
            &["--step", "--capacity"],
        ),
        (
            &[
                "tunnels",
                "--lab",
                "--scenario",
                "vpn-gateway",
                "--count",
                "5",
                "--max-loss",
                "2",
            ],
            &["--max-loss", "--capacity"],
        ),
        (
            &[
                "tunnels",
                "--lab",
                "--scenario",
                "vpn-gateway",
                "--count",
                "5",
                "--traffic-rate",
                "5/s",
            ],
            &["--traffic-rate", "--traffic"],
        ),
    ] {
        cases.push((args.to_vec(), words.to_vec()));
    }
    for (args, words) in cases {
        refuses(&args.join(" "), &args, &words);
    }
    // What clap says exactly: a lab of one's own naming is up already (its
    // rings are its own), and --table-from measures nothing.
    expect_usage_error(
        &[
            "trial",
            "--lab",
            "--lab-name",
            "x",
            "--lab-ring",
            "512",
            "--rate",
            "1%",
            "--frame-size",
            "64",
        ],
        &["--lab-name", "--lab-ring"],
    );
    for (cmd, option, value) in [
        ("tcp", "--streams", "3"),
        ("tcp", "--lab", ""),
        ("http", "--server", "nginx"),
        ("http", "--no-db", ""),
    ] {
        let mut args = vec![cmd, "--table-from", "/nonexistent/t.json", option];
        if !value.is_empty() {
            args.push(value);
        }
        expect_usage_error(&args, &[option, "--table-from"]);
    }
}

/// `--lab-ring` is the depth of a lab the run builds: with the lab
/// 'default' up (which `--lab` then uses, with its own rings) it is refused
/// in one line, before anything is touched (issue 23). The lab is played
/// by a namespace of its name in a mount namespace of the test's own
/// (`unshare -m`, a private /run/netns), so no other run sees a lab
/// 'default', and nothing is left when the shell ends.
#[test]
fn lab_ring_is_refused_when_the_default_lab_is_up() {
    if !root_or_skip("lab_ring_is_refused_when_the_default_lab_is_up") {
        return;
    }
    let before = netns_list();
    let script = format!(
        "mount --make-rprivate / && mount -t tmpfs tmpfs /run/netns && \
         ip netns add lr-default-a && \
         exec {LINERATE} trial --lab --lab-ring 512 --rate 1% --frame-size 64 --no-db"
    );
    let out = std::process::Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .output()
        .expect("unshare runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    for w in [
        "linerate: error: --lab-ring",
        "lab 'default' is up",
        "lab up --ring N",
    ] {
        assert!(lines[0].contains(w), "'{w}' not in {stderr}");
    }
    assert!(new_lr_netns(&before, &netns_list()).is_empty());
}

/// `--tunnels` on a packet command: a count of 0, without --ipsec, with a
/// --range on the field the tunnels are spread over, more tunnels than
/// --remote-net can slice, a list where one run is made, --peer-addrs for
/// one tunnel: each one line, before anything is touched.
#[test]
fn tunnels_on_packet_commands_are_checked() {
    let ipsec = |extra: &[&'static str]| {
        let mut v = vec!["--rate", "1000fps", "--frame-size", "128", "--ipsec"];
        v.extend_from_slice(&["--psk-file", "/nonexistent/psk"]);
        v.extend_from_slice(&["--remote-net", "198.19.128.0/17"]);
        v.extend_from_slice(extra);
        trial_args(&v)
    };
    expect_refusals(&[
        (
            "--tunnels 0",
            ipsec(&["--tunnels", "0"]),
            &["--tunnels 0", "1 to 10,000"],
        ),
        (
            "--tunnels without --ipsec",
            trial_args(&["--rate", "1000fps", "--tunnels", "10"]),
            &["--tunnels", "--ipsec"],
        ),
        (
            "--range src-ip with --tunnels",
            ipsec(&[
                "--tunnels",
                "10",
                "--range",
                "src-ip=198.19.128.2..198.19.128.9",
            ]),
            &["--range src-ip", "--tunnels", "leave that --range out"],
        ),
        (
            "--range dst-ip with --tunnels, encrypting",
            ipsec(&[
                "--tunnels",
                "10",
                "--direction",
                "encrypt",
                "--range",
                "dst-ip=198.19.128.2..198.19.128.9",
            ]),
            &["--range dst-ip"],
        ),
        (
            "more tunnels than --remote-net slices",
            trial_args(&[
                "--rate",
                "1000fps",
                "--ipsec",
                "--psk-file",
                "/nonexistent/psk",
                "--remote-net",
                "198.19.1.0/24",
                "--tunnels",
                "300",
            ]),
            &[
                "--remote-net 198.19.1.0/24",
                "too few for 300 tunnels",
                "/23",
            ],
        ),
        (
            "a --tunnels list on trial",
            ipsec(&["--tunnels", "1,10"]),
            &["--tunnels 1,10", "rfc2544 and loss"],
        ),
        (
            "--peer-addrs for one tunnel",
            ipsec(&["--peer-addrs", "198.19.0.10-198.19.0.20"]),
            &["--peer-addrs", "--tunnels above 1"],
        ),
        (
            "a --tunnels list with a list of scenarios",
            vec![
                "rfc2544",
                "--scenario",
                "vpn-gateway,vpn-gateway:aes128gcm16",
                "--tunnels",
                "1,10",
            ],
            &["--tunnels 1,10", "one --scenario"],
        ),
    ]);
}

// ---- linerate tunnels: refused when the plan is made, nothing touched ----

/// `tunnels` on a port B that does not exist, with `extra` appended.
fn tunnels_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "tunnels",
        "--no-db",
        "--port-b",
        "nosuch1",
        "--ip-b",
        "198.19.0.2/24",
        "--gw-b",
        "198.19.0.1",
        "--psk-file",
        "/nonexistent/psk",
        "--remote-net",
        "198.19.128.0/17",
        "--local-net",
        "198.18.0.0/24",
    ];
    v.extend_from_slice(extra);
    v
}

/// The tunnels plan's values: a count out of 1 to 10,000, a --remote-net
/// too small for the count, peer addresses outside port B's subnet, a rate
/// not above 0.
#[test]
fn tunnels_plan_values_are_checked() {
    expect_refusals(&[
        (
            "--count 0",
            tunnels_args(&["--count", "0"]),
            &["--count", "0", "1 to 10,000"],
        ),
        (
            "--count 10001",
            tunnels_args(&["--count", "10001"]),
            &["--count", "10001", "1 to 10,000"],
        ),
        (
            "--remote-net too small for the count",
            vec![
                "tunnels",
                "--no-db",
                "--lab",
                "--scenario",
                "vpn-gateway",
                "--count",
                "300",
                "--remote-net",
                "198.19.1.0/24",
            ],
            &["--remote-net", "198.19.1.0/24", "too few for 300", "/23"],
        ),
        // From --ip-b upward, 300 peers leave 198.19.0.0/24.
        (
            "300 peers from --ip-b upward",
            tunnels_args(&["--count", "300"]),
            &["198.19.1.0", "outside port B's subnet", "--peer-addrs"],
        ),
        (
            "--peer-addrs outside port B's subnet",
            tunnels_args(&["--count", "2", "--peer-addrs", "10.7.0.1-10.7.0.9"]),
            &["10.7.0.1", "outside port B's subnet"],
        ),
        (
            "--rate 0/s",
            tunnels_args(&["--count", "2", "--rate", "0/s"]),
            &["--rate", "0/s", "above 0"],
        ),
        (
            "--rate -5/s",
            tunnels_args(&["--count", "2", "--rate", "-5/s"]),
            &["--rate", "-5/s", "above 0"],
        ),
    ]);
}
