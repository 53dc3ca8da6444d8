//! How a command ended, and errors as one line.

/// What a command reports back to `main`.
pub enum Outcome {
    Passed,
    /// The test ran but a pass/fail threshold failed (exit 1).
    ThresholdFailed(String),
    /// Stopped by SIGINT/SIGTERM; says what became of the measurements.
    Interrupted(String),
}

/// The error and its causes on one line, each cause once.
pub fn one_line(e: &anyhow::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if !parts.iter().any(|p| p.contains(&s)) {
            parts.push(s);
        }
    }
    parts.join(": ").replace('\n', " ")
}
