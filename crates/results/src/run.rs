//! Where and how a run was made: the header every report shares
//! ([`RunInfo`], flattened into each report) and where the tester and the
//! device ran ([`Placement`]).

use serde::{Deserialize, Serialize};

/// Where and how a run was made: the header every report shares
/// (flattened into it, so its keys stand at the report's top level).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunInfo {
    pub linerate_version: String,
    /// What was tested, in the report's words; the table's title.
    #[serde(default)]
    pub description: String,
    /// RFC 3339 UTC time the run started.
    pub started_at: String,
    /// "lab" or "external". (Defaults: cpu-target reports stored before
    /// they carried the whole header lack these four.)
    #[serde(default)]
    pub setup: String,
    #[serde(default)]
    pub port_a: String,
    #[serde(default)]
    pub port_b: String,
    #[serde(default)]
    pub line_speed_bps: u64,
    pub engine: String,
    #[serde(default)]
    pub placement: Option<Placement>,
    /// The test frames' IP version (RFC 5180 for IPv6).
    #[serde(default)]
    pub ip_version: linerate_wire::IpVersion,
    /// The 802.1Q tag of the test frames, when they carried one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vlan: Option<linerate_wire::VlanTag>,
    /// `--ipsec`: the tunnel to the gateway the run measured through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipsec: Option<crate::ipsec::IpsecRun>,
}

#[cfg(test)]
impl RunInfo {
    /// A lab run's header for the reporters' tests.
    pub(crate) fn test_lab(description: &str, engine: &str) -> RunInfo {
        RunInfo {
            linerate_version: "0".into(),
            description: description.into(),
            setup: "lab".into(),
            port_a: "a".into(),
            port_b: "b".into(),
            line_speed_bps: 10_000_000_000,
            engine: engine.into(),
            ..Default::default()
        }
    }
}

/// Where the tester and the device ran (lab only), so readers can judge the figures.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Placement {
    pub tester_cpus: Vec<usize>,
    pub dut_cpus: Vec<usize>,
    /// True when tester and DUT packet processing shared a core.
    pub shared_core: bool,
    /// One sentence for the report.
    pub note: String,
    /// Frames each crossing between the tester's CPUs and the DUT's holds
    /// (the queue that plays the NICs' receive rings); absent in records
    /// made before the lab had deep queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring: Option<u32>,
}
