//! `linerate tunnels`: how fast a VPN gateway brings up N IPsec tunnels,
//! one per emulated peer (the IETF's IPsec benchmarking terms: Tunnels Per
//! Second, IKE setup rate). The numbers are computed here, from each
//! tunnel's outcome; [`tunnels_table`] only lays them out.

use crate::report::{sig3, thousands};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::net::Ipv4Addr;

/// How one peer's tunnel setup ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunnelOutcome {
    /// The peer's outer address (the source of its IKE and ESP).
    pub peer: Ipv4Addr,
    /// Its slice of the network behind linerate (its TSi).
    pub remote_net: String,
    /// When its first IKE_SA_INIT was sent, in ms after the run's first.
    pub started_ms: f64,
    /// IKE_SA_INIT sent to CHILD_SA installed, in ms; None when it failed.
    pub setup_ms: Option<f64>,
    /// Why it failed, in one line (the gateway's notify named).
    pub error: Option<String>,
    /// The failure's group: the gateway's notify (`NO_PROPOSAL_CHOSEN`,
    /// `AUTHENTICATION_FAILED`, ...) or what happened instead (`no answer`).
    pub reason: Option<String>,
}

impl TunnelOutcome {
    /// When the CHILD_SA was installed, in ms after the run's first
    /// IKE_SA_INIT.
    fn up_at_ms(&self) -> Option<f64> {
        self.setup_ms.map(|s| self.started_ms + s)
    }
}

/// The tunnels that failed for one reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FailureGroup {
    pub reason: String,
    pub count: u64,
    /// The first peer (in peer order) that failed so, and its error.
    pub first_peer: Ipv4Addr,
    pub example: String,
}

/// The distribution of setup times (IKE_SA_INIT sent to CHILD_SA
/// installed) of the established tunnels, in ms: percentiles from an HDR
/// histogram of microseconds (3 significant digits), min and max exact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetupTimes {
    pub min: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl SetupTimes {
    /// None when nothing was established.
    pub fn of(setup_ms: &[f64]) -> Option<SetupTimes> {
        if setup_ms.is_empty() {
            return None;
        }
        // 1 µs to one hour, 3 significant digits.
        let mut h =
            Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds");
        for &ms in setup_ms {
            h.saturating_record(((ms * 1000.0).round() as u64).max(1));
        }
        let q = |quantile: f64| h.value_at_quantile(quantile) as f64 / 1000.0;
        let min = setup_ms.iter().copied().fold(f64::INFINITY, f64::min);
        let max = setup_ms.iter().copied().fold(0.0, f64::max);
        Some(SetupTimes {
            min,
            // The histogram's value stands for a bucket: never outside the
            // values really measured.
            p50: q(0.50).clamp(min, max),
            p90: q(0.90).clamp(min, max),
            p99: q(0.99).clamp(min, max),
            max,
            mean: setup_ms.iter().sum::<f64>() / setup_ms.len() as f64,
        })
    }
}

/// One tunnel's test frames (`--traffic`), in peer order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunnelTraffic {
    pub peer: Ipv4Addr,
    /// Its IKE_SA_INIT sent to its first intact test frame at port A, in
    /// ms; None when none arrived (or it never came up).
    pub ttfp_ms: Option<f64>,
    /// Frames the kernel took at port B (from its CHILD_SA installed to
    /// the end of the hold).
    pub sent: u64,
    /// Intact test frames of this tunnel at port A, each counted once.
    pub received: u64,
    /// Its frames that arrived damaged, and those that arrived again.
    pub errored: u64,
    pub duplicates: u64,
    /// What the gateway decrypted on this tunnel's CHILD_SA, where
    /// linerate can ask (the lab's charon, before the deletes).
    pub gateway_decrypted: Option<u64>,
}

/// `--traffic`: every tunnel's test frames through the gateway, port B to
/// port A, and their totals.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrafficRecord {
    /// Frames per second each tunnel sent.
    pub rate_per_tunnel: f64,
    /// The test frames' size at port A (Ethernet, with FCS).
    pub frame_size: u64,
    /// Where they arrived: port A's interface and linerate's address there.
    pub port_a: String,
    pub sent: u64,
    pub received: u64,
    /// sent - received (frames damaged on the way count as lost).
    pub lost: u64,
    pub errored: u64,
    pub duplicates: u64,
    /// Frames the kernel refused at port B (its queue full): not sent.
    pub refused: u64,
    /// Test frames at port A that belong to no tunnel of the run.
    pub foreign: u64,
    /// Frames port A's own ring dropped (tester-side loss).
    pub rx_ring_drops: u64,
    /// The gateway's own count of the frames it decrypted on the
    /// tunnels' CHILD_SAs, when linerate can ask it (the lab's charon).
    pub gateway_decrypted: Option<u64>,
    /// Tunnels that were up but delivered no test frame before the hold
    /// ended ("up, no traffic through it").
    pub no_traffic: Vec<Ipv4Addr>,
    /// Every tunnel, in peer order.
    pub tunnels: Vec<TunnelTraffic>,
}

/// What the run asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunnelsSettings {
    /// The gateway's IKE address.
    pub gateway: Ipv4Addr,
    /// The IKE proposals offered, strongSwan's syntax.
    pub ike: String,
    /// The CHILD_SAs' ESP suite.
    pub esp: String,
    /// The gateway's protected network (every tunnel's TSr).
    pub local_net: String,
    /// The network behind linerate, split into one slice per tunnel.
    pub remote_net: String,
    /// Each tunnel's slice: a network of this prefix length.
    pub slice_prefix: u8,
    /// The first and last peer address.
    pub first_peer: Ipv4Addr,
    pub last_peer: Ipv4Addr,
    /// New handshakes per second; None: as fast as the window allows.
    pub attempt_rate: Option<f64>,
    /// Handshakes in flight at most.
    pub window: usize,
    /// How long the tunnels were to be held up before the deletes.
    pub hold_s: f64,
}

/// What happened while the tunnels were held.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HoldRecord {
    /// How long they were held (shorter when interrupted).
    pub seconds: f64,
    /// Tunnels still up at the end.
    pub up_at_end: u64,
    /// Liveness checks (DPD) the gateway sent and linerate answered.
    pub liveness_checks: u64,
    /// IKE SAs or CHILD_SAs the gateway deleted.
    pub deleted_by_gateway: u64,
    /// Other requests answered (notifications, refused rekeys).
    pub other_requests: u64,
}

/// Where the CPU went while the tunnels were set up: whether the rate is
/// the gateway's or the tester's own ceiling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetupCpu {
    /// Wall time of the setups (first attempt to the last outcome), s.
    pub wall_s: f64,
    /// linerate's process CPU time over it, s, and as a share of one core.
    pub tester_s: f64,
    pub tester_busy: f64,
    /// The gateway daemon's CPU time over it, s, and its share of one
    /// core; None when linerate cannot see the gateway's processes.
    pub gateway_s: Option<f64>,
    pub gateway_busy: Option<f64>,
    /// linerate's CPU time per attempted tunnel, ms.
    pub tester_ms_per_tunnel: f64,
    /// linerate's own CPU was busy enough (80 % of one core or more)
    /// that the rate may be the tester's ceiling, not the gateway's.
    pub tester_limited: bool,
}

impl SetupCpu {
    /// Shares and the tester-limited flag from the measured times.
    pub fn new(wall_s: f64, tester_s: f64, gateway_s: Option<f64>, attempted: u64) -> SetupCpu {
        let share = |cpu: f64| if wall_s > 0.0 { cpu / wall_s } else { 0.0 };
        let tester_busy = share(tester_s);
        SetupCpu {
            wall_s,
            tester_s,
            tester_busy,
            gateway_s,
            gateway_busy: gateway_s.map(share),
            tester_ms_per_tunnel: 1000.0 * tester_s / attempted.max(1) as f64,
            tester_limited: tester_busy >= 0.8,
        }
    }
}

/// `linerate tunnels`' report (its `--json` and the stored document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunnelsReport {
    /// "tunnels".
    pub test: String,
    pub settings: TunnelsSettings,
    /// Handshakes started (one per peer).
    pub attempted: u64,
    /// Tunnels whose CHILD_SA was installed.
    pub established: u64,
    pub failed: u64,
    /// The failures by reason, the commonest first.
    pub failures: Vec<FailureGroup>,
    /// Established tunnels ÷ the time from the first IKE_SA_INIT to the
    /// last CHILD_SA installed; None when none was established.
    pub tunnels_per_s: Option<f64>,
    /// That time, in seconds.
    pub setup_span_s: Option<f64>,
    /// The setup-time distribution of the established tunnels.
    pub setup_ms: Option<SetupTimes>,
    /// The tunnels' time up before the deletes.
    pub hold: Option<HoldRecord>,
    /// What the gateway itself listed (lab: its IKE SAs and CHILD_SAs
    /// over vici, after the setups and after the deletes).
    pub gateway_checks: Vec<String>,
    /// What limits the gateway's setup rate, when linerate knows it (the
    /// lab's charon).
    pub gateway_note: Option<String>,
    /// CPU time (user + system) during the setups: linerate's whole
    /// process (its IKE, Diffie-Hellman included, runs in one thread), and
    /// the gateway's daemon where linerate can read it (the lab's charon).
    #[serde(default)]
    pub cpu: Option<SetupCpu>,
    /// `--traffic`: the time-to-first-packet distribution of the tunnels
    /// that delivered a test frame (IKE_SA_INIT sent to the first intact
    /// test frame at port A), in ms.
    #[serde(default)]
    pub ttfp_ms: Option<SetupTimes>,
    /// `--traffic`: every tunnel's test frames.
    #[serde(default)]
    pub traffic: Option<TrafficRecord>,
    /// Stopped by a signal before the hold ended.
    pub interrupted: bool,
    /// Every tunnel in peer order.
    pub tunnels: Vec<TunnelOutcome>,
}

impl TunnelsReport {
    /// The report of `tunnels` (in peer order): counts, failures grouped
    /// by reason, tunnels per second and the setup-time distribution.
    pub fn new(settings: TunnelsSettings, tunnels: Vec<TunnelOutcome>) -> TunnelsReport {
        let setup: Vec<f64> = tunnels.iter().filter_map(|t| t.setup_ms).collect();
        let established = setup.len() as u64;
        let attempted = tunnels.len() as u64;
        let mut failures: Vec<FailureGroup> = Vec::new();
        for t in tunnels.iter().filter(|t| t.setup_ms.is_none()) {
            let reason = t.reason.clone().unwrap_or_else(|| "unknown".into());
            match failures.iter_mut().find(|g| g.reason == reason) {
                Some(g) => g.count += 1,
                None => failures.push(FailureGroup {
                    reason,
                    count: 1,
                    first_peer: t.peer,
                    example: t.error.clone().unwrap_or_default(),
                }),
            }
        }
        // The commonest first; equal counts in the order first seen.
        failures.sort_by_key(|g| std::cmp::Reverse(g.count));
        let first = tunnels
            .iter()
            .map(|t| t.started_ms)
            .fold(f64::INFINITY, f64::min);
        let last_up = tunnels
            .iter()
            .filter_map(TunnelOutcome::up_at_ms)
            .fold(f64::NEG_INFINITY, f64::max);
        let span_s = (established > 0).then(|| (last_up - first) / 1000.0);
        TunnelsReport {
            test: "tunnels".into(),
            settings,
            attempted,
            established,
            failed: attempted - established,
            failures,
            tunnels_per_s: span_s.filter(|s| *s > 0.0).map(|s| established as f64 / s),
            setup_span_s: span_s,
            setup_ms: SetupTimes::of(&setup),
            hold: None,
            gateway_checks: Vec::new(),
            gateway_note: None,
            cpu: None,
            ttfp_ms: None,
            traffic: None,
            interrupted: false,
            tunnels,
        }
    }

    /// Adds `--traffic`'s record: the totals from its tunnels, the tunnels
    /// up without traffic named, the time-to-first-packet distribution.
    pub fn set_traffic(&mut self, mut traffic: TrafficRecord) {
        let t = &traffic.tunnels;
        traffic.sent = t.iter().map(|f| f.sent).sum();
        traffic.received = t.iter().map(|f| f.received).sum();
        traffic.lost = traffic.sent.saturating_sub(traffic.received);
        traffic.errored = t.iter().map(|f| f.errored).sum();
        traffic.duplicates = t.iter().map(|f| f.duplicates).sum();
        traffic.gateway_decrypted = t
            .iter()
            .map(|f| f.gateway_decrypted)
            .sum::<Option<u64>>()
            .filter(|_| !t.is_empty());
        traffic.no_traffic = self
            .tunnels
            .iter()
            .zip(t)
            .filter(|(o, f)| o.setup_ms.is_some() && f.ttfp_ms.is_none())
            .map(|(o, _)| o.peer)
            .collect();
        let ttfp: Vec<f64> = t.iter().filter_map(|f| f.ttfp_ms).collect();
        self.ttfp_ms = SetupTimes::of(&ttfp);
        self.traffic = Some(traffic);
    }

    /// One line for `linerate runs` and progress.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "{} of {} tunnels up",
            thousands(self.established),
            thousands(self.attempted)
        );
        if let Some(tps) = self.tunnels_per_s {
            let _ = write!(s, ", {} tunnels/s", sig3(tps));
        }
        if let Some(t) = &self.setup_ms {
            let _ = write!(s, ", setup p50 {} ms", sig3(t.p50));
        }
        if let Some(t) = &self.ttfp_ms {
            let _ = write!(s, ", first packet p50 {} ms", sig3(t.p50));
        }
        if let Some(t) = self.traffic.as_ref().filter(|t| !t.no_traffic.is_empty()) {
            let _ = write!(
                s,
                "; {} up without traffic",
                thousands(t.no_traffic.len() as u64)
            );
        }
        if self.failed > 0 {
            let reasons: Vec<String> = self
                .failures
                .iter()
                .map(|g| format!("{} {}", thousands(g.count), g.reason))
                .collect();
            let _ = write!(s, "; failed: {}", reasons.join(", "));
        }
        s
    }
}

/// The report as a table.
pub fn tunnels_table(r: &TunnelsReport) -> String {
    let s = &r.settings;
    let mut out = String::new();
    let rate = match s.attempt_rate {
        Some(rate) => format!("{} attempts/s", sig3(rate)),
        None => "as fast as the gateway answers".to_string(),
    };
    let _ = writeln!(
        out,
        "IPsec tunnel setup rate: {} peers ({} .. {}) of the gateway {}, IKE {}, ESP {}; window {}, {}",
        thousands(r.attempted),
        s.first_peer,
        s.last_peer,
        s.gateway,
        s.ike,
        s.esp,
        s.window,
        rate
    );
    let _ = writeln!(
        out,
        "Each peer protects a /{} of {} (TSi) towards {} (TSr)",
        s.slice_prefix, s.remote_net, s.local_net
    );
    let _ = writeln!(out, "  Attempted     {:>10}", thousands(r.attempted));
    let _ = writeln!(out, "  Established   {:>10}", thousands(r.established));
    let _ = writeln!(out, "  Failed        {:>10}", thousands(r.failed));
    match (r.tunnels_per_s, r.setup_span_s) {
        (Some(tps), Some(span)) => {
            let _ = writeln!(
                out,
                "  Tunnels/s     {:>10}   ({} established in {} s, first IKE_SA_INIT to last CHILD_SA installed)",
                sig3(tps),
                thousands(r.established),
                sig3(span)
            );
        }
        _ => {
            let _ = writeln!(out, "  Tunnels/s     {:>10}", "-");
        }
    }
    if let Some(t) = &r.setup_ms {
        let _ = writeln!(
            out,
            "  Setup time [ms] (IKE_SA_INIT sent to CHILD_SA installed)"
        );
        let _ = writeln!(
            out,
            "      min {:>8}   p50 {:>8}   p90 {:>8}   p99 {:>8}   max {:>8}   mean {:>8}",
            sig3(t.min),
            sig3(t.p50),
            sig3(t.p90),
            sig3(t.p99),
            sig3(t.max),
            sig3(t.mean)
        );
    }
    if let Some(t) = &r.traffic {
        traffic_lines(&mut out, r, t);
    }
    if !r.failures.is_empty() {
        let _ = writeln!(out, "  Failed, by the gateway's answer:");
        for g in &r.failures {
            let _ = writeln!(
                out,
                "    {:>8}  {}   (first: {}: {})",
                thousands(g.count),
                g.reason,
                g.first_peer,
                g.example
            );
        }
    }
    if let Some(h) = &r.hold {
        let _ = writeln!(
            out,
            "  Held {} s: {} up at the end; the gateway sent {} liveness checks, deleted {}, {} other requests (all answered)",
            sig3(h.seconds),
            thousands(h.up_at_end),
            thousands(h.liveness_checks),
            thousands(h.deleted_by_gateway),
            thousands(h.other_requests)
        );
    }
    if let Some(c) = &r.cpu {
        let gateway = match (c.gateway_s, c.gateway_busy) {
            (Some(s), Some(busy)) => format!(
                ", the gateway's daemon {} s ({:.0} % of one core)",
                sig3(s),
                100.0 * busy
            ),
            _ => String::new(),
        };
        let _ = writeln!(
            out,
            "  CPU over the {} s of setups: linerate {} s ({:.0} % of one core, {} ms per tunnel){gateway}",
            sig3(c.wall_s),
            sig3(c.tester_s),
            100.0 * c.tester_busy,
            sig3(c.tester_ms_per_tunnel)
        );
        if c.tester_limited {
            let _ = writeln!(
                out,
                "  * linerate's own CPU was busy {:.0} % of the setups: this rate may be the tester's ceiling, not the gateway's (its Diffie-Hellman costs most: x25519 or ecp256 cost far less than modp2048)",
                100.0 * c.tester_busy
            );
        }
    }
    for check in &r.gateway_checks {
        let _ = writeln!(out, "  Gateway: {check}");
    }
    if let Some(note) = &r.gateway_note {
        let _ = writeln!(out, "  Note: {note}");
    }
    if r.interrupted {
        let _ = writeln!(out, "  Interrupted: the hold was cut short.");
    }
    out
}

/// `--traffic`'s lines of the table.
fn traffic_lines(out: &mut String, r: &TunnelsReport, t: &TrafficRecord) {
    let _ = writeln!(
        out,
        "  Traffic: {}-byte test frames, {} frames/s per tunnel from its CHILD_SA installed to the end of the hold, port B -> gateway -> port A ({})",
        t.frame_size,
        sig3(t.rate_per_tunnel),
        t.port_a
    );
    let delivered = t.tunnels.iter().filter(|f| f.ttfp_ms.is_some()).count() as u64;
    match &r.ttfp_ms {
        Some(d) => {
            let _ = writeln!(
                out,
                "  Time to first packet [ms] (IKE_SA_INIT sent to first test frame at port A), {} tunnels",
                thousands(delivered)
            );
            let _ = writeln!(
                out,
                "      min {:>8}   p50 {:>8}   p90 {:>8}   p99 {:>8}   max {:>8}   mean {:>8}",
                sig3(d.min),
                sig3(d.p50),
                sig3(d.p90),
                sig3(d.p99),
                sig3(d.max),
                sig3(d.mean)
            );
        }
        None => {
            let _ = writeln!(
                out,
                "  Time to first packet: no test frame arrived at port A"
            );
        }
    }
    let loss = if t.sent > 0 {
        format!(" ({} %)", sig3(100.0 * t.lost as f64 / t.sent as f64))
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  Frames: sent {}, received {}, lost {}{loss}; {} damaged, {} duplicates{}",
        thousands(t.sent),
        thousands(t.received),
        thousands(t.lost),
        thousands(t.errored),
        thousands(t.duplicates),
        match t.gateway_decrypted {
            Some(g) => format!("; the gateway decrypted {}", thousands(g)),
            None => String::new(),
        }
    );
    if t.refused > 0 || t.rx_ring_drops > 0 || t.foreign > 0 {
        let _ = writeln!(
            out,
            "  * tester side: {} frames refused by port B's kernel queue (not sent), {} dropped by port A's ring, {} test frames of no tunnel of this run",
            thousands(t.refused),
            thousands(t.rx_ring_drops),
            thousands(t.foreign)
        );
    }
    if !t.no_traffic.is_empty() {
        let shown: Vec<String> = t
            .no_traffic
            .iter()
            .take(10)
            .map(|p| p.to_string())
            .collect();
        let more = t.no_traffic.len().saturating_sub(shown.len());
        let _ = writeln!(
            out,
            "  * Up, no traffic through it: {} tunnels: {}{}",
            thousands(t.no_traffic.len() as u64),
            shown.join(", "),
            if more > 0 {
                format!(
                    " and {} more (the JSON lists every tunnel)",
                    thousands(more as u64)
                )
            } else {
                String::new()
            }
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> TunnelsSettings {
        TunnelsSettings {
            gateway: Ipv4Addr::new(198, 19, 0, 1),
            ike: "aes256-sha256-modp2048".into(),
            esp: "aes128gcm16".into(),
            local_net: "198.18.0.0/24".into(),
            remote_net: "198.19.128.0/17".into(),
            slice_prefix: 24,
            first_peer: Ipv4Addr::new(198, 19, 64, 1),
            last_peer: Ipv4Addr::new(198, 19, 64, 4),
            attempt_rate: None,
            window: 64,
            hold_s: 0.0,
        }
    }

    fn up(n: u8, started_ms: f64, setup_ms: f64) -> TunnelOutcome {
        TunnelOutcome {
            peer: Ipv4Addr::new(198, 19, 64, n),
            remote_net: format!("198.19.{}.0/24", 127 + n),
            started_ms,
            setup_ms: Some(setup_ms),
            error: None,
            reason: None,
        }
    }

    fn failed(n: u8, started_ms: f64, reason: &str) -> TunnelOutcome {
        TunnelOutcome {
            setup_ms: None,
            error: Some(format!(
                "the gateway refused IKE_SA_INIT: it answered {reason}"
            )),
            reason: Some(reason.into()),
            ..up(n, started_ms, 0.0)
        }
    }

    #[test]
    fn tunnels_per_second_run_from_the_first_attempt_to_the_last_installation() {
        // Up at 10, 30 and 50 ms (started 0, 10, 20); one failure started
        // later counts as attempted but not in the span.
        let r = TunnelsReport::new(
            settings(),
            vec![
                up(1, 0.0, 10.0),
                up(2, 10.0, 20.0),
                up(3, 20.0, 30.0),
                failed(4, 200.0, "NO_PROPOSAL_CHOSEN"),
            ],
        );
        assert_eq!((r.attempted, r.established, r.failed), (4, 3, 1));
        assert!((r.setup_span_s.unwrap() - 0.050).abs() < 1e-12);
        assert!((r.tunnels_per_s.unwrap() - 60.0).abs() < 1e-9);
        let t = r.setup_ms.as_ref().unwrap();
        assert_eq!((t.min, t.max), (10.0, 30.0));
        assert!((t.p50 - 20.0).abs() < 0.05, "{t:?}");
        assert!((t.mean - 20.0).abs() < 1e-12);
        assert_eq!(r.failures.len(), 1);
        assert_eq!(r.failures[0].first_peer, Ipv4Addr::new(198, 19, 64, 4));
    }

    #[test]
    fn percentiles_follow_the_distribution() {
        // 1..=1000 ms: p50 500, p90 900, p99 990, within the histogram's
        // 3 significant digits.
        let times: Vec<f64> = (1..=1000).map(f64::from).collect();
        let t = SetupTimes::of(&times).unwrap();
        for (got, want) in [(t.p50, 500.0), (t.p90, 900.0), (t.p99, 990.0)] {
            assert!((got - want).abs() <= want * 0.002, "{got} vs {want}");
        }
        assert_eq!(t.max, 1000.0);
        assert_eq!(SetupTimes::of(&[]), None);
    }

    #[test]
    fn failures_are_grouped_by_reason_commonest_first() {
        let r = TunnelsReport::new(
            settings(),
            vec![
                failed(1, 0.0, "no answer"),
                failed(2, 1.0, "AUTHENTICATION_FAILED"),
                failed(3, 2.0, "AUTHENTICATION_FAILED"),
            ],
        );
        assert_eq!(r.established, 0);
        assert_eq!((r.tunnels_per_s, r.setup_ms.clone()), (None, None));
        let groups: Vec<(&str, u64)> = r
            .failures
            .iter()
            .map(|g| (g.reason.as_str(), g.count))
            .collect();
        assert_eq!(groups, [("AUTHENTICATION_FAILED", 2), ("no answer", 1)]);
        let table = tunnels_table(&r);
        assert!(table.contains("AUTHENTICATION_FAILED"), "{table}");
        assert!(table.contains("Tunnels/s              -"), "{table}");
        assert!(r
            .summary()
            .contains("failed: 2 AUTHENTICATION_FAILED, 1 no answer"));
    }

    #[test]
    fn a_busy_tester_is_flagged() {
        let c = SetupCpu::new(10.0, 9.0, Some(2.0), 300);
        assert!(c.tester_limited);
        assert!((c.tester_busy - 0.9).abs() < 1e-12);
        assert_eq!(c.gateway_busy, Some(0.2));
        assert!((c.tester_ms_per_tunnel - 30.0).abs() < 1e-9);
        let mut r = TunnelsReport::new(settings(), vec![up(1, 0.0, 12.5)]);
        r.cpu = Some(c);
        let table = tunnels_table(&r);
        assert!(
            table.contains("* linerate's own CPU was busy 90 %"),
            "{table}"
        );
        let calm = SetupCpu::new(10.0, 1.0, None, 300);
        assert!(!calm.tester_limited);
        r.cpu = Some(calm);
        assert!(!tunnels_table(&r).contains("ceiling"));
    }

    #[test]
    fn traffic_gives_the_time_to_first_packet_and_names_silent_tunnels() {
        let mut r = TunnelsReport::new(
            settings(),
            vec![
                up(1, 0.0, 10.0),
                up(2, 1.0, 20.0),
                failed(3, 2.0, "no answer"),
            ],
        );
        let frames = |n: u8, ttfp_ms, sent, received| TunnelTraffic {
            peer: Ipv4Addr::new(198, 19, 64, n),
            ttfp_ms,
            sent,
            received,
            errored: 0,
            duplicates: 0,
            gateway_decrypted: None,
        };
        r.set_traffic(TrafficRecord {
            rate_per_tunnel: 100.0,
            frame_size: 64,
            port_a: "a0 198.18.0.2".into(),
            tunnels: vec![
                frames(1, Some(14.5), 300, 290),
                frames(2, None, 250, 0),
                frames(3, None, 0, 0),
            ],
            ..TrafficRecord::default()
        });
        let t = r.traffic.as_ref().unwrap();
        assert_eq!((t.sent, t.received, t.lost), (550, 290, 260));
        assert_eq!(t.no_traffic, [Ipv4Addr::new(198, 19, 64, 2)]);
        assert_eq!(t.gateway_decrypted, None);
        let d = r.ttfp_ms.as_ref().unwrap();
        assert_eq!((d.min, d.max), (14.5, 14.5));
        let table = tunnels_table(&r);
        assert!(table.contains("Time to first packet [ms]"), "{table}");
        assert!(
            table.contains("sent 550, received 290, lost 260"),
            "{table}"
        );
        assert!(
            table.contains("Up, no traffic through it: 1 tunnels: 198.19.64.2"),
            "{table}"
        );
        assert!(r
            .summary()
            .contains("first packet p50 14.5 ms; 1 up without traffic"));
        let v = serde_json::to_value(&r).unwrap();
        for key in ["p50", "p90", "p99", "max"] {
            assert!(v["ttfp_ms"][key].is_number(), "{key}: {v}");
        }
        assert_eq!(v["traffic"]["tunnels"][0]["ttfp_ms"], 14.5);
        let back: TunnelsReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn the_json_has_the_fields_scripts_read() {
        let r = TunnelsReport::new(settings(), vec![up(1, 0.0, 12.5)]);
        let v = serde_json::to_value(&r).unwrap();
        for key in ["attempted", "established", "failed", "tunnels_per_s"] {
            assert!(v.get(key).is_some(), "{key}: {v}");
        }
        for key in ["p50", "p90", "p99", "max"] {
            assert!(v["setup_ms"][key].is_number(), "{key}: {v}");
        }
        assert_eq!(v["tunnels"][0]["peer"], "198.19.64.1");
        assert_eq!(v["tunnels"][0]["setup_ms"], 12.5);
        let back: TunnelsReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
    }
}
