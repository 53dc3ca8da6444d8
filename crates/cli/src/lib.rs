//! linerate's command line as a library: the options of every command
//! (clap), the plans they make, and the scenario-file runner, which speaks
//! the same vocabulary. The `linerate` binary parses [`Cli`] and calls
//! [`run`]; the Python package turns keyword arguments into the same
//! command line and calls the same [`run`]. What a command does lives in
//! the `linerate-session` crate: here options only become its plans.

pub mod args;
mod plans;
mod run_file;

pub use args::Cli;
use args::{Command, LabAction};
use linerate_session::commands::{
    back_to_back, calibrate, cpu_target, frame_loss, http, lab, latency, mlrsearch, overhead,
    rfc2544, scenarios, stored, tcp, trial, tunnels,
};
use linerate_session::{Outcome, Result};
use std::sync::atomic::AtomicBool;

/// Runs `cli`'s command. `stop` is the interrupt: when it becomes true the
/// running trial stops, what was measured is saved, and a lab made for the
/// run is removed; the command then returns [`Outcome::Interrupted`]. A
/// lab or scenario being set up for the run stops at its next step.
pub fn run(cli: &Cli, stop: &AtomicBool) -> Result<Outcome> {
    linerate_session::ports::set_up_stop_is_interruption(run_command(cli, stop))
}

fn run_command(cli: &Cli, stop: &AtomicBool) -> Result<Outcome> {
    match &cli.command {
        Command::Lab { action } => match action {
            LabAction::Up { lab_name, ring } => lab::up(lab_name.as_deref(), *ring, stop),
            LabAction::Down { lab_name, all } => lab::down(lab_name.as_deref(), *all),
            LabAction::Status { json } => lab::status(*json),
        },
        Command::Run { file, dry_run } => run_file::run(file, *dry_run, stop),
        Command::Rfc2544(args) => {
            let plan = args.plan()?;
            if plan.scenarios.is_empty() {
                rfc2544::run(plan, stop)
            } else {
                scenarios::run(plan, stop)
            }
        }
        Command::Trial(args) => trial::run(args.plan()?, stop),
        Command::Overhead(args) => overhead::run(args.plan()?),
        Command::Latency(args) => latency::run(args.plan()?, stop),
        Command::Calibrate(args) => calibrate::run(args.plan()?, stop),
        Command::Loss(args) => frame_loss::run(args.plan()?, stop),
        Command::Mlrsearch(args) => mlrsearch::run(args.plan()?, stop),
        Command::BackToBack(args) => back_to_back::run(args.plan()?, stop),
        Command::Tcp(args) => tcp::run(args.plan()?, stop),
        Command::Http(args) => http::run(args.plan()?, stop),
        Command::CpuTarget(args) => cpu_target::run(args.plan()?, stop),
        Command::Tunnels(args) => tunnels::run(args.plan()?, stop),
        Command::Runs(args) => stored::runs(args.db.db.as_deref()),
        Command::Show(args) => stored::show(args.db.db.as_deref(), &args.run),
        Command::Compare(args) => stored::compare(args.db.db.as_deref(), &args.runs),
        Command::Export(args) => stored::export(
            args.db.db.as_deref(),
            &args.run,
            args.format(),
            args.output.as_deref(),
        ),
        Command::Report(args) => stored::report(args.db.db.as_deref(), &args.run, &args.html),
    }
}

/// Checks `cli`'s values as its command would before touching the machine,
/// without running it (`run FILE.toml` checks every test before the first
/// runs; `run --dry-run` only checks): a measuring command is checked by
/// making its plan. Commands that only read or print stored data (lab,
/// runs, show, compare, export, report) have nothing more to check than
/// their command line.
pub fn check(cli: &Cli) -> Result<()> {
    match &cli.command {
        Command::Trial(args) => args.plan().map(drop),
        Command::Rfc2544(args) => args.plan().map(drop),
        Command::Overhead(args) => args.plan().map(drop),
        Command::CpuTarget(args) => args.plan().map(drop),
        Command::Tcp(args) => args.plan().map(drop),
        Command::Http(args) => args.plan().map(drop),
        Command::Calibrate(args) => args.plan().map(drop),
        Command::Latency(args) => args.plan().map(drop),
        Command::Mlrsearch(args) => args.plan().map(drop),
        Command::BackToBack(args) => args.plan().map(drop),
        Command::Loss(args) => args.plan().map(drop),
        Command::Tunnels(args) => args.plan().map(drop),
        Command::Lab { .. }
        | Command::Run { .. }
        | Command::Runs(_)
        | Command::Show(_)
        | Command::Compare(_)
        | Command::Export(_)
        | Command::Report(_) => Ok(()),
    }
}
