//! `LossPlan` from the command line's options.

use super::unused::Rule;
use super::values::{parse_share, parse_trial_duration, Zero};
use crate::args::methods::LossArgs;
use linerate_lab::scenario::Scenario;
use linerate_method::frame_loss::RFC2544_MAX_STEP;
use linerate_session::bail;
use linerate_session::commands::frame_loss::earlier_rows;
use linerate_session::driver::{parse_optional_rate, parse_rate};
use linerate_session::error::Result;
use linerate_session::plan::LossPlan;
use linerate_wire::Rate;

impl LossArgs {
    /// Every value of `args` checked (output files included, the earlier
    /// runs' rows read, the DUT configurations parsed); nothing on the
    /// machine is touched.
    pub fn plan(&self) -> Result<LossPlan> {
        let args = self;
        let scenarios = match &args.dut.scenario {
            Some(text) => Scenario::parse_list(text)?,
            None => Vec::new(),
        };
        let (bed, tunnel_counts) = args.ports.plan_counts(&scenarios)?;
        let bed = super::bed::with_capture(bed, args.record.pcap.is_some())?;
        let frames = args.frames.frames(&bed.encap)?;
        let duration = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
        let loads: Vec<(String, Rate)> = match &args.loads {
            Some(list) => list
                .iter()
                .map(|t| Ok((t.trim().to_string(), parse_rate(t, "--loads")?)))
                .collect::<Result<_>>()?,
            None => Vec::new(),
        };
        if !args.rfc2544 && loads.is_empty() {
            bail!(
                BadInput,
                "no load given: use --loads 0.5Mpps,1Mpps,... (or fps, %, Mbps), or --rfc2544"
            );
        }
        let rfc2544_only = |option: &str| {
            format!("is for --rfc2544 (from 100 % of the maximum rate down), and --loads gives the loads: use --rfc2544 instead of --loads, or leave {option} out")
        };
        super::unused::refuse(&[
            Rule::new("--step", args.step.is_some(), args.rfc2544, rfc2544_only("--step")),
            Rule::new("--max-rate", args.max_rate.is_some(), args.rfc2544, rfc2544_only("--max-rate")),
            Rule::new("--label", args.label.is_some(), scenarios.is_empty(), "names the rows of the DUT as it is, and with --scenario each row is named after its scenario: leave --label out"),
        ])?;
        let step_text = args.step.as_deref().unwrap_or("10%");
        let step = parse_share(step_text, "--step", Zero::Refused)?;
        if args.rfc2544 && !(step > 0.0 && step <= RFC2544_MAX_STEP + 1e-12) {
            bail!(BadInput, "--step {step_text} is out of range: RFC 2544 section 26.3 asks for steps of at most 10 % of the maximum rate");
        }
        let max_rate = parse_optional_rate(args.max_rate.as_deref(), "--max-rate")?;
        let stop_above_loss = args
            .stop_at_loss
            .as_deref()
            .map(|t| parse_share(t, "--stop-at-loss", Zero::Allowed))
            .transpose()?;
        args.rows_from
            .iter()
            .fold(
                linerate_session::outputs::Outputs::new()
                    .json(args.json.as_deref())
                    .record(&args.record.plan()),
                |o, f| o.input("--rows-from", Some(f)),
            )
            .check()?;
        let mode = if args.rfc2544 { "rfc2544" } else { "sweep" };
        let earlier = earlier_rows(&args.rows_from, mode)?;
        Ok(LossPlan {
            tunnel_counts: if tunnel_counts.len() > 1 {
                tunnel_counts
            } else {
                Vec::new()
            },
            bed,
            frames,
            duration,
            loads,
            rfc2544_step: args.rfc2544.then_some(step),
            max_rate,
            stop_above_loss,
            label: args.label.clone(),
            earlier,
            scenarios,
            json: args.json.clone(),
            dut: args.dut.plan(),
            record: args.record.plan(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;
    use std::time::Duration;

    fn plan(args: &str) -> Result<LossPlan> {
        let argv = format!("linerate loss --lab --no-db {args}");
        let Command::Loss(a) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        a.plan()
    }

    #[test]
    fn a_loss_plan_holds_every_value_checked() {
        let p = plan(
            "--sizes 64,1518 --loads 10%,1Mpps --trial-duration 3s --stop-at-loss 50% \
             --label Linux",
        )
        .unwrap();
        assert_eq!(p.frames.len(), 2);
        let loads: Vec<&str> = p.loads.iter().map(|l| l.0.as_str()).collect();
        assert_eq!(loads, ["10%", "1Mpps"]);
        assert_eq!(p.duration, Duration::from_secs(3));
        assert_eq!(p.stop_above_loss, Some(0.5));
        assert_eq!(p.label.as_deref(), Some("Linux"));
        assert_eq!((p.rfc2544_step, p.mode()), (None, "sweep"));
        assert!(p.scenarios.is_empty() && p.earlier.is_empty());
        assert!(p.bed.is_lab());
        let p = plan("--rfc2544 --step 5% --max-rate 2Mpps").unwrap();
        assert_eq!((p.rfc2544_step, p.mode()), (Some(0.05), "rfc2544"));
        assert_eq!(p.max_rate.as_ref().map(|r| r.0.as_str()), Some("2Mpps"));
        let argv = "linerate loss --no-db --loads 10% --scenario lan-lan,acl:12";
        let Command::Loss(a) = Cli::try_parse_from(argv.split_whitespace())
            .unwrap()
            .command
        else {
            unreachable!()
        };
        let p = a.plan().unwrap();
        let specs: Vec<&str> = p.scenarios.iter().map(|s| s.spec.as_str()).collect();
        assert_eq!(specs, ["lan-lan", "acl:12"]);
        for (args, says) in [
            ("--loads fast", "--loads"),
            ("--loads 10% --trial-duration 1ms", "--trial-duration"),
            ("--rfc2544 --step 20%", "--step 20%"),
            ("--rfc2544 --max-rate fast", "--max-rate"),
            ("--loads 10% --stop-at-loss 2", "--stop-at-loss"),
            ("--loads 10% --scenario no-such-thing", "no-such-thing"),
            ("--loads 10% --sizes 20", "20"),
        ] {
            let e = plan(args).unwrap_err();
            assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{args}: {e:?}");
            assert!(
                linerate_session::exit::one_line(&e).contains(says),
                "{args}: {e}"
            );
        }
        // The earlier rows are read with the plan: a file that is not a
        // loss run's JSON is refused before any port opens.
        let not_loss = std::env::temp_dir().join(format!("lr-plan-{}.json", std::process::id()));
        std::fs::write(&not_loss, "{}").unwrap();
        let e = plan(&format!("--loads 10% --rows-from {}", not_loss.display())).unwrap_err();
        std::fs::remove_file(&not_loss).unwrap();
        assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{e:?}");
        assert!(
            linerate_session::exit::one_line(&e).contains("not the JSON of 'linerate loss --json'")
        );
    }
}
