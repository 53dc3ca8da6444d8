//! The files a command writes (`--json`, `--db`, `--events`, `--pcap`,
//! `--calibration`, `--output`, `--html`), checked together before the
//! first frame, before any lab is built and before anything is written:
//! each must be a file that can be written where it is named (not a
//! directory, in a directory that exists), and no two may be the same file
//! (one would silently overwrite the other), nor a file the command reads.
//! A failed check is one line naming the option and the fix (exit 2).

use crate::error::{bail, Result, ResultExt};
use crate::recorder::plan::RecordPlan;
use linerate_results::calibration::{self, Calibration};
use linerate_results::report;
use nix::unistd::AccessFlags;
use std::os::unix::fs::{FileTypeExt, MetadataExt};
use std::path::{Path, PathBuf};

/// How a file is written, which decides what may stand at its path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Written whole to a temporary file beside it and renamed over it
    /// (`--json`, `--calibration`, exports): a reader never sees half a
    /// file. Renaming over a device or a pipe would replace it, so only a
    /// regular file (or nothing) may be there.
    Replaced,
    /// The SQLite results database: a regular file, with its journal
    /// beside it.
    Database,
    /// Opened and written as it goes (`--events`, `--pcap`): a pipe or a
    /// device (`/dev/stdout`) is fine too.
    Stream,
}

struct Output {
    /// The option as the user spells it, e.g. `--json`.
    option: String,
    path: PathBuf,
    kind: Kind,
    /// The directory is created when missing (the default results
    /// database and calibration file, under ~/.local/share/linerate).
    creates_dir: bool,
}

/// The outputs (and the inputs they must not overwrite) of one command.
#[derive(Default)]
pub struct Outputs {
    outputs: Vec<Output>,
    inputs: Vec<(String, PathBuf)>,
    /// The outputs of a run that measures ([`record`](Self::record)),
    /// which needs root: said before any file's problem, since a user
    /// who is not root cannot write root's files either.
    measuring: bool,
}

impl Outputs {
    pub fn new() -> Outputs {
        Outputs::default()
    }

    /// A file the command writes, if the option was given.
    pub fn file(mut self, option: &str, path: Option<&Path>, kind: Kind) -> Outputs {
        if let Some(path) = path {
            self.outputs.push(Output {
                option: option.to_string(),
                path: path.to_path_buf(),
                kind,
                creates_dir: false,
            });
        }
        self
    }

    /// A file at a default place whose directory the command creates.
    pub fn default_file(mut self, option: &str, path: PathBuf, kind: Kind) -> Outputs {
        self.outputs.push(Output {
            option: option.to_string(),
            path,
            kind,
            creates_dir: true,
        });
        self
    }

    /// `--json FILE`, if given.
    pub fn json(self, path: Option<&Path>) -> Outputs {
        self.file("--json", path, Kind::Replaced)
    }

    /// What the record options write: the results database (the default
    /// one unless `--no-db`), `--events` (unless `-`, stdout), `--pcap`.
    pub fn record(mut self, r: &RecordPlan) -> Outputs {
        self.measuring = true;
        let mut me = match (&r.db, r.no_db) {
            (_, true) => self,
            (Some(db), false) => self.file("--db", Some(db), Kind::Database),
            (None, false) => self.default_file(
                "--db (default)",
                linerate_store::default_path(),
                Kind::Database,
            ),
        };
        if let Some(events) = r.events.as_deref().filter(|e| *e != "-") {
            me = me.file("--events", Some(Path::new(events)), Kind::Stream);
        }
        me.file("--pcap", r.pcap.as_deref(), Kind::Stream)
    }

    /// A file the command reads, which no output may overwrite.
    pub fn input(mut self, option: &str, path: Option<&Path>) -> Outputs {
        if let Some(path) = path {
            self.inputs.push((option.to_string(), path.to_path_buf()));
        }
        self
    }

    /// Checks every output; the first problem is the error.
    pub fn check(self) -> Result<()> {
        if self.measuring && !nix::unistd::geteuid().is_root() {
            bail!(Environment, "not running as root: linerate opens packet sockets (and builds namespaces for --lab); run it as root");
        }
        let mut seen: Vec<(&Output, Identity)> = Vec::new();
        for out in &self.outputs {
            check_one(out).map_err(|e| match out.kind {
                Kind::Database => crate::error::Error::new(
                    e.kind(),
                    format!("{e}; or run with --no-db to store nothing"),
                ),
                _ => e,
            })?;
            let id = identity(&out.path);
            if let Some((first, _)) = seen.iter().find(|(_, other)| *other == id) {
                if id.shared_sink() {
                    continue;
                }
                bail!(BadInput,
                    "{} {} and {} {} are the same file: one would overwrite the other; give each its own file",
                    first.option,
                    first.path.display(),
                    out.option,
                    out.path.display()
                );
            }
            seen.push((out, id));
        }
        for (option, path) in &self.inputs {
            let id = identity(path);
            if let Some((out, _)) = seen
                .iter()
                .find(|(_, other)| *other == id && !id.shared_sink())
            {
                bail!(BadInput,
                    "{} {} is also the {option} file this command reads: writing it would destroy it; give {} a file of its own",
                    out.option,
                    out.path.display(),
                    out.option
                );
            }
        }
        Ok(())
    }
}

/// What a path names, to tell when two options name one file: the file
/// itself when it exists (so links and hard links are seen through),
/// else the path with its directory resolved.
#[derive(Debug, PartialEq, Eq)]
enum Identity {
    File { dev: u64, ino: u64, sink: bool },
    Path(PathBuf),
}

impl Identity {
    /// A device such as /dev/null, which any number of outputs may share.
    fn shared_sink(&self) -> bool {
        matches!(self, Identity::File { sink: true, .. })
    }
}

fn identity(path: &Path) -> Identity {
    if let Ok(m) = std::fs::metadata(path) {
        return Identity::File {
            dev: m.dev(),
            ino: m.ino(),
            sink: m.file_type().is_char_device(),
        };
    }
    let dir = parent(path);
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    Identity::Path(match path.file_name() {
        Some(name) => dir.join(name),
        None => dir,
    })
}

/// The directory a path lies in (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Whether this process may write `path` (effective ids; a read-only file
/// system or an immutable file says no even to root).
fn writable(path: &Path) -> std::result::Result<(), String> {
    nix::unistd::faccessat(
        None,
        path,
        AccessFlags::W_OK,
        nix::fcntl::AtFlags::AT_EACCESS,
    )
    .map_err(|e| std::io::Error::from(e).to_string())
}

fn what_is(t: &std::fs::FileType) -> &'static str {
    if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a named pipe"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

fn check_one(out: &Output) -> Result<()> {
    let (option, path) = (&out.option, &out.path);
    let shown = path.display();
    if path.as_os_str().is_empty() {
        bail!(BadInput, "{option} needs a file name");
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => bail!(BadInput,
            "{option} {shown} is a directory: name a file, e.g. {option} {}",
            path.join(example_name(out)).display()
        ),
        Ok(m) if !m.is_file() && out.kind != Kind::Stream => bail!(BadInput,
            "{option} {shown} is {}, not a regular file: linerate writes this file whole and renames it into place, which would replace it; name a regular file",
            what_is(&m.file_type())
        ),
        Ok(m) if m.is_file() => {
            if let Err(e) = writable(path) {
                bail!(Environment, "{option} {shown}: cannot write it ({e}): pick a writable file");
            }
        }
        // A pipe or a device for a stream: written as it is.
        Ok(_) => return Ok(()),
        Err(_) => {}
    }
    // The directory the file is (or will be) created in.
    let mut dir = parent(path).to_path_buf();
    if out.creates_dir {
        // Created when missing: what must be writable is the nearest
        // directory that exists.
        while !dir.exists() {
            match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => dir = p.to_path_buf(),
                _ => break,
            }
        }
    }
    match std::fs::metadata(&dir) {
        Err(_) => bail!(BadInput,
            "{option} {shown}: directory {} does not exist: create it first, or name a file in an existing directory",
            dir.display()
        ),
        Ok(m) if !m.is_dir() => bail!(BadInput,
            "{option} {shown}: {} is not a directory: name a file in a directory",
            dir.display()
        ),
        Ok(_) => {}
    }
    // A file written whole (and the database's journal) is created beside
    // the target, so its directory must be writable even when it exists.
    let needs_dir = out.kind != Kind::Stream || !path.exists();
    if needs_dir {
        if let Err(e) = writable(&dir) {
            bail!(
                Environment,
                "{option} {shown}: cannot create files in {} ({e}): pick a writable directory",
                dir.display()
            );
        }
    }
    Ok(())
}

/// A file name for the example in the directory message.
fn example_name(out: &Output) -> &'static str {
    match (out.option.as_str(), out.kind) {
        (_, Kind::Database) => "results.sqlite",
        ("--events", _) => "events.jsonl",
        ("--pcap", _) => "frames.pcap",
        ("--html", _) => "report.html",
        ("--calibration", _) | ("--calibration (default)", _) => "calibration.json",
        _ => "results.json",
    }
}

/// Checks a measuring command's output files (`--json`, the record
/// options) with `--calibration` (default: the usual file) as an input, then
/// reads the calibration (empty when there is none).
pub fn checked_outputs_and_calibration(
    json: &Option<PathBuf>,
    record: &RecordPlan,
    calibration: &Option<PathBuf>,
) -> Result<Calibration> {
    let path = calibration
        .clone()
        .unwrap_or_else(calibration::default_path);
    Outputs::new()
        .json(json.as_deref())
        .record(record)
        .input("--calibration", Some(&path))
        .check()?;
    Ok(Calibration::load(&path)?)
}

/// Writes JSON atomically: a reader never sees half a file.
pub fn write_json(path: &Path, value: &impl serde::Serialize) -> Result<()> {
    // Renaming over a device or a pipe would replace it (the options are
    // checked up front; this is the last guard).
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        bail!(BadInput,
            "{} is not a regular file: the JSON is written whole and renamed into place; name a regular file",
            path.display()
        );
    }
    let tmp = path.with_extension("json.tmp");
    let written = std::fs::write(&tmp, report::to_json(value))
        .with_context(|| format!("writing {}", tmp.display()))
        .and_then(|()| {
            std::fs::rename(&tmp, path).with_context(|| format!("writing {}", path.display()))
        });
    if written.is_err() {
        // A full disk leaves a partial file: nothing half-written stays.
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory of its own under the system temp directory, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(tag: &str) -> Scratch {
            let dir =
                std::env::temp_dir().join(format!("linerate-outputs-{tag}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir(&dir).unwrap();
            Scratch(dir)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn err(o: Outputs) -> String {
        o.check().unwrap_err().to_string()
    }

    #[test]
    fn directories_missing_directories_and_devices_are_refused() {
        let s = Scratch::new("dirs");
        let d = &s.0;
        let e = err(Outputs::new().json(Some(d)));
        assert!(e.contains("--json") && e.contains("is a directory"), "{e}");
        let e = err(Outputs::new().file("--db", Some(d), Kind::Database));
        assert!(e.contains("results.sqlite") && e.contains("--no-db"), "{e}");
        let missing = d.join("no/such.json");
        let e = err(Outputs::new().json(Some(&missing)));
        assert!(e.contains("does not exist"), "{e}");
        // A default place is created: only its nearest existing directory counts.
        Outputs::new()
            .default_file("--db (default)", missing.clone(), Kind::Database)
            .check()
            .unwrap();
        assert!(!missing.parent().unwrap().exists(), "the check created it");
        let file = d.join("f");
        std::fs::write(&file, "x").unwrap();
        let e = err(Outputs::new().json(Some(&file.join("x.json"))));
        assert!(e.contains("is not a directory"), "{e}");
        // Renaming over /dev/null would replace it; a stream may go there.
        let e = err(Outputs::new().json(Some(Path::new("/dev/null"))));
        assert!(e.contains("a character device"), "{e}");
        Outputs::new()
            .file("--events", Some(Path::new("/dev/null")), Kind::Stream)
            .file("--pcap", Some(Path::new("/dev/null")), Kind::Stream)
            .check()
            .unwrap();
        Outputs::new()
            .json(Some(&d.join("new.json")))
            .check()
            .unwrap();
        Outputs::new().json(Some(&file)).check().unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"x", "the check wrote");
        assert_eq!(std::fs::read_dir(d).unwrap().count(), 1, "the check wrote");
    }

    #[test]
    fn two_options_on_one_file_are_refused() {
        let s = Scratch::new("same");
        let d = &s.0;
        let a = d.join("a.json");
        // Not there yet, spelt two ways.
        let e = err(Outputs::new().json(Some(&a)).file(
            "--db",
            Some(&d.join(".").join("a.json")),
            Kind::Database,
        ));
        assert!(
            e.contains("--json") && e.contains("--db") && e.contains("same file"),
            "{e}"
        );
        // There, and a hard link to it.
        std::fs::write(&a, "").unwrap();
        let b = d.join("b.jsonl");
        std::fs::hard_link(&a, &b).unwrap();
        let e = err(Outputs::new()
            .json(Some(&a))
            .file("--events", Some(&b), Kind::Stream));
        assert!(e.contains("--events") && e.contains("same file"), "{e}");
        // An output over an input.
        let e = err(Outputs::new()
            .json(Some(&a))
            .input("--calibration", Some(&b)));
        assert!(e.contains("also the --calibration file"), "{e}");
        Outputs::new()
            .json(Some(&a))
            .file("--db", Some(&d.join("r.sqlite")), Kind::Database)
            .input("--calibration", Some(&d.join("c.json")))
            .check()
            .unwrap();
    }

    #[test]
    fn record_options_count_the_default_database_and_leave_stdout_out() {
        let r = RecordPlan {
            events: Some("-".into()),
            ..RecordPlan::default()
        };
        let o = Outputs::new().record(&r);
        assert_eq!(o.outputs.len(), 1);
        assert_eq!(o.outputs[0].path, linerate_store::default_path());
        let r = RecordPlan {
            no_db: true,
            ..RecordPlan::default()
        };
        assert!(Outputs::new().record(&r).outputs.is_empty());
    }
}
