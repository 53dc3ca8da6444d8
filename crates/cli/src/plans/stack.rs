//! `StackPlan` from the command line's options.

use super::values::parse_duration;
use crate::args::StackPortArgs;
use linerate_session::commands::stack::{parse_cidr, parse_ip};
use linerate_session::error::Result;
use linerate_session::plan::{StackPlan, StackPort, StackTarget};
use linerate_session::{bail, err};

impl StackPortArgs {
    /// Every value of `args` checked; nothing on the machine is touched.
    pub fn plan(&self) -> Result<StackPlan> {
        let args = self;
        let connect_timeout = parse_duration(&args.connect_timeout, "--connect-timeout")?;
        let connect_to = args
            .connect_to
            .as_deref()
            .map(|t| parse_ip(t, "--connect-to"))
            .transpose()?;
        super::unused::refuse(
            &[
                ("--ip-a", args.ip_a.is_some()),
                ("--gw-a", args.gw_a.is_some()),
                ("--ip-b", args.ip_b.is_some()),
                ("--gw-b", args.gw_b.is_some()),
            ]
            .map(|(option, given)| super::bed::in_named_ports(option, given, args.lab)),
        )?;
        let (target, ipv6) = if args.lab {
            let target = StackTarget::Lab {
                name: args.lab_name.clone(),
                ipv6: args.ipv6,
            };
            (target, args.ipv6)
        } else {
            let (name_a, name_b) =
                linerate_session::plan::tester_ports(&args.port_a, &args.port_b)?;
            let need = |v: &Option<String>, o: &str| {
                v.clone().ok_or_else(|| {
                    err!(
                        BadInput,
                        "{o} is missing: give each port its address and gateway"
                    )
                })
            };
            let (ip_a, len_a) = parse_cidr(&need(&args.ip_a, "--ip-a")?, "--ip-a")?;
            let (ip_b, len_b) = parse_cidr(&need(&args.ip_b, "--ip-b")?, "--ip-b")?;
            let gw_a = parse_ip(&need(&args.gw_a, "--gw-a")?, "--gw-a")?;
            let gw_b = parse_ip(&need(&args.gw_b, "--gw-b")?, "--gw-b")?;
            if [ip_b, gw_a, gw_b]
                .iter()
                .any(|ip| ip.is_ipv6() != ip_a.is_ipv6())
            {
                bail!(
                    BadInput,
                    "--ip-a, --ip-b, --gw-a and --gw-b mix IPv4 and IPv6: give all four in one family"
                );
            }
            let target = StackTarget::Ports {
                a: StackPort {
                    ifname: name_a.into(),
                    ip: ip_a,
                    prefix_len: len_a,
                    gateway: gw_a,
                },
                b: StackPort {
                    ifname: name_b.into(),
                    ip: ip_b,
                    prefix_len: len_b,
                    gateway: gw_b,
                },
            };
            (target, ip_a.is_ipv6())
        };
        // The tester addresses' family is known here: the lab's IPv4 or
        // IPv6 plan, or the addresses given.
        if let Some(ip) = connect_to {
            if ip.is_ipv6() != ipv6 {
                bail!(
                    BadInput,
                    "--connect-to {ip} is not in the family of the tester addresses"
                );
            }
        }
        let line_speed_bps = args
            .line_speed
            .as_deref()
            .map(linerate_wire::units::parse_line_speed)
            .transpose()?;
        Ok(StackPlan {
            target,
            connect_to,
            line_speed_bps,
            label: args.label.clone(),
            connect_timeout,
        })
    }
}
