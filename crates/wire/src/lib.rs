//! Test frames and their arithmetic. Pure functions, no I/O.
//!
//! A test frame is Ethernet II / IPv4 / UDP with a 12-byte signature at the
//! start of the UDP payload. For a 64-byte frame (60 bytes handed to the NIC,
//! which appends the FCS) the byte offsets are:
//!
//! ```text
//! offset  len  field
//!  0       6   destination MAC
//!  6       6   source MAC
//! 12       2   EtherType 0x0800
//! 14       1   version 4, IHL 5 (0x45)
//! 15       1   DSCP/ECN 0
//! 16       2   IPv4 total length (L3 length: 46 here)
//! 18       2   identification 0
//! 20       2   flags: DF set (0x4000), fragment offset 0
//! 22       1   TTL (64 by default)
//! 23       1   protocol 17 (UDP)
//! 24       2   IPv4 header checksum (constant per flow)
//! 26       4   source IPv4 address
//! 30       4   destination IPv4 address
//! 34       2   UDP source port (19538 = 0x4C52 by default)
//! 36       2   UDP destination port (19538 by default)
//! 38       2   UDP length (L3 - 20: 26 here)
//! 40       2   UDP checksum (stamped per frame)
//! 42       2   signature magic 0x4C52 "LR"
//! 44       2   stream        (stamped per frame)
//! 46       4   sequence      (stamped per frame)
//! 50       4   tx timestamp, low 32 bits of ns (stamped per frame)
//! 54       6   filler 00 01 02 .. (bytes 0..=255 repeating)
//! 60       4   FCS (added by the NIC)
//! ```
//!
//! With `--ipv6` the IP header is the 40-byte IPv6 header and everything
//! after it moves 20 bytes on (signature at 62); an 802.1Q tag moves
//! everything after the MACs 4 bytes on. [`encap`] has the offsets.
//!
//! Packets shorter than 46 bytes at L3 (down to 40) are followed by zero
//! Ethernet padding up to the 64-byte minimum. All multi-byte fields are
//! big-endian.

pub mod arp;
pub mod checksum;
pub mod cidr;
pub mod classify;
pub mod encap;
pub mod ethernet;
pub mod flows;
pub mod integrity;
pub mod ipv4;
pub mod ipv6;
pub mod lengths;
pub mod mix;
pub mod ndp;
pub mod overhead;
pub mod signature;
pub mod template;
pub mod udp;
pub mod units;

pub use arp::{ArpOp, ArpRepr};
pub use classify::{classify, Received};
pub use encap::{Encap, IpVersion, VlanTag};
pub use ethernet::MacAddr;
pub use flows::Flows;
pub use integrity::FrameCheck;
pub use mix::{FrameMix, FrameSet, Frames};
pub use signature::{Signature, SIGNATURE_LEN};
pub use template::{FlowSpec, FrameTemplate};
pub use units::{FrameSize, Layer, Rate};

#[cfg(test)]
mod testutil {
    /// xorshift64*: a deterministic, dependency-free PRNG for the randomized tests.
    pub struct Rng(u64);

    impl Rng {
        pub fn new(seed: u64) -> Rng {
            Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        }

        #[allow(clippy::should_implement_trait)]
        pub fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
    }
}
