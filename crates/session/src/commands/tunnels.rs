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
mod phases;
mod rekey;
mod traffic;

use crate::error::{bail, err, Result};
use crate::exit::Outcome;
use crate::ipsec::{IpsecPlan, Net};
use crate::peers::{reason, slice, PeerAddresses};
use crate::recorder::{RecordPlan, Recorder};
pub use capacity::CapacityPlan;
use linerate_esp::EspSuite;
use linerate_ike::{IkeProposals, Psk, Setup};
use linerate_lab::scenario::{Applied, Scenario};
use linerate_lab::Lab;
use linerate_results::report::thousands;
use linerate_results::tunnels::{
    tunnels_table, CapacityRecord, CapacityStep, CapacityStop, StepMeasured, TrafficRecord,
    TunnelOutcome, TunnelTraffic, TunnelsReport,
};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use traffic::TrafficCounts;
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

fn open_bed(plan: &TunnelsPlan, stop: &AtomicBool) -> Result<Bed> {
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
            let ring = ring.unwrap_or(linerate_lab::DEFAULT_RING);
            let lab = Lab::up_until(&name, ring, &crate::ports::until(stop))?;
            let applied = scenario.apply_until(&lab, &crate::ports::until(stop))?;
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

/// `linerate tunnels`: the run, phase by phase ([`phases`]). The bed,
/// the peers' addresses, the fleet and the traffic are held here, so
/// that an error anywhere releases them in the reverse order.
pub fn run(plan: TunnelsPlan, interrupt: &AtomicBool) -> Result<Outcome> {
    let mut recorder = Recorder::open(&plan.record)?.json_file(plan.json.as_deref());
    // An external port's key is read before anything is touched.
    if let TunnelsTarget::External { .. } = plan.target {
        if let Some(file) = &plan.ipsec.psk_file {
            Psk::read_file(file).map_err(|e| err!(BadInput, "{e}"))?;
        }
    }
    let bed = open_bed(&plan, interrupt)?;
    let psk = Psk::read_file(&bed.psk_file).map_err(|e| err!(BadInput, "{e}"))?;
    let ike = bed.ike.clone().unwrap_or_default();
    let slices: Vec<Net> = (0..plan.peers.len())
        .map(|i| slice(plan.remote_net, plan.slice_prefix, i))
        .collect();
    let settings = phases::settings(&plan, &bed, &ike);
    let addresses = PeerAddresses::add(bed.netns.as_deref(), &bed.ifname, bed.host_b, &plan.peers)?;
    let mut fleet = phases::bind_fleet(&plan, &bed, &slices, psk, ike)?;
    phases::begin(&mut recorder, &plan, &bed)?;
    let verbose = recorder.verbose();
    let traffic = phases::start_traffic(&plan, &bed, &slices, verbose)?;
    let brought = phases::bring_up(
        &plan,
        &bed,
        &mut fleet,
        traffic.as_ref(),
        interrupt,
        verbose,
    );
    let anchor = brought.anchor;
    let stopped = interrupt.load(Ordering::Relaxed);
    let (mut report, started) =
        phases::setups_report(&plan, &bed, &slices, settings, brought, stopped);
    recorder.save_partial(&report);

    let mut mismatch = None;
    // (Not after a signal: handshakes abandoned half-way may have left the
    // gateway a CHILD_SA linerate never installed.)
    if let (Some(applied), false, None) = (&bed.applied, stopped, &plan.capacity) {
        mismatch = phases::setups_gateway_check(applied, &mut report)?;
    }
    // Held up, the gateway's requests answered (with --capacity, after
    // each step).
    // (With --rekey, each tunnel's CHILD_SA rekeyed meanwhile.)
    let mut rekeys = None;
    if !plan.hold.is_zero() && report.established > 0 && plan.capacity.is_none() {
        let start = Instant::now();
        report.hold = Some(match plan.ipsec.rekey {
            Some(every) => {
                let (held, run) = rekey::hold_rekeying(
                    &mut fleet,
                    &plan.peers,
                    (every, plan.hold),
                    traffic.as_ref(),
                    interrupt,
                    start,
                );
                rekeys = Some(run);
                held
            }
            None => phases::hold(&mut fleet, plan.hold, interrupt, start),
        });
    }
    report.interrupted = interrupt.load(Ordering::Relaxed);
    if let (Some(running), Some(t)) = (traffic, &plan.traffic) {
        let odd = phases::finish_traffic(
            running,
            t,
            &bed,
            &mut report,
            (&started, anchor),
            rekeys.as_ref(),
        )?;
        mismatch = mismatch.or(odd);
    } else if let Some(run) = &rekeys {
        report.rekeys = Some(run.record(None));
    }
    let was_up = fleet.established();
    let deletes = fleet.delete_all();
    report.deletes_unanswered = deletes
        .unanswered
        .iter()
        .filter_map(|&i| plan.peers.get(i).map(ToString::to_string))
        .collect();
    drop(fleet);
    if let Some(applied) = &bed.applied {
        let deadline = Instant::now() + Duration::from_secs(5);
        let odd = phases::deletes_gateway_check(applied, &mut report, was_up, deadline)?;
        mismatch = mismatch.or(odd);
    }
    drop(addresses);

    recorder.print(&tunnels_table(&report));
    recorder.save(&report)?;
    recorder.result_event(&report);
    if report.interrupted {
        recorder.finish_as(true)?;
        let deleted = match report.deletes_unanswered.len() {
            0 => "the tunnels were deleted".to_string(),
            n => format!(
                "the tunnels were deleted but {n}, whose Deletes went unanswered (see above)"
            ),
        };
        return Ok(Outcome::Interrupted(format!(
            "{deleted}; what was set up is reported above"
        )));
    }
    recorder.finish(linerate_store::RunStatus::Complete)?;
    drop(bed);
    phases::verdict(&report, mismatch)
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
    use linerate_results::tunnels::TunnelsSettings;

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
        // Spin until /proc says this process used 0.2 s of CPU more (10-ms
        // ticks): however busy the machine, the count must move with the
        // CPU this thread burns. The wall-clock cap only ends a reading
        // that never moves.
        let t0 = cpu_seconds("self").unwrap();
        let start = Instant::now();
        let mut x = 0u64;
        let mut t1 = t0;
        while t1 - t0 < 0.2 && start.elapsed() < Duration::from_secs(60) {
            for _ in 0..100_000 {
                x = x.wrapping_add(std::hint::black_box(1));
            }
            t1 = cpu_seconds("self").unwrap();
        }
        assert!(x > 0);
        assert!(t1 - t0 >= 0.2, "{t0} -> {t1} after 60 s of spinning");
        assert_eq!(cpu_seconds("4294967295"), None);
    }
}
