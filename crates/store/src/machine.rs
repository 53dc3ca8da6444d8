//! The machine a run ran on, and whether a run's process is still alive.

use crate::model::Machine;

/// This machine: host name, kernel release, CPU model and count, read from /proc.
pub fn detect() -> Machine {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let cpuinfo = read("/proc/cpuinfo");
    let cpu_model = cpuinfo
        .lines()
        .find_map(|l| {
            let (key, value) = l.split_once(':')?;
            matches!(key.trim(), "model name" | "Model" | "cpu model")
                .then(|| value.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".to_string());
    Machine {
        hostname: read("/proc/sys/kernel/hostname"),
        kernel: read("/proc/sys/kernel/osrelease"),
        cpu_model,
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
    }
}

/// When process `pid` started, in clock ticks after boot (/proc/PID/stat
/// field 22): with the pid it names one process even after pids wrap.
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and ')': skip past the last ')'.
    let after_name = &stat[stat.rfind(')')? + 1..];
    // Fields from 3 on; field 22 is the 20th of them.
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the process that wrote a `running` run still runs. A run from
/// another host cannot be checked and is taken as running.
pub fn still_running(pid: u32, start_ticks: Option<u64>, hostname: &str) -> bool {
    if hostname != detect().hostname {
        return true;
    }
    match (process_start_ticks(pid), start_ticks) {
        (None, _) => false,
        (Some(now), Some(then)) => now == then,
        (Some(_), None) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_runs_and_a_stale_start_time_does_not() {
        let me = std::process::id();
        let ticks = process_start_ticks(me).expect("own /proc/PID/stat");
        let host = detect().hostname;
        assert!(still_running(me, Some(ticks), &host));
        assert!(!still_running(me, Some(ticks + 1), &host), "pid reused");
        assert!(!still_running(u32::MAX - 1, None, &host));
    }

    #[test]
    fn machine_is_described() {
        let m = detect();
        assert!(!m.kernel.is_empty());
        assert!(m.cpus >= 1);
    }
}
