//! The message parser takes anything a network can deliver: random bytes,
//! valid messages with bytes changed, cut or added, length fields that
//! lie. It returns an error or a message, never panics, and what it
//! returns encodes to bytes that decode to the same message.

use linerate_ike::wire::*;
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

fn identity() -> impl Strategy<Value = Identity> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|a| Identity::Ipv4(Ipv4Addr::from(a))),
        any::<[u8; 16]>().prop_map(|a| Identity::Ipv6(Ipv6Addr::from(a))),
        "[a-z0-9.-]{1,30}".prop_map(Identity::Fqdn),
        "[a-z]{1,8}@[a-z.]{1,12}".prop_map(Identity::Rfc822),
        prop::collection::vec(any::<u8>(), 1..40).prop_map(Identity::KeyId),
    ]
}

fn selector() -> impl Strategy<Value = TrafficSelector> {
    (
        any::<u8>(),
        any::<u16>(),
        any::<u16>(),
        any::<bool>(),
        any::<[u8; 16]>(),
        any::<[u8; 16]>(),
    )
        .prop_map(|(protocol, start_port, end_port, v4, a, b)| {
            let (start, end) = if v4 {
                (
                    IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
                    IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])),
                )
            } else {
                (IpAddr::V6(a.into()), IpAddr::V6(b.into()))
            };
            TrafficSelector {
                protocol,
                start_port,
                end_port,
                start,
                end,
            }
        })
}

fn proposal() -> impl Strategy<Value = Proposal> {
    (
        any::<u8>(),
        1u8..4,
        prop::collection::vec(any::<u8>(), 0..9),
        prop::collection::vec((1u8..6, any::<u16>(), prop::option::of(any::<u16>())), 0..8),
    )
        .prop_map(|(number, protocol, spi, transforms)| Proposal {
            number,
            protocol,
            spi,
            transforms: transforms
                .into_iter()
                .map(|(kind, id, key_length)| Transform {
                    kind,
                    id,
                    key_length,
                })
                .collect(),
        })
}

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

fn payload() -> impl Strategy<Value = Payload> {
    prop_oneof![
        prop::collection::vec(proposal(), 1..4).prop_map(Payload::Sa),
        (any::<u16>(), bytes(300)).prop_map(|(group, data)| Payload::Ke { group, data }),
        identity().prop_map(Payload::IdI),
        identity().prop_map(Payload::IdR),
        (any::<u8>(), bytes(64)).prop_map(|(method, data)| Payload::Auth { method, data }),
        bytes(64).prop_map(Payload::Nonce),
        (any::<u8>(), bytes(9), any::<u16>(), bytes(40)).prop_map(|(protocol, spi, kind, data)| {
            Payload::Notify(Notify {
                protocol,
                spi,
                kind,
                data,
            })
        }),
        (any::<u8>(), 1u8..9, 0usize..5).prop_map(|(protocol, size, n)| {
            Payload::Delete(Delete {
                protocol,
                spi_size: size,
                spis: (0..n).map(|i| vec![i as u8; size as usize]).collect(),
            })
        }),
        prop::collection::vec(selector(), 0..4).prop_map(Payload::TsI),
        prop::collection::vec(selector(), 0..4).prop_map(Payload::TsR),
        (any::<bool>(), bytes(40)).prop_map(|(critical, body)| Payload::Unknown {
            kind: payload::VENDOR_ID,
            critical,
            body
        }),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    (
        any::<u64>(),
        any::<u64>(),
        30u8..40,
        any::<u8>(),
        any::<u32>(),
        prop::collection::vec(payload(), 0..8),
        prop::option::of((1u8..50, bytes(80))),
    )
        .prop_map(|(spi_i, spi_r, kind, flags, id, mut payloads, sk)| {
            if let Some((first, data)) = sk {
                payloads.push(Payload::Encrypted { first, data });
            }
            Message {
                header: Header::new(spi_i, spi_r, kind, flags, id),
                payloads,
            }
        })
}

/// One change to an encoded message.
#[derive(Debug, Clone)]
enum Mutation {
    Set(usize, u8),
    Truncate(usize),
    Insert(usize, Vec<u8>),
    /// A length field (header or payload) set to a lie.
    Length(usize, u16),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), any::<u8>()).prop_map(|(i, b)| Mutation::Set(i, b)),
        any::<usize>().prop_map(Mutation::Truncate),
        (any::<usize>(), bytes(12)).prop_map(|(i, b)| Mutation::Insert(i, b)),
        (any::<usize>(), any::<u16>()).prop_map(|(i, v)| Mutation::Length(i, v)),
    ]
}

fn mutate(mut data: Vec<u8>, mutations: &[Mutation], fix_length: bool) -> Vec<u8> {
    for m in mutations {
        if data.is_empty() {
            break;
        }
        let at = |i: usize| i % data.len();
        match m {
            Mutation::Set(i, b) => {
                let i = at(*i);
                data[i] = *b;
            }
            Mutation::Truncate(i) => {
                let i = at(*i);
                data.truncate(i);
            }
            Mutation::Insert(i, b) => {
                let i = at(*i);
                data.splice(i..i, b.iter().copied());
            }
            Mutation::Length(i, v) => {
                let i = at(*i);
                if i + 2 <= data.len() {
                    data[i..i + 2].copy_from_slice(&v.to_be_bytes());
                }
            }
        }
    }
    // Keep the header's length true, so the payloads are what is parsed.
    if fix_length && data.len() >= 28 {
        let len = data.len() as u32;
        data[24..28].copy_from_slice(&len.to_be_bytes());
    }
    data
}

/// Whatever parses encodes to bytes that parse to the same message.
fn check_stable(data: &[u8]) {
    if let Ok(m) = Message::parse(data) {
        let again = Message::parse(&m.encode()).expect("a parsed message encodes validly");
        assert_eq!(again.payloads, m.payloads);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn random_bytes_never_panic(data in bytes(600)) {
        check_stable(&data);
        for first in [payload::SA, payload::NOTIFY, payload::TSI, payload::SK, 200] {
            let _ = parse_payloads(first, &data);
        }
    }

    #[test]
    fn random_payloads_after_a_valid_header_never_panic(
        first in 30u8..50,
        body in bytes(600),
    ) {
        let mut data = Message {
            header: Header::new(1, 2, exchange::IKE_AUTH, 0, 1),
            payloads: vec![],
        }
        .encode();
        data[16] = first;
        data.extend_from_slice(&body);
        let len = data.len() as u32;
        data[24..28].copy_from_slice(&len.to_be_bytes());
        check_stable(&data);
    }

    #[test]
    fn messages_round_trip(m in message()) {
        let data = m.encode();
        let back = Message::parse(&data).unwrap();
        prop_assert_eq!(&back.payloads, &m.payloads);
        prop_assert_eq!(back.header.length as usize, data.len());
        prop_assert_eq!(back.encode(), data);
    }

    #[test]
    fn mutated_messages_never_panic(
        m in message(),
        mutations in prop::collection::vec(mutation(), 1..6),
        fix_length in any::<bool>(),
    ) {
        check_stable(&mutate(m.encode(), &mutations, fix_length));
    }
}
