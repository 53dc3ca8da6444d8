//! Test frames and their arithmetic. Pure functions, no I/O.

pub mod units;
