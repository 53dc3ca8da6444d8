//! The MLRsearch table: frame sizes as columns (as the LANCOM throughput
//! table), for each goal (NDR, PDR, ...) its relevant lower and upper
//! bounds and conditional throughput, then what the search cost.

use super::grid::{column_name, footer, grid, title, Row};
use super::{sig3, trim_number};
use crate::methods::{GoalResultRecord, MlrSearchReport, MlrSearchResult};
use linerate_wire::units::Layer;
use std::fmt::Write as _;

/// The table for `report`.
pub fn mlrsearch_table(report: &MlrSearchReport) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{}",
        title("MLRsearch (draft-ietf-bmwg-mlrsearch)", &report.run)
    );
    let results = &report.results;
    let Some(first) = results.first() else {
        out.push_str("(no frame size was measured)\n");
        out.push_str(&footer(&report.run));
        return out;
    };
    for g in &first.goals {
        let g = &g.goal;
        let _ = writeln!(
            out,
            "{}: loss ratio {} %, exceed ratio {} %, final trial {} s, duration sum {} s, width {} %{}",
            g.name,
            trim_number(g.loss_ratio * 100.0),
            trim_number(g.exceed_ratio * 100.0),
            trim_number(g.final_trial_duration_s),
            trim_number(g.duration_sum_s),
            trim_number(g.width * 100.0),
            if g.initial_trial_duration_s < g.final_trial_duration_s {
                format!(", initial trial {} s", trim_number(g.initial_trial_duration_s))
            } else {
                String::new()
            }
        );
    }
    out.push_str("Bounds and conditional throughput @ frame size [bytes] or mix\n");
    let mut header = vec![String::new()];
    header.extend(
        results
            .iter()
            .map(|r| format!("{} ", column_name(r.frame_size, r.mix.as_ref()))),
    );
    let mut rows: Vec<Row> = Vec::new();
    let mut irregular = false;
    let mut limited = false;
    for (gi, g) in first.goals.iter().enumerate() {
        let goal = |r: &MlrSearchResult| r.goals.get(gi).cloned();
        let cells = |f: &dyn Fn(&GoalResultRecord) -> Option<f64>| -> Vec<String> {
            results
                .iter()
                .map(|r| match goal(r) {
                    Some(g) => {
                        let mark = if !g.regular {
                            "~"
                        } else if g.tester_limited {
                            "*"
                        } else {
                            " "
                        };
                        format!("{}{mark}", f(&g).map_or("-".to_string(), sig3))
                    }
                    None => "- ".to_string(),
                })
                .collect()
        };
        for r in results {
            if let Some(g) = goal(r) {
                irregular |= !g.regular;
                limited |= g.tester_limited;
            }
        }
        let name = g.goal.name.clone();
        rows.push((
            format!("{name} lower bound"),
            cells(&|g| g.relevant_lower_bound_fps),
            "Frames/s".into(),
        ));
        rows.push((
            String::new(),
            cells(&|g| g.relevant_lower_bound_mbps_l2),
            super::table::mbps(Layer::L2).into(),
        ));
        rows.push((
            format!("{name} upper bound"),
            cells(&|g| g.relevant_upper_bound_fps),
            "Frames/s".into(),
        ));
        rows.push((
            format!("{name} cond. throughput"),
            cells(&|g| g.conditional_throughput_fps),
            "Frames/s".into(),
        ));
        rows.push((
            String::new(),
            cells(&|g| g.conditional_throughput_mbps_l2),
            super::table::mbps(Layer::L2).into(),
        ));
    }
    let plain = |f: &dyn Fn(&MlrSearchResult) -> String| -> Vec<String> {
        results.iter().map(|r| format!("{} ", f(r))).collect()
    };
    rows.push((
        "Line rate".into(),
        plain(&|r| sig3(r.line_rate_fps)),
        "Frames/s".into(),
    ));
    rows.push((
        "Trials".into(),
        plain(&|r| r.trials.len().to_string()),
        String::new(),
    ));
    rows.push((
        "Trial-seconds".into(),
        plain(&|r| trim_number((r.trial_seconds * 10.0).round() / 10.0)),
        "s".into(),
    ));
    out.push_str(&grid(&header, &rows));
    if irregular {
        out.push_str("(~) irregular result: a bound is missing (the maximum load passed, or even the minimum failed) or the bounds are wider than the goal width.\n");
    }
    if limited {
        out.push_str("(*) tester-limited: the tester could not offer the upper bound's rate in full; the device may forward more.\n");
    }
    if let Some(text) = crate::report::recovery_footer(results.iter().flat_map(|r| &r.trials)) {
        out.push_str(&text);
    }
    out.push_str(&footer(&report.run));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::methods::{RunInfo, SearchGoalRecord};

    fn goal(name: &str, lower: Option<f64>, upper: Option<f64>, regular: bool) -> GoalResultRecord {
        GoalResultRecord {
            goal: SearchGoalRecord {
                name: name.into(),
                loss_ratio: if name == "NDR" { 0.0 } else { 0.005 },
                exceed_ratio: 0.0,
                final_trial_duration_s: 1.0,
                duration_sum_s: 1.0,
                width: 0.01,
                initial_trial_duration_s: 1.0,
            },
            relevant_lower_bound_fps: lower,
            relevant_upper_bound_fps: upper,
            conditional_throughput_fps: lower,
            relevant_lower_bound_mbps_l2: lower.map(|l| l * 64.0 * 8.0 / 1e6),
            conditional_throughput_mbps_l2: lower.map(|l| l * 64.0 * 8.0 / 1e6),
            conditional_throughput_mbps_l1: lower.map(|l| l * 84.0 * 8.0 / 1e6),
            regular,
            tester_limited: false,
        }
    }

    #[test]
    fn goals_bounds_and_cost_per_frame_size_with_irregular_results_marked() {
        let rep = MlrSearchReport {
            run: RunInfo::test_lab("lab", "xdp"),
            results: vec![MlrSearchResult {
                frame_size: 64,
                l3_length: 46,
                mix: None,
                line_rate_fps: 14_880_952.0,
                max_fps: 14_880_952.0,
                min_fps: 1488.0,
                goals: vec![
                    goal("NDR", Some(990_000.0), Some(1_000_000.0), true),
                    goal("PDR", Some(14_880_952.0), None, false),
                ],
                trial_seconds: 7.0,
                reused_trials: 0,
                trials: vec![],
            }],
            interrupted: None,
        };
        let t = mlrsearch_table(&rep);
        assert!(t.contains("NDR: loss ratio 0 %, exceed ratio 0 %, final trial 1 s, duration sum 1 s, width 1 %"), "{t}");
        assert!(
            t.contains("NDR lower bound          990,000   Frames/s"),
            "{t}"
        );
        assert!(
            t.contains("PDR upper bound                -~  Frames/s"),
            "{t}"
        );
        assert!(t.contains("Trial-seconds                  7   s"), "{t}");
        assert!(t.contains("(~) irregular result"), "{t}");
    }
}
