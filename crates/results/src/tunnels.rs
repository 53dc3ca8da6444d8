//! `linerate tunnels`: how fast a VPN gateway brings up N IPsec tunnels,
//! one per emulated peer (the IETF's IPsec benchmarking terms: Tunnels Per
//! Second, IKE setup rate). The numbers are computed here, from each
//! tunnel's outcome; [`tunnels_table`] only lays them out.

mod rekeys;

use crate::report::{sig3, thousands};
use hdrhistogram::Histogram;
pub use rekeys::{HoldRekeys, RekeyFailure, TunnelRekeys};
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
    /// `--capacity`: the steps, the largest count held and why it stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityRecord>,
    /// `--rekey`: the CHILD_SA rekeys of the hold and, with `--traffic`,
    /// the frames lost around them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rekeys: Option<HoldRekeys>,
    /// Stopped by a signal before the hold ended.
    pub interrupted: bool,
    /// The peers (outer addresses) whose Delete no answer ended after the
    /// retries: their tunnels may still be up at the gateway.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deletes_unanswered: Vec<String>,
    /// Every tunnel in peer order (with `--capacity`, those attempted).
    pub tunnels: Vec<TunnelOutcome>,
}

impl TunnelsReport {
    /// The report of `tunnels` (in peer order): counts, failures grouped
    /// by reason, tunnels per second and the setup-time distribution.
    pub fn new(settings: TunnelsSettings, tunnels: Vec<TunnelOutcome>) -> TunnelsReport {
        let setup: Vec<f64> = tunnels.iter().filter_map(|t| t.setup_ms).collect();
        let established = setup.len() as u64;
        let attempted = tunnels.len() as u64;
        let failures = failure_groups(&tunnels);
        let span_s = setup_span_s(&tunnels);
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
            deletes_unanswered: Vec::new(),
            gateway_note: None,
            cpu: None,
            ttfp_ms: None,
            traffic: None,
            capacity: None,
            rekeys: None,
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
        let mut s = match &self.capacity {
            Some(c) => format!(
                "capacity: {} tunnels held (most up {}, stopped: {}); ",
                thousands(c.held),
                thousands(c.most_up),
                match c.stopped_at_step {
                    Some(step) => format!("step {step}, {}", c.stopped_because.name()),
                    None => c.stopped_because.name().into(),
                }
            ),
            None => String::new(),
        };
        let _ = write!(
            s,
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
        if let Some(r) = &self.rekeys {
            let _ = write!(
                s,
                "; {} of {} rekeys completed ({} /s)",
                thousands(r.completed),
                thousands(r.attempted),
                sig3(r.per_s)
            );
            if let Some(b) = r.blocked_ms_per_rekey {
                let _ = write!(s, ", blocked {} ms per rekey", sig3(b));
            }
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

/// The failures of `tunnels` by reason, the commonest first (equal counts
/// in the order first seen).
fn failure_groups(tunnels: &[TunnelOutcome]) -> Vec<FailureGroup> {
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
    failures.sort_by_key(|g| std::cmp::Reverse(g.count));
    failures
}

/// From the first IKE_SA_INIT of `tunnels` to the last CHILD_SA installed,
/// in s; None when none was established.
fn setup_span_s(tunnels: &[TunnelOutcome]) -> Option<f64> {
    let first = tunnels
        .iter()
        .map(|t| t.started_ms)
        .fold(f64::INFINITY, f64::min);
    let last_up = tunnels
        .iter()
        .filter_map(TunnelOutcome::up_at_ms)
        .fold(f64::NEG_INFINITY, f64::max);
    tunnels
        .iter()
        .any(|t| t.setup_ms.is_some())
        .then(|| (last_up - first) / 1000.0)
}

/// `--capacity`: how a step ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepVerdict {
    /// Every setup of the step succeeded, no tunnel was deleted by the
    /// gateway and (with `--traffic`) every held tunnel delivered with the
    /// loss at most the threshold: the tunnels up after it are held.
    Held,
    /// A setup of the step failed (the gateway's notify, or no answer).
    Failed,
    /// The gateway deleted tunnels it had accepted (this step's or
    /// earlier ones).
    Deleted,
    /// `--traffic`: a held tunnel delivered nothing in the step's window,
    /// or the window's loss was above the threshold.
    Degraded,
    /// A signal ended the step before it was judged.
    Interrupted,
}

impl StepVerdict {
    pub fn name(self) -> &'static str {
        match self {
            StepVerdict::Held => "held",
            StepVerdict::Failed => "setups failed",
            StepVerdict::Deleted => "deleted by the gateway",
            StepVerdict::Degraded => "traffic degraded",
            StepVerdict::Interrupted => "interrupted",
        }
    }
}

/// One tunnel's frames in a step's traffic window: those sent in the
/// window (the kernel took them) and how many of exactly those arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WindowCount {
    pub peer: Ipv4Addr,
    pub sent: u64,
    pub received: u64,
}

/// Silent or lossy tunnels named at most, per step.
const NAMED: usize = 10;

/// `--capacity --traffic`: the frames of every tunnel held through one
/// step's window (sent from its start to its end, each counted at port A
/// by its sequence number, whenever it arrived before the count).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepTraffic {
    /// The window's length, s.
    pub window_s: f64,
    /// Tunnels up through the window whose frames were counted.
    pub tunnels: u64,
    pub sent: u64,
    pub received: u64,
    pub lost: u64,
    /// lost / sent, %.
    pub loss_pct: f64,
    /// Tunnels that sent in the window and delivered none of it: how
    /// many, and the first few.
    pub silent: u64,
    pub silent_peers: Vec<Ipv4Addr>,
    /// The tunnel that lost the largest share of its window's frames, and
    /// that share (%); None when none lost any.
    pub worst_peer: Option<Ipv4Addr>,
    pub worst_loss_pct: f64,
    /// Frames the kernel refused at port B in the window (not sent, not
    /// counted as lost: the tester's side).
    pub refused: u64,
}

impl StepTraffic {
    pub fn of(window_s: f64, counts: &[WindowCount], refused: u64) -> StepTraffic {
        let sent: u64 = counts.iter().map(|c| c.sent).sum();
        // A frame counted twice is counted once (the receiver's bitmap),
        // so received <= sent per tunnel.
        let received: u64 = counts.iter().map(|c| c.received.min(c.sent)).sum();
        let lost = sent - received;
        let silent: Vec<Ipv4Addr> = counts
            .iter()
            .filter(|c| c.sent > 0 && c.received == 0)
            .map(|c| c.peer)
            .collect();
        let share = |c: &WindowCount| {
            if c.sent == 0 {
                0.0
            } else {
                100.0 * (c.sent - c.received.min(c.sent)) as f64 / c.sent as f64
            }
        };
        let worst = counts
            .iter()
            .filter(|c| c.received < c.sent)
            .max_by(|a, b| share(a).total_cmp(&share(b)));
        StepTraffic {
            window_s,
            tunnels: counts.len() as u64,
            sent,
            received,
            lost,
            loss_pct: if sent > 0 {
                100.0 * lost as f64 / sent as f64
            } else {
                0.0
            },
            silent: silent.len() as u64,
            silent_peers: silent.into_iter().take(NAMED).collect(),
            worst_peer: worst.map(|c| c.peer),
            worst_loss_pct: worst.map_or(0.0, share),
            refused,
        }
    }

    /// The degradation rule: a tunnel held through the window that
    /// delivered none of its frames, or the window's loss over all held
    /// tunnels above `max_loss_pct`; or nothing sent at all.
    pub fn degraded(&self, max_loss_pct: f64) -> bool {
        self.silent > 0 || self.loss_pct > max_loss_pct || (self.tunnels > 0 && self.sent == 0)
    }
}

/// What the session measured in one step (besides the outcomes of its
/// setups, which are the report's tunnels `first..first + attempted`).
#[derive(Debug, Clone, PartialEq)]
pub struct StepMeasured {
    /// Index of the step's first peer in the report's tunnels.
    pub first: usize,
    pub attempted: usize,
    /// Tunnels up at once right after the step's setups ended, and at the
    /// end of its hold.
    pub up_after_setups: u64,
    pub up_after_hold: u64,
    /// Distinct tunnels the gateway deleted during the step.
    pub deleted_by_gateway: u64,
    /// The gateway's own count of installed CHILD_SAs after the setups,
    /// where linerate can ask (the lab's charon).
    pub gateway_children: Option<u64>,
    pub hold_s: f64,
    pub traffic: Option<StepTraffic>,
    pub interrupted: bool,
}

impl StepMeasured {
    /// The step's verdict by the rule, with `failed` of its setups failed:
    /// failed setups first, then tunnels deleted by the gateway, then
    /// (with `--traffic`) degradation.
    pub fn verdict(&self, failed: u64, max_loss_pct: f64) -> StepVerdict {
        if self.interrupted {
            StepVerdict::Interrupted
        } else if failed > 0 {
            StepVerdict::Failed
        } else if self.deleted_by_gateway > 0 {
            StepVerdict::Deleted
        } else if self
            .traffic
            .as_ref()
            .is_some_and(|t| t.degraded(max_loss_pct))
        {
            StepVerdict::Degraded
        } else {
            StepVerdict::Held
        }
    }
}

/// One step of `--capacity`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityStep {
    /// 1, 2, ...
    pub step: u64,
    /// The tunnels the run aimed to have up after the step (step × N, or
    /// the ceiling).
    pub target: u64,
    /// Setups of this step: attempted, established, failed, by reason.
    pub attempted: u64,
    pub established: u64,
    pub failed: u64,
    pub failures: Vec<FailureGroup>,
    /// This step's established ÷ its first IKE_SA_INIT to its last
    /// CHILD_SA installed.
    pub tunnels_per_s: Option<f64>,
    pub setup_ms: Option<SetupTimes>,
    /// Tunnels up at once after the step's setups and at the end of its
    /// hold (all steps' tunnels).
    pub up_after_setups: u64,
    pub up_after_hold: u64,
    pub deleted_by_gateway: u64,
    #[serde(default)]
    pub gateway_children: Option<u64>,
    pub hold_s: f64,
    #[serde(default)]
    pub traffic: Option<StepTraffic>,
    pub verdict: StepVerdict,
}

impl CapacityStep {
    /// The step from its setups' outcomes and what was measured: the
    /// verdict by the rule (failed setups first, then deletions, then
    /// traffic).
    pub fn new(
        step: u64,
        target: u64,
        outcomes: &[TunnelOutcome],
        m: &StepMeasured,
        max_loss_pct: f64,
    ) -> CapacityStep {
        let setup: Vec<f64> = outcomes.iter().filter_map(|t| t.setup_ms).collect();
        let established = setup.len() as u64;
        let failed = outcomes.len() as u64 - established;
        let verdict = m.verdict(failed, max_loss_pct);
        CapacityStep {
            step,
            target,
            attempted: outcomes.len() as u64,
            established,
            failed,
            failures: failure_groups(outcomes),
            tunnels_per_s: setup_span_s(outcomes)
                .filter(|s| *s > 0.0)
                .map(|s| established as f64 / s),
            setup_ms: SetupTimes::of(&setup),
            up_after_setups: m.up_after_setups,
            up_after_hold: m.up_after_hold,
            deleted_by_gateway: m.deleted_by_gateway,
            gateway_children: m.gateway_children,
            hold_s: m.hold_s,
            traffic: m.traffic.clone(),
            verdict,
        }
    }

    /// What went wrong, in a few words ("10 no answer", "3 silent
    /// tunnels, loss 0.4 %"); empty when held.
    pub fn why(&self, max_loss_pct: f64) -> String {
        match self.verdict {
            StepVerdict::Held => String::new(),
            StepVerdict::Interrupted => "interrupted".into(),
            StepVerdict::Failed => {
                let parts: Vec<String> = self
                    .failures
                    .iter()
                    .map(|g| format!("{} {}", thousands(g.count), g.reason))
                    .collect();
                format!("{} failed: {}", thousands(self.failed), parts.join(", "))
            }
            StepVerdict::Deleted => format!(
                "the gateway deleted {} tunnels",
                thousands(self.deleted_by_gateway)
            ),
            StepVerdict::Degraded => {
                let t = self.traffic.as_ref();
                let mut parts = Vec::new();
                if let Some(t) = t.filter(|t| t.silent > 0) {
                    parts.push(format!(
                        "{} tunnels delivered nothing (first {})",
                        thousands(t.silent),
                        t.silent_peers
                            .first()
                            .map_or(String::new(), |p| p.to_string())
                    ));
                }
                if let Some(t) = t.filter(|t| t.loss_pct > max_loss_pct) {
                    parts.push(format!(
                        "loss {} % above {} %",
                        sig3(t.loss_pct),
                        sig3(max_loss_pct)
                    ));
                }
                if parts.is_empty() {
                    parts.push("no test frame sent in the window".into());
                }
                parts.join(", ")
            }
        }
    }
}

/// Why `--capacity` stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityStop {
    /// Every step held up to the ceiling (`--count`).
    Ceiling,
    /// A step failed or degraded (its verdict says how).
    SetupsFailed,
    DeletedByGateway,
    TrafficDegraded,
    Interrupted,
}

impl CapacityStop {
    pub fn name(self) -> &'static str {
        match self {
            CapacityStop::Ceiling => "ceiling reached",
            CapacityStop::SetupsFailed => "setups failed",
            CapacityStop::DeletedByGateway => "deleted by the gateway",
            CapacityStop::TrafficDegraded => "traffic degraded",
            CapacityStop::Interrupted => "interrupted",
        }
    }
}

/// `linerate tunnels --capacity`: tunnels brought up `step` at a time,
/// every earlier one held, until a step fails or degrades or the ceiling
/// is reached.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityRecord {
    /// Tunnels added per step, and the ceiling (`--count`).
    pub step: u64,
    pub ceiling: u64,
    /// `--traffic`: the largest loss (%) of a step's window that still
    /// holds; None without traffic.
    pub max_loss_pct: Option<f64>,
    /// The largest count held: the tunnels up after the last step that
    /// held (no failed setup, no tunnel deleted by the gateway, traffic
    /// not degraded), before the first one that did not; 0 when the first
    /// step did not hold.
    pub held: u64,
    /// The most tunnels up at once at any point measured (after a step's
    /// setups or at the end of its hold), the failing step's included.
    pub most_up: u64,
    pub stopped_because: CapacityStop,
    /// The step that stopped it, and what happened there, in words.
    pub stopped_at_step: Option<u64>,
    pub stop_detail: String,
    pub steps: Vec<CapacityStep>,
}

impl CapacityRecord {
    /// The record of the steps run, in order (the run stops at the first
    /// that does not hold).
    pub fn new(
        step: u64,
        ceiling: u64,
        max_loss_pct: Option<f64>,
        steps: Vec<CapacityStep>,
    ) -> CapacityRecord {
        let good = steps
            .iter()
            .take_while(|s| s.verdict == StepVerdict::Held)
            .count();
        let held = good.checked_sub(1).map_or(0, |i| steps[i].up_after_hold);
        let most_up = steps
            .iter()
            .map(|s| s.up_after_setups.max(s.up_after_hold))
            .max()
            .unwrap_or(0);
        let loss = max_loss_pct.unwrap_or(0.0);
        let (stopped_because, stopped_at_step, stop_detail) = match steps.get(good) {
            None => (
                CapacityStop::Ceiling,
                None,
                format!(
                    "the ceiling of {} tunnels was reached with every step held",
                    thousands(ceiling)
                ),
            ),
            Some(s) => (
                match s.verdict {
                    StepVerdict::Failed => CapacityStop::SetupsFailed,
                    StepVerdict::Deleted => CapacityStop::DeletedByGateway,
                    StepVerdict::Degraded => CapacityStop::TrafficDegraded,
                    _ => CapacityStop::Interrupted,
                },
                Some(s.step),
                format!(
                    "step {} (to {} tunnels): {}",
                    s.step,
                    thousands(s.target),
                    s.why(loss)
                ),
            ),
        };
        // A ceiling reached with the last step short of it (interrupted
        // before) is not a ceiling.
        let stopped_because = if stopped_because == CapacityStop::Ceiling
            && steps.last().map_or(0, |s| s.target) < ceiling
        {
            CapacityStop::Interrupted
        } else {
            stopped_because
        };
        CapacityRecord {
            step,
            ceiling,
            max_loss_pct,
            held,
            most_up,
            stopped_because,
            stopped_at_step,
            stop_detail,
            steps,
        }
    }
}

/// `--capacity`'s lines of the table.
fn capacity_lines(out: &mut String, c: &CapacityRecord) {
    let rule = match c.max_loss_pct {
        Some(l) => format!(
            "a setup failing, a tunnel deleted by the gateway, a held tunnel delivering nothing in the step's traffic window, or the window's loss above {} %",
            sig3(l)
        ),
        None => "a setup failing or a tunnel deleted by the gateway".into(),
    };
    let _ = writeln!(
        out,
        "  Capacity: {} tunnels per step up to {}, earlier ones held; a step fails on {rule}",
        thousands(c.step),
        thousands(c.ceiling)
    );
    let traffic = c.steps.iter().any(|s| s.traffic.is_some());
    let gateway = c.steps.iter().any(|s| s.gateway_children.is_some());
    let _ = writeln!(
        out,
        "    Step   Up after   Established   Failed   Tunnels/s   Setup p50 [ms]{}{}   Result",
        if traffic { "   Loss [%]" } else { "" },
        if gateway { "   Gateway SAs" } else { "" }
    );
    for s in &c.steps {
        let loss = match (&s.traffic, traffic) {
            (Some(t), _) => format!("   {:>8}", sig3(t.loss_pct)),
            (None, true) => format!("   {:>8}", "-"),
            _ => String::new(),
        };
        let gw = match (s.gateway_children, gateway) {
            (Some(g), _) => format!("   {:>11}", thousands(g)),
            (None, true) => format!("   {:>11}", "-"),
            _ => String::new(),
        };
        let why = s.why(c.max_loss_pct.unwrap_or(0.0));
        let _ = writeln!(
            out,
            "    {:>4}   {:>8}   {:>11}   {:>6}   {:>9}   {:>14}{loss}{gw}   {}{}",
            s.step,
            thousands(s.up_after_hold),
            thousands(s.established),
            thousands(s.failed),
            s.tunnels_per_s.map_or("-".into(), sig3),
            s.setup_ms.as_ref().map_or("-".into(), |t| sig3(t.p50)),
            s.verdict.name(),
            if why.is_empty() || s.verdict == StepVerdict::Interrupted {
                String::new()
            } else {
                format!(" ({why})")
            }
        );
    }
    let _ = writeln!(
        out,
        "  Largest count held  {:>8}   (most up at once: {})",
        thousands(c.held),
        thousands(c.most_up)
    );
    let _ = writeln!(out, "  Stopped: {}", c.stop_detail);
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
        "IPsec tunnel {}: {} peers ({} .. {}) of the gateway {}, IKE {}, ESP {}; window {}, {}",
        if r.capacity.is_some() {
            "capacity"
        } else {
            "setup rate"
        },
        match &r.capacity {
            Some(c) => format!("up to {}", thousands(c.ceiling)),
            None => thousands(r.attempted),
        },
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
        _ if r.capacity.is_some() => {
            let _ = writeln!(out, "  Tunnels/s     {:>10}   (per step, below)", "-");
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
    if let Some(c) = &r.capacity {
        capacity_lines(&mut out, c);
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
    if let Some(k) = &r.rekeys {
        rekeys::rekey_lines(&mut out, k);
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
            "  CPU over the {} s of {}: linerate {} s ({:.0} % of one core, {} ms per tunnel){gateway}",
            sig3(c.wall_s),
            if r.capacity.is_some() {
                "steps (setups and holds)"
            } else {
                "setups"
            },
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
    if let Some(first) = r.deletes_unanswered.first() {
        let _ = writeln!(
            out,
            "  Deletes unanswered: {} (the first: {first}) after the retries: those tunnels may still be up at the gateway",
            r.deletes_unanswered.len()
        );
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

    fn measured(first: usize, attempted: usize, up: u64) -> StepMeasured {
        StepMeasured {
            first,
            attempted,
            up_after_setups: up,
            up_after_hold: up,
            deleted_by_gateway: 0,
            gateway_children: None,
            hold_s: 2.0,
            traffic: None,
            interrupted: false,
        }
    }

    #[test]
    fn capacity_holds_the_count_of_the_last_step_before_the_first_failure() {
        // Steps of 2 to a ceiling of 6: the third brings one more up and
        // one fails: held 4, most up 5.
        let tunnels = [
            up(1, 0.0, 10.0),
            up(2, 1.0, 10.0),
            up(3, 100.0, 20.0),
            up(4, 101.0, 30.0),
            up(5, 200.0, 10.0),
            failed(6, 200.0, "no answer"),
        ];
        let steps: Vec<CapacityStep> = [measured(0, 2, 2), measured(2, 2, 4), measured(4, 2, 5)]
            .iter()
            .enumerate()
            .map(|(i, m)| {
                CapacityStep::new(
                    i as u64 + 1,
                    (m.first + m.attempted) as u64,
                    &tunnels[m.first..m.first + m.attempted],
                    m,
                    1.0,
                )
            })
            .collect();
        // Its first IKE_SA_INIT at 100 ms, its last CHILD_SA at 131 ms.
        assert_eq!(steps[1].tunnels_per_s, Some(2.0 / 0.031));
        let c = CapacityRecord::new(2, 6, None, steps);
        assert_eq!((c.held, c.most_up), (4, 5));
        assert_eq!(c.stopped_because, CapacityStop::SetupsFailed);
        assert_eq!(c.stopped_at_step, Some(3));
        assert_eq!(
            c.stop_detail,
            "step 3 (to 6 tunnels): 1 failed: 1 no answer"
        );
        let mut r = TunnelsReport::new(settings(), tunnels.to_vec());
        r.capacity = Some(c);
        let table = tunnels_table(&r);
        assert!(table.starts_with("IPsec tunnel capacity:"), "{table}");
        assert!(
            table.contains("Largest count held         4   (most up at once: 5)"),
            "{table}"
        );
        assert!(
            table.contains("setups failed (1 failed: 1 no answer)"),
            "{table}"
        );
        assert!(r.summary().starts_with(
            "capacity: 4 tunnels held (most up 5, stopped: step 3, setups failed); 5 of 6 tunnels up"
        ));
        let v = serde_json::to_value(&r).unwrap();
        for key in ["held", "most_up", "stopped_because", "steps"] {
            assert!(v["capacity"].get(key).is_some(), "{key}: {v}");
        }
        assert_eq!(v["capacity"]["stopped_because"], "setups-failed");
        assert_eq!(v["capacity"]["steps"][2]["verdict"], "failed");
        let back: TunnelsReport = serde_json::from_value(v).unwrap();
        assert_eq!(back, r);
        // A report stored before --capacity reads back without it.
        let mut old =
            serde_json::to_value(TunnelsReport::new(settings(), tunnels.to_vec())).unwrap();
        old.as_object_mut().unwrap().remove("capacity");
        assert_eq!(
            serde_json::from_value::<TunnelsReport>(old)
                .unwrap()
                .capacity,
            None
        );
    }

    #[test]
    fn every_step_held_is_the_ceiling_and_the_first_step_failing_holds_none() {
        let tunnels = [up(1, 0.0, 10.0), up(2, 1.0, 10.0)];
        let steps = vec![
            CapacityStep::new(1, 1, &tunnels[..1], &measured(0, 1, 1), 1.0),
            CapacityStep::new(2, 2, &tunnels[1..], &measured(1, 1, 2), 1.0),
        ];
        let c = CapacityRecord::new(1, 2, None, steps);
        assert_eq!(
            (c.held, c.most_up, c.stopped_because),
            (2, 2, CapacityStop::Ceiling)
        );
        assert_eq!(c.stopped_at_step, None);
        // A gateway that deletes a tunnel in the first step.
        let mut m = measured(0, 1, 1);
        m.deleted_by_gateway = 1;
        m.up_after_hold = 0;
        let c = CapacityRecord::new(
            1,
            2,
            None,
            vec![CapacityStep::new(1, 1, &tunnels[..1], &m, 1.0)],
        );
        assert_eq!((c.held, c.most_up), (0, 1));
        assert_eq!(c.stopped_because, CapacityStop::DeletedByGateway);
        assert!(
            c.stop_detail.contains("the gateway deleted 1 tunnels"),
            "{}",
            c.stop_detail
        );
        // Interrupted before the ceiling.
        let c = CapacityRecord::new(
            1,
            2,
            None,
            vec![CapacityStep::new(
                1,
                1,
                &tunnels[..1],
                &measured(0, 1, 1),
                1.0,
            )],
        );
        assert_eq!(c.stopped_because, CapacityStop::Interrupted);
    }

    #[test]
    fn a_silent_tunnel_or_loss_above_the_threshold_degrades_a_step() {
        let peer = |n: u8| Ipv4Addr::new(198, 19, 0, n);
        let count = |n: u8, sent, received| WindowCount {
            peer: peer(n),
            sent,
            received,
        };
        // 3 tunnels, 100 frames each: one lost 1, none silent: 0.33 %.
        let t = StepTraffic::of(
            2.0,
            &[count(1, 100, 100), count(2, 100, 99), count(3, 100, 100)],
            0,
        );
        assert_eq!((t.sent, t.received, t.lost, t.silent), (300, 299, 1, 0));
        assert_eq!((t.worst_peer, t.worst_loss_pct), (Some(peer(2)), 1.0));
        assert!(!t.degraded(1.0));
        assert!(t.degraded(0.1));
        // One tunnel delivered none of its frames: degraded at any
        // threshold, and named.
        let t = StepTraffic::of(2.0, &[count(1, 1000, 1000), count(2, 2, 0)], 0);
        assert!(t.loss_pct < 1.0 && t.degraded(1.0));
        assert_eq!(t.silent_peers, [peer(2)]);
        let mut m = measured(0, 2, 2);
        m.traffic = Some(t);
        assert_eq!(m.verdict(0, 1.0), StepVerdict::Degraded);
        // Failed setups come first.
        assert_eq!(m.verdict(1, 1.0), StepVerdict::Failed);
        let tunnels = [up(1, 0.0, 1.0), up(2, 0.0, 1.0)];
        let s = CapacityStep::new(1, 2, &tunnels, &m, 1.0);
        assert_eq!(s.why(1.0), "1 tunnels delivered nothing (first 198.19.0.2)");
        // Nothing sent at all through tunnels that are up.
        let t = StepTraffic::of(2.0, &[count(1, 0, 0)], 0);
        assert!(t.degraded(1.0));
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
