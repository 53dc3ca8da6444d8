//! The per-CPU input backlog that plays the tester ports' NIC rings.
//!
//! A deep lab (see `placement.rs`) hands every frame the DUT sends to a
//! tester port to the tester CPU's backlog (RPS); the DUT's input has a
//! queue of its own (linerate-bpf `nic_queue`). The backlog's depth is the kernel's `net.core.netdev_max_backlog`, one value for
//! the whole machine: no per-device or per-namespace setting exists. So
//! the lab raises it to its ring depth, keeps the value it found in a file
//! under /run/linerate, and the removal of the last lab (however the run
//! that made it ended: `lab down`, a run's own cleanup, or the sweep of a
//! killed run's lab) writes that value back. `lab status` says when it is
//! changed.

use std::path::PathBuf;

const SYSCTL: &str = "/proc/sys/net/core/netdev_max_backlog";

/// The value found before the first lab changed it.
fn saved_path() -> PathBuf {
    PathBuf::from(linerate_helper::RUN_DIR).join("netdev_max_backlog.orig")
}

/// The backlog depth now.
pub fn current() -> Option<u32> {
    std::fs::read_to_string(SYSCTL).ok()?.trim().parse().ok()
}

/// The value a lab changed, when one did: (found before, now).
pub fn changed() -> Option<(u32, u32)> {
    let saved: u32 = std::fs::read_to_string(saved_path())
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some((saved, current()?))
}

/// Sets the backlog to `depth` frames, first keeping the value found (once:
/// a second lab keeps the first one's record). Err is a reason for a note.
pub(crate) fn set(depth: u32) -> Result<(), String> {
    let now = current().ok_or_else(|| format!("{SYSCTL} cannot be read"))?;
    if now == depth {
        return Ok(());
    }
    linerate_helper::run_dir().map_err(|e| e.to_string())?;
    let saved = saved_path();
    if !saved.exists() {
        std::fs::write(&saved, format!("{now}\n"))
            .map_err(|e| format!("{} cannot be written: {e}", saved.display()))?;
    }
    std::fs::write(SYSCTL, format!("{depth}\n"))
        .map_err(|e| format!("{SYSCTL} cannot be set to {depth}: {e}"))?;
    match current() {
        Some(v) if v == depth => Ok(()),
        v => Err(format!("{SYSCTL} reads {v:?} after writing {depth}")),
    }
}

/// Writes the value found before the first lab back, when no lab is left.
pub(crate) fn restore_unless(labs_left: bool) {
    if labs_left {
        return;
    }
    let path = saved_path();
    let Ok(text) = std::fs::read_to_string(&path) else {
        return;
    };
    if let Ok(value) = text.trim().parse::<u32>() {
        if std::fs::write(SYSCTL, format!("{value}\n")).is_ok() {
            let _ = std::fs::remove_file(&path);
        }
    }
}
