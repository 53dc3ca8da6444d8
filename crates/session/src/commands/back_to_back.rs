//! `linerate back-to-back`: the longest burst at the burst rate without
//! loss (RFC 2544 section 26.4 as updated by RFC 9004), repeated, with the
//! DUT buffer time it implies.

use crate::driver::EngineRunner;
use crate::driver::{self, fps_within_line};
use crate::dut_cpu::DutCpuPlan;
use crate::error::{err, Result};
use crate::exit::Outcome;
use crate::plan::BedPlan;
use crate::recorder::RecordPlan;
use crate::recorder::Recorder;
use crate::sizes::each_size;
use linerate_method::back_to_back::{self, BackToBackConfig};
use linerate_method::spec::Step;
use linerate_method::{find_throughput, Progress, ThroughputConfig};
use linerate_results::methods::BackToBackReport;
use linerate_results::report;
use linerate_store::RunStatus;
use linerate_wire::{Frames, Rate};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// `--max-burst`: frames (`100000`) or a time at the burst rate (`2s`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum MaxBurst {
    Frames(u64),
    Time(Duration),
}

impl MaxBurst {
    pub fn parse(text: &str) -> Result<MaxBurst> {
        let t = text.trim().replace('_', "");
        if let Ok(n) = t.parse::<u64>() {
            return Ok(MaxBurst::Frames(n));
        }
        let d = humantime::parse_duration(&t).map_err(|_| {
            err!(
                BadInput,
                "--max-burst '{text}' is neither a number of frames (100000) nor a time (2s, 500ms)"
            )
        })?;
        Ok(MaxBurst::Time(d))
    }

    /// The longest burst in frames at `burst_fps`.
    pub fn frames(self, burst_fps: f64) -> u64 {
        match self {
            MaxBurst::Frames(n) => n,
            MaxBurst::Time(d) => (d.as_secs_f64() * burst_fps).round() as u64,
        }
    }
}

/// A back-to-back run, checked: everything `linerate back-to-back` was
/// given, as values.
#[derive(Debug, Clone)]
pub struct BackToBackPlan {
    pub bed: BedPlan,
    /// The frame sizes or mixes, in order.
    pub frames: Vec<Frames>,
    /// `--max-rate`: the burst rate, as written and parsed (default: line rate).
    pub max_rate: Option<(String, Rate)>,
    pub max_burst: MaxBurst,
    /// Repetitions of the search for the longest burst (at least 1).
    pub repeat: usize,
    /// Resolution of each repetition, as a ratio.
    pub resolution: f64,
    /// `--throughput`: the device's throughput, as written and parsed
    /// (default: a throughput search runs first).
    pub throughput: Option<(String, Rate)>,
    /// Trial duration of that throughput search.
    pub trial_duration: Duration,
    pub json: Option<PathBuf>,
    pub dut_cpu: DutCpuPlan,
    pub record: RecordPlan,
}

impl BackToBackPlan {
    /// The test's settings at a burst rate of `burst_fps` frames/s.
    pub fn config(&self, burst_fps: f64) -> BackToBackConfig {
        BackToBackConfig {
            burst_fps,
            max_burst: self.max_burst.frames(burst_fps),
            resolution: self.resolution,
            repeat: self.repeat,
        }
    }
}

pub fn run(plan: BackToBackPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let frames = &plan.frames;
    let trial_duration = plan.trial_duration;
    let mut recorder = Recorder::open(&plan.record)?.json_file(plan.json.as_deref());
    let mut s = driver::open(
        &plan.bed,
        &plan.dut_cpu,
        frames,
        "back-to-back frames",
        interrupt,
    )?;
    let mut plans: Vec<(&Frames, f64, BackToBackConfig, Option<f64>)> = Vec::new();
    for frames in frames {
        let line_fps = s.bed.line_rate_fps(frames);
        let burst_fps = match &plan.max_rate {
            Some((t, r)) => fps_within_line(&s.bed, *r, t, "--max-rate", frames)?,
            None => line_fps,
        };
        let cfg = plan.config(burst_fps);
        cfg.validate()?;
        let known = match &plan.throughput {
            Some((t, r)) => Some(fps_within_line(&s.bed, *r, t, "--throughput", frames)?),
            None => None,
        };
        plans.push((frames, line_fps, cfg, known));
    }
    s.ready()?;
    recorder.begin(s.record_info("back-to-back", frames, trial_duration.as_secs_f64()))?;

    let mut rep = BackToBackReport {
        run: s.run.clone(),
        repeat: plan.repeat,
        resolution: plan.resolution,
        results: Vec::new(),
        interrupted: None,
    };
    let bed = &mut s.bed;
    let cpu = s.cpu.as_ref();
    let measured = each_size(
        plans,
        &mut rep,
        &mut recorder,
        |(frames, ..)| frames.largest(),
        |search_no, (frames, line_fps, cfg, known), trials| {
            // RFC 9004: the throughput first, for the corrected buffer time.
            let mut search = None;
            let throughput_fps = match known {
                Some(fps) => fps,
                None => {
                    errln!(
                        "linerate: RFC 2544 throughput of {} first (RFC 9004 needs it for the buffer time)",
                        frames.describe()
                    );
                    let mut tcfg = ThroughputConfig::new(cfg.burst_fps, trial_duration);
                    tcfg.resolution = ThroughputConfig::DEFAULT_RESOLUTION;
                    tcfg.mix = frames.mix().cloned();
                    let mut runner = EngineRunner::on(bed, interrupt, cpu);
                    let frame = frames.largest();
                    let found = find_throughput(&mut runner, frame, &tcfg, line_fps, &mut |p| {
                        trials.recorder.search_progress(search_no, &p, line_fps);
                        if let Progress::TrialDone { result, .. } = p {
                            trials.done(result);
                        }
                    })?;
                    let fps = found.throughput_fps;
                    search = Some(found);
                    fps
                }
            };
            let mut runner = EngineRunner::on(bed, interrupt, cpu);
            let earlier = trials.count();
            let mut result = back_to_back::back_to_back(
                &mut runner,
                frames,
                &cfg,
                throughput_fps,
                line_fps,
                &mut |step: Step| {
                    trials.recorder.step(search_no, earlier, &step, line_fps);
                    if let Step::Done { result, .. } = step {
                        trials.done(result);
                    }
                },
            )?;
            result.throughput_search = search;
            Ok(result)
        },
        |rep, result| rep.results.push(result),
    );
    if let Err(e) = measured {
        let table = report::back_to_back_table(&rep);
        return driver::stopped(e, &mut recorder, &rep, table);
    }
    recorder.print(&report::back_to_back_table(&rep));
    recorder.save(&rep)?;
    recorder.finish(RunStatus::Complete)?;
    recorder.saved_note();
    Ok(Outcome::Passed)
}

#[cfg(test)]
mod properties;
