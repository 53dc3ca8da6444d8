//! How many frames per second one core seals and opens, and which AES-GCM
//! is faster: ring's or RustCrypto's.
//!
//! ```text
//! cargo run --release -p linerate-esp --example esp_bench [-- --ms 400]
//! ```
//!
//! Inner packet sizes 46, 494 and 1500 bytes are the IP packets of 64, 512
//! and 1518-byte Ethernet frames. Each point seals a batch of packets into a
//! ring of buffers and opens them again, timing the two separately, until
//! `--ms` milliseconds of each were measured, and prints the median batch's
//! rate. Single-threaded: the figures are per core. On a shared machine,
//! run it a few times and take the range.

use std::hint::black_box;
use std::time::{Duration, Instant};

use aes_gcm::aead::{AeadInPlace, KeyInit};
use linerate_esp::{EspSuite, Inbound, Outbound, SaKeys, NEXT_HEADER_IPV4};
use ring::aead;

const SIZES: [usize; 3] = [46, 494, 1500];
/// Packets sealed, then opened, per timed batch: a NIC ring's worth.
const BATCH: usize = 512;

/// Seal and open rates in packets per second.
struct Rates {
    seal: f64,
    open: f64,
}

/// Runs `batch` (which returns the time spent sealing and opening one batch
/// of BATCH packets) until both have `budget` of measured time, and takes
/// the median batch: on a shared machine other processes stretch some
/// batches, and the median leaves those out where a mean would not.
fn measure(budget: Duration, mut batch: impl FnMut() -> (Duration, Duration)) -> Rates {
    // One untimed batch to warm caches and the CPU's clock.
    batch();
    let (mut seals, mut opens) = (Vec::new(), Vec::new());
    let (mut seal_total, mut open_total) = (Duration::ZERO, Duration::ZERO);
    while seal_total < budget || open_total < budget || seals.len() < 5 {
        let (s, o) = batch();
        seal_total += s;
        open_total += o;
        seals.push(s);
        opens.push(o);
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort_unstable();
        BATCH as f64 / v[v.len() / 2].as_secs_f64()
    };
    Rates {
        seal: median(&mut seals),
        open: median(&mut opens),
    }
}

/// ESP's plaintext for an inner packet: padded to 4 bytes with the trailer.
fn gcm_plaintext_len(inner: usize) -> usize {
    (inner + 2).div_ceil(4) * 4
}

fn nonce(salt: [u8; 4], counter: u64) -> [u8; 12] {
    let mut n = [0u8; 12];
    n[..4].copy_from_slice(&salt);
    n[4..].copy_from_slice(&counter.to_be_bytes());
    n
}

/// ring's AES-GCM alone, as ESP uses it: 8-byte AAD, tag kept apart.
fn ring_gcm(bits: usize, size: usize, budget: Duration) -> Rates {
    let alg = if bits == 128 {
        &aead::AES_128_GCM
    } else {
        &aead::AES_256_GCM
    };
    let key = aead::LessSafeKey::new(aead::UnboundKey::new(alg, &vec![7u8; bits / 8]).unwrap());
    let len = gcm_plaintext_len(size);
    let mut ring_buf = vec![vec![0x55u8; len + 16]; BATCH];
    let mut counter = 0u64;
    let aad = [1u8; 8];
    measure(budget, || {
        let first = counter;
        let t = Instant::now();
        for b in ring_buf.iter_mut() {
            counter += 1;
            let (body, icv) = b.split_at_mut(len);
            let n = aead::Nonce::assume_unique_for_key(nonce([9; 4], counter));
            let tag = key
                .seal_in_place_separate_tag(n, aead::Aad::from(aad), body)
                .unwrap();
            icv.copy_from_slice(tag.as_ref());
        }
        let sealed = t.elapsed();
        let t = Instant::now();
        for (i, b) in ring_buf.iter_mut().enumerate() {
            let n = aead::Nonce::assume_unique_for_key(nonce([9; 4], first + 1 + i as u64));
            black_box(key.open_in_place(n, aead::Aad::from(aad), b).unwrap());
        }
        (sealed, t.elapsed())
    })
}

/// RustCrypto's aes-gcm alone, the same way.
fn rustcrypto_gcm<C: KeyInit + AeadInPlace>(bits: usize, size: usize, budget: Duration) -> Rates {
    let cipher = C::new_from_slice(&vec![7u8; bits / 8]).unwrap();
    let len = gcm_plaintext_len(size);
    let mut ring_buf = vec![vec![0x55u8; len + 16]; BATCH];
    let mut counter = 0u64;
    let aad = [1u8; 8];
    measure(budget, || {
        let first = counter;
        let t = Instant::now();
        for b in ring_buf.iter_mut() {
            counter += 1;
            let (body, icv) = b.split_at_mut(len);
            let n = nonce([9; 4], counter);
            let tag = cipher
                .encrypt_in_place_detached(n.as_slice().into(), &aad, body)
                .unwrap();
            icv.copy_from_slice(&tag);
        }
        let sealed = t.elapsed();
        let t = Instant::now();
        for (i, b) in ring_buf.iter_mut().enumerate() {
            let n = nonce([9; 4], first + 1 + i as u64);
            let (body, icv) = b.split_at_mut(len);
            cipher
                .decrypt_in_place_detached(n.as_slice().into(), &aad, body, (&*icv).into())
                .unwrap();
        }
        (sealed, t.elapsed())
    })
}

/// linerate-esp's `Outbound::seal` and `Inbound::open`: the whole ESP path
/// (header, padding, IV, ICV, anti-replay, padding check, counters).
fn esp(suite: EspSuite, size: usize, budget: Duration) -> Rates {
    let keys = SaKeys::new(
        suite,
        0x1234_5678,
        vec![3; suite.encryption_keymat_len()],
        vec![5; suite.integrity_key_len()],
    )
    .unwrap();
    let mut out = Outbound::new(keys.clone()).unwrap();
    let mut inb = Inbound::new(keys).unwrap();
    let inner = vec![0x45u8; size];
    let sealed_len = out.sealed_len(size);
    let mut ring_buf = vec![vec![0u8; sealed_len]; BATCH];
    measure(budget, || {
        let t = Instant::now();
        for b in ring_buf.iter_mut() {
            out.seal(&inner, NEXT_HEADER_IPV4, b).unwrap();
        }
        let sealed = t.elapsed();
        let t = Instant::now();
        for b in ring_buf.iter_mut() {
            black_box(inb.open(b).unwrap());
        }
        (sealed, t.elapsed())
    })
}

fn row(name: &str, rates: &[Rates], pick: impl Fn(&Rates) -> f64) {
    print!("{name:<32}");
    for r in rates {
        print!("{:>9.2}", pick(r) / 1e6);
    }
    println!();
}

fn header(title: &str) {
    print!("\n{title:<32}");
    for s in SIZES {
        print!("{s:>9}");
    }
    println!();
}

fn cpu_features() -> String {
    #[cfg(target_arch = "x86_64")]
    {
        let f = [
            ("aes", std::is_x86_feature_detected!("aes")),
            ("pclmulqdq", std::is_x86_feature_detected!("pclmulqdq")),
            ("avx2", std::is_x86_feature_detected!("avx2")),
            ("vaes", std::is_x86_feature_detected!("vaes")),
            ("vpclmulqdq", std::is_x86_feature_detected!("vpclmulqdq")),
            ("sha", std::is_x86_feature_detected!("sha")),
        ];
        f.iter()
            .map(|(n, on)| format!("{n}={}", if *on { "yes" } else { "NO" }))
            .collect::<Vec<_>>()
            .join(" ")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        String::from("(not x86_64)")
    }
}

fn main() {
    let mut budget = Duration::from_millis(400);
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, ms] = args.as_slice() {
        if flag == "--ms" {
            budget = Duration::from_millis(ms.parse().expect("--ms takes milliseconds"));
        }
    }
    println!("CPU features: {}", cpu_features());
    println!("Millions of packets per second on one core, by inner packet size (bytes):");

    header("AES-GCM alone (ESP's use)");
    for bits in [128, 256] {
        let ring: Vec<Rates> = SIZES.iter().map(|&s| ring_gcm(bits, s, budget)).collect();
        let rc: Vec<Rates> = SIZES
            .iter()
            .map(|&s| {
                if bits == 128 {
                    rustcrypto_gcm::<aes_gcm::Aes128Gcm>(bits, s, budget)
                } else {
                    rustcrypto_gcm::<aes_gcm::Aes256Gcm>(bits, s, budget)
                }
            })
            .collect();
        row(&format!("ring       AES-{bits}-GCM seal"), &ring, |r| {
            r.seal
        });
        row(&format!("ring       AES-{bits}-GCM open"), &ring, |r| {
            r.open
        });
        row(&format!("RustCrypto AES-{bits}-GCM seal"), &rc, |r| r.seal);
        row(&format!("RustCrypto AES-{bits}-GCM open"), &rc, |r| r.open);
    }

    header("linerate-esp (frames/s)");
    for suite in [
        EspSuite::Aes128Gcm16,
        EspSuite::Aes256Gcm16,
        EspSuite::Aes128Sha256,
    ] {
        let rates: Vec<Rates> = SIZES.iter().map(|&s| esp(suite, s, budget)).collect();
        row(&format!("{suite} seal"), &rates, |r| r.seal);
        row(&format!("{suite} open"), &rates, |r| r.open);
    }
}
