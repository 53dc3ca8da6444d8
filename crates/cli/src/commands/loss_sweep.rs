//! `linerate loss-sweep`: the 100GE report's table — one trial at each
//! offered rate, the loss of each, one row per DUT configuration
//! (`--scenario a,b,c`, each on a fresh lab; or the lab / the external DUT
//! as it is). A row stops after a rate that lost more than `--stop-at-loss`,
//! as the report leaves higher rates untested.

use super::rfc2544::{write_json, EngineRunner};
use super::scenarios::{prepare, record_of, traffic_checks};
use crate::args::LossSweepArgs;
use crate::exit::Outcome;
use crate::ports::{self, check_writable, parse_percent, parse_trial_duration};
use anyhow::{bail, Context, Result};
use linerate_engine::EngineError;
use linerate_lab::scenario::Scenario;
use linerate_method::TrialRunner;
use linerate_results::report;
use linerate_results::sweep::{loss_sweep_table, LossSweepReport, SweepRow};
use linerate_results::TrialSpec;
use linerate_wire::Rate;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

pub fn run(args: LossSweepArgs, interrupt: &AtomicBool) -> Result<Outcome> {
    let frame = match args.frames.single("loss-sweep")? {
        linerate_wire::Frames::Size(f) => f,
        linerate_wire::Frames::Mix(_) => bail!("loss-sweep takes no --imix: use loss --imix"),
    };
    let rates = args
        .rates
        .iter()
        .map(|r| Rate::parse(r).with_context(|| format!("--rates '{r}'")))
        .collect::<Result<Vec<_>>>()?;
    let duration = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
    let stop = parse_percent(&args.stop_at_loss, "--stop-at-loss")?;
    check_writable(args.json.as_deref())?;
    let scenarios: Vec<Option<Scenario>> = match &args.dut.scenario {
        Some(text) => Scenario::parse_list(text)?.into_iter().map(Some).collect(),
        None => vec![None],
    };
    let mut report: Option<LossSweepReport> = None;
    let mut outcome = Outcome::Passed;
    for (index, scenario) in scenarios.iter().enumerate() {
        if interrupt.load(Ordering::Relaxed) {
            outcome = Outcome::Interrupted("rows measured so far were kept".into());
            break;
        }
        let (applied, mut bed) = match scenario {
            Some(s) => {
                let (a, b) = prepare(&args.ports, frame.buffer_len(), s, index)?;
                (Some(a), b)
            }
            None => (None, ports::open(&args.ports, frame.buffer_len())?),
        };
        bed.engine.check_frame(frame)?;
        let rates_fps: Vec<f64> = rates
            .iter()
            .map(|r| r.to_fps(frame, bed.line_bps))
            .collect();
        let line_fps = frame.line_rate_fps(bed.line_bps);
        if let Some(i) = rates_fps.iter().position(|f| *f > line_fps * 1.000_001) {
            bail!(
                "--rates {} is above the line rate for {}-byte frames ({:.0} frames/s at {}): lower it or set --line-speed",
                args.rates[i],
                frame.frame(),
                line_fps,
                report::line_speed(bed.line_bps)
            );
        }
        let pids = applied
            .as_ref()
            .map(|a| a.data_path_pids())
            .unwrap_or_default();
        let cpu = crate::dut_cpu::meter_for(&bed, &args.dut.cpu, &pids)?;
        bed.engine.resolve()?;
        let rep = report.get_or_insert_with(|| LossSweepReport {
            linerate_version: env!("CARGO_PKG_VERSION").to_string(),
            started_at: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            frame_size: frame.frame(),
            l3_length: frame.l3(),
            trial_duration_s: duration.as_secs_f64(),
            engine: bed.engine.config().name.clone(),
            rates_fps: rates_fps.clone(),
            stop_above_loss_ratio: stop,
            rows: Vec::new(),
        });
        let mut row = SweepRow {
            name: scenario
                .as_ref()
                .map_or_else(|| "DUT".to_string(), |s| s.spec.clone()),
            description: match (scenario, bed.setup) {
                (Some(s), _) => s.description(),
                (None, "lab") => "LAN-LAN routing, lab Linux router".to_string(),
                _ => format!(
                    "{} -> {} (external DUT)",
                    bed.engine.port_a().ifname,
                    bed.engine.port_b().ifname
                ),
            },
            trials: vec![None; rates_fps.len()],
            scenario: match (scenario, &applied) {
                (Some(s), Some(a)) => Some(record_of(s, a)),
                _ => None,
            },
        };
        let mut runner = EngineRunner {
            engine: &mut bed.engine,
            interrupt,
            cpu: cpu.as_ref(),
        };
        for (i, &fps) in rates_fps.iter().enumerate() {
            eprint!("[{}] {:>11.0} fps ... ", row.name, fps);
            let spec = TrialSpec {
                frame,
                mix: None,
                intended_fps: fps,
                duration,
            };
            match runner.run(&spec) {
                Ok(t) => {
                    eprintln!("loss {:.4} %", t.loss_ratio * 100.0);
                    let lost_too_much = t.loss_ratio > stop;
                    row.trials[i] = Some(t);
                    if lost_too_much {
                        break;
                    }
                }
                Err(EngineError::Interrupted) => {
                    eprintln!();
                    outcome = Outcome::Interrupted("rows measured so far were kept".into());
                    break;
                }
                Err(e) => return Err(e.into()),
            }
        }
        if let (Some(a), Some(lab), Some(rec)) = (&applied, bed.lab.as_ref(), row.scenario.as_mut())
        {
            let done = row.trials.iter().flatten();
            rec.traffic_checks = traffic_checks(a, lab, done)?;
            for c in &rec.traffic_checks {
                eprintln!("linerate:   seen: {c}");
            }
        }
        rep.rows.push(row);
        if let Some(path) = &args.json {
            write_json(path, rep)?;
        }
        drop(applied);
        if let Outcome::Interrupted(_) = outcome {
            break;
        }
    }
    if let Some(rep) = &report {
        print!("{}", loss_sweep_table(rep));
    }
    Ok(outcome)
}
