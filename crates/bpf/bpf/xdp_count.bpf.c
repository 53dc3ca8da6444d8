/* linerate's in-kernel analyzer (the `xdp` engine's receiver).
 *
 * At the receiving port's XDP hook: test frames of the trial's streams are
 * counted per stream (distinct, duplicated, reordered, latency histogram)
 * and dropped; test frames of no current stream count as stray and are
 * dropped; everything else (ARP, ND, ...) goes on to the stack, where
 * linerate's control socket sees it.
 *
 * The counting rules are those of the user-space receiver
 * (crates/engine/src/stats.rs): 32-bit sequence numbers are extended to 64
 * bits against the highest seen; within a window of LR_WINDOW numbers below
 * the highest, a repeat is a duplicate and an older number is reordered;
 * anything older than the window is counted as reordered.
 *
 * Latency is measured on the frames whose 32-bit sequence number has no
 * bit of lat_mask set: every frame (mask 0), or every 2nd, 4th, ... frame
 * of each stream. Reading the clock is about a third of what this program
 * costs a frame (34 of ~140 ns on the development VM, docs/BENCHMARKS.md),
 * so above about a million frames per second user space samples (the
 * engine's LatencySampling): the frames still all count, and each sampled
 * latency is exact.
 *
 * The window is a ring of slots holding the extended sequence number last
 * seen there, tagged with the trial's generation, so nothing needs clearing
 * between trials: a slot of an earlier trial never matches.
 *
 * Concurrency: a stream's frames arrive on one receive queue (one 5-tuple,
 * one RSS bucket), and a queue's NAPI poll never runs on two CPUs at once,
 * so per-stream state needs no lock. Stray frames come from anywhere and
 * are counted atomically.
 */
#include "common.h"

#define LR_WINDOW_BITS 17
#define LR_WINDOW (1u << LR_WINDOW_BITS)
/* Latency histogram: values below 2^SUB_BITS ns exactly, above that 2^SUB_BITS
 * buckets per power of two (relative width 1/128 = 0.8 %), up to 2^32 ns. */
#define LR_SUB_BITS 7
#define LR_SUB (1u << LR_SUB_BITS)
#define LR_BUCKETS ((32 - LR_SUB_BITS + 1) * LR_SUB)
#define LR_GEN_SHIFT 40 /* slot = generation << 40 | (extended seq + 1) */

struct count_config {
	__u16 first_stream;
	__u16 stream_count;
	__u16 udp_port;
	__u16 pad;
	__u32 generation; /* changes every trial */
	__u32 lat_mask;	  /* latency of frames with (seq & lat_mask) == 0 */
};

struct stream_state {
	__u64 received; /* distinct frames */
	__u64 duplicated;
	__u64 reordered;
	__u64 highest; /* extended sequence number, valid when received > 0 */
	__u64 lat_sum;
	__u64 lat_min;
	__u64 lat_max;
	__u64 lat_count; /* frames whose latency was measured */
	__u64 hist[LR_BUCKETS];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct count_config);
} count_config SEC(".maps");

/* One per stream; user space sizes it (max_entries) before loading. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct stream_state);
} streams SEC(".maps");

/* LR_WINDOW slots per stream; sized by user space to streams * LR_WINDOW. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LR_WINDOW);
	__type(key, __u32);
	__type(value, __u64);
} window SEC(".maps");

/* [0]: stray test frames (of no current stream). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} stray SEC(".maps");

/* The same extension as crates/wire signature.rs extend_seq. */
static __always_inline __u64 extend_seq(__u64 highest, __u32 seq32)
{
	__s64 delta = (__s32)(seq32 - (__u32)highest);
	if (delta < 0 && (__u64)(-delta) > highest)
		return highest + delta + (1ull << 32);
	return highest + delta;
}

static __always_inline __u32 log2_u32(__u32 v)
{
	__u32 r = 0;
	if (v >> 16) { v >>= 16; r += 16; }
	if (v >> 8) { v >>= 8; r += 8; }
	if (v >> 4) { v >>= 4; r += 4; }
	if (v >> 2) { v >>= 2; r += 2; }
	if (v >> 1) { r += 1; }
	return r;
}

static __always_inline __u32 bucket(__u32 v)
{
	if (v < LR_SUB)
		return v;
	__u32 e = log2_u32(v);
	return (e - LR_SUB_BITS + 1) * LR_SUB + ((v >> (e - LR_SUB_BITS)) & (LR_SUB - 1));
}

/* xdp.frags: the program reads only the headers, so it accepts frames
 * spread over several buffers, which lets it attach to ports whose MTU is
 * larger than a page (the lab's 9000). */
SEC("xdp.frags")
int lr_count(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u32 zero = 0;

	/* Ethernet, at most one 802.1Q tag, then IPv4 (any IHL, not a
	 * fragment) or IPv6 (UDP straight after the fixed header), then UDP:
	 * the layouts of crates/wire encap.rs. The checks are those of
	 * crates/wire classify.rs, so every engine takes the same frames for
	 * test frames (a property test in crates/bpf/tests runs this program
	 * and the classifier on the same frames): the IP version, and a UDP
	 * length that holds the signature and fits the IP packet. */
	struct ethhdr *eth = data;
	if ((void *)(eth + 1) > data_end)
		return XDP_PASS;
	__be16 proto = eth->h_proto;
	void *l3 = eth + 1;
	if (proto == bpf_htons(ETH_P_8021Q)) {
		struct vlan_tag {
			__be16 tci;
			__be16 proto;
		} *tag = l3;
		if ((void *)(tag + 1) > data_end)
			return XDP_PASS;
		proto = tag->proto;
		l3 = tag + 1;
	}
	struct udphdr *udp;
	__u32 ip_payload; /* bytes after the IP header, by its length field */
	if (proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *ip = l3;
		if ((void *)(ip + 1) > data_end || ip->version != 4 ||
		    ip->protocol != IPPROTO_UDP)
			return XDP_PASS;
		/* A fragment's payload has no signature to trust. */
		if (ip->frag_off & bpf_htons(0x3fff))
			return XDP_PASS;
		__u32 ihl = ip->ihl * 4;
		__u32 total = bpf_ntohs(ip->tot_len);
		if (ihl < sizeof(*ip) || ihl > 60 || total < ihl)
			return XDP_PASS;
		ip_payload = total - ihl;
		udp = (void *)ip + ihl;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;
		if ((void *)(ip6 + 1) > data_end || ip6->version != 6 ||
		    ip6->nexthdr != IPPROTO_UDP)
			return XDP_PASS;
		ip_payload = bpf_ntohs(ip6->payload_len);
		udp = (void *)(ip6 + 1);
	} else {
		return XDP_PASS;
	}
	if ((void *)(udp + 1) > data_end)
		return XDP_PASS;
	/* The signature inside the UDP datagram, the datagram inside the IP
	 * packet: not read from Ethernet padding or a damaged length. */
	__u32 udp_len = bpf_ntohs(udp->len);
	if (udp_len < sizeof(*udp) + LR_SIG_LEN || udp_len > ip_payload)
		return XDP_PASS;
	struct count_config *cfg = bpf_map_lookup_elem(&count_config, &zero);
	/* udp_port 0: any port (the trial varies the destination port). */
	if (!cfg || (cfg->udp_port && udp->dest != bpf_htons(cfg->udp_port)))
		return XDP_PASS;
	struct lr_signature *sig = (void *)(udp + 1);
	if ((void *)(sig + 1) > data_end || sig->magic != bpf_htons(LR_MAGIC))
		return XDP_PASS;
	/* The arrival time is read as soon as the signature says the frame
	 * is sampled: after the frame's first read, so tens of ns later than
	 * a stamp at the program's entry would be (part of the tester's own
	 * latency, which calibrate measures). */
	__u32 seq32 = bpf_ntohl(sig->seq);
	__u64 now = (seq32 & cfg->lat_mask) ? 0 : bpf_ktime_get_ns();

	__u32 idx = (__u16)(bpf_ntohs(sig->stream) - cfg->first_stream);
	if (idx >= cfg->stream_count) {
		__u64 *s = bpf_map_lookup_elem(&stray, &zero);
		if (s)
			__sync_fetch_and_add(s, 1);
		return XDP_DROP;
	}
	struct stream_state *st = bpf_map_lookup_elem(&streams, &idx);
	if (!st)
		return XDP_DROP;

	__u64 seq = st->received ? extend_seq(st->highest, seq32) : seq32;
	__u32 slot_key = idx * LR_WINDOW + (seq & (LR_WINDOW - 1));
	__u64 *slot = bpf_map_lookup_elem(&window, &slot_key);
	if (!slot)
		return XDP_DROP;
	__u64 tag = ((__u64)cfg->generation << LR_GEN_SHIFT) | ((seq + 1) & ((1ull << LR_GEN_SHIFT) - 1));

	if (st->received && seq <= st->highest) {
		if (st->highest - seq < LR_WINDOW && *slot == tag) {
			st->duplicated++;
			return XDP_DROP;
		}
		st->reordered++;
		if (st->highest - seq < LR_WINDOW)
			*slot = tag;
	} else {
		st->highest = seq;
		*slot = tag;
	}
	st->received++;
	if (seq32 & cfg->lat_mask)
		return XDP_DROP; /* not sampled */

	/* Latency modulo 2^32 ns, as elapsed32 in crates/wire; a negative one
	 * (only a clock step can make it) counts as 0. */
	__u32 lat = (__u32)now - bpf_ntohl(sig->tx_ts);
	if (lat > 0x7fffffff)
		lat = 0;
	st->lat_sum += lat;
	st->lat_count++;
	if (st->lat_count == 1 || lat < st->lat_min)
		st->lat_min = lat;
	if (lat > st->lat_max)
		st->lat_max = lat;
	__u32 b = bucket(lat);
	/* Keep the bounds check where the verifier sees it: clang would
	 * otherwise drop it on the path where it can prove b < 128. */
	asm volatile("" : "+r"(b));
	if (b < LR_BUCKETS)
		st->hist[b]++;
	return XDP_DROP;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
