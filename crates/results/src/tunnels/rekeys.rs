//! `linerate tunnels --rekey T`: the CHILD_SA rekeys during the hold, and
//! with `--traffic` what they cost the test frames. Computed here from
//! each tunnel's counts; [`rekey_lines`] only lays them out.
//!
//! A rekey's window runs from linerate's CREATE_CHILD_SA request (or the
//! gateway's, answered) until a margin after the tunnel's frames moved to
//! the new SA (or after the rekey failed): the frames the tunnel sent in
//! it that never arrived at port A are the frames lost around the rekey.
//! Its effective blocked time is those frames over the tunnel's offered
//! rate (as FD.io CSIT reports it for IPsec rekeys).

use crate::report::{sig3, thousands};
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::net::Ipv4Addr;

/// One tunnel's rekeys during the hold.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TunnelRekeys {
    pub peer: Ipv4Addr,
    /// Rekeys linerate started (a CREATE_CHILD_SA request sent, or one
    /// that could not be sent), completed and failed.
    pub attempted: u64,
    pub completed: u64,
    pub failed: u64,
    /// Rekeys the gateway started, answered and followed.
    pub by_gateway: u64,
    /// `--traffic`: the tunnel's frames sent in its rekeys' windows, and
    /// those of them that never arrived at port A.
    pub window_sent: Option<u64>,
    pub lost: Option<u64>,
    /// `--traffic`: lost frames per completed rekey over the tunnel's
    /// offered rate, ms; None without a completed rekey.
    pub blocked_ms: Option<f64>,
}

impl TunnelRekeys {
    /// Peer `peer`'s tunnel before its first rekey.
    pub fn of(peer: Ipv4Addr) -> TunnelRekeys {
        TunnelRekeys {
            peer,
            attempted: 0,
            completed: 0,
            failed: 0,
            by_gateway: 0,
            window_sent: None,
            lost: None,
            blocked_ms: None,
        }
    }
}

/// The failed rekeys of one reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RekeyFailure {
    /// The gateway's notify, or what happened instead of an answer.
    pub reason: String,
    pub count: u64,
    pub first_peer: Ipv4Addr,
}

/// `--rekey`: every rekey of the hold, in total and per tunnel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HoldRekeys {
    /// The period each tunnel's CHILD_SA was rekeyed at, s.
    pub every_s: f64,
    /// How long the tunnels were held (and rekeyed), s.
    pub hold_s: f64,
    /// How long a rekey's window lasts after its tunnel moved to the new
    /// SA, s.
    pub margin_s: f64,
    pub attempted: u64,
    pub completed: u64,
    pub failed: u64,
    pub by_gateway: u64,
    /// Failed rekeys by reason, the most frequent first.
    pub failures: Vec<RekeyFailure>,
    /// Rekeys completed (linerate's and the gateway's) per second of the
    /// hold.
    pub per_s: f64,
    /// linerate's rekeys, CREATE_CHILD_SA request to the gateway's
    /// answer, ms.
    pub mean_ms: Option<f64>,
    pub max_ms: Option<f64>,
    /// `--traffic`: each tunnel's offered rate, frames/s.
    pub rate_per_tunnel: Option<f64>,
    /// `--traffic`: frames sent in all rekeys' windows, lost of them, lost
    /// per completed rekey and the effective blocked time per rekey, ms.
    pub window_sent: Option<u64>,
    pub lost: Option<u64>,
    pub lost_per_rekey: Option<f64>,
    pub blocked_ms_per_rekey: Option<f64>,
    /// `--traffic`: frames of the hold lost outside every rekey's window
    /// (not the rekeys': the gateway's or the path's loss).
    pub lost_elsewhere: Option<u64>,
    /// The tunnels whose rekeys lost frames or failed (the others lost
    /// none), in peer order.
    pub tunnels: Vec<TunnelRekeys>,
}

impl HoldRekeys {
    /// The record of the hold's rekeys from each tunnel's counts (in peer
    /// order), the failures' reasons (peer, reason, in the order they
    /// ended) and linerate's rekeys' request-to-answer times (ms).
    pub fn new(
        (every_s, hold_s, margin_s): (f64, f64, f64),
        rate_per_tunnel: Option<f64>,
        mut tunnels: Vec<TunnelRekeys>,
        failed: &[(Ipv4Addr, String)],
        took_ms: &[f64],
        lost_elsewhere: Option<u64>,
    ) -> HoldRekeys {
        let sum = |f: fn(&TunnelRekeys) -> u64| tunnels.iter().map(f).sum::<u64>();
        let (attempted, completed) = (sum(|t| t.attempted), sum(|t| t.completed));
        let (failed_n, by_gateway) = (sum(|t| t.failed), sum(|t| t.by_gateway));
        let traffic = rate_per_tunnel.filter(|r| *r > 0.0);
        let window_sent = traffic.map(|_| sum(|t| t.window_sent.unwrap_or(0)));
        let lost = traffic.map(|_| sum(|t| t.lost.unwrap_or(0)));
        let rekeys = completed + by_gateway;
        let lost_per_rekey = lost
            .filter(|_| rekeys > 0)
            .map(|l| l as f64 / rekeys as f64);
        let blocked = |lost_each: f64, rate: f64| 1e3 * lost_each / rate;
        for t in &mut tunnels {
            let done = t.completed + t.by_gateway;
            t.blocked_ms = match (traffic, t.lost) {
                (Some(rate), Some(l)) if done > 0 => Some(blocked(l as f64 / done as f64, rate)),
                _ => None,
            };
        }
        tunnels.retain(|t| t.failed > 0 || t.lost.is_some_and(|l| l > 0));
        let mean_ms =
            (!took_ms.is_empty()).then(|| took_ms.iter().sum::<f64>() / took_ms.len() as f64);
        HoldRekeys {
            every_s,
            hold_s,
            margin_s,
            attempted,
            completed,
            failed: failed_n,
            by_gateway,
            failures: failure_groups(failed),
            per_s: if hold_s > 0.0 {
                rekeys as f64 / hold_s
            } else {
                0.0
            },
            mean_ms,
            max_ms: took_ms.iter().copied().reduce(f64::max),
            rate_per_tunnel: traffic,
            window_sent,
            lost,
            lost_per_rekey,
            blocked_ms_per_rekey: match (lost_per_rekey, traffic) {
                (Some(l), Some(rate)) => Some(blocked(l, rate)),
                _ => None,
            },
            lost_elsewhere: traffic.and(lost_elsewhere),
            tunnels,
        }
    }
}

/// The failures grouped by reason, the most frequent first (ties in the
/// order they first happened).
fn failure_groups(failed: &[(Ipv4Addr, String)]) -> Vec<RekeyFailure> {
    let mut groups: Vec<RekeyFailure> = Vec::new();
    for (peer, reason) in failed {
        match groups.iter_mut().find(|g| &g.reason == reason) {
            Some(g) => g.count += 1,
            None => groups.push(RekeyFailure {
                reason: reason.clone(),
                count: 1,
                first_peer: *peer,
            }),
        }
    }
    groups.sort_by_key(|g| std::cmp::Reverse(g.count));
    groups
}

/// Tunnels listed in the table at most (the JSON lists them all).
const TUNNELS_SHOWN: usize = 10;

/// `--rekey`'s lines of the table.
pub fn rekey_lines(out: &mut String, r: &HoldRekeys) {
    let took = match (r.mean_ms, r.max_ms) {
        (Some(mean), Some(max)) => format!(
            "; request to answer mean {} ms, max {} ms",
            sig3(mean),
            sig3(max)
        ),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "  Rekeys (each CHILD_SA every {} s of the {} s hold): attempted {}, completed {}, failed {}{}; {} rekeys/s{took}",
        sig3(r.every_s),
        sig3(r.hold_s),
        thousands(r.attempted),
        thousands(r.completed),
        thousands(r.failed),
        if r.by_gateway > 0 {
            format!(", {} started by the gateway", thousands(r.by_gateway))
        } else {
            String::new()
        },
        sig3(r.per_s)
    );
    for g in &r.failures {
        let _ = writeln!(
            out,
            "    {:>8}  {}   (first: {})",
            thousands(g.count),
            g.reason,
            g.first_peer
        );
    }
    if let (Some(sent), Some(lost)) = (r.window_sent, r.lost) {
        let _ = writeln!(
            out,
            "  Around the rekeys (request to {} s after the frames moved to the new SA): {} frames sent, {} lost{}",
            sig3(r.margin_s),
            thousands(sent),
            thousands(lost),
            match (r.lost_per_rekey, r.blocked_ms_per_rekey) {
                (Some(l), Some(b)) => format!(
                    "; {} per rekey, effective blocked time {} ms per rekey (lost / {} frames/s offered per tunnel)",
                    sig3(l),
                    sig3(b),
                    sig3(r.rate_per_tunnel.unwrap_or(0.0))
                ),
                _ => String::new(),
            }
        );
        if let Some(elsewhere) = r.lost_elsewhere {
            let _ = writeln!(
                out,
                "  Lost in the hold outside the rekeys' windows: {}",
                thousands(elsewhere)
            );
        }
    }
    for t in r.tunnels.iter().take(TUNNELS_SHOWN) {
        let _ = writeln!(
            out,
            "    {:<15}  {} completed, {} failed{}",
            t.peer.to_string(),
            thousands(t.completed + t.by_gateway),
            thousands(t.failed),
            match (t.lost, t.blocked_ms) {
                (Some(l), Some(b)) =>
                    format!(", {} lost, blocked {} ms per rekey", thousands(l), sig3(b)),
                (Some(l), None) => format!(", {} lost", thousands(l)),
                _ => String::new(),
            }
        );
    }
    if r.tunnels.len() > TUNNELS_SHOWN {
        let _ = writeln!(
            out,
            "    and {} more tunnels that lost frames or rekeys (the JSON lists every one)",
            thousands((r.tunnels.len() - TUNNELS_SHOWN) as u64)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tunnel(i: u8, completed: u64, failed: u64, lost: Option<u64>) -> TunnelRekeys {
        TunnelRekeys {
            attempted: completed + failed,
            completed,
            failed,
            window_sent: lost.map(|_| 40),
            lost,
            ..TunnelRekeys::of(Ipv4Addr::new(198, 19, 64, i))
        }
    }

    #[test]
    fn the_lost_frames_per_rekey_become_the_time_blocked() {
        let peer = Ipv4Addr::new(198, 19, 64, 3);
        let r = HoldRekeys::new(
            (2.0, 10.0, 0.5),
            Some(100.0),
            vec![
                tunnel(1, 5, 0, Some(0)),
                tunnel(2, 5, 0, Some(10)),
                tunnel(3, 4, 1, Some(2)),
            ],
            &[(peer, "no answer".into())],
            &[2.0, 4.0],
            Some(1),
        );
        assert_eq!((r.attempted, r.completed, r.failed), (15, 14, 1));
        assert!((r.per_s - 1.4).abs() < 1e-9);
        assert_eq!((r.window_sent, r.lost), (Some(120), Some(12)));
        // 12 frames over 14 rekeys at 100 frames/s: 8.57 ms each.
        assert!((r.blocked_ms_per_rekey.unwrap() - 1e3 * 12.0 / 14.0 / 100.0).abs() < 1e-9);
        assert_eq!((r.mean_ms, r.max_ms), (Some(3.0), Some(4.0)));
        // The tunnel that lost nothing and failed nothing is left out.
        let peers: Vec<u8> = r.tunnels.iter().map(|t| t.peer.octets()[3]).collect();
        assert_eq!(peers, [2, 3]);
        assert!((r.tunnels[0].blocked_ms.unwrap() - 20.0).abs() < 1e-9);
        assert_eq!(r.failures[0].first_peer, peer);
        let mut text = String::new();
        rekey_lines(&mut text, &r);
        assert!(
            text.contains("attempted 15, completed 14, failed 1"),
            "{text}"
        );
        assert!(text.contains("no answer"), "{text}");
        assert!(
            text.contains("effective blocked time 8.57 ms per rekey"),
            "{text}"
        );
        assert!(text.contains("outside the rekeys' windows: 1"), "{text}");
    }

    /// The gateway's reasons are grouped, the most frequent first, each
    /// with the first tunnel that had it, one line each in the table.
    #[test]
    fn failed_rekeys_are_grouped_by_the_gateways_reason() {
        let peer = |i| Ipv4Addr::new(198, 19, 64, i);
        let failed = [
            (peer(2), "no answer".to_string()),
            (peer(3), "NO_PROPOSAL_CHOSEN".to_string()),
            (peer(1), "NO_PROPOSAL_CHOSEN".to_string()),
            (peer(3), "NO_PROPOSAL_CHOSEN".to_string()),
            (peer(1), "TS_UNACCEPTABLE".to_string()),
        ];
        let r = HoldRekeys::new(
            (1.0, 4.0, 0.5),
            None,
            vec![
                tunnel(1, 2, 2, None),
                tunnel(2, 3, 1, None),
                tunnel(3, 2, 2, None),
            ],
            &failed,
            &[],
            None,
        );
        let groups: Vec<_> = r
            .failures
            .iter()
            .map(|g| (g.reason.as_str(), g.count, g.first_peer))
            .collect();
        assert_eq!(
            groups,
            [
                ("NO_PROPOSAL_CHOSEN", 3, peer(3)),
                ("no answer", 1, peer(2)),
                ("TS_UNACCEPTABLE", 1, peer(1)),
            ]
        );
        let mut text = String::new();
        rekey_lines(&mut text, &r);
        assert!(text.contains("failed 5"), "{text}");
        assert!(
            text.contains("       3  NO_PROPOSAL_CHOSEN   (first: 198.19.64.3)"),
            "{text}"
        );
        assert!(
            text.contains("       1  TS_UNACCEPTABLE   (first: 198.19.64.1)"),
            "{text}"
        );
    }

    #[test]
    fn without_traffic_only_the_rekeys_are_counted() {
        let r = HoldRekeys::new(
            (1.0, 4.0, 0.5),
            None,
            vec![tunnel(1, 4, 0, None), tunnel(2, 0, 0, None)],
            &[],
            &[],
            Some(3),
        );
        assert_eq!(
            (r.completed, r.lost, r.blocked_ms_per_rekey),
            (4, None, None)
        );
        assert_eq!(r.lost_elsewhere, None);
        assert!(r.tunnels.is_empty());
        assert_eq!(r.mean_ms, None);
        let mut text = String::new();
        rekey_lines(&mut text, &r);
        assert!(!text.contains("Around the rekeys"), "{text}");
    }
}
