//! IKEv2 (RFC 7296) for linerate as the peer of one VPN gateway, as an
//! IPsec tester is: linerate negotiates a CHILD_SA with the gateway and
//! then encrypts and decrypts the test frames itself (linerate-esp).
//!
//! - [`wire`]: the message format, whose parser takes any bytes.

pub mod error;
pub mod wire;

pub use error::ConfigError;
pub use wire::{Identity, ParseError, TrafficSelector};
