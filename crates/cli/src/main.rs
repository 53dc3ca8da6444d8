//! The `linerate` binary: parses the command line, runs the command (the
//! `linerate_cli` library turns it into a plan and the `linerate-session`
//! crate runs it), and maps the outcome to a
//! documented exit code.
//!
//! Exit codes: 0 the test ran and passed; 1 the test ran but a threshold
//! failed; 2 bad input or environment (the message says what to fix);
//! 130 interrupted (SIGINT/SIGTERM; 129 SIGHUP, the terminal closed), after
//! saving what was measured and removing a lab made for the run. A
//! reader that goes away (`linerate ... | head -1`) ends linerate quietly
//! as it ends other tools: by SIGPIPE, after a lab made for the run is
//! removed.

use clap::Parser;
use linerate_cli::Cli;
use linerate_session::{exit, Outcome};
use std::io::Write;

fn main() {
    exit::quiet_on_closed_pipe();
    let cli = Cli::parse();
    // A print to a closed pipe panics inside `println!`: unwinding runs
    // every Drop (a lab built for the run is removed), then linerate ends
    // as SIGPIPE would have ended it, without a message.
    let result = match std::panic::catch_unwind(move || {
        let stop = linerate_session::interrupt_flag()?;
        linerate_cli::run(&cli, &stop)
    }) {
        Ok(result) => result,
        Err(payload) if exit::is_closed_pipe_panic(&*payload) => die_of_sigpipe(),
        Err(payload) => std::panic::resume_unwind(payload),
    };
    let mut err = std::io::stderr();
    let code = match result {
        Ok(Outcome::Passed) => 0,
        Ok(Outcome::ThresholdFailed(why)) => {
            let _ = writeln!(err, "linerate: {why}");
            1
        }
        Ok(Outcome::Interrupted(what)) => {
            let _ = writeln!(err, "linerate: interrupted; {what}");
            linerate_session::interrupted_exit_code()
        }
        Err(e) if exit::is_closed_pipe(&e) => die_of_sigpipe(),
        Err(e) => {
            let _ = writeln!(err, "linerate: error: {}", exit::one_line(&e));
            2
        }
    };
    std::process::exit(code);
}

/// Ends the process as a closed pipe ends a tool that does not catch
/// SIGPIPE: killed by the signal (a shell reports 141), without a message.
/// Rust ignores SIGPIPE from the start, so its default comes back first.
fn die_of_sigpipe() -> ! {
    use nix::sys::signal::{raise, signal, SigHandler, Signal};
    // SAFETY: restoring the default disposition; no handler code runs.
    unsafe {
        let _ = signal(Signal::SIGPIPE, SigHandler::SigDfl);
    }
    let _ = raise(Signal::SIGPIPE);
    std::process::exit(128 + Signal::SIGPIPE as i32)
}
