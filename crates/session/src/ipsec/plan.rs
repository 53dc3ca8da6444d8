//! `--ipsec`'s plan: the values a run is given (gateway, networks,
//! suites, identities, encapsulation, rekeys, tunnels), checked where no
//! machine is needed, and the slices of the network behind linerate that
//! `--tunnels N` gives each tunnel.

use super::selectors::FrameAddresses;
use crate::error::{bail, err, Result};
use linerate_engine::ipsec::TunnelMap;
use linerate_engine::ipsec::ESP_IN_UDP;
use linerate_esp::Encapsulation;
use linerate_esp::EspSuite;
use linerate_ike::{Identity, IkeProposals, Retransmit, TrafficSelector};
use linerate_results::ipsec::Direction;
use linerate_results::report::thousands;
use linerate_wire::cidr::Cidr;
use linerate_wire::flows::{Field, FieldRange};
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::time::Duration;

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
        match text.parse::<Cidr>() {
            Ok(Cidr {
                addr: IpAddr::V4(address),
                prefix_len: prefix_len @ 1..,
            }) => Ok(Net {
                address,
                prefix_len,
            }),
            _ => Err(bad()),
        }
    }

    pub(super) fn mask(self) -> u32 {
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
    pub peer_addrs: Option<PeerAddrs>,
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

/// How often linerate rekeys each tunnel's SAs itself (`--rekey`,
/// `--rekey-ike`); None: only when the gateway asks.
#[derive(Debug, Clone, Copy, Default)]
pub struct Every {
    pub child: Option<Duration>,
    pub ike: Option<Duration>,
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

/// The range of outer addresses the emulated peers take (`--peer-addrs`),
/// parsed once when the plan is made; how many of them a run takes is
/// known only with its tunnel count ([`PeerAddrs::take`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerAddrs {
    /// As the user wrote it, for messages.
    text: String,
    first: u32,
    last: u32,
}

impl PeerAddrs {
    /// `FIRST` (and upward), `FIRST-LAST`, or a network `ADDRESS/PREFIX`
    /// (its own and its broadcast address skipped below /31).
    pub fn parse(text: &str) -> Result<PeerAddrs> {
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
        Ok(PeerAddrs {
            text: text.to_string(),
            first,
            last,
        })
    }

    /// From `first` upward (port B's own address, the lab gateway's peer
    /// range).
    pub fn from_first(first: Ipv4Addr) -> PeerAddrs {
        PeerAddrs {
            text: first.to_string(),
            first: u32::from(first),
            last: u32::MAX,
        }
    }

    /// The first `count` addresses, or a one-line refusal naming
    /// `count_option` (which asked for them) when the range is smaller.
    pub fn take(&self, count: usize, count_option: &str) -> Result<Vec<Ipv4Addr>> {
        let available = u64::from(self.last) - u64::from(self.first) + 1;
        if available < count as u64 {
            bail!(BadInput,
                "--peer-addrs {} holds {} addresses, fewer than the {} tunnels of {count_option}: give a larger range or a smaller {count_option}",
                self.text,
                thousands(available),
                thousands(count as u64)
            );
        }
        Ok((0..count as u32)
            .map(|i| Ipv4Addr::from(self.first + i))
            .collect())
    }
}

impl std::fmt::Display for PeerAddrs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
