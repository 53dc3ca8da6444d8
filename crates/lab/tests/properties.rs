//! Property tests (proptest) of `--scenario` parsing: any text is a list
//! of scenarios or a one-line error, and a scenario's normalised spec
//! reads back as the same scenario. No root needed. Bounded case counts
//! so they run in CI; `PROPTEST_CASES=N` runs them longer.

use linerate_lab::scenario::{Part, Scenario, MAX_ROUTES, MAX_RULES};
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

/// Scenario-like text: known part names in any case and spacing, counts
/// in and out of range, joined by '+' and ','.
fn scenario_like() -> impl Strategy<Value = String> {
    let part = prop_oneof![
        Just("lan-lan".to_string()),
        Just("WAN-LAN".to_string()),
        Just("xdp-router".to_string()),
        Just("drop-test".to_string()),
        (
            prop::sample::select(vec!["acl", "firewall", "routes", "Acl "]),
            any::<i64>()
        )
            .prop_map(|(n, v)| format!("{n}:{v}")),
        (
            prop::sample::select(vec!["acl", "firewall", "routes"]),
            0u32..=2_100_000
        )
            .prop_map(|(n, v)| format!("{n}:{v}")),
        prop::sample::select(vec![
            "tunnel:vxlan",
            "tunnel:wg",
            "tunnel:gre",
            "tunnel:ipsec",
            "tunnel:ipsec:aes-gcm",
            "tunnel:ipsec:null",
            "tunnel:ipsec:bogus",
            "vpn-gateway",
            "vpn-gateway:aes256gcm16",
            "vpn-gateway:AES128-sha2_256",
            "vpn-gateway:aes-gcm",
            "vpn-gateway:null",
            "tunnel:",
            "tunnel",
            ":",
            "",
        ])
        .prop_map(str::to_string),
    ];
    proptest::collection::vec(
        (part, prop::sample::select(vec!["+", ",", " + ", "++"])),
        1..5,
    )
    .prop_map(|v| {
        let mut s = String::new();
        for (i, (p, j)) in v.iter().enumerate() {
            if i > 0 {
                s += j;
            }
            s += p;
        }
        s
    })
}

proptest! {
    #![proptest_config(config(10_000))]

    #[test]
    fn scenarios_parse_or_refuse_and_read_back_as_themselves(
        s in prop_oneof![any::<String>(), scenario_like()],
    ) {
        let Ok(list) = Scenario::parse_list(&s) else {
            return Ok(());
        };
        prop_assert!(!list.is_empty());
        for sc in &list {
            prop_assert!(!sc.parts.is_empty());
            prop_assert!(!sc.spec.chars().any(|c| c.is_whitespace() || c.is_uppercase()));
            for p in &sc.parts {
                match p {
                    Part::Acl(n) | Part::Firewall(n) => prop_assert!(*n <= MAX_RULES),
                    Part::Routes(n) => prop_assert!((1..=MAX_ROUTES).contains(n)),
                    _ => {}
                }
            }
            prop_assert_eq!(&Scenario::parse(&sc.spec).unwrap(), sc);
        }
        let specs: Vec<&str> = list.iter().map(|sc| sc.spec.as_str()).collect();
        prop_assert_eq!(Scenario::parse_list(&specs.join(",")).unwrap(), list);
    }
}
