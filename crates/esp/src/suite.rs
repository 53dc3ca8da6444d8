//! ESP proposals in strongSwan's syntax (`aes256gcm16`, `aes128-sha256`),
//! which VPN engineers already write in swanctl.conf, and what each one
//! needs: key lengths, IV, ICV, block size, and the IKEv2 transform IDs
//! (RFC 7296 §3.3.2, IANA "IKEv2 Parameters") that negotiate it.

use serde::{Deserialize, Serialize};

/// The ESP suites linerate encrypts and decrypts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EspSuite {
    /// AES-GCM with a 128-bit key and a 16-byte ICV (RFC 4106).
    Aes128Gcm16,
    /// AES-GCM with a 256-bit key and a 16-byte ICV (RFC 4106).
    Aes256Gcm16,
    /// AES-CBC-128 (RFC 3602) with HMAC-SHA1-96 (RFC 2404).
    Aes128Sha1,
    /// AES-CBC-128 with HMAC-SHA-256-128 (RFC 4868).
    Aes128Sha256,
    /// AES-CBC-256 with HMAC-SHA-256-128 (RFC 4868).
    Aes256Sha256,
    /// AES-CBC-256 with HMAC-SHA-512-256 (RFC 4868).
    Aes256Sha512,
}

/// A proposal string linerate does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown ESP proposal '{0}': use one of {list}", list = EspSuite::NAMES.join(", "))]
pub struct SuiteError(pub String);

/// IKEv2 transform type 1 (encryption) IDs.
pub const ENCR_AES_CBC: u16 = 12;
pub const ENCR_AES_GCM_16: u16 = 20;
/// IKEv2 transform type 3 (integrity) IDs.
pub const AUTH_HMAC_SHA1_96: u16 = 2;
pub const AUTH_HMAC_SHA2_256_128: u16 = 12;
pub const AUTH_HMAC_SHA2_512_256: u16 = 14;

impl EspSuite {
    pub const ALL: [EspSuite; 6] = [
        EspSuite::Aes128Gcm16,
        EspSuite::Aes256Gcm16,
        EspSuite::Aes128Sha1,
        EspSuite::Aes128Sha256,
        EspSuite::Aes256Sha256,
        EspSuite::Aes256Sha512,
    ];
    /// The names `parse` accepts, in the order of `ALL`.
    pub const NAMES: [&'static str; 6] = [
        "aes128gcm16",
        "aes256gcm16",
        "aes128-sha1",
        "aes128-sha256",
        "aes256-sha256",
        "aes256-sha512",
    ];

    /// Parses strongSwan's proposal syntax. `aes128gcm128` is strongSwan's
    /// other name for the 16-byte ICV; `sha256`/`sha2_256` are the same.
    pub fn parse(text: &str) -> Result<EspSuite, SuiteError> {
        let canonical = text.trim().to_ascii_lowercase().replace("sha2_", "sha");
        let canonical = canonical
            .replace("gcm128", "gcm16")
            .trim_end_matches("-noesn")
            .to_string();
        EspSuite::NAMES
            .iter()
            .position(|name| *name == canonical)
            .map(|i| EspSuite::ALL[i])
            .ok_or_else(|| SuiteError(text.to_string()))
    }

    /// strongSwan's name for the suite (what `parse` reads back).
    pub fn name(self) -> &'static str {
        EspSuite::NAMES[EspSuite::ALL.iter().position(|s| *s == self).unwrap_or(0)]
    }

    /// The label reports print ("AES256-GCM", as the LANCOM tables do).
    pub fn label(self) -> &'static str {
        match self {
            EspSuite::Aes128Gcm16 => "AES128-GCM",
            EspSuite::Aes256Gcm16 => "AES256-GCM",
            EspSuite::Aes128Sha1 => "AES128-CBC SHA1",
            EspSuite::Aes128Sha256 => "AES128-CBC SHA256",
            EspSuite::Aes256Sha256 => "AES256-CBC SHA256",
            EspSuite::Aes256Sha512 => "AES256-CBC SHA512",
        }
    }

    pub fn is_aead(self) -> bool {
        matches!(self, EspSuite::Aes128Gcm16 | EspSuite::Aes256Gcm16)
    }

    /// AES key length in bytes (without GCM's 4-byte salt).
    pub fn cipher_key_len(self) -> usize {
        match self {
            EspSuite::Aes128Gcm16 | EspSuite::Aes128Sha1 | EspSuite::Aes128Sha256 => 16,
            _ => 32,
        }
    }

    /// Bytes of keying material for the encryption transform as IKEv2
    /// derives it (RFC 4106 §8.1: GCM takes the AES key then a 4-byte salt).
    pub fn encryption_keymat_len(self) -> usize {
        self.cipher_key_len() + if self.is_aead() { 4 } else { 0 }
    }

    /// Bytes of keying material for the integrity transform (0 with AEAD).
    pub fn integrity_key_len(self) -> usize {
        match self {
            EspSuite::Aes128Gcm16 | EspSuite::Aes256Gcm16 => 0,
            EspSuite::Aes128Sha1 => 20,
            EspSuite::Aes128Sha256 | EspSuite::Aes256Sha256 => 32,
            EspSuite::Aes256Sha512 => 64,
        }
    }

    /// The explicit IV carried in every packet: 8 bytes for GCM (RFC 4106),
    /// one AES block for CBC (RFC 3602).
    pub fn iv_len(self) -> usize {
        if self.is_aead() {
            8
        } else {
            16
        }
    }

    /// The ICV (authentication tag) length in bytes.
    pub fn icv_len(self) -> usize {
        match self {
            EspSuite::Aes128Gcm16 | EspSuite::Aes256Gcm16 => 16,
            EspSuite::Aes128Sha1 => 12,
            EspSuite::Aes128Sha256 | EspSuite::Aes256Sha256 => 16,
            EspSuite::Aes256Sha512 => 32,
        }
    }

    /// The payload, padding, pad length and next header are padded to this
    /// (RFC 4303 §2.4: the cipher's block, at least 4 bytes).
    pub fn pad_block(self) -> usize {
        if self.is_aead() {
            4
        } else {
            16
        }
    }

    /// IKEv2 encryption transform: (ID, key length attribute in bits).
    pub fn ikev2_encryption(self) -> (u16, u16) {
        let bits = (self.cipher_key_len() * 8) as u16;
        if self.is_aead() {
            (ENCR_AES_GCM_16, bits)
        } else {
            (ENCR_AES_CBC, bits)
        }
    }

    /// IKEv2 integrity transform ID, none with AEAD.
    pub fn ikev2_integrity(self) -> Option<u16> {
        match self {
            EspSuite::Aes128Gcm16 | EspSuite::Aes256Gcm16 => None,
            EspSuite::Aes128Sha1 => Some(AUTH_HMAC_SHA1_96),
            EspSuite::Aes128Sha256 | EspSuite::Aes256Sha256 => Some(AUTH_HMAC_SHA2_256_128),
            EspSuite::Aes256Sha512 => Some(AUTH_HMAC_SHA2_512_256),
        }
    }

    /// Bytes ESP adds around a clear IP packet of `inner` bytes: SPI and
    /// sequence (8), IV, padding to the block, pad length and next header
    /// (2), ICV. ESP in UDP adds 8 more (RFC 3948), the outer IPv4 20.
    pub fn overhead(self, inner: usize) -> usize {
        let padded = (inner + 2).div_ceil(self.pad_block()) * self.pad_block();
        8 + self.iv_len() + padded - inner + self.icv_len()
    }
}

impl std::fmt::Display for EspSuite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for EspSuite {
    type Err = SuiteError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        EspSuite::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_parses_back_to_its_suite() {
        for suite in EspSuite::ALL {
            assert_eq!(EspSuite::parse(suite.name()), Ok(suite));
        }
        assert_eq!(EspSuite::parse("AES256GCM128"), Ok(EspSuite::Aes256Gcm16));
        assert_eq!(
            EspSuite::parse("aes128-sha2_256"),
            Ok(EspSuite::Aes128Sha256)
        );
        assert!(EspSuite::parse("3des-md5")
            .unwrap_err()
            .to_string()
            .contains("aes128gcm16"));
    }

    #[test]
    fn overhead_matches_rfc_4303_layout() {
        // 100-byte packet, GCM: 8 + 8 IV + pad (100+2 -> 104: 4) ... + 16 ICV.
        assert_eq!(EspSuite::Aes128Gcm16.overhead(100), 8 + 8 + 4 + 16);
        // CBC: 100+2 -> 112, so 12 bytes of trailer; 16-byte IV, 16-byte ICV.
        assert_eq!(EspSuite::Aes128Sha256.overhead(100), 8 + 16 + 12 + 16);
        assert_eq!(EspSuite::Aes128Sha1.overhead(46), 8 + 16 + 2 + 12);
    }
}
