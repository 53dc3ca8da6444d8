//! `vpn-gateway[:suite]`: the lab's one DUT as an IPsec VPN gateway whose
//! peer is the tester (the LANCOM techpaper's set-up: the tester on the
//! gateway's LAN side, and on its WAN side the gateway's VPN peer).
//!
//! ```text
//!  lr-<n>-a               lr-<n>-dut                        lr-<n>-b
//!  a0 ---------- dut-a [VPN gateway: charon] dut-b ---------- b0
//!  198.18.0.2    198.18.0.1/24       198.19.0.1/24      198.19.0.2 (the peer)
//!  (the LAN)                 ipsec0 (TUN)               198.19.1.0/24 behind it
//! ```
//!
//! strongSwan's charon runs in the DUT namespace as an IKEv2 *responder*
//! (it never initiates: the tester does): local address 198.19.0.1, peer
//! 198.19.0.2, pre-shared key, CHILD_SA 198.18.0.0/24 (the LAN) <->
//! 198.19.1.0/24 (the network the tester emulates behind port B), ESP with
//! exactly one suite, no MOBIKE, no rekeying, no DPD, no NAT keepalives:
//! nothing reaches port B from the gateway but answers and ESP.
//!
//! The data path is kernel-libipsec's, as for `tunnel:ipsec` (this kernel
//! has no ESP): once the CHILD_SA is up, charon routes 198.19.1.0/24 into
//! the TUN device `ipsec0` (routing table 220), encrypts in user space and
//! sends ESP in UDP (port 4500, RFC 3948) to the peer; ESP arriving on
//! port 4500 is decrypted by charon and written to `ipsec0`, from where
//! the kernel forwards it to the LAN. kernel-libipsec *requires* UDP
//! encapsulation: charon fakes its NAT detection hash, so the peer sees a
//! NAT at the gateway and moves IKE and ESP to port 4500. The TUN's MTU is
//! kernel-libipsec's fixed 1400 bytes (it has no setting for it).
//!
//! Until then the DUT has no route to 198.19.1.0/24 at all (no default
//! route): a test frame never leaves it in the clear. Clear packets *from*
//! 198.19.1.0/24 arriving on the WAN side are dropped by a counted
//! nftables rule, as the kernel's IPsec policy would (kernel-libipsec has
//! no policies).
//!
//! charon's private directory (as for `tunnel:ipsec`, its /run: 0700,
//! files 0600) holds the pre-shared key in a file of its own (`psk`) for
//! the tester to read; it goes, with charon, when the scenario is dropped.

use super::ipsec::{io_error, path_text, uri, Strongswan, TUN};
use super::tools::Daemons;
use super::{nft, vici};
use crate::link::{link_counters, link_info, LinkCounters};
use crate::sides::SIDES;
use crate::text::thousands;
use crate::{netns, Lab, LabError};
use linerate_esp::suite::{EspCipher, EspIntegrity};
use linerate_esp::EspSuite;
use linerate_helper::PrivateDir;
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// The gateway's LAN: tester port A's network.
pub const VPN_LAN: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 18, 0, 0), 24);
/// The protected remote network: behind the tester's port B, reached only
/// through the tunnel.
pub const VPN_REMOTE_NET: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 19, 1, 0), 24);
/// The test frames' address in [`VPN_REMOTE_NET`].
pub const VPN_INNER_ADDRESS: Ipv4Addr = Ipv4Addr::new(198, 19, 1, 2);
/// The outer addresses of the many peers `linerate tunnels` emulates on
/// port B: the gateway accepts IKE from any of them (besides 198.19.0.2)
/// and routes the range to port B (via 198.19.0.2 on `dut-b`, so the
/// gateway needs no neighbour entry per peer). 16,384 addresses.
pub const VPN_PEERS: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 19, 64, 0), 18);
/// The first of [`VPN_PEERS`] a tester uses.
pub const VPN_FIRST_PEER: Ipv4Addr = Ipv4Addr::new(198, 19, 64, 1);
/// The networks the many peers protect, each its own slice: the gateway's
/// remote traffic selector covers all of it (and [`VPN_REMOTE_NET`]), so a
/// peer's narrower TSi is accepted as it is. Never routed in the clear.
pub const VPN_TUNNEL_NETS: (Ipv4Addr, u8) = (Ipv4Addr::new(198, 19, 128, 0), 17);
/// The IKE proposals the gateway accepts, besides strongSwan's default;
/// the first is the one the tester is told to offer.
pub const VPN_IKE_PROPOSALS: [&str; 3] = [
    "aes256-sha256-modp2048",
    "aes128-sha256-x25519",
    "aes256-sha512-ecp256",
];
/// The connection's and the CHILD_SA's names in charon.
const CONNECTION: &str = "linerate";
const CHILD: &str = "lan";
/// The pre-shared key's file in charon's private directory.
const PSK_FILE: &str = "psk";
/// The gateway's WAN interface, towards port B (the peer).
const WAN_IF: &str = "dut-b";
/// charon's plugins: those of `tunnel:ipsec`, with x25519 and ECP from
/// openssl (there is no separate curve25519 plugin on Debian).
const PLUGINS: &str = "random nonce openssl kdf aes sha1 sha2 hmac gcm pem pkcs1 pubkey \
kernel-libipsec kernel-netlink socket-default vici";

/// What the tester needs to be the gateway's IPsec peer.
///
/// The tester initiates IKEv2 from `peer` (UDP 500) to `gateway`,
/// authenticates with the pre-shared key in `psk_file`, and asks for one
/// CHILD_SA in tunnel mode with traffic selectors TSi = `remote_net` (its
/// own side) and TSr = `local_net`, ESP `suite` without extended sequence
/// numbers. The gateway's identity is its address (ID_IPV4_ADDR
/// `gateway`); it accepts any identity from the peer. It fakes its NAT
/// detection hash (kernel-libipsec needs UDP encapsulation), so the peer
/// moves to UDP 4500 after IKE_SA_INIT and sends and receives ESP in UDP
/// (RFC 3948) on 4500 at both ends. It never initiates anything: no
/// rekeying, no DPD, no keepalives.
///
/// Test frames: from port A (198.18.0.2) to `inner_address`, which the
/// gateway sends to port B inside ESP; and from `inner_address` inside
/// ESP at port B to port A, which the gateway decrypts and forwards. Inner
/// IP packets up to `inner_mtu` bytes cross the gateway whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VpnPeer {
    /// The gateway's WAN address (the IKE responder): 198.19.0.1.
    pub gateway: Ipv4Addr,
    /// The peer's address, tester port B: 198.19.0.2.
    pub peer: Ipv4Addr,
    /// The pre-shared key: the file's bytes as they are (64 hexadecimal
    /// characters, used as text, no newline). Root only (0600, in a 0700
    /// directory under /run/linerate), removed when the scenario is
    /// dropped. Never printed.
    pub psk_file: PathBuf,
    /// The gateway's LAN (its local traffic selector): 198.18.0.0/24.
    pub local_net: (Ipv4Addr, u8),
    /// The protected network behind the peer (the gateway's remote traffic
    /// selector): 198.19.1.0/24.
    pub remote_net: (Ipv4Addr, u8),
    /// The test frames' address behind the tester: 198.19.1.2.
    pub inner_address: Ipv4Addr,
    /// The only ESP suite the gateway accepts.
    pub suite: EspSuite,
    /// The IKE proposal the tester should offer (strongSwan syntax).
    pub ike: String,
    /// The MTU of the gateway's TUN device: the largest inner IP packet it
    /// encrypts without fragmenting it first.
    pub inner_mtu: u32,
    /// Many peers (`linerate tunnels`): the outer addresses the gateway
    /// also accepts, routed to port B: [`VPN_PEERS`].
    pub peers: (Ipv4Addr, u8),
    /// The first address of `peers` a tester should use.
    pub first_peer: Ipv4Addr,
    /// The networks the many peers protect (each its own slice), inside
    /// the gateway's remote traffic selector: [`VPN_TUNNEL_NETS`].
    pub tunnel_nets: (Ipv4Addr, u8),
}

/// One CHILD_SA's counters as charon reports them (vici `list-sas`).
/// "in" is what the gateway received from the peer and decrypted, "out"
/// what it encrypted and sent to the peer; bytes are the inner IP packets'
/// (libipsec counts the payload of the ESP packets it handled).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SaCounters {
    /// The IKE_SA's connection name.
    pub ike_sa: String,
    /// The CHILD_SA's name as listed (its configuration name and its
    /// unique id, e.g. "lan-1" for the first).
    pub child_sa: String,
    /// charon's state name, INSTALLED when it carries traffic.
    pub state: String,
    /// The gateway's inbound SPI (the peer's outbound).
    pub spi_in: u32,
    /// The gateway's outbound SPI (the peer's inbound).
    pub spi_out: u32,
    /// The negotiated suite, when it is one of linerate's.
    pub suite: Option<EspSuite>,
    /// ESP in UDP (RFC 3948).
    pub encap: bool,
    pub bytes_in: u64,
    pub packets_in: u64,
    pub bytes_out: u64,
    pub packets_out: u64,
    pub local_ts: Vec<String>,
    pub remote_ts: Vec<String>,
}

impl SaCounters {
    /// "CHILD_SA lan-1 (SPI in 0xc1a2b3c4, out 0xc5d6e7f8)".
    pub fn name(&self) -> String {
        format!(
            "CHILD_SA {} (SPI in {:#010x}, out {:#010x})",
            self.child_sa, self.spi_in, self.spi_out
        )
    }
}

/// The suite of a CHILD_SA from charon's algorithm names (vici's
/// `encr-alg`, `encr-keysize`, `integ-alg`), if linerate has it.
fn suite_of(encr: &str, keysize: &str, integ: Option<&str>) -> Option<EspSuite> {
    let key_len = keysize.parse::<u16>().ok().map(|bits| (bits / 8) as u8);
    let cipher = match (encr, key_len) {
        ("AES_GCM_16", Some(key_len @ (16 | 32))) => EspCipher::AesGcm16 { key_len },
        ("AES_CBC", Some(key_len @ (16 | 24 | 32))) => EspCipher::AesCbc { key_len },
        ("3DES_CBC", _) => EspCipher::TripleDesCbc,
        ("DES_CBC", _) => EspCipher::DesCbc,
        ("NULL", _) => EspCipher::Null,
        _ => return None,
    };
    let integrity = match (cipher, integ) {
        (EspCipher::AesGcm16 { .. }, _) => EspIntegrity::Aead,
        (_, Some("HMAC_MD5_96")) => EspIntegrity::Md5,
        (_, Some("HMAC_SHA1_96")) => EspIntegrity::Sha1,
        (_, Some("HMAC_SHA2_256_128")) => EspIntegrity::Sha256,
        (_, Some("HMAC_SHA2_384_192")) => EspIntegrity::Sha384,
        (_, Some("HMAC_SHA2_512_256")) => EspIntegrity::Sha512,
        _ => return None,
    };
    Some(EspSuite { cipher, integrity })
}

/// The CHILD_SAs of one vici `list-sa` event.
pub(crate) fn sa_counters(event: &vici::Section) -> Vec<SaCounters> {
    let mut out = Vec::new();
    for (ike_name, ike) in event.sections() {
        let Some(children) = ike.section("child-sas") else {
            continue;
        };
        for (child_name, c) in children.sections() {
            let n = |key: &str| c.value(key).and_then(|v| v.parse().ok()).unwrap_or(0);
            let spi = |key: &str| {
                c.value(key)
                    .and_then(|v| u32::from_str_radix(v, 16).ok())
                    .unwrap_or(0)
            };
            out.push(SaCounters {
                ike_sa: ike_name.to_string(),
                child_sa: child_name.to_string(),
                state: c.value("state").unwrap_or_default().to_string(),
                spi_in: spi("spi-in"),
                spi_out: spi("spi-out"),
                suite: suite_of(
                    c.value("encr-alg").unwrap_or_default(),
                    c.value("encr-keysize").unwrap_or_default(),
                    c.value("integ-alg"),
                ),
                encap: c.value("encap") == Some("yes"),
                bytes_in: n("bytes-in"),
                packets_in: n("packets-in"),
                bytes_out: n("bytes-out"),
                packets_out: n("packets-out"),
                local_ts: c.list("local-ts").to_vec(),
                remote_ts: c.list("remote-ts").to_vec(),
            });
        }
    }
    out
}

/// `vpn-gateway:<suite>`: linerate's ESP suite names, and the lab's
/// aliases of `tunnel:ipsec` (aes-gcm, aes-cbc-sha256, aes-sha256).
pub(crate) fn parse_suite(text: &str) -> Option<EspSuite> {
    match text {
        "aes-gcm" => Some(EspSuite::Aes128Gcm16),
        "aes-cbc-sha256" | "aes-sha256" => Some(EspSuite::Aes128Sha256),
        _ => EspSuite::parse(text).ok(),
    }
}

pub(crate) fn net_text((addr, len): (Ipv4Addr, u8)) -> String {
    format!("{addr}/{len}")
}

/// charon's strongswan.conf: no NAT keepalives (the gateway would send
/// them to port B every 20 s), vici in the private /run; for many peers
/// (`linerate tunnels`) a hashed IKE_SA table (strongSwan's default is one
/// bucket, a linear search per message), 16 worker threads (its default,
/// written down), no limit on half-open or established IKE_SAs, and
/// cookies (RFC 7296 §2.6) demanded only above 1,000 half-open IKE_SAs
/// (its default is 10, which a window of many handshakes crosses at once).
fn strongswan_conf() -> String {
    format!(
        "charon {{\n  load = {PLUGINS}\n  install_virtual_ip = no\n  keep_alive = 0s\n  threads = 16\n  ikesa_table_size = 4096\n  ikesa_table_segments = 16\n  init_limit_half_open = 0\n  ikesa_limit = 0\n  cookie_threshold = 1000\n  plugins {{\n    vici {{\n      socket = unix:///run/charon.vici\n    }}\n  }}\n}}\n"
    )
}

/// The responder's connection and the key. `psk` is never logged: this
/// text goes only into a 0600 file.
fn swanctl_conf(gateway: Ipv4Addr, peer: Ipv4Addr, suite: EspSuite, psk: &str) -> String {
    let proposals = VPN_IKE_PROPOSALS.join(", ");
    format!(
        "connections {{
  {CONNECTION} {{
    version = 2
    local_addrs = {gateway}
    remote_addrs = {peer}, {peers}
    proposals = {proposals}, default
    mobike = no
    encap = yes
    dpd_delay = 0s
    rekey_time = 0s
    reauth_time = 0s
    local {{
      auth = psk
      id = {gateway}
    }}
    remote {{
      auth = psk
      id = %any
    }}
    children {{
      {CHILD} {{
        local_ts = {lan}
        remote_ts = {remote}, {tunnel_nets}
        esp_proposals = {esp}
        mode = tunnel
        start_action = none
        close_action = none
        dpd_action = none
        rekey_time = 0s
        rekey_bytes = 0
        rekey_packets = 0
      }}
    }}
  }}
}}
secrets {{
  ike-{CONNECTION} {{
    secret = \"{psk}\"
  }}
}}
",
        lan = net_text(VPN_LAN),
        remote = net_text(VPN_REMOTE_NET),
        peers = net_text(VPN_PEERS),
        tunnel_nets = net_text(VPN_TUNNEL_NETS),
        esp = suite.name(),
    )
}

/// The interface `ns` routes `addr` through, or None when it has no route.
fn route_dev(ns: &str, addr: Ipv4Addr) -> Result<Option<String>, LabError> {
    match netns::ip_json(&["-n", ns, "route", "get", &addr.to_string()]) {
        Ok(route) => Ok(route[0]["dev"].as_str().map(str::to_string)),
        Err(LabError::Command { stderr, .. }) if stderr.contains("unreachable") => Ok(None),
        Err(e) => Err(e),
    }
}

fn not_in_effect(detail: String) -> LabError {
    LabError::NotInEffect {
        scenario: String::new(),
        detail,
    }
}

/// The running gateway: charon with its private directory, and what the
/// tester needs.
pub(crate) struct Gateway {
    pub(crate) peer: VpnPeer,
    socket: PathBuf,
    netns: String,
    pub(crate) check: String,
    pub(crate) data_path: String,
    before: LinkCounters,
    /// charon and its directory (the key's too): gone on drop.
    daemons: Daemons,
}

/// Builds the gateway on `lab`'s DUT and reads it back.
pub(crate) fn build(lab: &Lab, suite: EspSuite) -> Result<Gateway, LabError> {
    let strongswan = Strongswan::find()?;
    let ns = lab.dut_netns().to_string();
    let [lan_side, wan_side] = &SIDES;
    let (gateway, peer) = (wan_side.dut_ip, wan_side.tester_ip);
    // The lab's routing as the gateway needs it: ARP and IKE reach both
    // tester ports directly, and nothing reaches the protected network.
    for (addr, dev) in [
        (lan_side.tester_ip, lan_side.dut_if),
        (peer, wan_side.dut_if),
    ] {
        let got = route_dev(&ns, addr)?;
        if got.as_deref() != Some(dev) {
            return Err(not_in_effect(format!(
                "the gateway routes {addr} via {got:?}, not {dev}"
            )));
        }
    }
    if let Some(dev) = route_dev(&ns, VPN_INNER_ADDRESS)? {
        return Err(not_in_effect(format!(
            "the gateway routes {VPN_INNER_ADDRESS} via {dev} before any tunnel: it would reach the protected network in the clear"
        )));
    }
    // The many peers' outer addresses: routed to port B through its one
    // address, which the gateway has a neighbour entry for.
    netns::ip(&[
        "-n",
        &ns,
        "route",
        "add",
        &net_text(VPN_PEERS),
        "via",
        &peer.to_string(),
        "dev",
        wan_side.dut_if,
    ])?;
    let got = route_dev(&ns, VPN_FIRST_PEER)?;
    if got.as_deref() != Some(wan_side.dut_if) {
        return Err(not_in_effect(format!(
            "the gateway routes the peers' {VPN_FIRST_PEER} via {got:?}, not {}",
            wan_side.dut_if
        )));
    }

    let psk = linerate_helper::random_hex(32).map_err(|e| LabError::Spawn {
        command: "getrandom (the pre-shared key)".into(),
        error: e.to_string(),
    })?;
    let private = PrivateDir::new(&format!("vpn-{ns}")).map_err(|e| LabError::Spawn {
        command: format!("making charon's directory in {}", linerate_helper::RUN_DIR),
        error: e.to_string(),
    })?;
    let dir = private.path().to_path_buf();
    let mut psk_file = PathBuf::new();
    for (name, text) in [
        (PSK_FILE, psk.clone()),
        ("strongswan.conf", strongswan_conf()),
        ("swanctl.conf", swanctl_conf(gateway, peer, suite, &psk)),
    ] {
        let path = private
            .write(name, text.as_bytes())
            .map_err(|e| io_error(&dir, e))?;
        if name == PSK_FILE {
            psk_file = path;
        }
    }
    drop(psk);
    let mut daemons = Daemons::default();
    let socket = strongswan.start(&ns, private, &lab.placement().dut_cpus, &mut daemons)?;
    let conf = path_text(&dir.join("swanctl.conf"));
    strongswan.swanctl(&["--load-all", "--file", &conf, "--uri", &uri(&socket)])?;

    // Read back: the connection as charon holds it.
    let conns = vici::stream(&socket, "list-conns", "list-conn").map_err(not_in_effect)?;
    let conn = conns
        .iter()
        .find_map(|c| c.section(CONNECTION))
        .ok_or_else(|| not_in_effect(format!("charon lists no connection '{CONNECTION}'")))?;
    let child = conn
        .section("children")
        .and_then(|c| c.section(CHILD))
        .ok_or_else(|| {
            not_in_effect(format!("connection '{CONNECTION}' has no child '{CHILD}'"))
        })?;
    let expected = (
        [gateway.to_string()],
        [peer.to_string(), net_text(VPN_PEERS)],
        [net_text(VPN_LAN)],
        [net_text(VPN_REMOTE_NET), net_text(VPN_TUNNEL_NETS)],
    );
    let seen = (
        conn.list("local_addrs"),
        conn.list("remote_addrs"),
        child.list("local-ts"),
        child.list("remote-ts"),
    );
    if seen.0 != expected.0 || seen.1 != expected.1 || seen.2 != expected.2 || seen.3 != expected.3
    {
        return Err(not_in_effect(format!(
            "charon holds connection '{CONNECTION}' as {:?} -> {:?}, {:?} <-> {:?}, not as loaded",
            seen.0, seen.1, seen.2, seen.3
        )));
    }
    let sas = vici::stream(&socket, "list-sas", "list-sa").map_err(not_in_effect)?;
    if !sas.iter().all(|e| sa_counters(e).is_empty()) {
        return Err(not_in_effect(
            "charon has a CHILD_SA before the peer initiated one".into(),
        ));
    }
    // kernel-libipsec's TUN, and its MTU (read, not assumed).
    let tun = link_info(&ns, TUN)
        .map_err(|e| not_in_effect(format!("kernel-libipsec made no {TUN} device in {ns}: {e}")))?;
    let inner_mtu = tun["mtu"].as_u64().unwrap_or(0) as u32;
    nft::vpn_clear_drop(&ns, &net_text(VPN_REMOTE_NET), WAN_IF)?;
    // Still no route to the protected network: only a CHILD_SA adds one.
    if let Some(dev) = route_dev(&ns, VPN_INNER_ADDRESS)? {
        return Err(not_in_effect(format!(
            "the gateway routes {VPN_INNER_ADDRESS} via {dev} before the peer initiated"
        )));
    }
    let pid = daemons.pids().first().copied().unwrap_or_default();
    let check = format!(
        "IPsec gateway: charon (pid {pid}) in {ns} waits as IKEv2 responder on {gateway} for {peer} (and the peers of {} routed to it), PSK; connection read back over vici: {} <-> {}, ESP {} only; {TUN} up (MTU {inner_mtu}); no route to {} before a CHILD_SA (ip route get {VPN_INNER_ADDRESS}: unreachable); clear packets from it on {WAN_IF} dropped (nftables, read back)",
        net_text(VPN_PEERS),
        net_text(VPN_LAN),
        net_text(VPN_REMOTE_NET),
        suite.name(),
        net_text(VPN_REMOTE_NET),
    );
    let data_path = format!(
        "user-space IPsec gateway: strongSwan charon with kernel-libipsec, ESP {} in user space over the {TUN} TUN device (MTU {inner_mtu}), in UDP on port 4500, to the tester's port B as the peer; far slower than a kernel or hardware IPsec gateway",
        suite.name()
    );
    Ok(Gateway {
        peer: VpnPeer {
            gateway,
            peer,
            psk_file,
            local_net: VPN_LAN,
            remote_net: VPN_REMOTE_NET,
            inner_address: VPN_INNER_ADDRESS,
            suite,
            ike: VPN_IKE_PROPOSALS[0].to_string(),
            inner_mtu,
            peers: VPN_PEERS,
            first_peer: VPN_FIRST_PEER,
            tunnel_nets: VPN_TUNNEL_NETS,
        },
        socket,
        before: link_counters(&ns, WAN_IF)?,
        netns: ns,
        check,
        data_path,
        daemons,
    })
}

impl Gateway {
    /// charon's process id.
    pub(crate) fn pids(&self) -> Vec<u32> {
        self.daemons.pids()
    }

    /// The WAN interface's counters (dut-b: towards the peer).
    pub(crate) fn wan_counters(&self) -> Result<LinkCounters, LabError> {
        link_counters(&self.netns, WAN_IF)
    }

    /// Every CHILD_SA charon has, with its counters.
    pub(crate) fn counters(&self) -> Result<Vec<SaCounters>, LabError> {
        let events =
            vici::stream(&self.socket, "list-sas", "list-sa").map_err(|e| LabError::Command {
                command: format!("vici list-sas on {}", self.socket.display()),
                stderr: e,
            })?;
        Ok(events.iter().flat_map(sa_counters).collect())
    }

    /// After traffic: a CHILD_SA of the configured suite carried packets,
    /// the protected network is routed into the tunnel only, and no clear
    /// packet from it came in. One sentence per check.
    pub(crate) fn traffic_seen(&self) -> Result<Vec<String>, String> {
        let all = self.counters().map_err(|e| e.to_string())?;
        let installed: Vec<&SaCounters> = all
            .iter()
            .filter(|s| s.ike_sa == CONNECTION && s.state == "INSTALLED")
            .collect();
        if installed.is_empty() {
            return Err(format!(
                "the gateway has no CHILD_SA installed (vici list-sas): the peer never brought the tunnel up, so no test frame crossed it{}",
                if all.is_empty() { String::new() } else { format!(" ({} other CHILD_SAs listed)", all.len()) }
            ));
        }
        let used: Vec<&&SaCounters> = installed
            .iter()
            .filter(|s| s.packets_in + s.packets_out > 0)
            .collect();
        if used.is_empty() {
            let names: Vec<String> = installed.iter().map(|s| s.name()).collect();
            return Err(format!(
                "{}: 0 packets in, 0 out: no traffic went through the tunnel",
                names.join(", ")
            ));
        }
        let mut seen = Vec::new();
        for sa in used {
            if sa.suite != Some(self.peer.suite) {
                return Err(format!(
                    "{} uses {}, not ESP {}",
                    sa.name(),
                    sa.suite
                        .map_or("a suite linerate does not know", |s| s.name()),
                    self.peer.suite.name()
                ));
            }
            seen.push(format!(
                "{}: {} packets in ({} bytes), {} out ({} bytes) (ESP {}, {})",
                sa.name(),
                thousands(sa.packets_in),
                thousands(sa.bytes_in),
                thousands(sa.packets_out),
                thousands(sa.bytes_out),
                self.peer.suite.name(),
                if sa.encap {
                    "UDP-encapsulated"
                } else {
                    "raw ESP"
                }
            ));
        }
        match route_dev(&self.netns, VPN_INNER_ADDRESS).map_err(|e| e.to_string())? {
            Some(dev) if dev == TUN => {}
            other => {
                return Err(format!(
                    "the gateway routes {VPN_INNER_ADDRESS} via {other:?}, not {TUN}"
                ))
            }
        }
        let clear = nft::vpn_clear_count(&self.netns).map_err(|e| e.to_string())?;
        if clear > 0 {
            return Err(format!(
                "{} clear packets from {} arrived on {WAN_IF} (dropped by the gateway's policy): the peer sent outside the tunnel",
                thousands(clear),
                net_text(VPN_REMOTE_NET)
            ));
        }
        let now = self.wan_counters().map_err(|e| e.to_string())?;
        seen.push(format!(
            "{VPN_INNER_ADDRESS} routed into {TUN} only; no clear packet from {} on {WAN_IF}; {WAN_IF} sent {} packets, received {} since the gateway started",
            net_text(VPN_REMOTE_NET),
            thousands(now.tx_packets - self.before.tx_packets),
            thousands(now.rx_packets - self.before.rx_packets),
        ));
        Ok(seen)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suites_parse_with_the_labs_aliases() {
        assert_eq!(parse_suite("aes128gcm16"), Some(EspSuite::Aes128Gcm16));
        assert_eq!(parse_suite("aes-gcm"), Some(EspSuite::Aes128Gcm16));
        assert_eq!(parse_suite("aes-cbc-sha256"), Some(EspSuite::Aes128Sha256));
        assert_eq!(parse_suite("aes-sha256"), Some(EspSuite::Aes128Sha256));
        for (name, suite) in EspSuite::names().zip(EspSuite::ALL) {
            assert_eq!(parse_suite(name), Some(suite));
        }
        assert_eq!(parse_suite("null"), None);
        assert_eq!(parse_suite(""), None);
    }

    #[test]
    fn the_responder_offers_one_esp_suite_and_never_initiates() {
        let text = swanctl_conf(
            Ipv4Addr::new(198, 19, 0, 1),
            Ipv4Addr::new(198, 19, 0, 2),
            EspSuite::Aes256Sha512,
            "k3y",
        );
        for needle in [
            "local_addrs = 198.19.0.1",
            "remote_addrs = 198.19.0.2, 198.19.64.0/18\n",
            "proposals = aes256-sha256-modp2048, aes128-sha256-x25519, aes256-sha512-ecp256, default",
            "esp_proposals = aes256-sha512\n",
            "local_ts = 198.18.0.0/24",
            "remote_ts = 198.19.1.0/24, 198.19.128.0/17\n",
            "mobike = no",
            "start_action = none",
            "rekey_time = 0s",
            "dpd_delay = 0s",
            "secret = \"k3y\"",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        assert_eq!(text.matches("esp_proposals").count(), 1);
        let conf = strongswan_conf();
        for needle in [
            "keep_alive = 0s",
            "ikesa_table_size = 4096",
            "cookie_threshold = 1000",
        ] {
            assert!(conf.contains(needle), "{needle}: {conf}");
        }
    }

    #[test]
    fn child_sa_counters_come_from_list_sa_events() {
        use vici::{Item, Section};
        let v = |k: &str, x: &str| (k.to_string(), Item::Value(x.to_string()));
        let l = |k: &str, x: &str| (k.to_string(), Item::List(vec![x.to_string()]));
        let child = Section(vec![
            v("state", "INSTALLED"),
            v("encap", "yes"),
            v("spi-in", "c1a2b3c4"),
            v("spi-out", "0000abcd"),
            v("encr-alg", "AES_GCM_16"),
            v("encr-keysize", "128"),
            v("bytes-in", "1280000"),
            v("packets-in", "10000"),
            v("bytes-out", "0"),
            v("packets-out", "0"),
            l("local-ts", "198.18.0.0/24"),
            l("remote-ts", "198.19.1.0/24"),
        ]);
        let ike = Section(vec![
            v("state", "ESTABLISHED"),
            (
                "child-sas".into(),
                Item::Section(Section(vec![("lan-1".into(), Item::Section(child))])),
            ),
        ]);
        let event = Section(vec![("linerate".into(), Item::Section(ike))]);
        let sas = sa_counters(&event);
        assert_eq!(sas.len(), 1);
        let sa = &sas[0];
        assert_eq!((sa.spi_in, sa.spi_out), (0xc1a2b3c4, 0xabcd));
        assert_eq!(sa.suite, Some(EspSuite::Aes128Gcm16));
        assert_eq!((sa.packets_in, sa.bytes_in), (10_000, 1_280_000));
        assert!(sa.encap);
        assert_eq!(sa.remote_ts, ["198.19.1.0/24"]);
        assert_eq!(
            sa.name(),
            "CHILD_SA lan-1 (SPI in 0xc1a2b3c4, out 0x0000abcd)"
        );
        assert_eq!(
            suite_of("AES_CBC", "256", Some("HMAC_SHA2_512_256")),
            Some(EspSuite::Aes256Sha512)
        );
        assert_eq!(
            suite_of("3DES_CBC", "", Some("HMAC_MD5_96")),
            Some(EspSuite::TripleDesMd5)
        );
        assert_eq!(suite_of("AES_CBC", "128", Some("AES_XCBC_96")), None);
        assert_eq!(suite_of("CAMELLIA_CBC", "128", Some("HMAC_SHA1_96")), None);
    }
}
