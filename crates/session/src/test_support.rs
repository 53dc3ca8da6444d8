//! What the property tests beside the parsers share (issue 17: the
//! session crate's parsers, fuzzed as crates/wire/tests/properties.rs does
//! the wire crate's).

use proptest::prelude::ProptestConfig;

/// Cases per property unless `PROPTEST_CASES` says otherwise.
pub const CASES: u32 = 10_000;

pub fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CASES);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// Arbitrary text: any printable characters, and strings made of the
/// characters the parsers look at (digits, signs, units, separators).
pub fn text() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof!["\\PC{0,24}", "[0-9.eE+\\-%_ kKmMgGsnuhdy/:,;=x]{0,16}",]
}
