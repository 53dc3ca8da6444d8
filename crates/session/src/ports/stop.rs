//! A run's stop flag as the test bed's set-up sees it: the commands hand
//! their `stop` flag to [`open`](super::open) (and a scenario's lab), which
//! builds with [`until`], so a Ctrl-C during the set-up stops it at its
//! next step; [`set_up_stop_is_interruption`] turns the set-up that
//! stopped into the run's interruption.

use crate::error::{Error, Result};
use crate::exit::Outcome;
use linerate_lab::LabError;
use std::sync::atomic::{AtomicBool, Ordering};

/// `stop` as the check `Lab::up_until` and `Scenario::apply_until` ask
/// between their steps.
pub fn until(stop: &AtomicBool) -> impl Fn() -> bool + '_ {
    move || stop.load(Ordering::Relaxed)
}

/// A run's result with a set-up that stopped half-way as the run's
/// [`Outcome::Interrupted`], as a trial that stopped is; any other error
/// stays the error it is.
pub fn set_up_stop_is_interruption(result: Result<Outcome>) -> Result<Outcome> {
    match result {
        Err(e) => match interrupted_set_up(&e) {
            Some(what) => Ok(Outcome::Interrupted(what)),
            None => Err(e),
        },
        ok => ok,
    }
}

/// What a set-up that stopped half-way says ("lab 'x' was not set up
/// ..."), when `e` is one.
fn interrupted_set_up(e: &Error) -> Option<String> {
    let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(c) = cause {
        if let Some(lab @ LabError::Interrupted { .. }) = c.downcast_ref::<LabError>() {
            return Some(lab.to_string());
        }
        // The IPsec negotiation a signal stopped: its context says what
        // was done about the gateway.
        if let Some(linerate_engine::EngineError::Interrupted) =
            c.downcast_ref::<linerate_engine::EngineError>()
        {
            return Some(e.to_string());
        }
        cause = c.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_follows_the_flag() {
        let stop = AtomicBool::new(false);
        let check = until(&stop);
        assert!(!check());
        stop.store(true, Ordering::Relaxed);
        assert!(check());
    }

    #[test]
    fn a_set_up_that_stopped_is_the_run_s_interruption() {
        let stopped = LabError::Interrupted { name: "x".into() };
        let outcome =
            set_up_stop_is_interruption(Err(Error::from(stopped).context("opening the bed")));
        let Ok(Outcome::Interrupted(what)) = outcome else {
            panic!("the stopped set-up is not the run's interruption")
        };
        assert!(what.contains("lab 'x' was not set up"), "{what}");
        // Any other error stays the error it is.
        let failed = set_up_stop_is_interruption(Err(Error::from(LabError::NotRoot)));
        assert!(matches!(failed, Err(Error::Lab(LabError::NotRoot))));
        assert!(matches!(
            set_up_stop_is_interruption(Ok(Outcome::Passed)),
            Ok(Outcome::Passed)
        ));
    }
}
