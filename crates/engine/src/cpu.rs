//! Pinning tester threads to the CPUs set aside for the tester.

use nix::sched::{sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// Pins the calling thread to `cpus`; does nothing for an empty list.
/// Failure to pin only costs precision, so it is reported, not fatal.
pub fn pin_current_thread(cpus: &[usize]) -> Result<(), String> {
    if cpus.is_empty() {
        return Ok(());
    }
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(|e| format!("CPU {cpu}: {e}"))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| format!("pinning to CPUs {cpus:?}: {e}"))
}
