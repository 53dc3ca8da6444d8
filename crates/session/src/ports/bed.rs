//! The phases of [`super::open_with`]: each takes one decision about the
//! test bed (which ports, what the engine receives, how fast the line is,
//! which flows the tunnels spread), so the order they run in stays visible
//! in `open_with` itself.

use super::{lab_for_run, lock_ports, PortName, DEFAULT_LINE_BPS};
use crate::error::{bail, Result, ResultExt};
use crate::ipsec::{Direction, IpsecPeer};
use crate::plan::{BedPlan, Target};
use linerate_engine::host::Ipv6Host;
use linerate_engine::{EngineConfig, HostConfig, TesterPort, TunnelTally};
use linerate_lab::layout::{RoutedLayout, LAB_IPV6, LAB_IPV6_PREFIX};
use linerate_lab::Lab;
use linerate_port::af_packet::AfPacketOptions;
use linerate_results::Placement;
use linerate_wire::{Encap, FrameCheck, IpVersion};
use std::net::Ipv4Addr;
use std::sync::atomic::AtomicBool;

/// What the bed holds only to release it when it drops. Fields drop in
/// order: the lab router's addresses go before the lab they are in.
pub(super) struct Held {
    pub routed: Option<RoutedLayout>,
    pub lab: Option<Lab>,
    pub port_locks: Vec<linerate_lab::LabLock>,
}

/// The two ports found (the user's or the lab's), before an engine opens
/// them: names, host addresses, and where the tester's threads may run.
pub(super) struct Attached {
    pub a: PortName,
    pub host_a: HostConfig,
    pub b: PortName,
    pub host_b: HostConfig,
    pub placement: Option<Placement>,
    pub held: Held,
}

/// The socket options the ports open with: the whole frame is copied up
/// when the payload is checked (the default: the UDP checksum covers all
/// of it) or ESP is decrypted (verified whole); else, with
/// `--frame-check headers`, the default snap length, headers and signature.
pub(super) fn rx_options(plan: &BedPlan, max_frame_len: usize) -> AfPacketOptions {
    let mut opts = AfPacketOptions {
        max_frame_len,
        ..AfPacketOptions::default()
    };
    if plan.frame_check == FrameCheck::Payload || plan.ipsec.is_some() {
        // The UDP checksum covers the whole frame, and an ESP frame is
        // verified and decrypted whole: copy all of it up.
        opts.rx_snaplen = u16::MAX as u32;
    }
    opts
}

/// Finds the ports the plan names: external interfaces (locked against
/// another run), or the lab's (the one given, named, up, or built now).
pub(super) fn attach(plan: &BedPlan, given: Option<Lab>, stop: &AtomicBool) -> Result<Attached> {
    match (&plan.target, given) {
        (Target::External { a: pa, b: pb }, None) => {
            let a = (pa.ifname.clone(), None);
            let b = (pb.ifname.clone(), None);
            let port_locks = lock_ports(&a, &b)?;
            Ok(Attached {
                a,
                host_a: pa.host.clone(),
                b,
                host_b: pb.host.clone(),
                placement: None,
                held: Held {
                    routed: None,
                    lab: None,
                    port_locks,
                },
            })
        }
        (target, given) => {
            let lab = match (given, target) {
                (Some(lab), _) => lab,
                (None, Target::Lab { name, ring }) => lab_for_run(name.as_deref(), *ring, stop)?,
                (None, Target::External { .. }) => lab_for_run(None, None, stop)?,
            };
            attach_lab(lab, plan.encap)
        }
    }
}

/// The lab's ports with their addresses, the lab router routing the
/// frames' encapsulation, and the lab's CPU placement.
fn attach_lab(lab: Lab, encap: Encap) -> Result<Attached> {
    let (pa, pb) = (lab.port_a().clone(), lab.port_b().clone());
    let a = (pa.ifname.clone(), Some(pa.netns.clone()));
    let b = (pb.ifname.clone(), Some(pb.netns.clone()));
    let (host_a, host_b) = (lab_host(&pa, 0, encap), lab_host(&pb, 1, encap));
    let routed = route_encap(&lab, encap)?;
    let placement = Some(lab_placement(&lab));
    Ok(Attached {
        a,
        host_a,
        b,
        host_b,
        placement,
        held: Held {
            routed,
            lab: Some(lab),
            port_locks: Vec::new(),
        },
    })
}

/// A lab port's host addresses: the lab's IPv4 plan, its IPv6 pair when
/// the frames are IPv6 (`side` 0 for port A, 1 for B), and the VLAN.
fn lab_host(p: &linerate_lab::LabPort, side: usize, encap: Encap) -> HostConfig {
    HostConfig {
        ip: p.ip,
        prefix_len: p.prefix_len,
        gateway: p.gateway,
        gateway_mac: None,
        also_answers: None,
        inner: None,
        ipv6: (encap.ip == IpVersion::V6).then(|| Ipv6Host {
            ip: LAB_IPV6[side].0,
            prefix_len: LAB_IPV6_PREFIX,
            gateway: LAB_IPV6[side].1,
        }),
        vlan: encap.vlan,
    }
}

/// IPv6 or VLAN frames: the lab router gets the addresses and
/// subinterfaces that route them for this run (said on stderr); plain
/// IPv4 needs none.
fn route_encap(lab: &Lab, encap: Encap) -> Result<Option<RoutedLayout>> {
    if encap.is_default() {
        return Ok(None);
    }
    let r = lab
        .route_layout(encap.ip == IpVersion::V6, encap.vlan.map(|v| v.id))
        .context("preparing the lab router for IPv6/VLAN")?;
    errln!(
        "linerate: {encap} test frames: the lab router routes them on {} for this run",
        r.describe()
    );
    Ok(Some(r))
}

/// The lab's CPU placement as the results record it.
fn lab_placement(lab: &Lab) -> Placement {
    let pl = lab.placement();
    Placement {
        tester_cpus: pl.tester_cpus.clone(),
        dut_cpus: pl.dut_cpus.clone(),
        shared_core: pl.shared_core,
        note: pl.note.clone(),
        ring: Some(pl.ring),
    }
}

/// Hands port B the ESP transforms, each direction only where linerate
/// does that side's crypto (it encrypts what the gateway decrypts). When
/// port B decrypts on several threads (its ESP steered by tunnel), port
/// A's generator threads each send the tunnels of one of them.
pub(super) fn install_transforms(
    ipsec: Option<&mut IpsecPeer>,
    a: &mut TesterPort,
    b: &mut TesterPort,
    engine_name: &'static str,
) -> Result<()> {
    let Some(peer) = ipsec else {
        return Ok(());
    };
    let direction = peer.record.direction;
    if let Some((send, receive)) = peer.transforms()? {
        let (send, receive) = match direction {
            Direction::Encrypt => (None, Some(receive)),
            Direction::Decrypt => (Some(send), None),
            _ => (Some(send), Some(receive)),
        };
        b.set_transforms(send, receive, engine_name)?;
        let shares = b.tx.transforms().len();
        if shares > 1 {
            errln!(
                "linerate: the tunnels are dealt out to {shares} generator threads (tunnel i to thread i mod {shares}), each encrypting its own tunnels' frames"
            );
        }
        let receivers = b.rx.receiving_threads();
        if receivers > 1 && b.rx.transform().is_some() {
            if let (Direction::Encrypt, Some(slices)) = (direction, peer.slices) {
                let spread = linerate_engine::ipsec::TunnelSpread::new(slices.map());
                a.set_transforms(Some(Box::new(spread)), None, engine_name)?;
            }
            errln!(
                "linerate: port B decrypts on {receivers} receiving threads (tunnel i's ESP to thread i mod {receivers}); each generator thread sends the tunnels of one of them"
            );
        }
    }
    Ok(())
}

/// In the lab, the tester ports' receive work leaves the DUT's CPU (a
/// deep lab's ports have no NAPI: their backlog is on the tester's CPU);
/// where it cannot, a note says so and the run goes on.
pub(super) fn move_tester_receive(placement: &Placement, ports: [&TesterPort; 2]) {
    for info in ports.map(|p| &p.info) {
        if let Some(ns) = &info.netns {
            if let Err(why) = linerate_lab::tester_receive(ns, &info.ifname, &placement.tester_cpus)
            {
                errln!(
                    "linerate: note: {}'s receive stays where the kernel runs it: {why}",
                    info.ifname
                );
            }
        }
    }
}

/// Ports the user named (no lab): the receive threads of a port with
/// threaded NAPI run above the generator for the run, as a lab's tester
/// ports do (`linerate_lab::raise_receive`), said in one line. Only ports
/// in linerate's own namespace: another's sysfs is not at hand here.
pub(super) fn raise_receive(ports: [&TesterPort; 2]) -> Vec<linerate_lab::RaisedReceive> {
    let mut raised = Vec::new();
    for info in ports.map(|p| &p.info) {
        if info.netns.is_some() || raised.iter().any(|r: &(String, _)| r.0 == info.ifname) {
            continue;
        }
        if let Some(r) = linerate_lab::raise_receive(&info.ifname) {
            let names: Vec<&str> = r.threads().iter().map(|t| t.comm.as_str()).collect();
            errln!(
                "linerate: {}'s receive threads ({}) run at real-time priority {} until the run ends, above the generator threads that may share their CPUs",
                info.ifname,
                names.join(", "),
                linerate_lab::TESTER_NAPI_PRIORITY
            );
            raised.push((info.ifname.clone(), r));
        }
    }
    raised.into_iter().map(|(_, r)| r).collect()
}

/// The line speed and where it came from: `--line-speed`, else what port
/// A's link reports, else 10G (said so, for the report).
pub(super) fn line_speed(given: Option<u64>, a: &linerate_port::PortInfo) -> (u64, String) {
    match given {
        Some(bps) => (bps, "given with --line-speed".to_string()),
        None => match a.speed_bps {
            Some(bps) => (bps, format!("reported by {}", a.ifname)),
            None => (
                DEFAULT_LINE_BPS,
                "not reported by the link; 10G assumed (set --line-speed)".to_string(),
            ),
        },
    }
}

/// The flows each direction sends and, with `--tunnels`, how received
/// frames map to tunnels.
pub(super) struct TunnelFlows {
    pub flows: linerate_wire::Flows,
    pub flows_rev: linerate_wire::Flows,
    pub tunnels: Option<TunnelTally>,
}

/// Which addresses port B answers ARP for and which flows are sent: the
/// plan's, and with `--tunnels` every peer answered and the test frames
/// spread evenly over the tunnels' slices (the address behind linerate:
/// the source of what port B sends, the destination of what it receives).
pub(super) fn tunnel_flows(
    plan: &BedPlan,
    ipsec: Option<&IpsecPeer>,
    host_b: &mut HostConfig,
) -> Result<TunnelFlows> {
    use linerate_wire::flows::Field;
    host_b.also_answers = destinations_to_answer(&plan.flows, host_b)?;
    let mut flows = plan.flows.clone();
    let mut flows_rev = linerate_wire::Flows {
        encap: flows.encap,
        ..linerate_wire::Flows::default()
    };
    let mut tunnels = None;
    if let Some(p) = ipsec {
        if let (Some(slices), Some(t)) = (p.slices, &p.record.tunnels) {
            host_b.also_answers = Some((t.first_peer, t.last_peer));
            let direction = p.record.direction;
            // The engine's A is port B when decrypting (ports swapped).
            let (ab, ba) = match direction {
                Direction::Decrypt => (Field::SrcIp, Field::DstIp),
                _ => (Field::DstIp, Field::SrcIp),
            };
            flows.ranges.push(slices.spread(ab));
            if direction == Direction::Both {
                flows_rev.ranges.push(slices.spread(ba));
            }
            tunnels = Some(TunnelTally {
                map: slices.map(),
                ab,
                ba,
            });
        }
    }
    Ok(TunnelFlows {
        flows,
        flows_rev,
        tunnels,
    })
}

/// The engine's configuration from the plan: flows, directions, the
/// recovery rule, where threads run, and whether the DUT's counters
/// follow the test frames (not through IPsec: ESP in and clear out are
/// different packets to the gateway's kernel).
pub(super) fn engine_config(
    plan: &BedPlan,
    flows: TunnelFlows,
    placement: Option<&Placement>,
    engine_name: &'static str,
    direction: Option<Direction>,
) -> EngineConfig {
    EngineConfig {
        flows: flows.flows,
        bidirectional: plan.bidirectional || direction == Some(Direction::Both),
        drop_from: plan.drop_from,
        straggler_wait: plan.straggler_wait,
        recovery: (!plan.recovery_limit.is_zero()).then(|| linerate_engine::recovery::QuietRule {
            limit: plan.recovery_limit,
            ..Default::default()
        }),
        tester_cpus: placement.map(|p| p.tester_cpus.clone()).unwrap_or_default(),
        name: engine_name.into(),
        tx_threads: plan.tx_threads,
        latency_sampling: plan.latency_every,
        frame_check: plan.frame_check,
        tunnels: flows.tunnels,
        flows_rev: flows.flows_rev,
        dut_counters: direction.is_none(),
        // In the lab the DUT's input ring is known: the generator may catch
        // up an eighth of it before it pauses.
        catch_up_frames: placement.and_then(|p| p.ring).map_or(
            linerate_engine::MAX_CATCH_UP_FRAMES,
            linerate_engine::catch_up_frames_for_ring,
        ),
        // Behind the lab's deep NIC queue, hand-overs are dear.
        xdp_batch: placement.and_then(|p| p.ring).map_or(
            EngineConfig::default().xdp_batch,
            linerate_engine::xdp_batch_for_ring,
        ),
        ..EngineConfig::default()
    }
}

/// The addresses port B must answer ARP for so the DUT delivers a
/// `dst-ip` range: the range, when it lies in B's subnet (the DUT then
/// delivers to each destination directly). A range in B's subnet that
/// holds the gateway (the DUT's own address) or the subnet's broadcast
/// address is refused: frames to those are not forwarded. A range outside
/// the subnet needs routes on the DUT towards port B, and is only noted.
fn destinations_to_answer(
    flows: &linerate_wire::Flows,
    host: &HostConfig,
) -> Result<Option<(Ipv4Addr, Ipv4Addr)>> {
    let Some(r) = flows.range(linerate_wire::flows::Field::DstIp) else {
        return Ok(None);
    };
    let (lo, hi) = (r.min as u32, r.max as u32);
    let mask = u32::MAX
        .checked_shl(32 - host.prefix_len as u32)
        .unwrap_or(0);
    let net = u32::from(host.ip) & mask;
    let in_subnet = |a: u32| a & mask == net;
    if !in_subnet(lo) || !in_subnet(hi) {
        errln!(
            "linerate: note: the dst-ip range {}..{} is not inside port B's subnet {}/{}: the DUT needs routes for it towards port B",
            Ipv4Addr::from(lo),
            Ipv4Addr::from(hi),
            Ipv4Addr::from(net),
            host.prefix_len
        );
        return Ok(None);
    }
    let gateway = u32::from(host.gateway);
    let broadcast = net | !mask;
    for (what, a) in [
        ("the DUT's own address", gateway),
        ("the subnet's broadcast address", broadcast),
        ("the network address", net),
    ] {
        if (lo..=hi).contains(&a) {
            bail!(BadInput,
                "--range dst-ip {}..{} includes {what} {}: frames to it are not forwarded; leave it out of the range",
                Ipv4Addr::from(lo),
                Ipv4Addr::from(hi),
                Ipv4Addr::from(a)
            );
        }
    }
    Ok(Some((Ipv4Addr::from(lo), Ipv4Addr::from(hi))))
}
