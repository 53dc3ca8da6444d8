//! A veth pair inside network namespaces of its own, both ends up.

use crate::netns::{unique_name, Netns};

/// What the pair looks like: its ends' names, MTU, queue counts and
/// whether IPv6 stays on. Build it, then make it with
/// [`Veth::in_one_netns`] or [`Veth::across_two_netns`].
#[derive(Clone, Debug)]
pub struct Veth {
    ends: [String; 2],
    mtu: Option<u32>,
    queues: Option<usize>,
    ipv6: bool,
}

impl Veth {
    /// Ends `a` and `b` with the kernel's MTU and queue counts and IPv6
    /// off: otherwise the kernel sends router solicitations of its own,
    /// which a test that counts every frame would see.
    pub fn new(a: &str, b: &str) -> Veth {
        Veth {
            ends: [a.to_string(), b.to_string()],
            mtu: None,
            queues: None,
            ipv6: false,
        }
    }

    /// Both ends get this MTU.
    pub fn mtu(mut self, mtu: u32) -> Veth {
        self.mtu = Some(mtu);
        self
    }

    /// Both ends get `n` transmit and `n` receive queues (veth hands a frame
    /// sent on CPU c to the peer's queue c mod n).
    pub fn queues(mut self, n: usize) -> Veth {
        self.queues = Some(n);
        self
    }

    /// Leaves IPv6 on, as the kernel has it.
    pub fn with_ipv6(mut self) -> Veth {
        self.ipv6 = true;
        self
    }

    /// Both ends in one new namespace named `{stem}-{pid}-{n}`.
    pub fn in_one_netns(&self, stem: &str) -> Netns {
        let ns = Netns::add(unique_name(stem));
        self.disable_ipv6_unless_kept(&ns);
        ns.ip(&strs(&self.link_add(None)));
        for end in &self.ends {
            ns.ip(&["link", "set", end, "up"]);
        }
        ns
    }

    /// End `a` in a new namespace `{stem}-{pid}-{n}-a`, end `b` in
    /// `{stem}-{pid}-{n}-b`: two hosts on one wire, each with a stack of
    /// its own. Returned in that order.
    pub fn across_two_netns(&self, stem: &str) -> (Netns, Netns) {
        let stem = unique_name(stem);
        // `a` is a guard before `b` is added: a failing step deletes both.
        let a = Netns::add(format!("{stem}-a"));
        let b = Netns::add(format!("{stem}-b"));
        self.disable_ipv6_unless_kept(&a);
        self.disable_ipv6_unless_kept(&b);
        a.ip(&strs(&self.link_add(Some(b.name()))));
        a.ip(&["link", "set", &self.ends[0], "up"]);
        b.ip(&["link", "set", &self.ends[1], "up"]);
        (a, b)
    }

    /// Runs before the pair exists: new interfaces take the namespace's
    /// `default` setting.
    fn disable_ipv6_unless_kept(&self, ns: &Netns) {
        if !self.ipv6 {
            ns.exec(&[
                "sysctl",
                "-qw",
                "net.ipv6.conf.all.disable_ipv6=1",
                "net.ipv6.conf.default.disable_ipv6=1",
            ]);
        }
    }

    /// `link add A [settings] type veth peer name B [settings] [netns P]`.
    fn link_add(&self, peer_netns: Option<&str>) -> Vec<String> {
        let mut args = vec!["link".to_string(), "add".into(), self.ends[0].clone()];
        args.extend(self.settings());
        args.extend(["type", "veth", "peer", "name"].map(String::from));
        args.push(self.ends[1].clone());
        args.extend(self.settings());
        if let Some(peer) = peer_netns {
            args.extend(["netns".to_string(), peer.to_string()]);
        }
        args
    }

    /// One end's MTU and queue counts, as `ip link add` takes them.
    fn settings(&self) -> Vec<String> {
        let mut args = Vec::new();
        if let Some(mtu) = self.mtu {
            args.extend(["mtu".to_string(), mtu.to_string()]);
        }
        if let Some(n) = self.queues {
            for key in ["numtxqueues", "numrxqueues"] {
                args.extend([key.to_string(), n.to_string()]);
            }
        }
        args
    }
}

/// `&str`s for [`Netns::ip`].
fn strs(args: &[String]) -> Vec<&str> {
    args.iter().map(String::as_str).collect()
}
