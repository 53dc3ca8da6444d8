//! linerate as a VPN gateway's peer, in the data path: the transforms that
//! encrypt every test frame as it is sent (the gateway decrypts it) and
//! decrypt what the gateway encrypted before it is counted. ESP in UDP on
//! port 4500 (RFC 3948), which IKEv2 uses behind a NAT and strongSwan's
//! kernel-libipsec always, or raw ESP (IPv4 protocol 50), which gateways
//! use when no NAT is between them and their peer
//! ([`EspSend::encapsulated`]); the receiver opens both.
//!
//! On send, the frame as built (Ethernet, the inner IPv4 packet with the
//! signature) becomes Ethernet, outer IPv4, UDP, ESP around the inner
//! packet, in the port's own buffer: the inner packet moves once to where
//! ESP wants it and is encrypted there. The outer Ethernet addresses are
//! the built frame's (the port's and its gateway's), so the frame goes to
//! the same next hop.

use crate::transform::{Arrived, ReceiveTransform, SendTransform};
use linerate_esp::{
    decapsulate, Encapsulation, EspError, Framer, Inbound, InboundCounters, Outbound,
    OutboundCounters, OuterHeaders, Payload, NEXT_HEADER_IPV4,
};
// IPsec frames carry no VLAN tag: the inner packet follows the 14-byte
// Ethernet header, and so does the outer one.
use linerate_wire::ethernet::{EthernetFrame, ETHERTYPE_IPV4, ETH_HEADER_LEN};
use linerate_wire::flows::Field;
use linerate_wire::Flows;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The UDP port ESP travels on (RFC 3948).
pub const ESP_IN_UDP_PORT: u16 = 4500;

/// ESP in UDP from port 4500 to port 4500, as IKEv2 sets it up after NAT
/// detection: the transforms' default.
pub const ESP_IN_UDP: Encapsulation = Encapsulation::Udp {
    src_port: ESP_IN_UDP_PORT,
    dst_port: ESP_IN_UDP_PORT,
};

/// "in UDP 4500" or "raw (IP protocol 50)", for the transforms' description.
fn travels(encapsulation: Encapsulation) -> String {
    match encapsulation {
        Encapsulation::Udp { dst_port, .. } => format!("in UDP {dst_port}"),
        Encapsulation::Raw => "raw (IP protocol 50)".to_string(),
    }
}

/// Which tunnel an inner IPv4 address belongs to: `count` tunnels, tunnel
/// `i` protecting the `block` addresses from `first + i * block` on (the
/// network behind linerate split into equal slices, one per emulated peer).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunnelMap {
    pub first: Ipv4Addr,
    pub block: u32,
    pub count: u32,
}

impl TunnelMap {
    /// The tunnel whose slice holds `ip`; None: the address is in no
    /// tunnel's slice. A subtraction, a division and a comparison.
    #[inline]
    pub fn index(&self, ip: Ipv4Addr) -> Option<usize> {
        self.index_of(u32::from(ip))
    }

    /// [`index`](Self::index) of an address as a number.
    #[inline]
    pub fn index_of(&self, ip: u32) -> Option<usize> {
        let off = ip.checked_sub(u32::from(self.first))?;
        let i = off.checked_div(self.block)?;
        (i < self.count).then_some(i as usize)
    }

    /// The flow range that spreads frames evenly over the tunnels on
    /// `field` (SrcIp or DstIp): frame `n` carries tunnel `n mod count`'s
    /// host address `first + i * block + host_offset` (an inc range from
    /// `first + host_offset` with step `block` over a span of
    /// `count * block`).
    pub fn spread(
        &self,
        field: linerate_wire::flows::Field,
        host_offset: u32,
    ) -> linerate_wire::flows::FieldRange {
        let block = u64::from(self.block.max(1));
        let min = u64::from(u32::from(self.first)) + u64::from(host_offset);
        linerate_wire::flows::FieldRange {
            field,
            start: min,
            min,
            max: min + u64::from(self.count.max(1)) * block - 1,
            step: block,
            mode: linerate_wire::flows::Mode::Inc,
        }
    }
}

/// A transform's share among `n` generator threads: the `k`-th.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Share {
    k: usize,
    n: usize,
}

impl Share {
    /// The whole transform, on one thread.
    const WHOLE: Share = Share { k: 0, n: 1 };

    /// Whether tunnel `i` is this share's.
    fn holds(self, i: usize) -> bool {
        i % self.n == self.k
    }

    /// Where tunnel `i` is among this share's tunnels; None: another
    /// share's. Per frame: the whole transform divides nothing.
    #[inline]
    fn local(self, i: usize) -> Option<usize> {
        if self.n == 1 {
            Some(i)
        } else {
            self.holds(i).then(|| i / self.n)
        }
    }

    /// The tunnel at place `j` among this share's.
    fn global(self, j: usize) -> usize {
        j * self.n + self.k
    }
}

/// A share's thread's flows: the trial's spread of `field` over the
/// tunnels (frame m to tunnel m mod count, [`TunnelMap::spread`]), taken
/// every n-th tunnel from tunnel k, so that all its frames are its own
/// tunnels'. None: `flows` do not spread `field` so.
fn share_of_spread(flows: &Flows, field: Field, map: TunnelMap, share: Share) -> Option<Flows> {
    let spread = flows.range(field)?;
    let block = u64::from(map.block.max(1));
    let count = u64::from(map.count);
    let whole = spread.mode == linerate_wire::flows::Mode::Inc
        && spread.start == spread.min
        && spread.step == block
        && spread.max - spread.min + 1 == count * block
        && map.index_of(u32::try_from(spread.min).ok()?) == Some(0);
    if !whole {
        return None;
    }
    let (k, n) = (share.k as u64, share.n as u64);
    let mine = (count.checked_sub(k)?).div_ceil(n);
    let min = spread.min + k * block;
    let mut thread = flows.clone();
    let range = thread.ranges.iter_mut().find(|r| r.field == field)?;
    range.min = min;
    range.start = min;
    range.step = block * n;
    range.max = min + mine * block * n - 1;
    Some(thread)
}

/// The clear side of an encrypting gateway when linerate decrypts on
/// several threads (port A, `--direction encrypt --rx-threads N`): the
/// frames leave unchanged, but each generator thread sends only the
/// tunnels of one receiving thread (tunnel i to thread i mod N, as port
/// B's fanout steers their ESP), so that each stream is decrypted and
/// counted whole on one thread. The spread is on the inner destination.
pub struct TunnelSpread {
    map: TunnelMap,
    share: Share,
}

impl TunnelSpread {
    /// The frames spread over `map`'s tunnels on their destination.
    pub fn new(map: TunnelMap) -> TunnelSpread {
        TunnelSpread {
            map,
            share: Share::WHOLE,
        }
    }
}

impl SendTransform for TunnelSpread {
    #[inline(always)]
    fn apply(&mut self, _buf: &mut [u8], len: usize) -> usize {
        len
    }
    fn growth(&self, _len: usize) -> usize {
        0
    }
    fn describe(&self) -> String {
        "clear frames, each generator thread its tunnels' destinations".into()
    }
    fn split(&mut self, n: usize) -> Option<Vec<Box<dyn SendTransform>>> {
        if n < 2 || (self.map.count as usize) < n || self.share != Share::WHOLE {
            return None;
        }
        let map = self.map;
        Some(
            (0..n)
                .map(|k| {
                    Box::new(TunnelSpread {
                        map,
                        share: Share { k, n },
                    }) as Box<dyn SendTransform>
                })
                .collect(),
        )
    }
    fn thread_flows(&self, flows: &Flows) -> Option<Flows> {
        if self.share == Share::WHOLE {
            return Some(flows.clone());
        }
        share_of_spread(flows, Field::DstIp, self.map, self.share)
    }
}

/// New SAs the IKE side hands to a running transform (a CHILD_SA rekey):
/// the transform takes them at its next frame. Checking costs one relaxed
/// atomic load per frame; pushing takes a mutex (rare).
///
/// One inbox per transform: [`EspSend::take_new_sas`] takes an inbox of
/// [`Outbound`] SAs, [`EspReceive::take_new_sas`] one of [`Inbound`] SAs.
/// The keeper of the IKE SAs keeps the other `Arc` and pushes each tunnel's
/// new SA as soon as the CHILD_SA is rekeyed.
pub struct SaInbox<T> {
    /// Set (under the lock) when `sas` holds something; the only thing
    /// the data path reads per frame.
    pending: AtomicBool,
    sas: Mutex<Vec<(usize, T)>>,
}

impl<T> SaInbox<T> {
    pub fn new() -> Arc<SaInbox<T>> {
        Arc::new(SaInbox {
            pending: AtomicBool::new(false),
            sas: Mutex::new(Vec::new()),
        })
    }

    /// Tunnel `tunnel`'s new SA (index as in [`EspSend::many`] /
    /// [`EspReceive::many`]; 0 with one tunnel). The transform takes it
    /// before its next frame; an index out of range is ignored there (and
    /// not counted in [`EspCounts::new_sas_taken`]).
    pub fn push(&self, tunnel: usize, sa: T) {
        let mut sas = self.sas.lock().unwrap_or_else(|e| e.into_inner());
        sas.push((tunnel, sa));
        // Release/Acquire (plain moves on x86): a frame the gateway sent
        // after the push (the installer runs before the IKE datagram
        // that lets it use the SA leaves) finds the flag set.
        self.pending.store(true, Ordering::Release);
    }

    /// Whether SAs wait: one load (the SAs themselves are read under the
    /// mutex, which orders them).
    #[inline(always)]
    fn pending(&self) -> bool {
        self.pending.load(Ordering::Acquire)
    }

    /// The SAs pushed so far for the tunnels `mine` says are the caller's,
    /// oldest first; the others stay (and the flag with them) for the
    /// shares they belong to.
    fn take_where(&self, mine: impl Fn(usize) -> bool) -> Vec<(usize, T)> {
        let mut sas = self.sas.lock().unwrap_or_else(|e| e.into_inner());
        let (taken, left): (Vec<_>, Vec<_>) = std::mem::take(&mut *sas)
            .into_iter()
            .partition(|(i, _)| mine(*i));
        *sas = left;
        self.pending.store(!sas.is_empty(), Ordering::Relaxed);
        taken
    }
}

/// Counts of one tunnel's SAs (after a rekey, the sums over the tunnel's
/// old SAs and its current ones).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct TunnelEspCounts {
    /// Frames encrypted on the tunnel's outbound SA(s).
    pub sent: OutboundCounters,
    /// What the tunnel's inbound SA(s) accepted and refused.
    pub received: InboundCounters,
}

/// What an SA's transforms counted, readable while the trial runs and
/// after it (the transforms themselves belong to the port). With many
/// tunnels the counts are the totals over all of them, and `per_tunnel`
/// has each tunnel's.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct EspCounts {
    /// Frames encrypted on the outbound SA(s).
    pub sent: OutboundCounters,
    /// What the inbound SA(s) accepted and refused.
    pub received: InboundCounters,
    /// ESP frames for an SPI of none of the inbound SAs.
    pub unknown_spi: u64,
    /// Of `unknown_spi`, the frames whose SA the transform took from its
    /// inbox later: the gateway sent on a rekey's new SA before linerate
    /// had installed it. The tester's loss, never the gateway's.
    pub before_install: u64,
    /// IKE messages and NAT keepalives that arrived during the trial.
    pub ike: u64,
    /// UDP frames that arrived outside ESP on the protected port: a
    /// gateway that forwards test frames in clear leaks them.
    pub not_esp: u64,
    /// Other traffic on the protected port that is no test frame in any
    /// form: IPv4 fragments, other protocols, datagrams on the ESP port
    /// too short for ESP. Not counted, neither received nor damaged.
    pub stray: u64,
    /// Per tunnel, index = tunnel (length 1 for the one-tunnel
    /// constructors, once a transform has published).
    pub per_tunnel: Vec<TunnelEspCounts>,
    /// New SAs the transforms took from their inboxes (outbound +
    /// inbound): a CHILD_SA rekey of every tunnel adds 2 per tunnel.
    pub new_sas_taken: u64,
    /// The transforms send raw ESP (IP protocol 50): each frame on the
    /// wire is 8 bytes shorter than in UDP (no UDP header).
    pub raw_esp: bool,
}

/// Counts shared between a port's transforms and whoever reports them.
pub type SharedCounts = Arc<Mutex<EspCounts>>;

fn add_outbound(a: &mut OutboundCounters, b: &OutboundCounters) {
    a.packets += b.packets;
    a.clear_bytes += b.clear_bytes;
    a.esp_bytes += b.esp_bytes;
}

fn add_inbound(a: &mut InboundCounters, b: &InboundCounters) {
    a.packets += b.packets;
    a.clear_bytes += b.clear_bytes;
    a.esp_bytes += b.esp_bytes;
    a.icv_failures += b.icv_failures;
    a.replays += b.replays;
    a.too_old += b.too_old;
    a.malformed += b.malformed;
}

/// One tunnel's sending end: its SA, its outer source address and the
/// outer headers laid out for it.
struct SendTunnel {
    sa: Outbound,
    /// What the tunnel's SAs before `sa` sent (rekeyed away).
    retired: OutboundCounters,
    outer_src: Ipv4Addr,
    /// The outer headers, laid out for the MACs of the frames seen last
    /// ([`EthernetFrame::addresses`]).
    framer: Option<([u8; 12], Framer)>,
}

/// Encrypts every test frame with the outbound SA of its tunnel (one, or
/// the one the frame's inner source address belongs to).
pub struct EspSend {
    tunnels: Vec<SendTunnel>,
    /// Which tunnel a frame's inner source is in; None: one tunnel.
    map: Option<TunnelMap>,
    /// This share's place among the shares of a split (see
    /// [`SendTransform::split`]): it holds the tunnels `share.k + j *
    /// share.n`, tunnel `k + j * n` at `tunnels[j]`. (0, 1) unsplit.
    share: Share,
    outer_dst: Ipv4Addr,
    /// ESP in UDP 4500 or raw ESP.
    encapsulation: Encapsulation,
    counts: SharedCounts,
    /// Where new SAs come from (a rekey), if anywhere.
    inbox: Option<Arc<SaInbox<Outbound>>>,
    /// Frames sealed, all tunnels (when to publish).
    sealed: u64,
    /// Frames the SA refused (never, when the engine's checks held) or
    /// whose source is in no tunnel: sent as an invalid frame the DUT
    /// discards, never in clear.
    failed: u64,
}

impl EspSend {
    /// Encrypts with `sa` from `outer_src` (linerate's tunnel end) to
    /// `outer_dst` (the gateway's).
    pub fn new(
        sa: Outbound,
        outer_src: Ipv4Addr,
        outer_dst: Ipv4Addr,
        counts: SharedCounts,
    ) -> Self {
        EspSend {
            tunnels: vec![SendTunnel {
                sa,
                retired: OutboundCounters::default(),
                outer_src,
                framer: None,
            }],
            map: None,
            share: Share::WHOLE,
            outer_dst,
            encapsulation: ESP_IN_UDP,
            counts,
            inbox: None,
            sealed: 0,
            failed: 0,
        }
    }

    /// Many tunnels to one gateway: each frame is sealed with the SA of
    /// the tunnel its inner SOURCE address belongs to (`map`), from that
    /// tunnel's outer address (`sas[i].1`). A frame whose source is in no
    /// tunnel is never sent in clear.
    pub fn many(
        sas: Vec<(Outbound, Ipv4Addr)>,
        gateway: Ipv4Addr,
        map: TunnelMap,
        counts: SharedCounts,
    ) -> Self {
        EspSend {
            tunnels: sas
                .into_iter()
                .map(|(sa, outer_src)| SendTunnel {
                    sa,
                    retired: OutboundCounters::default(),
                    outer_src,
                    framer: None,
                })
                .collect(),
            map: Some(map),
            share: Share::WHOLE,
            outer_dst: gateway,
            encapsulation: ESP_IN_UDP,
            counts,
            inbox: None,
            sealed: 0,
            failed: 0,
        }
    }

    /// From the next frame after a push, the tunnel's frames are sealed
    /// with the new outbound SA (its own sequence numbers from 1). The old
    /// SA's counters stay in the tunnel's and the totals' sent counts
    /// (counts never go backwards). An SA for a tunnel index out of range
    /// is dropped (and not counted). The outer headers stay the tunnel's;
    /// the new SA should have the old one's suite, or at least no larger
    /// overhead ([`growth`](SendTransform::growth) was checked against the
    /// frame size before the trial: a frame that no longer fits is sent as
    /// an invalid frame, never in clear).
    pub fn take_new_sas(mut self, inbox: Arc<SaInbox<Outbound>>) -> Self {
        self.inbox = Some(inbox);
        self
    }

    /// Sends the ESP packets so (the constructors: ESP in UDP 4500), e.g.
    /// `Encapsulation::Raw` for a CHILD_SA negotiated without UDP
    /// encapsulation. Every tunnel the same way.
    pub fn encapsulated(mut self, encapsulation: Encapsulation) -> Self {
        self.encapsulation = encapsulation;
        self
    }

    /// Replaces the SAs of the tunnels the inbox has new ones for.
    #[cold]
    #[inline(never)]
    fn take_pending(&mut self) {
        let Some(inbox) = &self.inbox else {
            return;
        };
        let mut taken = 0;
        let share = self.share;
        for (i, sa) in inbox.take_where(|i| share.holds(i)) {
            let Some(t) = share.local(i).and_then(|j| self.tunnels.get_mut(j)) else {
                continue;
            };
            let old = std::mem::replace(&mut t.sa, sa);
            add_outbound(&mut t.retired, old.counters());
            taken += 1;
        }
        if taken > 0 {
            if let Ok(mut c) = self.counts.lock() {
                c.new_sas_taken += taken;
            }
            self.publish();
        }
    }

    /// The tunnel of the frame `buf[..len]`: 0 with one tunnel, else its
    /// inner source's (None: in no tunnel, or not long enough to say).
    #[inline]
    fn tunnel_of(&self, buf: &[u8], len: usize) -> Option<usize> {
        let Some(map) = &self.map else {
            return Some(0);
        };
        let src = Field::SrcIp.ipv4_in(buf.get(..len)?)?;
        let i = map.index_of(src)?;
        self.share.local(i).filter(|&j| j < self.tunnels.len())
    }

    /// Seals the frame `buf[..len]` with tunnel `i`'s SA.
    fn seal(&mut self, i: usize, buf: &mut [u8], len: usize) -> Result<usize, EspError> {
        let (outer_dst, encapsulation) = (self.outer_dst, self.encapsulation);
        let t = &mut self.tunnels[i];
        let eth = EthernetFrame::new_unchecked(&*buf);
        let macs = eth.addresses();
        // Lays the outer headers out again when the frames' Ethernet
        // addresses changed (the gateway's MAC is known only once the
        // trial resolved it): once per trial and tunnel, not per frame.
        if t.framer.as_ref().is_none_or(|(m, _)| *m != macs) {
            let headers = OuterHeaders {
                encapsulation,
                ..OuterHeaders::esp_in_udp(eth.src_addr(), eth.dst_addr(), t.outer_src, outer_dst)
            };
            t.framer = Some((macs, Framer::new(&headers)));
        }
        let (Some((_, framer)), sa) = (&t.framer, &mut t.sa) else {
            unreachable!("set above");
        };
        let inner_len = len - ETH_HEADER_LEN;
        let need = framer.frame_len(sa.sealed_len(inner_len));
        if buf.len() < need {
            return Err(EspError::BufferTooSmall {
                need,
                have: buf.len(),
            });
        }
        buf.copy_within(ETH_HEADER_LEN..len, framer.headroom() + sa.payload_offset());
        let esp_len =
            sa.seal_in_place(&mut buf[framer.headroom()..], inner_len, NEXT_HEADER_IPV4)?;
        framer.encapsulate(buf, esp_len)
    }

    /// Copies the SAs' counters where reports read them (this share's
    /// tunnels; the total over every tunnel, the other shares' as they
    /// last published them).
    fn publish(&self) {
        if let Ok(mut c) = self.counts.lock() {
            // A split-up transform has no tunnels left: the totals only.
            let all = self
                .tunnels
                .len()
                .checked_sub(1)
                .map_or(0, |j| self.share.global(j) + 1);
            if c.per_tunnel.len() < all {
                c.per_tunnel.resize(all, TunnelEspCounts::default());
            }
            for (j, t) in self.tunnels.iter().enumerate() {
                let out = &mut c.per_tunnel[self.share.global(j)];
                out.sent = t.retired;
                add_outbound(&mut out.sent, t.sa.counters());
            }
            let mut total = OutboundCounters::default();
            for t in &c.per_tunnel {
                add_outbound(&mut total, &t.sent);
            }
            c.sent = total;
            c.raw_esp = self.encapsulation == Encapsulation::Raw;
        }
    }

    /// Thread `k` of `n`'s share: tunnels `k, k + n, ...` taken out of
    /// `tunnels` (`None` where taken). The shares publish into the same
    /// counts and take new SAs from the same inbox, each its own tunnels'.
    fn share_of(&self, tunnels: &mut [Option<SendTunnel>], share: Share) -> EspSend {
        EspSend {
            tunnels: tunnels
                .iter_mut()
                .skip(share.k)
                .step_by(share.n)
                .map(|t| t.take().expect("each tunnel dealt once"))
                .collect(),
            map: self.map,
            share,
            outer_dst: self.outer_dst,
            encapsulation: self.encapsulation,
            counts: self.counts.clone(),
            inbox: self.inbox.clone(),
            sealed: 0,
            failed: 0,
        }
    }
}

impl SendTransform for EspSend {
    fn apply(&mut self, buf: &mut [u8], len: usize) -> usize {
        if self.inbox.as_ref().is_some_and(|i| i.pending()) {
            self.take_pending();
        }
        let sealed = match self.tunnel_of(buf, len) {
            Some(i) => self.seal(i, buf, len),
            None => Err(EspError::NotEsp("a source address in no tunnel")),
        };
        match sealed {
            Ok(n) => {
                self.sealed += 1;
                if self.sealed % 1024 == 0 {
                    self.publish();
                }
                n
            }
            Err(_) => {
                // Unreachable while the engine checks growth and
                // frames_left before the trial and every frame's source
                // is in a tunnel; never send the clear frame.
                self.failed += 1;
                buf[..60].fill(0);
                60
            }
        }
    }
    fn growth(&self, len: usize) -> usize {
        let inner = len.saturating_sub(ETH_HEADER_LEN);
        self.tunnels
            .iter()
            .map(|t| {
                self.encapsulation.headroom() - ETH_HEADER_LEN + t.sa.sealed_len(inner) - inner
            })
            .max()
            .unwrap_or(0)
    }
    fn frames_left(&self) -> Option<u64> {
        self.tunnels.iter().map(|t| t.sa.remaining()).min()
    }
    fn trial_ends(&mut self) {
        self.publish();
    }
    /// The tunnels dealt out, tunnel i to share i mod n: each SA's
    /// sequence numbers stay with one thread. Needs as many tunnels as
    /// shares (one tunnel's SA cannot be split).
    fn split(&mut self, n: usize) -> Option<Vec<Box<dyn SendTransform>>> {
        if self.map.is_none() || n < 2 || self.tunnels.len() < n || self.share != Share::WHOLE {
            return None;
        }
        self.publish();
        let mut tunnels: Vec<Option<SendTunnel>> = std::mem::take(&mut self.tunnels)
            .into_iter()
            .map(Some)
            .collect();
        Some(
            (0..n)
                .map(|k| {
                    let share = self.share_of(&mut tunnels, Share { k, n });
                    Box::new(share) as Box<dyn SendTransform>
                })
                .collect(),
        )
    }
    /// Thread k's flows: the trial's spread of the inner source over the
    /// tunnels (frame m to tunnel m mod count, `TunnelMap::spread`), taken
    /// every n-th tunnel from tunnel k, so its frames are all its own.
    fn thread_flows(&self, flows: &Flows) -> Option<Flows> {
        if self.share == Share::WHOLE {
            return Some(flows.clone());
        }
        share_of_spread(flows, Field::SrcIp, self.map?, self.share)
    }
    fn describe(&self) -> String {
        match (&self.tunnels[..], &self.map) {
            ([t], None) => format!(
                "ESP {} {}, SPI 0x{:08x}, {} -> {}",
                t.sa.suite(),
                travels(self.encapsulation),
                t.sa.spi(),
                t.outer_src,
                self.outer_dst
            ),
            (ts, _) => describe_many(
                ts.first().map(|t| t.sa.suite().to_string()),
                self.encapsulation,
                ts.iter().map(|t| t.sa.spi()),
                format!(
                    "{} tunnel(s), {} .. {} -> {}",
                    ts.len(),
                    ts.first().map_or(Ipv4Addr::UNSPECIFIED, |t| t.outer_src),
                    ts.last().map_or(Ipv4Addr::UNSPECIFIED, |t| t.outer_src),
                    self.outer_dst
                ),
            ),
        }
    }
}

/// "ESP aes128gcm16 in UDP 4500, 100 tunnel(s) ..., SPIs 0x.. .. 0x..".
fn describe_many(
    suite: Option<String>,
    encapsulation: Encapsulation,
    mut spis: impl ExactSizeIterator<Item = u32>,
    what: String,
) -> String {
    let n = spis.len();
    let first = spis.next().unwrap_or(0);
    let last = spis.last().unwrap_or(first);
    let spis = if n <= 1 {
        format!("SPI 0x{first:08x}")
    } else {
        format!("{n} SPIs 0x{first:08x} .. 0x{last:08x}")
    };
    format!(
        "ESP {} {}, {what}, {spis}",
        suite.unwrap_or_default(),
        travels(encapsulation)
    )
}

impl Drop for EspSend {
    fn drop(&mut self) {
        self.publish();
    }
}

/// A hasher for SPIs: they are random 32-bit numbers already, so one
/// multiplication spreads them (no allocation, no SipHash per frame).
#[derive(Default, Clone, Copy)]
struct SpiHasher(u64);

impl std::hash::Hasher for SpiHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (v as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type SpiIndex = std::collections::HashMap<u32, u32, std::hash::BuildHasherDefault<SpiHasher>>;

/// Each SA's SPI -> its index in `sas`.
fn spi_index(sas: &[Inbound]) -> SpiIndex {
    sas.iter()
        .enumerate()
        .map(|(i, sa)| (sa.spi(), i as u32))
        .collect()
}

/// Decrypts the frames of one inbound SA, or of one per tunnel chosen by
/// SPI, before they are counted. After a rekey a tunnel has several
/// inbound SAs, all accepted.
pub struct EspReceive {
    /// The first `tunnels` are the tunnels' first SAs (index = tunnel);
    /// those taken from the inbox follow, in the order taken.
    sas: Vec<Inbound>,
    /// The tunnel of each SA in `sas`.
    tunnel_of: Vec<u32>,
    /// How many tunnels (per_tunnel's length); 0 once split up (the
    /// shares have them).
    tunnels: usize,
    /// This share's place among the shares of a split (see
    /// [`ReceiveTransform::split`]): it holds the SAs of the tunnels
    /// `share.k + j * share.n`. (0, 1) unsplit.
    share: Share,
    /// SPI -> index in `sas`; empty with one SA (it checks its SPI itself).
    by_spi: SpiIndex,
    /// Where new SAs come from (a rekey), if anywhere.
    inbox: Option<Arc<SaInbox<Inbound>>>,
    /// How the gateway's ESP arrives (both are opened; this sizes the
    /// frames and names them).
    encapsulation: Encapsulation,
    /// Kept while the transform lives (e.g. the claim on IP protocol 50
    /// that keeps the kernel from answering raw ESP, [`crate::esp_sink`]).
    _holds: Option<Box<dyn Send>>,
    counts: SharedCounts,
    own: EspCounts,
    /// What of `own`'s frames outside any SA (unknown SPIs, IKE, ...) is
    /// in `counts` already: shares add theirs to the same counts.
    published: EspCounts,
    seen: u64,
    /// Frames of each unknown SPI (the first [`UNKNOWN_SPIS_KEPT`]
    /// SPIs): moved to `before_install` when an SA of that SPI comes.
    unknown: SpiIndex,
}

/// How many unknown SPIs a receiver remembers: a rekey's early frames
/// need one per tunnel rekeyed at once; a flood of foreign SPIs is only
/// counted.
const UNKNOWN_SPIS_KEPT: usize = 4096;

impl EspReceive {
    pub fn new(sa: Inbound, counts: SharedCounts) -> Self {
        EspReceive {
            sas: vec![sa],
            tunnel_of: vec![0],
            tunnels: 1,
            share: Share::WHOLE,
            by_spi: SpiIndex::default(),
            inbox: None,
            encapsulation: ESP_IN_UDP,
            _holds: None,
            counts,
            own: EspCounts::default(),
            published: EspCounts::default(),
            seen: 0,
            unknown: SpiIndex::default(),
        }
    }

    /// Many tunnels: the inbound SA is chosen by SPI (`sas[i]` is tunnel
    /// i's); an SPI of none of them counts as unknown_spi.
    pub fn many(sas: Vec<Inbound>, counts: SharedCounts) -> Self {
        let by_spi = spi_index(&sas);
        EspReceive {
            tunnel_of: (0..sas.len() as u32).collect(),
            tunnels: sas.len(),
            share: Share::WHOLE,
            sas,
            by_spi,
            inbox: None,
            encapsulation: ESP_IN_UDP,
            _holds: None,
            counts,
            own: EspCounts::default(),
            published: EspCounts::default(),
            seen: 0,
            unknown: SpiIndex::default(),
        }
    }

    /// A pushed inbound SA is ADDED beside the tunnel's older ones (the
    /// gateway may go on sending on an old SPI until it deletes it, and
    /// frames sent on it just before the rekey are still in flight): every
    /// SPI of the tunnel is accepted, chosen by SPI; the tunnel's received
    /// counts are the sum over all its SAs. Works for the one-tunnel
    /// constructor too (it then looks up by SPI). An SA for a tunnel index
    /// out of range is dropped (and not counted); one whose SPI an older SA
    /// has takes that SPI over (the older one's counts stay). Old SAs are
    /// kept for the transform's life (a few hundred bytes each).
    pub fn take_new_sas(mut self, inbox: Arc<SaInbox<Inbound>>) -> Self {
        self.inbox = Some(inbox);
        self
    }

    /// The gateway's ESP arrives so (the constructors: ESP in UDP 4500).
    /// Frames of either kind are opened whatever is set here: it sizes
    /// the frames ([`growth`](ReceiveTransform::growth)) and names them.
    pub fn encapsulated(mut self, encapsulation: Encapsulation) -> Self {
        self.encapsulation = encapsulation;
        self
    }

    /// Keeps `guard` as long as the transform lives: a claim that must
    /// last while ESP arrives (see [`crate::esp_sink::ProtocolSink`]).
    pub fn holding(mut self, guard: Box<dyn Send>) -> Self {
        self._holds = Some(guard);
        self
    }

    /// Adds the SAs the inbox has.
    #[cold]
    #[inline(never)]
    fn take_pending(&mut self) {
        let Some(inbox) = &self.inbox else {
            return;
        };
        let mut taken = 0;
        let share = self.share;
        for (tunnel, sa) in inbox.take_where(|i| share.holds(i)) {
            if tunnel >= self.tunnels {
                continue;
            }
            if self.by_spi.is_empty() {
                // One SA checked its own SPI; from two on, the SPI chooses.
                for (i, old) in self.sas.iter().enumerate() {
                    self.by_spi.insert(old.spi(), i as u32);
                }
            }
            if let Some(early) = self.unknown.remove(&sa.spi()) {
                self.own.before_install += u64::from(early);
            }
            self.by_spi.insert(sa.spi(), self.sas.len() as u32);
            self.sas.push(sa);
            self.tunnel_of.push(tunnel as u32);
            taken += 1;
        }
        if taken > 0 {
            if let Ok(mut c) = self.counts.lock() {
                c.new_sas_taken += taken;
            }
            self.publish();
        }
    }

    fn publish(&mut self) {
        let mut total = InboundCounters::default();
        for sa in &self.sas {
            add_inbound(&mut total, sa.counters());
        }
        self.own.received = total;
        if let Ok(mut c) = self.counts.lock() {
            if c.per_tunnel.len() < self.tunnels {
                c.per_tunnel
                    .resize(self.tunnels, TunnelEspCounts::default());
            }
            // This share's tunnels (every tunnel, unsplit).
            let share = self.share;
            for (i, out) in c.per_tunnel.iter_mut().enumerate().take(self.tunnels) {
                if share.holds(i) {
                    out.received = InboundCounters::default();
                }
            }
            for (sa, &t) in self.sas.iter().zip(&self.tunnel_of) {
                if let Some(out) = c.per_tunnel.get_mut(t as usize) {
                    add_inbound(&mut out.received, sa.counters());
                }
            }
            let mut received = InboundCounters::default();
            for t in &c.per_tunnel {
                add_inbound(&mut received, &t.received);
            }
            c.received = received;
            c.raw_esp = self.encapsulation == Encapsulation::Raw;
            let (own, old) = (&self.own, &self.published);
            c.unknown_spi += own.unknown_spi - old.unknown_spi;
            c.before_install += own.before_install - old.before_install;
            c.ike += own.ike - old.ike;
            c.not_esp += own.not_esp - old.not_esp;
            c.stray += own.stray - old.stray;
            self.published = self.own.clone();
        }
    }

    /// Thread `k` of `n`'s share: the SAs of tunnels `k, k + n, ...`
    /// taken out of `sas` (`None` where taken), each with its tunnel.
    fn share_of(&self, sas: &mut [Option<(Inbound, u32)>], share: Share) -> EspReceive {
        let (sas, tunnel_of): (Vec<Inbound>, Vec<u32>) = sas
            .iter_mut()
            .filter(|s| s.as_ref().is_some_and(|(_, t)| share.holds(*t as usize)))
            .map(|s| s.take().expect("filtered on being there"))
            .unzip();
        let by_spi = spi_index(&sas);
        EspReceive {
            sas,
            tunnel_of,
            tunnels: self.tunnels,
            share,
            by_spi,
            inbox: self.inbox.clone(),
            encapsulation: self.encapsulation,
            _holds: None,
            counts: self.counts.clone(),
            own: EspCounts::default(),
            published: EspCounts::default(),
            seen: 0,
            unknown: SpiIndex::default(),
        }
    }

    /// Counts an ESP packet of no SA's SPI, and remembers its SPI (an SA
    /// of a rekey may bring it in a moment).
    #[cold]
    fn unknown_spi(&mut self, spi: u32) {
        self.own.unknown_spi += 1;
        if let Some(n) = self.unknown.get_mut(&spi) {
            *n = n.saturating_add(1);
        } else if self.unknown.len() < UNKNOWN_SPIS_KEPT {
            self.unknown.insert(spi, 1);
        }
    }

    /// The SA for an ESP packet: the one SA, or the one of its SPI.
    #[inline]
    fn sa_for(&mut self, esp: &[u8]) -> Option<&mut Inbound> {
        if self.by_spi.is_empty() {
            return self.sas.first_mut();
        }
        let i = *self.by_spi.get(&linerate_esp::spi_of(esp)?)?;
        self.sas.get_mut(i as usize)
    }

    fn unwrap<'a>(&mut self, frame: &[u8], scratch: &'a mut [u8]) -> Arrived<'a> {
        // ARP and other non-IPv4 frames go to the host emulation as they are.
        if EthernetFrame::new_checked(frame).is_none_or(|f| f.ethertype() != ETHERTYPE_IPV4) {
            return Arrived::AsIs;
        }
        let len = frame.len().min(scratch.len());
        scratch[..len].copy_from_slice(&frame[..len]);
        let base = scratch.as_ptr() as usize;
        let esp = match decapsulate(&mut scratch[..len], ESP_IN_UDP_PORT) {
            Ok(d) => match d.payload {
                Payload::Esp(esp) => esp,
                Payload::Ike(_) | Payload::NatKeepalive => {
                    self.own.ike += 1;
                    return Arrived::Consumed;
                }
            },
            Err(EspError::NotEsp(linerate_esp::frame::UDP_TO_ANOTHER_PORT)) => {
                self.own.not_esp += 1;
                return Arrived::Consumed;
            }
            Err(EspError::NotEsp(_)) => {
                self.own.stray += 1;
                return Arrived::Consumed;
            }
            Err(_) => return Arrived::Damaged,
        };
        let Some(sa) = self.sa_for(esp) else {
            // An SPI of no tunnel (or too short to have one: damaged).
            let Some(spi) = linerate_esp::spi_of(esp) else {
                return Arrived::Damaged;
            };
            self.unknown_spi(spi);
            return Arrived::Consumed;
        };
        let (inner_at, inner_len) = match sa.open(esp) {
            Ok(o) if o.next_header == NEXT_HEADER_IPV4 => {
                (o.packet.as_ptr() as usize - base, o.packet.len())
            }
            Ok(_) => return Arrived::Damaged,
            Err(EspError::UnknownSpi { got, .. }) => {
                self.unknown_spi(got);
                return Arrived::Consumed;
            }
            // A duplicate, or a frame later than the window: the SA's
            // counters keep it (RFC 4303 §3.4.3 discards it); not damage.
            Err(EspError::Replay { .. } | EspError::TooOld { .. }) => return Arrived::Consumed,
            Err(_) => return Arrived::Damaged,
        };
        // The inner packet, behind the outer frame's Ethernet header, is
        // the frame the receiver counts.
        scratch.copy_within(inner_at..inner_at + inner_len, ETH_HEADER_LEN);
        Arrived::Inner(&scratch[..ETH_HEADER_LEN + inner_len])
    }
}

impl ReceiveTransform for EspReceive {
    fn apply<'a>(&mut self, frame: &[u8], scratch: &'a mut [u8]) -> Arrived<'a> {
        if self.inbox.as_ref().is_some_and(|i| i.pending()) {
            self.take_pending();
        }
        self.seen += 1;
        if self.seen % 1024 == 0 {
            self.publish();
        }
        self.unwrap(frame, scratch)
    }
    fn growth(&self, len: usize) -> usize {
        let inner = len.saturating_sub(ETH_HEADER_LEN);
        self.sas
            .iter()
            .map(|sa| self.encapsulation.headroom() - ETH_HEADER_LEN + sa.suite().overhead(inner))
            .max()
            .unwrap_or(0)
    }
    fn describe(&self) -> String {
        match &self.sas[..] {
            [sa] if self.by_spi.is_empty() => format!(
                "ESP {} {}, SPI 0x{:08x}",
                sa.suite(),
                travels(self.encapsulation),
                sa.spi()
            ),
            sas => describe_many(
                sas.first().map(|sa| sa.suite().to_string()),
                self.encapsulation,
                sas.iter().map(|sa| sa.spi()),
                format!("{} tunnel(s)", self.tunnels),
            ),
        }
    }
    fn trial_ends(&mut self) {
        self.publish();
    }
    /// The tunnels' SAs dealt out, tunnel i's to share i mod n (each
    /// SA's replay window and counters on one thread; the port must give
    /// each share its tunnels' ESP). Needs as many tunnels as shares. The
    /// shares publish into the same counts and take new SAs from the same
    /// inbox, each its own tunnels'; `self` keeps what it must hold (the
    /// claim on raw ESP) and counts nothing more.
    fn split(&mut self, n: usize) -> Option<Vec<Box<dyn ReceiveTransform>>> {
        if n < 2 || self.tunnels < n || self.share != Share::WHOLE {
            return None;
        }
        self.publish();
        let mut sas: Vec<Option<(Inbound, u32)>> = std::mem::take(&mut self.sas)
            .into_iter()
            .zip(std::mem::take(&mut self.tunnel_of))
            .map(Some)
            .collect();
        let shares = (0..n)
            .map(|k| Box::new(self.share_of(&mut sas, Share { k, n })) as Box<dyn ReceiveTransform>)
            .collect();
        self.by_spi.clear();
        self.tunnels = 0;
        Some(shares)
    }
}

impl Drop for EspReceive {
    fn drop(&mut self) {
        self.publish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linerate_esp::{EspSuite, SaKeys};
    use linerate_wire::flows::FieldRange;
    use linerate_wire::{FlowSpec, FrameSize, FrameTemplate, MacAddr, Received, Signature};

    fn keys(suite: EspSuite) -> SaKeys {
        let enc = vec![0x11; suite.encryption_keymat_len()];
        let integ = vec![0x22; suite.integrity_key_len()];
        SaKeys::new(suite, 0xc0ffee01, enc, integ).unwrap()
    }

    fn test_frame(buf: &mut [u8], size: u64) -> usize {
        let flow = FlowSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: "198.19.1.2".parse().unwrap(),
            dst_ip: "198.18.0.2".parse().unwrap(),
            src_port: 1,
            dst_port: 2,
            ttl: 64,
            vlan: None,
        };
        let t = FrameTemplate::new(&flow, FrameSize::from_frame(size).unwrap());
        t.write(
            buf,
            Signature {
                stream: 7,
                seq: 42,
                tx_ts: 1,
            },
        )
    }

    #[test]
    fn a_sealed_frame_opens_to_the_frame_that_was_built() {
        for suite in EspSuite::ALL {
            for size in [64, 512, 1518] {
                let counts = SharedCounts::default();
                let outer = |s: &str| s.parse::<Ipv4Addr>().unwrap();
                let mut send = EspSend::new(
                    Outbound::new(keys(suite)).unwrap(),
                    outer("198.19.0.2"),
                    outer("198.19.0.1"),
                    counts.clone(),
                );
                let mut receive =
                    EspReceive::new(Inbound::new(keys(suite)).unwrap(), counts.clone());
                let mut buf = vec![0u8; 2048];
                let len = test_frame(&mut buf, size);
                let built = buf[..len].to_vec();
                let sent = send.apply(&mut buf, len);
                assert_eq!(sent, len + send.growth(len), "{suite} {size}");
                // On the wire: ESP in UDP 4500 between the tunnel ends,
                // nothing of the inner packet in clear.
                assert_eq!(&buf[12..14], &[0x08, 0x00]);
                assert_eq!(&buf[26..30], &[198, 19, 0, 2]);
                assert_eq!(&buf[30..34], &[198, 19, 0, 1]);
                assert_eq!(&buf[36..38], &4500u16.to_be_bytes());
                assert_eq!(classify_test(&buf[..sent]), None);
                let mut scratch = vec![0u8; 4096];
                match receive.apply(&buf[..sent], &mut scratch) {
                    Arrived::Inner(inner) => assert_eq!(inner, &built[..]),
                    _ => panic!("{suite} {size}: not opened"),
                }
                // The same frame again is a replay: discarded by the
                // window, not counted twice (and not damage).
                assert!(matches!(
                    receive.apply(&buf[..sent], &mut scratch),
                    Arrived::Consumed
                ));
                // One flipped bit in the next frame fails the ICV.
                let len = test_frame(&mut buf, size);
                let sent = send.apply(&mut buf, len);
                buf[sent - 20] ^= 1;
                assert!(matches!(
                    receive.apply(&buf[..sent], &mut scratch),
                    Arrived::Damaged
                ));
                drop((send, receive));
                let c = counts.lock().unwrap();
                assert_eq!(c.sent.packets, 2);
                assert_eq!(c.received.packets, 1);
                assert_eq!(c.received.replays, 1);
                assert_eq!(c.received.icv_failures, 1);
            }
        }
    }

    #[test]
    fn arp_passes_and_clear_test_frames_are_not_counted() {
        let counts = SharedCounts::default();
        let mut receive = EspReceive::new(
            Inbound::new(keys(EspSuite::Aes128Gcm16)).unwrap(),
            counts.clone(),
        );
        let mut scratch = vec![0u8; 4096];
        let mut arp = vec![0u8; 60];
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert!(matches!(receive.apply(&arp, &mut scratch), Arrived::AsIs));
        // A test frame the gateway forwarded without encrypting it.
        let mut buf = vec![0u8; 2048];
        let len = test_frame(&mut buf, 64);
        assert!(matches!(
            receive.apply(&buf[..len], &mut scratch),
            Arrived::Consumed
        ));
        drop(receive);
        assert_eq!(counts.lock().unwrap().not_esp, 1);
    }

    /// Foreign traffic at linerate's tunnel end (issue 41: 3,000-byte and
    /// 2-byte datagrams to UDP 4500 counted as damaged test frames and as
    /// test frames in clear) is stray: not damaged, not in clear.
    #[test]
    fn fragments_and_datagrams_too_short_for_esp_are_stray() {
        let counts = SharedCounts::default();
        let mut receive = EspReceive::new(
            Inbound::new(keys(EspSuite::Aes128Gcm16)).unwrap(),
            counts.clone(),
        );
        let mut scratch = vec![0u8; 4096];
        let datagram = |payload: &[u8], flags: u16| {
            let mut f = vec![0u8; 14 + 20 + 8];
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            let total = (20 + 8 + payload.len()) as u16;
            let ip = &mut f[14..34];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&total.to_be_bytes());
            ip[6..8].copy_from_slice(&flags.to_be_bytes());
            ip[8] = 64;
            ip[9] = 17;
            ip[12..16].copy_from_slice(&[198, 19, 0, 1]);
            ip[16..20].copy_from_slice(&[198, 19, 0, 2]);
            let sum = linerate_wire::checksum::fold(linerate_wire::checksum::sum16(ip));
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
            let udp = &mut f[34..42];
            udp[0..2].copy_from_slice(&4500u16.to_be_bytes());
            udp[2..4].copy_from_slice(&4500u16.to_be_bytes());
            udp[4..6].copy_from_slice(&((8 + payload.len()) as u16).to_be_bytes());
            f.extend_from_slice(payload);
            f
        };
        let short = datagram(&[1, 2], 0);
        let first_fragment = datagram(&[0xab; 1400], 0x2000);
        for frame in [&short, &first_fragment] {
            assert!(matches!(
                receive.apply(frame, &mut scratch),
                Arrived::Consumed
            ));
        }
        drop(receive);
        let c = counts.lock().unwrap();
        assert_eq!((c.stray, c.not_esp, c.received.malformed), (2, 0, 0));
    }

    fn keys_spi(suite: EspSuite, spi: u32) -> SaKeys {
        let enc = vec![spi as u8; suite.encryption_keymat_len()];
        let integ = vec![!spi as u8; suite.integrity_key_len()];
        SaKeys::new(suite, spi, enc, integ).unwrap()
    }

    /// A test frame from `src`, numbered `seq`.
    fn frame_from(buf: &mut [u8], src: Ipv4Addr, seq: u32) -> usize {
        let flow = FlowSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: src.into(),
            dst_ip: "198.18.0.2".parse().unwrap(),
            src_port: 1,
            dst_port: 2,
            ttl: 64,
            vlan: None,
        };
        let t = FrameTemplate::new(&flow, FrameSize::from_frame(128).unwrap());
        t.write(
            buf,
            Signature {
                stream: 7,
                seq,
                tx_ts: 1,
            },
        )
    }

    const MAP: TunnelMap = TunnelMap {
        first: Ipv4Addr::new(10, 1, 0, 0),
        block: 256,
        count: 7,
    };

    fn spi(i: usize) -> u32 {
        0xc100_0000 + 17 * i as u32
    }

    fn peer(i: usize) -> Ipv4Addr {
        Ipv4Addr::new(198, 19, 1, 10 + i as u8)
    }

    /// Tunnel i's host address, as `spread` gives it.
    fn host(i: usize) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(MAP.first) + i as u32 * MAP.block + 2)
    }

    #[test]
    fn the_tunnel_map_finds_each_slice_and_spreads_over_all() {
        assert_eq!(MAP.index(Ipv4Addr::new(10, 1, 0, 0)), Some(0));
        assert_eq!(MAP.index(Ipv4Addr::new(10, 1, 0, 255)), Some(0));
        assert_eq!(MAP.index(Ipv4Addr::new(10, 1, 1, 0)), Some(1));
        assert_eq!(MAP.index(Ipv4Addr::new(10, 1, 6, 255)), Some(6));
        // Outside every slice: below the first, past the last.
        assert_eq!(MAP.index(Ipv4Addr::new(10, 0, 255, 255)), None);
        assert_eq!(MAP.index(Ipv4Addr::new(10, 1, 7, 0)), None);
        assert_eq!(MAP.index(Ipv4Addr::new(0, 0, 0, 0)), None);
        assert_eq!(MAP.index(Ipv4Addr::new(255, 255, 255, 255)), None);
        let none = TunnelMap { block: 0, ..MAP };
        assert_eq!(none.index(Ipv4Addr::new(10, 1, 0, 0)), None);
        for field in [Field::SrcIp, Field::DstIp] {
            let r = MAP.spread(field, 2);
            assert_eq!(r.field, field);
            for n in 0..100u64 {
                let ip = Ipv4Addr::from(r.value(n) as u32);
                let i = (n % 7) as usize;
                assert_eq!(ip, host(i), "frame {n}");
                assert_eq!(MAP.index(ip), Some(i));
            }
            // It parses back from what it says (a valid range).
            assert_eq!(FieldRange::parse(&r.describe()).unwrap(), r);
        }
        // One-address slices: every address a tunnel.
        let dense = TunnelMap {
            first: Ipv4Addr::new(10, 9, 0, 1),
            block: 1,
            count: 3,
        };
        let r = dense.spread(Field::DstIp, 0);
        let v: Vec<u64> = (0..4).map(|n| r.value(n) & 0xff).collect();
        assert_eq!(v, vec![1, 2, 3, 1]);
    }

    /// The gateway of the many-tunnel tests.
    const GATEWAY: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);

    /// Both ends of MAP's tunnels in `suite`, tunnel i with SPI `spi(i)`
    /// from `peer(i)` to GATEWAY, counting into `counts`.
    fn many_tunnels(suite: EspSuite, counts: &SharedCounts) -> (EspSend, EspReceive) {
        let n = MAP.count as usize;
        let outbound = (0..n)
            .map(|i| (Outbound::new(keys_spi(suite, spi(i))).unwrap(), peer(i)))
            .collect();
        let inbound = (0..n)
            .map(|i| Inbound::new(keys_spi(suite, spi(i))).unwrap())
            .collect();
        (
            EspSend::many(outbound, GATEWAY, MAP, counts.clone()),
            EspReceive::many(inbound, counts.clone()),
        )
    }

    #[test]
    fn many_tunnels_seal_each_frame_with_its_tunnels_sa_and_open_it_by_spi() {
        for suite in [EspSuite::Aes128Gcm16, EspSuite::Aes256Sha256] {
            let counts = SharedCounts::default();
            let n = MAP.count as usize;
            let (mut send, mut receive) = many_tunnels(suite, &counts);
            assert!(send.describe().contains("7 tunnel"), "{}", send.describe());
            assert!(
                receive.describe().contains("7 SPIs"),
                "{}",
                receive.describe()
            );
            let mut buf = vec![0u8; 2048];
            let mut scratch = vec![0u8; 4096];
            // Tunnel i sends i + 1 frames: uneven shares, each its own.
            let mut seq = 0;
            for i in 0..n {
                for _ in 0..=i {
                    seq += 1;
                    let len = frame_from(&mut buf, host(i), seq);
                    let built = buf[..len].to_vec();
                    let sent = send.apply(&mut buf, len);
                    assert_eq!(sent, len + send.growth(len));
                    // From tunnel i's outer address to the gateway, its SPI.
                    assert_eq!(&buf[26..30], &peer(i).octets());
                    assert_eq!(&buf[30..34], &GATEWAY.octets());
                    assert_eq!(&buf[42..46], &spi(i).to_be_bytes(), "{suite} tunnel {i}");
                    match receive.apply(&buf[..sent], &mut scratch) {
                        Arrived::Inner(inner) => assert_eq!(inner, &built[..]),
                        _ => panic!("{suite} tunnel {i}: not opened"),
                    }
                }
            }
            // An SPI of no tunnel: counted, not damage, not opened.
            let len = frame_from(&mut buf, host(3), 999);
            let sent = send.apply(&mut buf, len);
            buf[42..46].copy_from_slice(&0xdead_beefu32.to_be_bytes());
            assert!(matches!(
                receive.apply(&buf[..sent], &mut scratch),
                Arrived::Consumed
            ));
            // A source in no tunnel is never sent in clear.
            let len = frame_from(&mut buf, Ipv4Addr::new(10, 1, 7, 2), 1000);
            let sent = send.apply(&mut buf, len);
            assert_eq!(sent, 60);
            assert!(buf[..60].iter().all(|&b| b == 0));
            drop((send, receive));
            let c = counts.lock().unwrap();
            assert_eq!(c.unknown_spi, 1);
            assert_eq!(c.per_tunnel.len(), n);
            for (i, t) in c.per_tunnel.iter().enumerate() {
                let sent = i as u64 + 1 + u64::from(i == 3);
                assert_eq!(t.sent.packets, sent, "tunnel {i}");
                assert_eq!(t.received.packets, i as u64 + 1, "tunnel {i}");
            }
            // The totals are the tunnels' sums.
            let sum = |f: fn(&TunnelEspCounts) -> u64| c.per_tunnel.iter().map(f).sum::<u64>();
            assert_eq!(c.sent.packets, sum(|t| t.sent.packets));
            assert_eq!(c.sent.esp_bytes, sum(|t| t.sent.esp_bytes));
            assert_eq!(c.sent.clear_bytes, sum(|t| t.sent.clear_bytes));
            assert_eq!(c.received.packets, sum(|t| t.received.packets));
            assert_eq!(c.received.esp_bytes, sum(|t| t.received.esp_bytes));
            assert_eq!(c.sent.packets, 29);
            assert_eq!(c.received.packets, 28);
        }
    }

    /// Dealt out to 3 threads, 7 tunnels: share k holds tunnels k, k + 3,
    /// ...; its thread's flows reach only those, every frame of them is
    /// sealed with its tunnel's SA, a frame of another share's tunnel is
    /// never sent in clear, and the counts are the tunnels' as if unsplit.
    /// A single SA, or flows that do not spread over the tunnels as
    /// `TunnelMap::spread` does, are not dealt out.
    #[test]
    fn tunnels_dealt_out_to_threads_keep_their_sas_and_counts() {
        let suite = EspSuite::Aes128Gcm16;
        let counts = SharedCounts::default();
        let n = MAP.count as usize;
        let inbox = SaInbox::new();
        let (send, mut receive) = many_tunnels(suite, &counts);
        let mut send = send.take_new_sas(inbox.clone());
        let flows = Flows {
            ranges: vec![MAP.spread(Field::SrcIp, 2)],
            ..Flows::default()
        };
        let mut shares = send.split(3).expect("7 tunnels deal out to 3 threads");
        drop(send);
        assert_eq!(shares.len(), 3);
        // Tunnel 4 (share 1's) is rekeyed: only share 1 takes its SA.
        inbox.push(4, Outbound::new(keys_spi(suite, spi(40))).unwrap());
        let mut buf = vec![0u8; 2048];
        let mut scratch = vec![0u8; 4096];
        let mut seen = vec![0u64; n];
        for (k, share) in shares.iter_mut().enumerate() {
            let mine = share.thread_flows(&flows).expect("spread flows");
            let r = mine.range(Field::SrcIp).unwrap();
            // 10 frames of the thread's flows: its tunnels in turn.
            for m in 0..10u64 {
                let src = Ipv4Addr::from(r.value(m) as u32);
                let i = MAP.index(src).expect("in a tunnel");
                assert_eq!(i % 3, k, "thread {k} frame {m}: tunnel {i}");
                assert_eq!(src, host(i));
                let len = frame_from(&mut buf, src, m as u32 + 1);
                let built = buf[..len].to_vec();
                let sent = share.apply(&mut buf, len);
                let want = if i == 4 { spi(40) } else { spi(i) };
                assert_eq!(&buf[42..46], &want.to_be_bytes(), "tunnel {i}");
                if i != 4 {
                    match receive.apply(&buf[..sent], &mut scratch) {
                        Arrived::Inner(inner) => assert_eq!(inner, &built[..]),
                        _ => panic!("tunnel {i}: not opened"),
                    }
                }
                seen[i] += 1;
            }
            // Another share's tunnel: never in clear.
            let other = host((k + 1) % 3);
            let len = frame_from(&mut buf, other, 99);
            assert_eq!(share.apply(&mut buf, len), 60);
            assert!(buf[..60].iter().all(|&b| b == 0));
        }
        for share in &mut shares {
            share.trial_ends();
        }
        let c = counts.lock().unwrap();
        assert_eq!(c.per_tunnel.len(), n);
        for (i, t) in c.per_tunnel.iter().enumerate() {
            assert_eq!(t.sent.packets, seen[i], "tunnel {i}");
        }
        assert_eq!(c.sent.packets, 30);
        assert_eq!(c.new_sas_taken, 1);
        drop(c);

        // One SA is not dealt out; nor are flows that do not follow the
        // tunnels (a range of its own on the source).
        let mut one = EspSend::new(
            Outbound::new(keys_spi(suite, 1)).unwrap(),
            peer(0),
            GATEWAY,
            SharedCounts::default(),
        );
        assert!(one.split(2).is_none());
        assert!(one.describe().contains("SPI"), "left whole");
        let odd = Flows {
            ranges: vec![FieldRange {
                step: 1,
                ..MAP.spread(Field::SrcIp, 2)
            }],
            ..Flows::default()
        };
        assert!(shares[0].thread_flows(&odd).is_none());
        assert!(shares[0].thread_flows(&Flows::default()).is_none());
    }

    /// Decryption on 3 threads: tunnel i's SAs on thread i mod 3 (port
    /// B's fanout steers tunnel i's ESP there), port A's generator thread
    /// k sending only those tunnels' destinations. Each share opens its own
    /// tunnels' frames and not another's, takes only its tunnels' new SAs,
    /// and the shares' counts add up in the one place reports read.
    #[test]
    fn tunnels_decrypted_on_threads_keep_their_sas_and_counts() {
        let suite = EspSuite::Aes128Gcm16;
        let counts = SharedCounts::default();
        let n = MAP.count as usize;
        let inbox = SaInbox::new();
        let (mut send, receive) = many_tunnels(suite, &counts);
        let mut receive = receive.take_new_sas(inbox.clone());
        let mut shares = receive.split(3).expect("7 tunnels deal out to 3 threads");
        assert_eq!(shares.len(), 3);
        assert!(receive.split(2).is_none(), "split once");
        drop(receive);
        // Port A: thread k's destinations are its receiving thread's tunnels.
        let flows = Flows {
            ranges: vec![MAP.spread(Field::DstIp, 2)],
            ..Flows::default()
        };
        let senders = TunnelSpread::new(MAP)
            .split(3)
            .expect("7 tunnels, 3 threads");
        for (k, t) in senders.iter().enumerate() {
            let r = t.thread_flows(&flows).expect("spread flows");
            let r = r.range(Field::DstIp).unwrap();
            let tunnels: Vec<usize> = (0..5)
                .map(|m| MAP.index(Ipv4Addr::from(r.value(m) as u32)).unwrap())
                .collect();
            assert!(
                tunnels.iter().all(|i| i % 3 == k),
                "thread {k}: {tunnels:?}"
            );
            assert_eq!(tunnels[0], k);
        }
        assert!(
            TunnelSpread::new(MAP).split(8).is_none(),
            "more threads than tunnels"
        );
        // Tunnel 4 (share 1's) gets a new SA: only share 1 takes it.
        inbox.push(4, Inbound::new(keys_spi(suite, spi(40))).unwrap());
        let mut buf = vec![0u8; 2048];
        let mut scratch = vec![0u8; 4096];
        for i in 0..n {
            for m in 0..3u32 {
                let len = frame_from(&mut buf, host(i), m + 1);
                let built = buf[..len].to_vec();
                let sent = send.apply(&mut buf, len);
                match shares[i % 3].apply(&buf[..sent], &mut scratch) {
                    Arrived::Inner(inner) => assert_eq!(inner, &built[..], "tunnel {i}"),
                    _ => panic!("tunnel {i}: not opened by share {}", i % 3),
                }
                if m == 0 {
                    // Another share knows no SA of the tunnel.
                    let other = &mut shares[(i + 1) % 3];
                    assert!(matches!(
                        other.apply(&buf[..sent], &mut scratch),
                        Arrived::Consumed
                    ));
                }
            }
        }
        for share in &mut shares {
            share.trial_ends();
        }
        let c = counts.lock().unwrap();
        assert_eq!(c.per_tunnel.len(), n);
        for (i, t) in c.per_tunnel.iter().enumerate() {
            assert_eq!(t.received.packets, 3, "tunnel {i}");
        }
        assert_eq!(c.received.packets, 3 * n as u64);
        assert_eq!(
            c.unknown_spi, n as u64,
            "each tunnel's frame at another share"
        );
        assert_eq!(c.new_sas_taken, 1);
        assert!(!inbox.pending());
    }

    /// Raw ESP: IPv4 protocol 50 straight after the outer header, 8 bytes
    /// shorter than ESP in UDP, opened the same; the counts say raw.
    #[test]
    fn a_raw_esp_frame_is_protocol_50_and_8_bytes_shorter() {
        for suite in EspSuite::ALL {
            let counts = SharedCounts::default();
            let (src, dst) = (Ipv4Addr::new(198, 19, 0, 2), Ipv4Addr::new(198, 19, 0, 1));
            let sa = || Outbound::new(keys(suite)).unwrap();
            let mut udp = EspSend::new(sa(), src, dst, SharedCounts::default());
            let mut raw =
                EspSend::new(sa(), src, dst, counts.clone()).encapsulated(Encapsulation::Raw);
            let mut receive = EspReceive::new(Inbound::new(keys(suite)).unwrap(), counts.clone())
                .encapsulated(Encapsulation::Raw);
            assert!(
                raw.describe().contains("raw (IP protocol 50)"),
                "{}",
                raw.describe()
            );
            assert!(receive.describe().contains("raw"), "{}", receive.describe());
            for size in [64, 512, 1518] {
                let mut buf = vec![0u8; 2048];
                let len = test_frame(&mut buf, size);
                let built = buf[..len].to_vec();
                assert_eq!(raw.growth(len) + 8, udp.growth(len), "{suite} {size}");
                assert_eq!(receive.growth(len) + 8, raw.growth(len) + 8);
                let sent = raw.apply(&mut buf, len);
                assert_eq!(sent, len + raw.growth(len), "{suite} {size}");
                assert_eq!(buf[23], 50, "{suite} {size}: IP protocol");
                assert_eq!(&buf[26..30], &src.octets());
                assert_eq!(&buf[30..34], &dst.octets());
                // The SPI right behind the IPv4 header.
                assert_eq!(&buf[34..38], &0xc0ffee01u32.to_be_bytes());
                let mut scratch = vec![0u8; 4096];
                match receive.apply(&buf[..sent], &mut scratch) {
                    Arrived::Inner(inner) => assert_eq!(inner, &built[..]),
                    _ => panic!("{suite} {size}: not opened"),
                }
                let mut other = vec![0u8; 2048];
                let len = test_frame(&mut other, size);
                assert_eq!(udp.apply(&mut other, len), sent + 8);
            }
            drop((raw, receive));
            let c = counts.lock().unwrap();
            assert!(c.raw_esp);
            assert_eq!((c.sent.packets, c.received.packets), (3, 3));
        }
    }

    #[test]
    fn one_tunnel_counts_as_a_list_of_one() {
        let counts = SharedCounts::default();
        let suite = EspSuite::Aes128Gcm16;
        let mut send = EspSend::new(
            Outbound::new(keys(suite)).unwrap(),
            peer(0),
            Ipv4Addr::new(198, 19, 0, 1),
            counts.clone(),
        );
        let mut receive = EspReceive::new(Inbound::new(keys(suite)).unwrap(), counts.clone());
        assert_eq!(send.frames_left(), Some(u32::MAX as u64));
        let mut buf = vec![0u8; 2048];
        let mut scratch = vec![0u8; 4096];
        // Any source: one tunnel takes every frame.
        let len = frame_from(&mut buf, Ipv4Addr::new(192, 0, 2, 9), 1);
        let sent = send.apply(&mut buf, len);
        assert!(matches!(
            receive.apply(&buf[..sent], &mut scratch),
            Arrived::Inner(_)
        ));
        drop((send, receive));
        let c = counts.lock().unwrap();
        assert_eq!(c.per_tunnel.len(), 1);
        assert_eq!(c.per_tunnel[0].sent, c.sent);
        assert_eq!(c.per_tunnel[0].received, c.received);
        assert_eq!(c.sent.packets, 1);
    }

    #[test]
    fn an_inbox_hands_over_what_was_pushed_once_in_order() {
        let inbox = SaInbox::<u32>::new();
        assert!(!inbox.pending());
        inbox.push(1, 10);
        inbox.push(0, 20);
        assert!(inbox.pending());
        assert_eq!(inbox.take_where(|_| true), vec![(1, 10), (0, 20)]);
        assert!(!inbox.pending());
        assert!(inbox.take_where(|_| true).is_empty());
    }

    /// Seals a frame from `src` numbered `seq`; returns the ESP frame and
    /// the frame as built.
    fn seal_one(send: &mut EspSend, src: Ipv4Addr, seq: u32) -> (Vec<u8>, Vec<u8>) {
        let mut buf = vec![0u8; 2048];
        let len = frame_from(&mut buf, src, seq);
        let built = buf[..len].to_vec();
        let sent = send.apply(&mut buf, len);
        assert_eq!(sent, len + send.growth(len));
        (buf[..sent].to_vec(), built)
    }

    fn opens(receive: &mut EspReceive, esp: &[u8], built: &[u8]) -> bool {
        let mut scratch = vec![0u8; 4096];
        matches!(receive.apply(esp, &mut scratch), Arrived::Inner(i) if i == built)
    }

    fn esp_spi(frame: &[u8]) -> u32 {
        u32::from_be_bytes(frame[42..46].try_into().unwrap())
    }

    #[test]
    fn one_tunnel_rekeyed_under_load_sends_on_the_new_sa_and_accepts_both() {
        let suite = EspSuite::Aes128Gcm16;
        let counts = SharedCounts::default();
        let (old, new) = (0xc0ff_0001, 0xc0ff_0002);
        let out_box = SaInbox::new();
        let in_box = SaInbox::new();
        let mut send = EspSend::new(
            Outbound::new(keys_spi(suite, old)).unwrap(),
            peer(0),
            Ipv4Addr::new(198, 19, 0, 1),
            counts.clone(),
        )
        .take_new_sas(out_box.clone());
        let mut receive =
            EspReceive::new(Inbound::new(keys_spi(suite, old)).unwrap(), counts.clone())
                .take_new_sas(in_box.clone());
        let src = Ipv4Addr::new(192, 0, 2, 9);
        // Three frames on the old SA; the last one is still in flight
        // when the SAs change.
        for seq in 1..=2 {
            let (esp, built) = seal_one(&mut send, src, seq);
            assert_eq!(esp_spi(&esp), old);
            assert!(opens(&mut receive, &esp, &built));
        }
        let late = seal_one(&mut send, src, 3);
        out_box.push(0, Outbound::new(keys_spi(suite, new)).unwrap());
        in_box.push(0, Inbound::new(keys_spi(suite, new)).unwrap());
        // The next frames: the new SPI, its sequence numbers from 1, and
        // opened with the new inbound SA (the old one has other keys).
        for seq in 4..=8 {
            let (esp, built) = seal_one(&mut send, src, seq);
            assert_eq!(esp_spi(&esp), new, "frame {seq}");
            assert_eq!(&esp[46..50], &(seq - 3).to_be_bytes(), "frame {seq}");
            assert!(opens(&mut receive, &esp, &built), "frame {seq}");
        }
        // The frame sealed with the old SA arrives after the rekey.
        assert_eq!(esp_spi(&late.0), old);
        assert!(opens(&mut receive, &late.0, &late.1));
        // A replay of it on the old SA is still caught by the old window.
        assert!(!opens(&mut receive, &late.0, &late.1));
        assert!(
            receive.describe().contains("1 tunnel(s), 2 SPIs"),
            "{}",
            receive.describe()
        );
        assert!(
            send.describe().contains(&format!("SPI 0x{new:08x}")),
            "{}",
            send.describe()
        );
        // frames_left is the new SA's.
        assert_eq!(send.frames_left(), Some(u32::MAX as u64 - 5));
        drop((send, receive));
        let c = counts.lock().unwrap();
        assert_eq!(c.new_sas_taken, 2);
        assert_eq!(c.sent.packets, 8);
        assert_eq!(c.received.packets, 8);
        assert_eq!(c.received.replays, 1);
        assert_eq!(c.unknown_spi, 0);
        assert_eq!(c.per_tunnel.len(), 1);
        assert_eq!(c.per_tunnel[0].sent, c.sent);
        assert_eq!(c.per_tunnel[0].received, c.received);
        // Bytes add up across the swap: 8 frames of one size.
        assert_eq!(c.sent.esp_bytes, c.received.esp_bytes);
        assert_eq!(c.sent.clear_bytes % 8, 0);
    }

    /// The gateway sends on a rekey's new SA before linerate's receiver
    /// has it: the frame is refused (an unknown SPI, lost) and, once the
    /// SA comes, counted as arrived before its install (the tester's
    /// loss); a foreign SPI stays only unknown.
    #[test]
    fn a_frame_on_a_new_sa_before_its_install_is_counted_as_such() {
        let suite = EspSuite::Aes128Gcm16;
        let counts = SharedCounts::default();
        let (old, new, foreign) = (0xc0ff_0001, 0xc0ff_0002, 0xdead_0003);
        let in_box = SaInbox::new();
        let mut receive =
            EspReceive::new(Inbound::new(keys_spi(suite, old)).unwrap(), counts.clone())
                .take_new_sas(in_box.clone());
        let sender = |spi| {
            EspSend::new(
                Outbound::new(keys_spi(suite, spi)).unwrap(),
                peer(0),
                Ipv4Addr::new(198, 19, 0, 1),
                SharedCounts::default(),
            )
        };
        let (mut on_old, mut on_new, mut on_foreign) = (sender(old), sender(new), sender(foreign));
        let src = Ipv4Addr::new(192, 0, 2, 9);
        let (esp, built) = seal_one(&mut on_old, src, 1);
        assert!(opens(&mut receive, &esp, &built));
        for seq in 1..=2 {
            let (early, built) = seal_one(&mut on_new, src, seq);
            assert!(!opens(&mut receive, &early, &built), "no SA yet");
        }
        let (stray, built) = seal_one(&mut on_foreign, src, 1);
        assert!(!opens(&mut receive, &stray, &built));
        in_box.push(0, Inbound::new(keys_spi(suite, new)).unwrap());
        let (esp, built) = seal_one(&mut on_new, src, 3);
        assert!(opens(&mut receive, &esp, &built), "the new SA, taken");
        drop(receive);
        let c = counts.lock().unwrap();
        assert_eq!((c.unknown_spi, c.before_install), (3, 2));
        assert_eq!(c.received.packets, 2);
    }

    #[test]
    fn many_tunnels_rekeyed_under_load_keep_exact_counts_per_tunnel() {
        let suite = EspSuite::Aes256Sha256;
        let counts = SharedCounts::default();
        let n = MAP.count as usize;
        let gateway = Ipv4Addr::new(198, 19, 0, 1);
        let out_box = SaInbox::new();
        let in_box = SaInbox::new();
        let mut send = EspSend::many(
            (0..n)
                .map(|i| (Outbound::new(keys_spi(suite, spi(i))).unwrap(), peer(i)))
                .collect(),
            gateway,
            MAP,
            counts.clone(),
        )
        .take_new_sas(out_box.clone());
        let mut receive = EspReceive::many(
            (0..n)
                .map(|i| Inbound::new(keys_spi(suite, spi(i))).unwrap())
                .collect(),
            counts.clone(),
        )
        .take_new_sas(in_box.clone());
        let rekeyed = |i: usize| spi(i) + 0x0001_0000;
        let mut seq = 0;
        // Round 1: tunnel i sends i + 1 frames on its first SA.
        for i in 0..n {
            for _ in 0..=i {
                seq += 1;
                let (esp, built) = seal_one(&mut send, host(i), seq);
                assert_eq!(esp_spi(&esp), spi(i));
                assert!(opens(&mut receive, &esp, &built));
            }
        }
        // What a report reads at the end of a trial, before the rekey.
        send.trial_ends();
        receive.trial_ends();
        let before = counts.lock().unwrap().clone();
        assert_eq!(before.per_tunnel.len(), n);
        assert_eq!(before.sent.packets, 28);
        // Tunnels 1, 3 and 5 are rekeyed; one SA for a tunnel that does
        // not exist is ignored on both sides.
        for i in [1, 3, 5] {
            out_box.push(i, Outbound::new(keys_spi(suite, rekeyed(i))).unwrap());
            in_box.push(i, Inbound::new(keys_spi(suite, rekeyed(i))).unwrap());
        }
        out_box.push(n, Outbound::new(keys_spi(suite, 0xdead_0001)).unwrap());
        in_box.push(n, Inbound::new(keys_spi(suite, 0xdead_0001)).unwrap());
        // Round 2: tunnel i sends 2 frames; the rekeyed ones on the new
        // SPI, one more frame each of them on the old SPI (late).
        for i in 0..n {
            let re = [1, 3, 5].contains(&i);
            for _ in 0..2 {
                seq += 1;
                let (esp, built) = seal_one(&mut send, host(i), seq);
                assert_eq!(esp_spi(&esp), if re { rekeyed(i) } else { spi(i) });
                assert!(opens(&mut receive, &esp, &built), "tunnel {i}");
            }
        }
        assert!(
            receive.describe().contains("7 tunnel(s), 10 SPIs"),
            "{}",
            receive.describe()
        );
        // Old-SPI frames, in flight across the rekey: built by an SA with
        // the old keys that continues where the first one stopped.
        for i in [1, 3, 5] {
            let mut old = Outbound::new(keys_spi(suite, spi(i))).unwrap();
            let mut buf = vec![0u8; 2048];
            let len = frame_from(&mut buf, host(i), 9999);
            let inner = buf[ETH_HEADER_LEN..len].to_vec();
            let headers = OuterHeaders::esp_in_udp(
                MacAddr([2, 0, 0, 0, 0, 2]),
                MacAddr([2, 0, 0, 0, 0, 1]),
                gateway,
                peer(i),
            );
            let framer = Framer::new(&headers);
            let mut frame = vec![0u8; 2048];
            // Past the i + 1 sequence numbers the tunnel used in round 1.
            let mut flen = 0;
            for _ in 0..=i + 1 {
                flen = framer
                    .seal(&mut old, &inner, NEXT_HEADER_IPV4, &mut frame)
                    .unwrap();
            }
            assert_eq!(esp_spi(&frame[..flen]), spi(i));
            let mut scratch = vec![0u8; 4096];
            assert!(
                matches!(
                    receive.apply(&frame[..flen], &mut scratch),
                    Arrived::Inner(_)
                ),
                "tunnel {i}'s old SPI"
            );
        }
        drop((send, receive));
        let c = counts.lock().unwrap();
        assert_eq!(c.new_sas_taken, 6);
        assert_eq!(c.unknown_spi, 0);
        assert_eq!(c.per_tunnel.len(), n);
        for (i, t) in c.per_tunnel.iter().enumerate() {
            let re = u64::from([1, 3, 5].contains(&i));
            assert_eq!(t.sent.packets, i as u64 + 1 + 2, "tunnel {i}");
            assert_eq!(t.received.packets, i as u64 + 1 + 2 + re, "tunnel {i}");
            // Never backwards across the swap.
            let b = before.per_tunnel[i];
            assert!(t.sent.packets >= b.sent.packets && t.sent.esp_bytes >= b.sent.esp_bytes);
            assert!(t.received.packets >= b.received.packets);
        }
        let sum = |f: fn(&TunnelEspCounts) -> u64| c.per_tunnel.iter().map(f).sum::<u64>();
        assert_eq!(c.sent.packets, sum(|t| t.sent.packets));
        assert_eq!(c.sent.esp_bytes, sum(|t| t.sent.esp_bytes));
        assert_eq!(c.received.packets, sum(|t| t.received.packets));
        assert_eq!(c.received.esp_bytes, sum(|t| t.received.esp_bytes));
        assert_eq!(c.sent.packets, 28 + 14);
        assert_eq!(c.received.packets, 28 + 14 + 3);
    }

    fn classify_test(frame: &[u8]) -> Option<Signature> {
        match linerate_wire::classify(frame, linerate_wire::classify::ANY_PORT) {
            Received::Test { sig } => Some(sig),
            _ => None,
        }
    }
}
