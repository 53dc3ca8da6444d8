//! Keying material of one SA, as IKEv2 derives it (RFC 7296 §2.17).

use zeroize::Zeroize;

use crate::error::EspError;
use crate::suite::{EspCipher, EspIntegrity, EspSuite};

/// The keys of one ESP SA (one direction), as IKEv2's KEYMAT gives them:
/// the encryption key first, then the integrity key.
///
/// For GCM `encryption_key` is the AES key followed by the 4-byte salt
/// (RFC 4106 §8.1) and `integrity_key` is empty; for CBC suites it is the
/// AES key and `integrity_key` is the HMAC key (20, 32 or 64 bytes).
///
/// The key bytes are wiped when the value is dropped and never printed:
/// `Debug` shows the SPI and suite only, so an SA can be logged freely.
/// (Copies the caller made before, e.g. while a `Vec` grew, are the caller's
/// to wipe.)
#[derive(Clone)]
pub struct SaKeys {
    pub suite: EspSuite,
    /// The SPI the receiver chose; it is sent in every packet.
    pub spi: u32,
    pub encryption_key: Vec<u8>,
    pub integrity_key: Vec<u8>,
}

impl SaKeys {
    /// One line of Wireshark's ESP SA table (the `esp_sa` file in its
    /// profile, as strongSwan's save-keys plugin writes it): with it,
    /// Wireshark decrypts this SA's packets from `src` to `dst` in a
    /// capture. The keys are in the line: it goes only to a file its
    /// owner alone can read.
    pub fn wireshark_esp_sa(&self, src: std::net::Ipv4Addr, dst: std::net::Ipv4Addr) -> String {
        let encryption = match self.suite.cipher {
            EspCipher::AesGcm16 { .. } => "AES-GCM with 16 octet ICV [RFC4106]",
            EspCipher::AesCbc { .. } => "AES-CBC [RFC3602]",
            EspCipher::TripleDesCbc => "TripleDES-CBC [RFC2451]",
            EspCipher::DesCbc => "DES-CBC [RFC2405]",
            EspCipher::Null => "NULL",
        };
        let integrity = match self.suite.integrity {
            EspIntegrity::Aead => "NULL",
            EspIntegrity::Md5 => "HMAC-MD5-96 [RFC2403]",
            EspIntegrity::Sha1 => "HMAC-SHA-1-96 [RFC2404]",
            EspIntegrity::Sha256 => "HMAC-SHA-256-128 [RFC4868]",
            EspIntegrity::Sha384 => "HMAC-SHA-384-192 [RFC4868]",
            EspIntegrity::Sha512 => "HMAC-SHA-512-256 [RFC4868]",
        };
        let hex = |bytes: &[u8]| -> String {
            if bytes.is_empty() {
                return String::new();
            }
            let digits: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
            format!("0x{digits}")
        };
        format!(
            "\"IPv4\",\"{src}\",\"{dst}\",\"0x{:08x}\",\"{encryption}\",\"{}\",\"{integrity}\",\"{}\"",
            self.spi,
            hex(&self.encryption_key),
            hex(&self.integrity_key)
        )
    }
}

impl SaKeys {
    /// Keys checked against the suite's lengths, so a wrong KEYMAT split
    /// shows up here rather than as ICV failures at the gateway.
    pub fn new(
        suite: EspSuite,
        spi: u32,
        encryption_key: Vec<u8>,
        integrity_key: Vec<u8>,
    ) -> Result<SaKeys, EspError> {
        let keys = SaKeys {
            suite,
            spi,
            encryption_key,
            integrity_key,
        };
        keys.validate()?;
        Ok(keys)
    }

    /// Checks the key lengths against the suite (the fields are public, so
    /// `Outbound::new` and `Inbound::new` check again).
    pub fn validate(&self) -> Result<(), EspError> {
        let s = self.suite;
        let check = |what, expected: usize, got: usize| {
            if expected == got {
                Ok(())
            } else {
                Err(EspError::KeyLength {
                    suite: s,
                    what,
                    expected,
                    got,
                })
            }
        };
        check(
            if s.is_aead() {
                "encryption (AES key and salt)"
            } else {
                "encryption"
            },
            s.encryption_keymat_len(),
            self.encryption_key.len(),
        )?;
        check("integrity", s.integrity_key_len(), self.integrity_key.len())
    }

    /// The AES key (without GCM's salt).
    pub(crate) fn cipher_key(&self) -> &[u8] {
        &self.encryption_key[..self.suite.cipher_key_len()]
    }

    /// GCM's 4-byte salt, the implicit part of the nonce (RFC 4106 §4).
    pub(crate) fn salt(&self) -> [u8; 4] {
        let mut salt = [0u8; 4];
        if self.suite.is_aead() {
            salt.copy_from_slice(&self.encryption_key[self.suite.cipher_key_len()..]);
        }
        salt
    }
}

impl Drop for SaKeys {
    fn drop(&mut self) {
        self.encryption_key.zeroize();
        self.integrity_key.zeroize();
    }
}

impl std::fmt::Debug for SaKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaKeys")
            .field("suite", &self.suite)
            .field("spi", &format_args!("{:#010x}", self.spi))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_shows_spi_and_suite_but_no_key_bytes() {
        let keys = SaKeys::new(
            EspSuite::Aes128Sha256,
            0xc0ffee01,
            vec![0xAB; 16],
            vec![0xCD; 32],
        )
        .unwrap();
        let text = format!("{keys:?} {keys:#?}");
        assert!(text.contains("0xc0ffee01"), "{text}");
        assert!(text.contains("aes128-sha256"), "{text}");
        for needle in ["171", "205", "ab", "AB", "cd", "CD", "[", "encryption_key"] {
            assert!(!text.contains(needle), "{needle} in {text}");
        }
    }

    #[test]
    fn key_lengths_are_checked_against_the_suite() {
        for suite in EspSuite::ALL {
            let ok = SaKeys::new(
                suite,
                1,
                vec![1; suite.encryption_keymat_len()],
                vec![2; suite.integrity_key_len()],
            );
            assert!(ok.is_ok(), "{suite}");
            // Shorter, or (NULL has no key) longer.
            let wrong = suite.encryption_keymat_len().checked_sub(1).unwrap_or(1);
            let short = SaKeys::new(suite, 1, vec![1; wrong], vec![2; suite.integrity_key_len()]);
            assert!(matches!(short, Err(EspError::KeyLength { .. })), "{suite}");
            let integ = SaKeys::new(
                suite,
                1,
                vec![1; suite.encryption_keymat_len()],
                vec![2; suite.integrity_key_len() + 1],
            );
            assert!(matches!(integ, Err(EspError::KeyLength { .. })), "{suite}");
        }
        // GCM without its salt is the classic KEYMAT mistake.
        let e = SaKeys::new(EspSuite::Aes128Gcm16, 1, vec![0; 16], vec![]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "aes128gcm16 needs a 20-byte encryption (AES key and salt) key, got 16 bytes"
        );
    }

    #[test]
    fn gcm_salt_is_the_last_four_bytes() {
        let mut k = vec![0u8; 36];
        k[32..].copy_from_slice(&[1, 2, 3, 4]);
        let keys = SaKeys::new(EspSuite::Aes256Gcm16, 1, k, vec![]).unwrap();
        assert_eq!(keys.salt(), [1, 2, 3, 4]);
        assert_eq!(keys.cipher_key().len(), 32);
    }
}

#[cfg(test)]
mod wireshark_tests {
    use super::*;

    #[test]
    fn an_esp_sa_line_is_what_wireshark_reads() {
        let gcm = SaKeys::new(
            EspSuite::Aes128Gcm16,
            0xc0ffee01,
            vec![0xab; 20],
            Vec::new(),
        )
        .unwrap();
        assert_eq!(
            gcm.wireshark_esp_sa("198.19.0.2".parse().unwrap(), "198.19.0.1".parse().unwrap()),
            format!(
                "\"IPv4\",\"198.19.0.2\",\"198.19.0.1\",\"0xc0ffee01\",\"AES-GCM with 16 octet ICV [RFC4106]\",\"0x{}\",\"NULL\",\"\"",
                "ab".repeat(20)
            )
        );
        let cbc = SaKeys::new(EspSuite::Aes256Sha512, 1, vec![1; 32], vec![2; 64]).unwrap();
        let line = cbc.wireshark_esp_sa("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        assert!(
            line.contains("\"0x00000001\",\"AES-CBC [RFC3602]\",\"0x0101"),
            "{line}"
        );
        assert!(
            line.ends_with(&format!(
                "\"HMAC-SHA-512-256 [RFC4868]\",\"0x{}\"",
                "02".repeat(64)
            )),
            "{line}"
        );
    }
}
