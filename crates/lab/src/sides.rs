//! The lab's two sides: which interfaces link each tester namespace to the
//! DUT and which addresses they carry (RFC 2544 Appendix C), and the MTU of
//! every lab link. The one plan that building a lab (`lab.rs`, `wire.rs`),
//! reading one (`status.rs`, `layout.rs`) and configuring its DUT
//! (`scenario`) all follow, kept apart so none of them owns it.

use std::net::Ipv4Addr;

/// MTU of every lab interface: large enough for jumbo-frame trials (veth
/// accepts up to 64 KiB).
pub(crate) const MTU: u32 = 9000;

/// One side of the lab: a tester namespace and its link to the DUT.
pub(crate) struct Side {
    /// Namespace suffix: lr-<name>-<suffix>.
    pub suffix: &'static str,
    pub tester_if: &'static str,
    pub dut_if: &'static str,
    /// The tester host's address, emulated by linerate in user space.
    pub tester_ip: Ipv4Addr,
    /// The DUT's address on this side: the tester's gateway.
    pub dut_ip: Ipv4Addr,
    pub prefix_len: u8,
}

/// RFC 2544 Appendix C: test networks come from 198.18.0.0/15, one /24 on
/// each side of the DUT.
pub(crate) const SIDES: [Side; 2] = [
    Side {
        suffix: "a",
        tester_if: "a0",
        dut_if: "dut-a",
        tester_ip: Ipv4Addr::new(198, 18, 0, 2),
        dut_ip: Ipv4Addr::new(198, 18, 0, 1),
        prefix_len: 24,
    },
    Side {
        suffix: "b",
        tester_if: "b0",
        dut_if: "dut-b",
        tester_ip: Ipv4Addr::new(198, 19, 0, 2),
        dut_ip: Ipv4Addr::new(198, 19, 0, 1),
        prefix_len: 24,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addressing_follows_rfc2544_appendix_c() {
        for side in &SIDES {
            let [a, b, _, _] = side.tester_ip.octets();
            assert!(a == 198 && (b == 18 || b == 19));
            assert_eq!(side.tester_ip.octets()[..3], side.dut_ip.octets()[..3]);
        }
    }
}
