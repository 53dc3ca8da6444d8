//! linerate's session layer: everything between the command line (or a
//! TOML file, or the Python package) and the library crates that measure.
//! It picks the test bed (a lab by name or external ports), runs each
//! method's trials on it, records what they measured (database, events,
//! pcap, JSON) and hands the results to the reporters.
//!
//! The `linerate` binary is a thin shell over [`run`]: it parses the
//! command line into [`Cli`], passes a stop flag set by SIGINT/SIGTERM,
//! and maps the [`Outcome`] to an exit code. The Python package drives
//! the same [`run`] with its own stop flag (KeyboardInterrupt).

mod args;
mod commands;
mod dut_cpu;
pub mod error;
mod events;
pub mod exit;
mod frame_args;
mod method_args;
mod outputs;
pub mod plan;
mod ports;
mod progress;
mod record_args;
mod recorder;
#[cfg(test)]
mod test_support;

pub use args::Cli;
pub use commands::{interrupt_flag, run};
pub use error::{Error, Kind, Result};
pub use events::{listen, Listener};
pub use exit::Outcome;
pub use recorder::record_command_line;
