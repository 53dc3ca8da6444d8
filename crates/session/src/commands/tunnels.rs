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
//! the deletes; the kernel's UDP stack carries IKE. No test frame is sent.

use crate::error::{bail, err, Result};
use crate::exit::Outcome;
use crate::ipsec::{IpsecPlan, Net};
use crate::recorder::{RecordPlan, Recorder, RunInfo};
use linerate_esp::EspSuite;
use linerate_ike::{
    Fleet, FleetConfig, IkeError, IkeProposals, Peer, Ports, Psk, Retransmit, Setup,
    TrafficSelector,
};
use linerate_lab::scenario::{Applied, Scenario};
use linerate_lab::Lab;
use linerate_results::report::thousands;
use linerate_results::tunnels::{
    tunnels_table, HoldRecord, SetupCpu, TunnelOutcome, TunnelsReport, TunnelsSettings,
};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The most tunnels one run brings up.
pub const MAX_TUNNELS: usize = 10_000;

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
    pub json: Option<PathBuf>,
    pub record: RecordPlan,
}

/// `--peer-addrs`: `FIRST`, `FIRST-LAST` or `CIDR`, the first `count`
/// addresses of it (a network's own address and its broadcast address are
/// skipped below /31).
pub fn peer_addresses(text: &str, count: usize) -> Result<Vec<Ipv4Addr>> {
    let bad = || {
        err!(BadInput,
            "--peer-addrs {text} is not an address range: write FIRST (and upward), FIRST-LAST or a network ADDRESS/PREFIX, e.g. 198.19.0.10-198.19.0.200")
    };
    let (first, last) = if let Some((a, b)) = text.split_once('-') {
        let a: Ipv4Addr = a.trim().parse().map_err(|_| bad())?;
        let b: Ipv4Addr = b.trim().parse().map_err(|_| bad())?;
        if u32::from(b) < u32::from(a) {
            bail!(
                BadInput,
                "--peer-addrs {text}: the last address is below the first: write FIRST-LAST"
            );
        }
        (u32::from(a), u32::from(b))
    } else if text.contains('/') {
        let net = Net::parse(text, "--peer-addrs")?;
        let (a, b) = net.range();
        let (a, b) = (u32::from(a), u32::from(b));
        if net.prefix_len < 31 {
            (a + 1, b - 1)
        } else {
            (a, b)
        }
    } else {
        let a: Ipv4Addr = text.trim().parse().map_err(|_| bad())?;
        (u32::from(a), u32::MAX)
    };
    let available = u64::from(last) - u64::from(first) + 1;
    if available < count as u64 {
        bail!(BadInput,
            "--peer-addrs {text} holds {} addresses, fewer than the {} tunnels of --count: give a larger range or a smaller --count",
            thousands(available),
            thousands(count as u64)
        );
    }
    Ok((0..count as u32)
        .map(|i| Ipv4Addr::from(first + i))
        .collect())
}

/// The prefix length of `count` equal slices of `net` (a power of two of
/// them, enough for `count`), or a one-line refusal when it is too small.
pub fn slice_prefix(net: Net, count: usize, option: &str) -> Result<u8> {
    let bits = usize::BITS - (count.max(1) - 1).leading_zeros();
    let prefix = net.prefix_len as u32 + bits;
    if count > 1 && prefix > 32 {
        bail!(BadInput,
            "{option} {net} holds {} addresses, too few for {} tunnels of one address each: give a network of /{} or larger",
            thousands(1u64 << (32 - net.prefix_len as u32)),
            thousands(count as u64),
            32 - bits
        );
    }
    Ok(prefix.min(32) as u8)
}

/// The `index`th slice of `net` of prefix length `prefix`.
pub fn slice(net: Net, prefix: u8, index: usize) -> Net {
    let (first, _) = net.range();
    let size = 1u64 << (32 - prefix as u32);
    Net {
        address: Ipv4Addr::from((u64::from(u32::from(first)) + index as u64 * size) as u32),
        prefix_len: prefix,
    }
}

fn selector(net: Net) -> TrafficSelector {
    let (first, last) = net.range();
    TrafficSelector::range(first, last)
}

/// A failure's group in the report: the gateway's notify, or what
/// happened instead of an answer.
pub fn reason(e: &IkeError) -> String {
    match e {
        IkeError::NoAnswer { .. } => "no answer".into(),
        IkeError::NoValidAnswer { .. } => "no IKEv2 answer".into(),
        IkeError::AuthenticationFailed { .. } => "AUTHENTICATION_FAILED".into(),
        IkeError::GatewayAuthentication => "the gateway's AUTH does not verify".into(),
        IkeError::GatewayIdentity { .. } => "another gateway identity".into(),
        IkeError::NoProposalChosen { .. } => "NO_PROPOSAL_CHOSEN".into(),
        IkeError::TsUnacceptable { .. } => "TS_UNACCEPTABLE".into(),
        IkeError::InvalidKe { .. } => "INVALID_KE_PAYLOAD".into(),
        IkeError::Refused { notify, .. } => notify.clone(),
        IkeError::Protocol { .. } => "invalid answer".into(),
        IkeError::Io { .. } => "socket error".into(),
        IkeError::NoUdpEncapsulation { .. } => "no ESP in UDP".into(),
        IkeError::Deleted { .. } => "deleted by the gateway".into(),
        _ => "other".into(),
    }
}

/// Peer addresses put on port B for the run, taken off when dropped.
struct PeerAddresses {
    netns: Option<String>,
    ifname: String,
    /// `ip addr` arguments (`ADDR/PREFIX`) added, in order.
    added: Vec<String>,
}

impl PeerAddresses {
    /// Puts `host` (with its prefix: the route to the gateway) and every
    /// peer (as /32) on the port, except those it has already.
    fn add(netns: Option<&str>, ifname: &str, host: Net, peers: &[Ipv4Addr]) -> Result<Self> {
        let mut me = PeerAddresses {
            netns: netns.map(str::to_string),
            ifname: ifname.to_string(),
            added: Vec::new(),
        };
        let present = ip_out(netns, &["-4", "-o", "addr", "show", "dev", ifname])
            .map_err(|e| err!(Environment, "port B {ifname}: {e}"))?;
        let has = |ip: Ipv4Addr| present.contains(&format!("inet {ip}/"));
        let mut wanted = Vec::new();
        if !has(host.address) {
            wanted.push(format!("{}/{}", host.address, host.prefix_len));
        }
        wanted.extend(
            peers
                .iter()
                .filter(|&&p| p != host.address && !has(p))
                .map(|p| format!("{p}/32")),
        );
        let lines: String = wanted
            .iter()
            .map(|a| format!("addr add {a} dev {ifname}\n"))
            .collect();
        // Whatever is added stays listed, so a failure takes it off again.
        me.added = wanted;
        ip_batch(netns, &lines, false).map_err(|e| {
            err!(
                Environment,
                "cannot put the peers' addresses on port B {ifname}: {e}"
            )
        })?;
        Ok(me)
    }
}

impl Drop for PeerAddresses {
    fn drop(&mut self) {
        let lines: String = self
            .added
            .iter()
            .rev()
            .map(|a| format!("addr del {a} dev {}\n", self.ifname))
            .collect();
        if let Err(e) = ip_batch(self.netns.as_deref(), &lines, true) {
            errln!("linerate: warning: taking the peers' addresses off port B: {e}");
        }
    }
}

/// `ip [-n NS] args`' output, or its error.
fn ip_out(netns: Option<&str>, args: &[&str]) -> std::result::Result<String, String> {
    let mut cmd = Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    let out = cmd.args(args).output().map_err(|e| format!("ip: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `ip -batch -` with `lines`; `force`: go on past errors.
fn ip_batch(netns: Option<&str>, lines: &str, force: bool) -> std::result::Result<(), String> {
    use std::io::Write;
    if lines.is_empty() {
        return Ok(());
    }
    let mut cmd = Command::new("ip");
    if let Some(ns) = netns {
        cmd.args(["-n", ns]);
    }
    if force {
        cmd.arg("-force");
    }
    let mut child = cmd
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("ip: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(lines.as_bytes())
            .map_err(|e| format!("ip -batch: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("ip -batch: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(err.lines().next().unwrap_or("ip -batch failed").to_string());
    }
    Ok(())
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
    _lock: Option<linerate_lab::LabLock>,
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
                _lock: None,
            })
        }
        TunnelsTarget::External {
            port_b,
            host_b,
            gw_b,
        } => {
            let lock = linerate_lab::lock_port(None, port_b)?;
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
                _lock: Some(lock),
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
        port_b_mac: linerate_wire::MacAddr::ZERO,
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
    let begun = Instant::now();
    let mut last_shown = Instant::now();
    let (mut up, mut down) = (0u64, 0u64);
    let mut on_setup = |s: &Setup| {
        match s.outcome {
            Ok(_) => up += 1,
            Err(_) => down += 1,
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
    let setups = fleet.bring_up_until(interrupt, &mut on_setup);
    let wall_s = begun.elapsed().as_secs_f64();
    let cpu_after = (cpu_seconds("self"), gateway_cpu());
    let stopped = interrupt.load(Ordering::Relaxed);
    let outcomes = outcomes(&plan, &slices, &setups, stopped);
    let mut report = TunnelsReport::new(settings, outcomes);
    report.gateway_note = bed.note.clone();
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
    if let (Some(applied), false) = (&bed.applied, stopped) {
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

    // Held up, the gateway's requests answered.
    if !plan.hold.is_zero() && report.established > 0 {
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
    Ok(Outcome::Passed)
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
    fn peer_addresses_come_from_a_start_a_range_or_a_network() {
        let a = peer_addresses("198.19.0.2", 3).unwrap();
        assert_eq!(a.last().unwrap().to_string(), "198.19.0.4");
        let a = peer_addresses("198.19.0.250-198.19.1.5", 10).unwrap();
        assert_eq!(a[6].to_string(), "198.19.1.0");
        let a = peer_addresses("198.19.64.0/30", 2).unwrap();
        assert_eq!(
            a,
            [Ipv4Addr::new(198, 19, 64, 1), Ipv4Addr::new(198, 19, 64, 2)]
        );
        for (text, n, says) in [
            ("198.19.64.0/30", 3, "holds 2 addresses"),
            ("198.19.0.9-198.19.0.2", 1, "below the first"),
            ("198.19.0.2-198.19.0.3", 3, "fewer than the 3"),
            ("peers", 1, "not an address range"),
            ("255.255.255.254", 3, "holds 2 addresses"),
        ] {
            let e = peer_addresses(text, n).unwrap_err();
            assert_eq!(e.kind(), crate::Kind::BadInput);
            assert!(e.to_string().contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn the_remote_network_is_split_in_equal_slices() {
        let n = net("198.19.128.0/17");
        assert_eq!(slice_prefix(n, 1, "--remote-net").unwrap(), 17);
        assert_eq!(slice_prefix(n, 2, "--remote-net").unwrap(), 18);
        assert_eq!(slice_prefix(n, 200, "--remote-net").unwrap(), 25);
        assert_eq!(slice_prefix(n, 10_000, "--remote-net").unwrap(), 31);
        assert_eq!(slice(n, 25, 0).to_string(), "198.19.128.0/25");
        assert_eq!(slice(n, 25, 199).to_string(), "198.19.227.128/25");
        let small = net("198.19.1.0/24");
        assert_eq!(slice_prefix(small, 256, "--remote-net").unwrap(), 32);
        assert_eq!(slice(small, 32, 255).to_string(), "198.19.1.255/32");
        let e = slice_prefix(small, 257, "--remote-net").unwrap_err();
        assert_eq!(e.kind(), crate::Kind::BadInput);
        assert!(
            e.to_string()
                .contains("holds 256 addresses, too few for 257")
                && e.to_string().contains("/23 or larger"),
            "{e}"
        );
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

    #[test]
    fn failures_are_named_by_the_gateways_notify() {
        let e = IkeError::NoProposalChosen {
            offered: "x".into(),
        };
        assert_eq!(reason(&e), "NO_PROPOSAL_CHOSEN");
        let e = IkeError::Refused {
            exchange: "IKE_AUTH".into(),
            notify: "INTERNAL_ADDRESS_FAILURE".into(),
        };
        assert_eq!(reason(&e), "INTERNAL_ADDRESS_FAILURE");
        let e = IkeError::AuthenticationFailed {
            identity: "198.19.0.2".into(),
        };
        assert_eq!(reason(&e), "AUTHENTICATION_FAILED");
    }
}
