//! What a test measured, and how it is reported.
//!
//! `model` holds the plain data that flows from the engine (one
//! [`TrialResult`] per trial) through the methods (one
//! [`ThroughputResult`] per frame size, in `throughput`) to the reporters. Reporters only
//! format; they never compute a measurement.

pub mod calibration;
pub mod cpu_target;
pub mod ipsec;
pub mod latency;
pub mod methods;
pub mod mlrsearch;
pub mod model;
pub mod report;
pub mod rounds;
pub mod run;
pub mod scenario;
pub mod throughput;
pub mod tunnels;

pub use ipsec::TunnelFrames;
pub use latency::{LatencyPoint, LatencyReport, LatencyResult};
pub use model::*;
pub use run::Placement;
pub use throughput::{Rfc2544Report, ThroughputResult};
