//! Where lost frames were lost, read from the kernel's own counters.
//!
//! A trial's loss is split into terms that add up to it exactly
//! ([`linerate_results::LossWhere`]): frames the generator never handed
//! over, frames the tester's sending port refused, frames dropped at the
//! DUT's input, frames dropped inside the DUT, frames dropped at the
//! tester's receiving port, and the rest no counter explains.
//!
//! The counters, snapshot before and after each trial:
//! - the tester ports' interface statistics (`/proc/net/dev` of their
//!   namespace): a sending port's `tx dropped`, a receiving port's `rx
//!   dropped` (which includes missed frames);
//! - for the xdp engine, the kernel's XDP transmit tracepoints
//!   (linerate-bpf `tx_watch`), reported by the transmitter;
//! - when the DUT is a Linux network namespace on this machine whose
//!   interfaces are the peers of the tester's veth ports (the lab, or a
//!   router a user built with `ip netns` and veth pairs), the DUT's own
//!   counters: its IP statistics (received, forwarded) and its interfaces'
//!   queueing disciplines' drops. Found by [`DutView::discover`].
//!
//! On a veth pair there is no wire: what the sending veth "transmits" goes
//! straight onto the peer's receive ring or backlog, and a full one is
//! reported as the *sender's* `tx dropped` (and, for XDP frames, as the
//! driver's ring being full). For a veth port those drops are the DUT's
//! full input queue, as a real NIC's `rx_missed` would be; for a real NIC
//! they are the tester's own full transmit ring. Likewise the DUT's
//! egress veth's `tx dropped` is the tester's receiving port's full ring.

use crate::generator::Sent;
use crate::EngineError;
use linerate_port::netns::maybe_in_netns;
use linerate_port::PortError;
use linerate_results::LossWhere;
use linerate_wire::MacAddr;

/// A few counters of one interface.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkCounters {
    pub rx_packets: u64,
    /// Dropped on receive, missed frames included (as /proc/net/dev adds them).
    pub rx_dropped: u64,
    pub tx_packets: u64,
    pub tx_dropped: u64,
}

impl LinkCounters {
    /// `self - before`, per counter (0 if a counter went backwards).
    pub fn since(&self, before: &LinkCounters) -> LinkCounters {
        LinkCounters {
            rx_packets: self.rx_packets.saturating_sub(before.rx_packets),
            rx_dropped: self.rx_dropped.saturating_sub(before.rx_dropped),
            tx_packets: self.tx_packets.saturating_sub(before.tx_packets),
            tx_dropped: self.tx_dropped.saturating_sub(before.tx_dropped),
        }
    }
}

/// Parses one interface's line of `/proc/net/dev`.
pub fn parse_proc_net_dev(text: &str, ifname: &str) -> Option<LinkCounters> {
    text.lines().find_map(|line| {
        let (name, rest) = line.split_once(':')?;
        if name.trim() != ifname {
            return None;
        }
        let v: Vec<u64> = rest
            .split_whitespace()
            .map(|f| f.parse().unwrap_or(0))
            .collect();
        // rx: bytes packets errs drop fifo frame compressed multicast;
        // tx: bytes packets errs drop fifo colls carrier compressed.
        (v.len() >= 16).then(|| LinkCounters {
            rx_packets: v[1],
            rx_dropped: v[3],
            tx_packets: v[9],
            tx_dropped: v[11],
        })
    })
}

/// Reads `ifname`'s counters in namespace `netns` (None: this one).
pub fn link_counters(netns: Option<&str>, ifname: &str) -> Result<LinkCounters, EngineError> {
    let text = maybe_in_netns(netns, || {
        // thread-self: the namespace this thread is in, not the process's.
        std::fs::read_to_string("/proc/thread-self/net/dev")
            .map_err(|e| PortError::io("reading interface statistics", ifname, e))
    })?;
    parse_proc_net_dev(&text, ifname)
        .ok_or_else(|| PortError::NoSuchInterface(ifname.to_string()).into())
}

/// What `ip -details link show` says of one interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkKind {
    pub ifindex: u32,
    /// "veth", "vlan", ... ; empty for a plain NIC.
    pub kind: String,
    /// The veth peer's interface index (in `peer_netnsid`'s namespace).
    pub peer_ifindex: Option<u32>,
}

impl LinkKind {
    pub fn is_veth(&self) -> bool {
        self.kind == "veth"
    }
}

/// `ip [-n netns] -j args...`'s JSON; None when it fails.
fn ip_json(netns: Option<&str>, args: &[&str]) -> Option<serde_json::Value> {
    let mut full = vec!["-j"];
    full.extend_from_slice(args);
    let out = linerate_helper::ip_query(netns, &full).ok()?;
    serde_json::from_str(&out).ok()
}

/// What is wrong with tester port `ifname` in `netns` for sending test
/// frames, from `ip -details link show`: "the loopback interface", "a
/// bridge", "administratively down", "up but without carrier"; None when
/// it looks usable (or `ip` cannot tell: no such interface, say).
pub fn port_problem(netns: Option<&str>, ifname: &str) -> Option<String> {
    let v = ip_json(netns, &["-details", "link", "show", "dev", ifname])?;
    let l = v.get(0)?;
    let flags: Vec<&str> = l
        .get("flags")
        .and_then(|f| f.as_array())
        .map(|f| f.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    let kind = l.pointer("/linkinfo/info_kind").and_then(|k| k.as_str());
    if flags.contains(&"LOOPBACK") {
        Some("the loopback interface".into())
    } else if kind == Some("bridge") {
        Some("a bridge (name the bridge port that faces the DUT)".into())
    } else if !flags.contains(&"UP") {
        Some(format!(
            "administratively down ('ip link set dev {ifname} up')"
        ))
    } else if flags.contains(&"NO-CARRIER") {
        Some("up but without carrier (its cable, or its veth peer, is down)".into())
    } else {
        None
    }
}

/// The kind of `ifname` in `netns` (None when `ip` cannot tell).
pub fn link_kind(netns: Option<&str>, ifname: &str) -> Option<LinkKind> {
    let v = ip_json(netns, &["-details", "link", "show", "dev", ifname])?;
    let l = v.get(0)?;
    Some(LinkKind {
        ifindex: l.get("ifindex")?.as_u64()? as u32,
        kind: l
            .pointer("/linkinfo/info_kind")
            .and_then(|k| k.as_str())
            .unwrap_or("")
            .to_string(),
        // A peer in another namespace is named by its index there
        // (`link_index`); one in the same namespace by its name (`link`).
        peer_ifindex: match l.get("link_index").and_then(|i| i.as_u64()) {
            Some(i) => Some(i as u32),
            None => l
                .get("link")
                .and_then(|n| n.as_str())
                .and_then(|peer| ifindex_of(netns, peer)),
        },
    })
}

/// The index of interface `ifname` in namespace `netns`.
fn ifindex_of(netns: Option<&str>, ifname: &str) -> Option<u32> {
    let v = ip_json(netns, &["link", "show", "dev", ifname])?;
    Some(v.get(0)?.get("ifindex")?.as_u64()? as u32)
}

/// A DUT that is a Linux network namespace on this machine: the namespace
/// and the interfaces that face the tester's ports A (ingress) and B
/// (egress).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DutView {
    pub netns: String,
    pub ingress: String,
    pub egress: String,
    pub ipv6: bool,
}

/// The DUT's counters at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DutSnapshot {
    /// The interface facing port B (its transmit drops are port B's full ring).
    pub egress: LinkCounters,
    /// IP packets received (all interfaces), ICMP messages excluded.
    pub ip_in: u64,
    /// IP packets forwarded and sent (past the DUT's forwarding policy).
    pub ip_forwarded: u64,
    /// Drops of every queueing discipline (and tc filter) on the two
    /// interfaces.
    pub qdisc_drops: u64,
    /// The lab's NIC queue on the interface facing port A (a deep lab's
    /// input ring, linerate-bpf `nic_queue`), when it has one.
    pub ingress_queue: Option<linerate_bpf::nic_queue::QueueCounts>,
}

impl DutView {
    /// Finds the namespace whose interfaces are the veth peers of both
    /// tester ports (each peer's own peer is the tester port), among the
    /// named namespaces (/run/netns). None when the ports are not veths,
    /// or their peers are not in one namespace linerate can enter.
    /// `gateways` are the MACs the DUT's interfaces answered ARP with: the
    /// peers must have them (interface indexes repeat across namespaces).
    pub fn discover(
        a: (&Option<String>, &str),
        b: (&Option<String>, &str),
        gateways: (MacAddr, MacAddr),
        ipv6: bool,
    ) -> Option<DutView> {
        let ka = link_kind(a.0.as_deref(), a.1)?;
        let kb = link_kind(b.0.as_deref(), b.1)?;
        if !ka.is_veth() || !kb.is_veth() {
            return None;
        }
        let (pa, pb) = (ka.peer_ifindex?, kb.peer_ifindex?);
        // The tester's own namespaces are not the DUT (a veth pair inside
        // one namespace would look like its own peer).
        let inode = |ns: &Option<String>| {
            use std::os::unix::fs::MetadataExt;
            let path = match ns {
                Some(n) => format!("/run/netns/{n}"),
                None => "/proc/thread-self/ns/net".to_string(),
            };
            std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
        };
        let tester = [inode(a.0), inode(b.0)];
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/run/netns").ok()?.flatten() {
            let ns = entry.file_name().to_string_lossy().to_string();
            if tester.contains(&inode(&Some(ns.clone()))) {
                continue;
            }
            let Some(links) = ip_json(Some(&ns), &["link", "show"]) else {
                continue;
            };
            let peer = |index: u32, back: u32, mac: MacAddr| {
                links.as_array()?.iter().find_map(|l| {
                    let me = l.get("ifindex")?.as_u64()? as u32;
                    let link = l.get("link_index")?.as_u64()? as u32;
                    let addr = l.get("address")?.as_str()?.parse::<MacAddr>().ok()?;
                    (me == index && link == back && addr == mac)
                        .then(|| l.get("ifname")?.as_str().map(str::to_string))
                        .flatten()
                })
            };
            if let (Some(ingress), Some(egress)) = (
                peer(pa, ka.ifindex, gateways.0),
                peer(pb, kb.ifindex, gateways.1),
            ) {
                found.push(DutView {
                    netns: ns,
                    ingress,
                    egress,
                    ipv6,
                });
            }
        }
        // Interface indexes repeat across namespaces: only a unique match
        // is trusted.
        (found.len() == 1).then(|| found.remove(0))
    }

    /// Reads the DUT's counters now.
    pub fn snapshot(&self) -> Result<DutSnapshot, EngineError> {
        let ns = Some(self.netns.as_str());
        let egress = link_counters(ns, &self.egress)?;
        let snmp = maybe_in_netns(ns, || {
            let file = if self.ipv6 { "snmp6" } else { "snmp" };
            std::fs::read_to_string(format!("/proc/thread-self/net/{file}"))
                .map_err(|e| PortError::io("reading IP statistics", &self.netns, e))
        })?;
        // Forwarded = sent out but not made here. Kernels since 6.3
        // count ForwDatagrams on input (before the forward hook's policy)
        // and have OutTransmits; older ones count it on output.
        let (ip_in, ip_forwarded) = if self.ipv6 {
            let get = |k: &str| snmp6_value(&snmp, k);
            let out = match get("Ip6OutTransmits") {
                Some(t) => t.saturating_sub(get("Ip6OutRequests").unwrap_or(0)),
                None => get("Ip6OutForwDatagrams").unwrap_or(0),
            };
            let icmp = get("Icmp6InMsgs").unwrap_or(0);
            (get("Ip6InReceives").unwrap_or(0).saturating_sub(icmp), out)
        } else {
            let get = |t: &str, k: &str| snmp_value(&snmp, t, k);
            let out = match get("Ip", "OutTransmits") {
                Some(t) => t.saturating_sub(get("Ip", "OutRequests").unwrap_or(0)),
                None => get("Ip", "ForwDatagrams").unwrap_or(0),
            };
            let icmp = get("Icmp", "InMsgs").unwrap_or(0);
            (
                get("Ip", "InReceives").unwrap_or(0).saturating_sub(icmp),
                out,
            )
        };
        let qdisc_drops =
            qdisc_drops(&self.netns, &self.ingress) + qdisc_drops(&self.netns, &self.egress);
        let ingress_queue = maybe_in_netns(ns, || {
            let index = linerate_port::link::ifindex(&self.ingress)?;
            Ok(linerate_bpf::nic_queue::counts(index as i32))
        })?;
        Ok(DutSnapshot {
            egress,
            ip_in,
            ip_forwarded,
            qdisc_drops,
            ingress_queue,
        })
    }
}

/// The counters of both tester ports (and of the DUT, when it can be
/// read) at one moment. A counter that could not be read is None: its term
/// then goes to the rest rather than losing the trial.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub a: Option<LinkCounters>,
    pub b: Option<LinkCounters>,
    pub dut: Option<DutSnapshot>,
}

/// How to read the counters around a trial: the tester ports, whether
/// port A is a veth (so its refusals are the DUT's full input), and the
/// DUT when it is a namespace linerate can read.
#[derive(Debug, Clone)]
pub struct Accounting {
    pub a: (Option<String>, String),
    pub b: (Option<String>, String),
    pub a_veth: SendingPort,
    pub dut: Option<DutView>,
}

/// What port A sends into, as far as its kind tells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendingPort {
    /// A NIC (anything but a veth): its transmit drops are its own full
    /// transmit ring, the tester's.
    Nic,
    /// A veth into a DUT: its transmit drops are the DUT's full input.
    VethToDut,
    /// A veth whose peer is port B itself (cabled back to back, no DUT):
    /// its transmit drops are port B's full ring, the tester's receive.
    VethToPortB,
}

impl Accounting {
    /// Looks at the ports once: their kinds, and the DUT behind them.
    pub fn discover(
        a: (Option<String>, String),
        b: (Option<String>, String),
        gateways: Option<(MacAddr, MacAddr)>,
        ipv6: bool,
    ) -> Accounting {
        let ka = link_kind(a.0.as_deref(), &a.1).filter(|k| k.is_veth());
        let kb = link_kind(b.0.as_deref(), &b.1).filter(|k| k.is_veth());
        let a_veth = match (ka, kb) {
            (None, _) => SendingPort::Nic,
            // Each the other's peer (indexes repeat across namespaces, so
            // both directions must match).
            (Some(ka), Some(kb))
                if ka.peer_ifindex == Some(kb.ifindex) && kb.peer_ifindex == Some(ka.ifindex) =>
            {
                SendingPort::VethToPortB
            }
            (Some(_), _) => SendingPort::VethToDut,
        };
        let dut = gateways.and_then(|g| DutView::discover((&a.0, &a.1), (&b.0, &b.1), g, ipv6));
        Accounting { a, b, a_veth, dut }
    }

    /// Reads every counter now.
    pub fn read(&self) -> Counters {
        Counters {
            a: link_counters(self.a.0.as_deref(), &self.a.1).ok(),
            b: link_counters(self.b.0.as_deref(), &self.b.1).ok(),
            dut: self.dut.as_ref().and_then(|d| d.snapshot().ok()),
        }
    }
}

/// What one direction of a trial knows of its own frames.
#[derive(Debug, Clone, Copy, Default)]
pub struct OwnCounts {
    /// Frames lost (intended - received).
    pub lost: u64,
    /// Frames the generator never handed to the kernel.
    pub not_sent: u64,
    /// Frames the kernel refused outright.
    pub refused: u64,
    /// Frames the xdp engine's driver could not queue (ring full).
    pub ring_full: u64,
    /// Frames the receiver's own socket ring dropped.
    pub socket_rx_drops: u64,
}

impl OwnCounts {
    /// A direction's own counts: `lost` of `total` scheduled frames, what
    /// the generator reported in `sent`, and the receiver's socket drops.
    pub fn new(lost: u64, total: u64, sent: &Sent, socket_rx_drops: u64) -> OwnCounts {
        OwnCounts {
            lost,
            not_sent: total.saturating_sub(sent.handed),
            refused: sent.refused,
            ring_full: sent.ring_full,
            socket_rx_drops,
        }
    }

    /// The generator's terms scaled by `share` (a drop test's legitimate
    /// class is about half of every frame the generator handled).
    pub fn share(self, share: f64) -> OwnCounts {
        let part = |n: u64| (n as f64 * share).round() as u64;
        OwnCounts {
            not_sent: part(self.not_sent),
            refused: part(self.refused),
            ring_full: part(self.ring_full),
            ..self
        }
    }
}

/// Splits a trial's loss into where it happened (see the module's doc).
/// `before`/`after` are the counters around the trial, when they apply to
/// this trial's frames alone (one direction, one traffic class). Returns
/// the breakdown and how many frames counted as sent did not leave the
/// tester after all (a NIC's refusals, read from its statistics).
pub fn attribute(
    own: OwnCounts,
    a_veth: SendingPort,
    around: Option<(&Counters, &Counters)>,
) -> (LossWhere, u64) {
    let delta = |f: fn(&Counters) -> Option<LinkCounters>| {
        around.and_then(|(b, a)| Some(f(a)?.since(&f(b)?)))
    };
    let a = delta(|c| c.a);
    let b = delta(|c| c.b);
    let dut = around.and_then(|(b, a)| Some((b.dut?, a.dut?)));
    let a_dropped = a.map_or(0, |a| a.tx_dropped);
    // A veth's "transmit" drops are its peer's full input (for XDP frames
    // the driver reports them as a full ring too, and the interface
    // statistics may count them as well: the larger of the two is every
    // such frame once). A NIC's are its own full transmit queue.
    // A deep lab's NIC queue on the DUT's input drops what it cannot hold.
    let input_queue = dut.map_or(0, |(b, a)| match (a.ingress_queue, b.ingress_queue) {
        (Some(after), Some(before)) => after.dropped_since(&before),
        _ => 0,
    });
    let (tx_refused, dut_input, not_left, b_ring) = match a_veth {
        SendingPort::VethToDut => (
            own.refused,
            Some(a_dropped.max(own.ring_full) + input_queue),
            0,
            0,
        ),
        // Port B's full ring, also counted as port B's rx dropped.
        SendingPort::VethToPortB => (own.refused, None, 0, a_dropped.max(own.ring_full)),
        SendingPort::Nic => {
            let not_left = own.ring_full + a_dropped;
            (own.refused + not_left, None, not_left, 0)
        }
    };
    // The DUT's egress veth's transmit drops are the tester's receiving
    // port's full ring or backlog; a NIC counts its own as rx dropped or
    // missed. A veth counts a frame its peer's backlog refused on both
    // ends (the sender's tx dropped, the receiver's rx dropped), and one
    // its peer's ring refused on the sender's: the larger is every such
    // frame once.
    let b_dropped = b.map_or(0, |b| b.rx_dropped).max(b_ring);
    let tester_rx = own.socket_rx_drops
        + match dut {
            Some((before, after)) => b_dropped.max(after.egress.since(&before.egress).tx_dropped),
            None => b_dropped,
        };
    // Inside the DUT: IP packets received but not forwarded (policy, no
    // route, TTL, bad header) and the drops of its queueing disciplines
    // (policers, shapers).
    let dut_internal = dut.map(|(b, a)| {
        let received = a.ip_in.saturating_sub(b.ip_in);
        let forwarded = a.ip_forwarded.saturating_sub(b.ip_forwarded);
        received.saturating_sub(forwarded) + a.qdisc_drops.saturating_sub(b.qdisc_drops)
    });
    let dut_input = if around.is_some() { dut_input } else { None };
    (
        LossWhere::from_terms(
            own.lost,
            own.not_sent,
            tx_refused,
            tester_rx,
            dut_input,
            dut_internal,
        ),
        not_left,
    )
}

/// A value of /proc/net/snmp: a header line and a value line per table.
pub fn snmp_value(text: &str, table: &str, key: &str) -> Option<u64> {
    let prefix = format!("{table}:");
    let mut lines = text.lines().filter(|l| l.starts_with(&prefix));
    let header = lines.next()?;
    let values = lines.next()?;
    let i = header.split_whitespace().position(|k| k == key)?;
    values.split_whitespace().nth(i)?.parse().ok()
}

/// A value of /proc/net/snmp6: one "key value" pair per line.
pub fn snmp6_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        (f.next()? == key).then(|| f.next()?.parse().ok()).flatten()
    })
}

/// The drops of every qdisc on `dev` (root, children, ingress/clsact),
/// as `tc -s` reports them; 0 when tc cannot tell.
fn qdisc_drops(netns: &str, dev: &str) -> u64 {
    let out = linerate_helper::ip_query(
        None,
        &[
            "netns", "exec", netns, "tc", "-s", "-j", "qdisc", "show", "dev", dev,
        ],
    );
    let Ok(out) = out else { return 0 };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&out) else {
        return 0;
    };
    v.as_array()
        .map(|qs| {
            qs.iter()
                .filter_map(|q| q.get("drops").and_then(|d| d.as_u64()))
                .sum()
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_net_dev() {
        let text = "Inter-|   Receive                                                |  Transmit\n face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n    ta: 52642000  822542    0    7    0     0          0         0      600      13    0    9    0     0       0          0\n";
        let c = parse_proc_net_dev(text, "ta").expect("ta");
        assert_eq!(
            c,
            LinkCounters {
                rx_packets: 822542,
                rx_dropped: 7,
                tx_packets: 13,
                tx_dropped: 9
            }
        );
        assert!(parse_proc_net_dev(text, "t").is_none());
        let later = LinkCounters {
            tx_dropped: 12,
            ..c
        };
        assert_eq!(later.since(&c).tx_dropped, 3);
    }

    fn counters(
        a_tx_dropped: u64,
        b_rx_dropped: u64,
        dut: Option<(u64, u64, u64, u64)>,
    ) -> Counters {
        Counters {
            a: Some(LinkCounters {
                tx_dropped: a_tx_dropped,
                ..LinkCounters::default()
            }),
            b: Some(LinkCounters {
                rx_dropped: b_rx_dropped,
                ..LinkCounters::default()
            }),
            dut: dut.map(|(ip_in, fwd, qdisc, egress_tx_dropped)| DutSnapshot {
                ip_in,
                ip_forwarded: fwd,
                qdisc_drops: qdisc,
                egress: LinkCounters {
                    tx_dropped: egress_tx_dropped,
                    ..LinkCounters::default()
                },
                ingress_queue: None,
            }),
        }
    }

    #[test]
    fn loss_terms_add_up_on_a_readable_veth_dut() {
        let before = counters(10, 1, Some((100, 100, 5, 0)));
        // 7 full input, 20 policy, 3 shaper, 2 tester rx ring, 1 socket.
        let after = counters(17, 1, Some((1100, 1080, 8, 2)));
        let own = OwnCounts {
            lost: 40,
            not_sent: 5,
            refused: 2,
            ring_full: 0,
            socket_rx_drops: 1,
        };
        let (w, not_left) = attribute(own, SendingPort::VethToDut, Some((&before, &after)));
        assert_eq!(not_left, 0);
        assert_eq!(w.not_sent, 5);
        assert_eq!(w.tx_refused, 2);
        assert_eq!(w.dut_input, Some(7));
        assert_eq!(w.dut_internal, Some(23));
        assert_eq!(w.tester_rx, 3);
        assert_eq!(w.rest, 0);
        assert!(w.dut_read);
        assert_eq!(w.tester(), 10);
    }

    #[test]
    fn a_nic_s_transmit_drops_are_the_tester_s_and_the_rest_is_the_dut_s_or_the_link_s() {
        let before = counters(0, 0, None);
        let after = counters(4, 6, None);
        let own = OwnCounts {
            lost: 30,
            ring_full: 3,
            ..OwnCounts::default()
        };
        let (w, not_left) = attribute(own, SendingPort::Nic, Some((&before, &after)));
        assert_eq!(not_left, 7);
        assert_eq!(w.tx_refused, 7);
        assert_eq!(w.tester_rx, 6);
        assert_eq!((w.dut_input, w.dut_internal), (None, None));
        assert_eq!(w.rest, 17);
        assert!(!w.dut_read);
        // Without counters the tester's own terms still count.
        let (w, _) = attribute(own, SendingPort::Nic, None);
        assert_eq!((w.tx_refused, w.rest), (3, 27));
    }

    #[test]
    fn a_veth_s_ring_full_frames_are_counted_once() {
        let before = counters(0, 0, None);
        for a_dropped in [0, 9] {
            let after = counters(a_dropped, 0, None);
            let own = OwnCounts {
                lost: 9,
                ring_full: 9,
                ..OwnCounts::default()
            };
            let (w, _) = attribute(own, SendingPort::VethToDut, Some((&before, &after)));
            assert_eq!((w.dut_input, w.rest), (Some(9), 0));
        }
    }

    #[test]
    fn a_deep_lab_s_queue_drops_are_the_dut_input_and_backlog_drops_count_once() {
        use linerate_bpf::nic_queue::QueueCounts;
        let queue = |queued, delivered| QueueCounts { queued, delivered };
        let mut before = counters(0, 0, Some((0, 0, 0, 0)));
        let mut after = counters(0, 5, Some((990, 990, 0, 5)));
        before.dut.as_mut().unwrap().ingress_queue = Some(queue(100, 100));
        after.dut.as_mut().unwrap().ingress_queue = Some(queue(1100, 1090));
        // 10 dropped by the NIC queue, 5 by port B's backlog (on both ends).
        let own = OwnCounts {
            lost: 15,
            ..OwnCounts::default()
        };
        let (w, _) = attribute(own, SendingPort::VethToDut, Some((&before, &after)));
        assert_eq!((w.dut_input, w.tester_rx, w.rest), (Some(10), 5, 0));
    }

    #[test]
    fn back_to_back_ring_full_frames_are_port_b_s_once() {
        // A veth pair a0-b0: b0's full ring shows as a0's tx dropped and
        // b0's rx dropped; there is no DUT input.
        let before = counters(0, 0, None);
        let after = counters(7, 7, None);
        let own = OwnCounts {
            lost: 7,
            ring_full: 7,
            ..OwnCounts::default()
        };
        let (w, _) = attribute(own, SendingPort::VethToPortB, Some((&before, &after)));
        assert_eq!((w.dut_input, w.tester_rx, w.rest), (None, 7, 0));
    }

    #[test]
    fn reads_snmp_tables() {
        let text = "Ip: Forwarding DefaultTTL InReceives InHdrErrors InAddrErrors ForwDatagrams\nIp: 1 64 1000 2 0 990\nIcmp: InMsgs InErrors\nIcmp: 3 0\n";
        assert_eq!(snmp_value(text, "Ip", "InReceives"), Some(1000));
        assert_eq!(snmp_value(text, "Ip", "ForwDatagrams"), Some(990));
        assert_eq!(snmp_value(text, "Icmp", "InMsgs"), Some(3));
        assert_eq!(snmp_value(text, "Ip", "Nope"), None);
        let six = "Ip6InReceives                   	12\nIp6OutForwDatagrams             	10\n";
        assert_eq!(snmp6_value(six, "Ip6InReceives"), Some(12));
        assert_eq!(snmp6_value(six, "Ip6OutForwDatagrams"), Some(10));
    }
}
