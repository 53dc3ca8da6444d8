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
pub use suite::{EspSuite, SuiteError};
