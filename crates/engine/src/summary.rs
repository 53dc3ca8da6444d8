//! A trial's counts become its result record: rates over the time the
//! frames took, loss and where it happened, latency, and for a trial both
//! ways one record of the two directions.

use crate::generator::Sent;
use crate::pacer::Pacer;
use crate::receiver::Counted;
use crate::stats::StreamStats;
use crate::{accounting, xdp, EngineConfig};
use linerate_results::{TrialResult, TrialSpec};
use linerate_wire::FrameSet;

/// Frames of traffic class `class` among those of generator threads that
/// each sent (or were to send) `per_thread[k]` frames of `frames`, every
/// thread from frame 0 of its own sequence.
pub(crate) fn frames_of_class(frames: &FrameSet, per_thread: &[u64], class: u8) -> u64 {
    per_thread
        .iter()
        .map(|&n| frames.frames_of_class(n, class))
        .sum()
}

/// One record for a bidirectional trial: counts and rates summed over the
/// directions, each direction's own record kept in `directions` (A -> B
/// first). Latency: the lower minimum, the higher maximum, the mean
/// weighted by frames received, and each percentile from the worse
/// direction (a summary cannot be merged exactly; this never flatters).
pub(crate) fn both_directions(spec: &TrialSpec, ab: TrialResult, ba: TrialResult) -> TrialResult {
    let latency_ns = match (ab.latency_ns, ba.latency_ns) {
        (Some(x), Some(y)) => {
            let (wx, wy) = (
                x.weight(ab.rx_frames) as u128,
                y.weight(ba.rx_frames) as u128,
            );
            let avg = (x.avg as u128 * wx + y.avg as u128 * wy)
                .checked_div(wx + wy)
                .unwrap_or(0) as u64;
            Some(linerate_results::LatencySummary {
                samples: x.samples + y.samples,
                every: x.every.max(y.every),
                min: x.min.min(y.min),
                avg,
                max: x.max.max(y.max),
                p50: x.p50.max(y.p50),
                p90: x.p90.max(y.p90),
                p99: x.p99.max(y.p99),
                p999: x.p999.max(y.p999),
            })
        }
        (x, y) => x.or(y),
    };
    let intended_frames = ab.intended_frames + ba.intended_frames;
    let lost_frames = ab.lost_frames + ba.lost_frames;
    TrialResult {
        intended_fps: spec.intended_fps,
        offered_fps: ab.offered_fps + ba.offered_fps,
        intended_frames,
        tx_frames: ab.tx_frames + ba.tx_frames,
        rx_frames: ab.rx_frames + ba.rx_frames,
        lost_frames,
        loss_ratio: if intended_frames > 0 {
            lost_frames as f64 / intended_frames as f64
        } else {
            0.0
        },
        reordered: ab.reordered + ba.reordered,
        duplicated: ab.duplicated + ba.duplicated,
        latency_ns,
        generator_short: ab.generator_short || ba.generator_short,
        generator_max_stall_ns: ab.generator_max_stall_ns.max(ba.generator_max_stall_ns),
        generator_paused_ns: ab.generator_paused_ns.max(ba.generator_paused_ns),
        generator_pauses: Some(ab.generator_pauses.unwrap_or(0) + ba.generator_pauses.unwrap_or(0)),
        tester_rx_drops: ab.tester_rx_drops + ba.tester_rx_drops,
        stray_frames: ab.stray_frames + ba.stray_frames,
        errored_frames: ab.errored_frames + ba.errored_frames,
        frame_check: ab.frame_check.clone(),
        directions: Vec::new(),
        dut_cpu: None,
        esp: None,
        policy_drops: None,
        tunnels: sum_tunnels(&ab.tunnels, &ba.tunnels),
        loss_where: match (ab.loss_where, ba.loss_where) {
            (Some(x), Some(y)) => Some(x.combine(y)),
            _ => None,
        },
        // Each direction's receiver is in `directions`; "kernel/socket" when
        // they differ (A -> B first).
        receiver: if ab.receiver == ba.receiver {
            ab.receiver.clone()
        } else {
            format!("{}/{}", ab.receiver, ba.receiver)
        },
        ..ab.clone()
    }
    .with_directions(vec![ab, ba])
}

/// Both directions' frames tunnel by tunnel: tunnel i's sums.
fn sum_tunnels(
    ab: &[linerate_results::TunnelFrames],
    ba: &[linerate_results::TunnelFrames],
) -> Vec<linerate_results::TunnelFrames> {
    (0..ab.len().max(ba.len()))
        .map(|i| {
            let (x, y) = (
                ab.get(i).copied().unwrap_or_default(),
                ba.get(i).copied().unwrap_or_default(),
            );
            linerate_results::TunnelFrames {
                tx: x.tx + y.tx,
                rx: x.rx + y.rx,
            }
        })
        .collect()
}

/// Turns the counts of one trial into its result record. With two
/// traffic classes (a drop test) the counts are the legitimate class's and
/// the other class becomes [`PolicyDrops`](linerate_results::PolicyDrops).
#[allow(clippy::too_many_arguments)]
pub(crate) fn summarize(
    spec: &TrialSpec,
    frames: &FrameSet,
    sent: &Sent,
    counted: &Counted,
    cfg: &EngineConfig,
    encap: linerate_wire::Encap,
    a_veth: accounting::SendingPort,
    around: Option<(&accounting::Counters, &accounting::Counters)>,
) -> TrialResult {
    // Thread k sent frames 0 .. sent[k] of its own sequence, of its share
    // of the schedule; stream k counts class 0, stream threads + k class 1.
    let threads = sent.per_thread.len().max(1);
    let total = Pacer::new(spec.intended_fps, spec.duration).total();
    let shares: Vec<u64> = (0..threads as u16)
        .map(|k| xdp::share(total, threads as u16, k))
        .collect();
    let intended_frames = frames_of_class(frames, &shares, 0);
    let mut tx_frames = frames_of_class(frames, &sent.per_thread, 0);
    let mut legit = StreamStats::default();
    for s in counted.streams.iter().take(threads) {
        legit.merge(s);
    }
    let policy_drops = (frames.classes() > 1).then(|| linerate_results::PolicyDrops {
        tx_frames: frames_of_class(frames, &sent.per_thread, 1),
        leaked_frames: counted
            .streams
            .iter()
            .skip(threads)
            .map(StreamStats::received)
            .sum(),
    });
    let rx = legit.received();
    let lost = intended_frames.saturating_sub(rx);
    // The tester's refusals cover every class; a drop test's legitimate
    // class is its share of them (every other frame).
    let mut own = accounting::OwnCounts::new(lost, total, sent, counted.ring_drops);
    // Damaged frames carry no class one can trust: a drop test's
    // legitimate class is its share of them, as of the refusals.
    let mut errored = counted.errored;
    if frames.classes() > 1 {
        let share = intended_frames as f64 / total.max(1) as f64;
        own = own.share(share);
        errored = (errored as f64 * share).round() as u64;
    }
    let (loss_where, not_left) = accounting::attribute(own, a_veth, around);
    let loss_where = loss_where.with_errored(errored);
    tx_frames = tx_frames.saturating_sub(not_left);
    let duration_s = spec.duration.as_secs_f64();
    // Over the time the frames really took: a paused generator made the
    // trial longer, and the device saw the frames at that lower rate.
    let send_s = sent.send_time.as_secs_f64().max(duration_s);
    TrialResult {
        frame_size: spec.frame.frame(),
        mix: spec.mix.as_ref().map(linerate_results::MixInfo::of),
        flows: cfg.flows.describe(),
        directions: Vec::new(),
        l3_length: spec.frame.l3(),
        duration_s,
        intended_fps: spec.intended_fps,
        offered_fps: if send_s > 0.0 {
            sent.frames.saturating_sub(not_left) as f64 / send_s
        } else {
            0.0
        },
        intended_frames,
        tx_frames,
        rx_frames: rx,
        lost_frames: lost,
        loss_ratio: if intended_frames > 0 {
            lost as f64 / intended_frames as f64
        } else {
            0.0
        },
        reordered: legit.reordered(),
        duplicated: legit.duplicated(),
        latency_ns: legit.latency(counted.latency_every),
        generator_short: sent.handed < total,
        generator_max_stall_ns: Some(sent.max_stall.as_nanos() as u64),
        generator_paused_ns: Some(sent.paused.as_nanos() as u64),
        generator_pauses: Some(sent.pauses),
        tester_rx_drops: counted.ring_drops,
        stray_frames: counted.stray,
        errored_frames: counted.errored,
        frame_check: cfg.frame_check.name().to_string(),
        engine: cfg.name.clone(),
        receiver: counted.receiver.as_str().to_string(),
        ip_version: encap.ip,
        vlan: encap.vlan,
        dut_cpu: None,
        esp: None,
        policy_drops,
        loss_where: Some(loss_where),
        tunnels: Vec::new(),
    }
}
