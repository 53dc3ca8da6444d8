//! What IKE hands to the data path: the CHILD_SA's two directions of ESP
//! keys, the traffic selectors the gateway accepted and the UDP addresses
//! ESP in UDP travels between.

use linerate_esp::SaKeys;
use std::net::SocketAddrV4;

use crate::wire::TrafficSelector;

/// Installs a tunnel's new CHILD_SA (after a rekey) where its frames
/// arrive, given the tunnel's index (a [`crate::Fleet`]'s peer; 0 for a
/// [`crate::Session`]) and the new SA. A session or fleet calls it before
/// the datagram that lets the gateway send on the new SA leaves: the
/// answer to the gateway's CREATE_CHILD_SA, or the Delete of the old
/// CHILD_SA after linerate's own rekey (RFC 7296 §2.8; charon installs
/// its kernel SAs in the same order). Installed any later, the gateway's
/// first frames on the new SPI find no SA and are lost by the tester.
pub type ChildInstaller = Box<dyn FnMut(usize, &ChildSa) + Send>;

/// The CHILD_SA linerate negotiated: what its data path needs to send
/// test traffic into the tunnel and take the gateway's traffic out of it.
/// The keys are `linerate_esp::SaKeys`, which the data path takes as they
/// are (wiped when dropped, never printed).
#[derive(Debug, Clone)]
pub struct ChildSa {
    /// linerate -> gateway: the SPI the gateway chose, the
    /// initiator-to-responder keys.
    pub outbound: SaKeys,
    /// gateway -> linerate: linerate's SPI, the responder-to-initiator
    /// keys.
    pub inbound: SaKeys,
    /// The traffic selectors the gateway accepted, perhaps narrower than
    /// those proposed: packets outside them are dropped by the gateway.
    pub local_ts: Vec<TrafficSelector>,
    pub remote_ts: Vec<TrafficSelector>,
    /// linerate's address and port for IKE and ESP in UDP (4500 unless the
    /// caller bound another).
    pub local: SocketAddrV4,
    /// The gateway's address and port (4500).
    pub remote: SocketAddrV4,
    /// Whether ESP travels in UDP (RFC 3948) between `local` and `remote`:
    /// true when a NAT was detected or faked (`Config::force_encap`); false
    /// only for a gateway without NAT traversal, which then sends raw ESP
    /// (IP protocol 50).
    pub udp_encap: bool,
}
