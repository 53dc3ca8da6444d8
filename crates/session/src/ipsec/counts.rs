//! What the tunnels did during a trial: the data path's ESP counts and
//! the keeper's rekeys read before and after it, and their difference,
//! the trial's [`EspTrial`].

use crate::ike_keeper::{RekeyLog, RekeyTotals};
use linerate_engine::ipsec::EspCounts;
use linerate_results::ipsec::{EspTrial, IkeRekeys, RekeyRecord, TrialRekeys};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the tunnels did so far: the data path's ESP counts and the IKE
/// side's rekeys, read by [`IpsecPeer::counts`](super::IpsecPeer::counts);
/// two readings give a trial's [`EspTrial`] ([`PeerCounts::since`]).
#[derive(Debug, Clone)]
pub struct PeerCounts {
    pub esp: EspCounts,
    /// When it was read.
    pub(super) at: Instant,
    /// How many rekeys had ended then, their totals, and how many tunnels
    /// the gateway had deleted.
    pub(super) rekeys: usize,
    pub(super) totals: RekeyTotals,
    pub(super) deleted: usize,
    pub(super) log: Option<Arc<Mutex<RekeyLog>>>,
}

impl PeerCounts {
    /// What the SAs did between `before` and this reading.
    pub fn since(&self, before: &PeerCounts) -> EspTrial {
        let after = self;
        let rekeys = trial_rekeys(before, after);
        let (before, after) = (&before.esp, &after.esp);
        let (s0, s1, r0, r1) = (&before.sent, &after.sent, &before.received, &after.received);
        EspTrial {
            encrypted: s1.packets - s0.packets,
            encrypted_bytes: s1.esp_bytes - s0.esp_bytes,
            decrypted: r1.packets - r0.packets,
            decrypted_bytes: r1.esp_bytes - r0.esp_bytes,
            icv_failures: r1.icv_failures - r0.icv_failures,
            replays: r1.replays - r0.replays,
            too_old: r1.too_old - r0.too_old,
            malformed: r1.malformed - r0.malformed,
            unknown_spi: after.unknown_spi - before.unknown_spi,
            before_install: after.before_install.saturating_sub(before.before_install),
            not_esp: after.not_esp - before.not_esp,
            stray: after.stray.saturating_sub(before.stray),
            ike: after.ike - before.ike,
            per_tunnel: if after.per_tunnel.len() > 1 {
                after
                    .per_tunnel
                    .iter()
                    .enumerate()
                    .map(|(i, a)| {
                        let b = before.per_tunnel.get(i).copied().unwrap_or_default();
                        [
                            a.sent.packets - b.sent.packets,
                            a.received.packets - b.received.packets,
                        ]
                    })
                    .collect()
            } else {
                Vec::new()
            },
            rekeys,
            raw_esp: after.raw_esp,
        }
    }
}

/// Rekeys listed in a trial's record at most (the counts cover all).
const REKEYS_LISTED: usize = 100;

/// The rekeys that ended between two readings: None when none did and
/// none was due.
fn trial_rekeys(before: &PeerCounts, after: &PeerCounts) -> Option<TrialRekeys> {
    let log = after.log.as_ref()?;
    let log = log.lock().unwrap_or_else(|p| p.into_inner());
    let (t0, t1) = (&before.totals, &after.totals);
    let done = t1.done - t0.done;
    let by_gateway = t1.by_gateway - t0.by_gateway;
    let failed = t1.failed - t0.failed;
    let deleted = after.deleted.saturating_sub(before.deleted) as u64;
    let sas_taken = after.esp.new_sas_taken - before.esp.new_sas_taken;
    let ike = IkeRekeys {
        done: t1.ike_done - t0.ike_done,
        by_gateway: t1.ike_by_gateway - t0.ike_by_gateway,
        failed: t1.ike_failed - t0.ike_failed,
    };
    if done + by_gateway + failed + deleted + sas_taken + ike.done + ike.by_gateway + ike.failed
        == 0
    {
        return None;
    }
    let ended: Vec<&crate::ike_keeper::Rekey> = log.between(before.rekeys, after.rekeys).collect();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    Some(TrialRekeys {
        done,
        by_gateway,
        failed,
        mean_ms: if done == 0 {
            0.0
        } else {
            (t1.took_s - t0.took_s) * 1e3 / done as f64
        },
        // Over the rekeys still kept (all but in runs of over 100,000).
        max_ms: ended
            .iter()
            .filter(|r| r.failed.is_none())
            .filter_map(|r| r.took.map(ms))
            .fold(0.0, f64::max),
        tunnels_deleted: deleted,
        sas_taken,
        ike: (ike != IkeRekeys::default()).then_some(ike),
        list: ended
            .iter()
            .take(REKEYS_LISTED)
            .map(|r| RekeyRecord {
                tunnel: r.tunnel,
                at_ms: ms(r.at.saturating_duration_since(before.at)),
                took_ms: r.took.map(ms),
                spi_out: r.spis.map(|s| s.0),
                spi_in: r.spis.map(|s| s.1),
                failed: r.failed.clone(),
            })
            .collect(),
    })
}
