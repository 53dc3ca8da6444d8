//! A run's stop flag as the test bed's set-up sees it. The commands hand
//! their `stop` flag to the trials; the set-up below them (building a lab
//! for the run, applying a scenario) reads it from here, set by
//! [`stoppable`] on the run's thread for the length of the run, so that a
//! Ctrl-C during the set-up stops it at its next step, without the flag
//! threaded through every command's way to its test bed.

use crate::error::{Error, Result};
use crate::exit::Outcome;
use linerate_lab::LabError;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    /// The flag of the run on this thread; null outside [`stoppable`].
    static STOP: Cell<*const AtomicBool> = const { Cell::new(std::ptr::null()) };
}

/// Runs `run` with `stop` as this thread's stop flag for the set-up (see
/// [`stop_requested`]), and the flag before back however `run` ends (a panic
/// too). A set-up that stopped half-way becomes the run's
/// [`Outcome::Interrupted`], as a trial that stopped does.
pub fn stoppable(stop: &AtomicBool, run: impl FnOnce() -> Result<Outcome>) -> Result<Outcome> {
    struct Restore(*const AtomicBool);
    impl Drop for Restore {
        fn drop(&mut self) {
            STOP.with(|s| s.set(self.0));
        }
    }
    let _restore = Restore(STOP.with(|s| s.replace(stop)));
    match run() {
        Err(e) => match interrupted_set_up(&e) {
            Some(what) => Ok(Outcome::Interrupted(what)),
            None => Err(e),
        },
        ok => ok,
    }
}

/// Whether the run on this thread was asked to stop; false outside
/// [`stoppable`]. For `Lab::up_until` and `Scenario::apply_until`.
pub fn stop_requested() -> bool {
    STOP.with(|s| {
        let flag = s.get();
        // SAFETY: STOP holds a pointer only inside `stoppable` on this
        // thread, which borrows the flag for all that time and puts the
        // one before back when it ends; null otherwise.
        !flag.is_null() && unsafe { &*flag }.load(Ordering::Relaxed)
    })
}

/// What a set-up that stopped half-way says ("lab 'x' was not set up
/// ..."), when `e` is one.
fn interrupted_set_up(e: &Error) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(lab @ LabError::Interrupted { .. }) = c.downcast_ref::<LabError>() {
            return Some(lab.to_string());
        }
        cause = c.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_is_seen_inside_the_run_only() {
        let stop = AtomicBool::new(true);
        assert!(!stop_requested());
        let seen = stoppable(&stop, || {
            Ok(Outcome::ThresholdFailed(stop_requested().to_string()))
        });
        assert!(matches!(seen, Ok(Outcome::ThresholdFailed(s)) if s == "true"));
        assert!(!stop_requested());
        // Another thread's run is its own.
        let other = stoppable(&stop, || {
            let there = std::thread::spawn(stop_requested).join().unwrap();
            Ok(Outcome::ThresholdFailed(there.to_string()))
        });
        assert!(matches!(other, Ok(Outcome::ThresholdFailed(s)) if s == "false"));
    }

    #[test]
    fn a_nested_run_puts_the_outer_flag_back_even_after_a_panic() {
        let (outer, inner) = (AtomicBool::new(true), AtomicBool::new(false));
        let _ = stoppable(&outer, || {
            let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                stoppable(&inner, || {
                    assert!(!stop_requested());
                    panic!("inside")
                })
            }));
            assert!(caught.is_err());
            assert!(stop_requested());
            Ok(Outcome::Passed)
        });
        assert!(!stop_requested());
    }

    #[test]
    fn a_set_up_that_stopped_is_the_run_s_interruption() {
        let stop = AtomicBool::new(true);
        let stopped = LabError::Interrupted { name: "x".into() };
        let outcome = stoppable(&stop, || {
            Err(Error::from(stopped).context("opening the bed"))
        });
        let Ok(Outcome::Interrupted(what)) = outcome else {
            panic!("the stopped set-up is not the run's interruption")
        };
        assert!(what.contains("lab 'x' was not set up"), "{what}");
        // Any other error stays the error it is.
        let failed = stoppable(&stop, || Err(Error::from(LabError::NotRoot)));
        assert!(matches!(failed, Err(Error::Lab(LabError::NotRoot))));
    }
}
