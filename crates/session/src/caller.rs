//! What a caller gives the runs it starts besides their plans: where
//! their words go, who hears their events, and the command line they are
//! stored under. Per thread, set for the length of a call with
//! [`scoped`]: two runs started from two threads (the Python package's
//! threads) each keep their own, and nothing of one run outlives it.
//!
//! The binary needs none of it: by default words go to the terminal, no
//! one listens, and runs are stored under the process's own command line.

use crate::console::{self, Console};
use serde_json::Value;
use std::cell::RefCell;

/// What hears every event of a run: `(event, fields)` (the events of
/// `--events`, see `events.rs`).
pub type Listener = Box<dyn FnMut(&str, &Value) + Send>;

/// A caller's settings for the runs on its thread.
pub struct Caller {
    pub console: Console,
    pub listener: Option<Listener>,
    /// The command line runs are stored and announced with (with the
    /// program's name), when it is not this process's own (the Python
    /// package runs `linerate trial ...` inside `python3 script.py`).
    pub command_line: Option<Vec<String>>,
}

impl Default for Caller {
    fn default() -> Self {
        Caller {
            console: Console::Terminal,
            listener: None,
            command_line: None,
        }
    }
}

struct Hooks {
    listener: Option<Listener>,
    command_line: Option<Vec<String>>,
}

thread_local! {
    static HOOKS: RefCell<Hooks> = const {
        RefCell::new(Hooks {
            listener: None,
            command_line: None,
        })
    };
}

/// Runs `f` with `caller`'s settings on this thread, and restores the ones
/// before however `f` ends (a panic too).
pub fn scoped<R>(caller: Caller, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Hooks>);
    impl Drop for Restore {
        fn drop(&mut self) {
            if let Some(before) = self.0.take() {
                HOOKS.with(|h| *h.borrow_mut() = before);
            }
        }
    }
    let before = HOOKS.with(|h| {
        std::mem::replace(
            &mut *h.borrow_mut(),
            Hooks {
                listener: caller.listener,
                command_line: caller.command_line,
            },
        )
    });
    let _restore = Restore(Some(before));
    console::scoped(caller.console, f)
}

/// Tells this thread's listener, if there is one, that `name` happened.
pub(crate) fn notify(name: &str, fields: &Value) {
    HOOKS.with(|h| {
        // A listener that starts a run itself would find the hooks
        // borrowed: it hears nothing of that inner run rather than panic.
        if let Ok(mut hooks) = h.try_borrow_mut() {
            if let Some(listener) = hooks.listener.as_mut() {
                listener(name, fields);
            }
        }
    });
}

/// The command line this thread's runs are stored under.
pub(crate) fn command_line() -> Vec<String> {
    HOOKS
        .with(|h| h.borrow().command_line.clone())
        .unwrap_or_else(|| std::env::args().collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn each_thread_hears_only_its_own_runs() {
        let heard = Arc::new(Mutex::new(Vec::new()));
        let mine = heard.clone();
        scoped(
            Caller {
                listener: Some(Box::new(move |name, _| {
                    mine.lock().unwrap().push(name.to_string())
                })),
                command_line: Some(vec!["linerate".into(), "trial".into()]),
                ..Caller::default()
            },
            || {
                notify("run_started", &Value::Null);
                assert_eq!(command_line(), ["linerate", "trial"]);
                std::thread::spawn(|| {
                    notify("other", &Value::Null);
                    assert_ne!(command_line(), ["linerate", "trial"]);
                })
                .join()
                .unwrap();
            },
        );
        notify("after", &Value::Null);
        assert_eq!(*heard.lock().unwrap(), ["run_started"]);
        assert_ne!(command_line(), ["linerate", "trial"]);
    }

    #[test]
    fn the_settings_before_return_even_after_a_panic() {
        let caught = std::panic::catch_unwind(|| {
            scoped(
                Caller {
                    command_line: Some(vec!["x".into()]),
                    ..Caller::default()
                },
                || panic!("inside"),
            )
        });
        assert!(caught.is_err());
        assert_ne!(command_line(), ["x"]);
    }
}
