//! `linerate cpu-target`: the Cisco report's test "the bit rate was set
//! such that the CPU load was approximately 75 %". The search is
//! linerate-method's (`find_cpu_target`); this parses the options, opens
//! the test bed, runs it per frame size and prints.

use crate::driver::EngineRunner;
use crate::error::{bail, err, Result};
use crate::exit::Outcome;
use crate::plan::BedPlan;
use crate::plan::DutPlan;
use crate::ports::{self};
use crate::recorder::RecordPlan;
use crate::recorder::{Recorder, RunInfo};
use crate::scenario_bed::{prepare, record_of, traffic_checks};
use linerate_engine::EngineError;
use linerate_lab::scenario::Scenario;
use linerate_method::cpu_target::Stopped;
use linerate_method::{find_cpu_target, CpuTargetConfig, CpuTargetProgress};
use linerate_results::cpu_target::{cpu_target_table, CpuTargetReport};
use linerate_store::RunStatus;
use linerate_wire::{FrameSize, Rate};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;

/// A CPU-target run, checked: everything `linerate cpu-target` was given,
/// as values.
#[derive(Debug, Clone)]
pub struct CpuTargetPlan {
    pub bed: BedPlan,
    /// The search's settings: the target and tolerance in percent, the
    /// trial duration, the most trials per frame size.
    pub config: CpuTargetConfig,
    pub frames: Vec<FrameSize>,
    pub max_rate: Option<Rate>,
    /// `--max-rate` as the user wrote it, for messages.
    pub max_rate_text: Option<String>,
    /// The DUT configuration (`--scenario`, one), parsed.
    pub scenario: Option<Scenario>,
    pub json: Option<PathBuf>,
    pub dut: DutPlan,
    pub record: RecordPlan,
}

pub fn run(plan: CpuTargetPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let CpuTargetPlan {
        bed: bed_plan,
        config: cfg,
        frames,
        max_rate,
        max_rate_text,
        scenario,
        json,
        dut,
        record,
    } = plan;
    let (target, duration) = (cfg.target_pct, cfg.trial_duration);
    let max_frame_len = frames.iter().map(|f| f.buffer_len()).max().unwrap_or(0);
    let mut recorder = Recorder::open(&record)?.json_file(json.as_deref());
    let (applied, mut bed) = match &scenario {
        Some(s) => {
            let (a, b) = prepare(&bed_plan, max_frame_len, s, 0)?;
            (Some(a), b)
        }
        None => (None, ports::open(&bed_plan, max_frame_len)?),
    };
    let pids = applied
        .as_ref()
        .map(|a| a.data_path_pids())
        .unwrap_or_default();
    let meter = crate::dut_cpu::meter_for(&bed, &dut.cpu, &pids)?;
    let meter = meter.ok_or_else(|| {
        err!(BadInput, "cpu-target needs the DUT's CPU load: on an external DUT give --dut-cpu-cmd or --dut-snmp")
    })?;
    let line_bps = bed.line_bps;
    for f in &frames {
        bed.engine.check_frame(*f)?;
        let line_fps = f.line_rate_fps(line_bps);
        if let (Some(rate), Some(text)) = (max_rate, &max_rate_text) {
            let fps = rate.to_fps(*f, line_bps);
            if fps > line_fps * 1.000_001 {
                bail!(BadInput,
                    "--max-rate {text} is {fps:.0} frames/s, above the line rate for {}-byte frames ({line_fps:.0} frames/s at {}): lower it or set --line-speed",
                    f.frame(),
                    linerate_results::report::line_speed(line_bps)
                );
            }
        }
    }
    bed.engine.resolve()?;
    let description = match &scenario {
        Some(s) => s.description(),
        None => bed.description(),
    };
    recorder.begin(RunInfo {
        command: "cpu-target",
        engine: &bed.engine.config().name,
        receiver: bed.engine.receiver(),
        line_speed_bps: line_bps,
        scenario: &description,
        report: None,
        sizes: frames.iter().map(|f| f.frame()).collect(),
        trial_s: duration.as_secs_f64(),
        resolution: 0.0,
        capture_at: bed.engine.capture_slot(),
    })?;
    let mut report = CpuTargetReport {
        run: crate::driver::run_info(&bed, description),
        target_pct: target,
        tolerance_pct: cfg.tolerance_pct,
        trial_duration_s: duration.as_secs_f64(),
        dut_cpu_source: meter.source.clone(),
        scenario: match (&scenario, &applied) {
            (Some(s), Some(a)) => Some(record_of(s, a)),
            _ => None,
        },
        results: Vec::new(),
    };
    let mut outcome = Outcome::Passed;
    for (search_no, frame) in frames.into_iter().enumerate() {
        let line_fps = frame.line_rate_fps(line_bps);
        let max_fps = max_rate.map_or(line_fps, |r| r.to_fps(frame, line_bps));
        let mut runner = EngineRunner::on(&mut bed, interrupt, Some(&meter));
        let searched = find_cpu_target(&mut runner, frame, &cfg, max_fps, &mut |p| {
            match &p {
                CpuTargetProgress::TrialStarting {
                    trial_no,
                    intended_fps,
                    ..
                } => recorder.trial_starting(
                    search_no,
                    *trial_no as usize,
                    frame.frame(),
                    *intended_fps,
                ),
                CpuTargetProgress::TrialDone {
                    trial_no, result, ..
                } => recorder.trial_done(search_no, *trial_no as usize, result, None),
            }
            if recorder.verbose() {
                show_progress(p);
            }
        });
        let (partial, error) = match searched {
            Ok(result) => (result, None),
            Err(Stopped { error, partial }) => (partial, Some(error)),
        };
        if let Some(result) = partial {
            report.results.push(result);
            recorder.save_partial(&report);
        }
        match error {
            None => {}
            Some(EngineError::Interrupted) => {
                outcome = Outcome::Interrupted("results measured so far were kept".into());
                break;
            }
            Some(e) => {
                recorder.save(&report)?;
                return Err(e.into());
            }
        }
    }
    if let (Some(a), Some(lab), Some(rec)) = (&applied, bed.lab.as_ref(), report.scenario.as_mut())
    {
        let all = report.results.iter().flat_map(|r| &r.trials);
        rec.traffic_checks = traffic_checks(a, lab, all)?;
    }
    recorder.save(&report)?;
    recorder.print(&cpu_target_table(&report));
    if let Outcome::Passed = outcome {
        recorder.finish(RunStatus::Complete)?;
    }
    drop(applied);
    Ok(outcome)
}

/// One line per trial on stderr: the rate, then its CPU load and loss.
fn show_progress(p: CpuTargetProgress) {
    match p {
        CpuTargetProgress::TrialStarting {
            frame,
            trial_no,
            intended_fps,
        } => errp!(
            "[{:>5} B] cpu-target trial {:>2}: {:>11.0} fps ... ",
            frame.frame(),
            trial_no,
            intended_fps
        ),
        CpuTargetProgress::TrialDone { result: t, .. } => match t.dut_cpu {
            None => errln!("no CPU sample"),
            Some(cpu) => errln!(
                "CPU {:.1} % (by traffic {:.1} %), loss {:.4} %",
                cpu.total_pct,
                cpu.traffic_pct,
                t.loss_ratio * 100.0
            ),
        },
    }
}

/// `--target`: a CPU load as a share (`75%` or `0.75`), in percent.
pub fn parse_target(text: &str) -> Result<f64> {
    Ok(100.0 * ports::parse_share(text, "--target", ports::Zero::Refused)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn targets_parse() {
        assert_eq!(parse_target("75%").unwrap(), 75.0);
        assert_eq!(parse_target(" 50% ").unwrap(), 50.0);
        // The rule of every share: a bare number is a ratio.
        assert!((parse_target("0.75").unwrap() - 75.0).abs() < 1e-9);
        for bad in ["0", "100%", "x", "-5", "75"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}

#[cfg(test)]
mod properties {
    use super::*;
    use crate::test_support::{config, text};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(config())]

        /// Any text: no panic; an accepted target is a load above 0 and below 100 %.
        #[test]
        fn targets_are_loads(t in text()) {
            if let Ok(p) = parse_target(&t) {
                prop_assert!(p.is_finite() && p > 0.0 && p < 100.0, "{t:?} -> {p}");
            }
        }

        #[test]
        fn targets_round_trip(p in 1u32..10_000) {
            let pct = p as f64 / 100.0;
            let got = parse_target(&format!("{pct}%")).unwrap();
            prop_assert!((got - pct).abs() < 1e-9, "{pct} -> {got}");
        }
    }
}
