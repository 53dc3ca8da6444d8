//! One module per command: each measuring command's typed plan and the
//! `run` that carries it out; `lab` and `stored` serve the commands that
//! manage labs and read stored runs.

pub mod back_to_back;
pub mod calibrate;
pub mod cpu_target;
pub mod frame_loss;
pub mod http;
pub mod lab;
pub mod latency;
pub mod mlrsearch;
pub mod overhead;
pub mod rfc2544;
pub mod scenarios;
pub mod stack;
pub mod stored;
pub mod tcp;
pub mod trial;
pub mod tunnels;

use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::Arc;

/// The signal that last asked the process to stop (0: none). Signals are
/// the process's, so this is too.
static STOPPED_BY: std::sync::OnceLock<Arc<AtomicUsize>> = std::sync::OnceLock::new();

/// A flag set by SIGINT, SIGTERM or SIGHUP (the terminal or the ssh
/// session closed), for [`run`]'s `stop`: the running trial stops, what was
/// measured is saved, and a lab made for the run is removed on the way out.
pub fn interrupt_flag() -> std::io::Result<Arc<AtomicBool>> {
    let flag = Arc::new(AtomicBool::new(false));
    let which = STOPPED_BY.get_or_init(|| Arc::new(AtomicUsize::new(0)));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register_usize(sig, which.clone(), sig as usize)?;
        signal_hook::flag::register(sig, flag.clone())?;
    }
    Ok(flag)
}

/// The exit code of a run a signal stopped: 128 + the signal, as a shell
/// reports a process the signal ended (130 for SIGINT, 129 for SIGHUP);
/// SIGTERM too gives 130, the code linerate has always used for "interrupted".
pub fn interrupted_exit_code() -> i32 {
    let sig = STOPPED_BY
        .get()
        .map_or(0, |s| s.load(std::sync::atomic::Ordering::Relaxed)) as i32;
    if sig == signal_hook::consts::SIGHUP {
        128 + sig
    } else {
        130
    }
}
