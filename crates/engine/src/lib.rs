//! The engine runs one trial at a time: a paced generator on port A, a
//! receiver on each port, exact counts and latency at the end.
//!
//! It never decides rates (the methods do) and never prints (the reporters
//! do): a [`TrialSpec`] goes in, a [`TrialResult`] comes out.

pub mod accounting;
pub mod backend;
pub mod capture;
pub mod cpu;
pub mod esp_sink;
pub mod generator;
pub mod host;
pub mod ipsec;
pub mod latency_sampling;
pub mod pacer;
pub mod receiver;
pub mod recovery;
pub mod split_rx;
pub mod stats;
mod summary;
pub mod transform;
mod trial;
pub mod xdp;

pub use backend::{Clock, Receiver, ReceiverKind, SendJob, TesterPort, Transmitter};
pub use host::HostConfig;
pub use latency_sampling::LatencySampling;
use linerate_port::{PortError, PortInfo};
use linerate_results::{TrialResult, TrialSpec};
use linerate_wire::MacAddr;
use pacer::Pacer;
pub use split_rx::SplitRx;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// What went wrong, in the library's terms: the engine's settings and the
/// trial's values, never a command-line option (the session names the
/// option that sets each for its user).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Port(#[from] PortError),
    #[error(transparent)]
    Bpf(#[from] linerate_bpf::BpfError),
    #[error("gateway {gateway} did not answer {resolution} on port {port} within {secs} s: check the DUT's address and cabling, or give its MAC")]
    ArpTimeout {
        port: String,
        gateway: std::net::IpAddr,
        /// "ARP" or "NDP".
        resolution: &'static str,
        secs: u64,
    },
    /// A tester port that cannot carry the test: its state says why (a
    /// gateway that never answered on it, or a port gone mid-trial).
    #[error("tester port {port} is {problem}: {what}")]
    PortUnusable {
        port: String,
        problem: String,
        what: String,
    },
    #[error("a {frame}-byte frame cannot carry {encap} test frames: the smallest is {min} bytes")]
    FrameTooSmall { frame: u16, encap: String, min: u16 },
    #[error("a {frame}-byte frame does not fit port {port} (MTU {mtu}, frames up to {max} bytes with FCS): use a smaller frame or raise the MTU")]
    FrameTooLarge {
        frame: u16,
        port: String,
        mtu: u32,
        max: usize,
    },
    #[error("the {engine} engine carries frames up to {max} bytes (with FCS), not {frame}: use the af_packet engine for larger frames")]
    FrameTooLargeForEngine {
        frame: u16,
        engine: String,
        max: usize,
    },
    #[error("a trial of {duration_s} s at {fps} frames/s holds no frame: use a longer duration or a higher rate")]
    EmptyTrial { duration_s: f64, fps: f64 },
    #[error("more than one generator thread sends clear frames, or frames of several tunnels (one thread encrypts an SA's frames)")]
    TxThreads,
    #[error("the tunnels cannot be dealt out to {threads} generator threads: the flows do not spread the frames over the tunnels as linerate does")]
    TunnelsNotDealt { threads: u16 },
    #[error("{asked} generator threads are more than the {max} streams the receiver counts per trial: use at most {max}")]
    TooManyTxThreads { asked: u16, max: u16 },
    #[error("a drop test sends from port A only, not in both directions")]
    DropTestBidirectional,
    #[error("a source-address flow range rewrites the source address that marks a drop test's dropped half: vary another field (dst-ip, ports)")]
    DropTestSourceRange,
    #[error("the drop test's source {0} is not of the test frames' IP version: give an address of the same version as port A's")]
    DropTestFamily(std::net::IpAddr),
    /// A port's transform cannot carry the whole trial.
    #[error("port {port} can send {left} more frames with {transform}, and the trial needs {frames}: shorten the trial or renegotiate the security association")]
    TransformExhausted {
        port: String,
        transform: String,
        left: u64,
        frames: u64,
    },
    /// A transform was asked of a port whose engine builds or counts frames
    /// in the kernel.
    #[error("the {engine} engine builds and counts frames inside the kernel, where they cannot be encrypted or decrypted: use the af_xdp or af_packet engine")]
    TransformUnsupported { engine: String },
    /// Per-tunnel counts asked of a port counted by the in-kernel counter.
    #[error("port {port} is counted by the in-kernel counter, which counts streams, not tunnels: per-tunnel counts need the socket receiver")]
    TunnelsInKernel { port: String },
    #[error("interrupted")]
    Interrupted,
    #[error("a tester thread failed: {0}")]
    Thread(String),
}

/// Refuses what a drop test from `source` cannot be combined with: test
/// frames of the other IP version (`test_v6`), both directions at once
/// (the dropped class goes A -> B), a source-address flow range (it would
/// overwrite the mark). The one rule, checked by the CLI before it builds
/// a lab and by the engine before every trial.
pub fn check_drop_test(
    source: std::net::IpAddr,
    test_v6: bool,
    bidirectional: bool,
    flows: &linerate_wire::Flows,
) -> Result<(), EngineError> {
    if source.is_ipv6() != test_v6 {
        return Err(EngineError::DropTestFamily(source));
    }
    if bidirectional {
        return Err(EngineError::DropTestBidirectional);
    }
    if flows.range(linerate_wire::flows::Field::SrcIp).is_some() {
        return Err(EngineError::DropTestSourceRange);
    }
    Ok(())
}

/// The most frames a generator that fell behind its schedule sends to
/// catch up (at up to 4 times the rate) when the DUT's input ring is not
/// known (a device on ports the user names); held up longer, it pauses
/// instead: the schedule moves back, the DUT sees the trial's rate with a
/// gap, and the trial records the pause. A hardware tester never falls
/// behind; a software one that made up a 3 ms stall at 700 kframes/s would
/// send 2,100 frames at four times the rate into a 256-frame ring.
pub const MAX_CATCH_UP_FRAMES: u64 = 32;

/// The most frames a generator catches up in front of an input ring of
/// `ring` frames whose depth is known (the lab's NIC queue): an eighth of
/// it, [`MAX_CATCH_UP_FRAMES`] at least (32 for a 256-frame veth ring, 512
/// for the lab's default 4,096). Such a burst, sent at up to 4 times the
/// rate, fills at most an eighth of the ring beyond what the rate itself
/// keeps there, while a generator that shares its CPU with the kernel's
/// receive work (a two-CPU lab) no longer pauses every time that work
/// holds it up for a few dozen frames' worth (0.1 ms at 300 kframes/s).
pub fn catch_up_frames_for_ring(ring: u32) -> u64 {
    (u64::from(ring) / 8).max(MAX_CATCH_UP_FRAMES)
}

/// The xdp generator's ticks per hand-over of frames in front of the lab's
/// DUT input of `ring` frames. Behind a NIC-deep ring (more than veth's
/// 256) every hand-over wakes the DUT port's NAPI thread on the tester's
/// CPU, a few microseconds each on a virtual machine; with the kernel's 64
/// ticks a hand-over carries only a few frames at a few 100k frames/s and
/// the wake-ups alone held the generator below its rate (537 kframes/s
/// offered of 600k, paused 0.5 s in a 5-s trial, on the 2-core development
/// VM), so the DUT was never the limit. 256 ticks (the kernel's most) carry
/// four times as many (599k, 7 ms): each frame waits up to one batch
/// (10-30 µs there) before it leaves, which its latency includes. A
/// veth's own 256-frame ring keeps 64: at the generator's ceiling every
/// tick makes a frame, and one hand-over of 256 could fill that ring.
pub fn xdp_batch_for_ring(ring: u32) -> u32 {
    // veth's own ring (VETH_RING in linerate-lab, which the engine does not
    // depend on).
    if ring > 256 {
        linerate_bpf::generator::MAX_BATCH
    } else {
        linerate_bpf::generator::DEFAULT_BATCH
    }
}

/// How the engine behaves between and around trials.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// After the last frame is sent, wait this long for frames still in
    /// flight (RFC 2544: 2 s). The wait ends early once every sent frame has
    /// arrived: nothing can be late then.
    pub straggler_wait: Duration,
    /// CPUs the tester's threads run on (empty: anywhere).
    pub tester_cpus: Vec<usize>,
    pub arp_timeout: Duration,
    /// Name recorded in every result ("af_packet", "af_xdp", "xdp", "loopback").
    pub name: String,
    /// Generator threads per trial, each sending a stream of its own
    /// (above 1 only for transmitters that allow it: the xdp engine).
    pub tx_threads: u16,
    /// Header fields that vary from frame to frame (pktgen-style ranges);
    /// empty: one flow.
    pub flows: linerate_wire::Flows,
    /// Both ports send and receive at once, each at half the trial's
    /// rate; the result sums both directions and keeps each apart.
    pub bidirectional: bool,
    /// A drop test: every other frame from A comes from this source
    /// address, which the DUT is configured to drop. Those frames are
    /// counted apart (as streams of their own) and reported as intended
    /// drops, not loss.
    pub drop_from: Option<std::net::IpAddr>,
    /// Which frames latency is measured on, for receivers that sample
    /// (the in-kernel counter; see [`latency_sampling`]).
    pub latency_sampling: LatencySampling,
    /// How deep every received test frame is checked before it counts.
    pub frame_check: linerate_wire::FrameCheck,
    /// Whether the kernel's counters of the DUT attribute lost frames.
    /// Off where the test frames leave the DUT's kernel forwarding (a VPN
    /// gateway's ESP in user space: what enters as ESP leaves as other
    /// packets, through a TUN device), where those counters do not add up
    /// to the test frames.
    pub dut_counters: bool,
    /// `--tunnels`: count each trial's test frames per tunnel (into
    /// [`TrialResult::tunnels`]). None: no per-tunnel counts, and nothing
    /// per frame is spent on them.
    pub tunnels: Option<TunnelTally>,
    /// Flow ranges of the B -> A direction of a bidirectional trial
    /// (`flows` are A -> B's); empty: one flow.
    pub flows_rev: linerate_wire::Flows,
    /// Before each trial, wait until the DUT has stopped forwarding
    /// earlier frames (see [`recovery`]); None: start at once.
    pub recovery: Option<recovery::QuietRule>,
    /// The most frames a generator that fell behind its schedule sends to
    /// catch up; further behind, it pauses ([`MAX_CATCH_UP_FRAMES`], or
    /// [`catch_up_frames_for_ring`] where the DUT's ring depth is known).
    pub catch_up_frames: u64,
    /// Ticks of the xdp engine's generator per hand-over of its frames to
    /// the port (the kernel's 64 by default; [`xdp_batch_for_ring`] in the
    /// lab).
    pub xdp_batch: u32,
}

/// Which address of a test frame names its tunnel, per direction of the
/// engine (A -> B, B -> A): the tunnel is `map.index` of that address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunnelTally {
    pub map: ipsec::TunnelMap,
    /// The field of A -> B's frames (SrcIp or DstIp).
    pub ab: linerate_wire::flows::Field,
    /// The field of B -> A's frames.
    pub ba: linerate_wire::flows::Field,
}

impl EngineConfig {
    /// The CPUs generator threads are pinned to, one each in order (thread
    /// k on `cpus[k % len]`): the tester's CPUs, or every CPU this process
    /// may run on when none are set aside. With one thread: the tester's
    /// CPUs as a set, as before (the engine pins the thread to all of them).
    pub fn tx_cpus(&self) -> Vec<usize> {
        if self.tx_threads <= 1 || !self.tester_cpus.is_empty() {
            return self.tester_cpus.clone();
        }
        allowed_cpus()
    }

    /// A note when generator threads have to share CPUs (more threads
    /// than CPUs to pin them to), for the CLI to print.
    pub fn tx_placement_note(&self) -> Option<String> {
        let cpus = self.tx_cpus();
        let n = self.tx_threads as usize;
        (n > 1 && n > cpus.len()).then(|| {
            format!(
                "{n} generator threads on {} CPU(s) {cpus:?}: threads share CPUs, so they cannot all send at full speed",
                cpus.len()
            )
        })
    }
}

/// The CPUs the calling thread may run on (empty if unknown).
fn allowed_cpus() -> Vec<usize> {
    let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) else {
        return Vec::new();
    };
    (0..nix::sched::CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .collect()
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            straggler_wait: Duration::from_secs(2),
            tester_cpus: Vec::new(),
            arp_timeout: Duration::from_secs(3),
            name: String::new(),
            tx_threads: 1,
            flows: linerate_wire::Flows::default(),
            bidirectional: false,
            drop_from: None,
            latency_sampling: LatencySampling::Auto,
            frame_check: linerate_wire::FrameCheck::default(),
            dut_counters: true,
            tunnels: None,
            flows_rev: linerate_wire::Flows::default(),
            recovery: Some(recovery::QuietRule::default()),
            catch_up_frames: MAX_CATCH_UP_FRAMES,
            xdp_batch: linerate_bpf::generator::DEFAULT_BATCH,
        }
    }
}

struct Side {
    port: TesterPort,
    host: HostConfig,
    gateway_mac: Option<MacAddr>,
}

/// Two tester ports and what runs on them. Traffic flows from A to B.
pub struct Engine {
    a: Side,
    b: Side,
    cfg: EngineConfig,
    next_stream: u16,
    /// How lost frames are attributed (read once, at the first trial).
    accounting: Option<accounting::Accounting>,
    /// Port B's capture (`--pcap`), put in by the run using this engine.
    capture: capture::CaptureSlot,
    /// Both ports' frame counters when the last trial (or ARP) ended:
    /// where the next trial's recovery check starts watching.
    last_end: Option<recovery::Mark>,
}

impl Engine {
    pub fn new(
        a: TesterPort,
        host_a: HostConfig,
        b: TesterPort,
        host_b: HostConfig,
        cfg: EngineConfig,
    ) -> Self {
        let side = |port: TesterPort, host: HostConfig| Side {
            gateway_mac: host.gateway_mac,
            port,
            host,
        };
        Engine {
            a: side(a, host_a),
            b: side(b, host_b),
            cfg,
            next_stream: 1,
            accounting: None,
            capture: capture::CaptureSlot::default(),
            last_end: None,
        }
    }

    pub fn port_a(&self) -> &PortInfo {
        &self.a.port.info
    }
    pub fn port_b(&self) -> &PortInfo {
        &self.b.port.info
    }
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }
    /// How port B counts the test frames.
    pub fn receiver(&self) -> ReceiverKind {
        self.b.port.rx.kind()
    }
    /// Where a run puts its capture of the frames port B receives: every
    /// trial from then on offers them to it, this engine's only.
    pub fn capture_slot(&self) -> capture::CaptureSlot {
        self.capture.clone()
    }

    /// Makes the trials drop tests (see [`EngineConfig::drop_from`]),
    /// refusing what a drop test cannot be combined with.
    pub fn set_drop_from(&mut self, source: std::net::IpAddr) -> Result<(), EngineError> {
        let v6 = self.a.host.test_ip().is_ipv6();
        check_drop_test(source, v6, self.cfg.bidirectional, &self.cfg.flows)?;
        self.cfg.drop_from = Some(source);
        Ok(())
    }

    /// The layout of the test frames (IP version, VLAN tag), from port A's host.
    pub fn encap(&self) -> linerate_wire::Encap {
        self.a.host.encap()
    }

    /// Checks that frames of `frame` bytes carry the test frames' headers
    /// and fit both ports.
    pub fn check_frame(&self, frame: linerate_wire::FrameSize) -> Result<(), EngineError> {
        use linerate_wire::units::{ETH_HEADER_LEN, FCS_LEN};
        let encap = self.encap();
        if frame.l3() < encap.min_l3()
            || encap.ip_offset() + frame.l3() as usize > frame.buffer_len()
        {
            return Err(EngineError::FrameTooSmall {
                frame: frame.frame(),
                encap: encap.to_string(),
                min: encap.min_frame(),
            });
        }
        // A tag makes the frame 4 bytes longer than the MTU counts.
        let tag_len = encap.ip_offset() - ETH_HEADER_LEN;
        for side in [&self.a, &self.b] {
            let info = &side.port.info;
            // A transform (ESP) makes the frame the port carries longer.
            let carried = frame.buffer_len() + side.port.growth(frame.buffer_len());
            let by_mtu = info.mtu as usize + ETH_HEADER_LEN + tag_len;
            let by_engine = side.port.max_frame_len();
            if carried <= by_mtu.min(by_engine) {
                continue;
            }
            // Name the limit that binds, so the message names the right fix.
            return Err(if by_engine < by_mtu && carried <= by_mtu {
                EngineError::FrameTooLargeForEngine {
                    frame: frame.frame(),
                    engine: self.cfg.name.clone(),
                    max: by_engine + FCS_LEN,
                }
            } else {
                EngineError::FrameTooLarge {
                    frame: frame.frame(),
                    port: info.ifname.clone(),
                    mtu: info.mtu,
                    max: by_mtu.min(by_engine) + FCS_LEN,
                }
            });
        }
        Ok(())
    }

    /// Resolves both gateways by ARP (a short trial of receivers only),
    /// then, when the destination address varies, sends learning frames
    /// (RFC 2544 section 23) so the DUT has resolved every destination
    /// before the first measured trial: otherwise that trial would measure
    /// the DUT's neighbour resolution (frames queued, dropped, reordered
    /// while it asks), not its forwarding.
    pub fn resolve(&mut self) -> Result<(), EngineError> {
        let quiet = AtomicBool::new(false);
        self.run(None, &quiet)?;
        if let Some(r) = self.cfg.flows.range(linerate_wire::flows::Field::DstIp) {
            // inc/dec visit each of their distinct addresses once per
            // period (a step over a span visits fewer than the span: the
            // spread over --tunnels one host per tunnel); random needs
            // more draws to hit them all. At least a second of it, so the
            // DUT's ARP requests (and its retries) are answered while the
            // receiver runs, not in the gap before the first trial.
            let frames = match r.period() {
                None => 8 * r.span(),
                Some(distinct) => 2 * distinct,
            }
            .clamp(10_000, 100_000);
            let fps = 10_000.0;
            let encap = self.encap();
            // Learning frames are all legitimate: a DUT's neighbour table
            // needs no frames it drops.
            let drop_from = self.cfg.drop_from.take();
            let spec = TrialSpec {
                frame: linerate_wire::FrameSize::from_frame_in(encap.min_frame() as u64, &encap)
                    .expect("the smallest frame of a layout is a frame size"),
                mix: None,
                intended_fps: fps,
                duration: Duration::from_secs_f64(frames as f64 / fps),
            };
            let learned = self.run(Some(&spec), &quiet);
            self.cfg.drop_from = drop_from;
            learned?;
            // The DUT answers the last ARP replies at its own pace.
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(())
    }

    /// Runs one constant-rate trial from A to B. `interrupt` aborts it.
    pub fn run_trial(
        &mut self,
        spec: &TrialSpec,
        interrupt: &AtomicBool,
    ) -> Result<TrialResult, EngineError> {
        self.check_frame(spec.frame)?;
        if Pacer::new(spec.intended_fps, spec.duration).total() == 0 {
            return Err(EngineError::EmptyTrial {
                duration_s: spec.duration.as_secs_f64(),
                fps: spec.intended_fps,
            });
        }
        Ok(self
            .run(Some(spec), interrupt)?
            .expect("a trial was asked for"))
    }
}

#[cfg(test)]
mod tests {
    use super::{catch_up_frames_for_ring, xdp_batch_for_ring, EngineConfig, MAX_CATCH_UP_FRAMES};

    #[test]
    fn generator_threads_get_cpus_and_sharing_is_said() {
        let cfg = |threads, cpus: &[usize]| EngineConfig {
            tx_threads: threads,
            tester_cpus: cpus.to_vec(),
            ..EngineConfig::default()
        };
        // One thread: the tester's CPUs as before, no note.
        assert_eq!(cfg(1, &[]).tx_cpus(), Vec::<usize>::new());
        assert_eq!(cfg(1, &[0, 1]).tx_cpus(), vec![0, 1]);
        assert_eq!(cfg(1, &[]).tx_placement_note(), None);
        // Enough tester CPUs: one each, no note.
        assert_eq!(cfg(2, &[2, 3]).tx_cpus(), vec![2, 3]);
        assert_eq!(cfg(2, &[2, 3]).tx_placement_note(), None);
        // Too few: shared, and said.
        let note = cfg(3, &[0]).tx_placement_note().expect("a note");
        assert!(note.contains("share CPUs"), "{note}");
        // None set aside: the CPUs this process may use.
        assert!(!cfg(2, &[]).tx_cpus().is_empty());
    }

    #[test]
    fn a_generator_catches_up_an_eighth_of_a_known_ring() {
        assert_eq!(catch_up_frames_for_ring(4096), 512);
        assert_eq!(catch_up_frames_for_ring(256), MAX_CATCH_UP_FRAMES);
        assert_eq!(catch_up_frames_for_ring(64), MAX_CATCH_UP_FRAMES);
        assert_eq!(EngineConfig::default().catch_up_frames, MAX_CATCH_UP_FRAMES);
        assert_eq!(xdp_batch_for_ring(4096), 256);
        assert_eq!(xdp_batch_for_ring(256), 64);
        assert_eq!(EngineConfig::default().xdp_batch, 64);
    }
}
