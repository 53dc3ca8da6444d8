//! ESP (RFC 4303) as the tester's data path needs it: one security
//! association per direction, every frame encrypted with its own sequence
//! number and IV as it is sent, and on receive the ICV verified, replays
//! refused and the clear packet handed back to be counted.
//!
//! - [`SaKeys`]: the keys IKEv2 derived for one SA.
//! - [`Outbound::seal`] / [`Inbound::open`]: one packet, in the caller's
//!   buffer, no allocation.
//! - [`frame`]: the outer Ethernet/IPv4/UDP (RFC 3948) or Ethernet/IPv4
//!   (protocol 50) headers around an ESP packet, and back.
//!
//! One test frame out and back:
//!
//! ```
//! use linerate_esp::{decapsulate, EspSuite, Framer, Inbound, OuterHeaders, Outbound, Payload, SaKeys};
//! use linerate_wire::ethernet::MacAddr;
//! use std::net::Ipv4Addr;
//!
//! let suite = EspSuite::parse("aes128gcm16")?;
//! // As IKEv2's KEYMAT gives them: 16-byte AES key, then the 4-byte salt.
//! let keys = SaKeys::new(suite, 0xc1a0_0001, vec![7; 20], vec![])?;
//! let mut tx = Outbound::new(keys.clone())?;
//! let mut rx = Inbound::new(keys)?;
//!
//! let framer = Framer::new(&OuterHeaders::esp_in_udp(
//!     MacAddr([2, 0, 0, 0, 0, 1]),
//!     MacAddr([2, 0, 0, 0, 0, 2]),
//!     Ipv4Addr::new(198, 18, 0, 1),
//!     Ipv4Addr::new(198, 18, 0, 2),
//! ));
//! let inner = [0x45u8; 46]; // the clear IPv4 test packet
//! let mut frame = [0u8; 256];
//! let len = framer.seal(&mut tx, &inner, linerate_esp::NEXT_HEADER_IPV4, &mut frame)?;
//!
//! let Payload::Esp(esp) = decapsulate(&mut frame[..len], 4500)?.payload else {
//!     unreachable!()
//! };
//! let opened = rx.open(esp)?;
//! assert_eq!((opened.packet.len(), opened.seq), (46, 1));
//! assert_eq!(rx.counters().packets, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod crypto;
pub mod error;
pub mod frame;
pub mod keys;
mod replay;
pub mod sa;
pub mod suite;
#[cfg(test)]
mod testutil;
#[cfg(test)]
mod vectors;
pub mod xfrm;

pub use error::{EspError, Malformed};
pub use frame::{
    decapsulate, encapsulate_frame, Decapsulated, Encapsulation, Framer, OuterHeaders, Payload,
};
pub use keys::SaKeys;
pub use replay::REPLAY_WINDOW;
pub use sa::{
    spi_of, Inbound, InboundCounters, Opened, Outbound, OutboundCounters, NEXT_HEADER_IPV4,
    NEXT_HEADER_IPV6, NEXT_HEADER_NONE,
};
pub use suite::{EspCipher, EspIntegrity, EspSuite, SuiteError};
