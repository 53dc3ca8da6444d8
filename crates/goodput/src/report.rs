//! The tables, laid out as the LANCOM techpaper's Tables 12 and 13 ("iPerf /
//! HTTP single DUT routing TCP": throughput in Mbps for 5 parallel
//! transmissions, one column per direction) and, for several runs over
//! different paths, Tables 14 and 15 (one column per scenario). Figures are
//! rounded to 3 significant digits as the paper prints them.

use crate::record::{HttpRecord, PathInfo, TcpRecord};
use crate::Direction;
use linerate_results::report::{line_speed, sig3};

fn mbps(bps: f64) -> String {
    sig3(bps / 1e6)
}

/// Lays out rows of cells in columns: the first left-aligned, the rest
/// right-aligned, two spaces apart.
fn columns(rows: &[Vec<String>]) -> String {
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..n)
        .map(|i| {
            rows.iter()
                .filter_map(|r| r.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let pad = widths[i] - cell.chars().count();
            if i == 0 {
                line.push_str(cell);
                line.push_str(&" ".repeat(pad));
            } else {
                line.push_str("  ");
                line.push_str(&" ".repeat(pad));
                line.push_str(cell);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn window_text(bytes: Option<u64>) -> String {
    match bytes {
        Some(b) if b % (1024 * 1024) == 0 => format!("window {} MiB", b / (1024 * 1024)),
        Some(b) if b % 1024 == 0 => format!("window {} KiB", b / 1024),
        Some(b) => format!("window {b} bytes"),
        None => "window: kernel autotuning".to_string(),
    }
}

fn link_usage_note(path: &PathInfo, max_usage: f64) -> String {
    let hdr = path.family.ip_header();
    let over = if max_usage > 100.0 {
        " Above 100 %: the path is faster than that line speed (a veth's reported speed is nominal); set --line-speed to the real one."
    } else {
        ""
    };
    format!(
        "Link usage as the LanTraffic V2 datasheet (5.1) computes it: goodput x (MTU + 18) / (MTU - {hdr} - 20) \
= x {:.4} at MTU {}, over the line speed {} ({}).{over}",
        crate::record::lantraffic_coefficient(path.mtu, path.family),
        path.mtu,
        line_speed(path.line_bps),
        path.line_speed_source
    )
}

/// `linerate tcp`: Table 12 layout, then the streams and the link usage.
pub fn tcp_table(r: &TcpRecord) -> String {
    let mut out = format!(
        "TCP through the DUT, laid out as LANCOM Table 12 (iPerf single DUT routing TCP)\n\
Goodput [Mbps, L4 payload] for {} parallel transmissions; {}, {} s, {}, port {}\n\
Client (side A) {}, server (side B) {}; download = B to A, upload = A to B\n\n",
        r.streams,
        window_text(r.window_bytes),
        r.duration_s,
        r.path.family.name(),
        r.port,
        r.path.client_ip,
        r.path.server_ip
    );
    let mut head = vec!["Device / path".to_string()];
    let mut row = vec![r.path.label.clone()];
    for run in &r.runs {
        head.push(direction_title(run.direction).into());
        row.push(mbps(run.goodput_bps));
    }
    out.push_str(&columns(&[head, row]));

    out.push('\n');
    let mut rows = vec![[
        "Direction",
        "Stream",
        "Goodput [Mbps]",
        "Bytes",
        "Retransmits",
        "RTT [us]",
        "MSS",
    ]
    .map(String::from)
    .to_vec()];
    for run in &r.runs {
        for s in &run.streams {
            rows.push(vec![
                run.direction.name().into(),
                s.stream.to_string(),
                mbps(s.goodput_bps),
                linerate_results::report::thousands(s.bytes),
                s.retransmits.to_string(),
                s.rtt_us.to_string(),
                s.snd_mss.to_string(),
            ]);
        }
        rows.push(vec![
            run.direction.name().into(),
            "total".into(),
            mbps(run.goodput_bps),
            linerate_results::report::thousands(run.bytes),
            run.retransmits.to_string(),
            String::new(),
            String::new(),
        ]);
    }
    out.push_str(&columns(&rows));
    out.push('\n');
    for run in &r.runs {
        out.push_str(&format!(
            "{}: {} Mbps goodput over {:.2} s = {} Mbps of Ethernet frames (L2, no preamble/IFG), link usage {:.1} %{}\n",
            direction_title(run.direction),
            mbps(run.goodput_bps),
            run.seconds,
            mbps(run.l2_bps),
            run.link_usage_percent,
            if run.interrupted { " (interrupted: shorter window)" } else { "" }
        ));
    }
    let max = r
        .runs
        .iter()
        .map(|x| x.link_usage_percent)
        .fold(0.0, f64::max);
    out.push_str(&link_usage_note(&r.path, max));
    out.push_str(
        "\nRetransmits: TCP_INFO tcpi_total_retrans of each sending socket over its connection.\n",
    );
    out
}

/// `linerate http`: Table 13 layout, then requests/s and link usage.
pub fn http_table(r: &HttpRecord) -> String {
    let sizes: Vec<String> = r.object_sizes.iter().map(|&s| size_text(s)).collect();
    let mut out = format!(
        "HTTP through the DUT, laid out as LANCOM Table 13 (HTTP single DUT routing HTTP TCP)\n\
Goodput [Mbps, L7 body bytes] for {} parallel clients; objects {}; {} s, {}, server {} on port {}\n\
Clients (side A) {}, server (side B) {}; download = GET (B to A), upload = POST (A to B)\n\n",
        r.clients,
        sizes.join(", "),
        r.duration_s,
        r.path.family.name(),
        r.server,
        r.port,
        r.path.client_ip,
        r.path.server_ip
    );
    let mut head = vec!["Device / path".to_string()];
    let mut row = vec![r.path.label.clone()];
    for run in &r.runs {
        head.push(direction_title(run.direction).into());
        row.push(mbps(run.goodput_bps));
    }
    out.push_str(&columns(&[head, row]));
    out.push('\n');
    let mut rows = vec![[
        "Direction",
        "Goodput [Mbps]",
        "Requests",
        "Requests/s",
        "Errors",
        "Link usage",
    ]
    .map(String::from)
    .to_vec()];
    for run in &r.runs {
        rows.push(vec![
            run.direction.name().into(),
            mbps(run.goodput_bps),
            run.requests.to_string(),
            sig3(run.requests_per_s),
            run.errors.to_string(),
            format!("{:.1} %", run.link_usage_percent),
        ]);
    }
    out.push_str(&columns(&rows));
    out.push('\n');
    let max = r
        .runs
        .iter()
        .map(|x| x.link_usage_percent)
        .fold(0.0, f64::max);
    out.push_str(&link_usage_note(&r.path, max));
    out.push('\n');
    if r.runs.iter().any(|x| x.interrupted) {
        out.push_str("Interrupted: the window is shorter than asked.\n");
    }
    out
}

fn direction_title(d: Direction) -> &'static str {
    match d {
        Direction::Download => "Download",
        Direction::Upload => "Upload",
    }
}

/// `1048576` -> `1M`, `1500` -> `1500`.
pub fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{}M", bytes >> 20)
    } else if bytes >= 1 << 10 && bytes % (1 << 10) == 0 {
        format!("{}k", bytes >> 10)
    } else {
        bytes.to_string()
    }
}

/// Tables 14 and 15: several runs (one per path or scenario: IPv4, PPP,
/// IPsec ...), one column each, one row per direction. `runs` holds each
/// run's label and its (direction, goodput) pairs.
pub fn by_scenario(title: &str, runs: &[(String, Vec<(Direction, f64)>)]) -> String {
    let mut head = vec!["Direction".to_string()];
    head.extend(runs.iter().map(|(label, _)| label.clone()));
    let mut rows = vec![head];
    for d in [Direction::Download, Direction::Upload] {
        if !runs.iter().any(|(_, r)| r.iter().any(|(x, _)| *x == d)) {
            continue;
        }
        let mut row = vec![direction_title(d).to_string()];
        for (_, r) in runs {
            let cell = r.iter().find(|(x, _)| *x == d).map(|(_, bps)| mbps(*bps));
            row.push(cell.unwrap_or_else(|| "-".into()));
        }
        rows.push(row);
    }
    format!("{title}\n\n{}", columns(&rows))
}

/// Table 14 from `linerate tcp` records (one per scenario).
pub fn tcp_by_scenario(records: &[TcpRecord]) -> String {
    let streams: Vec<String> = records.iter().map(|r| r.streams.to_string()).collect();
    let title = format!(
        "TCP through the DUT, laid out as LANCOM Table 14 (iPerf DUT2DUT WAN routing TCP)\n\
Goodput [Mbps, L4 payload] for {} parallel transmissions",
        dedup(streams)
    );
    let runs: Vec<(String, Vec<(Direction, f64)>)> = records
        .iter()
        .map(|r| {
            let label = format!("{} {}", r.path.label, r.path.family.name());
            (
                label,
                r.runs
                    .iter()
                    .map(|x| (x.direction, x.goodput_bps))
                    .collect(),
            )
        })
        .collect();
    by_scenario(&title, &runs)
}

/// Table 15 from `linerate http` records (one per scenario).
pub fn http_by_scenario(records: &[HttpRecord]) -> String {
    let clients: Vec<String> = records.iter().map(|r| r.clients.to_string()).collect();
    let title = format!(
        "HTTP through the DUT, laid out as LANCOM Table 15 (HTTP DUT2DUT WAN routing TCP)\n\
Goodput [Mbps, L7 body bytes] for {} parallel clients",
        dedup(clients)
    );
    let runs: Vec<(String, Vec<(Direction, f64)>)> = records
        .iter()
        .map(|r| {
            let label = format!("{} {}", r.path.label, r.path.family.name());
            (
                label,
                r.runs
                    .iter()
                    .map(|x| (x.direction, x.goodput_bps))
                    .collect(),
            )
        })
        .collect();
    by_scenario(&title, &runs)
}

/// "5" when all runs agree, else "5/16".
fn dedup(mut values: Vec<String>) -> String {
    values.dedup();
    values.join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Family, StreamRecord, TcpRun};

    fn path() -> PathInfo {
        PathInfo {
            label: "lab 'x'".into(),
            family: Family::Ipv4,
            client_ip: "198.18.0.2".into(),
            server_ip: "198.19.0.2".into(),
            mtu: 1500,
            line_bps: 1_000_000_000,
            line_speed_source: "given".into(),
        }
    }

    #[test]
    fn tcp_table_has_the_papers_columns_and_totals() {
        let run = |d, bps: f64| TcpRun {
            direction: d,
            seconds: 10.0,
            bytes: (bps * 10.0 / 8.0) as u64,
            goodput_bps: bps,
            retransmits: 3,
            l2_bps: bps * 1.04,
            link_usage_percent: bps * 1.04 / 1e7,
            streams: vec![StreamRecord {
                stream: 1,
                bytes: (bps * 10.0 / 8.0) as u64,
                goodput_bps: bps,
                retransmits: 3,
                rtt_us: 120,
                snd_mss: 1448,
            }],
            interrupted: false,
        };
        let rec = TcpRecord {
            test: "tcp".into(),
            path: path(),
            streams: 1,
            window_bytes: Some(256 * 1024),
            duration_s: 10.0,
            port: 5201,
            runs: vec![
                run(Direction::Download, 926e6),
                run(Direction::Upload, 924e6),
            ],
        };
        let t = tcp_table(&rec);
        assert!(t.contains("Table 12"), "{t}");
        assert!(t.contains("window 256 KiB"), "{t}");
        let row = t.lines().find(|l| l.starts_with("lab 'x'")).unwrap();
        assert!(row.contains("926") && row.contains("924"), "{row}");
        assert!(t.contains("1.0397"), "{t}");
    }

    #[test]
    fn scenarios_are_columns() {
        let t = by_scenario(
            "T",
            &[
                ("IPv4".into(), vec![(Direction::Download, 5.53e9)]),
                (
                    "IPsec".into(),
                    vec![(Direction::Download, 479e6), (Direction::Upload, 480e6)],
                ),
            ],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[2].contains("IPv4") && lines[2].contains("IPsec"),
            "{t}"
        );
        assert!(
            lines[3].starts_with("Download") && lines[3].contains("5,530"),
            "{t}"
        );
        assert!(
            lines[4].starts_with("Upload") && lines[4].contains('-'),
            "{t}"
        );
    }

    #[test]
    fn sizes_print_short() {
        assert_eq!(size_text(1 << 20), "1M");
        assert_eq!(size_text(10 << 20), "10M");
        assert_eq!(size_text(1500), "1500");
    }
}
