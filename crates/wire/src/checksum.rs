//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Partial sums are carried as `u32` so several can be added before one
//! final [`fold`]; that is what lets the frame template precompute the sum of
//! everything constant and add only the stamped words per frame.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Ones-complement partial sum of `data` as big-endian 16-bit words; an odd
/// trailing byte is padded with a zero byte, as RFC 1071 says.
///
/// The result is folded to at most 0xFFFF, so callers may add a few dozen
/// partial sums in a `u32` without overflow.
///
/// Every receiver runs this over every test frame's datagram (the payload
/// check, `crate::integrity`), so it adds 32-bit words in the machine's
/// byte order (which the compiler vectorizes) and swaps the folded sum's
/// bytes at the end: the ones-complement sum does not depend on the order
/// the words are read in but for that swap (RFC 1071 2.(B)).
pub fn sum16(data: &[u8]) -> u32 {
    // A u64 accumulator of 32-bit words overflows only past 16 GiB.
    let mut acc: u64 = 0;
    let mut words = data.chunks_exact(4);
    for w in &mut words {
        acc += u32::from_ne_bytes([w[0], w[1], w[2], w[3]]) as u64;
    }
    // The last 0-3 bytes, followed by zeros: an odd byte is the high byte
    // of its big-endian word, as in any other word.
    let mut tail = [0u8; 4];
    tail[..words.remainder().len()].copy_from_slice(words.remainder());
    acc += u32::from_ne_bytes(tail) as u64;
    while acc > 0xFFFF {
        acc = (acc & 0xFFFF) + (acc >> 16);
    }
    u16::from_be(acc as u16) as u32
}

/// Folds the carries of a partial sum back in and complements: the value
/// that goes in a checksum field. A received packet verifies when the sum
/// over it (checksum field included) folds to 0.
#[inline]
pub fn fold(sum: u32) -> u16 {
    let mut s = sum;
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    !(s as u16)
}

/// Partial sum of the IPv4 pseudo-header UDP and TCP checksums cover:
/// source, destination, zero + protocol, and the transport length.
#[inline]
pub fn pseudo_header_ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: u16) -> u32 {
    let s = u32::from(src);
    let d = u32::from(dst);
    (s >> 16) + (s & 0xFFFF) + (d >> 16) + (d & 0xFFFF) + proto as u32 + len as u32
}

/// Partial sum of the IPv6 pseudo-header (RFC 8200 8.1): source,
/// destination, upper-layer length (32 bits) and next header (32 bits).
#[inline]
pub fn pseudo_header_ipv6(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, len: u32) -> u32 {
    sum16(&src.octets()) + sum16(&dst.octets()) + (len >> 16) + (len & 0xFFFF) + next_header as u32
}

/// Updates a checksum after one 16-bit word of the covered data changed from
/// `old_word` to `new_word`, per RFC 1624 eqn. 3: `HC' = ~(~HC + ~m + m')`.
///
/// Eqn. 3 (not eqn. 2 of RFC 1141) is used because it never produces the
/// wrong zero. For UDP a result of 0 must still be sent as 0xFFFF; that is
/// the caller's business because IPv4 header checksums keep 0.
#[inline]
pub fn update16(old_csum: u16, old_word: u16, new_word: u16) -> u16 {
    fold(!old_csum as u32 + !old_word as u32 + new_word as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RFC 1071 sum as written: one big-endian 16-bit word at a time.
    fn sum16_by_words(data: &[u8]) -> u32 {
        let mut acc: u64 = 0;
        for w in data.chunks(2) {
            acc += (w[0] as u64) << 8 | w.get(1).copied().unwrap_or(0) as u64;
        }
        while acc > 0xFFFF {
            acc = (acc & 0xFFFF) + (acc >> 16);
        }
        acc as u32
    }

    #[test]
    fn the_word_order_sum_is_the_rfc_1071_sum_at_every_length() {
        // Bytes of a simple generator, all-ones and all-zeros runs: every
        // length and every start within a word.
        let mut x = 0x2545_f491_u32;
        let noise: Vec<u8> = (0..2100)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                x as u8
            })
            .collect();
        for data in [noise, vec![0xFF; 2100], vec![0; 2100]] {
            for start in 0..4 {
                for len in 0..data.len() - start {
                    let d = &data[start..start + len];
                    assert_eq!(sum16(d), sum16_by_words(d), "start {start}, {len} bytes");
                }
            }
        }
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 section 3: 00 01 f2 03 f4 f5 f6 f7 sums to 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(sum16(&data), 0xddf2);
        assert_eq!(fold(sum16(&data)), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(sum16(&[0x12]), 0x1200);
        assert_eq!(sum16(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(sum16(&[]), 0);
    }

    #[test]
    fn large_inputs_do_not_overflow() {
        let big = vec![0xffu8; 1 << 20];
        assert_eq!(sum16(&big), 0xFFFF);
        assert_eq!(fold(u32::MAX), 0);
    }

    #[test]
    fn known_ipv4_header_checksum() {
        // Wikipedia's example header, checksum 0xb861.
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(fold(sum16(&h)), 0xb861);
        h[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(fold(sum16(&h)), 0);
    }

    #[test]
    fn pseudo_header_matches_bytes() {
        let src = Ipv4Addr::new(192, 168, 1, 2);
        let dst = Ipv4Addr::new(10, 255, 0, 1);
        let bytes = [192, 168, 1, 2, 10, 255, 0, 1, 0, 17, 0x01, 0x23];
        assert_eq!(
            fold(pseudo_header_ipv4(src, dst, 17, 0x123)),
            fold(sum16(&bytes))
        );
    }

    #[test]
    fn ipv6_pseudo_header_matches_bytes() {
        let src: Ipv6Addr = "2001:2::2".parse().unwrap();
        let dst: Ipv6Addr = "2001:2:0:1::fffe".parse().unwrap();
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&src.octets());
        bytes.extend_from_slice(&dst.octets());
        bytes.extend_from_slice(&0x0001_0203u32.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 17]);
        assert_eq!(
            fold(pseudo_header_ipv6(&src, &dst, 17, 0x0001_0203)),
            fold(sum16(&bytes))
        );
    }

    #[test]
    fn incremental_update_matches_recomputation() {
        let mut x: u32 = 0x1234_5678;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for _ in 0..10_000 {
            let mut data = [0u8; 16];
            for b in data.iter_mut() {
                *b = next() as u8;
            }
            let i = (next() % 8) as usize * 2;
            let before = fold(sum16(&data));
            let old = u16::from_be_bytes([data[i], data[i + 1]]);
            let new = next() as u16;
            data[i..i + 2].copy_from_slice(&new.to_be_bytes());
            let after = fold(sum16(&data));
            let inc = update16(before, old, new);
            // Equal as ones-complement numbers (0x0000 and 0xFFFF are both zero).
            assert!(inc == after || (inc | after == 0xFFFF && inc & after == 0));
        }
    }
}
