//! Errors a tester's user can act on: each one line, naming what the
//! gateway answered and what to check. Keys and the pre-shared key never
//! appear in them.

use std::net::{Ipv4Addr, SocketAddr};

/// Configuration that cannot be used (an identity, a traffic selector, a
/// pre-shared key file), with how to write it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// Why a tunnel did not come up, or went away.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum IkeError {
    /// Nothing answered our request, retransmitted with back-off.
    #[error("no answer from {addr} after {tries} tries")]
    NoAnswer { addr: SocketAddr, tries: u32 },
    /// Something answered, but never with an answer to our request: not
    /// an IKEv2 gateway on that port, or one that garbles its messages.
    #[error("no IKEv2 answer from {addr} after {tries} tries: {datagrams} datagram(s) came back that were not answers to linerate's request; check that {addr} is the gateway's IKE port")]
    NoValidAnswer {
        addr: SocketAddr,
        tries: u32,
        datagrams: u32,
    },
    /// The gateway could not verify our AUTH payload: another key, or an
    /// identity it has no connection for (strongSwan answers the same).
    #[error("authentication failed: the gateway answered AUTHENTICATION_FAILED; check the pre-shared key (and that the gateway expects the identity {identity})")]
    AuthenticationFailed { identity: String },
    /// The gateway's AUTH payload does not verify with our key.
    #[error("authentication failed: the gateway's AUTH payload does not verify with the pre-shared key; check the pre-shared key")]
    GatewayAuthentication,
    /// As a responder: the initiator's AUTH payload does not verify with
    /// our key (it was answered AUTHENTICATION_FAILED).
    #[error("authentication failed: the initiator {peer} ({identity}) sent an AUTH payload that does not verify with the pre-shared key (answered AUTHENTICATION_FAILED); check the pre-shared key")]
    InitiatorAuthentication { peer: SocketAddr, identity: String },
    /// The gateway is not the one configured.
    #[error("the gateway identifies itself as {got}, not {expected}: check the remote identity")]
    GatewayIdentity { expected: String, got: String },
    /// None of our proposals (IKE, or the ESP suite, offered as `ESP
    /// aes128gcm16`) is acceptable to the gateway.
    #[error("no common proposal: offered {offered}, the gateway answered NO_PROPOSAL_CHOSEN")]
    NoProposalChosen { offered: String },
    #[error("the gateway refused the traffic selectors (TS_UNACCEPTABLE): offered local {local}, remote {remote}; the gateway's connection must have them as remote_ts and local_ts")]
    TsUnacceptable { local: String, remote: String },
    /// INVALID_KE_PAYLOAD that linerate cannot follow: `detail` says why
    /// (a group not offered, one already sent, none named).
    #[error(
        "the gateway refused linerate's Diffie-Hellman key exchange (INVALID_KE_PAYLOAD): {detail}"
    )]
    InvalidKe { detail: String },
    /// Any other error notification.
    #[error("the gateway refused {exchange}: it answered {notify}")]
    Refused { exchange: String, notify: String },
    /// An answer that breaks the protocol.
    #[error("invalid answer from the gateway {addr}: {detail}")]
    Protocol { addr: SocketAddr, detail: String },
    /// A socket that cannot be bound or used.
    #[error("{what}: {error}{hint}")]
    Io {
        what: String,
        error: std::io::Error,
        hint: &'static str,
    },
    /// ESP in UDP was asked of a gateway that sends raw ESP.
    #[error("the gateway {gateway} does not encapsulate ESP in UDP (it does no NAT traversal): linerate cannot send or receive its ESP on port 4500")]
    NoUdpEncapsulation { gateway: Ipv4Addr },
    /// The IKE SA was deleted (by `delete`, or by the gateway).
    #[error("the IKE SA with {gateway} is deleted")]
    Deleted { gateway: Ipv4Addr },
    /// The caller's stop flag ended the negotiation (a signal); what the
    /// gateway had set up was deleted.
    #[error("interrupted while negotiating with {gateway}; what it had set up was deleted")]
    Interrupted { gateway: Ipv4Addr },
}

impl IkeError {
    pub(crate) fn io(what: impl Into<String>, error: std::io::Error) -> IkeError {
        let hint = match error.kind() {
            std::io::ErrorKind::AddrInUse => {
                "; another IKE daemon (charon, pluto, iked) or linerate session uses the port"
            }
            std::io::ErrorKind::AddrNotAvailable => {
                "; the address is on no interface of this network namespace"
            }
            std::io::ErrorKind::PermissionDenied => {
                "; ports 500 and 4500 need root (CAP_NET_BIND_SERVICE)"
            }
            _ => "",
        };
        IkeError::Io {
            what: what.into(),
            error,
            hint,
        }
    }
}
