//! `linerate http`: HTTP/1.1 transfers through the DUT, a server on side B
//! (built in, or nginx) and N keep-alive clients on side A; goodput and
//! requests/s, laid out as LANCOM Table 13.

use super::stack::{self, StackPlan};
use crate::error::Result;
use crate::exit::Outcome;
use crate::recorder::RecordPlan;
use linerate_goodput::http::{self, HttpConfig};
use linerate_goodput::nginx::Nginx;
use linerate_goodput::record::HttpRecord;
use linerate_goodput::{report, tcp, Direction};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// A `linerate http`, checked: what it was given, as values.
#[derive(Debug, Clone)]
pub enum HttpPlan {
    /// `--table-from`: earlier runs' records, read, laid out as LANCOM
    /// Table 15; nothing is measured.
    Table(Vec<HttpRecord>),
    /// Transfers through the DUT (boxed: the plan is made once).
    Measure(Box<HttpMeasure>),
}

/// An HTTP goodput measurement, checked.
#[derive(Debug, Clone)]
pub struct HttpMeasure {
    /// The two tester sides.
    pub path: StackPlan,
    /// Measured in this order.
    pub directions: Vec<Direction>,
    /// How long each direction measures.
    pub duration: Duration,
    /// The TCP port the server listens on.
    pub port: u16,
    pub clients: usize,
    /// Object sizes in bytes, requested in turn.
    pub sizes: Vec<u64>,
    /// nginx serves, not the built-in server.
    pub nginx: bool,
    pub json: Option<PathBuf>,
    pub record: RecordPlan,
}

pub fn run(plan: HttpPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let plan = match plan {
        HttpPlan::Table(records) => {
            outp!("{}", report::http_by_scenario(&records));
            return Ok(Outcome::Passed);
        }
        HttpPlan::Measure(m) => *m,
    };
    let HttpMeasure {
        path: path_plan,
        directions,
        duration,
        port,
        clients,
        sizes,
        nginx,
        json,
        record,
    } = plan;
    let mut recorder = stack::recorder(&record, json.as_deref())?;

    let path = stack::open(&path_plan, interrupt)?;
    recorder.begin(path.record_info("http", duration))?;
    let rt = http::runtime()?;
    let listen = path.server.ip;
    let listen_addr = std::net::SocketAddr::new(listen, port);
    // The server lives until the end of this function (dropped before
    // `path`, which is declared earlier).
    let (_builtin, _nginx) = if nginx {
        match Nginx::start(path.server.netns.as_deref(), listen_addr, &sizes) {
            Ok(n) => (None, Some(n)),
            Err(e) => return stack::outcome(e),
        }
    } else {
        let max = sizes.iter().copied().max().unwrap_or(0);
        let listener = match tcp::listen(&path.server, port, None, 1024) {
            Ok(l) => l,
            Err(e) => return stack::outcome(e),
        };
        (Some(http::serve(listener, max)?), None)
    };
    let cfg = HttpConfig {
        client: path.client.clone(),
        connect_to: path.connect_to(port),
        clients,
        sizes: sizes.clone(),
        duration,
        connect_timeout: path.connect_timeout,
        upload_received: _builtin.as_ref().map(|s| s.received.clone()),
    };
    let mut record = HttpRecord {
        test: "http".into(),
        path: path.info.clone(),
        server: if nginx { "nginx" } else { "linerate (hyper)" }.into(),
        clients: cfg.clients,
        object_sizes: sizes,
        duration_s: duration.as_secs_f64(),
        port,
        runs: Vec::new(),
    };
    for direction in directions {
        let mut run = match http::run_clients(&rt, &cfg, direction, interrupt) {
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
    drop(_builtin);
    drop(_nginx);
    rt.shutdown_timeout(std::time::Duration::from_secs(1));
    drop(path);
    recorder.print(&report::http_table(&record));
    stack::finish(recorder, &record, interrupt)
}
