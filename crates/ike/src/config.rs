//! What linerate is told to negotiate, for each of its roles: the
//! pre-shared key, the ports, the retransmission, and the configurations
//! of a [`crate::Session`] ([`Config`]), a [`crate::Fleet`]
//! ([`FleetConfig`], [`Peer`]) and a [`crate::Responder`]
//! ([`ResponderConfig`]). Plain data: the state machines and their socket
//! drivers both take it from here.

use std::fs;
use std::net::Ipv4Addr;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use linerate_esp::EspSuite;
use zeroize::Zeroizing;

use crate::error::ConfigError;
use crate::proposal::IkeProposals;
use crate::wire::{Identity, TrafficSelector};

/// A pre-shared key. Never printed (`Debug` shows `<redacted>`), wiped
/// when dropped.
#[derive(Clone)]
pub struct Psk(Zeroizing<Vec<u8>>);

impl Psk {
    /// The key's bytes as they are (strongSwan's `secret = "..."` is the
    /// string's bytes).
    pub fn new(secret: impl Into<Vec<u8>>) -> Psk {
        Psk(Zeroizing::new(secret.into()))
    }

    /// Reads the key from a file that only its owner may read (mode 0600 or
    /// stricter), as a key should not be on a command line where `ps` shows
    /// it. One trailing newline is not part of the key.
    pub fn read_file(path: &Path) -> Result<Psk, ConfigError> {
        let name = path.display();
        let meta = fs::metadata(path)
            .map_err(|e| ConfigError(format!("cannot read the pre-shared key file {name}: {e}")))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(ConfigError(format!(
                "the pre-shared key file {name} is readable by others (mode {mode:04o}): chmod 600 {name}"
            )));
        }
        let mut bytes = Zeroizing::new(fs::read(path).map_err(|e| {
            ConfigError(format!("cannot read the pre-shared key file {name}: {e}"))
        })?);
        if bytes.ends_with(b"\n") {
            bytes.pop();
            if bytes.ends_with(b"\r") {
                bytes.pop();
            }
        }
        if bytes.is_empty() {
            return Err(ConfigError(format!(
                "the pre-shared key file {name} is empty: write the key into it"
            )));
        }
        Ok(Psk(Zeroizing::new(bytes.to_vec())))
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Psk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Psk(<redacted>)")
    }
}

/// UDP ports of IKE (500) and of IKE and ESP after NAT traversal (4500).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ports {
    pub ike: u16,
    pub natt: u16,
}

impl Default for Ports {
    fn default() -> Ports {
        Ports {
            ike: 500,
            natt: 4500,
        }
    }
}

/// How often a request is sent before giving up (RFC 7296 §2.1): the
/// first wait, doubled after every try.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retransmit {
    pub timeout: Duration,
    pub tries: u32,
}

impl Default for Retransmit {
    /// 0.5 s doubling, 5 tries: 15.5 s until "no answer".
    fn default() -> Retransmit {
        Retransmit {
            timeout: Duration::from_millis(500),
            tries: 5,
        }
    }
}

/// What to negotiate with which gateway.
#[derive(Debug, Clone)]
pub struct Config {
    /// linerate's address: the source of IKE and ESP, the default
    /// identity.
    pub local: Ipv4Addr,
    pub gateway: Ipv4Addr,
    /// The ports [`Session::connect`](crate::Session::connect) binds on `local` (500, 4500; 0 for
    /// any).
    pub local_ports: Ports,
    /// The gateway's ports (500, 4500).
    pub gateway_ports: Ports,
    /// IDi; `None` sends `local` as an IPv4 address identity, strongSwan's
    /// default.
    pub local_id: Option<Identity>,
    /// IDr: when set, it is sent and the gateway must identify as it.
    pub remote_id: Option<Identity>,
    pub psk: Psk,
    pub ike: IkeProposals,
    pub esp: EspSuite,
    /// The traffic selectors proposed: linerate's test network and the one
    /// behind the gateway.
    pub local_ts: TrafficSelector,
    pub remote_ts: TrafficSelector,
    pub retransmit: Retransmit,
    /// Fakes NAT_DETECTION_SOURCE_IP so that the gateway encapsulates ESP
    /// in UDP even without a NAT (RFC 3948; strongSwan's `encap = yes`).
    /// On by default: linerate's data path sends and receives ESP in UDP.
    pub force_encap: bool,
}

impl Config {
    /// A configuration with the defaults: IKE `aes256-sha256-modp2048`,
    /// ESP `aes256gcm16`, ports 500/4500, identities by address, 0.5 s
    /// doubling over 5 tries, ESP in UDP forced.
    pub fn new(
        local: Ipv4Addr,
        gateway: Ipv4Addr,
        psk: Psk,
        local_ts: TrafficSelector,
        remote_ts: TrafficSelector,
    ) -> Config {
        Config {
            local,
            gateway,
            local_ports: Ports::default(),
            gateway_ports: Ports::default(),
            local_id: None,
            remote_id: None,
            psk,
            ike: IkeProposals::default(),
            esp: EspSuite::Aes256Gcm16,
            local_ts,
            remote_ts,
            retransmit: Retransmit::default(),
            force_encap: true,
        }
    }
}

/// One emulated peer.
#[derive(Debug, Clone)]
pub struct Peer {
    /// Its outer address: the source of its IKE and ESP in UDP.
    pub local: Ipv4Addr,
    /// IDi; `None` sends `local` as an IPv4 address identity.
    pub local_id: Option<Identity>,
    /// The network this peer protects (its TSi): its share of the test
    /// network behind linerate.
    pub local_ts: TrafficSelector,
}

/// What every peer negotiates with the one gateway, and how fast.
#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub gateway: Ipv4Addr,
    pub gateway_ports: Ports,
    /// The ports the fleet binds (on every peer address, or on the
    /// wildcard address with the source chosen per datagram).
    pub local_ports: Ports,
    /// IDr: when set, sent, and the gateway must identify as it.
    pub remote_id: Option<Identity>,
    pub psk: Psk,
    pub ike: IkeProposals,
    pub esp: EspSuite,
    /// The gateway's protected network (TSr), the same for every peer.
    pub remote_ts: TrafficSelector,
    pub retransmit: Retransmit,
    /// As `Config::force_encap`: ESP in UDP even without a NAT.
    pub force_encap: bool,
    pub peers: Vec<Peer>,
    /// New handshakes (IKE_SA_INIT sent) per second; `None`: as fast as
    /// `window` allows.
    pub attempt_rate: Option<f64>,
    /// Handshakes in flight at most (at least 1).
    pub window: usize,
}

/// What the responder accepts.
#[derive(Debug, Clone)]
pub struct ResponderConfig {
    /// The responder's address (bound on `ports`) and default identity.
    pub local: Ipv4Addr,
    pub ports: Ports,
    /// IDr; `None` sends `local` as an IPv4 address identity.
    pub local_id: Option<Identity>,
    /// One key for every initiator, whatever its identity.
    pub psk: Psk,
    /// The IKE algorithms accepted, in strongSwan's syntax.
    pub ike: IkeProposals,
    /// The ESP suite accepted (in IKE_AUTH; rekeys may add PFS).
    pub esp: EspSuite,
    /// The responder's protected network (TSr is narrowed to it).
    pub local_ts: TrafficSelector,
    /// What initiators may protect (TSi is narrowed to it).
    pub remote_ts: TrafficSelector,
    pub retransmit: Retransmit,
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_esp::SaKeys;

    #[test]
    fn the_psk_is_never_printed() {
        let psk = Psk::new("hunter2-secret");
        let config = Config::new(
            Ipv4Addr::new(10, 0, 0, 2),
            Ipv4Addr::new(10, 0, 0, 1),
            psk,
            TrafficSelector::parse("198.18.0.0/24").unwrap(),
            TrafficSelector::parse("198.19.0.0/24").unwrap(),
        );
        let text = format!("{config:?} {config:#?}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
        let keys = SaKeys {
            suite: EspSuite::Aes128Sha256,
            spi: 0xc0ffee01,
            encryption_key: vec![0xab; 16],
            integrity_key: vec![0xcd; 32],
        };
        let text = format!("{keys:?}");
        assert!(text.contains("0xc0ffee01"), "{text}");
        assert!(!text.contains("171") && !text.contains("ab,"), "{text}");
    }

    #[test]
    fn psk_files_must_be_private() {
        let dir = std::env::temp_dir().join(format!("linerate-ike-psk-{}", std::process::id()));
        let _ = fs::create_dir(&dir);
        let path = dir.join("psk");
        fs::write(&path, "s3cret\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let e = Psk::read_file(&path).unwrap_err().0;
        assert!(e.contains("mode 0644") && e.contains("chmod 600"), "{e}");
        fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(Psk::read_file(&path).unwrap().bytes(), b"s3cret");
        fs::write(&path, "\n").unwrap();
        assert!(Psk::read_file(&path).unwrap_err().0.contains("empty"));
        let _ = fs::remove_dir_all(&dir);
    }
}
