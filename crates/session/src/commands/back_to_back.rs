//! `linerate back-to-back`: the longest burst at the burst rate without
//! loss (RFC 2544 section 26.4 as updated by RFC 9004), repeated, with the
//! DUT buffer time it implies.

use super::rfc2544::EngineRunner;
use super::session::{self, fps_within_line, parse_rate};
use crate::error::{bail, err, Result};
use crate::exit::Outcome;
use crate::method_args::BackToBackArgs;
use crate::ports::{parse_share, parse_trial_duration, Zero};
use crate::recorder::Recorder;
use linerate_method::back_to_back::{self, BackToBackConfig};
use linerate_method::spec::Step;
use linerate_method::{find_throughput, Progress, ThroughputConfig};
use linerate_results::methods::BackToBackReport;
use linerate_results::{report, TrialResult};
use linerate_store::RunStatus;
use linerate_wire::Frames;
use std::sync::atomic::AtomicBool;

/// `--max-burst`: frames (`100000`) or a time at the burst rate (`2s`).
fn max_burst_frames(text: &str, burst_fps: f64) -> Result<u64> {
    let t = text.trim().replace('_', "");
    if let Ok(n) = t.parse::<u64>() {
        return Ok(n);
    }
    let d = humantime::parse_duration(&t).map_err(|_| {
        err!(
            BadInput,
            "--max-burst '{text}' is neither a number of frames (100000) nor a time (2s, 500ms)"
        )
    })?;
    Ok((d.as_secs_f64() * burst_fps).round() as u64)
}

pub fn run(args: BackToBackArgs, interrupt: &AtomicBool) -> Result<Outcome> {
    let bed_plan = args.ports.plan()?.for_capture(args.record.pcap.is_some());
    let frames = args.frames.frames(&bed_plan.encap)?;
    let resolution = parse_share(&args.resolution, "--resolution", Zero::Refused)?;
    let trial_duration = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
    let max_rate = args
        .max_rate
        .as_deref()
        .map(|t| parse_rate(t, "--max-rate"))
        .transpose()?;
    let throughput = args
        .throughput
        .as_deref()
        .map(|t| parse_rate(t, "--throughput"))
        .transpose()?;
    if args.repeat == 0 {
        bail!(
            BadInput,
            "--repeat 0: give at least 1 repetition (RFC 2544 asks for 50)"
        );
    }
    crate::outputs::Outputs::new()
        .json(args.json.as_deref())
        .record(&args.record)
        .check()?;

    let mut recorder = Recorder::open(&args.record)?.json_file(args.json.as_deref());
    let mut s = session::open(&bed_plan, &args.dut_cpu, &frames, "back-to-back frames")?;
    let mut plans: Vec<(&Frames, f64, BackToBackConfig, Option<f64>)> = Vec::new();
    for frames in &frames {
        let line_fps = s.bed.line_rate_fps(frames);
        let burst_fps = match (&max_rate, &args.max_rate) {
            (Some(r), Some(t)) => fps_within_line(&s.bed, *r, t, "--max-rate", frames)?,
            _ => line_fps,
        };
        let cfg = BackToBackConfig {
            burst_fps,
            max_burst: max_burst_frames(&args.max_burst, burst_fps)?,
            resolution,
            repeat: args.repeat,
        };
        cfg.validate()?;
        let known = match (&throughput, &args.throughput) {
            (Some(r), Some(t)) => Some(fps_within_line(&s.bed, *r, t, "--throughput", frames)?),
            _ => None,
        };
        plans.push((frames, line_fps, cfg, known));
    }
    s.ready()?;
    recorder.begin(s.record_info("back-to-back", &frames, trial_duration.as_secs_f64()))?;

    let mut rep = BackToBackReport {
        run: s.run.clone(),
        repeat: args.repeat,
        resolution,
        results: Vec::new(),
        interrupted: None,
    };
    for (search_no, (frames, line_fps, cfg, known)) in plans.into_iter().enumerate() {
        let frame = frames.largest();
        let mut trials: Vec<TrialResult> = Vec::new();
        let keep = |result: &TrialResult, trials: &mut Vec<TrialResult>, rec: &mut Recorder| {
            trials.push(result.clone());
            let mut partial = rep.clone();
            partial.interrupted = Some(session::unfinished(frame, trials.clone()));
            rec.save_partial(&partial);
        };
        // RFC 9004: the throughput first, for the corrected buffer time.
        let mut search = None;
        let throughput_fps = match known {
            Some(fps) => fps,
            None => {
                eprintln!(
                    "linerate: RFC 2544 throughput of {} first (RFC 9004 needs it for the buffer time)",
                    frames.describe()
                );
                let mut tcfg = ThroughputConfig::new(cfg.burst_fps, trial_duration);
                tcfg.resolution = ThroughputConfig::DEFAULT_RESOLUTION;
                tcfg.mix = frames.mix().cloned();
                let mut runner = EngineRunner {
                    engine: &mut s.bed.engine,
                    interrupt,
                    cpu: s.cpu.as_ref(),
                };
                let found = find_throughput(&mut runner, frame, &tcfg, line_fps, &mut |p| {
                    recorder.search_progress(search_no, &p, line_fps);
                    if let Progress::TrialDone { result, .. } = p {
                        keep(result, &mut trials, &mut recorder);
                    }
                });
                match found {
                    Ok(r) => {
                        let fps = r.throughput_fps;
                        search = Some(r);
                        fps
                    }
                    Err(e) => {
                        rep.interrupted = Some(session::unfinished(frame, trials));
                        let table = report::back_to_back_table(&rep);
                        return session::stopped(e, &mut recorder, &rep, table);
                    }
                }
            }
        };
        let mut runner = EngineRunner {
            engine: &mut s.bed.engine,
            interrupt,
            cpu: s.cpu.as_ref(),
        };
        let earlier = trials.len();
        let outcome = back_to_back::back_to_back(
            &mut runner,
            frames,
            &cfg,
            throughput_fps,
            line_fps,
            &mut |step: Step| {
                recorder.step(search_no, earlier, &step, line_fps);
                if let Step::Done { result, .. } = step {
                    keep(result, &mut trials, &mut recorder);
                }
            },
        );
        match outcome {
            Ok(mut result) => {
                result.throughput_search = search;
                rep.results.push(result);
            }
            Err(e) => {
                rep.interrupted = Some(session::unfinished(frame, trials));
                let table = report::back_to_back_table(&rep);
                return session::stopped(e, &mut recorder, &rep, table);
            }
        }
        recorder.save_partial(&rep);
    }
    recorder.print(&report::back_to_back_table(&rep));
    recorder.save(&rep)?;
    recorder.finish(RunStatus::Complete);
    recorder.saved_note();
    Ok(Outcome::Passed)
}

#[cfg(test)]
mod properties;
