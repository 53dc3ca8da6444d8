//! An in-memory port pair for unit tests: what port A transmits, port B
//! receives, and the other way round. An optional [`Impairment`] drops,
//! duplicates or reorders frames in a known pattern, so tests can check that
//! the receiver counts exactly what happened (a device wrapper in the
//! manner of smoltcp's fault injector).

use crate::{realtime_ns, Port, PortError, PortInfo, RxQueue, TxQueue};
use linerate_wire::MacAddr;
use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A deterministic fault pattern, counted over the frames crossing the wire
/// in one direction (1-based: `drop_every: Some(10)` drops frames 10, 20, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Impairment {
    pub drop_every: Option<u64>,
    pub duplicate_every: Option<u64>,
    /// Frame n (a multiple of this) is delivered after frame n+1.
    pub swap_every: Option<u64>,
}

#[derive(Default)]
struct Wire {
    frames: Mutex<VecDeque<(Vec<u8>, u64)>>,
    ready: Condvar,
}

struct Direction {
    wire: Arc<Wire>,
    impairment: Impairment,
    crossed: u64,
    held: Option<Vec<u8>>,
}

impl Direction {
    fn deliver(&mut self, frames: Vec<Vec<u8>>) {
        let now = realtime_ns();
        let mut q = self.wire.frames.lock().expect("loopback wire poisoned");
        for frame in frames {
            self.crossed += 1;
            let n = self.crossed;
            let hit = |every: Option<u64>| every.is_some_and(|e| e > 0 && n % e == 0);
            if hit(self.impairment.drop_every) {
                continue;
            }
            if hit(self.impairment.duplicate_every) {
                q.push_back((frame.clone(), now));
            }
            if hit(self.impairment.swap_every) && self.held.is_none() {
                self.held = Some(frame);
                continue;
            }
            q.push_back((frame, now));
            if let Some(held) = self.held.take() {
                q.push_back((held, now));
            }
        }
        self.wire.ready.notify_all();
    }
}

pub struct LoopbackTx {
    out: Direction,
    pending: Vec<Vec<u8>>,
    max_frame_len: usize,
}

pub struct LoopbackRx {
    inbox: Arc<Wire>,
    control_out: Arc<Wire>,
}

pub struct LoopbackPort {
    info: PortInfo,
    tx: LoopbackTx,
    rx: LoopbackRx,
}

/// Two ports wired back to back; `a_to_b` impairs what A sends to B.
pub fn pair(a_to_b: Impairment) -> (LoopbackPort, LoopbackPort) {
    let to_b = Arc::new(Wire::default());
    let to_a = Arc::new(Wire::default());
    let port = |name: &str, mac: u8, out: &Arc<Wire>, inbox: &Arc<Wire>, impairment| LoopbackPort {
        info: PortInfo {
            ifname: name.to_string(),
            netns: None,
            mac: MacAddr([0x02, 0, 0, 0, 0, mac]),
            mtu: 9000,
            speed_bps: Some(10_000_000_000),
            max_frame_len: 9014,
        },
        tx: LoopbackTx {
            out: Direction {
                wire: out.clone(),
                impairment,
                crossed: 0,
                held: None,
            },
            pending: Vec::new(),
            max_frame_len: 9014,
        },
        rx: LoopbackRx {
            inbox: inbox.clone(),
            control_out: out.clone(),
        },
    };
    (
        port("loopA", 0xa, &to_b, &to_a, a_to_b),
        port("loopB", 0xb, &to_a, &to_b, Impairment::default()),
    )
}

impl Port for LoopbackPort {
    type Tx = LoopbackTx;
    type Rx = LoopbackRx;
    fn info(&self) -> &PortInfo {
        &self.info
    }
    fn split(self) -> (LoopbackTx, LoopbackRx, PortInfo) {
        (self.tx, self.rx, self.info)
    }
}

impl TxQueue for LoopbackTx {
    fn queue<F: FnMut(usize, &mut [u8]) -> usize>(
        &mut self,
        n: usize,
        mut fill: F,
    ) -> Result<usize, PortError> {
        let mut buf = vec![0u8; self.max_frame_len];
        for i in 0..n {
            let len = fill(i, &mut buf);
            if len > self.max_frame_len {
                return Err(PortError::FrameTooLong {
                    len,
                    max: self.max_frame_len,
                });
            }
            self.pending.push(buf[..len].to_vec());
        }
        Ok(n)
    }

    fn flush(&mut self) -> Result<(), PortError> {
        let frames = std::mem::take(&mut self.pending);
        self.out.deliver(frames);
        Ok(())
    }

    fn drain(&mut self, _timeout: Duration) -> Result<u64, PortError> {
        self.flush()?;
        // A frame held back for reordering has nothing to follow it: release it.
        if let Some(held) = self.out.held.take() {
            let mut q = self.out.wire.frames.lock().expect("loopback wire poisoned");
            q.push_back((held, realtime_ns()));
            self.out.wire.ready.notify_all();
        }
        Ok(0)
    }
}

impl RxQueue for LoopbackRx {
    fn recv<F: FnMut(&[u8], usize, u64)>(
        &mut self,
        timeout: Duration,
        mut f: F,
    ) -> Result<usize, PortError> {
        let q = self.inbox.frames.lock().expect("loopback wire poisoned");
        let (mut q, _) = self
            .inbox
            .ready
            .wait_timeout_while(q, timeout, |q| q.is_empty())
            .expect("loopback wire poisoned");
        let frames: Vec<_> = q.drain(..).collect();
        drop(q);
        for (frame, ts) in &frames {
            f(frame, frame.len(), *ts);
        }
        Ok(frames.len())
    }

    fn send_control(&mut self, frame: &[u8]) -> Result<(), PortError> {
        let mut q = self
            .control_out
            .frames
            .lock()
            .expect("loopback wire poisoned");
        q.push_back((frame.to_vec(), realtime_ns()));
        self.control_out.ready.notify_all();
        Ok(())
    }

    fn take_drops(&mut self) -> Result<u64, PortError> {
        Ok(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn send(tx: &mut LoopbackTx, n: u8) {
        tx.queue(n as usize, |i, buf| {
            buf[0] = i as u8 + 1;
            1
        })
        .unwrap();
        tx.drain(Duration::ZERO).unwrap();
    }

    fn received(rx: &mut LoopbackRx) -> Vec<u8> {
        let mut got = Vec::new();
        rx.recv(Duration::from_millis(10), |f, _, _| got.push(f[0]))
            .unwrap();
        got
    }

    #[test]
    fn frames_cross_in_order() {
        let (a, b) = pair(Impairment::default());
        let (mut tx, _, _) = a.split();
        let (_, mut rx, _) = b.split();
        send(&mut tx, 5);
        assert_eq!(received(&mut rx), vec![1, 2, 3, 4, 5]);
    }

    #[test]
    fn impairments_follow_their_pattern() {
        let imp = Impairment {
            drop_every: Some(3),
            duplicate_every: Some(4),
            swap_every: Some(5),
        };
        let (a, b) = pair(imp);
        let (mut tx, _, _) = a.split();
        let (_, mut rx, _) = b.split();
        send(&mut tx, 8);
        // 3 and 6 dropped, 4 and 8 doubled, 5 delivered after 7.
        assert_eq!(received(&mut rx), vec![1, 2, 4, 4, 7, 5, 8, 8]);
    }

    #[test]
    fn control_frames_go_to_the_peer() {
        let (a, b) = pair(Impairment::default());
        let (_, mut rx_a, _) = a.split();
        let (_, mut rx_b, _) = b.split();
        rx_b.send_control(&[42]).unwrap();
        assert_eq!(received(&mut rx_a), vec![42]);
        assert!(received(&mut rx_b).is_empty());
    }
}
