//! The tester's own ceiling, measured by `linerate calibrate` back to back
//! (tester port to tester port, no DUT) and stored in a JSON file. Later
//! results within [`CEILING_MARGIN`] of the ceiling for their engine, frame
//! size and set-up are flagged `tester_limited`: at that rate the tester,
//! not the device, may be what stopped the search.

use crate::LatencySummary;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// A throughput at or above (1 - margin) x the calibrated ceiling is
/// flagged as tester-limited.
pub const CEILING_MARGIN: f64 = 0.05;

/// One calibrated ceiling.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CalibrationEntry {
    /// "lab" (the lab's tester ports), or "ports A->B" for named interfaces.
    pub setup: String,
    pub engine: String,
    /// How port B counted ([`TrialResult::receiver`](crate::TrialResult)):
    /// "kernel" or "socket"; empty in files older than this field, which
    /// then stand for either.
    #[serde(default)]
    pub receiver: String,
    pub frame_size: u16,
    /// Highest rate forwarded back to back with zero loss and exact counts.
    pub ceiling_fps: f64,
    /// The tester's own latency at that rate (nothing between the ports).
    pub latency_ns: Option<LatencySummary>,
    /// Seconds since the Unix epoch.
    pub measured_at: u64,
    pub linerate_version: String,
}

/// All calibrated ceilings of one machine.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    pub entries: Vec<CalibrationEntry>,
}

#[derive(Debug, thiserror::Error)]
pub enum CalibrationError {
    #[error("reading calibration file {path}: {source}; run 'linerate calibrate' again or pass another --calibration")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("calibration file {path} is not valid ({source}); delete it and run 'linerate calibrate' again")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("writing calibration file {path}: {source}; pass a writable --calibration path")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl Calibration {
    /// Reads `path`; a missing file is an empty calibration.
    pub fn load(path: &Path) -> Result<Calibration, CalibrationError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|source| CalibrationError::Parse {
                path: path.to_path_buf(),
                source,
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Calibration::default()),
            Err(source) => Err(CalibrationError::Read {
                path: path.to_path_buf(),
                source,
            }),
        }
    }

    /// Writes `path` (and its directory), replacing it atomically.
    pub fn save(&self, path: &Path) -> Result<(), CalibrationError> {
        let err = |source| CalibrationError::Write {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(err)?;
        }
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).expect("calibration serializes");
        std::fs::write(&tmp, text).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }

    /// Adds `entry`, replacing an older one for the same set-up, engine,
    /// receiver and size.
    pub fn record(&mut self, entry: CalibrationEntry) {
        let key = |e: &CalibrationEntry| {
            (
                e.setup.clone(),
                e.engine.clone(),
                e.receiver.clone(),
                e.frame_size,
            )
        };
        self.entries.retain(|e| key(e) != key(&entry));
        self.entries.push(entry);
    }

    /// The ceiling for a set-up, engine, receiver and size; an entry from
    /// before receivers were recorded serves when none matches exactly.
    pub fn ceiling(
        &self,
        setup: &str,
        engine: &str,
        receiver: &str,
        frame_size: u16,
    ) -> Option<&CalibrationEntry> {
        let of = |e: &&CalibrationEntry| {
            e.setup == setup && e.engine == engine && e.frame_size == frame_size
        };
        let mut candidates = self.entries.iter().filter(of);
        candidates
            .clone()
            .find(|e| e.receiver == receiver)
            .or_else(|| candidates.find(|e| e.receiver.is_empty()))
    }
}

/// True when `throughput_fps` is within the margin of `ceiling_fps`.
pub fn near_ceiling(throughput_fps: f64, ceiling_fps: f64) -> bool {
    ceiling_fps > 0.0 && throughput_fps >= (1.0 - CEILING_MARGIN) * ceiling_fps
}

/// Where calibrations live unless `--calibration` says otherwise:
/// `$XDG_DATA_HOME/linerate/calibration.json`, else
/// `~/.local/share/linerate/calibration.json`.
pub fn default_path() -> PathBuf {
    let base = std::env::var_os("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("/var/lib"));
    base.join("linerate").join("calibration.json")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(engine: &str, size: u16, fps: f64) -> CalibrationEntry {
        CalibrationEntry {
            setup: "lab".into(),
            engine: engine.into(),
            receiver: "kernel".into(),
            frame_size: size,
            ceiling_fps: fps,
            latency_ns: None,
            measured_at: 0,
            linerate_version: "t".into(),
        }
    }

    #[test]
    fn newer_entries_replace_older_ones_and_round_trip() {
        let dir = std::env::temp_dir().join(format!("lr-cal-{}", std::process::id()));
        let path = dir.join("c.json");
        let mut c = Calibration::load(&path).unwrap();
        assert!(
            c.entries.is_empty(),
            "a missing file is an empty calibration"
        );
        c.record(entry("xdp", 64, 1e6));
        c.record(entry("xdp", 64, 2e6));
        c.record(entry("af_packet", 64, 5e5));
        c.save(&path).unwrap();
        let back = Calibration::load(&path).unwrap();
        assert_eq!(back.entries.len(), 2);
        assert_eq!(
            back.ceiling("lab", "xdp", "kernel", 64)
                .unwrap()
                .ceiling_fps,
            2e6
        );
        assert!(back.ceiling("lab", "xdp", "kernel", 128).is_none());
        assert!(back.ceiling("lab", "xdp", "socket", 64).is_none());
        std::fs::write(&path, "not json").unwrap();
        assert!(matches!(
            Calibration::load(&path),
            Err(CalibrationError::Parse { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn receivers_are_kept_apart_and_old_entries_serve_either() {
        let mut c = Calibration::default();
        c.record(entry("af_xdp", 64, 1.8e6));
        c.record(CalibrationEntry {
            receiver: "socket".into(),
            ..entry("af_xdp", 64, 1.2e6)
        });
        assert_eq!(c.entries.len(), 2, "one per receiver");
        let fps = |c: &Calibration, r| c.ceiling("lab", "af_xdp", r, 64).map(|e| e.ceiling_fps);
        assert_eq!(fps(&c, "kernel"), Some(1.8e6));
        assert_eq!(fps(&c, "socket"), Some(1.2e6));
        // A file written before receivers were recorded.
        let old: Calibration = serde_json::from_str(
            r#"{"entries":[{"setup":"lab","engine":"af_xdp","frame_size":64,"ceiling_fps":1.0e6,
                "latency_ns":null,"measured_at":0,"linerate_version":"0.1.0"}]}"#,
        )
        .unwrap();
        assert_eq!(fps(&old, "kernel"), Some(1e6));
        assert_eq!(fps(&old, "socket"), Some(1e6));
    }

    #[test]
    fn five_percent_margin() {
        assert!(near_ceiling(950_000.0, 1_000_000.0));
        assert!(!near_ceiling(949_000.0, 1_000_000.0));
        assert!(!near_ceiling(10.0, 0.0));
    }
}
