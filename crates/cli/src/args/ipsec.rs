//! `--ipsec` and its options: port B is the VPN peer of the gateway (every
//! packet command has them, through `PortArgs`).

use clap::Args;
use linerate_session::error::{bail, err, Result};
use linerate_session::ipsec::{Direction, EspEncap, IpsecPlan, Net};
use std::path::PathBuf;

#[derive(Args, Debug, Clone, Default)]
pub struct IpsecArgs {
    /// Port B is the IPsec peer of the gateway (IKEv2 with a pre-shared key, ESP in UDP 4500): linerate encrypts what it sends there and decrypts what it receives, so the gateway's own encryption and decryption throughput is measured. Port A is the gateway's LAN side. In the lab: --scenario vpn-gateway.
    #[arg(long)]
    pub ipsec: bool,
    /// The pre-shared key, in a file only its owner can read (chmod 600); never on the command line, where ps shows it.
    #[arg(long, value_name = "FILE")]
    pub psk_file: Option<PathBuf>,
    /// The network linerate emulates behind itself, which the tunnel protects; the test frames come from its second address, or from the one given (198.19.1.0/24 or 198.19.1.7/24).
    #[arg(long, value_name = "CIDR")]
    pub remote_net: Option<String>,
    /// The gateway's protected LAN (default: port A's subnet).
    #[arg(long, value_name = "CIDR")]
    pub local_net: Option<String>,
    /// The gateway's IKE address when it is not --gw-b.
    #[arg(long, value_name = "ADDR")]
    pub ipsec_gateway: Option<std::net::Ipv4Addr>,
    /// IKE proposals in strongSwan's syntax, comma-separated: aes256-sha256-modp2048, aes128-sha256-x25519, aes256-sha512-ecp256 (aes128/aes256, sha1/sha256/sha512, modp2048/ecp256/x25519). Default: aes256-sha256-modp2048 and its strongSwan companions.
    #[arg(long, value_name = "PROPOSAL")]
    pub ike: Option<String>,
    /// The ESP suite of the CHILD_SA: aes128gcm16, aes256gcm16, or CIPHER-INTEGRITY with CIPHER aes128, aes192, aes256, 3des, des or null and INTEGRITY md5, sha1, sha256, sha384 or sha512 (aes128-sha256, 3des-md5). Default: aes256gcm16 (in the lab: the scenario's).
    #[arg(long, value_name = "SUITE")]
    pub esp: Option<String>,
    /// linerate's IKE identity when the gateway wants another than its address: an address, @fqdn or user@domain.
    #[arg(long, value_name = "ID")]
    pub ipsec_id: Option<String>,
    /// The identity the gateway must show.
    #[arg(long, value_name = "ID")]
    pub ipsec_remote_id: Option<String>,
    /// Write the negotiated ESP keys to this file in Wireshark's esp_sa format (mode 0600, replaced if it exists), so a capture of the WAN side decrypts in Wireshark (Preferences > Protocols > ESP, or copy it to the profile's esp_sa file).
    #[arg(long, value_name = "FILE")]
    pub esp_keys: Option<PathBuf>,
    /// Which way the test frames cross the tunnel: decrypt (port B -> A: linerate encrypts, the gateway decrypts), encrypt (A -> B: the gateway encrypts, linerate decrypts) or both (each half the rate).
    #[arg(long, value_name = "encrypt|decrypt|both")]
    pub direction: Option<String>,
    /// Rekey each tunnel's CHILD_SA every DURATION while the test runs (e.g. 2s; spread evenly over the tunnels): the report gives the rekeys, the frames lost and the time blocked per rekey. Rekeys the gateway starts are answered and followed either way.
    #[arg(long, value_name = "DURATION")]
    pub rekey: Option<String>,
    /// Rekey each tunnel's IKE SA every DURATION while the test runs (e.g. 5s; spread evenly over the tunnels), beside or without --rekey: a new Diffie-Hellman exchange and IKE keys, the CHILD_SAs and the data path untouched. The report counts them apart. The gateway's own IKE SA rekeys are answered either way.
    #[arg(long, value_name = "DURATION")]
    pub rekey_ike: Option<String>,
    /// How ESP travels to the gateway: udp (the default: ESP in UDP 4500, forced by faked NAT detection; works through a NAT), raw (IP protocol 50, as gateways use with no NAT between; refused if the gateway still negotiates UDP) or auto (whatever NAT detection finds).
    #[arg(long, value_name = "udp|raw|auto")]
    pub esp_encap: Option<String>,
    /// How long to wait for the gateway's answer to an IKE request (retransmitted with back-off meanwhile) before failing with "no answer", e.g. 2s. Default: 15.5s (5 tries from 0.5s, doubling).
    #[arg(long, value_name = "DURATION")]
    pub ipsec_timeout: Option<String>,
}

impl IpsecArgs {
    /// The IPsec plan: with `--ipsec`, or in the lab with a scenario (which
    /// may make the DUT a VPN gateway and fill in the rest). An IPsec
    /// option without either was refused before (`PortArgs::rules`).
    pub fn plan(&self, lab: bool, scenario: bool) -> Result<Option<IpsecPlan>> {
        let given = self.given();
        if !self.ipsec && !scenario {
            return Ok(None);
        }
        if self.ipsec && lab && !scenario {
            bail!(
                BadInput,
                "--ipsec in the lab needs a DUT that is a VPN gateway: add --scenario vpn-gateway"
            );
        }
        if !self.ipsec && given.is_empty() {
            return Ok(None);
        }
        let plan = self.values()?;
        if lab && plan.esp_encap == EspEncap::Raw {
            bail!(BadInput, "--esp-encap raw: the lab's VPN gateway (strongSwan with kernel-libipsec, this kernel has no ESP) does ESP in UDP 4500 only; leave --esp-encap out or give udp");
        }
        Ok(Some(plan))
    }

    /// The options' values, each checked (`linerate tunnels` takes them
    /// without `--ipsec`: every peer it emulates is an IPsec peer).
    pub fn values(&self) -> Result<IpsecPlan> {
        let net = |text: &Option<String>, option| {
            text.as_deref().map(|t| Net::parse(t, option)).transpose()
        };
        let esp = self
            .esp
            .as_deref()
            .map(|t| t.parse().map_err(|e| err!(BadInput, "--esp: {e}")))
            .transpose()?;
        let ike = self
            .ike
            .as_deref()
            .map(|t| linerate_ike::IkeProposals::parse(t).map_err(|e| err!(BadInput, "--ike: {e}")))
            .transpose()?;
        let direction = match self.direction.as_deref() {
            None => Direction::Decrypt,
            Some(t) => Direction::parse(t).ok_or_else(|| {
                err!(
                    BadInput,
                    "--direction {t} is not a direction: use encrypt, decrypt or both"
                )
            })?,
        };
        for (id, option) in [
            (&self.ipsec_id, "--ipsec-id"),
            (&self.ipsec_remote_id, "--ipsec-remote-id"),
        ] {
            if let Some(text) = id {
                linerate_session::ipsec::check_identity(text, option)?;
            }
        }
        let local_id = self.ipsec_id.as_deref().map(IpsecPlan::identity);
        // A bad template ({id}, a brace left open) is refused here, before
        // any lab or port is touched.
        linerate_session::peers::check_id_template(local_id.as_ref())?;
        Ok(IpsecPlan {
            gateway: self.ipsec_gateway,
            psk_file: self.psk_file.clone(),
            remote_net: net(&self.remote_net, "--remote-net")?,
            local_net: net(&self.local_net, "--local-net")?,
            ike,
            esp,
            local_id,
            remote_id: self.ipsec_remote_id.as_deref().map(IpsecPlan::identity),
            direction,
            esp_keys: self.esp_keys.clone(),
            tunnels: 1,
            peer_addrs: None,
            rekey: self
                .rekey
                .as_deref()
                .map(|t| rekey_period(t, "--rekey"))
                .transpose()?,
            rekey_ike: self
                .rekey_ike
                .as_deref()
                .map(|t| rekey_period(t, "--rekey-ike"))
                .transpose()?,
            esp_encap: match self.esp_encap.as_deref() {
                None => EspEncap::default(),
                Some(t) => EspEncap::parse(t).ok_or_else(|| {
                    err!(
                        BadInput,
                        "--esp-encap {t} is not an encapsulation: use udp, raw or auto"
                    )
                })?,
            },
            ipsec_timeout: self
                .ipsec_timeout
                .as_deref()
                .map(ipsec_timeout)
                .transpose()?,
            // The frames' ranges: the bed's plan adds them.
            ranges: Vec::new(),
        })
    }

    /// The IPsec options given, as the command line names them.
    pub fn given(&self) -> Vec<&'static str> {
        [
            (self.psk_file.is_some(), "--psk-file"),
            (self.remote_net.is_some(), "--remote-net"),
            (self.local_net.is_some(), "--local-net"),
            (self.ipsec_gateway.is_some(), "--ipsec-gateway"),
            (self.ike.is_some(), "--ike"),
            (self.esp.is_some(), "--esp"),
            (self.ipsec_id.is_some(), "--ipsec-id"),
            (self.ipsec_remote_id.is_some(), "--ipsec-remote-id"),
            (self.direction.is_some(), "--direction"),
            (self.esp_keys.is_some(), "--esp-keys"),
            (self.rekey.is_some(), "--rekey"),
            (self.rekey_ike.is_some(), "--rekey-ike"),
            (self.esp_encap.is_some(), "--esp-encap"),
            (self.ipsec_timeout.is_some(), "--ipsec-timeout"),
        ]
        .into_iter()
        .filter_map(|(given, name)| given.then_some(name))
        .collect()
    }
}

/// `--rekey`, `--rekey-ike`: a period of 200 ms or more (a rekey is a
/// round trip with the gateway; one period must leave room for it).
fn rekey_period(text: &str, option: &str) -> Result<std::time::Duration> {
    let d = crate::plans::values::parse_duration(text, option)?;
    if d < std::time::Duration::from_millis(200) {
        bail!(
            BadInput,
            "{option} {text} is shorter than a rekey takes to answer: give 200ms or more (e.g. 2s)"
        );
    }
    Ok(d)
}

/// `--ipsec-timeout`: above 0 (the first try needs time to be answered).
fn ipsec_timeout(text: &str) -> Result<std::time::Duration> {
    let d = crate::plans::values::parse_duration(text, "--ipsec-timeout")?;
    if d.is_zero() {
        bail!(
            BadInput,
            "--ipsec-timeout {text} leaves the gateway no time to answer: give a duration above 0 (e.g. 2s; default 15.5s)"
        );
    }
    Ok(d)
}
