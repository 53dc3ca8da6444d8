//! Fixtures for the integration tests of linerate's crates (a
//! dev-dependency only, never shipped).
//!
//! The tests that send real frames need a veth pair that no one else
//! touches: [`Veth`] makes one inside a network namespace of its own (or
//! with one end in each of two), and the [`Netns`] it returns deletes the
//! namespace, and with it the pair, when dropped, also when the test
//! panics. [`Netns::enter`] moves the test's thread inside for code that
//! must run there.
//!
//! Every test runs code inside a named namespace with [`run_in_netns`] (or
//! [`spawn_in_netns`]) and iproute2's `ip` with [`ip`], [`try_ip`] or
//! [`ip_command`]: thin wrappers over linerate-helper's, which linerate's
//! own code uses.
//!
//! The binary's tests (crates/cli/tests/common) keep helpers of their own
//! for the rest: they drive whole labs through the `linerate` command.

mod command;
mod netns;
mod skip;
mod veth;

pub use command::{ip, ip_command, run, try_ip};
pub use linerate_helper::RunError;
pub use netns::{run_in_netns, spawn_in_netns, Entered, Netns};
pub use skip::{is_root, skip};
pub use veth::Veth;
