//! Results that last: every run and trial kept in an embedded SQLite
//! database, and what is made from stored runs.
//!
//! - [`db`]: the database (WAL, migrations by `user_version`), written a
//!   trial at a time so a killed run loses nothing it finished;
//! - [`model`]: stored runs as read back, and the report rebuilt from them;
//! - [`export`]: JSON (versioned, `schema/run.schema.json`) and CSV;
//! - [`compare`]: runs side by side with differences in %;
//! - [`html`] and [`svg`]: the self-contained HTML report and its charts.

pub mod compare;
pub mod db;
mod escape;
pub mod export;
pub mod html;
mod html_tunnels;
pub mod machine;
pub mod model;
pub mod svg;
#[cfg(test)]
mod testdata;

pub use db::{NewRun, Store, StoreError};
pub use model::{Dut, Machine, RunStatus, RunSummary, StoredRun, StoredTrial};

use std::path::PathBuf;

/// Where results are stored unless `--db` says otherwise, beside the
/// calibration file: `$XDG_DATA_HOME/linerate/results.sqlite`, else
/// `~/.local/share/linerate/results.sqlite`.
pub fn default_path() -> PathBuf {
    linerate_results::calibration::default_path().with_file_name("results.sqlite")
}
