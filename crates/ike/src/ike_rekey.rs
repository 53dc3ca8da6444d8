//! Rekeying the IKE SA (RFC 7296 §1.3.2, §2.18): a CREATE_CHILD_SA whose
//! SA payload carries an IKE proposal (an 8-byte SPI, no REKEY_SA notify),
//! a nonce and a KE payload. The new IKE SA's SKEYSEED comes from the old
//! SA's SK_d and the exchange's Diffie-Hellman secret and nonces; its
//! message IDs start at 0; the exchange's initiator is the new SA's
//! original initiator (its SPI is SPIi).
//!
//! Only the message work is here, both sides of it: the request, the
//! answer to the peer's request, the new SA from the peer's answer.
//! [`crate::tunnel::Tunnel`] decides when, moves the CHILD_SA under the
//! new SA and deletes the old one.

use crate::crypto::{random_bytes, random_u64, rekeyed_ike_keys, DhPrivate, Rng};
use crate::proposal::{IkeProposals, IkeSuite};
use crate::tunnel::IkeSa;
use crate::wire::{notify, protocol, Message, Notify, Payload, Proposal};

/// Our side of an IKE SA rekey we started, until the answer.
pub(crate) struct IkeRekeyState {
    /// Our SPI of the new IKE SA (its SPIi).
    pub spi: u64,
    pub nonce: Vec<u8>,
    dh: DhPrivate,
    public: Vec<u8>,
}

impl IkeRekeyState {
    /// A new SPI, nonce and key pair of the current SA's group.
    pub(crate) fn new(suite: IkeSuite, rng: Rng<'_>) -> IkeRekeyState {
        let (dh, public) = DhPrivate::generate(suite.group, rng);
        IkeRekeyState {
            spi: new_ike_spi(rng),
            nonce: random_bytes(rng, 32),
            dh,
            public,
        }
    }

    /// The request's payloads: SA (the current suite, our new SPI), Ni,
    /// KEi.
    pub(crate) fn request(&self, suite: IkeSuite) -> Vec<Payload> {
        vec![
            Payload::Sa(vec![proposal(suite, self.spi, 1)]),
            Payload::Nonce(self.nonce.clone()),
            Payload::Ke {
                group: self.dh.group().id(),
                data: self.public.clone(),
            },
        ]
    }
}

/// A new IKE SPI (never zero).
fn new_ike_spi(rng: Rng<'_>) -> u64 {
    loop {
        let spi = random_u64(rng);
        if spi != 0 {
            break spi;
        }
    }
}

/// The proposal of exactly `suite` with `spi`, numbered `number`.
fn proposal(suite: IkeSuite, spi: u64, number: u8) -> Proposal {
    let mut p = IkeProposals::of_suite(suite).to_wire().remove(0);
    p.number = number;
    p.spi = spi.to_be_bytes().to_vec();
    p
}

/// Whether the peer's CREATE_CHILD_SA rekeys the IKE SA: its SA payload
/// proposes protocol IKE.
pub(crate) fn is_ike_rekey(request: &Message) -> bool {
    request.payloads.iter().any(|p| match p {
        Payload::Sa(list) => list.iter().any(|p| p.protocol == protocol::IKE),
        _ => false,
    })
}

/// A message's SA payload, nonce and KE payload (group, public value).
type Parts<'a> = (
    Option<&'a Vec<Proposal>>,
    Option<&'a Vec<u8>>,
    Option<(u16, &'a Vec<u8>)>,
);

/// The SA, the nonce and the KE payload of a message.
fn parts(message: &Message) -> Parts<'_> {
    let (mut sa, mut nonce, mut ke) = (None, None, None);
    for p in &message.payloads {
        match p {
            Payload::Sa(list) => sa = Some(list),
            Payload::Nonce(n) => nonce = Some(n),
            Payload::Ke { group, data } => ke = Some((*group, data)),
            _ => {}
        }
    }
    (sa, nonce, ke)
}

fn spi_of(p: &Proposal) -> Option<u64> {
    let bytes: [u8; 8] = p.spi.as_slice().try_into().ok()?;
    Some(u64::from_be_bytes(bytes)).filter(|&s| s != 0)
}

/// The new IKE SA, from the exchange's Diffie-Hellman secret, nonces and
/// SPIs (`we_started`: we sent the request, so we are its initiator).
fn new_sa(
    old: &IkeSa,
    we_started: bool,
    shared: &[u8],
    ni: Vec<u8>,
    nr: Vec<u8>,
    spi_i: u64,
    spi_r: u64,
) -> IkeSa {
    let suite = old.suite;
    let keys = rekeyed_ike_keys(
        old.suite.prf,
        &old.keys.sk_d,
        suite.integrity,
        suite.encryption,
        shared,
        &ni,
        &nr,
        spi_i,
        spi_r,
    );
    IkeSa {
        initiator: we_started,
        spi_i,
        spi_r,
        suite,
        keys,
        ni,
        nr,
        next_id: 0,
        peer_id: 0,
        last_answer: None,
    }
}

/// Answers the peer's IKE SA rekey: our answer's payloads (SA with our
/// new SPI, Nr, KEr) and the new IKE SA, or the error notify to send
/// (NO_PROPOSAL_CHOSEN when it does not offer the current suite,
/// INVALID_KE_PAYLOAD naming the group when its KE is of another).
pub(crate) fn answer(
    old: &IkeSa,
    request: &Message,
    rng: Rng<'_>,
) -> Result<(Vec<Payload>, IkeSa), Notify> {
    let syntax = || Notify::new(notify::INVALID_SYNTAX, Vec::new());
    let (Some(offered), Some(ni), Some((group, public))) = parts(request) else {
        return Err(syntax());
    };
    if !(16..=256).contains(&ni.len()) {
        return Err(syntax());
    }
    // Its proposals with their SPIs aside: choose() takes first-exchange
    // proposals, which have none.
    let mut bare = Vec::new();
    for p in offered.iter().filter(|p| p.protocol == protocol::IKE) {
        let mut p = p.clone();
        if spi_of(&p).is_none() {
            continue;
        }
        p.spi.clear();
        bare.push(p);
    }
    let ours = IkeProposals::of_suite(old.suite);
    let Some((chosen, suite)) = ours.choose(&bare, group) else {
        return Err(Notify::new(notify::NO_PROPOSAL_CHOSEN, Vec::new()));
    };
    if suite.group.id() != group {
        return Err(Notify::new(
            notify::INVALID_KE_PAYLOAD,
            suite.group.id().to_be_bytes().to_vec(),
        ));
    }
    let spi_i = offered
        .iter()
        .find(|p| p.number == chosen.number && p.protocol == protocol::IKE)
        .and_then(spi_of)
        .ok_or_else(syntax)?;
    let (dh, our_public) = DhPrivate::generate(suite.group, rng);
    let shared = dh.shared(public).map_err(|_| syntax())?;
    let spi_r = new_ike_spi(rng);
    let nr = random_bytes(rng, 32);
    let mut answer_proposal = chosen;
    answer_proposal.spi = spi_r.to_be_bytes().to_vec();
    let payloads = vec![
        Payload::Sa(vec![answer_proposal]),
        Payload::Nonce(nr.clone()),
        Payload::Ke {
            group: suite.group.id(),
            data: our_public,
        },
    ];
    let new = new_sa(old, false, &shared, ni.clone(), nr, spi_i, spi_r);
    Ok((payloads, new))
}

/// The new IKE SA from the peer's answer to our rekey, or why not (its
/// error notify's name, or what is wrong with the answer).
pub(crate) fn answered(
    old: &IkeSa,
    state: IkeRekeyState,
    answer: &Message,
) -> Result<IkeSa, String> {
    if let Some(n) = answer.error() {
        return Err(format!("refused with {}", notify::name(n.kind)));
    }
    let (Some(chosen), Some(nr), Some((group, public))) = parts(answer) else {
        return Err("an answer without SA, nonce or KE payload".into());
    };
    if !(16..=256).contains(&nr.len()) {
        return Err(format!("a nonce of {} bytes", nr.len()));
    }
    let [p] = chosen.as_slice() else {
        return Err("not one proposal in the answer".into());
    };
    let spi_r = spi_of(p).ok_or("a proposal without an 8-byte SPI")?;
    let mut bare = p.clone();
    bare.spi.clear();
    if IkeProposals::of_suite(old.suite).select(&[bare]) != Some(old.suite) {
        return Err("a proposal that linerate did not offer".into());
    }
    if group != state.dh.group().id() {
        return Err(format!("a KE payload of group {group}"));
    }
    let shared = state
        .dh
        .shared(public)
        .map_err(|e| format!("the KE payload: {e}"))?;
    Ok(new_sa(
        old,
        true,
        &shared,
        state.nonce.clone(),
        nr.clone(),
        state.spi,
        spi_r,
    ))
}

/// Two tunnels, linerate's initiator and responder sides of one IKE SA,
/// rekey it both ways in memory: the derivation (§2.18) is checked by
/// both sides arriving at the same keys, and by the CHILD_SA rekey and
/// the Delete that the new keys then carry.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Retransmit;
    use crate::crypto::{ike_keys, DhGroup, Encr, Integ, Prf, SeededRng};
    use crate::event::Event;
    use crate::sa::ChildSa;
    use crate::tunnel::{Outbox, Output, Tunnel};
    use linerate_esp::{EspSuite, SaKeys};
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::time::Instant;

    fn suite() -> IkeSuite {
        IkeSuite {
            encryption: Encr::AesCbc128,
            integrity: Integ::HmacSha256_128,
            prf: Prf::HmacSha256,
            group: DhGroup::Curve25519,
        }
    }

    fn sa(initiator: bool) -> IkeSa {
        let (ni, nr) = (vec![1u8; 32], vec![2u8; 32]);
        let keys = ike_keys(
            Prf::HmacSha256,
            Integ::HmacSha256_128,
            Encr::AesCbc128,
            &[7u8; 32],
            &ni,
            &nr,
            0x1111,
            0x2222,
        );
        IkeSa {
            initiator,
            spi_i: 0x1111,
            spi_r: 0x2222,
            suite: suite(),
            keys,
            ni,
            nr,
            next_id: 2,
            peer_id: 2,
            last_answer: None,
        }
    }

    fn tunnel(initiator: bool) -> Tunnel {
        let keys = |spi| SaKeys {
            suite: EspSuite::Aes256Gcm16,
            spi,
            encryption_key: vec![0; 36],
            integrity_key: Vec::new(),
        };
        let (a, b) = (SocketAddrV4::new(Ipv4Addr::LOCALHOST, 4500), 0x1000);
        let child = ChildSa {
            outbound: keys(if initiator { b } else { b + 1 }),
            inbound: keys(if initiator { b + 1 } else { b }),
            local_ts: Vec::new(),
            remote_ts: Vec::new(),
            local: a,
            remote: a,
            udp_encap: true,
        };
        let mut t = Tunnel::new(
            sa(initiator),
            child,
            EspSuite::Aes256Gcm16,
            None,
            Retransmit::default(),
            false,
            std::net::SocketAddr::V4(a),
            Instant::now(),
        );
        t.set_child_up();
        t
    }

    /// Carries every datagram between the two until both are quiet; the
    /// events each reported, and the rekeys that failed.
    fn exchange(a: &mut Tunnel, b: &mut Tunnel, first: Outbox) -> [Vec<Event>; 2] {
        let mut events = [Vec::new(), Vec::new()];
        let mut boxes = [first, Outbox::default()];
        let mut rng = SeededRng::new(100);
        for _ in 0..20 {
            for side in 0..2 {
                let datagrams: Vec<_> = boxes[side].transmits.drain(..).collect();
                let outputs: Vec<_> = boxes[side].outputs.drain(..).collect();
                for o in outputs {
                    match o {
                        Output::Event(e) => events[side].push(e),
                        Output::RekeyFailed(_) => events[side].push(Event::RekeyFailed),
                        other => panic!("{other:?}"),
                    }
                }
                let (to, out) = if side == 0 {
                    (&mut *b, &mut boxes[1])
                } else {
                    (&mut *a, &mut boxes[0])
                };
                for d in datagrams {
                    assert!(
                        to.handle(&d.data, Instant::now(), &mut rng, out),
                        "unhandled"
                    );
                }
            }
        }
        events
    }

    fn same_sa(a: &Tunnel, b: &Tunnel) {
        assert_eq!((a.ike.spi_i, a.ike.spi_r), (b.ike.spi_i, b.ike.spi_r));
        assert_ne!(a.ike.initiator, b.ike.initiator);
        assert_eq!(*a.ike.keys.sk_d, *b.ike.keys.sk_d);
        assert_eq!(*a.ike.keys.sk_ei, *b.ike.keys.sk_ei);
        assert_eq!(*a.ike.keys.sk_ar, *b.ike.keys.sk_ar);
        assert_eq!(a.own_spis().1, None, "the old SA is deleted");
        assert_eq!(b.own_spis().1, None, "the old SA is deleted");
    }

    #[test]
    fn both_sides_of_an_ike_rekey_derive_the_same_new_sa() {
        let (mut a, mut b) = (tunnel(true), tunnel(false));
        let old_sk_d = a.ike.keys.sk_d.clone();
        let mut out = Outbox::default();
        a.rekey_ike(Instant::now(), &mut SeededRng::new(11), &mut out)
            .unwrap();
        let events = exchange(&mut a, &mut b, out);
        assert_eq!(events, [vec![Event::IkeRekeyed], vec![Event::IkeRekeyed]]);
        same_sa(&a, &b);
        assert!(a.ike.initiator, "the rekey's initiator is the new SA's");
        assert_ne!(a.ike.spi_i, 0x1111);
        assert_ne!(*a.ike.keys.sk_d, *old_sk_d);
        // Message IDs restarted at 0; the Delete of the old SA went on it.
        assert_eq!((a.ike.next_id, b.ike.peer_id), (0, 0));

        // The other side rekeys: it becomes the new SA's initiator.
        let mut out = Outbox::default();
        b.rekey_ike(Instant::now(), &mut SeededRng::new(12), &mut out)
            .unwrap();
        let events = exchange(&mut b, &mut a, out);
        assert_eq!(events, [vec![Event::IkeRekeyed], vec![Event::IkeRekeyed]]);
        same_sa(&a, &b);
        assert!(b.ike.initiator && !a.ike.initiator);

        // The new SK_d makes the CHILD_SA rekey's keys on both sides.
        let mut out = Outbox::default();
        a.rekey_child(Instant::now(), &mut SeededRng::new(13), &mut out)
            .unwrap();
        let events = exchange(&mut a, &mut b, out);
        assert_eq!(events[0], [Event::ChildRekeyed]);
        assert_eq!(events[1], [Event::ChildRekeyed, Event::RekeyedChildDeleted]);
        assert_eq!(a.child.outbound.spi, b.child.inbound.spi);
        assert_eq!(
            a.child.outbound.encryption_key,
            b.child.inbound.encryption_key
        );
        assert_eq!(
            a.child.inbound.encryption_key,
            b.child.outbound.encryption_key
        );
    }

    /// Both sides start an IKE SA rekey at once: each answers the other's
    /// with TEMPORARY_FAILURE, both report the failure, nothing is
    /// wedged: the next rekey goes through.
    #[test]
    fn simultaneous_ike_rekeys_fail_cleanly_and_the_next_one_works() {
        let (mut a, mut b) = (tunnel(true), tunnel(false));
        let mut out = Outbox::default();
        a.rekey_ike(Instant::now(), &mut SeededRng::new(14), &mut out)
            .unwrap();
        let mut theirs = Outbox::default();
        b.rekey_ike(Instant::now(), &mut SeededRng::new(15), &mut theirs)
            .unwrap();
        // b's request reaches a while a's is in flight, and the reverse.
        for d in theirs.transmits.drain(..) {
            assert!(a.handle(&d.data, Instant::now(), &mut SeededRng::new(20), &mut out));
        }
        let events = exchange(&mut a, &mut b, out);
        assert!(events[0].contains(&Event::RekeyFailed), "{events:?}");
        assert!(events[1].contains(&Event::RekeyFailed), "{events:?}");
        assert!(a.ike_up() && b.ike_up());
        assert_eq!(a.ike.spi_i, 0x1111);
        let mut out = Outbox::default();
        a.rekey_ike(Instant::now(), &mut SeededRng::new(16), &mut out)
            .unwrap();
        let events = exchange(&mut a, &mut b, out);
        assert_eq!(events, [vec![Event::IkeRekeyed], vec![Event::IkeRekeyed]]);
        same_sa(&a, &b);
    }
}
