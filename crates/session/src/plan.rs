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
pub use crate::commands::trial::TrialPlan;

use crate::args::PortArgs;
pub use crate::dut_cpu::DutCpuPlan;
use crate::error::{bail, err, Result, ResultExt};
use crate::ports::{self, ReceiverChoice};
pub use crate::recorder::RecordPlan;
use linerate_engine::{HostConfig, LatencySampling};
use linerate_wire::{Encap, Flows, IpVersion};
use std::net::IpAddr;
use std::time::Duration;

/// Where a test runs and how its frames are sent and counted: the test
/// bed, checked.
#[derive(Debug, Clone)]
pub struct BedPlan {
    pub target: Target,
    /// `auto`, `xdp`, `af_xdp` or `af_packet`.
    pub engine: String,
    pub receiver: ReceiverChoice,
    /// How long port B keeps counting after the last frame is sent.
    pub straggler_wait: Duration,
    /// Generator threads (xdp engine only).
    pub tx_threads: u16,
    pub latency_every: LatencySampling,
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
}

/// The two tester ports and the DUT between them.
#[derive(Debug, Clone)]
pub enum Target {
    /// The namespace lab: the one named (it must exist), else the default
    /// lab if it is up, else one built for the run and removed after it.
    Lab { name: Option<String> },
    /// Interfaces the user named, cabled to a device of their own.
    External { a: ExternalPort, b: ExternalPort },
}

/// A tester interface and the host linerate emulates on it.
#[derive(Debug, Clone)]
pub struct ExternalPort {
    pub ifname: String,
    pub host: HostConfig,
}

/// The device under test: a lab scenario to build (`--scenario`, one or
/// several separated by ',') and where its CPU load comes from.
#[derive(Debug, Clone, Default)]
pub struct DutPlan {
    pub scenario: Option<String>,
    pub cpu: DutCpuPlan,
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

impl PortArgs {
    /// The test bed these options describe, every value checked; nothing
    /// on the machine is touched.
    pub fn plan(&self) -> Result<BedPlan> {
        self.plan_with(false)
    }

    /// Like [`PortArgs::plan`]; with `scenario` (`--scenario`, which builds
    /// a lab of its own for each configuration) the target is always a lab.
    pub fn plan_with(&self, scenario: bool) -> Result<BedPlan> {
        ports::check_tx_threads(&self.engine, self.tx_threads)?;
        let straggler_wait = ports::parse_duration(&self.straggler_wait, "--straggler-wait")?;
        let encap = self.encap.encap()?;
        let flows = Flows::parse(&self.ranges)
            .and_then(|f| f.for_encap(encap))
            .context("--range")?;
        if let Some(source) = self.drop_from {
            // The engine checks again before every trial; here, before a lab is built.
            let v6 = encap.ip == IpVersion::V6;
            linerate_engine::check_drop_test(source, v6, self.bidirectional, &flows)?;
        }
        if scenario && !encap.is_default() {
            // Scenarios configure the DUT for untagged IPv4 (NAT, ACLs, routes, tunnels).
            bail!(BadInput, "--scenario configures the lab DUT for untagged IPv4 and cannot test {encap} frames: run the scenario without --ipv6/--vlan");
        }
        let target = if self.lab || scenario {
            Target::Lab {
                name: self.lab_name.clone(),
            }
        } else {
            let (name_a, name_b) = tester_ports(&self.port_a, &self.port_b)?;
            Target::External {
                a: ExternalPort {
                    ifname: name_a.to_string(),
                    host: ports::host_config("a", &self.ip_a, &self.gw_a, &self.gw_mac_a, &encap)?,
                },
                b: ExternalPort {
                    ifname: name_b.to_string(),
                    host: ports::host_config("b", &self.ip_b, &self.gw_b, &self.gw_mac_b, &encap)?,
                },
            }
        };
        let line_speed_bps = self
            .line_speed
            .as_deref()
            .map(linerate_wire::units::parse_line_speed)
            .transpose()?;
        Ok(BedPlan {
            target,
            engine: self.engine.clone(),
            receiver: self.receiver,
            straggler_wait,
            tx_threads: self.tx_threads,
            latency_every: self.latency_every,
            flows,
            bidirectional: self.bidirectional,
            drop_from: self.drop_from,
            encap,
            line_speed_bps,
        })
    }
}

/// `--port-a` and `--port-b`: both given, and not the same interface.
pub(crate) fn tester_ports<'a>(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Cli;
    use crate::args::Command;
    use clap::Parser;

    fn bed(args: &str) -> Result<BedPlan> {
        let argv = format!("linerate trial --rate 1% {args}");
        let Command::Trial(t) = Cli::try_parse_from(argv.split_whitespace())?.command else {
            unreachable!()
        };
        t.ports.plan()
    }

    const EXTERNAL: &str = "--port-a pa --port-b pb --ip-a 198.18.0.2/24 --gw-a 198.18.0.1 --ip-b 198.19.0.2/24 --gw-b 198.19.0.1";

    #[test]
    fn a_plan_holds_values_not_option_strings() {
        let p = bed(&format!(
            "{EXTERNAL} --line-speed 1G --straggler-wait 500ms --range dst-port=1..10 --engine af_packet"
        ))
        .unwrap();
        assert_eq!(p.line_speed_bps, Some(1_000_000_000));
        assert_eq!(p.straggler_wait, Duration::from_millis(500));
        assert_eq!(p.engine, "af_packet");
        assert!(!p.flows.is_empty());
        let Target::External { a, b } = &p.target else {
            panic!("{:?}", p.target)
        };
        assert_eq!((a.ifname.as_str(), b.ifname.as_str()), ("pa", "pb"));
        assert_eq!(a.host.gateway.to_string(), "198.18.0.1");
        assert_eq!(b.host.prefix_len, 24);

        // A scenario builds a lab of its own: no ports needed.
        let args = "linerate rfc2544 --scenario acl:1".split_whitespace();
        let Command::Rfc2544(r) = Cli::try_parse_from(args).unwrap().command else {
            unreachable!()
        };
        assert!(r.ports.plan().is_err());
        assert!(r.ports.plan_with(true).unwrap().is_lab());
        // Scenarios configure the DUT for untagged IPv4.
        let args = "linerate rfc2544 --scenario acl:1 --ipv6".split_whitespace();
        let Command::Rfc2544(r) = Cli::try_parse_from(args).unwrap().command else {
            unreachable!()
        };
        let e = r.ports.plan_with(true).unwrap_err();
        assert_eq!(e.kind(), crate::error::Kind::BadInput);
        assert!(e.to_string().contains("untagged IPv4"), "{e}");

        let lab = bed("--lab --lab-name x").unwrap();
        assert!(lab.is_lab());
        assert!(matches!(lab.target, Target::Lab { name: Some(ref n) } if n == "x"));
        assert_eq!(lab.line_speed_bps, None);
    }

    #[test]
    fn every_port_option_is_checked_when_the_plan_is_made() {
        for (args, says) in [
            ("--port-a pa", "--port-b"),
            (
                "--port-a pa --port-b pa --ip-a 198.18.0.2/24 --gw-a 198.18.0.1 --ip-b 198.19.0.2/24 --gw-b 198.19.0.1",
                "both 'pa'",
            ),
            (&format!("{EXTERNAL} --line-speed fast"), "fast"),
            (&format!("{EXTERNAL} --straggler-wait soon"), "--straggler-wait"),
            (&format!("{EXTERNAL} --gw-mac-a ff:ff:ff:ff:ff:ff"), "broadcast"),
            (&format!("{EXTERNAL} --range nonsense"), "--range"),
            ("--lab --tx-threads 2 --engine af_packet", "--tx-threads"),
            ("--lab --vlan 5000", "5000"),
        ] {
            let e = bed(args).unwrap_err();
            assert_eq!(e.kind(), crate::error::Kind::BadInput, "{args}: {e:?}");
            let e = crate::exit::one_line(&e);
            assert!(e.contains(says), "{args}: {e}");
        }
    }

    #[test]
    fn a_capture_counts_through_the_socket_unless_told_otherwise() {
        let p = bed("--lab").unwrap().for_capture(true);
        assert_eq!(p.receiver, ReceiverChoice::Socket);
        let p = bed("--lab --receiver kernel").unwrap().for_capture(true);
        assert_eq!(p.receiver, ReceiverChoice::Kernel);
    }
}
