//! The SQLite database: one row per run, one per finished trial, one per
//! finished frame-size search.
//!
//! Each trial is committed the moment it ends, in WAL mode: a process killed
//! with SIGKILL loses nothing it had committed (SQLite's journal makes every
//! commit atomic). A run is `running` until its command marks it
//! `complete` or `interrupted`; a run still `running` whose process is gone
//! was killed, and is shown as incomplete.

use crate::model::{Dut, Machine, RunStatus, RunSummary, StoredRun, StoredTrial};
use linerate_results::{Rfc2544Report, ThroughputResult, TrialResult};
use rusqlite::{
    params, Connection, ErrorCode, OpenFlags, OptionalExtension, Transaction, TransactionBehavior,
};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The schema version this build writes (SQLite's `user_version`).
pub const SCHEMA_VERSION: i64 = 2;

/// How long a connection waits for another's lock (a run writing a trial,
/// or making the schema of a new file) before it gives up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Migrations, in order: `MIGRATIONS[n]` takes the database from version n to n + 1.
const MIGRATIONS: &[&str] = &[
    "
    CREATE TABLE runs (
        id INTEGER PRIMARY KEY,
        started_at TEXT NOT NULL,
        finished_at TEXT,
        command TEXT NOT NULL,
        args_json TEXT NOT NULL,
        status TEXT NOT NULL,
        pid INTEGER NOT NULL,
        pid_start_ticks INTEGER,
        dut_name TEXT,
        dut_firmware TEXT,
        scenario TEXT NOT NULL,
        hostname TEXT NOT NULL,
        kernel TEXT NOT NULL,
        cpu_model TEXT NOT NULL,
        cpus INTEGER NOT NULL,
        engine TEXT NOT NULL,
        linerate_version TEXT NOT NULL,
        line_speed_bps INTEGER NOT NULL,
        report_json TEXT
    );
    CREATE TABLE trials (
        id INTEGER PRIMARY KEY,
        run_id INTEGER NOT NULL REFERENCES runs(id),
        search_no INTEGER NOT NULL,
        trial_no INTEGER NOT NULL,
        frame_size INTEGER NOT NULL,
        intended_fps REAL NOT NULL,
        loss_ratio REAL NOT NULL,
        passed INTEGER,
        finished_at TEXT NOT NULL,
        result_json TEXT NOT NULL
    );
    CREATE INDEX trials_by_run ON trials(run_id, id);
    CREATE TABLE results (
        run_id INTEGER NOT NULL REFERENCES runs(id),
        search_no INTEGER NOT NULL,
        frame_size INTEGER NOT NULL,
        throughput_fps REAL NOT NULL,
        result_json TEXT NOT NULL,
        PRIMARY KEY (run_id, search_no)
    );
",
    "
    -- The command's own report as its --json writes it (latency, loss,
    -- mlrsearch, back-to-back, tcp, http): rewritten as the run goes on.
    ALTER TABLE runs ADD COLUMN document_json TEXT;
",
];

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("results database {path}: {source}; pass another --db FILE, or --no-db to run without storing")]
    Open {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A database a reading command (runs, show, ...) cannot read.
    #[error(
        "results database {path}: {source}; pass --db with a linerate results database to read"
    )]
    OpenToRead {
        path: PathBuf,
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("results database {path} has schema version {found}, newer than this linerate knows ({SCHEMA_VERSION}); use a newer linerate or another --db")]
    TooNew { path: PathBuf, found: i64 },
    #[error("results database: {0}")]
    Sql(#[from] rusqlite::Error),
    #[error("results database holds an unreadable record: {0}")]
    Json(#[from] serde_json::Error),
    #[error("no run {0} in the results database; 'linerate runs' lists them")]
    NoSuchRun(i64),
}

/// What a command says about a run when it starts.
#[derive(Debug, Clone)]
pub struct NewRun {
    /// The subcommand: "rfc2544", "trial", "latency", "tcp", ...
    pub command: String,
    /// The command line as given (argv).
    pub args: Vec<String>,
    pub dut: Dut,
    pub machine: Machine,
    pub engine: String,
    pub linerate_version: String,
    pub line_speed_bps: u64,
    /// For `rfc2544`: the report's settings (its results stay empty here;
    /// they are stored one by one as they are measured).
    pub report: Option<Rfc2544Report>,
}

/// An open results database.
pub struct Store {
    conn: Connection,
    path: PathBuf,
    /// The file's (device, inode) when opened: a database deleted or
    /// replaced while a run writes to it is noticed ([`Store::still_there`]).
    identity: Option<(u64, u64)>,
}

/// The (device, inode) of the file at `path`, if there is one.
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// `path` as an SQLite URI (`file:` with `?`, `#` and `%` escaped).
fn file_uri(path: &Path, query: &str) -> String {
    let mut uri = String::from("file:");
    for c in path.to_string_lossy().chars() {
        match c {
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            '%' => uri.push_str("%25"),
            c => uri.push(c),
        }
    }
    format!("{uri}?{query}")
}

impl Store {
    /// Opens (creating it and its directory if needed) and migrates `path`.
    pub fn open(path: &Path) -> Result<Store, StoreError> {
        let open_err = |source: Box<dyn std::error::Error + Send + Sync>| StoreError::Open {
            path: path.to_path_buf(),
            source,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| open_err(e.into()))?;
        }
        let conn = Connection::open(path).map_err(|e| open_err(e.into()))?;
        let store = Store {
            conn,
            path: path.to_path_buf(),
            identity: identity(path),
        };
        store.setup().map_err(|e| match e {
            StoreError::Sql(s) => open_err(s.into()),
            other => other,
        })?;
        store.fold_end_marks();
        Ok(store)
    }

    /// Opens an existing database for reading only: no write access is
    /// needed to the file or its directory (a read-only mount, another
    /// user's world-readable database, a full filesystem). When SQLite
    /// cannot open the WAL database so (its `-shm` file cannot be made),
    /// it is opened as immutable: read as it is on disk. A database of an
    /// older schema is opened as [`open`](Self::open) does, to migrate it.
    pub fn open_read_only(path: &Path) -> Result<Store, StoreError> {
        let open_err = |source: rusqlite::Error| StoreError::OpenToRead {
            path: path.to_path_buf(),
            source: source.into(),
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let try_open = |query: &str| -> rusqlite::Result<(Connection, i64)> {
            let conn = Connection::open_with_flags(file_uri(path, query), flags)?;
            conn.busy_timeout(BUSY_TIMEOUT)?;
            let version = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
            Ok((conn, version))
        };
        let (conn, version) = try_open("mode=ro")
            .or_else(|_| try_open("mode=ro&immutable=1"))
            .map_err(open_err)?;
        if version < SCHEMA_VERSION {
            return Store::open(path);
        }
        let store = Store {
            conn,
            path: path.to_path_buf(),
            identity: identity(path),
        };
        store.schema_version()?;
        Ok(store)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the file opened is still at its path: false once it was
    /// deleted or replaced (what is written then is lost).
    pub fn still_there(&self) -> bool {
        self.identity.is_some() && identity(&self.path) == self.identity
    }

    fn setup(&self) -> Result<(), StoreError> {
        // Another linerate may be writing (two runs at once): wait for it.
        // Every lock below (the switch to WAL, the migration's write lock,
        // each insert) waits up to this long instead of failing at once.
        self.conn.busy_timeout(BUSY_TIMEOUT)?;
        self.use_wal()?;
        // NORMAL is durable against a killed process (not against power loss).
        self.conn.pragma_update(None, "synchronous", "NORMAL")?;
        self.conn.pragma_update(None, "foreign_keys", true)?;
        // Up to date already (every open but a database's first): no write
        // lock, so `linerate runs` never waits for a run that is writing.
        if self.schema_version()? == SCHEMA_VERSION {
            return Ok(());
        }
        self.migrate()
    }

    /// WAL: a commit is one append, readers never block the writer, and a
    /// killed process leaves every committed trial readable.
    ///
    /// The switch needs the file to itself, and while another connection
    /// holds it (its own switch, or its migration) SQLite can refuse it at
    /// once ("database is locked") without calling the busy handler: the
    /// test of runs starting together saw that in about one round of 30.
    /// So it is retried here, for as long as the busy timeout.
    fn use_wal(&self) -> Result<(), StoreError> {
        let deadline = Instant::now() + BUSY_TIMEOUT;
        loop {
            match self
                .conn
                .query_row("PRAGMA journal_mode=WAL", [], |r| r.get::<_, String>(0))
            {
                Ok(_) => return Ok(()),
                Err(e)
                    if e.sqlite_error_code() == Some(ErrorCode::DatabaseBusy)
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(2))
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    fn schema_version(&self) -> Result<i64, StoreError> {
        let version: i64 = self
            .conn
            .pragma_query_value(None, "user_version", |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: self.path.clone(),
                found: version,
            });
        }
        Ok(version)
    }

    /// Brings the schema up to date in one `BEGIN IMMEDIATE` transaction:
    /// it takes the write lock before reading the version, so of several
    /// processes opening a new file at once one migrates and the others
    /// wait (busy timeout), then read the new version and migrate nothing.
    /// A deferred transaction read the version first, and the second
    /// opener then re-ran the first migration: "table runs already exists".
    fn migrate(&self) -> Result<(), StoreError> {
        let tx = Transaction::new_unchecked(&self.conn, TransactionBehavior::Immediate)?;
        let version = self.schema_version()?;
        for (n, sql) in MIGRATIONS.iter().enumerate().skip(version as usize) {
            tx.execute_batch(sql)?;
            tx.pragma_update(None, "user_version", n as i64 + 1)?;
        }
        tx.commit()?;
        Ok(())
    }

    /// Records the start of a run; returns its id.
    pub fn begin_run(&self, run: &NewRun, started_at: &str) -> Result<i64, StoreError> {
        let report = run.report.as_ref().map(serde_json::to_string).transpose()?;
        self.conn.execute(
            "INSERT INTO runs (started_at, command, args_json, status, pid, pid_start_ticks,
                dut_name, dut_firmware, scenario, hostname, kernel, cpu_model, cpus, engine,
                linerate_version, line_speed_bps, report_json)
             VALUES (?1, ?2, ?3, 'running', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            params![
                started_at,
                run.command,
                serde_json::to_string(&run.args)?,
                std::process::id(),
                crate::machine::process_start_ticks(std::process::id()),
                run.dut.name,
                run.dut.firmware,
                run.dut.scenario,
                run.machine.hostname,
                run.machine.kernel,
                run.machine.cpu_model,
                run.machine.cpus,
                run.engine,
                run.linerate_version,
                run.line_speed_bps as i64,
                report,
            ],
        )?;
        Ok(self.conn.last_insert_rowid())
    }

    /// Stores a finished trial (committed before this returns).
    pub fn add_trial(
        &self,
        run_id: i64,
        search_no: usize,
        trial_no: usize,
        trial: &TrialResult,
        passed: Option<bool>,
        finished_at: &str,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "INSERT INTO trials (run_id, search_no, trial_no, frame_size, intended_fps, loss_ratio,
                passed, finished_at, result_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            params![
                run_id,
                search_no as i64,
                trial_no as i64,
                trial.frame_size,
                trial.intended_fps,
                trial.loss_ratio,
                passed,
                finished_at,
                serde_json::to_string(trial)?,
            ],
        )?;
        Ok(())
    }

    /// Stores the result of a finished frame-size search. Its trials are
    /// already stored one by one, so the copy kept here has none.
    pub fn add_result(
        &self,
        run_id: i64,
        search_no: usize,
        result: &ThroughputResult,
    ) -> Result<(), StoreError> {
        let mut without_trials = result.clone();
        without_trials.trials.clear();
        self.conn.execute(
            "INSERT OR REPLACE INTO results (run_id, search_no, frame_size, throughput_fps, result_json)
             VALUES (?1, ?2, ?3, ?4, ?5)",
            params![
                run_id,
                search_no as i64,
                result.frame_size,
                result.throughput_fps,
                serde_json::to_string(&without_trials)?,
            ],
        )?;
        Ok(())
    }

    /// Stores the command's report as it stands (replacing the last one).
    pub fn set_document(
        &self,
        run_id: i64,
        document: &serde_json::Value,
    ) -> Result<(), StoreError> {
        self.conn.execute(
            "UPDATE runs SET document_json = ?2 WHERE id = ?1",
            params![run_id, serde_json::to_string(document)?],
        )?;
        Ok(())
    }

    /// Marks the run complete or interrupted. When the database will not
    /// take it (a full disk: every write needs a new page), the end is
    /// recorded beside it in an empty file whose name says it (see
    /// [`EndMark`]): an empty file needs no data block, so it can be made
    /// on a full filesystem, and readers then tell a run that ended from
    /// one whose process died. The error is returned either way.
    pub fn finish_run(
        &self,
        run_id: i64,
        status: RunStatus,
        finished_at: &str,
    ) -> Result<(), StoreError> {
        let updated = self.conn.execute(
            "UPDATE runs SET status = ?2, finished_at = ?3 WHERE id = ?1",
            params![run_id, status.as_str(), finished_at],
        );
        if let Err(e) = updated {
            let mark = EndMark {
                run_id,
                status,
                finished_at: finished_at.to_string(),
            };
            let _ = std::fs::File::create(mark.path(&self.path));
            return Err(e.into());
        }
        Ok(())
    }

    /// Whether run `run_id`'s end is on record: in the database (its
    /// status is no longer "running") or in an end mark beside it. False
    /// when neither could be written (a read-only remount, no inode left):
    /// readers will then take the run for one whose process died.
    pub fn end_recorded(&self, run_id: i64) -> bool {
        let status: Option<String> = self
            .conn
            .query_row(
                "SELECT status FROM runs WHERE id = ?1",
                params![run_id],
                |r| r.get(0),
            )
            .ok();
        status.is_some_and(|s| s != "running")
            || EndMark::beside(&self.path)
                .iter()
                .any(|(_, m)| m.run_id == run_id)
    }

    /// Writes into the database the ends recorded beside it
    /// ([`finish_run`](Self::finish_run)) and removes their files; one it
    /// cannot write (the disk still full) stays for the next time.
    fn fold_end_marks(&self) {
        for (file, mark) in EndMark::beside(&self.path) {
            let written = self.conn.execute(
                "UPDATE runs SET status = ?2, finished_at = ?3 WHERE id = ?1 AND status = 'running'",
                params![mark.run_id, mark.status.as_str(), mark.finished_at],
            );
            if written.is_ok() {
                let _ = std::fs::remove_file(file);
            }
        }
    }

    /// Every run, oldest first, with a one-line summary of its results.
    pub fn runs(&self) -> Result<Vec<RunSummary>, StoreError> {
        let ids: Vec<i64> = self
            .conn
            .prepare("SELECT id FROM runs ORDER BY id")?
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        ids.into_iter()
            .map(|id| self.load(id).map(|r| r.summary()))
            .collect()
    }

    /// The id of the newest run (for `show last`).
    pub fn last_run(&self) -> Result<Option<i64>, StoreError> {
        Ok(self
            .conn
            .query_row("SELECT max(id) FROM runs", [], |r| r.get(0))
            .optional()?
            .flatten())
    }

    /// Everything stored about run `id`.
    pub fn load(&self, id: i64) -> Result<StoredRun, StoreError> {
        let row = self
            .conn
            .query_row(
                "SELECT started_at, finished_at, command, args_json, status, pid, pid_start_ticks,
                    dut_name, dut_firmware, scenario, hostname, kernel, cpu_model, cpus, engine,
                    linerate_version, line_speed_bps, report_json, document_json
                 FROM runs WHERE id = ?1",
                [id],
                |r| {
                    Ok(RunRow {
                        started_at: r.get(0)?,
                        finished_at: r.get(1)?,
                        command: r.get(2)?,
                        args_json: r.get(3)?,
                        status: r.get(4)?,
                        pid: r.get(5)?,
                        pid_start_ticks: r.get(6)?,
                        dut: Dut {
                            name: r.get(7)?,
                            firmware: r.get(8)?,
                            scenario: r.get(9)?,
                        },
                        machine: Machine {
                            hostname: r.get(10)?,
                            kernel: r.get(11)?,
                            cpu_model: r.get(12)?,
                            cpus: r.get(13)?,
                        },
                        engine: r.get(14)?,
                        linerate_version: r.get(15)?,
                        line_speed_bps: r.get(16)?,
                        report_json: r.get(17)?,
                        document_json: r.get(18)?,
                    })
                },
            )
            .optional()?
            .ok_or(StoreError::NoSuchRun(id))?;

        let trials = self
            .conn
            .prepare(
                "SELECT search_no, trial_no, passed, finished_at, result_json
                 FROM trials WHERE run_id = ?1 ORDER BY id",
            )?
            .query_map([id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, Option<bool>>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, String>(4)?,
                ))
            })?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .map(|(search_no, trial_no, passed, finished_at, json)| {
                Ok(StoredTrial {
                    search_no: search_no as usize,
                    trial_no: trial_no as usize,
                    passed,
                    finished_at,
                    result: serde_json::from_str(&json)?,
                })
            })
            .collect::<Result<Vec<_>, StoreError>>()?;
        let results = self
            .conn
            .prepare(
                "SELECT search_no, result_json FROM results WHERE run_id = ?1 ORDER BY search_no",
            )?
            .query_map([id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?)))?
            .collect::<Result<Vec<_>, _>>()?
            .into_iter()
            .map(|(n, json)| Ok((n as usize, serde_json::from_str(&json)?)))
            .collect::<Result<Vec<(usize, ThroughputResult)>, StoreError>>()?;

        let mut finished_at = row.finished_at;
        let status = match row.status.as_str() {
            "running"
                if !crate::machine::still_running(
                    row.pid,
                    row.pid_start_ticks,
                    &row.machine.hostname,
                ) =>
            {
                // Ended with the database full, or died.
                match EndMark::beside(&self.path)
                    .into_iter()
                    .find(|(_, m)| m.run_id == id)
                {
                    Some((_, mark)) => {
                        finished_at = Some(mark.finished_at);
                        mark.status
                    }
                    None => RunStatus::Died,
                }
            }
            other => RunStatus::parse(other),
        };
        let settings = row
            .report_json
            .as_deref()
            .map(serde_json::from_str::<Rfc2544Report>)
            .transpose()?;
        Ok(StoredRun {
            id,
            started_at: row.started_at,
            finished_at,
            command: row.command,
            args: serde_json::from_str(&row.args_json)?,
            status,
            pid: row.pid,
            dut: row.dut,
            machine: row.machine,
            engine: row.engine,
            linerate_version: row.linerate_version,
            line_speed_bps: row.line_speed_bps as u64,
            settings,
            results,
            trials,
            document: row
                .document_json
                .as_deref()
                .map(serde_json::from_str)
                .transpose()?,
        })
    }
}

/// A run's end that the database did not take, kept beside it as an
/// empty file named `DB.runID.STATUS.FINISHED_AT` (e.g.
/// `results.sqlite.run3.interrupted.2026-11-26T09:40:00.123Z`).
#[derive(Debug, Clone, PartialEq)]
struct EndMark {
    run_id: i64,
    status: RunStatus,
    finished_at: String,
}

impl EndMark {
    fn path(&self, db: &Path) -> PathBuf {
        let mut name = db.file_name().unwrap_or_default().to_os_string();
        name.push(format!(
            ".run{}.{}.{}",
            self.run_id,
            self.status.as_str(),
            self.finished_at
        ));
        db.with_file_name(name)
    }

    /// The marks beside database `db`, with their files.
    fn beside(db: &Path) -> Vec<(PathBuf, EndMark)> {
        let (Some(name), Some(dir)) = (db.file_name().and_then(|n| n.to_str()), db.parent()) else {
            return Vec::new();
        };
        let dir = if dir.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir
        };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let prefix = format!("{name}.run");
        entries
            .flatten()
            .filter_map(|e| {
                let file = e.file_name();
                let rest = file.to_str()?.strip_prefix(&prefix)?;
                let mut parts = rest.splitn(3, '.');
                let run_id = parts.next()?.parse().ok()?;
                let status = match parts.next()? {
                    "complete" => RunStatus::Complete,
                    "interrupted" => RunStatus::Interrupted,
                    _ => return None,
                };
                let finished_at = parts.next()?.to_string();
                Some((
                    e.path(),
                    EndMark {
                        run_id,
                        status,
                        finished_at,
                    },
                ))
            })
            .collect()
    }
}

/// A `runs` row as read, before it is checked and assembled.
struct RunRow {
    started_at: String,
    finished_at: Option<String>,
    command: String,
    args_json: String,
    status: String,
    pid: u32,
    pid_start_ticks: Option<u64>,
    dut: Dut,
    machine: Machine,
    engine: String,
    linerate_version: String,
    line_speed_bps: i64,
    report_json: Option<String>,
    document_json: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_db(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("lr-store-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir.join("sub").join("results.sqlite")
    }

    fn new_run(from: &StoredRun) -> NewRun {
        NewRun {
            command: from.command.clone(),
            args: from.args.clone(),
            dut: from.dut.clone(),
            machine: crate::machine::detect(),
            engine: from.engine.clone(),
            linerate_version: from.linerate_version.clone(),
            line_speed_bps: from.line_speed_bps,
            report: from.settings.clone(),
        }
    }

    #[test]
    fn a_run_round_trips_trial_by_trial() {
        let path = temp_db("rt");
        let made = crate::testdata::run(1, "dut", "fw");
        let store = Store::open(&path).unwrap();
        let id = store.begin_run(&new_run(&made), &made.started_at).unwrap();
        assert_eq!(store.load(id).unwrap().status, RunStatus::Running);
        for t in &made.trials {
            store
                .add_trial(
                    id,
                    t.search_no,
                    t.trial_no,
                    &t.result,
                    t.passed,
                    &t.finished_at,
                )
                .unwrap();
        }
        store.add_result(id, 0, &made.results[0].1).unwrap();
        // Read by a second connection, as `linerate runs` would while it runs.
        let back = Store::open(&path).unwrap().load(id).unwrap();
        assert_eq!(back.trials, made.trials);
        let rep = back.report().unwrap();
        assert_eq!(rep.results.len(), 1);
        assert_eq!(rep.results[0].trials.len(), 3);
        let unfinished = rep.interrupted.expect("the 1518 search has no result");
        assert_eq!((unfinished.frame_size, unfinished.trials.len()), (1518, 3));

        store.add_result(id, 1, &made.results[1].1).unwrap();
        store
            .finish_run(id, RunStatus::Complete, "2026-11-21T12:02:00Z")
            .unwrap();
        let done = store.load(id).unwrap();
        assert_eq!(done.status, RunStatus::Complete);
        assert!(done.report().unwrap().interrupted.is_none());
        assert_eq!(store.runs().unwrap().len(), 1);
        assert_eq!(store.last_run().unwrap(), Some(id));
        assert!(matches!(store.load(99), Err(StoreError::NoSuchRun(99))));
        std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
    }

    #[test]
    fn a_command_s_report_is_stored_and_replaced_as_the_run_goes_on() {
        let path = temp_db("doc");
        let mut made = crate::testdata::run(1, "dut", "fw");
        made.command = "tcp".into();
        made.settings = None;
        let store = Store::open(&path).unwrap();
        let id = store.begin_run(&new_run(&made), &made.started_at).unwrap();
        assert_eq!(store.load(id).unwrap().document, None);
        store
            .set_document(id, &serde_json::json!({"runs": [1]}))
            .unwrap();
        store
            .set_document(id, &serde_json::json!({"runs": [1, 2]}))
            .unwrap();
        let back = Store::open(&path).unwrap().load(id).unwrap();
        assert_eq!(back.document, Some(serde_json::json!({"runs": [1, 2]})));
        assert_eq!(crate::export::to_json(&back)["document"]["runs"][1], 2);
        std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
    }

    #[test]
    fn a_database_of_the_first_schema_gains_the_document_column() {
        let path = temp_db("v1");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        {
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
        }
        let made = crate::testdata::run(1, "dut", "fw");
        let store = Store::open(&path).unwrap();
        let id = store.begin_run(&new_run(&made), &made.started_at).unwrap();
        store.set_document(id, &serde_json::json!({})).unwrap();
        assert_eq!(
            store.load(id).unwrap().document,
            Some(serde_json::json!({}))
        );
        std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
    }

    #[test]
    fn a_run_left_running_by_a_dead_process_is_incomplete() {
        let path = temp_db("dead");
        let made = crate::testdata::run(1, "dut", "fw");
        let store = Store::open(&path).unwrap();
        let id = store.begin_run(&new_run(&made), &made.started_at).unwrap();
        // As if another process had written it and died: no such start time.
        store
            .conn
            .execute(
                "UPDATE runs SET pid_start_ticks = pid_start_ticks + 1 WHERE id = ?1",
                [id],
            )
            .unwrap();
        assert_eq!(store.load(id).unwrap().status, RunStatus::Died);
        assert_eq!(
            store.runs().unwrap()[0].status.label(),
            "incomplete (process died)"
        );
        std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
    }

    /// The disk full at the run's end too: the database takes no write,
    /// so the end is recorded beside it. Readers then say how the run
    /// ended, not "process died"; the next writer moves it into the
    /// database and removes the file.
    #[test]
    fn a_run_whose_end_the_database_did_not_take_is_not_died() {
        let path = temp_db("endmark");
        let made = crate::testdata::run(1, "dut", "fw");
        let store = Store::open(&path).unwrap();
        let id = store.begin_run(&new_run(&made), &made.started_at).unwrap();
        // Its process gone (as in the test above), and no write taken.
        store
            .conn
            .execute(
                "UPDATE runs SET pid_start_ticks = pid_start_ticks + 1 WHERE id = ?1",
                [id],
            )
            .unwrap();
        store.conn.pragma_update(None, "query_only", true).unwrap();
        let end = "2026-11-26T09:40:00.123Z";
        assert!(store.finish_run(id, RunStatus::Interrupted, end).is_err());
        let marks = EndMark::beside(&path);
        assert_eq!(marks.len(), 1, "{marks:?}");
        assert_eq!(std::fs::metadata(&marks[0].0).unwrap().len(), 0);
        // A reader, read-only: interrupted, when it ended.
        let reader = Store::open_read_only(&path).unwrap();
        let run = reader.load(id).unwrap();
        assert_eq!(run.status, RunStatus::Interrupted);
        assert_eq!(run.finished_at.as_deref(), Some(end));
        assert_eq!(
            reader.runs().unwrap()[0].status.label(),
            "incomplete (interrupted)"
        );
        assert_eq!(EndMark::beside(&path).len(), 1, "a reader writes nothing");
        drop((store, reader));
        // The next writer takes it in.
        let writer = Store::open(&path).unwrap();
        assert!(EndMark::beside(&path).is_empty());
        let back: String = writer
            .conn
            .query_row("SELECT status FROM runs WHERE id = ?1", [id], |r| r.get(0))
            .unwrap();
        assert_eq!(back, "interrupted");
        assert_eq!(writer.load(id).unwrap().finished_at.as_deref(), Some(end));
        // Without a mark, a dead process's run is still "process died".
        let other = writer.begin_run(&new_run(&made), &made.started_at).unwrap();
        writer
            .conn
            .execute(
                "UPDATE runs SET pid_start_ticks = pid_start_ticks + 1 WHERE id = ?1",
                [other],
            )
            .unwrap();
        assert_eq!(writer.load(other).unwrap().status, RunStatus::Died);
        std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
    }

    /// Several runs starting at once on a new database file (two
    /// `linerate rfc2544 --db FILE` started together): every one opens it,
    /// the schema is made once, and every run and trial is stored. Each
    /// round starts from a new file, where the races were: before the
    /// migrations ran under one `BEGIN IMMEDIATE` transaction a second
    /// opener failed with "table runs already exists" in the first round,
    /// and before the switch to WAL was retried one failed with "database
    /// is locked" in about half the runs of this test.
    #[test]
    fn runs_starting_together_on_a_new_file_are_all_stored() {
        const WRITERS: usize = 6;
        const ROUNDS: usize = 15;
        let made = crate::testdata::run(1, "dut", "fw");
        let run = new_run(&made);
        let dir = temp_db("race");
        for round in 0..ROUNDS {
            let path = dir.with_file_name(format!("round-{round}.sqlite"));
            let start = std::sync::Barrier::new(WRITERS);
            let outcomes: Vec<Result<i64, String>> = std::thread::scope(|s| {
                let writers: Vec<_> = (0..WRITERS)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            let store = Store::open(&path).map_err(|e| e.to_string())?;
                            let id = store
                                .begin_run(&run, &made.started_at)
                                .map_err(|e| e.to_string())?;
                            let t = &made.trials[0];
                            store
                                .add_trial(id, 0, 0, &t.result, t.passed, &t.finished_at)
                                .map_err(|e| e.to_string())?;
                            store
                                .finish_run(id, RunStatus::Complete, "2026-11-21T12:02:00Z")
                                .map_err(|e| e.to_string())?;
                            Ok(id)
                        })
                    })
                    .collect();
                writers.into_iter().map(|w| w.join().unwrap()).collect()
            });
            let mut ids: Vec<i64> = outcomes
                .into_iter()
                .map(|o| o.unwrap_or_else(|e| panic!("round {round}: {e}")))
                .collect();
            ids.sort_unstable();
            ids.dedup();
            assert_eq!(ids.len(), WRITERS, "round {round}: distinct run ids");
            let store = Store::open(&path).unwrap();
            let runs = store.runs().unwrap();
            assert_eq!(runs.len(), WRITERS, "round {round}: runs stored");
            for id in ids {
                let back = store.load(id).unwrap();
                assert_eq!(back.status, RunStatus::Complete);
                assert_eq!(back.trials.len(), 1);
            }
        }
        std::fs::remove_dir_all(dir.parent().unwrap().parent().unwrap()).unwrap();
    }

    #[test]
    fn a_newer_schema_is_refused_and_an_older_one_migrated() {
        let path = temp_db("ver");
        drop(Store::open(&path).unwrap());
        let conn = Connection::open(&path).unwrap();
        let v: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION);
        conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
            .unwrap();
        drop(conn);
        let err = Store::open(&path).err().expect("refused");
        assert!(
            err.to_string().contains("newer than this linerate"),
            "{err}"
        );
        std::fs::remove_dir_all(path.parent().unwrap().parent().unwrap()).unwrap();
    }
}
