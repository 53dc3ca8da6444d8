//! linerate's in-kernel parts: XDP programs written in C (`bpf/*.bpf.c`),
//! compiled with clang when the crate builds, embedded in the binary and
//! loaded with libbpf-rs.
//!
//! - [`generator`]: builds and stamps test frames inside the kernel and
//!   sends them with `BPF_PROG_RUN` in live-frames mode (no socket, no copy
//!   from user space): the `xdp` engine's transmitter.
//! - [`counter`]: counts test frames per stream at the receiving port's XDP
//!   hook (sequence gaps, duplicates, reordering, latency histogram) and
//!   drops them there; everything else goes on to the stack.
//! - [`router`]: the lab DUT's XDP data plane (`xdp-router` scenario):
//!   `bpf_fib_lookup` + `bpf_redirect`.
//! - [`xsk`]: the one-line program that hands a port's frames to its AF_XDP
//!   sockets.
//!
//! This crate only loads programs and reads maps. Attaching happens by
//! interface index, which the kernel resolves in the calling thread's network
//! namespace: callers enter the port's namespace first (linerate-port's
//! `netns::in_netns`).

pub mod counter;
pub mod generator;
pub mod nic_queue;
pub mod router;
pub mod tx_watch;
pub mod vlan_port;
pub mod xsk;

/// Errors name what failed and what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    #[error("loading linerate's XDP program '{program}' failed: {source}; the xdp and af_xdp engines need root and a kernel with BPF and XDP (5.18 or later); use --engine af_packet otherwise")]
    Load {
        program: &'static str,
        #[source]
        source: libbpf_rs::Error,
    },
    #[error("attaching XDP program '{program}' to '{ifname}' failed: {source}; another XDP program may be attached (see 'ip link show {ifname}'), or the driver lacks XDP; use --engine af_packet")]
    Attach {
        program: &'static str,
        ifname: String,
        #[source]
        source: libbpf_rs::Error,
    },
    #[error("{what} failed: {source}")]
    Map {
        what: &'static str,
        #[source]
        source: libbpf_rs::Error,
    },
}

/// Opens and loads one embedded BPF object. `configure` may size maps
/// before the object is loaded into the kernel.
pub(crate) fn load(
    program: &'static str,
    bytes: &[u8],
    configure: impl FnOnce(&mut libbpf_rs::OpenObject) -> Result<(), libbpf_rs::Error>,
) -> Result<libbpf_rs::Object, BpfError> {
    let err = |source| BpfError::Load { program, source };
    // LINERATE_BPF_LOG=1 prints libbpf's messages, the verifier's log among them.
    // Otherwise libbpf stays quiet: errors reach the user as one line.
    if std::env::var_os("LINERATE_BPF_LOG").is_some() {
        fn print(_: libbpf_rs::PrintLevel, msg: String) {
            eprint!("{msg}");
        }
        libbpf_rs::set_print(Some((libbpf_rs::PrintLevel::Debug, print)));
    } else {
        libbpf_rs::set_print(None);
    }
    let mut open = libbpf_rs::ObjectBuilder::default()
        .open_memory(bytes)
        .map_err(err)?;
    configure(&mut open).map_err(err)?;
    open.load().map_err(err)
}

/// A map the program's C source defines (a missing one is a build bug).
pub(crate) fn map<'a>(obj: &'a libbpf_rs::Object, name: &str) -> libbpf_rs::Map<'a> {
    use libbpf_rs::MapCore;
    obj.maps()
        .find(|m| m.name() == name)
        .unwrap_or_else(|| panic!("the BPF object defines no map {name}"))
}

/// The first `words` u64 words of `map[key]` (zeros where the value is
/// shorter): how user space reads the programs' counters.
pub(crate) fn read_words(
    map: &libbpf_rs::Map<'_>,
    key: u32,
    words: usize,
    what: &'static str,
) -> Result<Vec<u64>, BpfError> {
    use libbpf_rs::MapCore;
    let v = map
        .lookup(&key.to_ne_bytes(), libbpf_rs::MapFlags::ANY)
        .map_err(|source| BpfError::Map { what, source })?
        .unwrap_or_default();
    let mut out: Vec<u64> = v
        .chunks_exact(8)
        .take(words)
        .map(|c| u64::from_ne_bytes(c.try_into().expect("8 bytes")))
        .collect();
    out.resize(words, 0);
    Ok(out)
}

/// The bytes of a `#[repr(C)]` plain-data value, as a kernel map expects.
pub(crate) fn as_bytes<T: Copy>(v: &T) -> &[u8] {
    // SAFETY: callers pass #[repr(C)] plain data without implicit padding
    // (checked by a size assertion next to each type), so every byte is
    // initialised; the slice borrows v and lives no longer.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), std::mem::size_of::<T>()) }
}

/// For tests: says a test is skipped, or fails it under
/// `LINERATE_REQUIRE_ALL=1` (set by scripts/test.sh, as in CI, where a
/// skipped test is a failure).
#[doc(hidden)]
pub fn skip(reason: &str) {
    if std::env::var("LINERATE_REQUIRE_ALL").is_ok_and(|v| v == "1") {
        panic!("SKIPPED ({reason}); LINERATE_REQUIRE_ALL=1 makes every skip a failure");
    }
    eprintln!("SKIPPED ({reason})");
}

/// For tests: true when running as root; otherwise the test is skipped
/// (see [`skip`]). A load error as root is a failure, never a skip.
#[doc(hidden)]
pub fn root_or_skip(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return true;
    }
    skip(&format!("{test} needs root"));
    false
}

/// The embedded object files, one per `bpf/NAME.bpf.c`.
macro_rules! bpf_object {
    ($name:literal) => {
        include_bytes!(concat!(env!("OUT_DIR"), "/", $name, ".bpf.o"))
    };
}
pub(crate) use bpf_object;
