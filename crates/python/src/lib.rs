//! `linerate._native`: the Python package's bridge to the session layer.
//! It runs a command line in this process, exactly as the `linerate`
//! binary would, with two differences a library needs: Ctrl-C
//! (KeyboardInterrupt) becomes the run's stop flag rather than a signal
//! handler of our own, and every event of the run reaches a callback.

use clap::{CommandFactory, Parser};
use linerate_cli::Cli;
use linerate_session::Outcome;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::Duration;

create_exception!(
    _native,
    LinerateError,
    PyException,
    "Bad input or environment: the message names the problem and the fix (the CLI's exit code 2)."
);

create_exception!(
    _native,
    LinerateBadInput,
    LinerateError,
    "Bad input: the options or their values; the message names the fix (a LinerateError)."
);

/// A failed run's one-line message, and whether the fix is in the input.
struct Failure {
    message: String,
    bad_input: bool,
}

impl Failure {
    fn raise(self) -> PyErr {
        if self.bad_input {
            LinerateBadInput::new_err(self.message)
        } else {
            LinerateError::new_err(self.message)
        }
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Failure {
        Failure {
            message,
            bad_input: false,
        }
    }
}

enum Message {
    Event(String, String),
    Done(Result<Outcome, Failure>),
}

/// Runs a linerate command line (`argv` without the program's name) and
/// returns `(code, message)`: 0 and "" when it passed, 1 and the reason
/// when a threshold failed. Raises `LinerateBadInput` (a `LinerateError`)
/// for bad input, `LinerateError` for the environment or a failed run, and
/// `KeyboardInterrupt` after a Ctrl-C has stopped the run (the finished
/// trials are kept, a lab built for the run is removed), also for a Ctrl-C
/// that came as the run ended by itself: a Ctrl-C is never lost.
/// Python sees Ctrl-C on its main thread only: a call from another thread
/// runs on, and the main thread gets the KeyboardInterrupt.
/// `on_event(name, fields_json)` hears each event as it happens.
#[pyfunction]
#[pyo3(signature = (argv, on_event=None))]
fn run(py: Python<'_>, argv: Vec<String>, on_event: Option<Py<PyAny>>) -> PyResult<(i32, String)> {
    let argv: Vec<String> = std::iter::once("linerate".to_string())
        .chain(argv)
        .collect();
    let cli = Cli::try_parse_from(&argv)
        .map_err(|e| LinerateBadInput::new_err(python_words(&clap_message(&e), &argv[1..])))?;
    // Stored runs show the command line the call stands for.
    // Messages speak of the call's keywords (python_words).
    let words: Vec<String> = argv[1..].to_vec();
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel();
    let listener: Option<linerate_session::Listener> = on_event.is_some().then(|| {
        let tx = Mutex::new(tx.clone());
        Box::new(move |name: &str, fields: &serde_json::Value| {
            let message = Message::Event(name.to_string(), fields.to_string());
            let _ = tx.lock().map(|tx| tx.send(message));
        }) as linerate_session::Listener
    });
    // quiet=True prints nothing at all (the results come back as values);
    // on the command line --quiet only hides the progress.
    let console = if words.iter().any(|a| a == "--quiet") {
        linerate_session::console::Console::Silent
    } else {
        linerate_session::console::Console::Terminal
    };
    let worker = std::thread::spawn({
        let stop = stop.clone();
        move || {
            // This call's own console, listener and command line: another
            // thread's run keeps its own.
            let caller = linerate_session::Caller {
                console,
                listener,
                command_line: Some(argv),
            };
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                linerate_session::caller::scoped(caller, || linerate_cli::run(&cli, &stop))
            }));
            let result = match result {
                Ok(Ok(outcome)) => Ok(outcome),
                Ok(Err(e)) => Err(Failure {
                    message: python_words(&linerate_session::exit::one_line(&e), &words),
                    bad_input: e.kind() == linerate_session::Kind::BadInput,
                }),
                Err(_) => Err("linerate stopped on an internal error (a panic, printed above); please report it".to_string().into()),
            };
            let _ = tx.send(Message::Done(result));
        }
    });
    let (outcome, raised) = wait_for_the_run(py, rx, on_event.as_ref(), &stop);
    let _ = py.detach(|| worker.join());
    // A Ctrl-C in the slice that brought the result, or while the worker
    // ended, is raised here by this call: left pending, the interpreter
    // would raise it wherever it next looks (in the caller's cleanup,
    // after this call had already returned or raised something else).
    let raised = match py.check_signals() {
        Err(e) => Some(after(py, raised, e)),
        Ok(()) => raised,
    };
    if let Some(e) = raised {
        return Err(e);
    }
    match outcome {
        Ok(Outcome::Passed) => Ok((0, String::new())),
        Ok(Outcome::ThresholdFailed(why)) => Ok((1, why)),
        Ok(Outcome::Interrupted(what)) => Err(PyKeyboardInterrupt::new_err(what)),
        Err(failure) => Err(failure.raise()),
    }
}

/// Waits for the run's result with the GIL released, waking every 100 ms
/// to hand events to `on_event` and to let Python notice Ctrl-C; returns
/// the result and the error the call must raise instead, if any (Ctrl-C,
/// or a callback that raised: either also sets `stop`, and the run goes on
/// to its end: its trial stopped, its lab removed).
fn wait_for_the_run(
    py: Python<'_>,
    mut rx: mpsc::Receiver<Message>,
    on_event: Option<&Py<PyAny>>,
    stop: &AtomicBool,
) -> (Result<Outcome, Failure>, Option<PyErr>) {
    let mut raised: Option<PyErr> = None;
    loop {
        let (back, message) = py.detach(move || {
            let message = rx.recv_timeout(Duration::from_millis(100));
            (rx, message)
        });
        rx = back;
        match message {
            Ok(Message::Event(name, fields)) => {
                if let (Some(callback), None) = (on_event, &raised) {
                    if let Err(e) = callback.call1(py, (name, fields)) {
                        // A callback that raises stops the run, as Ctrl-C does.
                        stop.store(true, Ordering::SeqCst);
                        raised = Some(e);
                    }
                }
            }
            Ok(Message::Done(result)) => return (result, raised),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                let lost = "linerate's run ended without a result".to_string();
                return (Err(lost.into()), raised);
            }
        }
        if let Err(e) = py.check_signals() {
            stop.store(true, Ordering::SeqCst);
            raised = Some(after(py, raised, e));
        }
    }
}

/// The error to raise when Python's signal handler raised `signalled`
/// (KeyboardInterrupt for Ctrl-C) after the call already held `earlier`
/// (a callback's error, or an earlier Ctrl-C): the handler's error, with
/// `earlier` as its context, as Python chains an error raised while
/// another is handled. Checking signals consumed this one: dropping it for
/// `earlier` would swallow the Ctrl-C.
fn after(py: Python<'_>, earlier: Option<PyErr>, signalled: PyErr) -> PyErr {
    if let Some(earlier) = earlier {
        let _ = signalled
            .value(py)
            .setattr("__context__", earlier.value(py));
    }
    signalled
}

/// The CLI's help of `command` (e.g. "rfc2544", "lab up"): the Python
/// functions' docstrings, so that they say what the CLI says.
#[pyfunction]
fn help(command: &str) -> PyResult<String> {
    let mut cmd = Cli::command();
    for name in command.split_whitespace() {
        cmd = cmd
            .find_subcommand(name)
            .ok_or_else(|| LinerateError::new_err(format!("no linerate command '{command}'")))?
            .clone();
    }
    Ok(cmd.render_long_help().to_string())
}

/// The options of `command` as `(name, kind, help)`: `name` the long
/// option in snake_case, `kind` "flag" (given or not), "value" (one
/// value) or "list" (repeated); `help` its first line. The package's type
/// stub is generated from them, so that it says what the CLI takes.
#[pyfunction]
fn options(command: &str) -> PyResult<Vec<(String, String, String)>> {
    let mut cmd = Cli::command();
    for name in command.split_whitespace() {
        cmd = cmd
            .find_subcommand(name)
            .ok_or_else(|| LinerateError::new_err(format!("no linerate command '{command}'")))?
            .clone();
    }
    Ok(cmd
        .get_arguments()
        .filter(|a| !a.is_hide_set())
        .filter_map(|a| {
            let long = a.get_long()?;
            if long == "help" || long == "version" {
                return None;
            }
            let kind = match a.get_action() {
                clap::ArgAction::SetTrue | clap::ArgAction::SetFalse => "flag",
                clap::ArgAction::Append => "list",
                _ if a.get_num_args().is_some_and(|n| n.max_values() > 1) => "list",
                _ => "value",
            };
            let help = a.get_help().map(|h| h.to_string()).unwrap_or_default();
            let first = help.lines().next().unwrap_or_default().to_string();
            // Its long aliases (e.g. --frame-size for --sizes) too.
            let names = std::iter::once(long).chain(a.get_all_aliases().unwrap_or_default());
            Some(
                names
                    .map(|n| (n.replace('-', "_"), kind.to_string(), first.clone()))
                    .collect::<Vec<_>>(),
            )
        })
        .flatten()
        .collect())
}

/// The labs present, as `linerate lab status --json` prints them.
#[pyfunction]
fn lab_status() -> PyResult<String> {
    let labs = linerate_lab::status().map_err(|e| LinerateError::new_err(e.to_string()))?;
    serde_json::to_string(&labs).map_err(|e| LinerateError::new_err(e.to_string()))
}

/// Python's reserved words: a keyword argument spelled so takes a
/// trailing underscore (`from_=`), which `command_line` strips.
const PYTHON_RESERVED: &[&str] = &[
    "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del", "elif",
    "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
    "nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
];

/// A message of the CLI in the words of the Python call `argv` stands
/// for: each option `--some-name` becomes the keyword `some_name=`, spelt
/// as the caller spelt it (`frame_size=` where the message says `--sizes`,
/// its alias), with its value where the message quotes one
/// (`duration='-1'`), a flag as `name=True`; clap's "unexpected argument"
/// is an unexpected keyword argument.
fn python_words(message: &str, argv: &[String]) -> String {
    // The command the call runs ("lab up": two words), for its options.
    let mut cmd = Cli::command();
    for word in argv.iter().take_while(|a| !a.starts_with('-')) {
        match cmd.find_subcommand(word) {
            Some(sub) => cmd = sub.clone(),
            None => break,
        }
    }
    let given = |name: &str| {
        argv.iter().any(|a| {
            a.strip_prefix("--")
                .is_some_and(|r| r == name || r.starts_with(&format!("{name}=")))
        })
    };
    let message = message.replace("unexpected argument '--", "unexpected keyword argument '--");
    let mut out = String::with_capacity(message.len());
    let mut rest = message.as_str();
    while let Some(at) = rest.find("--") {
        let (before, from) = rest.split_at(at);
        let name_len = from[2..]
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'))
            .unwrap_or(from.len() - 2);
        let name = from[2..2 + name_len].trim_end_matches('-');
        out.push_str(before);
        if name.is_empty() || !name.starts_with(|c: char| c.is_ascii_lowercase()) {
            out.push_str("--");
            rest = &from[2..];
            continue;
        }
        let after = &from[2 + name.len()..];
        let arg = cmd.get_arguments().find(|a| {
            a.get_long() == Some(name) || a.get_all_aliases().unwrap_or_default().contains(&name)
        });
        // The caller's spelling of the option (an alias, or its own name).
        let spelt = arg
            .and_then(|a| {
                std::iter::once(a.get_long()?)
                    .chain(a.get_all_aliases().unwrap_or_default())
                    .find(|n| given(n))
            })
            .unwrap_or(name);
        let mut key = spelt.replace('-', "_");
        if PYTHON_RESERVED.contains(&key.as_str()) {
            key.push('_');
        }
        let flag = arg.is_some_and(|a| {
            matches!(
                a.get_action(),
                clap::ArgAction::SetTrue | clap::ArgAction::SetFalse
            )
        });
        let quoted_alone = out.ends_with('\'') && after.starts_with('\'');
        out.push_str(&key);
        if quoted_alone {
            // Quoted by clap ('--name'): the keyword alone.
            rest = after;
            continue;
        }
        if flag {
            out.push_str("=True");
            rest = after;
        } else if let Some(quoted) = after.strip_prefix(" '") {
            // `--name 'value'`: the value as Python writes a string.
            out.push_str("='");
            rest = quoted;
        } else {
            out.push('=');
            if after.starts_with(':') {
                // `--name: what is wrong`: with the value the caller gave.
                out.push_str(&python_value(&given_values(argv, spelt)));
            }
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// The values `argv` gives option `--name` (`--name V` or `--name=V`).
fn given_values(argv: &[String], name: &str) -> Vec<String> {
    let long = format!("--{name}");
    let mut values = Vec::new();
    for (i, w) in argv.iter().enumerate() {
        if *w == long {
            values.extend(argv.get(i + 1).cloned());
        } else if let Some(v) = w.strip_prefix(&long).and_then(|r| r.strip_prefix('=')) {
            values.push(v.to_string());
        }
    }
    values
}

/// Values as a Python call writes them: a number bare, text quoted, a
/// repeated option as a list.
fn python_value(values: &[String]) -> String {
    let one = |v: &String| {
        if v.parse::<f64>().is_ok() {
            v.clone()
        } else {
            format!("'{v}'")
        }
    };
    match values {
        [] => String::new(),
        [v] => one(v),
        many => format!("[{}]", many.iter().map(one).collect::<Vec<_>>().join(", ")),
    }
}

/// clap's message without its usage block, on as few lines as it has.
fn clap_message(e: &clap::Error) -> String {
    let text = e.render().to_string();
    text.lines()
        .take_while(|l| !l.starts_with("Usage:"))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(|l| l.trim_start_matches("error: "))
        .collect::<Vec<_>>()
        .join("; ")
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add_function(wrap_pyfunction!(help, m)?)?;
    m.add_function(wrap_pyfunction!(lab_status, m)?)?;
    m.add_function(wrap_pyfunction!(options, m)?)?;
    m.add("LinerateError", m.py().get_type::<LinerateError>())?;
    m.add("LinerateBadInput", m.py().get_type::<LinerateBadInput>())?;
    Ok(())
}
