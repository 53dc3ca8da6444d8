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
 * anything older than the window is counted as reordered. Each frame's
 * number is also compared with the one after the previous frame's: a jump
 * forward is a small or big sequence error, one back a reverse error.
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
/* Sequence errors: a jump forward over this many numbers or more is big
 * (BIG_GAP in crates/engine/src/stats.rs). */
#define LR_SEQ_BIG 1000
#define LR_GEN_SHIFT 40 /* slot = generation << 40 | (extended seq + 1) */
/* The frame checks of crates/wire integrity.rs. */
#define LR_CHECK_HEADERS 0 /* lengths and the IPv4 header checksum */
#define LR_CHECK_PAYLOAD 1 /* also the UDP checksum over the datagram */
#define LR_MAX_PADDED_FRAME 64
/* The payload check sums the datagram in chunks copied out of the frame
 * (bpf_xdp_load_bytes reads across fragments too); 18 of 512 bytes cover
 * the largest test frame (MAX_CHECKED_DATAGRAM in integrity.rs). */
#define LR_CHUNK 512
#define LR_CHUNKS 18

struct count_config {
	__u16 first_stream;
	__u16 stream_count;
	__u16 udp_port;
	__u16 check; /* LR_CHECK_*: how deep each test frame is checked */
	__u32 generation; /* changes every trial */
	__u32 lat_mask;	  /* latency of frames with (seq & lat_mask) == 0 */
	__u64 sent_below; /* every stream's sequence numbers sent are below this */
	__u64 not_before; /* the trial's start, CLOCK_MONOTONIC ns */
	__u64 interval;	  /* frame n of a stream left >= not_before + n * interval */
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
	__u64 expected;	 /* the number after the previous frame's (0 at first) */
	__u64 seq_small; /* jumps forward over fewer than LR_SEQ_BIG numbers */
	__u64 seq_big;	 /* jumps forward over LR_SEQ_BIG numbers or more */
	__u64 seq_reverse; /* numbers below the expected one */
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

/* [0]: damaged test frames (a check of integrity.rs failed). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} errored SEC(".maps");

/* Where the payload check copies a chunk to sum it. Room for what the
 * verifier can prove of a chunk's length (n & 0x3ff, up to 1023 bytes) and
 * the word after it, zeroed as the sum's padding. */
struct csum_scratch {
	__u8 buf[1024 + 4];
};
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct csum_scratch);
} scratch SEC(".maps");

static __always_inline __u32 fold16(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (sum & 0xffff) + (sum >> 16);
}

/* The IPv4 header's checksum is right when the header adds up to 0xffff:
 * its fixed 20 bytes read in place, options (if any) copied out first. */
static __always_inline int ipv4_header_ok(struct xdp_md *ctx, struct iphdr *ip, __u32 l3_off, __u32 ihl)
{
	__u32 sum = (__u32)bpf_csum_diff(0, 0, (void *)ip, sizeof(*ip), 0);
	if (ihl > sizeof(*ip)) {
		__u32 zero = 0;
		struct csum_scratch *s = bpf_map_lookup_elem(&scratch, &zero);
		/* ihl is 24..60, a multiple of 4; the mask tells the verifier. */
		__u32 n = (ihl - sizeof(*ip)) & 0x3c;
		if (!s || n == 0)
			return 0;
		if (bpf_xdp_load_bytes(ctx, l3_off + sizeof(*ip), s->buf, n))
			return 0;
		sum = (__u32)bpf_csum_diff(0, 0, (void *)s->buf, n, sum);
	}
	return fold16(sum) == 0xffff;
}

/* The UDP checksum over a datagram that has fragments (a jumbo frame in
 * several buffers): `len` bytes at `off`, with the pseudo-header (the
 * `addrs_len` bytes of source and destination address at `addrs_off`, the
 * protocol, the UDP length), summed over chunks that bpf_xdp_load_bytes
 * copies out, since it reads across fragments: right when everything adds
 * up to 0xffff. */
static __always_inline int udp_checksum_copied(struct xdp_md *ctx, __u32 off, __u32 len,
					       __u32 addrs_off, __u32 addrs_len)
{
	__u32 zero = 0;
	struct csum_scratch *s = bpf_map_lookup_elem(&scratch, &zero);
	if (!s || len > LR_CHUNKS * LR_CHUNK)
		return 0;
	if (bpf_xdp_load_bytes(ctx, addrs_off, s->buf, addrs_len))
		return 0;
	__u32 sum = (__u32)bpf_csum_diff(0, 0, (void *)s->buf, addrs_len,
					 bpf_htons(IPPROTO_UDP) + bpf_htons(len));
	for (int i = 0; i < LR_CHUNKS; i++) {
		__u32 done = i * LR_CHUNK;
		if (done >= len)
			break;
		__u32 n = len - done;
		if (n > LR_CHUNK)
			n = LR_CHUNK;
		/* No change (1 <= n <= 512), but bounds the verifier sees: in
		 * asm, since clang drops a mask it can prove useless. */
		asm volatile("%0 += -1\n\t%0 &= 1023\n\t%0 += 1" : "+r"(n));
		/* Zero the word the chunk ends in: an odd tail is summed as if
		 * followed by zeros, as the checksum defines. */
		*(__u32 *)&s->buf[n & 0x3fc] = 0;
		if (bpf_xdp_load_bytes(ctx, off + done, s->buf, n))
			return 0;
		__u32 size = (n + 3) & 0x3fc;
		sum = (__u32)bpf_csum_diff(0, 0, (void *)s->buf, size, sum);
	}
	return fold16(sum) == 0xffff;
}

/* The 32-bit words of `n` bytes (a multiple of 4) at p, added up inline:
 * the one's-complement sum once folded, and in the byte order the words
 * are read in, as bpf_csum_diff's. */
#define LR_SUM_WORDS(sum, p, n)                                              \
	do {                                                                 \
		_Pragma("unroll") for (int _w = 0; _w < (n) / 4; _w++)       \
			(sum) += ((__u32 *)(p))[_w];                         \
	} while (0)

/* p again, at an offset the verifier no longer knows (to it, the
 * difference of two packet pointers is an unknown scalar; the mask keeps it
 * below 16 KiB, past every offset of the largest frame, since the verifier
 * takes a bounds check only when offset and piece fit in 64 KiB): so the
 * bounds checks on p mark no other packet pointer, and all the ways through
 * the sum (a piece summed or not) reach the same state, which keeps the
 * verifier's work linear in the pieces rather than exponential. Costs three
 * instructions. */
#define LR_FORGET_OFFSET(p, data)                                           \
	do {                                                                 \
		__u64 _off = (p) - (data);                                   \
		asm volatile("%0 &= 0x3fff" : "+r"(_off));                   \
		(p) = (data) + _off;                                         \
	} while (0)

/* Sums piece k (a power of two) of what is left of the datagram when `left`
 * has that bit: with bpf_csum_diff from 64 bytes up, inline below, where a
 * helper call costs more than the loads. */
#define LR_PIECE(k)                                                          \
	if (left & (k)) {                                                    \
		if (p + (k) > data_end)                                      \
			return 0;                                            \
		if ((k) >= 64)                                               \
			sum += (__u32)bpf_csum_diff(0, 0, p, (k), 0);        \
		else                                                         \
			LR_SUM_WORDS(sum, p, (k));                           \
		p += (k);                                                    \
		LR_FORGET_OFFSET(p, data);                                   \
	}

/* The UDP checksum of a datagram whose `len` bytes at `udp` all lie in the
 * frame's linear part (below data_end: every frame but a jumbo one in
 * fragments), summed straight from packet memory: 512-byte pieces, then
 * the rest by its binary digits (256 down to 4 bytes), then 0-3 bytes
 * followed by zeros, as the checksum defines an odd tail. The pseudo-header
 * is the `v4` or IPv6 addresses at `addrs`, the protocol and the length.
 * Every piece's bounds are checked, so the verifier takes the reads; on a
 * frame that passed the caller's test none fails. */
static __always_inline int udp_checksum_linear(void *udp, __u32 len, void *addrs, int v4,
					       void *data, void *data_end)
{
	__u64 sum = bpf_htons(IPPROTO_UDP) + bpf_htons(len);
	if (v4) {
		if (addrs + 8 > data_end)
			return 0;
		LR_SUM_WORDS(sum, addrs, 8);
	} else {
		if (addrs + 32 > data_end)
			return 0;
		LR_SUM_WORDS(sum, addrs, 32);
	}
	void *p = udp;
	LR_FORGET_OFFSET(p, data);
	__u32 left = len;
	for (int i = 0; i < LR_CHUNKS; i++) {
		if (left < LR_CHUNK)
			break;
		if (p + LR_CHUNK > data_end)
			return 0;
		sum += (__u32)bpf_csum_diff(0, 0, p, LR_CHUNK, 0);
		p += LR_CHUNK;
		LR_FORGET_OFFSET(p, data);
		left -= LR_CHUNK;
	}
	if (left >= LR_CHUNK)
		return 0;
	LR_PIECE(256)
	LR_PIECE(128)
	LR_PIECE(64)
	LR_PIECE(32)
	LR_PIECE(16)
	LR_PIECE(8)
	LR_PIECE(4)
	/* The last 0-3 bytes, in a word whose other bytes are zero. */
	union {
		__u32 w;
		__u8 b[4];
	} tail = { .w = 0 };
	if (left & 2) {
		if (p + 2 > data_end)
			return 0;
		tail.b[0] = ((__u8 *)p)[0];
		tail.b[1] = ((__u8 *)p)[1];
		if (left & 1) {
			if (p + 3 > data_end)
				return 0;
			tail.b[2] = ((__u8 *)p)[2];
		}
	} else if (left & 1) {
		if (p + 1 > data_end)
			return 0;
		tail.b[0] = ((__u8 *)p)[0];
	}
	sum += tail.w;
	return fold16(sum) == 0xffff;
}

static __always_inline void count(void *map)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(map, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
}

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
	__u32 ip_total;	  /* the IP packet's length, by its length fields */
	int v4 = proto == bpf_htons(ETH_P_IP);
	void *addrs; /* source then destination address, for the pseudo-header */
	if (v4) {
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
		ip_total = total;
		udp = (void *)ip + ihl;
		addrs = &ip->saddr;
	} else if (proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6 = l3;
		if ((void *)(ip6 + 1) > data_end || ip6->version != 6 ||
		    ip6->nexthdr != IPPROTO_UDP)
			return XDP_PASS;
		ip_payload = bpf_ntohs(ip6->payload_len);
		ip_total = sizeof(*ip6) + ip_payload;
		udp = (void *)(ip6 + 1);
		addrs = &ip6->saddr;
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
	 * latency, which calibrate measures), and before the checks below,
	 * whose cost grows with the frame. */
	__u32 seq32 = bpf_ntohl(sig->seq);
	__u64 now = (seq32 & cfg->lat_mask) ? 0 : bpf_ktime_get_ns();

	/* A test frame: counted only if intact (crates/wire integrity.rs). The
	 * frame is as long as its IP packet (or padded to the minimum), the
	 * UDP length is the IP payload's, the IPv4 header checksum is right;
	 * with the payload check, the UDP checksum too. */
	__u32 wire_len = bpf_xdp_get_buff_len(ctx);
	__u32 l2 = l3 - data;
	__u32 on_wire = wire_len > l2 ? wire_len - l2 : 0;
	int ok = udp_len == ip_payload &&
		 (ip_total == on_wire || (ip_total < on_wire && wire_len <= LR_MAX_PADDED_FRAME));
	if (ok && v4)
		ok = ipv4_header_ok(ctx, l3, l2, ip_total - ip_payload);
	if (ok && cfg->check == LR_CHECK_PAYLOAD) {
		/* Zero in IPv4: the sender computed none (RFC 768); IPv6 requires one. */
		if (udp->check == 0)
			ok = v4;
		else if ((void *)udp + udp_len <= data_end)
			ok = udp_checksum_linear(udp, udp_len, addrs, v4, data, data_end);
		else
			ok = udp_checksum_copied(ctx, (void *)udp - data, udp_len, addrs - data,
						 v4 ? 8 : 32);
	}
	if (!ok) {
		count(&errored);
		return XDP_DROP;
	}

	__u32 idx = (__u16)(bpf_ntohs(sig->stream) - cfg->first_stream);
	if (idx >= cfg->stream_count) {
		count(&stray);
		return XDP_DROP;
	}
	struct stream_state *st = bpf_map_lookup_elem(&streams, &idx);
	if (!st)
		return XDP_DROP;

	__u64 seq = st->received ? extend_seq(st->highest, seq32) : seq32;
	/* A number the trial never sent was damaged on the way: errored, and
	 * it moves nothing (not the highest, so no frame after it counts as
	 * reordered), as StreamStats::record in crates/engine/src/stats.rs. */
	if (seq >= cfg->sent_below) {
		count(&errored);
		return XDP_DROP;
	}
	/* Latency modulo 2^32 ns, as elapsed32 in crates/wire. Frame seq left
	 * no earlier than not_before + seq * interval (the generators never
	 * send early); a latency longer than the time since then means a
	 * timestamp in the future: damage (plausible_latency in crates/wire
	 * signature.rs). A frame the DUT held for seconds is late, not
	 * damaged. Checked on the frames whose latency is measured, since
	 * only they read the clock. User space keeps not_before + seq *
	 * interval below 2^64 (XdpCounter::start_trial). */
	__u32 lat = (__u32)now - bpf_ntohl(sig->tx_ts);
	if (!(seq32 & cfg->lat_mask)) {
		__u64 earliest = cfg->not_before + seq * cfg->interval;
		if (now < earliest || lat > now - earliest) {
			count(&errored);
			return XDP_DROP;
		}
	}
	/* Sequence errors against the previous frame's number, duplicates
	 * included (StreamStats::record). */
	if (seq != st->expected) {
		if (seq < st->expected)
			st->seq_reverse++;
		else if (seq - st->expected >= LR_SEQ_BIG)
			st->seq_big++;
		else
			st->seq_small++;
	}
	st->expected = seq + 1;
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
