//! The 100GE report's table: the loss at each offered rate, one row per
//! DUT configuration (a "loss sweep"), and its reporter.

use crate::model::TrialResult;
use crate::report::trim_number;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// One DUT configuration's row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepRow {
    /// The column label: the scenario (e.g. "firewall:50") or "DUT".
    pub name: String,
    pub description: String,
    /// One per offered rate; None where the rate was not tried (the row
    /// stopped after a rate lost more than the stop threshold).
    pub trials: Vec<Option<TrialResult>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<crate::scenario::ScenarioRecord>,
}

/// A whole sweep.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LossSweepReport {
    pub linerate_version: String,
    pub started_at: String,
    pub frame_size: u16,
    pub l3_length: u16,
    pub trial_duration_s: f64,
    pub engine: String,
    /// The offered rates, frames/s, in the order tried.
    pub rates_fps: Vec<f64>,
    /// A row stops after a trial lost more than this share.
    pub stop_above_loss_ratio: f64,
    pub rows: Vec<SweepRow>,
}

/// `Mpps | 0.45 | 0.75 | ...` then one row per configuration with the loss
/// in percent, as the 100GE report prints it; an empty cell was not tried,
/// `*` marks a trial the tester could not offer at the full rate.
pub fn loss_sweep_table(r: &LossSweepReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Loss at offered load, {}-byte frames (IP {} bytes), trials of {} s, engine {}",
        r.frame_size,
        r.l3_length,
        trim_number(r.trial_duration_s),
        r.engine
    );
    out.push_str("- % is the share of the offered frames that did not arrive\n");
    let _ = writeln!(
        out,
        "- a row stops after a rate that lost more than {} %",
        trim_number(r.stop_above_loss_ratio * 100.0)
    );
    let mut header = vec!["MPPS".to_string()];
    header.extend(r.rates_fps.iter().map(|f| mpps(*f)));
    let mut rows = vec![header];
    for row in &r.rows {
        let mut cells = vec![row.name.clone()];
        for t in &row.trials {
            cells.push(match t {
                Some(t) => format!(
                    "{:.1}%{}",
                    t.loss_ratio * 100.0,
                    if t.generator_short { "*" } else { "" }
                ),
                None => String::new(),
            });
        }
        rows.push(cells);
    }
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|row| row.get(c))
                .map(|s| s.len())
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in &rows {
        let cells: Vec<String> = (0..columns)
            .map(|c| {
                let cell = row.get(c).map(String::as_str).unwrap_or("");
                if c == 0 {
                    format!("{cell:<w$}", w = widths[c])
                } else {
                    format!("{cell:>w$}", w = widths[c])
                }
            })
            .collect();
        let _ = writeln!(out, "{} |", cells.join(" | "));
    }
    if r.rows
        .iter()
        .flat_map(|row| row.trials.iter().flatten())
        .any(|t| t.generator_short)
    {
        out.push_str(
            "(*) the tester could not offer the full rate: frames it did not send count as lost.\n",
        );
    }
    for row in &r.rows {
        let _ = writeln!(out, "  {}: {}", row.name, row.description);
        let drops = row.trials.iter().flatten().filter_map(|t| t.policy_drops);
        let (sent, leaked) = drops.fold((0, 0), |(s, l), p| (s + p.tx_frames, l + p.leaked_frames));
        if sent > 0 {
            let _ = writeln!(
                out,
                "    drop test: % counts only the frames not supposed to be dropped; {} frames were sent to be dropped by policy, {} of them leaked through",
                crate::report::thousands(sent),
                crate::report::thousands(leaked)
            );
        }
    }
    out
}

/// Frames/s as the report's MPPS column heads: `0.45`, `3`, `0.001`.
fn mpps(fps: f64) -> String {
    let m = fps / 1e6;
    let s = format!("{m:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(loss_ratio: f64) -> TrialResult {
        TrialResult {
            policy_drops: None,
            frame_size: 64,
            mix: None,
            flows: Vec::new(),
            directions: Vec::new(),
            l3_length: 46,
            duration_s: 1.0,
            intended_fps: 1e6,
            offered_fps: 1e6,
            intended_frames: 1_000_000,
            tx_frames: 1_000_000,
            rx_frames: (1e6 * (1.0 - loss_ratio)) as u64,
            lost_frames: (1e6 * loss_ratio) as u64,
            loss_ratio,
            reordered: 0,
            duplicated: 0,
            latency_ns: None,
            generator_short: false,
            generator_max_stall_ns: None,
            tester_rx_drops: 0,
            stray_frames: 0,
            engine: "xdp".into(),
            ip_version: Default::default(),
            vlan: None,
            dut_cpu: None,
        }
    }

    #[test]
    fn rows_read_like_the_100ge_report() {
        let report = LossSweepReport {
            linerate_version: "0".into(),
            started_at: String::new(),
            frame_size: 64,
            l3_length: 46,
            trial_duration_s: 2.0,
            engine: "xdp".into(),
            rates_fps: vec![450_000.0, 750_000.0, 3_000_000.0],
            stop_above_loss_ratio: 0.5,
            rows: vec![
                SweepRow {
                    name: "lan-lan".into(),
                    description: "LAN-LAN routing".into(),
                    trials: vec![Some(trial(0.0)), Some(trial(0.001)), Some(trial(0.137))],
                    scenario: None,
                },
                SweepRow {
                    name: "firewall:50".into(),
                    description: "with 50 policies".into(),
                    trials: vec![Some(trial(0.217)), Some(trial(0.531)), None],
                    scenario: None,
                },
            ],
        };
        let t = loss_sweep_table(&report);
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[3].starts_with("MPPS"), "{t}");
        assert!(
            lines[3].contains("0.45") && lines[3].contains(" 3 |"),
            "{t}"
        );
        assert!(
            lines[4].starts_with("lan-lan") && lines[4].contains("13.7%"),
            "{t}"
        );
        assert!(lines[5].contains("53.1%"), "{t}");
        // The untried cell stays empty, columns aligned.
        assert_eq!(lines[4].len(), lines[5].len(), "{t}");
        assert!(t.contains("firewall:50: with 50 policies"), "{t}");
    }
}
