//! What a run records when linerate is the IPsec peer of the gateway
//! (`--ipsec`): the tunnel in the run's header, and per trial what
//! linerate's own ESP did beside the test frames' counts.

use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// Which way the test frames cross the gateway's tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Port A -> port B: clear frames into the LAN, the gateway encrypts,
    /// linerate decrypts and counts: the gateway's encryption throughput.
    Encrypt,
    /// Port B -> port A: linerate encrypts, the gateway decrypts and
    /// forwards into the LAN: its decryption throughput.
    Decrypt,
    /// Both at once, each half the rate.
    Both,
}

impl Direction {
    pub fn parse(text: &str) -> Option<Direction> {
        match text {
            "encrypt" => Some(Direction::Encrypt),
            "decrypt" => Some(Direction::Decrypt),
            "both" => Some(Direction::Both),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Encrypt => "encrypt",
            Direction::Decrypt => "decrypt",
            Direction::Both => "both",
        }
    }

    /// The techpaper's word for it: "encryption", "decryption".
    pub fn noun(self) -> &'static str {
        match self {
            Direction::Encrypt => "encryption",
            Direction::Decrypt => "decryption",
            Direction::Both => "encryption and decryption",
        }
    }

    /// What the gateway does to the test frames, for notes.
    pub fn gateway_does(self) -> &'static str {
        match self {
            Direction::Encrypt => {
                "encryption (LAN -> WAN: the gateway encrypts, linerate decrypts)"
            }
            Direction::Decrypt => {
                "decryption (WAN -> LAN: linerate encrypts, the gateway decrypts)"
            }
            Direction::Both => "encryption and decryption at once (each direction half the rate)",
        }
    }
}

/// The tunnel a run measured through.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IpsecRun {
    pub direction: Direction,
    /// The ESP suite, in strongSwan's syntax (`aes256gcm16`).
    pub esp: String,
    /// The label tables print (`AES256-GCM`).
    pub esp_label: String,
    /// The IKE SA's algorithms (`aes256-sha256-modp2048`).
    pub ike: String,
    pub gateway: Ipv4Addr,
    /// linerate's tunnel end (port B's address).
    pub peer: Ipv4Addr,
    /// SPIs of the SA linerate sends on and of the one it receives on.
    pub spi_out: u32,
    pub spi_in: u32,
    /// The networks the CHILD_SA protects: linerate's side, the gateway's.
    pub local_net: String,
    pub remote_net: String,
    /// Bytes ESP in UDP adds to a clear frame of the smallest and of the
    /// largest size measured are not fixed (padding): see
    /// [`EspTrial`] and the `overhead` command for a size's.
    pub encapsulation: String,
}

/// What linerate's ESP did during one trial (counts of this trial only).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EspTrial {
    /// Test frames linerate encrypted and sent to the gateway.
    pub encrypted: u64,
    /// Their bytes as ESP (SPI to ICV).
    pub encrypted_bytes: u64,
    /// ESP frames from the gateway that linerate decrypted.
    pub decrypted: u64,
    pub decrypted_bytes: u64,
    /// ESP frames refused: their ICV failed (counted as errored too).
    pub icv_failures: u64,
    /// Duplicates and frames older than the anti-replay window: discarded.
    pub replays: u64,
    pub too_old: u64,
    /// Cut short or badly padded ESP frames (counted as errored).
    pub malformed: u64,
    /// ESP frames for an SPI that is not the tunnel's.
    pub unknown_spi: u64,
    /// IPv4 frames that reached linerate's tunnel end in clear: a gateway
    /// that forwards test frames unencrypted.
    pub not_esp: u64,
    /// IKE messages and keepalives that arrived during the trial.
    pub ike: u64,
}

/// Bytes around an ESP packet on the wire: Ethernet (14), IPv4 (20), UDP
/// (8) and the FCS (4).
pub const ESP_IN_UDP_FRAMING: f64 = 46.0;

impl EspTrial {
    /// The mean encrypted frame on the WAN (with FCS), from the frames
    /// linerate encrypted or decrypted in the trial: what the gateway
    /// really carried.
    pub fn wan_frame(&self) -> Option<f64> {
        let (packets, bytes) = if self.encrypted > 0 {
            (self.encrypted, self.encrypted_bytes)
        } else {
            (self.decrypted, self.decrypted_bytes)
        };
        (packets > 0).then(|| bytes as f64 / packets as f64 + ESP_IN_UDP_FRAMING)
    }
}

/// The throughput on the WAN side of the gateway, where the frames are
/// encrypted: the same frames/s, in bigger frames.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct WanRate {
    /// The mean encrypted frame size with FCS.
    pub frame_size: f64,
    /// Mbit/s counting the encrypted frames with FCS.
    pub mbps_l2: f64,
}

impl WanRate {
    /// At `fps` test frames/s, of the trial `esp` counted.
    pub fn of(esp: &EspTrial, fps: f64) -> Option<WanRate> {
        let frame_size = esp.wan_frame()?;
        Some(WanRate {
            frame_size,
            mbps_l2: fps * frame_size * 8.0 / 1e6,
        })
    }
}
