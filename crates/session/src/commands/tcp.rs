//! `linerate tcp`: N parallel TCP streams through the DUT (kernel stack in
//! the tester namespaces), goodput per stream and total, retransmissions
//! and link usage, laid out as LANCOM Table 12.

use super::stack::{self, parse_size, read_records, StackPlan};
use crate::args::TcpArgs;
use crate::error::{err, Result};
use crate::exit::Outcome;
use crate::ports::parse_trial_duration;
use crate::recorder::RecordPlan;
use linerate_goodput::record::TcpRecord;
use linerate_goodput::{report, tcp, Direction};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A `linerate tcp`, checked: what it was given, as values.
#[derive(Debug, Clone)]
pub enum TcpPlan {
    /// `--table-from`: earlier runs' records, read, laid out as LANCOM
    /// Table 14; nothing is measured.
    Table(Vec<TcpRecord>),
    /// Streams through the DUT (boxed: the plan is made once).
    Measure(Box<TcpMeasure>),
}

/// A TCP goodput measurement, checked.
#[derive(Debug, Clone)]
pub struct TcpMeasure {
    /// The two tester sides.
    pub path: StackPlan,
    /// Measured in this order.
    pub directions: Vec<Direction>,
    /// How long each direction measures.
    pub duration: Duration,
    /// The TCP port the server listens on.
    pub port: u16,
    pub streams: usize,
    /// Socket buffer in bytes; None: the kernel's autotuning.
    pub window: Option<u64>,
    pub json: Option<PathBuf>,
    pub record: RecordPlan,
}

impl TcpPlan {
    /// Every value of `args` checked (output files included, the
    /// `--table-from` files read); nothing on the machine is touched.
    pub fn from_args(args: &TcpArgs) -> Result<TcpPlan> {
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
        let path = StackPlan::from_args(&args.ports)?;
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

pub fn run(plan: TcpPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let plan = match plan {
        TcpPlan::Table(records) => {
            print!("{}", report::tcp_by_scenario(&records));
            return Ok(Outcome::Passed);
        }
        TcpPlan::Measure(m) => *m,
    };
    let TcpMeasure {
        path: path_plan,
        directions,
        duration,
        port,
        streams,
        window,
        json,
        record,
    } = plan;
    let mut recorder = stack::recorder(&record, json.as_deref())?;

    let path = stack::open(&path_plan)?;
    recorder.begin(path.record_info("tcp", duration))?;
    let cfg = tcp::TcpConfig {
        client: path.client.clone(),
        server: path.server.clone(),
        connect_to: path.connect_to(port),
        streams,
        window: window.map(|w| w as usize),
        duration,
        connect_timeout: path.connect_timeout,
    };
    let listener = match tcp::listen(&path.server, port, cfg.window, streams as i32 + 8) {
        Ok(l) => l,
        Err(e) => return stack::outcome(e),
    };
    let mut record = TcpRecord {
        test: "tcp".into(),
        path: path.info.clone(),
        streams,
        window_bytes: window,
        duration_s: duration.as_secs_f64(),
        port,
        runs: Vec::new(),
    };
    for direction in directions {
        let mut run = match tcp::run(&cfg, direction, &listener, interrupt) {
            Ok(run) => run,
            Err(e) => return stack::outcome(e),
        };
        (run.l2_bps, run.link_usage_percent) = path.l2_and_usage(run.goodput_bps);
        let stopped = run.interrupted;
        record.runs.push(run);
        recorder.save_partial(&record);
        if stopped {
            break;
        }
    }
    drop(listener);
    drop(path); // addresses and routes off before the report
    recorder.print(&report::tcp_table(&record));
    stack::finish(recorder, &record, interrupt)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;

    fn plan(args: &str) -> Result<TcpPlan> {
        let argv = format!("linerate tcp --no-db {args}");
        let Command::Tcp(a) = Cli::try_parse_from(argv.split_whitespace())?.command else {
            unreachable!()
        };
        TcpPlan::from_args(&a)
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
            assert_eq!(e.kind(), crate::error::Kind::BadInput, "{args}: {e:?}");
            assert!(crate::exit::one_line(&e).contains(says), "{args}: {e}");
        }
    }
}
