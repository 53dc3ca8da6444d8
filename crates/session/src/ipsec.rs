//! linerate as the IPsec peer of one VPN gateway (`--ipsec`): port A is the
//! gateway's LAN side, port B its WAN side, where linerate negotiates a
//! CHILD_SA by IKEv2 (linerate-ike) and then encrypts and decrypts the test
//! frames itself (the engine's ESP transforms): the gateway's own
//! encryption and decryption throughput, as an IXIA that is a VPN peer
//! measures it.
//!
//! IKE runs over the kernel's UDP stack in port B's namespace: linerate's
//! outer address (or its peers' addresses, `--tunnels`) is put on port B
//! for the run (when the port does not have it already). While the trials
//! run, the keeper thread (`ike_keeper`) answers the gateway's requests
//! (liveness checks, its rekeys), rekeys every `--rekey` period, and hands
//! each new CHILD_SA's keys to the engine's transforms. The ESP that shares
//! port 4500 with IKE is the engine's: a socket filter keeps it off the
//! IKE socket, and the AF_XDP engine passes only IKE to the kernel. With
//! raw ESP (`--esp-encap raw|auto`, no NAT between), IKE stays on UDP 4500
//! and the ESP is IP protocol 50, which a raw socket claims in port B's
//! namespace so the kernel does not answer it (`linerate_engine::esp_sink`).
//! At the end the IKE SAs are deleted and the addresses taken off.

mod counts;
mod many;
mod negotiate;
pub(crate) mod plan;
mod selectors;

use crate::error::{bail, err, Result};
use crate::ike_keeper::{Handoff, Keeper, Peers, RekeyTotals};
use crate::peers::{ip_out as ip, PeerAddresses};
use crate::secret_file::write_private;
use counts::PeerCounts;
use linerate_engine::esp_sink::{ProtocolSink, IPPROTO_ESP};
use linerate_engine::ipsec::{EspReceive, EspSend, SaInbox, SharedCounts, ESP_IN_UDP};
use linerate_engine::transform::{ReceiveTransform, SendTransform};
use linerate_engine::HostConfig;
use linerate_esp::{Encapsulation, EspSuite, Inbound, Outbound};
use linerate_ike::{Fleet, Session};
use linerate_results::report::thousands;
use negotiate::{connect_one, Checked};
use selectors::{check_selectors, selectors_text};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

pub use linerate_results::ipsec::{
    Direction, EspTrial, IkeRekeys, IpsecRun, RekeyRecord, TrialRekeys, TunnelsRun,
};
pub use plan::{
    check_identity, encapsulation_label, EspEncap, Every, IpsecPlan, Net, PeerAddrs, Slices,
    MAX_IDENTITY,
};

/// Port B's ESP transforms: sending (encrypting) and receiving.
pub type Transforms = (Box<dyn SendTransform>, Box<dyn ReceiveTransform>);

/// The ESP keys until the engine takes them.
enum Keys {
    /// One tunnel's SAs, and how its ESP travels.
    One(Box<(Outbound, Inbound)>, Encapsulation),
    /// Per tunnel: the outbound SA and its peer's address; the inbound SA;
    /// how every tunnel's ESP travels.
    Many(Vec<(Outbound, Ipv4Addr)>, Vec<Inbound>, Encapsulation),
}

/// An established tunnel to the gateway, or N of them (`--tunnels`): the
/// IKE SAs (deleted when this is dropped), the ESP keys until the engine
/// takes them, and their counts.
pub struct IpsecPeer {
    session: Option<Session>,
    /// `--tunnels N`: every peer's IKE state, driven by one thread.
    fleet: Option<Fleet>,
    /// `--tunnels N`: the peers' addresses on port B (off during trials).
    addresses: Option<PeerAddresses>,
    keys: Option<Keys>,
    /// Port B's namespace and interface, where the outer address goes.
    netns: Option<String>,
    ifname: String,
    /// The address (`ip/prefix`) put on port B for IKE, taken off between.
    address: Option<String>,
    pub counts: SharedCounts,
    pub record: IpsecRun,
    /// The test frames' address behind linerate (in `remote_net`); with
    /// `--tunnels`, tunnel 0's.
    pub inner: Ipv4Addr,
    /// `--tunnels N`: the slices of the tunnels.
    pub slices: Option<Slices>,
    /// From the first trial on: the thread that answers the gateway,
    /// rekeys (`--rekey`) and hands new keys to the data path; it holds
    /// the session or fleet until the run ends.
    keeper: Option<Keeper>,
    rekey: Every,
    /// `--esp-keys`: where the keys of later CHILD_SAs are added too.
    esp_keys: Option<PathBuf>,
}

/// Tunnel 0 as the run's record starts it, before negotiation: where
/// one tunnel and many differ (see [`IpsecPeer::unnegotiated`]).
struct FirstTunnel {
    esp: EspSuite,
    gateway: Ipv4Addr,
    /// linerate's end of it: port B's address, or the first peer's.
    peer: Ipv4Addr,
    /// The networks its CHILD_SA protects: linerate's side (the network
    /// behind linerate, or tunnel 0's slice of it), the gateway's.
    local_net: Net,
    remote_net: Net,
    /// The test frames' address in `local_net`.
    inner: Ipv4Addr,
}

impl IpsecPeer {
    /// Negotiates the tunnel from port B (`ifname` in `netns`, whose host
    /// is `host_b`) to the gateway; `lan` is port A's host, whose subnet
    /// is the gateway's LAN unless the plan names it. `stop` (a signal)
    /// ends the negotiation: what the gateway set up is deleted, and the
    /// error is the run's interruption.
    pub fn establish(
        plan: &IpsecPlan,
        netns: Option<&str>,
        ifname: &str,
        host_b: &HostConfig,
        lan: &HostConfig,
        stop: &AtomicBool,
    ) -> Result<IpsecPeer> {
        if plan.tunnels > 1 {
            return Self::establish_many(plan, netns, ifname, host_b, lan, stop);
        }
        let checked = Checked::of(
            plan,
            host_b,
            lan,
            "which the gateway's tunnel protects (e.g. 198.19.1.0/24)",
        )?;
        let remote_net = checked.remote_net;
        if remote_net.contains(host_b.ip) {
            bail!(BadInput, "--remote-net {remote_net} holds port B's own address {}: the network behind linerate must be another one than its WAN subnet", host_b.ip);
        }
        let first = FirstTunnel {
            esp: checked.esp,
            gateway: checked.gateway,
            peer: host_b.ip,
            local_net: remote_net,
            remote_net: checked.local_net,
            inner: remote_net.host(),
        };
        let mut peer = Self::unnegotiated(plan, netns, ifname, first);
        peer.address_on(checked.outer, checked.gateway)?;
        let session = connect_one(plan, netns, host_b, checked, stop)?;
        let child = session.child();
        let frames = plan.frame_addresses(peer.inner, lan.ip);
        check_selectors(&child.local_ts, &child.remote_ts, &frames, None)?;
        peer.record.local_net = selectors_text(&session.child().local_ts);
        peer.record.remote_net = selectors_text(&session.child().remote_ts);
        peer.take_first_child(session, plan, host_b)?;
        Ok(peer)
    }

    /// The one place a peer is made, for one tunnel and for many: tunnel
    /// 0's record without what negotiation adds (see
    /// [`take_keys`](Self::take_keys)), nothing running yet (no session,
    /// fleet, peers' addresses or keeper).
    fn unnegotiated(
        plan: &IpsecPlan,
        netns: Option<&str>,
        ifname: &str,
        first: FirstTunnel,
    ) -> IpsecPeer {
        IpsecPeer {
            session: None,
            fleet: None,
            addresses: None,
            slices: None,
            keys: None,
            netns: netns.map(str::to_string),
            ifname: ifname.to_string(),
            address: None,
            counts: SharedCounts::default(),
            record: IpsecRun {
                direction: plan.direction,
                esp: first.esp.name().to_string(),
                esp_label: first.esp.label().to_string(),
                // Known once the CHILD_SAs are (take_keys).
                encapsulation: encapsulation_label(ESP_IN_UDP).to_string(),
                ike: String::new(),
                gateway: first.gateway,
                peer: first.peer,
                spi_out: 0,
                spi_in: 0,
                local_net: first.local_net.to_string(),
                remote_net: first.remote_net.to_string(),
                tunnels: None,
            },
            inner: first.inner,
            keeper: None,
            rekey: plan.rekeys(),
            esp_keys: plan.esp_keys.clone(),
        }
    }

    /// Takes the first keys of the negotiated tunnels for the data path,
    /// and records the IKE suite, tunnel 0's SPIs (outbound, inbound) and
    /// how the ESP travels.
    fn take_keys(&mut self, keys: Keys, ike: String, spis: (u32, u32)) {
        let encapsulation = match &keys {
            Keys::One(_, encapsulation) | Keys::Many(_, _, encapsulation) => *encapsulation,
        };
        self.record.encapsulation = encapsulation_label(encapsulation).to_string();
        self.record.ike = ike;
        (self.record.spi_out, self.record.spi_in) = spis;
        self.keys = Some(keys);
    }

    /// Takes the negotiated CHILD_SA of one tunnel: refuses an
    /// encapsulation `--esp-encap` does not allow, makes the data path's SAs, writes
    /// `--esp-keys`, records the SPIs and suite, and keeps the session
    /// (its socket filtering the ESP off).
    fn take_first_child(
        &mut self,
        session: Session,
        plan: &IpsecPlan,
        host_b: &HostConfig,
    ) -> Result<()> {
        let gateway = self.record.gateway;
        let child = session.child();
        let encapsulation = plan.esp_encap.outcome(child.udp_encap, gateway)?;
        let outbound = Outbound::new(child.outbound.clone()).map_err(|e| err!(Failed, "{e}"))?;
        let inbound = Inbound::new(child.inbound.clone()).map_err(|e| err!(Failed, "{e}"))?;
        if let Some(path) = &plan.esp_keys {
            let lines = format!(
                "{}\n{}\n",
                child.outbound.wireshark_esp_sa(host_b.ip, gateway),
                child.inbound.wireshark_esp_sa(gateway, host_b.ip)
            );
            write_private(path, &lines)
                .map_err(|e| err!(Environment, "--esp-keys {}: {e}", path.display()))?;
        }
        let spis = (child.outbound.spi, child.inbound.spi);
        // The address stays on port B while the trials run: the gateway's
        // requests (liveness checks, its rekeys) and the answers to
        // linerate's rekeys reach the keeper; the ESP they share port
        // 4500 with is filtered off its socket in the kernel.
        session
            .ignore_esp()
            .map_err(|e| err!(Environment, "IPsec: {e}"))?;
        let keys = Keys::One(Box::new((outbound, inbound)), encapsulation);
        self.take_keys(keys, session.ike_suite().to_string(), spis);
        self.session = Some(session);
        Ok(())
    }

    /// The engine's ESP transforms, once: the keys move into them, and
    /// the keeper starts, which hands them the keys of every later
    /// CHILD_SA.
    pub fn transforms(&mut self) -> Result<Option<Transforms>> {
        let transforms = self.first_transforms()?;
        let Some((send, receive)) = transforms else {
            return Ok(None);
        };
        let (new_out, new_in) = (SaInbox::new(), SaInbox::new());
        let send = send.take_new_sas(new_out.clone());
        let receive = receive.take_new_sas(new_in.clone());
        let peers = match (self.session.take(), self.fleet.take()) {
            (Some(s), _) => Some(Peers::One(Box::new(s))),
            (None, Some(f)) => Some(Peers::Many(Box::new(f))),
            (None, None) => None,
        };
        if let Some(peers) = peers {
            let handoff = Handoff {
                outbound: new_out,
                inbound: new_in,
                esp_keys: self
                    .esp_keys
                    .clone()
                    .map(|p| (p, self.record.peer, self.record.gateway)),
            };
            self.keeper = Some(Keeper::start(peers, handoff, self.rekey));
        }
        Ok(Some((Box::new(send), Box::new(receive))))
    }

    /// The ESP transforms of the tunnels' first CHILD_SAs.
    fn first_transforms(&mut self) -> Result<Option<(EspSend, EspReceive)>> {
        match self.keys.take() {
            None => Ok(None),
            Some(Keys::One(keys, encapsulation)) => {
                let (outbound, inbound) = *keys;
                let send = EspSend::new(
                    outbound,
                    self.record.peer,
                    self.record.gateway,
                    self.counts.clone(),
                )
                .encapsulated(encapsulation);
                let receive =
                    EspReceive::new(inbound, self.counts.clone()).encapsulated(encapsulation);
                Ok(Some((send, self.claim_raw_esp(receive, encapsulation)?)))
            }
            Some(Keys::Many(outbound, inbound, encapsulation)) => {
                let Some(slices) = self.slices else {
                    bail!(Failed, "many tunnels without their slices");
                };
                let send = EspSend::many(
                    outbound,
                    self.record.gateway,
                    slices.map(),
                    self.counts.clone(),
                )
                .encapsulated(encapsulation);
                let receive =
                    EspReceive::many(inbound, self.counts.clone()).encapsulated(encapsulation);
                Ok(Some((send, self.claim_raw_esp(receive, encapsulation)?)))
            }
        }
    }

    /// With raw ESP, `receive` holds a claim on IP protocol 50: port B's
    /// addresses are up for the keeper's IKE, and the kernel must not
    /// answer the gateway's raw ESP.
    fn claim_raw_esp(
        &self,
        receive: EspReceive,
        encapsulation: Encapsulation,
    ) -> Result<EspReceive> {
        if encapsulation != Encapsulation::Raw {
            return Ok(receive);
        }
        let sink = ProtocolSink::claim(self.netns.as_deref(), IPPROTO_ESP).map_err(|e| {
            err!(
                Environment,
                "cannot claim IP protocol 50 (raw ESP) on port {}: {e}",
                self.ifname
            )
        })?;
        Ok(receive.holding(Box::new(sink)))
    }

    /// What the SAs counted so far, and how many rekeys ended.
    pub fn counts(&self) -> PeerCounts {
        let log = self.keeper.as_ref().map(|k| k.log.clone());
        let (rekeys, totals, deleted) = log.as_ref().map_or((0, RekeyTotals::default(), 0), |l| {
            let l = l.lock().unwrap_or_else(|p| p.into_inner());
            (l.ended(), l.totals, l.deleted.len())
        });
        PeerCounts {
            esp: self.counts.lock().map(|c| c.clone()).unwrap_or_default(),
            at: Instant::now(),
            rekeys,
            totals,
            deleted,
            log,
        }
    }

    /// Each tunnel's SPIs now (out, in): the first CHILD_SA's, or the
    /// newest after rekeys.
    pub fn current_spis(&self) -> Vec<(u32, u32)> {
        if let Some(k) = &self.keeper {
            return k.log.lock().unwrap_or_else(|p| p.into_inner()).spis.clone();
        }
        match &self.record.tunnels {
            Some(t) => t
                .spi_out
                .iter()
                .copied()
                .zip(t.spi_in.iter().copied())
                .collect(),
            None => vec![(self.record.spi_out, self.record.spi_in)],
        }
    }

    /// Adds to a trial's result what the SAs did during it (between
    /// `before` and now): the ESP counts, and the frames linerate's ESP
    /// refused before it had their SA as the tester's loss.
    /// A trial during which the IKE keeper thread died is refused: its
    /// loss would be the tester's, not the gateway's.
    pub fn account_trial(
        &self,
        before: &PeerCounts,
        result: &mut linerate_results::TrialResult,
    ) -> Result<(), linerate_engine::EngineError> {
        if self.keeper.as_ref().is_some_and(Keeper::died) {
            return Err(linerate_engine::EngineError::Thread(
                "the IKE keeper, which answers the gateway and rekeys the tunnels, stopped during the trial (a bug: please report it with the command); the trial is not counted".into(),
            ));
        }
        let esp = self.counts().since(before);
        if let Some(w) = result.loss_where.as_mut() {
            *w = w.with_tester_esp(esp.before_install);
        }
        result.esp = Some(esp);
        Ok(())
    }

    /// What the run notes say about the tunnel.
    pub fn note(&self) -> String {
        let r = &self.record;
        if let Some(t) = &r.tunnels {
            return format!(
                "IPsec peer of {} ({} tunnels, up in {} ms): peers {} .. {}, each its own IKE SA ({}) and CHILD_SA (ESP {} in UDP 4500) for its /{} of {} <-> {}; tunnel 1's SPIs 0x{:08x} out, 0x{:08x} in; measures the gateway's {}",
                r.gateway,
                thousands(t.count as u64),
                thousands(t.setup_ms),
                t.first_peer,
                t.last_peer,
                r.ike,
                r.esp,
                t.slice_prefix,
                t.remote_net,
                r.remote_net,
                r.spi_out,
                r.spi_in,
                r.direction.gateway_does()
            ) + &self.rekey_note()
                + &weak_note(&r.esp);
        }
        let travels = if r.encapsulation == encapsulation_label(Encapsulation::Raw) {
            "raw (IP protocol 50)"
        } else {
            "in UDP 4500"
        };
        format!(
            "IPsec peer of {} (IKE {}): CHILD_SA ESP {} {travels}, SPIs 0x{:08x} out, 0x{:08x} in, {} <-> {}; measures the gateway's {}",
            r.gateway,
            r.ike,
            r.esp,
            r.spi_out,
            r.spi_in,
            r.local_net,
            r.remote_net,
            r.direction.gateway_does()
        ) + &self.rekey_note()
            + &weak_note(&r.esp)
    }

    /// "; each CHILD_SA rekeyed every 2s (--rekey)", with `--rekey`, and
    /// the same of the IKE SA with `--rekey-ike`.
    fn rekey_note(&self) -> String {
        let every = |what: &str, period: Option<Duration>, option: &str| {
            period.map_or(String::new(), |p| {
                format!(
                    "; each {what} rekeyed every {} ({option})",
                    humantime::format_duration(p)
                )
            })
        };
        every("CHILD_SA", self.rekey.child, "--rekey")
            + &every("IKE SA", self.rekey.ike, "--rekey-ike")
    }

    /// Puts linerate's outer address on port B (and a route to an
    /// off-link gateway), unless the port has it already.
    fn address_on(&mut self, outer: Net, gateway: Ipv4Addr) -> Result<()> {
        let addr = format!("{}/{}", outer.address, outer.prefix_len);
        let present = ip(
            self.netns.as_deref(),
            &["-4", "-o", "addr", "show", "dev", &self.ifname],
        )
        .is_ok_and(|out| out.contains(&format!("inet {addr} ")));
        if present {
            return Ok(());
        }
        ip(
            self.netns.as_deref(),
            &["addr", "add", &addr, "dev", &self.ifname],
        )
        .map_err(|why| {
            err!(
                Environment,
                "cannot put linerate's IPsec address {addr} on port {} for IKE: {why}",
                self.ifname
            )
        })?;
        self.address = Some(addr);
        if !outer.contains(gateway) {
            bail!(BadInput, "the IPsec gateway {gateway} is not on port B's subnet {outer}: give the gateway's WAN address on that subnet (--gw-b or --ipsec-gateway)");
        }
        Ok(())
    }

    fn address_off(&self) {
        if let Some(addr) = &self.address {
            let _ = ip(
                self.netns.as_deref(),
                &["addr", "del", addr, "dev", &self.ifname],
            );
        }
    }
}

/// "; 3des-md5 is weak ...", once in the run's notes, for a suite of DES,
/// 3DES, MD5 or NULL encryption: measured as asked (the point is to
/// measure devices that still run them), said to protect nothing.
fn weak_note(esp: &str) -> String {
    match EspSuite::parse(esp) {
        Ok(suite) if suite.is_weak() => format!(
            "; ESP {esp} is weak (DES, 3DES, MD5 or no encryption): measured as the gateway runs it, not for traffic that needs protection"
        ),
        _ => String::new(),
    }
}

impl Drop for IpsecPeer {
    /// Deletes the IKE SAs (and with them the CHILD_SAs) on the gateway,
    /// then takes linerate's addresses off port B.
    fn drop(&mut self) {
        // The keeper hands the session or fleet back for the Deletes.
        match self.keeper.take().and_then(Keeper::stop) {
            Some(Peers::One(s)) => self.session = Some(*s),
            Some(Peers::Many(f)) => self.fleet = Some(*f),
            None => {}
        }
        if let Some(mut fleet) = self.fleet.take() {
            fleet.delete_all();
            drop(fleet);
            // The peers' addresses go only after their Deletes left.
            drop(self.addresses.take());
            return;
        }
        if let Some(session) = self.session.take() {
            // Its Drop sends the Delete; the address stays until it left.
            drop(session);
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        self.address_off();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weak_suites_are_said_to_be_weak_and_only_they() {
        for weak in ["3des-md5", "des-sha1", "null-sha256", "aes256-md5"] {
            assert!(weak_note(weak).contains("is weak"), "{weak}");
        }
        for strong in ["aes128gcm16", "aes256-sha512", "aes192-sha384", "?"] {
            assert_eq!(weak_note(strong), "", "{strong}");
        }
    }
}
