//! Typed plans: what a command will do, parsed and checked once, before
//! anything touches the machine.
//!
//! A plan holds values, not option strings: a [`BedPlan`] has the line
//! speed in bit/s, the straggler wait as a [`Duration`], the emulated hosts'
//! addresses as [`HostConfig`]s and the flows as [`Flows`]. Building one is
//! where every mistake in the port options is found, with a one-line
//! error naming the option; opening the test bed from it
//! ([`crate::ports::open`]) only builds, attaches and locks.
//!
//! The command line's option structs turn into plans through
//! [`PortArgs::plan`]; a library user (the Python package, a remote agent,
//! the scenario-file runner) can build a plan directly.

pub use crate::commands::back_to_back::{BackToBackPlan, MaxBurst};
pub use crate::commands::calibrate::CalibratePlan;
pub use crate::commands::cpu_target::CpuTargetPlan;
pub use crate::commands::frame_loss::LossPlan;
pub use crate::commands::http::{HttpMeasure, HttpPlan};
pub use crate::commands::latency::LatencyPlan;
pub use crate::commands::mlrsearch::MlrsearchPlan;
pub use crate::commands::overhead::OverheadPlan;
pub use crate::commands::rfc2544::Rfc2544Plan;
pub use crate::commands::stack::{StackPlan, StackPort, StackTarget};
pub use crate::commands::tcp::{TcpMeasure, TcpPlan};
pub use crate::commands::trial::{TrialLength, TrialPlan};

pub use crate::dut_cpu::DutCpuPlan;
use crate::error::{bail, err, Result};
pub use crate::ports::{EngineChoice, ReceiverChoice};
pub use crate::recorder::RecordPlan;
use linerate_engine::{HostConfig, LatencySampling};
use linerate_wire::{Encap, Flows};
use std::net::IpAddr;
use std::time::Duration;

/// Where a test runs and how its frames are sent and counted: the test
/// bed, checked.
#[derive(Debug, Clone)]
pub struct BedPlan {
    pub target: Target,
    pub engine: EngineChoice,
    pub receiver: ReceiverChoice,
    /// How long port B keeps counting after the last frame is sent.
    pub straggler_wait: Duration,
    /// The longest wait before a trial for the DUT to stop forwarding
    /// earlier frames (`linerate_engine::recovery`); zero: no check.
    pub recovery_limit: Duration,
    /// Generator threads on the sending port, each its own stream.
    pub tx_threads: u16,
    /// Receiving threads on each port that receives test frames (af_packet
    /// only: a fanout group of packet sockets, stream i counted on thread
    /// i mod N).
    pub rx_threads: u16,
    pub latency_every: LatencySampling,
    /// How deep each received test frame is checked.
    pub frame_check: linerate_wire::FrameCheck,
    /// Header fields that vary per frame (`--range`), for this layout.
    pub flows: Flows,
    /// Both ports send and receive.
    pub bidirectional: bool,
    /// A drop test's source address (every other frame).
    pub drop_from: Option<IpAddr>,
    /// IP version and 802.1Q tag of the test frames.
    pub encap: Encap,
    /// `--line-speed`; None: the speed the link reports, else 10G.
    pub line_speed_bps: Option<u64>,
    /// `--ipsec`: port B is the VPN peer of the gateway.
    pub ipsec: Option<crate::ipsec::IpsecPlan>,
}

/// The two tester ports and the DUT between them.
#[derive(Debug, Clone)]
pub enum Target {
    /// The namespace lab: the one named (it must exist), else the default
    /// lab if it is up, else one built for the run and removed after it.
    /// `ring`: the depth of a lab built for the run (`--lab-ring`).
    Lab {
        name: Option<String>,
        ring: Option<u32>,
    },
    /// Interfaces the user named, cabled to a device of their own.
    External { a: ExternalPort, b: ExternalPort },
}

/// A tester interface and the host linerate emulates on it.
#[derive(Debug, Clone)]
pub struct ExternalPort {
    pub ifname: String,
    pub host: HostConfig,
}

/// The device under test: where its CPU load comes from. (The lab
/// scenarios to build, `--scenario`, are parsed into the command's plan:
/// [`scenario_list`] gives back their text.)
#[derive(Debug, Clone, Default)]
pub struct DutPlan {
    pub cpu: DutCpuPlan,
}

/// `scenarios` as `--scenario` takes them: each one's canonical text,
/// separated by ','.
pub fn scenario_list(scenarios: &[linerate_lab::scenario::Scenario]) -> String {
    scenarios
        .iter()
        .map(|s| s.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

impl BedPlan {
    /// A capture (`--pcap`) needs every frame in user space: `--receiver
    /// auto` then counts through the engine's socket.
    pub fn for_capture(mut self, capture: bool) -> BedPlan {
        self.receiver = self.receiver.for_capture(capture);
        self
    }

    pub fn is_lab(&self) -> bool {
        matches!(self.target, Target::Lab { .. })
    }
}

/// The largest buffer any of `frames` needs (what the ports must hold).
pub fn max_frame_len(frames: &[linerate_wire::Frames]) -> usize {
    frames
        .iter()
        .map(|f| f.largest().buffer_len())
        .max()
        .unwrap_or(0)
}

/// `--port-a` and `--port-b`: both given, and not the same interface.
pub fn tester_ports<'a>(
    port_a: &'a Option<String>,
    port_b: &'a Option<String>,
) -> Result<(&'a str, &'a str)> {
    let name_a = port_a.as_deref().ok_or_else(|| {
        err!(
            BadInput,
            "--port-a is missing: name the tester interfaces, or use --lab"
        )
    })?;
    let name_b = port_b.as_deref().ok_or_else(|| {
        err!(
            BadInput,
            "--port-b is missing: name the second tester interface"
        )
    })?;
    if name_a == name_b {
        bail!(BadInput, "--port-a and --port-b are both '{name_a}': use two interfaces, one on each side of the DUT");
    }
    Ok((name_a, name_b))
}
