//! What the peer did to an established tunnel, as every driver reports
//! it.

/// Something the gateway did while the tunnel was up; each request is
/// answered before it is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// An empty INFORMATIONAL: the gateway checked that linerate is alive
    /// (dead peer detection).
    LivenessCheck,
    /// An INFORMATIONAL with notifications only.
    Informational,
    /// The gateway deleted the CHILD_SA: its keys are void, the IKE SA is
    /// still up.
    ChildDeleted,
    /// The gateway deleted the IKE SA, and with it the CHILD_SA.
    IkeDeleted,
    /// A CREATE_CHILD_SA rekeyed the CHILD_SA (linerate's
    /// [`Session::rekey_child`](crate::Session::rekey_child), or the gateway's request, answered): the
    /// new keys are in [`Session::child`](crate::Session::child), the old CHILD_SA is deleted.
    ChildRekeyed,
    /// The gateway asked for an exchange linerate does not do (a new
    /// CHILD_SA beside the first), or one it cannot do now (an IKE SA
    /// rekey while a request of linerate's is in flight, or of another
    /// suite); it was answered with an error notify (NO_ADDITIONAL_SAS,
    /// TEMPORARY_FAILURE, NO_PROPOSAL_CHOSEN). The tunnel stays up.
    Refused { exchange: u8 },
    /// A rekey that linerate started failed (no answer, or refused); the
    /// old CHILD_SA (or IKE SA) stays. [`Session::poll`](crate::Session::poll) returns the
    /// error itself.
    RekeyFailed,
    /// A CREATE_CHILD_SA rekeyed the IKE SA (RFC 7296 §2.18; linerate's
    /// [`Session::rekey_ike`](crate::Session::rekey_ike), or the gateway's request, answered): new
    /// SPIs ([`Session::ike_spis`](crate::Session::ike_spis)) and keys, message IDs from 0, the
    /// CHILD_SA moved under it with its keys unchanged (the data path
    /// goes on as it was). The old IKE SA is deleted by the side that
    /// started the rekey.
    IkeRekeyed,
    /// The gateway deleted the CHILD_SA a rekey replaced: it has the new
    /// one installed both ways. After a rekey the gateway started, this is
    /// when linerate may send on the new SA (RFC 7296 §2.8: until then the
    /// gateway, which installs its new inbound SA only once it has
    /// linerate's answer, may not know the new SPI yet).
    RekeyedChildDeleted,
}
