//! ESP proposals in strongSwan's syntax (`aes256gcm16`, `aes128-sha256`,
//! `3des-md5`, `null-sha1`), which VPN engineers already write in
//! swanctl.conf, and what each one needs: key lengths, IV, ICV, block
//! size, and the IKEv2 transform IDs (RFC 7296 §3.3.2, IANA "IKEv2
//! Parameters") that negotiate it. A suite is a cipher and an integrity
//! algorithm; AES-GCM is both at once (AEAD).
//!
//! DES, 3DES and HMAC-MD5 are weak; they are here because devices still
//! run them and their throughput with them is what gets measured (the
//! Cisco 892 report's tests). NULL encryption (RFC 2410) sends the packet
//! in the clear, with integrity.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// The encryption of an ESP suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EspCipher {
    /// AES-GCM with a 16-byte ICV (RFC 4106); `key_len` 16 or 32 bytes.
    AesGcm16 { key_len: u8 },
    /// AES-CBC (RFC 3602); `key_len` 16, 24 or 32 bytes.
    AesCbc { key_len: u8 },
    /// Triple DES (EDE) in CBC mode (RFC 2451), a 24-byte key.
    TripleDesCbc,
    /// DES in CBC mode (RFC 2405), an 8-byte key.
    DesCbc,
    /// No encryption (RFC 2410).
    Null,
}

/// The integrity of an ESP suite: an HMAC truncated as ESP sends it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EspIntegrity {
    /// None of its own: the cipher is AEAD.
    Aead,
    /// HMAC-MD5-96 (RFC 2403).
    Md5,
    /// HMAC-SHA1-96 (RFC 2404).
    Sha1,
    /// HMAC-SHA-256-128 (RFC 4868).
    Sha256,
    /// HMAC-SHA-384-192 (RFC 4868).
    Sha384,
    /// HMAC-SHA-512-256 (RFC 4868).
    Sha512,
}

/// The ESP suites linerate encrypts and decrypts: a cipher and its
/// integrity. The constants name the suites by their strongSwan names.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct EspSuite {
    pub cipher: EspCipher,
    pub integrity: EspIntegrity,
}

/// A proposal string linerate does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown ESP proposal '{0}': use a cipher (aes128gcm16, aes256gcm16, aes128, aes192, aes256, 3des, des, null) and, but for GCM, an integrity (md5, sha1, sha256, sha384, sha512), e.g. aes128-sha256 or 3des-md5")]
pub struct SuiteError(pub String);

/// IKEv2 transform type 1 (encryption) IDs.
pub const ENCR_DES: u16 = 2;
pub const ENCR_3DES: u16 = 3;
pub const ENCR_NULL: u16 = 11;
pub const ENCR_AES_CBC: u16 = 12;
pub const ENCR_AES_GCM_16: u16 = 20;
/// IKEv2 transform type 3 (integrity) IDs.
pub const AUTH_HMAC_MD5_96: u16 = 1;
pub const AUTH_HMAC_SHA1_96: u16 = 2;
pub const AUTH_HMAC_SHA2_256_128: u16 = 12;
pub const AUTH_HMAC_SHA2_384_192: u16 = 13;
pub const AUTH_HMAC_SHA2_512_256: u16 = 14;

const fn suite(cipher: EspCipher, integrity: EspIntegrity) -> EspSuite {
    EspSuite { cipher, integrity }
}
const GCM128: EspCipher = EspCipher::AesGcm16 { key_len: 16 };
const GCM256: EspCipher = EspCipher::AesGcm16 { key_len: 32 };
const AES128: EspCipher = EspCipher::AesCbc { key_len: 16 };
const AES192: EspCipher = EspCipher::AesCbc { key_len: 24 };
const AES256: EspCipher = EspCipher::AesCbc { key_len: 32 };
/// Every suite with its strongSwan name and its report label, GCM first.
macro_rules! table {
    ($( [$c:ident $cn:literal $cl:literal] )*) => {
        [
            (suite(GCM128, EspIntegrity::Aead), "aes128gcm16", "AES128-GCM"),
            (suite(GCM256, EspIntegrity::Aead), "aes256gcm16", "AES256-GCM"),
            $(
                (suite($c, EspIntegrity::Md5), concat!($cn, "-md5"), concat!($cl, " MD5")),
                (suite($c, EspIntegrity::Sha1), concat!($cn, "-sha1"), concat!($cl, " SHA1")),
                (suite($c, EspIntegrity::Sha256), concat!($cn, "-sha256"), concat!($cl, " SHA256")),
                (suite($c, EspIntegrity::Sha384), concat!($cn, "-sha384"), concat!($cl, " SHA384")),
                (suite($c, EspIntegrity::Sha512), concat!($cn, "-sha512"), concat!($cl, " SHA512")),
            )*
        ]
    };
}
const TRIPLE_DES: EspCipher = EspCipher::TripleDesCbc;
const DES: EspCipher = EspCipher::DesCbc;
const NULL: EspCipher = EspCipher::Null;
const TABLE: [(EspSuite, &str, &str); 32] = table!(
    [AES128 "aes128" "AES128-CBC"]
    [AES192 "aes192" "AES192-CBC"]
    [AES256 "aes256" "AES256-CBC"]
    [TRIPLE_DES "3des" "3DES-CBC"]
    [DES "des" "DES-CBC"]
    [NULL "null" "NULL"]
);

#[allow(non_upper_case_globals)]
impl EspSuite {
    /// AES-GCM with a 128-bit key and a 16-byte ICV (RFC 4106).
    pub const Aes128Gcm16: EspSuite = suite(GCM128, EspIntegrity::Aead);
    /// AES-GCM with a 256-bit key and a 16-byte ICV (RFC 4106).
    pub const Aes256Gcm16: EspSuite = suite(GCM256, EspIntegrity::Aead);
    /// AES-CBC-128 (RFC 3602) with HMAC-SHA1-96 (RFC 2404).
    pub const Aes128Sha1: EspSuite = suite(AES128, EspIntegrity::Sha1);
    /// AES-CBC-128 with HMAC-SHA-256-128 (RFC 4868).
    pub const Aes128Sha256: EspSuite = suite(AES128, EspIntegrity::Sha256);
    /// AES-CBC-256 with HMAC-SHA-256-128 (RFC 4868).
    pub const Aes256Sha256: EspSuite = suite(AES256, EspIntegrity::Sha256);
    /// AES-CBC-256 with HMAC-SHA-512-256 (RFC 4868).
    pub const Aes256Sha512: EspSuite = suite(AES256, EspIntegrity::Sha512);
    /// 3DES-CBC with HMAC-MD5-96 (the Cisco report's `esp-3des esp-md5-hmac`).
    pub const TripleDesMd5: EspSuite = suite(EspCipher::TripleDesCbc, EspIntegrity::Md5);
    /// DES-CBC with HMAC-MD5-96 (`esp-des esp-md5-hmac`).
    pub const DesMd5: EspSuite = suite(EspCipher::DesCbc, EspIntegrity::Md5);
    /// No encryption, HMAC-MD5-96 (`esp-null esp-md5-hmac`).
    pub const NullMd5: EspSuite = suite(EspCipher::Null, EspIntegrity::Md5);

    /// Every suite, in the order of [`names`](Self::names).
    pub const ALL: [EspSuite; 32] = {
        let mut all = [EspSuite::Aes128Gcm16; 32];
        let mut i = 0;
        while i < 32 {
            all[i] = TABLE[i].0;
            i += 1;
        }
        all
    };

    /// The names `parse` accepts, in the order of `ALL`.
    pub fn names() -> impl Iterator<Item = &'static str> {
        TABLE.iter().map(|(_, name, _)| *name)
    }

    /// Parses strongSwan's proposal syntax. `aes128gcm128` is strongSwan's
    /// other name for the 16-byte ICV, `sha256`/`sha2_256` are the same,
    /// as are `3des`/`3des_cbc`/`des3`.
    pub fn parse(text: &str) -> Result<EspSuite, SuiteError> {
        let canonical = text.trim().to_ascii_lowercase().replace("sha2_", "sha");
        let canonical = canonical
            .replace("gcm128", "gcm16")
            .replace("-gcm16", "gcm16")
            .replace("3des_cbc", "3des")
            .replace("des3", "3des")
            .trim_end_matches("-noesn")
            .to_string();
        TABLE
            .iter()
            .find(|(_, name, _)| *name == canonical)
            .map(|(suite, _, _)| *suite)
            .ok_or_else(|| SuiteError(text.to_string()))
    }

    fn entry(self) -> &'static (EspSuite, &'static str, &'static str) {
        TABLE
            .iter()
            .find(|(s, _, _)| *s == self)
            .unwrap_or(&TABLE[0])
    }

    /// strongSwan's name for the suite (what `parse` reads back).
    pub fn name(self) -> &'static str {
        self.entry().1
    }

    /// The label reports print ("AES256-GCM", as the LANCOM tables do;
    /// "3DES-CBC MD5").
    pub fn label(self) -> &'static str {
        self.entry().2
    }

    pub fn is_aead(self) -> bool {
        matches!(self.cipher, EspCipher::AesGcm16 { .. })
    }

    /// Whether the suite uses an algorithm broken or too weak for real
    /// protection (DES, 3DES's 64-bit block, MD5, NULL encryption).
    pub fn is_weak(self) -> bool {
        matches!(
            self.cipher,
            EspCipher::TripleDesCbc | EspCipher::DesCbc | EspCipher::Null
        ) || self.integrity == EspIntegrity::Md5
    }

    /// The cipher's key length in bytes (without GCM's 4-byte salt).
    pub fn cipher_key_len(self) -> usize {
        match self.cipher {
            EspCipher::AesGcm16 { key_len } | EspCipher::AesCbc { key_len } => key_len as usize,
            EspCipher::TripleDesCbc => 24,
            EspCipher::DesCbc => 8,
            EspCipher::Null => 0,
        }
    }

    /// Bytes of keying material for the encryption transform as IKEv2
    /// derives it (RFC 4106 §8.1: GCM takes the AES key then a 4-byte salt).
    pub fn encryption_keymat_len(self) -> usize {
        self.cipher_key_len() + if self.is_aead() { 4 } else { 0 }
    }

    /// Bytes of keying material for the integrity transform (0 with AEAD):
    /// the hash's output length (RFC 2403, 2404, 4868).
    pub fn integrity_key_len(self) -> usize {
        match self.integrity {
            EspIntegrity::Aead => 0,
            EspIntegrity::Md5 => 16,
            EspIntegrity::Sha1 => 20,
            EspIntegrity::Sha256 => 32,
            EspIntegrity::Sha384 => 48,
            EspIntegrity::Sha512 => 64,
        }
    }

    /// The explicit IV carried in every packet: 8 bytes for GCM (RFC 4106),
    /// one cipher block for CBC (RFC 3602, 2451, 2405), none for NULL.
    pub fn iv_len(self) -> usize {
        match self.cipher {
            EspCipher::AesGcm16 { .. } => 8,
            EspCipher::AesCbc { .. } => 16,
            EspCipher::TripleDesCbc | EspCipher::DesCbc => 8,
            EspCipher::Null => 0,
        }
    }

    /// The ICV (authentication tag) length in bytes.
    pub fn icv_len(self) -> usize {
        match self.integrity {
            EspIntegrity::Aead => 16,
            EspIntegrity::Md5 | EspIntegrity::Sha1 => 12,
            EspIntegrity::Sha256 => 16,
            EspIntegrity::Sha384 => 24,
            EspIntegrity::Sha512 => 32,
        }
    }

    /// The payload, padding, pad length and next header are padded to this
    /// (RFC 4303 §2.4: the cipher's block, at least 4 bytes).
    pub fn pad_block(self) -> usize {
        match self.cipher {
            EspCipher::AesCbc { .. } => 16,
            EspCipher::TripleDesCbc | EspCipher::DesCbc => 8,
            EspCipher::AesGcm16 { .. } | EspCipher::Null => 4,
        }
    }

    /// IKEv2 encryption transform: its ID and the key length attribute in
    /// bits, which only the variable-length ciphers carry (AES; RFC 7296
    /// §3.3.5: 3DES, DES and NULL have none).
    pub fn ikev2_encryption(self) -> (u16, Option<u16>) {
        let bits = Some((self.cipher_key_len() * 8) as u16);
        match self.cipher {
            EspCipher::AesGcm16 { .. } => (ENCR_AES_GCM_16, bits),
            EspCipher::AesCbc { .. } => (ENCR_AES_CBC, bits),
            EspCipher::TripleDesCbc => (ENCR_3DES, None),
            EspCipher::DesCbc => (ENCR_DES, None),
            EspCipher::Null => (ENCR_NULL, None),
        }
    }

    /// IKEv2 integrity transform ID, none with AEAD.
    pub fn ikev2_integrity(self) -> Option<u16> {
        match self.integrity {
            EspIntegrity::Aead => None,
            EspIntegrity::Md5 => Some(AUTH_HMAC_MD5_96),
            EspIntegrity::Sha1 => Some(AUTH_HMAC_SHA1_96),
            EspIntegrity::Sha256 => Some(AUTH_HMAC_SHA2_256_128),
            EspIntegrity::Sha384 => Some(AUTH_HMAC_SHA2_384_192),
            EspIntegrity::Sha512 => Some(AUTH_HMAC_SHA2_512_256),
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

/// `EspSuite(3des-md5)`: the name says it all (and holds no "key").
impl std::fmt::Debug for EspSuite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EspSuite({})", self.name())
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

/// Written as its strongSwan name.
impl Serialize for EspSuite {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for EspSuite {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<EspSuite, D::Error> {
        let text = String::deserialize(d)?;
        EspSuite::parse(&text).map_err(serde::de::Error::custom)
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
        assert_eq!(EspSuite::parse("3des-md5"), Ok(EspSuite::TripleDesMd5));
        assert_eq!(EspSuite::parse("null-md5"), Ok(EspSuite::NullMd5));
        assert_eq!(EspSuite::parse("aes128-gcm16"), Ok(EspSuite::Aes128Gcm16));
        assert!(EspSuite::parse("aes128gcm16-sha1")
            .unwrap_err()
            .to_string()
            .contains("aes128gcm16"));
        let names: Vec<&str> = EspSuite::names().collect();
        assert_eq!(names.len(), EspSuite::ALL.len());
        let mut unique = names.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), names.len(), "{names:?}");
    }

    #[test]
    fn overhead_matches_rfc_4303_layout() {
        // 100-byte packet, GCM: 8 + 8 IV + pad (100+2 -> 104: 4) ... + 16 ICV.
        assert_eq!(EspSuite::Aes128Gcm16.overhead(100), 8 + 8 + 4 + 16);
        // CBC: 100+2 -> 112, so 12 bytes of trailer; 16-byte IV, 16-byte ICV.
        assert_eq!(EspSuite::Aes128Sha256.overhead(100), 8 + 16 + 12 + 16);
        assert_eq!(EspSuite::Aes128Sha1.overhead(46), 8 + 16 + 2 + 12);
        // 3DES: 8-byte IV and block: 100+2 -> 104; MD5's 12-byte ICV.
        assert_eq!(EspSuite::TripleDesMd5.overhead(100), 8 + 8 + 4 + 12);
        // NULL: no IV, 4-byte alignment.
        assert_eq!(EspSuite::NullMd5.overhead(100), 8 + 4 + 12);
    }

    /// The IKEv2 transforms of RFC 7296 §3.3.2 and §3.3.5: a key length
    /// for AES only.
    #[test]
    fn ikev2_transforms_follow_the_iana_registry() {
        assert_eq!(EspSuite::TripleDesMd5.ikev2_encryption(), (3, None));
        assert_eq!(EspSuite::DesMd5.ikev2_encryption(), (2, None));
        assert_eq!(EspSuite::NullMd5.ikev2_encryption(), (11, None));
        assert_eq!(EspSuite::Aes256Sha512.ikev2_encryption(), (12, Some(256)));
        assert_eq!(
            EspSuite::parse("aes192-sha384").unwrap().ikev2_encryption(),
            (12, Some(192))
        );
        assert_eq!(EspSuite::Aes128Gcm16.ikev2_encryption(), (20, Some(128)));
        assert_eq!(EspSuite::TripleDesMd5.ikev2_integrity(), Some(1));
        assert_eq!(
            EspSuite::parse("aes128-sha384").unwrap().ikev2_integrity(),
            Some(13)
        );
        assert_eq!(EspSuite::Aes128Gcm16.ikev2_integrity(), None);
    }

    #[test]
    fn suites_serialize_as_their_names() {
        let json = serde_json::to_string(&EspSuite::TripleDesMd5).unwrap();
        assert_eq!(json, "\"3des-md5\"");
        assert_eq!(
            serde_json::from_str::<EspSuite>(&json).unwrap(),
            EspSuite::TripleDesMd5
        );
        // The names the suites had as enum variants still read.
        assert_eq!(
            serde_json::from_str::<EspSuite>("\"aes256-gcm16\"").unwrap(),
            EspSuite::Aes256Gcm16
        );
    }
}
