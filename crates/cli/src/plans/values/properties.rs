//! Properties of the option parsers in values.rs: they never panic, what
//! they accept is in range, and what a formatter writes parses back.

use super::*;
use linerate_session::test_support::{config, text};
use proptest::prelude::*;

proptest! {
    #![proptest_config(config())]

    #[test]
    fn shares_never_panic_and_stay_in_range(t in text()) {
        if let Ok(r) = parse_share(&t, "--loss", Zero::Allowed) {
            prop_assert!(r.is_finite() && (0.0..1.0).contains(&r), "{t:?} -> {r}");
        }
        if let Ok(r) = parse_share(&t, "--resolution", Zero::Refused) {
            prop_assert!(r.is_finite() && r > 0.0 && r < 1.0, "{t:?} -> {r}");
        }
    }

    #[test]
    fn shares_round_trip(p in 0u32..10_000, percent: bool) {
        let ratio = p as f64 / 10_000.0;
        let t = if percent { format!("{}%", ratio * 100.0) } else { format!("{ratio}") };
        let r = parse_share(&t, "--loss", Zero::Allowed).unwrap();
        prop_assert!((r - ratio).abs() < 1e-12, "{t} -> {r}");
        prop_assert_eq!(parse_share(&t, "--resolution", Zero::Refused).is_ok(), p > 0);
    }

    #[test]
    fn durations_never_panic(t in text()) {
        let _ = parse_duration(&t, "--duration");
        if let Ok(d) = parse_trial_duration(&t, "--trial-duration") {
            prop_assert!(d >= MIN_TRIAL, "{t:?} -> {d:?}");
        }
    }

    #[test]
    fn durations_round_trip(ms in 0u64..10_000_000_000) {
        let d = Duration::from_millis(ms);
        let t = humantime::format_duration(d).to_string();
        prop_assert_eq!(parse_duration(&t, "--duration").unwrap(), d);
        prop_assert_eq!(parse_trial_duration(&t, "--trial-duration").is_ok(), d >= MIN_TRIAL);
    }

    #[test]
    fn gateway_macs_never_panic_and_are_unicast(t in prop_oneof![text(), "[0-9a-fA-F:\\-]{0,20}"]) {
        if let Ok(mac) = parse_gateway_mac(&t, "a") {
            prop_assert!(!mac.is_multicast() && !mac.is_broadcast() && mac != MacAddr::ZERO, "{t:?}");
        }
    }

    #[test]
    fn gateway_macs_round_trip(octets: [u8; 6]) {
        let mac = MacAddr(octets);
        let parsed = parse_gateway_mac(&mac.to_string(), "b");
        if mac.is_multicast() || mac == MacAddr::ZERO {
            prop_assert!(parsed.is_err());
        } else {
            prop_assert_eq!(parsed.unwrap(), mac);
        }
    }

        /// Any text: no panic; an accepted target is a load above 0 and below 100 %.
        #[test]
        fn targets_are_loads(t in text()) {
            if let Ok(p) = parse_target(&t) {
                prop_assert!(p.is_finite() && p > 0.0 && p < 100.0, "{t:?} -> {p}");
            }
        }

        #[test]
        fn targets_round_trip(p in 1u32..10_000) {
            let pct = p as f64 / 100.0;
            let got = parse_target(&format!("{pct}%")).unwrap();
            prop_assert!((got - pct).abs() < 1e-9, "{pct} -> {got}");
        }
}
