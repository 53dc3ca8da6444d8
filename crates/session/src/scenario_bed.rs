//! A DUT configuration (`--scenario`) as the measuring commands use it: a
//! fresh lab for each, the scenario applied and verified before the first
//! trial, the traffic's passage checked after the last, and the report's
//! record of it.

use crate::error::{bail, Result};
use crate::ipsec::Net;
use crate::plan::BedPlan;
use crate::ports;
use linerate_lab::scenario::{Applied, IpsecSuite, Scenario, TunnelKind};
use linerate_lab::Lab;
use linerate_results::report::thousands;
use linerate_results::scenario::ScenarioRecord;
use linerate_wire::overhead::{Auth, Cipher, Encapsulation, WireguardPadding};
use std::sync::atomic::AtomicBool;

/// `cap.pcap` for the `n`th of several scenarios: `cap-n.pcap`.
pub fn numbered(path: &std::path::Path, n: usize) -> std::path::PathBuf {
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    let name = match path.extension() {
        Some(ext) => format!("{stem}-{n}.{}", ext.to_string_lossy()),
        None => format!("{stem}-{n}"),
    };
    path.with_file_name(name)
}

/// Builds a fresh lab for `scenario` (the `index`th of this run), applies
/// and verifies it, and opens the tester on it. Drop the `Applied` (XDP
/// program, tunnel daemons) before the test bed, which owns the lab.
pub fn prepare(
    bed_plan: &BedPlan,
    max_frame_len: usize,
    scenario: &Scenario,
    index: usize,
    stop: &AtomicBool,
) -> Result<(Applied, ports::TestBed)> {
    // Unique per process and scenario; at most 11 characters.
    let name = format!("s{}-{index}", std::process::id());
    errln!(
        "linerate: scenario {}: {} (lab '{name}', namespaces lr-{name}-*)",
        scenario.spec,
        scenario.description()
    );
    let asked = match &bed_plan.target {
        crate::plan::Target::Lab { ring, .. } => ring.unwrap_or(linerate_lab::DEFAULT_RING),
        crate::plan::Target::External { .. } => linerate_lab::DEFAULT_RING,
    };
    let ring = scenario.ring(asked);
    if ring != asked {
        errln!("linerate:   rings: veth's own 256-frame rings, not {asked}: this DUT forwards in NAPI or moves its interfaces into a second DUT, where the deep lab's NIC queue cannot sit");
    }
    // Both stop at their next step when the run is asked to stop.
    let lab = Lab::up_until(&name, ring, &ports::until(stop))?;
    // On error the lab drops here and is removed.
    let applied = scenario.apply_until(&lab, &ports::until(stop))?;
    for check in &applied.checks {
        errln!("linerate:   verified: {check}");
    }
    if let Some(path) = &applied.data_path {
        errln!("linerate:   data path: {path}");
    }
    let peered = with_vpn_peer(bed_plan, &applied, max_frame_len)?;
    let bed_plan = peered.as_ref().unwrap_or(bed_plan);
    let mut bed = ports::open_with(bed_plan, max_frame_len, Some(lab), stop)?;
    if let Some(source) = applied.drop_from().map(std::net::IpAddr::V4) {
        if bed_plan.drop_from.is_some_and(|d| d != source) {
            bail!(
                BadInput,
                "--scenario drop-test drops frames from {source}: leave out --drop-from"
            );
        }
        bed.engine.set_drop_from(source)?;
    }
    Ok((applied, bed))
}

/// The report's record of a scenario as applied (traffic checks to come).
pub fn record_of(scenario: &Scenario, applied: &Applied) -> ScenarioRecord {
    ScenarioRecord {
        spec: scenario.spec.clone(),
        description: scenario.description(),
        data_path: applied.data_path.clone().unwrap_or_default(),
        checks: applied.checks.clone(),
        traffic_checks: Vec::new(),
        outer: Vec::new(),
    }
}

/// [`Applied::verify_traffic`] after `trials`, unless none forwarded a frame.
pub fn traffic_checks<'a>(
    applied: &Applied,
    lab: &Lab,
    trials: impl Iterator<Item = &'a linerate_results::TrialResult>,
) -> Result<Vec<String>> {
    let forwarded: u64 = trials.map(|t| t.rx_frames).sum();
    if forwarded == 0 {
        return Ok(vec![
            "no trial forwarded a frame: the traffic checks were skipped".into(),
        ]);
    }
    Ok(applied.verify_traffic(lab)?)
}

/// `--tunnels N` in the lab: the gateway's own view instead of the
/// scenario's one-tunnel checks (which follow 198.19.1.0/24): charon lists
/// one installed CHILD_SA per tunnel with linerate's SPIs, and its counts
/// against linerate's ESP counts so far. None: not many tunnels.
pub fn tunnel_checks(
    applied: &Applied,
    peer: Option<&crate::ipsec::IpsecPeer>,
) -> Result<Option<Vec<String>>> {
    let Some((peer, t)) = peer.and_then(|p| p.record.tunnels.as_ref().map(|t| (p, t))) else {
        return Ok(None);
    };
    let sas = applied.ipsec_sa_counters()?;
    // The tunnels' SPIs now: a rekey (--rekey, or the gateway's) replaced
    // the first ones, and charon's counters start again with each CHILD_SA.
    let spis: std::collections::HashSet<u32> = peer
        .current_spis()
        .into_iter()
        .map(|(out, _)| out)
        .collect();
    let ours: Vec<_> = sas
        .iter()
        .filter(|s| s.state == "INSTALLED" && spis.contains(&s.spi_in))
        .collect();
    let counts = peer.counts().esp;
    let sent: u64 = counts.sent.packets;
    let received: u64 = counts.received.packets;
    let (gw_in, gw_out): (u64, u64) = ours
        .iter()
        .fold((0, 0), |(i, o), s| (i + s.packets_in, o + s.packets_out));
    let mut checks = vec![format!(
        "charon lists {} installed CHILD_SAs with linerate's SPIs, of the {} tunnels",
        thousands(ours.len() as u64),
        thousands(t.count as u64)
    )];
    let rekeyed = counts.new_sas_taken > 0;
    checks.push(format!(
        "over the run charon decrypted {} ESP packets {}of the {} linerate sent, and encrypted {} of which linerate decrypted {}",
        thousands(gw_in),
        if rekeyed {
            "(on the CHILD_SAs installed now: rekeys replaced the earlier ones) "
        } else {
            ""
        },
        thousands(sent),
        thousands(gw_out),
        thousands(received)
    ));
    if ours.len() != t.count {
        bail!(
            Failed,
            "the gateway does not list every tunnel: {}",
            checks[0]
        );
    }
    Ok(Some(checks))
}

/// The frame on the WAN link for an inner IP packet of `l3` bytes: the
/// encapsulation arithmetic of linerate-wire.
/// `user_space`: boringtun, which sends WireGuard packets unpadded (seen on
/// the WAN link's byte counter), where the kernel pads to 16 bytes.
pub fn outer_frame(kind: TunnelKind, l3: usize, user_space: bool) -> usize {
    let enc = |e: Encapsulation| e.outer_frame(l3);
    match kind {
        TunnelKind::Vxlan => enc(Encapsulation {
            vxlan: true,
            ..Encapsulation::default()
        }),
        TunnelKind::Gre => enc(Encapsulation {
            gre: true,
            ..Encapsulation::default()
        }),
        // kernel-libipsec sends ESP UDP-encapsulated (NAT-T).
        TunnelKind::Ipsec(suite) => enc(Encapsulation {
            esp: Some(match suite {
                IpsecSuite::AesCbcSha256 => (Cipher::AesCbc, Auth::Sha256),
                IpsecSuite::AesGcm => (Cipher::AesGcm, Auth::None),
                IpsecSuite::NullSha1 => (Cipher::Null, Auth::Sha1),
            }),
            nat_t: true,
            ..Encapsulation::default()
        }),
        TunnelKind::Wireguard => enc(Encapsulation {
            wireguard: Some(if user_space {
                WireguardPadding::Unpadded
            } else {
                WireguardPadding::To16
            }),
            ..Encapsulation::default()
        }),
    }
}

/// A scenario that makes the DUT a VPN gateway (`vpn-gateway`) makes port
/// B its IPsec peer: what `--ipsec` did not say comes from the scenario
/// (key file, networks, suite). `--ipsec` on another scenario is refused.
fn with_vpn_peer(
    bed_plan: &BedPlan,
    applied: &Applied,
    max_frame_len: usize,
) -> Result<Option<BedPlan>> {
    let Some(peer) = applied.vpn_peer() else {
        if bed_plan.ipsec.is_some() {
            bail!(
                BadInput,
                "--ipsec in the lab needs a DUT that is a VPN gateway: use --scenario vpn-gateway"
            );
        }
        return Ok(None);
    };
    // The lab's gateway encrypts inner packets up to its TUN's MTU.
    let largest_inner = max_frame_len.saturating_sub(14);
    if largest_inner > peer.inner_mtu as usize {
        bail!(BadInput,
            "the lab's VPN gateway (strongSwan kernel-libipsec) carries inner packets up to {} bytes, and {}-byte frames hold {largest_inner}: use frame sizes up to {} (e.g. --sizes 64,128,256,512,1024,1280,{})",
            peer.inner_mtu,
            max_frame_len + 4,
            peer.inner_mtu + 18,
            peer.inner_mtu + 18
        );
    }
    let mut plan = bed_plan.ipsec.clone().unwrap_or_default();
    plan.ranges = bed_plan.flows.ranges.clone();
    if let Some(esp) = plan.esp.filter(|&e| e != peer.suite) {
        bail!(BadInput, "--esp {esp} is not the lab gateway's suite ({}): choose it with --scenario vpn-gateway:{esp}", peer.suite);
    }
    let net = |(address, prefix_len): (std::net::Ipv4Addr, u8)| Net {
        address,
        prefix_len,
    };
    plan.esp = Some(peer.suite);
    plan.gateway = plan.gateway.or(Some(peer.gateway));
    plan.psk_file = plan.psk_file.or_else(|| Some(peer.psk_file.clone()));
    if plan.tunnels > 1 {
        // Many peers: from the gateway's peer range (routed to port B),
        // each protecting its slice of the networks it accepts for them.
        plan.remote_net = plan
            .remote_net
            .or(Some(net(linerate_lab::scenario::VPN_TUNNEL_NETS)));
        plan.peer_addrs = plan.peer_addrs.or_else(|| {
            Some(crate::ipsec::PeerAddrs::from_first(
                linerate_lab::scenario::VPN_FIRST_PEER,
            ))
        });
    }
    plan.remote_net = plan.remote_net.or(Some(Net {
        address: peer.inner_address,
        prefix_len: peer.remote_net.1,
    }));
    plan.local_net = plan.local_net.or(Some(net(peer.local_net)));
    if plan.ike.is_none() {
        plan.ike = Some(
            linerate_ike::IkeProposals::parse(&peer.ike)
                .map_err(|e| crate::error::err!(Failed, "the lab gateway's IKE proposal: {e}"))?,
        );
    }
    Ok(Some(BedPlan {
        ipsec: Some(plan),
        ..bed_plan.clone()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outer_frames_follow_the_encapsulation() {
        // VXLAN adds outer Ethernet + IP + UDP + VXLAN + the inner Ethernet
        // header: 1518-byte frames become 1568.
        assert_eq!(outer_frame(TunnelKind::Vxlan, 1500, false), 1568);
        assert_eq!(outer_frame(TunnelKind::Vxlan, 46, false), 114);
        // GRE: 24 bytes.
        assert_eq!(outer_frame(TunnelKind::Gre, 1500, false), 1542);
        // WireGuard: 60 bytes plus padding to 16: 1500 -> 1500 + 4 pad.
        assert_eq!(outer_frame(TunnelKind::Wireguard, 1500, false), 1578 + 4);
        assert_eq!(outer_frame(TunnelKind::Wireguard, 46, false), 18 + 60 + 48);
        // boringtun does not pad.
        assert_eq!(outer_frame(TunnelKind::Wireguard, 46, true), 18 + 60 + 46);
    }

    #[test]
    fn each_compared_scenario_captures_to_a_file_of_its_own() {
        use std::path::Path;
        assert_eq!(
            numbered(Path::new("/tmp/cap.pcap"), 2),
            Path::new("/tmp/cap-2.pcap")
        );
        assert_eq!(numbered(Path::new("cap"), 1), Path::new("cap-1"));
    }
}
