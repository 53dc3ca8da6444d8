//! Property tests (proptest) of the method crate's parser of user text:
//! `--loads` (shares of the throughput for the latency test). Bounded
//! case counts so they run in CI; `PROPTEST_CASES=N` runs them longer.

use linerate_method::latency::parse_loads;
use proptest::prelude::*;

fn config(cases: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(cases);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config(10_000))]

    /// Any text is a list of loads or an error; every load is a share
    /// above 0 and at most 1, one per comma-separated item.
    #[test]
    fn loads_are_shares_in_range(
        s in prop_oneof![
            any::<String>(),
            "([ ]?[-+]?[0-9.eE]{0,8}[ ]?%?[ ]?,?){0,6}",
            "(inf|NaN|-0|0|1e-400|100%|100\\.0001%|1\\.0|1e0)(,|%){0,2}",
        ],
    ) {
        if let Ok(loads) = parse_loads(&s) {
            prop_assert_eq!(loads.len(), s.split(',').count());
            for l in loads {
                prop_assert!(l > 0.0 && l <= 1.0, "'{}' gave {}", s, l);
            }
        }
    }

    /// Loads written as percentages or as fractions read back as written.
    #[test]
    fn loads_round_trip(
        pct in proptest::collection::vec(1u32..=100, 1..8),
        as_fraction in any::<bool>(),
    ) {
        let text = pct
            .iter()
            .map(|p| if as_fraction { format!("{}", *p as f64 / 100.0) } else { format!("{p}%") })
            .collect::<Vec<_>>()
            .join(",");
        let loads = parse_loads(&text).unwrap();
        let want: Vec<f64> = pct.iter().map(|&p| p as f64 / 100.0).collect();
        prop_assert_eq!(loads, want);
    }
}
