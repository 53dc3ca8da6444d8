//! What encapsulation costs: the frame size on the wire after a packet is
//! tunnelled or tagged, for IPsec (ESP, AH, both; tunnel or transport; with
//! NAT traversal), WireGuard, GRE, VXLAN, L2TP, PPPoE and 802.1Q. Pure
//! arithmetic on header sizes (IPv4 outer headers), used by `linerate
//! overhead` and by the tunnel scenarios' outer-frame rates.
//!
//! Sizes count the Ethernet frame with its 4-byte FCS, as RFC 2544 does.
//! The worked examples of the LANCOM and Cisco reports are the tests: a
//! 46-byte IP packet under ESP (AES-CBC, HMAC-SHA1-96, tunnel mode) grows to
//! a 122-byte frame, and AH with HMAC-MD5 in tunnel mode adds 44 bytes.

use crate::lengths::{ETH_HEADER_LEN, FCS_LEN, IPV4_HEADER_LEN, UDP_HEADER_LEN};

/// ESP encryption: block size (padding unit), IV length, built-in ICV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cipher {
    Null,
    Des,
    TripleDes,
    AesCbc,
    /// AES-GCM (RFC 4106): 8-byte IV, 16-byte ICV, no separate integrity.
    AesGcm,
}

impl Cipher {
    pub fn parse(s: &str) -> Option<Cipher> {
        Some(match s.to_ascii_lowercase().as_str() {
            "null" => Cipher::Null,
            "des" => Cipher::Des,
            "3des" => Cipher::TripleDes,
            "aes" | "aes-cbc" => Cipher::AesCbc,
            "aes-gcm" | "gcm" => Cipher::AesGcm,
            _ => return None,
        })
    }
    /// Padding unit of the ESP payload (at least 4: RFC 4303 aligns the
    /// ICV to 4 bytes).
    fn block(self) -> usize {
        match self {
            Cipher::Null | Cipher::AesGcm => 4,
            Cipher::Des | Cipher::TripleDes => 8,
            Cipher::AesCbc => 16,
        }
    }
    fn iv(self) -> usize {
        match self {
            Cipher::Null => 0,
            Cipher::Des | Cipher::TripleDes | Cipher::AesGcm => 8,
            Cipher::AesCbc => 16,
        }
    }
    /// A combined-mode (AEAD) cipher: it authenticates with its own ICV,
    /// so ESP takes no separate integrity algorithm with it (RFC 4106
    /// section 8: AES-GCM with "NONE" integrity).
    pub fn is_aead(self) -> bool {
        self.own_icv() > 0
    }
    /// ICV the cipher itself appends (combined-mode ciphers only).
    fn own_icv(self) -> usize {
        match self {
            Cipher::AesGcm => 16,
            _ => 0,
        }
    }
}

/// Integrity algorithms with their truncated ICV lengths (RFC 2403, 2404, 4868).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Auth {
    None,
    /// HMAC-MD5-96
    Md5,
    /// HMAC-SHA1-96
    Sha1,
    /// HMAC-SHA-256-128
    Sha256,
    /// HMAC-SHA-384-192
    Sha384,
    /// HMAC-SHA-512-256
    Sha512,
}

impl Auth {
    pub fn parse(s: &str) -> Option<Auth> {
        Some(match s.to_ascii_lowercase().as_str() {
            "none" => Auth::None,
            "md5" => Auth::Md5,
            "sha1" => Auth::Sha1,
            "sha256" => Auth::Sha256,
            "sha384" => Auth::Sha384,
            "sha512" => Auth::Sha512,
            _ => return None,
        })
    }
    pub fn icv(self) -> usize {
        match self {
            Auth::None => 0,
            Auth::Md5 | Auth::Sha1 => 12,
            Auth::Sha256 => 16,
            Auth::Sha384 => 24,
            Auth::Sha512 => 32,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Tunnel,
    Transport,
}

/// How a WireGuard implementation pads the inner packet before it is
/// encrypted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireguardPadding {
    /// To a multiple of 16 bytes, as the WireGuard paper (section 5.4.6)
    /// and the Linux kernel do.
    To16,
    /// Not at all: boringtun (user space) sends the packet as it is.
    Unpadded,
}

/// One encapsulation set-up; applied inside out: ESP, then AH, then NAT-T,
/// then WireGuard, then GRE / VXLAN / L2TP, then PPPoE and 802.1Q on the
/// outer frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encapsulation {
    pub esp: Option<(Cipher, Auth)>,
    pub ah: Option<Auth>,
    pub mode: Mode,
    pub nat_t: bool,
    /// A WireGuard data message (transport data, type 4) over UDP.
    pub wireguard: Option<WireguardPadding>,
    pub gre: bool,
    pub vxlan: bool,
    pub l2tp: bool,
    pub pppoe: bool,
    pub vlan: bool,
}

impl Default for Encapsulation {
    fn default() -> Self {
        Encapsulation {
            esp: None,
            ah: None,
            mode: Mode::Tunnel,
            nat_t: false,
            wireguard: None,
            gre: false,
            vxlan: false,
            l2tp: false,
            pppoe: false,
            vlan: false,
        }
    }
}

/// ESP header: SPI + sequence number. Trailer: pad length + next header.
const ESP_HEADER: usize = 8;
const ESP_TRAILER: usize = 2;
/// AH header without its ICV.
const AH_HEADER: usize = 12;
/// WireGuard transport data header: type (1) + reserved (3) + receiver
/// index (4) + counter (8).
const WIREGUARD_HEADER: usize = 16;
/// The Poly1305 authentication tag after the encrypted packet.
const WIREGUARD_TAG: usize = 16;
const GRE_HEADER: usize = 4;
const VXLAN_HEADER: usize = 8;
/// L2TPv2 data header with the length field, and the PPP protocol field.
const L2TP_HEADER: usize = 8;
const PPP_PROTOCOL: usize = 2;
/// PPPoE session header.
const PPPOE_HEADER: usize = 6;
const VLAN_TAG: usize = 4;

fn round_up(n: usize, unit: usize) -> usize {
    n.div_ceil(unit) * unit
}

impl Encapsulation {
    /// The outer IP packet's length for an inner IP packet of `l3` bytes.
    pub fn outer_l3(&self, l3: usize) -> usize {
        let mut ip = l3;
        let tunnel = self.mode == Mode::Tunnel;
        if let Some((cipher, auth)) = self.esp {
            debug_assert!(
                !(cipher.is_aead() && auth != Auth::None),
                "an AEAD cipher takes no separate integrity algorithm"
            );
            // Transport mode protects the payload; the original IP header stays.
            let protected = if tunnel { ip } else { ip - IPV4_HEADER_LEN };
            let payload = round_up(protected + ESP_TRAILER, cipher.block());
            let esp = ESP_HEADER + cipher.iv() + payload + cipher.own_icv() + auth.icv();
            ip = esp + IPV4_HEADER_LEN;
        }
        if let Some(auth) = self.ah {
            // IPv4 AH is a multiple of 4 bytes.
            let ah = round_up(AH_HEADER + auth.icv(), 4);
            // Tunnel mode adds a new IP header, unless ESP already did.
            let new_ip = if tunnel && self.esp.is_none() {
                IPV4_HEADER_LEN
            } else {
                0
            };
            ip += ah + new_ip;
        }
        if self.nat_t && (self.esp.is_some() || self.ah.is_some()) {
            ip += UDP_HEADER_LEN;
        }
        if let Some(padding) = self.wireguard {
            let inner = match padding {
                WireguardPadding::To16 => round_up(ip, 16),
                WireguardPadding::Unpadded => ip,
            };
            ip = IPV4_HEADER_LEN + UDP_HEADER_LEN + WIREGUARD_HEADER + inner + WIREGUARD_TAG;
        }
        if self.gre {
            ip += IPV4_HEADER_LEN + GRE_HEADER;
        }
        if self.vxlan {
            // The inner Ethernet header (no FCS) travels inside.
            ip += IPV4_HEADER_LEN + UDP_HEADER_LEN + VXLAN_HEADER + ETH_HEADER_LEN;
        }
        if self.l2tp {
            ip += IPV4_HEADER_LEN + UDP_HEADER_LEN + L2TP_HEADER + PPP_PROTOCOL;
        }
        ip
    }

    /// The outer frame (with FCS) for an inner IP packet of `l3` bytes.
    pub fn outer_frame(&self, l3: usize) -> usize {
        let mut l2 = ETH_HEADER_LEN + FCS_LEN;
        if self.pppoe {
            l2 += PPPOE_HEADER + PPP_PROTOCOL;
        }
        if self.vlan {
            l2 += VLAN_TAG;
        }
        // Ethernet pads frames to 64 bytes.
        (self.outer_l3(l3) + l2).max(64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn esp(cipher: Cipher, auth: Auth) -> Encapsulation {
        Encapsulation {
            esp: Some((cipher, auth)),
            ..Encapsulation::default()
        }
    }

    #[test]
    fn lancom_aes_example_46_byte_packet_makes_a_122_byte_frame() {
        // 46 + 2 trailer = 48 (3 AES blocks); 8 ESP + 16 IV + 48 + 12 ICV
        // = 84; + 20 outer IP = 104; + 14 Ethernet + 4 FCS = 122.
        assert_eq!(esp(Cipher::AesCbc, Auth::Sha1).outer_frame(46), 122);
        assert_eq!(esp(Cipher::AesCbc, Auth::Md5).outer_frame(46), 122);
    }

    #[test]
    fn ah_md5_in_tunnel_mode_adds_44_bytes() {
        let ah = Encapsulation {
            ah: Some(Auth::Md5),
            ..Encapsulation::default()
        };
        for l3 in [46, 100, 1500] {
            assert_eq!(ah.outer_l3(l3), l3 + 44, "{l3}");
        }
        // Transport mode: the AH only (12 + 12).
        let transport = Encapsulation {
            mode: Mode::Transport,
            ..ah
        };
        assert_eq!(transport.outer_l3(100), 124);
    }

    #[test]
    fn padding_follows_the_cipher_block() {
        // 3DES: 100 + 2 = 102 -> 104; 8 + 8 + 104 + 12 + 20 = 152.
        assert_eq!(esp(Cipher::TripleDes, Auth::Sha1).outer_l3(100), 152);
        // NULL pads to 4: 102 -> 104; 8 + 104 + 12 + 20 = 144.
        assert_eq!(esp(Cipher::Null, Auth::Sha1).outer_l3(100), 144);
        // GCM: 8 IV, 16 ICV, no HMAC: 8 + 8 + 104 + 16 + 20 = 156.
        assert_eq!(esp(Cipher::AesGcm, Auth::None).outer_l3(100), 156);
        // SHA-512-256 adds 32 bytes of ICV instead of 12.
        assert_eq!(
            esp(Cipher::AesCbc, Auth::Sha512).outer_l3(100)
                - esp(Cipher::AesCbc, Auth::Sha1).outer_l3(100),
            20
        );
    }

    #[test]
    fn tunnels_and_tags_add_their_headers() {
        let plain = Encapsulation::default();
        assert_eq!(plain.outer_frame(1500), 1518);
        assert_eq!(plain.outer_frame(20), 64, "padded to the minimum frame");
        let with = |f: fn(&mut Encapsulation)| {
            let mut e = Encapsulation::default();
            f(&mut e);
            e.outer_frame(1000) - 1018
        };
        assert_eq!(with(|e| e.gre = true), 24);
        assert_eq!(with(|e| e.vxlan = true), 50);
        assert_eq!(with(|e| e.vlan = true), 4);
        assert_eq!(with(|e| e.pppoe = true), 8);
        assert_eq!(with(|e| e.l2tp = true), 38);
        // NAT-T adds a UDP header, but only to IPsec.
        assert_eq!(with(|e| e.nat_t = true), 0);
        let natt = Encapsulation {
            nat_t: true,
            ..esp(Cipher::AesCbc, Auth::Sha1)
        };
        assert_eq!(natt.outer_l3(46), 84 + 20 + 8);
    }

    #[test]
    fn ah_and_esp_together_share_one_new_ip_header() {
        let both = Encapsulation {
            ah: Some(Auth::Sha1),
            ..esp(Cipher::AesCbc, Auth::Sha1)
        };
        assert_eq!(both.outer_l3(46), 104 + 24);
    }

    #[test]
    fn transport_mode_esp_keeps_the_original_header() {
        // 46 - 20 = 26 + 2 = 28 -> 32; 8 + 16 + 32 + 12 + 20 = 88.
        let t = Encapsulation {
            mode: Mode::Transport,
            ..esp(Cipher::AesCbc, Auth::Sha1)
        };
        assert_eq!(t.outer_l3(46), 88);
    }

    /// A WireGuard data message by hand: outer IPv4 20 + UDP 8 + header 16
    /// (type, reserved, receiver index, counter) + the inner packet padded
    /// to a multiple of 16 + the 16-byte Poly1305 tag.
    #[test]
    fn wireguard_data_message_by_hand() {
        let wg = |padding| Encapsulation {
            wireguard: Some(padding),
            ..Encapsulation::default()
        };
        let (kernel, boringtun) = (wg(WireguardPadding::To16), wg(WireguardPadding::Unpadded));
        // 1500 pads to 1504: 20 + 8 + 16 + 1504 + 16 = 1564; + 18 = 1582.
        assert_eq!(kernel.outer_l3(1500), 1564);
        assert_eq!(kernel.outer_frame(1500), 1582);
        // 46 pads to 48: 20 + 8 + 16 + 48 + 16 = 108; + 18 = 126.
        assert_eq!(kernel.outer_frame(46), 126);
        // A multiple of 16 is not padded: 64 -> 20 + 8 + 16 + 64 + 16 = 124.
        assert_eq!(kernel.outer_l3(64), 124);
        // Unpadded: 60 bytes on top of the packet.
        assert_eq!(boringtun.outer_frame(46), 18 + 60 + 46);
        for l3 in 20usize..=9000 {
            let padded = l3.div_ceil(16) * 16;
            assert_eq!(kernel.outer_l3(l3), 60 + padded, "{l3}");
            assert_eq!(boringtun.outer_l3(l3), 60 + l3, "{l3}");
            assert_eq!((kernel.outer_l3(l3) - 60) % 16, 0, "{l3}");
        }
    }

    #[test]
    fn parsers_know_the_names() {
        assert_eq!(Cipher::parse("AES-GCM"), Some(Cipher::AesGcm));
        assert_eq!(Cipher::parse("3des"), Some(Cipher::TripleDes));
        assert_eq!(Auth::parse("sha512"), Some(Auth::Sha512));
        assert_eq!(Auth::parse("sha384").map(Auth::icv), Some(24));
        assert_eq!(Cipher::parse("rot13"), None);
    }

    /// ESP with AES-GCM laid out as RFC 4106 (with RFC 4303) does it: SPI
    /// and sequence number (8), an 8-byte IV, the payload plus pad length
    /// and next header padded to a multiple of 4, and a 16-byte ICV; no
    /// separate integrity algorithm.
    #[test]
    fn aes_gcm_follows_rfc_4106() {
        assert!(Cipher::AesGcm.is_aead());
        for c in [Cipher::Null, Cipher::Des, Cipher::TripleDes, Cipher::AesCbc] {
            assert!(!c.is_aead(), "{c:?}");
        }
        let rfc4106 = |protected: usize| 8 + 8 + (protected + 2).div_ceil(4) * 4 + 16;
        for mode in [Mode::Tunnel, Mode::Transport] {
            let e = Encapsulation {
                mode,
                ..esp(Cipher::AesGcm, Auth::None)
            };
            // Every alignment of the payload, so each pad length 0..3 occurs.
            for l3 in 40..=1500 {
                let protected = match mode {
                    Mode::Tunnel => l3,
                    Mode::Transport => l3 - 20,
                };
                assert_eq!(e.outer_l3(l3), 20 + rfc4106(protected), "{mode:?} {l3}");
                assert_eq!(e.outer_l3(l3) % 4, 0, "{mode:?} {l3}");
            }
        }
        // Worked by hand: a 46-byte packet in tunnel mode is ESP 8 + IV 8 +
        // 48 (46 + 2, a multiple of 4, no padding) + ICV 16 = 80, with the
        // outer IP header 100, a 118-byte frame; 47 bytes pad by 3.
        let gcm = esp(Cipher::AesGcm, Auth::None);
        assert_eq!(gcm.outer_l3(46), 100);
        assert_eq!(gcm.outer_frame(46), 118);
        assert_eq!(gcm.outer_l3(47), 104);
    }
}
