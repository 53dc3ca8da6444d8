//! `linerate tcp`: N parallel TCP streams through the DUT (kernel stack in
//! the tester namespaces), goodput per stream and total, retransmissions
//! and link usage, laid out as LANCOM Table 12.

use super::stack::{self, StackPlan};
use crate::error::Result;
use crate::exit::Outcome;
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

pub fn run(plan: TcpPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let plan = match plan {
        TcpPlan::Table(records) => {
            outp!("{}", report::tcp_by_scenario(&records));
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

    let path = stack::open(&path_plan, interrupt)?;
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
