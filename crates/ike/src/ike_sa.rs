//! The state of one IKE SA (keys, nonces, message IDs) and the sealing
//! and opening of its messages, shared by the handshakes that make it
//! (`initiator.rs`, `responder.rs`), the tunnel that keeps it
//! (`tunnel.rs`) and its rekey (`ike_rekey.rs`).

use crate::crypto::{IkeKeys, Rng};
use crate::proposal::IkeSuite;
use crate::protect::{open, seal, Keys};
use crate::wire::{flags, Header, Message, Payload};

/// The state of an IKE SA: keys, nonces, message IDs.
pub(crate) struct IkeSa {
    /// Whether linerate is the original initiator (flags, key directions).
    pub initiator: bool,
    pub spi_i: u64,
    pub spi_r: u64,
    pub suite: IkeSuite,
    pub keys: IkeKeys,
    pub ni: Vec<u8>,
    pub nr: Vec<u8>,
    /// The message ID of our next request.
    pub next_id: u32,
    /// The message ID the peer's next request must have.
    pub peer_id: u32,
    /// Our answer to the peer's last request, sent again when the request
    /// comes again (RFC 7296 §2.1: responses are retransmitted, not
    /// recomputed).
    pub last_answer: Option<(u32, Vec<u8>)>,
}

impl IkeSa {
    pub(crate) fn out_keys(&self) -> Keys<'_> {
        let (e, a) = if self.initiator {
            (&self.keys.sk_ei, &self.keys.sk_ai)
        } else {
            (&self.keys.sk_er, &self.keys.sk_ar)
        };
        Keys {
            encr: self.suite.encryption,
            integ: self.suite.integrity,
            encryption_key: e,
            integrity_key: a,
        }
    }

    pub(crate) fn in_keys(&self) -> Keys<'_> {
        let (e, a) = if self.initiator {
            (&self.keys.sk_er, &self.keys.sk_ar)
        } else {
            (&self.keys.sk_ei, &self.keys.sk_ai)
        };
        Keys {
            encr: self.suite.encryption,
            integ: self.suite.integrity,
            encryption_key: e,
            integrity_key: a,
        }
    }

    pub(crate) fn seal(
        &self,
        kind: u8,
        response: bool,
        id: u32,
        payloads: &[Payload],
        rng: Rng<'_>,
    ) -> Vec<u8> {
        let f = if self.initiator { flags::INITIATOR } else { 0 }
            | if response { flags::RESPONSE } else { 0 };
        let header = Header::new(self.spi_i, self.spi_r, kind, f, id);
        seal(&self.out_keys(), header, payloads, rng)
    }

    /// Opens `data` if it is the answer to our request `id` of `kind`.
    pub(crate) fn open_response(&self, data: &[u8], kind: u8, id: u32) -> Option<Message> {
        let h = Header::parse(data).ok()?;
        if h.spi_i != self.spi_i
            || h.spi_r != self.spi_r
            || !h.is_response()
            || h.from_initiator() == self.initiator
            || h.exchange != kind
            || h.message_id != id
        {
            return None;
        }
        open(&self.in_keys(), data).ok()
    }

    /// Our SPI of this IKE SA: SPIi when we are its original initiator.
    pub(crate) fn own_spi(&self) -> u64 {
        if self.initiator {
            self.spi_i
        } else {
            self.spi_r
        }
    }

    /// Whether `h` is a request of the peer on this IKE SA.
    pub(crate) fn is_peer_request(&self, h: &Header) -> bool {
        h.spi_i == self.spi_i
            && h.spi_r == self.spi_r
            && !h.is_response()
            && h.from_initiator() != self.initiator
    }
}

/// The receiver's SPI in a message's header: SPIr when the sender is the
/// SA's original initiator, else SPIi. After an IKE SA rekey the peer
/// that started it is the new SA's initiator, so either can be ours.
pub(crate) fn receiver_spi(h: &Header) -> u64 {
    if h.from_initiator() {
        h.spi_r
    } else {
        h.spi_i
    }
}
