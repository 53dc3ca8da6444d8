//! The socket drivers: the sans-I/O machines (`initiator`, `tunnel`,
//! `responder::ResponderMachine`) on UDP sockets. Only here is the clock
//! read (`Instant::now`) and `OsRng` given to the machines.
//!
//! - [`session`]: one tunnel, blocking, on two sockets.
//! - [`fleet`]: thousands of peers from one thread on one pair of
//!   wildcard sockets (`IP_PKTINFO`), a timer heap of their deadlines.
//! - [`responder`]: the responder for any number of initiators.
//! - `udp`: the `IP_PKTINFO` send and receive and the wait the fleet and
//!   the responder share; `esp_filter`: the BPF filter that keeps ESP off
//!   an IKE socket on 4500.
//! - [`loopback`] (tests, `test-support`): a fleet against the responder
//!   on 127.0.0.1.

pub(crate) mod esp_filter;
pub mod fleet;
#[cfg(test)]
mod fleet_tests;
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod loopback;
pub mod responder;
pub mod session;
mod udp;
