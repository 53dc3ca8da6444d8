//! `linerate overhead`: the frame size on the wire after encapsulation and
//! what a frame rate costs in Mbps on each side of the tunnel. Arithmetic
//! only (crates/wire/src/overhead.rs); nothing is sent.

use crate::error::{err, Result};
use crate::exit::Outcome;
use linerate_results::report;
use linerate_wire::overhead::{Auth, Encapsulation};
use linerate_wire::units::Layer;
use linerate_wire::FrameSize;
use serde::Serialize;

#[derive(Serialize)]
struct Row {
    inner_frame_size: u64,
    inner_l3_length: u64,
    outer_frame_size: u64,
    outer_l3_length: u64,
    added_bytes: u64,
    fps: f64,
    inner_mbps_l2: f64,
    outer_mbps_l2: f64,
    inner_mbps_l1: f64,
    outer_mbps_l1: f64,
}

/// An overhead calculation, checked: the encapsulation and the sizes
/// `linerate overhead` was given, as values.
#[derive(Debug, Clone)]
pub struct OverheadPlan {
    pub encapsulation: Encapsulation,
    /// The encapsulation as the table's heading says it.
    pub description: String,
    /// Frames per second, for the Mbps columns.
    pub fps: f64,
    /// The inner frames, one row each.
    pub sizes: Vec<FrameSize>,
    /// Print JSON instead of the table.
    pub json: bool,
}

pub fn run(plan: OverheadPlan) -> Result<Outcome> {
    let OverheadPlan {
        encapsulation: enc,
        description,
        fps,
        sizes,
        json,
    } = plan;
    let mbps = |fps: f64, bytes: u64| fps * bytes as f64 * 8.0 / 1e6;
    let rows: Vec<Row> = sizes
        .iter()
        .map(|f| {
            let l3 = f.l3() as usize;
            let (inner, outer) = (f.frame() as u64, enc.outer_frame(l3) as u64);
            Row {
                inner_frame_size: inner,
                inner_l3_length: l3 as u64,
                outer_frame_size: outer,
                outer_l3_length: enc.outer_l3(l3) as u64,
                added_bytes: outer - inner,
                fps,
                inner_mbps_l2: mbps(fps, inner),
                outer_mbps_l2: mbps(fps, outer),
                inner_mbps_l1: mbps(fps, inner + 20),
                outer_mbps_l1: mbps(fps, outer + 20),
            }
        })
        .collect();
    if json {
        match rows.as_slice() {
            [one] => outln!("{}", report::to_json(one)),
            many => outln!("{}", report::to_json(&many)),
        }
        return Ok(Outcome::Passed);
    }
    outln!("Encapsulation: {description}");
    outln!(
        "inner frame  inner IP  outer frame  outer IP  added   {} inner -> outer at {} frames/s",
        report::table::mbps(Layer::L2),
        report::thousands(fps.round() as u64)
    );
    for r in &rows {
        outln!(
            "{:>11} {:>9} {:>12} {:>9} {:>6}   {:>10.1} -> {:.1}",
            r.inner_frame_size,
            r.inner_l3_length,
            r.outer_frame_size,
            r.outer_l3_length,
            r.added_bytes,
            r.inner_mbps_l2,
            r.outer_mbps_l2
        );
    }
    outln!("Frame sizes include the 4-byte FCS; outer headers are IPv4.");
    Ok(Outcome::Passed)
}

pub fn parse_auth(text: &str, option: &str) -> Result<Auth> {
    Auth::parse(text).ok_or_else(|| {
        err!(BadInput, "{option} '{text}' is not an integrity algorithm linerate knows: use md5, sha1, sha256, sha384, sha512 or none")
    })
}

#[cfg(test)]
mod properties {
    use super::*;
    use crate::test_support::{config, text};
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(config())]

        /// Any text: no panic; what is accepted is a name of an algorithm,
        /// in any case, and each algorithm's name parses back to it.
        #[test]
        fn auth_names(t in prop_oneof![text(), "(?i)(none|md5|sha1|sha256|sha512)"]) {
            match parse_auth(&t, "--auth") {
                Ok(a) => prop_assert!(
                    ["none", "md5", "sha1", "sha256", "sha512"].contains(&t.to_ascii_lowercase().as_str()),
                    "{t:?} -> {a:?}"
                ),
                Err(e) => prop_assert!(e.to_string().starts_with("--auth '"), "{e}"),
            }
        }
    }
}
