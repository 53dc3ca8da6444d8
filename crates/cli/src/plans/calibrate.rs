//! `CalibratePlan` from the command line's options.

use super::values::{parse_duration, parse_share, parse_trial_duration, Zero};
use crate::args::CalibrateArgs;
use linerate_results::calibration::{self, Calibration};
use linerate_session::bail;
use linerate_session::error::Result;
use linerate_session::outputs::Kind;
use linerate_session::plan::CalibratePlan;

impl CalibrateArgs {
    /// Every value of `args` checked (the calibration file included: it can
    /// be written, and what it holds is read); nothing on the machine is
    /// touched.
    pub fn plan(&self) -> Result<CalibratePlan> {
        let args = self;
        let only_xdp = args
            .engine
            .iter()
            .all(|&e| e == crate::args::EngineName::Xdp);
        super::unused::refuse(&[super::unused::Rule::new(
            "--receiver socket",
            args.receiver == crate::args::Receiver::Socket,
            !only_xdp,
            "hands every frame up to linerate, and the xdp engine counts test frames in the kernel and hands none up: calibrate af_xdp or af_packet (--engine) with --receiver socket",
        )])?;
        let frames = args
            .frames
            .sizes_only("calibrate", &linerate_wire::Encap::default())?;
        let trial_duration = parse_trial_duration(&args.trial_duration, "--trial-duration")?;
        let resolution = parse_share(&args.resolution, "--resolution", Zero::Refused)?;
        let straggler_wait = parse_duration(&args.straggler_wait, "--straggler-wait")?;
        // Fail before measuring if the result cannot be kept.
        let outputs = linerate_session::outputs::Outputs::new();
        let (path, outputs) = match &args.calibration {
            Some(path) => (
                path.clone(),
                outputs.file("--calibration", Some(path), Kind::Replaced),
            ),
            None => {
                let path = calibration::default_path();
                (
                    path.clone(),
                    outputs.default_file("--calibration (default)", path, Kind::Replaced),
                )
            }
        };
        outputs.check()?;
        let stored = Calibration::load(&path)?;
        let ports = match (&args.port_a, &args.port_b) {
            (Some(pa), Some(pb)) => {
                if pa == pb {
                    bail!(BadInput, "--port-a and --port-b are both '{pa}': calibrate two interfaces cabled to each other");
                }
                Some((pa.clone(), pb.clone()))
            }
            _ => None,
        };
        let line_speed_bps = args
            .line_speed
            .as_deref()
            .map(linerate_wire::units::parse_line_speed)
            .transpose()?;
        Ok(CalibratePlan {
            engines: args.engine.iter().map(|&e| e.into()).collect(),
            receiver: args.receiver.into(),
            frames,
            trial_duration,
            resolution,
            straggler_wait,
            ports,
            line_speed_bps,
            calibration_path: path,
            stored,
            tx_threads: args.tx_threads,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;
    use std::time::Duration;

    fn plan(args: &str) -> Result<CalibratePlan> {
        let argv = format!("linerate calibrate --calibration /nonexistent-linerate/c.json {args}");
        let Command::Calibrate(a) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        a.plan()
    }

    #[test]
    fn a_calibrate_plan_holds_every_value_checked() {
        let p = plan(
            "--engine xdp --tx-threads 2 --sizes 64,128 --trial-duration 3s --resolution 0.5% \
             --straggler-wait 100ms --port-a p0 --port-b p1 --line-speed 1G",
        );
        // The file's directory does not exist: it cannot be written.
        let e = p.unwrap_err();
        assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{e:?}");
        assert!(
            linerate_session::exit::one_line(&e).contains("--calibration"),
            "{e}"
        );

        let dir = std::env::temp_dir().join(format!("linerate-calplan-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("c.json");
        let plan = |args: &str| {
            let argv = format!("linerate calibrate --calibration {} {args}", file.display());
            let Command::Calibrate(a) = crate::plans::parse(&argv)? else {
                unreachable!()
            };
            a.plan()
        };
        let p = plan(
            "--engine xdp --tx-threads 2 --sizes 64,128 --trial-duration 3s --resolution 0.5% \
             --straggler-wait 100ms --port-a p0 --port-b p1 --line-speed 1G --receiver kernel",
        )
        .unwrap();
        assert_eq!(p.engines, [linerate_session::plan::EngineChoice::Xdp]);
        assert_eq!(p.tx_threads, 2);
        assert_eq!(p.receiver, linerate_session::plan::ReceiverChoice::Kernel);
        assert_eq!(
            p.frames.iter().map(|f| f.frame()).collect::<Vec<_>>(),
            [64, 128]
        );
        assert_eq!(p.trial_duration, Duration::from_secs(3));
        assert!((p.resolution - 0.005).abs() < 1e-12);
        assert_eq!(p.straggler_wait, Duration::from_millis(100));
        assert_eq!(p.ports, Some(("p0".into(), "p1".into())));
        assert_eq!(p.line_speed_bps, Some(1_000_000_000));
        assert_eq!(p.calibration_path, file);
        assert_eq!(p.stored, Calibration::default());
        assert!(plan("").unwrap().ports.is_none());
        for (args, says) in [
            (
                "--engine xdp --receiver socket",
                "--receiver socket hands every frame",
            ),
            ("--sizes 20", "20"),
            ("--trial-duration 1ms", "--trial-duration"),
            ("--resolution 0", "--resolution"),
            ("--straggler-wait soon", "--straggler-wait"),
            ("--port-a p0 --port-b p0", "both 'p0'"),
            ("--line-speed fast", "fast"),
        ] {
            let e = plan(args).unwrap_err();
            assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{args}: {e:?}");
            assert!(
                linerate_session::exit::one_line(&e).contains(says),
                "{args}: {e}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
