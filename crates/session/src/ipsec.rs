//! linerate as the IPsec peer of one VPN gateway (`--ipsec`): port A is the
//! gateway's LAN side, port B its WAN side, where linerate negotiates a
//! CHILD_SA by IKEv2 (linerate-ike) and then encrypts and decrypts the test
//! frames itself (the engine's ESP transforms): the gateway's own
//! encryption and decryption throughput, as an IXIA that is a VPN peer
//! measures it.
//!
//! IKE runs over the kernel's UDP stack in port B's namespace: linerate's
//! outer address (or its peers' addresses, `--tunnels`) is put on port B
//! for the run (when the port does not have it already). While the trials
//! run, the keeper thread (`ike_keeper`) answers the gateway's requests
//! (liveness checks, its rekeys), rekeys every `--rekey` period, and hands
//! each new CHILD_SA's keys to the engine's transforms. The ESP that shares
//! port 4500 with IKE is the engine's: a socket filter keeps it off the
//! IKE socket, and the AF_XDP engine passes only IKE to the kernel. With
//! raw ESP (`--esp-encap raw|auto`, no NAT between), IKE stays on UDP 4500
//! and the ESP is IP protocol 50, which a raw socket claims in port B's
//! namespace so the kernel does not answer it (`linerate_engine::esp_sink`).
//! At the end the IKE SAs are deleted and the addresses taken off.

mod many;

use crate::error::{bail, err, Error, Result};
use crate::ike_keeper::{Every, Handoff, Keeper, Peers, RekeyLog, RekeyTotals};
use crate::peers::{ip_out as ip, PeerAddresses};
use linerate_engine::esp_sink::{ProtocolSink, IPPROTO_ESP};
use linerate_engine::ipsec::{
    EspCounts, EspReceive, EspSend, SaInbox, SharedCounts, TunnelMap, ESP_IN_UDP,
};
use linerate_engine::transform::{ReceiveTransform, SendTransform};
use linerate_engine::HostConfig;
use linerate_esp::{Encapsulation, EspSuite, Inbound, Outbound};
use linerate_ike::{
    Config, Fleet, Identity, IkeError, IkeProposals, Ports, Psk, Retransmit, Session, Sockets,
    TrafficSelector,
};
use linerate_results::report::thousands;
use linerate_wire::flows::{Field, FieldRange};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use linerate_results::ipsec::{
    Direction, EspTrial, IkeRekeys, IpsecRun, RekeyRecord, TrialRekeys, TunnelsRun,
};

/// An IPv4 network, and the address in it a host uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Net {
    pub address: Ipv4Addr,
    pub prefix_len: u8,
}

impl Net {
    /// `198.19.1.0/24` or `198.19.1.2/24` (the host's address in it).
    pub fn parse(text: &str, option: &str) -> Result<Net> {
        let bad = || {
            err!(BadInput,
                "{option} {text} is not an IPv4 network: write it as ADDRESS/PREFIX, e.g. 198.19.1.0/24")
        };
        let (addr, prefix) = text.split_once('/').ok_or_else(bad)?;
        let address: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix_len: u8 = prefix.parse().map_err(|_| bad())?;
        if !(1..=32).contains(&prefix_len) {
            return Err(bad());
        }
        Ok(Net {
            address,
            prefix_len,
        })
    }

    fn mask(self) -> u32 {
        u32::MAX << (32 - self.prefix_len as u32)
    }

    /// The first and the last address of the network.
    pub fn range(self) -> (Ipv4Addr, Ipv4Addr) {
        let net = u32::from(self.address) & self.mask();
        (net.into(), (net | !self.mask()).into())
    }

    /// The address a host in it uses: the one given, or the network's
    /// second (`.2`) when only the network was given.
    pub fn host(self) -> Ipv4Addr {
        let (first, last) = self.range();
        if self.address != first || self.prefix_len >= 31 {
            return self.address;
        }
        (u32::from(first) + 2).min(u32::from(last)).into()
    }

    pub fn contains(self, ip: Ipv4Addr) -> bool {
        u32::from(ip) & self.mask() == u32::from(self.address) & self.mask()
    }

    /// The whole network as one traffic selector.
    pub(crate) fn selector(self) -> TrafficSelector {
        let (first, last) = self.range();
        TrafficSelector::range(first, last)
    }
}

impl std::fmt::Display for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (first, _) = self.range();
        write!(f, "{first}/{}", self.prefix_len)
    }
}

/// How linerate's ESP travels to the gateway (`--esp-encap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EspEncap {
    /// ESP in UDP 4500 (RFC 3948), forced by faked NAT detection as
    /// strongSwan's `encap = yes` does: works through a NAT, and with
    /// gateways that can do nothing else (strongSwan's kernel-libipsec).
    #[default]
    Udp,
    /// Raw ESP (IP protocol 50), NAT detection left honest: a gateway that
    /// still encapsulates (a NAT between) is refused.
    Raw,
    /// Whatever NAT detection finds: raw ESP without a NAT, else UDP.
    Auto,
}

impl EspEncap {
    /// `udp`, `raw` or `auto`.
    pub fn parse(text: &str) -> Option<EspEncap> {
        match text {
            "udp" => Some(EspEncap::Udp),
            "raw" => Some(EspEncap::Raw),
            "auto" => Some(EspEncap::Auto),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            EspEncap::Udp => "udp",
            EspEncap::Raw => "raw",
            EspEncap::Auto => "auto",
        }
    }

    /// Whether IKE fakes NAT detection so the gateway encapsulates.
    pub fn forces_udp(self) -> bool {
        self == EspEncap::Udp
    }

    /// How the data path sends and receives ESP for a CHILD_SA the
    /// gateway at `gateway` negotiated with (`udp_encap`) or without UDP
    /// encapsulation; refuses what the choice does not allow.
    pub fn outcome(self, udp_encap: bool, gateway: Ipv4Addr) -> Result<Encapsulation> {
        match (self, udp_encap) {
            (EspEncap::Raw, true) => bail!(Environment, "--esp-encap raw: the gateway at {gateway} negotiated ESP in UDP 4500, so a NAT is between linerate and the gateway (or the gateway forces encapsulation, strongSwan: encap = yes); use --esp-encap udp or auto"),
            (EspEncap::Udp, false) => bail!(Environment, "the gateway at {gateway} will not encapsulate ESP in UDP (no NAT traversal): give --esp-encap raw to send raw ESP (IP protocol 50), or enable NAT traversal on the gateway"),
            (_, true) => Ok(ESP_IN_UDP),
            (_, false) => Ok(Encapsulation::Raw),
        }
    }
}

/// The run record's and the note's words for an encapsulation.
pub fn encapsulation_label(encapsulation: Encapsulation) -> &'static str {
    match encapsulation {
        Encapsulation::Udp { .. } => "ESP in UDP 4500 (RFC 3948), tunnel mode",
        Encapsulation::Raw => "raw ESP (IP protocol 50, RFC 4303), tunnel mode",
    }
}

/// `--ipsec` and its options, checked.
#[derive(Debug, Clone)]
pub struct IpsecPlan {
    /// The gateway's IKE address; None: port B's gateway (`--gw-b`).
    pub gateway: Option<Ipv4Addr>,
    /// The pre-shared key's file (mode 0600): read when the run starts.
    /// None: the lab scenario's.
    pub psk_file: Option<PathBuf>,
    /// The network linerate emulates behind itself; the test frames come
    /// from (go to) its host address. None: the lab scenario's.
    pub remote_net: Option<Net>,
    /// The gateway's protected LAN; None: port A's subnet.
    pub local_net: Option<Net>,
    /// None: strongSwan's usual set (aes256-sha256-modp2048 first), or
    /// the lab scenario's.
    pub ike: Option<IkeProposals>,
    /// None: aes256gcm16, or the lab scenario's.
    pub esp: Option<EspSuite>,
    pub local_id: Option<Identity>,
    pub remote_id: Option<Identity>,
    pub direction: Direction,
    /// Where to write the negotiated keys for Wireshark (`--esp-keys`).
    pub esp_keys: Option<PathBuf>,
    /// `--tunnels N`: how many peers linerate emulates on port B, each with
    /// its own outer address, IKE SA, CHILD_SA and slice of `remote_net`.
    /// 1: the one tunnel of `--ipsec`.
    pub tunnels: usize,
    /// `--peer-addrs`: the peers' outer addresses (FIRST, FIRST-LAST or a
    /// network); None: from port B's address upward (in the lab: the
    /// gateway's peer range).
    pub peer_addrs: Option<crate::peers::PeerAddrs>,
    /// `--rekey T`: each tunnel's CHILD_SA is rekeyed every T while the
    /// run lasts (spread evenly over the tunnels); None: only when the
    /// gateway asks.
    pub rekey: Option<Duration>,
    /// `--rekey-ike T`: each tunnel's IKE SA is rekeyed every T the same
    /// way; None: only when the gateway asks.
    pub rekey_ike: Option<Duration>,
    /// `--esp-encap`: ESP in UDP 4500 (the default), raw, or as NAT
    /// detection finds.
    pub esp_encap: EspEncap,
    /// `--ipsec-timeout`: how long to wait for the gateway's answer to an
    /// IKE request before "no answer"; None: [`Retransmit::default`]'s
    /// 15.5 s.
    pub ipsec_timeout: Option<Duration>,
    /// The test frames' `--range`s, as the engine's port A sends them
    /// (port B when decrypting): the addresses a `src-ip`/`dst-ip` range
    /// reaches must lie within the selectors the gateway answers
    /// ([`IpsecPlan::frame_addresses`]). Empty: fixed addresses.
    pub ranges: Vec<FieldRange>,
}

/// The first retransmission wait of `--ipsec-timeout`'s schedule, at
/// least (as the default schedule's): a gateway computing its
/// Diffie-Hellman share must have time to answer the first try.
const FIRST_WAIT: Duration = Duration::from_millis(500);
/// Tries at most, however long the timeout.
const MOST_TRIES: u32 = 8;

/// Nothing chosen: every field left to the lab scenario or the defaults,
/// one tunnel, decryption (the scenario's peer when no `--ipsec` is given).
impl Default for IpsecPlan {
    fn default() -> IpsecPlan {
        IpsecPlan {
            gateway: None,
            psk_file: None,
            remote_net: None,
            local_net: None,
            ike: None,
            esp: None,
            local_id: None,
            remote_id: None,
            direction: Direction::Decrypt,
            esp_keys: None,
            tunnels: 1,
            peer_addrs: None,
            rekey: None,
            rekey_ike: None,
            esp_encap: EspEncap::default(),
            ipsec_timeout: None,
            ranges: Vec::new(),
        }
    }
}

impl IpsecPlan {
    /// How often linerate rekeys each tunnel's SAs itself (`--rekey`,
    /// `--rekey-ike`).
    pub fn rekeys(&self) -> Every {
        Every {
            child: self.rekey,
            ike: self.rekey_ike,
        }
    }

    /// The IKE retransmission schedule: the default, or, with
    /// `--ipsec-timeout T`, as many tries as fit T with a first wait of
    /// 0.5 s or more (doubling after each), stretched to end at T exactly.
    /// T is the time from a request's first send to "no answer".
    pub fn retransmit(&self) -> Retransmit {
        let Some(total) = self.ipsec_timeout else {
            return Retransmit::default();
        };
        // n tries doubling from w take w * (2^n - 1).
        let span = |tries: u32| (1u32 << tries) - 1;
        let tries = (1..=MOST_TRIES)
            .take_while(|&n| FIRST_WAIT * span(n) <= total)
            .last()
            .unwrap_or(1);
        Retransmit {
            timeout: total / span(tries),
            tries,
        }
    }

    /// The test frames' addresses on a tunnel's two sides: `inner` behind
    /// linerate and `lan` on the gateway's LAN, each with the `--range`
    /// that varies it. The engine's port A sends the ranged frames: port A
    /// (source on the LAN, destination behind linerate), or port B when
    /// decrypting (the other way round).
    pub(crate) fn frame_addresses(&self, inner: Ipv4Addr, lan: Ipv4Addr) -> FrameAddresses {
        let (inner_field, lan_field) = match self.direction {
            Direction::Decrypt => (Field::SrcIp, Field::DstIp),
            _ => (Field::DstIp, Field::SrcIp),
        };
        let range = |field| self.ranges.iter().find(|r| r.field == field).copied();
        FrameAddresses {
            inner,
            lan,
            inner_range: range(inner_field),
            lan_range: range(lan_field),
        }
    }

    /// Parses an identity as strongSwan writes one: an IPv4 address,
    /// `@fqdn`, `user@domain`, or a host name.
    pub fn identity(text: &str) -> Identity {
        if let Ok(ip) = text.parse::<Ipv4Addr>() {
            Identity::Ipv4(ip)
        } else if let Some(fqdn) = text.strip_prefix('@') {
            Identity::Fqdn(fqdn.to_string())
        } else if text.contains('@') {
            Identity::Rfc822(text.to_string())
        } else {
            Identity::Fqdn(text.to_string())
        }
    }
}

/// The tunnels of `--tunnels N`: tunnel `i` protects slice `i` of the
/// network behind linerate (`first + i*block ..`, `block` addresses), and
/// its test frames use the slice's address `first + i*block + host_offset`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slices {
    pub first: Ipv4Addr,
    pub block: u32,
    pub count: u32,
    pub host_offset: u32,
}

impl Slices {
    /// The engine's map from an inner address to its tunnel.
    pub fn map(&self) -> TunnelMap {
        TunnelMap {
            first: self.first,
            block: self.block,
            count: self.count,
        }
    }

    /// The flow range that spreads frames evenly over the tunnels on
    /// `field`: frame n carries tunnel (n mod count)'s test address.
    pub fn spread(&self, field: linerate_wire::flows::Field) -> linerate_wire::flows::FieldRange {
        self.map().spread(field, self.host_offset)
    }

    /// Tunnel `i`'s test address.
    pub fn host(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.first) + i as u32 * self.block + self.host_offset)
    }
}

/// Negotiates one tunnel's IKE SA and CHILD_SA from port B's address,
/// over sockets bound in port B's namespace (a socket keeps the namespace
/// it was made in).
fn connect_one(
    plan: &IpsecPlan,
    netns: Option<&str>,
    host_b: &HostConfig,
    checked: Checked,
    stop: &AtomicBool,
) -> Result<Session> {
    let Checked {
        psk,
        esp,
        gateway,
        remote_net,
        local_net,
        ..
    } = checked;
    let mut config = Config::new(
        host_b.ip,
        gateway,
        psk,
        remote_net.selector(),
        local_net.selector(),
    );
    if let Some(ike) = &plan.ike {
        config.ike = ike.clone();
    }
    config.esp = esp;
    // An `--ipsec-id` template ({n}, {addr}) names the one tunnel tunnel 1.
    crate::peers::check_id_template(plan.local_id.as_ref())?;
    config.local_id = crate::peers::peer_identity(plan.local_id.as_ref(), 0, host_b.ip);
    config.remote_id = plan.remote_id.clone();
    config.retransmit = plan.retransmit();
    config.force_encap = plan.esp_encap.forces_udp();
    let sockets = linerate_port::netns::maybe_in_netns(netns, || {
        Ok(Sockets::bind(host_b.ip, Ports::default()))
    })
    .map_err(|e| err!(Environment, "{e}"))?
    .map_err(|e| err!(Environment, "IPsec: {e}"))?;
    Session::connect_until(config, sockets, stop).map_err(|e| match e {
        IkeError::Interrupted { gateway } => interrupted_negotiation(gateway),
        e => err!(Failed, "IPsec: {e}"),
    })
}

/// Traffic selectors as the run's notes print them (`10.88.0.0/16`,
/// several joined by ", ").
pub(crate) fn selectors_text(list: &[TrafficSelector]) -> String {
    list.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The addresses a tunnel's test frames carry on its two sides (see
/// [`IpsecPlan::frame_addresses`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameAddresses {
    /// Behind linerate (in the tunnel's `local_ts`).
    pub inner: Ipv4Addr,
    /// On the gateway's LAN, port A's (in its `remote_ts`).
    pub lan: Ipv4Addr,
    /// The `--range` that varies the address behind linerate, if any.
    pub inner_range: Option<FieldRange>,
    /// The `--range` that varies the address on the gateway's LAN.
    pub lan_range: Option<FieldRange>,
}

/// The first address of `first..=last` that no selector of `list` holds
/// (selectors are address ranges, RFC 7296 §3.13.1; several may join to
/// cover the range). None: all are held.
fn first_outside(list: &[TrafficSelector], first: Ipv4Addr, last: Ipv4Addr) -> Option<Ipv4Addr> {
    let last = u32::from(last);
    let mut at = u32::from(first);
    loop {
        let reach = list
            .iter()
            .filter_map(|ts| match (ts.start, ts.end) {
                (std::net::IpAddr::V4(s), std::net::IpAddr::V4(e))
                    if u32::from(s) <= at && at <= u32::from(e) =>
                {
                    Some(u32::from(e))
                }
                _ => None,
            })
            .max();
        match reach {
            None => return Some(Ipv4Addr::from(at)),
            Some(end) if end >= last => return None,
            Some(end) => at = end + 1,
        }
    }
}

/// Refuses a CHILD_SA whose traffic selectors, as the gateway answered
/// them (perhaps narrower than proposed, RFC 7296 §2.9), leave out the
/// test frames' addresses: `frames.inner` (and every address of its
/// `--range`) in `local_ts`, linerate's side, `frames.lan` (and its
/// range's) in `remote_ts`, the gateway's. The gateway would drop those
/// frames, and the loss would read as the DUT's. `tunnel`: which one,
/// with several.
pub(crate) fn check_selectors(
    local_ts: &[TrafficSelector],
    remote_ts: &[TrafficSelector],
    frames: &FrameAddresses,
    tunnel: Option<usize>,
) -> Result<()> {
    let (local, remote) = (selectors_text(local_ts), selectors_text(remote_ts));
    let which = tunnel.map_or(String::new(), |i| format!("tunnel {}: ", i + 1));
    let narrowed = format!(
        "{which}the gateway narrowed the traffic selectors to {local} <-> {remote} (RFC 7296 §2.9)"
    );
    let inner = frames.inner;
    if first_outside(local_ts, inner, inner).is_some() {
        bail!(BadInput, "{narrowed}, which leave out the test frames' address {inner} behind linerate: give --remote-net within {local}");
    }
    let lan = frames.lan;
    if first_outside(remote_ts, lan, lan).is_some() {
        bail!(BadInput, "{narrowed}, which leave out the test frames' address {lan} on the gateway's LAN: give --local-net and port A's address within {remote}");
    }
    for (range, list, side, text) in [
        (frames.inner_range, local_ts, "behind linerate", &local),
        (frames.lan_range, remote_ts, "on the gateway's LAN", &remote),
    ] {
        let Some(r) = range else { continue };
        let (first, last) = (Ipv4Addr::from(r.min as u32), Ipv4Addr::from(r.max as u32));
        if let Some(out) = first_outside(list, first, last) {
            bail!(BadInput, "{which}--range {}={first}..{last} reaches past the traffic selectors the gateway answered, {local} <-> {remote} (RFC 7296 §2.9): its address {out} {side} is outside {text}; keep the range within {text}", r.field.name());
        }
    }
    Ok(())
}

/// A negotiation a signal stopped: the run's interruption (exit 130, see
/// `ports::stop`), with what was done about the gateway.
fn interrupted_negotiation(gateway: Ipv4Addr) -> Error {
    Error::from(linerate_engine::EngineError::Interrupted).context(format!(
        "the IPsec tunnels to {gateway} were not set up: interrupted; what the gateway had set up was deleted"
    ))
}

/// Port B's ESP transforms: sending (encrypting) and receiving.
pub type Transforms = (Box<dyn SendTransform>, Box<dyn ReceiveTransform>);

/// The ESP keys until the engine takes them.
enum Keys {
    /// One tunnel's SAs, and how its ESP travels.
    One(Box<(Outbound, Inbound)>, Encapsulation),
    /// Per tunnel: the outbound SA and its peer's address; the inbound SA;
    /// how every tunnel's ESP travels.
    Many(Vec<(Outbound, Ipv4Addr)>, Vec<Inbound>, Encapsulation),
}

/// An established tunnel to the gateway, or N of them (`--tunnels`): the
/// IKE SAs (deleted when this is dropped), the ESP keys until the engine
/// takes them, and their counts.
pub struct IpsecPeer {
    session: Option<Session>,
    /// `--tunnels N`: every peer's IKE state, driven by one thread.
    fleet: Option<Fleet>,
    /// `--tunnels N`: the peers' addresses on port B (off during trials).
    addresses: Option<PeerAddresses>,
    keys: Option<Keys>,
    /// Port B's namespace and interface, where the outer address goes.
    netns: Option<String>,
    ifname: String,
    /// The address (`ip/prefix`) put on port B for IKE, taken off between.
    address: Option<String>,
    pub counts: SharedCounts,
    pub record: IpsecRun,
    /// The test frames' address behind linerate (in `remote_net`); with
    /// `--tunnels`, tunnel 0's.
    pub inner: Ipv4Addr,
    /// `--tunnels N`: the slices of the tunnels.
    pub slices: Option<Slices>,
    /// From the first trial on: the thread that answers the gateway,
    /// rekeys (`--rekey`) and hands new keys to the data path; it holds
    /// the session or fleet until the run ends.
    keeper: Option<Keeper>,
    rekey: Every,
    /// `--esp-keys`: where the keys of later CHILD_SAs are added too.
    esp_keys: Option<PathBuf>,
}

/// What the tunnels did so far: the data path's ESP counts and the IKE
/// side's rekeys (see [`IpsecPeer::trial`]).
#[derive(Debug, Clone)]
pub struct PeerCounts {
    pub esp: EspCounts,
    /// When it was read.
    at: Instant,
    /// How many rekeys had ended then, their totals, and how many tunnels
    /// the gateway had deleted.
    rekeys: usize,
    totals: RekeyTotals,
    deleted: usize,
    log: Option<Arc<Mutex<RekeyLog>>>,
}

/// What one tunnel and many share of the plan, checked: the key read,
/// the defaults filled in.
struct Checked {
    psk: Psk,
    esp: EspSuite,
    gateway: Ipv4Addr,
    remote_net: Net,
    local_net: Net,
    /// Port B's address and subnet: linerate's (first) tunnel end.
    outer: Net,
}

impl Checked {
    /// `remote_net_is`: what `--remote-net` is for, in its refusal.
    fn of(
        plan: &IpsecPlan,
        host_b: &HostConfig,
        lan: &HostConfig,
        remote_net_is: &str,
    ) -> Result<Checked> {
        let Some(psk_file) = &plan.psk_file else {
            bail!(BadInput, "--ipsec needs --psk-file FILE: the pre-shared key, in a file only its owner can read");
        };
        let psk = Psk::read_file(psk_file).map_err(|e| err!(BadInput, "{e}"))?;
        let Some(remote_net) = plan.remote_net else {
            bail!(BadInput, "--ipsec needs --remote-net: the network linerate emulates behind itself, {remote_net_is}");
        };
        let gateway = plan.gateway.unwrap_or(host_b.gateway);
        check_gateway_address(gateway, host_b)?;
        Ok(Checked {
            psk,
            esp: plan.esp.unwrap_or(EspSuite::Aes256Gcm16),
            gateway,
            remote_net,
            local_net: plan.local_net.unwrap_or(Net {
                address: lan.ip,
                prefix_len: lan.prefix_len,
            }),
            outer: Net {
                address: host_b.ip,
                prefix_len: host_b.prefix_len,
            },
        })
    }
}

/// The longest IKE identity linerate sends: a domain name has at most
/// 253 characters, an e-mail address 254 (RFC 5321 §4.5.3.1.3).
pub const MAX_IDENTITY: usize = 255;

/// Refuses an IKE identity (`option`'s `text`) no gateway can take, before
/// any gateway is contacted: empty, with a control character (a newline
/// from a script), or longer than [`MAX_IDENTITY`] bytes (70,000 bytes
/// would not fit the IKE_AUTH datagram, after IKE_SA_INIT left a half-open
/// SA on the gateway).
pub fn check_identity(text: &str, option: &str) -> Result<()> {
    let bare = text.strip_prefix('@').unwrap_or(text);
    if bare.trim().is_empty() {
        bail!(
            BadInput,
            "{option} is empty: give an address, @fqdn or user@domain"
        );
    }
    if text.chars().any(char::is_control) {
        bail!(BadInput, "{option} holds a control character (a newline?): give the identity on its own, e.g. @peer.vpn.example");
    }
    if text.len() > MAX_IDENTITY {
        bail!(BadInput, "{option} is {} bytes long, more than the {MAX_IDENTITY} of any domain name or e-mail address: give a shorter identity", text.len());
    }
    Ok(())
}

/// Refuses a gateway address IKE cannot talk to from port B (`host_b`):
/// port B's own address (linerate would talk to itself), its subnet's
/// network or broadcast address, a multicast, broadcast or unspecified
/// one. Checked before any datagram is sent.
fn check_gateway_address(gateway: Ipv4Addr, host_b: &HostConfig) -> Result<()> {
    let why = if gateway == host_b.ip {
        Some("is port B's own address, where linerate's peer is: give the gateway's WAN address")
    } else if gateway.is_unspecified() || gateway.is_broadcast() || gateway.is_multicast() {
        Some("is not the address of one host: give the gateway's WAN address")
    } else {
        let subnet = Net {
            address: host_b.ip,
            prefix_len: host_b.prefix_len,
        };
        // /31 and /32 have no network or broadcast address (RFC 3021).
        let edge = (1..=30).contains(&host_b.prefix_len) && subnet.contains(gateway) && {
            let host_part = !subnet.mask();
            let host = u32::from(gateway) & host_part;
            host == 0 || host == host_part
        };
        edge
            .then_some("is the network or broadcast address of port B's subnet, not a host: give the gateway's WAN address")
    };
    match why {
        Some(why) => bail!(
            BadInput,
            "the IPsec gateway {gateway} {why} (--ipsec-gateway, or --gw-b)"
        ),
        None => Ok(()),
    }
}

/// Tunnel 0 as the run's record starts it, before negotiation: where
/// one tunnel and many differ (see [`IpsecPeer::unnegotiated`]).
struct FirstTunnel {
    esp: EspSuite,
    gateway: Ipv4Addr,
    /// linerate's end of it: port B's address, or the first peer's.
    peer: Ipv4Addr,
    /// The networks its CHILD_SA protects: linerate's side (the network
    /// behind linerate, or tunnel 0's slice of it), the gateway's.
    local_net: Net,
    remote_net: Net,
    /// The test frames' address in `local_net`.
    inner: Ipv4Addr,
}

impl IpsecPeer {
    /// Negotiates the tunnel from port B (`ifname` in `netns`, whose host
    /// is `host_b`) to the gateway; `lan` is port A's host, whose subnet
    /// is the gateway's LAN unless the plan names it. `stop` (a signal)
    /// ends the negotiation: what the gateway set up is deleted, and the
    /// error is the run's interruption.
    pub fn establish(
        plan: &IpsecPlan,
        netns: Option<&str>,
        ifname: &str,
        host_b: &HostConfig,
        lan: &HostConfig,
        stop: &AtomicBool,
    ) -> Result<IpsecPeer> {
        if plan.tunnels > 1 {
            return Self::establish_many(plan, netns, ifname, host_b, lan, stop);
        }
        let checked = Checked::of(
            plan,
            host_b,
            lan,
            "which the gateway's tunnel protects (e.g. 198.19.1.0/24)",
        )?;
        let remote_net = checked.remote_net;
        if remote_net.contains(host_b.ip) {
            bail!(BadInput, "--remote-net {remote_net} holds port B's own address {}: the network behind linerate must be another one than its WAN subnet", host_b.ip);
        }
        let first = FirstTunnel {
            esp: checked.esp,
            gateway: checked.gateway,
            peer: host_b.ip,
            local_net: remote_net,
            remote_net: checked.local_net,
            inner: remote_net.host(),
        };
        let mut peer = Self::unnegotiated(plan, netns, ifname, first);
        peer.address_on(checked.outer, checked.gateway)?;
        let session = connect_one(plan, netns, host_b, checked, stop)?;
        let child = session.child();
        let frames = plan.frame_addresses(peer.inner, lan.ip);
        check_selectors(&child.local_ts, &child.remote_ts, &frames, None)?;
        peer.record.local_net = selectors_text(&session.child().local_ts);
        peer.record.remote_net = selectors_text(&session.child().remote_ts);
        peer.take_first_child(session, plan, host_b)?;
        Ok(peer)
    }

    /// The one place a peer is made, for one tunnel and for many: tunnel
    /// 0's record without what negotiation adds (see
    /// [`take_keys`](Self::take_keys)), nothing running yet (no session,
    /// fleet, peers' addresses or keeper).
    fn unnegotiated(
        plan: &IpsecPlan,
        netns: Option<&str>,
        ifname: &str,
        first: FirstTunnel,
    ) -> IpsecPeer {
        IpsecPeer {
            session: None,
            fleet: None,
            addresses: None,
            slices: None,
            keys: None,
            netns: netns.map(str::to_string),
            ifname: ifname.to_string(),
            address: None,
            counts: SharedCounts::default(),
            record: IpsecRun {
                direction: plan.direction,
                esp: first.esp.name().to_string(),
                esp_label: first.esp.label().to_string(),
                // Known once the CHILD_SAs are (take_keys).
                encapsulation: encapsulation_label(ESP_IN_UDP).to_string(),
                ike: String::new(),
                gateway: first.gateway,
                peer: first.peer,
                spi_out: 0,
                spi_in: 0,
                local_net: first.local_net.to_string(),
                remote_net: first.remote_net.to_string(),
                tunnels: None,
            },
            inner: first.inner,
            keeper: None,
            rekey: plan.rekeys(),
            esp_keys: plan.esp_keys.clone(),
        }
    }

    /// Takes the first keys of the negotiated tunnels for the data path,
    /// and records the IKE suite, tunnel 0's SPIs (outbound, inbound) and
    /// how the ESP travels.
    fn take_keys(&mut self, keys: Keys, ike: String, spis: (u32, u32)) {
        let encapsulation = match &keys {
            Keys::One(_, encapsulation) | Keys::Many(_, _, encapsulation) => *encapsulation,
        };
        self.record.encapsulation = encapsulation_label(encapsulation).to_string();
        self.record.ike = ike;
        (self.record.spi_out, self.record.spi_in) = spis;
        self.keys = Some(keys);
    }

    /// Takes the negotiated CHILD_SA of one tunnel: refuses an
    /// encapsulation `--esp-encap` does not allow, makes the data path's SAs, writes
    /// `--esp-keys`, records the SPIs and suite, and keeps the session
    /// (its socket filtering the ESP off).
    fn take_first_child(
        &mut self,
        session: Session,
        plan: &IpsecPlan,
        host_b: &HostConfig,
    ) -> Result<()> {
        let gateway = self.record.gateway;
        let child = session.child();
        let encapsulation = plan.esp_encap.outcome(child.udp_encap, gateway)?;
        let outbound = Outbound::new(child.outbound.clone()).map_err(|e| err!(Failed, "{e}"))?;
        let inbound = Inbound::new(child.inbound.clone()).map_err(|e| err!(Failed, "{e}"))?;
        if let Some(path) = &plan.esp_keys {
            let lines = format!(
                "{}\n{}\n",
                child.outbound.wireshark_esp_sa(host_b.ip, gateway),
                child.inbound.wireshark_esp_sa(gateway, host_b.ip)
            );
            write_private(path, &lines)
                .map_err(|e| err!(Environment, "--esp-keys {}: {e}", path.display()))?;
        }
        let spis = (child.outbound.spi, child.inbound.spi);
        // The address stays on port B while the trials run: the gateway's
        // requests (liveness checks, its rekeys) and the answers to
        // linerate's rekeys reach the keeper; the ESP they share port
        // 4500 with is filtered off its socket in the kernel.
        session
            .ignore_esp()
            .map_err(|e| err!(Environment, "IPsec: {e}"))?;
        let keys = Keys::One(Box::new((outbound, inbound)), encapsulation);
        self.take_keys(keys, session.ike_suite().to_string(), spis);
        self.session = Some(session);
        Ok(())
    }

    /// The engine's ESP transforms, once: the keys move into them, and
    /// the keeper starts, which hands them the keys of every later
    /// CHILD_SA.
    pub fn transforms(&mut self) -> Result<Option<Transforms>> {
        let transforms = self.first_transforms()?;
        let Some((send, receive)) = transforms else {
            return Ok(None);
        };
        let (new_out, new_in) = (SaInbox::new(), SaInbox::new());
        let send = send.take_new_sas(new_out.clone());
        let receive = receive.take_new_sas(new_in.clone());
        let peers = match (self.session.take(), self.fleet.take()) {
            (Some(s), _) => Some(Peers::One(Box::new(s))),
            (None, Some(f)) => Some(Peers::Many(Box::new(f))),
            (None, None) => None,
        };
        if let Some(peers) = peers {
            let handoff = Handoff {
                outbound: new_out,
                inbound: new_in,
                esp_keys: self
                    .esp_keys
                    .clone()
                    .map(|p| (p, self.record.peer, self.record.gateway)),
            };
            self.keeper = Some(Keeper::start(peers, handoff, self.rekey));
        }
        Ok(Some((Box::new(send), Box::new(receive))))
    }

    /// The ESP transforms of the tunnels' first CHILD_SAs.
    fn first_transforms(&mut self) -> Result<Option<(EspSend, EspReceive)>> {
        match self.keys.take() {
            None => Ok(None),
            Some(Keys::One(keys, encapsulation)) => {
                let (outbound, inbound) = *keys;
                let send = EspSend::new(
                    outbound,
                    self.record.peer,
                    self.record.gateway,
                    self.counts.clone(),
                )
                .encapsulated(encapsulation);
                let receive =
                    EspReceive::new(inbound, self.counts.clone()).encapsulated(encapsulation);
                Ok(Some((send, self.claim_raw_esp(receive, encapsulation)?)))
            }
            Some(Keys::Many(outbound, inbound, encapsulation)) => {
                let Some(slices) = self.slices else {
                    bail!(Failed, "many tunnels without their slices");
                };
                let send = EspSend::many(
                    outbound,
                    self.record.gateway,
                    slices.map(),
                    self.counts.clone(),
                )
                .encapsulated(encapsulation);
                let receive =
                    EspReceive::many(inbound, self.counts.clone()).encapsulated(encapsulation);
                Ok(Some((send, self.claim_raw_esp(receive, encapsulation)?)))
            }
        }
    }

    /// With raw ESP, `receive` holds a claim on IP protocol 50: port B's
    /// addresses are up for the keeper's IKE, and the kernel must not
    /// answer the gateway's raw ESP.
    fn claim_raw_esp(
        &self,
        receive: EspReceive,
        encapsulation: Encapsulation,
    ) -> Result<EspReceive> {
        if encapsulation != Encapsulation::Raw {
            return Ok(receive);
        }
        let sink = ProtocolSink::claim(self.netns.as_deref(), IPPROTO_ESP).map_err(|e| {
            err!(
                Environment,
                "cannot claim IP protocol 50 (raw ESP) on port {}: {e}",
                self.ifname
            )
        })?;
        Ok(receive.holding(Box::new(sink)))
    }

    /// What the SAs counted so far, and how many rekeys ended.
    pub fn counts(&self) -> PeerCounts {
        let log = self.keeper.as_ref().map(|k| k.log.clone());
        let (rekeys, totals, deleted) = log.as_ref().map_or((0, RekeyTotals::default(), 0), |l| {
            let l = l.lock().unwrap_or_else(|p| p.into_inner());
            (l.ended(), l.totals, l.deleted.len())
        });
        PeerCounts {
            esp: self.counts.lock().map(|c| c.clone()).unwrap_or_default(),
            at: Instant::now(),
            rekeys,
            totals,
            deleted,
            log,
        }
    }

    /// Each tunnel's SPIs now (out, in): the first CHILD_SA's, or the
    /// newest after rekeys.
    pub fn current_spis(&self) -> Vec<(u32, u32)> {
        if let Some(k) = &self.keeper {
            return k.log.lock().unwrap_or_else(|p| p.into_inner()).spis.clone();
        }
        match &self.record.tunnels {
            Some(t) => t
                .spi_out
                .iter()
                .copied()
                .zip(t.spi_in.iter().copied())
                .collect(),
            None => vec![(self.record.spi_out, self.record.spi_in)],
        }
    }

    /// Adds to a trial's result what the SAs did during it (between
    /// `before` and now): the ESP counts, and the frames linerate's ESP
    /// refused before it had their SA as the tester's loss.
    /// A trial during which the IKE keeper thread died is refused: its
    /// loss would be the tester's, not the gateway's.
    pub fn account_trial(
        &self,
        before: &PeerCounts,
        result: &mut linerate_results::TrialResult,
    ) -> Result<(), linerate_engine::EngineError> {
        if self.keeper.as_ref().is_some_and(Keeper::died) {
            return Err(linerate_engine::EngineError::Thread(
                "the IKE keeper, which answers the gateway and rekeys the tunnels, stopped during the trial (a bug: please report it with the command); the trial is not counted".into(),
            ));
        }
        let esp = IpsecPeer::trial(before, &self.counts());
        if let Some(w) = result.loss_where.as_mut() {
            *w = w.with_tester_esp(esp.before_install);
        }
        result.esp = Some(esp);
        Ok(())
    }

    /// What the SAs did between two readings of [`counts`](Self::counts).
    pub fn trial(before: &PeerCounts, after: &PeerCounts) -> EspTrial {
        let rekeys = trial_rekeys(before, after);
        let (before, after) = (&before.esp, &after.esp);
        let (s0, s1, r0, r1) = (&before.sent, &after.sent, &before.received, &after.received);
        EspTrial {
            encrypted: s1.packets - s0.packets,
            encrypted_bytes: s1.esp_bytes - s0.esp_bytes,
            decrypted: r1.packets - r0.packets,
            decrypted_bytes: r1.esp_bytes - r0.esp_bytes,
            icv_failures: r1.icv_failures - r0.icv_failures,
            replays: r1.replays - r0.replays,
            too_old: r1.too_old - r0.too_old,
            malformed: r1.malformed - r0.malformed,
            unknown_spi: after.unknown_spi - before.unknown_spi,
            before_install: after.before_install.saturating_sub(before.before_install),
            not_esp: after.not_esp - before.not_esp,
            stray: after.stray.saturating_sub(before.stray),
            ike: after.ike - before.ike,
            per_tunnel: if after.per_tunnel.len() > 1 {
                after
                    .per_tunnel
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        let b = before.per_tunnel.get(i).copied().unwrap_or_default();
                        [
                            a.sent.packets - b.sent.packets,
                            a.received.packets - b.received.packets,
                        ]
                    })
                    .collect()
            } else {
                Vec::new()
            },
            rekeys,
            raw_esp: after.raw_esp,
        }
    }

    /// What the run notes say about the tunnel.
    pub fn note(&self) -> String {
        let r = &self.record;
        if let Some(t) = &r.tunnels {
            return format!(
                "IPsec peer of {} ({} tunnels, up in {} ms): peers {} .. {}, each its own IKE SA ({}) and CHILD_SA (ESP {} in UDP 4500) for its /{} of {} <-> {}; tunnel 1's SPIs 0x{:08x} out, 0x{:08x} in; measures the gateway's {}",
                r.gateway,
                thousands(t.count as u64),
                thousands(t.setup_ms),
                t.first_peer,
                t.last_peer,
                r.ike,
                r.esp,
                t.slice_prefix,
                t.remote_net,
                r.remote_net,
                r.spi_out,
                r.spi_in,
                r.direction.gateway_does()
            ) + &self.rekey_note();
        }
        let travels = if r.encapsulation == encapsulation_label(Encapsulation::Raw) {
            "raw (IP protocol 50)"
        } else {
            "in UDP 4500"
        };
        format!(
            "IPsec peer of {} (IKE {}): CHILD_SA ESP {} {travels}, SPIs 0x{:08x} out, 0x{:08x} in, {} <-> {}; measures the gateway's {}",
            r.gateway,
            r.ike,
            r.esp,
            r.spi_out,
            r.spi_in,
            r.local_net,
            r.remote_net,
            r.direction.gateway_does()
        ) + &self.rekey_note()
    }

    /// "; each CHILD_SA rekeyed every 2s (--rekey)", with `--rekey`, and
    /// the same of the IKE SA with `--rekey-ike`.
    fn rekey_note(&self) -> String {
        let every = |what: &str, period: Option<Duration>, option: &str| {
            period.map_or(String::new(), |p| {
                format!(
                    "; each {what} rekeyed every {} ({option})",
                    humantime::format_duration(p)
                )
            })
        };
        every("CHILD_SA", self.rekey.child, "--rekey")
            + &every("IKE SA", self.rekey.ike, "--rekey-ike")
    }

    /// Puts linerate's outer address on port B (and a route to an
    /// off-link gateway), unless the port has it already.
    fn address_on(&mut self, outer: Net, gateway: Ipv4Addr) -> Result<()> {
        let addr = format!("{}/{}", outer.address, outer.prefix_len);
        let present = ip(
            self.netns.as_deref(),
            &["-4", "-o", "addr", "show", "dev", &self.ifname],
        )
        .is_ok_and(|out| out.contains(&format!("inet {addr} ")));
        if present {
            return Ok(());
        }
        ip(
            self.netns.as_deref(),
            &["addr", "add", &addr, "dev", &self.ifname],
        )
        .map_err(|why| {
            err!(
                Environment,
                "cannot put linerate's IPsec address {addr} on port {} for IKE: {why}",
                self.ifname
            )
        })?;
        self.address = Some(addr);
        if !outer.contains(gateway) {
            bail!(BadInput, "the IPsec gateway {gateway} is not on port B's subnet {outer}: give the gateway's WAN address on that subnet (--gw-b or --ipsec-gateway)");
        }
        Ok(())
    }

    fn address_off(&self) {
        if let Some(addr) = &self.address {
            let _ = ip(
                self.netns.as_deref(),
                &["addr", "del", addr, "dev", &self.ifname],
            );
        }
    }
}

impl Drop for IpsecPeer {
    /// Deletes the IKE SAs (and with them the CHILD_SAs) on the gateway,
    /// then takes linerate's addresses off port B.
    fn drop(&mut self) {
        // The keeper hands the session or fleet back for the Deletes.
        match self.keeper.take().and_then(Keeper::stop) {
            Some(Peers::One(s)) => self.session = Some(*s),
            Some(Peers::Many(f)) => self.fleet = Some(*f),
            None => {}
        }
        if let Some(mut fleet) = self.fleet.take() {
            fleet.delete_all();
            drop(fleet);
            // The peers' addresses go only after their Deletes left.
            drop(self.addresses.take());
            return;
        }
        if let Some(session) = self.session.take() {
            // Its Drop sends the Delete; the address stays until it left.
            drop(session);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.address_off();
    }
}

/// Rekeys listed in a trial's record at most (the counts cover all).
const REKEYS_LISTED: usize = 100;

/// The rekeys that ended between two readings: None when none did and
/// none was due.
fn trial_rekeys(before: &PeerCounts, after: &PeerCounts) -> Option<TrialRekeys> {
    let log = after.log.as_ref()?;
    let log = log.lock().unwrap_or_else(|p| p.into_inner());
    let (t0, t1) = (&before.totals, &after.totals);
    let done = t1.done - t0.done;
    let by_gateway = t1.by_gateway - t0.by_gateway;
    let failed = t1.failed - t0.failed;
    let deleted = after.deleted.saturating_sub(before.deleted) as u64;
    let sas_taken = after.esp.new_sas_taken - before.esp.new_sas_taken;
    let ike = IkeRekeys {
        done: t1.ike_done - t0.ike_done,
        by_gateway: t1.ike_by_gateway - t0.ike_by_gateway,
        failed: t1.ike_failed - t0.ike_failed,
    };
    if done + by_gateway + failed + deleted + sas_taken + ike.done + ike.by_gateway + ike.failed
        == 0
    {
        return None;
    }
    let ended: Vec<&crate::ike_keeper::Rekey> = log.between(before.rekeys, after.rekeys).collect();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Some(TrialRekeys {
        done,
        by_gateway,
        failed,
        mean_ms: if done == 0 {
            0.0
        } else {
            (t1.took_s - t0.took_s) * 1e3 / done as f64
        },
        // Over the rekeys still kept (all but in runs of over 100,000).
        max_ms: ended
            .iter()
            .filter(|r| r.failed.is_none())
            .filter_map(|r| r.took.map(ms))
            .fold(0.0, f64::max),
        tunnels_deleted: deleted,
        sas_taken,
        ike: (ike != IkeRekeys::default()).then_some(ike),
        list: ended
            .iter()
            .take(REKEYS_LISTED)
            .map(|r| RekeyRecord {
                tunnel: r.tunnel,
                at_ms: ms(r.at.saturating_duration_since(before.at)),
                took_ms: r.took.map(ms),
                spi_out: r.spis.map(|s| s.0),
                spi_in: r.spis.map(|s| s.1),
                failed: r.failed.clone(),
            })
            .collect(),
    })
}

/// Writes `text` (keys) to `path`, readable by its owner only, whatever
/// the file was before (see [`open_private`]).
fn write_private(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut file = open_private(path, false)?;
    file.write_all(text.as_bytes())
}

/// Opens `path` to write secrets to: emptied, or kept for `append`; made
/// or narrowed to mode 0600. Refused when `path` is a symbolic link (never
/// followed: a link to another file would have that file filled with keys),
/// not a regular file, a file with other names (hard links), or someone
/// else's; nothing is truncated before those checks.
pub(crate) fn open_private(path: &std::path::Path, append: bool) -> std::io::Result<std::fs::File> {
    use std::io::{Error, ErrorKind};
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
    let file = std::fs::OpenOptions::new()
        .write(true)
        .append(append)
        .create(true)
        .mode(0o600)
        // O_NONBLOCK: a FIFO without a reader fails at once instead of
        // blocking the run (it is then refused as not a regular file).
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            Some(nix::libc::ELOOP) => Error::new(
                ErrorKind::InvalidInput,
                "is a symbolic link, which linerate does not follow to write keys: give the path of the file itself",
            ),
            _ => e,
        })?;
    let meta = file.metadata()?;
    let refuse = |why: &str| Err(Error::new(ErrorKind::InvalidInput, why.to_string()));
    if !meta.file_type().is_file() {
        return refuse("is not a regular file: give the path of a file for the keys");
    }
    if meta.nlink() > 1 {
        return refuse(
            "has other names (hard links), which would show the keys: give a file of its own",
        );
    }
    if meta.uid() != nix::unistd::geteuid().as_raw() {
        return refuse("belongs to another user: give a file of your own");
    }
    // An existing file keeps its mode on open: narrow it before writing.
    file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    if !append {
        file.set_len(0)?;
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys go to the named file only: a symbolic link or a hard link to
    /// another file is refused with that file untouched (it was truncated,
    /// filled with keys and made 0600); a file of one's own is emptied
    /// and narrowed to 0600, or appended to.
    #[test]
    fn identities_no_gateway_takes_are_refused() {
        for ok in [
            "@peer.vpn.example",
            "user@example",
            "198.18.1.2",
            "@peer{n}.vpn.example",
        ] {
            check_identity(ok, "--ipsec-id").unwrap();
        }
        let long = "a".repeat(70_000);
        for (bad, why) in [
            ("", "is empty"),
            ("@", "is empty"),
            ("  ", "is empty"),
            ("@peer\n", "control character"),
            (long.as_str(), "70000 bytes long"),
        ] {
            let e = check_identity(bad, "--ipsec-id").unwrap_err().to_string();
            assert!(e.contains("--ipsec-id") && e.contains(why), "{e}");
        }
    }

    /// A gateway address IKE cannot reach from port B is refused before
    /// any datagram: port B's own, its subnet's edges, no host at all.
    #[test]
    fn a_gateway_address_that_is_no_gateway_is_refused() {
        let host_b = HostConfig {
            ip: Ipv4Addr::new(198, 18, 1, 2),
            prefix_len: 24,
            gateway: Ipv4Addr::new(198, 18, 1, 1),
            gateway_mac: None,
            also_answers: None,
            inner: None,
            ipv6: None,
            vlan: None,
        };
        for (bad, why) in [
            ("198.18.1.2", "port B's own address"),
            ("198.18.1.255", "broadcast address of port B's subnet"),
            ("198.18.1.0", "network or broadcast"),
            ("255.255.255.255", "not the address of one host"),
            ("0.0.0.0", "not the address of one host"),
            ("224.0.0.5", "not the address of one host"),
        ] {
            let e = check_gateway_address(bad.parse().unwrap(), &host_b).unwrap_err();
            let e = e.to_string();
            assert!(e.contains(why) && e.contains(bad), "{bad}: {e}");
        }
        for good in ["198.18.1.1", "198.18.1.254", "203.0.113.7"] {
            check_gateway_address(good.parse().unwrap(), &host_b).unwrap();
        }
        let point_to_point = HostConfig {
            prefix_len: 31,
            ip: Ipv4Addr::new(198, 18, 1, 0),
            ..host_b.clone()
        };
        check_gateway_address(Ipv4Addr::new(198, 18, 1, 1), &point_to_point).unwrap();
    }

    #[test]
    fn keys_are_written_to_no_file_but_the_named_one() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let dir = std::env::temp_dir().join(format!("lr-keys-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir(&dir).unwrap();
        let victim = dir.join("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o644)).unwrap();
        let link = dir.join("keys.link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let hard = dir.join("keys.hard");
        std::fs::hard_link(&victim, &hard).unwrap();
        for (path, why) in [(&link, "symbolic link"), (&hard, "hard links")] {
            for append in [false, true] {
                let e = open_private(path, append).unwrap_err().to_string();
                assert!(e.contains(why), "{}: {e}", path.display());
            }
            let e = write_private(path, "keys\n").unwrap_err().to_string();
            assert!(e.contains(why), "{e}");
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        let meta = std::fs::metadata(&victim).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o644, "the victim's mode untouched");
        std::fs::remove_file(&hard).unwrap();
        let own = dir.join("keys");
        std::fs::write(&own, "old and longer\n").unwrap();
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o644)).unwrap();
        write_private(&own, "sa 1\n").unwrap();
        {
            use std::io::Write;
            let mut f = open_private(&own, true).unwrap();
            f.write_all(b"sa 2\n").unwrap();
        }
        assert_eq!(std::fs::read_to_string(&own).unwrap(), "sa 1\nsa 2\n");
        assert_eq!(std::fs::metadata(&own).unwrap().mode() & 0o777, 0o600);
        let e = write_private(&dir, "keys\n").unwrap_err();
        assert!(!e.to_string().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_network_gives_its_host_address() {
        let n = Net::parse("198.19.1.0/24", "--remote-net").unwrap();
        assert_eq!(n.host(), Ipv4Addr::new(198, 19, 1, 2));
        assert_eq!(n.to_string(), "198.19.1.0/24");
        let h = Net::parse("198.19.1.77/24", "--remote-net").unwrap();
        assert_eq!(h.host(), Ipv4Addr::new(198, 19, 1, 77));
        assert_eq!(h.to_string(), "198.19.1.0/24");
        assert!(h.contains(Ipv4Addr::new(198, 19, 1, 250)));
        assert!(!h.contains(Ipv4Addr::new(198, 19, 2, 1)));
        for bad in ["198.19.1.0", "198.19.1.0/33", "x/24", "198.19.1.0/0"] {
            let e = Net::parse(bad, "--remote-net").unwrap_err();
            assert!(e.to_string().contains("--remote-net"), "{e}");
        }
    }

    /// Selectors as a gateway writes them.
    fn selectors(list: &[&str]) -> Vec<TrafficSelector> {
        list.iter()
            .map(|t| TrafficSelector::parse(t).unwrap())
            .collect()
    }

    /// Several selectors join to cover a range; a gap between them, or an
    /// end past them, is the first address left out.
    #[test]
    fn a_range_is_within_selectors_when_every_address_is() {
        let a = |t: &str| t.parse::<Ipv4Addr>().unwrap();
        let joined = selectors(&["198.19.1.0/25", "198.19.1.128-198.19.1.200"]);
        assert_eq!(
            first_outside(&joined, a("198.19.1.2"), a("198.19.1.200")),
            None
        );
        assert_eq!(
            first_outside(&joined, a("198.19.1.2"), a("198.19.1.201")),
            Some(a("198.19.1.201"))
        );
        let gap = selectors(&["198.19.1.0/26", "198.19.1.128/25"]);
        assert_eq!(
            first_outside(&gap, a("198.19.1.2"), a("198.19.1.250")),
            Some(a("198.19.1.64"))
        );
        let all = selectors(&["0.0.0.0/0"]);
        assert_eq!(
            first_outside(&all, a("255.255.255.0"), a("255.255.255.255")),
            None
        );
        assert_eq!(
            first_outside(&[], a("10.0.0.1"), a("10.0.0.1")),
            Some(a("10.0.0.1"))
        );
    }

    /// A gateway narrowed the selectors to 198.19.1.128/25 <-> 198.18.0.0/25
    /// (RFC 7296 §2.9): a `--range` of the test frames' addresses passes when
    /// all of it is inside, on the side the direction puts it (the source
    /// behind linerate when decrypting, the destination otherwise), and is
    /// refused in one line naming the range, the selectors and the fix
    /// when one end is outside.
    #[test]
    fn ranges_past_the_selectors_the_gateway_answered_are_refused() {
        let local = selectors(&["198.19.1.128/25"]);
        let remote = selectors(&["198.18.0.0/25"]);
        let (inner, lan) = (Ipv4Addr::new(198, 19, 1, 129), Ipv4Addr::new(198, 18, 0, 2));
        let check = |direction, range: &str, tunnel| {
            let plan = IpsecPlan {
                direction,
                ranges: vec![FieldRange::parse(range).unwrap()],
                ..IpsecPlan::default()
            };
            let frames = plan.frame_addresses(inner, lan);
            check_selectors(&local, &remote, &frames, tunnel).map_err(|e| e.to_string())
        };
        for (direction, behind, on_lan) in [
            (Direction::Decrypt, "src-ip", "dst-ip"),
            (Direction::Encrypt, "dst-ip", "src-ip"),
            (Direction::Both, "dst-ip", "src-ip"),
        ] {
            for ok in [
                format!("{behind}=198.19.1.128..198.19.1.255"),
                format!("{on_lan}=198.18.0.2..198.18.0.127/random"),
                // The other field is no address on a tunnel's side.
                "src-port=1000..2000".to_string(),
            ] {
                check(direction, &ok, None).unwrap_or_else(|e| panic!("{direction:?} {ok}: {e}"));
            }
            for (bad, out, within) in [
                (
                    format!("{behind}=198.19.1.100..198.19.1.200"),
                    "198.19.1.100 behind linerate",
                    "198.19.1.128/25",
                ),
                (
                    format!("{behind}=198.19.1.200..198.19.2.5"),
                    "198.19.2.0 behind linerate",
                    "198.19.1.128/25",
                ),
                (
                    format!("{on_lan}=198.18.0.2..198.18.0.200"),
                    "198.18.0.128 on the gateway's LAN",
                    "198.18.0.0/25",
                ),
                // Descending, as --range may be written.
                (
                    format!("{on_lan}=198.18.0.1..198.18.0.254/dec"),
                    "198.18.0.128 on the gateway's LAN",
                    "198.18.0.0/25",
                ),
            ] {
                let e = check(direction, &bad, Some(2)).unwrap_err();
                let range = bad.split('/').next().unwrap();
                for word in [
                    format!("tunnel 3: --range {range} reaches past the traffic selectors the gateway answered, 198.19.1.128/25 <-> 198.18.0.0/25 (RFC 7296 §2.9)"),
                    format!("its address {out} is outside {within}; keep the range within {within}"),
                ] {
                    assert!(e.contains(&word), "{direction:?} {bad}: '{word}' not in: {e}");
                }
                assert!(!e.contains('\n'), "{e}");
            }
        }
        // The test frames' own address is checked first.
        let plan = IpsecPlan::default();
        let frames = plan.frame_addresses(Ipv4Addr::new(198, 19, 1, 2), lan);
        let e = check_selectors(&local, &remote, &frames, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("leave out the test frames' address 198.19.1.2 behind linerate"),
            "{e}"
        );
    }

    fn plan(timeout: Option<Duration>) -> IpsecPlan {
        IpsecPlan {
            ipsec_timeout: timeout,
            ..IpsecPlan::default()
        }
    }

    /// The schedule ends at the timeout given: the tries that fit with a
    /// first wait of 0.5 s or more, doubling.
    #[test]
    fn an_ipsec_timeout_gives_a_schedule_that_ends_then() {
        let total = |r: Retransmit| r.timeout * ((1u32 << r.tries) - 1);
        assert_eq!(plan(None).retransmit(), Retransmit::default());
        let ms = Duration::from_millis;
        for (timeout, tries) in [
            (ms(100), 1),
            (ms(1000), 1),
            (ms(2000), 2),
            (ms(15_500), 5),
            (ms(60_000), 6),
            (ms(3_600_000), 8),
        ] {
            let r = plan(Some(timeout)).retransmit();
            assert_eq!(r.tries, tries, "{timeout:?}");
            assert!(r.timeout >= FIRST_WAIT || tries == 1, "{timeout:?}: {r:?}");
            let off = total(r).abs_diff(timeout);
            assert!(off < ms(1), "{timeout:?}: {r:?} ends at {:?}", total(r));
        }
        // 15.5 s is the default schedule itself.
        assert_eq!(plan(Some(ms(15_500))).retransmit(), Retransmit::default());
    }

    #[test]
    fn the_encapsulation_follows_the_choice_or_is_refused() {
        let gw = Ipv4Addr::new(198, 19, 0, 1);
        assert_eq!(EspEncap::Udp.outcome(true, gw).unwrap(), ESP_IN_UDP);
        assert_eq!(
            EspEncap::Raw.outcome(false, gw).unwrap(),
            Encapsulation::Raw
        );
        assert_eq!(EspEncap::Auto.outcome(true, gw).unwrap(), ESP_IN_UDP);
        assert_eq!(
            EspEncap::Auto.outcome(false, gw).unwrap(),
            Encapsulation::Raw
        );
        let e = EspEncap::Raw.outcome(true, gw).unwrap_err().to_string();
        assert!(
            e.contains("NAT") && e.contains("198.19.0.1") && e.contains("--esp-encap udp"),
            "{e}"
        );
        let e = EspEncap::Udp.outcome(false, gw).unwrap_err().to_string();
        assert!(e.contains("--esp-encap raw"), "{e}");
        for e in [EspEncap::Udp, EspEncap::Raw, EspEncap::Auto] {
            assert_eq!(EspEncap::parse(e.name()), Some(e));
            assert!(EspEncap::Udp.forces_udp() && !EspEncap::Raw.forces_udp());
        }
        assert_eq!(EspEncap::parse("bogus"), None);
    }

    #[test]
    fn identities_are_read_as_strongswan_writes_them() {
        assert_eq!(
            IpsecPlan::identity("10.0.0.1"),
            Identity::Ipv4(Ipv4Addr::new(10, 0, 0, 1))
        );
        assert_eq!(
            IpsecPlan::identity("@gw.example"),
            Identity::Fqdn("gw.example".into())
        );
        assert_eq!(
            IpsecPlan::identity("me@example.com"),
            Identity::Rfc822("me@example.com".into())
        );
    }
}
