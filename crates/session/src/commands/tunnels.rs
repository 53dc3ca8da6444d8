//! `linerate tunnels`: the control plane of a VPN gateway. linerate
//! emulates N IPsec peers on port B, each with its own outer address, its
//! own IKE SA and its own CHILD_SA for its own slice of the network behind
//! linerate, brings their tunnels up at a chosen attempt rate (or as fast
//! as the gateway answers), holds them, and deletes them all: attempts,
//! established, failures by the gateway's answer, tunnels per second and
//! the setup-time distribution (crates/results/src/tunnels.rs).
//!
//! All peers are driven by one thread (`linerate_ike::Fleet`). Their
//! addresses are put on port B (as /32s, beside port B's own address with
//! its prefix, which routes to the gateway) for the run and taken off after
//! the deletes; the kernel's UDP stack carries IKE. With `--traffic`
//! each tunnel also sends test frames from the moment it is up until the
//! hold ends, and port A times each tunnel's first frame through the
//! gateway (time to first packet; [`traffic`]). With `--capacity` the
//! tunnels come up a step at a time until the gateway stops taking more
//! ([`capacity`]).

mod capacity;
mod traffic;

use crate::error::{bail, err, Result};
use crate::exit::Outcome;
use crate::ipsec::{IpsecPlan, Net};
use crate::peers::{reason, selector, slice, PeerAddresses};
use crate::recorder::{RecordPlan, Recorder, RunInfo};
pub use capacity::CapacityPlan;
use linerate_esp::EspSuite;
use linerate_ike::{Fleet, FleetConfig, IkeProposals, Peer, Ports, Psk, Retransmit, Setup};
use linerate_lab::scenario::{Applied, Scenario};
use linerate_lab::Lab;
use linerate_results::report::thousands;
use linerate_results::tunnels::{
    tunnels_table, CapacityRecord, CapacityStep, CapacityStop, HoldRecord, SetupCpu, StepMeasured,
    TrafficRecord, TunnelOutcome, TunnelTraffic, TunnelsReport, TunnelsSettings,
};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use traffic::{slice_host, SendSide, Traffic, TrafficCounts, UpTunnel};
pub use traffic::{PortA, TRAFFIC_FRAME};

/// Where the peers are emulated.
#[derive(Debug, Clone)]
pub enum TunnelsTarget {
    /// A fresh lab whose DUT is the `vpn-gateway` scenario's gateway.
    Lab {
        scenario: Box<Scenario>,
        ring: Option<u32>,
    },
    /// Port B, named by the user, in linerate's own network namespace.
    External {
        port_b: String,
        /// Port B's address and subnet (`--ip-b`).
        host_b: Net,
        /// `--gw-b`: the gateway unless `--ipsec-gateway` says another.
        gw_b: Ipv4Addr,
    },
}

/// A `linerate tunnels`, checked: every value, nothing touched.
#[derive(Debug, Clone)]
pub struct TunnelsPlan {
    pub target: TunnelsTarget,
    /// The IPsec options: gateway, key file, networks, proposals and
    /// identities (`direction` and `esp_keys` are not used).
    pub ipsec: IpsecPlan,
    /// The peers' outer addresses, one per tunnel (their number is the
    /// count).
    pub peers: Vec<Ipv4Addr>,
    /// The network behind linerate, split into one slice per tunnel, and
    /// the slices' prefix length.
    pub remote_net: Net,
    pub slice_prefix: u8,
    /// The gateway's protected LAN (every tunnel's TSr).
    pub local_net: Net,
    /// New handshakes per second; None: as fast as the window allows.
    pub rate: Option<f64>,
    /// Handshakes in flight at most.
    pub window: usize,
    /// How long the tunnels stay up before the deletes.
    pub hold: Duration,
    /// `--traffic`: test frames through every tunnel as soon as it is up.
    pub traffic: Option<TrafficPlan>,
    /// `--capacity`: the peers come up a step at a time (the count is the
    /// ceiling), each step held for `hold`.
    pub capacity: Option<CapacityPlan>,
    pub json: Option<PathBuf>,
    pub record: RecordPlan,
}

/// `--traffic`'s values.
#[derive(Debug, Clone, PartialEq)]
pub struct TrafficPlan {
    /// Frames per second each tunnel sends.
    pub rate: f64,
    /// Port A, named by the user; None in the lab (its tester port A).
    pub port_a: Option<PortA>,
}

/// What the lab's gateway lists: its installed CHILD_SAs' remote networks.
fn gateway_children(applied: &Applied) -> Result<Vec<String>> {
    let sas = applied.ipsec_sa_counters()?;
    Ok(sas
        .into_iter()
        .filter(|s| s.state == "INSTALLED")
        .map(|s| s.remote_ts.join(","))
        .collect())
}

/// The one-line note on what limits the lab's gateway.
const LAB_GATEWAY_LIMIT: &str = "the lab's gateway is strongSwan's charon with kernel-libipsec, in user space on one DUT CPU: each setup costs it a Diffie-Hellman exchange, key derivation and a route into its TUN device; on a small machine linerate's own Diffie-Hellman competes for the same CPUs (the CPU line says how much), so these are lab figures, far below a kernel or hardware gateway's";

/// Everything a run holds, in the order it is released: the fleet
/// (deletes) first, then the peers' addresses, charon, the lab.
struct Bed {
    /// charon (and its key) go before the lab they run in.
    applied: Option<Applied>,
    /// Held, not read: the lab built for the run, removed when dropped.
    #[allow(dead_code)]
    lab: Option<Lab>,
    netns: Option<String>,
    ifname: String,
    host_b: Net,
    gateway: Ipv4Addr,
    psk_file: PathBuf,
    ike: Option<IkeProposals>,
    esp: EspSuite,
    note: Option<String>,
    description: String,
    /// Where `--traffic` arrives: the lab's tester port A, or the user's.
    port_a: Option<PortA>,
    _lock: Option<linerate_lab::LabLock>,
    _lock_a: Option<linerate_lab::LabLock>,
}

fn open_bed(plan: &TunnelsPlan) -> Result<Bed> {
    if !nix::unistd::geteuid().is_root() {
        bail!(Environment, "not running as root: linerate puts the peers' addresses on port B and binds UDP 500 and 4500 (and builds namespaces for --lab); run it with sudo");
    }
    let p = &plan.ipsec;
    match &plan.target {
        TunnelsTarget::Lab { scenario, ring } => {
            linerate_lab::check_environment()?;
            let name = format!("tun{}", std::process::id());
            errln!(
                "linerate: scenario {}: {} (lab '{name}', namespaces lr-{name}-*)",
                scenario.spec,
                scenario.description()
            );
            let lab = Lab::up_with_ring(&name, ring.unwrap_or(linerate_lab::DEFAULT_RING))?;
            let applied = scenario.apply(&lab)?;
            for check in &applied.checks {
                errln!("linerate:   verified: {check}");
            }
            let Some(peer) = applied.vpn_peer() else {
                bail!(BadInput, "linerate tunnels in the lab needs a DUT that is a VPN gateway: use --scenario vpn-gateway");
            };
            let port_b = lab.port_b().clone();
            let a = lab.port_a();
            let port_a = PortA {
                netns: Some(a.netns.clone()),
                ifname: a.ifname.clone(),
                host: Net {
                    address: a.ip,
                    prefix_len: a.prefix_len,
                },
                gateway: a.gateway,
            };
            let ike = match &p.ike {
                Some(ike) => ike.clone(),
                None => IkeProposals::parse(&peer.ike)
                    .map_err(|e| err!(Failed, "the lab gateway's IKE proposal: {e}"))?,
            };
            Ok(Bed {
                netns: Some(port_b.netns.clone()),
                ifname: port_b.ifname.clone(),
                host_b: Net {
                    address: port_b.ip,
                    prefix_len: port_b.prefix_len,
                },
                gateway: p.gateway.unwrap_or(peer.gateway),
                psk_file: p.psk_file.clone().unwrap_or(peer.psk_file.clone()),
                ike: Some(ike),
                esp: peer.suite,
                note: Some(LAB_GATEWAY_LIMIT.into()),
                description: format!(
                    "IPsec tunnel setup, lab VPN gateway ({})",
                    scenario.description()
                ),
                applied: Some(applied),
                lab: Some(lab),
                port_a: Some(port_a),
                _lock: None,
                _lock_a: None,
            })
        }
        TunnelsTarget::External {
            port_b,
            host_b,
            gw_b,
        } => {
            let lock = linerate_lab::lock_port(None, port_b)?;
            let port_a = plan.traffic.as_ref().and_then(|t| t.port_a.clone());
            let lock_a = match &port_a {
                Some(a) => Some(linerate_lab::lock_port(None, &a.ifname)?),
                None => None,
            };
            let gateway = p.gateway.unwrap_or(*gw_b);
            Ok(Bed {
                applied: None,
                lab: None,
                netns: None,
                ifname: port_b.clone(),
                host_b: *host_b,
                gateway,
                psk_file: p.psk_file.clone().ok_or_else(|| {
                    err!(BadInput, "linerate tunnels needs --psk-file FILE: the pre-shared key, in a file only its owner can read")
                })?,
                ike: p.ike.clone(),
                esp: p.esp.unwrap_or(EspSuite::Aes256Gcm16),
                note: None,
                description: format!("IPsec tunnel setup, gateway {gateway} via {port_b}"),
                port_a,
                _lock: Some(lock),
                _lock_a: lock_a,
            })
        }
    }
}

pub fn run(plan: TunnelsPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let mut recorder = Recorder::open(&plan.record)?.json_file(plan.json.as_deref());
    // An external port's key is read before anything is touched.
    if let TunnelsTarget::External { .. } = plan.target {
        if let Some(file) = &plan.ipsec.psk_file {
            Psk::read_file(file).map_err(|e| err!(BadInput, "{e}"))?;
        }
    }
    let bed = open_bed(&plan)?;
    let psk = Psk::read_file(&bed.psk_file).map_err(|e| err!(BadInput, "{e}"))?;
    let ike = bed.ike.clone().unwrap_or_default();
    let count = plan.peers.len();
    let slices: Vec<Net> = (0..count)
        .map(|i| slice(plan.remote_net, plan.slice_prefix, i))
        .collect();
    let settings = TunnelsSettings {
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
    };

    let addresses = PeerAddresses::add(bed.netns.as_deref(), &bed.ifname, bed.host_b, &plan.peers)?;
    let config = FleetConfig {
        gateway: bed.gateway,
        gateway_ports: Ports::default(),
        local_ports: Ports::default(),
        remote_id: plan.ipsec.remote_id.clone(),
        psk,
        ike,
        esp: bed.esp,
        remote_ts: selector(plan.local_net),
        retransmit: Retransmit::default(),
        force_encap: true,
        peers: plan
            .peers
            .iter()
            .zip(&slices)
            .map(|(&local, &net)| Peer {
                local,
                local_id: plan.ipsec.local_id.clone(),
                local_ts: selector(net),
            })
            .collect(),
        attempt_rate: plan.rate,
        window: plan.window,
    };
    // Bound in port B's namespace; the sockets keep it.
    let mut fleet =
        linerate_port::netns::maybe_in_netns(bed.netns.as_deref(), || Ok(Fleet::bind(config)))
            .map_err(|e| err!(Environment, "{e}"))?
            .map_err(|e| err!(Environment, "IPsec: {e}"))?;

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
    let verbose = recorder.verbose();
    if verbose {
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
    let traffic = match (&plan.traffic, &bed.port_a) {
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
    };
    // The two clocks side by side: port A stamps arrivals in CLOCK_REALTIME,
    // the fleet its IKE_SA_INITs in Instant.
    let anchor = (Instant::now(), linerate_port::realtime_ns());
    let begun = Instant::now();
    let mut last_shown = Instant::now();
    let (mut up, mut down) = (0u64, 0u64);
    let mut on_setup = |s: &Setup| {
        match s.outcome {
            Ok(_) => up += 1,
            Err(_) => down += 1,
        }
        if let (Some(t), Some(child)) = (&traffic, &s.child) {
            t.tunnel_up(UpTunnel {
                index: s.peer,
                keys: child.outbound.clone(),
            });
        }
        if verbose && last_shown.elapsed() >= Duration::from_secs(1) {
            last_shown = Instant::now();
            errln!(
                "linerate: {} s: {} up, {} failed, {} to go",
                begun.elapsed().as_secs(),
                thousands(up),
                thousands(down),
                thousands(count as u64 - up - down)
            );
        }
    };
    let gateway_pids: Vec<u32> = bed
        .applied
        .as_ref()
        .map(Applied::data_path_pids)
        .unwrap_or_default();
    let gateway_cpu = || -> Option<f64> {
        gateway_pids
            .iter()
            .map(|p| cpu_seconds(&p.to_string()))
            .sum::<Option<f64>>()
            .filter(|_| !gateway_pids.is_empty())
    };
    let cpu_before = (cpu_seconds("self"), gateway_cpu());
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
                traffic: traffic.as_ref(),
                gateway_children: &children,
                interrupt,
                verbose,
            };
            let steps = capacity::run_steps(&mut fleet, &env, &mut on_setup);
            (steps.setups, Some(steps.measured))
        }
    };
    let wall_s = begun.elapsed().as_secs_f64();
    let cpu_after = (cpu_seconds("self"), gateway_cpu());
    let stopped = interrupt.load(Ordering::Relaxed);
    let mut started: Vec<Option<Instant>> = vec![None; count];
    for s in &setups {
        if let Some(t) = started.get_mut(s.peer) {
            *t = Some(s.started);
        }
    }
    let mut outcomes = outcomes(&plan, &slices, &setups, stopped);
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
    recorder.save_partial(&report);

    // The gateway's own view: one installed CHILD_SA per tunnel, for the
    // tunnel's own network.
    let mut mismatch = None;
    // (Not after a signal: handshakes abandoned half-way may have left the
    // gateway a CHILD_SA linerate never installed.)
    if let (Some(applied), false, None) = (&bed.applied, stopped, &plan.capacity) {
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
        } else {
            let missing = ours.iter().filter(|n| !listed.contains(n)).count();
            let extra = listed.iter().filter(|n| !ours.contains(n)).count();
            let text = format!(
                "after the setups charon lists {} installed CHILD_SAs where linerate has {} tunnels up: {missing} of linerate's missing, {extra} others",
                thousands(listed.len() as u64),
                thousands(ours.len() as u64)
            );
            report.gateway_checks.push(text.clone());
            mismatch = Some(text);
        }
    }

    // Held up, the gateway's requests answered (with --capacity, after
    // each step).
    if !plan.hold.is_zero() && report.established > 0 && plan.capacity.is_none() {
        let start = Instant::now();
        let mut hold = HoldRecord::default();
        while start.elapsed() < plan.hold && !interrupt.load(Ordering::Relaxed) {
            let left = plan.hold.saturating_sub(start.elapsed());
            for e in fleet.poll(left.min(Duration::from_millis(100))) {
                use linerate_ike::Event;
                match e.event {
                    Event::LivenessCheck => hold.liveness_checks += 1,
                    Event::ChildDeleted | Event::IkeDeleted => hold.deleted_by_gateway += 1,
                    _ => hold.other_requests += 1,
                }
            }
        }
        hold.seconds = start.elapsed().as_secs_f64();
        hold.up_at_end = fleet.established() as u64;
        report.hold = Some(hold);
    }
    report.interrupted = interrupt.load(Ordering::Relaxed);
    if let (Some(running), Some(t)) = (traffic, &plan.traffic) {
        let counts = running.finish()?;
        // charon's own count per CHILD_SA, before the deletes take them.
        let decrypted = match &bed.applied {
            Some(applied) => Some(applied.ipsec_sa_counters()?),
            None => None,
        };
        let port_a = bed.port_a.as_ref().expect("traffic has port A");
        let record = traffic_record(
            &report,
            &counts,
            &started,
            anchor,
            decrypted.as_deref(),
            t.rate,
            format!("{} {}", port_a.ifname, port_a.host.address),
        );
        report.set_traffic(record);
        if let Some(check) = decrypted
            .as_ref()
            .and(report.traffic.as_ref())
            .and_then(gateway_traffic_check)
        {
            if check.1 && mismatch.is_none() {
                mismatch = Some(check.0.clone());
            }
            report.gateway_checks.push(check.0);
        }
    }
    let was_up = fleet.established();
    fleet.delete_all();
    drop(fleet);
    if let Some(applied) = &bed.applied {
        // charon removes an IKE SA when it answers the Delete.
        let deadline = Instant::now() + Duration::from_secs(5);
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
        if left > 0 && mismatch.is_none() {
            mismatch = report.gateway_checks.last().cloned();
        }
    }
    drop(addresses);

    recorder.print(&tunnels_table(&report));
    recorder.save(&report)?;
    recorder.result_event(&report);
    if report.interrupted {
        recorder.finish_as(true)?;
        return Ok(Outcome::Interrupted(
            "the tunnels were deleted; what was set up is reported above".into(),
        ));
    }
    recorder.finish(linerate_store::RunStatus::Complete)?;
    drop(bed);
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

/// `--capacity`'s record: each step from its setups' outcomes (the
/// report's tunnels, in step order) and what was measured.
fn capacity_record(
    report: &TunnelsReport,
    steps: &[StepMeasured],
    plan: &CapacityPlan,
    ceiling: usize,
) -> CapacityRecord {
    let record = steps
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let end = (m.first + m.attempted).min(report.tunnels.len());
            let outcomes = &report.tunnels[m.first.min(end)..end];
            CapacityStep::new(
                i as u64 + 1,
                (m.first + m.attempted) as u64,
                outcomes,
                m,
                plan.max_loss_pct,
            )
        })
        .collect();
    let traffic = steps.iter().any(|m| m.traffic.is_some());
    CapacityRecord::new(
        plan.step as u64,
        ceiling as u64,
        traffic.then_some(plan.max_loss_pct),
        record,
    )
}

/// The gateway's count of installed CHILD_SAs after each step's setups
/// against linerate's tunnels up then (the lab's charon).
fn capacity_gateway_check(steps: &[StepMeasured]) -> Option<String> {
    let listed: Vec<(usize, u64, u64)> = steps
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.gateway_children.map(|g| (i + 1, g, m.up_after_setups)))
        .collect();
    if listed.is_empty() {
        return None;
    }
    let odd: Vec<String> = listed
        .iter()
        .filter(|(_, g, up)| g != up)
        .map(|(i, g, up)| {
            format!(
                "step {i}: charon {} where linerate has {}",
                thousands(*g),
                thousands(*up)
            )
        })
        .collect();
    Some(if odd.is_empty() {
        format!(
            "after each step's setups charon lists as many installed CHILD_SAs as linerate has tunnels up (vici list-sas; {} after the last step)",
            thousands(listed[listed.len() - 1].1)
        )
    } else {
        format!(
            "charon's installed CHILD_SAs after the setups differ from linerate's tunnels up: {}",
            odd.join("; ")
        )
    })
}

/// The exit of a `--capacity` run: 0 when the ceiling was reached with
/// every step held (and the gateway agrees), 1 (a result, not an error)
/// when it stopped at a step that failed or degraded.
fn capacity_outcome(c: &CapacityRecord, mismatch: Option<String>) -> Outcome {
    let head = format!(
        "largest count held {} tunnels (most up at once {})",
        thousands(c.held),
        thousands(c.most_up)
    );
    if c.stopped_because != CapacityStop::Ceiling {
        return Outcome::ThresholdFailed(format!("capacity: {head}; stopped at {}", c.stop_detail));
    }
    match mismatch {
        Some(why) => Outcome::ThresholdFailed(format!(
            "capacity: {head}; the gateway does not agree: {why}"
        )),
        None => Outcome::Passed,
    }
}

/// `--traffic`'s record from what the threads counted: each tunnel's time
/// to first packet is its first frame's arrival at port A (the kernel's
/// CLOCK_REALTIME stamp) less its IKE_SA_INIT's send time (an `Instant`,
/// moved onto CLOCK_REALTIME by `anchor`, both clocks read together).
fn traffic_record(
    report: &TunnelsReport,
    counts: &TrafficCounts,
    started: &[Option<Instant>],
    anchor: (Instant, u64),
    gateway: Option<&[linerate_lab::scenario::SaCounters]>,
    rate: f64,
    port_a: String,
) -> TrafficRecord {
    let realtime_ns = |at: Instant| -> i128 {
        if at >= anchor.0 {
            anchor.1 as i128 + at.duration_since(anchor.0).as_nanos() as i128
        } else {
            anchor.1 as i128 - anchor.0.duration_since(at).as_nanos() as i128
        }
    };
    let tunnels = report
        .tunnels
        .iter()
        .zip(&counts.tunnels)
        .zip(started)
        .map(|((o, c), s)| {
            let ttfp_ms = match (o.setup_ms, c.first_rx_ns, s) {
                (Some(_), Some(rx), Some(s)) => Some((rx as i128 - realtime_ns(*s)) as f64 / 1e6),
                _ => None,
            };
            let gateway_decrypted = gateway.map(|sas| {
                sas.iter()
                    .filter(|sa| sa.remote_ts.join(",") == o.remote_net)
                    .map(|sa| sa.packets_in)
                    .sum()
            });
            TunnelTraffic {
                peer: o.peer,
                ttfp_ms,
                sent: c.sent,
                received: c.received,
                errored: c.errored,
                duplicates: c.duplicates,
                gateway_decrypted,
            }
        })
        .collect();
    TrafficRecord {
        rate_per_tunnel: rate,
        frame_size: TRAFFIC_FRAME,
        port_a,
        refused: counts.tunnels.iter().map(|t| t.refused).sum(),
        foreign: counts.foreign,
        rx_ring_drops: counts.rx_ring_drops,
        tunnels,
        ..TrafficRecord::default()
    }
}

/// The gateway's decrypted count against linerate's, tunnel by tunnel:
/// received at port A <= decrypted <= sent. The line, and whether it is a
/// disagreement.
fn gateway_traffic_check(t: &TrafficRecord) -> Option<(String, bool)> {
    let decrypted = t.gateway_decrypted?;
    let odd = t.tunnels.iter().find(|f| {
        f.gateway_decrypted
            .is_some_and(|g| g > f.sent || g < f.received)
    });
    Some(match odd {
        None => (
            format!(
                "charon decrypted {} test frames on the tunnels' CHILD_SAs (vici list-sas, before the deletes): for every tunnel between what linerate received at port A and what it sent",
                thousands(decrypted)
            ),
            false,
        ),
        Some(f) => (
            format!(
                "charon decrypted {} test frames of tunnel {} where linerate sent {} and received {}",
                thousands(f.gateway_decrypted.unwrap_or(0)),
                f.peer,
                thousands(f.sent),
                thousands(f.received)
            ),
            true,
        ),
    })
}

/// CPU seconds (user + system) process `pid` ("self" for linerate) has
/// used, from /proc/PID/stat (fields 14 and 15, counted after the command
/// name's `)`, in USER_HZ: 100 per second on Linux's architectures).
fn cpu_seconds(pid: &str) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some((user + system) as f64 / 100.0)
}

/// Each peer's outcome, times relative to the first IKE_SA_INIT.
fn outcomes(
    plan: &TunnelsPlan,
    slices: &[Net],
    setups: &[Setup],
    interrupted: bool,
) -> Vec<TunnelOutcome> {
    let (unset_error, unset_reason) = if interrupted {
        ("interrupted before its setup ended", "interrupted")
    } else {
        ("never attempted", "not attempted")
    };
    let first = setups.iter().map(|s| s.started).min();
    let mut out: Vec<TunnelOutcome> = plan
        .peers
        .iter()
        .zip(slices)
        .map(|(&peer, net)| TunnelOutcome {
            peer,
            remote_net: net.to_string(),
            started_ms: 0.0,
            setup_ms: None,
            error: Some(unset_error.into()),
            reason: Some(unset_reason.into()),
        })
        .collect();
    for s in setups {
        let Some(t) = out.get_mut(s.peer) else {
            continue;
        };
        t.started_ms = first.map_or(0.0, |f| s.started.duration_since(f).as_secs_f64() * 1000.0);
        match &s.outcome {
            Ok(d) => {
                t.setup_ms = Some(d.as_secs_f64() * 1000.0);
                t.error = None;
                t.reason = None;
            }
            Err(e) => {
                t.error = Some(e.to_string());
                t.reason = Some(reason(e));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(text: &str) -> Net {
        Net::parse(text, "--remote-net").unwrap()
    }

    #[test]
    fn time_to_first_packet_runs_from_the_ike_sa_init_to_port_a() {
        let settings = TunnelsSettings {
            gateway: Ipv4Addr::new(198, 19, 0, 1),
            ike: "aes256-sha256-modp2048".into(),
            esp: "aes128gcm16".into(),
            local_net: "198.18.0.0/24".into(),
            remote_net: "198.19.128.0/17".into(),
            slice_prefix: 19,
            first_peer: Ipv4Addr::new(198, 19, 64, 1),
            last_peer: Ipv4Addr::new(198, 19, 64, 3),
            attempt_rate: None,
            window: 64,
            hold_s: 2.0,
        };
        let tunnel = |i: u8, setup_ms: Option<f64>| TunnelOutcome {
            peer: Ipv4Addr::new(198, 19, 64, i),
            remote_net: slice(net("198.19.128.0/17"), 19, i as usize - 1).to_string(),
            started_ms: 0.0,
            setup_ms,
            error: None,
            reason: None,
        };
        let report = TunnelsReport::new(
            settings,
            vec![
                tunnel(1, Some(200.0)),
                tunnel(2, Some(210.0)),
                tunnel(3, None),
            ],
        );
        let anchor = (Instant::now(), 1_000_000_000_000u64);
        let started = [
            Some(anchor.0 + Duration::from_millis(10)),
            Some(anchor.0 + Duration::from_millis(20)),
            None,
        ];
        let mut counts = TrafficCounts {
            tunnels: vec![Default::default(); 3],
            ..TrafficCounts::default()
        };
        // Tunnel 1's first frame 250 ms after its IKE_SA_INIT; tunnel 2
        // up but silent.
        counts.tunnels[0].first_rx_ns = Some(anchor.1 + 260_000_000);
        counts.tunnels[0].sent = 200;
        counts.tunnels[0].received = 198;
        counts.tunnels[1].sent = 180;
        let gateway = [linerate_lab::scenario::SaCounters {
            remote_ts: vec!["198.19.128.0/19".into()],
            packets_in: 199,
            ..Default::default()
        }];
        let record = traffic_record(
            &report,
            &counts,
            &started,
            anchor,
            Some(&gateway),
            100.0,
            "a0 198.18.0.2".into(),
        );
        let mut report = report;
        report.set_traffic(record);
        let t = report.traffic.as_ref().unwrap();
        assert!((t.tunnels[0].ttfp_ms.unwrap() - 250.0).abs() < 1e-6);
        assert_eq!(t.tunnels[1].ttfp_ms, None);
        assert_eq!(t.tunnels[2].ttfp_ms, None);
        assert_eq!(t.no_traffic, [Ipv4Addr::new(198, 19, 64, 2)]);
        assert_eq!((t.sent, t.received, t.lost), (380, 198, 182));
        assert_eq!(t.tunnels[0].gateway_decrypted, Some(199));
        assert_eq!(t.tunnels[1].gateway_decrypted, Some(0));
        assert_eq!(t.gateway_decrypted, Some(199));
        assert_eq!(
            report.ttfp_ms.as_ref().unwrap().max,
            t.tunnels[0].ttfp_ms.unwrap()
        );
        let (line, odd) = gateway_traffic_check(t).unwrap();
        assert!(!odd, "{line}");
        // A gateway that decrypted more than linerate sent disagrees.
        let mut t = t.clone();
        t.tunnels[0].gateway_decrypted = Some(201);
        let (line, odd) = gateway_traffic_check(&t).unwrap();
        assert!(odd && line.contains("198.19.64.1"), "{line}");
    }

    #[test]
    fn the_process_cpu_time_is_read_from_proc() {
        let t0 = cpu_seconds("self").unwrap();
        let mut x = 0u64;
        let start = Instant::now();
        while start.elapsed() < Duration::from_millis(300) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let t1 = cpu_seconds("self").unwrap();
        assert!(x > 0);
        // 0.3 s of spinning, counted in 10-ms ticks (other test threads
        // may add theirs).
        assert!(t1 - t0 >= 0.2, "{t0} -> {t1}");
        assert_eq!(cpu_seconds("4294967295"), None);
    }
}
