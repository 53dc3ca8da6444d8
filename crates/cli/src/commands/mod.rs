//! One module per subcommand.

mod back_to_back;
mod calibrate;
mod cpu_target;
mod frame_loss;
mod http;
mod lab;
mod latency;
mod mlrsearch;
mod overhead;
mod rfc2544;
mod run;
mod scenarios;
mod session;
mod stack;
mod stored;
mod tcp;
mod trial;

use crate::args::{Cli, Command};
use crate::exit::Outcome;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Lab { action } => lab::run(action),
        Command::Run { file, dry_run } => run::run(&file, dry_run),
        Command::Rfc2544(args) => rfc2544::run(args, &*interrupt_flag()?),
        Command::Trial(args) => trial::run(args, &*interrupt_flag()?),
        Command::Overhead(args) => overhead::run(args),
        Command::Latency(args) => latency::run(args, &*interrupt_flag()?),
        Command::Calibrate(args) => calibrate::run(args, &*interrupt_flag()?),
        Command::Loss(args) => frame_loss::run(args, &*interrupt_flag()?),
        Command::Mlrsearch(args) => mlrsearch::run(args, &*interrupt_flag()?),
        Command::BackToBack(args) => back_to_back::run(args, &*interrupt_flag()?),
        Command::Tcp(args) => tcp::run(args, &*interrupt_flag()?),
        Command::Http(args) => http::run(args, &*interrupt_flag()?),
        Command::CpuTarget(args) => cpu_target::run(args, &*interrupt_flag()?),
        Command::Runs(args) => stored::runs(args),
        Command::Show(args) => stored::show(args),
        Command::Compare(args) => stored::compare(args),
        Command::Export(args) => stored::export(args),
        Command::Report(args) => stored::report(args),
    }
}

/// Set by SIGINT or SIGTERM: the running trial stops, what was measured is
/// saved, and a lab made for the run is removed on the way out.
fn interrupt_flag() -> anyhow::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(flag)
}
