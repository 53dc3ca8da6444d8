//! IKEv2 (RFC 7296): linerate negotiates the CHILD_SA whose keys its data
//! path encrypts and decrypts test frames with.
