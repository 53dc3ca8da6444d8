//! Helpers for the tests: hex as the RFCs print it, and keys for every suite.

use crate::keys::SaKeys;
use crate::suite::EspSuite;

/// Bytes from hex, whitespace ignored (the RFCs wrap and group their hex).
pub(crate) fn hex(text: &str) -> Vec<u8> {
    let digits: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    assert!(digits.len() % 2 == 0, "odd hex: {text}");
    digits
        .chunks(2)
        .map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).unwrap())
        .collect()
}

/// Keys for `suite` with recognisable, distinct bytes.
pub(crate) fn keys(suite: EspSuite, spi: u32) -> SaKeys {
    SaKeys::new(
        suite,
        spi,
        (0..suite.encryption_keymat_len() as u8)
            .map(|i| i.wrapping_mul(7).wrapping_add(1))
            .collect(),
        (0..suite.integrity_key_len() as u8)
            .map(|i| i.wrapping_mul(13).wrapping_add(5))
            .collect(),
    )
    .unwrap()
}
