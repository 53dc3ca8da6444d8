//! `MlrsearchPlan` from the command line's options.

use super::values::{parse_share, parse_trial_duration, Zero};
use crate::args::methods::MlrsearchArgs;
use linerate_session::driver::parse_optional_rate;
use linerate_session::error::Result;
use linerate_session::plan::MlrsearchPlan;

impl MlrsearchArgs {
    /// Every value of `args` checked (output files and the search goals
    /// included); nothing on the machine is touched.
    pub fn plan(&self) -> Result<MlrsearchPlan> {
        let args = self;
        let bed = super::bed::with_capture(args.ports.plan()?, args.record.pcap.is_some())?;
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
        let max_rate = parse_optional_rate(args.max_rate.as_deref(), "--max-rate")?;
        linerate_session::outputs::Outputs::new()
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;
    use std::time::Duration;

    fn plan(args: &str) -> Result<MlrsearchPlan> {
        let argv = format!("linerate mlrsearch --lab --no-db {args}");
        let Command::Mlrsearch(a) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        a.plan()
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
            assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{args}: {e:?}");
            assert!(
                linerate_session::exit::one_line(&e).contains(says),
                "{args}: {e}"
            );
        }
    }
}
