//! Published ESP packets, sealed and opened by `Outbound` and `Inbound`:
//! RFC 3602 §4 cases #5 to #8 (AES-CBC) and the AES-GCM ESP packets of
//! draft-mcgrew-gcm-test-01 §4 (RFC 4106 has no test vectors).

use crate::crypto::Integrity;
use crate::keys::SaKeys;
use crate::sa::{Inbound, Outbound};
use crate::suite::EspSuite;
use crate::testutil::hex;

/// An ESP packet as a document prints it.
struct Case {
    name: &'static str,
    suite: EspSuite,
    /// AES key, and for GCM the salt after it.
    key: &'static str,
    spi: u32,
    seq: u32,
    iv: &'static str,
    /// The clear inner packet (for RFC 3602 #5 and #6 an ICMP message in
    /// transport mode, else an IPv4 packet).
    inner: &'static str,
    next_header: u8,
    /// SPI to the end of the ciphertext (RFC 3602: no ICV, encryption only)
    /// or, for GCM, to the end of the ICV.
    packet: &'static str,
}

/// RFC 3602 §4. These are encryption-only packets; ESP with CBC always has
/// an integrity transform here, so the test appends the HMAC-SHA-256-128 of
/// the packet under an arbitrary key and checks everything before it.
const RFC_3602: [Case; 4] = [
    Case {
        name: "RFC 3602 case #5",
        suite: EspSuite::Aes128Sha256,
        key: "90d382b4 10eeba7a d938c46c ec1a82bf",
        spi: 0x4321,
        seq: 1,
        iv: "e96e8c08 ab465763 fd098d45 dd3ff893",
        inner: "08000ebd a70a0000 8e9c083d b95b0700 08090a0b 0c0d0e0f 10111213 14151617
                18191a1b 1c1d1e1f 20212223 24252627 28292a2b 2c2d2e2f 30313233 34353637",
        next_header: 1,
        packet: "00004321 00000001 e96e8c08 ab465763 fd098d45 dd3ff893 f663c25d 325c18c6
                 a9453e19 4e120849 a4870b66 cc6b9965 330013b4 898dc856 a4699e52 3a55db08
                 0b59ec3a 8e4b7e52 775b07d1 db34ed9c 538ab50c 551b874a a269add0 47ad2d59
                 13ac19b7 cfbad4a6",
    },
    Case {
        name: "RFC 3602 case #6",
        suite: EspSuite::Aes128Sha256,
        key: "90d382b4 10eeba7a d938c46c ec1a82bf",
        spi: 0x4321,
        seq: 8,
        iv: "69d08df7 d203329d b093fc49 24e5bd80",
        inner: "0800b5e8 a80a0500 a69c083d 0b660e00 77777777 77777777 77777777",
        next_header: 1,
        packet: "00004321 00000008 69d08df7 d203329d b093fc49 24e5bd80 f5199588 1ec4e0c4
                 488987ce 742e8109 689bb379 d2d750c0 d915dca3 46a89f75",
    },
    Case {
        name: "RFC 3602 case #7",
        suite: EspSuite::Aes128Sha256,
        key: "01234567 89abcdef 01234567 89abcdef",
        spi: 0x8765,
        seq: 2,
        iv: "f4e76524 4f6407ad f13dc138 0f673f37",
        inner: "45000054 09040000 4001f988 c0a87b03 c0a87bc8 08009f76 a90a0100 b49c083d
                02a20400 08090a0b 0c0d0e0f 10111213 14151617 18191a1b 1c1d1e1f 20212223
                24252627 28292a2b 2c2d2e2f 30313233 34353637",
        next_header: 4,
        packet: "00008765 00000002 f4e76524 4f6407ad f13dc138 0f673f37 773b5241 a4c44922
                 5e4f3ce5 ed611b0c 237ca96c f74a9301 3c1b0ea1 a0cf70f8 e4ecaec7 8ac53aad
                 7a0f022b 859243c6 47752e94 a859352b 8a4d4d2d ecd136e5 c177f132 ad3fbfb2
                 201ac990 4c74ee0a 109e0ca1 e4dfe9d5 a100b842 f1c22f0d",
    },
    Case {
        name: "RFC 3602 case #8",
        suite: EspSuite::Aes128Sha256,
        key: "01234567 89abcdef 01234567 89abcdef",
        spi: 0x8765,
        seq: 5,
        iv: "85d47224 b5f3dd5d 2101d4ea 8dffab22",
        inner: "45000044 090c0000 4001f990 c0a87b03 c0a87bc8 0800d63c aa0a0200 c69c083d
                a3de0300 ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff
                ffffffff",
        next_header: 4,
        packet: "00008765 00000005 85d47224 b5f3dd5d 2101d4ea 8dffab22 15b92683 819596a8
                 047232cc 00f7048f e45318e1 1f8a0f62 ede3c3fc 61203bb5 0f980a08 c9843fd3
                 a1b06d5c 07ff9639 b7eb7dfb 3512e5de 435e7207 ed971ef3 d2726d9b 5ef6affc
                 6d17a0de cbb13892",
    },
];

/// draft-mcgrew-gcm-test-01 §4, the AES-GCM packets with 32-bit sequence
/// numbers (the others use ESN, which linerate does not negotiate, or
/// AES-192). `key` is the AES key then the salt, as KEYMAT gives them.
const GCM_DRAFT: [Case; 4] = [
    Case {
        name: "draft-mcgrew-gcm-test-01, AES-128, SPI 0000a5f8",
        suite: EspSuite::Aes128Gcm16,
        key: "feffe992 8665731c 6d6a8f94 67308308 cafebabe",
        spi: 0x0000a5f8,
        seq: 0x0a,
        iv: "facedbad decaf888",
        inner: "4500003e 698f0000 80114dcc c0a80102 c0a80101 0a980035 002a2343 b2d00100
                00010000 00000000 03736970 09637962 65726369 74790264 6b000001 0001",
        next_header: 1,
        packet: "0000a5f8 0000000a facedbad decaf888 deb22cd9 b07c72c1 6e3a65be eb8df304
                 a5a5897d 33ae530f 1ba76d5d 114d2a5c 3de81827 c10e9a4f 51330d0e ec416642
                 cfbb85a5 b47e48a4 ec3b9ba9 5d918bd1 83b70d3a a8bc6ee4 c309e9d8 5a41ad4a",
    },
    Case {
        name: "draft-mcgrew-gcm-test-01, AES-256, SPI 4a2cbfe3",
        suite: EspSuite::Aes256Gcm16,
        key: "abbccdde f0011223 34455667 78899aab abbccdde f0011223 34455667 78899aab
              11223344",
        spi: 0x4a2cbfe3,
        seq: 2,
        iv: "01020304 05060708",
        inner: "45000030 69a64000 80062690 c0a80102 9389155e 0a9e008b 2dc57ee0 00000000
                70024000 20bf0000 020405b4 01010402",
        next_header: 1,
        packet: "4a2cbfe3 00000002 01020304 05060708 ff425c9b 724599df 7a3bcd51 0194e00d
                 6a78107f 1b0b1cbf 06efae9d 65a5d763 748a6379 85771d34 7f054565 9f14e99d
                 ef842d8e b335f4ee cfdbf831 824b4c49 15956c96",
    },
    Case {
        name: "draft-mcgrew-gcm-test-01, AES-128, all-zero key, SPI 0",
        suite: EspSuite::Aes128Gcm16,
        key: "00000000 00000000 00000000 00000000 00000000",
        spi: 0,
        seq: 1,
        iv: "00000000 00000000",
        inner: "4500003c 99c50000 8001cb7a 40679318 01010101 0800075c 02004400 61626364
                65666768 696a6b6c 6d6e6f70 71727374 75767761 62636465 66676869",
        next_header: 1,
        packet: "00000000 00000001 00000000 00000000 4688daf2 f973a392 732909c3 31d56d60
                 f694abaa 414b5e7f f5fdcdff f5e9a284 45647649 2719ffb6 4de7d9dc a1e1d894
                 bc3bd578 73ed4d18 1d19d4d5 c8c18af3 f821d496 eeb096e9 8ad2b69e 4799c71d",
    },
    Case {
        name: "draft-mcgrew-gcm-test-01, AES-128, sequence number 2^32 - 1, empty payload",
        suite: EspSuite::Aes128Gcm16,
        key: "7d773d00 c144c525 ac619d18 c84a3f47 d9664267",
        spi: 0x335467ae,
        seq: 0xffffffff,
        iv: "43457e91 82443bc6",
        inner: "",
        next_header: 1,
        packet: "335467ae ffffffff 43457e91 82443bc6 437f866b cb3f699f e9b0822b ac961c45
                 04bef270",
    },
];

const INTEGRITY_KEY: [u8; 32] = [0x42; 32];

fn case_keys(case: &Case) -> SaKeys {
    let integrity = INTEGRITY_KEY[..case.suite.integrity_key_len()].to_vec();
    SaKeys::new(case.suite, case.spi, hex(case.key), integrity).unwrap()
}

/// The packet as this SA sends it: RFC 3602's with our ICV appended.
fn full_packet(case: &Case) -> Vec<u8> {
    let mut packet = hex(case.packet);
    if !case.suite.is_aead() {
        let mut icv = vec![0u8; case.suite.icv_len()];
        Integrity::new(case.suite, &INTEGRITY_KEY[..case.suite.integrity_key_len()])
            .sign(&packet, &mut icv);
        packet.extend_from_slice(&icv);
    }
    packet
}

fn seal_matches(case: &Case) {
    let mut out = Outbound::new(case_keys(case)).unwrap();
    out.set_next_seq(case.seq as u64);
    let inner = hex(case.inner);
    let want = full_packet(case);
    let mut buf = vec![0xEEu8; want.len() + 7];
    let start = out.payload_offset();
    buf[start..start + inner.len()].copy_from_slice(&inner);
    let len = out
        .seal_with_iv(&mut buf, inner.len(), case.next_header, Some(&hex(case.iv)))
        .unwrap();
    assert_eq!(len, want.len(), "{}", case.name);
    assert_eq!(buf[..len], want[..], "{}", case.name);
    assert_eq!(out.sealed_len(inner.len()), len, "{}", case.name);
}

fn open_matches(case: &Case) {
    let mut inb = Inbound::new(case_keys(case)).unwrap();
    let mut packet = full_packet(case);
    let opened = inb.open(&mut packet).unwrap();
    assert_eq!(opened.packet, &hex(case.inner)[..], "{}", case.name);
    assert_eq!(opened.next_header, case.next_header, "{}", case.name);
    assert_eq!(opened.seq, case.seq, "{}", case.name);
    assert_eq!(inb.counters().packets, 1);
}

#[test]
fn rfc_3602_cbc_packets_seal_to_the_published_bytes() {
    RFC_3602.iter().for_each(seal_matches);
}

#[test]
fn rfc_3602_cbc_packets_open() {
    RFC_3602.iter().for_each(open_matches);
}

#[test]
fn gcm_draft_packets_seal_to_the_published_bytes() {
    GCM_DRAFT.iter().for_each(seal_matches);
}

#[test]
fn gcm_draft_packets_open() {
    GCM_DRAFT.iter().for_each(open_matches);
}

/// Opening a published packet with another salt, or as another SPI's
/// packet under the same key, fails the ICV: salt and SPI are authenticated.
#[test]
fn gcm_draft_packet_fails_with_a_wrong_salt_or_spi() {
    let case = &GCM_DRAFT[0];
    let mut keys = case_keys(case);
    keys.encryption_key[19] ^= 1;
    let mut inb = Inbound::new(keys).unwrap();
    let mut packet = full_packet(case);
    assert!(matches!(
        inb.open(&mut packet),
        Err(crate::EspError::IcvFailure { seq: 0x0a })
    ));

    let mut keys = case_keys(case);
    keys.spi ^= 0x100;
    let mut inb = Inbound::new(keys).unwrap();
    let mut packet = full_packet(case);
    packet[2] ^= 0x01;
    assert!(matches!(
        inb.open(&mut packet),
        Err(crate::EspError::IcvFailure { .. })
    ));
}
