//! Scenario presets: configurations of the lab DUT taken from the reference
//! reports, selected with `--scenario` (e.g. `wan-lan+acl:12`).
//!
//! A scenario is parsed ([`Scenario::parse`]), described in one sentence
//! for the report's title ([`Scenario::description`]), applied to a lab
//! that is up ([`Scenario::apply`]) and then *verified*: every part reads
//! its configuration back from the kernel (rule counts with `nft -j`, route
//! counts, the XDP program on the interface, the tunnel device) and fails
//! when it is not in effect. After traffic, [`Applied::verify_traffic`]
//! checks that the traffic really went through it (NAT translation in the
//! conntrack table, the last rule's counter, the XDP program's counter, the
//! WAN link's counters growing with the encapsulated size).
//!
//! Parts, and what they configure in the DUT namespace:
//! - `lan-lan`: plain routing (the lab as built; the default).
//! - `wan-lan`: masquerade (source NAT) on the DUT's B side, the WAN.
//! - `acl:N`: N non-matching ACL lines (nftables rules on other source
//!   hosts) in the forward chain before the permit line: every forwarded
//!   packet is tested against all N (rules, not a set lookup).
//! - `firewall:N`: a stateful firewall: conntrack on, N non-matching
//!   5-tuple policies evaluated for every packet, then the permit.
//! - `routes:N`: N host routes (`ip -batch`), for 198.19.0.2 upwards.
//! - `tunnel:vxlan|wireguard|ipsec[:suite]|gre`: a second DUT and a WAN
//!   link, the tunnel across it (see `scenario/tunnel.rs`).
//! - `vpn-gateway[:suite]`: the DUT as an IPsec VPN gateway (strongSwan's
//!   charon, IKEv2 responder, ESP in user space) whose peer is the tester's
//!   port B (see `scenario/vpn.rs`); [`Applied::vpn_peer`] tells the tester
//!   how to be that peer.
//! - `xdp-router`: the DUT forwards with an XDP program.
//! - `drop-test`: a counted nftables rule that drops everything from
//!   [`DROP_SOURCE`]; the tester sends every other frame from there (the
//!   100GE report's "DDoS drop test": half the traffic dropped by policy)
//!   and reports those frames as intended drops, apart from the loss of
//!   the legitimate half.

mod ipsec;
mod nft;
mod routes;
mod tools;
mod tunnel;
mod vici;
mod vpn;
mod wireguard;
mod xdp;

use crate::stop::StopCheck;
use crate::text::thousands;
use crate::{Lab, LabError};
use linerate_esp::EspSuite;
use std::fmt;

pub use crate::link::LinkCounters;
pub use ipsec::IpsecSuite;
pub use tunnel::TunnelKind;
pub use vpn::{
    SaCounters, VpnPeer, VPN_FIRST_PEER, VPN_IKE_PROPOSALS, VPN_INNER_ADDRESS, VPN_LAN, VPN_PEERS,
    VPN_REMOTE_NET, VPN_TUNNEL_NETS,
};

/// Most rules an ACL or firewall scenario may load.
pub const MAX_RULES: u32 = 100_000;
/// Most routes `routes:N` may load.
pub const MAX_ROUTES: u32 = 2_000_000;

/// One part of a scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    LanLan,
    WanLan,
    Acl(u32),
    Firewall(u32),
    Routes(u32),
    Tunnel(TunnelKind),
    /// The DUT as an IPsec gateway with this ESP suite, the tester its peer.
    VpnGateway(EspSuite),
    XdpRouter,
    DropTest,
}

/// The source address of a drop test's dropped half: on tester A's subnet
/// (198.18.0.0/24), so the DUT's reverse-path filter accepts it and only
/// the policy drops it, and outside every other rule's match.
pub const DROP_SOURCE: std::net::Ipv4Addr = std::net::Ipv4Addr::new(198, 18, 0, 200);

/// A scenario: parts joined with `+`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    /// As the user wrote it (normalised: lower case, no spaces).
    pub spec: String,
    pub parts: Vec<Part>,
}

/// Bad `--scenario` text. One line naming the problem and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScenarioError {
    #[error("--scenario is empty: name one, e.g. lan-lan, wan-lan, acl:12, firewall:50, routes:900000, tunnel:vxlan, xdp-router")]
    Empty,
    #[error("--scenario '{0}' is unknown: use lan-lan, wan-lan, acl:N, firewall:N, routes:N, tunnel:vxlan|wireguard|gre|ipsec[:aes-cbc-sha256|aes-gcm|null], vpn-gateway[:SUITE] or xdp-router, joined with '+', several separated by ','")]
    Unknown(String),
    #[error("--scenario '{0}': unknown ESP suite: use vpn-gateway or vpn-gateway:SUITE with SUITE one of {suites}, aes-gcm (= aes128gcm16) or aes-cbc-sha256 (= aes128-sha256)", suites = EspSuite::names().collect::<Vec<_>>().join(", "))]
    UnknownSuite(String),
    #[error(
        "--scenario '{part}': {what} must be a whole number from {min} to {max}, e.g. {example}"
    )]
    BadCount {
        part: String,
        what: &'static str,
        min: u32,
        max: u32,
        example: &'static str,
    },
    #[error("--scenario '{spec}': {reason}")]
    Conflict { spec: String, reason: String },
}

/// The canonical text of the scenario (lower case, no spaces), as
/// `--scenario` takes it back.
impl std::fmt::Display for Scenario {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.spec)
    }
}

impl Scenario {
    /// Parses `--scenario`: a comma-separated list of scenarios, each
    /// parts joined with `+`. Several scenarios make a comparison.
    pub fn parse_list(text: &str) -> Result<Vec<Scenario>, ScenarioError> {
        let list: Vec<&str> = text.split(',').map(str::trim).collect();
        if list.iter().all(|s| s.is_empty()) {
            return Err(ScenarioError::Empty);
        }
        list.into_iter().map(Scenario::parse).collect()
    }

    /// Parses one scenario, e.g. `wan-lan+acl:12`.
    pub fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        let spec: String = text
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect::<String>()
            .to_ascii_lowercase();
        if spec.is_empty() {
            return Err(ScenarioError::Empty);
        }
        let mut parts = Vec::new();
        for piece in spec.split('+') {
            parts.push(parse_part(piece)?);
        }
        let scenario = Scenario { spec, parts };
        scenario.check_combination()?;
        Ok(scenario)
    }

    /// Refuses combinations that make no sense or that the lab cannot build.
    fn check_combination(&self) -> Result<(), ScenarioError> {
        let conflict = |reason: &str| ScenarioError::Conflict {
            spec: self.spec.clone(),
            reason: reason.to_string(),
        };
        let count = |f: fn(&Part) -> bool| self.parts.iter().filter(|p| f(p)).count();
        if count(|p| matches!(p, Part::LanLan | Part::WanLan)) > 1 {
            return Err(conflict("choose one of lan-lan and wan-lan"));
        }
        for (name, n) in [
            ("acl", count(|p| matches!(p, Part::Acl(_)))),
            ("firewall", count(|p| matches!(p, Part::Firewall(_)))),
            ("routes", count(|p| matches!(p, Part::Routes(_)))),
            ("tunnel", count(|p| matches!(p, Part::Tunnel(_)))),
            ("vpn-gateway", count(|p| matches!(p, Part::VpnGateway(_)))),
            ("xdp-router", count(|p| matches!(p, Part::XdpRouter))),
            ("drop-test", count(|p| matches!(p, Part::DropTest))),
        ] {
            if n > 1 {
                return Err(conflict(&format!("{name} appears more than once")));
            }
        }
        let has = |f: fn(&Part) -> bool| count(f) > 0;
        if has(|p| matches!(p, Part::VpnGateway(_))) {
            for part in &self.parts {
                let reason = match part {
                    Part::Tunnel(_) => "vpn-gateway makes the lab's one DUT the IPsec gateway and the tester its peer, a tunnel scenario puts a second DUT between them: choose one",
                    Part::XdpRouter => "xdp-router forwards before the kernel routes into the gateway's TUN device, so test frames would bypass the gateway's ESP: choose one",
                    Part::WanLan => "the gateway's traffic leaves its WAN side inside ESP from its own address, so wan-lan's masquerade has nothing to translate: choose one",
                    Part::Routes(_) => "routes:N's host routes (198.19.0.2 upwards) reach into 198.19.1.0/24, the network the gateway must reach through the tunnel only: choose one",
                    _ => continue,
                };
                return Err(conflict(reason));
            }
        }
        if has(|p| matches!(p, Part::XdpRouter))
            && has(|p| {
                matches!(
                    p,
                    Part::Acl(_) | Part::Firewall(_) | Part::WanLan | Part::DropTest
                )
            })
        {
            return Err(conflict(
                "xdp-router forwards before nftables sees a packet, so acl, firewall, wan-lan and drop-test (nftables) would not apply: combine xdp-router only with routes:N",
            ));
        }
        if has(|p| matches!(p, Part::Tunnel(_)))
            && has(|p| matches!(p, Part::WanLan | Part::Routes(_) | Part::XdpRouter))
        {
            return Err(conflict(
                "a tunnel scenario combines only with acl:N and firewall:N (applied on the first DUT)",
            ));
        }
        Ok(())
    }

    /// The VPN gateway's ESP suite, when this is a `vpn-gateway` scenario.
    pub fn vpn_gateway(&self) -> Option<EspSuite> {
        self.parts.iter().find_map(|p| match p {
            Part::VpnGateway(s) => Some(*s),
            _ => None,
        })
    }

    /// The source address whose frames a `drop-test` scenario's DUT drops
    /// by policy ([`DROP_SOURCE`]); `None` for other scenarios.
    pub fn drop_from(&self) -> Option<std::net::Ipv4Addr> {
        self.parts.contains(&Part::DropTest).then_some(DROP_SOURCE)
    }

    /// The tunnel of this scenario, if any.
    pub fn tunnel(&self) -> Option<TunnelKind> {
        self.parts.iter().find_map(|p| match p {
            Part::Tunnel(t) => Some(*t),
            _ => None,
        })
    }

    /// One sentence for the report's title, e.g. "WAN-LAN routing with NAT
    /// (masquerade on the WAN side) and a 12-line ACL, lab Linux router".
    /// The ring depth the scenario's lab gets: `ring`, or veth's own rings
    /// for the DUTs whose forwarding is in NAPI itself (the XDP router) or
    /// whose interfaces move into a second DUT (tunnels), which the deep
    /// lab's NIC queue (an XDP program on the DUT's input) would stand in
    /// the way of.
    pub fn ring(&self, ring: u32) -> u32 {
        let napi_bound = self
            .parts
            .iter()
            .any(|p| matches!(p, Part::XdpRouter | Part::Tunnel(_)));
        if napi_bound {
            crate::VETH_RING
        } else {
            ring
        }
    }

    pub fn description(&self) -> String {
        let base = if let Some(t) = self.tunnel() {
            let label = t.label();
            let article = if label.starts_with('I') { "an" } else { "a" };
            format!(
                "DUT-to-DUT over {article} {label} tunnel across a WAN link, two lab Linux routers"
            )
        } else if let Some(suite) = self.vpn_gateway() {
            format!(
                "VPN gateway: IKEv2 responder (strongSwan charon, kernel-libipsec: ESP in UDP 4500 in user space), PSK, ESP {}, LAN {}, protected remote network {} behind the tester's port B",
                suite.name(),
                vpn::net_text(VPN_LAN),
                vpn::net_text(VPN_REMOTE_NET)
            )
        } else if self.parts.contains(&Part::XdpRouter) {
            "LAN-LAN routing, lab Linux router forwarding with XDP (bpf_fib_lookup + bpf_redirect)"
                .to_string()
        } else if self.parts.contains(&Part::WanLan) {
            "WAN-LAN routing with NAT (masquerade on the WAN side), lab Linux router".to_string()
        } else {
            "LAN-LAN routing, lab Linux router".to_string()
        };
        let extras: Vec<String> = self
            .parts
            .iter()
            .filter_map(|p| match p {
                Part::Acl(n) => Some(format!(
                    "an ACL of {n} non-matching {} before the permit (nftables rules)",
                    plural(*n, "line", "lines")
                )),
                Part::Firewall(n) => Some(format!(
                    "{n} stateful firewall {} (nftables with conntrack)",
                    plural(*n, "policy", "policies")
                )),
                Part::Routes(n) => Some(format!(
                    "{} {} in the routing table",
                    thousands(*n),
                    plural(*n, "route", "routes")
                )),
                Part::DropTest => Some(format!(
                    "a policy dropping half the test traffic (everything from {DROP_SOURCE})"
                )),
                _ => None,
            })
            .collect();
        if extras.is_empty() {
            base
        } else {
            format!("{base}, with {}", extras.join(" and "))
        }
    }

    /// Configures the scenario on `lab` (built by `Lab::up` for this run)
    /// and verifies it is in effect. Returns what was applied, which must
    /// live as long as the test runs (it holds the XDP program and any
    /// user-space tunnel daemon) and be dropped before the lab.
    pub fn apply(&self, lab: &Lab) -> Result<Applied, LabError> {
        self.apply_until(lab, &|| false)
    }

    /// [`Scenario::apply`] that stops once `stop` returns true (it is asked
    /// before each part, and while `acl:N`, `firewall:N` and `routes:N`
    /// load and read back, whose commands it ends; the other parts run to
    /// their end): what was applied goes (the tunnel daemons, the XDP
    /// program) and it returns [`LabError::Interrupted`]; the lab's
    /// removal takes the rest (nftables, routes, the second DUT).
    pub fn apply_until(&self, lab: &Lab, stop: &dyn Fn() -> bool) -> Result<Applied, LabError> {
        let stop = StopCheck {
            lab: lab.name(),
            requested: stop,
        };
        stop.go_on()?;
        self.apply_parts(lab, &stop)
            .map_err(|e| stop.or_interrupted(e))
    }

    /// The topology first, then each part, asking `stop` before each.
    fn apply_parts(&self, lab: &Lab, stop: &StopCheck) -> Result<Applied, LabError> {
        let mut applied = Applied {
            scenario: self.clone(),
            checks: Vec::new(),
            data_path: None,
            tunnel: None,
            nat: false,
            rule_counter: None,
            xdp: None,
            drop_rule: false,
            vpn: None,
        };
        let dut = lab.dut_netns().to_string();
        let not_in_effect = |detail: String| LabError::NotInEffect {
            scenario: self.spec.clone(),
            detail,
        };
        // The topology first: later parts configure the first DUT of it.
        if let Some(kind) = self.tunnel() {
            let t = tunnel::build(lab, kind).map_err(|e| match e {
                LabError::NotInEffect { detail, .. } => not_in_effect(detail),
                LabError::Unavailable { reason, .. } => LabError::Unavailable {
                    scenario: self.spec.clone(),
                    reason,
                },
                other => other,
            })?;
            applied.checks.push(t.check.clone());
            applied.data_path = Some(t.data_path.clone());
            applied.tunnel = Some(t);
        }
        for part in &self.parts {
            stop.go_on()?;
            match *part {
                Part::LanLan | Part::Tunnel(_) => {}
                Part::VpnGateway(suite) => {
                    let gateway = vpn::build(lab, suite).map_err(|e| match e {
                        LabError::Unavailable { reason, .. } => LabError::Unavailable {
                            scenario: self.spec.clone(),
                            reason,
                        },
                        other => not_in_effect_or(self)(other),
                    })?;
                    applied.checks.push(gateway.check.clone());
                    applied.data_path = Some(gateway.data_path.clone());
                    applied.vpn = Some(gateway);
                }
                Part::WanLan => {
                    let check = nft::masquerade(&dut).map_err(not_in_effect_or(self))?;
                    applied.checks.push(check);
                    applied.nat = true;
                }
                Part::Acl(n) | Part::Firewall(n) => {
                    let stateful = matches!(part, Part::Firewall(_));
                    let check =
                        nft::rules(&dut, n, stateful, stop).map_err(not_in_effect_or(self))?;
                    applied.checks.push(check);
                    applied.rule_counter = Some(n);
                }
                Part::Routes(n) => {
                    let check = routes::load(&dut, n, stop).map_err(not_in_effect_or(self))?;
                    applied.checks.push(check);
                }
                Part::DropTest => {
                    let check =
                        nft::drop_from(&dut, DROP_SOURCE).map_err(not_in_effect_or(self))?;
                    applied.checks.push(check);
                    applied.drop_rule = true;
                }
                Part::XdpRouter => {
                    let (router, check) = xdp::attach(lab).map_err(not_in_effect_or(self))?;
                    applied.checks.push(check);
                    applied.data_path =
                        Some("XDP (bpf_fib_lookup + bpf_redirect) on the DUT's interfaces".into());
                    applied.xdp = Some(router);
                }
            }
        }
        if applied.data_path.is_none() {
            applied.data_path = Some("Linux kernel IPv4 forwarding".to_string());
        }
        Ok(applied)
    }
}

/// Maps a verification failure to the scenario's name.
fn not_in_effect_or(s: &Scenario) -> impl Fn(LabError) -> LabError + '_ {
    move |e| match e {
        LabError::NotInEffect { detail, .. } => LabError::NotInEffect {
            scenario: s.spec.clone(),
            detail,
        },
        other => other,
    }
}

fn parse_part(piece: &str) -> Result<Part, ScenarioError> {
    let count = |value: &str, what: &'static str, min: u32, max: u32, example: &'static str| {
        value
            .parse::<u32>()
            .ok()
            .filter(|n| (min..=max).contains(n))
            .ok_or_else(|| ScenarioError::BadCount {
                part: piece.to_string(),
                what,
                min,
                max,
                example,
            })
    };
    let (name, value) = match piece.split_once(':') {
        Some((n, v)) => (n, Some(v)),
        None => (piece, None),
    };
    match (name, value) {
        ("lan-lan", None) => Ok(Part::LanLan),
        ("wan-lan", None) => Ok(Part::WanLan),
        ("xdp-router", None) => Ok(Part::XdpRouter),
        ("drop-test", None) => Ok(Part::DropTest),
        // 0 is the permit line alone: the filter's fixed cost.
        ("acl", Some(v)) => {
            count(v, "the count of non-matching lines", 0, MAX_RULES, "acl:12").map(Part::Acl)
        }
        ("firewall", Some(v)) => {
            count(v, "the policy count", 0, MAX_RULES, "firewall:50").map(Part::Firewall)
        }
        ("routes", Some(v)) => {
            count(v, "the route count", 1, MAX_ROUTES, "routes:900000").map(Part::Routes)
        }
        ("tunnel", Some(v)) => TunnelKind::parse(v)
            .map(Part::Tunnel)
            .ok_or_else(|| ScenarioError::Unknown(piece.to_string())),
        ("vpn-gateway", None) => Ok(Part::VpnGateway(EspSuite::Aes128Gcm16)),
        ("vpn-gateway", Some(v)) => vpn::parse_suite(v)
            .map(Part::VpnGateway)
            .ok_or_else(|| ScenarioError::UnknownSuite(piece.to_string())),
        _ => Err(ScenarioError::Unknown(piece.to_string())),
    }
}

/// What [`Scenario::apply`] configured, and the checks it passed.
pub struct Applied {
    pub scenario: Scenario,
    /// One sentence per part: what was read back from the kernel.
    pub checks: Vec<String>,
    /// Which data path forwards the traffic (kernel, XDP, a tunnel's
    /// kernel or user-space implementation).
    pub data_path: Option<String>,
    pub tunnel: Option<tunnel::Tunnel>,
    nat: bool,
    /// Rules before the permit line (acl/firewall), whose counter proves
    /// every forwarded packet went past them.
    rule_counter: Option<u32>,
    xdp: Option<xdp::Router>,
    /// A drop test's drop rule is loaded (its counter is read after traffic).
    drop_rule: bool,
    /// The VPN gateway: charon and its private directory, stopped and
    /// removed on drop.
    vpn: Option<vpn::Gateway>,
}

impl Applied {
    /// Checks, after traffic ran, that it went through the scenario:
    /// NAT translation in the conntrack table, the permit rule's counter
    /// behind the N rules, the XDP program's redirect counter, the WAN
    /// link's packets. Returns one sentence per check passed.
    pub fn verify_traffic(&self, lab: &Lab) -> Result<Vec<String>, LabError> {
        let dut = lab.dut_netns();
        let fail = |detail: String| LabError::NotInEffect {
            scenario: self.scenario.spec.clone(),
            detail,
        };
        let mut seen = Vec::new();
        if self.nat {
            seen.push(nft::translation_seen(dut).map_err(|e| fail(e.to_string()))?);
        }
        if let Some(n) = self.rule_counter {
            let packets = nft::permit_count(dut).map_err(|e| fail(e.to_string()))?;
            if packets == 0 {
                return Err(fail(format!(
                    "the permit rule after the {n} rules counted no packet: the traffic did not pass the rule chain"
                )));
            }
            seen.push(format!(
                "{packets} packets were tested against all {n} rules before the permit rule"
            ));
        }
        if self.drop_rule {
            let packets = self.dropped_by_policy(lab)?;
            if packets == 0 {
                return Err(fail(format!(
                    "the drop rule for {DROP_SOURCE} counted no packet: the drop class did not reach the policy"
                )));
            }
            seen.push(format!(
                "{packets} packets from {DROP_SOURCE} dropped by the drop-test rule"
            ));
        }
        if let Some(router) = &self.xdp {
            seen.push(router.traffic_seen().map_err(fail)?);
        }
        if let Some(t) = &self.tunnel {
            seen.push(t.traffic_seen().map_err(fail)?);
        }
        if let Some(gateway) = &self.vpn {
            seen.extend(gateway.traffic_seen().map_err(fail)?);
        }
        Ok(seen)
    }

    /// The source address whose frames the DUT drops by policy, when this
    /// is a drop test: the tester sends every other frame from it.
    pub fn drop_from(&self) -> Option<std::net::Ipv4Addr> {
        self.drop_rule.then_some(DROP_SOURCE)
    }

    /// Packets the drop test's rule has dropped so far (its nft counter).
    pub fn dropped_by_policy(&self, lab: &Lab) -> Result<u64, LabError> {
        nft::drop_count(lab.dut_netns()).map_err(|e| LabError::NotInEffect {
            scenario: self.scenario.spec.clone(),
            detail: e.to_string(),
        })
    }

    /// Whether the data path runs in user space (so the DUT's CPU load must
    /// count its processes' user time too).
    pub fn user_space(&self) -> bool {
        self.tunnel.as_ref().is_some_and(|t| t.user_space) || self.vpn.is_some()
    }

    /// The processes of a user-space data path (boringtun, charon), whose
    /// user time is DUT work.
    pub fn data_path_pids(&self) -> Vec<u32> {
        let mut pids = self
            .tunnel
            .as_ref()
            .filter(|t| t.user_space)
            .map(|t| t.daemon_pids())
            .unwrap_or_default();
        if let Some(gateway) = &self.vpn {
            pids.extend(gateway.pids());
        }
        pids
    }

    /// The WAN link's counters: for tunnels as the first DUT sends on it
    /// (wan1), for the VPN gateway its interface towards the peer (dut-b).
    pub fn wan_counters(&self) -> Option<Result<LinkCounters, LabError>> {
        if let Some(gateway) = &self.vpn {
            return Some(gateway.wan_counters());
        }
        self.tunnel.as_ref().map(|t| t.wan_counters())
    }

    /// What the tester needs to be the VPN gateway's IPsec peer
    /// (`vpn-gateway` scenarios).
    pub fn vpn_peer(&self) -> Option<&VpnPeer> {
        self.vpn.as_ref().map(|g| &g.peer)
    }

    /// The VPN gateway's CHILD_SAs with their counters (packets and bytes
    /// in and out, SPIs), read from charon over vici, for the tester to
    /// compare with its own. Fails for a scenario without the gateway.
    pub fn ipsec_sa_counters(&self) -> Result<Vec<SaCounters>, LabError> {
        match &self.vpn {
            Some(gateway) => gateway.counters(),
            None => Err(LabError::Unavailable {
                scenario: self.scenario.spec.clone(),
                reason: "it has no IPsec gateway: only vpn-gateway has CHILD_SA counters to read"
                    .into(),
            }),
        }
    }
}

impl fmt::Debug for Applied {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Applied")
            .field("scenario", &self.scenario.spec)
            .field("checks", &self.checks)
            .field("data_path", &self.data_path)
            .finish()
    }
}

fn plural<'a>(n: u32, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_single_and_combined_scenarios() {
        assert_eq!(Scenario::parse("lan-lan").unwrap().parts, [Part::LanLan]);
        assert_eq!(
            Scenario::parse("WAN-LAN + acl:12").unwrap().parts,
            [Part::WanLan, Part::Acl(12)]
        );
        assert_eq!(
            Scenario::parse("routes:900000+xdp-router").unwrap().parts,
            [Part::Routes(900_000), Part::XdpRouter]
        );
        assert_eq!(
            Scenario::parse("tunnel:vxlan").unwrap().tunnel(),
            Some(TunnelKind::Vxlan)
        );
        assert_eq!(
            Scenario::parse("tunnel:ipsec:aes-gcm").unwrap().tunnel(),
            Some(TunnelKind::Ipsec(IpsecSuite::AesGcm))
        );
        assert_eq!(
            Scenario::parse("vpn-gateway").unwrap().parts,
            [Part::VpnGateway(EspSuite::Aes128Gcm16)]
        );
        for (text, suite) in [
            ("vpn-gateway:aes256gcm16", EspSuite::Aes256Gcm16),
            ("VPN-Gateway:AES128-SHA1", EspSuite::Aes128Sha1),
            ("vpn-gateway:aes256-sha512", EspSuite::Aes256Sha512),
            ("vpn-gateway:aes-gcm", EspSuite::Aes128Gcm16),
            ("vpn-gateway:aes-cbc-sha256", EspSuite::Aes128Sha256),
            ("vpn-gateway:aes-sha256", EspSuite::Aes128Sha256),
            ("vpn-gateway:aes256-sha256+acl:3", EspSuite::Aes256Sha256),
        ] {
            let s = Scenario::parse(text).unwrap();
            assert_eq!(s.vpn_gateway(), Some(suite), "{text}");
            assert_eq!(s.tunnel(), None, "{text}");
        }
        let list = Scenario::parse_list("acl:1,acl:2,acl:12").unwrap();
        assert_eq!(
            list.iter().map(|s| s.spec.as_str()).collect::<Vec<_>>(),
            ["acl:1", "acl:2", "acl:12"]
        );
    }

    #[test]
    fn refuses_bad_input_with_the_fix() {
        for (text, needle) in [
            ("", "is empty"),
            ("acl", "unknown"),
            ("acl:100001", "0 to 100000"),
            ("routes:0", "1 to"),
            ("acl:x", "whole number"),
            ("routes:99999999", "routes:900000"),
            ("tunnel:pptp", "unknown"),
            ("tunnel:ipsec:ah", "unknown"),
            ("bogus", "unknown"),
            ("lan-lan+wan-lan", "choose one"),
            ("acl:1+acl:2", "more than once"),
            ("xdp-router+acl:3", "nftables"),
            ("tunnel:vxlan+wan-lan", "tunnel scenario"),
            ("drop-test+drop-test", "more than once"),
            ("xdp-router+drop-test", "nftables"),
            ("vpn-gateway:null", "unknown ESP suite"),
            ("vpn-gateway:", "aes128gcm16, aes256gcm16"),
            ("vpn-gateway+vpn-gateway:aes-gcm", "more than once"),
            ("vpn-gateway+tunnel:ipsec", "second DUT"),
            ("tunnel:vxlan+vpn-gateway", "second DUT"),
            ("vpn-gateway+xdp-router", "bypass"),
            ("vpn-gateway+wan-lan", "masquerade"),
            ("routes:10+vpn-gateway", "198.19.1.0/24"),
        ] {
            let err = Scenario::parse_list(text).unwrap_err().to_string();
            assert!(err.contains(needle), "{text}: {err}");
            assert!(!err.contains('\n'), "{text}: {err}");
        }
    }

    #[test]
    fn descriptions_are_one_sentence_naming_every_part() {
        let d = Scenario::parse("wan-lan+acl:10+routes:900000")
            .unwrap()
            .description();
        assert!(d.starts_with("WAN-LAN routing with NAT"), "{d}");
        assert!(d.contains("ACL of 10 non-matching lines"), "{d}");
        assert!(d.contains("900,000 routes"), "{d}");
        assert_eq!(
            Scenario::parse("lan-lan").unwrap().description(),
            "LAN-LAN routing, lab Linux router"
        );
        assert!(Scenario::parse("tunnel:vxlan")
            .unwrap()
            .description()
            .contains("VXLAN tunnel"));
        assert_eq!(Scenario::parse("acl:0").unwrap().parts, [Part::Acl(0)]);
        let d = Scenario::parse("vpn-gateway:aes256-sha512+acl:2")
            .unwrap()
            .description();
        assert!(
            d.starts_with("VPN gateway: IKEv2 responder (strongSwan charon, kernel-libipsec: ESP in UDP 4500 in user space), PSK, ESP aes256-sha512, LAN 198.18.0.0/24, protected remote network 198.19.1.0/24 behind the tester's port B"),
            "{d}"
        );
        assert!(d.contains("ACL of 2"), "{d}");
        assert!(Scenario::parse("firewall:1")
            .unwrap()
            .description()
            .contains("1 stateful firewall policy"));
    }
}
