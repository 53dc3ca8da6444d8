//! `linerate rfc2544 --scenario ...` end to end: each scenario's lab is
//! built, configured, verified, measured and removed; the DUT's CPU load is
//! in the table and the JSON; several scenarios are compared side by side;
//! the counters the scenario reports agree with the engine's frame counts.
//! Root only; run with --test-threads=1. Short trials at low rates: the
//! point is that the configuration is in effect, not how fast it is.

mod common;

use common::*;
use serde_json::Value;
use std::time::Duration;

/// Short searches: 1 s trials, a low ceiling, coarse resolution.
fn scenario_run(spec: &str, sizes: &str, json: &TempFile) -> Run {
    let run = linerate(&[
        "rfc2544",
        "--scenario",
        spec,
        "--sizes",
        sizes,
        "--trial-duration",
        "1s",
        "--straggler-wait",
        "300ms",
        "--max-rate",
        "5000fps",
        "--resolution",
        "50%",
        "--json",
        json.arg(),
    ]);
    // Whatever happened, the scenario labs are gone.
    let left = netns_with_prefix(&format!("lr-s{}-", run.pid));
    assert!(left.is_empty(), "left behind: {left:?}\n{}", run.dump());
    run
}

/// Every trial of a report (finished searches).
fn trials(report: &Value) -> Vec<&Value> {
    report["results"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|r| r["trials"].as_array().unwrap())
        .collect()
}

fn rx_total(report: &Value) -> u64 {
    trials(report).iter().map(|t| u(t, "rx_frames")).sum()
}

/// The first number in the traffic check containing `needle`.
fn number_in_check(report: &Value, needle: &str) -> u64 {
    let checks = report["scenario"]["traffic_checks"].as_array().unwrap();
    let check = checks
        .iter()
        .filter_map(Value::as_str)
        .find(|c| c.contains(needle))
        .unwrap_or_else(|| panic!("no traffic check with '{needle}': {checks:?}"));
    check
        .split(|c: char| !c.is_ascii_digit())
        .find(|w| !w.is_empty())
        .unwrap()
        .parse()
        .unwrap()
}

fn assert_cpu_recorded(report: &Value) {
    for r in report["results"].as_array().unwrap() {
        let cpu = &r["dut_cpu"];
        let (total, traffic) = (f(cpu, "total_pct"), f(cpu, "traffic_pct"));
        assert!((0.0..=100.0).contains(&total), "{r}");
        assert!(traffic >= 0.0 && traffic <= total, "{r}");
    }
    for t in trials(report) {
        assert!(t["dut_cpu"].is_object(), "trial without DUT CPU: {t}");
    }
    assert!(report["dut_cpu_source"]
        .as_str()
        .unwrap()
        .contains("/proc/stat"));
}

#[test]
fn acl_comparison_runs_each_scenario_and_prints_them_side_by_side() {
    if !root_or_skip("acl_comparison_runs_each_scenario_and_prints_them_side_by_side") {
        return;
    }
    let json = TempFile::new("scn-acl");
    let run = scenario_run("acl:1,acl:12", "64,512", &json);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(run.stdout.contains("compared over 2"), "{}", run.dump());
    assert!(run.stdout.contains("DUT CPU total"), "{}", run.dump());
    assert!(run.stdout.contains("CPU %"), "{}", run.dump());
    let all = json.json();
    let reports = all["comparison"].as_array().expect("comparison array");
    assert_eq!(reports.len(), 2);
    for (report, n) in reports.iter().zip([1, 12]) {
        let s = &report["scenario"];
        assert_eq!(s["spec"], format!("acl:{n}"));
        assert!(
            report["description"]
                .as_str()
                .unwrap()
                .contains(&format!("ACL of {n} non-matching")),
            "{report}"
        );
        // Read back from the kernel: N lines + the permit.
        let loaded = format!("{} rules)", n + 1);
        assert!(
            s["checks"][0].as_str().unwrap().contains(&loaded),
            "{}",
            s["checks"]
        );
        // Every frame tester B received went through the permit rule
        // behind the N lines.
        let permitted = number_in_check(report, "tested against all");
        let received = rx_total(report);
        assert!(received > 0, "{report}");
        assert!(
            permitted >= received,
            "permit counted {permitted}, B received {received}"
        );
        assert_cpu_recorded(report);
        for t in trials(report) {
            assert_trial_consistent(t);
        }
    }
}

#[test]
fn wan_lan_shows_the_translation() {
    if !root_or_skip("wan_lan_shows_the_translation") {
        return;
    }
    let json = TempFile::new("scn-nat");
    let run = scenario_run("wan-lan", "64", &json);
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    assert!(report["description"]
        .as_str()
        .unwrap()
        .starts_with("WAN-LAN routing with NAT"));
    let checks = report["scenario"]["traffic_checks"].to_string();
    assert!(checks.contains("leaves as 198.19.0.1"), "{checks}");
    assert!(
        run.stdout.contains("RFC 2544 throughput, WAN-LAN"),
        "{}",
        run.dump()
    );
    assert_cpu_recorded(&report);
}

#[test]
fn vxlan_tunnel_reports_inner_and_outer_rates() {
    if !root_or_skip("vxlan_tunnel_reports_inner_and_outer_rates") {
        return;
    }
    let json = TempFile::new("scn-vx");
    let run = scenario_run("tunnel:vxlan", "512", &json);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(run.stdout.contains("Outer rate"), "{}", run.dump());
    let report = json.json();
    let outer = &report["scenario"]["outer"][0];
    assert_eq!(u(outer, "outer_frame_size"), 562, "{outer}");
    let r = &report["results"][0];
    let expected = f(r, "throughput_fps") * 562.0 * 8.0 / 1e6;
    assert!(
        (f(outer, "outer_mbps_l2") - expected).abs() < 1e-6,
        "{outer}"
    );
    // The WAN link's own counters: one packet per forwarded frame, each
    // the inner frame (508 bytes without FCS) + 50 bytes of VXLAN.
    let packets = number_in_check(&report, "WAN link carried");
    let check = report["scenario"]["traffic_checks"].to_string();
    let bytes_text = format!("{} bytes", packets * 558);
    assert!(check.contains(&bytes_text), "{check} (want {bytes_text})");
    assert!(packets >= rx_total(&report), "{check}");
    assert_cpu_recorded(&report);
}

#[test]
fn xdp_router_and_routes_forward_with_xdp() {
    if !root_or_skip("xdp_router_and_routes_forward_with_xdp") {
        return;
    }
    let json = TempFile::new("scn-xdp");
    let run = scenario_run("xdp-router+routes:5000", "64", &json);
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    let checks = report["scenario"]["checks"].to_string();
    assert!(checks.contains("5000 host routes"), "{checks}");
    let redirected = number_in_check(&report, "XDP router forwarded");
    assert!(redirected >= rx_total(&report), "{report}");
    assert!(report["scenario"]["data_path"]
        .as_str()
        .unwrap()
        .contains("XDP"));
}

#[test]
fn scenarios_that_cannot_run_fail_cleanly() {
    if !root_or_skip("scenarios_that_cannot_run_fail_cleanly") {
        return;
    }
    for (spec, needle) in [
        ("drop-test+drop-test", "more than once"),
        ("acl:100001", "0 to 100000"),
        ("routes:x", "whole number"),
        ("lan-lan+wan-lan", "choose one"),
    ] {
        let json = TempFile::new("scn-bad");
        let run = scenario_run(spec, "64", &json);
        assert_bad_input(&run);
        assert!(run.stderr.contains(needle), "{spec}: {}", run.dump());
    }
    // GRE: this kernel may lack it; then one clear line and exit 2.
    let json = TempFile::new("scn-gre");
    let run = scenario_run("tunnel:gre", "64", &json);
    if run.code != 0 {
        assert_eq!(run.code, 2, "{}", run.dump());
        let last = run.stderr.lines().last().unwrap();
        assert!(
            last.starts_with("linerate: error:") && last.contains("GRE"),
            "{}",
            run.dump()
        );
    }
}

#[test]
fn an_external_dut_cpu_command_fills_the_cpu_rows() {
    if !root_or_skip("an_external_dut_cpu_command_fills_the_cpu_rows") {
        return;
    }
    let (ns, _guard) = back_to_back("cpu", 1500);
    let json = TempFile::new("scn-cpu");
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
        "2000fps",
        "--resolution",
        "50%",
        "--dut-cpu-cmd",
        "echo 'cpu 37.5%'",
        "--json",
        json.arg(),
    ]);
    let run = linerate_in(&ns, &args);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(run.stdout.contains("DUT CPU total"), "{}", run.dump());
    assert!(run.stdout.contains("37.5"), "{}", run.dump());
    let report = json.json();
    let cpu = &report["results"][0]["dut_cpu"];
    assert_eq!(f(cpu, "total_pct"), 37.5);
    // The baseline came from the same command: nothing caused by traffic.
    assert_eq!(f(cpu, "traffic_pct"), 0.0);
    assert!(report["dut_cpu_source"].as_str().unwrap().contains("echo"));
}

/// Every `dut_cpu` record anywhere in `v` (the trials of any report).
fn dut_cpu_records(v: &serde_json::Value, out: &mut Vec<serde_json::Value>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map {
                if k == "dut_cpu" && !x.is_null() {
                    out.push(x.clone());
                } else {
                    dut_cpu_records(x, out);
                }
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|x| dut_cpu_records(x, out)),
        _ => {}
    }
}

#[test]
fn every_packet_command_records_an_external_duts_cpu() {
    if !root_or_skip("every_packet_command_records_an_external_duts_cpu") {
        return;
    }
    let (ns, _guard) = back_to_back("cpum", 1500);
    let json = TempFile::new("scn-cpum");
    for command in [
        &["loss", "--loads", "1000fps"][..],
        &["mlrsearch", "--max-rate", "2000fps", "--width", "50%"][..],
        &[
            "back-to-back",
            "--throughput",
            "1000fps",
            "--max-rate",
            "2000fps",
            "--max-burst",
            "200",
            "--repeat",
            "1",
        ][..],
        &["latency", "--rate", "1000fps"][..],
        &["trial", "--rate", "1000fps", "--duration", "300ms"][..],
    ] {
        let mut args = command.to_vec();
        args.extend_from_slice(&B2B_HOSTS);
        args.extend_from_slice(&["--sizes", "64", "--straggler-wait", "200ms"]);
        // trial has --duration; back-to-back's --throughput replaces the
        // search --trial-duration is for.
        if command[0] != "trial" && command[0] != "back-to-back" {
            args.extend_from_slice(&["--trial-duration", "300ms"]);
        }
        args.extend_from_slice(&["--dut-cpu-cmd", "echo 42", "--json", json.arg()]);
        let run = linerate_in(&ns, &args);
        assert_eq!(run.code, 0, "{}", run.dump());
        let mut records = Vec::new();
        dut_cpu_records(&json.json(), &mut records);
        assert!(!records.is_empty(), "{command:?}: no DUT CPU recorded");
        for cpu in &records {
            assert_eq!(f(cpu, "total_pct"), 42.0, "{command:?}: {cpu}");
        }
    }
}

#[test]
fn cpu_target_finds_the_rate_near_the_target() {
    if !root_or_skip("cpu_target_finds_the_rate_near_the_target") {
        return;
    }
    let (ns, _guard) = back_to_back("cput", 1500);
    let json = TempFile::new("scn-cput");
    let db = TempFile::new("scn-cput-db");
    let base = |extra: &[&str]| {
        let mut args = vec!["cpu-target"];
        args.extend_from_slice(&B2B_HOSTS);
        args.extend_from_slice(&[
            "--sizes",
            "64",
            "--trial-duration",
            "300ms",
            "--straggler-wait",
            "200ms",
            "--max-rate",
            "2000fps",
        ]);
        args.extend_from_slice(extra);
        linerate_in(&ns, &args)
    };
    // A device reporting 76 % at the highest rate: within 5 points of 75.
    let run = base(&[
        "--dut-cpu-cmd",
        "echo 76",
        "--json",
        json.arg(),
        "--db",
        db.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(run.stdout.contains("DUT CPU near 75 %"), "{}", run.dump());
    // Stored with its trial and its report; `show` prints the same table.
    let stored = exported_last(&db);
    assert_eq!(stored["run"]["command"], "cpu-target");
    assert_eq!(stored["run"]["status"], "complete");
    assert_eq!(stored["document"], json.json());
    assert_eq!(stored["trials"].as_array().unwrap().len(), 1);
    assert!(shown_last(&db).contains(run.stdout.trim()));
    // The run header every report carries: where it ran and at what speed.
    let doc = json.json();
    assert_eq!(doc["setup"], "external", "{doc}");
    assert!(
        doc["port_a"].as_str().is_some_and(|p| !p.is_empty()),
        "{doc}"
    );
    assert!(u(&doc, "line_speed_bps") > 0, "{doc}");
    let r = &json.json()["results"][0];
    assert_eq!(r["reached"], true, "{r}");
    assert_eq!(f(&r["dut_cpu"], "total_pct"), 76.0);
    assert_eq!(r["trials"].as_array().unwrap().len(), 1, "{r}");
    // One that never gets busy enough: the closest trial, marked.
    let run = base(&["--dut-cpu-cmd", "echo 10", "--json", json.arg()]);
    assert_eq!(run.code, 0, "{}", run.dump());
    assert!(run.stdout.contains("target not reached"), "{}", run.dump());
    assert_eq!(json.json()["results"][0]["reached"], false);
    // No CPU source on an external DUT: bad input.
    assert_bad_input(&base(&[]));
    assert_bad_input(&base(&["--dut-cpu-cmd", "echo 1", "--target", "150%"]));
}

#[test]
fn ipsec_tunnel_says_its_data_path_and_matches_the_wan_bytes() {
    if !root_or_skip("ipsec_tunnel_says_its_data_path_and_matches_the_wan_bytes") {
        return;
    }
    let json = TempFile::new("scn-ipsec");
    let run = scenario_run("tunnel:ipsec", "512", &json);
    if run.code == 2 && run.stderr.contains("strongSwan") {
        skip(&format!("(no strongSwan here): {}", run.stderr.trim()));
        return;
    }
    assert_eq!(run.code, 0, "{}", run.dump());
    let report = json.json();
    let s = &report["scenario"];
    assert!(
        s["data_path"].as_str().unwrap().contains("kernel-libipsec"),
        "{s}"
    );
    assert!(run.stdout.contains("kernel-libipsec"), "{}", run.dump());
    // 494-byte IP packets in ESP AES-CBC/SHA256 over UDP: 582-byte frames.
    assert_eq!(u(&s["outer"][0], "outer_frame_size"), 582, "{s}");
    let packets = number_in_check(&report, "WAN link carried");
    let check = s["traffic_checks"].to_string();
    assert!(
        check.contains(&format!("{} bytes", packets * 578)),
        "{check}"
    );
    assert!(packets >= rx_total(&report), "{check}");
}

/// Directories of charon's for lab `lab`: those whose name holds the lab's
/// name, with a swanctl.conf, in /run/linerate or the temporary directory.
fn charon_dirs(lab: &str) -> Vec<std::path::PathBuf> {
    ["/run/linerate".into(), std::env::temp_dir()]
        .iter()
        .filter_map(|base| std::fs::read_dir(base).ok())
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().contains(lab))
        .map(|e| e.path())
        .filter(|p| p.join("swanctl.conf").exists())
        .collect()
}

/// An IPsec lab's pre-shared key is root's only while it runs (directory
/// 0700, file 0600); linerate killed with SIGKILL takes both charons with
/// it, and `lab down` removes their files.
#[test]
fn a_killed_ipsec_run_leaves_no_key_behind_after_lab_down() {
    let test = "a_killed_ipsec_run_leaves_no_key_behind_after_lab_down";
    if !root_or_skip(test) {
        return;
    }
    if !["/usr/lib/ipsec/charon", "/usr/libexec/ipsec/charon"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
    {
        skip(&format!(
            "(no strongSwan here; scripts/setup.sh installs it): {test}"
        ));
        return;
    }
    let run = Spawned::start(&[
        "rfc2544",
        "--scenario",
        "tunnel:ipsec",
        "--sizes",
        "512",
        "--trial-duration",
        "30s",
        "--max-rate",
        "1000fps",
    ]);
    // The scenario's lab (see commands/scenarios.rs), its DUT namespaces.
    let lab = format!("s{}-0", run.pid);
    let _guard = LabGuard(lab.clone());
    let duts = [format!("lr-{lab}-dut"), format!("lr-{lab}-dut2")];
    let _reaper = ProcessReaper(duts.to_vec());
    let dirs = DirGuard::new();
    let found = poll(Duration::from_secs(30), || {
        let found = charon_dirs(&lab);
        let up = found.len() == 2 && duts.iter().all(|ns| !netns_processes(ns).is_empty());
        up.then_some(found)
    });
    let Some(found) = found else {
        panic!("no two charons seen: {}", run.finish(RUN_LIMIT).dump());
    };
    for dir in &found {
        dirs.add(dir);
    }
    for dir in &found {
        assert_eq!(mode_of(dir) & 0o077, 0, "{} open to others", dir.display());
        let conf = dir.join("swanctl.conf");
        assert_eq!(
            mode_of(&conf) & 0o077,
            0,
            "{} readable by others",
            conf.display()
        );
        let text = std::fs::read_to_string(&conf).unwrap();
        assert!(
            !text.contains(&lab),
            "a key made from the lab's name: {text}"
        );
    }
    signal(run.pid, nix::sys::signal::Signal::SIGKILL);
    let run = run.finish(RUN_LIMIT);
    assert_eq!(run.code, 128 + 9, "{}", run.dump());
    let left = wait_no_processes(&duts, Duration::from_secs(3));
    assert_eq!(left, [], "outlived the killed run");
    let down = linerate(&["lab", "down", "--lab-name", &lab]);
    assert_eq!(down.code, 0, "{}", down.dump());
    for dir in &found {
        assert!(!dir.exists(), "{} left after lab down", dir.display());
    }
    assert_eq!(charon_dirs(&lab), Vec::<std::path::PathBuf>::new());
}

#[test]
fn loss_prints_one_row_per_scenario() {
    if !root_or_skip("loss_prints_one_row_per_scenario") {
        return;
    }
    let json = TempFile::new("scn-sweep");
    let run = linerate(&[
        "loss",
        "--scenario",
        "lan-lan,acl:12",
        "--loads",
        "2000fps,0.005Mpps",
        "--trial-duration",
        "500ms",
        "--straggler-wait",
        "300ms",
        "--json",
        json.arg(),
    ]);
    assert_eq!(run.code, 0, "{}", run.dump());
    let left = netns_with_prefix(&format!("lr-s{}-", run.pid));
    assert!(left.is_empty(), "left behind: {left:?}");
    // The 100GE report's layout: offered loads as columns, a row per
    // configuration, loss in the cells.
    let header = run
        .stdout
        .lines()
        .find(|l| l.starts_with("MPPS"))
        .expect(&run.stdout);
    assert!(
        header.contains("0.002") && header.contains("0.005"),
        "{header}"
    );
    let report = json.json();
    let rows = report["series"].as_array().unwrap();
    assert_eq!(rows.len(), 2);
    for (row, name) in rows.iter().zip(["lan-lan", "acl:12"]) {
        assert_eq!(row["label"], name);
        assert_eq!(row["scenario"]["spec"], name);
        let line = run
            .stdout
            .lines()
            .find(|l| l.starts_with(name) && l.contains('|'))
            .expect(&run.stdout);
        let points = row["points"].as_array().unwrap();
        assert_eq!(points.len(), 2, "{row}");
        for (p, fps) in points.iter().zip([2000.0, 5000.0]) {
            let t = &p["trial"];
            assert_trial_consistent(t);
            assert_eq!(f(t, "intended_fps"), fps, "{t}");
            // Cells of 0 and of 0.1 % and more have one decimal.
            let pct = f(t, "loss_ratio") * 100.0;
            if pct == 0.0 || pct >= 0.1 {
                let cell = format!("{pct:.1}%");
                assert!(line.contains(&cell), "{cell} not in {line}");
            }
        }
    }
    // acl:12's rule counter saw the traffic, and the table says so.
    assert!(rows[1]["scenario"]["traffic_checks"]
        .to_string()
        .contains("against all 12 rules"));
    assert!(run.stdout.contains("  acl:12: "), "{}", run.stdout);
    // Bad loads are bad input; the old command name still parses.
    assert_bad_input(&linerate(&["loss", "--lab", "--loads", "fast"]));
    assert_bad_input(&linerate(&["loss-sweep", "--lab", "--rates", "fast"]));
}
