//! Properties of the /proc/stat and /proc/<pid>/stat parsing: arbitrary
//! text never panics, counters near u64::MAX do not overflow, and a
//! written line reads back.

use super::*;
use crate::test_support::{config, text};
use proptest::prelude::*;

fn stat_line() -> impl Strategy<Value = String> {
    (0usize..4, proptest::collection::vec(any::<u64>(), 0..12)).prop_map(|(cpu, v)| {
        let fields: Vec<String> = v.iter().map(u64::to_string).collect();
        format!("cpu{cpu} {}", fields.join(" "))
    })
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn proc_stat_never_panics(lines in proptest::collection::vec(prop_oneof![text(), stat_line()], 0..6)) {
        let text = lines.join("\n");
        if let Ok(t) = CpuTimes::parse(&text, &[0, 1]) {
            prop_assert!(t.busy <= t.total, "{text:?} -> {t:?}");
            prop_assert!(t.stolen <= t.total, "{text:?} -> {t:?}");
            let share = t.busy_share_since(&CpuTimes::default());
            prop_assert!((0.0..=1.0).contains(&share), "{share}");
            let stolen = t.stolen_share_since(&CpuTimes::default());
            prop_assert!((0.0..=1.0).contains(&stolen), "{stolen}");
        }
        let _ = process_user_ticks(&text);
        for p in percentages(&text) {
            prop_assert!((0.0..=100.0).contains(&p));
        }
    }

    #[test]
    fn proc_stat_reads_back(v in proptest::collection::vec(0u64..1 << 40, 8..11)) {
        let fields: Vec<String> = v.iter().map(u64::to_string).collect();
        let text = format!("cpu  1 2 3 4 5 6 7 8\ncpu3 {}\n", fields.join(" "));
        let t = CpuTimes::parse(&text, &[3]).unwrap();
        prop_assert_eq!(t.busy, v[2] + v[5] + v[6]);
        prop_assert_eq!(t.stolen, v[7]);
        prop_assert_eq!(t.total, v[..8].iter().sum::<u64>());
    }

    #[test]
    fn process_ticks_read_back(name in "\\PC{0,16}", utime: u64) {
        let stat = format!("42 ({name}) S 1 2 3 4 5 6 7 8 9 10 {utime} 11 12 13");
        prop_assert_eq!(process_user_ticks(&stat), Some(utime));
    }
}

/// Found by `proc_stat_never_panics`: the sums overflowed (a panic in a
/// debug build, a wrapped busy share above 100 % in release).
#[test]
fn counters_near_the_top_saturate() {
    let max = u64::MAX;
    let text =
        format!("cpu0 {max} {max} {max} {max} {max} {max} {max} {max}\ncpu1 1 1 1 1 1 1 1 1");
    let t = CpuTimes::parse(&text, &[0, 1]).unwrap();
    assert_eq!((t.busy, t.total), (max, max));
}
