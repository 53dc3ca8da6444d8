/* The lab DUT's XDP data plane (scenario `xdp-router`, like the 100GE
 * report's "Linux XDP" router): every IPv4 frame arriving on an interface
 * with this program is looked up in the kernel's routing table and
 * neighbour cache with bpf_fib_lookup and sent out of the egress interface
 * with bpf_redirect, rewritten as the kernel's router would (MACs, TTL - 1,
 * header checksum). Anything the lookup cannot forward (no route, neighbour
 * unresolved, TTL expiring, frames for the DUT itself, non-IPv4) goes on to
 * the kernel stack unchanged, which then handles it as usual.
 *
 * stats[0] counts frames redirected, stats[1] frames passed to the stack:
 * the scenario's check that the XDP path really carried the traffic. */
#include "common.h"

#ifndef AF_INET
#define AF_INET 2
#endif

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

static __always_inline void count(__u32 key)
{
	__u64 *v = bpf_map_lookup_elem(&stats, &key);
	if (v)
		*v += 1;
}

/* RFC 1624 incremental update for the TTL decrement (as ip_decrease_ttl). */
static __always_inline void decrease_ttl(struct iphdr *ip)
{
	__u32 check = ip->check;
	check += bpf_htons(0x0100);
	ip->check = (__u16)(check + (check >= 0xFFFF));
	ip->ttl--;
}

/* xdp.frags: the lab's interfaces have a 9000-byte MTU, which veth allows
 * in native mode only for programs that accept multi-buffer frames. The
 * program reads only the headers, which are always in the first buffer. */
SEC("xdp.frags")
int xdp_router(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct bpf_fib_lookup fib = {};
	long rc;

	if ((void *)(ip + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		goto pass;
	if (ip->ihl != 5 || ip->ttl <= 1)
		goto pass;

	fib.family = AF_INET;
	fib.tos = ip->tos;
	fib.l4_protocol = ip->protocol;
	fib.tot_len = bpf_ntohs(ip->tot_len);
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = ip->daddr;
	fib.ifindex = ctx->ingress_ifindex;

	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		goto pass;

	decrease_ttl(ip);
	__builtin_memcpy(eth->h_dest, fib.dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib.smac, ETH_ALEN);
	count(0);
	return bpf_redirect(fib.ifindex, 0);
pass:
	count(1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
