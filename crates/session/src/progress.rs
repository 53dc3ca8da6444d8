//! Progress on stderr while trials run; stdout is kept for the table.
//!
//! Three modes:
//! - **live** (stderr is a terminal): a status line redrawn four times a
//!   second (frame size, rate, trial, elapsed, estimate of the time left,
//!   the last trial's loss), above it one permanent line per finished trial;
//! - **lines** (stderr is a pipe or a file, e.g. a CI log): one plain line
//!   per trial, nothing redrawn;
//! - **quiet** (`--quiet`): nothing.

use linerate_method::spec::Step;
use linerate_method::{relative_width, Progress};
use linerate_results::report::{recovery_wait, thousands};
use linerate_results::TrialResult;
use linerate_wire::{FrameMix, FrameSize};
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Live,
    Lines,
    Quiet,
}

/// Trials a search takes when none has finished yet to learn from (see
/// the search's documentation: 4 to 20 at 1 % resolution).
const TRIALS_PER_SEARCH_GUESS: f64 = 8.0;

/// What the live line shows.
struct State {
    start: Instant,
    sizes: usize,
    resolution: f64,
    trial_s: f64,
    search_no: usize,
    /// What the running trial sends, as [`frames_tag`] names it.
    frames: String,
    trial_no: usize,
    intended_fps: f64,
    share_of_line: f64,
    /// The bracket's relative width before the running trial (1 before the first pass).
    width: f64,
    trial_started: Option<Instant>,
    trials_done: usize,
    /// Trials of each finished search.
    finished_searches: Vec<usize>,
    trials_this_search: usize,
    last_loss: Option<f64>,
}

impl State {
    /// Seconds left: trials still to run times the mean wall time of a trial.
    fn eta(&self) -> Option<f64> {
        let running = self
            .trial_started
            .map_or(0.0, |t| t.elapsed().as_secs_f64());
        // Mean wall time of a finished trial (straggler wait and set-up
        // included); before the first, the trial's duration and a margin.
        let per_trial = if self.trials_done > 0 {
            (self.start.elapsed().as_secs_f64() - running) / self.trials_done as f64
        } else {
            self.trial_s * 1.3
        };
        let per_search = if self.finished_searches.is_empty() {
            TRIALS_PER_SEARCH_GUESS
        } else {
            self.finished_searches.iter().sum::<usize>() as f64
                / self.finished_searches.len() as f64
        };
        // This search: halvings left once bracketed, else the typical count.
        let this = if self.width < 1.0 && self.resolution > 0.0 {
            (self.width / self.resolution).log2().ceil().max(1.0)
        } else {
            (per_search - self.trials_this_search as f64).max(1.0)
        };
        let later = self.sizes.saturating_sub(self.search_no + 1) as f64 * per_search;
        Some(((this + later) * per_trial - running).max(0.0))
    }

    fn line(&self) -> String {
        let eta = self.eta().map_or("?".into(), |s| format!("~{}", clock(s)));
        let loss = self
            .last_loss
            .map_or("-".into(), |l| format!("{:.4} %", 100.0 * l));
        format!(
            "[{}, size {}/{}] trial {} at {} fps ({:.1} % of line)  elapsed {}  left {}  last loss {}",
            self.frames.trim_start(),
            self.search_no + 1,
            self.sizes.max(1),
            self.trial_no,
            thousands(self.intended_fps.round() as u64),
            self.share_of_line,
            clock(self.start.elapsed().as_secs_f64()),
            eta,
            loss
        )
    }
}

/// `1:05`, `12:00`, `1:02:03`.
fn clock(secs: f64) -> String {
    let s = secs.round() as u64;
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

pub struct ProgressView {
    mode: Mode,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    ticker: Option<JoinHandle<()>>,
}

impl ProgressView {
    /// `sizes` searches of trials of `trial_s` seconds, ending at `resolution`.
    pub fn new(quiet: bool, sizes: usize, trial_s: f64, resolution: f64) -> ProgressView {
        let mode = if quiet {
            Mode::Quiet
        } else if std::io::stderr().is_terminal() {
            Mode::Live
        } else {
            Mode::Lines
        };
        let state = Arc::new(Mutex::new(State {
            start: Instant::now(),
            sizes,
            resolution,
            trial_s,
            search_no: 0,
            frames: String::new(),
            trial_no: 0,
            intended_fps: 0.0,
            share_of_line: 0.0,
            width: 1.0,
            trial_started: None,
            trials_done: 0,
            finished_searches: Vec::new(),
            trials_this_search: 0,
            last_loss: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let ticker = (mode == Mode::Live).then(|| {
            let (state, stop) = (state.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(250));
                    let s = state.lock().unwrap_or_else(|e| e.into_inner());
                    if s.trial_started.is_some() && !stop.load(Ordering::Relaxed) {
                        let mut err = std::io::stderr().lock();
                        let _ = write!(err, "\r\x1b[2K{}", s.line());
                        let _ = err.flush();
                    }
                }
            })
        });
        ProgressView {
            mode,
            state,
            stop,
            ticker,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A search's trial starts or ends (`search_no` counts the frame sizes).
    pub fn on(&self, search_no: usize, p: &Progress, line_rate_fps: f64) {
        match p {
            Progress::TrialStarting {
                frame,
                mix,
                trial_no,
                intended_fps,
                lo,
                hi,
            } => {
                let mut s = self.state();
                if search_no != s.search_no {
                    let n = s.trials_this_search;
                    s.finished_searches.push(n);
                    s.trials_this_search = 0;
                    s.search_no = search_no;
                }
                s.frames = frames_tag(*frame, *mix);
                s.trial_no = *trial_no;
                s.intended_fps = *intended_fps;
                s.share_of_line = 100.0 * intended_fps / line_rate_fps;
                s.width = if *lo > 0.0 {
                    relative_width(*lo, *hi)
                } else {
                    1.0
                };
                s.trial_started = Some(Instant::now());
                if self.mode == Mode::Lines {
                    show(p, line_rate_fps);
                }
                drop(s);
                self.redraw();
            }
            Progress::TrialDone {
                trial_no,
                result,
                passed,
                ..
            } => {
                let mut s = self.state();
                s.trial_started = None;
                s.trials_done += 1;
                s.trials_this_search += 1;
                s.last_loss = Some(result.loss_ratio);
                let intended = s.intended_fps;
                match self.mode {
                    Mode::Lines => show(p, line_rate_fps),
                    Mode::Live => {
                        let start = starting_text(
                            &s.frames,
                            *trial_no,
                            intended,
                            line_rate_fps,
                            f64::NAN,
                            f64::NAN,
                        );
                        errln!("\r\x1b[2K{start}{}", done_text(result, Some(*passed)));
                    }
                    Mode::Quiet => {}
                }
            }
        }
    }

    /// `linerate trial`: its one trial starts.
    /// `tag` names the frames, as [`frames_tag`] does.
    pub fn single_trial_started(&self, tag: String, intended_fps: f64, line_rate_fps: f64) {
        let mut s = self.state();
        s.frames = tag;
        s.trial_no = 1;
        s.intended_fps = intended_fps;
        s.share_of_line = 100.0 * intended_fps / line_rate_fps;
        s.trial_started = Some(Instant::now());
        drop(s);
        self.redraw();
    }

    /// `linerate trial`: its one trial ended (the summary follows on stdout).
    pub fn single_trial_done(&self) {
        self.state().trial_started = None;
        self.clear();
    }

    fn redraw(&self) {
        if self.mode == Mode::Live {
            let s = self.state();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K{}", s.line());
            let _ = err.flush();
        }
    }

    fn clear(&self) {
        if self.mode == Mode::Live {
            let _s = self.state();
            errp!("\r\x1b[2K");
        }
    }

    /// Stops the live line (before the table is printed).
    pub fn finish(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
        self.clear();
    }
}

impl Drop for ProgressView {
    fn drop(&mut self) {
        self.finish();
    }
}

/// One plain line per trial, as the lines mode prints it (also used by
/// `calibrate`, which has no live display).
pub fn show(p: &Progress, line_rate_fps: f64) {
    notify_trial(p);
    match p {
        Progress::TrialStarting {
            frame,
            mix,
            trial_no,
            intended_fps,
            lo,
            hi,
        } => errp!(
            "{}",
            starting_text(
                &frames_tag(*frame, *mix),
                *trial_no,
                *intended_fps,
                line_rate_fps,
                *lo,
                *hi
            )
        ),
        Progress::TrialDone { result, passed, .. } => {
            errln!("{}", done_text(result, Some(*passed)))
        }
    }
}

/// Tells the events' listener about a trial of a command that does not
/// record through the `Recorder` (which tells it itself).
fn notify_trial(p: &Progress) {
    match p {
        Progress::TrialStarting {
            frame,
            trial_no,
            intended_fps,
            ..
        } => crate::events::notify(
            "trial_started",
            &serde_json::json!({"frame_size": frame.frame(), "trial_no": trial_no, "intended_fps": intended_fps}),
        ),
        Progress::TrialDone {
            trial_no,
            result,
            passed,
            ..
        } => crate::events::notify(
            "trial_done",
            &serde_json::json!({"trial_no": trial_no, "passed": passed, "result": result}),
        ),
    }
}

/// How progress lines name what a trial sends: `   64 B` (aligned), or a
/// mix by its name (`IMIX 1`) rather than by its largest frame.
pub fn frames_tag(frame: FrameSize, mix: Option<&FrameMix>) -> String {
    match mix {
        Some(m) => m.name.clone(),
        None => format!("{:>5} B", frame.frame()),
    }
}

/// `[   64 B] trial  1:   1,488,095 fps ( 10.0 % of line)  [pass 0 .. fail 14,880,952] ... `
fn starting_text(
    frames: &str,
    trial_no: usize,
    intended_fps: f64,
    line_rate_fps: f64,
    lo: f64,
    hi: f64,
) -> String {
    let bracket = if lo.is_finite() && hi.is_finite() {
        format!(
            "  [pass {} .. fail {}]",
            thousands(lo.round() as u64),
            thousands(hi.round() as u64)
        )
    } else {
        String::new()
    };
    format!(
        "[{frames}] trial {:>2}: {:>11} fps ({:5.1} % of line){bracket} ... ",
        trial_no,
        thousands(intended_fps.round() as u64),
        100.0 * intended_fps / line_rate_fps,
    )
}

/// `pass: tx 1,000 rx 1,000 loss 0.0000 %`
fn done_text(result: &TrialResult, passed: Option<bool>) -> String {
    let verdict = match passed {
        Some(true) => "pass",
        Some(false) => "FAIL",
        None => "done",
    };
    let paused = result.paused_share();
    let short = if result.generator_short {
        "  (tester could not offer this rate)".to_string()
    } else if paused > linerate_method::frame_loss::MAX_PAUSED_SHARE && passed == Some(true) {
        // A throughput search counts such a pass at the rate the device saw.
        format!(
            "  (generator paused {:.1} % of the trial: the device saw {} frames/s)",
            100.0 * paused,
            thousands(result.offered_fps.round() as u64)
        )
    } else if paused > linerate_method::frame_loss::MAX_PAUSED_SHARE {
        // Why a trial without loss can fail: the device saw a lower rate.
        format!("  (generator paused {:.1} % of the trial)", 100.0 * paused)
    } else {
        String::new()
    };
    format!(
        "{verdict}: tx {} rx {} loss {:.4} %{short}{}{}",
        thousands(result.tx_frames),
        thousands(result.rx_frames),
        100.0 * result.loss_ratio,
        recovery_text(result),
        stolen_text(result)
    )
}

/// `  (the hypervisor took 3.0 % of the DUT's CPU)`: a lab on a virtual
/// machine whose router lost CPU time to other guests during the trial,
/// the likeliest reason a loss there does not repeat. Said from 1 %: less
/// is one or two clock ticks of a short trial.
fn stolen_text(result: &TrialResult) -> String {
    match result.dut_cpu.and_then(|c| c.stolen_pct) {
        Some(s) if s >= 1.0 => format!("  (the hypervisor took {s:.1} % of the DUT's CPU)"),
        _ => String::new(),
    }
}

/// `  (waited 4.2 s first for the DUT to stop forwarding earlier frames)`,
/// when the trial had to wait for the DUT before it started.
fn recovery_text(result: &TrialResult) -> String {
    match result.recovery.filter(|r| r.waited()) {
        Some(r) if r.limit_reached => format!(
            "  (the DUT was still forwarding earlier frames after {:.1} s: result may be poisoned)",
            r.waited_s
        ),
        Some(r) => format!(
            "  (waited {} first for the DUT to stop forwarding earlier frames)",
            recovery_wait(r.waited_s)
        ),
        None => String::new(),
    }
}

/// Progress on stderr, one line per trial; stdout is kept for the table.
pub(crate) fn show_step(step: &Step, line_rate_fps: f64) {
    match step {
        Step::Starting {
            frame,
            trial_no,
            spec,
            why,
        } => {
            errp!(
                "[{}] trial {:>3}: {:>11} fps ({:5.1} % of line) {:>7} {why} ... ",
                frames_tag(*frame, spec.mix.as_ref()),
                trial_no,
                thousands(spec.intended_fps.round() as u64),
                100.0 * spec.intended_fps / line_rate_fps,
                humantime::format_duration(spec.duration).to_string(),
            );
        }
        Step::Done { result, passed, .. } => {
            let verdict = if *passed { "pass" } else { "FAIL" };
            let short = if result.generator_short {
                "  (tester could not offer this rate)"
            } else {
                ""
            };
            errln!(
                "{verdict}: tx {} rx {} loss {:.4} %{short}{}",
                thousands(result.tx_frames),
                thousands(result.rx_frames),
                100.0 * result.loss_ratio,
                recovery_text(result)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mix_is_shown_by_its_name_not_its_largest_frame() {
        let imix1 = FrameMix::parse("imix1").unwrap();
        let tag = frames_tag(imix1.largest(), Some(&imix1));
        assert_eq!(tag, "IMIX 1");
        let line = starting_text(&tag, 1, 1000.0, 10_000.0, f64::NAN, f64::NAN);
        assert!(line.starts_with("[IMIX 1] trial  1:"), "{line}");
        let size = frames_tag(FrameSize::from_frame(64).unwrap(), None);
        assert_eq!(size, "   64 B", "sizes stay aligned as before");
    }

    #[test]
    fn a_paused_generator_is_named_beside_the_verdict() {
        let mut t: TrialResult = serde_json::from_str(
            r#"{"frame_size":64,"l3_length":46,"duration_s":1.0,"intended_fps":0.0,"offered_fps":0.0,"intended_frames":10,"tx_frames":10,"rx_frames":10,"lost_frames":0,"loss_ratio":0.0,"reordered":0,"duplicated":0,"latency_ns":null,"generator_short":false,"engine":"x"}"#,
        )
        .unwrap();
        assert_eq!(done_text(&t, Some(true)), "pass: tx 10 rx 10 loss 0.0000 %");
        // A wait for the DUT before the trial is said beside the verdict.
        let mut w = t.clone();
        w.recovery = Some(linerate_results::Recovery {
            waited_s: 4.24,
            ..Default::default()
        });
        assert!(
            done_text(&w, Some(true))
                .ends_with("(waited 4.2 s first for the DUT to stop forwarding earlier frames)"),
            "{}",
            done_text(&w, Some(true))
        );
        t.generator_paused_ns = Some(50_000_000);
        let line = done_text(&t, Some(false));
        assert!(
            line.ends_with("(generator paused 5.0 % of the trial)"),
            "{line}"
        );
        // Time the hypervisor took from the lab's router, from 1 %.
        let cpu = |stolen_pct| linerate_results::DutCpu {
            total_pct: 80.0,
            traffic_pct: 79.0,
            stolen_pct,
        };
        t.dut_cpu = Some(cpu(Some(3.04)));
        let line = done_text(&t, Some(false));
        assert!(
            line.ends_with("(the hypervisor took 3.0 % of the DUT's CPU)"),
            "{line}"
        );
        for quiet in [None, Some(0.0), Some(0.9)] {
            t.dut_cpu = Some(cpu(quiet));
            assert!(!done_text(&t, Some(false)).contains("hypervisor"));
        }
    }

    #[test]
    fn clock_reads_like_a_clock() {
        assert_eq!(clock(5.0), "0:05");
        assert_eq!(clock(65.4), "1:05");
        assert_eq!(clock(3723.0), "1:02:03");
    }

    #[test]
    fn estimate_shrinks_as_sizes_finish() {
        let view = ProgressView::new(true, 3, 1.0, 0.01);
        let eta_first = view.state().eta().unwrap();
        {
            let mut s = view.state();
            s.search_no = 2;
            s.width = 0.04;
        }
        let eta_last = view.state().eta().unwrap();
        assert!(eta_last < eta_first, "{eta_last} < {eta_first}");
        // 4 % wide at 1 % resolution: two halvings left.
        assert!((eta_last - 2.0 * 1.3).abs() < 1e-9, "{eta_last}");
    }
}
