//! The algorithms an IKE SA uses, each from a maintained RustCrypto or
//! dalek crate: HMAC-SHA1/SHA2 as PRF and integrity, AES-CBC, and the
//! Diffie-Hellman groups MODP 2048 (crypto-bigint's constant-time modular
//! exponentiation), ECP 256 (p256) and Curve25519 (x25519-dalek). What is
//! written here is only RFC 7296's composition of them: prf+ (§2.13), the
//! IKE SA keys (§2.14) and KEYMAT (§2.17).

use crypto_bigint::modular::runtime_mod::{DynResidue, DynResidueParams};
use crypto_bigint::{Encoding, U2048};
use hmac::{Hmac, Mac};
use rand_core::CryptoRngCore;
use zeroize::Zeroizing;

/// Key material: wiped when dropped.
pub(crate) type Secret = Zeroizing<Vec<u8>>;

/// Where the protocol's randomness comes from (SPIs, nonces, IVs,
/// Diffie-Hellman private values): given to the state machines by their
/// drivers, which pass `rand_core::OsRng`; a test passes a seeded one and
/// gets the same bytes every time.
pub(crate) type Rng<'a> = &'a mut dyn CryptoRngCore;

/// A random source a state machine keeps for its own life.
pub(crate) type BoxedRng = Box<dyn CryptoRngCore + Send>;

/// `n` random bytes from `rng`.
pub(crate) fn random_bytes(rng: Rng<'_>, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

pub(crate) fn random_u64(rng: Rng<'_>) -> u64 {
    rng.next_u64()
}

pub(crate) fn random_u32(rng: Rng<'_>) -> u32 {
    rng.next_u32()
}

macro_rules! hmac {
    ($digest:ty, $key:expr, $parts:expr) => {{
        // HMAC takes keys of any length: new_from_slice cannot fail.
        let mut mac =
            <Hmac<$digest> as Mac>::new_from_slice($key).expect("HMAC accepts keys of any length");
        for part in $parts {
            mac.update(part);
        }
        mac.finalize().into_bytes().to_vec()
    }};
}

/// Pseudo-random functions (transform type 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Prf {
    HmacSha1,
    HmacSha256,
    HmacSha512,
}

impl Prf {
    pub const ALL: [Prf; 3] = [Prf::HmacSha1, Prf::HmacSha256, Prf::HmacSha512];

    /// IKEv2 transform ID.
    pub fn id(self) -> u16 {
        match self {
            Prf::HmacSha1 => 2,
            Prf::HmacSha256 => 5,
            Prf::HmacSha512 => 7,
        }
    }

    pub fn from_id(id: u16) -> Option<Prf> {
        Prf::ALL.into_iter().find(|p| p.id() == id)
    }

    /// strongSwan's name of the hash (`sha256`); as a PRF it is written
    /// `prfsha256`.
    pub fn hash_name(self) -> &'static str {
        match self {
            Prf::HmacSha1 => "sha1",
            Prf::HmacSha256 => "sha256",
            Prf::HmacSha512 => "sha512",
        }
    }

    /// Output length, which is also the length of SK_d, SK_pi and SK_pr.
    pub fn output_len(self) -> usize {
        match self {
            Prf::HmacSha1 => 20,
            Prf::HmacSha256 => 32,
            Prf::HmacSha512 => 64,
        }
    }

    /// prf(key, the concatenation of `parts`).
    pub(crate) fn compute(self, key: &[u8], parts: &[&[u8]]) -> Secret {
        Zeroizing::new(match self {
            Prf::HmacSha1 => hmac!(sha1::Sha1, key, parts),
            Prf::HmacSha256 => hmac!(sha2::Sha256, key, parts),
            Prf::HmacSha512 => hmac!(sha2::Sha512, key, parts),
        })
    }

    /// prf+ (RFC 7296 §2.13): T1 = prf(K, S | 0x01), Tn = prf(K, Tn-1 | S |
    /// n), concatenated and cut to `len` bytes (at most 255 blocks).
    pub(crate) fn plus(self, key: &[u8], seed: &[u8], len: usize) -> Secret {
        debug_assert!(len <= 255 * self.output_len());
        let mut out = Zeroizing::new(Vec::with_capacity(len + self.output_len()));
        let mut t = Zeroizing::new(Vec::new());
        let mut n = 1u8;
        while out.len() < len {
            t = self.compute(key, &[&t, seed, &[n]]);
            out.extend_from_slice(&t);
            n = n.wrapping_add(1);
        }
        out.truncate(len);
        out
    }
}

/// Integrity algorithms (transform type 3), HMAC truncated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Integ {
    HmacSha1_96,
    HmacSha256_128,
    HmacSha512_256,
}

impl Integ {
    pub const ALL: [Integ; 3] = [
        Integ::HmacSha1_96,
        Integ::HmacSha256_128,
        Integ::HmacSha512_256,
    ];

    pub fn id(self) -> u16 {
        match self {
            Integ::HmacSha1_96 => linerate_esp::suite::AUTH_HMAC_SHA1_96,
            Integ::HmacSha256_128 => linerate_esp::suite::AUTH_HMAC_SHA2_256_128,
            Integ::HmacSha512_256 => linerate_esp::suite::AUTH_HMAC_SHA2_512_256,
        }
    }

    pub fn from_id(id: u16) -> Option<Integ> {
        Integ::ALL.into_iter().find(|i| i.id() == id)
    }

    /// strongSwan's name (`sha256`).
    pub fn name(self) -> &'static str {
        match self {
            Integ::HmacSha1_96 => "sha1",
            Integ::HmacSha256_128 => "sha256",
            Integ::HmacSha512_256 => "sha512",
        }
    }

    /// The PRF of the same hash: what strongSwan negotiates when a
    /// proposal names no PRF of its own.
    pub fn prf(self) -> Prf {
        match self {
            Integ::HmacSha1_96 => Prf::HmacSha1,
            Integ::HmacSha256_128 => Prf::HmacSha256,
            Integ::HmacSha512_256 => Prf::HmacSha512,
        }
    }

    /// Key length: the hash's output length (RFC 2404, RFC 4868).
    pub fn key_len(self) -> usize {
        self.prf().output_len()
    }

    /// The truncated MAC's length.
    pub fn icv_len(self) -> usize {
        match self {
            Integ::HmacSha1_96 => 12,
            Integ::HmacSha256_128 => 16,
            Integ::HmacSha512_256 => 32,
        }
    }

    pub(crate) fn compute(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        let mut mac = match self {
            Integ::HmacSha1_96 => hmac!(sha1::Sha1, key, [data]),
            Integ::HmacSha256_128 => hmac!(sha2::Sha256, key, [data]),
            Integ::HmacSha512_256 => hmac!(sha2::Sha512, key, [data]),
        };
        mac.truncate(self.icv_len());
        mac
    }
}

/// Encryption algorithms of the IKE SA (transform type 1): AES-CBC.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Encr {
    AesCbc128,
    AesCbc256,
}

impl Encr {
    pub const ALL: [Encr; 2] = [Encr::AesCbc128, Encr::AesCbc256];
    pub const BLOCK: usize = 16;

    pub fn id(self) -> u16 {
        linerate_esp::suite::ENCR_AES_CBC
    }

    /// The Key Length attribute, in bits.
    pub fn key_bits(self) -> u16 {
        (self.key_len() * 8) as u16
    }

    pub fn key_len(self) -> usize {
        match self {
            Encr::AesCbc128 => 16,
            Encr::AesCbc256 => 32,
        }
    }

    pub fn from_transform(id: u16, bits: Option<u16>) -> Option<Encr> {
        Encr::ALL
            .into_iter()
            .find(|e| e.id() == id && Some(e.key_bits()) == bits)
    }

    /// strongSwan's name (`aes256`).
    pub fn name(self) -> &'static str {
        match self {
            Encr::AesCbc128 => "aes128",
            Encr::AesCbc256 => "aes256",
        }
    }

    /// Encrypts `buf` (whole blocks) in place.
    pub(crate) fn encrypt(self, key: &[u8], iv: &[u8], buf: &mut [u8]) {
        use cbc::cipher::{block_padding::NoPadding, BlockEncryptMut, KeyIvInit};
        let len = buf.len();
        // The key and IV lengths are the algorithm's, and buf is whole
        // blocks: neither call can fail.
        let done = match self {
            Encr::AesCbc128 => cbc::Encryptor::<aes::Aes128>::new_from_slices(key, iv)
                .map(|c| c.encrypt_padded_mut::<NoPadding>(buf, len).is_ok()),
            Encr::AesCbc256 => cbc::Encryptor::<aes::Aes256>::new_from_slices(key, iv)
                .map(|c| c.encrypt_padded_mut::<NoPadding>(buf, len).is_ok()),
        };
        debug_assert_eq!(done, Ok(true));
    }

    /// Decrypts `buf` (whole blocks) in place; false if the key, IV or
    /// length is not the algorithm's.
    pub(crate) fn decrypt(self, key: &[u8], iv: &[u8], buf: &mut [u8]) -> bool {
        use cbc::cipher::{block_padding::NoPadding, BlockDecryptMut, KeyIvInit};
        match self {
            Encr::AesCbc128 => cbc::Decryptor::<aes::Aes128>::new_from_slices(key, iv)
                .is_ok_and(|c| c.decrypt_padded_mut::<NoPadding>(buf).is_ok()),
            Encr::AesCbc256 => cbc::Decryptor::<aes::Aes256>::new_from_slices(key, iv)
                .is_ok_and(|c| c.decrypt_padded_mut::<NoPadding>(buf).is_ok()),
        }
    }
}

/// Diffie-Hellman groups (transform type 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DhGroup {
    /// RFC 3526 group 14, 2048-bit MODP.
    Modp2048,
    /// RFC 5903 group 19, NIST P-256.
    Ecp256,
    /// RFC 8031 group 31, Curve25519.
    Curve25519,
}

/// RFC 3526 §3: 2^2048 - 2^1984 - 1 + 2^64 * ( [2^1918 pi] + 124476 ),
/// generator 2 (checked against that formula when this was written).
const MODP2048_PRIME: &str = "\
FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD\
EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED\
EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F\
83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B\
E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510\
15728E5A8AACAA68FFFFFFFFFFFFFFFF";

impl DhGroup {
    pub const ALL: [DhGroup; 3] = [DhGroup::Modp2048, DhGroup::Ecp256, DhGroup::Curve25519];

    /// IKEv2 transform ID (the group number).
    pub fn id(self) -> u16 {
        match self {
            DhGroup::Modp2048 => 14,
            DhGroup::Ecp256 => 19,
            DhGroup::Curve25519 => 31,
        }
    }

    pub fn from_id(id: u16) -> Option<DhGroup> {
        DhGroup::ALL.into_iter().find(|g| g.id() == id)
    }

    /// strongSwan's name.
    pub fn name(self) -> &'static str {
        match self {
            DhGroup::Modp2048 => "modp2048",
            DhGroup::Ecp256 => "ecp256",
            DhGroup::Curve25519 => "x25519",
        }
    }

    /// Length of the KE payload's data (and of the shared secret for
    /// MODP; the ECP secret is the x coordinate alone, 32 bytes).
    pub fn public_len(self) -> usize {
        match self {
            DhGroup::Modp2048 => 256,
            DhGroup::Ecp256 => 64,
            DhGroup::Curve25519 => 32,
        }
    }
}

fn modp2048() -> (U2048, DynResidueParams<{ U2048::LIMBS }>) {
    let p = U2048::from_be_hex(MODP2048_PRIME);
    (p, DynResidueParams::new(&p))
}

/// This side's Diffie-Hellman private value, kept until the peer's public
/// value arrives.
pub(crate) enum DhPrivate {
    Modp(Box<Zeroizing<U2048>>),
    Ecp(Box<p256::ecdh::EphemeralSecret>),
    X25519(Box<x25519_dalek::StaticSecret>),
}

impl DhPrivate {
    /// A new private value of `group` and its public value as the KE
    /// payload carries it.
    pub(crate) fn generate(group: DhGroup, rng: Rng<'_>) -> (DhPrivate, Vec<u8>) {
        match group {
            DhGroup::Modp2048 => {
                let (_, params) = modp2048();
                let mut bytes = Zeroizing::new([0u8; 256]);
                rng.fill_bytes(bytes.as_mut());
                let x = Zeroizing::new(U2048::from_be_slice(bytes.as_ref()));
                let g = DynResidue::new(&U2048::from_u8(2), params);
                let public = g.pow(&x).retrieve().to_be_bytes().to_vec();
                (DhPrivate::Modp(Box::new(x)), public)
            }
            DhGroup::Ecp256 => {
                use p256::elliptic_curve::sec1::ToEncodedPoint;
                let secret = p256::ecdh::EphemeralSecret::random(&mut &mut *rng);
                let point = secret.public_key().to_encoded_point(false);
                // RFC 5903 §7: x | y, without SEC1's 0x04 prefix.
                let public = point.as_bytes()[1..].to_vec();
                (DhPrivate::Ecp(Box::new(secret)), public)
            }
            DhGroup::Curve25519 => {
                let secret = x25519_dalek::StaticSecret::random_from_rng(rng);
                let public = x25519_dalek::PublicKey::from(&secret).as_bytes().to_vec();
                (DhPrivate::X25519(Box::new(secret)), public)
            }
        }
    }

    pub(crate) fn group(&self) -> DhGroup {
        match self {
            DhPrivate::Modp(_) => DhGroup::Modp2048,
            DhPrivate::Ecp(_) => DhGroup::Ecp256,
            DhPrivate::X25519(_) => DhGroup::Curve25519,
        }
    }

    /// g^ir from the peer's public value, checked as RFC 7296 §5 and RFC
    /// 8031 ask (a MODP value in 2..p-2, an ECP point on the curve, a
    /// Curve25519 result that is not all zero).
    pub(crate) fn shared(&self, peer: &[u8]) -> Result<Secret, String> {
        let group = self.group();
        if peer.len() != group.public_len() {
            return Err(format!(
                "its {} public value has {} bytes, not {}",
                group.name(),
                peer.len(),
                group.public_len()
            ));
        }
        match self {
            DhPrivate::Modp(x) => {
                let (p, params) = modp2048();
                let y = U2048::from_be_slice(peer);
                let p_minus_1 = p.wrapping_sub(&U2048::ONE);
                if y <= U2048::ONE || y >= p_minus_1 {
                    return Err("its modp2048 public value is out of range".into());
                }
                let s = DynResidue::new(&y, params).pow(x.as_ref()).retrieve();
                Ok(Zeroizing::new(s.to_be_bytes().to_vec()))
            }
            DhPrivate::Ecp(secret) => {
                let mut sec1 = Vec::with_capacity(65);
                sec1.push(4);
                sec1.extend_from_slice(peer);
                let public = p256::PublicKey::from_sec1_bytes(&sec1)
                    .map_err(|_| "its ecp256 public value is not a point of P-256".to_string())?;
                let shared = secret.diffie_hellman(&public);
                Ok(Zeroizing::new(shared.raw_secret_bytes().to_vec()))
            }
            DhPrivate::X25519(secret) => {
                let mut a = [0u8; 32];
                a.copy_from_slice(peer);
                let shared = secret.diffie_hellman(&x25519_dalek::PublicKey::from(a));
                if !shared.was_contributory() {
                    return Err("its x25519 public value gives an all-zero secret".into());
                }
                Ok(Zeroizing::new(shared.as_bytes().to_vec()))
            }
        }
    }
}

/// The IKE SA's keys (RFC 7296 §2.14), wiped when dropped.
pub(crate) struct IkeKeys {
    pub sk_d: Secret,
    pub sk_ai: Secret,
    pub sk_ar: Secret,
    pub sk_ei: Secret,
    pub sk_er: Secret,
    pub sk_pi: Secret,
    pub sk_pr: Secret,
}

impl std::fmt::Debug for IkeKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IkeKeys(<redacted>)")
    }
}

/// SKEYSEED = prf(Ni | Nr, g^ir) (HMAC PRFs take the whole nonces).
pub(crate) fn skeyseed(prf: Prf, shared: &[u8], ni: &[u8], nr: &[u8]) -> Secret {
    let key = Zeroizing::new([ni, nr].concat());
    prf.compute(&key, &[shared])
}

/// {SK_d | SK_ai | SK_ar | SK_ei | SK_er | SK_pi | SK_pr} = prf+(SKEYSEED,
/// Ni | Nr | SPIi | SPIr).
#[allow(clippy::too_many_arguments)]
pub(crate) fn ike_keys(
    prf: Prf,
    integ: Integ,
    encr: Encr,
    shared: &[u8],
    ni: &[u8],
    nr: &[u8],
    spi_i: u64,
    spi_r: u64,
) -> IkeKeys {
    let seed = skeyseed(prf, shared, ni, nr);
    keys_from_skeyseed(prf, integ, encr, &seed, ni, nr, spi_i, spi_r)
}

/// SKEYSEED of an IKE SA that rekeys another (RFC 7296 §2.18):
/// prf(SK_d (old), g^ir (new) | Ni | Nr), with the old IKE SA's PRF.
pub(crate) fn rekey_skeyseed(
    prf: Prf,
    old_sk_d: &[u8],
    shared: &[u8],
    ni: &[u8],
    nr: &[u8],
) -> Secret {
    prf.compute(old_sk_d, &[shared, ni, nr])
}

/// The keys of the IKE SA that a CREATE_CHILD_SA rekey made (RFC 7296
/// §2.18): SKEYSEED from the old SA's SK_d, then the new SA's keys as
/// §2.14 cuts them from prf+(SKEYSEED, Ni | Nr | SPIi | SPIr) with the
/// exchange's nonces and the new SPIs. Both PRFs are the old SA's, as
/// strongSwan computes them (linerate rekeys only to the same suite, so
/// old and new are one PRF).
#[allow(clippy::too_many_arguments)]
pub(crate) fn rekeyed_ike_keys(
    prf: Prf,
    old_sk_d: &[u8],
    integ: Integ,
    encr: Encr,
    shared: &[u8],
    ni: &[u8],
    nr: &[u8],
    spi_i: u64,
    spi_r: u64,
) -> IkeKeys {
    let seed = rekey_skeyseed(prf, old_sk_d, shared, ni, nr);
    keys_from_skeyseed(prf, integ, encr, &seed, ni, nr, spi_i, spi_r)
}

/// {SK_d | SK_ai | SK_ar | SK_ei | SK_er | SK_pi | SK_pr} cut from
/// prf+(SKEYSEED, Ni | Nr | SPIi | SPIr) (§2.14).
#[allow(clippy::too_many_arguments)]
fn keys_from_skeyseed(
    prf: Prf,
    integ: Integ,
    encr: Encr,
    seed: &[u8],
    ni: &[u8],
    nr: &[u8],
    spi_i: u64,
    spi_r: u64,
) -> IkeKeys {
    let (p, a, e) = (prf.output_len(), integ.key_len(), encr.key_len());
    let salt = [ni, nr, &spi_i.to_be_bytes(), &spi_r.to_be_bytes()].concat();
    let km = prf.plus(seed, &salt, 3 * p + 2 * a + 2 * e);
    let mut at = 0;
    let mut take = |n: usize| {
        let part = Zeroizing::new(km[at..at + n].to_vec());
        at += n;
        part
    };
    IkeKeys {
        sk_d: take(p),
        sk_ai: take(a),
        sk_ar: take(a),
        sk_ei: take(e),
        sk_er: take(e),
        sk_pi: take(p),
        sk_pr: take(p),
    }
}

/// KEYMAT = prf+(SK_d, [g^ir (new) |] Ni | Nr) (RFC 7296 §2.17), cut into
/// (encryption, integrity) keys initiator-to-responder, then
/// responder-to-initiator: "All keys for SAs carrying data from the
/// initiator to the responder are taken before SAs going from the
/// responder to the initiator", the encryption key before the integrity
/// key.
pub(crate) fn child_keys(
    prf: Prf,
    sk_d: &[u8],
    dh: Option<&[u8]>,
    ni: &[u8],
    nr: &[u8],
    encr_len: usize,
    integ_len: usize,
) -> [(Secret, Secret); 2] {
    let seed = Zeroizing::new([dh.unwrap_or(&[]), ni, nr].concat());
    let km = prf.plus(sk_d, &seed, 2 * (encr_len + integ_len));
    let part = |from: usize, len: usize| Zeroizing::new(km[from..from + len].to_vec());
    let half = encr_len + integ_len;
    [
        (part(0, encr_len), part(encr_len, integ_len)),
        (part(half, encr_len), part(half + encr_len, integ_len)),
    ]
}

/// The key pad of shared-key authentication (RFC 7296 §2.15).
const KEY_PAD: &[u8] = b"Key Pad for IKEv2";

/// AUTH = prf(prf(Shared Secret, "Key Pad for IKEv2"), <SignedOctets>),
/// SignedOctets = the sender's first message | the peer's nonce |
/// prf(SK_px, the sender's ID payload body).
pub(crate) fn psk_auth(
    prf: Prf,
    psk: &[u8],
    sk_p: &[u8],
    first_message: &[u8],
    peer_nonce: &[u8],
    id_body: &[u8],
) -> Secret {
    let maced_id = prf.compute(sk_p, &[id_body]);
    let key = prf.compute(psk, &[KEY_PAD]);
    prf.compute(&key, &[first_message, peer_nonce, &maced_id])
}

/// NAT detection (RFC 7296 §2.23): SHA-1(SPIi | SPIr | IP address | port).
pub(crate) fn nat_hash(spi_i: u64, spi_r: u64, addr: std::net::Ipv4Addr, port: u16) -> Vec<u8> {
    use sha1::Digest;
    let mut h = sha1::Sha1::new();
    h.update(spi_i.to_be_bytes());
    h.update(spi_r.to_be_bytes());
    h.update(addr.octets());
    h.update(port.to_be_bytes());
    h.finalize().to_vec()
}

/// A deterministic random source for tests (SplitMix64): the same seed,
/// the same bytes. Never for keys outside tests.
#[cfg(test)]
pub(crate) struct SeededRng(u64);

#[cfg(test)]
impl SeededRng {
    pub(crate) fn new(seed: u64) -> SeededRng {
        SeededRng(seed)
    }
}

#[cfg(test)]
impl rand_core::RngCore for SeededRng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        rand_core::impls::fill_bytes_via_next(self, dest)
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

/// For the tests only: the protocol asks for a cryptographic source.
#[cfg(test)]
impl rand_core::CryptoRng for SeededRng {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::decode_hex;

    fn h(text: &str) -> Vec<u8> {
        decode_hex(&text.split_whitespace().collect::<String>()).unwrap()
    }

    /// RFC 4231 test cases 1, 2 and 6 (HMAC-SHA-256/512), RFC 2202 test
    /// case 2 (HMAC-SHA-1).
    #[test]
    fn prfs_match_rfc_4231_and_2202() {
        let key1 = [0x0b; 20];
        let data1 = b"Hi There";
        assert_eq!(
            *Prf::HmacSha256.compute(&key1, &[data1]),
            h("b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
        );
        assert_eq!(
            *Prf::HmacSha512.compute(&key1, &[data1]),
            h(
                "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde
               daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854"
            )
        );
        // Test case 2: key "Jefe"; the data given in two parts.
        assert_eq!(
            *Prf::HmacSha256.compute(b"Jefe", &[b"what do ya want ", b"for nothing?"]),
            h("5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        );
        assert_eq!(
            *Prf::HmacSha1.compute(b"Jefe", &[b"what do ya want for nothing?"]),
            h("effcdf6ae5eb2fa2d27416d5f184df9c259a7c79")
        );
        // Test case 6: a key longer than the block (131 bytes of 0xaa).
        assert_eq!(
            *Prf::HmacSha512.compute(
                &[0xaa; 131],
                &[b"Test Using Larger Than Block-Size Key - Hash Key First"]
            ),
            h(
                "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352
               6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598"
            )
        );
        // Integrity truncates the same MAC (RFC 4868 §2.6).
        assert_eq!(
            Integ::HmacSha256_128.compute(&key1, data1),
            h("b0344c61d8db38535ca8afceaf0bf12b")
        );
    }

    /// prf+ and the key derivation against an independent implementation:
    /// the example printed in libreswan's IKEv2 KDF test program
    /// (programs/cavp, NIST SP 800-135 CAVS format; HMAC-SHA1, 8-byte
    /// nonces, 132 bytes of keying material).
    #[test]
    fn key_derivation_matches_a_known_answer() {
        let gir = h("4b2c1f971981a8ad8d0abeafabf38cf75fc8349c148142465ed9c8b516b8be52");
        let gir_new = h("863f3c9d06efd39d2b907b97f8699e5dd5251ef64a2a176f36ee40c87d4f9330");
        let ni = h("32b50d5f4a3763f3");
        let nr = h("9206a04b26564cb1");
        let spi_i = 0x34c9e7c188868785u64;
        let spi_r = 0x3ff77d760d2b2199u64;
        let prf = Prf::HmacSha1;
        let seed = skeyseed(prf, &gir, &ni, &nr);
        assert_eq!(*seed, h("a9a7b222b59f8f48645f28a1db5b5f5d7479cba7"));
        let salt = [&ni[..], &nr, &spi_i.to_be_bytes(), &spi_r.to_be_bytes()].concat();
        let dkm = prf.plus(&seed, &salt, 132);
        assert_eq!(
            *dkm,
            h(
                "a14293677cc80ff8f9cc0eee30d895da9d8f405666e30ef0dfcb63c634a46002a2a63080e514a0
               62768b76606f9fa5e992204fc5a670bde3f10d6b027113936a5c55b648a194ae587b0088d52204
               b702c979fa280870d2ed41efa9c549fd11198af1670b143d384bd275c5f594cf266b05ebadca85
               5e4249520a441a81157435a7a56cc4"
            )
        );
        // SK_d is the first PRF-length part; KEYMAT = prf+(SK_d, Ni | Nr),
        // and with PFS prf+(SK_d, g^ir (new) | Ni | Nr).
        let sk_d = &dkm[..20];
        let child = child_keys(prf, sk_d, None, &ni, &nr, 66, 0);
        let keymat: Vec<u8> = [&child[0].0[..], &child[1].0[..]].concat();
        let expected = h(
            "8059e3ee8810e6c3a91bc8bcd2a7a41151b8d0e6ae239c7b38093ad85ef4c5811a8e7b5d1cdabd
               9560b2d5e092d1f24e2d4b85eccdf0ad0dc9abd94b51ee71814ca6dbc8bb51b6309f5b9545c7eb
               35cf5580b1e521a8fe20754a2d883ba0c2cf285f524aea6545b33106bc03e614296d319d41d4b5
               0b3f510b1c0a22f3e664994d234cb4",
        );
        assert_eq!(keymat, expected);
        // KEYMAT's order: i->r encryption, i->r integrity, then r->i.
        let [(ei, ai), (er, ar)] = child_keys(prf, sk_d, None, &ni, &nr, 20, 12);
        assert_eq!([&ei[..], &ai, &er, &ar].concat(), expected[..64]);
        let pfs = child_keys(prf, sk_d, Some(&gir_new), &ni, &nr, 66, 0);
        let keymat: Vec<u8> = [&pfs[0].0[..], &pfs[1].0[..]].concat();
        assert_eq!(
            keymat,
            h(
                "bb43244c1860ad65ee1e211ffe8bb3661750c8f89cb9f547df7f4fa61d37301628190e38c66232
               eab4b3ab14c400a5197dd3730ed4820a8a10394d51e1c0400052f63ebd36b0e7ef53aaed31eba4
               a5080d7d4b5666023a8bbb5ffb7857240f9a05884d1b7d2f933708450b7b3288f1fc863ab49fa9
               01227cffc06e27899c7054d56fd74c"
            )
        );
        // The IKE SA's keys are consecutive slices of the same prf+ stream.
        let keys = ike_keys(
            prf,
            Integ::HmacSha1_96,
            Encr::AesCbc128,
            &gir,
            &ni,
            &nr,
            spi_i,
            spi_r,
        );
        assert_eq!(*keys.sk_d, dkm[..20]);
        assert_eq!(*keys.sk_ai, dkm[20..40]);
        assert_eq!(*keys.sk_ar, dkm[40..60]);
        assert_eq!(*keys.sk_ei, dkm[60..76]);
        assert_eq!(*keys.sk_er, dkm[76..92]);
        assert_eq!(*keys.sk_pi, dkm[92..112]);
        assert_eq!(*keys.sk_pr, dkm[112..132]);
        // The IKE SA rekey (§2.18): SKEYSEED = prf(SK_d (old), g^ir (new)
        // | Ni | Nr), the same program's "SKEYSEED(Rekey)".
        let rekey_seed = rekey_skeyseed(prf, sk_d, &gir_new, &ni, &nr);
        assert_eq!(*rekey_seed, h("63e81194946ebd05df7df5ebf5d8750056bf1f1d"));
        // The new SA's keys are prf+ of that seed, as §2.14 cuts them.
        let rekeyed = rekeyed_ike_keys(
            prf,
            sk_d,
            Integ::HmacSha1_96,
            Encr::AesCbc128,
            &gir_new,
            &ni,
            &nr,
            spi_i,
            spi_r,
        );
        let dkm_rekey = prf.plus(&rekey_seed, &salt, 132);
        assert_eq!(*rekeyed.sk_d, dkm_rekey[..20]);
        assert_eq!(*rekeyed.sk_er, dkm_rekey[76..92]);
        assert_eq!(*rekeyed.sk_pr, dkm_rekey[112..132]);
        assert_ne!(*rekeyed.sk_d, *keys.sk_d);
    }

    fn agree(group: DhGroup) {
        let mut rng = SeededRng::new(1);
        let (a, a_pub) = DhPrivate::generate(group, &mut rng);
        let (b, b_pub) = DhPrivate::generate(group, &mut rng);
        assert_eq!(a_pub.len(), group.public_len());
        let s1 = a.shared(&b_pub).unwrap();
        let s2 = b.shared(&a_pub).unwrap();
        assert_eq!(*s1, *s2);
        assert_eq!(s1.len(), if group == DhGroup::Modp2048 { 256 } else { 32 });
        assert!(a.shared(&b_pub[1..]).is_err());
    }

    #[test]
    fn every_group_agrees_on_a_secret() {
        for group in DhGroup::ALL {
            agree(group);
        }
    }

    #[test]
    fn bad_public_values_are_refused() {
        let mut rng = SeededRng::new(2);
        let (modp, _) = DhPrivate::generate(DhGroup::Modp2048, &mut rng);
        let mut one = vec![0u8; 256];
        one[255] = 1;
        assert!(modp.shared(&one).is_err());
        assert!(modp.shared(&[0xff; 256]).is_err());
        let (ecp, _) = DhPrivate::generate(DhGroup::Ecp256, &mut rng);
        assert!(ecp.shared(&[1; 64]).is_err());
        let (x, _) = DhPrivate::generate(DhGroup::Curve25519, &mut rng);
        assert!(x.shared(&[0; 32]).is_err());
    }

    /// RFC 5903 §8.1: the ECP 256 public value and shared secret are the
    /// coordinates the RFC prints (checked through p256 with its keys).
    #[test]
    fn ecp256_matches_rfc_5903() {
        use p256::elliptic_curve::sec1::ToEncodedPoint;
        let i = p256::SecretKey::from_slice(&h(
            "C88F01F510D9AC3F70A292DAA2316DE544E9AAB8AFE84049C62A9C57862D1433",
        ))
        .unwrap();
        let point = i.public_key().to_encoded_point(false);
        assert_eq!(
            point.as_bytes()[1..],
            h(
                "DAD0B65394221CF9B051E1FECA5787D098DFE637FC90B9EF945D0C3772581180
               5271A0461CDB8252D61F1C456FA3E59AB1F45B33ACCF5F58389E0577B8990BB3"
            )[..]
        );
        let r_pub = h(
            "D12DFB5289C8D4F81208B70270398C342296970A0BCCB74C736FC7554494BF63
                       56FBF3CA366CC23E8157854C13C58D6AAC23F046ADA30F8353E74F33039872AB",
        );
        let r = p256::PublicKey::from_sec1_bytes(&[&[4u8][..], &r_pub].concat()).unwrap();
        let shared = p256::ecdh::diffie_hellman(i.to_nonzero_scalar(), r.as_affine());
        assert_eq!(
            shared.raw_secret_bytes()[..],
            h("D6840F6B42F6EDAFD13116E0E12565202FEF8E9ECE7DCE03812464D04B9442DE")[..]
        );
    }
}
