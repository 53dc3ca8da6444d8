//! The `linerate` binary: parses the command line, runs the command, and
//! maps the outcome to a documented exit code.
//!
//! Exit codes: 0 the test ran and passed; 1 the test ran but a threshold
//! failed; 2 bad input or environment (the message says what to fix);
//! 130 interrupted (SIGINT/SIGTERM), after saving what was measured.

mod args;
mod commands;
mod dut_cpu;
mod events;
mod exit;
mod frame_args;
mod method_args;
mod ports;
mod progress;
mod record_args;
mod recorder;

use clap::Parser;
use exit::Outcome;

fn main() {
    let cli = args::Cli::parse();
    let code = match commands::run(cli) {
        Ok(Outcome::Passed) => 0,
        Ok(Outcome::ThresholdFailed(why)) => {
            eprintln!("linerate: {why}");
            1
        }
        Ok(Outcome::Interrupted(what)) => {
            eprintln!("linerate: interrupted; {what}");
            130
        }
        Err(e) => {
            eprintln!("linerate: error: {}", exit::one_line(&e));
            2
        }
    };
    std::process::exit(code);
}
