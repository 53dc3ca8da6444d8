//! XDP counter (in progress).
