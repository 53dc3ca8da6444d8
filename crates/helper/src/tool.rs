//! Finding and running the host's programs: `ip` and the other single
//! commands linerate waits for, each killed with linerate
//! ([`DieWithParent`]), its output captured and its stderr in the error.

use crate::DieWithParent;
use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

/// Finds program `name` in PATH, then in the sbin directories: `ip`,
/// `ethtool` and `nginx` live in /usr/sbin, which a non-login PATH (cargo
/// test, sudo with a kept environment) may lack.
pub fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// iproute2's `ip`, looked up once ([`find_tool`]).
pub fn ip_path() -> Option<&'static Path> {
    static IP: OnceLock<Option<PathBuf>> = OnceLock::new();
    IP.get_or_init(|| find_tool("ip")).as_deref()
}

/// Why a command did not give its output.
#[derive(Debug)]
pub enum RunError {
    /// The program is not installed: for [`ip`], iproute2's `ip` is found
    /// neither in PATH nor in the sbin directories.
    Missing { program: &'static str },
    /// It could not be started (or waited for, or given its input).
    Spawn { command: String, error: io::Error },
    /// It ended with a failure.
    Failed {
        command: String,
        status: ExitStatus,
        /// All it printed on stderr.
        stderr: String,
    },
    /// Ended early: the `stop` of [`run_until`] said so.
    Stopped { command: String },
}

impl RunError {
    /// The command as a person would type it ([`command_line`]); the
    /// program's name for [`RunError::Missing`].
    pub fn command(&self) -> &str {
        match self {
            RunError::Missing { program } => program,
            RunError::Spawn { command, .. }
            | RunError::Failed { command, .. }
            | RunError::Stopped { command } => command,
        }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::Missing { program: "ip" } => {
                write!(
                    f,
                    "iproute2 not found: install it with 'apt-get install iproute2'"
                )
            }
            RunError::Missing { program } => write!(f, "{program} not found"),
            RunError::Spawn { command, error } => write!(f, "could not run '{command}': {error}"),
            RunError::Failed {
                command,
                status,
                stderr,
            } => write!(
                f,
                "command '{command}' failed: {}",
                first_line(stderr.as_bytes(), *status)
            ),
            RunError::Stopped { command } => {
                write!(f, "command '{command}' stopped: the run was asked to stop")
            }
        }
    }
}

impl std::error::Error for RunError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RunError::Spawn { error, .. } => Some(error),
            _ => None,
        }
    }
}

/// A command as a person would type it, for error messages: program base
/// name, arguments quoted when they hold spaces or shell characters.
pub fn command_line(program: &Path, args: &[&str]) -> String {
    let name = program
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| program.display().to_string());
    let mut line = name;
    for arg in args {
        line.push(' ');
        let plain = !arg.is_empty()
            && arg
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
        if plain {
            line.push_str(arg);
        } else {
            line.push('\'');
            line.push_str(&arg.replace('\'', r"'\''"));
            line.push('\'');
        }
    }
    line
}

/// First non-empty line of a failed command's stderr, or its exit status
/// when it printed nothing: error messages stay one line.
pub fn first_line(stderr: &[u8], status: ExitStatus) -> String {
    String::from_utf8_lossy(stderr)
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .map(str::to_string)
        .unwrap_or_else(|| format!("exited with {status} and printed nothing"))
}

/// Runs `program args...` and returns its stdout.
pub fn run(program: &Path, args: &[&str]) -> Result<String, RunError> {
    execute(program, args, None, None, Death::WithParent)
}

/// [`run`] that ends the command early once `stop` returns true, asked
/// while it runs: for long steps (loading 100,000 nftables rules or
/// 900,000 routes) that a Ctrl-C should not wait for.
pub fn run_until(
    program: &Path,
    args: &[&str],
    stop: &dyn Fn() -> bool,
) -> Result<String, RunError> {
    execute(program, args, None, Some(stop), Death::WithParent)
}

/// Runs `ip [-n netns] args...` and returns its stdout.
pub fn ip(netns: Option<&str>, args: &[&str]) -> Result<String, RunError> {
    ip_with_input(netns, args, None)
}

/// [`ip`] for a read of the kernel's state (`ip -j -s link show ...`, `ip
/// netns exec NS tc -s -j qdisc show ...`) while the engine runs: spawned
/// without the death signal. Setting it needs a hook in the child, which
/// makes the spawn a fork that copies the page tables of every mapping,
/// the engine's packet rings and UMEM included: tens of milliseconds per
/// read between trials, during which frames a DUT still forwards went
/// uncounted (crates/cli/tests/recovery.rs). Without the hook the spawn is
/// a vfork. A read ends in milliseconds and is waited for: it outlives
/// linerate by no more than that.
pub fn ip_query(netns: Option<&str>, args: &[&str]) -> Result<String, RunError> {
    run_ip(netns, args, None, Death::Alone)
}

/// `ip [-n netns] args...`, run as `death` says.
fn run_ip(
    netns: Option<&str>,
    args: &[&str],
    input: Option<&[u8]>,
    death: Death,
) -> Result<String, RunError> {
    let program = ip_path().ok_or(RunError::Missing { program: "ip" })?;
    let mut full = Vec::with_capacity(args.len() + 2);
    if let Some(ns) = netns {
        full.extend(["-n", ns]);
    }
    full.extend_from_slice(args);
    execute(program, &full, input, None, death)
}

/// Whether a command gets the death signal ([`DieWithParent`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Death {
    WithParent,
    /// A short read: see [`ip_query`].
    Alone,
}

/// [`ip`] with `input` on its stdin (`ip -batch -`); stdin is empty for
/// None.
pub fn ip_with_input(
    netns: Option<&str>,
    args: &[&str],
    input: Option<&[u8]>,
) -> Result<String, RunError> {
    run_ip(netns, args, input, Death::WithParent)
}

/// Runs the command (stdin `input`, or empty), reading its stdout and
/// stderr while it runs (a full pipe would block it); with `stop`, asks it
/// every few milliseconds and kills the command once it says so.
fn execute(
    program: &Path,
    args: &[&str],
    input: Option<&[u8]>,
    stop: Option<&dyn Fn() -> bool>,
    death: Death,
) -> Result<String, RunError> {
    let command = || command_line(program, args);
    let spawn_error = |error| RunError::Spawn {
        command: command(),
        error,
    };
    let mut cmd = Command::new(program);
    if death == Death::WithParent {
        // A command linerate waits for ends with it too (e.g. a long `nft -f`).
        cmd.die_with_parent();
    }
    let mut child = cmd
        .args(args)
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(spawn_error)?;
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    std::thread::scope(|s| {
        let fed = s.spawn(move || match (stdin, input) {
            // Dropping stdin closes it: the command sees the end of its input.
            (Some(mut stdin), Some(input)) => stdin.write_all(input),
            _ => Ok(()),
        });
        let out = s.spawn(move || read_all(stdout));
        let err = s.spawn(move || read_all(stderr));
        let status = match stop {
            None => child.wait().map_err(spawn_error),
            // Short commands end within the first polls; long ones are
            // asked about the stop every 20 ms.
            Some(stop) => {
                let mut pause = Duration::from_millis(1);
                loop {
                    match child.try_wait() {
                        Ok(Some(status)) => break Ok(status),
                        Ok(None) if stop() => {
                            let _ = child.kill();
                            let _ = child.wait();
                            break Err(RunError::Stopped { command: command() });
                        }
                        Ok(None) => std::thread::sleep(pause),
                        Err(e) => break Err(spawn_error(e)),
                    }
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
            }
        };
        let fed = fed.join().unwrap_or(Ok(()));
        let (out, err) = (
            out.join().unwrap_or_default(),
            err.join().unwrap_or_default(),
        );
        let status = status?;
        if !status.success() {
            return Err(RunError::Failed {
                command: command(),
                status,
                stderr: String::from_utf8_lossy(&err).into_owned(),
            });
        }
        // A command that succeeded without reading all its input.
        fed.map_err(spawn_error)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    })
}

/// All a pipe gives until it closes (nothing for no pipe).
fn read_all(pipe: Option<impl Read>) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(mut pipe) = pipe {
        let _ = pipe.read_to_end(&mut bytes);
    }
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn command_line_quotes_only_when_needed() {
        let line = command_line(
            Path::new("/usr/sbin/ip"),
            &["netns", "exec", "lr-x-dut", "sh", "-c", "echo 'a b'", ""],
        );
        assert_eq!(
            line,
            r#"ip netns exec lr-x-dut sh -c 'echo '\''a b'\''' ''"#
        );
    }

    #[test]
    fn first_line_skips_blank_lines_and_falls_back_to_status() {
        let status = ExitStatus::from_raw(2 << 8);
        assert_eq!(
            first_line(b"\n  Cannot find device \"x\"\nmore\n", status),
            "Cannot find device \"x\""
        );
        assert!(first_line(b"  \n", status).contains("exited with"));
    }

    #[test]
    fn finds_sh_and_not_nonsense() {
        assert!(find_tool("sh").is_some());
        assert!(find_tool("no-such-program-linerate").is_none());
    }

    #[test]
    fn run_returns_the_output_or_the_stderr() {
        let sh = find_tool("sh").unwrap();
        assert_eq!(
            run(&sh, &["-c", "echo out; echo err >&2"]).unwrap(),
            "out\n"
        );
        match run(&sh, &["-c", "echo; echo why >&2; exit 3"]).unwrap_err() {
            RunError::Failed {
                command,
                status,
                stderr,
            } => {
                assert_eq!(command, "sh -c 'echo; echo why >&2; exit 3'");
                assert_eq!(status.code(), Some(3));
                assert_eq!(stderr, "why\n");
            }
            other => panic!("{other:?}"),
        }
        let missing = run(Path::new("/no/such/program"), &["x"]).unwrap_err();
        assert!(matches!(missing, RunError::Spawn { .. }), "{missing:?}");
        assert_eq!(missing.command(), "program x");
    }

    #[test]
    fn run_until_returns_the_output_or_ends_the_command_when_asked() {
        let sh = find_tool("sh").unwrap();
        let out = run_until(&sh, &["-c", "echo out; echo err >&2"], &|| false).unwrap();
        assert_eq!(out, "out\n");
        let failed = run_until(&sh, &["-c", "echo why >&2; exit 3"], &|| false).unwrap_err();
        assert!(failed.to_string().contains("why"), "{failed}");
        // Much output does not block it on a full pipe.
        let big = run_until(&sh, &["-c", "head -c 1000000 /dev/zero"], &|| false).unwrap();
        assert_eq!(big.len(), 1_000_000);
        let started = std::time::Instant::now();
        let stopped = run_until(&sh, &["-c", "exec sleep 30"], &|| {
            started.elapsed() > Duration::from_millis(50)
        })
        .unwrap_err();
        assert!(matches!(stopped, RunError::Stopped { .. }), "{stopped:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn ip_runs_in_a_namespace_and_reads_its_input() {
        if ip_path().is_none() {
            eprintln!("SKIPPED (no iproute2): ip_runs_in_a_namespace_and_reads_its_input");
            return;
        }
        assert!(ip(None, &["-o", "link", "show", "dev", "lo"])
            .unwrap()
            .contains("lo"));
        let err = ip(Some("lr-never-created-namespace"), &["link"]).unwrap_err();
        let RunError::Failed { ref command, .. } = err else {
            panic!("{err:?}")
        };
        assert_eq!(command, "ip -n lr-never-created-namespace link");
        // `ip -batch -` reads its commands from stdin.
        let out = ip_with_input(None, &["-batch", "-"], Some(b"link show dev lo\n")).unwrap();
        assert!(out.contains("lo"), "{out}");
        let err = ip_with_input(
            None,
            &["-batch", "-"],
            Some(b"link show dev lr-no-such-if\n"),
        )
        .unwrap_err();
        assert!(err.to_string().contains("lr-no-such-if"), "{err}");
    }
}
