//! `TrialPlan` from the command line's options.

use super::values::{parse_share, parse_trial_duration, Zero};
use crate::args::TrialArgs;
use linerate_session::error::bail;
use linerate_session::error::{Result, ResultExt};
use linerate_session::outputs::Outputs;
use linerate_session::plan::{TrialLength, TrialPlan};
use linerate_wire::Rate;

impl TrialArgs {
    /// Every value of `args` checked (output files included); nothing on
    /// the machine is touched.
    pub fn plan(&self) -> Result<TrialPlan> {
        let args = self;
        let bed = super::bed::with_capture(args.ports.plan()?, args.record.pcap.is_some())?;
        let frames = args.frames.single("trial", &bed.encap)?;
        let rate = Rate::parse(&args.rate).context("--rate")?;
        let length = match &args.frame_count {
            Some(text) => TrialLength::Frames(parse_frame_count(text)?),
            None => TrialLength::Duration(parse_trial_duration(&args.duration, "--duration")?),
        };
        Outputs::new()
            .json(args.json.as_deref())
            .record(&args.record.plan())
            .check()?;
        let allowed_loss = parse_share(&args.loss, "--loss", Zero::Allowed)?;
        Ok(TrialPlan {
            bed,
            frames,
            rate,
            rate_text: args.rate.clone(),
            length,
            allowed_loss,
            json: args.json.clone(),
            dut_cpu: args.dut_cpu.plan(),
            record: args.record.plan(),
        })
    }
}

/// `--frames N`: a whole number of frames, at least one.
fn parse_frame_count(text: &str) -> Result<u64> {
    match text.trim().replace('_', "").parse::<u64>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!(
            BadInput,
            "--frames {text} is not a number of frames: give a whole number from 1 up, e.g. 100000"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;
    use std::time::Duration;

    fn plan(args: &str) -> Result<TrialPlan> {
        let argv = format!("linerate trial --lab --no-db {args}");
        let Command::Trial(t) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        t.plan()
    }

    #[test]
    fn a_trial_plan_holds_every_value_checked() {
        let p = plan("--frame-size 128 --rate 20kfps --duration 3s --loss 0.1%").unwrap();
        assert_eq!(p.frames.largest().frame(), 128);
        assert_eq!(p.length, TrialLength::Duration(Duration::from_secs(3)));
        assert!((p.allowed_loss - 0.001).abs() < 1e-12);
        assert_eq!(p.rate_text, "20kfps");
        assert!(p.bed.is_lab());
        for (args, says) in [
            ("--frame-size 128 --rate fast", "--rate"),
            ("--frame-size 128 --rate 1% --duration 1ms", "--duration"),
            ("--frame-size 128 --rate 1% --loss 2", "--loss"),
            ("--frame-size 20 --rate 1%", "20"),
            ("--frame-size 128 --rate 1% --frames 0", "--frames 0"),
            ("--frame-size 128 --rate 1% --frames 1.5", "--frames"),
            (
                "--frame-size 128 --rate 1% --frames 10 --duration 1s",
                "--duration",
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

    #[test]
    fn frames_give_a_trial_its_length() {
        let p = plan("--frame-size 128 --rate 20kfps --frames 12_345").unwrap();
        assert_eq!(p.length, TrialLength::Frames(12_345));
    }
}
