//! Entering a network namespace for the time it takes to open a socket
//! (linerate-helper's [`in_netns`], its errors worded as [`PortError`]s).
//!
//! A socket stays in the namespace it was created in, so linerate opens each
//! lab port inside the port's namespace and then returns to its own: one
//! process drives ports in several namespaces.

use crate::PortError;
pub use linerate_helper::in_netns;

/// Runs `f` in namespace `netns` when one is given, else in the current one.
pub fn maybe_in_netns<T>(
    netns: Option<&str>,
    f: impl FnOnce() -> Result<T, PortError>,
) -> Result<T, PortError> {
    linerate_helper::maybe_in_netns(netns, f)
}
