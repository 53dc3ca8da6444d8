//! `linerate tcp`: N parallel TCP streams through the DUT (kernel stack in
//! the tester namespaces), goodput per stream and total, retransmissions
//! and link usage, laid out as LANCOM Table 12.

use super::stack::{self, parse_size, read_records};
use crate::args::TcpArgs;
use crate::error::{err, Result};
use crate::exit::Outcome;
use crate::ports::parse_trial_duration;
use linerate_goodput::record::TcpRecord;
use linerate_goodput::{report, tcp, Direction};
use std::sync::atomic::AtomicBool;

pub fn run(args: TcpArgs, interrupt: &AtomicBool) -> Result<Outcome> {
    if !args.table_from.is_empty() {
        let records = read_records::<TcpRecord>(&args.table_from)?;
        super::touch_machine()?;
        print!("{}", report::tcp_by_scenario(&records));
        return Ok(Outcome::Passed);
    }
    let directions = Direction::parse_list(&args.direction)
        .ok_or_else(|| err!(BadInput, "--direction must be download, upload or both"))?;
    let duration = parse_trial_duration(&args.duration, "--duration")?;
    stack::check_port(args.port, 5201)?;
    let window = args
        .window
        .as_deref()
        .map(|w| parse_size(w, "--window"))
        .transpose()?;
    let mut recorder = stack::recorder("tcp", &args.record, args.json.as_deref())?;

    let path = stack::open(&args.ports)?;
    recorder.begin(path.record_info("tcp", duration))?;
    let streams = args.streams as usize;
    let cfg = tcp::TcpConfig {
        client: path.client.clone(),
        server: path.server.clone(),
        connect_to: path.connect_to(args.port),
        streams,
        window: window.map(|w| w as usize),
        duration,
        connect_timeout: path.connect_timeout,
    };
    let listener = match tcp::listen(&path.server, args.port, cfg.window, streams as i32 + 8) {
        Ok(l) => l,
        Err(e) => return stack::outcome(e),
    };
    let mut record = TcpRecord {
        test: "tcp".into(),
        path: path.info.clone(),
        streams,
        window_bytes: window,
        duration_s: duration.as_secs_f64(),
        port: args.port,
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
