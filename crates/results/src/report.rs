//! Reporters: text tables in the layout of the reference reports, and JSON.
//!
//! Reporters only format what was measured; they compute nothing but
//! shares and unit conversions for display.

use crate::model::TrialResult;
use crate::run::Placement;
use crate::throughput::{Rfc2544Report, ThroughputResult};

mod back_to_back;
mod frame_loss;
mod grid;
mod mlrsearch;
pub mod table;
pub use back_to_back::back_to_back_table;
pub use frame_loss::frame_loss_table;
use linerate_wire::units::Layer;
pub use mlrsearch::mlrsearch_table;
use std::fmt::Write as _;
use table::{Cell, Mark, Row, Table};

mod latency;
pub use latency::latency_table;

/// Gap between table columns.
const GAP: &str = "  ";

/// The RFC 2544 throughput table in the layout of the LANCOM techpaper's
/// Table 2: frame sizes as columns; rows "Mbps" and "Frames/s" for the
/// throughput and for the line-rate maximum beneath, the share of line
/// rate, then the notes.
///
/// Numbers are rounded to 3 significant digits as in the paper (see
/// [`sig3`]). A column whose search ended against the tester's own limit is
/// marked `*`, and a legend explains the mark.
/// The legend of the `*` mark on a tester-limited figure, in every report.
pub const TESTER_LIMITED_NOTE: &str = "(*) tester-limited: the tester could not offer the next rate up in full (frames not sent, or its generator paused for longer than the resolution), or the result is within 5 % of the tester's calibrated ceiling; the device may forward more.";

pub fn throughput_table(report: &Rfc2544Report) -> String {
    throughput_table_layers(report, false)
}

/// [`throughput_table`], with `all_layers` adding the throughput in Mbps at
/// L1 (preamble and gap counted), L3 (IP packets) and L4 (UDP payload),
/// and the link usage as the LanTraffic datasheet computes it: the L2
/// frame bytes over the line speed (its coefficients, e.g. 1518/1472 for a
/// 1472-byte UDP payload, turn payload into frame bytes).
pub fn throughput_table_layers(report: &Rfc2544Report, all_layers: bool) -> String {
    let results = &report.results;
    let any_mix = results.iter().any(|r| r.mix.is_some());
    let grid = throughput_grid(report, all_layers);
    // Every cell carries a one-character mark slot so that digits align
    // whether or not the cell is marked.
    let header: Vec<String> = grid.columns.iter().map(|c| format!("{c} ")).collect();
    let rows: Vec<(&str, Vec<String>, &str)> = grid
        .rows
        .iter()
        .map(|r| {
            let cells = r
                .cells
                .iter()
                .map(|c| match c.mark {
                    Mark::None => format!("{} ", c.text),
                    m => format!("{}{}", c.text, m.symbol()),
                })
                .collect();
            (r.label.as_str(), cells, r.unit.as_str())
        })
        .collect();

    let label_width = rows
        .iter()
        .map(|(label, _, _)| label.len())
        .max()
        .unwrap_or(0);
    let widths: Vec<usize> = (0..results.len())
        .map(|i| {
            rows.iter()
                .map(|(_, cells, _)| cells[i].chars().count())
                .chain(std::iter::once(header[i].len()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |label: &str, cells: &[String], unit: &str| {
        let mut s = format!("{label:<label_width$}");
        for (cell, width) in cells.iter().zip(&widths) {
            let pad = width - cell.chars().count();
            let _ = write!(s, "{GAP}{:pad$}{cell}", "");
        }
        if !unit.is_empty() {
            let _ = write!(s, "{GAP}{unit}");
        }
        s.trim_end().to_string()
    };
    let table_width = label_width + widths.iter().map(|w| w + GAP.len()).sum::<usize>();

    let mut out = String::new();
    let title = if report.run.description.is_empty() {
        format!(
            "RFC 2544 throughput, {} -> {} ({})",
            report.run.port_a, report.run.port_b, report.run.setup
        )
    } else {
        format!("RFC 2544 throughput, {}", report.run.description)
    };
    let settings = format!(
        "loss allowed {} %, trial {} s, resolution {} %",
        trim_number(report.allowed_loss_ratio * 100.0),
        trim_number(report.trial_duration_s),
        trim_number(report.resolution * 100.0),
    );
    // The settings end flush with the unit column when there is room.
    let room = (table_width + GAP.len() + table::mbps(Layer::L2).len())
        .saturating_sub(title.chars().count() + settings.chars().count());
    let _ = writeln!(out, "{title}{:room$}{settings}", "", room = room.max(3));
    out.push_str(if any_mix {
        "Throughput [Mbps] @ frame size [bytes] or IMIX pattern and frame rate [fps]\n"
    } else {
        "Throughput [Mbps] @ frame size [bytes] and frame rate [fps]\n"
    });
    if results.is_empty() {
        out.push_str("(no frame size was measured)\n");
    } else {
        out.push_str(&line("", &header, ""));
        out.push('\n');
        for (label, cells, unit) in &rows {
            out.push_str(&line(label, cells, unit));
            out.push('\n');
        }
    }
    if report.bidirectional {
        out.push_str("Bidirectional: both ports sent at once; rates are both directions summed (half each way), line rate is both links'.\n");
    }
    for m in results.iter().filter_map(|r| r.mix.as_ref()) {
        let _ = writeln!(
            out,
            "{}: {}, mean frame {:.1} bytes (frames interleaved, not in blocks).",
            m.name, m.composition, m.mean_frame_size
        );
    }
    if let Some(s) = &report.scenario {
        let _ = writeln!(out, "Scenario {}: {}.", s.spec, s.data_path);
    }
    // The notes on trials count every search: with `--repeat`, every
    // round's.
    let searched = if report.round_results.is_empty() {
        results
    } else {
        &report.round_results
    };
    if let Some(line) = tunnels_footer(report) {
        out.push_str(&line);
    }
    if let Some(text) = rekeys_footer(searched.iter().flat_map(|r| &r.trials)) {
        out.push_str(&text);
    }
    if let Some(text) = recovery_footer(searched.iter().flat_map(|r| &r.trials)) {
        out.push_str(&text);
    }
    if let Some(p) = crate::PolicyDrops::sum(searched.iter().flat_map(|r| &r.trials)) {
        let _ = writeln!(
            out,
            "Drop test: every other frame was of the drop class ({} sent to be dropped by policy, {} leaked through); rates count both classes offered, loss only the legitimate one.",
            thousands(p.tx_frames),
            thousands(p.leaked_frames)
        );
    }
    if let Some(m) = results.iter().find_map(|r| r.mlrsearch.as_ref()) {
        let goals: Vec<String> = m
            .goals
            .iter()
            .map(|g| {
                format!(
                    "{} loss ratio {} %",
                    g.goal.name,
                    trim_number(g.goal.loss_ratio * 100.0)
                )
            })
            .collect();
        let g = &m.goals[0].goal;
        let reused = if results
            .iter()
            .filter_map(|r| r.mlrsearch.as_ref())
            .any(|m| m.reused_trials > 0)
        {
            " it counts the zero-loss search's trials too, as RFC 9971 allows;"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "NDR, PDR: MLRsearch (RFC 9971) conditional throughput, {}; exceed ratio {} % of {} s in trials of {} s or longer (one bad trial does not fail a load), width {} %;{reused} (~) irregular: a bound is missing (the maximum load passed) or wider than the width.",
            goals.join(", "),
            trim_number(g.exceed_ratio * 100.0),
            trim_number(g.duration_sum_s),
            trim_number(g.final_trial_duration_s),
            trim_number(g.width * 100.0),
        );
    }
    if let Some(line) = rounds_footer(report) {
        let _ = writeln!(out, "{line}");
    }
    let all_trials = searched.iter().flat_map(|r| {
        r.trials
            .iter()
            .chain(r.mlrsearch.iter().flat_map(|m| &m.trials))
    });
    if let Some(line) = loss_where_line(all_trials) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(source) = &report.dut_cpu_source {
        let _ = writeln!(out, "DUT CPU: {source}.");
    }
    let goal_limited = |r: &ThroughputResult| {
        r.mlrsearch
            .as_ref()
            .is_some_and(|m| m.goals.iter().any(|g| g.tester_limited))
    };
    if results.iter().any(|r| r.tester_limited || goal_limited(r)) {
        out.push_str(TESTER_LIMITED_NOTE);
        out.push('\n');
    }
    let mut engine = format!(
        "Engine {}.   Line speed {}.",
        report.run.engine,
        line_speed(report.run.line_speed_bps)
    );
    // IPv6 or VLAN-tagged test frames are said; plain IPv4 is the default.
    if let Some(t) = results.iter().flat_map(|r| r.trials.first()).next() {
        engine += &receiver_sentence(&t.receiver);
        if !t.encap().is_default() {
            engine += &format!("   Test frames {}.", t.encap());
        }
    }
    match &report.run.placement {
        Some(placement) => {
            let _ = writeln!(out, "{}   {engine}", placement_sentence(placement));
            if placement.shared_core {
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

/// The rows of the throughput table (see [`throughput_table_layers`] for
/// `all_layers`), as the text report and the HTML page both draw them: the
/// zero-loss throughput, MLRsearch's goals, the spread over rounds, the
/// line rate, the WAN side through a VPN peer, the DUT's CPU, the outer
/// frames of a tunnel scenario.
pub fn throughput_grid(report: &Rfc2544Report, all_layers: bool) -> Table {
    let results = &report.results;
    let marked = |r: &ThroughputResult| {
        if r.tester_limited {
            Mark::TesterLimited
        } else {
            Mark::None
        }
    };
    let plain = |_: &ThroughputResult| Mark::None;
    let columns: Vec<String> = results
        .iter()
        .map(|r| match &r.mix {
            Some(m) => m.name.clone(),
            None => r.frame_size.to_string(),
        })
        .collect();
    let any_mix = results.iter().any(|r| r.mix.is_some());
    let row = |value: &dyn Fn(&ThroughputResult) -> String,
               mark: &dyn Fn(&ThroughputResult) -> Mark| {
        results
            .iter()
            .map(|r| Cell {
                text: value(r),
                mark: mark(r),
            })
            .collect::<Vec<Cell>>()
    };
    // `--repeat N`: each figure is its median over the rounds; how far
    // the rounds disagreed is beneath it.
    let repeated = results.iter().find_map(|r| r.over_rounds.as_ref());
    let spread_unit = repeated.map_or(String::new(), |o| {
        format!("highest / lowest of {} rounds", o.count)
    });
    let mut rows: Vec<(&str, Vec<Cell>, &str)> = vec![
        (
            "Throughput",
            row(&|r| sig3(r.throughput_mbps_l2), &marked),
            table::mbps(Layer::L2),
        ),
        ("", row(&|r| sig3(r.throughput_fps), &marked), "Frames/s"),
    ];
    if repeated.is_some() {
        rows.push((
            "  spread",
            row(
                &|r| {
                    r.over_rounds
                        .as_ref()
                        .map_or("-".into(), |o| spread_cell(&o.zero_loss))
                },
                &plain,
            ),
            &spread_unit,
        ));
    }
    rows.extend([
        (
            "Line rate",
            row(&|r| sig3(r.line_rate_mbps_l2), &plain),
            table::mbps(Layer::L2),
        ),
        ("", row(&|r| sig3(r.line_rate_fps), &plain), "Frames/s"),
        ("Share of line", row(&|r| share_of_line(r), &plain), ""),
    ]);
    if all_layers {
        let line_mbps = report.run.line_speed_bps as f64 / 1e6;
        let extra: Vec<(&str, Vec<Cell>, &str)> = vec![
            (
                "",
                row(&|r| sig3(r.throughput_mbps_l1), &marked),
                table::mbps(Layer::L1),
            ),
            (
                "",
                row(&|r| sig3(r.throughput_mbps_l3), &marked),
                table::mbps(Layer::L3),
            ),
            (
                "",
                row(&|r| sig3(r.throughput_mbps_l4), &marked),
                table::mbps(Layer::L4),
            ),
            (
                "Link usage",
                row(
                    &|r| {
                        if line_mbps > 0.0 {
                            format!("{:.1} %", r.throughput_mbps_l2 / line_mbps * 100.0)
                        } else {
                            "-".into()
                        }
                    },
                    &plain,
                ),
                "L2 (LanTraffic)",
            ),
        ];
        for (i, r) in extra.into_iter().enumerate() {
            rows.insert(2 + i, r);
        }
    } else if any_mix {
        // IMIX throughput is published at L1 too (LANCOM Tables 5, 10, 11
        // count L2; hardware testers' "line rate %" counts L1).
        rows.insert(
            1,
            (
                "",
                row(&|r| sig3(r.throughput_mbps_l1), &marked),
                table::mbps(Layer::L1),
            ),
        );
    }
    // Through a VPN peer: the frames above are the clear ones (as LANCOM
    // labels its columns); beneath, the same throughput on the gateway's
    // WAN side in the encrypted frames linerate really sent or received.
    if results.iter().any(|r| r.wan.is_some()) {
        let wan = |f: &dyn Fn(&crate::ipsec::WanRate) -> String| {
            row(&|r| r.wan.as_ref().map_or("-".into(), f), &plain)
        };
        let at = rows
            .iter()
            .position(|(label, _, _)| *label == "Line rate")
            .unwrap_or(rows.len());
        rows.insert(
            at,
            (
                "WAN (ESP)",
                wan(&|w| format!("{:.0}", w.frame_size)),
                "bytes per frame, encrypted",
            ),
        );
        rows.insert(
            at + 1,
            ("", wan(&|w| sig3(w.mbps_l2)), table::mbps(Layer::L2)),
        );
    }
    // MLRsearch's NDR and PDR beside the zero-loss throughput, when run.
    let goal_names: Vec<String> = results
        .iter()
        .find_map(|r| r.mlrsearch.as_ref())
        .map(|m| m.goals.iter().map(|g| g.goal.name.clone()).collect())
        .unwrap_or_default();
    let at = rows
        .iter()
        .position(|(label, _, _)| *label == "Line rate")
        .unwrap_or(rows.len());
    let rows_per_goal = if repeated.is_some() { 3 } else { 2 };
    for (i, name) in goal_names.iter().enumerate() {
        // Over rounds: the goal's median round.
        let round_goal = |r: &ThroughputResult| {
            r.over_rounds
                .as_ref()
                .and_then(|o| o.goals.iter().find(|g| &g.name == name))
                .cloned()
        };
        let goal_of = |r: &ThroughputResult| match &r.over_rounds {
            Some(_) => round_goal(r).map(|g| g.median),
            None => r
                .mlrsearch
                .as_ref()
                .and_then(|m| m.goals.iter().find(|g| &g.goal.name == name))
                .cloned(),
        };
        let mark = |r: &ThroughputResult| match goal_of(r) {
            Some(g) if g.tester_limited => Mark::TesterLimited,
            Some(g) if !g.regular => Mark::Irregular,
            _ => Mark::None,
        };
        let cell = |v: Option<f64>| v.map_or("-".to_string(), sig3);
        let label: &'static str = if name == "NDR" {
            "NDR (MLRsearch)"
        } else if name == "PDR" {
            "PDR (MLRsearch)"
        } else {
            "MLRsearch goal"
        };
        rows.insert(
            at + rows_per_goal * i,
            (
                label,
                row(
                    &|r| cell(goal_of(r).and_then(|g| g.conditional_throughput_mbps_l2)),
                    &mark,
                ),
                table::mbps(Layer::L2),
            ),
        );
        rows.insert(
            at + rows_per_goal * i + 1,
            (
                "",
                row(
                    &|r| cell(goal_of(r).and_then(|g| g.conditional_throughput_fps)),
                    &mark,
                ),
                "Frames/s",
            ),
        );
        if repeated.is_some() {
            rows.insert(
                at + rows_per_goal * i + 2,
                (
                    "  spread",
                    row(
                        &|r| round_goal(r).map_or("-".into(), |g| spread_cell(&g.figure)),
                        &plain,
                    ),
                    &spread_unit,
                ),
            );
        }
    }
    // The Cisco report's columns: DUT CPU load beside the rate, when measured.
    if results.iter().any(|r| r.dut_cpu.is_some()) {
        rows.push((
            "DUT CPU total",
            row(&|r| cpu_cell(r.dut_cpu.map(|c| c.total_pct)), &plain),
            "%",
        ));
        rows.push((
            "  by traffic",
            row(&|r| cpu_cell(r.dut_cpu.map(|c| c.traffic_pct)), &plain),
            "%",
        ));
        // A lab on a virtual machine: the time the hypervisor took from
        // the router's CPU, which explains a result that does not repeat.
        let stolen = |r: &ThroughputResult| r.dut_cpu.and_then(|c| c.stolen_pct);
        if results.iter().any(|r| stolen(r).is_some_and(|s| s >= 0.05)) {
            rows.push((
                "  stolen",
                row(&|r| cpu_cell(stolen(r)), &plain),
                "% taken by the hypervisor for other guests",
            ));
        }
    }
    // Over rounds: the stolen time of every round, which tells a round
    // the machine slowed from one the router did.
    fn round_stolen(r: &ThroughputResult) -> &[f64] {
        r.over_rounds
            .as_ref()
            .map_or(&[][..], |o| o.stolen_pct.as_slice())
    }
    if results
        .iter()
        .any(|r| round_stolen(r).iter().any(|&s| s >= 0.05))
    {
        rows.push((
            "Stolen by round",
            row(
                &|r| {
                    let each: Vec<String> =
                        round_stolen(r).iter().map(|&s| format!("{s:.1}")).collect();
                    if each.is_empty() {
                        "-".into()
                    } else {
                        each.join(" ")
                    }
                },
                &plain,
            ),
            "% of the DUT's CPU, mean of each round's trials",
        ));
    }
    // Tunnels: the same throughput as the WAN link carries it.
    let outer = report
        .scenario
        .as_ref()
        .map(|s| s.outer.as_slice())
        .unwrap_or_default();
    let outer_of = |r: &ThroughputResult| outer.iter().find(|o| o.frame_size == r.frame_size);
    if !outer.is_empty() {
        rows.push((
            "Outer frame",
            row(
                &|r| outer_of(r).map_or("-".into(), |o| o.outer_frame_size.to_string()),
                &plain,
            ),
            "bytes on the WAN link",
        ));
        rows.push((
            "Outer rate",
            row(
                &|r| outer_of(r).map_or("-".into(), |o| sig3(o.outer_mbps_l2)),
                &plain,
            ),
            "Mbps (L2, WAN link)",
        ));
    }
    Table {
        columns,
        rows: rows
            .into_iter()
            .map(|(label, cells, unit)| Row {
                label: label.to_string(),
                cells,
                unit: unit.to_string(),
            })
            .collect(),
    }
}

/// A figure's spread over the rounds, for a table cell: `1.18x`.
fn spread_cell(figure: &crate::rounds::RoundFigure) -> String {
    let spread = figure.spread();
    if spread.is_finite() {
        format!("{spread:.2}x")
    } else {
        "inf".into()
    }
}

/// What the figures of a `--repeat N` run are.
fn rounds_footer(report: &Rfc2544Report) -> Option<String> {
    let counts: Vec<usize> = report
        .results
        .iter()
        .filter_map(|r| r.over_rounds.as_ref().map(|o| o.count))
        .collect();
    if counts.is_empty() {
        return None;
    }
    let short = if counts.iter().any(|&c| c < report.repeat) {
        format!(
            " (stopped early: some sizes have fewer than the {} rounds asked)",
            report.repeat
        )
    } else {
        String::new()
    };
    Some(format!(
        "Rounds: every size was searched once per round, round-robin, {} rounds{short}; each figure is its median over the rounds (with an even count the lower middle one: a rate more than half the rounds reached), the spread its highest over its lowest round; the other rows are those of the round whose zero-loss throughput is the median, and the notes count every round's trials.",
        report.repeat
    ))
}

/// A summary of one trial, for `linerate trial`.
///
/// `line_bps` is the line speed, for the offered rate's share of line
/// rate; pass 0 to leave the share out.
pub fn trial_summary(t: &TrialResult, line_bps: u64) -> String {
    let encap = t.encap();
    let layout = if encap.is_default() {
        String::new()
    } else {
        format!(", {encap}")
    };
    let layers = |fps: f64| {
        format!(
            "{:.1} Mbps L1, {:.1} L2, {:.1} L3, {:.1} L4 (UDP payload)",
            t.mbps(fps, Layer::L1),
            t.mbps(fps, Layer::L2),
            t.mbps(fps, Layer::L3),
            t.mbps(fps, Layer::L4)
        )
    };
    let mut out = String::new();
    let _ = match &t.mix {
        Some(m) => writeln!(
            out,
            "Trial: {} ({}, mean frame {:.1} bytes{layout}), {} s, engine {}{}",
            m.name,
            m.composition,
            m.mean_frame_size,
            trim_number(t.duration_s),
            t.engine,
            receiver_words(&t.receiver)
        ),
        None => writeln!(
            out,
            "Trial: {}-byte frames (IP packet {} bytes{layout}), {} s, engine {}{}",
            t.frame_size,
            t.l3_length,
            trim_number(t.duration_s),
            t.engine,
            receiver_words(&t.receiver)
        ),
    };
    if t.policy_drops.is_some() {
        out.push_str("  drop test: every other frame is of the drop class; rates count both classes,\n  frame counts, loss and latency only the legitimate one\n");
    }
    let _ = writeln!(
        out,
        "  intended    {:>15} frames/s  {:>15} frames",
        thousands_f64(t.intended_fps),
        thousands(t.intended_frames)
    );
    let mut offered = format!(
        "  offered     {:>15} frames/s  {}",
        thousands_f64(t.offered_fps),
        layers(t.offered_fps)
    );
    if line_bps > 0 {
        let _ = write!(
            offered,
            " ({:.1} % of line rate)",
            t.offered_share_of_line(line_bps) * 100.0
        );
    }
    out.push_str(&offered);
    out.push('\n');
    let _ = writeln!(out, "  sent (tx)   {:>15} frames", thousands(t.tx_frames));
    let _ = writeln!(out, "  received    {:>15} frames", thousands(t.rx_frames));
    let _ = writeln!(
        out,
        "  forwarded   {:>15} frames/s  {}",
        thousands_f64(t.rx_fps()),
        layers(t.rx_fps())
    );
    let _ = writeln!(
        out,
        "  lost        {:>15} frames  ({} of intended)",
        thousands(t.lost_frames),
        loss_percent(t.loss_ratio)
    );
    if let Some(w) = t.loss_where.filter(|_| t.lost_frames > 0) {
        for (name, n) in w.terms().into_iter().filter(|&(_, n)| n != 0) {
            let _ = writeln!(out, "    {:>25} {name}", signed_thousands(n));
        }
        if w.overcounted > 0 {
            let _ = writeln!(
                out,
                "    (the counters saw {} drops more than test frames were lost: other traffic, or frames counted at two places; not loss)",
                thousands(w.overcounted)
            );
        }
    }
    if let Some(p) = &t.policy_drops {
        let _ = writeln!(
            out,
            "  dropped by policy {:>9} frames: the drop class, sent to be dropped (not loss); {} leaked through the DUT",
            thousands(p.tx_frames),
            thousands(p.leaked_frames)
        );
    }
    for (d, name) in t.directions.iter().zip(["A -> B", "B -> A"]) {
        let _ = writeln!(
            out,
            "  {name}      {:>15} frames sent, {} received, {} lost ({}), {} frames/s forwarded",
            thousands(d.tx_frames),
            thousands(d.rx_frames),
            thousands(d.lost_frames),
            loss_percent(d.loss_ratio),
            thousands_f64(d.rx_fps())
        );
    }
    let _ = writeln!(out, "  reordered   {:>15} frames", thousands(t.reordered));
    let _ = writeln!(out, "  duplicated  {:>15} frames", thousands(t.duplicated));
    if let Some(e) = t.sequence_errors.filter(|e| e.total() > 0) {
        let _ = writeln!(
            out,
            "  seq errors  {:>15} small, {} big (a jump over {} or more numbers), {} reverse",
            thousands(e.small),
            thousands(e.big),
            thousands(e.threshold),
            thousands(e.reverse)
        );
    }
    if t.errored_frames > 0 {
        let _ = writeln!(
            out,
            "  errored     {:>15} frames  damaged on arrival (counted as lost, not received)",
            thousands(t.errored_frames)
        );
    }
    if t.stray_frames > 0 {
        let _ = writeln!(
            out,
            "  stray       {:>15} frames  test frames of no stream of this trial (not counted)",
            thousands(t.stray_frames)
        );
    }
    if let Ok(check) = t.frame_check.parse::<linerate_wire::FrameCheck>() {
        let _ = writeln!(out, "  checked     {}", check.describe());
    }
    if let Some(e) = &t.esp {
        let _ = writeln!(
            out,
            "  ESP         {:>15} encrypted, {} decrypted by linerate; refused: {} ICV, {} replayed, {} too old, {} malformed, {} unknown SPI{}; {} arrived in clear",
            thousands(e.encrypted),
            thousands(e.decrypted),
            thousands(e.icv_failures),
            thousands(e.replays),
            thousands(e.too_old),
            thousands(e.malformed),
            thousands(e.unknown_spi),
            if e.before_install > 0 {
                format!(
                    " ({} on a new SA linerate had not installed yet: the tester's loss)",
                    thousands(e.before_install)
                )
            } else {
                String::new()
            },
            thousands(e.not_esp)
        );
        if e.stray > 0 {
            let _ = writeln!(
                out,
                "              {} stray datagrams at linerate's tunnel end (fragments, other protocols, too short for ESP): not test frames, not counted",
                thousands(e.stray)
            );
        }
        if let Some(wan) = e.wan_frame() {
            let _ = writeln!(
                out,
                "              encrypted frames on the WAN: {wan:.0} bytes each (with FCS)"
            );
        }
    }
    for line in rekeys_lines(t) {
        let _ = writeln!(out, "{line}");
    }
    if let Some(note) = t.recovery.as_ref().and_then(recovery_note) {
        let _ = writeln!(out, "  note        {note}");
    }
    if let Some(line) = tunnels_line(t) {
        let _ = writeln!(out, "  tunnels     {line}");
    }
    if let Some(c) = &t.dut_cpu {
        let _ = writeln!(
            out,
            "  DUT CPU     {:>15} % total, {:.1} % caused by traffic{}",
            format!("{:.1}", c.total_pct),
            c.traffic_pct,
            match c.stolen_pct {
                Some(s) if s >= 0.05 => {
                    format!("; {s:.1} % of its time taken by the hypervisor for other guests")
                }
                _ => String::new(),
            }
        );
    }
    match &t.latency_ns {
        Some(l) => {
            let us = |ns: u64| format!("{:.1}", ns as f64 / 1000.0);
            let _ = writeln!(
                out,
                "  latency µs  min {}  avg {}  max {}  p50 {}  p99 {}  p99.9 {}",
                us(l.min),
                us(l.avg),
                us(l.max),
                us(l.p50),
                us(l.p99),
                us(l.p999)
            );
            if l.every > 1 {
                let _ = writeln!(
                    out,
                    "              measured on every {} frame of each stream ({} frames; --latency-every)",
                    ordinal(l.every),
                    thousands(l.samples)
                );
            }
        }
        None => out.push_str("  latency     none measured: no frame was received\n"),
    }
    // Paused for more than half the duration: the generator was simply at
    // its ceiling, and pause counts say less than what it managed to send.
    let at_ceiling = t.paused_share() > 0.5;
    if at_ceiling {
        let _ = writeln!(
            out,
            "  note        the generator's ceiling was reached: it sent {} frames at about {} frames/s in {:.2} s (a {:.2}-s trial); the frames it could not send count as not sent",
            thousands(t.tx_frames),
            thousands_f64(t.offered_fps),
            t.sending_s(),
            t.duration_s
        );
    }
    if let (Some(paused), Some(n), false) = (t.generator_paused_ns, t.generator_pauses, at_ceiling)
    {
        if n > 0 {
            let _ = writeln!(
                out,
                "  note        the generator was held up {} time(s) and paused {:.2} ms in all rather than send a catch-up burst (worst stall {:.2} ms)",
                thousands(n),
                paused as f64 / 1e6,
                t.generator_max_stall_ns.unwrap_or(0) as f64 / 1e6
            );
            // Every frame still went out, but over the duration and the
            // pauses: the device saw a lower rate than intended.
            let share = t.paused_share();
            if share > 0.0 {
                let _ = writeln!(
                    out,
                    "              {:.2} % of the duration: the device saw about {} frames/s; an RFC 2544 search counts a pass at the rate the device saw once the pauses exceed its resolution (1 % by default), MLRsearch only within its goal width, and a failure stays a failure",
                    share * 100.0,
                    thousands_f64(t.offered_fps)
                );
            }
        }
    }
    // A stall worth a burst of more than 64 frames is worth a note (when
    // it was caught up, not paused).
    if let Some(stall) = t
        .generator_max_stall_ns
        .filter(|_| t.generator_pauses.unwrap_or(0) == 0)
    {
        let burst = stall as f64 * t.intended_fps / 1e9;
        if burst > 64.0 {
            let _ = writeln!(
                out,
                "  note        the generator fell up to {:.2} ms behind schedule and caught up with a burst of about {} frames",
                stall as f64 / 1e6,
                thousands(burst.round() as u64)
            );
        }
    }
    if let Some(p) = t.policy_drops.filter(|p| p.leaked_frames > 0) {
        let _ = writeln!(
            out,
            "WARNING: {} frames of the drop class came through the DUT: its drop policy is not (fully) in effect.",
            thousands(p.leaked_frames)
        );
    }
    if let Some(w) = t.loss_where.filter(|w| w.tx_refused + w.tester_rx > 0) {
        let _ = writeln!(
            out,
            "WARNING: the tester lost {} frames itself ({} refused by its sending port, {} dropped at its receiving port): that loss is the tester's, not the device's, and the trial does not measure the device.",
            thousands(w.tx_refused + w.tester_rx),
            thousands(w.tx_refused),
            thousands(w.tester_rx)
        );
    }
    if t.generator_short {
        let share = if t.intended_fps > 0.0 {
            format!(
                " ({:.1} % of intended)",
                t.offered_fps / t.intended_fps * 100.0
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "WARNING: the tester could not send at the intended rate{share}: frames it did not send count as lost, so part of the loss is the tester's, not the device's."
        );
    }
    out
}

/// `--tunnels`: how the deciding trial of each size spread over the
/// tunnels (fewest..most frames one delivered), and the tunnels that stand
/// out; None without per-tunnel counts.
fn tunnels_footer(report: &Rfc2544Report) -> Option<String> {
    let mut cells = Vec::new();
    let mut notes = Vec::new();
    let mut count = 0;
    for r in &report.results {
        let Some(s) = r
            .throughput_trial()
            .and_then(|t| crate::ipsec::TunnelSpread::of(&t.tunnels))
        else {
            continue;
        };
        count = s.count;
        let size = match &r.mix {
            Some(m) => m.name.clone(),
            None => format!("{} B", r.frame_size),
        };
        cells.push(format!(
            "{size} {}..{}",
            thousands(s.min_rx),
            thousands(s.max_rx)
        ));
        if let Some(o) = s.outliers(10) {
            notes.push(format!("  {size}: {o}\n"));
        }
    }
    if cells.is_empty() {
        return None;
    }
    let mut out = format!(
        "Tunnels: {} peers, the frames spread evenly; frames one tunnel delivered in the deciding trial (fewest..most): {}.\n",
        thousands(count as u64),
        cells.join(", ")
    );
    if notes.is_empty() {
        out.push_str("No tunnel carried nothing or lost clearly more than the others.\n");
    } else {
        out.push_str("Tunnels that stand out in the deciding trial:\n");
        for n in notes {
            out.push_str(&n);
        }
    }
    Some(out)
}

/// The trial's CHILD_SA rekeys: how many, how long they took, and the
/// frames lost and time blocked per rekey.
pub fn rekeys_lines(t: &TrialResult) -> Vec<String> {
    let Some(r) = t.esp.as_ref().and_then(|e| e.rekeys.as_ref()) else {
        return Vec::new();
    };
    let answered = if r.done > 0 {
        format!(
            ", answered in {:.1} ms mean, {:.1} ms max",
            r.mean_ms, r.max_ms
        )
    } else {
        String::new()
    };
    let mut lines = Vec::new();
    if let Some(ike) = r.ike {
        lines.push(format!(
            "  IKE rekeys  {:>15} completed ({} by linerate, {} by the gateway), {} failed; the CHILD_SAs and their keys stay",
            thousands(ike.done + ike.by_gateway),
            thousands(ike.done),
            thousands(ike.by_gateway),
            thousands(ike.failed)
        ));
        if r.completed() + r.failed + r.tunnels_deleted + r.sas_taken == 0 {
            return lines;
        }
    }
    lines.insert(0, format!(
        "  rekeys      {:>15} completed, {:.1} per second ({} by linerate{answered}; {} by the gateway), {} failed; {} new SAs taken by the data path",
        thousands(r.completed()),
        r.completed() as f64 / t.duration_s.max(f64::MIN_POSITIVE),
        thousands(r.done),
        thousands(r.by_gateway),
        thousands(r.failed),
        thousands(r.sas_taken)
    ));
    let tunnels = t.tunnels.len().max(1);
    if let Some((lost, blocked_ms)) = r.per_rekey(
        t.tx_frames.saturating_sub(t.rx_frames),
        t.offered_fps,
        tunnels,
    ) {
        lines.push(format!(
            "              {lost:.1} frames lost per rekey, {blocked_ms:.2} ms blocked per rekey (frames sent and not received / the tunnel's offered rate; all of the trial's loss counted as the rekeys')"
        ));
    }
    if r.tunnels_deleted > 0 {
        lines.push(format!(
            "              {} tunnel(s) deleted by the gateway during the trial",
            thousands(r.tunnels_deleted)
        ));
    }
    lines
}

/// How long a trial waited for the DUT to recover: in ms below 0.1 s, so
/// a wait of one poll does not read as "0.0 s" beside the frames that
/// arrived meanwhile.
pub fn recovery_wait(waited_s: f64) -> String {
    if waited_s < 0.1 {
        format!("{:.0} ms", waited_s * 1000.0)
    } else {
        format!("{waited_s:.1} s")
    }
}

/// What the check before a trial waited for, in words: None when the DUT
/// was quiet at once. When the limit ran out the trial started with the DUT
/// still sending, and says its result may be poisoned.
pub fn recovery_note(r: &crate::Recovery) -> Option<String> {
    if r.limit_reached {
        return Some(format!(
            "the DUT was still forwarding earlier frames when the recovery limit ran out after {:.1} s ({} frames arrived meanwhile): the trial started anyway, its result may be poisoned (its frames queued behind that backlog)",
            r.waited_s,
            thousands(r.frames)
        ));
    }
    r.waited().then(|| {
        format!(
            "waited {} for the DUT to stop forwarding earlier frames before the trial ({} frames arrived meanwhile)",
            recovery_wait(r.waited_s),
            thousands(r.frames)
        )
    })
}

/// How many trials a footer lists, one line each.
const FOOTER_LISTED: usize = 20;

/// The end of a footer that lists trials: its lines (the caller keeps at
/// most [`FOOTER_LISTED`]), then, when more trials than that had one, a note
/// that these are the first and which field of each trial's record holds
/// the rest.
fn push_listed(out: &mut String, lines: &[String], trials: usize, field: &str) {
    for l in lines {
        out.push_str(l);
    }
    if trials > FOOTER_LISTED {
        let _ = writeln!(
            out,
            "  (the first {FOOTER_LISTED} trials; each trial's record has its own: {field})"
        );
    }
}

/// The trials that had to wait for the DUT to stop forwarding earlier
/// frames (the previous trial's backlog) before they started, one line
/// each; None when none had to.
pub fn recovery_footer<'a>(trials: impl IntoIterator<Item = &'a TrialResult>) -> Option<String> {
    let (mut lines, mut waited, mut poisoned) = (Vec::new(), 0usize, 0usize);
    for t in trials {
        let Some(r) = t.recovery.filter(|r| r.waited()) else {
            continue;
        };
        waited += 1;
        poisoned += usize::from(r.limit_reached);
        if lines.len() < FOOTER_LISTED {
            let how = if r.limit_reached {
                "still sending when the limit ran out: the result may be poisoned"
            } else {
                "then quiet"
            };
            lines.push(format!(
                "  {} B at {} frames/s: waited {} ({} frames arrived), {how}\n",
                t.frame_size,
                thousands_f64(t.intended_fps),
                recovery_wait(r.waited_s),
                thousands(r.frames)
            ));
        }
    }
    if waited == 0 {
        return None;
    }
    let mut out = format!(
        "Before {waited} trial(s) the DUT was still forwarding earlier frames (the previous trial's backlog), and linerate waited for it to go quiet{}:\n",
        if poisoned > 0 {
            format!("; {poisoned} started with it still sending")
        } else {
            String::new()
        }
    );
    push_listed(&mut out, &lines, waited, "recovery");
    Some(out)
}

/// The CHILD_SA rekeys of a run's trials (`--rekey`, or the gateway's):
/// per trial that had any, how many completed and the frames lost and time
/// blocked per rekey; None when no trial had a rekey.
pub fn rekeys_footer<'a>(trials: impl IntoIterator<Item = &'a TrialResult>) -> Option<String> {
    let mut lines = Vec::new();
    let (mut completed, mut failed, mut trials_with) = (0u64, 0u64, 0usize);
    for t in trials {
        let Some(r) = t.esp.as_ref().and_then(|e| e.rekeys.as_ref()) else {
            continue;
        };
        trials_with += 1;
        completed += r.completed();
        failed += r.failed;
        let lost = t.tx_frames.saturating_sub(t.rx_frames);
        if let (Some((each, blocked)), true) = (
            r.per_rekey(lost, t.offered_fps, t.tunnels.len().max(1)),
            lines.len() < FOOTER_LISTED,
        ) {
            lines.push(format!(
                "  {} B at {} frames/s: {} rekeys, {each:.1} frames lost and {blocked:.2} ms blocked per rekey\n",
                t.frame_size,
                thousands_f64(t.offered_fps),
                thousands(r.completed())
            ));
        }
    }
    if trials_with == 0 {
        return None;
    }
    let mut out = format!(
        "CHILD_SA rekeys during the trials: {} completed, {} failed. Per trial, frames lost per rekey and the time each rekey blocked its tunnel (lost frames / the tunnel's offered rate; a trial's whole loss is counted as its rekeys'):\n",
        thousands(completed),
        thousands(failed)
    );
    push_listed(&mut out, &lines, trials_with, "esp.rekeys");
    Some(out)
}

/// A trial's per-tunnel counts in one line: how many tunnels, the fewest
/// and most frames one delivered, and the tunnels that stand out (None
/// without `--tunnels`).
pub fn tunnels_line(t: &TrialResult) -> Option<String> {
    let s = crate::ipsec::TunnelSpread::of(&t.tunnels)?;
    let sent_min = t.tunnels.iter().map(|x| x.tx).min().unwrap_or(0);
    let sent_max = t.tunnels.iter().map(|x| x.tx).max().unwrap_or(0);
    let sent = if sent_min == sent_max {
        format!("{} sent to each", thousands(sent_min))
    } else {
        format!("{} to {} sent", thousands(sent_min), thousands(sent_max))
    };
    let mut line = format!(
        "{} tunnels: {} to {} frames received per tunnel ({sent})",
        thousands(s.count as u64),
        thousands(s.min_rx),
        thousands(s.max_rx)
    );
    if let Some(o) = s.outliers(10) {
        line.push_str("; ");
        line.push_str(&o);
    }
    Some(line)
}

/// "Frames lost in all trials: N; 7 dropped at the DUT's input, ..." from
/// the trials' loss breakdowns (kernel counters), for a table's footer.
pub fn loss_where_line<'a>(trials: impl IntoIterator<Item = &'a TrialResult>) -> Option<String> {
    let (lost, w) = crate::LossWhere::sum(trials)?;
    let terms: Vec<String> = w
        .terms()
        .into_iter()
        .filter(|&(_, n)| n != 0)
        .map(|(name, n)| format!("{} {name}", signed_thousands(n)))
        .collect();
    Some(format!(
        "Frames lost in all trials: {}; {} (kernel counters).",
        thousands(lost),
        terms.join(", ")
    ))
}

/// Pretty-printed JSON of any record (a report, a result, a trial).
///
/// # Panics
///
/// Only if `value`'s `Serialize` implementation fails, which the records of
/// [`crate::model`] never do.
pub fn to_json(value: &impl serde::Serialize) -> String {
    serde_json::to_string_pretty(value).expect("measurement records always serialize")
}

/// A number rounded to 3 significant digits, as the LANCOM tables print
/// them: decimals only below 100 (`57.0`, `4.56`), integers with thousands
/// separators from 100 on (`113`, `1,230`, `95,800`, `14,900,000`).
pub fn sig3(x: f64) -> String {
    if !x.is_finite() {
        return "-".to_string();
    }
    if x == 0.0 {
        return "0".to_string();
    }
    let sign = if x < 0.0 { "-" } else { "" };
    let x = x.abs();
    let mut exponent = x.log10().floor() as i32;
    let scale = 10f64.powi(exponent - 2);
    let rounded = (x / scale).round() * scale;
    // 999.7 rounds to 1,000: one digit more before the point.
    if rounded >= 10f64.powi(exponent + 1) {
        exponent += 1;
    }
    let decimals = (2 - exponent).max(0) as usize;
    if decimals > 0 {
        format!("{sign}{rounded:.decimals$}")
    } else {
        format!("{sign}{}", thousands_f64(rounded))
    }
}

/// A signed count with thousands separators: `-1234` -> `-1,234`.
fn signed_thousands(n: i64) -> String {
    let sign = if n < 0 { "-" } else { "" };
    format!("{sign}{}", thousands(n.unsigned_abs()))
}

/// An integer with comma thousands separators: `14880952` -> `14,880,952`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A number rounded to an integer, with thousands separators.
fn thousands_f64(x: f64) -> String {
    if !x.is_finite() {
        return "-".to_string();
    }
    let sign = if x.round() < 0.0 { "-" } else { "" };
    format!("{sign}{}", thousands(x.abs().round() as u64))
}

/// The throughput as a share of line rate: `4.0 %`, `100.0 %`.
fn share_of_line(r: &ThroughputResult) -> String {
    if r.line_rate_fps > 0.0 {
        format!("{:.1} %", r.throughput_fps / r.line_rate_fps * 100.0)
    } else {
        "-".to_string()
    }
}

/// A CPU share for a table cell: `37.5`, `-` when not measured.
pub(crate) fn cpu_cell(pct: Option<f64>) -> String {
    pct.map_or("-".to_string(), |p| format!("{p:.1}"))
}

/// A loss ratio in percent, with enough decimals to show a single frame.
fn loss_percent(ratio: f64) -> String {
    let pct = ratio * 100.0;
    if pct == 0.0 {
        "0 %".to_string()
    } else if pct >= 1.0 {
        format!("{pct:.2} %")
    } else {
        format!("{pct:.4} %")
    }
}

/// A setting without trailing zeros: `2`, `0.5`, `0.1` (at most 6 decimals).
pub(crate) fn trim_number(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// `10 Gbit/s`, `2.5 Gbit/s`, `100 Mbit/s`.
pub fn line_speed(bps: u64) -> String {
    let bps = bps as f64;
    if bps >= 1e9 {
        format!("{} Gbit/s", trim_number(bps / 1e9))
    } else if bps >= 1e6 {
        format!("{} Mbit/s", trim_number(bps / 1e6))
    } else {
        format!("{} bit/s", trim_number(bps))
    }
}

const SHARED_CORE_WARNING: &str =
    "WARNING: tester and DUT shared a CPU core, so they competed for it: \
the device alone may forward more than these figures.";

/// `Tester on CPU 0, DUT on CPUs 1, 2 (note).`
fn placement_sentence(p: &Placement) -> String {
    let cpus = |who: &str, list: &[usize]| match list {
        [] => format!("{who} on any CPU"),
        [one] => format!("{who} on CPU {one}"),
        many => format!(
            "{who} on CPUs {}",
            many.iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    // The lab's own note says it best (it names how the DUT was placed).
    let note = p.note.trim().trim_end_matches('.');
    if !note.is_empty() {
        let mut chars = note.chars();
        let first = chars.next().map(|c| c.to_uppercase().to_string());
        return format!("{}{}.", first.unwrap_or_default(), chars.as_str());
    }
    format!(
        "{}, {}.",
        cpus("Tester", &p.tester_cpus),
        cpus("DUT", &p.dut_cpus)
    )
}

pub mod compare;
pub mod compare_tunnels;

/// ", counted in the kernel" / ", counted through its socket" after an
/// engine's name; nothing for records without a receiver.
pub(crate) fn receiver_words(receiver: &str) -> &'static str {
    match receiver {
        "kernel" => ", counted in the kernel (XDP)",
        "socket" => ", counted through its socket",
        "" => "",
        _ => ", counted by kernel and socket",
    }
}

/// The footer's sentence on how port B counted.
pub(crate) fn receiver_sentence(receiver: &str) -> String {
    match receiver_words(receiver) {
        "" => String::new(),
        words => format!("   {}.", capitalize(words.trim_start_matches(", "))),
    }
}

/// 1st, 2nd, 3rd, 4th, 11th, 32nd, ...
pub(crate) fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().collect::<String>() + c.as_str())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod push_listed_tests {
    use super::{push_listed, FOOTER_LISTED};

    /// The lines come out as given, and the note about the first trials
    /// only when more trials than were listed had a line.
    #[test]
    fn the_listed_tail_notes_the_first_trials_only_when_there_were_more() {
        let lines: Vec<String> = (0..FOOTER_LISTED)
            .map(|i| format!("  line {i}\n"))
            .collect();
        let mut all = String::from("head\n");
        push_listed(&mut all, &lines, FOOTER_LISTED, "recovery");
        assert_eq!(all, format!("head\n{}", lines.concat()));
        let mut more = String::from("head\n");
        push_listed(&mut more, &lines, FOOTER_LISTED + 1, "esp.rekeys");
        assert_eq!(
            more,
            format!(
                "head\n{}  (the first 20 trials; each trial's record has its own: esp.rekeys)\n",
                lines.concat()
            )
        );
    }
}
