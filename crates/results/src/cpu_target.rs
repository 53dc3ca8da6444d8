//! The Cisco report's CPU-target test: the rate at which the DUT's CPU
//! load sits near a target (75 % in the report), per frame size, and its
//! table.

use crate::model::{DutCpu, TrialResult};
use crate::report::{cpu_cell, sig3, thousands};
use crate::scenario::ScenarioRecord;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;

/// The rate found for one frame size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuTargetResult {
    pub frame_size: u16,
    pub l3_length: u16,
    /// The trial's CPU load was within the tolerance of the target.
    pub reached: bool,
    /// The trial whose CPU load came closest to the target: its rate.
    pub rate_fps: f64,
    /// The same rate in Mbit/s counting preamble and inter-frame gap.
    pub rate_mbps_l1: f64,
    pub dut_cpu: Option<DutCpu>,
    /// That trial's loss.
    pub loss_ratio: f64,
    /// Every trial of the search, in the order run.
    pub trials: Vec<TrialResult>,
}

/// A whole CPU-target run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuTargetReport {
    /// Where and how the run was made.
    #[serde(flatten)]
    pub run: crate::run::RunInfo,
    pub target_pct: f64,
    /// How close counts as reached, in percentage points.
    pub tolerance_pct: f64,
    pub trial_duration_s: f64,
    pub dut_cpu_source: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scenario: Option<ScenarioRecord>,
    pub results: Vec<CpuTargetResult>,
}

/// The table in the Cisco report's columns: per packet length the measured
/// L1 rate, CPU load total and caused by traffic, and the packet rate.
pub fn cpu_target_table(r: &CpuTargetReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "DUT CPU near {} % (within {} points), {}",
        r.target_pct, r.tolerance_pct, r.run.description
    );
    let header = [
        "Frame",
        "IP len",
        "L1 Mbps",
        "CPU %",
        "traffic %",
        "Frames/s",
        "Loss %",
        "",
    ];
    let rows: Vec<[String; 8]> = r
        .results
        .iter()
        .map(|x| {
            [
                x.frame_size.to_string(),
                x.l3_length.to_string(),
                sig3(x.rate_mbps_l1),
                cpu_cell(x.dut_cpu.map(|c| c.total_pct)),
                cpu_cell(x.dut_cpu.map(|c| c.traffic_pct)),
                thousands(x.rate_fps.round() as u64),
                format!("{:.3}", x.loss_ratio * 100.0),
                if x.reached {
                    String::new()
                } else {
                    "(target not reached: closest trial)".to_string()
                },
            ]
        })
        .collect();
    let widths: Vec<usize> = (0..8)
        .map(|c| {
            rows.iter()
                .map(|row| row[c].len())
                .chain(std::iter::once(header[c].len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 7 {
                let _ = write!(s, "  {cell}");
            } else {
                let _ = write!(s, "  {cell:>w$}");
            }
        }
        s.trim_end().to_string()
    };
    out.push_str(&line(header.to_vec()));
    out.push('\n');
    for row in &rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
        out.push('\n');
    }
    let _ = writeln!(out, "DUT CPU: {}.", r.dut_cpu_source);
    let _ = writeln!(
        out,
        "Engine {}, trials of {} s.",
        r.run.engine, r.trial_duration_s
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_names_target_and_marks_misses() {
        let result = |reached| CpuTargetResult {
            frame_size: 512,
            l3_length: 494,
            reached,
            rate_fps: 22_725.0,
            rate_mbps_l1: 96.7,
            dut_cpu: Some(DutCpu {
                total_pct: 76.0,
                traffic_pct: 75.0,
                stolen_pct: None,
            }),
            loss_ratio: 0.0,
            trials: Vec::new(),
        };
        let report = CpuTargetReport {
            run: crate::run::RunInfo {
                linerate_version: "0".into(),
                description: "LAN-LAN routing".into(),
                started_at: String::new(),
                engine: "xdp".into(),
                ..Default::default()
            },
            target_pct: 75.0,
            tolerance_pct: 5.0,
            trial_duration_s: 2.0,
            dut_cpu_source: "lab".into(),
            scenario: None,
            results: vec![result(true), result(false)],
        };
        let t = cpu_target_table(&report);
        assert!(t.starts_with("DUT CPU near 75 %"), "{t}");
        assert!(t.contains("22,725"), "{t}");
        assert!(t.contains("76.0"), "{t}");
        assert_eq!(t.matches("target not reached").count(), 1, "{t}");
    }
}
