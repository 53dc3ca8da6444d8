//! `linerate mlrsearch`: NDR and PDR per frame size in one search
//! (draft-ietf-bmwg-mlrsearch), with relevant bounds and conditional
//! throughput.

use super::rfc2544::EngineRunner;
use super::session::{self, fps_within_line, parse_rate};
use crate::error::Result;
use crate::exit::Outcome;
use crate::method_args::MlrsearchArgs;
use crate::ports::{parse_share, parse_trial_duration, Zero};
use crate::recorder::Recorder;
use linerate_method::mlrsearch::{self, MlrConfig};
use linerate_method::spec::Step;
use linerate_results::methods::MlrSearchReport;
use linerate_results::{report, TrialResult};
use linerate_store::RunStatus;
use std::sync::atomic::AtomicBool;

pub fn run(args: MlrsearchArgs, interrupt: &AtomicBool) -> Result<Outcome> {
    let bed_plan = args.ports.plan()?.for_capture(args.record.pcap.is_some());
    let frames = args.frames.frames(&bed_plan.encap)?;
    let final_trial = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
    let initial = args
        .initial_trial_duration
        .as_deref()
        .map(|t| parse_trial_duration(t, "--initial-trial-duration"))
        .transpose()?
        .unwrap_or(final_trial);
    let duration_sum = args
        .duration_sum
        .as_deref()
        .map(|t| parse_trial_duration(t, "--duration-sum"))
        .transpose()?
        .unwrap_or(final_trial);
    let exceed = parse_share(&args.exceed_ratio, "--exceed-ratio", Zero::Allowed)?;
    let width = parse_share(&args.width, "--width", Zero::Refused)?;
    let pdr_loss = parse_share(&args.pdr_loss, "--pdr-loss", Zero::Allowed)?;
    let max_rate = args
        .max_rate
        .as_deref()
        .map(|t| parse_rate(t, "--max-rate"))
        .transpose()?;
    crate::outputs::Outputs::new()
        .json(args.json.as_deref())
        .record(&args.record)
        .check()?;
    // The goals are checked before any port is opened.
    let goals_for = |max_fps: f64| {
        let mut cfg = MlrConfig::ndr_pdr(max_fps, final_trial, width, pdr_loss);
        for g in &mut cfg.goals {
            g.exceed_ratio = exceed;
            g.duration_sum = duration_sum;
            g.initial_trial_duration = initial;
        }
        cfg
    };
    goals_for(1.0).validate()?;

    let mut recorder = Recorder::open(&args.record)?.json_file(args.json.as_deref());
    let mut s = session::open(&bed_plan, &args.dut_cpu, &frames, "MLRsearch")?;
    let mut plans = Vec::new();
    for frames in &frames {
        let line_fps = s.bed.line_rate_fps(frames);
        let max_fps = match (&max_rate, &args.max_rate) {
            (Some(r), Some(t)) => fps_within_line(&s.bed, *r, t, "--max-rate", frames)?,
            _ => line_fps,
        };
        plans.push((frames, line_fps, goals_for(max_fps)));
    }
    s.ready()?;
    recorder.begin(s.record_info("mlrsearch", &frames, final_trial.as_secs_f64()))?;

    let mut rep = MlrSearchReport {
        run: s.run.clone(),
        results: Vec::new(),
        interrupted: None,
    };
    for (search_no, (frames, line_fps, cfg)) in plans.into_iter().enumerate() {
        let frame = frames.largest();
        let mut trials: Vec<TrialResult> = Vec::new();
        let mut on_step = |step: Step| {
            recorder.step(search_no, 0, &step, line_fps);
            if let Step::Done { result, .. } = step {
                trials.push(result.clone());
                let mut partial = rep.clone();
                partial.interrupted = Some(session::unfinished(frame, trials.clone()));
                recorder.save_partial(&partial);
            }
        };
        let mut runner = EngineRunner {
            engine: &mut s.bed.engine,
            interrupt,
            cpu: s.cpu.as_ref(),
        };
        match mlrsearch::search(&mut runner, frames, &cfg, line_fps, &mut on_step) {
            Ok(result) => rep.results.push(result),
            Err(e) => {
                rep.interrupted = Some(session::unfinished(frame, trials));
                let table = report::mlrsearch_table(&rep);
                return session::stopped(e, &mut recorder, &rep, table);
            }
        }
        recorder.save_partial(&rep);
    }
    recorder.print(&report::mlrsearch_table(&rep));
    recorder.save(&rep)?;
    recorder.finish(RunStatus::Complete);
    recorder.saved_note();
    Ok(Outcome::Passed)
}
