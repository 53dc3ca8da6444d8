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
use crate::ike_sa::IkeSa;
use crate::proposal::{IkeProposals, IkeSuite};
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
