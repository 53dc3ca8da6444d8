//! RFC 2544 throughput against the number of tunnels (`--tunnels
//! 1,10,100`): one run per count through the same gateway, side by side,
//! so the LANCOM techpaper's sentence "with up to 1,000 tunnels the frame
//! rate remained almost constant" becomes a table: per frame size, the
//! frame rate with each count, its change against the first count, and
//! how evenly the tunnels shared the throughput trial.

use super::{sig3, thousands, trim_number, GAP};
use crate::ipsec::TunnelSpread;
use crate::throughput::{Rfc2544Report, ThroughputResult};
use std::fmt::Write as _;

/// `runs`: (tunnel count, its report), in the order run.
pub fn by_tunnels(runs: &[(usize, Rfc2544Report)]) -> String {
    let mut out = String::new();
    let Some((first_count, first)) = runs.first() else {
        return "(nothing to compare)\n".to_string();
    };
    let counts: Vec<String> = runs.iter().map(|(n, _)| thousands(*n as u64)).collect();
    let what = first
        .run
        .ipsec
        .as_ref()
        .map(|i| format!("IPsec {} UDP {}", i.esp_label, i.direction.noun()))
        .unwrap_or_else(|| "RFC 2544 throughput".to_string());
    let _ = writeln!(
        out,
        "Frame rate with {} tunnel{}   {what}, loss allowed {} %, trial {} s",
        counts.join(" / "),
        if runs.len() == 1 && *first_count == 1 {
            ""
        } else {
            "s"
        },
        trim_number(first.allowed_loss_ratio * 100.0),
        trim_number(first.trial_duration_s),
    );
    let _ = writeln!(
        out,
        "Throughput [frames/s] per frame size [bytes], its change against {} tunnel{}, and the frames one tunnel delivered in the deciding trial (fewest..most)",
        thousands(*first_count as u64),
        if *first_count == 1 { "" } else { "s" }
    );
    // Frame sizes in the order first seen.
    let mut sizes: Vec<(u16, u16)> = Vec::new();
    for (_, r) in runs {
        for t in &r.results {
            if !sizes.iter().any(|(f, _)| *f == t.frame_size) {
                sizes.push((t.frame_size, t.l3_length));
            }
        }
    }
    fn find(r: &Rfc2544Report, frame: u16) -> Option<&ThroughputResult> {
        r.results.iter().find(|t| t.frame_size == frame)
    }
    let mut header = vec!["Frame".to_string(), "IP len".to_string()];
    let mut group = Vec::new();
    for (i, (n, _)) in runs.iter().enumerate() {
        let mut cols = vec!["Frames/s".to_string()];
        if i > 0 {
            cols.push("change".to_string());
        }
        if *n > 1 {
            cols.push("per tunnel".to_string());
        }
        group.push(cols.len());
        header.extend(cols);
    }
    let mut notes: Vec<String> = Vec::new();
    let body: Vec<Vec<String>> = sizes
        .iter()
        .map(|&(frame, l3)| {
            let mut row = vec![frame.to_string(), l3.to_string()];
            let base = find(first, frame).map(|t| t.throughput_fps);
            for (i, (n, r)) in runs.iter().enumerate() {
                let t = find(r, frame);
                let mark = if t.is_some_and(|t| t.tester_limited) {
                    "*"
                } else {
                    ""
                };
                row.push(t.map_or("-".into(), |t| format!("{}{mark}", sig3(t.throughput_fps))));
                if i > 0 {
                    row.push(match (t, base) {
                        (Some(t), Some(b)) if b > 0.0 => {
                            format!("{:+.1} %", (t.throughput_fps / b - 1.0) * 100.0)
                        }
                        _ => "-".into(),
                    });
                }
                if *n > 1 {
                    let spread = t
                        .and_then(ThroughputResult::throughput_trial)
                        .and_then(|d| TunnelSpread::of(&d.tunnels));
                    row.push(match &spread {
                        Some(s) => format!("{}..{}", thousands(s.min_rx), thousands(s.max_rx)),
                        None => "-".into(),
                    });
                    if let Some(o) = spread.as_ref().and_then(|s| s.outliers(10)) {
                        notes.push(format!("{} tunnels, {frame} B: {o}", thousands(*n as u64)));
                    }
                }
            }
            row
        })
        .collect();
    let columns = header.len();
    let mut widths: Vec<usize> = (0..columns)
        .map(|c| {
            body.iter()
                .map(|row| row[c].chars().count())
                .chain(std::iter::once(header[c].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    // Each count's name spans its columns.
    let names: Vec<String> = runs
        .iter()
        .map(|(n, _)| {
            format!(
                "{} tunnel{}",
                thousands(*n as u64),
                if *n == 1 { "" } else { "s" }
            )
        })
        .collect();
    let starts: Vec<usize> = group
        .iter()
        .scan(2, |at, g| {
            let s = *at;
            *at += g;
            Some(s)
        })
        .collect();
    for (i, n) in names.iter().enumerate() {
        let cols = starts[i]..starts[i] + group[i];
        let span: usize = widths[cols.clone()].iter().sum::<usize>() + GAP.len() * (group[i] - 1);
        if n.chars().count() > span {
            widths[cols.end - 1] += n.chars().count() - span;
        }
    }
    let lead = widths[0] + GAP.len() + widths[1];
    let mut line = format!("{:lead$}", "");
    for (i, n) in names.iter().enumerate() {
        let cols = starts[i]..starts[i] + group[i];
        let span: usize = widths[cols].iter().sum::<usize>() + GAP.len() * (group[i] - 1);
        let _ = write!(line, "{GAP}{GAP}{n:<span$}");
    }
    out.push_str(line.trim_end());
    out.push('\n');
    let render = |row: &[String]| {
        let mut s = String::new();
        for (c, cell) in row.iter().enumerate() {
            if c > 0 {
                s.push_str(GAP);
                if starts.contains(&c) {
                    s.push_str(GAP);
                }
            }
            let pad = widths[c] - cell.chars().count();
            let _ = write!(s, "{:pad$}{cell}", "");
        }
        s.trim_end().to_string()
    };
    out.push_str(&render(&header));
    out.push('\n');
    for row in &body {
        out.push_str(&render(row));
        out.push('\n');
    }
    if runs
        .iter()
        .any(|(_, r)| r.results.iter().any(|t| t.tester_limited))
    {
        out.push_str("(*) tester-limited: the device may forward more.\n");
    }
    if notes.is_empty() {
        if runs.iter().any(|(n, _)| *n > 1) {
            out.push_str(
                "No tunnel carried nothing or lost clearly more than the others in the deciding trials.\n",
            );
        }
    } else {
        out.push_str("Tunnels that stand out in the deciding trial:\n");
        for n in notes {
            let _ = writeln!(out, "  {n}");
        }
    }
    for ((n, r), name) in runs.iter().zip(&names) {
        if let Some(t) = r.run.ipsec.as_ref().and_then(|i| i.tunnels.as_ref()) {
            let _ = writeln!(
                out,
                "  {name}: peers {} .. {}, a /{} of {} each, up in {} ms",
                t.first_peer,
                t.last_peer,
                t.slice_prefix,
                t.remote_net,
                thousands(t.setup_ms)
            );
        } else if *n == 1 {
            if let Some(i) = &r.run.ipsec {
                let _ = writeln!(out, "  {name}: peer {}, {}", i.peer, i.local_net);
            }
        }
        if r.interrupted.is_some() {
            let _ = writeln!(out, "  {name}: interrupted, not every size measured");
        }
    }
    out
}
