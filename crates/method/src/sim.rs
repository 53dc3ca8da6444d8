//! A simulated device under test, for tests and dry runs: it answers each
//! trial with exact frame counts computed from a capacity, a tester
//! ceiling and a loss pattern, without sending anything.

use crate::TrialRunner;
use linerate_results::{LatencySummary, TrialResult, TrialSpec};
use std::convert::Infallible;

/// A device that forwards up to `capacity_fps`, seen through a tester that
/// can send at most `tester_ceiling_fps`.
///
/// For a trial of `d` seconds at `f` frames/s:
/// - the schedule calls for `round(f × d)` frames;
/// - the tester sends them all, or `floor(ceiling × d)` if that is fewer
///   (then `generator_short` is set);
/// - the device forwards everything sent up to `floor(capacity × d)`
///   frames; offered more, it forwards `overload_forwarding` times that
///   (1.0: an ideal device keeps forwarding at capacity; 0.5: it collapses
///   to half, as a device in receive livelock does);
/// - of the forwarded frames, every `loss_every_nth` is dropped anyway;
/// - a buffer of `buffer_frames` lets it forward that many frames more than
///   `floor(capacity × d)` (a burst of `N` frames at `f > capacity` passes
///   while `N × (1 − capacity / f) <= buffer_frames`, RFC 9004's model);
/// - offered more than `loss_above.0` frames/s, it also drops every
///   `loss_above.1`-th forwarded frame (a device that loses a little
///   above some rate, below its capacity);
/// - with `rare_loss`, a trial loses `frames` of the forwarded frames with
///   `probability`, decided by a seeded generator from the trial's number
///   (deterministic: the same DUT answers the same sequence of trials
///   alike). Below its capacity such a device loses now and then a few
///   frames, above it heavily: the noisy device that exceed ratios are for;
/// - with `pauses` (`above`, `share`), a trial asked for more than `above`
///   frames/s has a generator that pauses `share` of the duration, as a
///   tester held up by its machine does: every frame is still sent, but
///   over `d × (1 + share)`, so the device forwards up to
///   `floor(capacity × d × (1 + share))` frames; the offered rate is the
///   frames over the time they took, pauses included (as the engine's).
///
/// A policer at `r` frames/s is `SimulatedDut::new(r)`: it forwards what
/// it is offered up to `r` and exactly `r` under any overload.
#[derive(Debug, Clone, PartialEq)]
pub struct SimulatedDut {
    pub capacity_fps: f64,
    /// Drop every n-th forwarded frame whatever the rate.
    pub loss_every_nth: Option<u64>,
    /// Most frames/s the tester manages to send.
    pub tester_ceiling_fps: Option<f64>,
    /// Share of its capacity the device still forwards when overloaded.
    pub overload_forwarding: f64,
    /// Trials run so far.
    pub trials_run: usize,
    /// Frames the device buffers beyond its capacity in one trial.
    pub buffer_frames: u64,
    /// Above this offered rate (frames/s), drop every n-th forwarded frame.
    pub loss_above: Option<(f64, u64)>,
    /// Rare random losses: (probability per trial, frames lost, seed).
    pub rare_loss: Option<RareLoss>,
    /// Above this intended rate (frames/s), the generator pauses this
    /// share of the trial's duration.
    pub pauses: Option<(f64, f64)>,
}

/// A trial loses `frames` frames with `probability` (seeded, per trial).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RareLoss {
    pub probability: f64,
    pub frames: u64,
    pub seed: u64,
}

impl RareLoss {
    /// Whether trial number `trial` (0-based) is one of the lossy ones.
    pub fn hits(&self, trial: usize) -> bool {
        uniform(self.seed, trial as u64) < self.probability
    }
}

/// A uniform number in [0, 1) from `seed` and `n` (SplitMix64).
fn uniform(seed: u64, n: u64) -> f64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15u64.wrapping_mul(n.wrapping_add(1)));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

impl SimulatedDut {
    /// An ideal device: forwards `capacity_fps` under any overload, loses
    /// nothing below it, behind a tester without limits.
    pub fn new(capacity_fps: f64) -> Self {
        SimulatedDut {
            capacity_fps,
            loss_every_nth: None,
            tester_ceiling_fps: None,
            overload_forwarding: 1.0,
            trials_run: 0,
            buffer_frames: 0,
            loss_above: None,
            rare_loss: None,
            pauses: None,
        }
    }

    pub fn with_loss_every_nth(mut self, n: u64) -> Self {
        self.loss_every_nth = Some(n);
        self
    }

    pub fn with_tester_ceiling(mut self, fps: f64) -> Self {
        self.tester_ceiling_fps = Some(fps);
        self
    }

    pub fn with_overload_forwarding(mut self, share: f64) -> Self {
        self.overload_forwarding = share;
        self
    }

    pub fn with_buffer(mut self, frames: u64) -> Self {
        self.buffer_frames = frames;
        self
    }

    pub fn with_loss_above(mut self, fps: f64, every_nth: u64) -> Self {
        self.loss_above = Some((fps, every_nth));
        self
    }

    /// With `probability` per trial, lose `frames` forwarded frames (the
    /// draw depends on `seed` and the trial's number only).
    pub fn with_rare_loss(mut self, probability: f64, frames: u64, seed: u64) -> Self {
        self.rare_loss = Some(RareLoss {
            probability,
            frames,
            seed,
        });
        self
    }

    /// Trials asked for more than `above_fps` pause `share` of their
    /// duration (then every trial records its pauses, 0 or 1).
    pub fn with_pauses_above(mut self, above_fps: f64, share: f64) -> Self {
        self.pauses = Some((above_fps, share));
        self
    }

    /// Frames the device forwards in a trial of `duration_s` at most.
    pub fn capacity_frames(&self, duration_s: f64) -> u64 {
        (self.capacity_fps * duration_s).floor() as u64
    }

    /// The trial result for `spec`, without counting it as run (a rare
    /// loss is drawn for the next trial's number, `trials_run`).
    pub fn answer(&self, spec: &TrialSpec) -> TrialResult {
        let d = spec.duration.as_secs_f64();
        let intended = (spec.intended_fps * d).round() as u64;
        let tx = match self.tester_ceiling_fps {
            Some(ceiling) => intended.min((ceiling * d).floor() as u64),
            None => intended,
        };
        // The pause, seconds; the device sees the frames over `d + paused`.
        let paused = match self.pauses {
            Some((above, share)) if spec.intended_fps > above => d * share,
            _ => 0.0,
        };
        let capacity = self.capacity_frames(d + paused) + self.buffer_frames;
        let forwarded = if tx > capacity {
            (capacity as f64 * self.overload_forwarding).floor() as u64
        } else {
            tx
        };
        let rx = forwarded - self.loss_every_nth.map_or(0, |n| forwarded / n.max(1));
        // Over the time the frames took, pauses included (as the engine).
        let offered = if d > 0.0 {
            tx as f64 / (d + paused)
        } else {
            0.0
        };
        let rx = match self.loss_above {
            Some((fps, n)) if offered > fps => rx - rx / n.max(1),
            _ => rx,
        };
        let rx = match self.rare_loss {
            Some(r) if r.hits(self.trials_run) => rx.saturating_sub(r.frames),
            _ => rx,
        };
        let lost = intended - rx;
        TrialResult {
            policy_drops: None,
            loss_where: None,
            tunnels: Vec::new(),
            recovery: None,
            rx_threads: Vec::new(),
            frame_size: spec.frame.frame(),
            mix: spec.mix.as_ref().map(linerate_results::MixInfo::of),
            flows: Vec::new(),
            directions: Vec::new(),
            l3_length: spec.frame.l3(),
            duration_s: d,
            intended_fps: spec.intended_fps,
            offered_fps: offered,
            intended_frames: intended,
            tx_frames: tx,
            rx_frames: rx,
            lost_frames: lost,
            loss_ratio: if intended > 0 {
                lost as f64 / intended as f64
            } else {
                0.0
            },
            reordered: 0,
            duplicated: 0,
            sequence_errors: None,
            latency_ns: (rx > 0).then_some(LatencySummary {
                min: 10_000,
                avg: 12_000,
                max: 50_000,
                p50: 11_000,
                p90: 14_000,
                p99: 20_000,
                p999: 40_000,
                ..Default::default()
            }),
            generator_short: tx < intended,
            generator_max_stall_ns: None,
            generator_paused_ns: self.pauses.map(|_| (paused * 1e9).round() as u64),
            generator_pauses: self.pauses.map(|_| u64::from(paused > 0.0)),
            sending_s: None,
            dut_cpu: None,
            esp: None,
            engine: "simulated".to_string(),
            receiver: String::new(),
            ip_version: Default::default(),
            vlan: None,
            tester_rx_drops: 0,
            stray_frames: 0,
            errored_frames: 0,
            frame_check: String::new(),
        }
    }
}

impl TrialRunner for SimulatedDut {
    type Error = Infallible;

    fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, Infallible> {
        self.trials_run += 1;
        Ok(self.answer(spec))
    }
}

/// A simulated device whose trials, where `on` says so, are recorded with
/// the generator paused `share` of their duration, without changing what
/// the device did: for tests of how a method judges a pause (where the
/// pause should also change what the device saw, use
/// [`SimulatedDut::with_pauses_above`]).
pub struct PausingDut {
    pub dut: SimulatedDut,
    pub share: f64,
    pub on: fn(&TrialResult) -> bool,
}

impl TrialRunner for PausingDut {
    type Error = std::convert::Infallible;
    fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, Self::Error> {
        let mut t = self.dut.run(spec)?;
        if (self.on)(&t) {
            t.generator_paused_ns = Some((t.duration_s * self.share * 1e9) as u64);
            t.generator_pauses = Some(1);
            // The frames took that much longer (the engine's offered rate).
            t.offered_fps /= 1.0 + self.share;
        }
        Ok(t)
    }
}
