//! `HttpPlan` from the command line's options.

use super::values::parse_trial_duration;
use crate::args::HttpArgs;
use linerate_goodput::http::MAX_OBJECT;
use linerate_goodput::record::HttpRecord;
use linerate_goodput::Direction;
use linerate_session::commands::stack::{self, parse_size, read_records};
use linerate_session::error::Result;
use linerate_session::plan::{HttpMeasure, HttpPlan};
use linerate_session::{bail, err};

impl HttpArgs {
    /// Every value of `args` checked (output files included, the
    /// `--table-from` files read); nothing on the machine is touched.
    pub fn plan(&self) -> Result<HttpPlan> {
        let args = self;
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
        let path = args.ports.plan()?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;
    use std::time::Duration;

    fn plan(args: &str) -> Result<HttpPlan> {
        let argv = format!("linerate http --no-db {args}");
        let Command::Http(a) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        a.plan()
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
            assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{args}: {e:?}");
            assert!(linerate_session::exit::one_line(&e).contains(says), "{args}: {e}");
        }
    }
}
