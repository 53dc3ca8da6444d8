//! A plain text grid shared by the method reporters: a label column, one
//! right-aligned column per frame size (or load), and a unit column.

use super::{line_speed, placement_sentence, GAP, SHARED_CORE_WARNING};
use crate::run::RunInfo;
use std::fmt::Write as _;

/// One row: label, cells, unit.
pub(crate) type Row = (String, Vec<String>, String);

/// Formats `rows` under `header` (the first header cell names the label
/// column). Cells are right-aligned; trailing spaces are trimmed.
pub(crate) fn grid(header: &[String], rows: &[Row]) -> String {
    grid_with(header, rows, GAP, "")
}

/// [`grid`] with `sep` between columns and `end` after the last one (the
/// 100GE report's tables: `MPPS | 0.45 | 0.75 |`).
pub(crate) fn grid_with(header: &[String], rows: &[Row], sep: &str, end: &str) -> String {
    let label_width = rows
        .iter()
        .map(|(l, _, _)| l.chars().count())
        .chain(header.first().map(|h| h.chars().count()))
        .max()
        .unwrap_or(0);
    let columns = header.len().saturating_sub(1);
    let widths: Vec<usize> = (0..columns)
        .map(|i| {
            rows.iter()
                .filter_map(|(_, cells, _)| cells.get(i))
                .map(|c| c.chars().count())
                .chain(std::iter::once(header[i + 1].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |label: &str, cells: &[String], unit: &str| {
        let pad = label_width - label.chars().count();
        let mut s = format!("{label}{:pad$}", "");
        for (i, width) in widths.iter().enumerate() {
            let cell = cells.get(i).map(String::as_str).unwrap_or("");
            let pad = width - cell.chars().count();
            let _ = write!(s, "{sep}{:pad$}{cell}", "");
        }
        s.push_str(end);
        if !unit.is_empty() {
            let _ = write!(s, "{GAP}{unit}");
        }
        s.trim_end().to_string()
    };
    let mut out = String::new();
    out.push_str(&line(&header[0], &header[1..], ""));
    out.push('\n');
    for (label, cells, unit) in rows {
        out.push_str(&line(label, cells, unit));
        out.push('\n');
    }
    out
}

/// The closing lines every method table shares: where it ran, the engine
/// and the line speed.
pub(crate) fn footer(run: &RunInfo) -> String {
    let mut out = String::new();
    let mut engine = format!(
        "Engine {}.   Line speed {}.",
        run.engine,
        line_speed(run.line_speed_bps)
    );
    let encap = linerate_wire::Encap {
        ip: run.ip_version,
        vlan: run.vlan,
    };
    if !encap.is_default() {
        engine += &format!("   Test frames {encap}.");
    }
    match &run.placement {
        Some(p) => {
            let _ = writeln!(out, "{}   {engine}", placement_sentence(p));
            if p.shared_core {
                out.push_str(SHARED_CORE_WARNING);
                out.push('\n');
            }
        }
        None => {
            let _ = writeln!(out, "{engine}");
        }
    }
    out
}

/// The title with the run's description, or its ports.
pub(crate) fn title(what: &str, run: &RunInfo) -> String {
    if run.description.is_empty() {
        format!("{what}, {} -> {} ({})", run.port_a, run.port_b, run.setup)
    } else {
        format!("{what}, {}", run.description)
    }
}

/// Frames/s as Mpps with up to 3 decimals: `0.45`, `1.488`, `14.881`.
pub(crate) fn mpps(fps: f64) -> String {
    if !fps.is_finite() {
        return "-".to_string();
    }
    let s = format!("{:.3}", fps / 1e6);
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A loss ratio as the 100GE report prints it (`0.0%`, `13.7%`), with
/// more decimals when a loss would otherwise show as 0.0 %.
pub(crate) fn loss_cell(ratio: f64) -> String {
    let pct = ratio * 100.0;
    if pct == 0.0 {
        "0.0%".to_string()
    } else if pct >= 0.1 {
        format!("{pct:.1}%")
    } else {
        // Two significant digits: 0.012%, 0.0003%.
        let decimals = (-pct.log10().floor() as i32 + 1).clamp(2, 9) as usize;
        format!("{pct:.decimals$}%")
    }
}

/// A column's name for what a result sent: its frame size, or a mix by its
/// name ("IMIX 1") rather than its largest frame.
pub(crate) fn column_name(frame_size: u16, mix: Option<&crate::model::MixInfo>) -> String {
    match mix {
        Some(m) => m.name.clone(),
        None => frame_size.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loss_cells_print_as_the_100ge_report_and_never_hide_a_loss() {
        assert_eq!(loss_cell(0.0), "0.0%");
        assert_eq!(loss_cell(0.137), "13.7%");
        assert_eq!(loss_cell(0.001), "0.1%");
        // One frame in a million is not 0.0 %.
        assert_eq!(loss_cell(1e-6), "0.00010%");
        assert_eq!(loss_cell(0.00012), "0.012%");
    }

    #[test]
    fn mpps_has_at_most_three_decimals() {
        assert_eq!(mpps(450_000.0), "0.45");
        assert_eq!(mpps(14_880_952.4), "14.881");
        assert_eq!(mpps(1_000_000.0), "1");
        assert_eq!(mpps(0.0), "0");
    }

    #[test]
    fn grid_aligns_columns_with_separators() {
        let header = vec!["MPPS".to_string(), "0.45".to_string(), "12".to_string()];
        let rows: Vec<Row> = vec![(
            "Danos".to_string(),
            vec!["0.0%".to_string(), "13.7%".to_string()],
            String::new(),
        )];
        assert_eq!(
            grid_with(&header, &rows, " | ", " |"),
            "MPPS  | 0.45 |    12 |\nDanos | 0.0% | 13.7% |\n"
        );
    }
}
