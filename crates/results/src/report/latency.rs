//! The RFC 2544 latency table (section 26.2): one row per frame size and
//! load, latency in microseconds from each frame's scheduled send time to
//! its arrival, with the tester's own back-to-back latency beneath each
//! size when it is calibrated.

use super::{line_speed, placement_sentence, sig3, thousands, trim_number};
use crate::latency::LatencyReport;
use crate::model::LatencySummary;
use std::fmt::Write as _;

const COLUMNS: [&str; 13] = [
    "Frame",
    "Load",
    "Rate [fps]",
    "Min",
    "Avg",
    "p50",
    "p90",
    "p99",
    "p99.9",
    "Max",
    "PDV99.9",
    "Lost",
    "DUT CPU %",
];

pub fn latency_table(report: &LatencyReport) -> String {
    let mut rows: Vec<[String; 13]> = Vec::new();
    // The DUT's CPU load (total) over a load's trials, as the record has it.
    let cpu = |p: &crate::latency::LatencyPoint| {
        p.dut_cpu
            .map_or("-".to_string(), |c| format!("{:.1}", c.total_pct))
    };
    let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
    let figures = |l: &Option<LatencySummary>, pdv: Option<u64>| -> [String; 8] {
        match l {
            Some(l) => [
                us(l.min),
                us(l.avg),
                us(l.p50),
                us(l.p90),
                us(l.p99),
                us(l.p999),
                us(l.max),
                pdv.map_or("-".into(), us),
            ],
            None => std::array::from_fn(|_| "-".to_string()),
        }
    };
    for r in &report.results {
        let label = r
            .mix
            .as_ref()
            .map_or(r.frame_size.to_string(), |m| m.name.clone());
        let base = if r.base == "throughput" {
            "NDR"
        } else {
            "rate"
        };
        for (i, p) in r.points.iter().enumerate() {
            let f = figures(&p.latency_ns, p.pdv_p999_ns);
            rows.push([
                if i == 0 { label.clone() } else { String::new() },
                format!("{} % {base}", trim_number(p.load * 100.0)),
                thousands(p.intended_fps.round() as u64),
                f[0].clone(),
                f[1].clone(),
                f[2].clone(),
                f[3].clone(),
                f[4].clone(),
                f[5].clone(),
                f[6].clone(),
                f[7].clone(),
                thousands(p.lost_frames),
                cpu(p),
            ]);
        }
        if let Some(t) = &r.tester_latency_ns {
            let f = figures(&Some(*t), Some(t.p999.saturating_sub(t.min)));
            rows.push([
                String::new(),
                "tester b2b".into(),
                String::new(),
                f[0].clone(),
                f[1].clone(),
                f[2].clone(),
                f[3].clone(),
                f[4].clone(),
                f[5].clone(),
                f[6].clone(),
                f[7].clone(),
                String::new(),
                String::new(),
            ]);
        }
    }
    let widths: Vec<usize> = (0..COLUMNS.len())
        .map(|c| {
            rows.iter()
                .map(|r| r[c].chars().count())
                .chain([COLUMNS[c].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (c, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            // Text columns left, numbers right.
            if c < 2 {
                let _ = write!(s, "{cell:<w$}  ");
            } else {
                let _ = write!(s, "{cell:>w$}  ");
            }
        }
        s.trim_end().to_string()
    };

    let mut out = String::new();
    let _ = writeln!(
        out,
        "RFC 2544 latency, {}   trial {} s x {}",
        report.run.description,
        trim_number(report.trial_duration_s),
        report.repeat
    );
    out.push_str(
        "Latency [µs] from each frame's scheduled send time to its arrival, per frame size and load\n",
    );
    let header: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    out.push_str(&line(&header));
    out.push('\n');
    for r in &rows {
        out.push_str(&line(r));
        out.push('\n');
    }
    out.push_str("NDR: the RFC 2544 throughput found first (zero loss). PDV99.9: RFC 5481 packet delay variation, p99.9 - min.\n");
    if report
        .results
        .iter()
        .any(|r| r.points.iter().any(|p| p.lost_frames > 0))
    {
        out.push_str("A load with lost frames is above what the device forwards: its latency is not an RFC 2544 latency figure.\n");
    }
    let every = report
        .results
        .iter()
        .flat_map(|r| &r.points)
        .filter_map(|p| p.latency_ns.map(|l| l.every))
        .max()
        .unwrap_or(1);
    if every > 1 {
        let _ = writeln!(
            out,
            "Latency at some loads comes from a sample, down to every {} frame of each stream (the in-kernel counter above 1 Mpps per port, or --latency-every; --latency-every 1 for all).",
            super::ordinal(every)
        );
    }
    if report.results.iter().any(|r| r.tester_latency_ns.is_some()) {
        out.push_str("tester b2b: the tester's own latency, ports cabled back to back ('linerate calibrate'); the device adds the difference.\n");
    }
    for r in &report.results {
        if let Some(t) = &r.throughput {
            if t.tester_limited {
                let _ = writeln!(
                    out,
                    "{} B: the throughput search ended at the tester's limit ({} fps); the device may forward more.",
                    r.frame_size,
                    sig3(t.throughput_fps)
                );
            }
        }
    }
    if let Some(text) = super::recovery_footer(
        report
            .results
            .iter()
            .flat_map(|r| r.points.iter().flat_map(|p| &p.trials)),
    ) {
        out.push_str(&text);
    }
    let mut engine = format!(
        "Engine {}.   Line speed {}.",
        report.run.engine,
        line_speed(report.run.line_speed_bps)
    );
    // IPv6 or VLAN-tagged test frames are said; plain IPv4 is the default.
    let first_trial = report
        .results
        .iter()
        .flat_map(|r| r.points.iter().flat_map(|p| p.trials.first()))
        .next();
    if let Some(t) = first_trial {
        engine += &super::receiver_sentence(&t.receiver);
    }
    if let Some(t) = first_trial.filter(|t| !t.encap().is_default()) {
        engine += &format!("   Test frames {}.", t.encap());
    }
    match &report.run.placement {
        Some(p) => {
            let _ = writeln!(out, "{}   {engine}", placement_sentence(p));
        }
        None => {
            let _ = writeln!(out, "{engine}");
        }
    }
    out
}
