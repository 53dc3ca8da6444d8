//! `--pcap FILE`: the first frames of each trial as the receiving port got
//! them, and the frames around each loss, written as a pcap file
//! (nanosecond timestamps, Ethernet) that Wireshark and tcpdump read.
//!
//! Around losses: the capture keeps the last [`AROUND`] test frames; when
//! a frame's sequence number jumps past the next one expected in its
//! stream (frames missing: lost, or late), it writes those kept frames,
//! the frame after the gap and the [`AROUND`] - 1 frames that follow, at
//! most [`MAX_GAPS`] times per trial. The gap is between two frames of the
//! file whose signatures' sequence numbers are not consecutive.
//!
//! Only receivers that see the frames in user space can sample them (the
//! socket engines af_packet and af_xdp); the xdp engine counts test frames
//! in the kernel and hands none up. One capture at a time per process,
//! installed by a run before its first trial and removed when the run
//! drops its [`Installed`] (a run after it, e.g. the next scenario or the
//! next call from Python, installs its own); the receive loop offers it each
//! frame. Without a capture an offer costs one atomic load.

use linerate_wire::MacAddr;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// Bytes of a frame kept at most (pcap's customary snap length).
const SNAPLEN: u32 = 65_535;
/// Test frames written before and after each gap.
pub const AROUND: usize = 4;
/// Gaps written per trial at most (a lossy trial has thousands).
pub const MAX_GAPS: usize = 10;

/// The frames before a gap, and how many after one are still due.
#[derive(Default)]
struct AroundLoss {
    /// The last test frames seen (arrival time, bytes), oldest first.
    recent: std::collections::VecDeque<(u64, Vec<u8>)>,
    /// The last test frame's stream and sequence number.
    last: Option<(u16, u32)>,
    /// Frames after a gap still to write.
    after: usize,
    /// Gaps written this trial.
    gaps: usize,
}

/// The stream and sequence number of a test frame (IPv4 or IPv6, tagged
/// or not), or None.
fn stream_and_seq(frame: &[u8]) -> Option<(u16, u32)> {
    match linerate_wire::classify(frame, linerate_wire::template::DEFAULT_UDP_PORT) {
        linerate_wire::Received::Test { sig } => Some((sig.stream, sig.seq)),
        _ => None,
    }
}

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
    around: Mutex<AroundLoss>,
}

/// Set while a capture is installed: the receive loop's one check.
static INSTALLED: AtomicBool = AtomicBool::new(false);
static ACTIVE: Mutex<Option<Arc<Active>>> = Mutex::new(None);

/// A capture in use; dropping it flushes the file and removes the capture.
pub struct Installed {
    active: Arc<Active>,
}

impl Installed {
    /// Frames written so far.
    pub fn frames_written(&self) -> u64 {
        self.active.written.load(Ordering::Relaxed)
    }

    /// Writes out what is buffered.
    pub fn flush(&self) {
        flush_out(&self.active);
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        flush_out(&self.active);
        let mut active = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
        if active
            .as_ref()
            .is_some_and(|a| Arc::ptr_eq(a, &self.active))
        {
            *active = None;
            INSTALLED.store(false, Ordering::Release);
        }
    }
}

/// Samples the frames port `port` (by its MAC) receives from now on, until
/// the returned [`Installed`] is dropped; None while another capture is
/// installed (one at a time).
pub fn install(capture: Capture, port: MacAddr) -> Option<Installed> {
    let mut active = ACTIVE.lock().unwrap_or_else(|e| e.into_inner());
    if active.is_some() {
        return None;
    }
    let installed = Arc::new(Active {
        capture,
        port,
        taken: AtomicUsize::new(0),
        written: AtomicU64::new(0),
        around: Mutex::new(AroundLoss::default()),
    });
    *active = Some(installed.clone());
    INSTALLED.store(true, Ordering::Release);
    Some(Installed { active: installed })
}

fn active_for(port: MacAddr) -> Option<Arc<Active>> {
    if !INSTALLED.load(Ordering::Acquire) {
        return None;
    }
    ACTIVE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .filter(|a| a.port == port)
        .cloned()
}

fn flush_out(a: &Active) {
    let _ = a
        .capture
        .out
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .flush();
}

/// A trial's receive loop on `port` starts: its first frames are sampled.
pub(crate) fn trial_starts(port: MacAddr) {
    if let Some(a) = active_for(port) {
        a.taken.store(0, Ordering::Relaxed);
        *a.around.lock().unwrap_or_else(|e| e.into_inner()) = AroundLoss::default();
    }
}

/// A frame arrived on `port` at `arrival_ns` (CLOCK_REALTIME).
#[inline]
pub(crate) fn offer(port: MacAddr, frame: &[u8], arrival_ns: u64) {
    if let Some(a) = active_for(port) {
        offer_to(&a, frame, arrival_ns);
    }
}

fn offer_to(a: &Active, frame: &[u8], arrival_ns: u64) {
    let first = a.taken.load(Ordering::Relaxed) < a.capture.limit;
    if first {
        a.taken.fetch_add(1, Ordering::Relaxed);
        write(a, frame, arrival_ns);
    }
    let Some((stream, seq)) = stream_and_seq(frame) else {
        return;
    };
    let mut around = a.around.lock().unwrap_or_else(|e| e.into_inner());
    let gap = matches!(around.last, Some((s, last)) if s == stream && seq > last.wrapping_add(1));
    around.last = Some((stream, seq));
    if first {
        // Written already; what was kept before it is in the file too.
        around.recent.clear();
        return;
    }
    if around.after > 0 {
        around.after -= 1;
        write(a, frame, arrival_ns);
        return;
    }
    if gap && around.gaps < MAX_GAPS {
        around.gaps += 1;
        around.after = AROUND - 1;
        for (t, f) in &around.recent {
            write(a, f, *t);
        }
        around.recent.clear();
        write(a, frame, arrival_ns);
        return;
    }
    if around.gaps < MAX_GAPS {
        // Reuse the oldest buffer: no allocation per frame once full.
        let mut buf = if around.recent.len() == AROUND {
            around
                .recent
                .pop_front()
                .map(|(_, b)| b)
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        buf.clear();
        buf.extend_from_slice(frame);
        around.recent.push_back((arrival_ns, buf));
    }
}

/// Appends one frame record.
fn write(a: &Active, frame: &[u8], arrival_ns: u64) {
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

/// A trial's receive loop on `port` ended: what it sampled reaches the file.
pub(crate) fn trial_ends(port: MacAddr) {
    if let Some(a) = active_for(port) {
        flush_out(&a);
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
        let installed = install(capture, port).expect("no capture installed yet");
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
        assert_eq!(installed.frames_written(), 3);
        // One capture at a time; once dropped, the next run installs its own
        // and the first file gets nothing more.
        let second_path = path.with_extension("second.pcap");
        let refused = Capture::create(&second_path, 2).unwrap();
        assert!(install(refused, port).is_none(), "two captures at once");
        drop(installed);
        offer(port, &frame, 1_700_000_004_000_000_000); // none installed: not sampled
        let second = Capture::create(&second_path, 2).unwrap();
        let installed = install(second, port).expect("the first was removed");
        trial_starts(port);
        offer(port, &frame, 1_700_000_005_000_000_000);
        trial_ends(port);
        assert_eq!(installed.frames_written(), 1);
        drop(installed);
        assert_eq!(std::fs::read(&second_path).unwrap().len(), 24 + 16 + 60);
        std::fs::remove_file(&second_path).unwrap();

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

    /// A test frame of stream 7 with sequence number `seq`: tagged IPv6
    /// for odd numbers, plain IPv4 for even ones (both layouts are seen).
    fn test_frame(seq: u32) -> Vec<u8> {
        use linerate_wire::{FlowSpec, FrameSize, FrameTemplate, Signature, VlanTag};
        let v6 = seq % 2 == 1;
        let flow = FlowSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 8]),
            src_ip: if v6 {
                "2001:2::2".parse().unwrap()
            } else {
                "198.18.0.2".parse().unwrap()
            },
            dst_ip: if v6 {
                "2001:2:0:1::2".parse().unwrap()
            } else {
                "198.19.0.2".parse().unwrap()
            },
            src_port: linerate_wire::template::DEFAULT_UDP_PORT,
            dst_port: linerate_wire::template::DEFAULT_UDP_PORT,
            ttl: 64,
            vlan: v6.then_some(VlanTag { id: 100, pcp: 0 }),
        };
        let size = FrameSize::from_frame_in(128, &flow.encap()).unwrap();
        let t = FrameTemplate::new(&flow, size);
        let mut f = vec![0u8; t.len()];
        t.write(
            &mut f,
            Signature {
                stream: 7,
                seq,
                tx_ts: 0,
            },
        );
        f
    }

    #[test]
    fn frames_around_a_gap_are_written_once() {
        // Its own state, not the process-wide capture the other test installs.
        let path = std::env::temp_dir().join(format!("lr-around-{}.pcap", std::process::id()));
        let a = Active {
            capture: Capture::create(&path, 2).unwrap(),
            port: MacAddr([2, 0, 0, 0, 0, 8]),
            taken: AtomicUsize::new(0),
            written: AtomicU64::new(0),
            around: Mutex::new(AroundLoss::default()),
        };
        // Frames 0..=19 arrive except 12 and 13.
        let mut seqs: Vec<u32> = (0..20).filter(|s| *s != 12 && *s != 13).collect();
        seqs.push(40); // and a second gap
        for seq in seqs {
            offer_to(&a, &test_frame(seq), seq as u64);
        }
        a.capture.out.lock().unwrap().flush().unwrap();
        // The sequence numbers of the frames in the file, in order.
        let bytes = std::fs::read(&path).unwrap();
        let mut written: Vec<u32> = Vec::new();
        let mut at = 24;
        while at < bytes.len() {
            let kept = u32::from_ne_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            let frame = &bytes[at + 16..at + 16 + kept];
            written.push(stream_and_seq(frame).expect("a test frame").1);
            at += 16 + kept;
        }
        // The first 2; at the gap the 4 kept before it (8..=11), 14 and
        // the 3 after it (15..=17); at the second gap only 18 and 19 were
        // kept (15..=17 are in the file already), then 40. No frame twice.
        assert_eq!(
            written,
            vec![0, 1, 8, 9, 10, 11, 14, 15, 16, 17, 18, 19, 40]
        );
        std::fs::remove_file(&path).unwrap();
    }
}
