//! The nftables parts of the scenarios: ACL lines, firewall policies and
//! NAT, each loaded with `nft -f` in the DUT namespace and read back with
//! `nft -j`.

use super::tools::private_file;
use crate::stop::StopCheck;
use crate::{netns, LabError};
use serde_json::Value;
use std::net::Ipv4Addr;

/// Table and chain of the ACL / firewall rules.
const FILTER_TABLE: &str = "linerate_filter";
/// Table of the NAT rule.
const NAT_TABLE: &str = "linerate_nat";
/// Table of the drop test's drop rule.
const DROP_TABLE: &str = "linerate_drop";
/// Table of the VPN gateway's policy for clear packets.
const VPN_TABLE: &str = "linerate_vpn";
/// The lab's test networks (RFC 2544 Appendix C): what the permit rule
/// lets through, in both directions.
const TEST_NET: &str = "198.18.0.0/15";

/// A source address no test frame uses, distinct for each `i`:
/// 10.0.0.1, 10.0.0.2, ... (10.0.0.0/8 holds 16 million).
fn other_host(i: u32) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 0, 0, 0)) + i + 1)
}

/// The ruleset of `acl:N` (stateless) or `firewall:N` (stateful).
///
/// The ACL is the Cisco report's: lines permitting other hosts, which the
/// test traffic does not match, each a rule of its own so that nftables
/// tests every packet against every line (an nft *set* would be one hash
/// lookup, not N tests); then the permit line for the test networks
/// (counted), then the implicit deny (policy drop). The firewall adds
/// connection tracking (`ct state invalid drop` first, as stateful
/// firewalls do) and matches 5-tuples (addresses and UDP port).
pub(crate) fn ruleset(n: u32, stateful: bool) -> String {
    let mut text = format!(
        "table ip {FILTER_TABLE} {{\n  chain forward {{\n    type filter hook forward priority 0; policy drop;\n"
    );
    if stateful {
        text.push_str("    ct state invalid drop\n");
    }
    for i in 0..n {
        let line = if stateful {
            format!(
                "    ip saddr {} ip daddr {} udp dport {} accept\n",
                other_host(i),
                other_host(i + MAX_OFFSET),
                1024 + i % 60000
            )
        } else {
            format!(
                "    ip saddr {} ip daddr 198.19.0.2 accept\n",
                other_host(i)
            )
        };
        text.push_str(&line);
    }
    text.push_str(&format!(
        "    ip saddr {TEST_NET} ip daddr {TEST_NET} counter accept comment \"permit\"\n  }}\n}}\n"
    ));
    text
}

/// Offset between a policy's source and destination host.
const MAX_OFFSET: u32 = 1 << 22;

/// Loads the ACL / firewall and checks the rule count read back; `stop`
/// ends the load or the read-back (seconds each for 100,000 rules).
pub(crate) fn rules(
    ns: &str,
    n: u32,
    stateful: bool,
    stop: &StopCheck,
) -> Result<String, LabError> {
    load_until(ns, "filter.nft", &ruleset(n, stateful), stop.requested)?;
    stop.go_on()?;
    let rules = chain_rules_until(ns, FILTER_TABLE, stop.requested)?;
    let expected = n as usize + 1 + usize::from(stateful);
    if rules.len() != expected {
        return Err(not_in_effect(format!(
            "nft lists {} rules in table ip {FILTER_TABLE}, {expected} were loaded",
            rules.len()
        )));
    }
    let what = if stateful {
        "stateful firewall: a ct state check,"
    } else {
        "ACL:"
    };
    Ok(format!(
        "{what} {n} non-matching rules and the permit rule in the forward chain (read back with nft -j: {expected} rules)"
    ))
}

/// Packets counted by the permit rule (the last rule with a counter).
pub(crate) fn permit_count(ns: &str) -> Result<u64, LabError> {
    let rules = chain_rules(ns, FILTER_TABLE)?;
    Ok(rules
        .iter()
        .rev()
        .find_map(counter_packets)
        .unwrap_or_default())
}

/// The ruleset of `drop-test`: one counted rule dropping every forwarded
/// packet from `source`, in a base chain of its own that runs before the
/// ACL / firewall chain (priority -10), so it combines with them.
pub(crate) fn drop_ruleset(source: Ipv4Addr) -> String {
    format!(
        "table ip {DROP_TABLE} {{\n  chain forward {{\n    type filter hook forward priority -10; policy accept;\n    ip saddr {source} counter drop comment \"drop-test\"\n  }}\n}}\n"
    )
}

/// `drop-test`: loads the drop rule and reads it back.
pub(crate) fn drop_from(ns: &str, source: Ipv4Addr) -> Result<String, LabError> {
    load(ns, "drop.nft", &drop_ruleset(source))?;
    let rules = chain_rules(ns, DROP_TABLE)?;
    if rules.len() != 1 || !has_statement(&rules[0], "drop") {
        return Err(not_in_effect(format!(
            "nft lists {} rules in table ip {DROP_TABLE}, not the one drop rule loaded",
            rules.len()
        )));
    }
    Ok(format!(
        "drop test: every forwarded packet from {source} is dropped by a counted rule (read back with nft -j)"
    ))
}

/// Packets the drop test's rule dropped.
pub(crate) fn drop_count(ns: &str) -> Result<u64, LabError> {
    let rules = chain_rules(ns, DROP_TABLE)?;
    Ok(rules.iter().find_map(counter_packets).unwrap_or_default())
}

/// The ruleset of `vpn-gateway`'s inbound policy: a counted rule dropping
/// every packet from the protected remote network `net` that arrives in
/// the clear on the WAN interface `wan_if`, as the kernel's IPsec policy
/// would (kernel-libipsec installs no policies: its decrypted packets come
/// from the TUN device, and without this rule the router would forward
/// clear ones too). A base chain of its own, before the others.
pub(crate) fn vpn_clear_ruleset(net: &str, wan_if: &str) -> String {
    format!(
        "table ip {VPN_TABLE} {{\n  chain forward {{\n    type filter hook forward priority -20; policy accept;\n    iifname \"{wan_if}\" ip saddr {net} counter drop comment \"clear from the protected network\"\n  }}\n}}\n"
    )
}

/// `vpn-gateway`: loads the clear-packet drop rule and reads it back.
pub(crate) fn vpn_clear_drop(ns: &str, net: &str, wan_if: &str) -> Result<(), LabError> {
    load(ns, "vpn.nft", &vpn_clear_ruleset(net, wan_if))?;
    let rules = chain_rules(ns, VPN_TABLE)?;
    if rules.len() != 1 || !has_statement(&rules[0], "drop") {
        return Err(not_in_effect(format!(
            "nft lists {} rules in table ip {VPN_TABLE}, not the one drop rule loaded",
            rules.len()
        )));
    }
    Ok(())
}

/// Clear packets from the protected network the gateway dropped.
pub(crate) fn vpn_clear_count(ns: &str) -> Result<u64, LabError> {
    let rules = chain_rules(ns, VPN_TABLE)?;
    Ok(rules.iter().find_map(counter_packets).unwrap_or_default())
}

/// `wan-lan`: masquerade on the DUT's B side (its WAN interface).
pub(crate) fn masquerade(ns: &str) -> Result<String, LabError> {
    let text = format!(
        "table ip {NAT_TABLE} {{\n  chain postrouting {{\n    type nat hook postrouting priority srcnat; policy accept;\n    oifname \"dut-b\" counter masquerade\n  }}\n}}\n"
    );
    load(ns, "nat.nft", &text)?;
    let rules = chain_rules(ns, NAT_TABLE)?;
    if !rules.iter().any(|r| has_statement(r, "masquerade")) {
        return Err(not_in_effect(format!(
            "no masquerade rule in table ip {NAT_TABLE} after loading it"
        )));
    }
    Ok(
        "NAT: masquerade on dut-b (the WAN side) in the postrouting chain (read back with nft -j)"
            .into(),
    )
}

/// After traffic: a conntrack entry of the test flow whose reply goes to
/// another address than the original source, i.e. the source was translated.
pub(crate) fn translation_seen(ns: &str) -> Result<String, LabError> {
    let table = netns::read_in(ns, "/proc/net/nf_conntrack")?;
    for line in table.lines() {
        if let Some(t) = Translation::parse(line) {
            if t.orig_src.starts_with("198.18.") && t.reply_dst != t.orig_src {
                return Ok(format!(
                    "NAT seen in conntrack: {}:{} -> {} leaves as {}:{}",
                    t.orig_src, t.orig_sport, t.orig_dst, t.reply_dst, t.reply_dport
                ));
            }
        }
    }
    Err(not_in_effect(
        "no translated test flow in the DUT's conntrack table: the traffic was not NATed"
            .to_string(),
    ))
}

/// The address fields of one /proc/net/nf_conntrack line.
#[derive(Debug, PartialEq, Eq)]
struct Translation<'a> {
    orig_src: &'a str,
    orig_dst: &'a str,
    orig_sport: &'a str,
    reply_dst: &'a str,
    reply_dport: &'a str,
}

impl<'a> Translation<'a> {
    /// The original tuple comes first, then the reply tuple.
    fn parse(line: &'a str) -> Option<Translation<'a>> {
        let values = |key: &str| -> Vec<&'a str> {
            line.split_whitespace()
                .filter_map(|w| w.strip_prefix(key))
                .collect()
        };
        let (src, dst) = (values("src="), values("dst="));
        let (sport, dport) = (values("sport="), values("dport="));
        Some(Translation {
            orig_src: src.first()?,
            orig_dst: dst.first()?,
            orig_sport: sport.first()?,
            reply_dst: dst.get(1)?,
            reply_dport: dport.get(1)?,
        })
    }
}

/// Whether an `nft -j` rule holds a statement of this kind ("drop", "masquerade").
fn has_statement(rule: &Value, kind: &str) -> bool {
    rule["expr"]
        .as_array()
        .is_some_and(|e| e.iter().any(|x| x.get(kind).is_some()))
}

fn counter_packets(rule: &Value) -> Option<u64> {
    rule["expr"]
        .as_array()?
        .iter()
        .find_map(|e| e["counter"]["packets"].as_u64())
}

/// Loads a ruleset file with `nft -f` inside `ns`.
fn load(ns: &str, stem: &str, text: &str) -> Result<(), LabError> {
    load_until(ns, stem, text, &|| false)
}

/// [`load`] that ends `nft` early once `stop` returns true (nftables
/// commits the file as one transaction: none of it is then loaded).
fn load_until(ns: &str, stem: &str, text: &str, stop: &dyn Fn() -> bool) -> Result<(), LabError> {
    let (dir, path) = private_file(stem, text)?;
    let path_text = path.to_string_lossy().into_owned();
    let result = netns::exec_in_until(ns, &["nft", "-f", &path_text], stop);
    drop(dir);
    result.map(|_| ())
}

/// The rules of `table` (family ip) as `nft -j` lists them.
fn chain_rules(ns: &str, table: &str) -> Result<Vec<Value>, LabError> {
    chain_rules_until(ns, table, &|| false)
}

/// [`chain_rules`] that ends `nft` early once `stop` returns true.
fn chain_rules_until(
    ns: &str,
    table: &str,
    stop: &dyn Fn() -> bool,
) -> Result<Vec<Value>, LabError> {
    let out = netns::exec_in_until(ns, &["nft", "-j", "list", "table", "ip", table], stop)?;
    let json: Value = serde_json::from_str(&out).map_err(|e| LabError::Parse {
        command: format!("nft -j list table ip {table}"),
        detail: e.to_string(),
    })?;
    Ok(json["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|item| item.get("rule").cloned())
        .collect())
}

fn not_in_effect(detail: String) -> LabError {
    LabError::NotInEffect {
        scenario: String::new(),
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn acl_rules_are_separate_and_never_match_the_test_traffic() {
        let text = ruleset(12, false);
        let lines: Vec<&str> = text.lines().filter(|l| l.contains(" accept")).collect();
        assert_eq!(lines.len(), 13, "{text}");
        for l in &lines[..12] {
            assert!(l.contains("ip saddr 10."), "{l}");
            assert!(!l.contains('{'), "a set would be one lookup: {l}");
        }
        assert!(lines[12].contains("counter accept"), "{text}");
        assert!(text.contains("policy drop"));
        assert!(!text.contains("ct state"));
        assert!(ruleset(3, true).contains("ct state invalid drop"));
        assert!(ruleset(3, true).contains("udp dport 1026"));
        assert_eq!(other_host(0), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(other_host(256), Ipv4Addr::new(10, 0, 1, 1));
    }

    #[test]
    fn drop_rule_is_one_counted_rule_before_the_filter() {
        let text = drop_ruleset(Ipv4Addr::new(198, 18, 0, 200));
        assert!(text.contains("priority -10; policy accept;"), "{text}");
        assert!(
            text.contains("ip saddr 198.18.0.200 counter drop"),
            "{text}"
        );
        assert_eq!(text.matches(" drop").count(), 1, "{text}");
    }

    #[test]
    fn vpn_rule_drops_only_clear_packets_from_the_protected_network() {
        let text = vpn_clear_ruleset("198.19.1.0/24", "dut-b");
        assert!(text.contains("priority -20; policy accept;"), "{text}");
        assert!(
            text.contains("iifname \"dut-b\" ip saddr 198.19.1.0/24 counter drop"),
            "{text}"
        );
        assert_eq!(text.matches(" drop").count(), 1, "{text}");
    }

    #[test]
    fn conntrack_lines_parse() {
        let line = "ipv4     2 udp      17 29 src=198.18.0.2 dst=198.19.0.2 sport=19538 dport=19538 [UNREPLIED] src=198.19.0.2 dst=198.19.0.1 sport=19538 dport=19538 mark=0 zone=0 use=2";
        let t = Translation::parse(line).unwrap();
        assert_eq!(t.orig_src, "198.18.0.2");
        assert_eq!(t.reply_dst, "198.19.0.1");
        assert_eq!(t.reply_dport, "19538");
        assert_eq!(Translation::parse("garbage"), None);
    }
}
