//! Test methods: the search logic that decides which trials to run.
//!
//! Methods are pure: they never open a socket or read a clock. They ask a
//! [`TrialRunner`] to run constant-rate trials and decide from the results
//! what to try next. The CLI implements [`TrialRunner`] on top of the engine;
//! tests (and dry runs) use the [`sim::SimulatedDut`].

pub mod back_to_back;
pub mod cpu_target;
pub mod frame_loss;
pub mod latency;
pub mod mlrsearch;
pub mod sim;
pub mod spec;
pub mod throughput;

pub use cpu_target::{find_cpu_target, CpuTargetConfig, CpuTargetConfigError, CpuTargetProgress};
pub use throughput::{
    find_throughput, relative_width, ConfigError, Progress, ThroughputConfig, MAX_TRIALS,
};

use linerate_results::{TrialResult, TrialSpec};

/// Runs one trial; implemented by the engine adapter in the CLI, and by a
/// simulated DUT in tests.
pub trait TrialRunner {
    type Error;
    fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, Self::Error>;
}

impl<R: TrialRunner + ?Sized> TrialRunner for &mut R {
    type Error = R::Error;
    fn run(&mut self, spec: &TrialSpec) -> Result<TrialResult, Self::Error> {
        (**self).run(spec)
    }
}
