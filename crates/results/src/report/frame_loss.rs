//! The frame loss table in the layout of the 100GE report
//! (linux-danos-vyos-xdp-100ge): rows are runs (DUT configurations, or
//! frame sizes), columns the offered load, cells the loss in percent.
//! Beneath each row, what the tester really offered.

use super::grid::{footer, grid_with, loss_cell, mpps, title, Row};
use super::trim_number;
use crate::methods::{FrameLossReport, LossSeries};
use std::fmt::Write as _;

/// Marks a cell whose trial the tester could not offer in full.
const SHORT_MARK: &str = "!";

/// The table for `report` (every series of it).
pub fn frame_loss_table(report: &FrameLossReport) -> String {
    let mut out = String::new();
    let what = if report.mode == "rfc2544" {
        "Frame loss rate (RFC 2544 section 26.3)"
    } else {
        "Frame loss rate vs offered load"
    };
    let _ = writeln!(
        out,
        "{}   trial {} s",
        title(what, &report.run),
        trim_number(report.trial_duration_s)
    );
    if report.series.is_empty() {
        out.push_str("(no frame size was measured)\n");
        out.push_str(&footer(&report.run));
        return out;
    }
    let columns = columns(&report.series);
    let same_fps = same_rates(&report.series, &columns);
    let (corner, header_cells): (&str, Vec<String>) = if report.mode == "rfc2544" {
        ("% of max", columns.clone())
    } else if let Some(rates) = &same_fps {
        ("MPPS", rates.iter().map(|&r| mpps(r)).collect())
    } else {
        ("Load", columns.clone())
    };
    let _ = writeln!(
        out,
        "% indicates frame loss (frames lost over frames intended); 'offered' is the rate that really left the tester [Mpps]"
    );
    let mut header = vec![corner.to_string()];
    header.extend(header_cells);
    let mut rows: Vec<Row> = Vec::new();
    let mut any_short = false;
    for s in &report.series {
        let find = |col: &str| s.points.iter().find(|p| p.load == *col);
        let loss = columns
            .iter()
            .map(|c| find(c).map_or(String::new(), |p| loss_cell(p.loss_ratio)))
            .collect();
        let offered = columns
            .iter()
            .map(|c| {
                find(c).map_or(String::new(), |p| {
                    let short = not_offered(p);
                    any_short |= short;
                    let mark = if short { SHORT_MARK } else { "" };
                    format!("{}{mark}", mpps(p.offered_fps))
                })
            })
            .collect();
        rows.push((s.label.clone(), loss, String::new()));
        rows.push(("  offered".to_string(), offered, String::new()));
        if report.mode == "rfc2544" || same_fps.is_none() {
            let intended = columns
                .iter()
                .map(|c| find(c).map_or(String::new(), |p| mpps(p.intended_fps)))
                .collect();
            rows.push(("  intended".to_string(), intended, String::new()));
        }
    }
    out.push_str(&grid_with(&header, &rows, " | ", " |"));
    if let Some(stop) = report.stop_above_loss_ratio {
        let _ = writeln!(
            out,
            "A row stopped after a load that lost more than {} %; blank: not run.",
            trim_number(stop * 100.0)
        );
    }
    for s in &report.series {
        if let Some(scenario) = &s.scenario {
            let _ = writeln!(out, "  {}: {}", s.label, scenario.description);
            for check in &scenario.traffic_checks {
                let _ = writeln!(out, "    seen: {check}");
            }
        }
        if let Some(line) = crate::report::loss_where_line(s.points.iter().map(|p| &p.trial)) {
            let _ = writeln!(out, "  {}: {line}", s.label);
        }
        if let Some(p) = crate::PolicyDrops::sum(s.points.iter().map(|p| &p.trial)) {
            let _ = writeln!(
                out,
                "  {}: drop test: % counts only the frames not supposed to be dropped; {} frames were sent to be dropped by policy, {} of them leaked through",
                s.label,
                crate::report::thousands(p.tx_frames),
                crate::report::thousands(p.leaked_frames)
            );
        }
    }
    if report.mode == "rfc2544" {
        let maxes: Vec<String> = report
            .series
            .iter()
            .map(|s| format!("{} {} Mpps", s.label, mpps(s.max_fps)))
            .collect();
        let _ = writeln!(
            out,
            "100 % = {}; stopped after two successive trials without loss; blank: not run.",
            maxes.join(", ")
        );
    }
    if let Some(text) = crate::report::rekeys_footer(
        report
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| &p.trial)),
    ) {
        out.push_str(&text);
    }
    if let Some(text) = crate::report::recovery_footer(
        report
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| &p.trial)),
    ) {
        out.push_str(&text);
    }
    if any_short {
        let _ = writeln!(
            out,
            "({SHORT_MARK}) the tester did not offer the intended rate (it sent fewer frames, or took over 1 % longer): the load was not tested as asked; frames it did not send count as lost."
        );
    }
    out.push_str(&footer(&report.run));
    out
}

/// The trial did not test its load: frames unsent, or sent more than 1 %
/// slower than intended, or with pauses of the generator adding up to more
/// than 1 % of the duration (the device saw the frames over the duration
/// and the pauses; `offered_fps` leaves the pauses out). Records written
/// before a point's mark counted pauses are marked here too.
fn not_offered(p: &crate::methods::LossPoint) -> bool {
    p.generator_short
        || p.offered_fps < 0.99 * p.intended_fps
        || !p.trial.held_rate(crate::MAX_PAUSED_SHARE)
}

/// Load labels in the order first seen.
fn columns(series: &[LossSeries]) -> Vec<String> {
    let mut cols: Vec<String> = Vec::new();
    for s in series {
        for p in &s.points {
            if !cols.contains(&p.load) {
                cols.push(p.load.clone());
            }
        }
    }
    cols
}

/// The intended rate of each column when it is the same in every series
/// that ran it (loads given in frames/s): the header can then show Mpps.
fn same_rates(series: &[LossSeries], columns: &[String]) -> Option<Vec<f64>> {
    columns
        .iter()
        .map(|c| {
            let mut rates = series
                .iter()
                .filter_map(|s| s.points.iter().find(|p| p.load == *c))
                .map(|p| p.intended_fps);
            let first = rates.next()?;
            rates
                .all(|r| (r - first).abs() <= 1e-9 * first.abs())
                .then_some(first)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::{LossPoint, RunInfo};
    use crate::TrialResult;

    fn run_info() -> RunInfo {
        RunInfo::test_lab("lab", "af_packet")
    }

    fn point(load: &str, intended: f64, offered: f64, loss: f64) -> LossPoint {
        let trial = TrialResult {
            policy_drops: None,
            loss_where: None,
            tunnels: Vec::new(),
            recovery: None,
            rx_threads: Vec::new(),
            frame_size: 64,
            mix: None,
            flows: Vec::new(),
            directions: Vec::new(),
            dut_cpu: None,
            esp: None,
            l3_length: 46,
            duration_s: 1.0,
            intended_fps: intended,
            offered_fps: offered,
            intended_frames: intended as u64,
            tx_frames: offered as u64,
            rx_frames: 0,
            lost_frames: 0,
            loss_ratio: loss,
            reordered: 0,
            duplicated: 0,
            sequence_errors: None,
            latency_ns: None,
            generator_short: offered < intended,
            generator_max_stall_ns: None,
            generator_paused_ns: None,
            generator_pauses: None,
            sending_s: None,
            tester_rx_drops: 0,
            stray_frames: 0,
            errored_frames: 0,
            frame_check: String::new(),
            engine: "af_packet".into(),
            receiver: String::new(),
            ip_version: Default::default(),
            vlan: None,
        };
        crate::methods::LossPoint {
            load: load.into(),
            intended_fps: intended,
            offered_fps: offered,
            loss_ratio: loss,
            generator_short: trial.generator_short,
            trial,
        }
    }

    fn series(label: &str, points: Vec<LossPoint>) -> LossSeries {
        LossSeries {
            label: label.into(),
            frame_size: 64,
            l3_length: 46,
            mix: None,
            line_rate_fps: 14_880_952.0,
            max_fps: 1e6,
            points,
            scenario: None,
        }
    }

    #[test]
    fn a_sweep_prints_as_the_100ge_report() {
        let rep = FrameLossReport {
            run: run_info(),
            mode: "sweep".into(),
            step: None,
            trial_duration_s: 1.0,
            stop_above_loss_ratio: None,
            series: vec![
                series(
                    "Danos",
                    vec![
                        point("0.45Mpps", 450_000.0, 450_000.0, 0.0),
                        point("0.75Mpps", 750_000.0, 700_000.0, 0.137),
                    ],
                ),
                // A run that stopped early: its missing cell stays blank.
                series("VYOS", vec![point("0.45Mpps", 450_000.0, 450_000.0, 0.217)]),
            ],
            interrupted: None,
        };
        let t = frame_loss_table(&rep);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[2], "MPPS      |  0.45 |  0.75 |", "{t}");
        assert_eq!(lines[3], "Danos     |  0.0% | 13.7% |", "{t}");
        assert_eq!(lines[4], "  offered |  0.45 |  0.7! |", "{t}");
        assert_eq!(lines[5], "VYOS      | 21.7% |       |", "{t}");
        assert!(t.contains("(!) the tester did not offer"), "{t}");
    }

    #[test]
    fn a_point_whose_generator_paused_over_1_percent_is_marked() {
        // A record whose mark did not count pauses: 30 ms of a 1-s trial.
        let mut paused = point("0.75Mpps", 750_000.0, 750_000.0, 0.0);
        paused.trial.generator_paused_ns = Some(30_000_000);
        let mut within = point("0.45Mpps", 450_000.0, 450_000.0, 0.0);
        within.trial.generator_paused_ns = Some(5_000_000);
        let rep = FrameLossReport {
            run: run_info(),
            mode: "sweep".into(),
            step: None,
            trial_duration_s: 1.0,
            stop_above_loss_ratio: None,
            series: vec![series("Danos", vec![within, paused])],
            interrupted: None,
        };
        let t = frame_loss_table(&rep);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[4], "  offered | 0.45 | 0.75! |", "{t}");
        assert!(t.contains("(!) the tester did not offer"), "{t}");
    }

    #[test]
    fn the_rfc2544_mode_heads_columns_with_shares_of_the_maximum() {
        let rep = FrameLossReport {
            run: run_info(),
            mode: "rfc2544".into(),
            step: Some(0.1),
            trial_duration_s: 1.0,
            stop_above_loss_ratio: None,
            series: vec![series(
                "64 B",
                vec![
                    point("100%", 1e6, 1e6, 0.2),
                    point("90%", 9e5, 9e5, 0.0),
                    point("80%", 8e5, 8e5, 0.0),
                ],
            )],
            interrupted: None,
        };
        let t = frame_loss_table(&rep);
        assert!(t.contains("% of max   |  100% |  90% |  80% |"), "{t}");
        assert!(t.contains("64 B       | 20.0% | 0.0% | 0.0% |"), "{t}");
        assert!(t.contains("  intended |     1 |  0.9 |  0.8 |"), "{t}");
        assert!(t.contains("100 % = 64 B 1 Mpps"), "{t}");
        assert!(!t.contains("(!)"), "{t}");
    }
}
