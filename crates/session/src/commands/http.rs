//! `linerate http`: HTTP/1.1 transfers through the DUT, a server on side B
//! (built in, or nginx) and N keep-alive clients on side A; goodput and
//! requests/s, laid out as LANCOM Table 13.

use super::stack::{self, parse_size, read_records};
use crate::args::HttpArgs;
use crate::error::{bail, err, Result};
use crate::exit::Outcome;
use crate::ports::parse_trial_duration;
use linerate_goodput::http::{self, HttpConfig, MAX_OBJECT};
use linerate_goodput::nginx::Nginx;
use linerate_goodput::record::HttpRecord;
use linerate_goodput::{report, tcp, Direction};
use std::sync::atomic::AtomicBool;

pub fn run(args: HttpArgs, interrupt: &AtomicBool) -> Result<Outcome> {
    if !args.table_from.is_empty() {
        let records = read_records::<HttpRecord>(&args.table_from)?;
        super::touch_machine()?;
        print!("{}", report::http_by_scenario(&records));
        return Ok(Outcome::Passed);
    }
    let directions = Direction::parse_list(&args.direction)
        .ok_or_else(|| err!(BadInput, "--direction must be download, upload or both"))?;
    let duration = parse_trial_duration(&args.duration, "--duration")?;
    stack::check_port(args.port, 8080)?;
    let sizes = args
        .object_size
        .iter()
        .map(|s| parse_size(s, "--object-size"))
        .collect::<Result<Vec<u64>>>()?;
    if let Some(big) = sizes.iter().find(|&&s| s > MAX_OBJECT) {
        bail!(
            BadInput,
            "--object-size {big} is above the largest object served (1G): pick smaller objects"
        );
    }
    let nginx = args.server == "nginx";
    if nginx && directions.contains(&Direction::Upload) {
        bail!(BadInput, "--server nginx measures downloads only (nginx keeps no upload target): use --direction download, or the built-in server for uploads");
    }
    let mut recorder = stack::recorder("http", &args.record, args.json.as_deref())?;

    let path = stack::open(&args.ports)?;
    recorder.begin(path.record_info("http", duration))?;
    let rt = http::runtime()?;
    let listen = path.server.ip;
    let listen_addr = std::net::SocketAddr::new(listen, args.port);
    // The server lives until the end of this function (dropped before
    // `path`, which is declared earlier).
    let (_builtin, _nginx) = if nginx {
        match Nginx::start(path.server.netns.as_deref(), listen_addr, &sizes) {
            Ok(n) => (None, Some(n)),
            Err(e) => return stack::outcome(e),
        }
    } else {
        let max = sizes.iter().copied().max().unwrap_or(0);
        let listener = match tcp::listen(&path.server, args.port, None, 1024) {
            Ok(l) => l,
            Err(e) => return stack::outcome(e),
        };
        (Some(http::serve(listener, max)?), None)
    };
    let cfg = HttpConfig {
        client: path.client.clone(),
        connect_to: path.connect_to(args.port),
        clients: args.clients as usize,
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
        port: args.port,
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
