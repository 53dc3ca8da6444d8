//! ESP (RFC 4303) as the tester's data path needs it: one security
//! association per direction, every frame encrypted with its own sequence
//! number and IV as it is sent, and on receive the ICV verified, replays
//! refused and the clear packet handed back to be counted.

pub mod suite;

pub use suite::{EspSuite, SuiteError};
