//! Which frames a receiver measures latency on.
//!
//! Every frame is counted (loss, duplicates, reordering) whatever this
//! says; only the latency may come from a sample. The user-space receivers
//! get an arrival time with every frame for free (the socket stamps it),
//! so they measure every frame. The in-kernel counter reads the clock
//! itself, and on the development VM that read is about a third of what
//! counting a frame costs (34 of ~140 ns, docs/BENCHMARKS.md): at millions
//! of frames per second it decides how fast the tester can receive. So
//! there, above [`SAMPLES_PER_S`] frames/s at a port, latency is measured
//! on every 2nd, 4th, 8th... frame of each stream (those whose sequence
//! number is a multiple), keeping at least that many samples per second.
//! Each sampled latency is exact; what sampling can miss is a single
//! frame's extreme between two samples.

use std::fmt;

/// Below this many frames/s at a port every frame's latency is measured;
/// above, at least this many per second are (RFC 2544 section 26.2 asks for
/// one tagged frame per trial; percentiles up to p99.9 need thousands).
pub const SAMPLES_PER_S: f64 = 1_000_000.0;

/// The largest sampling interval `--latency-every` takes.
pub const MAX_EVERY: u32 = 1024;

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LatencySampling {
    /// Every frame up to [`SAMPLES_PER_S`] frames/s at the port, above it
    /// the smallest power of two that keeps the samples at or below it.
    #[default]
    Auto,
    /// Every n-th frame of each stream (n a power of two, 1 = every frame).
    Every(u32),
}

impl LatencySampling {
    /// The sampling interval for a receiving port that takes `fps` frames/s
    /// (a power of two, at least 1).
    pub fn every(self, fps: f64) -> u32 {
        match self {
            LatencySampling::Every(n) => n,
            LatencySampling::Auto => {
                let ratio = (fps / SAMPLES_PER_S).ceil();
                if ratio.is_nan() || ratio <= 1.0 {
                    1
                } else {
                    (ratio.min(MAX_EVERY as f64) as u32).next_power_of_two()
                }
            }
        }
    }

    /// Parses `auto` or a power of two from 1 to [`MAX_EVERY`].
    pub fn parse(text: &str) -> Result<LatencySampling, String> {
        if text.eq_ignore_ascii_case("auto") {
            return Ok(LatencySampling::Auto);
        }
        match text.parse::<u32>() {
            Ok(n) if n.is_power_of_two() && n <= MAX_EVERY => Ok(LatencySampling::Every(n)),
            _ => Err(format!(
                "'{text}' is neither auto nor a power of two from 1 to {MAX_EVERY} (1: every frame)"
            )),
        }
    }
}

impl fmt::Display for LatencySampling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LatencySampling::Auto => f.write_str("auto"),
            LatencySampling::Every(n) => write!(f, "{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_keeps_a_million_samples_a_second_or_every_frame() {
        let auto = LatencySampling::Auto;
        assert_eq!(auto.every(0.0), 1);
        assert_eq!(auto.every(500_000.0), 1);
        assert_eq!(auto.every(1_000_000.0), 1);
        assert_eq!(auto.every(1_000_001.0), 2);
        assert_eq!(auto.every(3_000_000.0), 4);
        assert_eq!(auto.every(5_000_000.0), 8);
        assert_eq!(auto.every(14_880_952.0), 16);
        assert_eq!(auto.every(148_809_524.0), 256);
        assert_eq!(auto.every(1e12), MAX_EVERY);
        assert_eq!(auto.every(f64::NAN), 1);
        for fps in [1.5e6, 2.5e6, 7.2e6, 14.88e6, 100e6] {
            let n = auto.every(fps);
            assert!(n.is_power_of_two());
            assert!(fps / n as f64 <= SAMPLES_PER_S, "{fps}: every {n}");
            assert!(fps / n as f64 > SAMPLES_PER_S / 2.0, "{fps}: every {n}");
        }
        assert_eq!(LatencySampling::Every(4).every(10.0), 4);
    }

    #[test]
    fn parses_auto_and_powers_of_two_only() {
        assert_eq!(LatencySampling::parse("auto"), Ok(LatencySampling::Auto));
        assert_eq!(LatencySampling::parse("1"), Ok(LatencySampling::Every(1)));
        assert_eq!(
            LatencySampling::parse("1024"),
            Ok(LatencySampling::Every(1024))
        );
        for bad in ["0", "3", "2048", "-1", "x", ""] {
            let e = LatencySampling::parse(bad).unwrap_err();
            assert!(e.contains("power of two"), "{bad}: {e}");
        }
    }
}
