//! `CpuTargetPlan` from the command line's options.

use super::values::parse_target;
use super::values::parse_trial_duration;
use crate::args::CpuTargetArgs;
use linerate_lab::scenario::Scenario;
use linerate_method::{CpuTargetConfig, CpuTargetConfigError};
use linerate_session::bail;
use linerate_session::error::{Result, ResultExt};
use linerate_session::plan::CpuTargetPlan;
use linerate_wire::Rate;

impl CpuTargetArgs {
    /// Every value of `args` checked (output files included); nothing on
    /// the machine is touched.
    pub fn plan(&self) -> Result<CpuTargetPlan> {
        let args = self;
        let scenario = match &args.dut.scenario {
            Some(text) => {
                let mut list = Scenario::parse_list(text)?;
                if list.len() != 1 {
                    bail!(
                        BadInput,
                        "cpu-target runs one --scenario at a time: run it once per scenario"
                    );
                }
                list.pop()
            }
            None => None,
        };
        let bed = args.ports.plan_with(scenario.as_slice())?;
        let bed = super::bed::with_capture(bed, args.record.pcap.is_some())?;
        let target = parse_target(&args.target)?;
        let duration = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
        let config = CpuTargetConfig {
            target_pct: target,
            tolerance_pct: args.tolerance,
            trial_duration: duration,
            max_trials: args.max_trials,
        };
        match config.validate() {
            Ok(()) => {}
            Err(CpuTargetConfigError::Tolerance(t)) => bail!(
                BadInput,
                "--tolerance {t} is not a number of percentage points above 0 and below 50, e.g. 5"
            ),
            Err(e) => bail!(BadInput, "{e}"),
        }
        let frames = args.frames.sizes_only("cpu-target", &bed.encap)?;
        let max_rate = args
            .max_rate
            .as_deref()
            .map(Rate::parse)
            .transpose()
            .context("--max-rate")?;
        linerate_session::outputs::Outputs::new()
            .json(args.json.as_deref())
            .record(&args.record.plan())
            .check()?;
        Ok(CpuTargetPlan {
            bed,
            config,
            frames,
            max_rate,
            max_rate_text: args.max_rate.clone(),
            scenario,
            json: args.json.clone(),
            dut: args.dut.plan(),
            record: args.record.plan(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;

    fn plan(args: &str) -> Result<CpuTargetPlan> {
        let argv = format!("linerate cpu-target --no-db {args}");
        let Command::CpuTarget(a) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        a.plan()
    }

    #[test]
    fn a_cpu_target_plan_holds_every_value_checked() {
        let p = plan(
            "--lab --target 60% --tolerance 3 --frame-size 64,128 --trial-duration 3s \
             --max-rate 50% --max-trials 5",
        )
        .unwrap();
        assert_eq!(p.config.target_pct, 60.0);
        assert_eq!(p.config.tolerance_pct, 3.0);
        assert_eq!(p.config.trial_duration, std::time::Duration::from_secs(3));
        assert_eq!(p.config.max_trials, 5);
        assert_eq!(
            p.frames.iter().map(|f| f.frame()).collect::<Vec<_>>(),
            [64, 128]
        );
        assert!(p.max_rate.is_some());
        assert_eq!(p.max_rate_text.as_deref(), Some("50%"));
        assert!(p.scenario.is_none());
        assert!(p.bed.is_lab());
        let s = plan("--scenario wan-lan").unwrap();
        assert_eq!(s.scenario.unwrap().spec, "wan-lan");
        for (args, says) in [
            ("--lab --target 0", "--target"),
            ("--lab --tolerance 60", "--tolerance"),
            ("--lab --trial-duration 1ms", "--trial-duration"),
            ("--lab --max-rate fast", "--max-rate"),
            ("--lab --frame-size 20", "20"),
            ("--scenario lan-lan,wan-lan", "--scenario"),
        ] {
            let e = plan(args).unwrap_err();
            assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{args}: {e:?}");
            assert!(
                linerate_session::exit::one_line(&e).contains(says),
                "{args}: {e}"
            );
        }
    }
}
