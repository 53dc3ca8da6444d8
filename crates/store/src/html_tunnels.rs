//! The HTML report of a `linerate tunnels` run: the text report as the
//! command printed it, then what a table cannot show well: tunnels up
//! against time (the setup rate, and where it slowed or stalled), the
//! setup-time histogram (and with `--traffic` the time-to-first-packet
//! one), the failures and the tunnels one by one.

use crate::escape::esc;
use crate::svg::{self, Chart, Mark, Series, PALETTE};
use linerate_results::report::{sig3, thousands};
use linerate_results::tunnels::{tunnels_table, SetupTimes, TunnelOutcome, TunnelsReport};
use std::fmt::Write as _;

/// Tunnels listed one by one at most; the rest are counted.
const LISTED: usize = 500;

/// The sections of a tunnels run's report.
pub(crate) fn sections(h: &mut String, rep: &TunnelsReport) {
    h.push_str("<h2>Tunnel setup</h2>\n");
    let _ = writeln!(h, "<pre>{}</pre>", esc(&tunnels_table(rep)));
    if rep.established > 0 {
        h.push_str(&up_against_time(rep));
        let setup: Vec<f64> = rep.tunnels.iter().filter_map(|t| t.setup_ms).collect();
        h.push_str(&histogram(
            "Setup time (IKE_SA_INIT sent to CHILD_SA installed)",
            &setup,
            rep.setup_ms.as_ref(),
        ));
    }
    let ttfp: Vec<f64> = rep
        .traffic
        .iter()
        .flat_map(|t| &t.tunnels)
        .filter_map(|t| t.ttfp_ms)
        .collect();
    if !ttfp.is_empty() {
        h.push_str(&histogram(
            "Time to first packet (IKE_SA_INIT sent to the first test frame at port A)",
            &ttfp,
            rep.ttfp_ms.as_ref(),
        ));
    }
    if !rep.failures.is_empty() {
        h.push_str("<h2>Failures</h2>\n<table>\n<tr><th>Reason</th><th>Tunnels</th><th>First peer</th><th>Its error</th></tr>\n");
        for f in &rep.failures {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
                esc(&f.reason),
                thousands(f.count),
                f.first_peer,
                esc(&f.example)
            );
        }
        h.push_str("</table>\n");
    }
    tunnel_list(h, rep);
}

/// When a tunnel's CHILD_SA was installed, in s after the first attempt.
fn up_at_s(t: &TunnelOutcome, first_ms: f64) -> Option<f64> {
    t.setup_ms.map(|s| (t.started_ms + s - first_ms) / 1000.0)
}

/// Cumulative attempts started and tunnels established against time: the
/// slope of the second is the setup rate.
fn up_against_time(rep: &TunnelsReport) -> String {
    let first = rep
        .tunnels
        .iter()
        .map(|t| t.started_ms)
        .fold(f64::INFINITY, f64::min);
    let cumulative = |mut times: Vec<f64>| -> Vec<(f64, f64, f64)> {
        times.sort_by(f64::total_cmp);
        let mut points = vec![(0.0, 0.0, 0.0)];
        points.extend(
            times
                .iter()
                .enumerate()
                .map(|(i, &t)| (t, (i + 1) as f64, 0.0)),
        );
        points
    };
    let started = cumulative(
        rep.tunnels
            .iter()
            .map(|t| (t.started_ms - first) / 1000.0)
            .collect(),
    );
    let up = cumulative(
        rep.tunnels
            .iter()
            .filter_map(|t| up_at_s(t, first))
            .collect(),
    );
    let rate = rep
        .tunnels_per_s
        .map(|r| format!(" ({} tunnels/s)", sig3(r)))
        .unwrap_or_default();
    svg::render(&Chart {
        title: format!("Tunnels established against time{rate}"),
        x_label: "Seconds after the first IKE_SA_INIT".into(),
        y_label: "Tunnels".into(),
        x_categories: None,
        y_max: None,
        series: vec![
            Series {
                name: "Attempts started".into(),
                color: "#888888",
                mark: Mark::Line { dashed: true },
                points: started,
            },
            Series {
                name: "CHILD_SAs installed".into(),
                color: PALETTE[0],
                mark: Mark::Line { dashed: false },
                points: up,
            },
        ],
    })
}

/// `times` (ms) in (at most) 30 equal bins, with the p50 and p99 of
/// their distribution marked.
fn histogram(title: &str, times: &[f64], percentiles: Option<&SetupTimes>) -> String {
    let (lo, hi) = times
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &t| {
            (lo.min(t), hi.max(t))
        });
    let bins = times.len().clamp(1, 30);
    let width = ((hi - lo) / bins as f64).max(f64::EPSILON);
    let mut counts = vec![0u64; bins];
    for t in times {
        let i = (((t - lo) / width) as usize).min(bins - 1);
        counts[i] += 1;
    }
    let bars: Vec<(f64, f64, f64)> = counts
        .iter()
        .enumerate()
        .map(|(i, &n)| (lo + (i as f64 + 0.5) * width, 0.0, n as f64))
        .collect();
    let px = (600.0 / bins as f64 * 0.8).clamp(2.0, 40.0);
    let mut series = vec![Series {
        name: format!("Tunnels per {} ms", sig3(if hi > lo { width } else { 0.0 })),
        color: PALETTE[0],
        mark: Mark::Span { width: px },
        points: bars,
    }];
    if let Some(s) = percentiles {
        for (name, at, color) in [("p50", s.p50, PALETTE[2]), ("p99", s.p99, PALETTE[1])] {
            series.push(Series {
                name: format!("{name} {} ms", sig3(at)),
                color,
                mark: Mark::Rule,
                points: vec![(at, 0.0, 0.0)],
            });
        }
    }
    svg::render(&Chart {
        title: title.into(),
        x_label: "Milliseconds".into(),
        y_label: "Tunnels".into(),
        x_categories: None,
        y_max: None,
        series,
    })
}

/// The tunnels one by one: peer, its network, when it started, its setup
/// time or why it failed.
fn tunnel_list(h: &mut String, rep: &TunnelsReport) {
    let traffic = rep.traffic.as_ref().map(|t| &t.tunnels);
    let _ = writeln!(
        h,
        "<h2>Tunnels</h2>\n<table>\n<tr><th>#</th><th>Peer</th><th>Its network</th><th>Started [ms]</th><th>Setup [ms]</th>{}<th>Failed</th></tr>",
        if traffic.is_some() {
            "<th>First packet [ms]</th><th>Frames sent</th><th>Received</th>"
        } else {
            ""
        }
    );
    for (i, t) in rep.tunnels.iter().take(LISTED).enumerate() {
        let frames = traffic.map(|all| match all.iter().find(|f| f.peer == t.peer) {
            Some(f) => format!(
                "<td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>",
                f.ttfp_ms.map(sig3).unwrap_or_else(|| "-".into()),
                thousands(f.sent),
                thousands(f.received)
            ),
            None => "<td>-</td><td>-</td><td>-</td>".to_string(),
        });
        let _ = writeln!(
            h,
            "<tr><td class=\"n\">{}</td><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>{}<td>{}</td></tr>",
            i + 1,
            t.peer,
            esc(&t.remote_net),
            sig3(t.started_ms),
            t.setup_ms.map(sig3).unwrap_or_else(|| "-".into()),
            frames.unwrap_or_default(),
            esc(t.error.as_deref().unwrap_or(""))
        );
    }
    h.push_str("</table>\n");
    if rep.tunnels.len() > LISTED {
        let _ = writeln!(
            h,
            "<p class=\"note\">The first {} of {} tunnels are listed; the stored run holds them all ('linerate export RUN --json').</p>",
            thousands(LISTED as u64),
            thousands(rep.tunnels.len() as u64)
        );
    }
}
