//! IKEv2 (RFC 7296) for linerate as the peer of one VPN gateway, as an
//! IPsec tester is: linerate negotiates a CHILD_SA with the gateway and
//! then encrypts and decrypts the test frames itself (linerate-esp), so
//! the gateway's IPsec throughput is measured without a second IPsec
//! implementation in the way.
//!
//! What a test needs, and only that: a pre-shared key (RFC 7296 §2.15),
//! one CHILD_SA per IKE SA in tunnel mode for the test networks, ESP in UDP
//! on port 4500 forced by NAT detection (RFC 3948), the peer's liveness
//! checks answered, CHILD_SA rekeying (§1.3.3) and IKE SA rekeying
//! (§1.3.2, §2.18) both ways, and the IKE SA deleted at the end.
//!
//! The protocol is sans-IO (as smoltcp does it): the initiator's handshake
//! (`initiator`), the responder's (`responder::ResponderMachine`) and the
//! established IKE SA of either role (`tunnel`) take datagrams and the time
//! and produce datagrams and outcomes, with no socket inside. Three small
//! drivers in [`io`] put them on sockets:
//!
//! - [`Session::connect`]: one tunnel, blocking through IKE_SA_INIT and
//!   IKE_AUTH; the result holds the [`ChildSa`]: two [`SaKeys`] for the
//!   data path, the traffic selectors the gateway accepted, the UDP
//!   addresses. [`Session::poll`] while the test runs,
//!   [`Session::rekey_child`] to rekey, [`Session::delete`] after.
//! - [`Fleet`]: thousands of emulated peers, each with its own address,
//!   IKE SA and CHILD_SA, from one thread and one pair of sockets; attempts
//!   paced, each setup timed ([`Setup`]).
//! - [`Responder`]: linerate as the responder for any number of
//!   initiators (the other end of a fleet in benchmarks).
//! - [`IkeProposals`]: strongSwan's proposal syntax
//!   (`aes256-sha256-modp2048`); ESP suites are `linerate_esp::EspSuite`.
//! - [`wire`]: the message format, whose parser takes any bytes.

pub mod config;
mod crypto;
pub mod error;
pub mod event;
mod ike_rekey;
mod ike_sa;
mod initiator;
pub mod io;
mod proposal;
mod protect;
pub mod responder;
pub mod sa;
#[cfg(test)]
mod test_clock;
mod tunnel;
pub mod wire;

// The drivers at their paths from before `io`.
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub use io::loopback;
pub use io::{fleet, session};

pub use config::{Config, FleetConfig, Peer, Ports, Psk, ResponderConfig, Retransmit};
pub use crypto::{DhGroup, Encr, Integ, Prf};
pub use error::{ConfigError, IkeError};
pub use event::Event;
pub use io::fleet::{Deletes, Fleet, PeerEvent, Setup};
pub use io::responder::Responder;
pub use io::session::{Session, Sockets};
pub use linerate_esp::{EspCipher, EspIntegrity, EspSuite, SaKeys};
pub use proposal::{IkeProposal, IkeProposals, IkeSuite, ProposalError};
/// The random sources the state machines take (`rand_core::OsRng`).
pub use rand_core;
pub use responder::{ResponderEvent, ResponderMachine};
pub use sa::{ChildInstaller, ChildSa};
pub use wire::{Identity, ParseError, TrafficSelector};
