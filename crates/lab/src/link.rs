//! Reading one network interface from the kernel (`ip -j link show` inside
//! a namespace): its JSON object, with or without the link's kind and
//! parameters, its MAC address and its packet and byte counters. Building a
//! lab, checking its placement, reporting its status and verifying a
//! scenario all read interfaces this one way.

use crate::{netns, LabError};

/// "aa:bb:cc:dd:ee:ff" to bytes.
fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for byte in &mut mac {
        let part = parts.next()?;
        if part.len() != 2 {
            return None;
        }
        *byte = u8::from_str_radix(part, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

pub(crate) fn format_mac(mac: &[u8; 6]) -> String {
    mac.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// `ip -j link show dev <ifname>` inside `ns`: the interface's JSON object.
pub(crate) fn link_info(ns: &str, ifname: &str) -> Result<serde_json::Value, LabError> {
    let json = netns::ip_json(&["-n", ns, "link", "show", "dev", ifname])?;
    json.as_array()
        .and_then(|a| a.first())
        .cloned()
        .ok_or_else(|| LabError::Parse {
            command: format!("ip -j -n {ns} link show dev {ifname}"),
            detail: "no interface in the output".to_string(),
        })
}

/// `ip -d -j link show dev <ifname>` inside `ns`: with the link's kind and
/// its parameters (`linkinfo`).
pub(crate) fn link_info_detailed(ns: &str, ifname: &str) -> Result<serde_json::Value, LabError> {
    let json = netns::ip_json(&["-d", "-n", ns, "link", "show", "dev", ifname])?;
    Ok(json[0].clone())
}

/// The MAC address of `ifname` inside `ns`.
pub(crate) fn read_mac(ns: &str, ifname: &str) -> Result<[u8; 6], LabError> {
    let info = link_info(ns, ifname)?;
    let text = info["address"].as_str().unwrap_or_default();
    parse_mac(text).ok_or_else(|| LabError::Parse {
        command: format!("ip -j -n {ns} link show dev {ifname}"),
        detail: format!("'{text}' is not a MAC address"),
    })
}

/// Counters of one interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub rx_packets: u64,
    pub rx_bytes: u64,
}

/// An interface's counters inside namespace `ns` (`ip -s -j link show`).
pub(crate) fn link_counters(ns: &str, ifname: &str) -> Result<LinkCounters, LabError> {
    let json = netns::ip_json(&["-s", "-n", ns, "link", "show", "dev", ifname])?;
    let stats = &json[0]["stats64"];
    let n = |dir: &str, key: &str| stats[dir][key].as_u64().unwrap_or(0);
    Ok(LinkCounters {
        tx_packets: n("tx", "packets"),
        tx_bytes: n("tx", "bytes"),
        rx_packets: n("rx", "packets"),
        rx_bytes: n("rx", "bytes"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_round_trip() {
        let mac = parse_mac("a2:4b:e2:89:97:35").unwrap();
        assert_eq!(mac, [0xa2, 0x4b, 0xe2, 0x89, 0x97, 0x35]);
        assert_eq!(format_mac(&mac), "a2:4b:e2:89:97:35");
        assert_eq!(parse_mac("a2:4b:e2:89:97"), None);
        assert_eq!(parse_mac("a2:4b:e2:89:97:35:00"), None);
        assert_eq!(parse_mac("a2:4b:e2:89:97:zz"), None);
        assert_eq!(parse_mac("a24:b:e2:89:97:35"), None);
    }
}
