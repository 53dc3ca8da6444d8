//! `TunnelsPlan` from `linerate tunnels`' options: every value checked,
//! nothing on the machine touched.

use super::unused::{self, Rule};
use super::values;
use crate::args::tunnels::TunnelsArgs;
use linerate_lab::scenario::{
    Scenario, VPN_FIRST_PEER, VPN_LAN, VPN_PEERS, VPN_REMOTE_NET, VPN_TUNNEL_NETS,
};
use linerate_session::commands::tunnels::{
    CapacityPlan, PortA, TrafficPlan, TunnelsPlan, TunnelsTarget,
};
use linerate_session::error::{bail, err, Result};
use linerate_session::ipsec::Net;
use linerate_session::outputs::Outputs;
use linerate_session::peers::{check_id_template, peer_addresses, slice_prefix, MAX_TUNNELS};
use std::net::Ipv4Addr;
use std::time::Duration;

/// `--rate 50/s` (or `50`): attempts per second, above 0.
fn parse_rate(text: &str) -> Result<f64> {
    let number = text.trim().trim_end_matches("/s").trim();
    match number.parse::<f64>() {
        Ok(r) if r.is_finite() && r > 0.0 => Ok(r),
        Ok(_) => bail!(
            BadInput,
            "--rate {text}: the attempt rate must be above 0, e.g. 50/s (or leave --rate out: as fast as the gateway answers)"
        ),
        Err(_) => bail!(
            BadInput,
            "--rate {text} is not an attempt rate: write new tunnels per second, e.g. 50/s"
        ),
    }
}

/// `--rekey T` rekeys during the hold: refused with `--capacity` (whose
/// holds are steps' windows) and with a hold shorter than one period
/// (tunnel i's first rekey comes (i + ½) T / N into the hold, the last
/// tunnel's just before T).
fn check_rekey(every: Duration, hold: Duration, capacity: bool) -> Result<()> {
    // Seconds as the user writes them: 2s, 0.5s.
    let secs = |d: Duration| format!("{}s", d.as_secs_f64());
    let text = secs(every);
    if capacity {
        bail!(BadInput, "--rekey {text} rekeys the tunnels during one hold, and --capacity holds a step at a time: leave --rekey out with --capacity");
    }
    if hold < every {
        bail!(BadInput, "--rekey {text} rekeys each tunnel once per {text} of the hold, and --hold is {}: give --hold {text} or more (e.g. --hold {})", secs(hold), secs(every * 5));
    }
    Ok(())
}

fn lab_net((address, prefix_len): (Ipv4Addr, u8)) -> Net {
    Net {
        address,
        prefix_len,
    }
}

/// Whether `inner` lies wholly inside `outer`.
fn within(inner: Net, outer: Net) -> bool {
    let (a, b) = inner.range();
    outer.contains(a) && outer.contains(b)
}

impl TunnelsArgs {
    /// `--traffic-rate 100/s` (or `100`): frames per second per tunnel.
    fn traffic_rate(&self) -> Result<f64> {
        let Some(text) = &self.traffic_rate else {
            return Ok(1.0);
        };
        match text.trim().trim_end_matches("/s").trim().parse::<f64>() {
            Ok(r) if (1.0..=1000.0).contains(&r) => Ok(r),
            Ok(_) => bail!(BadInput, "--traffic-rate {text}: give 1 to 1000 frames per second per tunnel, e.g. 100/s"),
            Err(_) => bail!(BadInput, "--traffic-rate {text} is not a frame rate: write frames per second per tunnel, e.g. 100/s"),
        }
    }

    /// `--capacity`, `--step` and `--max-loss`, checked against the
    /// count (the ceiling), the hold and the traffic.
    fn capacity(
        &self,
        count: usize,
        hold: std::time::Duration,
        traffic_rate: f64,
    ) -> Result<Option<CapacityPlan>> {
        if !self.capacity {
            return Ok(None);
        }
        // The default step never goes past the ceiling; a step given does
        // not either.
        let step = self.step.unwrap_or(100.min(count as u64));
        if step == 0 {
            bail!(
                BadInput,
                "--step 0: each step adds at least one tunnel; give --step 1 or more (default 100)"
            );
        }
        if step > count as u64 {
            bail!(BadInput, "--step {step} is above --count {count} (the ceiling): give a step of at most {count}, or a larger --count");
        }
        let max_loss_pct = match &self.max_loss {
            None => 1.0,
            Some(_) if !self.traffic => bail!(
                BadInput,
                "--max-loss judges the frames of --traffic: add --traffic, or leave --max-loss out"
            ),
            Some(text) => match text.trim().trim_end_matches('%').trim().parse::<f64>() {
                Ok(p) if (0.0..100.0).contains(&p) => p,
                _ => bail!(
                    BadInput,
                    "--max-loss {text}: give a loss in %, at least 0 and below 100, e.g. 1"
                ),
            },
        };
        if self.traffic && hold.as_secs_f64() * traffic_rate < 2.0 {
            bail!(BadInput, "--hold {} s at --traffic-rate {traffic_rate}/s gives each tunnel fewer than 2 frames per step's window: give a longer --hold or a higher --traffic-rate", hold.as_secs_f64());
        }
        Ok(Some(CapacityPlan {
            step: step as usize,
            max_loss_pct,
        }))
    }

    /// The options that belong to one of the command's modes (see
    /// [`unused`]): --capacity, --traffic, the lab or a gateway you name;
    /// and the packet commands' options, which mean nothing here.
    fn rules(&self) -> Vec<Rule> {
        let capacity = |option: &str| {
            format!("is for --capacity (tunnels brought up a step at a time): add --capacity, or leave {option} out")
        };
        let traffic = |option: &str| {
            format!("is for --traffic (test frames through the tunnels): add --traffic, or leave {option} out")
        };
        let frames = |option: &str| {
            format!("is for the packet commands' test frames, and linerate tunnels sends none (it sets tunnels up and deletes them): leave {option} out")
        };
        let lab = self.lab || self.scenario.is_some();
        vec![
            Rule::new("--step", self.step.is_some(), self.capacity, capacity("--step")),
            Rule::new("--max-loss", self.max_loss.is_some(), self.capacity, capacity("--max-loss")),
            Rule::new("--port-a", self.port_a.is_some(), self.traffic, traffic("--port-a")),
            Rule::new("--gw-a", self.gw_a.is_some(), self.traffic, traffic("--gw-a")),
            Rule::new("--traffic-rate", self.traffic_rate.is_some(), self.traffic, traffic("--traffic-rate")),
            Rule::new("--direction", self.ipsec.direction.is_some(), false, frames("--direction")),
            Rule::new("--esp-keys", self.ipsec.esp_keys.is_some(), false, frames("--esp-keys")),
            Rule::new("--pcap", self.record.pcap.is_some(), false, frames("--pcap")),
            Rule::new("--ipsec", self.ipsec.ipsec, false, "is implied: every peer linerate tunnels emulates is an IPsec peer; leave --ipsec out"),
            Rule::new("--ipsec-gateway", self.ipsec.ipsec_gateway.is_some(), !lab, "is the IKE address of a gateway you name; the lab's VPN gateway has its own: leave --ipsec-gateway out with --lab or --scenario"),
            Rule::new("--esp-encap", self.ipsec.esp_encap.as_deref().is_some_and(|e| e != "udp"), false, "raw or auto: linerate tunnels sends its peers' ESP in UDP 4500 only; leave --esp-encap out"),
            Rule::new("--rekey-ike", self.ipsec.rekey_ike.is_some(), false, "rekeys IKE SAs under test traffic in the packet commands (trial, rfc2544, loss ... with --ipsec); linerate tunnels rekeys CHILD_SAs during the hold with --rekey: leave --rekey-ike out"),
        ]
    }

    pub fn plan(&self) -> Result<TunnelsPlan> {
        let count = match self.count {
            Some(n) => n,
            None if self.capacity => MAX_TUNNELS as u64,
            None => bail!(
                BadInput,
                "linerate tunnels needs --count N: how many tunnels (1 to 10,000)"
            ),
        };
        if count == 0 || count > MAX_TUNNELS as u64 {
            bail!(
                BadInput,
                "--count {count}: linerate tunnels brings up 1 to 10,000 tunnels; give a count in that range"
            );
        }
        let count = count as usize;
        let rate = self.rate.as_deref().map(parse_rate).transpose()?;
        if self.window == 0 || self.window > MAX_TUNNELS as u64 {
            bail!(
                BadInput,
                "--window {}: give 1 to 10,000 handshakes in flight",
                self.window
            );
        }
        let hold = match &self.hold {
            Some(text) => values::parse_duration(text, "--hold")?,
            None if self.traffic || self.capacity => std::time::Duration::from_secs(2),
            None => std::time::Duration::ZERO,
        };
        unused::refuse(&self.rules())?;
        let traffic_rate = self.traffic_rate()?;
        let capacity = self.capacity(count, hold, traffic_rate)?;
        let ipsec = self.ipsec.values()?;
        check_id_template(ipsec.local_id.as_ref())?;
        if let Some(every) = ipsec.rekey {
            check_rekey(every, hold, capacity.is_some())?;
        }
        Outputs::new()
            .json(self.json.as_deref())
            .record(&self.record.plan())
            .check()?;

        let lab = self.lab || self.scenario.is_some();
        let (target, peers, remote_net, local_net, gateway) = if lab {
            let Some(spec) = &self.scenario else {
                bail!(BadInput, "linerate tunnels --lab needs a DUT that is a VPN gateway: add --scenario vpn-gateway (or vpn-gateway:SUITE)");
            };
            if spec.contains(',') {
                bail!(BadInput, "--scenario {spec}: linerate tunnels runs against one gateway: give one scenario, vpn-gateway[:SUITE]");
            }
            let scenario = Scenario::parse(spec).map_err(|e| err!(BadInput, "{e}"))?;
            let Some(suite) = scenario.vpn_gateway() else {
                bail!(BadInput, "--scenario {spec} has no VPN gateway: linerate tunnels needs --scenario vpn-gateway[:SUITE]");
            };
            if let Some(esp) = ipsec.esp.filter(|&e| e != suite) {
                bail!(BadInput, "--esp {esp} is not the lab gateway's suite ({suite}): choose it with --scenario vpn-gateway:{esp}");
            }
            let peers = match &self.peer_addrs {
                Some(text) => peer_addresses(text, count)?,
                None => peer_addresses(&VPN_FIRST_PEER.to_string(), count)?,
            };
            let wan = Net {
                address: Ipv4Addr::new(198, 19, 0, 0),
                prefix_len: 24,
            };
            let routed = lab_net(VPN_PEERS);
            let gateway = Ipv4Addr::new(198, 19, 0, 1);
            if let Some(p) = peers.iter().find(|&&p| {
                let (first, last) = wan.range();
                let on_link = wan.contains(p) && ![first, last, gateway].contains(&p);
                !(on_link || routed.contains(p))
            }) {
                bail!(BadInput, "--peer-addrs: {p} is neither on port B's subnet {wan} (198.19.0.2-198.19.0.254) nor in the peer range {routed} the lab routes to port B: give addresses there");
            }
            let remote_net = ipsec.remote_net.unwrap_or(lab_net(VPN_TUNNEL_NETS));
            if !within(remote_net, lab_net(VPN_TUNNEL_NETS))
                && !within(remote_net, lab_net(VPN_REMOTE_NET))
            {
                bail!(BadInput, "--remote-net {remote_net} is outside what the lab's gateway accepts from its peers ({} and {}): leave --remote-net out, or give a network inside them", lab_net(VPN_TUNNEL_NETS), lab_net(VPN_REMOTE_NET));
            }
            let local_net = ipsec.local_net.unwrap_or(lab_net(VPN_LAN));
            let target = TunnelsTarget::Lab {
                scenario: Box::new(scenario),
                ring: self.lab_ring,
            };
            (target, peers, remote_net, local_net, gateway)
        } else {
            let Some(port_b) = &self.port_b else {
                bail!(BadInput, "linerate tunnels needs the gateway: --lab --scenario vpn-gateway, or port B with --port-b IF --ip-b ADDR/LEN --gw-b ADDR");
            };
            if self.lab_ring.is_some() {
                bail!(
                    BadInput,
                    "--lab-ring is for the lab this run builds: leave it out with --port-b"
                );
            }
            let host = values::host_config(
                "b",
                &self.ip_b,
                &self.gw_b,
                &None,
                &linerate_wire::Encap::default(),
            )?;
            let host_b = Net {
                address: host.ip,
                prefix_len: host.prefix_len,
            };
            let gateway = ipsec.gateway.unwrap_or(host.gateway);
            if !host_b.contains(gateway) {
                bail!(BadInput, "the IPsec gateway {gateway} is not on port B's subnet {host_b}: give the gateway's WAN address on that subnet (--gw-b or --ipsec-gateway)");
            }
            if ipsec.psk_file.is_none() {
                bail!(BadInput, "linerate tunnels needs --psk-file FILE: the pre-shared key, in a file only its owner can read (chmod 600)");
            }
            let Some(remote_net) = ipsec.remote_net else {
                bail!(BadInput, "linerate tunnels needs --remote-net CIDR: the network behind linerate, which the gateway's tunnels protect; each peer gets its own slice of it (e.g. 198.19.128.0/17)");
            };
            let local_net = match (ipsec.local_net, &self.ip_a) {
                (Some(net), _) => net,
                (None, Some(ip_a)) => Net::parse(ip_a, "--ip-a")?,
                (None, None) => bail!(BadInput, "linerate tunnels needs the gateway's protected LAN: --local-net CIDR (or --ip-a ADDR/LEN, port A's subnet)"),
            };
            let peers = match &self.peer_addrs {
                Some(text) => peer_addresses(text, count)?,
                None => peer_addresses(&host_b.address.to_string(), count)?,
            };
            if let Some(p) = peers.iter().find(|&&p| !host_b.contains(p)) {
                bail!(BadInput, "peer address {p} is outside port B's subnet {host_b} (from --ip-b upward, or --peer-addrs): the gateway reaches its peers on that subnet, and linerate adds no route for others; give a smaller --count, --peer-addrs on the subnet, or a wider --ip-b prefix");
            }
            let (first, last) = host_b.range();
            if let Some(p) = peers
                .iter()
                .find(|&&p| host_b.prefix_len < 31 && (p == first || p == last))
            {
                bail!(BadInput, "peer address {p} is the network or broadcast address of port B's subnet {host_b}: give a smaller --count or --peer-addrs that leave it out");
            }
            if peers.contains(&gateway) {
                bail!(BadInput, "the peer addresses include the gateway's own address {gateway}: give --peer-addrs that leave it out");
            }
            let target = TunnelsTarget::External {
                port_b: port_b.clone(),
                host_b,
                gw_b: host.gateway,
            };
            (target, peers, remote_net, local_net, gateway)
        };
        let traffic = if !self.traffic {
            None
        } else if lab {
            Some(TrafficPlan {
                rate: traffic_rate,
                port_a: None,
            })
        } else {
            let (Some(port_a), Some(_), Some(_)) = (&self.port_a, &self.ip_a, &self.gw_a) else {
                bail!(BadInput, "--traffic needs port A, where the gateway delivers the test frames: --port-a IF --ip-a ADDR/LEN --gw-a ADDR");
            };
            let host = values::host_config(
                "a",
                &self.ip_a,
                &self.gw_a,
                &None,
                &linerate_wire::Encap::default(),
            )?;
            if !local_net.contains(host.ip) {
                bail!(BadInput, "--ip-a {} is outside the gateway's LAN {local_net} (--local-net): the tunnels carry only frames to that network; give port A an address in it", host.ip);
            }
            if self.port_b.as_deref() == Some(port_a.as_str()) {
                bail!(BadInput, "--port-a and --port-b are both {port_a}: the frames go in at port B and come out of the gateway at port A, two interfaces");
            }
            Some(TrafficPlan {
                rate: traffic_rate,
                port_a: Some(PortA {
                    netns: None,
                    ifname: port_a.clone(),
                    host: Net {
                        address: host.ip,
                        prefix_len: host.prefix_len,
                    },
                    gateway: host.gateway,
                }),
            })
        };
        if let Some(p) = peers
            .iter()
            .copied()
            .chain([gateway])
            .find(|&p| remote_net.contains(p))
        {
            bail!(BadInput, "--remote-net {remote_net} holds the outer address {p}: the network behind the peers must be another one than their WAN addresses");
        }
        if remote_net.contains(local_net.range().0) || local_net.contains(remote_net.range().0) {
            bail!(BadInput, "--remote-net {remote_net} and the gateway's LAN {local_net} overlap: the tunnels join two different networks");
        }
        let slice_prefix = slice_prefix(remote_net, count, "--remote-net")?;
        Ok(TunnelsPlan {
            target,
            ipsec,
            peers,
            remote_net,
            slice_prefix,
            local_net,
            rate,
            window: self.window as usize,
            hold,
            traffic,
            capacity,
            json: self.json.clone(),
            record: self.record.plan(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::Command;

    fn plan(args: &str) -> Result<TunnelsPlan> {
        let argv = format!("linerate tunnels --no-db {args}");
        let Command::Tunnels(t) = crate::plans::parse(&argv)? else {
            unreachable!()
        };
        t.plan()
    }

    const PORT: &str = "--port-b pb --ip-b 203.0.113.2/24 --gw-b 203.0.113.1 --psk-file /k --remote-net 10.1.0.0/16 --local-net 192.168.0.0/24";

    #[test]
    fn the_lab_hands_over_the_peers_and_networks() {
        let p = plan("--lab --scenario vpn-gateway --count 200").unwrap();
        assert_eq!(p.peers.len(), 200);
        assert_eq!(p.peers[0], VPN_FIRST_PEER);
        assert_eq!(p.remote_net.to_string(), "198.19.128.0/17");
        assert_eq!(p.slice_prefix, 25);
        assert_eq!(p.local_net.to_string(), "198.18.0.0/24");
        assert_eq!((p.window, p.rate), (64, None));
        let p = plan("--scenario vpn-gateway:aes256gcm16 --count 3 --peer-addrs 198.19.0.2 --rate 50/s --window 2 --hold 2s").unwrap();
        assert_eq!(p.peers[2].to_string(), "198.19.0.4");
        assert_eq!(p.rate, Some(50.0));
        assert_eq!(p.hold, std::time::Duration::from_secs(2));
    }

    #[test]
    fn named_ports_give_peers_from_ip_b_upward() {
        let p = plan(&format!("{PORT} --count 100")).unwrap();
        assert_eq!(p.peers[0].to_string(), "203.0.113.2");
        assert_eq!(p.peers[99].to_string(), "203.0.113.101");
        assert_eq!(p.slice_prefix, 23);
        let TunnelsTarget::External { host_b, .. } = p.target else {
            panic!()
        };
        assert_eq!(host_b.to_string(), "203.0.113.0/24");
    }

    #[test]
    fn traffic_takes_port_a_from_the_lab_or_the_options() {
        let p = plan("--lab --scenario vpn-gateway --count 5 --traffic").unwrap();
        let t = p.traffic.unwrap();
        assert_eq!((t.rate, t.port_a), (1.0, None));
        assert_eq!(p.hold, std::time::Duration::from_secs(2));
        let p =
            plan("--lab --scenario vpn-gateway --count 5 --traffic --traffic-rate 100/s --hold 5s")
                .unwrap();
        assert_eq!(p.traffic.unwrap().rate, 100.0);
        assert_eq!(p.hold, std::time::Duration::from_secs(5));
        let p = plan(&format!(
            "{PORT} --count 5 --traffic --port-a pa --ip-a 192.168.0.2/24 --gw-a 192.168.0.1"
        ))
        .unwrap();
        let a = p.traffic.unwrap().port_a.unwrap();
        assert_eq!(a.ifname, "pa");
        assert_eq!(a.host.to_string(), "192.168.0.0/24");
        assert_eq!(a.host.address.to_string(), "192.168.0.2");
        assert_eq!(a.gateway.to_string(), "192.168.0.1");
        assert_eq!(
            plan("--lab --scenario vpn-gateway --count 5").unwrap().hold,
            std::time::Duration::ZERO
        );
    }

    #[test]
    fn capacity_steps_up_to_the_count_or_the_largest_count() {
        let p = plan("--lab --scenario vpn-gateway --capacity --count 300").unwrap();
        let c = p.capacity.unwrap();
        assert_eq!((c.step, c.max_loss_pct), (100, 1.0));
        assert_eq!(p.peers.len(), 300);
        assert_eq!(p.hold, std::time::Duration::from_secs(2));
        // No --count: the ceiling is the most linerate tunnels brings up.
        let p = plan("--lab --scenario vpn-gateway --capacity --step 500").unwrap();
        assert_eq!(p.peers.len(), MAX_TUNNELS);
        assert_eq!(p.capacity.unwrap().step, 500);
        let p = plan("--lab --scenario vpn-gateway --capacity --step 20 --count 100 --traffic --max-loss 0.5% --hold 3s").unwrap();
        assert_eq!(p.capacity.unwrap().max_loss_pct, 0.5);
        assert_eq!(p.hold, std::time::Duration::from_secs(3));
        assert!(plan("--lab --scenario vpn-gateway --count 5")
            .unwrap()
            .capacity
            .is_none());
    }

    #[test]
    fn rekey_and_identity_templates_reach_the_plan() {
        let p = plan("--lab --scenario vpn-gateway --count 5 --traffic --hold 4s --rekey 2s --ipsec-id @peer{n}.vpn.example").unwrap();
        assert_eq!(p.ipsec.rekey, Some(Duration::from_secs(2)));
        assert_eq!(
            p.ipsec.local_id,
            Some(linerate_ike::Identity::Fqdn("peer{n}.vpn.example".into()))
        );
        // A hold of exactly one period rekeys every tunnel once.
        assert!(plan("--lab --scenario vpn-gateway --count 1 --hold 2s --rekey 2s").is_ok());
    }

    #[test]
    fn bad_input_is_refused_in_one_line() {
        for (args, says) in [
            ("--lab --scenario vpn-gateway --count 0", "1 to 10,000"),
            ("--lab --scenario vpn-gateway --count 10001", "1 to 10,000"),
            ("--lab --scenario vpn-gateway --count 2 --rate 0/s", "above 0"),
            ("--lab --scenario vpn-gateway --count 2 --rate -3", "above 0"),
            ("--lab --scenario vpn-gateway --count 2 --rate fast", "not an attempt rate"),
            ("--lab --scenario vpn-gateway --count 2 --window 0", "--window"),
            ("--lab --count 2", "--scenario vpn-gateway"),
            ("--scenario acl:1 --count 2", "no VPN gateway"),
            ("--scenario vpn-gateway,vpn-gateway --count 2", "one scenario"),
            ("--scenario vpn-gateway --count 2 --esp aes256gcm16", "vpn-gateway:aes256gcm16"),
            ("--scenario vpn-gateway --count 2 --peer-addrs 10.0.0.1", "10.0.0.1"),
            ("--scenario vpn-gateway --count 2 --remote-net 10.0.0.0/8", "outside"),
            ("--scenario vpn-gateway --count 300 --remote-net 198.19.1.0/24", "too few for 300"),
            ("--scenario vpn-gateway --count 2 --direction encrypt", "--direction"),
            ("--scenario vpn-gateway --count 2 --rekey 2s", "--hold is 0s: give --hold 2s or more"),
            ("--scenario vpn-gateway --count 2 --rekey 2s --hold 1s", "--hold is 1s"),
            ("--scenario vpn-gateway --count 2 --rekey 2s --hold 10s --capacity", "leave --rekey out with --capacity"),
            ("--scenario vpn-gateway --count 2 --ipsec-id @peer{i}.example", "{i} is no placeholder"),
            ("--scenario vpn-gateway --count 2 --hold soon", "--hold"),
            ("--count 2", "--port-b"),
            (&format!("{PORT} --count 300"), "203.0.114.0 is outside port B's subnet"),
            (&format!("{PORT} --count 254"), "203.0.113.255 is the network or broadcast"),
            (&format!("{PORT} --count 2 --peer-addrs 203.0.114.5"), "203.0.114.5"),
            (&format!("{PORT} --count 2 --peer-addrs 203.0.113.1-203.0.113.9"), "gateway's own address"),
            (&format!("{PORT} --count 2 --ipsec-gateway 10.9.9.9"), "not on port B's subnet"),
            (&format!("{PORT} --count 70000"), "1 to 10,000"),
            ("--port-b pb --ip-b 203.0.113.2/24 --gw-b 203.0.113.1 --remote-net 10.1.0.0/16 --local-net 192.168.0.0/24 --count 2", "--psk-file"),
            ("--port-b pb --ip-b 203.0.113.2/24 --gw-b 203.0.113.1 --psk-file /k --local-net 192.168.0.0/24 --count 2", "--remote-net"),
            ("--port-b pb --ip-b 203.0.113.2/24 --gw-b 203.0.113.1 --psk-file /k --remote-net 10.1.0.0/16 --count 2", "--local-net"),
            ("--port-b pb --ip-b 203.0.113.2/24 --gw-b 203.0.113.1 --psk-file /k --remote-net 203.0.113.0/25 --local-net 192.168.0.0/24 --count 2", "holds the outer address"),
            (&format!("{PORT} --count 2 --traffic"), "--traffic needs port A"),
            (&format!("{PORT} --count 2 --traffic --port-a pa --ip-a 192.168.0.2/24"), "--traffic needs port A"),
            (&format!("{PORT} --count 2 --port-a pa"), "--port-a is for --traffic"),
            (&format!("{PORT} --count 2 --gw-a 192.168.0.1"), "--gw-a is for --traffic"),
            ("--lab --scenario vpn-gateway --count 2 --traffic-rate 5/s", "--traffic-rate is for --traffic"),
            ("--lab --scenario vpn-gateway --count 2 --traffic --traffic-rate 0", "1 to 1000"),
            ("--lab --scenario vpn-gateway --count 2 --traffic --traffic-rate lots", "not a frame rate"),
            (&format!("{PORT} --count 2 --traffic --port-a pa --ip-a 10.0.0.2/24 --gw-a 10.0.0.1"), "outside the gateway's LAN"),
            (&format!("{PORT} --count 2 --traffic --port-a pb --ip-a 192.168.0.2/24 --gw-a 192.168.0.1"), "two interfaces"),
            ("--lab --scenario vpn-gateway", "needs --count N"),
            ("--lab --scenario vpn-gateway --capacity --step 0 --count 10", "--step 0"),
            ("--lab --scenario vpn-gateway --capacity --step 20 --count 10", "above --count 10"),
            ("--lab --scenario vpn-gateway --capacity --count 20000", "1 to 10,000"),
            ("--lab --scenario vpn-gateway --step 5 --count 10", "--step is for --capacity"),
            ("--lab --scenario vpn-gateway --max-loss 1 --count 10", "--max-loss is for --capacity"),
            ("--lab --scenario vpn-gateway --capacity --max-loss 1 --count 10", "add --traffic"),
            ("--lab --scenario vpn-gateway --capacity --traffic --max-loss 100 --count 10", "below 100"),
            ("--lab --scenario vpn-gateway --capacity --traffic --max-loss some --count 10", "--max-loss some"),
            ("--lab --scenario vpn-gateway --capacity --traffic --hold 1s --count 10", "fewer than 2 frames"),
            (&format!("{PORT} --capacity --step 10"), "outside port B's subnet"),
        ] {
            let e = plan(args).unwrap_err();
            assert_eq!(e.kind(), linerate_session::Kind::BadInput, "{args}: {e:?}");
            let line = linerate_session::exit::one_line(&e);
            assert!(line.contains(says), "{args}: {line}");
            assert!(!line.contains('\n'), "{args}: {line}");
        }
    }
}
