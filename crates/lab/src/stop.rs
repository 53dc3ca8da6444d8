//! A caller's "stop requested" as a set-up sees it: building a lab
//! (`lab.rs`) and applying a scenario (`scenario`) both ask it between
//! their steps, so a Ctrl-C ends a set-up at the next step instead of after
//! the last. The caller owns the flag: the lab knows no signals.

use crate::LabError;

/// The stop check of one set-up: asked between its steps.
pub(crate) struct StopCheck<'a> {
    /// The lab being set up, for the error.
    pub lab: &'a str,
    pub requested: &'a dyn Fn() -> bool,
}

impl StopCheck<'_> {
    /// Err([`LabError::Interrupted`]) once a stop was asked for.
    pub fn go_on(&self) -> Result<(), LabError> {
        if (self.requested)() {
            Err(self.interrupted())
        } else {
            Ok(())
        }
    }

    /// A step's error, or [`LabError::Interrupted`] when a stop was asked
    /// for meanwhile: a terminal's Ctrl-C reaches the whole process group
    /// and kills the step's command too, whose failure is then the stop's.
    pub fn or_interrupted(&self, e: LabError) -> LabError {
        if (self.requested)() {
            self.interrupted()
        } else {
            e
        }
    }

    fn interrupted(&self) -> LabError {
        LabError::Interrupted {
            name: self.lab.to_string(),
        }
    }
}
