//! Each command's options become its plan (`XArgs::plan`), every value
//! checked and nothing on the machine touched; one module per command.

mod back_to_back;
mod bed;
mod calibrate;
mod cpu_target;
mod frame_loss;
mod http;
mod latency;
mod mlrsearch;
mod overhead;
mod rfc2544;
mod stack;
mod tcp;
mod trial;
mod tunnels;
mod unused;
pub(crate) mod values;

/// The command `line` parses into; clap's rejection as bad input (the
/// plans' unit tests).
#[cfg(test)]
fn parse(line: &str) -> linerate_session::Result<crate::args::Command> {
    use clap::Parser;
    crate::Cli::try_parse_from(line.split_whitespace())
        .map(|cli| cli.command)
        .map_err(|e| linerate_session::Error::new(linerate_session::Kind::BadInput, e))
}
