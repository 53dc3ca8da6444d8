//! One ESP security association per direction: `Outbound` seals the test
//! frames linerate sends, `Inbound` opens what the gateway sends back.
//!
//! Packet layout (RFC 4303 §2), all multi-byte fields big-endian:
//!
//! ```text
//! SPI (4) | sequence number (4) | IV (8 GCM, 16 CBC)
//!   | encrypted: payload | padding 1,2,3.. | pad length (1) | next header (1)
//!   | ICV (16 GCM, 12/16/32 HMAC)
//! ```
//!
//! GCM authenticates SPI and sequence number as additional data and the
//! encrypted part (RFC 4106); CBC suites encrypt, then compute the HMAC over
//! everything before the ICV (RFC 4303 §3.3.2).

use serde::Serialize;

use crate::crypto::{CbcDec, CbcEnc, CbcIvs, Gcm, Integrity};
use crate::error::{EspError, Malformed};
use crate::keys::SaKeys;
use crate::replay::{ReplayWindow, REPLAY_WINDOW};
use crate::suite::EspSuite;

/// Next header for a tunnelled IPv4 packet (tunnel mode, RFC 4303 §2.7).
pub const NEXT_HEADER_IPV4: u8 = 4;
/// Next header for a tunnelled IPv6 packet.
pub const NEXT_HEADER_IPV6: u8 = 41;
/// Next header of a dummy packet (RFC 4303 §2.6), which receivers discard.
pub const NEXT_HEADER_NONE: u8 = 59;

/// SPI and sequence number.
const ESP_HEADER_LEN: usize = 8;
/// Pad length and next header.
const TRAILER_LEN: usize = 2;
/// The largest ESP packet an IPv4 datagram can carry.
const MAX_ESP_LEN: usize = 65535 - 20;

/// The SPI of an ESP packet, for handing it to the right `Inbound` when
/// several SAs share a port. None if fewer than 4 bytes.
pub fn spi_of(esp: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(esp.get(..4)?.try_into().ok()?))
}

/// What an outbound SA has sent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OutboundCounters {
    /// Packets sealed.
    pub packets: u64,
    /// Bytes of the clear inner packets.
    pub clear_bytes: u64,
    /// Bytes of the ESP packets, SPI to ICV: what the SA puts on the wire.
    /// The outer IPv4 (20), UDP (8, RFC 3948) and Ethernet headers come on
    /// top, a fixed number per packet the framing knows.
    pub esp_bytes: u64,
}

/// What an inbound SA has received and refused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct InboundCounters {
    /// Packets opened: ICV verified, not replayed, padding correct.
    pub packets: u64,
    /// Bytes of the clear inner packets handed back.
    pub clear_bytes: u64,
    /// Bytes of the accepted ESP packets, SPI to ICV.
    pub esp_bytes: u64,
    /// Packets whose ICV did not verify.
    pub icv_failures: u64,
    /// Packets with a sequence number already received.
    pub replays: u64,
    /// Packets left of the anti-replay window.
    pub too_old: u64,
    /// Packets too short, not a whole number of blocks, or badly padded.
    pub malformed: u64,
}

/// The clear packet `Inbound::open` recovered, in the caller's buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Opened<'a> {
    /// The inner packet (an IPv4 packet in tunnel mode), decrypted in place.
    pub packet: &'a mut [u8],
    /// What `packet` is: 4 IPv4, 41 IPv6, 59 a dummy packet to discard.
    pub next_header: u8,
    /// The packet's ESP sequence number, which tells the tester the order
    /// the gateway sent in.
    pub seq: u32,
}

// One per SA, made once and never moved on the hot path: keeping the key
// schedules inline saves a pointer chase per packet; the size is no cost.
#[allow(clippy::large_enum_variant)]
enum SealKey {
    Gcm(Gcm),
    Cbc {
        cipher: CbcEnc,
        ivs: CbcIvs,
        integrity: Integrity,
    },
}

// One per SA, made once and never moved on the hot path: keeping the key
// schedules inline saves a pointer chase per packet; the size is no cost.
#[allow(clippy::large_enum_variant)]
enum OpenKey {
    Gcm(Gcm),
    Cbc {
        cipher: CbcDec,
        integrity: Integrity,
    },
}

/// Padded length of payload plus trailer (RFC 4303 §2.4): the smallest
/// padding that fills the block; no extra traffic-flow padding.
#[inline]
fn padded_len(suite: EspSuite, inner_len: usize) -> usize {
    let block = suite.pad_block();
    (inner_len + TRAILER_LEN).div_ceil(block) * block
}

/// The sending side of one SA.
///
/// Holds the key schedules, so sealing a packet does no key setup and no
/// allocation. One per SA and per sending thread: `seal` takes `&mut self`
/// because each packet takes the next sequence number.
pub struct Outbound {
    suite: EspSuite,
    spi: u32,
    /// The next sequence number to send; u64 so 2^32 says "exhausted".
    next_seq: u64,
    key: SealKey,
    counters: OutboundCounters,
}

impl Outbound {
    /// An SA that will send its first packet with sequence number 1
    /// (RFC 4303 §3.3.3). Consumes the keys, which are wiped when dropped
    /// here; only the cipher's key schedules remain.
    pub fn new(keys: SaKeys) -> Result<Outbound, EspError> {
        keys.validate()?;
        let key = if keys.suite.is_aead() {
            SealKey::Gcm(Gcm::new(&keys))
        } else {
            SealKey::Cbc {
                cipher: CbcEnc::new(keys.suite.cipher, keys.cipher_key()),
                ivs: CbcIvs::new()?,
                integrity: Integrity::new(keys.suite, &keys.integrity_key),
            }
        };
        Ok(Outbound {
            suite: keys.suite,
            spi: keys.spi,
            next_seq: 1,
            key,
            counters: OutboundCounters::default(),
        })
    }

    pub fn suite(&self) -> EspSuite {
        self.suite
    }

    pub fn spi(&self) -> u32 {
        self.spi
    }

    /// What this SA has sent so far.
    pub fn counters(&self) -> &OutboundCounters {
        &self.counters
    }

    /// Packets this SA can still send before it must be rekeyed; IKE should
    /// rekey well before this reaches 0.
    pub fn remaining(&self) -> u64 {
        (u32::MAX as u64 + 1).saturating_sub(self.next_seq)
    }

    /// Where the inner packet starts in an ESP packet: after SPI, sequence
    /// number and IV. `seal_in_place` expects it there.
    pub fn payload_offset(&self) -> usize {
        ESP_HEADER_LEN + self.suite.iv_len()
    }

    /// Length of the ESP packet that carries an inner packet of `inner_len`
    /// bytes.
    pub fn sealed_len(&self, inner_len: usize) -> usize {
        inner_len + self.suite.overhead(inner_len)
    }

    /// Seals `inner` into `out` and returns the ESP packet's length.
    ///
    /// `out` must hold `sealed_len(inner.len())` bytes. The inner packet is
    /// copied once into place and encrypted there; to avoid even that copy,
    /// build the packet at `payload_offset()` and use `seal_in_place`.
    pub fn seal(
        &mut self,
        inner: &[u8],
        next_header: u8,
        out: &mut [u8],
    ) -> Result<usize, EspError> {
        let need = self.sealed_len(inner.len());
        if out.len() < need {
            return Err(EspError::BufferTooSmall {
                need,
                have: out.len(),
            });
        }
        let start = self.payload_offset();
        out[start..start + inner.len()].copy_from_slice(inner);
        self.seal_in_place(out, inner.len(), next_header)
    }

    /// Seals the `inner_len`-byte packet already at `esp[payload_offset()..]`
    /// and returns the ESP packet's length: writes SPI, sequence number, IV,
    /// padding and trailer around it, encrypts it in place and appends the
    /// ICV. `esp` must hold `sealed_len(inner_len)` bytes.
    pub fn seal_in_place(
        &mut self,
        esp: &mut [u8],
        inner_len: usize,
        next_header: u8,
    ) -> Result<usize, EspError> {
        self.seal_with_iv(esp, inner_len, next_header, None)
    }

    /// Starts the sequence at `seq`, for test vectors and the exhaustion test.
    #[cfg(test)]
    pub(crate) fn set_next_seq(&mut self, seq: u64) {
        self.next_seq = seq;
    }

    /// `seal_in_place`, with the IV given by a test vector instead of made.
    pub(crate) fn seal_with_iv(
        &mut self,
        esp: &mut [u8],
        inner_len: usize,
        next_header: u8,
        iv_override: Option<&[u8]>,
    ) -> Result<usize, EspError> {
        let suite = self.suite;
        let iv_len = suite.iv_len();
        let hdr = ESP_HEADER_LEN + iv_len;
        let padded = padded_len(suite, inner_len);
        let total = hdr + padded + suite.icv_len();
        if total > MAX_ESP_LEN {
            return Err(EspError::TooLong { len: total });
        }
        if esp.len() < total {
            return Err(EspError::BufferTooSmall {
                need: total,
                have: esp.len(),
            });
        }
        if self.next_seq > u32::MAX as u64 {
            return Err(EspError::SequenceExhausted { spi: self.spi });
        }
        let seq = self.next_seq as u32;
        let esp = &mut esp[..total];
        let mut aad = [0u8; ESP_HEADER_LEN];
        aad[..4].copy_from_slice(&self.spi.to_be_bytes());
        aad[4..].copy_from_slice(&seq.to_be_bytes());
        esp[..ESP_HEADER_LEN].copy_from_slice(&aad);

        // Padding 1, 2, 3, ... then pad length and next header.
        let pad_len = padded - TRAILER_LEN - inner_len;
        let trailer = &mut esp[hdr + inner_len..hdr + padded];
        for (i, b) in trailer[..pad_len].iter_mut().enumerate() {
            *b = i as u8 + 1;
        }
        trailer[pad_len] = pad_len as u8;
        trailer[pad_len + 1] = next_header;

        match &mut self.key {
            SealKey::Gcm(gcm) => {
                // RFC 4106 §3.1 asks only that the IV never repeat under a
                // key; the sequence number never does (it is not allowed to
                // wrap), so it is the IV, as Linux's seqiv does.
                let (head, rest) = esp.split_at_mut(hdr);
                let iv = &mut head[ESP_HEADER_LEN..];
                match iv_override {
                    Some(v) => iv.copy_from_slice(v),
                    None => iv.copy_from_slice(&(seq as u64).to_be_bytes()),
                }
                let (body, icv) = rest.split_at_mut(padded);
                gcm.seal(iv, aad, body, icv)?;
            }
            SealKey::Cbc {
                cipher,
                ivs,
                integrity,
            } => {
                // One block of the cipher: 16 bytes for AES, 8 for DES and
                // 3DES (the first 8 of a fresh block), none for NULL (which
                // spends no AES block on an IV it does not send).
                let mut iv = if iv_len == 0 { [0; 16] } else { ivs.next_iv() };
                let iv = &mut iv[..iv_len];
                if let Some(v) = iv_override {
                    iv.copy_from_slice(v);
                }
                esp[ESP_HEADER_LEN..hdr].copy_from_slice(iv);
                cipher.cbc_encrypt(iv, &mut esp[hdr..hdr + padded]);
                let (covered, icv) = esp.split_at_mut(hdr + padded);
                integrity.sign(covered, icv);
            }
        }
        self.next_seq += 1;
        self.counters.packets += 1;
        self.counters.clear_bytes += inner_len as u64;
        self.counters.esp_bytes += total as u64;
        Ok(total)
    }
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound")
            .field("suite", &self.suite)
            .field("spi", &format_args!("{:#010x}", self.spi))
            .field("next_seq", &self.next_seq)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

/// The receiving side of one SA.
///
/// Holds the key schedules and the anti-replay window; `open` takes
/// `&mut self` because it marks sequence numbers and counts.
pub struct Inbound {
    suite: EspSuite,
    spi: u32,
    key: OpenKey,
    window: ReplayWindow,
    counters: InboundCounters,
}

impl Inbound {
    /// An SA that accepts packets with `keys.spi`, anti-replay window
    /// empty. Consumes the keys, which are wiped when dropped here.
    pub fn new(keys: SaKeys) -> Result<Inbound, EspError> {
        keys.validate()?;
        let key = if keys.suite.is_aead() {
            OpenKey::Gcm(Gcm::new(&keys))
        } else {
            OpenKey::Cbc {
                cipher: CbcDec::new(keys.suite.cipher, keys.cipher_key()),
                integrity: Integrity::new(keys.suite, &keys.integrity_key),
            }
        };
        Ok(Inbound {
            suite: keys.suite,
            spi: keys.spi,
            key,
            window: ReplayWindow::default(),
            counters: InboundCounters::default(),
        })
    }

    pub fn suite(&self) -> EspSuite {
        self.suite
    }

    pub fn spi(&self) -> u32 {
        self.spi
    }

    /// What this SA has accepted and refused so far.
    pub fn counters(&self) -> &InboundCounters {
        &self.counters
    }

    /// The highest sequence number accepted so far (0 before any); the
    /// anti-replay window is the `REPLAY_WINDOW` numbers ending there.
    pub fn highest_seq(&self) -> u32 {
        self.window.highest()
    }

    /// Verifies and decrypts one ESP packet (SPI first, as `decapsulate`
    /// returns it) in place and returns the clear inner packet.
    ///
    /// In RFC 4303 §3.4's order: SPI, anti-replay window (cheap, before any
    /// crypto), ICV, and only then is the sequence number marked as seen, so
    /// forged packets cannot move the window. The padding is checked after
    /// decryption; an authentic packet with bad padding still uses up its
    /// sequence number. Every refusal is counted except an unknown SPI.
    pub fn open<'a>(&mut self, esp: &'a mut [u8]) -> Result<Opened<'a>, EspError> {
        let esp_len = esp.len() as u64;
        let result = self.open_uncounted(esp);
        match &result {
            Ok(opened) => {
                self.counters.packets += 1;
                self.counters.clear_bytes += opened.packet.len() as u64;
                self.counters.esp_bytes += esp_len;
            }
            Err(EspError::IcvFailure { .. }) => self.counters.icv_failures += 1,
            Err(EspError::Replay { .. }) => self.counters.replays += 1,
            Err(EspError::TooOld { .. }) => self.counters.too_old += 1,
            Err(EspError::Malformed(_)) => self.counters.malformed += 1,
            Err(_) => {}
        }
        result
    }

    fn open_uncounted<'a>(&mut self, esp: &'a mut [u8]) -> Result<Opened<'a>, EspError> {
        let suite = self.suite;
        let hdr = ESP_HEADER_LEN + suite.iv_len();
        let icv_len = suite.icv_len();
        let block = suite.pad_block();
        let min = hdr + block + icv_len;
        let len = esp.len();
        let Some(spi) = spi_of(esp) else {
            return Err(Malformed::TooShort { len, min }.into());
        };
        if spi != self.spi {
            return Err(EspError::UnknownSpi {
                expected: self.spi,
                got: spi,
            });
        }
        if len < min {
            return Err(Malformed::TooShort { len, min }.into());
        }
        let body_len = len - hdr - icv_len;
        if body_len % block != 0 {
            return Err(Malformed::NotBlockMultiple {
                len: body_len,
                block,
            }
            .into());
        }
        let seq = u32::from_be_bytes([esp[4], esp[5], esp[6], esp[7]]);
        self.window.check(seq)?;

        let verified = match &mut self.key {
            OpenKey::Gcm(gcm) => {
                let mut aad = [0u8; ESP_HEADER_LEN];
                aad.copy_from_slice(&esp[..ESP_HEADER_LEN]);
                let (head, rest) = esp.split_at_mut(hdr);
                gcm.open(&head[ESP_HEADER_LEN..], aad, rest)
            }
            OpenKey::Cbc { cipher, integrity } => {
                let (covered, icv) = esp.split_at(len - icv_len);
                let ok = integrity.verify(covered, icv);
                if ok {
                    let mut iv = [0u8; 16];
                    let iv = &mut iv[..hdr - ESP_HEADER_LEN];
                    iv.copy_from_slice(&esp[ESP_HEADER_LEN..hdr]);
                    cipher.cbc_decrypt(iv, &mut esp[hdr..hdr + body_len]);
                }
                ok
            }
        };
        if !verified {
            return Err(EspError::IcvFailure { seq });
        }
        self.window.mark(seq);

        let body = &mut esp[hdr..hdr + body_len];
        let pad_len = body[body_len - 2] as usize;
        let next_header = body[body_len - 1];
        let available = body_len - TRAILER_LEN;
        if pad_len > available {
            return Err(Malformed::PadLength { pad_len, available }.into());
        }
        let inner_len = available - pad_len;
        let padding = &body[inner_len..available];
        if !padding.iter().enumerate().all(|(i, &b)| b == i as u8 + 1) {
            return Err(Malformed::BadPadding.into());
        }
        Ok(Opened {
            packet: &mut body[..inner_len],
            next_header,
            seq,
        })
    }
}

impl std::fmt::Debug for Inbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inbound")
            .field("suite", &self.suite)
            .field("spi", &format_args!("{:#010x}", self.spi))
            .field("highest_seq", &self.window.highest())
            .field("window", &REPLAY_WINDOW)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::suite::EspCipher;
    use crate::testutil::keys;
    use proptest::prelude::*;

    const SPI: u32 = 0x1000_0001;

    fn pair(suite: EspSuite) -> (Outbound, Inbound) {
        (
            Outbound::new(keys(suite, SPI)).unwrap(),
            Inbound::new(keys(suite, SPI)).unwrap(),
        )
    }

    /// An inner packet of `len` bytes with a pattern that shows offsets.
    fn inner(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i * 31 + 7) as u8).collect()
    }

    fn sealed(out: &mut Outbound, len: usize) -> Vec<u8> {
        let mut buf = vec![0u8; out.sealed_len(len)];
        let n = out.seal(&inner(len), NEXT_HEADER_IPV4, &mut buf).unwrap();
        assert_eq!(n, buf.len());
        buf
    }

    #[test]
    fn every_suite_round_trips_every_size_up_to_1600() {
        for suite in EspSuite::ALL {
            let (mut out, mut inb) = pair(suite);
            let mut buf = vec![0u8; 1700];
            let mut esp_bytes = 0;
            for len in 0..=1600 {
                let packet = inner(len);
                let n = out.seal(&packet, NEXT_HEADER_IPV4, &mut buf).unwrap();
                assert_eq!(n, len + suite.overhead(len), "{suite} {len}");
                assert_eq!(spi_of(&buf), Some(SPI));
                // The inner packet is not in the clear (but with NULL).
                if len >= 16 && suite.cipher != EspCipher::Null {
                    let at = out.payload_offset();
                    assert_ne!(buf[at..at + 16], packet[..16], "{suite} {len}");
                }
                esp_bytes += n as u64;
                let opened = inb.open(&mut buf[..n]).unwrap();
                assert_eq!(opened.packet, &packet[..], "{suite} {len}");
                assert_eq!(opened.next_header, NEXT_HEADER_IPV4);
                assert_eq!(opened.seq, len as u32 + 1);
            }
            let sent = *out.counters();
            assert_eq!(sent.packets, 1601);
            assert_eq!(sent.clear_bytes, 1600 * 1601 / 2);
            assert_eq!(sent.esp_bytes, esp_bytes);
            let got = *inb.counters();
            assert_eq!(
                (got.packets, got.clear_bytes, got.esp_bytes),
                (sent.packets, sent.clear_bytes, sent.esp_bytes)
            );
            assert_eq!(inb.highest_seq(), 1601);
        }
    }

    #[test]
    fn seal_in_place_needs_no_copy_and_matches_seal() {
        for suite in EspSuite::ALL {
            let (mut out, mut inb) = pair(suite);
            let packet = inner(100);
            let mut buf = vec![0u8; out.sealed_len(100)];
            let at = out.payload_offset();
            buf[at..at + 100].copy_from_slice(&packet);
            let n = out.seal_in_place(&mut buf, 100, NEXT_HEADER_IPV6).unwrap();
            let opened = inb.open(&mut buf[..n]).unwrap();
            assert_eq!((opened.packet.len(), opened.next_header), (100, 41));
        }
    }

    #[test]
    fn sequence_numbers_count_from_one_and_gcm_ivs_follow_them() {
        let (mut out, _) = pair(EspSuite::Aes128Gcm16);
        for seq in 1u32..=3 {
            let p = sealed(&mut out, 46);
            assert_eq!(p[4..8], seq.to_be_bytes());
            assert_eq!(p[8..16], (seq as u64).to_be_bytes());
        }
    }

    #[test]
    fn cbc_ivs_are_fresh_per_packet() {
        let (mut out, _) = pair(EspSuite::Aes128Sha256);
        let a = sealed(&mut out, 46);
        let b = sealed(&mut out, 46);
        assert_ne!(a[8..24], b[8..24]);
        // Same clear packet, different ciphertext.
        assert_ne!(a[24..40], b[24..40]);
    }

    #[test]
    fn too_small_buffers_are_refused_without_using_a_sequence_number() {
        let (mut out, mut inb) = pair(EspSuite::Aes256Sha512);
        let need = out.sealed_len(46);
        let mut buf = vec![0u8; need - 1];
        assert_eq!(
            out.seal(&inner(46), 4, &mut buf),
            Err(EspError::BufferTooSmall {
                need,
                have: need - 1
            })
        );
        assert_eq!(out.counters().packets, 0);
        let mut p = sealed(&mut out, 46);
        assert_eq!(inb.open(&mut p).unwrap().seq, 1);
    }

    #[test]
    fn the_sequence_number_never_wraps() {
        for suite in [EspSuite::Aes128Gcm16, EspSuite::Aes128Sha1] {
            let (mut out, mut inb) = pair(suite);
            out.set_next_seq(u32::MAX as u64 - 1);
            assert_eq!(out.remaining(), 2);
            let mut a = sealed(&mut out, 46);
            let mut b = sealed(&mut out, 46);
            assert_eq!(out.remaining(), 0);
            let mut buf = vec![0u8; 200];
            let e = out.seal(&inner(46), 4, &mut buf).unwrap_err();
            assert_eq!(e, EspError::SequenceExhausted { spi: SPI });
            assert!(e.to_string().contains("rekeyed"), "{e}");
            // Still exhausted, still nothing sent.
            assert!(out.seal(&inner(46), 4, &mut buf).is_err());
            assert_eq!(out.counters().packets, 2);
            assert_eq!(inb.open(&mut a).unwrap().seq, u32::MAX - 1);
            assert_eq!(inb.open(&mut b).unwrap().seq, u32::MAX);
        }
    }

    #[test]
    fn duplicates_are_replays_and_old_packets_too_old() {
        for suite in EspSuite::ALL {
            let (mut out, mut inb) = pair(suite);
            let packets: Vec<Vec<u8>> = (0..1100).map(|_| sealed(&mut out, 64)).collect();
            // Out of order within the window is fine.
            let mut p = packets[9].clone();
            inb.open(&mut p).unwrap();
            let mut p = packets[3].clone();
            inb.open(&mut p).unwrap();
            let mut p = packets[3].clone();
            assert_eq!(inb.open(&mut p), Err(EspError::Replay { seq: 4 }));
            let mut p = packets[1099].clone();
            inb.open(&mut p).unwrap();
            // Sequence number 5 is 1095 behind 1100: outside the window.
            let mut p = packets[4].clone();
            assert!(matches!(
                inb.open(&mut p),
                Err(EspError::TooOld {
                    seq: 5,
                    highest: 1100,
                    ..
                })
            ));
            // 1100 - 1023 = 77 is the oldest still accepted.
            let mut p = packets[76].clone();
            inb.open(&mut p).unwrap();
            let mut p = packets[75].clone();
            assert!(matches!(inb.open(&mut p), Err(EspError::TooOld { .. })));
            let c = *inb.counters();
            assert_eq!((c.packets, c.replays, c.too_old), (4, 1, 2), "{suite}");
        }
    }

    #[test]
    fn a_forged_packet_does_not_use_up_its_sequence_number() {
        for suite in EspSuite::ALL {
            let (mut out, mut inb) = pair(suite);
            let good = sealed(&mut out, 200);
            let mut forged = good.clone();
            let last = forged.len() - 1;
            forged[last] ^= 0x80;
            assert_eq!(
                inb.open(&mut forged),
                Err(EspError::IcvFailure { seq: 1 }),
                "{suite}"
            );
            // A forged packet far ahead does not move the window either.
            let mut ahead = sealed(&mut out, 200);
            ahead[4..8].copy_from_slice(&5000u32.to_be_bytes());
            assert_eq!(
                inb.open(&mut ahead),
                Err(EspError::IcvFailure { seq: 5000 })
            );
            assert_eq!(inb.highest_seq(), 0);
            let mut p = good.clone();
            inb.open(&mut p).unwrap();
            assert_eq!(inb.counters().icv_failures, 2);
        }
    }

    #[test]
    fn unknown_spi_is_named_and_not_counted() {
        let (mut out, mut inb) = pair(EspSuite::Aes128Gcm16);
        let mut p = sealed(&mut out, 46);
        p[0] ^= 0xff;
        let e = inb.open(&mut p).unwrap_err();
        assert_eq!(
            e,
            EspError::UnknownSpi {
                expected: SPI,
                got: SPI ^ 0xff00_0000
            }
        );
        assert_eq!(
            e.to_string(),
            "ESP packet with unknown SPI 0xef000001 (this SA is 0x10000001)"
        );
        assert_eq!(*inb.counters(), InboundCounters::default());
    }

    #[test]
    fn short_and_misaligned_packets_are_malformed() {
        for suite in EspSuite::ALL {
            let (mut out, mut inb) = pair(suite);
            let p = sealed(&mut out, 46);
            let min = 8 + suite.iv_len() + suite.pad_block() + suite.icv_len();
            for len in [0, 3] {
                let mut q = p[..len].to_vec();
                assert_eq!(
                    inb.open(&mut q),
                    Err(Malformed::TooShort { len, min }.into())
                );
            }
            let mut q = p[..min - 1].to_vec();
            assert!(matches!(
                inb.open(&mut q),
                Err(EspError::Malformed(Malformed::TooShort { .. }))
            ));
            let mut q = p[..p.len() - 1].to_vec();
            assert!(matches!(
                inb.open(&mut q),
                Err(EspError::Malformed(Malformed::NotBlockMultiple { .. }))
            ));
            assert_eq!(inb.counters().malformed, 4, "{suite}");
        }
    }

    /// Seals a packet whose trailer the test has spoiled before encryption,
    /// as a broken gateway would send it: authentic, but badly padded.
    fn with_trailer(suite: EspSuite, spoil: impl Fn(&mut [u8])) -> Vec<u8> {
        let mut out = Outbound::new(keys(suite, SPI)).unwrap();
        // 45 bytes: GCM pads 45 + 2 to 48 (1 pad byte), CBC to 48 (1 too).
        let hdr = out.payload_offset();
        let body = padded_len(suite, 45);
        let mut buf = vec![0u8; out.sealed_len(45)];
        buf[hdr..hdr + 45].copy_from_slice(&inner(45));
        // Seal normally, decrypt, spoil the trailer, encrypt and sign again.
        let n = out.seal_in_place(&mut buf, 45, 4).unwrap();
        let keys = keys(suite, SPI);
        match suite.is_aead() {
            true => {
                let gcm = Gcm::new(&keys);
                let mut aad = [0u8; 8];
                aad.copy_from_slice(&buf[..8]);
                let iv = buf[8..16].to_vec();
                assert!(gcm.open(&iv, aad, &mut buf[hdr..n]));
                spoil(&mut buf[hdr..hdr + body]);
                let (body_part, icv) = buf[hdr..n].split_at_mut(body);
                gcm.seal(&iv, aad, body_part, icv).unwrap();
            }
            false => {
                let iv = buf[8..hdr].to_vec();
                CbcDec::new(suite.cipher, keys.cipher_key())
                    .cbc_decrypt(&iv, &mut buf[hdr..hdr + body]);
                spoil(&mut buf[hdr..hdr + body]);
                CbcEnc::new(suite.cipher, keys.cipher_key())
                    .cbc_encrypt(&iv, &mut buf[hdr..hdr + body]);
                let (covered, icv) = buf[..n].split_at_mut(hdr + body);
                Integrity::new(suite, &keys.integrity_key).sign(covered, icv);
            }
        }
        buf
    }

    #[test]
    fn bad_padding_and_pad_length_are_malformed() {
        for suite in EspSuite::ALL {
            let mut inb = Inbound::new(keys(suite, SPI)).unwrap();
            // Untouched, it opens.
            let mut p = with_trailer(suite, |_| {});
            assert_eq!(inb.open(&mut p).unwrap().packet.len(), 45);

            let mut inb = Inbound::new(keys(suite, SPI)).unwrap();
            let mut p = with_trailer(suite, |body| {
                let n = body.len();
                body[n - 3] = 7; // the one pad byte must be 1
            });
            assert_eq!(
                inb.open(&mut p),
                Err(Malformed::BadPadding.into()),
                "{suite}"
            );
            // Authentic: its sequence number is used up.
            assert_eq!(inb.highest_seq(), 1);

            let mut inb = Inbound::new(keys(suite, SPI)).unwrap();
            let mut p = with_trailer(suite, |body| {
                let n = body.len();
                body[n - 2] = 250; // pad length beyond the payload
            });
            assert!(matches!(
                inb.open(&mut p),
                Err(EspError::Malformed(Malformed::PadLength {
                    pad_len: 250,
                    ..
                }))
            ));
            assert_eq!(inb.counters().malformed, 1);
        }
    }

    #[test]
    fn sas_can_move_to_the_threads_that_use_them() {
        fn send<T: Send>() {}
        send::<Outbound>();
        send::<Inbound>();
    }

    #[test]
    fn debug_shows_no_key_material() {
        let (out, inb) = pair(EspSuite::Aes128Sha1);
        let text = format!("{out:?} {inb:?}");
        assert!(text.contains("0x10000001"), "{text}");
        assert!(!text.contains("key"), "{text}");
    }

    #[test]
    fn counters_serialize_with_their_names() {
        let c = InboundCounters {
            icv_failures: 3,
            ..Default::default()
        };
        let json = serde_json::to_string(&c).unwrap();
        assert_eq!(
            json,
            r#"{"packets":0,"clear_bytes":0,"esp_bytes":0,"icv_failures":3,"replays":0,"too_old":0,"malformed":0}"#
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Whatever arrives, open returns an error or a packet; it never
        /// panics (no slice index out of range on hostile lengths).
        #[test]
        fn open_never_panics(suite_i in 0usize..6, mut bytes in proptest::collection::vec(any::<u8>(), 0..300), keep_spi in any::<bool>()) {
            let suite = EspSuite::ALL[suite_i];
            let mut inb = Inbound::new(keys(suite, SPI)).unwrap();
            if keep_spi && bytes.len() >= 4 {
                bytes[..4].copy_from_slice(&SPI.to_be_bytes());
            }
            let _ = inb.open(&mut bytes);
        }

        /// Any single flipped bit of a sealed packet, header, IV, body or
        /// ICV, is refused: as an unknown SPI, a failed ICV, or (for the
        /// sequence number) a failed ICV or a too-old number.
        #[test]
        fn every_flipped_bit_is_refused(suite_i in 0usize..6, len in 0usize..200, bit_seed in any::<usize>()) {
            let suite = EspSuite::ALL[suite_i];
            let (mut out, _) = pair(suite);
            let packet = sealed(&mut out, len);
            let bit = bit_seed % (packet.len() * 8);
            let mut flipped = packet.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let mut inb = Inbound::new(keys(suite, SPI)).unwrap();
            let result = inb.open(&mut flipped);
            prop_assert!(result.is_err(), "bit {} of {} accepted", bit, packet.len());
            let err = result.unwrap_err();
            let expected = match bit / 8 {
                0..=3 => matches!(err, EspError::UnknownSpi { .. }),
                4..=7 => matches!(err, EspError::IcvFailure { .. } | EspError::TooOld { .. }),
                _ => matches!(err, EspError::IcvFailure { .. }),
            };
            prop_assert!(expected, "bit {}: {}", bit, err);
            // The untouched packet still opens: the failure marked nothing.
            let mut good = packet.clone();
            prop_assert!(inb.open(&mut good).is_ok());
        }
    }
}
