//! Errors a tester's user can act on: each one line, naming what is wrong
//! and how to write it.

/// Configuration that cannot be used (an identity, a traffic selector, a
/// pre-shared key file), with how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);
