//! `BackToBackPlan` from the command line's options.

use super::values::{parse_share, parse_trial_duration, Zero};
use crate::args::methods::BackToBackArgs;
use linerate_method::back_to_back::BackToBackConfig;
use linerate_session::bail;
use linerate_session::driver::parse_optional_rate;
use linerate_session::error::Result;
use linerate_session::plan::{BackToBackPlan, MaxBurst};

impl BackToBackArgs {
    /// Every value of `args` checked (output files included); nothing on
    /// the machine is touched. What depends on the line rate (the burst
    /// rate, a `--max-burst` time in frames) is checked when the ports are
    /// open.
    pub fn plan(&self) -> Result<BackToBackPlan> {
        let args = self;
        let bed = super::bed::with_capture(args.ports.plan()?, args.record.pcap.is_some())?;
        let frames = args.frames.frames(&bed.encap)?;
        let resolution = parse_share(&args.resolution, "--resolution", Zero::Refused)?;
        super::unused::refuse(&[super::unused::Rule::new(
            "--trial-duration",
            args.trial_duration.is_some(),
            args.throughput.is_none(),
            "is for the throughput search run first, and --throughput gives the throughput instead: leave one of them out",
        )])?;
        let trial_duration = parse_trial_duration(
            args.trial_duration.as_deref().unwrap_or("2s"),
            "--trial-duration",
        )?;
        let max_rate = parse_optional_rate(args.max_rate.as_deref(), "--max-rate")?;
        let throughput = parse_optional_rate(args.throughput.as_deref(), "--throughput")?;
        if args.repeat == 0 {
            bail!(
                BadInput,
                "--repeat 0: give at least 1 repetition (RFC 2544 asks for 50)"
            );
        }
        linerate_session::outputs::Outputs::new()
            .json(args.json.as_deref())
            .record(&args.record.plan())
            .check()?;
        let max_burst = MaxBurst::parse(&args.max_burst)?;
        let plan = BackToBackPlan {
            bed,
            frames,
            max_rate,
            max_burst,
            repeat: args.repeat,
            resolution,
            throughput,
            trial_duration,
            json: args.json.clone(),
            dut_cpu: args.dut_cpu.plan(),
            record: args.record.plan(),
        };
        // What does not depend on the burst rate is checked now: the
        // resolution, and a --max-burst given in frames.
        let burst = match max_burst {
            MaxBurst::Frames(n) => n,
            MaxBurst::Time(_) => u64::MAX,
        };
        BackToBackConfig {
            max_burst: burst,
            ..plan.config(1.0)
        }
        .validate()?;
        Ok(plan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;
    use std::time::Duration;

    fn plan(args: &str) -> Result<BackToBackPlan> {
        let argv = format!("linerate back-to-back --lab --no-db {args}");
        let Command::BackToBack(a) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        a.plan()
    }

    #[test]
    fn a_back_to_back_plan_holds_every_value_checked() {
        let p = plan(
            "--sizes 64,128 --max-rate 50% --max-burst 500ms --repeat 3 --resolution 2% \
             --throughput 100kfps",
        )
        .unwrap();
        assert_eq!(p.frames.len(), 2);
        assert_eq!(p.max_rate.as_ref().map(|r| r.0.as_str()), Some("50%"));
        assert_eq!(p.max_burst, MaxBurst::Time(Duration::from_millis(500)));
        assert_eq!(p.repeat, 3);
        assert!((p.resolution - 0.02).abs() < 1e-12);
        assert_eq!(p.throughput.as_ref().map(|r| r.0.as_str()), Some("100kfps"));
        assert!(p.bed.is_lab());
        // The search's trial duration, when a search runs.
        let searched = plan("--trial-duration 3s").unwrap();
        assert_eq!(searched.trial_duration, Duration::from_secs(3));
        assert_eq!(plan("").unwrap().trial_duration, Duration::from_secs(2));
        let cfg = p.config(1000.0);
        assert_eq!((cfg.max_burst, cfg.repeat), (500, 3));
        assert_eq!(
            plan("--max-burst 1_000").unwrap().max_burst,
            MaxBurst::Frames(1000)
        );
        for (args, says) in [
            ("--max-rate fast", "--max-rate"),
            ("--throughput fast", "--throughput"),
            ("--trial-duration 1ms", "--trial-duration"),
            (
                "--throughput 100kfps --trial-duration 3s",
                "--trial-duration is for the throughput search",
            ),
            ("--resolution 0", "--resolution"),
            ("--repeat 0", "--repeat 0"),
            ("--max-burst lots", "--max-burst 'lots'"),
            ("--sizes 20", "20"),
        ] {
            let e = plan(args).unwrap_err();
            assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{args}: {e:?}");
            assert!(
                linerate_session::exit::one_line(&e).contains(says),
                "{args}: {e}"
            );
        }
        // Refused by the method's own check, before any port is opened.
        for args in ["--resolution 60%", "--max-burst 1"] {
            let e = plan(args).unwrap_err();
            assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{args}: {e:?}");
        }
    }
}
