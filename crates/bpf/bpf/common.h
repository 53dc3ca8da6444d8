/* Shared by linerate's XDP programs: the test frame layout (must match
 * crates/wire: template.rs and signature.rs). */
#ifndef LINERATE_COMMON_H
#define LINERATE_COMMON_H

#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* "LR": the signature's magic and the test traffic's default UDP port. */
#define LR_MAGIC 0x4C52
/* Ethernet 14 + IPv4 20 + UDP 8: untagged IPv4, the default layout. An
 * 802.1Q tag adds 4, IPv6 20 (crates/wire encap.rs): the signature is at
 * 42, 46, 62 or 66, and LR_SIG_OFFSET_MAX bounds the headers before it. */
#define LR_SIG_OFFSET 42
#define LR_SIG_OFFSET_MAX 66
#define LR_SIG_LEN 12
#define LR_UDP_CSUM_OFFSET 40

struct lr_signature {
	__be16 magic;
	__be16 stream;
	__be32 seq;
	__be32 tx_ts;
} __attribute__((packed));

#endif
