//! Stored runs as read back, and the report rebuilt from them.

use linerate_results::report::{sig3, thousands};
use linerate_results::{Rfc2544Report, ThroughputResult, TrialResult, UnfinishedTrials};
use serde::{Deserialize, Serialize};

/// The device under test, as the user describes it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Dut {
    /// `--dut-name`, e.g. "LANCOM 1900EF".
    pub name: Option<String>,
    /// `--dut-firmware`, e.g. "LCOS 10.80".
    pub firmware: Option<String>,
    /// What was tested (the report's description, e.g. "LAN-LAN routing").
    pub scenario: String,
}

impl Dut {
    /// "name firmware", or "-" when neither was given.
    pub fn label(&self) -> String {
        let parts: Vec<&str> = [self.name.as_deref(), self.firmware.as_deref()]
            .into_iter()
            .flatten()
            .collect();
        if parts.is_empty() {
            "-".to_string()
        } else {
            parts.join(" ")
        }
    }
}

/// The tester's machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub hostname: String,
    /// Kernel release (`uname -r`).
    pub kernel: String,
    pub cpu_model: String,
    pub cpus: u32,
}

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    /// Its process is still measuring.
    Running,
    /// Every search finished.
    Complete,
    /// Stopped by a signal or an error; the finished trials are kept.
    Interrupted,
    /// Left `running` by a process that is gone (killed with SIGKILL, a
    /// crash, a power cut): incomplete, the finished trials are kept.
    Died,
}

impl RunStatus {
    /// The word stored in the database.
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running | RunStatus::Died => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "interrupted",
        }
    }

    pub fn parse(s: &str) -> RunStatus {
        match s {
            "complete" => RunStatus::Complete,
            "running" => RunStatus::Running,
            _ => RunStatus::Interrupted,
        }
    }

    /// The word shown to readers.
    pub fn label(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Interrupted => "incomplete (interrupted)",
            RunStatus::Died => "incomplete (process died)",
        }
    }

    /// The word exported (JSON `status`): running, complete, interrupted, died.
    pub fn key(self) -> &'static str {
        match self {
            RunStatus::Died => "died",
            other => other.as_str(),
        }
    }

    pub fn is_complete(self) -> bool {
        self == RunStatus::Complete
    }
}

/// A trial as stored, with where it belongs in its run.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredTrial {
    /// Which frame-size search of the run (0, 1, ...); 0 for `trial` runs.
    pub search_no: usize,
    /// Its number within the search (1, 2, ...).
    pub trial_no: usize,
    /// Whether it passed the loss limit (`--loss`); None when not judged.
    pub passed: Option<bool>,
    /// RFC 3339 UTC.
    pub finished_at: String,
    pub result: TrialResult,
}

/// Everything stored about one run.
#[derive(Debug, Clone)]
pub struct StoredRun {
    pub id: i64,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub command: String,
    pub args: Vec<String>,
    pub status: RunStatus,
    pub pid: u32,
    pub dut: Dut,
    pub machine: Machine,
    pub engine: String,
    pub linerate_version: String,
    pub line_speed_bps: u64,
    /// The rfc2544 run's settings (results empty); None for `trial` runs.
    pub settings: Option<Rfc2544Report>,
    /// Finished searches: (search_no, result without its trials).
    pub results: Vec<(usize, ThroughputResult)>,
    /// Every finished trial, in the order run.
    pub trials: Vec<StoredTrial>,
    /// The command's own report as its `--json` writes it, as far as the
    /// run got (latency, loss, mlrsearch, back-to-back, cpu-target, tcp,
    /// http); None for rfc2544 and trial runs, which are rebuilt from their
    /// rows.
    pub document: Option<serde_json::Value>,
}

/// One line of `linerate runs`.
#[derive(Debug, Clone)]
pub struct RunSummary {
    pub id: i64,
    pub started_at: String,
    pub command: String,
    pub dut: String,
    pub engine: String,
    pub status: RunStatus,
    pub summary: String,
}

impl StoredRun {
    /// The RFC 2544 report as the run would have written it with `--json`:
    /// finished searches with their trials, and the unfinished one's trials
    /// under `interrupted`. None for `trial` runs.
    pub fn report(&self) -> Option<Rfc2544Report> {
        let mut rep = self.settings.clone()?;
        rep.results = Vec::new();
        rep.round_results = Vec::new();
        // With `--repeat N` the stored searches are the rounds, and each
        // size's figure is their median, as the run reported it.
        for (n, r) in &self.results {
            let mut r = r.clone();
            r.trials = self.trials_of(*n);
            rep.keep(r);
        }
        // Trials of a search without a result: the one that was running.
        let unfinished = self
            .trials
            .iter()
            .map(|t| t.search_no)
            .filter(|n| !self.results.iter().any(|(done, _)| done == n))
            .max();
        rep.interrupted = unfinished.map(|n| {
            let trials = self.trials_of(n);
            UnfinishedTrials {
                frame_size: trials[0].frame_size,
                l3_length: trials[0].l3_length,
                trials,
            }
        });
        Some(rep)
    }

    fn trials_of(&self, search_no: usize) -> Vec<TrialResult> {
        self.trials
            .iter()
            .filter(|t| t.search_no == search_no)
            .map(|t| t.result.clone())
            .collect()
    }

    /// The command line as a shell would take it back (arguments with
    /// spaces or quotes single-quoted).
    pub fn command_line(&self) -> String {
        self.args
            .iter()
            .map(|a| {
                let plain = !a.is_empty()
                    && a.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_./,:=%@+".contains(c));
                if plain {
                    a.clone()
                } else {
                    format!("'{}'", a.replace('\'', "'\\''"))
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// A short account of what was measured.
    pub fn summary_text(&self) -> String {
        let mut parts = Vec::new();
        if self.command == "rfc2544" {
            let sizes: Vec<String> = self
                .results
                .iter()
                .map(|(_, r)| format!("{} B {} fps", r.frame_size, sig3(r.throughput_fps)))
                .collect();
            match sizes.len() {
                0 => parts.push("no size finished".to_string()),
                1..=3 => parts.push(sizes.join(", ")),
                n => parts.push(format!("{n} sizes: {} .. {}", sizes[0], sizes[n - 1])),
            }
            if let Some(i) = self.report().and_then(|r| r.interrupted) {
                parts.push(format!(
                    "{} trial(s) of {} B unfinished",
                    i.trials.len(),
                    i.frame_size
                ));
            }
        } else if let Some(goodput) = self.goodput_summary() {
            parts.push(goodput);
        } else if self.command == "tunnels" {
            // linerate tunnels stores its report whole (no trials).
            parts.push(
                self.document
                    .clone()
                    .and_then(|d| {
                        serde_json::from_value::<linerate_results::tunnels::TunnelsReport>(d).ok()
                    })
                    .map_or("no tunnel set up".to_string(), |r| r.summary()),
            );
        } else if self.trials.len() > 3 {
            let mut sizes: Vec<u16> = self.trials.iter().map(|t| t.result.frame_size).collect();
            sizes.dedup();
            let sizes: Vec<String> = sizes.iter().map(|s| format!("{s} B")).collect();
            parts.push(format!(
                "{} trials of {}",
                self.trials.len(),
                sizes.join(", ")
            ));
        } else {
            for t in &self.trials {
                let r = &t.result;
                parts.push(format!(
                    "{} B at {} fps: rx {} of {}, loss {:.4} %",
                    r.frame_size,
                    sig3(r.intended_fps),
                    thousands(r.rx_frames),
                    thousands(r.intended_frames),
                    100.0 * r.loss_ratio
                ));
            }
            if self.trials.is_empty() {
                parts.push("no trial finished".to_string());
            }
        }
        parts.join("; ")
    }

    /// tcp and http runs: the goodput of each direction measured, from
    /// the stored record, named as the tables name it (L4 payload).
    fn goodput_summary(&self) -> Option<String> {
        if !matches!(self.command.as_str(), "tcp" | "http") {
            return None;
        }
        let runs = self
            .document
            .as_ref()
            .and_then(|d| d.get("runs")?.as_array().cloned())
            .unwrap_or_default();
        let parts: Vec<String> = runs
            .iter()
            .filter_map(|r| {
                let direction = r.get("direction")?.as_str()?;
                let mbps = r.get("goodput_bps")?.as_f64()? / 1e6;
                Some(format!("{direction} {} Mbit/s", sig3(mbps)))
            })
            .collect();
        Some(if parts.is_empty() {
            "no direction finished".to_string()
        } else {
            format!("L4 goodput: {}", parts.join(", "))
        })
    }

    pub fn summary(&self) -> RunSummary {
        RunSummary {
            id: self.id,
            started_at: self.started_at.clone(),
            command: self.command.clone(),
            dut: self.dut.label(),
            engine: self.engine.clone(),
            status: self.status,
            summary: self.summary_text(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn command_line_quotes_what_a_shell_would_split() {
        let mut run = crate::testdata::run(1, "d", "f");
        run.args = vec![
            "linerate".into(),
            "--dut-name".into(),
            "LANCOM 1900EF".into(),
            "--rate".into(),
            "50%".into(),
            "it's".into(),
        ];
        assert_eq!(
            run.command_line(),
            r#"linerate --dut-name 'LANCOM 1900EF' --rate 50% 'it'\''s'"#
        );
    }

    #[test]
    fn summary_of_a_goodput_run_gives_each_direction() {
        let mut run = crate::testdata::run(1, "d", "f");
        run.command = "tcp".into();
        run.settings = None;
        run.results.clear();
        run.trials.clear();
        assert_eq!(run.summary_text(), "no direction finished");
        run.document = Some(serde_json::json!({"runs": [
            {"direction": "download", "goodput_bps": 941.4e6},
            {"direction": "upload", "goodput_bps": 12.34e6},
        ]}));
        assert_eq!(
            run.summary_text(),
            "L4 goodput: download 941 Mbit/s, upload 12.3 Mbit/s"
        );
    }

    #[test]
    fn summary_of_a_tunnels_run_gives_its_counts_and_rate() {
        let mut run = crate::testdata::tunnels_run(1, &[]);
        run.document = None;
        assert_eq!(run.summary_text(), "no tunnel set up");
        let run =
            crate::testdata::tunnels_run(1, &[(0.0, Some(20.0)), (5.0, Some(45.0)), (6.0, None)]);
        assert_eq!(
            run.summary_text(),
            "2 of 3 tunnels up, 40.0 tunnels/s, setup p50 20.0 ms; failed: 1 NO_PROPOSAL_CHOSEN"
        );
    }

    #[test]
    fn summary_names_the_sizes_and_an_unfinished_search() {
        let mut run = crate::testdata::run(1, "d", "f");
        assert_eq!(run.summary_text(), "64 B 595,000 fps, 1518 B 32,500 fps");
        run.results.pop();
        assert!(
            run.summary_text()
                .ends_with("3 trial(s) of 1518 B unfinished"),
            "{}",
            run.summary_text()
        );
    }
}
