//! A trial's counts become its result record: rates over the time the
//! frames took, loss and where it happened, latency, and for a trial both
//! ways one record of the two directions.

use crate::generator::Sent;
use crate::ipsec::TunnelMap;
use crate::pacer::Pacer;
use crate::receiver::Counted;
use crate::stats::StreamStats;
use crate::{accounting, xdp, EngineConfig};
use linerate_results::{TrialResult, TrialSpec, TunnelFrames};
use linerate_wire::flows::Field;
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
        sequence_errors: match (ab.sequence_errors, ba.sequence_errors) {
            (Some(x), Some(y)) => Some(x.combine(y)),
            (x, y) => x.or(y),
        },
        latency_ns,
        generator_short: ab.generator_short || ba.generator_short,
        generator_max_stall_ns: ab.generator_max_stall_ns.max(ba.generator_max_stall_ns),
        generator_paused_ns: ab.generator_paused_ns.max(ba.generator_paused_ns),
        generator_pauses: Some(ab.generator_pauses.unwrap_or(0) + ba.generator_pauses.unwrap_or(0)),
        sending_s: match (ab.sending_s, ba.sending_s) {
            (Some(x), Some(y)) => Some(x.max(y)),
            (x, y) => x.or(y),
        },
        tester_rx_drops: ab.tester_rx_drops + ba.tester_rx_drops,
        stray_frames: ab.stray_frames + ba.stray_frames,
        errored_frames: ab.errored_frames + ba.errored_frames,
        frame_check: ab.frame_check.clone(),
        directions: Vec::new(),
        dut_cpu: None,
        esp: None,
        policy_drops: None,
        tunnels: sum_tunnels(&ab.tunnels, &ba.tunnels),
        recovery: None,
        rx_threads: Vec::new(),
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
fn sum_tunnels(ab: &[TunnelFrames], ba: &[TunnelFrames]) -> Vec<TunnelFrames> {
    (0..ab.len().max(ba.len()))
        .map(|i| {
            let (x, y) = (
                ab.get(i).copied().unwrap_or_default(),
                ba.get(i).copied().unwrap_or_default(),
            );
            TunnelFrames {
                tx: x.tx + y.tx,
                rx: x.rx + y.rx,
            }
        })
        .collect()
}

/// What one direction of a trial sent besides its frames: its flow
/// ranges, and with `--tunnels` the map and the address naming a frame's
/// tunnel.
pub(crate) struct Direction<'a> {
    pub flows: &'a linerate_wire::Flows,
    pub tunnels: Option<(TunnelMap, Field)>,
}

/// The longest period the per-tunnel count of sent frames tallies once
/// and multiplies; beyond it (or with a random range) it replays every frame.
const MAX_PERIOD: u64 = 1 << 20;

/// Frames sent per tunnel (index = tunnel): of generator threads that each
/// sent frames `0 .. sent` of their own sequence over their own flows
/// (`threads`: (sent, flows) per thread, in order; with ESP on several
/// threads each thread carries its own tunnels' slice of the spread), the
/// frames of class 0 whose address `field` is in tunnel `i`'s slice,
/// replaying the value each frame was given (its flow range's, else its
/// template's). Of those, the last `not_left` frames of class 0 (the last
/// thread's first) did not leave the port and are not counted, as the
/// trial's `tx_frames` does not count them. Exact: the sum over the
/// tunnels is the frames of class 0 sent less `not_left`, when every frame
/// is in a tunnel.
pub(crate) fn tunnel_tx(
    map: &TunnelMap,
    field: Field,
    threads: &[(u64, &linerate_wire::Flows)],
    frames: &FrameSet,
    not_left: u64,
) -> Vec<u64> {
    let mut out = vec![0u64; map.count as usize];
    // Without a range on the field, every frame of a template carries its
    // template's address.
    let fixed: Vec<Option<usize>> = frames
        .templates()
        .iter()
        .map(|t| field.ipv4_in(t.bytes()).and_then(|a| map.index_of(a)))
        .collect();
    let classes = frames.template_classes();
    let tunnel_of = |flows: &linerate_wire::Flows| {
        let range = flows.range(field).copied();
        let (fixed, classes) = (&fixed, &classes);
        move |n: u64| -> Option<usize> {
            let k = frames.template_index(n);
            if classes[k] != 0 {
                return None;
            }
            match &range {
                Some(r) => map.index_of(r.value(n) as u32),
                None => fixed[k],
            }
        }
    };
    for &(sent, flows) in threads {
        let tunnel = tunnel_of(flows);
        let count = |from: u64, to: u64, out: &mut [u64], by: u64| {
            for n in from..to {
                if let Some(i) = tunnel(n) {
                    out[i] += by;
                }
            }
        };
        // The values repeat: an inc/dec range every span / gcd(step, span)
        // frames, the sizes every sequence's length.
        let flow_period = match flows.range(field) {
            None => Some(1),
            Some(r) => r.period(),
        };
        let period = flow_period
            .and_then(|p| lcm(p, frames.sequence().len() as u64))
            .filter(|&p| p <= MAX_PERIOD);
        match period {
            Some(p) if sent >= p => {
                let mut per = vec![0u64; out.len()];
                count(0, p, &mut per, 1);
                for (o, x) in out.iter_mut().zip(per.iter()) {
                    *o += x * (sent / p);
                }
                count(0, sent % p, &mut out, 1);
            }
            _ => count(0, sent, &mut out, 1),
        }
    }
    // The frames that did not leave: the last of class 0, from the end.
    let mut left = not_left;
    for &(sent, flows) in threads.iter().rev() {
        let tunnel = tunnel_of(flows);
        let mut n = sent;
        while left > 0 && n > 0 {
            n -= 1;
            if classes[frames.template_index(n)] == 0 {
                left -= 1;
                if let Some(i) = tunnel(n) {
                    out[i] -= 1;
                }
            }
        }
    }
    out
}

fn lcm(a: u64, b: u64) -> Option<u64> {
    (a / linerate_wire::flows::gcd(a, b).max(1)).checked_mul(b)
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
    dir: &Direction,
    encap: linerate_wire::Encap,
    a_veth: accounting::SendingPort,
    around: Option<(&accounting::Counters, &accounting::Counters)>,
) -> TrialResult {
    let c = ClassCounts::of(spec, frames, sent, counted);
    let rx = c.legit.received();
    let lost = c.intended_frames.saturating_sub(rx);
    let (loss_where, not_left) = locate_loss(frames, sent, counted, &c, lost, a_veth, around);
    let tx_frames = c.tx_frames.saturating_sub(not_left);
    let tunnels = tunnel_frames(dir, frames, sent, counted, not_left);
    let (intended_frames, legit, policy_drops, total) =
        (c.intended_frames, c.legit, c.policy_drops, c.total);
    let duration_s = spec.duration.as_secs_f64();
    // Over the time the frames really took: a paused generator made the
    // trial longer, and the device saw the frames at that lower rate.
    let send_s = sent.send_time.as_secs_f64().max(duration_s);
    TrialResult {
        frame_size: spec.frame.frame(),
        mix: spec.mix.as_ref().map(linerate_results::MixInfo::of),
        flows: dir.flows.describe(),
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
        sequence_errors: Some(legit.sequence_errors()),
        latency_ns: legit.latency(counted.latency_every),
        generator_short: sent.handed < total,
        generator_max_stall_ns: Some(sent.max_stall.as_nanos() as u64),
        generator_paused_ns: Some(sent.paused.as_nanos() as u64),
        generator_pauses: Some(sent.pauses),
        sending_s: Some(send_s),
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
        tunnels,
        recovery: None,
        rx_threads: counted.per_thread.clone(),
    }
}

/// The counts of the legitimate class (class 0) and, in a drop test, of
/// the class the DUT should drop: what the schedule meant to send, what
/// left, and what came back.
struct ClassCounts {
    /// Frames the whole schedule holds, every class.
    total: u64,
    /// Class 0 frames the schedule meant to send.
    intended_frames: u64,
    /// Class 0 frames the generators handed on (before the frames that
    /// did not leave the tester are taken off).
    tx_frames: u64,
    /// The class 0 streams merged.
    legit: StreamStats,
    policy_drops: Option<linerate_results::PolicyDrops>,
}

impl ClassCounts {
    /// Thread k sent frames 0 .. sent[k] of its own sequence, of its
    /// share of the schedule; stream k counts class 0, stream threads + k
    /// class 1.
    fn of(spec: &TrialSpec, frames: &FrameSet, sent: &Sent, counted: &Counted) -> ClassCounts {
        let threads = sent.per_thread.len().max(1);
        let total = Pacer::new(spec.intended_fps, spec.duration).total();
        let shares: Vec<u64> = (0..threads as u16)
            .map(|k| xdp::share(total, threads as u16, k))
            .collect();
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
        ClassCounts {
            total,
            intended_frames: frames_of_class(frames, &shares, 0),
            tx_frames: frames_of_class(frames, &sent.per_thread, 0),
            legit,
            policy_drops,
        }
    }
}

/// Where the `lost` frames were lost (the tester's own refusals, the
/// links', the DUT's), and how many never left the tester. A drop test's
/// legitimate class is its share of the tester's refusals and of the
/// damaged frames (which carry no class one can trust).
fn locate_loss(
    frames: &FrameSet,
    sent: &Sent,
    counted: &Counted,
    c: &ClassCounts,
    lost: u64,
    a_veth: accounting::SendingPort,
    around: Option<(&accounting::Counters, &accounting::Counters)>,
) -> (linerate_results::LossWhere, u64) {
    let mut own = accounting::OwnCounts::new(lost, c.total, sent, counted.ring_drops);
    let mut errored = counted.errored;
    if frames.classes() > 1 {
        let share = c.intended_frames as f64 / c.total.max(1) as f64;
        own = own.share(share);
        errored = (errored as f64 * share).round() as u64;
    }
    let (loss_where, not_left) = accounting::attribute(own, a_veth, around);
    (loss_where.with_errored(errored), not_left)
}

/// `--tunnels`: each tunnel's frames sent (less those that did not leave)
/// and received; empty without tunnels.
fn tunnel_frames(
    dir: &Direction,
    frames: &FrameSet,
    sent: &Sent,
    counted: &Counted,
    not_left: u64,
) -> Vec<TunnelFrames> {
    let Some((map, field)) = dir.tunnels else {
        return Vec::new();
    };
    // With ESP on several threads each thread sent its own tunnels' flows.
    let threads: Vec<(u64, &linerate_wire::Flows)> = sent
        .per_thread
        .iter()
        .enumerate()
        .map(|(k, &n)| (n, sent.thread_flows.get(k).unwrap_or(dir.flows)))
        .collect();
    let tx = tunnel_tx(&map, field, &threads, frames, not_left);
    tx.iter()
        .enumerate()
        .map(|(i, &tx)| TunnelFrames {
            tx,
            rx: counted.tunnels.get(i).copied().unwrap_or(0),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_wire::flows::FieldRange;
    use linerate_wire::{FlowSpec, FrameMix, FrameSize, FrameTemplate, Signature};
    use std::net::Ipv4Addr;

    const MAP: TunnelMap = TunnelMap {
        first: Ipv4Addr::new(10, 1, 0, 0),
        block: 256,
        count: 7,
    };

    fn flow(src: Ipv4Addr, dst: Ipv4Addr) -> FlowSpec {
        FlowSpec {
            src_mac: linerate_wire::MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: linerate_wire::MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: src.into(),
            dst_ip: dst.into(),
            src_port: 1,
            dst_port: 2,
            ttl: 64,
            vlan: None,
        }
    }

    fn flows(ranges: Vec<FieldRange>) -> linerate_wire::Flows {
        linerate_wire::Flows {
            ranges,
            ..Default::default()
        }
    }

    /// What the generator puts on the wire, frame by frame: each frame
    /// built and rewritten as the generator does, its tunnel read back
    /// from the bytes (class 0 only, the last `not_left` of them not).
    fn built(
        field: Field,
        flows: &linerate_wire::Flows,
        frames: &FrameSet,
        per_thread: &[u64],
        not_left: u64,
    ) -> Vec<u64> {
        let mut out = vec![0u64; MAP.count as usize];
        let mut buf = vec![0u8; 2048];
        let mut taken: Vec<(usize, Option<usize>)> = Vec::new();
        for (k, &sent) in per_thread.iter().enumerate() {
            for n in 0..sent {
                let len = frames.get(n).write(
                    &mut buf,
                    Signature {
                        stream: 1,
                        seq: n as u32,
                        tx_ts: 0,
                    },
                );
                flows.apply(&mut buf[..len], n);
                if frames.class_of(n) == 0 {
                    taken.push((k, field.ipv4_in(&buf).and_then(|a| MAP.index_of(a))));
                }
            }
        }
        // Thread order is kept: the last not_left are the last thread's.
        taken.truncate(taken.len() - not_left as usize);
        for (_, t) in taken {
            if let Some(i) = t {
                out[i] += 1;
            }
        }
        out
    }

    #[test]
    fn frames_sent_per_tunnel_are_those_the_generator_built() {
        let src = Ipv4Addr::new(198, 18, 0, 2);
        let inside = Ipv4Addr::new(10, 1, 3, 9);
        let single = FrameSet::single(FrameTemplate::new(
            &flow(src, inside),
            FrameSize::from_frame(64).unwrap(),
        ));
        let imix = FrameSet::new(&flow(src, inside), &FrameMix::parse("imix").unwrap());
        let two = FrameSet::two_classes(
            FrameSet::single(FrameTemplate::new(
                &flow(src, inside),
                FrameSize::from_frame(128).unwrap(),
            )),
            FrameSet::single(FrameTemplate::new(
                &flow(Ipv4Addr::new(198, 18, 9, 9), inside),
                FrameSize::from_frame(128).unwrap(),
            )),
        );
        let random = FieldRange::parse("dst-ip=10.1.0.0..10.1.7.255/random").unwrap();
        let partial = FieldRange::parse("dst-ip=10.1.0.200..10.1.2.100/step=3").unwrap();
        let cases = [
            ("spread", flows(vec![MAP.spread(Field::DstIp, 2)])),
            // Half the random addresses are in no tunnel (past the 7th).
            ("random", flows(vec![random])),
            ("a range over parts of 3 tunnels", flows(vec![partial])),
            ("no range: the template's address", flows(vec![])),
        ];
        for (what, flows) in &cases {
            for (set, frames) in [("one size", &single), ("imix", &imix), ("drop test", &two)] {
                for per_thread in [vec![0], vec![1], vec![10_000], vec![9_999, 10_003, 5]] {
                    for not_left in [0, 1, 17] {
                        let class0 = frames_of_class(frames, &per_thread, 0);
                        if not_left > class0 {
                            continue;
                        }
                        let threads: Vec<_> = per_thread.iter().map(|&n| (n, flows)).collect();
                        let got = tunnel_tx(&MAP, Field::DstIp, &threads, frames, not_left);
                        let want = built(Field::DstIp, flows, frames, &per_thread, not_left);
                        assert_eq!(got, want, "{what}, {set}, {per_thread:?}, {not_left}");
                    }
                }
            }
        }
        // The spread: every tunnel its share, exactly, summing to the frames.
        let spread = flows(vec![MAP.spread(Field::SrcIp, 2)]);
        let got = tunnel_tx(&MAP, Field::SrcIp, &[(10_000, &spread)], &single, 3);
        // 10,000 = 7 x 1,428 + 4: frames 9,996 .. 9,999 go to tunnels 0 .. 3,
        // and of those the last 3 (tunnels 1 .. 3) did not leave.
        assert_eq!(got, vec![1429, 1428, 1428, 1428, 1428, 1428, 1428]);
        assert_eq!(got.iter().sum::<u64>(), 10_000 - 3);
        // The template's address in tunnel 3: all of them there.
        let got = tunnel_tx(&MAP, Field::DstIp, &[(500, &flows(vec![]))], &single, 0);
        assert_eq!(got, vec![0, 0, 0, 500, 0, 0, 0]);
    }

    /// ESP on two threads: thread 0 carries tunnels 0, 2, 4, 6 and thread
    /// 1 tunnels 1, 3, 5 (each its slice of the spread). When the threads
    /// send unequal shares (an overloaded trial), each tunnel's count
    /// follows its own thread's, not the trial's spread replayed over the
    /// threads' sums (which gave a tunnel more received than sent).
    #[test]
    fn threads_with_their_own_tunnels_count_their_own_frames() {
        let single = FrameSet::single(FrameTemplate::new(
            &flow(Ipv4Addr::new(10, 1, 0, 1), Ipv4Addr::new(198, 19, 0, 2)),
            FrameSize::from_frame(128).unwrap(),
        ));
        let block = MAP.block as u64;
        let first = u32::from(MAP.first) as u64;
        let slice = |k: u64, tunnels: u64| {
            let min = first + k * block;
            let text = format!(
                "src-ip={}..{}/step={}",
                Ipv4Addr::from(min as u32),
                Ipv4Addr::from((min + tunnels * block * 2 - 1) as u32),
                block * 2
            );
            flows(vec![FieldRange::parse(&text).unwrap()])
        };
        let (even, odd) = (slice(0, 4), slice(1, 3));
        // 4,000 frames over tunnels 0, 2, 4, 6; 900 over 1, 3, 5.
        let got = tunnel_tx(
            &MAP,
            Field::SrcIp,
            &[(4_000, &even), (900, &odd)],
            &single,
            0,
        );
        assert_eq!(got, vec![1000, 300, 1000, 300, 1000, 300, 1000]);
        // The last 2 frames of the last thread did not leave: tunnels 5 and 3.
        let got = tunnel_tx(
            &MAP,
            Field::SrcIp,
            &[(4_000, &even), (900, &odd)],
            &single,
            2,
        );
        assert_eq!(got, vec![1000, 300, 1000, 299, 1000, 299, 1000]);
    }

    #[test]
    fn both_directions_sum_tunnel_by_tunnel() {
        let t = |tx, rx| TunnelFrames { tx, rx };
        assert_eq!(
            sum_tunnels(&[t(1, 1), t(5, 4)], &[t(10, 9), t(20, 20)]),
            vec![t(11, 10), t(25, 24)]
        );
        assert_eq!(sum_tunnels(&[], &[]), Vec::<TunnelFrames>::new());
    }
}
