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
mod records;
mod rekey;
mod traffic;

use crate::error::{bail, err, Result};
use crate::exit::Outcome;
use crate::ipsec::{IpsecPlan, Net};
use crate::peers::{slice, PeerAddresses};
use crate::recorder::{RecordPlan, Recorder};
pub use capacity::CapacityPlan;
use linerate_esp::EspSuite;
use linerate_ike::{IkeProposals, Psk};
use linerate_lab::scenario::{Applied, Scenario};
use linerate_lab::Lab;
use linerate_results::tunnels::tunnels_table;
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

#[cfg(test)]
mod tests {
    use super::*;

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
