//! The commands that read the results database: `runs`, `show`,
//! `compare`, `export`, `report`. They measure nothing and need no root.

use crate::error::{bail, err, Result, ResultExt};
use crate::exit::Outcome;
use crate::outputs::Kind;
use linerate_results::report::{self, thousands};
use linerate_store::{compare, export, html, Store, StoredRun};
use std::fmt::Write as _;
use std::path::Path;

/// The database `--db` names, or the default one.
fn db_path(db: Option<&Path>) -> std::path::PathBuf {
    db.map_or_else(linerate_store::default_path, Path::to_path_buf)
}

/// Opens an existing database; reading commands never create one.
fn open(db: Option<&Path>) -> Result<Store> {
    let path = db_path(db);
    if !path.exists() {
        bail!(Environment,
            "no results database at {}: run 'linerate rfc2544' or 'linerate trial' first, or pass --db FILE",
            path.display()
        );
    }
    // Reading needs no write access (a read-only mount, another user's
    // database, a full disk).
    Ok(Store::open_read_only(&path)?)
}

/// A run named on the command line: its id, or 'last'.
fn load(store: &Store, run: &str) -> Result<StoredRun> {
    let id = if run == "last" {
        match store.last_run()? {
            Some(id) => id,
            None => bail!(
                Environment,
                "no run stored yet in {}",
                store.path().display()
            ),
        }
    } else {
        run.parse::<i64>().ok().filter(|n| *n > 0).ok_or_else(|| {
            err!(
                BadInput,
                "run '{run}' is not a run id: give a number from 'linerate runs', or 'last'"
            )
        })?
    };
    Ok(store.load(id)?)
}

/// A stored text as a terminal may print it: control characters (newlines,
/// escape sequences, NUL) escaped as `\u{..}`, and at most `max`
/// characters, the rest cut to an ellipsis. Runs stored before names were
/// checked may hold anything.
pub fn printable(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (n, c) in s.chars().enumerate() {
        if n == max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// `2026-11-21T13:50:12.345Z` -> `2026-11-21 13:50`.
fn short_date(rfc3339: &str) -> String {
    rfc3339.get(..16).unwrap_or(rfc3339).replace('T', " ")
}

/// `runs`: the runs stored in `db` (None: the default database).
pub fn runs(db: Option<&Path>) -> Result<Outcome> {
    let store = open(db)?;
    let runs = store.runs()?;
    if runs.is_empty() {
        outln!("no runs stored in {}", store.path().display());
        return Ok(Outcome::Passed);
    }
    let rows: Vec<[String; 7]> = runs
        .iter()
        .map(|r| {
            [
                r.id.to_string(),
                short_date(&r.started_at),
                printable(&r.command, 40),
                printable(&r.dut, 40),
                printable(&r.engine, 20),
                r.status.label().to_string(),
                printable(&r.summary, 80),
            ]
        })
        .collect();
    let head = [
        "ID",
        "DATE (UTC)",
        "COMMAND",
        "DUT",
        "ENGINE",
        "STATUS",
        "SUMMARY",
    ];
    let widths: Vec<usize> = (0..7)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([head[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[&str]| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            if i == 0 {
                let _ = write!(s, "{c:>w$}");
            } else {
                let _ = write!(s, "  {c:<w$}");
            }
        }
        s.trim_end().to_string()
    };
    outln!("{}", line(&head));
    for r in &rows {
        let cells: Vec<&str> = r.iter().map(String::as_str).collect();
        outln!("{}", line(&cells));
    }
    Ok(Outcome::Passed)
}

/// `show`: a stored run (its id, or "last") as its command printed it.
pub fn show(db: Option<&Path>, run: &str) -> Result<Outcome> {
    let store = open(db)?;
    let run = load(&store, run)?;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Run {}: linerate {} ({}), started {}, {}",
        run.id,
        run.command,
        run.linerate_version,
        run.started_at,
        run.status.label()
    );
    let _ = writeln!(
        out,
        "DUT: {}; tester {} ({}, {} CPUs, Linux {})",
        printable(&run.dut.label(), 200),
        run.machine.hostname,
        run.machine.cpu_model,
        run.machine.cpus,
        run.machine.kernel
    );
    let _ = writeln!(out, "Command: {}\n", run.command_line());
    match (run.report(), document_table(&run)) {
        (_, Some(table)) => {
            out.push_str(&table);
            if run.status != linerate_store::RunStatus::Complete {
                let _ = writeln!(
                    out,
                    "The run is {}: the table holds what it had measured ({} trial(s) stored).",
                    run.status.label(),
                    run.trials.len()
                );
            }
        }
        (Some(rep), None) => {
            out.push_str(&report::throughput_table(&rep));
            if let Some(i) = &rep.interrupted {
                let _ = writeln!(
                    out,
                    "Unfinished: the {}-byte search had run {} trial(s) when the run stopped:",
                    i.frame_size,
                    i.trials.len()
                );
                for t in &i.trials {
                    let _ = writeln!(
                        out,
                        "  {} fps: tx {} rx {} loss {:.4} %",
                        thousands(t.intended_fps.round() as u64),
                        thousands(t.tx_frames),
                        thousands(t.rx_frames),
                        100.0 * t.loss_ratio
                    );
                }
            }
        }
        (None, None) => {
            for t in &run.trials {
                out.push_str(&report::trial_summary(&t.result, run.line_speed_bps));
            }
            if run.trials.is_empty() {
                out.push_str("No trial finished.\n");
            }
        }
    }
    outp!("{out}");
    Ok(Outcome::Passed)
}

/// The command's own table, from the report it stored as it ran (see
/// [`linerate_store::StoredRun::document`]); None for rfc2544 and trial
/// runs, and for a report this linerate cannot read.
fn document_table(run: &StoredRun) -> Option<String> {
    use linerate_results::methods::{BackToBackReport, FrameLossReport, MlrSearchReport};
    let doc = run.document.clone()?;
    fn table<T: serde::de::DeserializeOwned>(
        doc: serde_json::Value,
        format: fn(&T) -> String,
    ) -> Option<String> {
        serde_json::from_value(doc).ok().map(|r: T| format(&r))
    }
    match run.command.as_str() {
        "latency" => table::<linerate_results::LatencyReport>(doc, report::latency_table),
        "mlrsearch" => table::<MlrSearchReport>(doc, report::mlrsearch_table),
        "back-to-back" => table::<BackToBackReport>(doc, report::back_to_back_table),
        "loss" => table::<FrameLossReport>(doc, report::frame_loss_table),
        "cpu-target" => table::<linerate_results::cpu_target::CpuTargetReport>(
            doc,
            linerate_results::cpu_target::cpu_target_table,
        ),
        "tcp" => {
            table::<linerate_goodput::record::TcpRecord>(doc, linerate_goodput::report::tcp_table)
        }
        "http" => {
            table::<linerate_goodput::record::HttpRecord>(doc, linerate_goodput::report::http_table)
        }
        "tunnels" => table::<linerate_results::tunnels::TunnelsReport>(
            doc,
            linerate_results::tunnels::tunnels_table,
        ),
        _ => None,
    }
}

/// `compare`: rfc2544 runs side by side, differences against the first.
pub fn compare(db: Option<&Path>, runs: &[String]) -> Result<Outcome> {
    let store = open(db)?;
    let runs = runs
        .iter()
        .map(|r| load(&store, r))
        .collect::<Result<Vec<_>>>()?;
    if let Some(r) = runs.iter().find(|r| r.command != "rfc2544") {
        bail!(
            BadInput,
            "run {} is a '{}' run: compare takes rfc2544 runs (throughput per frame size)",
            r.id,
            r.command
        );
    }
    outp!("{}", compare::comparison_table(&runs));
    Ok(Outcome::Passed)
}

/// What `export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// JSON following schema/run.schema.json.
    Json,
    /// CSV, one row per frame size (rfc2544 runs) or per trial (others).
    Csv,
    /// CSV, one row per trial.
    TrialsCsv,
}

/// `export`: a stored run as JSON or CSV, to `output` or stdout.
pub fn export(
    db: Option<&Path>,
    run: &str,
    format: ExportFormat,
    output: Option<&Path>,
) -> Result<Outcome> {
    crate::outputs::Outputs::new()
        .file("--output", output, Kind::Replaced)
        .input("--db", Some(&db_path(db)))
        .check()?;
    let store = open(db)?;
    let run = load(&store, run)?;
    let text = if format == ExportFormat::Json {
        report::to_json(&export::to_json(&run)) + "\n"
    } else if format == ExportFormat::TrialsCsv || run.command != "rfc2544" {
        export::trials_csv(&run)
    } else {
        export::results_csv(&run)
    };
    write_out(output, &text)?;
    Ok(Outcome::Passed)
}

/// `report`: a stored run as a self-contained HTML page at `html`.
pub fn report(db: Option<&Path>, run: &str, html: &Path) -> Result<Outcome> {
    crate::outputs::Outputs::new()
        .file("--html", Some(html), Kind::Replaced)
        .input("--db", Some(&db_path(db)))
        .check()?;
    let store = open(db)?;
    let run = load(&store, run)?;
    write_out(Some(html), &html::render(&run))?;
    errln!(
        "linerate: report of run {} written to {}",
        run.id,
        html.display()
    );
    Ok(Outcome::Passed)
}

/// Writes to `path` (atomically), or to stdout.
fn write_out(path: Option<&Path>, text: &str) -> Result<()> {
    match path {
        None => {
            outp!("{text}");
            Ok(())
        }
        Some(path) => {
            let mut tmp = path.as_os_str().to_owned();
            tmp.push(".tmp");
            std::fs::write(&tmp, text)
                .with_context(|| format!("writing {}: pass a writable path", path.display()))?;
            std::fs::rename(&tmp, path)
                .with_context(|| format!("writing {}: pass a writable path", path.display()))?;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::printable;

    #[test]
    fn stored_text_is_printed_escaped_and_bounded() {
        assert_eq!(printable("LANCOM 1900EF", 40), "LANCOM 1900EF");
        assert_eq!(
            printable("a\nb\u{1b}[31mc\0", 40),
            "a\\u{a}b\\u{1b}[31mc\\u{0}"
        );
        let long = "A".repeat(65_536);
        let p = printable(&long, 40);
        assert_eq!(p.chars().count(), 41);
        assert!(p.ends_with('…'));
    }
}
