//! `linerate report RUN --html FILE`: one self-contained HTML file (inline
//! CSS, inline SVG, no script, nothing fetched) with the tables in the
//! reference layout and the charts readers expect: frames/s and Mbps
//! against frame size with the theoretical line-rate curve (the graph RFC
//! 2544 section 26.1 asks for), loss against offered load, and latency
//! per frame size.

use crate::escape::esc;
use crate::model::StoredRun;
use crate::svg::{self, Chart, Mark, Series, PALETTE};
use linerate_results::report::{line_speed, thousands, trial_summary};
use linerate_results::{LatencySummary, Rfc2544Report, TrialResult};
use linerate_wire::units::{Layer, PREAMBLE_AND_GAP};
use std::fmt::Write as _;

const CSS: &str = "
body { font-family: 'DejaVu Sans', Arial, Helvetica, sans-serif; margin: 2em auto; max-width: 1100px; color: #111; background: #fff; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; }
h2 { font-size: 1.15em; margin-top: 1.6em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.9em; }
th, td { border: 1px solid #bbb; padding: 3px 8px; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
th { background: #eef2f7; }
table.meta th { text-align: left; }
.warn { color: #a40000; font-weight: bold; }
.note { color: #444; font-size: 0.9em; }
svg.chart { display: block; margin: 0.8em 0; border: 1px solid #ddd; }
pre { background: #f6f6f6; padding: 0.6em; overflow-x: auto; }
";

/// The whole report as one HTML document.
pub fn render(run: &StoredRun) -> String {
    let report = run.report();
    let tunnels = tunnels_report(run);
    let title = match &report {
        _ if tunnels.is_some() => "IPsec tunnel setup".to_string(),
        Some(r) if !r.run.description.is_empty() => {
            format!("RFC 2544 throughput, {}", r.run.description)
        }
        Some(_) => "RFC 2544 throughput".to_string(),
        None => format!("linerate {}", run.command),
    };
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t} (run {id})</title><style>{CSS}</style></head><body>\n<h1>{t}</h1>\n<p class=\"note\">linerate run {id}, {dut}</p>\n",
        t = esc(&title),
        id = run.id,
        dut = esc(&run.dut.label()),
    );
    meta_table(&mut h, run);
    match (&report, &tunnels) {
        (_, Some(rep)) => crate::html_tunnels::sections(&mut h, rep),
        (Some(rep), None) => rfc2544_sections(&mut h, run, rep),
        (None, None) => {
            h.push_str("<h2>Trials</h2>\n");
            trials_table(&mut h, run);
            for t in &run.trials {
                let _ = writeln!(
                    h,
                    "<pre>{}</pre>",
                    esc(&trial_summary(&t.result, run.line_speed_bps))
                );
            }
        }
    }
    let _ = write!(
        h,
        "<p class=\"note\">Made by linerate {} from the results database. Rates are L2 (whole frame with FCS) unless marked L1 (preamble and inter-frame gap counted too).</p>\n</body></html>\n",
        esc(&run.linerate_version)
    );
    h
}

/// The report a `linerate tunnels` run stored, when this is one.
fn tunnels_report(run: &StoredRun) -> Option<linerate_results::tunnels::TunnelsReport> {
    (run.command == "tunnels")
        .then(|| serde_json::from_value(run.document.clone()?).ok())
        .flatten()
}

fn meta_table(h: &mut String, run: &StoredRun) {
    let opt = |o: &Option<String>| o.clone().unwrap_or_else(|| "-".into());
    let mut rows: Vec<(&str, String)> = vec![
        ("Device (DUT)", opt(&run.dut.name)),
        ("Firmware", opt(&run.dut.firmware)),
        ("Scenario", run.dut.scenario.clone()),
        ("Started", run.started_at.clone()),
        ("Status", run.status.label().to_string()),
        ("Engine", run.engine.clone()),
        ("Line speed", line_speed(run.line_speed_bps)),
        (
            "Tester machine",
            format!(
                "{}, {} ({} CPUs), Linux {}",
                run.machine.hostname, run.machine.cpu_model, run.machine.cpus, run.machine.kernel
            ),
        ),
        ("linerate", run.linerate_version.clone()),
        ("Command", run.command_line()),
    ];
    if let Some(s) = &run.settings {
        rows.insert(
            7,
            (
                "Settings",
                format!(
                    "trial {} s, resolution {} %, loss allowed {} %, ports {} -> {} ({})",
                    s.trial_duration_s,
                    s.resolution * 100.0,
                    s.allowed_loss_ratio * 100.0,
                    s.run.port_a,
                    s.run.port_b,
                    s.run.setup
                ),
            ),
        );
    }
    h.push_str("<table class=\"meta\">\n");
    for (k, v) in rows {
        let _ = writeln!(h, "<tr><th>{k}</th><td>{}</td></tr>", esc(&v));
    }
    h.push_str("</table>\n");
}

fn rfc2544_sections(h: &mut String, run: &StoredRun, rep: &Rfc2544Report) {
    h.push_str("<h2>Throughput</h2>\n");
    throughput_table(h, rep);
    if !run.status.is_complete() {
        let _ = writeln!(
            h,
            "<p class=\"warn\">This run is {}: frame sizes whose search did not finish are not in the table; their finished trials are listed below.</p>",
            run.status.label()
        );
    }
    if let Some(p) = &rep.run.placement {
        let _ = writeln!(h, "<p class=\"note\">{}</p>", esc(&p.note));
        if p.shared_core {
            h.push_str("<p class=\"warn\">Tester and DUT shared a CPU core: the device alone may forward more than these figures.</p>\n");
        }
    }
    if !rep.results.is_empty() {
        h.push_str(&throughput_chart(rep, false));
        h.push_str(&throughput_chart(rep, true));
    }
    h.push_str("<h2>Loss against offered load</h2>\n");
    h.push_str(&loss_chart(rep));
    if rep
        .results
        .iter()
        .flat_map(|r| &r.trials)
        .any(|t| t.dut_cpu.is_some())
    {
        h.push_str("<h2>DUT CPU load against offered load</h2>\n");
        h.push_str(&dut_cpu_chart(rep));
    }
    h.push_str("<h2>Latency at the throughput rate</h2>\n");
    latency_section(h, rep);
    h.push_str("<h2>Every trial</h2>\n");
    trials_table(h, run);
}

/// The LANCOM techpaper's table: frame sizes as columns; the rows the text
/// report shows (throughput, MLRsearch's goals, spread over rounds, line
/// rate, WAN side, DUT CPU, outer frames), from the same model.
fn throughput_table(h: &mut String, rep: &Rfc2544Report) {
    if rep.results.is_empty() {
        h.push_str("<p>No frame size was measured to the end.</p>\n");
        return;
    }
    let table = linerate_results::report::throughput_grid(rep, false);
    let caption = if rep.results.iter().any(|r| r.mix.is_some()) {
        "Throughput [Mbps] @ frame size [bytes] or IMIX pattern and frame rate [fps]"
    } else {
        "Throughput [Mbps] @ frame size [bytes] and frame rate [fps]"
    };
    let _ = write!(
        h,
        "<table class=\"throughput\"><caption>{caption}</caption>\n<tr><th></th>"
    );
    for c in &table.columns {
        let _ = write!(h, "<th>{}</th>", esc(c));
    }
    h.push_str("<th></th></tr>\n");
    for row in &table.rows {
        let _ = write!(h, "<tr><th>{}</th>", esc(row.label.trim_start()));
        for c in &row.cells {
            let _ = write!(
                h,
                "<td class=\"n\">{}{}</td>",
                esc(&c.text),
                c.mark.symbol()
            );
        }
        let _ = writeln!(h, "<td>{}</td></tr>", esc(&row.unit));
    }
    h.push_str("</table>\n");
    if table.has_mark(linerate_results::report::table::Mark::TesterLimited) {
        let _ = writeln!(
            h,
            "<p class=\"note\">{}</p>",
            linerate_results::report::TESTER_LIMITED_NOTE
        );
    }
}

/// Frames/s (or Mbps L2) against frame size, with the line-rate curve.
fn throughput_chart(rep: &Rfc2544Report, mbps: bool) -> String {
    let line = rep.run.line_speed_bps as f64;
    let value = |size: f64, fps: f64| if mbps { fps * size * 8.0 / 1e6 } else { fps };
    let lo = rep.results.iter().map(|r| r.frame_size).min().unwrap_or(64) as f64;
    let hi = rep
        .results
        .iter()
        .map(|r| r.frame_size)
        .max()
        .unwrap_or(1518) as f64;
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 32.0, hi + 32.0)
    };
    // The theoretical curve: line / ((size + 20 B) x 8) frames/s.
    let curve: Vec<(f64, f64, f64)> = (0..=100)
        .map(|i| {
            let size = lo + (hi - lo) * i as f64 / 100.0;
            let fps = line / ((size + PREAMBLE_AND_GAP as f64) * 8.0);
            (size, value(size, fps), 0.0)
        })
        .collect();
    let measured: Vec<(f64, f64, f64)> = rep
        .results
        .iter()
        .map(|r| {
            let s = r.frame_size as f64;
            (s, value(s, r.throughput_fps), 0.0)
        })
        .collect();
    let curve_max = curve.iter().map(|p| p.1).fold(0.0, f64::max);
    let y_max = throughput_scale(&measured, curve_max);
    let mut line_name = format!(
        "Theoretical line rate ({})",
        line_speed(rep.run.line_speed_bps)
    );
    if y_max.is_some() {
        let _ = write!(
            line_name,
            ", up to {} {}: above the scale",
            svg::short_number(curve_max),
            if mbps { "Mbps" } else { "frames/s" }
        );
    }
    svg::render(&Chart {
        title: if mbps {
            format!(
                "Throughput in {} against frame size",
                linerate_results::report::table::mbps(Layer::L2)
            )
        } else {
            "Throughput in frames/s against frame size".into()
        },
        x_label: "Frame size [bytes]".into(),
        y_label: if mbps {
            linerate_results::report::table::mbps(Layer::L2).into()
        } else {
            "Frames/s".into()
        },
        x_categories: None,
        y_max,
        series: vec![
            Series {
                name: line_name,
                color: "#888888",
                mark: Mark::Line { dashed: true },
                points: curve,
            },
            Series {
                name: format!("Measured throughput ({})", rep.run.engine),
                color: PALETTE[0],
                mark: Mark::LineDots,
                points: measured,
            },
        ],
    })
}

/// The top of a throughput chart's y axis: the measurements' when the
/// line-rate curve (up to `curve_max`) would squeeze them into its
/// bottom quarter; None (everything shows) otherwise, or when nothing
/// passed (then the curve alone gives the scale).
fn throughput_scale(measured: &[(f64, f64, f64)], curve_max: f64) -> Option<f64> {
    let top = measured.iter().map(|p| p.1).fold(0.0, f64::max);
    (top > 0.0 && curve_max > 4.0 * top).then_some(top * 1.15)
}

/// Every search's trials: loss % against the offered load in % of line rate.
fn loss_chart(rep: &Rfc2544Report) -> String {
    per_trial_chart(
        rep,
        "Loss against offered load (every trial)",
        "Loss [% of intended frames]",
        |t| Some(t.loss_ratio * 100.0),
    )
}

/// The Cisco report's view: the DUT's CPU load (total) at each offered
/// load, from every trial that measured it.
fn dut_cpu_chart(rep: &Rfc2544Report) -> String {
    per_trial_chart(
        rep,
        "DUT CPU load against offered load (every trial)",
        "DUT CPU load, total [%]",
        |t| t.dut_cpu.map(|c| c.total_pct),
    )
}

/// A dot per trial, a colour per frame size: `y` of each trial (those it
/// gives a value for) against the load the trial offered, in % of line
/// rate, and a dashed vertical line at the throughput each search found.
/// Never a line through the trials: a search's trials jump up and down
/// in load, and a line through them (in trial order or in load) draws a
/// curve the device never showed.
fn per_trial_chart(
    rep: &Rfc2544Report,
    title: &str,
    y_label: &str,
    y: fn(&TrialResult) -> Option<f64>,
) -> String {
    let mut searches: Vec<(u16, Vec<&TrialResult>)> = rep
        .results
        .iter()
        .map(|r| (r.frame_size, r.trials.iter().collect()))
        .collect();
    if let Some(i) = &rep.interrupted {
        searches.push((i.frame_size, i.trials.iter().collect()));
    }
    let found: Vec<(u16, f64)> = rep
        .results
        .iter()
        .filter(|r| r.throughput_fps > 0.0 && r.line_rate_fps > 0.0)
        .map(|r| (r.frame_size, r.throughput_fps / r.line_rate_fps * 100.0))
        .collect();
    let series = searches
        .into_iter()
        .enumerate()
        .flat_map(|(n, (size, trials))| {
            // A mix's line rate counts its mean frame (in the record).
            let points: Vec<(f64, f64, f64)> = trials
                .iter()
                .filter_map(|t| {
                    y(t).map(|v| {
                        (
                            t.offered_share_of_line(rep.run.line_speed_bps) * 100.0,
                            v,
                            0.0,
                        )
                    })
                })
                .collect();
            let color = PALETTE[n % PALETTE.len()];
            let rule = found
                .iter()
                .find(|f| f.0 == size)
                .map(|&(_, share)| Series {
                    name: format!("{size} B throughput, % of line"),
                    color,
                    mark: Mark::Rule,
                    points: vec![(share, 0.0, 0.0)],
                });
            std::iter::once(Series {
                name: format!("{size} B"),
                color,
                mark: Mark::Dots,
                points,
            })
            .chain(rule)
        })
        .collect();
    svg::render(&Chart {
        title: format!("{title}; dashed: the throughput found"),
        x_label: "Offered load [% of line rate, L1]".into(),
        y_label: y_label.into(),
        x_categories: None,
        y_max: None,
        series,
    })
}

fn latency_section(h: &mut String, rep: &Rfc2544Report) {
    let rows: Vec<(u16, LatencySummary)> = rep
        .results
        .iter()
        .filter_map(|r| {
            let t = r.throughput_trial()?;
            Some((r.frame_size, t.latency_ns?))
        })
        .collect();
    if rows.is_empty() {
        h.push_str("<p>No latency was measured (no frame size passed a trial).</p>\n");
        return;
    }
    let us = |ns: u64| ns as f64 / 1000.0;
    let cats: Vec<String> = rows.iter().map(|(s, _)| format!("{s} B")).collect();
    let pts = |f: &dyn Fn(&LatencySummary) -> (f64, f64)| {
        rows.iter()
            .enumerate()
            .map(|(i, (_, l))| {
                let (a, b) = f(l);
                (i as f64, a, b)
            })
            .collect::<Vec<_>>()
    };
    h.push_str(&svg::render(&Chart {
        title: "Latency per frame size at the throughput rate".into(),
        x_label: "Frame size".into(),
        y_label: "Latency [µs]".into(),
        x_categories: Some(cats),
        y_max: None,
        series: vec![
            Series {
                name: "min .. max".into(),
                color: "#b0c4de",
                mark: Mark::Span { width: 8.0 },
                points: pts(&|l| (us(l.min), us(l.max))),
            },
            Series {
                name: "p50 .. p99".into(),
                color: PALETTE[0],
                mark: Mark::Span { width: 26.0 },
                points: pts(&|l| (us(l.p50), us(l.p99))),
            },
            Series {
                name: "average".into(),
                color: PALETTE[1],
                mark: Mark::Dots,
                points: pts(&|l| (us(l.avg), 0.0)),
            },
        ],
    }));
    h.push_str("<table class=\"latency\"><caption>Latency [µs] at the throughput rate</caption>\n<tr><th>Frame size</th><th>min</th><th>avg</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>\n");
    for (size, l) in &rows {
        let _ = write!(h, "<tr><th>{size}</th>");
        for v in [l.min, l.avg, l.p50, l.p90, l.p99, l.p999, l.max] {
            let _ = write!(h, "<td class=\"n\">{:.1}</td>", us(v));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table>\n");
}

fn trials_table(h: &mut String, run: &StoredRun) {
    h.push_str("<table class=\"trials\"><tr><th>Frame size</th><th>Trial</th><th>Intended [fps]</th><th>Offered [fps]</th><th>% of line (L1)</th><th>Sent</th><th>Received</th><th>Lost</th><th>Loss</th><th>Verdict</th></tr>\n");
    for t in &run.trials {
        let r = &t.result;
        let verdict = match t.passed {
            Some(true) => "pass",
            Some(false) => "fail",
            None => "-",
        };
        let short = if r.generator_short {
            " (tester short)"
        } else {
            ""
        };
        let _ = writeln!(
            h,
            "<tr><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.1} %</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{:.4} %</td><td>{verdict}{short}</td></tr>",
            r.frame_size,
            t.trial_no,
            thousands(r.intended_fps.round() as u64),
            thousands(r.offered_fps.round() as u64),
            r.offered_share_of_line(run.line_speed_bps) * 100.0,
            thousands(r.tx_frames),
            thousands(r.rx_frames),
            thousands(r.lost_frames),
            r.loss_ratio * 100.0,
        );
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_results::report::sig3;

    #[test]
    fn an_imix_trial_at_line_rate_is_100_percent_of_line() {
        let mut run = crate::testdata::run(3, "lab router", "6.1");
        let line = run.line_speed_bps as f64;
        let t = &mut run.trials[0].result;
        t.frame_size = 1518;
        t.mix = Some(linerate_results::MixInfo {
            name: "IMIX 1".into(),
            composition: "7x64 4x570 1x1518 per 12 frames".into(),
            mean_frame_size: 353.83,
            mean_bytes_l1: None,
            mean_bytes_l3: None,
            mean_bytes_l4: None,
        });
        t.offered_fps = line / ((353.83 + 20.0) * 8.0);
        let mut h = String::new();
        trials_table(&mut h, &run);
        let first_row = h.lines().nth(1).expect("a row");
        assert!(
            first_row.contains("<td class=\"n\">100.0 %</td>"),
            "{first_row}"
        );
    }

    #[test]
    fn the_throughput_table_has_every_row_of_the_text_report() {
        let mut run = crate::testdata::run(5, "lab router", "6.1");
        for (_, r) in &mut run.results {
            r.dut_cpu = Some(linerate_results::DutCpu {
                total_pct: 61.5,
                traffic_pct: 58.25,
                stolen_pct: Some(3.0),
            });
        }
        let rep = run.report().expect("an rfc2544 run");
        let grid = linerate_results::report::throughput_grid(&rep, false);
        let text = linerate_results::report::throughput_table(&rep);
        let html = render(&run);
        for label in ["DUT CPU total", "by traffic", "stolen"] {
            assert!(text.contains(label), "{label} in the text: {text}");
            assert!(
                html.contains(&format!("<tr><th>{label}</th>")),
                "{label}: {html}"
            );
        }
        assert!(html.contains("<td class=\"n\">61.5</td>"), "{html}");
        // Row for row, the text's labels, cells and units.
        let table = &html[html.find("<table class=\"throughput\"").unwrap()..];
        let table = &table[..table.find("</table>").unwrap()];
        assert_eq!(
            table.matches("<tr>").count(),
            grid.rows.len() + 1,
            "{table}"
        );
        for row in &grid.rows {
            let cells: String = row
                .cells
                .iter()
                .map(|c| format!("<td class=\"n\">{}{}</td>", c.text, c.mark.symbol()))
                .collect();
            let want = format!(
                "<tr><th>{}</th>{cells}<td>{}</td></tr>",
                row.label.trim_start(),
                row.unit
            );
            assert!(table.contains(&want), "{want} in {table}");
        }
    }

    #[test]
    fn an_mlrsearch_run_has_its_ndr_and_pdr_rows() {
        use linerate_results::methods::{GoalResultRecord, MlrSearchResult, SearchGoalRecord};
        let mut run = crate::testdata::run(4, "lab router", "6.1");
        for (_, r) in &mut run.results {
            let goal = |name: &str, fps: f64, regular: bool| GoalResultRecord {
                goal: SearchGoalRecord {
                    name: name.into(),
                    loss_ratio: 0.0,
                    exceed_ratio: 0.5,
                    final_trial_duration_s: 1.0,
                    duration_sum_s: 1.0,
                    width: 0.01,
                    initial_trial_duration_s: 1.0,
                },
                relevant_lower_bound_fps: Some(fps),
                relevant_upper_bound_fps: Some(fps * 1.01),
                conditional_throughput_fps: Some(fps),
                relevant_lower_bound_mbps_l2: Some(fps / 1000.0),
                conditional_throughput_mbps_l2: Some(fps / 1000.0),
                conditional_throughput_mbps_l1: Some(fps / 900.0),
                regular,
                tester_limited: false,
            };
            r.mlrsearch = Some(MlrSearchResult {
                frame_size: r.frame_size,
                l3_length: r.l3_length,
                mix: None,
                line_rate_fps: r.line_rate_fps,
                max_fps: r.line_rate_fps,
                min_fps: 1000.0,
                goals: vec![goal("NDR", 123_456.0, true), goal("PDR", 234_567.0, false)],
                trial_seconds: 10.0,
                reused_trials: 0,
                trials: Vec::new(),
            });
        }
        let html = render(&run);
        assert!(html.contains("<th>NDR (MLRsearch)</th>"), "{html}");
        assert!(html.contains("<th>PDR (MLRsearch)</th>"), "{html}");
        assert!(html.contains(&format!(">{}<", sig3(123_456.0))), "{html}");
        // An irregular result is marked, as in the text table.
        assert!(html.contains(&format!(">{}~<", sig3(234_567.0))), "{html}");
    }

    #[test]
    fn a_tunnels_run_shows_its_rate_over_time_its_setup_times_and_each_tunnel() {
        let run = crate::testdata::tunnels_run(
            4,
            &[
                (0.0, Some(20.0)),
                (5.0, Some(45.0)),
                (6.0, None),
                (9.0, Some(30.0)),
            ],
        );
        let html = render(&run);
        assert!(
            html.contains("<title>IPsec tunnel setup (run 4)</title>"),
            "{html}"
        );
        // The command's own text report, then two charts.
        assert!(html.contains("Established"), "{html}");
        assert_eq!(html.matches("<svg").count(), 2, "{html}");
        let up = chart(&html, "Tunnels established against time");
        assert!(up.contains("CHILD_SAs installed") && up.contains("Attempts started"));
        let setup = chart(&html, "Setup time");
        assert!(setup.contains("p50 30.0 ms"), "{setup}");
        // The failure, grouped, and every tunnel in a row of its own.
        assert!(
            html.contains("<td>NO_PROPOSAL_CHOSEN</td><td class=\"n\">1</td><td>198.19.64.3</td>"),
            "{html}"
        );
        for peer in ["198.19.64.1", "198.19.64.2", "198.19.64.3", "198.19.64.4"] {
            assert!(html.contains(&format!("<td>{peer}</td>")), "{peer}");
        }
        for fetch in ["src=", "href=", "url(", "@import", "<script"] {
            assert!(!html.contains(fetch), "{fetch} in the report");
        }
        // With --traffic: the time to first packet too, per tunnel and as
        // a histogram.
        let mut run = run;
        let mut rep: linerate_results::tunnels::TunnelsReport =
            serde_json::from_value(run.document.clone().unwrap()).unwrap();
        let tunnels = rep
            .tunnels
            .iter()
            .map(|t| linerate_results::tunnels::TunnelTraffic {
                peer: t.peer,
                ttfp_ms: t.setup_ms.map(|s| s + 7.0),
                sent: 10,
                received: if t.setup_ms.is_some() { 9 } else { 0 },
                errored: 0,
                duplicates: 0,
                gateway_decrypted: None,
            })
            .collect();
        rep.traffic = Some(linerate_results::tunnels::TrafficRecord {
            tunnels,
            ..Default::default()
        });
        run.document = Some(serde_json::to_value(&rep).unwrap());
        let html = render(&run);
        assert_eq!(html.matches("<svg").count(), 3, "{html}");
        assert!(chart(&html, "Time to first packet").contains("Tunnels per"));
        assert!(
            html.contains("<td class=\"n\">37.0</td><td class=\"n\">10</td><td class=\"n\">9</td>"),
            "{html}"
        );
        // None up: the text and the failures, no chart of nothing.
        let none = crate::testdata::tunnels_run(5, &[(0.0, None)]);
        assert_eq!(render(&none).matches("<svg").count(), 0);
    }

    #[test]
    fn report_has_tables_and_charts_and_fetches_nothing() {
        let run = crate::testdata::run(3, "lab router", "6.1");
        let html = render(&run);
        assert!(html.starts_with("<!DOCTYPE html>"));
        assert_eq!(html.matches("<svg").count(), 4, "fps, Mbps, loss, latency");
        // The table cells as the text table prints them.
        let r64 = &run.results[0].1;
        assert!(html.contains(&sig3(r64.throughput_fps)), "{html}");
        assert!(html.contains("Theoretical line rate (1 Gbit/s)"));
        for fetch in ["src=", "href=", "url(", "@import", "<script"] {
            assert!(!html.contains(fetch), "{fetch} in the report");
        }
    }

    #[test]
    fn latency_is_taken_at_the_throughput_not_at_a_paused_pass_above_it() {
        let mut r = crate::testdata::run(5, "lab router", "6.1").results[0]
            .1
            .clone();
        let at = crate::testdata::trial(64, r.throughput_fps, 0.0);
        // No loss 5 % above, but the generator paused: the search failed it.
        let mut above = crate::testdata::trial(64, r.throughput_fps * 1.05, 0.0);
        above.generator_paused_ns = Some(50_000_000);
        r.trials = vec![above, at];
        let t = r.throughput_trial().expect("the trial at the throughput");
        assert_eq!(t.intended_fps, r.throughput_fps);
        r.throughput_fps = 0.0;
        assert!(r.throughput_trial().is_none(), "nothing passed");
    }

    /// The `<svg>` whose title starts with `title`.
    fn chart<'h>(html: &'h str, title: &str) -> &'h str {
        let at = html
            .find(&format!("aria-label=\"{title}"))
            .unwrap_or_else(|| panic!("no chart {title}: {html}"));
        let start = html[..at].rfind("<svg").unwrap();
        let end = at + html[at..].find("</svg>").unwrap();
        &html[start..end]
    }

    /// The y axis's tick values (right-aligned labels), read back.
    fn y_ticks(svg: &str) -> Vec<f64> {
        svg.split(r#"text-anchor="end" font-size="11">"#)
            .skip(1)
            .map(|rest| {
                let label = &rest[..rest.find('<').unwrap()];
                let (n, scale) = match label.chars().last() {
                    Some('k') => (&label[..label.len() - 1], 1e3),
                    Some('M') => (&label[..label.len() - 1], 1e6),
                    Some('G') => (&label[..label.len() - 1], 1e9),
                    _ => (label, 1.0),
                };
                n.parse::<f64>().unwrap() * scale
            })
            .collect()
    }

    #[test]
    fn trials_are_dots_and_each_search_s_throughput_a_rule_never_a_line() {
        let mut run = crate::testdata::run(6, "lab router", "6.1");
        for (i, t) in run.trials.iter_mut().enumerate() {
            t.result.dut_cpu = Some(linerate_results::DutCpu {
                total_pct: 10.0 + i as f64,
                traffic_pct: 5.0,
                stolen_pct: None,
            });
        }
        let html = render(&run);
        for title in [
            "Loss against offered load",
            "DUT CPU load against offered load",
        ] {
            let svg = chart(&html, title);
            assert!(
                !svg.contains("<polyline"),
                "{title}: a line through trials: {svg}"
            );
            assert_eq!(svg.matches("<circle").count(), run.trials.len(), "{svg}");
            // One dashed rule per size, at its throughput's share of line
            // (40 % in the test run), named in its title.
            let rules = svg.matches(r#"stroke-dasharray="6 4"><title>"#).count();
            assert_eq!(rules, 2, "{svg}");
            for size in [64, 1518] {
                assert!(
                    svg.contains(&format!(
                        "<title>{size} B throughput, % of line: 40</title>"
                    )),
                    "{svg}"
                );
            }
        }
    }

    #[test]
    fn the_throughput_charts_scale_shows_the_measurements() {
        // Measured at 0.1 % of a 1 Gbit/s line (1,488 frames/s at 64 B):
        // a scale to the line rate (1.49 M) would draw them on the axis.
        let mut run = crate::testdata::run(7, "lab router", "6.1");
        for (_, r) in &mut run.results {
            r.throughput_fps = r.line_rate_fps / 1000.0;
        }
        let top_measured = run.results[0].1.throughput_fps;
        let html = render(&run);
        let fps = chart(&html, "Throughput in frames/s");
        let top = y_ticks(fps).into_iter().fold(0.0, f64::max);
        assert!(
            top >= top_measured * 0.9 && top <= top_measured * 2.0,
            "axis top {top} for measurements up to {top_measured}: {fps}"
        );
        assert!(fps.contains("above the scale"), "{fps}");
        // The Mbps chart too (1518 B: 0.99 Mbps against a 987 Mbps line).
        let mbps = chart(&html, "Throughput in Mbps");
        let top = y_ticks(mbps).into_iter().fold(0.0, f64::max);
        assert!(top > 0.5 && top <= 2.0, "{top}: {mbps}");
        // Near line rate the whole curve shows, as before.
        let run = crate::testdata::run(8, "lab router", "6.1");
        let html = render(&run);
        let fps = chart(&html, "Throughput in frames/s");
        let line_64 = run.results[0].1.line_rate_fps;
        let top = y_ticks(fps).into_iter().fold(0.0, f64::max);
        assert!(top >= line_64 * 0.9, "{top}: {fps}");
        assert!(!fps.contains("above the scale"), "{fps}");
    }

    #[test]
    fn dut_cpu_gets_a_chart_when_trials_measured_it() {
        let mut run = crate::testdata::run(4, "lab router", "6.1");
        for (i, t) in run.trials.iter_mut().enumerate() {
            t.result.dut_cpu = Some(linerate_results::DutCpu {
                total_pct: 10.0 * i as f64,
                traffic_pct: 5.0 * i as f64,
                stolen_pct: None,
            });
        }
        let html = render(&run);
        assert_eq!(
            html.matches("<svg").count(),
            5,
            "fps, Mbps, loss, DUT CPU, latency"
        );
        assert!(html.contains("DUT CPU load against offered load"));
    }
}
