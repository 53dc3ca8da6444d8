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

/// Runs `work(k, item)` for every item on a scoped thread of its own,
/// thread k pinned to `cpus[k % cpus.len()]` (shared round-robin when
/// there are fewer CPUs than items; anywhere for an empty list): the
/// generator threads of `--tx-threads`. Their results in order; a thread
/// that panicked is an error.
pub(crate) fn on_pinned_threads<I, T, F>(
    items: I,
    cpus: &[usize],
    work: F,
) -> Result<Vec<T>, crate::EngineError>
where
    I: IntoIterator,
    I::Item: Send,
    T: Send,
    F: Fn(usize, I::Item) -> Result<T, crate::EngineError> + Sync,
{
    std::thread::scope(|scope| {
        let work = &work;
        let handles: Vec<_> = items
            .into_iter()
            .enumerate()
            .map(|(k, item)| {
                let cpu = (!cpus.is_empty()).then(|| cpus[k % cpus.len()]);
                scope.spawn(move || {
                    if let Some(cpu) = cpu {
                        let _ = pin_current_thread(&[cpu]);
                    }
                    work(k, item)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(crate::EngineError::Thread(
                        "a generator thread panicked".into(),
                    ))
                })
            })
            .collect()
    })
}
