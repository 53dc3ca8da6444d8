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
mod scenarios;
pub mod session;
pub mod stack;
pub mod stored;
pub mod tcp;
pub mod trial;

pub(crate) use rfc2544::write_json;
pub(crate) use session::show as show_step;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

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
