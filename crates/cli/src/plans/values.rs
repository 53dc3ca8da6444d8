//! Option values as text, parsed into the typed values the plans hold:
//! hosts (`--ip-X`, `--gw-X`, `--gw-mac-X`), durations, shares (`--loss`,
//! `--resolution`, `--target`). Each refusal is one line naming the option
//! and the fix; the session below takes only the typed values.

use linerate_engine::host::Ipv6Host;
use linerate_engine::HostConfig;
use linerate_session::error::{bail, err, Result, ResultExt};
use linerate_wire::cidr::{Cidr, CidrError};
use linerate_wire::{Encap, IpVersion, MacAddr};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// `--gw-mac-X`: the gateway's own MAC. Test frames are sent to it, so it
/// must be one station's (unicast, not all zeros): frames to a broadcast or
/// multicast address reach the receiving port with no DUT in between, and a
/// trial would "pass" whatever the DUT does.
pub fn parse_gateway_mac(text: &str, side: &str) -> Result<MacAddr> {
    let mac = text
        .parse::<MacAddr>()
        .with_context(|| format!("--gw-mac-{side}"))?;
    let what = if mac.is_broadcast() {
        "the broadcast address"
    } else if mac.is_multicast() {
        "a multicast address (the first octet is odd)"
    } else if mac == MacAddr::ZERO {
        "all zeros"
    } else {
        return Ok(mac);
    };
    bail!(BadInput, "--gw-mac-{side} {text} is {what}, not a gateway's own MAC: give the DUT port's unicast MAC (ip link show on the DUT), or leave the option out to resolve it by ARP")
}

/// Port `side`'s emulated host from `--ip-X`, `--gw-X` and `--gw-mac-X`:
/// addresses of the test frames' IP version (IPv6 with `--ipv6`), the
/// gateway on the host's subnet (IPv4) or prefix (IPv6).
pub fn host_config(
    side: &str,
    ip: &Option<String>,
    gw: &Option<String>,
    gw_mac: &Option<String>,
    encap: &Encap,
) -> Result<HostConfig> {
    let v6 = encap.ip == IpVersion::V6;
    let (version, example, net, bits, set) = if v6 {
        ("IPv6", "2001:2::2/64", "prefix", 128u32, " (--ipv6 is set)")
    } else {
        ("IPv4", "198.18.0.2/24", "subnet", 32u32, "")
    };
    let ip = ip.as_deref().ok_or_else(|| {
        err!(BadInput, "--ip-{side} is missing: give port {side}'s {version} address as ADDR/LEN, e.g. {example}")
    })?;
    let gw = gw.as_deref().ok_or_else(|| {
        err!(
            BadInput,
            "--gw-{side} is missing: give the DUT's {version} address on port {side}'s {net}"
        )
    })?;
    let cidr = ip.parse::<Cidr>();
    if cidr == Err(CidrError::NoPrefix) {
        bail!(
            BadInput,
            "--ip-{side} '{ip}' has no prefix length: write it as ADDR/LEN, e.g. {example}"
        );
    }
    let of_version = |text: &str| text.parse::<IpAddr>().ok().filter(|a| a.is_ipv6() == v6);
    let addr_text = ip.split_once('/').map_or(ip, |(a, _)| a);
    let addr = of_version(addr_text).ok_or_else(|| {
        err!(
            BadInput,
            "--ip-{side} '{ip}': '{addr_text}' is not an {version} address{set}"
        )
    })?;
    // The address is of the version asked for: the parser's bound is `bits`.
    let len = cidr
        .ok()
        .map(|c| c.prefix_len)
        .filter(|&l| l >= 1)
        .ok_or_else(|| {
            err!(
                BadInput,
                "--ip-{side} '{ip}': prefix length must be 1..{bits}"
            )
        })?;
    let gateway = of_version(gw).ok_or_else(|| {
        err!(
            BadInput,
            "--gw-{side} '{gw}' is not an {version} address{set}"
        )
    })?;
    let as_bits = |a: IpAddr| match a {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    };
    let mask = u128::MAX << (bits - u32::from(len));
    if as_bits(addr) & mask != as_bits(gateway) & mask {
        bail!(BadInput, "--gw-{side} {gateway} is not in port {side}'s {net} {ip}: the gateway must be reachable without routing");
    }
    if addr == gateway {
        bail!(BadInput, "--ip-{side} and --gw-{side} are both {addr}: the gateway is the DUT's address, not the tester's");
    }
    let gateway_mac = gw_mac
        .as_deref()
        .map(|m| parse_gateway_mac(m, side))
        .transpose()?;
    let host = HostConfig {
        ip: Ipv4Addr::UNSPECIFIED,
        prefix_len: 0,
        gateway: Ipv4Addr::UNSPECIFIED,
        gateway_mac,
        also_answers: None,
        inner: None,
        ipv6: None,
        vlan: encap.vlan,
    };
    Ok(match (addr, gateway) {
        (IpAddr::V4(ip), IpAddr::V4(gateway)) => HostConfig {
            ip,
            prefix_len: len,
            gateway,
            ..host
        },
        (IpAddr::V6(ip), IpAddr::V6(gateway)) => HostConfig {
            ipv6: Some(Ipv6Host {
                ip,
                prefix_len: len,
                gateway,
            }),
            ..host
        },
        _ => bail!(
            BadInput,
            "--ip-{side} and --gw-{side} are of different IP versions: give both as {version}"
        ),
    })
}

/// Shortest trial worth measuring: below it, start-up and the last batch
/// dominate the figures.
pub const MIN_TRIAL: Duration = Duration::from_millis(100);

/// Parses a trial duration and refuses ones too short to measure anything.
pub fn parse_trial_duration(text: &str, option: &str) -> Result<Duration> {
    let d = parse_duration(text, option)?;
    if d < MIN_TRIAL {
        bail!(
            BadInput,
            "{option} '{text}' is too short to measure: use at least 100ms (RFC 2544 asks for 60s)"
        );
    }
    Ok(d)
}

/// Parses `2s`, `500ms`, `1m` into a duration, with a message naming the option.
pub fn parse_duration(text: &str, option: &str) -> Result<Duration> {
    if text.trim().starts_with('-') {
        bail!(
            BadInput,
            "{option} '{text}' is negative: a duration is 0 or more, written as 2s, 500ms or 1m"
        );
    }
    let d = humantime::parse_duration(text.trim()).map_err(|_| {
        err!(
            BadInput,
            "{option} '{text}' is not a duration: write it as 2s, 500ms or 1m"
        )
    })?;
    if d > LONGEST_DURATION {
        bail!(
            BadInput,
            "{option} '{text}' is longer than a year, longer than any run: give a year (365d) or less"
        );
    }
    Ok(d)
}

/// The longest duration any option takes: a year. Durations are added to
/// clock readings, and one of 500 billion years overflows the clock.
pub const LONGEST_DURATION: Duration = Duration::from_secs(365 * 86_400);

/// Whether a share may be 0 (`--loss 0`) or must be above it
/// (`--resolution`: a search to a zero-wide bracket never ends).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Zero {
    Allowed,
    Refused,
}

/// Parses a share, the one rule of every option taking a percentage or a
/// ratio: `N%` is percent, a bare number is a ratio (`1%` and `0.01` are
/// the same). Returns the ratio, from 0 (if `zero` allows it) to below 1.
/// A bare number above 1 is refused rather than read as percent, so an
/// old `--loss 5` meaning 5 % fails loudly instead of meaning 500 %.
pub fn parse_share(text: &str, option: &str, zero: Zero) -> Result<f64> {
    let t = text.trim();
    let (number, percent) = match t.strip_suffix('%') {
        Some(n) => (n.trim(), true),
        None => (t, false),
    };
    let lowest = match zero {
        Zero::Allowed => "from 0",
        Zero::Refused => "above 0",
    };
    let v: f64 = number
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| {
            err!(BadInput, "{option} '{text}' is not a percentage or a ratio: write e.g. 1% or 0.01 (the same)")
        })?;
    let ratio = if percent { v / 100.0 } else { v };
    if !percent && v >= 1.0 {
        bail!(BadInput,
            "{option} '{text}': a number without % is a ratio (0.01 = 1 %), so {text} would be {} %: write {number}% for {number} percent",
            v * 100.0
        );
    }
    let in_range = match zero {
        Zero::Allowed => (0.0..1.0).contains(&ratio),
        Zero::Refused => ratio > 0.0 && ratio < 1.0,
    };
    if !in_range {
        bail!(BadInput, "{option} '{text}' is out of range: give a share {lowest} to below 100 %, e.g. 1% or 0.01 (the same)");
    }
    Ok(ratio)
}

/// `--target`: a CPU load as a share (`75%` or `0.75`), in percent.
pub fn parse_target(text: &str) -> Result<f64> {
    Ok(100.0 * parse_share(text, "--target", Zero::Refused)?)
}

#[cfg(test)]
mod properties;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_addresses_are_checked() {
        let s = |v: &str| Some(v.to_string());
        let v4 = Encap::default();
        let ok = host_config("a", &s("198.18.0.2/24"), &s("198.18.0.1"), &None, &v4).unwrap();
        assert_eq!(
            (ok.ip, ok.prefix_len, ok.gateway),
            (
                Ipv4Addr::new(198, 18, 0, 2),
                24,
                Ipv4Addr::new(198, 18, 0, 1)
            )
        );
        for (ip, gw) in [
            ("198.18.0.2", "198.18.0.1"),
            ("198.18.0.2/33", "198.18.0.1"),
            ("x/24", "198.18.0.1"),
            ("198.18.0.2/24", "10.0.0.1"),
            ("198.18.0.2/24", "198.18.0.2"),
        ] {
            assert!(
                host_config("a", &s(ip), &s(gw), &None, &v4).is_err(),
                "{ip} {gw}"
            );
        }
        assert!(host_config(
            "a",
            &s("198.18.0.2/24"),
            &s("198.18.0.1"),
            &s("nonsense"),
            &v4
        )
        .is_err());
        let v6 = Encap {
            ip: IpVersion::V6,
            vlan: None,
        };
        let ok = host_config("a", &s("2001:2::2/64"), &s("2001:2::1"), &None, &v6).unwrap();
        let h = ok.ipv6.expect("an IPv6 host");
        assert_eq!(
            (IpAddr::from(h.ip), h.prefix_len),
            ("2001:2::2".parse::<IpAddr>().unwrap(), 64)
        );
        for (ip, gw) in [
            ("2001:2::2", "2001:2::1"),
            ("2001:2::2/129", "2001:2::1"),
            ("198.18.0.2/24", "198.18.0.1"),
            ("2001:2::2/64", "2001:3::1"),
            ("2001:2::2/64", "2001:2::2"),
        ] {
            assert!(
                host_config("a", &s(ip), &s(gw), &None, &v6).is_err(),
                "{ip} {gw}"
            );
        }
    }

    #[test]
    fn gateway_macs_are_unicast() {
        assert_eq!(
            parse_gateway_mac("02:00:00:00:00:01", "a").unwrap(),
            MacAddr([2, 0, 0, 0, 0, 1])
        );
        for (bad, says) in [
            ("ff:ff:ff:ff:ff:ff", "broadcast"),
            ("01:00:5e:00:00:01", "multicast"),
            ("33:33:00:00:00:01", "multicast"),
            ("00:00:00:00:00:00", "all zeros"),
        ] {
            let e = parse_gateway_mac(bad, "b").unwrap_err().to_string();
            assert!(e.contains("--gw-mac-b") && e.contains(says), "{bad}: {e}");
        }
        assert!(parse_gateway_mac("nonsense", "a").is_err());
    }

    #[test]
    fn percentages_and_durations_parse() {
        let share = |t: &str, zero| parse_share(t, "--x", zero);
        // One rule: N% is percent, a bare number a ratio.
        for (a, b) in [
            ("1%", "0.01"),
            ("0.5%", "0.005"),
            ("50%", "0.5"),
            (" 2 % ", "0.02"),
        ] {
            let (a, b) = (
                share(a, Zero::Refused).unwrap(),
                share(b, Zero::Refused).unwrap(),
            );
            assert!((a - b).abs() < 1e-15, "{a} {b}");
        }
        assert_eq!(share("0", Zero::Allowed).unwrap(), 0.0);
        assert_eq!(share("0%", Zero::Allowed).unwrap(), 0.0);
        for bad in ["0", "0%", "0.0"] {
            let e = share(bad, Zero::Refused).unwrap_err().to_string();
            assert!(e.contains("above 0") && e.contains("1% or 0.01"), "{e}");
        }
        for bad in ["-1", "-0.5%", "100%", "150%", "abc", "", "%", "nan", "inf"] {
            assert!(share(bad, Zero::Allowed).is_err(), "{bad}");
        }
        // A bare number of 1 or more is not read as percent: it is refused
        // with the spelling that means percent.
        for bad in ["1", "5", "99"] {
            let e = share(bad, Zero::Allowed).unwrap_err().to_string();
            assert!(e.contains(&format!("write {bad}%")), "{e}");
        }
        assert_eq!(
            parse_duration("500ms", "--x").unwrap(),
            Duration::from_millis(500)
        );
        assert!(parse_duration("soon", "--x").is_err());
        assert_eq!(
            parse_duration("365d", "--x").unwrap(),
            LONGEST_DURATION,
            "a year is taken"
        );
        let e = parse_duration("500000000000y", "--rekey").unwrap_err();
        assert!(
            e.to_string()
                .contains("--rekey '500000000000y' is longer than a year"),
            "{e}"
        );
    }

    #[test]
    fn targets_parse() {
        assert_eq!(parse_target("75%").unwrap(), 75.0);
        assert_eq!(parse_target(" 50% ").unwrap(), 50.0);
        // The rule of every share: a bare number is a ratio.
        assert!((parse_target("0.75").unwrap() - 75.0).abs() < 1e-9);
        for bad in ["0", "100%", "x", "-5", "75"] {
            assert!(parse_target(bad).is_err(), "{bad}");
        }
    }
}
