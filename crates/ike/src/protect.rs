//! The Encrypted payload (RFC 7296 §3.14): every message after
//! IKE_SA_INIT carries its payloads inside it, AES-CBC encrypted and
//! HMAC-protected. The ICV covers the whole message, header included, up
//! to the ICV itself; a message whose ICV does not verify is dropped
//! before anything in it is decrypted or decoded (§2.21.2 says to ignore
//! it).

use crate::crypto::{random_bytes, Encr, Integ, Rng};
use crate::wire::{encode_payloads, parse_payloads, payload, Header, Message, Payload};

/// One direction's keys: SK_ei/SK_ai to send (initiator), SK_er/SK_ar to
/// receive.
pub(crate) struct Keys<'a> {
    pub encr: Encr,
    pub integ: Integ,
    pub encryption_key: &'a [u8],
    pub integrity_key: &'a [u8],
}

/// Why a protected message was dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpenError {
    /// Not even an IKE message with an Encrypted payload.
    Malformed(String),
    /// The ICV does not verify: another key, or changed on the way.
    Integrity,
}

/// Encodes `header` and the Encrypted payload holding `inner`.
/// The IV comes from `rng`.
pub(crate) fn seal(keys: &Keys<'_>, header: Header, inner: &[Payload], rng: Rng<'_>) -> Vec<u8> {
    let mut plain = Vec::with_capacity(256);
    encode_payloads(inner, &mut plain);
    // Pad to the block, the last byte the pad length (§3.14; the padding
    // bytes may be anything, zeros here).
    let pad = (Encr::BLOCK - (plain.len() + 1) % Encr::BLOCK) % Encr::BLOCK;
    plain.resize(plain.len() + pad, 0);
    plain.push(pad as u8);
    let first = inner.first().map_or(payload::NONE, Payload::kind);
    seal_padded(keys, header, first, plain, rng)
}

/// Encrypts `plain` (whole blocks, padding included) into an Encrypted
/// payload whose first inner payload is of type `first`, and adds the ICV.
fn seal_padded(
    keys: &Keys<'_>,
    header: Header,
    first: u8,
    mut plain: Vec<u8>,
    rng: Rng<'_>,
) -> Vec<u8> {
    let iv = random_bytes(rng, Encr::BLOCK);
    keys.encr.encrypt(keys.encryption_key, &iv, &mut plain);
    let icv_len = keys.integ.icv_len();
    let mut data = iv;
    data.extend_from_slice(&plain);
    data.resize(data.len() + icv_len, 0);
    let message = Message {
        header,
        payloads: vec![Payload::Encrypted { first, data }],
    };
    let mut bytes = message.encode();
    let covered = bytes.len() - icv_len;
    let icv = keys.integ.compute(keys.integrity_key, &bytes[..covered]);
    bytes[covered..].copy_from_slice(&icv);
    bytes
}

/// Verifies, decrypts and decodes a protected message: the result holds
/// the payloads before the Encrypted payload (none, in practice) and those
/// inside it.
pub(crate) fn open(keys: &Keys<'_>, bytes: &[u8]) -> Result<Message, OpenError> {
    let message = Message::parse(bytes).map_err(|e| OpenError::Malformed(e.0))?;
    let len = message.header.length as usize;
    let mut payloads = message.payloads;
    let Some(Payload::Encrypted { first, data }) = payloads.pop() else {
        return Err(OpenError::Malformed("no Encrypted payload".into()));
    };
    let icv_len = keys.integ.icv_len();
    let block = Encr::BLOCK;
    if data.len() < block + block + icv_len || (data.len() - block - icv_len) % block != 0 {
        return Err(OpenError::Malformed(format!(
            "an Encrypted payload of {} bytes",
            data.len()
        )));
    }
    let covered = len - icv_len;
    let expected = keys.integ.compute(keys.integrity_key, &bytes[..covered]);
    if !bool::from(subtle::ConstantTimeEq::ct_eq(
        &expected[..],
        &bytes[covered..len],
    )) {
        return Err(OpenError::Integrity);
    }
    let (iv, rest) = data.split_at(block);
    let mut plain = rest[..rest.len() - icv_len].to_vec();
    if !keys.encr.decrypt(keys.encryption_key, iv, &mut plain) {
        return Err(OpenError::Malformed(
            "undecryptable Encrypted payload".into(),
        ));
    }
    let pad = plain[plain.len() - 1] as usize;
    if pad + 1 > plain.len() {
        return Err(OpenError::Malformed(format!(
            "pad length {pad} in {} bytes",
            plain.len()
        )));
    }
    let inner = parse_payloads(first, &plain[..plain.len() - 1 - pad])
        .map_err(|e| OpenError::Malformed(e.0))?;
    payloads.extend(inner);
    Ok(Message {
        header: message.header,
        payloads,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::SeededRng;
    use crate::wire::{exchange, flags, tests::sample_auth_payloads};
    use proptest::prelude::*;

    proptest! {
        /// Whatever the gateway (or anyone) encrypts with the right keys,
        /// opening it never panics: any padding length, any inner bytes.
        #[test]
        fn opening_any_plaintext_never_panics(
            first in any::<u8>(),
            blocks in 1usize..8,
            fill in prop::collection::vec(any::<u8>(), 128),
        ) {
            let (e, a) = ([1u8; 32], [2u8; 32]);
            let header = Header::new(7, 8, exchange::INFORMATIONAL, 0, 3);
            let plain = fill[..blocks * Encr::BLOCK].to_vec();
            let bytes = seal_padded(&keys(&e, &a), header, first, plain, &mut SeededRng::new(1));
            let _ = open(&keys(&e, &a), &bytes);
        }

        /// Any bytes, and sealed messages with bytes changed or cut, are
        /// refused without a panic.
        #[test]
        fn opening_changed_messages_never_panics(
            data in prop::collection::vec(any::<u8>(), 0..300),
            at in any::<usize>(),
            value in any::<u8>(),
            cut in any::<usize>(),
        ) {
            let (e, a) = ([1u8; 32], [2u8; 32]);
            let _ = open(&keys(&e, &a), &data);
            let header = Header::new(7, 8, exchange::IKE_AUTH, flags::INITIATOR, 1);
            let mut bytes = seal(&keys(&e, &a), header, &sample_auth_payloads(), &mut SeededRng::new(2));
            let i = at % bytes.len();
            bytes[i] = value;
            let _ = open(&keys(&e, &a), &bytes);
            bytes.truncate(cut % bytes.len());
            let _ = open(&keys(&e, &a), &bytes);
        }
    }

    fn keys<'a>(e: &'a [u8], a: &'a [u8]) -> Keys<'a> {
        Keys {
            encr: Encr::AesCbc256,
            integ: Integ::HmacSha256_128,
            encryption_key: e,
            integrity_key: a,
        }
    }

    #[test]
    fn sealed_messages_open_with_the_same_keys_only() {
        let (e, a) = ([1u8; 32], [2u8; 32]);
        let header = Header::new(7, 8, exchange::IKE_AUTH, flags::INITIATOR, 1);
        let inner = sample_auth_payloads();
        let bytes = seal(&keys(&e, &a), header, &inner, &mut SeededRng::new(3));
        assert_eq!(bytes[16], payload::SK);
        let opened = open(&keys(&e, &a), &bytes).unwrap();
        assert_eq!(opened.payloads, inner);
        assert_eq!(opened.header.message_id, 1);
        assert_eq!(
            open(&keys(&e, &[3u8; 32]), &bytes).unwrap_err(),
            OpenError::Integrity
        );
        // A flipped bit anywhere, the header included, fails the ICV.
        for i in [0, 20, 40, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(open(&keys(&e, &a), &bad).is_err());
        }
        // An empty INFORMATIONAL (a liveness check) is one padded block.
        let empty = seal(&keys(&e, &a), header, &[], &mut SeededRng::new(4));
        assert_eq!(empty.len(), 28 + 4 + 16 + 16 + 16);
        assert!(open(&keys(&e, &a), &empty).unwrap().payloads.is_empty());
    }
}
