//! What a run records about the lab scenario the DUT was configured with
//! (`--scenario`), and the outer side of a tunnel.

use serde::{Deserialize, Serialize};

/// The scenario of one run, and the evidence that it was in effect.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ScenarioRecord {
    /// As given, e.g. "wan-lan+acl:12".
    pub spec: String,
    /// The report title's sentence.
    pub description: String,
    /// What forwarded the traffic (kernel, XDP, a tunnel's implementation).
    pub data_path: String,
    /// What was read back from the kernel after configuring it.
    pub checks: Vec<String>,
    /// What the traffic showed after the run (NAT seen, counters grown).
    #[serde(default)]
    pub traffic_checks: Vec<String>,
    /// Tunnels: the rate on the WAN link for each frame size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outer: Vec<OuterRate>,
}

/// The throughput of one frame size as the WAN link carries it, tunnelled.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OuterRate {
    /// Inner frame size (the test frame), FCS included.
    pub frame_size: u16,
    /// The frame on the WAN link after encapsulation, FCS included.
    pub outer_frame_size: u16,
    /// Throughput frames/s (the same count inside and outside).
    pub throughput_fps: f64,
    /// The throughput in Mbit/s counting the outer frames with FCS.
    pub outer_mbps_l2: f64,
    /// The same counting preamble and inter-frame gap.
    pub outer_mbps_l1: f64,
}

impl OuterRate {
    pub fn new(frame_size: u16, outer_frame_size: u16, throughput_fps: f64) -> OuterRate {
        let mbps = |bytes: f64| throughput_fps * bytes * 8.0 / 1e6;
        OuterRate {
            frame_size,
            outer_frame_size,
            throughput_fps,
            outer_mbps_l2: mbps(outer_frame_size as f64),
            outer_mbps_l1: mbps(
                outer_frame_size as f64 + linerate_wire::units::PREAMBLE_AND_GAP as f64,
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outer_rates_count_the_outer_frame() {
        // 100,000 fps of 1518-byte frames tunnelled in VXLAN: 1568 bytes outside.
        let r = OuterRate::new(1518, 1568, 100_000.0);
        assert!((r.outer_mbps_l2 - 1254.4).abs() < 1e-6, "{r:?}");
        assert!((r.outer_mbps_l1 - 1270.4).abs() < 1e-6, "{r:?}");
    }
}
