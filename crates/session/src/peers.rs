//! The IPsec peers linerate emulates on port B, shared by `linerate
//! tunnels` and `--tunnels` on the packet commands: their outer addresses
//! (`--peer-addrs`, put on port B while IKE runs), each peer's own slice
//! of the network behind linerate, each peer's own identity (an
//! `--ipsec-id` template), and a failed setup's reason as the gateway
//! named it.

use crate::error::{bail, err, Result};
use crate::ipsec::plan::{IpsecPlan, Net, PeerAddrs};
use linerate_esp::EspSuite;
use linerate_helper::RunError;
use linerate_ike::{Fleet, FleetConfig, Identity, IkeError, IkeProposals, Peer, Ports, Psk};
use linerate_results::report::thousands;
use std::net::Ipv4Addr;

/// The most tunnels one run brings up.
pub const MAX_TUNNELS: usize = 10_000;

/// `--peer-addrs`: `FIRST`, `FIRST-LAST` or `CIDR`, the first `count`
/// addresses of it (a network's own address and its broadcast address are
/// skipped below /31).
pub fn peer_addresses(text: &str, count: usize) -> Result<Vec<Ipv4Addr>> {
    PeerAddrs::parse(text)?.take(count, "--count")
}

/// [`peer_addresses`] for `count` tunnels, which `count_option` asked for.
pub fn peer_range(text: &str, count: usize, count_option: &str) -> Result<Vec<Ipv4Addr>> {
    PeerAddrs::parse(text)?.take(count, count_option)
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

/// A fleet of emulated peers to bind: one per address of `peers`, each
/// for its own slice of `slices`, all to `gateway` and its `local_net`.
pub struct FleetSpec<'a> {
    pub plan: &'a IpsecPlan,
    /// Port B's namespace, where the peers' sockets are bound.
    pub netns: Option<&'a str>,
    pub gateway: Ipv4Addr,
    pub ike: IkeProposals,
    pub esp: EspSuite,
    /// The gateway's protected network: each CHILD_SA's remote selector.
    pub local_net: Net,
    pub peers: &'a [Ipv4Addr],
    pub slices: &'a [Net],
    /// ESP in UDP whatever NAT detection finds.
    pub force_encap: bool,
    /// Setups begun per second (None: as fast as the gateway answers),
    /// and how many may be under way at once.
    pub attempt_rate: Option<f64>,
    pub window: usize,
}

/// Binds the fleet in port B's namespace (the sockets keep it): the one
/// place both `linerate tunnels` and `--tunnels` build it.
pub fn bind_fleet(spec: FleetSpec, psk: Psk) -> Result<Fleet> {
    let plan = spec.plan;
    let config = FleetConfig {
        gateway: spec.gateway,
        gateway_ports: Ports::default(),
        local_ports: Ports::default(),
        remote_id: plan.remote_id.clone(),
        psk,
        ike: spec.ike,
        esp: spec.esp,
        remote_ts: spec.local_net.selector(),
        retransmit: plan.retransmit(),
        force_encap: spec.force_encap,
        peers: spec
            .peers
            .iter()
            .zip(spec.slices)
            .enumerate()
            .map(|(i, (&local, &net))| Peer {
                local,
                local_id: peer_identity(plan.local_id.as_ref(), i, local),
                local_ts: net.selector(),
            })
            .collect(),
        attempt_rate: spec.attempt_rate,
        window: spec.window,
    };
    linerate_port::netns::maybe_in_netns(spec.netns, || Ok(Fleet::bind(config)))
        .map_err(|e| err!(Environment, "{e}"))?
        .map_err(|e| err!(Environment, "IPsec: {e}"))
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

/// The placeholders an `--ipsec-id` template may hold: the tunnel's
/// number (1-based) and its peer's outer address.
const ID_PLACEHOLDERS: [&str; 2] = ["{n}", "{addr}"];

/// The text of a name identity (`@fqdn`, `user@domain`), where a template
/// keeps its braces (`IpsecPlan::identity` reads `@peer{n}.vpn.example`
/// as the FQDN `peer{n}.vpn.example`); None for an address or key id.
fn template_text(id: &Identity) -> Option<&str> {
    match id {
        Identity::Fqdn(text) | Identity::Rfc822(text) => Some(text),
        _ => None,
    }
}

/// Refuses an `--ipsec-id` template with a placeholder linerate does not
/// know (or a brace left open), in one line, before anything is touched.
pub fn check_id_template(id: Option<&Identity>) -> Result<()> {
    let Some(text) = id.and_then(template_text) else {
        return Ok(());
    };
    let stray = || {
        err!(BadInput, "--ipsec-id {text}: a '}}' without its '{{': write {{n}} or {{addr}}, e.g. @peer{{n}}.vpn.example")
    };
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        if rest[..open].contains('}') {
            return Err(stray());
        }
        let after = &rest[open..];
        let Some(close) = after.find('}') else {
            bail!(BadInput, "--ipsec-id {text}: a '{{' without its '}}': write {{n}} (the tunnel's number) or {{addr}} (its outer address), e.g. @peer{{n}}.vpn.example");
        };
        let placeholder = &after[..=close];
        if !ID_PLACEHOLDERS.contains(&placeholder) {
            bail!(BadInput, "--ipsec-id {text}: {placeholder} is no placeholder linerate knows: write {{n}} (the tunnel's number, from 1) or {{addr}} (its outer address), e.g. @peer{{n}}.vpn.example");
        }
        rest = &after[close + 1..];
    }
    if rest.contains('}') {
        return Err(stray());
    }
    Ok(())
}

/// Tunnel `index`'s (0-based) own IDi from the `--ipsec-id` template:
/// `{n}` becomes `index + 1`, `{addr}` the peer's outer address; an
/// identity without placeholders is every peer's. A template that is only
/// an address (`{addr}`) becomes an IPv4 identity, as strongSwan reads
/// an address.
pub fn peer_identity(id: Option<&Identity>, index: usize, addr: Ipv4Addr) -> Option<Identity> {
    let id = id?;
    let Some(text) = template_text(id).filter(|t| t.contains('{')) else {
        return Some(id.clone());
    };
    let expanded = text
        .replace("{n}", &(index + 1).to_string())
        .replace("{addr}", &addr.to_string());
    Some(match id {
        Identity::Fqdn(_) => match expanded.parse::<Ipv4Addr>() {
            Ok(ip) => Identity::Ipv4(ip),
            Err(_) => Identity::Fqdn(expanded),
        },
        _ => Identity::Rfc822(expanded),
    })
}

/// Peer addresses put on port B for the run, taken off when dropped.
pub struct PeerAddresses {
    netns: Option<String>,
    ifname: String,
    /// `ip addr` arguments (`ADDR/PREFIX`) added, in order.
    added: Vec<String>,
}

impl PeerAddresses {
    /// Puts `host` (with its prefix: the route to the gateway) and every
    /// peer (as /32) on the port, except those it has already.
    pub fn add(netns: Option<&str>, ifname: &str, host: Net, peers: &[Ipv4Addr]) -> Result<Self> {
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

/// `ip [-n NS] args`' output, or its error (its stderr).
pub fn ip_out(netns: Option<&str>, args: &[&str]) -> std::result::Result<String, String> {
    linerate_helper::ip(netns, args).map_err(|e| match e {
        RunError::Failed { stderr, .. } => stderr.trim().to_string(),
        RunError::Spawn { error, .. } => format!("ip: {error}"),
        other => other.to_string(),
    })
}

/// `ip -batch -` with `lines`; `force`: go on past errors.
pub fn ip_batch(netns: Option<&str>, lines: &str, force: bool) -> std::result::Result<(), String> {
    if lines.is_empty() {
        return Ok(());
    }
    let args: &[&str] = if force {
        &["-force", "-batch", "-"]
    } else {
        &["-batch", "-"]
    };
    linerate_helper::ip_with_input(netns, args, Some(lines.as_bytes()))
        .map(|_| ())
        .map_err(|e| match e {
            RunError::Failed { stderr, .. } => stderr
                .lines()
                .next()
                .unwrap_or("ip -batch failed")
                .to_string(),
            RunError::Spawn { error, .. } => format!("ip: {error}"),
            other => other.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(text: &str) -> Net {
        Net::parse(text, "--remote-net").unwrap()
    }

    #[test]
    fn a_range_is_parsed_once_and_taken_for_any_count() {
        let range = PeerAddrs::parse("198.19.0.10-198.19.0.13").unwrap();
        assert_eq!(range.to_string(), "198.19.0.10-198.19.0.13");
        assert_eq!(
            range.take(4, "--tunnels").unwrap()[3].to_string(),
            "198.19.0.13"
        );
        let e = range.take(5, "--tunnels").unwrap_err();
        assert_eq!(e.to_string(), "--peer-addrs 198.19.0.10-198.19.0.13 holds 4 addresses, fewer than the 5 tunnels of --tunnels: give a larger range or a smaller --tunnels");
        assert!(PeerAddrs::parse("198.19.0.x").is_err());
        let up = PeerAddrs::from_first(Ipv4Addr::new(198, 19, 64, 1));
        assert_eq!(
            up.take(2, "--count").unwrap()[1],
            Ipv4Addr::new(198, 19, 64, 2)
        );
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

    #[test]
    fn an_identity_template_gives_each_peer_its_own() {
        let fqdn = Identity::Fqdn("peer{n}.vpn.example".into());
        let addr = Ipv4Addr::new(198, 19, 64, 7);
        assert_eq!(
            peer_identity(Some(&fqdn), 4, addr),
            Some(Identity::Fqdn("peer5.vpn.example".into()))
        );
        let mail = Identity::Rfc822("user{n}-{addr}@example".into());
        assert_eq!(
            peer_identity(Some(&mail), 0, addr),
            Some(Identity::Rfc822("user1-198.19.64.7@example".into()))
        );
        let only_addr = Identity::Fqdn("{addr}".into());
        assert_eq!(
            peer_identity(Some(&only_addr), 0, addr),
            Some(Identity::Ipv4(addr))
        );
        let plain = Identity::Fqdn("gw.example".into());
        assert_eq!(peer_identity(Some(&plain), 9, addr), Some(plain.clone()));
        assert_eq!(peer_identity(None, 0, addr), None);
        for ok in [&fqdn, &mail, &only_addr, &plain] {
            assert!(check_id_template(Some(ok)).is_ok());
        }
        assert!(check_id_template(None).is_ok());
        for (bad, says) in [
            ("peer{i}.vpn.example", "{i} is no placeholder"),
            ("peer{n.vpn.example", "without its '}'"),
            ("peer}n.vpn.example", "without its '{'"),
            ("a}{n}.example", "without its '{'"),
            ("peer{}.example", "{} is no placeholder"),
        ] {
            let e = check_id_template(Some(&Identity::Fqdn(bad.into()))).unwrap_err();
            assert_eq!(e.kind(), crate::Kind::BadInput);
            assert!(e.to_string().contains(says), "{bad}: {e}");
            assert!(!e.to_string().contains('\n'));
        }
    }
}
