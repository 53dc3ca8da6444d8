//! The message parser takes anything a network can deliver: random bytes,
//! valid messages with bytes changed, cut or added, length fields that
//! lie. It returns an error or a message, never panics, and what it
//! returns encodes to bytes that decode to the same message. The same for
//! a gateway's CREATE_CHILD_SA (a rekey with REKEY_SA, PFS's KE), and for
//! linerate's responder, which takes any datagram on ports 500 and 4500
//! (IKE_SA_INIT and IKE_AUTH requests, valid or changed) without
//! panicking, and answers an IKE_SA_INIT with a well-formed message.

use linerate_ike::wire::*;
use linerate_ike::{
    EspSuite, IkeProposals, Ports, Psk, ResponderConfig, ResponderMachine, Retransmit,
};
use proptest::prelude::*;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddrV4};
use std::time::Instant;

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

/// A CREATE_CHILD_SA request rekeying a CHILD_SA, as a gateway sends it
/// (inside the Encrypted payload): REKEY_SA naming the SA, the ESP
/// proposal with a DH group for PFS, the nonce, the KE, the selectors.
fn create_child_sa() -> impl Strategy<Value = Vec<Payload>> {
    (
        any::<[u8; 4]>(),
        proposal(),
        bytes(64),
        (any::<u16>(), bytes(300)),
        prop::collection::vec(selector(), 1..3),
        prop::collection::vec(selector(), 1..3),
    )
        .prop_map(|(spi, mut sa, nonce, (group, ke), tsi, tsr)| {
            sa.protocol = protocol::ESP;
            sa.spi = spi.to_vec();
            sa.transforms.push(Transform::new(transform::DH, group));
            vec![
                Payload::Notify(Notify {
                    protocol: protocol::ESP,
                    spi: spi.to_vec(),
                    kind: notify::REKEY_SA,
                    data: vec![],
                }),
                Payload::Sa(vec![sa]),
                Payload::Nonce(nonce),
                Payload::Ke { group, data: ke },
                Payload::TsI(tsi),
                Payload::TsR(tsr),
            ]
        })
}

/// An IKE_SA_INIT request as an initiator sends one (x25519: any 32
/// bytes are a public value).
fn init_request(spi_i: u64, nonce: Vec<u8>, ke: [u8; 32]) -> Message {
    Message {
        header: Header::new(spi_i, 0, exchange::IKE_SA_INIT, flags::INITIATOR, 0),
        payloads: vec![
            Payload::Sa(vec![Proposal {
                number: 1,
                protocol: protocol::IKE,
                spi: vec![],
                transforms: vec![
                    Transform::with_key_length(transform::ENCR, 12, 128),
                    Transform::new(transform::PRF, 5),
                    Transform::new(transform::INTEG, 12),
                    Transform::new(transform::DH, 31),
                ],
            }]),
            Payload::Ke {
                group: 31,
                data: ke.to_vec(),
            },
            Payload::Nonce(nonce),
            Payload::Notify(Notify::new(notify::NAT_DETECTION_SOURCE_IP, vec![1; 20])),
            Payload::Notify(Notify::new(
                notify::NAT_DETECTION_DESTINATION_IP,
                vec![2; 20],
            )),
        ],
    }
}

fn responder() -> ResponderMachine {
    ResponderMachine::new(
        ResponderConfig {
            local: Ipv4Addr::new(10, 0, 0, 1),
            ports: Ports::default(),
            local_id: None,
            psk: Psk::new("fuzz"),
            ike: IkeProposals::parse("aes128-sha256-x25519").unwrap(),
            esp: EspSuite::Aes128Gcm16,
            local_ts: TrafficSelector::parse("198.19.0.0/24").unwrap(),
            remote_ts: TrafficSelector::parse("198.18.0.0/16").unwrap(),
            retransmit: Retransmit::default(),
        },
        std::time::Instant::now(),
        Box::new(linerate_ike::rand_core::OsRng),
    )
}

const INITIATOR: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), 500);

/// Every datagram the responder sends is a well-formed IKE message (after
/// the non-ESP marker on 4500).
fn answers_parse(r: &mut ResponderMachine) -> Vec<Message> {
    r.take_datagrams()
        .into_iter()
        .map(|d| {
            let data = if d.natt { &d.data[4..] } else { &d.data[..] };
            Message::parse(data).expect("the responder sends well-formed messages")
        })
        .collect()
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

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn create_child_sa_payloads_round_trip_and_survive_changes(
        inner in create_child_sa(),
        mutations in prop::collection::vec(mutation(), 0..6),
    ) {
        let m = Message {
            header: Header::new(1, 2, exchange::CREATE_CHILD_SA, 0, 3),
            payloads: inner.clone(),
        };
        let data = m.encode();
        prop_assert_eq!(&Message::parse(&data).unwrap().payloads, &inner);
        // The inner chain as the Encrypted payload holds it.
        let mut chain = Vec::new();
        encode_payloads(&inner, &mut chain);
        prop_assert_eq!(&parse_payloads(payload::NOTIFY, &chain).unwrap(), &inner);
        check_stable(&mutate(data, &mutations, true));
        let _ = parse_payloads(payload::NOTIFY, &mutate(chain, &mutations, false));
    }

    #[test]
    fn the_responder_takes_any_datagram(data in bytes(600), natt in any::<bool>()) {
        let mut r = responder();
        r.handle(natt, INITIATOR, &data, Instant::now());
        answers_parse(&mut r);
    }

    #[test]
    fn the_responder_takes_changed_ike_sa_init_and_ike_auth_requests(
        spi_i in 1u64..,
        nonce in prop::collection::vec(any::<u8>(), 16..64),
        ke in any::<[u8; 32]>(),
        mutations in prop::collection::vec(mutation(), 1..6),
        fix_length in any::<bool>(),
        auth_body in bytes(300),
    ) {
        let mut r = responder();
        let request = init_request(spi_i, nonce, ke).encode();
        // Changed: whatever the responder makes of it, no panic, and what
        // it answers is well-formed.
        r.handle(false, INITIATOR, &mutate(request.clone(), &mutations, fix_length), Instant::now());
        answers_parse(&mut r);
        // As sent: answered with the responder's SPI, once more when
        // retransmitted.
        let mut r = responder();
        r.handle(false, INITIATOR, &request, Instant::now());
        let answers = answers_parse(&mut r);
        prop_assert_eq!(answers.len(), 1);
        let spi_r = answers[0].header.spi_r;
        prop_assert!(spi_r != 0);
        r.handle(false, INITIATOR, &request, Instant::now());
        prop_assert_eq!(answers_parse(&mut r).len(), 1);
        // An IKE_AUTH on 4500 for that SA with anything as its Encrypted
        // payload (its ICV cannot verify), as sent and changed.
        let auth = Message {
            header: Header::new(spi_i, spi_r, exchange::IKE_AUTH, flags::INITIATOR, 1),
            payloads: vec![Payload::Encrypted { first: payload::IDI, data: auth_body }],
        }
        .encode();
        let natt = |m: &[u8]| [&[0u8; 4][..], m].concat();
        let from = SocketAddrV4::new(*INITIATOR.ip(), 4500);
        r.handle(true, from, &natt(&auth), Instant::now());
        r.handle(true, from, &natt(&mutate(auth, &mutations, fix_length)), Instant::now());
        prop_assert!(answers_parse(&mut r).is_empty());
        prop_assert_eq!(r.established(), 0);
    }
}
