//! IPv6 Neighbor Discovery (RFC 4861), the IPv6 counterpart of ARP: just
//! enough for a tester port to resolve the DUT's MAC (Neighbor Solicitation
//! out, Advertisement back) and to answer the DUT's solicitations for the
//! port's address.

use crate::checksum::{fold, pseudo_header_ipv6, sum16};
use crate::encap::{Encap, IpVersion, VlanTag, ETHERTYPE_IPV6};
use crate::ethernet::MacAddr;
use crate::ipv6::{multicast_mac, solicited_node, Ipv6Repr, IPPROTO_ICMPV6, IPV6_HEADER_LEN};
use std::net::Ipv6Addr;

const TYPE_NS: u8 = 135;
const TYPE_NA: u8 = 136;
/// ICMPv6 header (4) + flags/reserved (4) + target (16) + one link-layer option (8).
const ND_LEN: usize = 32;
const OPT_SOURCE_LL: u8 = 1;
const OPT_TARGET_LL: u8 = 2;
/// NA flags: Solicited and Override.
const FLAGS_SOLICITED_OVERRIDE: u8 = 0x60;
/// ND messages must arrive with hop limit 255 (RFC 4861 7.1.1): proof they
/// were not routed.
const ND_HOP_LIMIT: u8 = 255;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NdpOp {
    /// Neighbor Solicitation: who has `target`?
    Solicit,
    /// Neighbor Advertisement: `target` is at `link_addr`.
    Advert,
}

/// A Neighbor Solicitation or Advertisement as a tester needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NdpRepr {
    pub op: NdpOp,
    /// The IPv6 source of the message (unspecified for duplicate address detection).
    pub src_ip: Ipv6Addr,
    pub target: Ipv6Addr,
    /// The link-layer option (source for NS, target for NA), or the
    /// Ethernet source when the option is absent.
    pub link_addr: MacAddr,
}

impl NdpRepr {
    /// Parses an IPv6 packet (from its header on) carrying an NS or NA;
    /// None for anything else, including messages not sent with hop limit
    /// 255. `eth_src` stands in for a missing link-layer option.
    pub fn parse(packet: &[u8], eth_src: MacAddr) -> Option<NdpRepr> {
        let ip = Ipv6Repr::parse(packet)?;
        if ip.next_header != IPPROTO_ICMPV6 || ip.hop_limit != ND_HOP_LIMIT {
            return None;
        }
        let icmp = packet.get(IPV6_HEADER_LEN..IPV6_HEADER_LEN + ip.payload_len as usize)?;
        let op = match (icmp.first()?, icmp.get(1)?) {
            (&TYPE_NS, 0) => NdpOp::Solicit,
            (&TYPE_NA, 0) => NdpOp::Advert,
            _ => return None,
        };
        let target: [u8; 16] = icmp.get(8..24)?.try_into().ok()?;
        let mut link_addr = eth_src;
        // Options: type, length in units of 8 bytes, data.
        let mut opts = icmp.get(24..)?;
        while opts.len() >= 8 {
            let len = opts[1] as usize * 8;
            if len == 0 || len > opts.len() {
                break;
            }
            let wanted = match op {
                NdpOp::Solicit => OPT_SOURCE_LL,
                NdpOp::Advert => OPT_TARGET_LL,
            };
            if opts[0] == wanted {
                link_addr = MacAddr::from_bytes(&opts[2..8])?;
            }
            opts = &opts[len..];
        }
        Some(NdpRepr {
            op,
            src_ip: ip.src,
            target: Ipv6Addr::from(target),
            link_addr,
        })
    }
}

/// A complete frame (without FCS) asking who has `target`, sent to its
/// solicited-node multicast address from `src_ip`/`src_mac`.
pub fn solicitation(
    src_mac: MacAddr,
    src_ip: Ipv6Addr,
    target: Ipv6Addr,
    vlan: Option<VlanTag>,
) -> Vec<u8> {
    let dst = solicited_node(target);
    nd_frame(
        NdpOp::Solicit,
        (src_mac, src_ip),
        (multicast_mac(dst), dst),
        target,
        vlan,
    )
}

/// The advertisement that answers `ns` for our address `target` at `mac`.
pub fn advertisement(
    mac: MacAddr,
    target: Ipv6Addr,
    ns: &NdpRepr,
    vlan: Option<VlanTag>,
) -> Vec<u8> {
    // A solicitation from the unspecified address (duplicate address
    // detection) is answered to all nodes.
    let (dst_mac, dst_ip) = if ns.src_ip.is_unspecified() {
        let all: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);
        (multicast_mac(all), all)
    } else {
        (ns.link_addr, ns.src_ip)
    };
    nd_frame(
        NdpOp::Advert,
        (mac, target),
        (dst_mac, dst_ip),
        target,
        vlan,
    )
}

fn nd_frame(
    op: NdpOp,
    (src_mac, src_ip): (MacAddr, Ipv6Addr),
    (dst_mac, dst_ip): (MacAddr, Ipv6Addr),
    target: Ipv6Addr,
    vlan: Option<VlanTag>,
) -> Vec<u8> {
    let encap = Encap {
        ip: IpVersion::V6,
        vlan,
    };
    let ip_off = encap.ip_offset();
    let mut f = vec![0u8; ip_off + IPV6_HEADER_LEN + ND_LEN];
    encap.emit_l2(&mut f, dst_mac, src_mac, ETHERTYPE_IPV6);
    Ipv6Repr {
        src: src_ip,
        dst: dst_ip,
        next_header: IPPROTO_ICMPV6,
        payload_len: ND_LEN as u16,
        hop_limit: ND_HOP_LIMIT,
    }
    .emit(&mut f[ip_off..]);
    let m = &mut f[ip_off + IPV6_HEADER_LEN..];
    let (ty, flags, opt) = match op {
        NdpOp::Solicit => (TYPE_NS, 0, OPT_SOURCE_LL),
        NdpOp::Advert => (TYPE_NA, FLAGS_SOLICITED_OVERRIDE, OPT_TARGET_LL),
    };
    m[0] = ty;
    m[4] = flags;
    m[8..24].copy_from_slice(&target.octets());
    m[24] = opt;
    m[25] = 1;
    m[26..32].copy_from_slice(&src_mac.0);
    let csum = fold(pseudo_header_ipv6(&src_ip, &dst_ip, IPPROTO_ICMPV6, ND_LEN as u32) + sum16(m));
    m[2..4].copy_from_slice(&csum.to_be_bytes());
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::{classify, Received};

    const ME: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
    const GW: MacAddr = MacAddr([2, 0, 0, 0, 0, 9]);

    fn a(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    /// The ICMPv6 checksum, recomputed from the bytes alone.
    fn icmp_ok(f: &[u8], ip_off: usize) -> bool {
        let ip = &f[ip_off..];
        let mut pseudo = Vec::new();
        pseudo.extend_from_slice(&ip[8..40]);
        pseudo.extend_from_slice(&(ip.len() as u32 - 40).to_be_bytes());
        pseudo.extend_from_slice(&[0, 0, 0, 58]);
        fold(sum16(&pseudo) + sum16(&ip[40..])) == 0
    }

    #[test]
    fn solicitation_bytes_and_parse() {
        for vlan in [None, Some(VlanTag { id: 100, pcp: 0 })] {
            let f = solicitation(ME, a("2001:2::2"), a("2001:2::1"), vlan);
            let off = if vlan.is_some() { 18 } else { 14 };
            assert_eq!(f.len(), off + 72);
            assert_eq!(&f[0..6], &[0x33, 0x33, 0xff, 0, 0, 1]);
            assert_eq!(&f[off - 2..off], &[0x86, 0xDD]);
            assert_eq!(f[off + 7], 255);
            assert_eq!(f[off + 40], 135);
            assert!(icmp_ok(&f, off));
            let r = NdpRepr::parse(&f[off..], MacAddr::ZERO).unwrap();
            assert_eq!(
                r,
                NdpRepr {
                    op: NdpOp::Solicit,
                    src_ip: a("2001:2::2"),
                    target: a("2001:2::1"),
                    link_addr: ME
                }
            );
            assert_eq!(classify(&f, 0x4C52), Received::Ndp(r));
        }
    }

    #[test]
    fn advertisement_answers_the_solicitation() {
        let ns = NdpRepr {
            op: NdpOp::Solicit,
            src_ip: a("2001:2::1"),
            target: a("2001:2::2"),
            link_addr: GW,
        };
        let f = advertisement(ME, a("2001:2::2"), &ns, None);
        assert_eq!(&f[0..6], &GW.0);
        assert!(icmp_ok(&f, 14));
        assert_eq!(f[14 + 40], 136);
        assert_eq!(f[14 + 44], 0x60, "solicited + override");
        let r = NdpRepr::parse(&f[14..], MacAddr::ZERO).unwrap();
        assert_eq!(
            (r.op, r.src_ip, r.target, r.link_addr),
            (NdpOp::Advert, a("2001:2::2"), a("2001:2::2"), ME)
        );
        // Duplicate address detection is answered to all nodes.
        let dad = NdpRepr {
            src_ip: Ipv6Addr::UNSPECIFIED,
            ..ns
        };
        let f = advertisement(ME, a("2001:2::2"), &dad, None);
        assert_eq!(&f[0..6], &[0x33, 0x33, 0, 0, 0, 1]);
        assert!(icmp_ok(&f, 14));
    }

    #[test]
    fn routed_or_other_icmp_is_not_nd() {
        let f = solicitation(ME, a("2001:2::2"), a("2001:2::1"), None);
        let mut g = f.clone();
        g[14 + 7] = 64; // hop limit
        assert_eq!(NdpRepr::parse(&g[14..], ME), None);
        let mut g = f.clone();
        g[14 + 40] = 128; // echo request
        assert_eq!(NdpRepr::parse(&g[14..], ME), None);
        // No option: the Ethernet source stands in.
        let mut g = f.clone();
        g[14 + 5] = 24; // payload length without the option
        let r = NdpRepr::parse(&g[14..], GW).unwrap();
        assert_eq!(r.link_addr, GW);
        for n in 0..f.len() - 14 {
            let _ = NdpRepr::parse(&f[14..14 + n], ME);
        }
    }
}
