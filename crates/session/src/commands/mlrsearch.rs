//! `linerate mlrsearch`: NDR and PDR per frame size in one search
//! (draft-ietf-bmwg-mlrsearch), with relevant bounds and conditional
//! throughput.

use crate::driver::EngineRunner;
use crate::driver::{self, fps_within_line};
use crate::dut_cpu::DutCpuPlan;
use crate::error::Result;
use crate::exit::Outcome;
use crate::plan::BedPlan;
use crate::recorder::RecordPlan;
use crate::recorder::Recorder;
use crate::sizes::each_size;
use linerate_method::mlrsearch::{self, MlrConfig};
use linerate_method::spec::Step;
use linerate_results::methods::MlrSearchReport;
use linerate_results::report;
use linerate_store::RunStatus;
use linerate_wire::{Frames, Rate};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// An MLRsearch run, checked: everything `linerate mlrsearch` was given,
/// as values.
#[derive(Debug, Clone)]
pub struct MlrsearchPlan {
    pub bed: BedPlan,
    /// The frame sizes or mixes, in order.
    pub frames: Vec<Frames>,
    /// Goal Final Trial Duration.
    pub final_trial: Duration,
    /// Goal Initial Trial Duration (the final one when not given).
    pub initial_trial: Duration,
    /// Goal Duration Sum (the final trial duration when not given).
    pub duration_sum: Duration,
    /// Goal Exceed Ratio.
    pub exceed_ratio: f64,
    /// Goal Width, as a ratio.
    pub width: f64,
    /// Loss ratio of the PDR goal.
    pub pdr_loss: f64,
    /// `--max-rate`: Max Load, as written and parsed.
    pub max_rate: Option<(String, Rate)>,
    pub json: Option<PathBuf>,
    pub dut_cpu: DutCpuPlan,
    pub record: RecordPlan,
}

impl MlrsearchPlan {
    /// The search's settings for a Max Load of `max_fps` frames/s.
    pub fn goals(&self, max_fps: f64) -> MlrConfig {
        let mut cfg = MlrConfig::ndr_pdr(max_fps, self.final_trial, self.width, self.pdr_loss);
        for g in &mut cfg.goals {
            g.exceed_ratio = self.exceed_ratio;
            g.duration_sum = self.duration_sum;
            g.initial_trial_duration = self.initial_trial;
        }
        cfg
    }
}

pub fn run(plan: MlrsearchPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let frames = &plan.frames;
    let final_trial = plan.final_trial;
    let mut recorder = Recorder::open(&plan.record)?.json_file(plan.json.as_deref());
    let mut s = driver::open(&plan.bed, &plan.dut_cpu, frames, "MLRsearch", interrupt)?;
    let mut plans = Vec::new();
    for frames in frames {
        let line_fps = s.bed.line_rate_fps(frames);
        let max_fps = match &plan.max_rate {
            Some((t, r)) => fps_within_line(&s.bed, *r, t, "--max-rate", frames)?,
            None => line_fps,
        };
        plans.push((frames, line_fps, plan.goals(max_fps)));
    }
    s.ready()?;
    recorder.begin(s.record_info("mlrsearch", frames, final_trial.as_secs_f64()))?;

    let mut rep = MlrSearchReport {
        run: s.run.clone(),
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
        |search_no, (frames, line_fps, cfg), trials| {
            let mut runner = EngineRunner::on(bed, interrupt, cpu);
            let found = mlrsearch::search(&mut runner, frames, &cfg, line_fps, &mut |step| {
                trials.recorder.step(search_no, 0, &step, line_fps);
                if let Step::Done { result, .. } = step {
                    trials.done(result);
                }
            })?;
            Ok(found)
        },
        |rep, result| rep.results.push(result),
    );
    if let Err(e) = measured {
        let table = report::mlrsearch_table(&rep);
        return driver::stopped(e, &mut recorder, &rep, table);
    }
    recorder.print(&report::mlrsearch_table(&rep));
    recorder.save(&rep)?;
    recorder.finish(RunStatus::Complete)?;
    recorder.saved_note();
    Ok(Outcome::Passed)
}
