//! The time the tests of the sans-I/O machines run at: one instant, read
//! once, so that `initiator.rs`, `tunnel.rs`, `ike_rekey.rs` and
//! `responder.rs` never read the clock, not even in their tests.

use std::sync::OnceLock;
use std::time::Instant;

/// The instant the first test that asked for it started at.
pub(crate) fn t0() -> Instant {
    static T0: OnceLock<Instant> = OnceLock::new();
    *T0.get_or_init(Instant::now)
}
