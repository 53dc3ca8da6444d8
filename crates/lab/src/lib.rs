//! The linerate lab: a test bed made of Linux network namespaces on one machine.
//!
//! ```text
//!   lr-<name>-a           lr-<name>-dut                   lr-<name>-b
//!  +-----------+    +-------------------------------+    +-----------+
//!  |        a0 |----| dut-a                   dut-b |----| b0        |
//!  |   (no IP) |veth| 198.18.0.1/24   198.19.0.1/24 |veth| (no IP)   |
//!  +-----------+    |   ip_forward=1: Linux router  |    +-----------+
//!  tester port A    +-------------------------------+    tester port B
//!  198.18.0.2 (in linerate)                     198.19.0.2 (in linerate)
//! ```
//!
//! The tester namespaces carry no kernel address: linerate emulates the
//! tester hosts in user space (it answers ARP itself), so the kernel of a
//! tester namespace never answers or sends anything that would disturb frame
//! counts. Addresses follow RFC 2544 Appendix C (198.18.0.0/15).
//!
//! Modules: `netns` runs commands and manages namespaces, `lab` builds
//! the topology, `placement` keeps the DUT's forwarding on its own CPU,
//! `status` reports the labs present, `scenario` configures the DUT as the
//! reference reports' test cases (NAT, ACLs, routes, tunnels, XDP).
//! Beneath them stand small leaves that several of them share, so none has
//! to import another for a helper: `names` (what namespaces and interfaces
//! are called), `sides` (the two sides' interfaces and addresses), `link`
//! (reading an interface from the kernel), `stop` (a caller's stop request
//! between set-up steps) and `text` (numbers as messages write them).

pub mod backlog;
mod lab;
pub mod layout;
mod link;
mod lock;
mod names;
mod napi_owner;
pub use lock::{lock_port, LabLock};
mod netns;
mod placement;
pub mod scenario;
mod sides;
mod status;
mod stop;
mod text;
mod wire;

pub use lab::{down_all, down_lab, down_matching, leftovers, DownAll, Lab, LabPort};
pub use names::temporary_name;
pub use placement::{
    raise_receive, tester_cpus, tester_receive, NapiThread, Placement, PlacementState,
    RaisedReceive, DEFAULT_RING, TESTER_NAPI_PRIORITY, VETH_RING,
};
pub use status::{status, LabStatus, PortStatus};
pub use wire::{Wire, WIRE_IP_A, WIRE_IP_B};

/// Every namespace the lab makes starts with this, so `down_all` can find
/// them again after a crash.
pub const PREFIX: &str = "lr-";

/// Errors of the lab. Each message is one line naming the problem and the fix.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    #[error("not running as root: the lab creates network namespaces; run with sudo")]
    NotRoot,
    #[error("iproute2 not found: install it with 'apt-get install iproute2'")]
    IprouteMissing,
    #[error(
        "invalid lab name '{0}': use 1 to 12 characters from a-z, 0-9, '_' and '-' (e.g. 'lab1')"
    )]
    InvalidName(String),
    #[error(
        "invalid namespace prefix '{0}': it must start with '{PREFIX}' so that only linerate's namespaces are removed"
    )]
    InvalidPrefix(String),
    #[error(
        "a lab named '{0}' already exists: remove it with 'linerate lab down --lab-name {0}' or pick another --lab-name"
    )]
    Exists(String),
    #[error(
        "no lab named '{name}' (namespace {missing} is missing): create it with 'linerate lab up --lab-name {name}'"
    )]
    NotFound { name: String, missing: String },
    #[error(
        "lab '{name}' is in use by another linerate run ({holder}): wait for it to end, or use another lab (--lab-name)"
    )]
    InUse { name: String, holder: String },
    #[error(
        "tester port {port} is in use by another linerate run ({holder}): wait for it to end, or use other ports"
    )]
    PortInUse { port: String, holder: String },
    /// `what`: "lab 'NAME'" or "tester port 'IF'".
    #[error("could not lock {what}: {error}")]
    Lock { what: String, error: String },
    #[error(
        "lab '{name}' is incomplete ({detail}): remove it with 'linerate lab down --lab-name {name}' and create it again"
    )]
    Broken { name: String, detail: String },
    #[error("could not run '{command}': {error}; check that the program is installed")]
    Spawn { command: String, error: String },
    #[error("command '{command}' failed: {stderr}")]
    Command { command: String, stderr: String },
    #[error("scenario '{scenario}' is not in effect: {detail}")]
    NotInEffect { scenario: String, detail: String },
    #[error("scenario '{scenario}': {reason}")]
    Unavailable { scenario: String, reason: String },
    #[error(
        "unexpected output from '{command}': {detail}; the installed iproute2 may be too old: install a current one with 'apt-get install iproute2'"
    )]
    Parse { command: String, detail: String },
    /// The caller asked to stop while lab `name` was built or a scenario
    /// applied to it ([`Lab::up_until`], [`scenario::Scenario::apply_until`]).
    #[error("lab '{name}' was not set up (stopped half-way; what was made is removed)")]
    Interrupted { name: String },
}

/// Checks that the lab can be built here: root, and iproute2 present.
/// Call it before anything else to get one clear message instead of a
/// failing command.
pub fn check_environment() -> Result<(), LabError> {
    if !nix::unistd::geteuid().is_root() {
        return Err(LabError::NotRoot);
    }
    netns::ip_path()?;
    Ok(())
}
