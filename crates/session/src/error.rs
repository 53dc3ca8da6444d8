//! The session layer's error: what went wrong, its causes, and its
//! [`Kind`] (fix the command, fix the machine, or the run failed).
//!
//! The library crates' own errors are kept as they are (a variant each,
//! reachable through [`std::error::Error::source`]), so a caller can
//! downcast to, say, `linerate_lab::LabError`. The binary prints an error
//! with [`crate::exit::one_line`]; the Python package raises it.

use std::fmt::Display;

/// What the user can do about an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The options, the scenario file or a value in them: fix the command.
    BadInput,
    /// The machine: not root, an interface or a program missing, a kernel
    /// feature missing, a lab or port in use, a file that cannot be written.
    Environment,
    /// Something broke during the run.
    Failed,
}

/// The error of everything in this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A problem found here; the message names it and the fix.
    #[error("{message}")]
    Message { kind: Kind, message: String },
    /// What was being done when `source` happened; of `source`'s kind.
    #[error("{context}")]
    Context {
        context: String,
        #[source]
        source: Box<Error>,
    },
    /// `source` with the kind its caller knows it to be (same message).
    #[error("{source}")]
    Kinded {
        kind: Kind,
        #[source]
        source: Box<Error>,
    },
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Lab(#[from] linerate_lab::LabError),
    #[error("{0}")]
    Port(#[from] linerate_port::PortError),
    #[error("{0}")]
    Bpf(#[from] linerate_bpf::BpfError),
    /// The engine's error, worded with the options that set what it
    /// names ([`engine_message`]); the engine's own text is its source.
    #[error("{}", engine_message(.0))]
    Engine(#[from] linerate_engine::EngineError),
    #[error("{0}")]
    Store(#[from] linerate_store::StoreError),
    #[error("{0}")]
    Goodput(#[from] linerate_goodput::GoodputError),
    #[error("{0}")]
    Calibration(#[from] linerate_results::calibration::CalibrationError),
    #[error("{0}")]
    Json(#[from] serde_json::Error),
    /// A value the user gave that a library crate rejected (a frame size,
    /// a rate, a MAC address, a scenario, a method's settings, ...).
    #[error("{0}")]
    Value(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error made here, of `kind`, with `message`.
    pub fn new(kind: Kind, message: impl Display) -> Error {
        Error::Message {
            kind,
            message: message.to_string(),
        }
    }

    /// `self` with `context` (what was being done) before its message.
    pub fn context(self, context: impl Display) -> Error {
        Error::Context {
            context: context.to_string(),
            source: Box::new(self),
        }
    }

    /// `self` as of `kind`, its message unchanged.
    pub fn with_kind(self, kind: Kind) -> Error {
        match self {
            Error::Message { message, .. } => Error::Message { kind, message },
            Error::Kinded { source, .. } => Error::Kinded { kind, source },
            other => Error::Kinded {
                kind,
                source: Box::new(other),
            },
        }
    }

    /// The last error of the chain: the first cause.
    pub fn root_cause(&self) -> &(dyn std::error::Error + 'static) {
        let mut cause: &(dyn std::error::Error + 'static) = self;
        while let Some(next) = cause.source() {
            cause = next;
        }
        cause
    }

    /// Which of [`Kind`] this is: chosen where the error was made; for a
    /// library crate's error, from its variant.
    pub fn kind(&self) -> Kind {
        use linerate_engine::EngineError as En;
        use linerate_lab::LabError as L;
        use Kind::*;
        match self {
            Error::Message { kind, .. } | Error::Kinded { kind, .. } => *kind,
            Error::Context { source, .. } => source.kind(),
            Error::Io(e) => io_kind(e),
            Error::Lab(e) => match e {
                L::InvalidName(_) | L::InvalidPrefix(_) => BadInput,
                L::NotRoot
                | L::IprouteMissing
                | L::Exists(_)
                | L::NotFound { .. }
                | L::InUse { .. }
                | L::PortInUse { .. }
                | L::Lock { .. }
                | L::Broken { .. }
                | L::Spawn { .. }
                | L::Unavailable { .. }
                | L::Parse { .. } => Environment,
                #[allow(unreachable_patterns)] // the lab may add variants
                _ => Failed,
            },
            Error::Port(e) => port_kind(e),
            Error::Bpf(e) => bpf_kind(e),
            Error::Engine(e) => match e {
                En::Port(e) => port_kind(e),
                En::Bpf(e) => bpf_kind(e),
                En::ArpTimeout { .. } => Environment,
                En::FrameTooSmall { .. }
                | En::FrameTooLarge { .. }
                | En::FrameTooLargeForEngine { .. }
                | En::EmptyTrial { .. }
                | En::TxThreads
                | En::TooManyTxThreads { .. }
                | En::TunnelsNotDealt { .. }
                | En::DropTestBidirectional
                | En::DropTestSourceRange
                | En::DropTestFamily(_)
                | En::TransformUnsupported { .. }
                | En::TunnelsInKernel { .. } => BadInput,
                #[allow(unreachable_patterns)]
                _ => Failed,
            },
            Error::Store(e) => {
                use linerate_store::StoreError as S;
                match e {
                    S::Open { .. } | S::TooNew { .. } => Environment,
                    S::NoSuchRun(_) => BadInput,
                    #[allow(unreachable_patterns)]
                    _ => Failed,
                }
            }
            Error::Goodput(e) => match e {
                linerate_goodput::GoodputError::Io { error, .. } => io_kind(error),
                _ => Failed,
            },
            Error::Calibration(e) => {
                use linerate_results::calibration::CalibrationError as C;
                match e {
                    C::Read { source, .. } | C::Write { source, .. } => io_kind(source),
                    C::Parse { .. } => Environment,
                }
            }
            Error::Json(_) => Failed,
            Error::Value(_) => BadInput,
        }
    }
}

/// The engine's error as its user reads it: the engine speaks of its
/// settings and the trial's values (a frame size, the xdp engine, a drop
/// test's source); here they are the options that set them. One line,
/// the problem and the fix, as every error of this crate.
pub fn engine_message(e: &linerate_engine::EngineError) -> String {
    use linerate_engine::EngineError as En;
    match e {
        En::ArpTimeout { .. } => format!("{e} with --gw-mac"),
        En::FrameTooSmall { min, .. } => format!("{e}; use --frame-size {min} or larger"),
        En::FrameTooLarge {
            frame,
            port,
            mtu,
            max,
        } => format!(
            "a {frame}-byte frame does not fit port {port} (MTU {mtu}, frames up to {max} bytes with FCS): use a smaller --frame-size or raise the MTU"
        ),
        En::FrameTooLargeForEngine { frame, engine, max } => format!(
            "the {engine} engine carries frames up to {max} bytes (with FCS), not {frame}: use --engine af_packet for larger frames"
        ),
        En::TxThreads => "--tx-threads above 1 with --ipsec deals the tunnels out to the threads (one thread encrypts an SA's frames): give --tunnels at least as many, or leave --tx-threads out".to_string(),
        En::TunnelsNotDealt { threads } => format!(
            "--tx-threads {threads} with --ipsec deals the tunnels out to the threads, and the flows do not spread the frames over the tunnels as linerate does: leave out --range on the address behind linerate, or --tx-threads"
        ),
        En::TooManyTxThreads { asked, max } => format!(
            "--tx-threads {asked} is more than the {max} streams the receiver counts per trial: use at most {max}"
        ),
        En::DropTestBidirectional => {
            "a drop test sends from port A only: leave out --bidirectional".to_string()
        }
        En::DropTestSourceRange => "--range src-ip rewrites the source address that marks a drop test's dropped half: vary another field (dst-ip, ports)".to_string(),
        En::DropTestFamily(source) => format!(
            "--drop-from {source} is not of the test frames' IP version: give an address of the same version as port A's"
        ),
        En::TunnelsInKernel { port } => format!(
            "port {port} is counted by the in-kernel counter, which counts streams, not tunnels: per-tunnel counts (--tunnels) need --receiver socket"
        ),
        other => other.to_string(),
    }
}

/// A file or device the machine lacks or refuses is the environment's
/// doing; any other I/O error is a failure of the run.
fn io_kind(e: &std::io::Error) -> Kind {
    use nix::libc::{EDQUOT, EISDIR, ENOSPC, ENOTDIR, EROFS};
    use std::io::ErrorKind as K;
    match e.kind() {
        K::NotFound | K::PermissionDenied | K::AlreadyExists => Kind::Environment,
        _ if matches!(
            e.raw_os_error(),
            Some(EROFS | ENOSPC | EDQUOT | EISDIR | ENOTDIR)
        ) =>
        {
            Kind::Environment
        }
        _ => Kind::Failed,
    }
}

fn port_kind(e: &linerate_port::PortError) -> Kind {
    use linerate_port::PortError as P;
    match e {
        P::NoSuchInterface(_)
        | P::InterfaceDown(_)
        | P::NoSuchNetns(_)
        | P::NotPermitted
        | P::Unsupported(_) => Kind::Environment,
        P::FrameTooLong { .. } => Kind::BadInput,
        _ => Kind::Failed,
    }
}

fn bpf_kind(e: &linerate_bpf::BpfError) -> Kind {
    match e {
        linerate_bpf::BpfError::Load { .. } | linerate_bpf::BpfError::Attach { .. } => {
            Kind::Environment
        }
        _ => Kind::Failed,
    }
}

/// The library crates' rejections of a value the user gave.
macro_rules! bad_values {
    ($($t:ty),* $(,)?) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Error {
                Error::Value(Box::new(e))
            }
        }
    )*};
}

bad_values!(
    linerate_wire::units::UnitError,
    linerate_wire::mix::MixError,
    linerate_wire::flows::FlowError,
    linerate_wire::ethernet::MacParseError,
    linerate_wire::encap::VlanParseError,
    linerate_lab::scenario::ScenarioError,
    linerate_method::ConfigError,
    linerate_method::mlrsearch::GoalError,
    linerate_method::back_to_back::BackToBackError,
    linerate_method::CpuTargetConfigError,
);

/// `.context(..)` and `.with_context(..)` on a `Result` whose error
/// becomes an [`Error`]: what anyhow's `Context` did here, kept to the
/// two methods this crate needs, because anyhow belongs in binaries and
/// this crate is a library whose callers match on [`Kind`]. The context
/// keeps the cause's kind; [`ResultExt::kind`] sets another.
pub trait ResultExt<T> {
    /// The error, with `context` (what was being done) before it.
    fn context(self, context: impl Display) -> Result<T>;
    /// As [`ResultExt::context`], the text made only on an error.
    fn with_context<C: Display>(self, context: impl FnOnce() -> C) -> Result<T>;
    /// The error, as of `kind` (where the caller knows better than the cause).
    fn kind(self, kind: Kind) -> Result<T>;
}

impl<T, E: Into<Error>> ResultExt<T> for std::result::Result<T, E> {
    fn context(self, context: impl Display) -> Result<T> {
        self.map_err(|e| e.into().context(context))
    }
    fn with_context<C: Display>(self, context: impl FnOnce() -> C) -> Result<T> {
        self.map_err(|e| e.into().context(context()))
    }
    fn kind(self, kind: Kind) -> Result<T> {
        self.map_err(|e| e.into().with_kind(kind))
    }
}

/// `Err(Error::new(Kind::KIND, format!(..)))`.
#[macro_export]
macro_rules! err {
    ($kind:ident, $($arg:tt)+) => {
        $crate::error::Error::new($crate::error::Kind::$kind, format!($($arg)+))
    };
}

/// Returns `Err(err!(KIND, ..))`.
#[macro_export]
macro_rules! bail {
    ($kind:ident, $($arg:tt)+) => {
        return Err($crate::error::err!($kind, $($arg)+))
    };
}

pub use crate::{bail, err};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exit::{is_closed_pipe, one_line};

    #[test]
    fn the_message_holds_every_context_and_cause_once() {
        let port = linerate_port::PortError::Io {
            what: "binding",
            ifname: "veth0".into(),
            source: std::io::Error::from_raw_os_error(nix::libc::ENODEV),
        };
        // The port's message holds its cause: the cause is not repeated.
        let e = Error::from(linerate_engine::EngineError::Port(port))
            .context("opening port A")
            .context("test 1 (rfc2544)");
        assert_eq!(
            one_line(&e),
            "test 1 (rfc2544): opening port A: binding on 'veth0' failed: No such device (os error 19)"
        );
        // A cause not in the message is added after it, once.
        let e: Result<()> = Err(std::io::Error::other("disk on fire")).context("writing x.json");
        assert_eq!(one_line(&e.unwrap_err()), "writing x.json: disk on fire");
        let e = err!(BadInput, "two\nlines").context("--sizes");
        assert_eq!(one_line(&e), "--sizes: two lines");
        // A kind set by the caller changes nothing in the message.
        let e = Error::from(std::io::Error::other("gone"))
            .with_kind(Kind::Environment)
            .context("reading a");
        assert_eq!(one_line(&e), "reading a: gone");
        assert_eq!(e.kind(), Kind::Environment);
    }

    #[test]
    fn engine_errors_name_the_options_here_and_none_in_the_engine() {
        use linerate_engine::EngineError as En;
        let v4: std::net::IpAddr = "198.18.0.1".parse().unwrap();
        let cases = [
            (
                En::ArpTimeout {
                    port: "a0".into(),
                    gateway: v4,
                    resolution: "ARP",
                    secs: 3,
                },
                "gateway 198.18.0.1 did not answer ARP on port a0 within 3 s: check the DUT's address and cabling, or give its MAC with --gw-mac",
            ),
            (
                En::FrameTooSmall {
                    frame: 64,
                    encap: "IPv6".into(),
                    min: 78,
                },
                "a 64-byte frame cannot carry IPv6 test frames: the smallest is 78 bytes; use --frame-size 78 or larger",
            ),
            (
                En::FrameTooLarge {
                    frame: 9000,
                    port: "b0".into(),
                    mtu: 1500,
                    max: 1518,
                },
                "a 9000-byte frame does not fit port b0 (MTU 1500, frames up to 1518 bytes with FCS): use a smaller --frame-size or raise the MTU",
            ),
            (
                En::FrameTooLargeForEngine {
                    frame: 9000,
                    engine: "af_xdp".into(),
                    max: 3818,
                },
                "the af_xdp engine carries frames up to 3818 bytes (with FCS), not 9000: use --engine af_packet for larger frames",
            ),
            (
                En::TxThreads,
                "--tx-threads above 1 with --ipsec deals the tunnels out to the threads (one thread encrypts an SA's frames): give --tunnels at least as many, or leave --tx-threads out",
            ),
            (
                En::TooManyTxThreads { asked: 9, max: 8 },
                "--tx-threads 9 is more than the 8 streams the receiver counts per trial: use at most 8",
            ),
            (
                En::DropTestBidirectional,
                "a drop test sends from port A only: leave out --bidirectional",
            ),
            (
                En::DropTestSourceRange,
                "--range src-ip rewrites the source address that marks a drop test's dropped half: vary another field (dst-ip, ports)",
            ),
            (
                En::DropTestFamily(v4),
                "--drop-from 198.18.0.1 is not of the test frames' IP version: give an address of the same version as port A's",
            ),
            (
                En::TunnelsInKernel { port: "b0".into() },
                "port b0 is counted by the in-kernel counter, which counts streams, not tunnels: per-tunnel counts (--tunnels) need --receiver socket",
            ),
        ];
        for (engine, user) in cases {
            let own = engine.to_string();
            assert!(!own.contains("--"), "the engine names an option: {own}");
            let kind = match engine {
                En::ArpTimeout { .. } => Kind::Environment,
                _ => Kind::BadInput,
            };
            let e = Error::from(engine);
            assert_eq!(e.kind(), kind, "{own}");
            // Said once, in the options' words.
            assert_eq!(one_line(&e), user);
            assert_eq!(one_line(&e.context("test 1")), format!("test 1: {user}"));
        }
        // The engine's error stays the source a caller can downcast to.
        let e = Error::from(En::TxThreads);
        let source = std::error::Error::source(&e).and_then(|s| s.downcast_ref::<En>());
        assert!(matches!(source, Some(En::TxThreads)));
    }

    #[test]
    fn each_error_says_its_kind() {
        assert_eq!(err!(BadInput, "x").kind(), Kind::BadInput);
        assert_eq!(
            err!(Failed, "x")
                .context("y")
                .with_kind(Kind::Environment)
                .kind(),
            Kind::Environment
        );
        assert_eq!(
            Error::from(linerate_lab::LabError::NotRoot).kind(),
            Kind::Environment
        );
        assert_eq!(
            Error::from(linerate_lab::LabError::InvalidName("A".into()))
                .context("lab up")
                .kind(),
            Kind::BadInput
        );
        let bad_mac = "zz".parse::<linerate_wire::MacAddr>().unwrap_err();
        assert_eq!(Error::from(bad_mac).kind(), Kind::BadInput);
        let missing = std::io::Error::from(std::io::ErrorKind::NotFound);
        assert_eq!(Error::from(missing).kind(), Kind::Environment);
        let full = std::io::Error::from_raw_os_error(nix::libc::ENOSPC);
        assert_eq!(Error::from(full).kind(), Kind::Environment);
        let other = std::io::Error::other("x");
        assert_eq!(Error::from(other).kind(), Kind::Failed);
        assert_eq!(
            Error::from(linerate_engine::EngineError::Interrupted).kind(),
            Kind::Failed
        );
        // An option the engine cannot serve on that port: usage, exit 2.
        let kernel = linerate_engine::EngineError::TunnelsInKernel { port: "b0".into() };
        assert_eq!(Error::from(kernel).kind(), Kind::BadInput);
    }

    #[test]
    fn errors_cross_threads() {
        // The Python package hands a run's error from its worker thread.
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<Error>();
    }

    #[test]
    fn the_sessions_own_checks_say_bad_input() {
        let e = crate::ipsec::check_identity("", "--ipsec-id").unwrap_err();
        assert_eq!(e.kind(), Kind::BadInput, "{e}");
    }

    #[test]
    fn library_errors_stay_reachable_as_sources() {
        let e = Error::from(linerate_lab::LabError::NotRoot).context("lab up");
        let mut chain =
            std::iter::successors(Some(&e as &(dyn std::error::Error + 'static)), |c| {
                c.source()
            });
        assert!(chain.any(|c| matches!(
            c.downcast_ref::<linerate_lab::LabError>(),
            Some(linerate_lab::LabError::NotRoot)
        )));
        let epipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let e = Error::from(epipe)
            .context("printing")
            .with_kind(Kind::Failed)
            .context("test 2");
        assert!(is_closed_pipe(&e));
    }
}
