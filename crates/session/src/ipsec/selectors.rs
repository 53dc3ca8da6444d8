//! The traffic selectors the gateway answered, held against the
//! addresses the test frames carry: a frame outside them would be dropped
//! by the gateway as policy, not lost.

use crate::error::{bail, Result};
use linerate_ike::TrafficSelector;
use linerate_wire::flows::FieldRange;
use std::net::Ipv4Addr;

/// Traffic selectors as the run's notes print them (`10.88.0.0/16`,
/// several joined by ", ").
pub(crate) fn selectors_text(list: &[TrafficSelector]) -> String {
    list.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The addresses a tunnel's test frames carry on its two sides (see
/// [`IpsecPlan::frame_addresses`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FrameAddresses {
    /// Behind linerate (in the tunnel's `local_ts`).
    pub inner: Ipv4Addr,
    /// On the gateway's LAN, port A's (in its `remote_ts`).
    pub lan: Ipv4Addr,
    /// The `--range` that varies the address behind linerate, if any.
    pub inner_range: Option<FieldRange>,
    /// The `--range` that varies the address on the gateway's LAN.
    pub lan_range: Option<FieldRange>,
}

/// The first address of `first..=last` that no selector of `list` holds
/// (selectors are address ranges, RFC 7296 §3.13.1; several may join to
/// cover the range). None: all are held.
pub(super) fn first_outside(
    list: &[TrafficSelector],
    first: Ipv4Addr,
    last: Ipv4Addr,
) -> Option<Ipv4Addr> {
    let last = u32::from(last);
    let mut at = u32::from(first);
    loop {
        let reach = list
            .iter()
            .filter_map(|ts| match (ts.start, ts.end) {
                (std::net::IpAddr::V4(s), std::net::IpAddr::V4(e))
                    if u32::from(s) <= at && at <= u32::from(e) =>
                {
                    Some(u32::from(e))
                }
                _ => None,
            })
            .max();
        match reach {
            None => return Some(Ipv4Addr::from(at)),
            Some(end) if end >= last => return None,
            Some(end) => at = end + 1,
        }
    }
}

/// Refuses a CHILD_SA whose traffic selectors, as the gateway answered
/// them (perhaps narrower than proposed, RFC 7296 §2.9), leave out the
/// test frames' addresses: `frames.inner` (and every address of its
/// `--range`) in `local_ts`, linerate's side, `frames.lan` (and its
/// range's) in `remote_ts`, the gateway's. The gateway would drop those
/// frames, and the loss would read as the DUT's. `tunnel`: which one,
/// with several.
pub(crate) fn check_selectors(
    local_ts: &[TrafficSelector],
    remote_ts: &[TrafficSelector],
    frames: &FrameAddresses,
    tunnel: Option<usize>,
) -> Result<()> {
    let (local, remote) = (selectors_text(local_ts), selectors_text(remote_ts));
    let which = tunnel.map_or(String::new(), |i| format!("tunnel {}: ", i + 1));
    let narrowed = format!(
        "{which}the gateway narrowed the traffic selectors to {local} <-> {remote} (RFC 7296 §2.9)"
    );
    let inner = frames.inner;
    if first_outside(local_ts, inner, inner).is_some() {
        bail!(BadInput, "{narrowed}, which leave out the test frames' address {inner} behind linerate: give --remote-net within {local}");
    }
    let lan = frames.lan;
    if first_outside(remote_ts, lan, lan).is_some() {
        bail!(BadInput, "{narrowed}, which leave out the test frames' address {lan} on the gateway's LAN: give --local-net and port A's address within {remote}");
    }
    for (range, list, side, text) in [
        (frames.inner_range, local_ts, "behind linerate", &local),
        (frames.lan_range, remote_ts, "on the gateway's LAN", &remote),
    ] {
        let Some(r) = range else { continue };
        let (first, last) = (Ipv4Addr::from(r.min as u32), Ipv4Addr::from(r.max as u32));
        if let Some(out) = first_outside(list, first, last) {
            bail!(BadInput, "{which}--range {}={first}..{last} reaches past the traffic selectors the gateway answered, {local} <-> {remote} (RFC 7296 §2.9): its address {out} {side} is outside {text}; keep the range within {text}", r.field.name());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipsec::plan::IpsecPlan;
    use linerate_results::ipsec::Direction;

    /// Selectors as a gateway writes them.
    fn selectors(list: &[&str]) -> Vec<TrafficSelector> {
        list.iter()
            .map(|t| TrafficSelector::parse(t).unwrap())
            .collect()
    }

    /// Several selectors join to cover a range; a gap between them, or an
    /// end past them, is the first address left out.
    #[test]
    fn a_range_is_within_selectors_when_every_address_is() {
        let a = |t: &str| t.parse::<Ipv4Addr>().unwrap();
        let joined = selectors(&["198.19.1.0/25", "198.19.1.128-198.19.1.200"]);
        assert_eq!(
            first_outside(&joined, a("198.19.1.2"), a("198.19.1.200")),
            None
        );
        assert_eq!(
            first_outside(&joined, a("198.19.1.2"), a("198.19.1.201")),
            Some(a("198.19.1.201"))
        );
        let gap = selectors(&["198.19.1.0/26", "198.19.1.128/25"]);
        assert_eq!(
            first_outside(&gap, a("198.19.1.2"), a("198.19.1.250")),
            Some(a("198.19.1.64"))
        );
        let all = selectors(&["0.0.0.0/0"]);
        assert_eq!(
            first_outside(&all, a("255.255.255.0"), a("255.255.255.255")),
            None
        );
        assert_eq!(
            first_outside(&[], a("10.0.0.1"), a("10.0.0.1")),
            Some(a("10.0.0.1"))
        );
    }

    /// A gateway narrowed the selectors to 198.19.1.128/25 <-> 198.18.0.0/25
    /// (RFC 7296 §2.9): a `--range` of the test frames' addresses passes when
    /// all of it is inside, on the side the direction puts it (the source
    /// behind linerate when decrypting, the destination otherwise), and is
    /// refused in one line naming the range, the selectors and the fix
    /// when one end is outside.
    #[test]
    fn ranges_past_the_selectors_the_gateway_answered_are_refused() {
        let local = selectors(&["198.19.1.128/25"]);
        let remote = selectors(&["198.18.0.0/25"]);
        let (inner, lan) = (Ipv4Addr::new(198, 19, 1, 129), Ipv4Addr::new(198, 18, 0, 2));
        let check = |direction, range: &str, tunnel| {
            let plan = IpsecPlan {
                direction,
                ranges: vec![FieldRange::parse(range).unwrap()],
                ..IpsecPlan::default()
            };
            let frames = plan.frame_addresses(inner, lan);
            check_selectors(&local, &remote, &frames, tunnel).map_err(|e| e.to_string())
        };
        for (direction, behind, on_lan) in [
            (Direction::Decrypt, "src-ip", "dst-ip"),
            (Direction::Encrypt, "dst-ip", "src-ip"),
            (Direction::Both, "dst-ip", "src-ip"),
        ] {
            for ok in [
                format!("{behind}=198.19.1.128..198.19.1.255"),
                format!("{on_lan}=198.18.0.2..198.18.0.127/random"),
                // The other field is no address on a tunnel's side.
                "src-port=1000..2000".to_string(),
            ] {
                check(direction, &ok, None).unwrap_or_else(|e| panic!("{direction:?} {ok}: {e}"));
            }
            for (bad, out, within) in [
                (
                    format!("{behind}=198.19.1.100..198.19.1.200"),
                    "198.19.1.100 behind linerate",
                    "198.19.1.128/25",
                ),
                (
                    format!("{behind}=198.19.1.200..198.19.2.5"),
                    "198.19.2.0 behind linerate",
                    "198.19.1.128/25",
                ),
                (
                    format!("{on_lan}=198.18.0.2..198.18.0.200"),
                    "198.18.0.128 on the gateway's LAN",
                    "198.18.0.0/25",
                ),
                // Descending, as --range may be written.
                (
                    format!("{on_lan}=198.18.0.1..198.18.0.254/dec"),
                    "198.18.0.128 on the gateway's LAN",
                    "198.18.0.0/25",
                ),
            ] {
                let e = check(direction, &bad, Some(2)).unwrap_err();
                let range = bad.split('/').next().unwrap();
                for word in [
                    format!("tunnel 3: --range {range} reaches past the traffic selectors the gateway answered, 198.19.1.128/25 <-> 198.18.0.0/25 (RFC 7296 §2.9)"),
                    format!("its address {out} is outside {within}; keep the range within {within}"),
                ] {
                    assert!(e.contains(&word), "{direction:?} {bad}: '{word}' not in: {e}");
                }
                assert!(!e.contains('\n'), "{e}");
            }
        }
        // The test frames' own address is checked first.
        let plan = IpsecPlan::default();
        let frames = plan.frame_addresses(Ipv4Addr::new(198, 19, 1, 2), lan);
        let e = check_selectors(&local, &remote, &frames, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("leave out the test frames' address 198.19.1.2 behind linerate"),
            "{e}"
        );
    }
}
