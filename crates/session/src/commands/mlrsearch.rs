//! `linerate mlrsearch`: NDR and PDR per frame size in one search
//! (draft-ietf-bmwg-mlrsearch), with relevant bounds and conditional
//! throughput.

use super::rfc2544::EngineRunner;
use super::session::{self, fps_within_line, parse_rate};
use crate::dut_cpu::DutCpuPlan;
use crate::error::Result;
use crate::exit::Outcome;
use crate::method_args::MlrsearchArgs;
use crate::plan::BedPlan;
use crate::ports::{parse_share, parse_trial_duration, Zero};
use crate::recorder::RecordPlan;
use crate::recorder::Recorder;
use linerate_method::mlrsearch::{self, MlrConfig};
use linerate_method::spec::Step;
use linerate_results::methods::MlrSearchReport;
use linerate_results::{report, TrialResult};
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
    /// Every value of `args` checked (output files and the search goals
    /// included); nothing on the machine is touched.
    pub fn from_args(args: &MlrsearchArgs) -> Result<MlrsearchPlan> {
        let bed = args.ports.plan()?.for_capture(args.record.pcap.is_some());
        let frames = args.frames.frames(&bed.encap)?;
        let final_trial = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
        let initial_trial = args
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
        let exceed_ratio = parse_share(&args.exceed_ratio, "--exceed-ratio", Zero::Allowed)?;
        let width = parse_share(&args.width, "--width", Zero::Refused)?;
        let pdr_loss = parse_share(&args.pdr_loss, "--pdr-loss", Zero::Allowed)?;
        let max_rate = args
            .max_rate
            .as_deref()
            .map(|t| parse_rate(t, "--max-rate").map(|r| (t.to_string(), r)))
            .transpose()?;
        crate::outputs::Outputs::new()
            .json(args.json.as_deref())
            .record(&args.record.plan())
            .check()?;
        let plan = MlrsearchPlan {
            bed,
            frames,
            final_trial,
            initial_trial,
            duration_sum,
            exceed_ratio,
            width,
            pdr_loss,
            max_rate,
            json: args.json.clone(),
            dut_cpu: args.dut_cpu.plan(),
            record: args.record.plan(),
        };
        // The goals are checked before any port is opened.
        plan.goals(1.0).validate()?;
        Ok(plan)
    }

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
    let mut s = session::open(&plan.bed, &plan.dut_cpu, frames, "MLRsearch")?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;

    fn plan(args: &str) -> Result<MlrsearchPlan> {
        let argv = format!("linerate mlrsearch --lab --no-db {args}");
        let Command::Mlrsearch(a) = Cli::try_parse_from(argv.split_whitespace())?.command else {
            unreachable!()
        };
        MlrsearchPlan::from_args(&a)
    }

    #[test]
    fn an_mlrsearch_plan_holds_every_value_checked() {
        let p = plan(
            "--sizes 64 --trial-duration 4s --initial-trial-duration 1s --duration-sum 8s \
             --exceed-ratio 50% --width 2% --pdr-loss 1% --max-rate 2Mpps",
        )
        .unwrap();
        assert_eq!(p.frames.len(), 1);
        assert_eq!(p.frames[0].largest().frame(), 64);
        assert_eq!(p.final_trial, Duration::from_secs(4));
        assert_eq!(p.initial_trial, Duration::from_secs(1));
        assert_eq!(p.duration_sum, Duration::from_secs(8));
        assert!((p.exceed_ratio - 0.5).abs() < 1e-12);
        assert!((p.width - 0.02).abs() < 1e-12);
        assert!((p.pdr_loss - 0.01).abs() < 1e-12);
        assert_eq!(p.max_rate.as_ref().map(|r| r.0.as_str()), Some("2Mpps"));
        assert!(p.bed.is_lab());
        let goals = p.goals(1000.0);
        assert_eq!(goals.max_fps, 1000.0);
        assert!(goals
            .goals
            .iter()
            .all(|g| g.duration_sum == Duration::from_secs(8)));
        // The defaults: the final trial duration for the other two.
        let p = plan("--trial-duration 3s").unwrap();
        assert_eq!(p.initial_trial, Duration::from_secs(3));
        assert_eq!(p.duration_sum, Duration::from_secs(3));
        for (args, says) in [
            ("--trial-duration 1ms", "--trial-duration"),
            ("--initial-trial-duration soon", "--initial-trial-duration"),
            ("--duration-sum 1ms", "--duration-sum"),
            ("--exceed-ratio 2", "--exceed-ratio"),
            ("--width 0", "--width"),
            ("--pdr-loss lots", "--pdr-loss"),
            ("--max-rate fast", "--max-rate"),
            ("--width 60%", "width 0.6"),
            ("--initial-trial-duration 5s", "initial trial duration"),
            ("--sizes 20", "20"),
        ] {
            let e = plan(args).unwrap_err();
            assert_eq!(e.kind(), crate::error::Kind::BadInput, "{args}: {e:?}");
            assert!(crate::exit::one_line(&e).contains(says), "{args}: {e}");
        }
    }
}
