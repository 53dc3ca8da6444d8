//! `linerate compare`: stored RFC 2544 runs side by side, each later run's
//! throughput as a difference in % against the first, as the LANCOM
//! techpapers set firmware versions (LCOS 10.12, 10.80) against each other.

use crate::model::StoredRun;
use linerate_results::report::{line_speed, sig3};
use linerate_results::ThroughputResult;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// The comparison as text. `runs[0]` is the baseline. Runs of other
/// commands than `rfc2544` have no throughput and are refused by the caller.
pub fn comparison_table(runs: &[StoredRun]) -> String {
    let sizes: BTreeSet<u16> = runs
        .iter()
        .flat_map(|r| r.results.iter().map(|(_, t)| t.frame_size))
        .collect();
    let sizes: Vec<u16> = sizes.into_iter().collect();
    fn cell(run: &StoredRun, size: u16) -> Option<&ThroughputResult> {
        run.results
            .iter()
            .map(|(_, r)| r)
            .find(|r| r.frame_size == size)
    }
    let mark = |r: &ThroughputResult| if r.tester_limited { "*" } else { " " };

    // Rows: (run column, DUT column, unit column, cells).
    let mut rows: Vec<[String; 3]> = Vec::new();
    let mut cells: Vec<Vec<String>> = Vec::new();
    let base = &runs[0];
    for run in runs {
        let label = run.dut.label();
        rows.push([run.id.to_string(), label, "Mbps".into()]);
        cells.push(
            sizes
                .iter()
                .map(|&s| {
                    cell(run, s).map_or("- ".into(), |r| {
                        format!("{}{}", sig3(r.throughput_mbps_l2), mark(r))
                    })
                })
                .collect(),
        );
        rows.push([String::new(), String::new(), "Frames/s".into()]);
        cells.push(
            sizes
                .iter()
                .map(|&s| {
                    cell(run, s).map_or("- ".into(), |r| {
                        format!("{}{}", sig3(r.throughput_fps), mark(r))
                    })
                })
                .collect(),
        );
        if run.id != base.id {
            rows.push([String::new(), String::new(), format!("vs run {}", base.id)]);
            cells.push(
                sizes
                    .iter()
                    .map(|&s| match (cell(base, s), cell(run, s)) {
                        (Some(b), Some(r)) => difference(b.throughput_fps, r.throughput_fps) + " ",
                        _ => "- ".into(),
                    })
                    .collect(),
            );
        }
    }

    let head = ["Run".to_string(), "DUT".to_string(), String::new()];
    let width = |i: usize| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([head[i].len()])
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0), width(1), width(2));
    let col_w: Vec<usize> = (0..sizes.len())
        .map(|j| {
            cells
                .iter()
                .map(|c| c[j].chars().count())
                .chain([sizes[j].to_string().len() + 1])
                .max()
                .unwrap_or(0)
        })
        .collect();

    let mut out = String::new();
    let ids: Vec<String> = runs.iter().map(|r| r.id.to_string()).collect();
    let _ = writeln!(
        out,
        "RFC 2544 throughput compared: runs {} (differences against run {})",
        ids.join(", "),
        base.id
    );
    out.push_str("Throughput [Mbps] @ frame size [bytes] and frame rate [fps]\n");
    let mut line = |a: &str, b: &str, c: &str, cs: &[String]| {
        let mut s = format!("{a:>w0$}  {b:<w1$}  {c:<w2$}");
        for (v, w) in cs.iter().zip(&col_w) {
            let _ = write!(s, "  {v:>w$}");
        }
        out.push_str(s.trim_end());
        out.push('\n');
    };
    let size_head: Vec<String> = sizes.iter().map(|s| format!("{s} ")).collect();
    line(&head[0], &head[1], &head[2], &size_head);
    for (r, c) in rows.iter().zip(&cells) {
        line(&r[0], &r[1], &r[2], c);
    }
    if runs
        .iter()
        .any(|r| r.results.iter().any(|(_, t)| t.tester_limited))
    {
        out.push_str(linerate_results::report::TESTER_LIMITED_NOTE);
        out.push('\n');
    }
    for run in runs {
        let s = run.settings.as_ref();
        let _ = writeln!(
            out,
            "run {}: {}, {}, engine {}, line {}, trial {} s, loss allowed {} %, {}, linerate {}, {}",
            run.id,
            run.started_at,
            if run.dut.scenario.is_empty() { "-" } else { &run.dut.scenario },
            run.engine,
            line_speed(run.line_speed_bps),
            s.map_or("-".into(), |s| s.trial_duration_s.to_string()),
            s.map_or("-".into(), |s| (s.allowed_loss_ratio * 100.0).to_string()),
            run.machine.hostname,
            run.linerate_version,
            run.status.label(),
        );
    }
    for warning in unfair(runs) {
        let _ = writeln!(out, "NOTE: {warning}");
    }
    out
}

/// `+10.9 %`, `-3.2 %`, `0.0 %`; `-` against a baseline of 0.
pub fn difference(base: f64, other: f64) -> String {
    if base <= 0.0 {
        return "-".to_string();
    }
    let pct = (other - base) / base * 100.0;
    if pct.abs() < 0.05 {
        "0.0 %".to_string()
    } else {
        format!("{pct:+.1} %")
    }
}

/// Settings that differ between the runs, which a reader should know
/// before crediting a difference to the device.
fn unfair(runs: &[StoredRun]) -> Vec<String> {
    let mut notes = Vec::new();
    let mut check = |what: &str, value: &dyn Fn(&StoredRun) -> String| {
        let values: BTreeSet<String> = runs.iter().map(value).collect();
        if values.len() > 1 {
            notes.push(format!(
                "the runs differ in {what} ({}): part of the difference may come from that, not the device",
                values.into_iter().collect::<Vec<_>>().join(" / ")
            ));
        }
    };
    check("engine", &|r| r.engine.clone());
    check("line speed", &|r| line_speed(r.line_speed_bps));
    check("tester machine", &|r| r.machine.hostname.clone());
    check("trial duration", &|r| {
        r.settings
            .as_ref()
            .map_or("-".into(), |s| format!("{} s", s.trial_duration_s))
    });
    check("allowed loss", &|r| {
        r.settings.as_ref().map_or("-".into(), |s| {
            format!("{} %", s.allowed_loss_ratio * 100.0)
        })
    });
    let incomplete: Vec<String> = runs
        .iter()
        .filter(|r| !r.status.is_complete())
        .map(|r| r.id.to_string())
        .collect();
    if !incomplete.is_empty() {
        notes.push(format!(
            "run(s) {} are incomplete: sizes they did not finish show '-'",
            incomplete.join(", ")
        ));
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differences_in_percent() {
        assert_eq!(difference(100.0, 110.9), "+10.9 %");
        assert_eq!(difference(200.0, 190.0), "-5.0 %");
        assert_eq!(difference(100.0, 100.01), "0.0 %");
        assert_eq!(difference(0.0, 5.0), "-");
    }

    #[test]
    fn two_firmware_versions_side_by_side() {
        let a = crate::testdata::run(1, "LANCOM 1900EF", "LCOS 10.12");
        let mut b = crate::testdata::run(2, "LANCOM 1900EF", "LCOS 10.80");
        for (_, r) in &mut b.results {
            r.throughput_fps *= 1.1;
            r.throughput_mbps_l2 *= 1.1;
        }
        let t = comparison_table(&[a, b]);
        assert!(t.contains("LANCOM 1900EF LCOS 10.12"), "{t}");
        assert!(t.contains("LANCOM 1900EF LCOS 10.80"), "{t}");
        assert!(t.contains("vs run 1"), "{t}");
        assert_eq!(t.matches("+10.0 %").count(), 2, "{t}");
        assert!(!t.contains("NOTE"), "same settings: {t}");
    }
}
