//! `linerate http`: HTTP/1.1 transfers through the DUT, a server on side B
//! (built in, or nginx) and N keep-alive clients on side A; goodput and
//! requests/s, laid out as LANCOM Table 13.

use super::stack::{self, parse_size, read_records, StackPlan};
use crate::args::HttpArgs;
use crate::error::{bail, err, Result};
use crate::exit::Outcome;
use crate::ports::parse_trial_duration;
use crate::recorder::RecordPlan;
use linerate_goodput::http::{self, HttpConfig, MAX_OBJECT};
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

impl HttpPlan {
    /// Every value of `args` checked (output files included, the
    /// `--table-from` files read); nothing on the machine is touched.
    pub fn from_args(args: &HttpArgs) -> Result<HttpPlan> {
        if !args.table_from.is_empty() {
            return Ok(HttpPlan::Table(read_records::<HttpRecord>(
                &args.table_from,
            )?));
        }
        let directions = Direction::parse_list(&args.direction)
            .ok_or_else(|| err!(BadInput, "--direction must be download, upload or both"))?;
        let duration = parse_trial_duration(&args.duration, "--duration")?;
        let port = stack::check_port(args.port, 8080)?;
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
        stack::check_outputs("http", &args.record.plan(), args.json.as_deref())?;
        let path = StackPlan::from_args(&args.ports)?;
        Ok(HttpPlan::Measure(Box::new(HttpMeasure {
            path,
            directions,
            duration,
            port,
            clients: args.clients as usize,
            sizes,
            nginx,
            json: args.json.clone(),
            record: args.record.plan(),
        })))
    }
}

pub fn run(plan: HttpPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let plan = match plan {
        HttpPlan::Table(records) => {
            print!("{}", report::http_by_scenario(&records));
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

    let path = stack::open(&path_plan)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;

    fn plan(args: &str) -> Result<HttpPlan> {
        let argv = format!("linerate http --no-db {args}");
        let Command::Http(a) = Cli::try_parse_from(argv.split_whitespace())?.command else {
            unreachable!()
        };
        HttpPlan::from_args(&a)
    }

    #[test]
    fn an_http_plan_holds_every_value_checked() {
        let HttpPlan::Measure(m) = plan(
            "--port-a a0 --port-b b0 --ip-a 198.18.0.2/24 --gw-a 198.18.0.1 \
             --ip-b 198.19.0.2/24 --gw-b 198.19.0.1 --connect-to 203.0.113.1 \
             --clients 7 --object-size 1M,64k --direction both --duration 5s",
        )
        .unwrap() else {
            panic!("a measurement")
        };
        assert_eq!(m.directions, [Direction::Download, Direction::Upload]);
        assert_eq!(m.duration, Duration::from_secs(5));
        assert_eq!(m.port, 8080);
        assert_eq!(m.clients, 7);
        assert_eq!(m.sizes, [1 << 20, 64 << 10]);
        assert!(!m.nginx);
        assert_eq!(m.path.connect_to, Some("203.0.113.1".parse().unwrap()));
        let stack::StackTarget::Ports { a, b } = &m.path.target else {
            panic!("named ports")
        };
        assert_eq!((a.ifname.as_str(), b.ifname.as_str()), ("a0", "b0"));
        assert_eq!(a.prefix_len, 24);
        assert_eq!(b.gateway, "198.19.0.1".parse::<std::net::IpAddr>().unwrap());
        let ports =
            "--port-a a0 --port-b b0 --gw-a 198.18.0.1 --ip-b 198.19.0.2/24 --gw-b 198.19.0.1";
        for (args, says) in [
            ("--lab --object-size 2G".to_string(), "--object-size 2147483648"),
            ("--lab --object-size big".to_string(), "--object-size"),
            ("--lab --server nginx --direction both".to_string(), "--server nginx"),
            ("--lab --port 0".to_string(), "--port 0"),
            (format!("{ports} --ip-a 198.18.0.2"), "--ip-a"),
            (format!("{ports} --ip-a 2001:2::2/64"), "mix IPv4 and IPv6"),
            (format!("{ports} --ip-a 198.18.0.2/24 --connect-to 2001:2::9"), "--connect-to"),
            ("--port-a a0 --port-b a0 --ip-a 198.18.0.2/24 --gw-a 198.18.0.1 --ip-b 198.19.0.2/24 --gw-b 198.19.0.1".to_string(), "both 'a0'"),
            ("".to_string(), "--port-a is missing"),
        ] {
            let e = plan(&args).unwrap_err();
            assert_eq!(e.kind(), crate::error::Kind::BadInput, "{args}: {e:?}");
            assert!(crate::exit::one_line(&e).contains(says), "{args}: {e}");
        }
    }
}
