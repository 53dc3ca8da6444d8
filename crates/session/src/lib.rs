//! linerate's session layer: everything between the command line (or a
//! TOML file, or the Python package) and the library crates that measure.
//! It picks the test bed (a lab by name or external ports), runs each
//! method's trials on it, records what they measured (database, events,
//! pcap, JSON) and hands the results to the reporters.
//!
//! Each measuring command is a typed plan ([`plan`]: values, checked
//! once, nothing on the machine touched) and a `run` in [`commands`] that
//! carries it out and returns an [`Outcome`]; its `stop` flag ends the
//! running trial early (SIGINT/SIGTERM through [`interrupt_flag`], or
//! Python's KeyboardInterrupt). This crate knows no command line: the
//! `linerate-cli` library (crates/cli) turns options into plans, for the
//! `linerate` binary, the TOML runner and the Python package alike.

#[macro_use]
pub mod console;
pub mod caller;
pub mod commands;
pub mod driver;
pub mod dut_cpu;
pub mod error;
mod events;
pub mod exit;
pub mod ike_keeper;
pub mod ipsec;
pub mod outputs;
pub mod peers;
pub mod plan;
pub mod ports;
mod progress;
pub mod recorder;
mod rekey_schedule;
pub mod scenario_bed;
mod secret_file;
mod sizes;
#[cfg(any(test, feature = "test-support"))]
pub mod test_support;
pub mod throughput;
mod tunnel_counts;

pub use caller::{Caller, Listener};
pub use commands::{interrupt_flag, interrupted_exit_code};
pub use error::{Error, Kind, Result};
pub use exit::Outcome;
