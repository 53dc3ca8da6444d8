//! What a measuring command tells the world as it runs: the results
//! database (every trial stored the moment it ends), the `--events`
//! stream, and the progress display. The commands call it once per event;
//! it fans out.
//!
//! Measurements come first: a database or event stream that fails in the
//! middle of a run is reported once and left behind, the run goes on.

use crate::error::{bail, err, Result};
use crate::events::EventSink;
use crate::progress::ProgressView;
use linerate_engine::capture::{self, Capture};
use linerate_engine::ReceiverKind;
use linerate_method::spec::Step;
use linerate_method::Progress;
use linerate_results::{ThroughputResult, TrialResult};
use linerate_store::{Dut, NewRun, RunStatus, Store};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

pub(crate) mod plan;

pub use plan::{JsonWrap, RecordPlan, RunInfo};

pub struct Recorder {
    args: RecordPlan,
    store: Option<Store>,
    /// The run to store, until its first trial starts (a run that fails
    /// before measuring anything, e.g. a gateway not answering ARP, is
    /// not worth a row).
    pending: Option<NewRun>,
    run_id: Option<i64>,
    events: Option<EventSink>,
    progress: Option<ProgressView>,
    /// `--pcap`: created at begin and put in port B's slot.
    capture: Option<Capture>,
    /// The capture while the run uses it (out of the slot when the run ends).
    installed: Option<capture::Installed>,
    /// `--json`: the command's report, rewritten as the run goes on.
    json: Option<PathBuf>,
    /// What the `--json` file holds around the report (several scenarios'
    /// reports compared); None: the report itself.
    json_wrap: Option<JsonWrap>,
    finished: bool,
    /// The database stopped taking the run (a write failed): why, and the
    /// store, kept to mark the run incomplete at its end if it can.
    lost: Option<(String, Store)>,
    /// The lost database took not even the run's end (nor the mark beside
    /// it): readers will take the run for one whose process died.
    end_unrecorded: bool,
}

/// The results database the record options name (the default one unless `--db`).
fn db_path(args: &RecordPlan) -> std::path::PathBuf {
    args.db.clone().unwrap_or_else(linerate_store::default_path)
}

fn now() -> String {
    humantime::format_rfc3339_millis(SystemTime::now()).to_string()
}

impl Recorder {
    /// Opens an existing results database before anything is measured, so
    /// a file that is not one is an input error (exit 2) that costs no
    /// trial. Files this run makes (a new database, `--events`, `--pcap`)
    /// are made when the run begins: a run that fails before (a wrong
    /// interface, a rate above the line rate) writes nothing. The paths
    /// were checked before (`outputs`).
    pub fn open(args: &RecordPlan) -> Result<Recorder> {
        let store = match (args.no_db, db_path(args)) {
            (false, path) if path.exists() => Some(Store::open(&path)?),
            _ => None,
        };
        let events = match args.events.as_deref() {
            Some("-") => Some(EventSink::open("-")?),
            _ => None,
        };
        Ok(Recorder {
            args: args.clone(),
            store,
            pending: None,
            run_id: None,
            events,
            progress: None,
            capture: None,
            installed: None,
            json: None,
            json_wrap: None,
            finished: false,
            lost: None,
            end_unrecorded: false,
        })
    }

    /// The command's `--json` file (checked before, with the other outputs).
    pub fn json_file(mut self, path: Option<&Path>) -> Recorder {
        self.json = path.map(Path::to_path_buf);
        self
    }

    /// The `--json` file holds `wrap(report)` instead of the report: a
    /// run that is one of several compared writes them all.
    pub fn json_wrapped(mut self, path: Option<&Path>, wrap: JsonWrap) -> Recorder {
        self.json = path.map(Path::to_path_buf);
        self.json_wrap = Some(wrap);
        self
    }

    /// Writes `report` to the `--json` file, if there is one.
    fn write_json(&self, report: &impl serde::Serialize) -> Result<()> {
        let Some(path) = &self.json else {
            return Ok(());
        };
        match &self.json_wrap {
            Some(wrap) => {
                let value = serde_json::to_value(report).expect("reports serialize");
                crate::outputs::write_json(path, &wrap(value))
            }
            None => crate::outputs::write_json(path, report),
        }
    }

    /// Makes the files the run writes that [`open`](Self::open) left for
    /// its beginning.
    fn create_files(&mut self) -> Result<()> {
        if self.store.is_none() && !self.args.no_db {
            self.store = Some(Store::open(&db_path(&self.args))?);
        }
        if self.events.is_none() {
            if let Some(target) = self.args.events.as_deref() {
                self.events = Some(EventSink::open(target)?);
            }
        }
        if let Some(path) = &self.args.pcap {
            self.capture = Some(Capture::create(path, self.args.pcap_frames).map_err(|e| {
                err!(
                    Environment,
                    "--pcap {}: {e}; pass a writable path",
                    path.display()
                )
            })?);
        }
        Ok(())
    }

    /// The run starts: stored as `running`, announced, progress shown.
    pub fn begin(&mut self, info: RunInfo) -> Result<()> {
        if self.args.pcap.is_some() && info.receiver == ReceiverKind::Kernel {
            bail!(BadInput, "--pcap needs the test frames in user space, but port B counts them in the kernel (XDP) and hands none up: add --receiver socket");
        }
        self.create_files()?;
        if let Some(c) = self.capture.take() {
            self.installed = Some(info.capture_at.install(c).ok_or_else(|| {
                err!(
                    Environment,
                    "--pcap: another run on this test bed is capturing port B's frames; one capture per run"
                )
            })?);
        }
        self.progress = Some(ProgressView::new(
            self.quiet(),
            info.sizes.len(),
            info.trial_s,
            info.resolution,
        ));
        let argv = crate::caller::command_line();
        let dut = Dut {
            name: self.args.dut_name.clone(),
            firmware: self.args.dut_firmware.clone(),
            scenario: info.scenario.to_string(),
        };
        if self.store.is_some() {
            self.pending = Some(NewRun {
                command: info.command.to_string(),
                args: argv.clone(),
                dut: dut.clone(),
                machine: linerate_store::machine::detect(),
                engine: info.engine.to_string(),
                linerate_version: env!("CARGO_PKG_VERSION").to_string(),
                line_speed_bps: info.line_speed_bps,
                report: info.report.cloned(),
            });
        }
        if let Some(ev) = &mut self.events {
            ev.emit(
                "run_started",
                json!({
                    "run_id": self.run_id,
                    "command": info.command,
                    "args": argv,
                    "dut": dut,
                    "engine": info.engine,
                    "line_speed_bps": info.line_speed_bps,
                    "frame_sizes": info.sizes,
                    "trial_duration_s": info.trial_s,
                }),
            );
        }
        Ok(())
    }

    /// Writes the run's row when its first trial starts.
    fn ensure_stored(&mut self) {
        let (Some(store), Some(new)) = (&self.store, self.pending.take()) else {
            return;
        };
        match store.begin_run(&new, &now()) {
            Ok(id) => self.run_id = Some(id),
            Err(e) => self.store_failed(e),
        }
    }

    fn store_failed(&mut self, e: linerate_store::StoreError) {
        errln!(
            "linerate: warning: {e}; the rest of this run is not stored (the measurement goes on)"
        );
        if let Some(store) = self.store.take() {
            self.lost = Some((e.to_string(), store));
        }
    }

    /// What became of the run in the database when it did not all get
    /// there: None when every trial was stored (or none was asked for).
    fn storage_lost(&self) -> Option<String> {
        let json = match &self.json {
            Some(p) => format!("the --json file {} holds the whole run", p.display()),
            None => "the table printed above is the only record (pass --json FILE to keep one)"
                .to_string(),
        };
        if let Some((why, store)) = &self.lost {
            let kept = match self.run_id {
                Some(id) if self.end_unrecorded => format!(
                    "run {id} holds the trials stored before that, but not even its end could be recorded, so it reads as 'incomplete (process died)'"
                ),
                Some(id) => {
                    format!("run {id} holds the trials stored before that, marked incomplete")
                }
                None => "nothing of the run was stored".to_string(),
            };
            return Some(format!(
                "the results database {} stopped taking the run ({why}): {kept}; {json}",
                store.path().display()
            ));
        }
        match (&self.store, self.run_id) {
            (Some(store), Some(id)) if !store.still_there() => Some(format!(
                "the results database {} was deleted or replaced during the run, and run {id} with it; {json}",
                store.path().display()
            )),
            _ => None,
        }
    }

    /// A search's trial starts or ends (`search_no` counts the frame sizes).
    pub fn search_progress(&mut self, search_no: usize, p: &Progress, line_rate_fps: f64) {
        // A finished trial is stored before it is shown: whatever a reader
        // saw printed is in the database, even if the process dies next.
        if let Progress::TrialStarting { .. } = p {
            self.ensure_stored();
            self.show(search_no, p, line_rate_fps);
        }
        match p {
            Progress::TrialStarting {
                frame,
                trial_no,
                intended_fps,
                lo,
                hi,
                ..
            } => self.emit(
                "trial_started",
                json!({
                    "search_no": search_no,
                    "frame_size": frame.frame(),
                    "trial_no": trial_no,
                    "intended_fps": intended_fps,
                    "passed_fps": lo,
                    "failed_fps": hi,
                }),
            ),
            Progress::TrialDone {
                trial_no,
                result,
                passed,
                ..
            } => {
                self.trial_done(search_no, *trial_no, result, Some(*passed));
                self.show(search_no, p, line_rate_fps);
            }
        }
    }

    fn show(&self, search_no: usize, p: &Progress, line_rate_fps: f64) {
        if let Some(view) = &self.progress {
            view.on(search_no, p, line_rate_fps);
        }
    }

    /// A trial of a method that reports [`Step`]s (loss, mlrsearch,
    /// back-to-back): stored and announced as the searches' trials are,
    /// numbered on after `earlier` trials of the same `search_no`, shown as
    /// a plain line unless `--quiet`.
    pub fn step(&mut self, search_no: usize, earlier: usize, step: &Step, line_rate_fps: f64) {
        match step {
            Step::Starting {
                frame,
                trial_no,
                spec,
                why,
            } => {
                self.ensure_stored();
                self.emit(
                    "trial_started",
                    json!({
                        "search_no": search_no,
                        "frame_size": frame.frame(),
                        "trial_no": earlier + trial_no,
                        "intended_fps": spec.intended_fps,
                        "why": why,
                    }),
                );
            }
            Step::Done {
                trial_no,
                result,
                passed,
                ..
            } => self.trial_done(search_no, earlier + trial_no, result, Some(*passed)),
        }
        if !self.quiet() {
            crate::progress::show_step(step, line_rate_fps);
        }
    }

    /// A trial of a method with progress of its own (cpu-target) starts.
    pub fn trial_starting(
        &mut self,
        search_no: usize,
        trial_no: usize,
        frame_size: u16,
        intended_fps: f64,
    ) {
        self.ensure_stored();
        self.emit(
            "trial_started",
            json!({"search_no": search_no, "frame_size": frame_size, "trial_no": trial_no, "intended_fps": intended_fps}),
        );
    }

    /// No progress: `--quiet`, or a caller that wants no words at all.
    fn quiet(&self) -> bool {
        self.args.quiet || crate::console::silent()
    }

    /// Whether progress lines are wanted (not `--quiet`).
    pub fn verbose(&self) -> bool {
        !self.quiet()
    }

    /// A latency trial ended (`trial_no` in the run's search, `latency_no`
    /// among the size's latency trials): stored, announced, and shown as a
    /// line unless `--quiet`. Latency trials are not judged by their loss.
    pub fn latency_trial(
        &mut self,
        search_no: usize,
        trial_no: usize,
        latency_no: usize,
        frames: &linerate_wire::Frames,
        result: &TrialResult,
    ) {
        self.ensure_stored();
        self.trial_done(search_no, trial_no, result, None);
        if !self.quiet() {
            errln!(
                "[{}] latency trial {latency_no} at {} fps: rx {} lost {}",
                frames.describe(),
                linerate_results::report::thousands(result.intended_fps.round() as u64),
                linerate_results::report::thousands(result.rx_frames),
                linerate_results::report::thousands(result.lost_frames)
            );
        }
    }

    /// The result of a command whose report is one record (tcp, http),
    /// announced as a `result` event.
    pub fn result_event(&mut self, record: &impl serde::Serialize) {
        let value = serde_json::to_value(record).expect("records serialize");
        self.emit("result", json!({"search_no": 0, "result": value}));
    }

    /// `linerate trial`: its one trial starts.
    pub fn single_trial_started(
        &mut self,
        frames: &linerate_wire::Frames,
        intended_fps: f64,
        line_rate_fps: f64,
    ) {
        self.ensure_stored();
        let frame_size = frames.largest().frame();
        if let Some(view) = &self.progress {
            let tag = crate::progress::frames_tag(frames.largest(), frames.mix());
            view.single_trial_started(tag, intended_fps, line_rate_fps);
        }
        self.emit(
            "trial_started",
            json!({"search_no": 0, "frame_size": frame_size, "trial_no": 1, "intended_fps": intended_fps}),
        );
    }

    /// `linerate trial`: its one trial ended.
    pub fn single_trial_done(&mut self, result: &TrialResult, passed: bool) {
        self.trial_done(0, 1, result, Some(passed));
        if let Some(view) = &self.progress {
            view.single_trial_done();
        }
    }

    /// Stores a finished trial (committed before this returns) and announces
    /// it; `passed` is None when the method does not judge it by its loss
    /// (cpu-target, latency).
    pub fn trial_done(
        &mut self,
        search_no: usize,
        trial_no: usize,
        r: &TrialResult,
        passed: Option<bool>,
    ) {
        if let (Some(store), Some(id)) = (&self.store, self.run_id) {
            if let Err(e) = store.add_trial(id, search_no, trial_no, r, passed, &now()) {
                self.store_failed(e);
            }
        }
        self.emit(
            "trial_done",
            json!({"search_no": search_no, "trial_no": trial_no, "passed": passed, "result": r}),
        );
    }

    /// A frame size's search finished.
    pub fn result(&mut self, search_no: usize, result: &ThroughputResult) {
        if let (Some(store), Some(id)) = (&self.store, self.run_id) {
            if let Err(e) = store.add_result(id, search_no, result) {
                self.store_failed(e);
            }
        }
        let mut summary = serde_json::to_value(result).expect("results serialize");
        summary["trials"] = json!(result.trials.len());
        self.emit("result", json!({"search_no": search_no, "result": summary}));
    }

    /// The command's report as it stands, after a trial: written to
    /// `--json` and stored with the run (replacing the last one), so
    /// `linerate show` prints the command's own table, also of a run that
    /// stopped early. A failure to write the file is ignored here (a full
    /// disk mid-run must not stop the measurement; [`save`](Self::save)
    /// reports it).
    pub fn save_partial(&mut self, report: &impl serde::Serialize) {
        let _ = self.write_json(report);
        self.document(report);
    }

    /// The command's report, final (or as far as an interrupted run got):
    /// written to `--json` and stored with the run.
    pub fn save(&mut self, report: &impl serde::Serialize) -> Result<()> {
        self.document(report);
        self.write_json(report)
    }

    /// Says where the report was written, once the run is complete.
    pub fn saved_note(&self) {
        if let Some(path) = &self.json {
            errln!("linerate: every trial written to {}", path.display());
        }
    }

    fn document(&mut self, report: &impl serde::Serialize) {
        self.ensure_stored();
        if let (Some(store), Some(id)) = (&self.store, self.run_id) {
            let value = serde_json::to_value(report).expect("reports serialize");
            if let Err(e) = store.set_document(id, &value) {
                self.store_failed(e);
            }
        }
    }

    /// Prints a table or summary on stdout, or on stderr when the events
    /// go to stdout (so that stdout holds JSON lines only).
    pub fn print(&mut self, text: &str) {
        if let Some(view) = &mut self.progress {
            view.finish();
        }
        if self.events.as_ref().is_some_and(|e| e.to_stdout) {
            errp!("{text}");
        } else {
            outp!("{text}");
        }
    }

    /// [`finish`](Self::finish) as complete, or as interrupted: then a
    /// database that did not take the run is a warning, since the exit
    /// already says the run was interrupted.
    pub fn finish_as(&mut self, interrupted: bool) -> Result<()> {
        if !interrupted {
            return self.finish(RunStatus::Complete);
        }
        if let Err(e) = self.finish(RunStatus::Interrupted) {
            errln!("linerate: warning: {e}");
        }
        Ok(())
    }

    /// The run ended: complete, or interrupted (signal or error). Err when
    /// the run did not all reach the database (it failed, was deleted or
    /// replaced): said in one line with where the measurements are, for a
    /// non-zero exit; a run is never left reading "process died" when the
    /// database can still be written.
    pub fn finish(&mut self, status: RunStatus) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        self.finished = true;
        if let Some(view) = &mut self.progress {
            view.finish();
        }
        if let (Some(path), Some(installed)) = (&self.args.pcap, self.installed.take()) {
            installed.flush();
            errln!(
                "linerate: {} frames sampled to {} (the first {} of each trial at port B, and those around losses)",
                installed.frames_written(),
                path.display(),
                self.args.pcap_frames
            );
        }
        if let (Some((_, store)), Some(id)) = (&self.lost, self.run_id) {
            // Space freed since, or the failure passed: not "process died".
            let _ = store.finish_run(id, RunStatus::Interrupted, &now());
            self.end_unrecorded = !store.end_recorded(id);
        }
        let lost = self.storage_lost();
        if let (Some(store), Some(id), None) = (&self.store, self.run_id, &lost) {
            match store.finish_run(id, status, &now()) {
                Err(e) => errln!("linerate: warning: {e}"),
                Ok(()) if status == RunStatus::Complete => errln!(
                    "linerate: stored as run {id} in {} ('linerate show {id}')",
                    store.path().display()
                ),
                Ok(()) => errln!(
                    "linerate: stored as run {id}, incomplete, with every trial it finished ('linerate show {id}')"
                ),
            }
        }
        self.emit(
            "run_done",
            json!({"run_id": self.run_id, "status": status.key()}),
        );
        match lost {
            Some(why) => bail!(Environment, "{why}"),
            None => Ok(()),
        }
    }

    fn emit(&mut self, name: &str, fields: serde_json::Value) {
        crate::events::notify(name, &fields);
        if let Some(ev) = &mut self.events {
            ev.emit(name, fields);
        }
    }
}

impl Drop for Recorder {
    /// A run left by an error (`?`) or a panic is marked interrupted: its
    /// finished trials stay, and it never reads as complete.
    fn drop(&mut self) {
        let begun = self.progress.is_some();
        if begun {
            if let Err(e) = self.finish(RunStatus::Interrupted) {
                errln!("linerate: warning: {e}");
            }
        }
    }
}
