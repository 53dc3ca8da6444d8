//! The test bed ([`BedPlan`]) from the port options every packet command shares.

use super::unused::{self, Rule};
use super::values;
use crate::args::PortArgs;
use linerate_lab::scenario::Scenario;
use linerate_results::report::thousands;
use linerate_session::error::{bail, err, Result, ResultExt};
use linerate_session::peers::MAX_TUNNELS;
use linerate_session::plan::{tester_ports, BedPlan, ExternalPort, Target};
use linerate_wire::flows::Field;
use linerate_wire::{Flows, IpVersion};

impl PortArgs {
    /// The test bed these options describe, every value checked; nothing
    /// on the machine is touched.
    pub fn plan(&self) -> Result<BedPlan> {
        self.plan_with(&[])
    }

    /// Like [`PortArgs::plan`]; with `scenarios` (`--scenario`, which
    /// builds a lab of its own for each configuration) the target is
    /// always a lab.
    pub fn plan_with(&self, scenarios: &[Scenario]) -> Result<BedPlan> {
        let (plan, counts) = self.plan_counts(scenarios)?;
        if counts.len() > 1 {
            bail!(BadInput, "--tunnels {} is a list: one run per count is for rfc2544 and loss; give one count here", self.tunnels.as_deref().unwrap_or_default());
        }
        Ok(plan)
    }

    /// `--tunnels`: the counts given (empty: none given).
    pub fn tunnel_counts(&self) -> Result<Vec<usize>> {
        let Some(text) = &self.tunnels else {
            return Ok(Vec::new());
        };
        let bad = || {
            err!(BadInput,
                "--tunnels {text} is not a tunnel count: give 1 to {} tunnels, or a list such as 1,10,100 (rfc2544 and loss)",
                thousands(MAX_TUNNELS as u64))
        };
        let mut counts = Vec::new();
        for part in text.split(',') {
            let n: usize = part.trim().parse().map_err(|_| bad())?;
            if !(1..=MAX_TUNNELS).contains(&n) {
                return Err(bad());
            }
            if counts.contains(&n) {
                bail!(
                    BadInput,
                    "--tunnels {text} names {n} twice: give each count once"
                );
            }
            counts.push(n);
        }
        Ok(counts)
    }

    /// Like [`PortArgs::plan_with`], with the `--tunnels` counts (the plan
    /// holds the first; empty without `--tunnels`).
    pub fn plan_counts(&self, scenarios: &[Scenario]) -> Result<(BedPlan, Vec<usize>)> {
        let scenario = !scenarios.is_empty();
        unused::refuse(&self.rules(scenarios))?;
        let straggler_wait = values::parse_duration(&self.straggler_wait, "--straggler-wait")?;
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
                ring: self.lab_ring,
            }
        } else {
            let (name_a, name_b) = tester_ports(&self.port_a, &self.port_b)?;
            Target::External {
                a: ExternalPort {
                    ifname: name_a.to_string(),
                    host: values::host_config("a", &self.ip_a, &self.gw_a, &self.gw_mac_a, &encap)?,
                },
                b: ExternalPort {
                    ifname: name_b.to_string(),
                    host: values::host_config("b", &self.ip_b, &self.gw_b, &self.gw_mac_b, &encap)?,
                },
            }
        };
        let mut ipsec = self.ipsec.plan(self.lab || scenario, scenario)?;
        let counts = self.tunnel_counts()?;
        if !counts.is_empty() || self.peer_addrs.is_some() {
            if counts.iter().all(|&n| n == 1) && self.peer_addrs.is_some() {
                bail!(BadInput, "--peer-addrs gives the addresses of many peers: use it with --tunnels above 1, or give the one peer's address with --ip-b");
            }
            // A scenario without --ipsec options: the scenario fills in the rest.
            let p = match ipsec.take() {
                Some(p) => p,
                None => self.ipsec.values()?,
            };
            let many = counts.iter().any(|&n| n > 1);
            if many && p.esp_keys.is_some() {
                bail!(
                    BadInput,
                    "--esp-keys writes one tunnel's keys: leave it out with --tunnels above 1"
                );
            }
            if many {
                // The spread goes on the address behind linerate.
                let (field, name) = match p.direction {
                    linerate_session::ipsec::Direction::Decrypt => (Field::SrcIp, "src-ip"),
                    _ => (Field::DstIp, "dst-ip"),
                };
                if flows.range(field).is_some() {
                    bail!(BadInput, "--range {name}=... with --tunnels above 1: linerate spreads the test frames over the tunnels on {name} (each tunnel's address behind linerate); leave that --range out");
                }
                if let Some(net) = p.remote_net {
                    let most = counts.iter().copied().max().unwrap_or(1);
                    linerate_session::peers::slice_prefix(net, most, "--remote-net")?;
                }
            }
            ipsec = Some(linerate_session::ipsec::IpsecPlan {
                tunnels: counts.first().copied().unwrap_or(1),
                peer_addrs: self
                    .peer_addrs
                    .as_deref()
                    .map(linerate_session::ipsec::PeerAddrs::parse)
                    .transpose()?,
                ..p
            });
        }
        if ipsec.is_some() && !encap.is_default() {
            bail!(
                BadInput,
                "--ipsec tests untagged IPv4 through the tunnel: leave out --ipv6 and --vlan"
            );
        }
        // Every address the ranges reach must lie within the selectors the
        // gateway answers (checked once it has answered).
        if let Some(p) = ipsec.as_mut() {
            p.ranges = flows.ranges.clone();
        }
        // Port B is an IPsec peer with --ipsec, and in the lab of a
        // vpn-gateway scenario: linerate encrypts and decrypts in user space.
        let peer = if ipsec.is_some() {
            Some("--ipsec".to_string())
        } else {
            scenarios
                .iter()
                .find(|s| s.vpn_gateway().is_some())
                .map(|s| format!("--scenario {s} (port B the gateway's IPsec peer)"))
        };
        // Each generator thread encrypts the frames of its own tunnels.
        let fewest_tunnels = counts.iter().copied().min().unwrap_or(1);
        if let Some(peer) = peer {
            unused::refuse(&[
                Rule::new(
                    "--engine xdp",
                    self.engine == crate::args::EngineName::Xdp,
                    false,
                    format!("builds and counts frames in the kernel, and {peer} encrypts and decrypts every frame in user space: use --engine af_xdp or af_packet (or auto)"),
                ),
                Rule::new(
                    "--tx-threads",
                    self.tx_threads as usize > fewest_tunnels,
                    false,
                    format!("{} with {peer} deals the tunnels out to the generator threads, each SA's frames encrypted on one thread: give --tunnels {} or more, or fewer threads", self.tx_threads, self.tx_threads),
                ),
                Rule::new(
                    "--bidirectional",
                    self.bidirectional,
                    false,
                    format!("sends from both ports, and with {peer} --direction says which way the frames cross the gateway: use --direction both (each direction half the rate, reported apart and summed) instead of --bidirectional"),
                ),
                Rule::new(
                    "--receiver kernel",
                    self.receiver == crate::args::Receiver::Kernel,
                    false,
                    format!("counts in the kernel, and with {peer} linerate decrypts the gateway's ESP frames in user space, where the in-kernel counter cannot count them: leave out --receiver kernel"),
                ),
            ])?;
        }
        let recovery_limit = values::parse_duration(&self.recovery_limit, "--recovery-limit")?;
        let line_speed_bps = self
            .line_speed
            .as_deref()
            .map(linerate_wire::units::parse_line_speed)
            .transpose()?;
        Ok((
            BedPlan {
                target,
                engine: self.engine.into(),
                receiver: self.receiver.into(),
                straggler_wait,
                recovery_limit,
                tx_threads: self.tx_threads,
                rx_threads: self.rx_threads,
                latency_every: self.latency_every,
                frame_check: self.frame_check,
                flows,
                bidirectional: self.bidirectional,
                drop_from: self.drop_from,
                encap,
                line_speed_bps,
                ipsec,
            },
            counts,
        ))
    }
}

impl PortArgs {
    /// The options whose meaning depends on the mode (see [`unused`]):
    /// the lab (`--lab`, or `--scenario`'s labs) or ports the user names;
    /// IPsec or not; the receiver.
    fn rules(&self, scenarios: &[Scenario]) -> Vec<Rule> {
        let scenario = !scenarios.is_empty();
        let lab = self.lab || scenario;
        let mut rules: Vec<Rule> = [
            ("--ip-a", self.ip_a.is_some()),
            ("--gw-a", self.gw_a.is_some()),
            ("--ip-b", self.ip_b.is_some()),
            ("--gw-b", self.gw_b.is_some()),
            ("--gw-mac-a", self.gw_mac_a.is_some()),
            ("--gw-mac-b", self.gw_mac_b.is_some()),
        ]
        .into_iter()
        .map(|(option, given)| in_named_ports(option, given, lab))
        .collect();
        rules.push(Rule::new(
            "--lab-ring",
            self.lab_ring.is_some(),
            lab,
            "is the ring depth of a lab this run builds: add --lab (or --scenario), or leave --lab-ring out",
        ));
        // The IPsec options: with --ipsec, or with scenarios that each make
        // the DUT a VPN gateway (which fills in what they do not say).
        let mut ipsec_options = self.ipsec.given();
        if self.tunnels.is_some() {
            ipsec_options.push("--tunnels");
        }
        if self.peer_addrs.is_some() {
            ipsec_options.push("--peer-addrs");
        }
        if scenario {
            let gateways = scenarios.iter().all(|s| s.vpn_gateway().is_some());
            let list = scenarios_text(scenarios);
            if self.ipsec.ipsec {
                ipsec_options.insert(0, "--ipsec");
            }
            for option in ipsec_options {
                rules.push(Rule::new(option, true, gateways, format!(
                    "is for a VPN gateway, and --scenario {list} is not one in every lab it builds: use --scenario vpn-gateway[:SUITE], or leave {option} out"
                )));
            }
        } else {
            for option in ipsec_options {
                rules.push(Rule::new(option, true, self.ipsec.ipsec, format!(
                    "applies with --ipsec: add --ipsec (port B is then the gateway's VPN peer) or leave {option} out"
                )));
            }
        }
        // A drop test's lab drops everything from its own source address.
        if let Some(source) = scenarios.iter().find_map(|s| s.drop_from()) {
            rules.push(Rule::new(
                "--drop-from",
                self.drop_from.is_some_and(|d| d != std::net::IpAddr::V4(source)),
                false,
                format!("gives another source than --scenario drop-test, which drops frames from {source}: leave out --drop-from"),
            ));
        }
        rules.push(Rule::new(
            "--ipsec-gateway",
            self.ipsec.ipsec_gateway.is_some(),
            !lab,
            "is the IKE address of a gateway you name; the lab's VPN gateway has its own: leave --ipsec-gateway out with --lab or --scenario",
        ));
        rules.push(Rule::new(
            "--receiver socket",
            self.receiver == crate::args::Receiver::Socket,
            self.engine != crate::args::EngineName::Xdp,
            "hands every frame up to linerate, and the xdp engine counts test frames in the kernel and hands none up: use --engine af_xdp or af_packet with --receiver socket",
        ));
        let rx_threads = self.rx_threads > 1;
        rules.push(Rule::new(
            "--rx-threads",
            rx_threads,
            self.engine == crate::args::EngineName::AfPacket,
            "makes the receiving port's packet socket a fanout group, one socket per thread: use it with --engine af_packet (xdp and --receiver kernel count in the kernel, on the CPUs that take the frames; af_xdp reads every queue of the port from one thread)",
        ));
        rules.push(Rule::new(
            "--rx-threads",
            rx_threads,
            self.receiver != crate::args::Receiver::Kernel,
            "counts through packet sockets, and --receiver kernel counts in the kernel: leave one of them out",
        ));
        rules.push(Rule::new(
            "--rx-threads",
            rx_threads,
            self.rx_threads <= self.tx_threads,
            format!(
                "{n} counts each stream on one receiving thread, and each generator thread sends one stream: give --tx-threads {n} or more, or fewer receiving threads",
                n = self.rx_threads
            ),
        ));
        rules.push(Rule::new(
            "--rx-threads",
            rx_threads,
            !self.ipsec.ipsec || self.ipsec.direction.as_deref() != Some("both"),
            "with --ipsec --direction both: the receiving threads count one direction at a time; use --direction encrypt (port B decrypts on N threads) or decrypt (port A counts on N threads)",
        ));
        rules.push(Rule::new(
            "--rx-threads",
            rx_threads && self.ipsec.ipsec && self.ipsec.direction.as_deref() == Some("encrypt"),
            self.tx_threads % self.rx_threads.max(1) == 0,
            format!(
                "{n} with --direction encrypt decrypts tunnel i on thread i mod {n}, and each generator thread sends the tunnels of one receiving thread: give --tx-threads a multiple of {n}",
                n = self.rx_threads
            ),
        ));
        rules.push(Rule::new(
            "--rx-threads",
            rx_threads,
            !scenarios.iter().any(|s| s.vpn_gateway().is_some()),
            "with the vpn-gateway scenario: port B decrypts the gateway's ESP on one receiving thread; leave --rx-threads out (or measure decryption with --ipsec --direction decrypt against the lab's gateway)",
        ));
        rules.push(Rule::new(
            "--latency-every",
            self.latency_every != linerate_engine::LatencySampling::Auto,
            self.receiver != crate::args::Receiver::Socket,
            "sets how often the in-kernel counter reads the clock, and --receiver socket measures every frame: leave --latency-every out, or count with --receiver kernel",
        ));
        rules
    }
}

/// `--pcap` writes port B's frames to a file, so it needs them in user
/// space: `--receiver auto` then counts through the engine's socket
/// ([`BedPlan::for_capture`]), and what counts in the kernel, or samples
/// the kernel's clock, means nothing with it. Refused here, before a lab is
/// built or a port opened, rather than when the ports open.
pub(crate) fn with_capture(bed: BedPlan, pcap: bool) -> Result<BedPlan> {
    use linerate_session::plan::{EngineChoice, ReceiverChoice};
    unused::refuse(&[
        Rule::new(
            "--pcap",
            pcap,
            bed.engine != EngineChoice::Xdp,
            "needs port B's frames in user space, and the xdp engine counts them in the kernel and hands none up: use --engine af_xdp or af_packet (or auto), or leave --pcap out",
        ),
        Rule::new(
            "--pcap",
            pcap,
            bed.receiver != ReceiverChoice::Kernel,
            "needs port B's frames in user space, and --receiver kernel counts them in the kernel and hands none up: use --receiver socket (or auto), or leave --pcap out",
        ),
        Rule::new(
            "--pcap",
            pcap,
            bed.rx_threads <= 1,
            "samples port B's frames in the order one receiving thread sees them: leave out --rx-threads",
        ),
        Rule::new(
            "--latency-every",
            pcap && bed.latency_every != linerate_engine::LatencySampling::Auto,
            false,
            "sets how often the in-kernel counter reads the clock, and with --pcap port B counts through its socket, which measures every frame: leave --latency-every out",
        ),
    ])?;
    Ok(bed.for_capture(pcap))
}

/// An option that describes a port the user names: it means nothing in
/// the lab, whose hosts and router have addresses of their own.
pub(crate) fn in_named_ports(option: &'static str, given: bool, lab: bool) -> Rule {
    Rule::new(option, given, !lab, format!(
        "is for ports you name (--port-a/--port-b); the lab's hosts and router have their own addresses: leave {option} out with --lab or --scenario"
    ))
}

/// `scenarios` as `--scenario` writes them: the canonical text, ','
/// between them.
pub(crate) fn scenarios_text(scenarios: &[Scenario]) -> String {
    linerate_session::plan::scenario_list(scenarios)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Cli;
    use crate::args::Command;
    use clap::Parser;
    use std::time::Duration;

    fn bed(args: &str) -> Result<BedPlan> {
        let argv = format!("linerate trial --rate 1% {args}");
        let Command::Trial(t) = crate::plans::parse(&argv)? else {
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
        assert_eq!(p.engine, linerate_session::plan::EngineChoice::AfPacket);
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
        let acl = Scenario::parse_list("acl:1").unwrap();
        assert!(r.ports.plan_with(&acl).unwrap().is_lab());
        // Scenarios configure the DUT for untagged IPv4.
        let args = "linerate rfc2544 --scenario acl:1 --ipv6".split_whitespace();
        let Command::Rfc2544(r) = Cli::try_parse_from(args).unwrap().command else {
            unreachable!()
        };
        let e = r.ports.plan_with(&acl).unwrap_err();
        assert_eq!(e.kind(), linerate_session::Kind::BadInput);
        assert!(e.to_string().contains("untagged IPv4"), "{e}");
        // IPsec options need every scenario to be a VPN gateway.
        let args = "linerate rfc2544 --scenario x --psk-file /k".split_whitespace();
        let Command::Rfc2544(r) = Cli::try_parse_from(args).unwrap().command else {
            unreachable!()
        };
        let vpn = Scenario::parse_list("vpn-gateway").unwrap();
        assert!(r.ports.plan_with(&vpn).unwrap().ipsec.is_some());
        // The lab of a vpn-gateway scenario makes port B an IPsec peer.
        let args = "linerate rfc2544 --scenario x --engine xdp".split_whitespace();
        let Command::Rfc2544(x) = Cli::try_parse_from(args).unwrap().command else {
            unreachable!()
        };
        let e = x.ports.plan_with(&vpn).unwrap_err().to_string();
        assert!(
            e.contains("--scenario vpn-gateway (port B the gateway's IPsec peer)"),
            "{e}"
        );
        assert!(x.ports.plan_with(&acl).is_ok());
        let mixed = Scenario::parse_list("vpn-gateway,acl:1").unwrap();
        let e = r.ports.plan_with(&mixed).unwrap_err().to_string();
        assert!(
            e.starts_with("--psk-file is for a VPN gateway, and --scenario vpn-gateway,acl:1"),
            "{e}"
        );

        let lab = bed("--lab --lab-name x").unwrap();
        assert!(lab.is_lab());
        assert!(matches!(lab.target, Target::Lab { name: Some(ref n), ring: None } if n == "x"));
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
            ("--lab --vlan 5000", "5000"),
            // Options out of their mode.
            ("--lab --gw-mac-a 02:00:00:00:00:01", "--gw-mac-a is for ports you name"),
            ("--lab-ring 512", "--lab-ring is the ring depth of a lab this run builds"),
            (&format!("{EXTERNAL} --psk-file /x"), "--psk-file applies with --ipsec"),
            (&format!("{EXTERNAL} --tunnels 2"), "--tunnels applies with --ipsec"),
            ("--lab --ipsec --ipsec-gateway 198.19.0.1", "--ipsec-gateway is the IKE address of a gateway you name"),
            (
                "--lab --engine af_packet --receiver socket --latency-every 4",
                "--latency-every sets how often the in-kernel counter",
            ),
            (
                "--lab --engine xdp --receiver socket",
                "--receiver socket hands every frame up",
            ),
            (
                &format!("{EXTERNAL} --ipsec --engine xdp"),
                "--engine xdp builds and counts frames in the kernel, and --ipsec",
            ),
            (
                &format!("{EXTERNAL} --ipsec --receiver kernel"),
                "--receiver kernel counts in the kernel",
            ),
        ] {
            let e = bed(args).unwrap_err();
            assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{args}: {e:?}");
            let e = linerate_session::exit::one_line(&e);
            assert!(e.contains(says), "{args}: {e}");
        }
    }

    #[test]
    fn an_ipsec_peer_takes_its_directions_from_direction_not_bidirectional() {
        let argv = "linerate rfc2544 --sizes 128 --scenario vpn-gateway --bidirectional";
        let Command::Rfc2544(r) = crate::plans::parse(argv).unwrap() else {
            unreachable!()
        };
        let e = r.plan().unwrap_err();
        assert!(
            e.to_string().starts_with(
                "--bidirectional sends from both ports, and with --scenario vpn-gateway"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_drop_test_scenario_refuses_another_drop_source_before_its_lab() {
        let plan = |args: &str| {
            let argv = format!("linerate rfc2544 --sizes 64 {args}");
            let Command::Rfc2544(r) = crate::plans::parse(&argv).unwrap() else {
                unreachable!()
            };
            r.plan()
        };
        let e = plan("--scenario lan-lan,drop-test --drop-from 198.18.0.9").unwrap_err();
        assert_eq!(e.to_string(), "--drop-from gives another source than --scenario drop-test, which drops frames from 198.18.0.200: leave out --drop-from");
        assert!(plan("--scenario drop-test --drop-from 198.18.0.200").is_ok());
        assert!(plan("--scenario lan-lan --drop-from 198.18.0.9").is_ok());
    }

    #[test]
    fn a_capture_counts_through_the_socket_unless_told_otherwise() {
        let p = with_capture(bed("--lab").unwrap(), true).unwrap();
        assert_eq!(p.receiver, linerate_session::plan::ReceiverChoice::Socket);
        let p = with_capture(bed("--lab --receiver kernel").unwrap(), false).unwrap();
        assert_eq!(p.receiver, linerate_session::plan::ReceiverChoice::Kernel);
        // What cannot capture is refused before anything is built.
        for (args, refused) in [
            (
                "--lab --receiver kernel",
                "--pcap needs port B's frames in user space, and --receiver kernel",
            ),
            (
                "--lab --engine xdp",
                "--pcap needs port B's frames in user space, and the xdp engine",
            ),
            ("--lab --latency-every 4", "--latency-every sets how often"),
        ] {
            let e = with_capture(bed(args).unwrap(), true).unwrap_err();
            assert!(e.to_string().starts_with(refused), "{args}: {e}");
            assert!(with_capture(bed(args).unwrap(), false).is_ok(), "{args}");
        }
    }
}
