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
//! in the kernel and hands none up. A capture belongs to one run: the run
//! creates it and installs it in its engine's [`CaptureSlot`] (port B's)
//! before its first trial, and it leaves the slot when the run drops its
//! [`Installed`] (a run after it on the same engine, e.g. the next call
//! from Python, installs its own). Nothing of it is process-wide: runs on
//! other engines, in other threads, capture to their own files at the same
//! time. Each trial, port B's receive loop is handed the slot's [`Tap`]
//! once and offers it every frame; without a capture that costs one
//! branch per frame.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
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
    /// The last test frames seen (arrival time, length on the wire, the
    /// bytes the port handed up), oldest first.
    recent: std::collections::VecDeque<(u64, usize, Vec<u8>)>,
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

/// A capture in use: the file, and what it took of the current trial.
struct Active {
    capture: Capture,
    taken: AtomicUsize,
    written: AtomicU64,
    around: Mutex<AroundLoss>,
}

/// Where a port's receive loop finds the capture of the run using the
/// port: the engine holds one for port B, a run puts its capture in before
/// its first trial ([`install`](Self::install)) and takes it out when it
/// ends. Every engine has its own, so two runs in one process (two
/// threads) capture apart, each only its own port's frames, whatever the
/// ports' MACs.
#[derive(Clone, Default)]
pub struct CaptureSlot(Arc<Mutex<Option<Arc<Active>>>>);

impl CaptureSlot {
    /// Samples the frames this slot's port receives from its next trial
    /// on, until the returned [`Installed`] is dropped; None while another
    /// capture is in the slot (one run's at a time).
    pub fn install(&self, capture: Capture) -> Option<Installed> {
        let mut slot = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.is_some() {
            return None;
        }
        let active = Arc::new(Active {
            capture,
            taken: AtomicUsize::new(0),
            written: AtomicU64::new(0),
            around: Mutex::new(AroundLoss::default()),
        });
        *slot = Some(active.clone());
        Some(Installed {
            active,
            slot: self.clone(),
        })
    }

    /// The capture a trial starting now writes to (read once per trial:
    /// the receive loop then tests an `Option` per frame, nothing shared).
    pub fn tap(&self) -> Option<Tap> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .map(Tap)
    }
}

/// A capture in use; dropping it flushes the file and empties its slot.
pub struct Installed {
    active: Arc<Active>,
    slot: CaptureSlot,
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
        let mut slot = self.slot.0.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().is_some_and(|a| Arc::ptr_eq(a, &self.active)) {
            *slot = None;
        }
    }
}

fn flush_out(a: &Active) {
    let _ = a
        .capture
        .out
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .flush();
}

/// The capture one trial's receive loop writes to (from
/// [`CaptureSlot::tap`]; the engine hands it to port B's receiver in
/// [`ReceiverSignals::capture`](crate::receiver::ReceiverSignals::capture)).
#[derive(Clone)]
pub struct Tap(Arc<Active>);

impl Tap {
    /// The trial's receive loop starts: its first frames are sampled.
    pub(crate) fn trial_starts(&self) {
        self.0.taken.store(0, Ordering::Relaxed);
        *self.0.around.lock().unwrap_or_else(|e| e.into_inner()) = AroundLoss::default();
    }

    /// A frame of `wire_len` bytes arrived at `arrival_ns` (CLOCK_REALTIME);
    /// `frame` is what the port handed up of it (its first bytes only
    /// when the port snaps frames short, as af_packet does past 192).
    #[inline]
    pub(crate) fn offer(&self, frame: &[u8], wire_len: usize, arrival_ns: u64) {
        offer_to(&self.0, frame, wire_len, arrival_ns);
    }

    /// The trial's receive loop ended: what it sampled reaches the file.
    pub(crate) fn trial_ends(&self) {
        flush_out(&self.0);
    }
}

fn offer_to(a: &Active, frame: &[u8], wire_len: usize, arrival_ns: u64) {
    let first = a.taken.load(Ordering::Relaxed) < a.capture.limit;
    if first {
        a.taken.fetch_add(1, Ordering::Relaxed);
        write(a, frame, wire_len, arrival_ns);
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
        write(a, frame, wire_len, arrival_ns);
        return;
    }
    if gap && around.gaps < MAX_GAPS {
        around.gaps += 1;
        around.after = AROUND - 1;
        for (t, len, f) in &around.recent {
            write(a, f, *len, *t);
        }
        around.recent.clear();
        write(a, frame, wire_len, arrival_ns);
        return;
    }
    if around.gaps < MAX_GAPS {
        // Reuse the oldest buffer: no allocation per frame once full.
        let mut buf = if around.recent.len() == AROUND {
            around
                .recent
                .pop_front()
                .map(|(_, _, b)| b)
                .unwrap_or_default()
        } else {
            Vec::new()
        };
        buf.clear();
        buf.extend_from_slice(frame);
        around.recent.push_back((arrival_ns, wire_len, buf));
    }
}

/// Appends one frame record: what the port handed up of a frame of
/// `wire_len` bytes (the record's original length; Wireshark shows a frame
/// snapped short as such).
fn write(a: &Active, frame: &[u8], wire_len: usize, arrival_ns: u64) {
    let kept = frame.len().min(SNAPLEN as usize);
    let mut out = a.capture.out.lock().unwrap_or_else(|e| e.into_inner());
    let record = [
        ((arrival_ns / 1_000_000_000) as u32).to_ne_bytes(),
        ((arrival_ns % 1_000_000_000) as u32).to_ne_bytes(),
        (kept as u32).to_ne_bytes(),
        (wire_len.max(frame.len()) as u32).to_ne_bytes(),
    ];
    // A full disk must not stop the measurement: the frame is skipped.
    if out.write_all(record.as_flattened()).is_ok() && out.write_all(&frame[..kept]).is_ok() {
        a.written.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_pcap_wireshark_reads() {
        let path = std::env::temp_dir().join(format!("lr-capture-{}.pcap", std::process::id()));
        let capture = Capture::create(&path, 2).unwrap();
        let (slot, other) = (CaptureSlot::default(), CaptureSlot::default());
        assert!(slot.tap().is_none(), "an empty slot hands out no tap");
        let installed = slot.install(capture).expect("the slot is empty");
        assert!(other.tap().is_none(), "another port's slot: not sampled");
        let frame = [0xabu8; 60];
        let tap = slot.tap().expect("installed");
        tap.trial_starts();
        tap.offer(&frame, 60, 1_700_000_000_123_456_789);
        // Snapped short by the port: 42 bytes kept of 252.
        tap.offer(&frame[..42], 252, 1_700_000_001_000_000_000);
        tap.offer(&frame, 60, 1_700_000_002_000_000_000); // past the limit
        tap.trial_ends();
        let tap = slot.tap().expect("installed");
        tap.trial_starts();
        tap.offer(&frame, 60, 1_700_000_003_000_000_000);
        tap.trial_ends();
        assert_eq!(installed.frames_written(), 3);
        // One run's capture per slot; once dropped, the next run installs
        // its own and the first file gets nothing more.
        let second_path = path.with_extension("second.pcap");
        let refused = Capture::create(&second_path, 2).unwrap();
        assert!(slot.install(refused).is_none(), "two captures in one slot");
        drop(installed);
        assert!(slot.tap().is_none(), "dropped: the slot is empty again");
        let second = Capture::create(&second_path, 2).unwrap();
        let installed = slot.install(second).expect("the first was removed");
        let tap = slot.tap().expect("installed");
        tap.trial_starts();
        tap.offer(&frame, 60, 1_700_000_005_000_000_000);
        tap.trial_ends();
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
        // Second record: 42 bytes kept, 252 on the wire.
        assert_eq!((word(24 + 16 + 60 + 8), word(24 + 16 + 60 + 12)), (42, 252));
        assert_eq!(bytes.len(), 24 + 3 * 16 + 60 + 42 + 60);
        std::fs::remove_file(&path).unwrap();
    }

    /// A test frame of stream 7 with sequence number `seq`: tagged IPv6
    /// for odd numbers, plain IPv4 for even ones (both layouts are seen).
    fn test_frame(seq: u32) -> Vec<u8> {
        use linerate_wire::{FlowSpec, FrameSize, FrameTemplate, MacAddr, Signature, VlanTag};
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
        let path = std::env::temp_dir().join(format!("lr-around-{}.pcap", std::process::id()));
        let a = Active {
            capture: Capture::create(&path, 2).unwrap(),
            taken: AtomicUsize::new(0),
            written: AtomicU64::new(0),
            around: Mutex::new(AroundLoss::default()),
        };
        // Frames 0..=19 arrive except 12 and 13.
        let mut seqs: Vec<u32> = (0..20).filter(|s| *s != 12 && *s != 13).collect();
        seqs.push(40); // and a second gap
        for seq in seqs {
            let f = test_frame(seq);
            offer_to(&a, &f, f.len(), seq as u64);
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

    /// No state is shared between captures: two runs' slots (ports that
    /// may have the same MAC: nothing here knows one) written from two
    /// threads at once each get all of their own frames and none of the
    /// other's, told apart by their sizes.
    #[test]
    fn two_captures_at_once_keep_their_own_frames() {
        let dir = std::env::temp_dir();
        let paths: Vec<_> = (0..2)
            .map(|k| dir.join(format!("lr-two-{}-{k}.pcap", std::process::id())))
            .collect();
        let slots = [CaptureSlot::default(), CaptureSlot::default()];
        let installed: Vec<Installed> = slots
            .iter()
            .zip(&paths)
            .map(|(slot, path)| {
                let capture = Capture::create(path, 1000).unwrap();
                slot.install(capture)
                    .expect("each slot takes its own capture")
            })
            .collect();
        let sizes = [60usize, 124];
        std::thread::scope(|scope| {
            for (slot, size) in slots.iter().zip(sizes) {
                scope.spawn(move || {
                    let tap = slot.tap().expect("installed");
                    tap.trial_starts();
                    for n in 0..500u64 {
                        tap.offer(&vec![size as u8; size], size, n);
                    }
                    tap.trial_ends();
                });
            }
        });
        for ((installed, path), size) in installed.into_iter().zip(&paths).zip(sizes) {
            assert_eq!(installed.frames_written(), 500);
            drop(installed);
            let bytes = std::fs::read(path).unwrap();
            let mut at = 24;
            let mut frames = 0;
            while at < bytes.len() {
                let kept = u32::from_ne_bytes(bytes[at + 8..at + 12].try_into().unwrap());
                assert_eq!(kept as usize, size, "a frame of the other capture's size");
                assert!(bytes[at + 16..at + 16 + size]
                    .iter()
                    .all(|b| *b == size as u8));
                at += 16 + size;
                frames += 1;
            }
            assert_eq!(frames, 500);
            std::fs::remove_file(path).unwrap();
        }
    }
}
