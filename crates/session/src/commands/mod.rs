//! One module per subcommand.

pub(crate) mod back_to_back;
pub(crate) mod calibrate;
pub(crate) mod cpu_target;
pub(crate) mod frame_loss;
pub(crate) mod http;
mod lab;
pub(crate) mod latency;
pub(crate) mod mlrsearch;
pub(crate) mod overhead;
pub(crate) mod rfc2544;
mod run;
mod scenarios;
mod session;
pub(crate) mod stack;
mod stored;
pub(crate) mod tcp;
pub(crate) mod trial;

use crate::args::{Cli, Command};
use crate::exit::Outcome;
pub(crate) use rfc2544::write_json;
pub(crate) use session::show as show_step;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

/// Runs `cli`'s command. `stop` is the interrupt: when it becomes true the
/// running trial stops, what was measured is saved, and a lab made for the
/// run is removed; the command then returns [`Outcome::Interrupted`].
pub fn run(cli: Cli, stop: &AtomicBool) -> crate::error::Result<Outcome> {
    match cli.command {
        Command::Lab { action } => lab::run(action),
        Command::Run { file, dry_run } => run::run(&file, dry_run, stop),
        Command::Rfc2544(args) => rfc2544::run(rfc2544::Rfc2544Plan::from_args(&args)?, stop),
        Command::Trial(args) => trial::run(trial::TrialPlan::from_args(&args)?, stop),
        Command::Overhead(args) => overhead::run(overhead::OverheadPlan::from_args(&args)?),
        Command::Latency(args) => latency::run(latency::LatencyPlan::from_args(&args)?, stop),
        Command::Calibrate(args) => {
            calibrate::run(calibrate::CalibratePlan::from_args(&args)?, stop)
        }
        Command::Loss(args) => frame_loss::run(frame_loss::LossPlan::from_args(&args)?, stop),
        Command::Mlrsearch(args) => {
            mlrsearch::run(mlrsearch::MlrsearchPlan::from_args(&args)?, stop)
        }
        Command::BackToBack(args) => {
            back_to_back::run(back_to_back::BackToBackPlan::from_args(&args)?, stop)
        }
        Command::Tcp(args) => tcp::run(tcp::TcpPlan::from_args(&args)?, stop),
        Command::Http(args) => http::run(http::HttpPlan::from_args(&args)?, stop),
        Command::CpuTarget(args) => {
            cpu_target::run(cpu_target::CpuTargetPlan::from_args(&args)?, stop)
        }
        Command::Runs(args) => stored::runs(args),
        Command::Show(args) => stored::show(args),
        Command::Compare(args) => stored::compare(args),
        Command::Export(args) => stored::export(args),
        Command::Report(args) => stored::report(args),
    }
}

/// Checks `cli`'s values as its command would before touching the machine,
/// without running it (`run FILE.toml` checks every test before the first
/// runs; `run --dry-run` only checks): a measuring command is checked by
/// making its plan. Commands that only read or print stored data (lab,
/// runs, show, compare, export, report) have nothing more to check than
/// their command line.
pub fn check(cli: Cli) -> crate::error::Result<()> {
    match cli.command {
        Command::Trial(args) => trial::TrialPlan::from_args(&args).map(drop),
        Command::Rfc2544(args) => rfc2544::Rfc2544Plan::from_args(&args).map(drop),
        Command::Overhead(args) => overhead::OverheadPlan::from_args(&args).map(drop),
        Command::CpuTarget(args) => cpu_target::CpuTargetPlan::from_args(&args).map(drop),
        Command::Tcp(args) => tcp::TcpPlan::from_args(&args).map(drop),
        Command::Http(args) => http::HttpPlan::from_args(&args).map(drop),
        Command::Calibrate(args) => calibrate::CalibratePlan::from_args(&args).map(drop),
        Command::Latency(args) => latency::LatencyPlan::from_args(&args).map(drop),
        Command::Mlrsearch(args) => mlrsearch::MlrsearchPlan::from_args(&args).map(drop),
        Command::BackToBack(args) => back_to_back::BackToBackPlan::from_args(&args).map(drop),
        Command::Loss(args) => frame_loss::LossPlan::from_args(&args).map(drop),
        Command::Lab { .. }
        | Command::Run { .. }
        | Command::Runs(_)
        | Command::Show(_)
        | Command::Compare(_)
        | Command::Export(_)
        | Command::Report(_) => Ok(()),
    }
}

/// A flag set by SIGINT or SIGTERM, for [`run`]'s `stop`: the running trial
/// stops, what was measured is saved, and a lab made for the run is removed
/// on the way out.
pub fn interrupt_flag() -> std::io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(flag)
}
