//! `--max-burst`: never panics on any text; frames parse back; a time is
//! that long at the burst rate.

use super::*;

fn max_burst_frames(text: &str, burst_fps: f64) -> Result<u64> {
    MaxBurst::parse(text).map(|m| m.frames(burst_fps))
}
use crate::test_support::{config, text};
use proptest::prelude::*;

proptest! {
    #![proptest_config(config())]

    #[test]
    fn max_burst_never_panics(t in text(), fps in prop_oneof![0.0..1e9f64, Just(f64::NAN), Just(f64::INFINITY), Just(-1.0)]) {
        let _ = max_burst_frames(&t, fps);
    }

    #[test]
    fn max_burst_round_trips(n: u64, ms in 0u64..100_000_000, fps in 1.0..1e8f64) {
        prop_assert_eq!(max_burst_frames(&n.to_string(), fps).unwrap(), n);
        let t = humantime::format_duration(std::time::Duration::from_millis(ms)).to_string();
        let want = (ms as f64 / 1000.0 * fps).round() as u64;
        prop_assert_eq!(max_burst_frames(&t, fps).unwrap(), want);
    }
}
