//! The back-to-back table (RFC 2544 section 26.4, RFC 9004 section 6):
//! frame sizes as columns; the burst rate, the throughput, the longest
//! burst without loss (mean, standard deviation, minimum, maximum) and the
//! buffer time it implies.

use super::grid::{column_name, footer, grid, title, Row};
use super::{sig3, thousands, trim_number};
use crate::methods::{BackToBackReport, BackToBackResult};
use std::fmt::Write as _;

/// The table for `report`.
pub fn back_to_back_table(report: &BackToBackReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}   {} repetitions, resolution {} %",
        title("Back-to-back frames (RFC 2544 26.4, RFC 9004)", &report.run),
        report.repeat,
        trim_number(report.resolution * 100.0)
    );
    let results = &report.results;
    if results.is_empty() {
        out.push_str("(no frame size was measured)\n");
        out.push_str(&footer(&report.run));
        return out;
    }
    out.push_str("Longest burst without loss [frames] @ frame size [bytes] or mix\n");
    let mut header = vec![String::new()];
    header.extend(
        results
            .iter()
            .map(|r| format!("{} ", column_name(r.frame_size, r.mix.as_ref()))),
    );
    let limited = |r: &BackToBackResult| r.repetitions.iter().any(|x| x.tester_limited);
    let marked = |r: &BackToBackResult| {
        if r.not_meaningful.is_some() {
            "~"
        } else if limited(r) {
            "*"
        } else {
            " "
        }
    };
    let row = |f: &dyn Fn(&BackToBackResult) -> String, mark: bool| -> Vec<String> {
        results
            .iter()
            .map(|r| format!("{}{}", f(r), if mark { marked(r) } else { " " }))
            .collect()
    };
    let ms = |s: f64| format!("{:.3}", s * 1e3);
    // No burst ran (nothing to measure): no figures, not zeros.
    let measured = |r: &BackToBackResult, text: String| {
        if r.repetitions.is_empty() {
            "-".to_string()
        } else {
            text
        }
    };
    let rows: Vec<Row> = vec![
        (
            "Burst rate".into(),
            row(&|r| sig3(r.burst_fps), false),
            "Frames/s".into(),
        ),
        (
            "Throughput".into(),
            row(&|r| sig3(r.throughput_fps), false),
            "Frames/s".into(),
        ),
        (
            "Burst mean".into(),
            row(
                &|r| measured(r, thousands(r.mean_burst_frames.round() as u64)),
                true,
            ),
            "frames".into(),
        ),
        (
            "  std dev".into(),
            row(
                &|r| measured(r, thousands(r.stddev_burst_frames.round() as u64)),
                false,
            ),
            "frames".into(),
        ),
        (
            "  minimum".into(),
            row(&|r| measured(r, thousands(r.min_burst_frames)), false),
            "frames".into(),
        ),
        (
            "  maximum".into(),
            row(
                &|r| measured(r, thousands(r.max_passing_burst_frames)),
                false,
            ),
            "frames".into(),
        ),
        (
            "Implied buffer time".into(),
            row(&|r| measured(r, ms(r.implied_buffer_time_s)), true),
            "ms".into(),
        ),
        (
            "Corrected buffer time".into(),
            row(&|r| measured(r, ms(r.corrected_buffer_time_s)), true),
            "ms".into(),
        ),
        (
            "Buffered frames".into(),
            row(
                &|r| measured(r, thousands(r.buffered_frames.round() as u64)),
                true,
            ),
            "frames".into(),
        ),
        (
            "Trials".into(),
            row(
                &|r| {
                    r.repetitions
                        .iter()
                        .map(|x| x.trials.len())
                        .sum::<usize>()
                        .to_string()
                },
                false,
            ),
            String::new(),
        ),
        (
            "Trial-seconds".into(),
            row(
                &|r| trim_number((r.trial_seconds * 1000.0).round() / 1000.0),
                false,
            ),
            "s".into(),
        ),
    ];
    out.push_str(&grid(&header, &rows));
    out.push_str("Corrected buffer time = implied × (1 − throughput / burst rate): the DUT forwarded part of the burst while it arrived.\n");
    for r in results {
        if let Some(why) = &r.not_meaningful {
            let what = match &r.mix {
                Some(m) => m.name.clone(),
                None => format!("{} bytes", r.frame_size),
            };
            let _ = writeln!(out, "(~) {what}: {why}");
        }
    }
    if results.iter().any(limited) {
        out.push_str("(*) tester-limited: a burst was not sent in full at the burst rate; the figure may not be the device's.\n");
    }
    if let Some(text) = crate::report::recovery_footer(
        results
            .iter()
            .flat_map(|r| r.repetitions.iter().flat_map(|b| &b.trials)),
    ) {
        out.push_str(&text);
    }
    out.push_str(&footer(&report.run));
    out
}
