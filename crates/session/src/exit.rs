//! How a command ended, and errors as one line.

use crate::error::Error;

/// What a command reports back to `main`.
pub enum Outcome {
    Passed,
    /// The test ran but a pass/fail threshold failed (exit 1).
    ThresholdFailed(String),
    /// Stopped by SIGINT/SIGTERM; says what became of the measurements.
    Interrupted(String),
}

/// `e`, then its source, the source's source, and so on.
fn chain(e: &Error) -> impl Iterator<Item = &(dyn std::error::Error + 'static)> {
    std::iter::successors(Some(e as &(dyn std::error::Error + 'static)), |c| {
        c.source()
    })
}

/// The error and its causes on one line, each cause once: a cause whose
/// text an earlier part already holds is left out, and so is the engine's
/// error under [`Error::Engine`], which says it again in the options' words.
pub fn one_line(e: &Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut reworded = false;
    for cause in chain(e) {
        if std::mem::take(&mut reworded) {
            continue;
        }
        // A context's source is its boxed error.
        let here = cause
            .downcast_ref::<Error>()
            .or_else(|| cause.downcast_ref::<Box<Error>>().map(|b| &**b));
        reworded = matches!(here, Some(Error::Engine(_)));
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ").replace('\n', " ")
}

/// True for the panic of a print to a closed pipe (`println!`'s message).
pub fn is_closed_pipe_panic(payload: &(dyn std::any::Any + Send)) -> bool {
    let text = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| payload.downcast_ref::<&str>().copied())
        .unwrap_or("");
    text.starts_with("failed printing to") && text.contains("Broken pipe")
}

/// True when the error is a write to a closed pipe.
pub fn is_closed_pipe(e: &Error) -> bool {
    chain(e).any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Keeps the panic of a print to a closed pipe silent (no message, no
/// backtrace); every other panic is reported as before.
pub fn quiet_on_closed_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if !is_closed_pipe_panic(info.payload()) {
            report(info)
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_pipes_are_told_from_other_failures() {
        let epipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        assert!(is_closed_pipe(&Error::from(epipe).context("printing")));
        let other = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(!is_closed_pipe(&Error::from(other)));
        let p: Box<dyn std::any::Any + Send> =
            Box::new("failed printing to stdout: Broken pipe (os error 32)".to_string());
        assert!(is_closed_pipe_panic(&*p));
        let p: Box<dyn std::any::Any + Send> = Box::new("index out of bounds");
        assert!(!is_closed_pipe_panic(&*p));
    }
}
