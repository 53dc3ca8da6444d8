//! Properties of stack.rs's address and size parsers: no panics, accepted
//! values in range, formatted values parse back.

use super::*;
use crate::test_support::{config, text};
use proptest::prelude::*;
use std::net::{Ipv4Addr, Ipv6Addr};

proptest! {
    #![proptest_config(config())]

    #[test]
    fn parsers_never_panic(t in prop_oneof![text(), "[0-9a-fA-F.:/]{0,24}"]) {
        if let Ok((ip, len)) = parse_cidr(&t, "--ip") {
            prop_assert!(len <= if ip.is_ipv6() { 128 } else { 32 }, "{t:?}");
        }
        let _ = parse_ip(&t, "--connect-to");
        if let Ok(n) = parse_size(&t, "--window") {
            prop_assert!(n > 0, "{t:?}");
        }
    }

    #[test]
    fn addresses_round_trip(v4: [u8; 4], v6: [u16; 8], len in 0u8..=128) {
        let a = IpAddr::V4(Ipv4Addr::from(v4));
        let b = IpAddr::V6(Ipv6Addr::from(v6));
        prop_assert_eq!(parse_ip(&a.to_string(), "x").unwrap(), a);
        prop_assert_eq!(parse_ip(&b.to_string(), "x").unwrap(), b);
        let cidr = parse_cidr(&format!("{a}/{len}"), "x");
        prop_assert_eq!(cidr.ok(), (len <= 32).then_some((a, len)));
        prop_assert_eq!(parse_cidr(&format!("{b}/{len}"), "x").unwrap(), (b, len));
    }

    #[test]
    fn sizes_round_trip(n in 1u64..1 << 34, unit in 0usize..4) {
        let (suffix, mult) = [("", 1u64), ("k", 1 << 10), ("M", 1 << 20), ("G", 1 << 30)][unit];
        let parsed = parse_size(&format!("{n}{suffix}"), "x").ok();
        prop_assert_eq!(parsed, n.checked_mul(mult));
    }
}
