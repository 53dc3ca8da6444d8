//! IKEv2 messages on the wire (RFC 7296 §3): the header, the generic payload
//! chain and the payloads an initiator with a pre-shared key sends and
//! reads. Decoding never panics and never trusts a length field: every
//! length is checked against what is left of the datagram, so a gateway (or
//! anyone on the path) can send anything and get an error back.
//!
//! The Encrypted payload (SK) is decoded only to its raw bytes here; the
//! `protect` module checks its integrity, decrypts it and decodes the inner
//! payload chain with [`parse_payloads`].

use linerate_wire::cidr::Cidr;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Exchange types (RFC 7296 §3.1).
pub mod exchange {
    pub const IKE_SA_INIT: u8 = 34;
    pub const IKE_AUTH: u8 = 35;
    pub const CREATE_CHILD_SA: u8 = 36;
    pub const INFORMATIONAL: u8 = 37;

    /// The exchange's name, for messages.
    pub fn name(kind: u8) -> String {
        match kind {
            IKE_SA_INIT => "IKE_SA_INIT".into(),
            IKE_AUTH => "IKE_AUTH".into(),
            CREATE_CHILD_SA => "CREATE_CHILD_SA".into(),
            INFORMATIONAL => "INFORMATIONAL".into(),
            other => format!("exchange type {other}"),
        }
    }
}

/// Header flags (RFC 7296 §3.1).
pub mod flags {
    /// Set by the original initiator of the IKE SA in all its messages.
    pub const INITIATOR: u8 = 0x08;
    /// "I can speak a higher major version": never set by linerate.
    pub const VERSION: u8 = 0x10;
    /// The message answers a request with the same message ID.
    pub const RESPONSE: u8 = 0x20;
}

/// Payload types (RFC 7296 §3.2).
pub mod payload {
    pub const NONE: u8 = 0;
    pub const SA: u8 = 33;
    pub const KE: u8 = 34;
    pub const IDI: u8 = 35;
    pub const IDR: u8 = 36;
    pub const CERT: u8 = 37;
    pub const CERTREQ: u8 = 38;
    pub const AUTH: u8 = 39;
    pub const NONCE: u8 = 40;
    pub const NOTIFY: u8 = 41;
    pub const DELETE: u8 = 42;
    pub const VENDOR_ID: u8 = 43;
    pub const TSI: u8 = 44;
    pub const TSR: u8 = 45;
    pub const SK: u8 = 46;
    pub const CP: u8 = 47;
    pub const EAP: u8 = 48;
}

/// Protocol IDs of proposals, notifications and deletes (RFC 7296 §3.3.1).
pub mod protocol {
    pub const IKE: u8 = 1;
    pub const AH: u8 = 2;
    pub const ESP: u8 = 3;
}

/// Transform types (RFC 7296 §3.3.2).
pub mod transform {
    pub const ENCR: u8 = 1;
    pub const PRF: u8 = 2;
    pub const INTEG: u8 = 3;
    pub const DH: u8 = 4;
    pub const ESN: u8 = 5;
    /// The Key Length attribute (TV format) of an encryption transform.
    pub const ATTR_KEY_LENGTH: u16 = 14;
}

/// ID types (RFC 7296 §3.5).
pub mod id_type {
    pub const IPV4_ADDR: u8 = 1;
    pub const FQDN: u8 = 2;
    pub const RFC822_ADDR: u8 = 3;
    pub const IPV6_ADDR: u8 = 5;
    pub const KEY_ID: u8 = 11;
}

/// Authentication methods (RFC 7296 §3.8).
pub mod auth_method {
    /// Shared Key Message Integrity Code: the pre-shared key.
    pub const SHARED_KEY_MIC: u8 = 2;
}

/// Traffic selector types (RFC 7296 §3.13.1).
pub mod ts_type {
    pub const IPV4_ADDR_RANGE: u8 = 7;
    pub const IPV6_ADDR_RANGE: u8 = 8;
}

/// Notify message types (RFC 7296 §3.10.1; RFC 3948/7296 §2.23 for NAT
/// detection). Types below 16384 are errors, the others status.
pub mod notify {
    pub const UNSUPPORTED_CRITICAL_PAYLOAD: u16 = 1;
    pub const INVALID_IKE_SPI: u16 = 4;
    pub const INVALID_MAJOR_VERSION: u16 = 5;
    pub const INVALID_SYNTAX: u16 = 7;
    pub const INVALID_MESSAGE_ID: u16 = 9;
    pub const INVALID_SPI: u16 = 11;
    pub const NO_PROPOSAL_CHOSEN: u16 = 14;
    pub const INVALID_KE_PAYLOAD: u16 = 17;
    pub const AUTHENTICATION_FAILED: u16 = 24;
    pub const SINGLE_PAIR_REQUIRED: u16 = 34;
    pub const NO_ADDITIONAL_SAS: u16 = 35;
    pub const INTERNAL_ADDRESS_FAILURE: u16 = 36;
    pub const FAILED_CP_REQUIRED: u16 = 37;
    pub const TS_UNACCEPTABLE: u16 = 38;
    pub const INVALID_SELECTORS: u16 = 39;
    pub const TEMPORARY_FAILURE: u16 = 43;
    pub const CHILD_SA_NOT_FOUND: u16 = 44;
    /// The first status type: everything below is an error.
    pub const FIRST_STATUS: u16 = 16384;
    pub const INITIAL_CONTACT: u16 = 16384;
    pub const SET_WINDOW_SIZE: u16 = 16385;
    pub const ADDITIONAL_TS_POSSIBLE: u16 = 16386;
    pub const IPCOMP_SUPPORTED: u16 = 16387;
    pub const NAT_DETECTION_SOURCE_IP: u16 = 16388;
    pub const NAT_DETECTION_DESTINATION_IP: u16 = 16389;
    pub const COOKIE: u16 = 16390;
    pub const USE_TRANSPORT_MODE: u16 = 16391;
    pub const REKEY_SA: u16 = 16393;
    pub const ESP_TFC_PADDING_NOT_SUPPORTED: u16 = 16394;
    pub const NON_FIRST_FRAGMENTS_ALSO: u16 = 16395;
    pub const MOBIKE_SUPPORTED: u16 = 16396;

    /// The IANA name of a notify type, for error messages.
    pub fn name(kind: u16) -> String {
        let known = match kind {
            UNSUPPORTED_CRITICAL_PAYLOAD => "UNSUPPORTED_CRITICAL_PAYLOAD",
            INVALID_IKE_SPI => "INVALID_IKE_SPI",
            INVALID_MAJOR_VERSION => "INVALID_MAJOR_VERSION",
            INVALID_SYNTAX => "INVALID_SYNTAX",
            INVALID_MESSAGE_ID => "INVALID_MESSAGE_ID",
            INVALID_SPI => "INVALID_SPI",
            NO_PROPOSAL_CHOSEN => "NO_PROPOSAL_CHOSEN",
            INVALID_KE_PAYLOAD => "INVALID_KE_PAYLOAD",
            AUTHENTICATION_FAILED => "AUTHENTICATION_FAILED",
            SINGLE_PAIR_REQUIRED => "SINGLE_PAIR_REQUIRED",
            NO_ADDITIONAL_SAS => "NO_ADDITIONAL_SAS",
            INTERNAL_ADDRESS_FAILURE => "INTERNAL_ADDRESS_FAILURE",
            FAILED_CP_REQUIRED => "FAILED_CP_REQUIRED",
            TS_UNACCEPTABLE => "TS_UNACCEPTABLE",
            INVALID_SELECTORS => "INVALID_SELECTORS",
            TEMPORARY_FAILURE => "TEMPORARY_FAILURE",
            CHILD_SA_NOT_FOUND => "CHILD_SA_NOT_FOUND",
            INITIAL_CONTACT => "INITIAL_CONTACT",
            SET_WINDOW_SIZE => "SET_WINDOW_SIZE",
            ADDITIONAL_TS_POSSIBLE => "ADDITIONAL_TS_POSSIBLE",
            IPCOMP_SUPPORTED => "IPCOMP_SUPPORTED",
            NAT_DETECTION_SOURCE_IP => "NAT_DETECTION_SOURCE_IP",
            NAT_DETECTION_DESTINATION_IP => "NAT_DETECTION_DESTINATION_IP",
            COOKIE => "COOKIE",
            USE_TRANSPORT_MODE => "USE_TRANSPORT_MODE",
            REKEY_SA => "REKEY_SA",
            ESP_TFC_PADDING_NOT_SUPPORTED => "ESP_TFC_PADDING_NOT_SUPPORTED",
            NON_FIRST_FRAGMENTS_ALSO => "NON_FIRST_FRAGMENTS_ALSO",
            MOBIKE_SUPPORTED => "MOBIKE_SUPPORTED",
            _ => return format!("notify type {kind}"),
        };
        known.to_string()
    }
}

/// A message that is not a well-formed IKEv2 message, with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed IKEv2 message: {0}")]
pub struct ParseError(pub String);

fn err<T>(what: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError(what.into()))
}

/// Reads big-endian fields from a slice, refusing to run past its end.
struct Reader<'a> {
    data: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(data: &'a [u8]) -> Self {
        Reader { data }
    }
    fn remaining(&self) -> usize {
        self.data.len()
    }
    fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8], ParseError> {
        if n > self.data.len() {
            return err(format!("{what}: needs {n} bytes, {} left", self.data.len()));
        }
        let (head, tail) = self.data.split_at(n);
        self.data = tail;
        Ok(head)
    }
    fn u8(&mut self, what: &str) -> Result<u8, ParseError> {
        Ok(self.bytes(1, what)?[0])
    }
    fn u16(&mut self, what: &str) -> Result<u16, ParseError> {
        let b = self.bytes(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }
    fn u32(&mut self, what: &str) -> Result<u32, ParseError> {
        let b = self.bytes(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self, what: &str) -> Result<u64, ParseError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.bytes(8, what)?);
        Ok(u64::from_be_bytes(a))
    }
    fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.data)
    }
}

/// The fixed IKE header (RFC 7296 §3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub spi_i: u64,
    pub spi_r: u64,
    /// Type of the first payload (filled in by [`Message::encode`]).
    pub next_payload: u8,
    /// Major version in the high nibble: 0x20 for IKEv2.
    pub version: u8,
    pub exchange: u8,
    pub flags: u8,
    pub message_id: u32,
    /// Length of the whole message (filled in by [`Message::encode`]).
    pub length: u32,
}

impl Header {
    pub const LEN: usize = 28;
    pub const IKEV2: u8 = 0x20;

    /// A header for a new message; the payload type and length are filled
    /// in when the message is encoded.
    pub fn new(spi_i: u64, spi_r: u64, exchange: u8, flags: u8, message_id: u32) -> Header {
        Header {
            spi_i,
            spi_r,
            next_payload: payload::NONE,
            version: Header::IKEV2,
            exchange,
            flags,
            message_id,
            length: 0,
        }
    }

    /// Decodes the header at the start of `data`; the length field is
    /// checked against the datagram (at least a header, at most `data`).
    pub fn parse(data: &[u8]) -> Result<Header, ParseError> {
        let mut r = Reader::new(data);
        let header = Header {
            spi_i: r.u64("IKE header")?,
            spi_r: r.u64("IKE header")?,
            next_payload: r.u8("IKE header")?,
            version: r.u8("IKE header")?,
            exchange: r.u8("IKE header")?,
            flags: r.u8("IKE header")?,
            message_id: r.u32("IKE header")?,
            length: r.u32("IKE header")?,
        };
        if header.version >> 4 != 2 {
            return err(format!(
                "IKE major version {} (IKEv2 is 2)",
                header.version >> 4
            ));
        }
        let len = header.length as usize;
        if len < Header::LEN || len > data.len() {
            return err(format!(
                "length field {len} in a {}-byte datagram",
                data.len()
            ));
        }
        Ok(header)
    }

    pub fn is_response(&self) -> bool {
        self.flags & flags::RESPONSE != 0
    }

    /// Sent by the IKE SA's original initiator.
    pub fn from_initiator(&self) -> bool {
        self.flags & flags::INITIATOR != 0
    }

    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.spi_i.to_be_bytes());
        out.extend_from_slice(&self.spi_r.to_be_bytes());
        out.push(self.next_payload);
        out.push(self.version);
        out.push(self.exchange);
        out.push(self.flags);
        out.extend_from_slice(&self.message_id.to_be_bytes());
        out.extend_from_slice(&self.length.to_be_bytes());
    }
}

/// One transform of a proposal: its type, ID, and key length attribute
/// (for AES; in bits).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transform {
    pub kind: u8,
    pub id: u16,
    pub key_length: Option<u16>,
}

impl Transform {
    pub fn new(kind: u8, id: u16) -> Transform {
        Transform {
            kind,
            id,
            key_length: None,
        }
    }
    pub fn with_key_length(kind: u8, id: u16, bits: u16) -> Transform {
        Transform {
            kind,
            id,
            key_length: Some(bits),
        }
    }
}

/// A proposal substructure of an SA payload (RFC 7296 §3.3.1).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    /// 1 for the first proposal, counting up; the answer carries the
    /// number of the one chosen.
    pub number: u8,
    pub protocol: u8,
    /// Empty for the IKE SA's first proposal, 4 bytes for ESP.
    pub spi: Vec<u8>,
    pub transforms: Vec<Transform>,
}

/// An IKE identity (RFC 7296 §3.5), as IDi or IDr.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Identity {
    Ipv4(Ipv4Addr),
    Ipv6(Ipv6Addr),
    /// A host name ("gw.example.com"), strongSwan's `@gw.example.com`.
    Fqdn(String),
    /// An e-mail style name ("user@example.com").
    Rfc822(String),
    /// Opaque bytes, strongSwan's `keyid:...`.
    KeyId(Vec<u8>),
    /// Any other type, kept as it came.
    Other {
        kind: u8,
        data: Vec<u8>,
    },
}

impl Identity {
    /// Reads strongSwan's identity syntax: an IP address; `@name` or a
    /// plain host name for an FQDN; `user@host` for an e-mail address;
    /// `keyid:#0a0b..` (hex) or `keyid:text` for a key ID. A gateway's
    /// administrator writes the same text in its `remote { id = ... }`.
    pub fn parse(text: &str) -> Result<Identity, crate::error::ConfigError> {
        let text = text.trim();
        let bad = |why: &str| {
            crate::error::ConfigError(format!(
                "identity '{text}' {why}: use an IPv4 address, @host.name, user@host or keyid:#hex"
            ))
        };
        if text.is_empty() {
            return Err(bad("is empty"));
        }
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(match ip {
                IpAddr::V4(a) => Identity::Ipv4(a),
                IpAddr::V6(a) => Identity::Ipv6(a),
            });
        }
        if let Some(key) = text.strip_prefix("keyid:") {
            if let Some(hex) = key.strip_prefix('#') {
                return decode_hex(hex)
                    .filter(|b| !b.is_empty())
                    .map(Identity::KeyId)
                    .ok_or_else(|| bad("has no even number of hex digits after keyid:#"));
            }
            if key.is_empty() {
                return Err(bad("has nothing after keyid:"));
            }
            return Ok(Identity::KeyId(key.as_bytes().to_vec()));
        }
        if let Some(name) = text
            .strip_prefix("fqdn:")
            .or_else(|| text.strip_prefix('@'))
        {
            if name.is_empty() || name.starts_with('@') {
                return Err(bad("has no host name after '@'"));
            }
            return Ok(Identity::Fqdn(name.to_string()));
        }
        if let Some(name) = text.strip_prefix("email:") {
            return Ok(Identity::Rfc822(name.to_string()));
        }
        if text.contains('@') {
            return Ok(Identity::Rfc822(text.to_string()));
        }
        Ok(Identity::Fqdn(text.to_string()))
    }

    /// The ID type on the wire.
    pub fn kind(&self) -> u8 {
        match self {
            Identity::Ipv4(_) => id_type::IPV4_ADDR,
            Identity::Ipv6(_) => id_type::IPV6_ADDR,
            Identity::Fqdn(_) => id_type::FQDN,
            Identity::Rfc822(_) => id_type::RFC822_ADDR,
            Identity::KeyId(_) => id_type::KEY_ID,
            Identity::Other { kind, .. } => *kind,
        }
    }

    /// The identification data on the wire.
    pub fn data(&self) -> Vec<u8> {
        match self {
            Identity::Ipv4(a) => a.octets().to_vec(),
            Identity::Ipv6(a) => a.octets().to_vec(),
            Identity::Fqdn(s) | Identity::Rfc822(s) => s.as_bytes().to_vec(),
            Identity::KeyId(b) | Identity::Other { data: b, .. } => b.clone(),
        }
    }

    /// The ID payload's body without its generic header: type, three
    /// reserved bytes, data. AUTH signs these bytes (RFC 7296 §2.15).
    pub fn payload_body(&self) -> Vec<u8> {
        let mut out = vec![self.kind(), 0, 0, 0];
        out.extend_from_slice(&self.data());
        out
    }

    fn decode(body: &[u8]) -> Result<Identity, ParseError> {
        let mut r = Reader::new(body);
        let kind = r.u8("ID payload")?;
        r.bytes(3, "ID payload")?;
        let data = r.rest();
        let other = || Identity::Other {
            kind,
            data: data.to_vec(),
        };
        Ok(match kind {
            id_type::IPV4_ADDR if data.len() == 4 => {
                Identity::Ipv4(Ipv4Addr::new(data[0], data[1], data[2], data[3]))
            }
            id_type::IPV6_ADDR if data.len() == 16 => {
                let mut a = [0u8; 16];
                a.copy_from_slice(data);
                Identity::Ipv6(Ipv6Addr::from(a))
            }
            id_type::FQDN => match std::str::from_utf8(data) {
                Ok(s) => Identity::Fqdn(s.to_string()),
                Err(_) => other(),
            },
            id_type::RFC822_ADDR => match std::str::from_utf8(data) {
                Ok(s) => Identity::Rfc822(s.to_string()),
                Err(_) => other(),
            },
            id_type::KEY_ID => Identity::KeyId(data.to_vec()),
            _ => other(),
        })
    }
}

/// strongSwan's way of writing the identity, which [`Identity::parse`]
/// reads back.
impl fmt::Display for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Identity::Ipv4(a) => write!(f, "{a}"),
            Identity::Ipv6(a) => write!(f, "{a}"),
            Identity::Fqdn(s) => write!(f, "@{}", s.escape_debug()),
            Identity::Rfc822(s) => write!(f, "{}", s.escape_debug()),
            Identity::KeyId(b) => write!(f, "keyid:#{}", hex(b)),
            Identity::Other { kind, data } => write!(f, "(ID type {kind}) #{}", hex(data)),
        }
    }
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Identity({self})")
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

/// A traffic selector (RFC 7296 §3.13.1): an address range, an IP protocol
/// (0: any) and a port range. linerate proposes whole subnets with any
/// protocol and port, as a site-to-site tunnel does; the gateway may answer
/// with a narrower one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TrafficSelector {
    pub protocol: u8,
    pub start_port: u16,
    pub end_port: u16,
    /// First address; of the same family as `end`.
    pub start: IpAddr,
    pub end: IpAddr,
}

impl TrafficSelector {
    /// All traffic between `start` and `end` (inclusive).
    pub fn range(start: Ipv4Addr, end: Ipv4Addr) -> TrafficSelector {
        TrafficSelector {
            protocol: 0,
            start_port: 0,
            end_port: 65535,
            start: IpAddr::V4(start),
            end: IpAddr::V4(end),
        }
    }

    /// All traffic of the subnet `net/prefix`.
    pub fn subnet(net: Ipv4Addr, prefix: u8) -> TrafficSelector {
        let prefix = prefix.min(32);
        let mask = if prefix == 0 {
            0
        } else {
            u32::MAX << (32 - prefix)
        };
        let base = u32::from(net) & mask;
        TrafficSelector::range(Ipv4Addr::from(base), Ipv4Addr::from(base | !mask))
    }

    /// Reads `198.18.0.0/24`, `10.0.0.1` or `10.0.0.1-10.0.0.9`, as
    /// swanctl.conf's `local_ts`/`remote_ts` do (IPv4).
    pub fn parse(text: &str) -> Result<TrafficSelector, crate::error::ConfigError> {
        let text = text.trim();
        let bad = || {
            crate::error::ConfigError(format!(
                "traffic selector '{text}' is not an IPv4 subnet, address or range: write 198.18.0.0/24, 10.0.0.1 or 10.0.0.1-10.0.0.9"
            ))
        };
        if text.contains('/') {
            let cidr: Cidr = text.parse().map_err(|_| bad())?;
            let IpAddr::V4(net) = cidr.addr else {
                return Err(bad());
            };
            return Ok(TrafficSelector::subnet(net, cidr.prefix_len));
        }
        if let Some((a, b)) = text.split_once('-') {
            let a: Ipv4Addr = a.trim().parse().map_err(|_| bad())?;
            let b: Ipv4Addr = b.trim().parse().map_err(|_| bad())?;
            if a > b {
                return Err(bad());
            }
            return Ok(TrafficSelector::range(a, b));
        }
        let a: Ipv4Addr = text.parse().map_err(|_| bad())?;
        Ok(TrafficSelector::range(a, a))
    }

    /// Whether the address `ip` is in the range.
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.start, self.end, ip) {
            (IpAddr::V4(s), IpAddr::V4(e), IpAddr::V4(a)) => s <= a && a <= e,
            (IpAddr::V6(s), IpAddr::V6(e), IpAddr::V6(a)) => s <= a && a <= e,
            _ => false,
        }
    }

    /// The part of `self` inside `limit` (RFC 7296 §2.9 narrowing): the
    /// addresses, ports and protocol both allow; `None` when nothing is.
    pub fn narrow(&self, limit: &TrafficSelector) -> Option<TrafficSelector> {
        let protocol = match (self.protocol, limit.protocol) {
            (0, p) | (p, 0) => p,
            (a, b) if a == b => a,
            _ => return None,
        };
        let start_port = self.start_port.max(limit.start_port);
        let end_port = self.end_port.min(limit.end_port);
        if start_port > end_port {
            return None;
        }
        let (start, end) = match (self.start, self.end, limit.start, limit.end) {
            (IpAddr::V4(a), IpAddr::V4(b), IpAddr::V4(c), IpAddr::V4(d)) => {
                (IpAddr::V4(a.max(c)), IpAddr::V4(b.min(d)))
            }
            (IpAddr::V6(a), IpAddr::V6(b), IpAddr::V6(c), IpAddr::V6(d)) => {
                (IpAddr::V6(a.max(c)), IpAddr::V6(b.min(d)))
            }
            _ => return None,
        };
        if start > end {
            return None;
        }
        Some(TrafficSelector {
            protocol,
            start_port,
            end_port,
            start,
            end,
        })
    }

    /// The prefix length when the range is exactly one subnet.
    fn prefix(&self) -> Option<u8> {
        let (IpAddr::V4(s), IpAddr::V4(e)) = (self.start, self.end) else {
            return None;
        };
        let (s, e) = (u32::from(s), u32::from(e));
        let span = e.wrapping_sub(s);
        if s > e || span.wrapping_add(1) & span != 0 || s & span != 0 {
            return None;
        }
        Some(32 - (u64::from(span) + 1).trailing_zeros() as u8)
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let (kind, addrs): (u8, Vec<u8>) = match (self.start, self.end) {
            (IpAddr::V4(s), IpAddr::V4(e)) => {
                (ts_type::IPV4_ADDR_RANGE, [s.octets(), e.octets()].concat())
            }
            (s, e) => (
                ts_type::IPV6_ADDR_RANGE,
                [to_v6(s).octets(), to_v6(e).octets()].concat(),
            ),
        };
        out.push(kind);
        out.push(self.protocol);
        out.extend_from_slice(&((8 + addrs.len()) as u16).to_be_bytes());
        out.extend_from_slice(&self.start_port.to_be_bytes());
        out.extend_from_slice(&self.end_port.to_be_bytes());
        out.extend_from_slice(&addrs);
    }
}

fn to_v6(ip: IpAddr) -> Ipv6Addr {
    match ip {
        IpAddr::V4(a) => a.to_ipv6_mapped(),
        IpAddr::V6(a) => a,
    }
}

/// As strongSwan prints selectors: `198.18.0.0/24`, or `a..b` for a
/// range that is no subnet, with `[protocol/ports]` when they are limited.
impl fmt::Display for TrafficSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.prefix() {
            Some(p) => write!(f, "{}/{p}", self.start)?,
            None => write!(f, "{}..{}", self.start, self.end)?,
        }
        if self.protocol != 0 || self.start_port != 0 || self.end_port != 65535 {
            write!(f, "[{}/", self.protocol)?;
            if self.start_port == self.end_port {
                write!(f, "{}]", self.start_port)?;
            } else {
                write!(f, "{}-{}]", self.start_port, self.end_port)?;
            }
        }
        Ok(())
    }
}

/// A Notify payload (RFC 7296 §3.10).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    /// 0 when it concerns no SA, else [`protocol`]'s IDs.
    pub protocol: u8,
    pub spi: Vec<u8>,
    pub kind: u16,
    pub data: Vec<u8>,
}

impl Notify {
    /// A notification about no particular SA.
    pub fn new(kind: u16, data: Vec<u8>) -> Notify {
        Notify {
            protocol: 0,
            spi: Vec::new(),
            kind,
            data,
        }
    }
    pub fn is_error(&self) -> bool {
        self.kind < notify::FIRST_STATUS
    }
}

/// A Delete payload (RFC 7296 §3.11): the IKE SA (no SPIs) or CHILD_SAs
/// by the SPI their sender receives on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delete {
    pub protocol: u8,
    pub spi_size: u8,
    pub spis: Vec<Vec<u8>>,
}

/// The payloads linerate's initiator reads and writes; others are kept as
/// bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    Sa(Vec<Proposal>),
    Ke {
        group: u16,
        data: Vec<u8>,
    },
    IdI(Identity),
    IdR(Identity),
    Auth {
        method: u8,
        data: Vec<u8>,
    },
    Nonce(Vec<u8>),
    Notify(Notify),
    Delete(Delete),
    TsI(Vec<TrafficSelector>),
    TsR(Vec<TrafficSelector>),
    /// The Encrypted payload as it is on the wire: IV, ciphertext, ICV;
    /// `first` is the type of the first payload inside.
    Encrypted {
        first: u8,
        data: Vec<u8>,
    },
    Unknown {
        kind: u8,
        critical: bool,
        body: Vec<u8>,
    },
}

impl Payload {
    /// The payload type on the wire.
    pub fn kind(&self) -> u8 {
        match self {
            Payload::Sa(_) => payload::SA,
            Payload::Ke { .. } => payload::KE,
            Payload::IdI(_) => payload::IDI,
            Payload::IdR(_) => payload::IDR,
            Payload::Auth { .. } => payload::AUTH,
            Payload::Nonce(_) => payload::NONCE,
            Payload::Notify(_) => payload::NOTIFY,
            Payload::Delete(_) => payload::DELETE,
            Payload::TsI(_) => payload::TSI,
            Payload::TsR(_) => payload::TSR,
            Payload::Encrypted { .. } => payload::SK,
            Payload::Unknown { kind, .. } => *kind,
        }
    }

    fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
            Payload::Sa(proposals) => {
                for (i, p) in proposals.iter().enumerate() {
                    let last = i + 1 == proposals.len();
                    let start = out.len();
                    out.extend_from_slice(&[if last { 0 } else { 2 }, 0, 0, 0]);
                    out.push(p.number);
                    out.push(p.protocol);
                    out.push(p.spi.len() as u8);
                    out.push(p.transforms.len() as u8);
                    out.extend_from_slice(&p.spi);
                    for (j, t) in p.transforms.iter().enumerate() {
                        let last = j + 1 == p.transforms.len();
                        let len: u16 = if t.key_length.is_some() { 12 } else { 8 };
                        out.extend_from_slice(&[if last { 0 } else { 3 }, 0]);
                        out.extend_from_slice(&len.to_be_bytes());
                        out.extend_from_slice(&[t.kind, 0]);
                        out.extend_from_slice(&t.id.to_be_bytes());
                        if let Some(bits) = t.key_length {
                            out.extend_from_slice(
                                &(0x8000 | transform::ATTR_KEY_LENGTH).to_be_bytes(),
                            );
                            out.extend_from_slice(&bits.to_be_bytes());
                        }
                    }
                    let len = (out.len() - start) as u16;
                    out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
                }
            }
            Payload::Ke { group, data } => {
                out.extend_from_slice(&group.to_be_bytes());
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(data);
            }
            Payload::IdI(id) | Payload::IdR(id) => out.extend_from_slice(&id.payload_body()),
            Payload::Auth { method, data } => {
                out.extend_from_slice(&[*method, 0, 0, 0]);
                out.extend_from_slice(data);
            }
            Payload::Nonce(n) => out.extend_from_slice(n),
            Payload::Notify(n) => {
                out.push(n.protocol);
                out.push(n.spi.len() as u8);
                out.extend_from_slice(&n.kind.to_be_bytes());
                out.extend_from_slice(&n.spi);
                out.extend_from_slice(&n.data);
            }
            Payload::Delete(d) => {
                out.push(d.protocol);
                out.push(d.spi_size);
                out.extend_from_slice(&(d.spis.len() as u16).to_be_bytes());
                for spi in &d.spis {
                    out.extend_from_slice(spi);
                }
            }
            Payload::TsI(list) | Payload::TsR(list) => {
                out.extend_from_slice(&[list.len() as u8, 0, 0, 0]);
                for ts in list {
                    ts.encode(out);
                }
            }
            Payload::Encrypted { data, .. } => out.extend_from_slice(data),
            Payload::Unknown { body, .. } => out.extend_from_slice(body),
        }
    }

    fn decode(kind: u8, critical: bool, body: &[u8]) -> Result<Payload, ParseError> {
        let mut r = Reader::new(body);
        Ok(match kind {
            payload::SA => Payload::Sa(decode_proposals(body)?),
            payload::KE => {
                let group = r.u16("KE payload")?;
                r.bytes(2, "KE payload")?;
                Payload::Ke {
                    group,
                    data: r.rest().to_vec(),
                }
            }
            payload::IDI => Payload::IdI(Identity::decode(body)?),
            payload::IDR => Payload::IdR(Identity::decode(body)?),
            payload::AUTH => {
                let method = r.u8("AUTH payload")?;
                r.bytes(3, "AUTH payload")?;
                Payload::Auth {
                    method,
                    data: r.rest().to_vec(),
                }
            }
            payload::NONCE => Payload::Nonce(body.to_vec()),
            payload::NOTIFY => {
                let protocol = r.u8("Notify payload")?;
                let spi_size = r.u8("Notify payload")?;
                let kind = r.u16("Notify payload")?;
                let spi = r.bytes(spi_size as usize, "Notify payload's SPI")?.to_vec();
                Payload::Notify(Notify {
                    protocol,
                    spi,
                    kind,
                    data: r.rest().to_vec(),
                })
            }
            payload::DELETE => {
                let protocol = r.u8("Delete payload")?;
                let spi_size = r.u8("Delete payload")?;
                let count = r.u16("Delete payload")? as usize;
                if spi_size == 0 && count != 0 {
                    return err("Delete payload: SPIs of size 0");
                }
                let mut spis = Vec::new();
                for _ in 0..count {
                    spis.push(
                        r.bytes(spi_size as usize, "Delete payload's SPIs")?
                            .to_vec(),
                    );
                }
                if r.remaining() != 0 {
                    return err("Delete payload: bytes after its SPIs");
                }
                Payload::Delete(Delete {
                    protocol,
                    spi_size,
                    spis,
                })
            }
            payload::TSI => Payload::TsI(decode_selectors(body)?),
            payload::TSR => Payload::TsR(decode_selectors(body)?),
            _ => Payload::Unknown {
                kind,
                critical,
                body: body.to_vec(),
            },
        })
    }
}

fn decode_proposals(body: &[u8]) -> Result<Vec<Proposal>, ParseError> {
    let mut r = Reader::new(body);
    let mut proposals = Vec::new();
    loop {
        let more = r.u8("proposal")?;
        r.u8("proposal")?;
        let len = r.u16("proposal")? as usize;
        if len < 8 {
            return err(format!("proposal length {len}"));
        }
        let mut p = Reader::new(r.bytes(len - 4, "proposal")?);
        let number = p.u8("proposal")?;
        let protocol = p.u8("proposal")?;
        let spi_size = p.u8("proposal")?;
        let count = p.u8("proposal")?;
        let spi = p.bytes(spi_size as usize, "proposal's SPI")?.to_vec();
        let mut transforms = Vec::new();
        for _ in 0..count {
            p.u8("transform")?;
            p.u8("transform")?;
            let tlen = p.u16("transform")? as usize;
            if tlen < 8 {
                return err(format!("transform length {tlen}"));
            }
            let mut t = Reader::new(p.bytes(tlen - 4, "transform")?);
            let kind = t.u8("transform")?;
            t.u8("transform")?;
            let id = t.u16("transform")?;
            let mut key_length = None;
            while t.remaining() > 0 {
                let attr = t.u16("transform attribute")?;
                let value = if attr & 0x8000 != 0 {
                    t.bytes(2, "transform attribute")?
                } else {
                    let alen = t.u16("transform attribute")? as usize;
                    t.bytes(alen, "transform attribute")?
                };
                if attr == 0x8000 | transform::ATTR_KEY_LENGTH {
                    key_length = Some(u16::from_be_bytes([value[0], value[1]]));
                }
            }
            transforms.push(Transform {
                kind,
                id,
                key_length,
            });
        }
        if p.remaining() != 0 {
            return err("proposal: bytes after its transforms");
        }
        proposals.push(Proposal {
            number,
            protocol,
            spi,
            transforms,
        });
        if more == 0 {
            break;
        }
        if r.remaining() == 0 {
            return err("SA payload: a proposal says more follow, none does");
        }
    }
    if r.remaining() != 0 {
        return err("SA payload: bytes after its last proposal");
    }
    Ok(proposals)
}

fn decode_selectors(body: &[u8]) -> Result<Vec<TrafficSelector>, ParseError> {
    let mut r = Reader::new(body);
    let count = r.u8("TS payload")?;
    r.bytes(3, "TS payload")?;
    let mut list = Vec::new();
    for _ in 0..count {
        let kind = r.u8("traffic selector")?;
        let protocol = r.u8("traffic selector")?;
        let len = r.u16("traffic selector")? as usize;
        if len < 8 {
            return err(format!("traffic selector length {len}"));
        }
        let mut t = Reader::new(r.bytes(len - 4, "traffic selector")?);
        let start_port = t.u16("traffic selector")?;
        let end_port = t.u16("traffic selector")?;
        let (start, end) = match (kind, t.remaining()) {
            (ts_type::IPV4_ADDR_RANGE, 8) => {
                let a = t.bytes(4, "traffic selector")?;
                let b = t.bytes(4, "traffic selector")?;
                (
                    IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
                    IpAddr::V4(Ipv4Addr::new(b[0], b[1], b[2], b[3])),
                )
            }
            (ts_type::IPV6_ADDR_RANGE, 32) => {
                let mut a = [0u8; 16];
                let mut b = [0u8; 16];
                a.copy_from_slice(t.bytes(16, "traffic selector")?);
                b.copy_from_slice(t.bytes(16, "traffic selector")?);
                (IpAddr::V6(a.into()), IpAddr::V6(b.into()))
            }
            (kind, n) => {
                return err(format!(
                    "traffic selector of type {kind} with {n} bytes of addresses"
                ))
            }
        };
        list.push(TrafficSelector {
            protocol,
            start_port,
            end_port,
            start,
            end,
        });
    }
    if r.remaining() != 0 {
        return err("TS payload: bytes after its selectors");
    }
    Ok(list)
}

/// Decodes a chain of payloads starting with type `first` (the header's,
/// or the Encrypted payload's, next payload field) that fills `data`
/// exactly. An Encrypted payload ends the chain (RFC 7296 §3.14: it is
/// always last).
pub fn parse_payloads(first: u8, data: &[u8]) -> Result<Vec<Payload>, ParseError> {
    let mut r = Reader::new(data);
    let mut next = first;
    let mut out = Vec::new();
    while next != payload::NONE {
        let kind = next;
        next = r.u8("payload header")?;
        let critical = r.u8("payload header")? & 0x80 != 0;
        let len = r.u16("payload header")? as usize;
        if len < 4 {
            return err(format!("payload of type {kind} with length {len}"));
        }
        let body = r.bytes(len - 4, "payload")?;
        if kind == payload::SK {
            out.push(Payload::Encrypted {
                first: next,
                data: body.to_vec(),
            });
            break;
        }
        out.push(Payload::decode(kind, critical, body)?);
    }
    if r.remaining() != 0 {
        return err(format!("{} bytes after the last payload", r.remaining()));
    }
    Ok(out)
}

/// Encodes a payload chain: each payload's generic header names the next
/// one's type; an Encrypted payload names its first inner payload instead.
pub fn encode_payloads(payloads: &[Payload], out: &mut Vec<u8>) {
    for (i, p) in payloads.iter().enumerate() {
        let next = match p {
            Payload::Encrypted { first, .. } => *first,
            _ => payloads.get(i + 1).map_or(payload::NONE, Payload::kind),
        };
        let start = out.len();
        let critical = matches!(p, Payload::Unknown { critical: true, .. });
        out.extend_from_slice(&[next, if critical { 0x80 } else { 0 }, 0, 0]);
        p.encode_body(out);
        let len = (out.len() - start) as u16;
        out[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
    }
}

/// A decoded message: its header and its payloads (those inside an
/// Encrypted payload once `protect::open` has decrypted it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub header: Header,
    pub payloads: Vec<Payload>,
}

impl Message {
    /// Decodes one datagram (without the non-ESP marker of port 4500).
    /// Bytes after the length the header gives are ignored.
    pub fn parse(data: &[u8]) -> Result<Message, ParseError> {
        let header = Header::parse(data)?;
        let payloads = parse_payloads(
            header.next_payload,
            &data[Header::LEN..header.length as usize],
        )?;
        Ok(Message { header, payloads })
    }

    /// Encodes the message, setting the header's first payload type and
    /// length.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(512);
        let mut header = self.header;
        header.next_payload = self.payloads.first().map_or(payload::NONE, Payload::kind);
        header.write(&mut out);
        encode_payloads(&self.payloads, &mut out);
        let len = out.len() as u32;
        out[24..28].copy_from_slice(&len.to_be_bytes());
        out
    }

    /// The notifications in the message.
    pub fn notifies(&self) -> impl Iterator<Item = &Notify> {
        self.payloads.iter().filter_map(|p| match p {
            Payload::Notify(n) => Some(n),
            _ => None,
        })
    }

    /// The first notification of type `kind`.
    pub fn notify(&self, kind: u16) -> Option<&Notify> {
        self.notifies().find(|n| n.kind == kind)
    }

    /// The first error notification.
    pub fn error(&self) -> Option<&Notify> {
        self.notifies().find(|n| n.is_error())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An IKE_SA_INIT request much as linerate sends one.
    pub(crate) fn sample_init() -> Message {
        Message {
            header: Header::new(
                0x0102030405060708,
                0,
                exchange::IKE_SA_INIT,
                flags::INITIATOR,
                0,
            ),
            payloads: vec![
                Payload::Sa(vec![
                    Proposal {
                        number: 1,
                        protocol: protocol::IKE,
                        spi: vec![],
                        transforms: vec![
                            Transform::with_key_length(transform::ENCR, 12, 256),
                            Transform::new(transform::PRF, 5),
                            Transform::new(transform::INTEG, 12),
                            Transform::new(transform::DH, 14),
                        ],
                    },
                    Proposal {
                        number: 2,
                        protocol: protocol::IKE,
                        spi: vec![],
                        transforms: vec![Transform::new(transform::DH, 31)],
                    },
                ]),
                Payload::Ke {
                    group: 14,
                    data: vec![7; 256],
                },
                Payload::Nonce(vec![9; 32]),
                Payload::Notify(Notify::new(notify::NAT_DETECTION_SOURCE_IP, vec![1; 20])),
                Payload::Notify(Notify::new(
                    notify::NAT_DETECTION_DESTINATION_IP,
                    vec![2; 20],
                )),
            ],
        }
    }

    /// An IKE_AUTH request's inner payloads.
    pub(crate) fn sample_auth_payloads() -> Vec<Payload> {
        vec![
            Payload::IdI(Identity::Fqdn("peer.example".into())),
            Payload::IdR(Identity::KeyId(vec![1, 2, 3])),
            Payload::Auth {
                method: auth_method::SHARED_KEY_MIC,
                data: vec![5; 32],
            },
            Payload::Notify(Notify::new(notify::INITIAL_CONTACT, vec![])),
            Payload::Sa(vec![Proposal {
                number: 1,
                protocol: protocol::ESP,
                spi: vec![0xc0, 0, 0, 1],
                transforms: vec![
                    Transform::with_key_length(transform::ENCR, 20, 128),
                    Transform::new(transform::ESN, 0),
                ],
            }]),
            Payload::TsI(vec![TrafficSelector::subnet(
                Ipv4Addr::new(198, 18, 0, 0),
                24,
            )]),
            Payload::TsR(vec![
                TrafficSelector::subnet(Ipv4Addr::new(198, 19, 0, 0), 24),
                TrafficSelector {
                    protocol: 17,
                    start_port: 53,
                    end_port: 53,
                    start: "::1".parse().unwrap(),
                    end: "::2".parse().unwrap(),
                },
            ]),
            Payload::Delete(Delete {
                protocol: protocol::ESP,
                spi_size: 4,
                spis: vec![vec![1, 2, 3, 4], vec![5, 6, 7, 8]],
            }),
            Payload::Unknown {
                kind: payload::VENDOR_ID,
                critical: false,
                body: b"linerate".to_vec(),
            },
        ]
    }

    #[test]
    fn messages_encode_and_decode_back() {
        let init = sample_init();
        let bytes = init.encode();
        let back = Message::parse(&bytes).unwrap();
        assert_eq!(back.payloads, init.payloads);
        assert_eq!(back.header.length as usize, bytes.len());
        assert_eq!(back.header.next_payload, payload::SA);

        let auth = Message {
            header: Header::new(1, 2, exchange::IKE_AUTH, flags::INITIATOR, 1),
            payloads: sample_auth_payloads(),
        };
        let back = Message::parse(&auth.encode()).unwrap();
        assert_eq!(back.payloads, auth.payloads);
    }

    #[test]
    fn the_header_is_rfc_7296s() {
        let bytes = sample_init().encode();
        assert_eq!(&bytes[..8], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&bytes[8..16], &[0; 8]);
        assert_eq!(bytes[16], payload::SA);
        assert_eq!(bytes[17], 0x20);
        assert_eq!(bytes[18], 34);
        assert_eq!(bytes[19], 0x08);
        // The SA payload: next KE, its length, then the first proposal
        // (more follow: 2) with 4 transforms, the first AES-CBC-256.
        assert_eq!(bytes[28], payload::KE);
        assert_eq!(&bytes[32..34], &[2, 0]);
        assert_eq!(&bytes[36..40], &[1, protocol::IKE, 0, 4]);
        // Transform: more (3), length 12, ENCR, ID 12, key length 256.
        assert_eq!(&bytes[40..52], &[3, 0, 0, 12, 1, 0, 0, 12, 0x80, 14, 1, 0]);
    }

    #[test]
    fn lengths_that_overrun_are_errors() {
        let mut bytes = sample_init().encode();
        // The SA payload claims more than the message has.
        bytes[30] = 0xff;
        assert!(Message::parse(&bytes).is_err());
        let bytes = sample_init().encode();
        assert!(Message::parse(&bytes[..bytes.len() - 1]).is_err());
        assert!(Message::parse(&bytes[..27]).is_err());
        let mut v1 = bytes.clone();
        v1[17] = 0x10;
        assert!(Message::parse(&v1).unwrap_err().0.contains("version 1"));
    }

    #[test]
    fn identities_read_strongswan_syntax() {
        assert_eq!(
            Identity::parse("10.0.0.1").unwrap(),
            Identity::Ipv4(Ipv4Addr::new(10, 0, 0, 1))
        );
        assert_eq!(
            Identity::parse("@gw.example").unwrap(),
            Identity::Fqdn("gw.example".into())
        );
        assert_eq!(
            Identity::parse("gw.example").unwrap(),
            Identity::Fqdn("gw.example".into())
        );
        assert_eq!(
            Identity::parse("keyid:#0a0B").unwrap(),
            Identity::KeyId(vec![10, 11])
        );
        assert_eq!(
            Identity::parse("keyid:abc").unwrap(),
            Identity::KeyId(b"abc".to_vec())
        );
        assert_eq!(
            Identity::parse("me@example.com").unwrap(),
            Identity::Rfc822("me@example.com".into())
        );
        assert!(Identity::parse("keyid:#abc").is_err());
        assert!(Identity::parse("").is_err());
        for text in ["10.0.0.1", "@gw.example", "keyid:#0a0b", "me@example.com"] {
            assert_eq!(Identity::parse(text).unwrap().to_string(), text);
        }
    }

    #[test]
    fn selectors_read_subnets_and_print_them_back() {
        let ts = TrafficSelector::parse("198.18.0.7/24").unwrap();
        assert_eq!(ts.start, IpAddr::V4(Ipv4Addr::new(198, 18, 0, 0)));
        assert_eq!(ts.end, IpAddr::V4(Ipv4Addr::new(198, 18, 0, 255)));
        assert_eq!(ts.to_string(), "198.18.0.0/24");
        assert_eq!(
            TrafficSelector::parse("10.0.0.1").unwrap().to_string(),
            "10.0.0.1/32"
        );
        assert_eq!(
            TrafficSelector::parse("0.0.0.0/0").unwrap().to_string(),
            "0.0.0.0/0"
        );
        assert_eq!(
            TrafficSelector::parse("10.0.0.1-10.0.0.9")
                .unwrap()
                .to_string(),
            "10.0.0.1..10.0.0.9"
        );
        assert!(TrafficSelector::parse("10.0.0.0/33").is_err());
        assert!(TrafficSelector::parse("10.0.0.9-10.0.0.1").is_err());
        assert!(TrafficSelector::parse("fd00::/64").is_err());
        let mut udp = TrafficSelector::subnet(Ipv4Addr::new(10, 1, 0, 0), 16);
        udp.protocol = 17;
        udp.start_port = 4500;
        udp.end_port = 4500;
        assert_eq!(udp.to_string(), "10.1.0.0/16[17/4500]");
    }
}
