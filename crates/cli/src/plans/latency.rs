//! `LatencyPlan` from the command line's options.

use super::unused::Rule;
use super::values::{parse_share, parse_trial_duration, Zero};
use crate::args::LatencyArgs;
use linerate_method::latency::parse_loads;
use linerate_session::driver::parse_optional_rate;
use linerate_session::error::Result;
use linerate_session::plan::LatencyPlan;

impl LatencyArgs {
    /// Every value of `args` checked (output files included, the
    /// calibration file read); nothing on the machine is touched.
    pub fn plan(&self) -> Result<LatencyPlan> {
        let args = self;
        let bed = super::bed::with_capture(args.ports.plan()?, args.record.pcap.is_some())?;
        let frames = args.frames.frames(&bed.encap)?;
        let loads =
            parse_loads(&args.loads).map_err(|e| linerate_session::err!(BadInput, "{e}"))?;
        let trial_duration = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
        // With --rate no throughput search runs.
        let search = args.rate.is_none();
        let why = |option: &str| {
            format!("is for the throughput search, and --rate measures at shares of the rate given without one: leave {option} out, or leave out --rate to search first")
        };
        super::unused::refuse(&[
            Rule::new(
                "--search-duration",
                args.search_duration.is_some(),
                search,
                why("--search-duration"),
            ),
            Rule::new(
                "--resolution",
                args.resolution.is_some(),
                search,
                why("--resolution"),
            ),
            Rule::new(
                "--max-rate",
                args.max_rate.is_some(),
                search,
                why("--max-rate"),
            ),
        ])?;
        let search_duration = parse_trial_duration(
            args.search_duration.as_deref().unwrap_or("2s"),
            "--search-duration",
        )?;
        let resolution = parse_share(
            args.resolution.as_deref().unwrap_or("1%"),
            "--resolution",
            Zero::Refused,
        )?;
        let rate = parse_optional_rate(args.rate.as_deref(), "--rate")?;
        let max_rate = parse_optional_rate(args.max_rate.as_deref(), "--max-rate")?;
        let calibration = linerate_session::outputs::checked_outputs_and_calibration(
            &args.json,
            &args.record.plan(),
            &args.calibration,
        )?;
        Ok(LatencyPlan {
            bed,
            frames,
            loads,
            trial_duration,
            repeat: args.repeat as usize,
            search_duration,
            resolution,
            rate,
            max_rate,
            calibration,
            json: args.json.clone(),
            dut_cpu: args.dut_cpu.plan(),
            record: args.record.plan(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;
    use std::time::Duration;

    fn plan(args: &str) -> Result<LatencyPlan> {
        let argv = format!(
            "linerate latency --lab --no-db --calibration /nonexistent/calibration.json {args}"
        );
        let Command::Latency(a) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        a.plan()
    }

    #[test]
    fn a_latency_plan_holds_every_value_checked() {
        let p = plan(
            "--sizes 64,128 --loads 50%,100% --max-rate 50% --trial-duration 3s \
             --search-duration 1s --resolution 2% --repeat 4",
        )
        .unwrap();
        let sizes: Vec<u16> = p.frames.iter().map(|f| f.largest().frame()).collect();
        assert_eq!(sizes, [64, 128]);
        assert_eq!(p.loads, [0.5, 1.0]);
        assert_eq!(p.trial_duration, Duration::from_secs(3));
        assert_eq!(p.search_duration, Duration::from_secs(1));
        assert!((p.resolution - 0.02).abs() < 1e-12);
        assert_eq!(p.repeat, 4);
        assert!(p.rate.is_none());
        assert_eq!(p.max_rate.as_ref().map(|r| r.0.as_str()), Some("50%"));
        // With --rate no search runs: its options are refused.
        let given = plan("--rate 20kfps").unwrap();
        assert_eq!(given.rate.as_ref().map(|r| r.0.as_str()), Some("20kfps"));
        assert_eq!(given.search_duration, Duration::from_secs(2));
        assert!((given.resolution - 0.01).abs() < 1e-12);
        for option in ["--search-duration 1s", "--resolution 2%", "--max-rate 50%"] {
            let e = plan(&format!("--rate 20kfps {option}")).unwrap_err();
            assert_eq!(e.kind(), linerate_session::Kind::BadInput);
            let name = option.split(' ').next().unwrap();
            assert!(
                e.to_string()
                    .starts_with(&format!("{name} is for the throughput search")),
                "{e}"
            );
        }
        assert_eq!(
            p.calibration,
            linerate_results::calibration::Calibration::default()
        );
        assert!(p.bed.is_lab());
        for (args, says) in [
            ("--loads 150%", "load '150%'"),
            ("--rate fast", "--rate"),
            ("--max-rate fast", "--max-rate"),
            ("--trial-duration 1ms", "--trial-duration"),
            ("--search-duration 1ms", "--search-duration"),
            ("--resolution 0", "--resolution"),
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
