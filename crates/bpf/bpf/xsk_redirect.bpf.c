/* The AF_XDP engine's receive hook: every frame arriving on a receive queue
 * that has an AF_XDP socket in xsks_map goes to that socket; frames of other
 * queues (no entry) go on to the stack as if nothing were attached.
 *
 * The flags argument of bpf_redirect_map (XDP_PASS) is the action taken
 * when the lookup finds no socket, so no separate lookup is needed.
 *
 * With pass_ike set (user space sets it before loading; linerate does on
 * the port of an IPsec peer), IKE goes to the kernel instead, so an IKE
 * daemon's UDP sockets in the port's namespace get it while the trial's ESP
 * goes to the socket: IPv4 (untagged or behind one 802.1Q tag) UDP to port
 * 500; UDP to port 4500 whose first 4 payload bytes are zero (the non-ESP
 * marker of RFC 3948); NAT keepalives (UDP 4500, one payload byte 0xff).
 * ESP in UDP 4500 (a non-zero SPI where the marker would be) and everything
 * else go to the socket. Without the flag the verifier sees the constant 0
 * and drops the check: the program is the one-liner it was.
 *
 * An IKE message larger than the path's MTU (IKE_AUTH with certificates)
 * arrives in IP fragments, and only the first carries the UDP header. When
 * the first fragment is IKE, its (source, destination, IP id) is noted in
 * ike_frags, and the later fragments with the same key follow it to the
 * kernel, which reassembles the datagram (the last one, MF clear, removes
 * the key). A later fragment that arrives before its first goes to the
 * socket: the kernel's reassembly then times out and the sender retransmits
 * the message. Fragments of anything else (ESP in UDP) go to the socket as
 * before. */
#include "common.h"

#define IKE_PORT 500
#define NAT_T_PORT 4500

/* Read-only data, written by the loader before the program is loaded. */
const volatile __u32 pass_ike = 0;

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	/* Receive queue index -> AF_XDP socket. 64 covers the queue ids a
	 * tester port can ask for (linerate binds one queue per port). */
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

/* The IP fragments of IKE datagrams under way (see the top). */
struct ike_frag_key {
	__be32 saddr;
	__be32 daddr;
	__be16 id;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 256);
	__type(key, struct ike_frag_key);
	__type(value, __u8);
} ike_frags SEC(".maps");

struct lr_vlan_hdr {
	__be16 tci;
	__be16 proto;
};

/* Whether the UDP datagram at `udp` (in a whole packet or its first
 * fragment) is IKE or a NAT keepalive. */
static __always_inline int is_ike_udp(struct udphdr *udp, void *end)
{
	if ((void *)(udp + 1) > end)
		return 0;
	if (udp->dest == bpf_htons(IKE_PORT))
		return 1;
	if (udp->dest != bpf_htons(NAT_T_PORT))
		return 0;
	/* UDP's own length: the frame may be padded to 60 bytes. */
	__u16 payload = bpf_ntohs(udp->len);
	if (payload < sizeof(*udp))
		return 0;
	payload -= sizeof(*udp);
	__u8 *p = (void *)(udp + 1);
	if (payload == 1) {
		if ((void *)(p + 1) > end)
			return 0;
		return p[0] == 0xff;
	}
	if (payload < 4 || (void *)(p + 4) > end)
		return 0;
	return (p[0] | p[1] | p[2] | p[3]) == 0;
}

/* Whether the frame is IKE, a NAT keepalive, or a later fragment of an IKE
 * datagram (see the top). Every read is checked against data_end first;
 * anything short or odd is not IKE. */
static __always_inline int is_ike(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > end)
		return 0;
	__be16 proto = eth->h_proto;
	void *l3 = eth + 1;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		struct lr_vlan_hdr *vlan = l3;
		if ((void *)(vlan + 1) > end)
			return 0;
		proto = vlan->proto;
		l3 = vlan + 1;
	}
	if (proto != bpf_htons(ETH_P_IP))
		return 0;
	struct iphdr *ip = l3;
	if ((void *)(ip + 1) > end)
		return 0;
	if (ip->protocol != IPPROTO_UDP)
		return 0;
	__u16 frag = bpf_ntohs(ip->frag_off);
	int more = frag & 0x2000;
	struct ike_frag_key key = { .saddr = ip->saddr, .daddr = ip->daddr, .id = ip->id };
	/* A fragment other than the first carries no UDP header: it is IKE
	 * when its first fragment was. */
	if (frag & 0x1fff) {
		if (!bpf_map_lookup_elem(&ike_frags, &key))
			return 0;
		if (!more)
			bpf_map_delete_elem(&ike_frags, &key);
		return 1;
	}
	__u32 ihl = ip->ihl;
	if (ihl < 5)
		return 0;
	int ike = is_ike_udp(l3 + ihl * 4, end);
	if (ike && more) {
		__u8 one = 1;
		bpf_map_update_elem(&ike_frags, &key, &one, BPF_ANY);
	}
	return ike;
}

SEC("xdp")
int xsk_redirect(struct xdp_md *ctx)
{
	if (pass_ike && is_ike(ctx))
		return XDP_PASS;
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
