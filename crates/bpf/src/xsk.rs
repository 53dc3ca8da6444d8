//! The AF_XDP redirect program (owned by the AF_XDP work; placeholder).
