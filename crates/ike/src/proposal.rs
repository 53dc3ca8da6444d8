//! IKE proposals in strongSwan's syntax (`aes256-sha256-modp2048`), the
//! text a VPN engineer already has in the gateway's swanctl.conf or
//! ipsec.conf, so linerate's configuration reads the same.
//!
//! A proposal names one or more encryption algorithms, integrity
//! algorithms and Diffie-Hellman groups, in any order; PRFs are the
//! integrity algorithms' hashes unless named (`prfsha256`), as in
//! strongSwan. Several proposals are separated by commas.

use crate::crypto::{DhGroup, Encr, Integ, Prf};
use crate::wire::{protocol, transform, Proposal, Transform};
use std::fmt;

/// The algorithm names [`IkeProposal::parse`] knows, for its error.
const TOKENS: &str =
    "aes128, aes256, sha1, sha256, sha512, prfsha1, prfsha256, prfsha512, modp2048, ecp256, x25519";

/// One IKE proposal: the algorithms linerate offers, in order of
/// preference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IkeProposal {
    encryption: Vec<Encr>,
    integrity: Vec<Integ>,
    prf: Vec<Prf>,
    /// Whether the PRFs were named (`prfsha256`) or follow the integrity
    /// algorithms; only for printing the proposal back.
    explicit_prf: bool,
    groups: Vec<DhGroup>,
}

/// The largest SA payload linerate sends in IKE_SA_INIT: with the KE
/// payload of its largest group (modp2048, 264 bytes), a cookie, the
/// nonce and the NAT detection notifies, the message stays under 2,000
/// bytes, within the 3,000 RFC 7296 §2 asks every implementation to take
/// and one unfragmented datagram on any Ethernet path of jumbo frames or
/// with fragments reassembled (there are no IKE fragments before
/// IKE_AUTH).
const MAX_SA_PAYLOAD: usize = 1_500;

/// A proposal linerate cannot offer, with what is wrong and what it knows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ProposalError(pub String);

fn push<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

impl IkeProposal {
    /// Reads one proposal such as `aes256-sha256-modp2048` or
    /// `aes128-aes256-sha256-prfsha512-ecp256-x25519`. strongSwan's
    /// aliases `aes` (aes128), `sha` (sha1), `sha2_256`/`sha2_512` and
    /// `curve25519` are accepted too.
    pub fn parse(text: &str) -> Result<IkeProposal, ProposalError> {
        let text = text.trim();
        let mut p = IkeProposal {
            encryption: Vec::new(),
            integrity: Vec::new(),
            prf: Vec::new(),
            explicit_prf: false,
            groups: Vec::new(),
        };
        for token in text.split('-') {
            let t = token.trim().to_ascii_lowercase().replace("sha2_", "sha");
            match t.as_str() {
                "aes" | "aes128" => push(&mut p.encryption, Encr::AesCbc128),
                "aes256" => push(&mut p.encryption, Encr::AesCbc256),
                "sha" | "sha1" => push(&mut p.integrity, Integ::HmacSha1_96),
                "sha256" => push(&mut p.integrity, Integ::HmacSha256_128),
                "sha512" => push(&mut p.integrity, Integ::HmacSha512_256),
                "prfsha" | "prfsha1" => push(&mut p.prf, Prf::HmacSha1),
                "prfsha256" => push(&mut p.prf, Prf::HmacSha256),
                "prfsha512" => push(&mut p.prf, Prf::HmacSha512),
                "modp2048" => push(&mut p.groups, DhGroup::Modp2048),
                "ecp256" => push(&mut p.groups, DhGroup::Ecp256),
                "x25519" | "curve25519" => push(&mut p.groups, DhGroup::Curve25519),
                _ => {
                    return Err(ProposalError(format!(
                        "unknown algorithm '{}' in IKE proposal '{text}': use {TOKENS}",
                        token.trim()
                    )))
                }
            }
        }
        let missing = |what: &str, choices: &str| {
            Err(ProposalError(format!(
                "IKE proposal '{text}' names no {what}: add one of {choices} (e.g. aes256-sha256-modp2048)"
            )))
        };
        if p.encryption.is_empty() {
            return missing("encryption algorithm", "aes128, aes256");
        }
        if p.integrity.is_empty() {
            return missing("integrity algorithm", "sha1, sha256, sha512");
        }
        if p.groups.is_empty() {
            return missing("Diffie-Hellman group", "modp2048, ecp256, x25519");
        }
        if p.prf.is_empty() {
            for i in p.integrity.clone() {
                push(&mut p.prf, i.prf());
            }
        } else {
            p.explicit_prf = true;
        }
        Ok(p)
    }

    /// The Diffie-Hellman groups, the first preferred: its public value
    /// goes in the first KE payload.
    pub fn groups(&self) -> &[DhGroup] {
        &self.groups
    }

    /// The proposal substructure of an SA payload.
    pub(crate) fn to_wire(&self, number: u8) -> Proposal {
        let mut transforms = Vec::new();
        for e in &self.encryption {
            transforms.push(Transform::with_key_length(
                transform::ENCR,
                e.id(),
                e.key_bits(),
            ));
        }
        for p in &self.prf {
            transforms.push(Transform::new(transform::PRF, p.id()));
        }
        for i in &self.integrity {
            transforms.push(Transform::new(transform::INTEG, i.id()));
        }
        for g in &self.groups {
            transforms.push(Transform::new(transform::DH, g.id()));
        }
        Proposal {
            number,
            protocol: protocol::IKE,
            spi: Vec::new(),
            transforms,
        }
    }

    /// The suite the gateway chose from this proposal, if its transforms
    /// are one of each type and all offered here.
    pub(crate) fn select(&self, chosen: &Proposal) -> Option<IkeSuite> {
        let (mut e, mut p, mut i, mut g) = (None, None, None, None);
        for t in &chosen.transforms {
            let slot_filled = match t.kind {
                transform::ENCR => e
                    .replace(
                        Encr::from_transform(t.id, t.key_length)
                            .filter(|x| self.encryption.contains(x))?,
                    )
                    .is_some(),
                transform::PRF => p
                    .replace(Prf::from_id(t.id).filter(|x| self.prf.contains(x))?)
                    .is_some(),
                transform::INTEG => i
                    .replace(Integ::from_id(t.id).filter(|x| self.integrity.contains(x))?)
                    .is_some(),
                transform::DH => g
                    .replace(DhGroup::from_id(t.id).filter(|x| self.groups.contains(x))?)
                    .is_some(),
                _ => return None,
            };
            if slot_filled {
                return None;
            }
        }
        Some(IkeSuite {
            encryption: e?,
            integrity: i?,
            prf: p?,
            group: g?,
        })
    }
}

/// strongSwan's syntax, which [`IkeProposal::parse`] reads back.
impl fmt::Display for IkeProposal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut tokens: Vec<String> = Vec::new();
        tokens.extend(self.encryption.iter().map(|e| e.name().to_string()));
        tokens.extend(self.integrity.iter().map(|i| i.name().to_string()));
        if self.explicit_prf {
            tokens.extend(self.prf.iter().map(|p| format!("prf{}", p.hash_name())));
        }
        tokens.extend(self.groups.iter().map(|g| g.name().to_string()));
        f.write_str(&tokens.join("-"))
    }
}

impl std::str::FromStr for IkeProposal {
    type Err = ProposalError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IkeProposal::parse(s)
    }
}

/// The IKE proposals linerate offers, the first preferred: strongSwan's
/// `proposals = a, b` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IkeProposals(pub Vec<IkeProposal>);

impl IkeProposals {
    /// Reads `aes256-sha256-modp2048` or a comma-separated list of
    /// proposals.
    pub fn parse(text: &str) -> Result<IkeProposals, ProposalError> {
        let list = text
            .split(',')
            .map(IkeProposal::parse)
            .collect::<Result<Vec<_>, _>>()?;
        let proposals = IkeProposals(list);
        // Proposals are numbered in one byte, and the IKE_SA_INIT that
        // carries them must reach the gateway in one datagram: RFC 7296
        // §2 asks every implementation to take 1280 bytes, most take no
        // fragments before IKE_AUTH.
        let mut sa = Vec::new();
        crate::wire::encode_payloads(&[crate::wire::Payload::Sa(proposals.to_wire())], &mut sa);
        if proposals.0.len() > usize::from(u8::MAX) || sa.len() > MAX_SA_PAYLOAD {
            return Err(ProposalError(format!(
                "{} proposals take {} bytes, more than the {MAX_SA_PAYLOAD} an IKE_SA_INIT can carry to any gateway: offer fewer (strongSwan's default is one proposal of several algorithms each)",
                proposals.0.len(),
                sa.len()
            )));
        }
        Ok(proposals)
    }

    /// The one proposal of exactly `suite`: what an IKE SA rekey offers
    /// and accepts (the new IKE SA keeps the algorithms of the old).
    pub(crate) fn of_suite(suite: IkeSuite) -> IkeProposals {
        IkeProposals(vec![IkeProposal {
            encryption: vec![suite.encryption],
            integrity: vec![suite.integrity],
            prf: vec![suite.prf],
            explicit_prf: true,
            groups: vec![suite.group],
        }])
    }

    /// Every group offered, in order of preference, once.
    pub fn groups(&self) -> Vec<DhGroup> {
        let mut all = Vec::new();
        for p in &self.0 {
            for g in &p.groups {
                push(&mut all, *g);
            }
        }
        all
    }

    /// The SA payload's proposals, numbered from 1.
    pub(crate) fn to_wire(&self) -> Vec<Proposal> {
        self.0
            .iter()
            .enumerate()
            .map(|(i, p)| p.to_wire(i as u8 + 1))
            .collect()
    }

    /// The suite the gateway chose: one proposal, with the number of one
    /// of ours and transforms from it.
    pub(crate) fn select(&self, chosen: &[Proposal]) -> Option<IkeSuite> {
        let [one] = chosen else { return None };
        if one.protocol != protocol::IKE {
            return None;
        }
        let ours = self.0.get((one.number as usize).checked_sub(1)?)?;
        ours.select(one)
    }
}

impl IkeProposals {
    /// As a responder: the first of the initiator's IKE proposals that one
    /// of ours accepts (one transform of each type, the first of each the
    /// initiator lists that we have; the group of its KE payload when it
    /// can be), as the answer's proposal and the suite.
    pub(crate) fn choose(
        &self,
        offered: &[Proposal],
        ke_group: u16,
    ) -> Option<(Proposal, IkeSuite)> {
        for theirs in offered {
            if theirs.protocol != protocol::IKE || !theirs.spi.is_empty() {
                continue;
            }
            for ours in &self.0 {
                let of = |kind: u8| theirs.transforms.iter().filter(move |t| t.kind == kind);
                let encr = of(transform::ENCR).find(|t| {
                    Encr::from_transform(t.id, t.key_length)
                        .is_some_and(|e| ours.encryption.contains(&e))
                });
                let prf = of(transform::PRF)
                    .find(|t| Prf::from_id(t.id).is_some_and(|p| ours.prf.contains(&p)));
                let integ = of(transform::INTEG)
                    .find(|t| Integ::from_id(t.id).is_some_and(|i| ours.integrity.contains(&i)));
                let group_ok = |t: &&Transform| {
                    DhGroup::from_id(t.id).is_some_and(|g| ours.groups.contains(&g))
                };
                let dh = of(transform::DH)
                    .filter(group_ok)
                    .find(|t| t.id == ke_group)
                    .or_else(|| of(transform::DH).find(group_ok));
                let (Some(e), Some(p), Some(i), Some(g)) = (encr, prf, integ, dh) else {
                    continue;
                };
                let suite = IkeSuite {
                    encryption: Encr::from_transform(e.id, e.key_length)?,
                    prf: Prf::from_id(p.id)?,
                    integrity: Integ::from_id(i.id)?,
                    group: DhGroup::from_id(g.id)?,
                };
                let answer = Proposal {
                    number: theirs.number,
                    protocol: protocol::IKE,
                    spi: Vec::new(),
                    transforms: vec![*e, *p, *i, *g],
                };
                return Some((answer, suite));
            }
        }
        None
    }
}

impl Default for IkeProposals {
    /// `aes256-sha256-modp2048`: strongSwan's and most gateways' common
    /// ground.
    fn default() -> IkeProposals {
        IkeProposals(vec![IkeProposal {
            encryption: vec![Encr::AesCbc256],
            integrity: vec![Integ::HmacSha256_128],
            prf: vec![Prf::HmacSha256],
            explicit_prf: false,
            groups: vec![DhGroup::Modp2048],
        }])
    }
}

impl fmt::Display for IkeProposals {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let texts: Vec<String> = self.0.iter().map(|p| p.to_string()).collect();
        f.write_str(&texts.join(", "))
    }
}

impl std::str::FromStr for IkeProposals {
    type Err = ProposalError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        IkeProposals::parse(s)
    }
}

/// The algorithms of an established IKE SA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IkeSuite {
    pub encryption: Encr,
    pub integrity: Integ,
    pub prf: Prf,
    pub group: DhGroup,
}

/// In strongSwan's syntax (`aes256-sha256-modp2048`), with the PRF only
/// when it is not the integrity algorithm's hash.
impl fmt::Display for IkeSuite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.encryption.name(), self.integrity.name())?;
        if self.prf != self.integrity.prf() {
            write!(f, "-prf{}", self.prf.hash_name())?;
        }
        write!(f, "-{}", self.group.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Too many proposals for one IKE_SA_INIT are refused when read, in
    /// a line that says how many and what to do, not after 15 s of
    /// silence from a gateway that never got them.
    #[test]
    fn too_many_proposals_for_one_message_are_refused() {
        let one = "aes256-sha256-modp2048";
        assert!(IkeProposals::parse(&vec![one; 20].join(",")).is_ok());
        let e = IkeProposals::parse(&vec![one; 300].join(","))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("300 proposals take"), "{e}");
        assert!(e.contains("offer fewer"), "{e}");
    }

    #[test]
    fn proposals_read_strongswan_syntax() {
        let p = IkeProposal::parse("aes256-sha256-modp2048").unwrap();
        assert_eq!(p.encryption, [Encr::AesCbc256]);
        assert_eq!(p.integrity, [Integ::HmacSha256_128]);
        assert_eq!(p.prf, [Prf::HmacSha256]);
        assert_eq!(p.groups, [DhGroup::Modp2048]);
        assert_eq!(p.to_string(), "aes256-sha256-modp2048");
        let p = IkeProposal::parse("AES128-sha2_512-prfsha256-x25519-ecp256").unwrap();
        assert_eq!(p.prf, [Prf::HmacSha256]);
        assert_eq!(p.groups, [DhGroup::Curve25519, DhGroup::Ecp256]);
        assert_eq!(p.to_string(), "aes128-sha512-prfsha256-x25519-ecp256");
        let list = IkeProposals::parse("aes256-sha256-modp2048, aes128-sha1-ecp256").unwrap();
        assert_eq!(list.0.len(), 2);
        assert_eq!(
            list.to_string(),
            "aes256-sha256-modp2048, aes128-sha1-ecp256"
        );
        assert_eq!(list.groups(), [DhGroup::Modp2048, DhGroup::Ecp256]);
        assert_eq!(
            IkeProposals::default(),
            IkeProposals::parse("aes256-sha256-modp2048").unwrap()
        );
    }

    #[test]
    fn errors_name_the_token_and_the_choices() {
        let e = IkeProposal::parse("aes256-sha384-modp2048").unwrap_err().0;
        assert_eq!(
            e,
            "unknown algorithm 'sha384' in IKE proposal 'aes256-sha384-modp2048': use aes128, aes256, sha1, sha256, sha512, prfsha1, prfsha256, prfsha512, modp2048, ecp256, x25519"
        );
        let e = IkeProposal::parse("aes256-sha256").unwrap_err().0;
        assert!(e.contains("no Diffie-Hellman group"), "{e}");
        assert!(e.contains("modp2048, ecp256, x25519"), "{e}");
        assert!(IkeProposal::parse("sha256-modp2048").is_err());
        assert!(IkeProposal::parse("aes256gcm16-prfsha256-ecp256").is_err());
        assert!(IkeProposals::parse("aes256-sha256-modp2048,").is_err());
    }

    /// The responder's choice: the initiator's first proposal we can
    /// take, the KE payload's group when it is acceptable, and what the
    /// initiator's own `select` reads back.
    #[test]
    fn the_responder_chooses_from_the_initiators_offer() {
        let offer =
            IkeProposals::parse("aes128-sha1-modp2048, aes256-sha256-x25519-ecp256").unwrap();
        let wire = offer.to_wire();
        let ours = IkeProposals::parse("aes256-sha256-sha512-ecp256-x25519").unwrap();
        let (answer, suite) = ours.choose(&wire, 19).unwrap();
        assert_eq!(answer.number, 2);
        assert_eq!(suite.to_string(), "aes256-sha256-ecp256");
        assert_eq!(offer.select(&[answer]), Some(suite));
        let (_, suite) = ours.choose(&wire, 14).unwrap();
        assert_eq!(suite.group, DhGroup::Curve25519);
        let none = IkeProposals::parse("aes128-sha512-modp2048").unwrap();
        assert!(none.choose(&wire, 14).is_none());
    }

    #[test]
    fn the_gateways_choice_must_be_offered() {
        let offer = IkeProposals::parse("aes256-sha256-modp2048-ecp256").unwrap();
        let wire = offer.to_wire();
        let mut chosen = wire[0].clone();
        chosen
            .transforms
            .retain(|t| !(t.kind == transform::DH && t.id == 14));
        let suite = offer.select(&[chosen.clone()]).unwrap();
        assert_eq!(suite.group, DhGroup::Ecp256);
        assert_eq!(suite.to_string(), "aes256-sha256-ecp256");
        // Two groups, a group not offered, a wrong key length, no PRF.
        assert!(offer.select(&wire).is_none());
        assert!(offer.select(&[wire[0].clone()]).is_none());
        let mut other = chosen.clone();
        other.transforms[3].id = 31;
        assert!(offer.select(&[other]).is_none());
        let mut short = chosen.clone();
        short.transforms[0].key_length = Some(128);
        assert!(offer.select(&[short]).is_none());
        let mut no_prf = chosen.clone();
        no_prf.transforms.retain(|t| t.kind != transform::PRF);
        assert!(offer.select(&[no_prf]).is_none());
        let mut renumbered = chosen;
        renumbered.number = 2;
        assert!(offer.select(&[renumbered]).is_none());
    }
}
