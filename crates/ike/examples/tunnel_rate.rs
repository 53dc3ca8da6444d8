//! Tunnel setup rate and memory of linerate's fleet against linerate's
//! responder (issue 27's performance section). Two roles, each run in its
//! own network namespace by scripts/bench-tunnels.sh:
//!
//! ```text
//! tunnel_rate respond  --local 10.77.0.1 --psk-file F [--ike PROPOSALS]
//! tunnel_rate initiate --gateway 10.77.0.1 --psk-file F --first 10.78.0.1
//!                      --count N [--ike aes128-sha256-x25519] [--window 256]
//! ```
//!
//! `respond` answers every initiator until killed. `initiate` brings up N
//! tunnels from N addresses counted up from `--first` (they must be local:
//! the script routes a /16 to `lo`), deletes them, and prints one line:
//! tunnels per second (N established over the time from the first
//! IKE_SA_INIT to the last CHILD_SA installed), setup-time percentiles, and
//! the process's resident memory before the fleet and with every tunnel up
//! (VmRSS from /proc/self/status). The key is read from a file (mode 0600),
//! never from the command line.

use linerate_ike::*;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

fn usage() -> ! {
    eprintln!("usage: tunnel_rate respond --local ADDR --psk-file FILE [--ike PROPOSALS]");
    eprintln!("       tunnel_rate initiate --gateway ADDR --psk-file FILE --first ADDR --count N [--ike PROPOSAL] [--window N]");
    std::process::exit(2);
}

fn fail(message: impl std::fmt::Display) -> ! {
    eprintln!("tunnel_rate: {message}");
    std::process::exit(2);
}

/// VmRSS of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

struct Args {
    role: String,
    values: std::collections::HashMap<String, String>,
}

impl Args {
    fn parse() -> Args {
        let mut it = std::env::args().skip(1);
        let role = it.next().unwrap_or_else(|| usage());
        let mut values = std::collections::HashMap::new();
        while let Some(k) = it.next() {
            let Some(name) = k.strip_prefix("--") else {
                usage()
            };
            let v = it.next().unwrap_or_else(|| usage());
            values.insert(name.to_string(), v);
        }
        Args { role, values }
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.values.get(name).map(String::as_str)
    }

    fn need(&self, name: &str) -> &str {
        self.get(name)
            .unwrap_or_else(|| fail(format!("--{name} is required")))
    }

    fn addr(&self, name: &str) -> Ipv4Addr {
        self.need(name)
            .parse()
            .unwrap_or_else(|_| fail(format!("--{name}: not an IPv4 address")))
    }
}

fn main() {
    let args = Args::parse();
    let psk = Psk::read_file(Path::new(args.need("psk-file"))).unwrap_or_else(|e| fail(e));
    match args.role.as_str() {
        "respond" => respond(&args, psk),
        "initiate" => initiate(&args, psk),
        _ => usage(),
    }
}

fn respond(args: &Args, psk: Psk) {
    let ike = IkeProposals::parse(args.get("ike").unwrap_or("aes128-sha256-x25519-ecp256"))
        .unwrap_or_else(|e| fail(e));
    let config = ResponderConfig {
        local: args.addr("local"),
        ports: Ports::default(),
        local_id: None,
        psk,
        ike,
        esp: EspSuite::Aes128Gcm16,
        local_ts: TrafficSelector::parse("198.19.0.0/24").unwrap(),
        remote_ts: TrafficSelector::parse("198.18.0.0/16").unwrap(),
        retransmit: Retransmit::default(),
    };
    let mut responder = Responder::bind(config).unwrap_or_else(|e| fail(e));
    eprintln!("tunnel_rate: responding on {}", args.need("local"));
    loop {
        responder.poll(Duration::from_secs(1));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[i].as_secs_f64() * 1e3
}

fn initiate(args: &Args, psk: Psk) {
    let count: usize = args
        .need("count")
        .parse()
        .unwrap_or_else(|_| fail("--count: not a number"));
    if !(1..=65_000).contains(&count) {
        fail("--count: 1 to 65000");
    }
    let window: usize = args
        .get("window")
        .unwrap_or("256")
        .parse()
        .unwrap_or_else(|_| fail("--window: not a number"));
    let proposal = args.get("ike").unwrap_or("aes128-sha256-x25519");
    let ike = IkeProposals::parse(proposal).unwrap_or_else(|e| fail(e));
    let first = u32::from(args.addr("first"));
    let peers: Vec<Peer> = (0..count as u32)
        .map(|i| Peer {
            local: Ipv4Addr::from(first + i),
            local_id: None,
            // One /32 of 198.18.0.0/16 per peer.
            local_ts: TrafficSelector::range(
                Ipv4Addr::from(0xc612_0000 + i),
                Ipv4Addr::from(0xc612_0000 + i),
            ),
        })
        .collect();
    let config = FleetConfig {
        gateway: args.addr("gateway"),
        gateway_ports: Ports::default(),
        local_ports: Ports::default(),
        remote_id: None,
        psk,
        ike,
        esp: EspSuite::Aes128Gcm16,
        remote_ts: TrafficSelector::parse("198.19.0.0/24").unwrap(),
        retransmit: Retransmit {
            timeout: Duration::from_secs(1),
            tries: 5,
        },
        force_encap: true,
        peers,
        attempt_rate: None,
        window,
    };
    let rss_before = rss_kib();
    let mut fleet = Fleet::bind(config).unwrap_or_else(|e| fail(e));
    let start = Instant::now();
    let mut last = start;
    let setups = fleet.bring_up(&mut |_| last = Instant::now());
    let first_sent = setups.iter().map(|s| s.started).min().unwrap_or(start);
    let rss_up = rss_kib();
    let mut times: Vec<Duration> = Vec::new();
    let mut failed = 0;
    let mut first_error = None;
    for s in &setups {
        match &s.outcome {
            Ok(d) => times.push(*d),
            Err(e) => {
                failed += 1;
                first_error.get_or_insert_with(|| e.to_string());
            }
        }
    }
    times.sort();
    let seconds = last.saturating_duration_since(first_sent).as_secs_f64();
    let established = times.len();
    let rate = if seconds > 0.0 {
        established as f64 / seconds
    } else {
        0.0
    };
    println!(
        "ike={proposal} tunnels={count} established={established} failed={failed} seconds={seconds:.3} tunnels_per_s={rate:.0} setup_ms_p50={:.2} setup_ms_p90={:.2} setup_ms_p99={:.2} setup_ms_max={:.2} rss_before_kib={rss_before} rss_up_kib={rss_up} rss_per_tunnel_kib={:.2} window={window}",
        percentile(&times, 50.0),
        percentile(&times, 90.0),
        percentile(&times, 99.0),
        times.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
        (rss_up.saturating_sub(rss_before)) as f64 / count as f64,
    );
    if let Some(e) = first_error {
        eprintln!("tunnel_rate: first failure: {e}");
    }
    fleet.delete_all();
    if failed > 0 {
        std::process::exit(1);
    }
}
