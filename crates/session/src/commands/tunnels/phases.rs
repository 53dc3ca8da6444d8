//! The phases of a `linerate tunnels` run ([`super::run`]), in the order
//! it goes through them: the settings and the fleet, the record begun,
//! `--traffic` started, the tunnels brought up (at once or a step at a
//! time), the setups' report, the gateway's view after the setups, the
//! hold, the traffic's counts, the deletes checked, and the exit.

use super::capacity;
use super::records::{
    capacity_gateway_check, capacity_outcome, capacity_record, gateway_traffic_check, outcomes,
    traffic_record,
};
use super::rekey::RekeyRun;
use super::traffic::{slice_host, SendSide, Traffic, UpTunnel};
use super::{cpu_seconds, gateway_children, Bed, TrafficPlan, TunnelsPlan, TRAFFIC_FRAME};
use crate::error::{bail, Result};
use crate::exit::Outcome;
use crate::ipsec::Net;
use crate::peers::FleetSpec;
use crate::recorder::{Recorder, RunInfo};
use linerate_ike::{Fleet, IkeProposals, Psk, Setup};
use linerate_lab::scenario::Applied;
use linerate_results::report::thousands;
use linerate_results::tunnels::{
    HoldRecord, SetupCpu, StepMeasured, TunnelsReport, TunnelsSettings,
};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The run's settings, as the report states them.
pub(super) fn settings(plan: &TunnelsPlan, bed: &Bed, ike: &IkeProposals) -> TunnelsSettings {
    let count = plan.peers.len();
    TunnelsSettings {
        gateway: bed.gateway,
        ike: ike.to_string(),
        esp: bed.esp.name().to_string(),
        local_net: plan.local_net.to_string(),
        remote_net: plan.remote_net.to_string(),
        slice_prefix: plan.slice_prefix,
        first_peer: plan.peers[0],
        last_peer: plan.peers[count - 1],
        attempt_rate: plan.rate,
        window: plan.window,
        hold_s: plan.hold.as_secs_f64(),
    }
}

/// Binds the fleet of peers, one per address and slice, in port B's
/// namespace (the sockets keep it).
pub(super) fn bind_fleet(
    plan: &TunnelsPlan,
    bed: &Bed,
    slices: &[Net],
    psk: Psk,
    ike: IkeProposals,
) -> Result<Fleet> {
    let spec = FleetSpec {
        plan: &plan.ipsec,
        netns: bed.netns.as_deref(),
        gateway: bed.gateway,
        ike,
        esp: bed.esp,
        local_net: plan.local_net,
        peers: &plan.peers,
        slices,
        force_encap: true,
        attempt_rate: plan.rate,
        window: plan.window,
    };
    crate::peers::bind_fleet(spec, psk)
}

/// Begins the run's record, and says (verbose) what comes up.
pub(super) fn begin(recorder: &mut Recorder, plan: &TunnelsPlan, bed: &Bed) -> Result<()> {
    recorder.begin(RunInfo {
        command: "tunnels",
        engine: "linerate-ike",
        receiver: linerate_engine::ReceiverKind::Socket,
        line_speed_bps: 0,
        scenario: &bed.description,
        report: None,
        sizes: Vec::new(),
        trial_s: plan.hold.as_secs_f64(),
        resolution: 0.0,
        capture_at: Default::default(),
    })?;
    if recorder.verbose() {
        let count = plan.peers.len();
        errln!(
            "linerate: bringing up {} tunnels to {} from {} .. {} ({}, window {})",
            thousands(count as u64),
            bed.gateway,
            plan.peers[0],
            plan.peers[count - 1],
            plan.rate
                .map_or("as fast as the gateway answers".into(), |r| format!(
                    "{r} attempts/s"
                )),
            plan.window
        );
    }
    Ok(())
}

/// `--traffic`: starts port A's receiver and port B's sender (no frame
/// before a tunnel is up); None without `--traffic`.
pub(super) fn start_traffic(
    plan: &TunnelsPlan,
    bed: &Bed,
    slices: &[Net],
    verbose: bool,
) -> Result<Option<Traffic>> {
    Ok(match (&plan.traffic, &bed.port_a) {
        (Some(t), Some(port_a)) => {
            let side = SendSide {
                netns: bed.netns.clone(),
                ifname: bed.ifname.clone(),
                gateway: bed.gateway,
                peers: plan.peers.clone(),
                sources: slices.iter().map(|&n| slice_host(n)).collect(),
                rate: t.rate,
            };
            let running = Traffic::start(port_a, side)?;
            if verbose {
                errln!(
                    "linerate: --traffic: each tunnel sends {} frames/s of {TRAFFIC_FRAME} bytes from its CHILD_SA installed; port A {} ({}) counts them",
                    t.rate,
                    port_a.ifname,
                    port_a.host.address
                );
            }
            Some(running)
        }
        (Some(_), None) => bail!(
            BadInput,
            "--traffic needs port A: --port-a IF --ip-a ADDR/LEN --gw-a ADDR"
        ),
        _ => None,
    })
}

/// What each setup does as it ends: counted, its tunnel's traffic
/// started, and (verbose) a progress line at most once a second.
struct SetupProgress<'a> {
    traffic: Option<&'a Traffic>,
    verbose: bool,
    count: usize,
    begun: Instant,
    last_shown: Instant,
    up: u64,
    down: u64,
}

impl SetupProgress<'_> {
    /// Setup `s` ended at `now`.
    fn on_setup(&mut self, s: &Setup, now: Instant) {
        match s.outcome {
            Ok(_) => self.up += 1,
            Err(_) => self.down += 1,
        }
        if let (Some(t), Some(child)) = (self.traffic, &s.child) {
            t.tunnel_up(UpTunnel {
                index: s.peer,
                keys: child.outbound.clone(),
            });
        }
        if self.verbose && now.duration_since(self.last_shown) >= Duration::from_secs(1) {
            self.last_shown = now;
            errln!(
                "linerate: {} s: {} up, {} failed, {} to go",
                now.duration_since(self.begun).as_secs(),
                thousands(self.up),
                thousands(self.down),
                thousands(self.count as u64 - self.up - self.down)
            );
        }
    }
}

/// What the bring-up phase leaves: every setup, `--capacity`'s steps,
/// the wall time and the CPU seconds (linerate's, the lab gateway's)
/// before and after, and the two clocks read together at its start
/// (port A stamps arrivals in CLOCK_REALTIME, the fleet its IKE_SA_INITs
/// in Instant).
pub(super) struct BroughtUp {
    setups: Vec<Setup>,
    steps: Option<Vec<StepMeasured>>,
    wall_s: f64,
    cpu_before: (Option<f64>, Option<f64>),
    cpu_after: (Option<f64>, Option<f64>),
    pub anchor: (Instant, u64),
}

/// The lab gateway's data-path processes' CPU seconds; None without
/// them.
fn gateway_cpu(pids: &[u32]) -> Option<f64> {
    pids.iter()
        .map(|p| cpu_seconds(&p.to_string()))
        .sum::<Option<f64>>()
        .filter(|_| !pids.is_empty())
}

/// Brings the tunnels up: all at the attempt rate until done or
/// interrupted, or with `--capacity` a step at a time.
pub(super) fn bring_up(
    plan: &TunnelsPlan,
    bed: &Bed,
    fleet: &mut Fleet,
    traffic: Option<&Traffic>,
    interrupt: &AtomicBool,
    verbose: bool,
) -> BroughtUp {
    let anchor = (Instant::now(), linerate_port::realtime_ns());
    let begun = Instant::now();
    let mut progress = SetupProgress {
        traffic,
        verbose,
        count: plan.peers.len(),
        begun,
        last_shown: Instant::now(),
        up: 0,
        down: 0,
    };
    let mut on_setup = |s: &Setup| progress.on_setup(s, Instant::now());
    let gateway_pids: Vec<u32> = bed
        .applied
        .as_ref()
        .map(Applied::data_path_pids)
        .unwrap_or_default();
    let cpu_before = (cpu_seconds("self"), gateway_cpu(&gateway_pids));
    let (setups, steps) = match &plan.capacity {
        None => (fleet.bring_up_until(interrupt, &mut on_setup), None),
        Some(c) => {
            let children = || {
                bed.applied
                    .as_ref()
                    .and_then(|a| gateway_children(a).ok())
                    .map(|l| l.len() as u64)
            };
            let env = capacity::StepsEnv {
                plan: c,
                peers: &plan.peers,
                hold: plan.hold,
                traffic,
                gateway_children: &children,
                interrupt,
                verbose,
            };
            let steps = capacity::run_steps(fleet, &env, &mut on_setup);
            (steps.setups, Some(steps.measured))
        }
    };
    let wall_s = begun.elapsed().as_secs_f64();
    let cpu_after = (cpu_seconds("self"), gateway_cpu(&gateway_pids));
    BroughtUp {
        setups,
        steps,
        wall_s,
        cpu_before,
        cpu_after,
        anchor,
    }
}

/// The report of the setups (`stopped`: by a signal): every peer's
/// outcome, `--capacity`'s steps, the CPU cost; and when each peer's
/// IKE_SA_INIT went out (for the time to first packet).
pub(super) fn setups_report(
    plan: &TunnelsPlan,
    bed: &Bed,
    slices: &[Net],
    settings: TunnelsSettings,
    brought: BroughtUp,
    stopped: bool,
) -> (TunnelsReport, Vec<Option<Instant>>) {
    let count = plan.peers.len();
    let BroughtUp {
        setups,
        steps,
        wall_s,
        cpu_before,
        cpu_after,
        ..
    } = brought;
    let mut started: Vec<Option<Instant>> = vec![None; count];
    for s in &setups {
        if let Some(t) = started.get_mut(s.peer) {
            *t = Some(s.started);
        }
    }
    let mut outcomes = outcomes(plan, slices, &setups, stopped);
    drop(setups);
    if let Some(steps) = &steps {
        // The peers of steps never run were not attempted.
        outcomes.truncate(steps.iter().map(|m| m.attempted).sum());
    }
    let mut report = TunnelsReport::new(settings, outcomes);
    report.gateway_note = bed.note.clone();
    if let (Some(steps), Some(c)) = (&steps, &plan.capacity) {
        report.capacity = Some(capacity_record(&report, steps, c, count));
        // Setups spread over steps with holds between: the rate is each
        // step's.
        report.tunnels_per_s = None;
        report.setup_span_s = None;
        if let Some(check) = capacity_gateway_check(steps) {
            report.gateway_checks.push(check);
        }
    }
    if let (Some(t0), Some(t1)) = (cpu_before.0, cpu_after.0) {
        let gateway = match (cpu_before.1, cpu_after.1) {
            (Some(g0), Some(g1)) => Some(g1 - g0),
            _ => None,
        };
        report.cpu = Some(SetupCpu::new(wall_s, t1 - t0, gateway, report.attempted));
    }
    (report, started)
}

/// The gateway's own view after the setups: one installed CHILD_SA per
/// tunnel, for the tunnel's own network. The check goes into the report;
/// the disagreement, if any, comes back.
pub(super) fn setups_gateway_check(
    applied: &Applied,
    report: &mut TunnelsReport,
) -> Result<Option<String>> {
    let mut listed = gateway_children(applied)?;
    listed.sort();
    let mut ours: Vec<String> = report
        .tunnels
        .iter()
        .filter(|t| t.setup_ms.is_some())
        .map(|t| t.remote_net.clone())
        .collect();
    ours.sort();
    if listed == ours {
        report.gateway_checks.push(format!(
            "after the setups charon lists {} installed CHILD_SAs (vici list-sas), one for each established tunnel's network",
            thousands(listed.len() as u64)
        ));
        return Ok(None);
    }
    let missing = ours.iter().filter(|n| !listed.contains(n)).count();
    let extra = listed.iter().filter(|n| !ours.contains(n)).count();
    let text = format!(
        "after the setups charon lists {} installed CHILD_SAs where linerate has {} tunnels up: {missing} of linerate's missing, {extra} others",
        thousands(listed.len() as u64),
        thousands(ours.len() as u64)
    );
    report.gateway_checks.push(text.clone());
    Ok(Some(text))
}

/// Holds the tunnels up for `hold` from `start` (or until interrupted),
/// answering the gateway's requests, and counts them.
pub(super) fn hold(
    fleet: &mut Fleet,
    hold: Duration,
    interrupt: &AtomicBool,
    start: Instant,
) -> HoldRecord {
    let mut record = HoldRecord::default();
    while start.elapsed() < hold && !interrupt.load(Ordering::Relaxed) {
        let left = hold.saturating_sub(start.elapsed());
        for e in fleet.poll(left.min(Duration::from_millis(100))) {
            use linerate_ike::Event;
            match e.event {
                Event::LivenessCheck => record.liveness_checks += 1,
                Event::ChildDeleted | Event::IkeDeleted => record.deleted_by_gateway += 1,
                _ => record.other_requests += 1,
            }
        }
    }
    record.seconds = start.elapsed().as_secs_f64();
    record.up_at_end = fleet.established() as u64;
    record
}

/// `--traffic`'s end: the threads stopped, their counts and the lab
/// gateway's (before the deletes take its SAs) into the report, and with
/// `--rekey` the frames lost around the rekeys. The gateway's
/// disagreement, if any.
pub(super) fn finish_traffic(
    running: Traffic,
    plan: &TrafficPlan,
    bed: &Bed,
    report: &mut TunnelsReport,
    (started, anchor): (&[Option<Instant>], (Instant, u64)),
    rekeys: Option<&RekeyRun>,
) -> Result<Option<String>> {
    let counts = running.finish()?;
    // The frames lost around the rekeys, now that port A had them all.
    if let Some(run) = rekeys {
        report.rekeys = Some(run.record(Some((&counts, plan.rate))));
    }
    // charon's own count per CHILD_SA, before the deletes take them.
    let decrypted = match &bed.applied {
        Some(applied) => Some(applied.ipsec_sa_counters()?),
        None => None,
    };
    let port_a = bed.port_a.as_ref().expect("traffic has port A");
    let record = traffic_record(
        report,
        &counts,
        started,
        anchor,
        decrypted.as_deref(),
        plan.rate,
        format!("{} {}", port_a.ifname, port_a.host.address),
    );
    report.set_traffic(record);
    let mut odd = None;
    if let Some(check) = decrypted
        .as_ref()
        .and(report.traffic.as_ref())
        .and_then(gateway_traffic_check)
    {
        if check.1 {
            odd = Some(check.0.clone());
        }
        report.gateway_checks.push(check.0);
    }
    Ok(odd)
}

/// After linerate deleted its `was_up` tunnels: charon (which removes an
/// IKE SA when it answers the Delete) should list no CHILD_SA by
/// `deadline`. The check goes into the report; the line again when some
/// are left.
pub(super) fn deletes_gateway_check(
    applied: &Applied,
    report: &mut TunnelsReport,
    was_up: usize,
    deadline: Instant,
) -> Result<Option<String>> {
    let left = loop {
        let left = gateway_children(applied)?.len();
        if left == 0 || Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    report.gateway_checks.push(if left == 0 {
        format!(
            "after linerate deleted its {} tunnels charon lists no CHILD_SA",
            thousands(was_up as u64)
        )
    } else {
        format!(
            "after linerate deleted its {} tunnels charon still lists {} CHILD_SAs",
            thousands(was_up as u64),
            thousands(left as u64)
        )
    });
    Ok((left > 0)
        .then(|| report.gateway_checks.last().cloned())
        .flatten())
}

/// The exit of a run that ended (not interrupted): `--capacity`'s, or
/// no tunnel up (an error), failures, a gateway that disagrees, failed
/// rekeys, or tunnels that carried no test frame (results); else passed.
pub(super) fn verdict(report: &TunnelsReport, mismatch: Option<String>) -> Result<Outcome> {
    if let Some(c) = &report.capacity {
        if report.established > 0 || c.steps.is_empty() {
            return Ok(capacity_outcome(c, mismatch));
        }
    }
    if report.established == 0 {
        let g = &report.failures[0];
        bail!(
            Failed,
            "no tunnel came up: {} of {} failed with {} (the first, {}: {})",
            thousands(g.count),
            thousands(report.attempted),
            g.reason,
            g.first_peer,
            g.example
        );
    }
    if report.failed > 0 {
        let reasons: Vec<String> = report
            .failures
            .iter()
            .map(|g| format!("{} {}", thousands(g.count), g.reason))
            .collect();
        return Ok(Outcome::ThresholdFailed(format!(
            "{} of {} tunnels failed ({}); {} established",
            thousands(report.failed),
            thousands(report.attempted),
            reasons.join(", "),
            thousands(report.established)
        )));
    }
    if let Some(why) = mismatch {
        return Ok(Outcome::ThresholdFailed(format!(
            "the gateway does not agree: {why}"
        )));
    }
    if let Some(r) = report.rekeys.as_ref().filter(|r| r.failed > 0) {
        let reasons: Vec<String> = r
            .failures
            .iter()
            .map(|g| format!("{} {}", thousands(g.count), g.reason))
            .collect();
        return Ok(Outcome::ThresholdFailed(format!(
            "{} of {} rekeys failed ({}); the tunnels stayed on their old CHILD_SAs",
            thousands(r.failed),
            thousands(r.attempted),
            reasons.join(", ")
        )));
    }
    if let Some(t) = report.traffic.as_ref().filter(|t| !t.no_traffic.is_empty()) {
        return Ok(Outcome::ThresholdFailed(format!(
            "{} of {} tunnels up carried no test frame to port A before the hold ended (the first: {}); give a longer --hold, or see the gateway",
            thousands(t.no_traffic.len() as u64),
            thousands(report.established),
            t.no_traffic[0]
        )));
    }
    Ok(Outcome::Passed)
}
