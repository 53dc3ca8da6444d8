//! What a run records when linerate is the IPsec peer of the gateway
//! (`--ipsec`): the tunnel in the run's header, and per trial what
//! linerate's own ESP did beside the test frames' counts.

use serde::{Deserialize, Serialize};
use std::net::Ipv4Addr;

/// One tunnel's test frames in a trial (see
/// [`TrialResult::tunnels`](crate::model::TrialResult::tunnels)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelFrames {
    /// Test frames sent into the tunnel that the kernel took.
    pub tx: u64,
    /// Test frames of the tunnel counted as received.
    pub rx: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

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
    /// `--tunnels N` above 1: the emulated peers and their tunnels (the
    /// fields above are tunnel 0's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tunnels: Option<TunnelsRun>,
}

/// The tunnels of a `--tunnels N` run. Tunnel `i` is peer `first_peer + i`
/// protecting slice `i` of `remote_net` (`/slice_prefix` each); its test
/// frames use the slice's address `host_offset`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunnelsRun {
    pub count: usize,
    /// The peers' outer addresses: `first_peer` upward, one per tunnel.
    pub first_peer: Ipv4Addr,
    pub last_peer: Ipv4Addr,
    /// The network behind linerate, split into one slice per tunnel.
    pub remote_net: String,
    pub slice_prefix: u8,
    pub host_offset: u32,
    /// Per tunnel (index = tunnel): the SPI linerate sends on and the one
    /// it receives on.
    pub spi_out: Vec<u32>,
    pub spi_in: Vec<u32>,
    /// Milliseconds from the first IKE_SA_INIT until every tunnel was up.
    pub setup_ms: u64,
}

impl TunnelsRun {
    /// Tunnel `i`'s peer address.
    pub fn peer(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.first_peer) + i as u32)
    }
}

/// What linerate's ESP did during one trial (counts of this trial only).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
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
    /// Of `unknown_spi`, frames on a rekey's new SA that arrived before
    /// linerate had installed it: the tester's loss (`loss_where.tester_esp`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub before_install: u64,
    /// UDP frames that reached linerate's tunnel end in clear: a gateway
    /// that forwards test frames unencrypted.
    pub not_esp: u64,
    /// Other traffic at linerate's tunnel end, no test frame in any form
    /// (IPv4 fragments, other protocols, datagrams on the ESP port too
    /// short for ESP): neither received, nor damaged, nor lost.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub stray: u64,
    /// IKE messages and keepalives that arrived during the trial.
    pub ike: u64,
    /// `--tunnels`: per tunnel (index = tunnel), `[encrypted, decrypted]`
    /// by that tunnel's SAs; they sum to the totals above.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_tunnel: Vec<[u64; 2]>,
    /// CHILD_SA rekeys that ended during the trial (`--rekey`, or the
    /// gateway's own); None: none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rekeys: Option<TrialRekeys>,
    /// The ESP travelled raw (IP protocol 50), not in UDP 4500: its
    /// frames are 8 bytes shorter on the WAN.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub raw_esp: bool,
}

/// The CHILD_SA rekeys that ended during one trial.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TrialRekeys {
    /// Rekeys linerate started (`--rekey`) that the gateway answered.
    pub done: u64,
    /// Rekeys the gateway started; linerate answered and moved to the new
    /// keys.
    pub by_gateway: u64,
    /// Rekeys linerate started that failed (no answer, or refused): the
    /// tunnel stayed on its old CHILD_SA.
    pub failed: u64,
    /// linerate's rekeys, CREATE_CHILD_SA request to the gateway's
    /// answer, milliseconds.
    pub mean_ms: f64,
    pub max_ms: f64,
    /// Tunnels the gateway deleted during the trial.
    pub tunnels_deleted: u64,
    /// New SAs the data path took during the trial (outbound and inbound:
    /// two per completed rekey when the trial sends both ways).
    pub sas_taken: u64,
    /// IKE SA rekeys that ended during the trial (`--rekey-ike`, or the
    /// gateway's own), apart from the CHILD_SA rekeys above: they change
    /// no key of the data path. None: none did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ike: Option<IkeRekeys>,
    /// The first rekeys (at most 100), in the order they ended.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub list: Vec<RekeyRecord>,
}

/// The IKE SA rekeys that ended during one trial.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IkeRekeys {
    /// Rekeys linerate started (`--rekey-ike`) that the gateway answered.
    pub done: u64,
    /// Rekeys the gateway started; linerate answered.
    pub by_gateway: u64,
    /// Rekeys linerate started that failed: the tunnel stayed on its old
    /// IKE SA.
    pub failed: u64,
}

impl TrialRekeys {
    /// Rekeys that completed, whoever started them.
    pub fn completed(&self) -> u64 {
        self.done + self.by_gateway
    }

    /// Frames lost per completed rekey, and the time each rekey blocked
    /// its tunnel: lost frames per rekey over the tunnel's offered rate
    /// (`offered_fps` / `tunnels`), as FD.io CSIT's "effective blocked
    /// time". Assumes the trial loses nothing without rekeys (a rate
    /// below the gateway's throughput). None without a completed rekey.
    pub fn per_rekey(&self, lost: u64, offered_fps: f64, tunnels: usize) -> Option<(f64, f64)> {
        let n = self.completed();
        if n == 0 {
            return None;
        }
        let lost_each = lost as f64 / n as f64;
        let tunnel_fps = offered_fps / tunnels.max(1) as f64;
        let blocked_ms = if tunnel_fps > 0.0 {
            lost_each / tunnel_fps * 1e3
        } else {
            0.0
        };
        Some((lost_each, blocked_ms))
    }
}

/// One rekey that ended during a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RekeyRecord {
    pub tunnel: usize,
    /// When it ended, milliseconds after the trial's counts were first read.
    pub at_ms: f64,
    /// linerate's request to the gateway's answer; None: the gateway
    /// started it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub took_ms: Option<f64>,
    /// The new CHILD_SA's SPIs (linerate sends on `spi_out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spi_out: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spi_in: Option<u32>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// Bytes around an ESP packet on the wire: Ethernet (14), IPv4 (20), UDP
/// (8) and the FCS (4).
pub const ESP_IN_UDP_FRAMING: f64 = 46.0;
/// The same around raw ESP (IP protocol 50): no UDP header.
pub const RAW_ESP_FRAMING: f64 = 38.0;

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
        let framing = if self.raw_esp {
            RAW_ESP_FRAMING
        } else {
            ESP_IN_UDP_FRAMING
        };
        (packets > 0).then(|| bytes as f64 / packets as f64 + framing)
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

/// How a trial's test frames spread over the tunnels, and the tunnels that
/// stand out: those that carried nothing, and those that lost clearly more
/// than their share of the trial's loss.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunnelSpread {
    pub count: usize,
    /// The fewest and the most frames one tunnel delivered (received).
    pub min_rx: u64,
    pub max_rx: u64,
    /// Tunnels (index) that had frames sent and delivered none.
    pub silent: Vec<usize>,
    /// Tunnels (index) that lost clearly more than the others: with `r` the
    /// median of the tunnels' loss ratios, a tunnel sent `tx` frames is
    /// expected to lose `e = r * tx`; it is named when it lost more than `2e + 3 sqrt(e) + 2`
    /// (far beyond a fair share's random spread). Silent tunnels are not
    /// repeated here.
    pub lossy: Vec<usize>,
}

impl TunnelSpread {
    /// Of one trial's per-tunnel frames (`TrialResult::tunnels`); None when
    /// the trial has none.
    pub fn of(tunnels: &[TunnelFrames]) -> Option<TunnelSpread> {
        if tunnels.is_empty() {
            return None;
        }
        let silent: Vec<usize> = (0..tunnels.len())
            .filter(|&i| tunnels[i].tx > 0 && tunnels[i].rx == 0)
            .collect();
        // The others' usual loss: the median of their loss ratios.
        let mut ratios: Vec<f64> = (0..tunnels.len())
            .filter(|i| !silent.contains(i) && tunnels[*i].tx > 0)
            .map(|i| tunnels[i].tx.saturating_sub(tunnels[i].rx) as f64 / tunnels[i].tx as f64)
            .collect();
        ratios.sort_by(f64::total_cmp);
        let ratio = ratios.get(ratios.len() / 2).copied().unwrap_or(0.0);
        let lossy = (0..tunnels.len())
            .filter(|i| !silent.contains(i))
            .filter(|&i| {
                let t = tunnels[i];
                let lost = t.tx.saturating_sub(t.rx) as f64;
                let expected = ratio * t.tx as f64;
                lost > 2.0 * expected + 3.0 * expected.sqrt() + 2.0
            })
            .collect();
        Some(TunnelSpread {
            count: tunnels.len(),
            min_rx: tunnels.iter().map(|t| t.rx).min().unwrap_or(0),
            max_rx: tunnels.iter().map(|t| t.rx).max().unwrap_or(0),
            silent,
            lossy,
        })
    }

    /// The tunnels that stand out, in words (`None`: none does), naming at
    /// most `most` of each kind by their number (1-based, as tables count).
    pub fn outliers(&self, most: usize) -> Option<String> {
        let list = |v: &[usize]| {
            let mut s: Vec<String> = v.iter().take(most).map(|i| (i + 1).to_string()).collect();
            if v.len() > most {
                s.push(format!("... ({} in all)", v.len()));
            }
            s.join(", ")
        };
        let mut parts = Vec::new();
        if !self.silent.is_empty() {
            parts.push(format!("carried nothing: tunnel {}", list(&self.silent)));
        }
        if !self.lossy.is_empty() {
            parts.push(format!(
                "lost clearly more than the others: tunnel {}",
                list(&self.lossy)
            ));
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tx: u64, rx: u64) -> TunnelFrames {
        TunnelFrames { tx, rx }
    }

    /// 64-byte frames with AES-GCM: 80 bytes of ESP; 126 on the wire in
    /// UDP, 118 raw (no UDP header).
    #[test]
    fn the_wan_frame_is_8_bytes_shorter_with_raw_esp() {
        let mut e = EspTrial {
            encrypted: 10,
            encrypted_bytes: 800,
            ..EspTrial::default()
        };
        assert_eq!(e.wan_frame(), Some(126.0));
        e.raw_esp = true;
        assert_eq!(e.wan_frame(), Some(118.0));
        // An older record has no raw_esp: ESP in UDP, as it was.
        let old: EspTrial = serde_json::from_str(
            r#"{"encrypted":10,"encrypted_bytes":800,"decrypted":0,"decrypted_bytes":0,"icv_failures":0,"replays":0,"too_old":0,"malformed":0,"unknown_spi":0,"not_esp":0,"ike":0}"#,
        )
        .unwrap();
        assert_eq!(old.wan_frame(), Some(126.0));
        assert!(!serde_json::to_string(&old).unwrap().contains("raw_esp"));
    }

    #[test]
    fn an_even_spread_names_no_tunnel() {
        let even = vec![t(1000, 1000); 10];
        let s = TunnelSpread::of(&even).unwrap();
        assert_eq!((s.min_rx, s.max_rx, s.count), (1000, 1000, 10));
        assert_eq!(s.outliers(5), None);
        // Loss spread evenly (1 % each, give or take) names none either.
        let mut lossy = vec![t(1000, 990); 10];
        lossy[3] = t(1000, 985);
        assert_eq!(TunnelSpread::of(&lossy).unwrap().outliers(5), None);
        assert!(TunnelSpread::of(&[]).is_none());
    }

    #[test]
    fn a_silent_or_lossy_tunnel_is_named() {
        let mut v = vec![t(1000, 1000); 10];
        v[2] = t(1000, 0);
        v[7] = t(1000, 900);
        let s = TunnelSpread::of(&v).unwrap();
        assert_eq!(s.silent, [2]);
        assert_eq!(s.lossy, [7]);
        assert_eq!((s.min_rx, s.max_rx), (0, 1000));
        assert_eq!(
            s.outliers(5).unwrap(),
            "carried nothing: tunnel 3; lost clearly more than the others: tunnel 8"
        );
        let many: Vec<TunnelFrames> = (0..20)
            .map(|i| t(100, if i < 8 { 0 } else { 100 }))
            .collect();
        let s = TunnelSpread::of(&many).unwrap();
        assert_eq!(
            s.outliers(3).unwrap(),
            "carried nothing: tunnel 1, 2, 3, ... (8 in all)"
        );
    }
}
