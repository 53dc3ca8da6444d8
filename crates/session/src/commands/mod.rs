//! One module per subcommand.

pub(crate) mod back_to_back;
mod calibrate;
mod cpu_target;
pub(crate) mod frame_loss;
mod http;
mod lab;
pub(crate) mod latency;
pub(crate) mod mlrsearch;
mod overhead;
mod rfc2544;
mod run;
mod scenarios;
mod session;
mod stack;
mod stored;
mod tcp;
pub(crate) mod trial;

use crate::args::{Cli, Command};
use crate::exit::Outcome;
pub(crate) use rfc2544::write_json;
pub(crate) use session::show as show_step;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Runs `cli`'s command. `stop` is the interrupt: when it becomes true the
/// running trial stops, what was measured is saved, and a lab made for the
/// run is removed; the command then returns [`Outcome::Interrupted`].
pub fn run(cli: Cli, stop: &AtomicBool) -> crate::error::Result<Outcome> {
    match cli.command {
        Command::Lab { action } => lab::run(action),
        Command::Run { file, dry_run } => run::run(&file, dry_run, stop),
        Command::Rfc2544(args) => rfc2544::run(args, stop),
        Command::Trial(args) => trial::run(trial::TrialPlan::from_args(&args)?, stop),
        Command::Overhead(args) => overhead::run(args),
        Command::Latency(args) => latency::run(latency::LatencyPlan::from_args(&args)?, stop),
        Command::Calibrate(args) => calibrate::run(args, stop),
        Command::Loss(args) => frame_loss::run(frame_loss::LossPlan::from_args(&args)?, stop),
        Command::Mlrsearch(args) => {
            mlrsearch::run(mlrsearch::MlrsearchPlan::from_args(&args)?, stop)
        }
        Command::BackToBack(args) => {
            back_to_back::run(back_to_back::BackToBackPlan::from_args(&args)?, stop)
        }
        Command::Tcp(args) => tcp::run(args, stop),
        Command::Http(args) => http::run(args, stop),
        Command::CpuTarget(args) => cpu_target::run(args, stop),
        Command::Runs(args) => stored::runs(args),
        Command::Show(args) => stored::show(args),
        Command::Compare(args) => stored::compare(args),
        Command::Export(args) => stored::export(args),
        Command::Report(args) => stored::report(args),
    }
}

/// Checking a command without running it (`run FILE.toml` checks every test
/// before the first runs; `run --dry-run` only checks): while set, the
/// points where a command would first touch the machine (open ports, build
/// a lab, open the results database, print a result) stop it with
/// [`CheckedOnly`], so every value a command checks up front is checked,
/// and nothing else happens.
static CHECK_ONLY: AtomicBool = AtomicBool::new(false);

/// The stop of a command run by [`check`]: its arguments passed every check
/// that comes before the machine is touched.
#[derive(Debug)]
pub struct CheckedOnly;

impl std::fmt::Display for CheckedOnly {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("checked only")
    }
}

impl std::error::Error for CheckedOnly {}

/// Called where a command is about to touch the machine: an error when the
/// command is only being checked.
pub fn touch_machine() -> crate::error::Result<()> {
    if CHECK_ONLY.load(Ordering::Relaxed) {
        return Err(
            crate::error::Error::Value(Box::new(CheckedOnly)).with_kind(crate::error::Kind::Failed)
        );
    }
    Ok(())
}

/// Checks `cli`'s values as its command would before touching the machine,
/// without running it. A command with a plan is checked by making its
/// plan; the others run with every point where they would first touch the
/// machine stopping them ([`touch_machine`]). Commands that only read or
/// print stored data (lab, runs, show, compare, export, report) have
/// nothing more to check than their command line.
pub fn check(cli: Cli) -> crate::error::Result<()> {
    match cli.command {
        Command::Trial(args) => trial::TrialPlan::from_args(&args).map(drop),
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
        _ => check_by_running(cli),
    }
}

/// Runs `cli` until it would first touch the machine (see [`check`]).
fn check_by_running(cli: Cli) -> crate::error::Result<()> {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CHECK_ONLY.store(false, Ordering::Relaxed);
        }
    }
    CHECK_ONLY.store(true, Ordering::Relaxed);
    let _reset = Reset;
    match run(cli, &AtomicBool::new(false)) {
        Err(e) if e.root_cause().is::<CheckedOnly>() => Ok(()),
        Err(e) => Err(e),
        // Only reached by a command that never touches the machine.
        Ok(_) => Ok(()),
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
