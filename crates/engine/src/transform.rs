//! The one place a test frame changes between being built and leaving the
//! port, and between arriving and being counted: ESP encryption when
//! linerate is a VPN gateway's peer, decryption of what the gateway sends.
//!
//! A transform works in the port's own buffer (no extra copy on send); the
//! socket engines run it in the user-space generator and receiver. The
//! in-kernel `xdp` engine builds and counts frames inside the kernel,
//! where no transform can run: it refuses one.

use linerate_wire::Flows;

/// Rewrites every test frame before the port sends it.
pub trait SendTransform: Send {
    /// Rewrites the frame `buf[..len]` in place, using the room after it
    /// (`buf` is as long as the largest frame the port sends), and returns
    /// the length of what is sent. Infallible by contract: the engine has
    /// asked [`frames_left`](Self::frames_left) and [`growth`](Self::growth)
    /// before the trial, so every frame fits and can be transformed.
    fn apply(&mut self, buf: &mut [u8], len: usize) -> usize;
    /// How many bytes a frame of `len` bytes grows by.
    fn growth(&self, len: usize) -> usize;
    /// How many more frames it can transform (an ESP SA's sequence numbers
    /// run out); `None`: no limit.
    fn frames_left(&self) -> Option<u64> {
        None
    }
    /// What it does, for the trial's notes ("ESP aes128gcm16, SPI 0xc1...").
    fn describe(&self) -> String;
    /// The trial's last frame was sent: counts kept for reports are
    /// brought up to date.
    fn trial_ends(&mut self) {}
    /// Deals the transform out to `n` generator threads, one share each,
    /// whose states are disjoint (an ESP SA's sequence numbers belong to
    /// one thread: the tunnels are dealt out, tunnel i to thread i mod n).
    /// None: it cannot be split (one SA), and is left as it was; else
    /// the shares, and `self` is left with nothing to send with.
    fn split(&mut self, _n: usize) -> Option<Vec<Box<dyn SendTransform>>> {
        None
    }
    /// The flows a share's thread sends, from the trial's `flows`: only
    /// frames its share can transform (its tunnels' addresses). None: the
    /// trial's flows do not follow the tunnels, so no thread can be given
    /// only its own. A transform that was not split sends `flows` as they
    /// are.
    fn thread_flows(&self, flows: &Flows) -> Option<Flows> {
        Some(flows.clone())
    }
}

/// What a receive transform made of one arriving frame.
pub enum Arrived<'a> {
    /// Not for the transform (ARP, a clear frame): counted as it is.
    AsIs,
    /// The frame it carried, to be counted in its place (an Ethernet frame
    /// with the inner packet).
    Inner(&'a [u8]),
    /// The transform's own traffic, consumed (an IKE message, a keepalive).
    Consumed,
    /// A frame for the transform that failed its check (ICV, replay): a
    /// damaged frame, counted as errored.
    Damaged,
}

/// Turns every arriving frame back into what was sent before it is
/// counted.
pub trait ReceiveTransform: Send {
    /// Looks at `frame` (`wire_len` bytes on the wire); may write the inner
    /// frame into `scratch` and return it.
    fn apply<'a>(&mut self, frame: &[u8], scratch: &'a mut [u8]) -> Arrived<'a>;
    /// How many bytes bigger than the frame it carries an arriving frame
    /// of `len` (inner) bytes is: the port must take that much more.
    fn growth(&self, len: usize) -> usize;
    /// What it does, for the trial's notes.
    fn describe(&self) -> String;
    /// The trial's receiving ended: counts kept for reports are brought up
    /// to date.
    fn trial_ends(&mut self) {}
    /// Deals the transform out to `n` receiving threads, one share each,
    /// whose states are disjoint (an ESP SA's replay window belongs to one
    /// thread: tunnel i's SAs to thread i mod n, and the port must steer
    /// each tunnel's frames to its thread). None: it cannot be split, and
    /// is left as it was; else the shares, and `self` is left with nothing
    /// to count.
    fn split(&mut self, _n: usize) -> Option<Vec<Box<dyn ReceiveTransform>>> {
        None
    }
}
