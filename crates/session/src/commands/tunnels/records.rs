//! What a `linerate tunnels` run found, as its records say it: each
//! peer's outcome, the capacity steps and the traffic through the
//! tunnels, each held against the gateway's own counts, and the outcome
//! a capacity run ends with.

use super::{CapacityPlan, TrafficCounts, TunnelsPlan, TRAFFIC_FRAME};
use crate::exit::Outcome;
use crate::ipsec::Net;
use crate::peers::reason;
use linerate_ike::Setup;
use linerate_results::report::thousands;
use linerate_results::tunnels::{
    CapacityRecord, CapacityStep, CapacityStop, StepMeasured, TrafficRecord, TunnelOutcome,
    TunnelTraffic, TunnelsReport,
};
use std::time::Instant;

/// `--capacity`'s record: each step from its setups' outcomes (the
/// report's tunnels, in step order) and what was measured.
pub(super) fn capacity_record(
    report: &TunnelsReport,
    steps: &[StepMeasured],
    plan: &CapacityPlan,
    ceiling: usize,
) -> CapacityRecord {
    let record = steps
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let end = (m.first + m.attempted).min(report.tunnels.len());
            let outcomes = &report.tunnels[m.first.min(end)..end];
            CapacityStep::new(
                i as u64 + 1,
                (m.first + m.attempted) as u64,
                outcomes,
                m,
                plan.max_loss_pct,
            )
        })
        .collect();
    let traffic = steps.iter().any(|m| m.traffic.is_some());
    CapacityRecord::new(
        plan.step as u64,
        ceiling as u64,
        traffic.then_some(plan.max_loss_pct),
        record,
    )
}

/// The gateway's count of installed CHILD_SAs after each step's setups
/// against linerate's tunnels up then (the lab's charon).
pub(super) fn capacity_gateway_check(steps: &[StepMeasured]) -> Option<String> {
    let listed: Vec<(usize, u64, u64)> = steps
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.gateway_children.map(|g| (i + 1, g, m.up_after_setups)))
        .collect();
    if listed.is_empty() {
        return None;
    }
    let odd: Vec<String> = listed
        .iter()
        .filter(|(_, g, up)| g != up)
        .map(|(i, g, up)| {
            format!(
                "step {i}: charon {} where linerate has {}",
                thousands(*g),
                thousands(*up)
            )
        })
        .collect();
    Some(if odd.is_empty() {
        format!(
            "after each step's setups charon lists as many installed CHILD_SAs as linerate has tunnels up (vici list-sas; {} after the last step)",
            thousands(listed[listed.len() - 1].1)
        )
    } else {
        format!(
            "charon's installed CHILD_SAs after the setups differ from linerate's tunnels up: {}",
            odd.join("; ")
        )
    })
}

/// The exit of a `--capacity` run: 0 when the ceiling was reached with
/// every step held (and the gateway agrees), 1 (a result, not an error)
/// when it stopped at a step that failed or degraded.
pub(super) fn capacity_outcome(c: &CapacityRecord, mismatch: Option<String>) -> Outcome {
    let head = format!(
        "largest count held {} tunnels (most up at once {})",
        thousands(c.held),
        thousands(c.most_up)
    );
    if c.stopped_because != CapacityStop::Ceiling {
        return Outcome::ThresholdFailed(format!("capacity: {head}; stopped at {}", c.stop_detail));
    }
    match mismatch {
        Some(why) => Outcome::ThresholdFailed(format!(
            "capacity: {head}; the gateway does not agree: {why}"
        )),
        None => Outcome::Passed,
    }
}

/// `--traffic`'s record from what the threads counted: each tunnel's time
/// to first packet is its first frame's arrival at port A (the kernel's
/// CLOCK_REALTIME stamp) less its IKE_SA_INIT's send time (an `Instant`,
/// moved onto CLOCK_REALTIME by `anchor`, both clocks read together).
pub(super) fn traffic_record(
    report: &TunnelsReport,
    counts: &TrafficCounts,
    started: &[Option<Instant>],
    anchor: (Instant, u64),
    gateway: Option<&[linerate_lab::scenario::SaCounters]>,
    rate: f64,
    port_a: String,
) -> TrafficRecord {
    let realtime_ns = |at: Instant| -> i128 {
        if at >= anchor.0 {
            anchor.1 as i128 + at.duration_since(anchor.0).as_nanos() as i128
        } else {
            anchor.1 as i128 - anchor.0.duration_since(at).as_nanos() as i128
        }
    };
    let tunnels = report
        .tunnels
        .iter()
        .zip(&counts.tunnels)
        .zip(started)
        .map(|((o, c), s)| {
            let ttfp_ms = match (o.setup_ms, c.first_rx_ns, s) {
                (Some(_), Some(rx), Some(s)) => Some((rx as i128 - realtime_ns(*s)) as f64 / 1e6),
                _ => None,
            };
            let gateway_decrypted = gateway.map(|sas| {
                sas.iter()
                    .filter(|sa| sa.remote_ts.join(",") == o.remote_net)
                    .map(|sa| sa.packets_in)
                    .sum()
            });
            TunnelTraffic {
                peer: o.peer,
                ttfp_ms,
                sent: c.sent,
                received: c.received,
                errored: c.errored,
                duplicates: c.duplicates,
                gateway_decrypted,
            }
        })
        .collect();
    TrafficRecord {
        rate_per_tunnel: rate,
        frame_size: TRAFFIC_FRAME,
        port_a,
        refused: counts.tunnels.iter().map(|t| t.refused).sum(),
        foreign: counts.foreign,
        rx_ring_drops: counts.rx_ring_drops,
        tunnels,
        ..TrafficRecord::default()
    }
}

/// The gateway's decrypted count against linerate's, tunnel by tunnel:
/// received at port A <= decrypted <= sent. The line, and whether it is a
/// disagreement.
pub(super) fn gateway_traffic_check(t: &TrafficRecord) -> Option<(String, bool)> {
    let decrypted = t.gateway_decrypted?;
    let odd = t.tunnels.iter().find(|f| {
        f.gateway_decrypted
            .is_some_and(|g| g > f.sent || g < f.received)
    });
    Some(match odd {
        None => (
            format!(
                "charon decrypted {} test frames on the tunnels' CHILD_SAs (vici list-sas, before the deletes): for every tunnel between what linerate received at port A and what it sent",
                thousands(decrypted)
            ),
            false,
        ),
        Some(f) => (
            format!(
                "charon decrypted {} test frames of tunnel {} where linerate sent {} and received {}",
                thousands(f.gateway_decrypted.unwrap_or(0)),
                f.peer,
                thousands(f.sent),
                thousands(f.received)
            ),
            true,
        ),
    })
}

/// Each peer's outcome, times relative to the first IKE_SA_INIT.
pub(super) fn outcomes(
    plan: &TunnelsPlan,
    slices: &[Net],
    setups: &[Setup],
    interrupted: bool,
) -> Vec<TunnelOutcome> {
    let (unset_error, unset_reason) = if interrupted {
        ("interrupted before its setup ended", "interrupted")
    } else {
        ("never attempted", "not attempted")
    };
    let first = setups.iter().map(|s| s.started).min();
    let mut out: Vec<TunnelOutcome> = plan
        .peers
        .iter()
        .zip(slices)
        .map(|(&peer, net)| TunnelOutcome {
            peer,
            remote_net: net.to_string(),
            started_ms: 0.0,
            setup_ms: None,
            error: Some(unset_error.into()),
            reason: Some(unset_reason.into()),
        })
        .collect();
    for s in setups {
        let Some(t) = out.get_mut(s.peer) else {
            continue;
        };
        t.started_ms = first.map_or(0.0, |f| s.started.duration_since(f).as_secs_f64() * 1000.0);
        match &s.outcome {
            Ok(d) => {
                t.setup_ms = Some(d.as_secs_f64() * 1000.0);
                t.error = None;
                t.reason = None;
            }
            Err(e) => {
                t.error = Some(e.to_string());
                t.reason = Some(reason(e));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peers::slice;
    use linerate_results::tunnels::TunnelsSettings;
    use std::net::Ipv4Addr;
    use std::time::Duration;

    fn net(text: &str) -> Net {
        Net::parse(text, "--remote-net").unwrap()
    }

    #[test]
    fn time_to_first_packet_runs_from_the_ike_sa_init_to_port_a() {
        let settings = TunnelsSettings {
            gateway: Ipv4Addr::new(198, 19, 0, 1),
            ike: "aes256-sha256-modp2048".into(),
            esp: "aes128gcm16".into(),
            local_net: "198.18.0.0/24".into(),
            remote_net: "198.19.128.0/17".into(),
            slice_prefix: 19,
            first_peer: Ipv4Addr::new(198, 19, 64, 1),
            last_peer: Ipv4Addr::new(198, 19, 64, 3),
            attempt_rate: None,
            window: 64,
            hold_s: 2.0,
        };
        let tunnel = |i: u8, setup_ms: Option<f64>| TunnelOutcome {
            peer: Ipv4Addr::new(198, 19, 64, i),
            remote_net: slice(net("198.19.128.0/17"), 19, i as usize - 1).to_string(),
            started_ms: 0.0,
            setup_ms,
            error: None,
            reason: None,
        };
        let report = TunnelsReport::new(
            settings,
            vec![
                tunnel(1, Some(200.0)),
                tunnel(2, Some(210.0)),
                tunnel(3, None),
            ],
        );
        let anchor = (Instant::now(), 1_000_000_000_000u64);
        let started = [
            Some(anchor.0 + Duration::from_millis(10)),
            Some(anchor.0 + Duration::from_millis(20)),
            None,
        ];
        let mut counts = TrafficCounts {
            tunnels: vec![Default::default(); 3],
            ..TrafficCounts::default()
        };
        // Tunnel 1's first frame 250 ms after its IKE_SA_INIT; tunnel 2
        // up but silent.
        counts.tunnels[0].first_rx_ns = Some(anchor.1 + 260_000_000);
        counts.tunnels[0].sent = 200;
        counts.tunnels[0].received = 198;
        counts.tunnels[1].sent = 180;
        let gateway = [linerate_lab::scenario::SaCounters {
            remote_ts: vec!["198.19.128.0/19".into()],
            packets_in: 199,
            ..Default::default()
        }];
        let record = traffic_record(
            &report,
            &counts,
            &started,
            anchor,
            Some(&gateway),
            100.0,
            "a0 198.18.0.2".into(),
        );
        let mut report = report;
        report.set_traffic(record);
        let t = report.traffic.as_ref().unwrap();
        assert!((t.tunnels[0].ttfp_ms.unwrap() - 250.0).abs() < 1e-6);
        assert_eq!(t.tunnels[1].ttfp_ms, None);
        assert_eq!(t.tunnels[2].ttfp_ms, None);
        assert_eq!(t.no_traffic, [Ipv4Addr::new(198, 19, 64, 2)]);
        assert_eq!((t.sent, t.received, t.lost), (380, 198, 182));
        assert_eq!(t.tunnels[0].gateway_decrypted, Some(199));
        assert_eq!(t.tunnels[1].gateway_decrypted, Some(0));
        assert_eq!(t.gateway_decrypted, Some(199));
        assert_eq!(
            report.ttfp_ms.as_ref().unwrap().max,
            t.tunnels[0].ttfp_ms.unwrap()
        );
        let (line, odd) = gateway_traffic_check(t).unwrap();
        assert!(!odd, "{line}");
        // A gateway that decrypted more than linerate sent disagrees.
        let mut t = t.clone();
        t.tunnels[0].gateway_decrypted = Some(201);
        let (line, odd) = gateway_traffic_check(&t).unwrap();
        assert!(odd && line.contains("198.19.64.1"), "{line}");
    }
}
