//! `Rfc2544Plan` from the command line's options.

use super::unused::Rule;
use super::values::{parse_share, parse_trial_duration, Zero};
use crate::args::Rfc2544Args;
use linerate_lab::scenario::Scenario;
use linerate_session::commands::rfc2544::STRICT_TRIAL;
use linerate_session::error::{Result, ResultExt};
use linerate_session::outputs::checked_outputs_and_calibration;
use linerate_session::plan::Rfc2544Plan;
use linerate_wire::Rate;

impl Rfc2544Args {
    /// Every value of `args` checked (the scenario list, output files and
    /// the calibration file included); nothing on the machine is touched.
    pub fn plan(&self) -> Result<Rfc2544Plan> {
        let args = self;
        let scenarios = match &args.dut.scenario {
            Some(text) => Scenario::parse_list(text)?,
            None => Vec::new(),
        };
        let (bed, tunnel_counts) = args.ports.plan_counts(&scenarios)?;
        let bed = super::bed::with_capture(bed, args.record.pcap.is_some())?;
        if tunnel_counts.len() > 1 && scenarios.len() > 1 {
            linerate_session::error::bail!(BadInput, "--tunnels {} compares tunnel counts through one gateway: give one --scenario (vpn-gateway), not a list", args.ports.tunnels.as_deref().unwrap_or_default());
        }
        let frames = args.frames.frames(&bed.encap)?;
        super::unused::refuse(&[Rule::new(
            "--trial-duration",
            args.trial_duration.is_some(),
            !args.rfc2544_strict,
            "sets how long each trial sends, and --rfc2544-strict sends RFC 2544's 60 s trials: leave one of them out",
        )])?;
        let trial_duration = if args.rfc2544_strict {
            STRICT_TRIAL
        } else {
            parse_trial_duration(
                args.trial_duration.as_deref().unwrap_or("2s"),
                "--trial-duration",
            )?
        };
        let resolution = parse_share(&args.resolution, "--resolution", Zero::Refused)?;
        let allowed_loss = parse_share(&args.loss, "--loss", Zero::Allowed)?;
        let max_rate = args
            .max_rate
            .as_deref()
            .map(Rate::parse)
            .transpose()
            .context("--max-rate")?;
        let calibration =
            checked_outputs_and_calibration(&args.json, &args.record.plan(), &args.calibration)?;
        Ok(Rfc2544Plan {
            bed,
            scenarios,
            frames,
            trial_duration,
            resolution,
            allowed_loss,
            max_rate,
            max_rate_text: args.max_rate.clone(),
            calibration,
            all_layers: args.all_layers,
            mlrsearch: args.mlrsearch,
            repeat: args.repeat as usize,
            json: args.json.clone(),
            dut: args.dut.plan(),
            record: args.record.plan(),
            tunnel_counts: if tunnel_counts.len() > 1 {
                tunnel_counts
            } else {
                Vec::new()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;
    use std::time::Duration;

    fn plan(args: &str) -> Result<Rfc2544Plan> {
        let argv =
            format!("linerate rfc2544 --no-db --calibration /nonexistent-linerate/c.json {args}");
        let Command::Rfc2544(a) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        a.plan()
    }

    #[test]
    fn an_rfc2544_plan_holds_every_value_checked() {
        let p = plan(
            "--lab --frame-size 64,128 --trial-duration 3s --resolution 0.5% --loss 0.1% \
             --max-rate 50% --all-layers --mlrsearch --repeat 3",
        )
        .unwrap();
        assert_eq!(p.repeat, 3);
        assert_eq!(plan("--lab").unwrap().repeat, 1);
        assert_eq!(
            p.frames
                .iter()
                .map(|f| f.largest().frame())
                .collect::<Vec<_>>(),
            [64, 128]
        );
        assert_eq!(p.trial_duration, Duration::from_secs(3));
        assert!((p.resolution - 0.005).abs() < 1e-12);
        assert!((p.allowed_loss - 0.001).abs() < 1e-12);
        assert!(p.max_rate.is_some());
        assert_eq!(p.max_rate_text.as_deref(), Some("50%"));
        assert!(p.all_layers && p.mlrsearch);
        assert!(p.scenarios.is_empty());
        assert!(p.bed.is_lab());
        assert_eq!(
            p.calibration,
            linerate_results::calibration::Calibration::default()
        );

        let strict = plan("--lab --rfc2544-strict").unwrap();
        assert_eq!(strict.trial_duration, STRICT_TRIAL);
        assert_eq!(
            plan("--lab").unwrap().trial_duration,
            Duration::from_secs(2)
        );

        let s = plan("--scenario lan-lan,wan-lan").unwrap();
        assert_eq!(s.scenarios.len(), 2);

        for (args, says) in [
            ("--lab --trial-duration 1ms", "--trial-duration"),
            ("--lab --resolution 0", "--resolution"),
            ("--lab --loss 2", "--loss"),
            ("--lab --max-rate fast", "--max-rate"),
            ("--lab --frame-size 20", "20"),
            ("--lab --repeat 0", "--repeat"),
            ("--lab --repeat 21", "--repeat"),
            ("--scenario no-such-thing", "no-such-thing"),
            (
                "--lab --rfc2544-strict --trial-duration 3s",
                "--trial-duration sets how long",
            ),
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
