//! `TcpPlan` from the command line's options.

use super::values::parse_trial_duration;
use crate::args::TcpArgs;
use linerate_goodput::record::TcpRecord;
use linerate_goodput::Direction;
use linerate_session::commands::stack::{self, parse_size, read_records};
use linerate_session::err;
use linerate_session::error::Result;
use linerate_session::plan::{TcpMeasure, TcpPlan};

impl TcpArgs {
    /// Every value of `args` checked (output files included, the
    /// `--table-from` files read); nothing on the machine is touched.
    pub fn plan(&self) -> Result<TcpPlan> {
        let args = self;
        if !args.table_from.is_empty() {
            return Ok(TcpPlan::Table(read_records::<TcpRecord>(&args.table_from)?));
        }
        let directions = Direction::parse_list(&args.direction)
            .ok_or_else(|| err!(BadInput, "--direction must be download, upload or both"))?;
        let duration = parse_trial_duration(&args.duration, "--duration")?;
        let port = stack::check_port(args.port, 5201)?;
        let window = args
            .window
            .as_deref()
            .map(|w| parse_size(w, "--window"))
            .transpose()?;
        stack::check_outputs("tcp", &args.record.plan(), args.json.as_deref())?;
        let path = args.ports.plan()?;
        Ok(TcpPlan::Measure(Box::new(TcpMeasure {
            path,
            directions,
            duration,
            port,
            streams: args.streams as usize,
            window,
            json: args.json.clone(),
            record: args.record.plan(),
        })))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;
    use std::time::Duration;

    fn plan(args: &str) -> Result<TcpPlan> {
        let argv = format!("linerate tcp --no-db {args}");
        let Command::Tcp(a) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        a.plan()
    }

    #[test]
    fn a_tcp_plan_holds_every_value_checked() {
        let TcpPlan::Measure(m) = plan(
            "--lab --ipv6 -P 3 --direction upload --window 256k --duration 4s --port 5000 \
             --line-speed 1G --connect-timeout 2s --label x",
        )
        .unwrap() else {
            panic!("a measurement")
        };
        assert_eq!(m.directions, [Direction::Upload]);
        assert_eq!(m.duration, Duration::from_secs(4));
        assert_eq!(m.port, 5000);
        assert_eq!(m.streams, 3);
        assert_eq!(m.window, Some(256 * 1024));
        assert_eq!(m.path.line_speed_bps, Some(1_000_000_000));
        assert_eq!(m.path.connect_timeout, Duration::from_secs(2));
        assert_eq!(m.path.label.as_deref(), Some("x"));
        assert!(matches!(
            m.path.target,
            stack::StackTarget::Lab {
                name: None,
                ipv6: true
            }
        ));
        for (args, says) in [
            ("--lab --duration 1ms", "--duration"),
            ("--lab --port 0", "--port 0"),
            ("--lab --window lots", "--window"),
            ("--lab --pcap /tmp/x.pcap", "--pcap"),
            ("--lab --connect-timeout soon", "--connect-timeout"),
            ("--lab --connect-to 2001:2::9", "--connect-to"),
            ("--lab --line-speed fast", "fast"),
            ("--table-from /nonexistent-linerate/t.json", "--table-from"),
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
