//! XDP generator (in progress).
