//! `--pcap FILE`: the first frames of each trial as the receiving port got
//! them, written as a pcap file (nanosecond timestamps, Ethernet) that
//! Wireshark and tcpdump read.
//!
//! Only receivers that see the frames in user space can sample them (the
//! socket engines af_packet and af_xdp); the xdp engine counts test frames
//! in the kernel and hands none up. One capture per process, installed by
//! the CLI before the first trial; the receive loop offers it each frame.
//! Past the per-trial limit an offer costs one atomic load.

use linerate_wire::MacAddr;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};

/// Bytes of a frame kept at most (pcap's customary snap length).
const SNAPLEN: u32 = 65_535;

/// A pcap file being written, before it is bound to a port.
pub struct Capture {
    out: Mutex<BufWriter<File>>,
    limit: usize,
}

impl Capture {
    /// Creates `path` with the pcap header; at most `frames_per_trial`
    /// frames of each trial will be written.
    pub fn create(path: &Path, frames_per_trial: usize) -> std::io::Result<Capture> {
        let mut out = BufWriter::new(File::create(path)?);
        // Magic for nanosecond timestamps, version 2.4, UTC, snaplen, Ethernet.
        out.write_all(&0xa1b2_3c4d_u32.to_ne_bytes())?;
        out.write_all(&2u16.to_ne_bytes())?;
        out.write_all(&4u16.to_ne_bytes())?;
        out.write_all(&0i32.to_ne_bytes())?;
        out.write_all(&0u32.to_ne_bytes())?;
        out.write_all(&SNAPLEN.to_ne_bytes())?;
        out.write_all(&1u32.to_ne_bytes())?;
        out.flush()?;
        Ok(Capture {
            out: Mutex::new(out),
            limit: frames_per_trial,
        })
    }
}

/// The installed capture, bound to the receiving port's MAC.
struct Active {
    capture: Capture,
    port: MacAddr,
    taken: AtomicUsize,
    written: AtomicU64,
}

static ACTIVE: OnceLock<Active> = OnceLock::new();

/// Samples the frames port `port` (by its MAC) receives from now on.
/// Returns false if a capture was installed already.
pub fn install(capture: Capture, port: MacAddr) -> bool {
    ACTIVE
        .set(Active {
            capture,
            port,
            taken: AtomicUsize::new(0),
            written: AtomicU64::new(0),
        })
        .is_ok()
}

/// Frames written so far.
pub fn frames_written() -> u64 {
    ACTIVE
        .get()
        .map_or(0, |a| a.written.load(Ordering::Relaxed))
}

fn active_for(port: MacAddr) -> Option<&'static Active> {
    ACTIVE.get().filter(|a| a.port == port)
}

/// A trial's receive loop on `port` starts: its first frames are sampled.
pub(crate) fn trial_starts(port: MacAddr) {
    if let Some(a) = active_for(port) {
        a.taken.store(0, Ordering::Relaxed);
    }
}

/// A frame arrived on `port` at `arrival_ns` (CLOCK_REALTIME).
#[inline]
pub(crate) fn offer(port: MacAddr, frame: &[u8], arrival_ns: u64) {
    let Some(a) = active_for(port) else { return };
    if a.taken.load(Ordering::Relaxed) >= a.capture.limit {
        return;
    }
    a.taken.fetch_add(1, Ordering::Relaxed);
    let kept = frame.len().min(SNAPLEN as usize);
    let mut out = a.capture.out.lock().unwrap_or_else(|e| e.into_inner());
    let record = [
        ((arrival_ns / 1_000_000_000) as u32).to_ne_bytes(),
        ((arrival_ns % 1_000_000_000) as u32).to_ne_bytes(),
        (kept as u32).to_ne_bytes(),
        (frame.len() as u32).to_ne_bytes(),
    ];
    // A full disk must not stop the measurement: the frame is skipped.
    if out.write_all(record.as_flattened()).is_ok() && out.write_all(&frame[..kept]).is_ok() {
        a.written.fetch_add(1, Ordering::Relaxed);
    }
}

/// Writes out what is buffered (the CLI calls it when the run ends).
pub fn flush() {
    if let Some(a) = ACTIVE.get() {
        let _ = a
            .capture
            .out
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .flush();
    }
}

/// A trial's receive loop on `port` ended: what it sampled reaches the file.
pub(crate) fn trial_ends(port: MacAddr) {
    if let Some(a) = active_for(port) {
        let _ = a
            .capture
            .out
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .flush();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_pcap_wireshark_reads() {
        let path = std::env::temp_dir().join(format!("lr-capture-{}.pcap", std::process::id()));
        let capture = Capture::create(&path, 2).unwrap();
        let port = MacAddr([2, 0, 0, 0, 0, 9]);
        assert!(install(capture, port));
        trial_starts(port);
        let frame = [0xabu8; 60];
        offer(MacAddr([2, 0, 0, 0, 0, 1]), &frame, 5); // another port: not sampled
        offer(port, &frame, 1_700_000_000_123_456_789);
        offer(port, &frame[..42], 1_700_000_001_000_000_000);
        offer(port, &frame, 1_700_000_002_000_000_000); // past the limit
        trial_ends(port);
        trial_starts(port);
        offer(port, &frame, 1_700_000_003_000_000_000);
        trial_ends(port);
        assert_eq!(frames_written(), 3);

        let bytes = std::fs::read(&path).unwrap();
        let word = |at: usize| u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!(word(0), 0xa1b2_3c4d);
        assert_eq!(word(20), 1, "Ethernet");
        // First record: seconds, nanoseconds, kept length, original length.
        assert_eq!(
            (word(24), word(28), word(32), word(36)),
            (1_700_000_000, 123_456_789, 60, 60)
        );
        assert_eq!(bytes.len(), 24 + 3 * 16 + 60 + 42 + 60);
        std::fs::remove_file(&path).unwrap();
    }
}
