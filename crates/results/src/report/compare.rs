//! Side-by-side comparison of several RFC 2544 runs of the same test on
//! different DUT configurations, in the layout of the Cisco report's tables
//! (Tables 2 to 4: per packet length, for each variant the measured L1 rate,
//! the CPU load total and caused by traffic, and the packet rate) and of
//! the 100GE report's table of routers side by side.

use super::{cpu_cell, sig3, trim_number, GAP};
use crate::throughput::{Rfc2544Report, ThroughputResult};
use std::fmt::Write as _;

/// The comparison table: one row per frame size, one group of columns per
/// run (named by its scenario), then a legend with each run's description.
pub fn side_by_side(reports: &[Rfc2544Report]) -> String {
    let mut out = String::new();
    let Some(first) = reports.first() else {
        return "(nothing to compare)\n".to_string();
    };
    let with_cpu = reports
        .iter()
        .any(|r| r.results.iter().any(|t| t.dut_cpu.is_some()));
    let names: Vec<String> = reports
        .iter()
        .enumerate()
        .map(|(i, r)| name(i, r))
        .collect();

    // Frame sizes in the order first seen across the runs.
    let mut sizes: Vec<(u16, u16)> = Vec::new();
    for r in reports {
        for t in &r.results {
            if !sizes.iter().any(|(f, _)| *f == t.frame_size) {
                sizes.push((t.frame_size, t.l3_length));
            }
        }
    }

    let sub_headers: Vec<&str> = if with_cpu {
        vec!["L1 Mbps", "CPU %", "traffic %", "Frames/s"]
    } else {
        vec!["L1 Mbps", "L2 Mbps", "Frames/s"]
    };
    let cells = |t: Option<&ThroughputResult>| -> Vec<String> {
        let Some(t) = t else {
            return vec!["-".to_string(); sub_headers.len()];
        };
        let mark = if t.tester_limited { "*" } else { "" };
        let l1 = format!("{}{mark}", sig3(t.throughput_mbps_l1));
        let fps = format!("{}{mark}", sig3(t.throughput_fps));
        if with_cpu {
            vec![
                l1,
                cpu_cell(t.dut_cpu.map(|c| c.total_pct)),
                cpu_cell(t.dut_cpu.map(|c| c.traffic_pct)),
                fps,
            ]
        } else {
            vec![l1, format!("{}{mark}", sig3(t.throughput_mbps_l2)), fps]
        }
    };

    // Every body row: frame size, IP length, then each run's cells.
    let body: Vec<Vec<String>> = sizes
        .iter()
        .map(|(frame, l3)| {
            let mut row = vec![frame.to_string(), l3.to_string()];
            for r in reports {
                row.extend(cells(r.results.iter().find(|t| t.frame_size == *frame)));
            }
            row
        })
        .collect();
    let mut header = vec!["Frame".to_string(), "IP len".to_string()];
    for _ in reports {
        header.extend(sub_headers.iter().map(|s| s.to_string()));
    }
    let columns = header.len();
    let mut widths: Vec<usize> = (0..columns)
        .map(|c| {
            body.iter()
                .map(|row| row[c].chars().count())
                .chain(std::iter::once(header[c].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Each run's name spans its group of columns: widen the last one if needed.
    let group = sub_headers.len();
    for (i, n) in names.iter().enumerate() {
        let cols = 2 + i * group..2 + (i + 1) * group;
        let span: usize = widths[cols.clone()].iter().sum::<usize>() + GAP.len() * (group - 1);
        if n.chars().count() > span {
            widths[cols.end - 1] += n.chars().count() - span;
        }
    }

    let settings = format!(
        "loss allowed {} %, trial {} s, resolution {} %",
        trim_number(first.allowed_loss_ratio * 100.0),
        trim_number(first.trial_duration_s),
        trim_number(first.resolution * 100.0),
    );
    let _ = writeln!(
        out,
        "RFC 2544 throughput compared over {} DUT configurations   {settings}",
        reports.len()
    );
    if with_cpu {
        out.push_str(
            "Measured rate [Mbps, L1] and [frames/s], DUT CPU load total and caused by traffic [%], per frame size [bytes]\n",
        );
    } else {
        out.push_str("Measured rate [Mbps, L1 and L2] and [frames/s] per frame size [bytes]\n");
    }
    // The group line: each run's name over its columns.
    let lead = widths[0] + GAP.len() + widths[1];
    let mut line = format!("{:lead$}", "");
    for (i, n) in names.iter().enumerate() {
        let cols = 2 + i * group..2 + (i + 1) * group;
        let span: usize = widths[cols].iter().sum::<usize>() + GAP.len() * (group - 1);
        let _ = write!(line, "{GAP}{GAP}{n:<span$}");
    }
    out.push_str(line.trim_end());
    out.push('\n');
    let render = |row: &[String]| {
        let mut s = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                s.push_str(GAP);
                // A wider gap between runs.
                if c >= 2 && (c - 2) % group == 0 {
                    s.push_str(GAP);
                }
            }
            let pad = widths[c] - cell.chars().count();
            let _ = write!(s, "{:pad$}{cell}", "");
        }
        s.trim_end().to_string()
    };
    out.push_str(&render(&header));
    out.push('\n');
    for row in &body {
        out.push_str(&render(row));
        out.push('\n');
    }
    if reports
        .iter()
        .any(|r| r.results.iter().any(|t| t.tester_limited))
    {
        out.push_str("(*) tester-limited: the device may forward more.\n");
    }
    for (n, r) in names.iter().zip(reports) {
        let what = if r.run.description.is_empty() {
            format!("{} -> {}", r.run.port_a, r.run.port_b)
        } else {
            r.run.description.clone()
        };
        let unfinished = if r.interrupted.is_some() {
            " (interrupted: not every size measured)"
        } else {
            ""
        };
        let _ = writeln!(out, "  {n}: {what}{unfinished}");
    }
    let sources: Vec<&String> = reports
        .iter()
        .filter_map(|r| r.dut_cpu_source.as_ref())
        .collect();
    if let Some(first) = sources.first() {
        if sources.iter().all(|s| s == first) {
            let _ = writeln!(out, "DUT CPU: {first}.");
        } else {
            // Each lab measured its own idle baseline.
            out.push_str(
                "DUT CPU: measured as each table above says (each with its own idle baseline).
",
            );
        }
    }
    out
}

/// A run's column name: its scenario, else its position.
fn name(i: usize, r: &Rfc2544Report) -> String {
    r.scenario
        .as_ref()
        .map(|s| s.spec.clone())
        .unwrap_or_else(|| format!("run {}", i + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DutCpu;
    use crate::scenario::ScenarioRecord;

    fn result(frame: u16, fps: f64, cpu: Option<(f64, f64)>) -> ThroughputResult {
        let mbps = |b: u16| fps * b as f64 * 8.0 / 1e6;
        ThroughputResult {
            frame_size: frame,
            mix: None,
            l3_length: frame - 18,
            throughput_fps: fps,
            throughput_mbps_l2: mbps(frame),
            throughput_mbps_l1: mbps(frame + 20),
            throughput_mbps_l3: mbps(frame - 18),
            throughput_mbps_l4: mbps(frame - 46),
            line_rate_fps: 1e6,
            line_rate_mbps_l2: 1e3,
            tester_limited: false,
            calibrated_ceiling_fps: None,
            trials: Vec::new(),
            dut_cpu: cpu.map(|(total_pct, traffic_pct)| DutCpu {
                total_pct,
                traffic_pct,
                stolen_pct: None,
            }),
            wan: None,
            mlrsearch: None,
            round: None,
            over_rounds: None,
        }
    }

    fn run(spec: &str, results: Vec<ThroughputResult>) -> Rfc2544Report {
        Rfc2544Report {
            run: crate::methods::RunInfo::test_lab(&format!("LAN-LAN routing with {spec}"), "xdp"),
            bidirectional: false,
            trial_duration_s: 1.0,
            resolution: 0.01,
            allowed_loss_ratio: 0.0,
            results,
            scenario: Some(ScenarioRecord {
                spec: spec.into(),
                ..ScenarioRecord::default()
            }),
            dut_cpu_source: Some("lab".into()),
            interrupted: None,
            repeat: 1,
            round_results: Vec::new(),
        }
    }

    #[test]
    fn runs_stand_side_by_side_with_cpu_columns() {
        let table = side_by_side(&[
            run(
                "acl:1",
                vec![
                    result(64, 111_933.0, Some((99.0, 98.0))),
                    result(1518, 8_127.0, Some((9.0, 8.0))),
                ],
            ),
            run(
                "acl:12",
                vec![
                    result(64, 65_856.0, Some((99.0, 98.5))),
                    result(1518, 8_127.0, Some((17.0, 16.0))),
                ],
            ),
        ]);
        let lines: Vec<&str> = table.lines().collect();
        assert!(lines[0].contains("compared over 2"), "{table}");
        assert!(
            lines[2].contains("acl:1") && lines[2].contains("acl:12"),
            "{table}"
        );
        assert_eq!(lines[3].matches("CPU %").count(), 2, "{table}");
        let row64 = lines.iter().find(|l| l.starts_with("   64")).expect(&table);
        for cell in ["112,000", "99.0", "98.0", "65,900", "98.5"] {
            assert!(row64.contains(cell), "{cell} missing: {table}");
        }
        assert!(
            table.contains("acl:12: LAN-LAN routing with acl:12"),
            "{table}"
        );
        // Columns line up: every body row is as long as the header.
        let header_len = lines[3].len();
        for l in &lines[4..6] {
            assert_eq!(l.len(), header_len, "{table}");
        }
    }

    #[test]
    fn without_cpu_the_table_shows_l2_rates_and_a_missing_size_as_dash() {
        let table = side_by_side(&[
            run(
                "lan-lan",
                vec![result(64, 1e6, None), result(512, 2e5, None)],
            ),
            run("wan-lan", vec![result(64, 9e5, None)]),
        ]);
        assert!(!table.contains("CPU %"), "{table}");
        assert!(table.contains("L2 Mbps"), "{table}");
        let row512 = table
            .lines()
            .find(|l| l.starts_with("  512"))
            .expect(&table);
        assert!(row512.trim_end().ends_with('-'), "{table}");
    }
}
