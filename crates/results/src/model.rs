//! Plain measurement records of a trial: what a method asks the engine to
//! run and what one trial measured (with the trials of a size whose search
//! did not finish). Every rate says its layer in its name. The records
//! built from trials live above: a size's and a run's throughput in
//! [`crate::throughput`], the other methods' in [`crate::methods`].

use crate::ipsec::TunnelFrames;
use linerate_wire::units::{FrameSize, Layer, PREAMBLE_AND_GAP, UDP_HEADER_LEN};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// What a method asks the engine to run: one constant-rate trial.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialSpec {
    /// Ethernet frame size on the wire, FCS included (and the L3 length it
    /// carries); with a `mix`, its largest size (what buffers must hold).
    pub frame: linerate_wire::units::FrameSize,
    /// Several sizes in a repeating sequence (IMIX) instead of `frame` alone.
    pub mix: Option<linerate_wire::FrameMix>,
    /// Frames per second the generator is asked to send.
    pub intended_fps: f64,
    /// How long the generator sends.
    pub duration: Duration,
}

/// Sequence errors as hardware testers count them: every received frame
/// of a stream (duplicates too; damaged frames never) is compared with the
/// number that follows the previous frame's (the expected number; 0 for a
/// stream's first frame). A frame on it is in sequence; one above it is a
/// jump forward over numbers not (yet) seen: `small` when it skips fewer
/// than `threshold` numbers, `big` when it skips `threshold` or more; one
/// below it is `reverse` (a late frame or a duplicate). Unlike `reordered`
/// (RFC 4737: every frame below the highest number seen), one wild number
/// costs two errors (the jump to it and the jump back), not a count of
/// every frame after it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SequenceErrors {
    pub small: u64,
    pub big: u64,
    pub reverse: u64,
    /// Numbers skipped from which a jump forward is big.
    pub threshold: u64,
}

impl SequenceErrors {
    /// Every kind of error summed.
    pub fn total(&self) -> u64 {
        self.small + self.big + self.reverse
    }

    /// Two sets of counts (two directions, streams) under one threshold.
    pub fn combine(self, other: SequenceErrors) -> SequenceErrors {
        SequenceErrors {
            small: self.small + other.small,
            big: self.big + other.big,
            reverse: self.reverse + other.reverse,
            threshold: self.threshold.max(other.threshold),
        }
    }
}

/// Latency summary in nanoseconds, measured from each frame's scheduled
/// send time to its arrival at the receiving port.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LatencySummary {
    pub min: u64,
    pub avg: u64,
    pub max: u64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub p999: u64,
    /// Frames whose latency was measured (0 in records older than this
    /// field).
    #[serde(default)]
    pub samples: u64,
    /// Latency was measured on every n-th frame of each stream: 1 (every
    /// frame) but for the in-kernel counter above a million frames/s at a port,
    /// where reading the clock for every frame would limit the tester
    /// (docs/ENGINES.md, "Latency sampling").
    #[serde(default = "every_frame")]
    pub every: u32,
}

fn every_frame() -> u32 {
    1
}

impl LatencySummary {
    /// The weight of this summary when means of several are combined: its
    /// samples, or (records older than the field) the frames received.
    pub fn weight(&self, rx_frames: u64) -> u64 {
        if self.samples > 0 {
            self.samples
        } else {
            rx_frames.max(1)
        }
    }
}

impl Default for LatencySummary {
    fn default() -> Self {
        LatencySummary {
            min: 0,
            avg: 0,
            max: 0,
            p50: 0,
            p90: 0,
            p99: 0,
            p999: 0,
            samples: 0,
            every: every_frame(),
        }
    }
}

impl TrialSpec {
    /// Bytes per frame at a layer: the frame's, or the mix's mean.
    pub fn mean_bytes(&self, layer: linerate_wire::Layer) -> f64 {
        match &self.mix {
            Some(m) => m.mean_bytes(layer),
            None => self.frame.bytes_at(layer) as f64,
        }
    }
}

/// The frame-size mix a trial or search used (IMIX), for reports.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MixInfo {
    /// "IMIX 1", "genome aaaaaaaddddg", "64:7,594:4,1518:1".
    pub name: String,
    /// Frames of each size per repetition, e.g. "7x64 4x570 1x1418 per 12 frames".
    pub composition: String,
    /// Mean frame size, FCS included (L2 bytes).
    pub mean_frame_size: f64,
    /// Mean bytes per frame at L1, L3 and L4 (UDP payload), by the wire
    /// crate's arithmetic for the mix's layout (absent in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_bytes_l1: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_bytes_l3: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_bytes_l4: Option<f64>,
}

impl MixInfo {
    pub fn of(mix: &linerate_wire::FrameMix) -> MixInfo {
        MixInfo {
            name: mix.name.clone(),
            composition: mix.composition(),
            mean_frame_size: mix.mean_bytes(Layer::L2),
            mean_bytes_l1: Some(mix.mean_bytes(Layer::L1)),
            mean_bytes_l3: Some(mix.mean_bytes(Layer::L3)),
            mean_bytes_l4: Some(mix.mean_bytes(Layer::L4)),
        }
    }
}

/// The outcome of one trial. Counts are exact; rates are L2 frames/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialResult {
    /// Ethernet frame size on the wire including the 4-byte FCS (with a
    /// `mix`: its largest size).
    pub frame_size: u16,
    /// The frame-size mix, when the trial sent several sizes (IMIX).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mix: Option<MixInfo>,
    /// Header fields that varied from frame to frame (flow ranges, e.g.
    /// "dst-ip=198.19.0.2..198.19.0.254/inc/step=1/start=198.19.0.2");
    /// empty: one flow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<String>,
    /// IP packet length carried by each frame.
    pub l3_length: u16,
    /// Sending duration asked for, seconds.
    pub duration_s: f64,
    /// Seconds the frames really took to send: from the trial's start to
    /// when the last frame left (never less than the duration; longer by
    /// the generator's pauses, a tenth of the duration at most). Every
    /// rate of the trial is counted over it. None in records from before
    /// it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sending_s: Option<f64>,
    /// Rate the method asked for.
    pub intended_fps: f64,
    /// Rate that really left the tester: tx_frames over the sending time.
    pub offered_fps: f64,
    /// Frames the schedule called for (intended_fps x duration).
    pub intended_frames: u64,
    /// Frames the generator really handed to the port.
    pub tx_frames: u64,
    /// Distinct test frames received (duplicates are counted apart).
    pub rx_frames: u64,
    /// intended_frames - rx_frames: frames never sent count as lost.
    pub lost_frames: u64,
    /// lost_frames / intended_frames.
    pub loss_ratio: f64,
    /// Frames that arrived with a sequence number below one already seen.
    pub reordered: u64,
    /// Frames whose sequence number had already been received.
    pub duplicated: u64,
    /// Each frame's sequence number against the previous frame's of its
    /// stream: the jumps forward (small, big) and back. None in records
    /// from before they were counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sequence_errors: Option<SequenceErrors>,
    /// None when no frame was received.
    pub latency_ns: Option<LatencySummary>,
    /// The generator could not send at the intended rate (offered < intended):
    /// part of the loss is the tester's, not the device's.
    pub generator_short: bool,
    /// Furthest the generator fell behind its schedule, in ns (the machine
    /// took its CPU, or the port made it wait). Frames due meanwhile went
    /// out back to back afterwards, about `stall x rate` of them: a burst
    /// the device saw that a hardware tester would not have sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_max_stall_ns: Option<u64>,
    /// How long the generator paused in all, in ns: held up by more than
    /// a few frames' worth, it moves its schedule back instead of catching
    /// up in a burst the device would see (`generator_pauses` times). The
    /// offered rate does not count the pauses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_paused_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generator_pauses: Option<u64>,
    /// Frames the tester's own receive buffers dropped: loss caused by the
    /// tester, not the device. A trial with any is not a valid measurement
    /// of the device.
    #[serde(default)]
    pub tester_rx_drops: u64,
    /// Test frames received that belong to no stream of this trial (late
    /// frames of an earlier trial); not counted as received.
    #[serde(default)]
    pub stray_frames: u64,
    /// Test frames that arrived damaged: a length, the IPv4 header
    /// checksum, the UDP checksum (with `frame_check` "payload") or the
    /// timestamp was wrong. Counted as lost, never as received, and kept
    /// out of the sequence and latency statistics.
    #[serde(default)]
    pub errored_frames: u64,
    /// How deep each received test frame was checked: "headers" or
    /// "payload" (linerate_wire::integrity). Empty in records from before
    /// frames were checked.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub frame_check: String,
    /// Which engine ran the trial (e.g. "af_packet").
    pub engine: String,
    /// How the receiving port counted: "kernel" (linerate's XDP counter,
    /// test frames counted and dropped in the kernel) or "socket" (every
    /// frame copied up to linerate's receiver through the engine's socket).
    /// Empty in records older than this field.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub receiver: String,
    /// The test frames' IP version, "IPv4" or "IPv6" (RFC 5180); records
    /// from before IPv6 support are IPv4.
    #[serde(default)]
    pub ip_version: linerate_wire::IpVersion,
    /// The 802.1Q tag of the test frames, when they carried one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<linerate_wire::VlanTag>,
    /// A bidirectional trial's directions, A -> B then B -> A, each with
    /// its own counts at half the rate; the fields above sum them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub directions: Vec<TrialResult>,
    /// The DUT's CPU load during the trial, when it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_cpu: Option<DutCpu>,
    /// `--ipsec`: what linerate's ESP did in this trial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub esp: Option<crate::ipsec::EspTrial>,
    /// A drop test's second traffic class: frames the DUT is configured to
    /// drop. In a drop test the frame counts above, the loss and the
    /// latency are the legitimate class's alone, while `intended_fps` and
    /// `offered_fps` are the offered load of both classes together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy_drops: Option<PolicyDrops>,
    /// Where the lost frames were lost, each term read from the kernel's
    /// own counters; the terms add up to `lost_frames`. None in records
    /// from before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_where: Option<LossWhere>,
    /// `--tunnels`: this trial's test frames tunnel by tunnel (index =
    /// tunnel): sent (the kernel took them) and received (counted as
    /// received: intact, of this trial). They sum exactly to `tx_frames`
    /// and `rx_frames` (both directions of a bidirectional trial; each
    /// entry of `directions` has its own). Empty without `--tunnels`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tunnels: Vec<TunnelFrames>,
    /// The check before the trial that the DUT had stopped forwarding the
    /// previous trial's frames (or anything else): how long the trial
    /// waited for that. None when no check ran (an in-memory port, the
    /// check turned off, records from before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<Recovery>,
    /// Received on several threads (`--rx-threads`): the distinct test
    /// frames each receiving thread counted, thread k counting the streams
    /// whose number is k modulo the threads; they add up to `rx_frames`.
    /// Empty with one receiving thread (and in a bidirectional trial's
    /// sum: each direction has its own).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rx_threads: Vec<u64>,
}

/// The wait before a trial for the DUT to go quiet (see
/// [`TrialResult::recovery`]): the tester ports' received-frame counters
/// had to rise by no more than a few frames (background ARP, NDP, IKE)
/// over a quiet interval before the trial started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Recovery {
    /// Seconds the DUT went on sending after the check began, until the
    /// quiet interval that ended the wait began: 0 when it was quiet at
    /// once. The trial started one quiet interval later.
    pub waited_s: f64,
    /// Frames the tester ports received from the end of the previous
    /// trial (or, before a run's first trial, from the check's start)
    /// until the DUT went quiet: what it was still forwarding.
    pub frames: u64,
    /// The DUT was still sending when the limit ran out, and the trial
    /// started anyway: its result may count frames of the earlier traffic
    /// as stray and lose its own behind them.
    pub limit_reached: bool,
    /// The quiet interval, seconds, and the most frames a tester port
    /// could receive in it and still count as quiet.
    pub quiet_s: f64,
    pub quiet_frames: u64,
}

impl Recovery {
    /// Whether the trial had to wait for the DUT (the DUT was still
    /// forwarding when the check began), or started with it still sending.
    pub fn waited(&self) -> bool {
        self.waited_s > 0.0 || self.limit_reached
    }
}

/// Where a trial's lost frames were lost. Every term is a count of test
/// frames read from a kernel counter; `rest` is what no counter explains,
/// so the terms always add up to the loss exactly:
/// `not_sent + tx_refused + tester_rx + dut_input + dut_internal + rest
/// == lost_frames` (absent terms count 0).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LossWhere {
    /// Frames the generator never handed to the kernel: it fell behind its
    /// schedule and gave up, or was interrupted. The tester's loss.
    pub not_sent: u64,
    /// Frames the tester's transmitting port refused (its queue was full,
    /// or it cannot transmit such frames at all). The tester's loss.
    pub tx_refused: u64,
    /// Frames dropped at the tester's receiving port (its ring or backlog
    /// was full). The tester's loss.
    pub tester_rx: u64,
    /// Frames dropped at the DUT's input: its receive ring or queue was
    /// full. None when the DUT's input cannot be read (a device in a box:
    /// counted in `rest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_input: Option<u64>,
    /// Frames dropped inside the DUT: policy (firewall, policer), no route,
    /// TTL, a shaper's queue. None when the DUT cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dut_internal: Option<u64>,
    /// The loss no counter explains. With a DUT that cannot be read: lost
    /// in the DUT or on the link. Never negative: counters that saw more
    /// drops than test frames were lost are trimmed to the loss, and the
    /// excess is `overcounted`. (Records from before that rule may hold a
    /// negative rest.)
    pub rest: i64,
    /// Whether the DUT's own counters were read (`dut_internal` is set):
    /// `rest` is then unexplained loss, else loss in the DUT or on the link.
    pub dut_read: bool,
    /// Frames that arrived damaged (a length, a checksum or the timestamp
    /// was wrong): the DUT's or the link's doing, counted by the tester's
    /// receiver. 0 in records from before frames were checked.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub errored: u64,
    /// Drops the counters saw beyond the test frames lost: they counted
    /// other traffic too, or one frame at two places. Not loss; taken off
    /// the least certain terms first (`dut_internal`, `dut_input`,
    /// `tester_rx`, `errored`) so that every term is at least 0 and the
    /// terms add up to the loss.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub overcounted: u64,
    /// ESP frames from the gateway that linerate's receiver refused
    /// because they came on a rekey's new SA before linerate had
    /// installed it (counted as an unknown SPI, then matched when the SA
    /// came). The tester's loss. 0 without IPsec.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tester_esp: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl LossWhere {
    /// The loss the tester caused: never the DUT's.
    pub fn tester(&self) -> u64 {
        self.not_sent + self.tx_refused + self.tester_rx + self.tester_esp
    }

    /// The loss that is the DUT's (or, where the DUT cannot be read, the
    /// DUT's or the link's): everything but the tester's.
    pub fn dut(&self, lost: u64) -> u64 {
        lost.saturating_sub(self.tester())
    }

    /// Builds the breakdown of `lost` frames from the measured terms; `rest`
    /// is what is left, so the terms add up exactly.
    pub fn from_terms(
        lost: u64,
        not_sent: u64,
        tx_refused: u64,
        tester_rx: u64,
        dut_input: Option<u64>,
        dut_internal: Option<u64>,
    ) -> LossWhere {
        LossWhere {
            not_sent,
            tx_refused,
            tester_rx,
            dut_input,
            dut_internal,
            rest: 0,
            dut_read: dut_internal.is_some(),
            errored: 0,
            overcounted: 0,
            tester_esp: 0,
        }
        .settle(lost)
    }

    /// The same breakdown with `errored` of the lost frames explained as
    /// damaged on arrival (the receiver counted them, so no counter of
    /// the DUT's or the tester's ports did).
    pub fn with_errored(self, errored: u64) -> LossWhere {
        let lost = self.lost();
        LossWhere {
            errored: self.errored + errored,
            ..self
        }
        .settle(lost)
    }

    /// The same breakdown with `frames` of the lost explained as refused
    /// by linerate's ESP receiver before it had installed their SA
    /// ([`LossWhere::tester_esp`]).
    pub fn with_tester_esp(self, frames: u64) -> LossWhere {
        let lost = self.lost();
        LossWhere {
            tester_esp: self.tester_esp + frames,
            ..self
        }
        .settle(lost)
    }

    /// The loss the terms add up to.
    fn lost(&self) -> u64 {
        (self.explained() as i128 + self.rest as i128).max(0) as u64
    }

    /// Every term but the rest, added.
    fn explained(&self) -> u64 {
        self.not_sent
            + self.tx_refused
            + self.tester_rx
            + self.dut_input.unwrap_or(0)
            + self.dut_internal.unwrap_or(0)
            + self.errored
            + self.tester_esp
    }

    /// Makes the terms add up to `lost` with none below 0: the rest is
    /// what they leave; when they explain more than `lost`, the excess is
    /// taken off the least certain ones first (the DUT's counters see
    /// other traffic; port B's counts any frame it dropped; the damaged
    /// count is the receiver's own; the generator's terms are exact) and
    /// kept as `overcounted`.
    fn settle(mut self, lost: u64) -> LossWhere {
        let explained = self.explained();
        let Some(mut excess) = explained.checked_sub(lost).filter(|&e| e > 0) else {
            self.rest = (lost - explained) as i64;
            return self;
        };
        self.overcounted += excess;
        let mut trim = |term: &mut u64| {
            let cut = excess.min(*term);
            *term -= cut;
            excess -= cut;
        };
        if let Some(n) = self.dut_internal.as_mut() {
            trim(n);
        }
        if let Some(n) = self.dut_input.as_mut() {
            trim(n);
        }
        trim(&mut self.tester_rx);
        trim(&mut self.errored);
        trim(&mut self.tester_esp);
        trim(&mut self.tx_refused);
        trim(&mut self.not_sent);
        self.rest = 0;
        self
    }

    /// Both directions of a bidirectional trial, or several trials, added.
    /// A term one of them did not read moves into the rest.
    pub fn combine(self, o: LossWhere) -> LossWhere {
        let both = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (Some(a), Some(b)) => (Some(a + b), 0),
            (a, b) => (None, a.unwrap_or(0) as i64 + b.unwrap_or(0) as i64),
        };
        let (dut_input, moved_in) = both(self.dut_input, o.dut_input);
        let (dut_internal, moved_internal) = both(self.dut_internal, o.dut_internal);
        LossWhere {
            not_sent: self.not_sent + o.not_sent,
            tx_refused: self.tx_refused + o.tx_refused,
            tester_rx: self.tester_rx + o.tester_rx,
            dut_input,
            dut_internal,
            rest: self.rest + o.rest + moved_in + moved_internal,
            dut_read: dut_internal.is_some(),
            errored: self.errored + o.errored,
            overcounted: self.overcounted + o.overcounted,
            tester_esp: self.tester_esp + o.tester_esp,
        }
    }

    /// Every trial's breakdown added up, with the frames they lost; None
    /// when no trial has one or none lost a frame.
    pub fn sum<'a>(trials: impl IntoIterator<Item = &'a TrialResult>) -> Option<(u64, LossWhere)> {
        trials
            .into_iter()
            .filter_map(|t| Some((t.lost_frames, t.loss_where?)))
            .reduce(|(la, a), (lb, b)| (la + lb, a.combine(b)))
            .filter(|&(lost, _)| lost > 0)
    }

    /// The terms, named as reports print them, with their counts (only
    /// terms that were read; `rest` last).
    pub fn terms(&self) -> Vec<(&'static str, i64)> {
        let mut v = vec![
            ("not sent by the tester", self.not_sent as i64),
            (
                "refused by the tester's sending port",
                self.tx_refused as i64,
            ),
        ];
        if let Some(n) = self.dut_input {
            v.push(("dropped at the DUT's input (queue full)", n as i64));
        }
        if let Some(n) = self.dut_internal {
            v.push(("dropped inside the DUT (policy, route, shaper)", n as i64));
        }
        v.push((
            "dropped at the tester's receiving port",
            self.tester_rx as i64,
        ));
        if self.tester_esp > 0 {
            v.push((
                "refused by the tester's ESP (its new SA not installed yet)",
                self.tester_esp as i64,
            ));
        }
        if self.errored > 0 {
            v.push(("damaged by the DUT or the link", self.errored as i64));
        }
        v.push((
            if self.dut_read {
                "unexplained"
            } else {
                "in the DUT or on the link"
            },
            self.rest,
        ));
        v
    }
}

/// The traffic of a drop test that the DUT's policy should drop (the
/// 100GE report's "DDoS drop test"): kept apart from the loss of the
/// legitimate traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyDrops {
    /// Frames of the drop class the tester sent: intended drops.
    pub tx_frames: u64,
    /// Of those, frames that came through the DUT: its policy let them
    /// pass. Not loss; a failure of the configuration under test.
    pub leaked_frames: u64,
}

impl PolicyDrops {
    /// The drop classes of several trials added up; None when none of them
    /// was a drop test.
    pub fn sum<'a>(trials: impl IntoIterator<Item = &'a TrialResult>) -> Option<PolicyDrops> {
        trials
            .into_iter()
            .filter_map(|t| t.policy_drops)
            .reduce(|a, b| PolicyDrops {
                tx_frames: a.tx_frames + b.tx_frames,
                leaked_frames: a.leaked_frames + b.leaked_frames,
            })
    }
}

/// DUT CPU load, as the Cisco report shows it beside each rate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DutCpu {
    /// Busy share of the DUT's CPU(s), percent.
    pub total_pct: f64,
    /// The part caused by the traffic: total minus the idle baseline
    /// measured before the first trial, percent (never below 0).
    pub traffic_pct: f64,
    /// The lab only: share of the DUT CPUs' time the hypervisor gave to
    /// other guests while the trial sent (steal time in /proc/stat),
    /// percent. Not zero means the router ran on less CPU than the
    /// machine seemed to have, and a trial that lost frames then may pass
    /// in another run: the figure explains a lab result that does not
    /// repeat. None: not measured (an external DUT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stolen_pct: Option<f64>,
}

impl DutCpu {
    /// The mean load of the trials that measured it; None if none did.
    pub fn mean<'a>(trials: impl IntoIterator<Item = &'a TrialResult>) -> Option<DutCpu> {
        let loads: Vec<DutCpu> = trials.into_iter().filter_map(|t| t.dut_cpu).collect();
        let n = loads.len() as f64;
        let stolen: Vec<f64> = loads.iter().filter_map(|c| c.stolen_pct).collect();
        (!loads.is_empty()).then(|| DutCpu {
            total_pct: loads.iter().map(|c| c.total_pct).sum::<f64>() / n,
            traffic_pct: loads.iter().map(|c| c.traffic_pct).sum::<f64>() / n,
            stolen_pct: (!stolen.is_empty())
                .then(|| stolen.iter().sum::<f64>() / stolen.len() as f64),
        })
    }
}

/// A trial whose generator paused more than this share of its duration did
/// not offer its load (`TrialResult::held_rate`): the same 1 % the reports
/// allow the offered rate to fall short by.
pub const MAX_PAUSED_SHARE: f64 = 0.01;

impl TrialResult {
    /// The same record with per-direction records attached.
    pub fn with_directions(mut self, directions: Vec<TrialResult>) -> TrialResult {
        self.directions = directions;
        self
    }

    /// True when the tester caused part of the loss (it could not send at
    /// the intended rate, its port refused frames, or its receiving port
    /// dropped some): the trial measured the tester, not only the device.
    pub fn tester_limited(&self) -> bool {
        self.generator_short || self.loss_where.is_some_and(|w| w.tester() > 0)
    }

    /// Bytes each frame takes on the wire (L1: frame, preamble and gap):
    /// the frame's, or the mix's mean frame's.
    pub fn l1_bytes_per_frame(&self) -> f64 {
        self.bytes_per_frame(Layer::L1)
    }

    /// Bytes per frame at `layer` (a mix's mean frame), as the wire crate
    /// counts them for the trial's frame layout.
    pub fn bytes_per_frame(&self, layer: Layer) -> f64 {
        let encap = self.encap();
        let Some(m) = &self.mix else {
            // The frame the trial sent: its IP packet, padded to 64 bytes.
            return FrameSize::from_l3_in(self.l3_length as u64, &encap)
                .or_else(|_| FrameSize::from_frame_in(self.frame_size as u64, &encap))
                .map_or(0.0, |f| f.bytes_at(layer) as f64);
        };
        // A record written before the per-layer means were kept: a mix's
        // sizes are 64 bytes or more, so none carries padding.
        let l3 = || m.mean_frame_size - encap.l2_overhead() as f64;
        match layer {
            Layer::L1 => m
                .mean_bytes_l1
                .unwrap_or(m.mean_frame_size + PREAMBLE_AND_GAP as f64),
            Layer::L2 => m.mean_frame_size,
            Layer::L3 => m.mean_bytes_l3.unwrap_or_else(l3),
            Layer::L4 => m
                .mean_bytes_l4
                .unwrap_or_else(|| l3() - (encap.ip.header_len() + UDP_HEADER_LEN) as f64),
        }
    }

    /// Megabits per second that `fps` of the trial's frames make at `layer`.
    pub fn mbps(&self, fps: f64, layer: Layer) -> f64 {
        fps * self.bytes_per_frame(layer) * 8.0 / 1e6
    }

    /// The offered load as a share of a `line_bps` line (1.0: line rate),
    /// counted at L1 with the mean frame of a mix: a trial at line rate is
    /// 1.0 whatever sizes it mixed.
    pub fn offered_share_of_line(&self, line_bps: u64) -> f64 {
        if line_bps == 0 {
            return 0.0;
        }
        self.offered_fps * self.l1_bytes_per_frame() * 8.0 / line_bps as f64
    }

    /// True when the trial's loss is within `allowed_loss_ratio`.
    ///
    /// Loss alone: a search also asks [`TrialResult::held_rate`] before it
    /// counts a pass as the device's.
    pub fn passed(&self, allowed_loss_ratio: f64) -> bool {
        self.loss_ratio <= allowed_loss_ratio
    }

    /// How long the generator paused, as a share of the trial's duration
    /// (`generator_paused_ns / duration`); 0 when no pause was recorded or
    /// the duration is 0.
    ///
    /// A paused generator sends its frames later: the device saw them
    /// over the duration and the pauses (a tenth more at most; frames
    /// still due then are not sent), so the rate it really had to forward
    /// was lower than the intended one (as `offered_fps` and
    /// [`TrialResult::rx_fps`] count it, over `sending_s`).
    pub fn paused_share(&self) -> f64 {
        match self.generator_paused_ns {
            Some(ns) if self.duration_s > 0.0 => ns as f64 / 1e9 / self.duration_s,
            _ => 0.0,
        }
    }

    /// True when the generator held the trial's rate: it paused at most
    /// `tolerance` of the duration ([`TrialResult::paused_share`]).
    ///
    /// A trial that passed without holding its rate showed only that the
    /// device forwards a lower rate than the one asked for, so a search
    /// does not count it as a pass at its rate (with `tolerance` its
    /// resolution, a pause changes the rate the device saw by less than the
    /// precision asked for). A trial that failed did so at an even lower
    /// rate than intended, which is still the device's failure: this test
    /// is for passes only.
    pub fn held_rate(&self, tolerance: f64) -> bool {
        self.paused_share() <= tolerance
    }

    /// The test frames' layout (IP version and VLAN tag).
    pub fn encap(&self) -> linerate_wire::Encap {
        linerate_wire::Encap {
            ip: self.ip_version,
            vlan: self.vlan,
        }
    }

    /// Received test frames per second over the time the device saw them
    /// (L2 frames/s): the time the frames took to send, see
    /// [`TrialResult::sending_s`]. What the device really forwarded.
    pub fn rx_fps(&self) -> f64 {
        let took = self.sending_s();
        if took > 0.0 {
            self.rx_frames as f64 / took
        } else {
            0.0
        }
    }

    /// Seconds the trial's frames took to send: the frames sent over the
    /// offered rate, which the engine counts over the time they really
    /// took (longer than the duration when the generator paused; a
    /// generator at its ceiling that gives up sends fewer frames in less
    /// than the duration and its pauses). Without an offered rate, the
    /// duration and the pauses.
    pub fn sending_s(&self) -> f64 {
        if let Some(s) = self.sending_s.filter(|&s| s > 0.0) {
            s
        } else if self.offered_fps > 0.0 && self.tx_frames > 0 {
            self.tx_frames as f64 / self.offered_fps
        } else {
            self.duration_s * (1.0 + self.paused_share())
        }
    }
}

/// Trials of a frame size whose search or method did not finish
/// (interrupted, or an engine error): no measured trial is lost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UnfinishedTrials {
    pub frame_size: u16,
    pub l3_length: u16,
    pub trials: Vec<TrialResult>,
}

/// A method's report that keeps the trials of its unfinished frame size:
/// what the per-size driver fills in as trials end and when a run stops.
pub trait KeepsUnfinished {
    fn unfinished_mut(&mut self) -> &mut Option<UnfinishedTrials>;
}

#[cfg(test)]
mod loss_where_tests {
    use super::LossWhere;

    #[test]
    fn the_dut_cpu_of_several_trials_is_their_mean() {
        let t = |cpu: Option<(f64, f64, Option<f64>)>| {
            let mut t: super::TrialResult = serde_json::from_str(r#"{"frame_size":64,"l3_length":46,"duration_s":1.0,"intended_fps":0.0,"offered_fps":0.0,"intended_frames":0,"tx_frames":0,"rx_frames":0,"lost_frames":0,"loss_ratio":0.0,"reordered":0,"duplicated":0,"latency_ns":null,"generator_short":false,"engine":"x"}"#).unwrap();
            t.dut_cpu = cpu.map(|(total_pct, traffic_pct, stolen_pct)| super::DutCpu {
                total_pct,
                traffic_pct,
                stolen_pct,
            });
            t
        };
        let trials = [
            t(Some((40.0, 30.0, Some(2.0)))),
            t(None),
            t(Some((60.0, 50.0, None))),
            t(Some((50.0, 40.0, Some(4.0)))),
        ];
        let m = super::DutCpu::mean(&trials).expect("three measured");
        assert_eq!((m.total_pct, m.traffic_pct), (50.0, 40.0));
        // Stolen time: the mean of the trials that measured it.
        assert_eq!(m.stolen_pct, Some(3.0));
        assert_eq!(super::DutCpu::mean(&trials[1..2]), None);
        assert_eq!(super::DutCpu::mean(&trials[2..3]).unwrap().stolen_pct, None);
    }

    #[test]
    fn share_of_line_counts_a_mix_s_mean_frame() {
        let mut t: super::TrialResult =
            serde_json::from_str(r#"{"frame_size":1518,"l3_length":1500,"duration_s":1.0,"intended_fps":0.0,"offered_fps":0.0,"intended_frames":0,"tx_frames":0,"rx_frames":0,"lost_frames":0,"loss_ratio":0.0,"reordered":0,"duplicated":0,"latency_ns":null,"generator_short":false,"engine":"x"}"#)
                .unwrap();
        // IMIX 1-like: largest 1518, mean 353.83 bytes; at line rate of 10G.
        t.mix = Some(super::MixInfo {
            name: "IMIX".into(),
            composition: String::new(),
            mean_frame_size: 353.83,
            mean_bytes_l1: None,
            mean_bytes_l3: None,
            mean_bytes_l4: None,
        });
        t.offered_fps = 10e9 / ((353.83 + 20.0) * 8.0);
        assert!((t.offered_share_of_line(10_000_000_000) - 1.0).abs() < 1e-9);
        t.mix = None;
        t.offered_fps = 812_743.6;
        assert!((t.offered_share_of_line(10_000_000_000) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn rates_per_layer_are_the_wire_crate_s() {
        use linerate_wire::{FrameMix, Layer};
        let mut t: super::TrialResult =
            serde_json::from_str(r#"{"frame_size":64,"l3_length":46,"duration_s":1.0,"intended_fps":0.0,"offered_fps":0.0,"intended_frames":0,"tx_frames":0,"rx_frames":0,"lost_frames":0,"loss_ratio":0.0,"reordered":0,"duplicated":0,"latency_ns":null,"generator_short":false,"engine":"x"}"#)
                .unwrap();
        // A 64-byte frame: 84 bytes on the wire, a 46-byte packet, 18 bytes of UDP payload.
        let per_frame = |t: &super::TrialResult| {
            [Layer::L1, Layer::L2, Layer::L3, Layer::L4].map(|l| t.bytes_per_frame(l))
        };
        assert_eq!(per_frame(&t), [84.0, 64.0, 46.0, 18.0]);
        // A padded frame: a 40-byte packet still makes a 64-byte frame.
        t.l3_length = 40;
        assert_eq!(per_frame(&t), [84.0, 64.0, 40.0, 12.0]);
        // A mix: the mean of its frames at each layer, as the wire crate has it.
        let mix = FrameMix::parse("64:7,570:4,1518:1").unwrap();
        t.mix = Some(super::MixInfo::of(&mix));
        for layer in [Layer::L1, Layer::L2, Layer::L3, Layer::L4] {
            assert_eq!(t.mbps(1e6, layer), mix.mbps(1e6, layer), "{layer:?}");
        }
    }

    #[test]
    fn terms_add_up_to_the_loss_and_name_the_tester_s_share() {
        let w = LossWhere::from_terms(100, 5, 10, 3, Some(40), Some(30));
        assert_eq!(w.rest, 12);
        assert!(w.dut_read);
        assert_eq!(w.tester(), 18);
        assert_eq!(w.dut(100), 82);
        let sum: i64 = w.terms().iter().map(|&(_, n)| n).sum();
        assert_eq!(sum, 100);
        assert_eq!(w.terms().last().unwrap().0, "unexplained");
        // Counters that saw more than was lost are trimmed to it: no
        // negative rest, the excess said apart.
        let over = LossWhere::from_terms(5, 0, 0, 0, Some(7), Some(0));
        assert_eq!(
            (over.rest, over.dut_input, over.overcounted),
            (0, Some(5), 2)
        );
    }

    #[test]
    fn a_pause_is_a_share_of_the_duration_and_a_rate_is_held_within_a_tolerance() {
        let mut t: super::TrialResult =
            serde_json::from_str(r#"{"frame_size":64,"l3_length":46,"duration_s":2.0,"intended_fps":0.0,"offered_fps":0.0,"intended_frames":0,"tx_frames":0,"rx_frames":0,"lost_frames":0,"loss_ratio":0.0,"reordered":0,"duplicated":0,"latency_ns":null,"generator_short":false,"engine":"x"}"#)
                .unwrap();
        // No pause recorded (older records, simulated trials): held.
        assert_eq!(t.paused_share(), 0.0);
        assert!(t.held_rate(0.0));
        // 100 ms of a 2-s trial: 5 %.
        t.generator_paused_ns = Some(100_000_000);
        assert!((t.paused_share() - 0.05).abs() < 1e-12);
        assert!(!t.held_rate(0.01));
        assert!(t.held_rate(0.05));
        // Within the tolerance: held.
        t.generator_paused_ns = Some(12_000_000);
        assert!(t.held_rate(0.01));
        // The device saw the frames over the duration and the pauses.
        t.rx_frames = 2_000_000;
        t.generator_paused_ns = Some(500_000_000);
        assert_eq!(t.rx_fps(), 800_000.0);
        // With the engine's offered rate: over the time the frames took (a
        // generator at its ceiling gave up after 1 s of sending).
        t.tx_frames = 1_000_000;
        t.offered_fps = 1_000_000.0;
        assert_eq!(t.sending_s(), 1.0);
        assert_eq!(t.rx_fps(), 2_000_000.0);
        // A trial of no duration has no share.
        t.duration_s = 0.0;
        assert_eq!(t.paused_share(), 0.0);
    }

    #[test]
    fn an_unread_dut_is_the_dut_or_the_link_and_adding_keeps_the_sum() {
        let ext = LossWhere::from_terms(50, 0, 4, 0, None, None);
        assert!(!ext.dut_read);
        assert_eq!(
            ext.terms().last().unwrap(),
            &("in the DUT or on the link", 46)
        );
        let lab = LossWhere::from_terms(20, 1, 0, 0, Some(9), Some(10));
        let both = ext.combine(lab);
        // A term one side could not read moves into the rest.
        assert_eq!((both.dut_input, both.dut_internal), (None, None));
        let sum: i64 = both.terms().iter().map(|&(_, n)| n).sum();
        assert_eq!(sum, 70);
    }
}

#[cfg(test)]
mod loss_where_never_negative {
    use super::LossWhere;

    fn sum(w: &LossWhere) -> i64 {
        w.terms().iter().map(|(_, n)| n).sum()
    }

    #[test]
    fn the_rest_is_what_the_counters_leave() {
        let w = LossWhere::from_terms(100, 10, 5, 20, Some(30), Some(15));
        assert_eq!((w.rest, w.overcounted), (20, 0));
        assert_eq!(sum(&w), 100);
        let w = w.with_errored(7);
        assert_eq!((w.rest, w.errored, w.overcounted), (13, 7, 0));
        assert_eq!(sum(&w), 100);
    }

    /// Back to back, one frame counted at port A's veth and at port B:
    /// the same 1,000 frames twice. No term may go below 0.
    #[test]
    fn counters_that_see_more_than_was_lost_are_trimmed_never_negative() {
        let w = LossWhere::from_terms(1_000, 0, 0, 1_000, Some(1_000), None);
        assert_eq!(w.rest, 0);
        assert_eq!(w.overcounted, 1_000);
        // The least certain term goes first: the DUT's input here.
        assert_eq!((w.dut_input, w.tester_rx), (Some(0), 1_000));
        assert_eq!(sum(&w), 1_000);
        assert!(w.terms().iter().all(|&(_, n)| n >= 0));
    }

    #[test]
    fn the_generators_own_terms_are_trimmed_last() {
        let w = LossWhere::from_terms(50, 40, 5, 30, Some(30), Some(30));
        assert_eq!((w.not_sent, w.tx_refused), (40, 5));
        assert_eq!(
            (w.dut_internal, w.dut_input, w.tester_rx),
            (Some(0), Some(0), 5)
        );
        assert_eq!((w.rest, w.overcounted), (0, 85));
    }

    #[test]
    fn damaged_frames_beyond_the_rest_trim_the_counters() {
        // 10 lost, counters explain 10, then 4 damaged: the counters saw 4
        // frames too many.
        let w = LossWhere::from_terms(10, 0, 0, 10, None, None).with_errored(4);
        assert_eq!(
            (w.tester_rx, w.errored, w.rest, w.overcounted),
            (6, 4, 0, 4)
        );
        assert_eq!(sum(&w), 10);
    }

    /// Frames linerate's ESP refused before it had their SA move from the
    /// DUT's rest to the tester's loss; the terms still add up.
    #[test]
    fn esp_frames_refused_before_their_sa_are_the_testers_loss() {
        let w = LossWhere::from_terms(6, 0, 0, 0, None, None);
        assert_eq!((w.tester(), w.dut(6)), (0, 6));
        let w = w.with_tester_esp(6);
        assert_eq!((w.tester_esp, w.rest, w.tester(), w.dut(6)), (6, 0, 6, 0));
        assert_eq!(sum(&w), 6);
        assert!(w
            .terms()
            .iter()
            .any(|(name, n)| name.contains("ESP") && *n == 6));
    }

    #[test]
    fn combined_breakdowns_add_their_excess() {
        let a = LossWhere::from_terms(10, 0, 0, 20, None, None);
        let b = LossWhere::from_terms(10, 0, 0, 5, None, None);
        let c = a.combine(b);
        assert_eq!((c.tester_rx, c.rest, c.overcounted), (15, 5, 10));
        assert_eq!(sum(&c), 20);
    }
}
