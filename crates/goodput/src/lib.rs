//! TCP and HTTP goodput through the DUT, measured with the kernel's own TCP
//! stack (what the LANCOM techpapers measure with iperf3 and nginx + siege,
//! Tables 12 to 15, and the LanTraffic datasheet's TCP rows).
//!
//! The packet tests emulate hosts in user space; these tests need real TCP
//! endpoints, so [`hosts`] gives the tester namespaces kernel addresses for
//! the time of a run and removes them afterwards.
//!
//! How namespaces are used: a socket belongs to the network namespace it was
//! created in, for its whole life, whichever thread later reads or writes
//! it. So linerate enters a tester namespace (`setns`, on the calling thread
//! only) just long enough to create and connect or bind a socket, returns to
//! its own namespace, and moves data on ordinary threads (TCP) or tokio
//! tasks (HTTP). No fork, and one process drives both sides.
//!
//! Modules: `netns` (entering a namespace, running `ip`), `hosts` (kernel
//! addresses on the tester sides, IPv6 on the path), `port_state` (what a
//! moved port had, to put back), `moved_ports` (records that put back the
//! ports of a killed run), `tcp` (parallel streams), `http` (built-in
//! HTTP/1.1 server and clients), `nginx` (a real nginx as the server),
//! `record` (the measurements, serde), `report` (the tables).

pub mod hosts;
pub mod http;
pub mod moved_ports;
pub mod netns;
pub mod nginx;
pub mod port_state;
pub mod record;
pub mod report;
pub mod tcp;

pub use record::{Direction, Family, HttpRecord, HttpRun, StreamRecord, TcpRecord, TcpRun};

use std::net::SocketAddr;

/// Errors of a goodput run; each message is one line naming the problem and
/// what to do.
#[derive(Debug, thiserror::Error)]
pub enum GoodputError {
    /// Bad input or environment (exit 2 in the CLI).
    #[error("{0}")]
    Setup(String),
    /// The DUT did not let a TCP connection through (a blocked port, no
    /// route): the test ran and failed.
    #[error("no TCP connection through the DUT to {addr} ({why}): the DUT drops or rejects TCP port {port}, or does not route to {ip}; open the port in the DUT's filter or fix its routing")]
    NoConnection {
        addr: SocketAddr,
        port: u16,
        ip: std::net::IpAddr,
        why: String,
    },
    /// Connections came up but no payload arrived.
    #[error("{0}")]
    NoData(String),
    #[error("{what}: {error}")]
    Io { what: String, error: std::io::Error },
}

/// A namespace that could not be entered, in the words goodput's
/// `in_netns` always used.
impl From<linerate_helper::NetnsError> for GoodputError {
    fn from(e: linerate_helper::NetnsError) -> GoodputError {
        use linerate_helper::NetnsStep;
        match e.step {
            NetnsStep::Open => GoodputError::Setup(format!(
                "network namespace {} does not exist: is the lab up ('linerate lab status')?",
                e.name_or_what()
            )),
            NetnsStep::Home => GoodputError::io("opening linerate's own namespace", e.error),
            NetnsStep::Enter => GoodputError::io(format!("entering {}", e.what), e.error),
        }
    }
}

impl GoodputError {
    pub(crate) fn io(what: impl Into<String>, error: std::io::Error) -> GoodputError {
        GoodputError::Io {
            what: what.into(),
            error,
        }
    }

    /// True when the DUT, not the input, made the run fail.
    pub fn is_dut_failure(&self) -> bool {
        matches!(
            self,
            GoodputError::NoConnection { .. } | GoodputError::NoData(_)
        )
    }
}

/// One end of the measured path: the namespace its sockets are made in
/// (None: linerate's own) and the kernel address they use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    pub netns: Option<String>,
    pub ip: std::net::IpAddr,
}
