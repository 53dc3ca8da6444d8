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
/// slower than intended.
fn not_offered(p: &crate::methods::LossPoint) -> bool {
    p.generator_short || p.offered_fps < 0.99 * p.intended_fps
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
