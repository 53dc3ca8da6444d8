/* linerate's in-kernel generator (the `xdp` engine's transmitter).
 *
 * User space runs this program with BPF_PROG_RUN in live-frames mode
 * (BPF_F_TEST_XDP_LIVE_FRAMES): the kernel runs it in a loop on a frame
 * made from the trial's template, and transmits each frame it returns
 * XDP_TX for out of the tester port. No socket, no copy from user space.
 *
 * Pacing is done here, because each BPF_PROG_RUN call has a fixed cost of
 * tens of milliseconds on this kernel (measured: ~26 ms on 6.18), far too
 * much to drive a schedule batch by batch from user space. One call covers
 * the whole trial: every run of the program is a tick that reads the clock;
 * when the next frame is due it is stamped and sent (XDP_TX), otherwise the
 * buffer goes straight back (XDP_DROP, tens of ns). Frame i is due
 * i * interval after the first run, as in the user-space pacer; a generator
 * that falls behind sends back to back until it has caught up. After the
 * last frame (or the give-up time) every tick is idle, and user space ends
 * the call with a signal.
 *
 * Live frames reuse their page buffers: a buffer may come back holding a
 * frame a previous run modified, so every header byte up to the end of the
 * signature is checked for every frame, and written where it differs. The payload after the signature is
 * never modified by anyone and stays as the template made it.
 *
 * A trial may mix frame sizes (IMIX), and a drop test sends two traffic
 * classes (its own headers per class, and a stream id per class: the
 * template index k picks both). The frame user space hands in is the
 * largest size; frame i takes size sequence[i % seq_len], and a smaller
 * size is made by cutting the tail (bpf_xdp_adjust_tail) and writing that
 * size's own headers (lengths, IP checksum) and checksum base. The kernel
 * restores the full length before every run, and the filler after the
 * signature depends only on the byte's position, so a cut frame is
 * byte-for-byte the smaller template.
 *
 * Layouts (crates/wire encap.rs): the frames are IPv4 or IPv6, untagged
 * or with one 802.1Q tag; sig_offset (42, 46, 62 or 66) says where the
 * signature starts. Everything before it is headers: the first 42 bytes
 * come from headers[k], the rest from headers_ext[k]. Each layout has a
 * copy of the stamping code with its offset as a constant, so every copy
 * and bounds check has a size the verifier knows.
 *
 * Flows (crates/wire flows.rs): up to six header fields (MACs, addresses,
 * ports) take a value computed from the frame's sequence number (inc, dec,
 * or a fixed hash for "random"), written after the headers, with the IPv4
 * and UDP checksums updated incrementally (RFC 1624). flows.rs computes
 * the same values; the tests compare the two.
 *
 * Each frame carries its *scheduled* send time in the receiver's clock
 * (monotonic + clock_offset), so latency includes the tester's own delays.
 *
 * Catching up is paced too: after a stall (the machine took the CPU for
 * milliseconds) the frames due meanwhile go out no closer than min_gap_ns
 * (a quarter of the interval: at most 4x the trial's rate), not back to
 * back at the tester's full speed. A burst of hundreds of frames at
 * millions per second overflows a receiving ring (a veth holds 256) and
 * would measure the tester's hiccup as the device's loss; a hardware
 * tester never stalls, and 4x keeps the catch-up short (a 25 ms stall is
 * made up within about 8 ms).
 *
 * Several generator threads (--tx-threads) each load their own copy of
 * this object, so each has its own gen_config and gen_state: one thread,
 * one stream, one schedule, and the state below has a single writer. The
 * maps are deliberately not per-CPU (nor indexed by the CPU id): a
 * BPF_PROG_RUN call only disables migration while it runs a batch
 * (bpf_test_timer_enter, NO_MIGRATE); between batches
 * bpf_test_timer_continue re-enables it around cond_resched(), so a thread
 * that is not strictly pinned can move to another CPU mid-trial, and two
 * threads that share a CPU would share a per-CPU slot. A copy per thread is
 * correct whatever the placement; pinning is only for speed.
 */
#include "common.h"

#define LR_MAX_SIZES 16 /* crates/wire mix.rs MAX_SET_TEMPLATES */
#define LR_MAX_SEQ 256	/* crates/wire mix.rs MAX_SET_SEQUENCE */
#define LR_MAX_RANGES 6 /* crates/wire flows.rs MAX_RANGES */

/* One varying field (crates/wire flows.rs FieldRange). */
struct lr_range {
	__u64 min;
	__u64 span;	 /* max - min + 1 */
	__u64 start_off; /* inc: start - min; dec: max - start */
	__u64 step;	 /* step mod span */
	__u16 offset;	 /* in the frame */
	__u8 width;	 /* 2, 4 or 6 bytes */
	__u8 mode;	 /* 0 inc, 1 dec, 2 random */
	__u8 in_ip;	 /* covered by the IPv4 header checksum */
	__u8 in_udp;	 /* covered by the UDP checksum */
	__u8 field;	 /* salt of the random mode */
	__u8 pad;
};

struct gen_config {
	__u64 interval_q16; /* ns between frames, times 2^16 */
	__u64 total;	    /* frames in the trial */
	__u64 give_up_ns;   /* after the first frame: stop sending after this */
	__u64 clock_offset; /* receiver's clock minus CLOCK_MONOTONIC, ns */
	__u64 min_gap_ns;   /* least time between two frames (catch-up pacing) */
	/* Per size: folded ones-complement sum of the datagram with stream, seq
	 * and tx_ts zero (crates/wire template.rs): checksum = ~fold(base +
	 * stamped words). */
	__u32 csum_base[LR_MAX_SIZES];
	/* Per size: bytes cut from the end of the (largest) input frame. */
	__u32 trim[LR_MAX_SIZES];
	__u32 seq_len; /* 1..LR_MAX_SEQ */
	__u16 stream;
	__u16 pad;
	__u8 sequence[LR_MAX_SEQ]; /* size index of each frame of a repetition */
	/* Per size: Ethernet, IPv4, UDP (checksum ignored). */
	__u8 headers[LR_MAX_SIZES][LR_SIG_OFFSET];
	/* Per template: added to stream (a drop test's second traffic class
	 * is counted as streams of its own). */
	__u16 stream_add[LR_MAX_SIZES];
	__u32 nranges;
	__u32 pad2;
	struct lr_range ranges[LR_MAX_RANGES];
	/* Appended for IPv6 and VLAN layouts (0 means LR_SIG_OFFSET). */
	__u32 sig_offset;
	__u32 pad3;
	/* Per size: the header bytes from LR_SIG_OFFSET up to sig_offset. */
	__u8 headers_ext[LR_MAX_SIZES][LR_SIG_OFFSET_MAX - LR_SIG_OFFSET];
	/* Furthest behind schedule the generator catches up (0: always);
	 * beyond it the schedule is shifted (see lr_generate). */
	__u64 max_late_ns;
};

struct gen_state {
	__u64 next_seq; /* frames sent so far in this trial */
	__u64 start_ns; /* CLOCK_MONOTONIC of the first run (frame 0) */
	__u64 last_ns;	/* CLOCK_MONOTONIC when the last frame was stamped */
	__u64 ticks;	/* program runs, sent or idle */
	__u64 last_tick_ns; /* CLOCK_MONOTONIC of the previous run */
	__u64 max_gap_ns;   /* longest time between two runs: the generator's
			     * worst stall (preemption, interrupts) */
	__u64 shift_ns;	    /* how far the schedule was shifted in all */
	__u64 shifts;	    /* how many times */
	__u64 credit;	    /* frames known to be due: sent without a clock read */
	__u64 granted;	    /* the credit given at the last clock read */
};

/* A generator more than LR_CREDIT frames behind its schedule, whose ticks
 * take longer than the catch-up gap, sends the next LR_CREDIT frames
 * without reading the clock: they were due when it last read it. Each
 * frame still carries its own scheduled time. Reading the clock is a
 * third of a tick's cost (docs/BENCHMARKS.md), and at the generator's
 * ceiling every tick sends; a generator that keeps up is never that far
 * behind and reads the clock every tick, as does one catching up faster
 * than min_gap_ns allows (the credit would burst). */
#define LR_CREDIT 7

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_config);
} gen_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gen_state);
} gen_state SEC(".maps");

static __always_inline __u32 fold16(__u32 s)
{
	s = (s & 0xffff) + (s >> 16);
	s = (s & 0xffff) + (s >> 16);
	return s;
}

static __always_inline __u64 splitmix64(__u64 x)
{
	__u64 z = x + 0x9E3779B97F4A7C15ULL;
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

/* Writes frame `seq` of size `k` for a layout whose signature starts at
 * `so` (a constant in each caller): headers, signature, flows, checksums. */
static __always_inline int stamp(void *data, void *data_end, struct gen_config *cfg, __u32 k,
				 __u64 seq, __u32 ts32, const __u32 so)
{
	__u32 seq32 = (__u32)seq;
	if (data + so + LR_SIG_LEN > data_end)
		return XDP_ABORTED;

	/* The first 40 header bytes (up to the UDP checksum of the untagged
	 * IPv4 layout, written below), 8 bytes at a time,
	 * stored only where they differ. Almost always they are the same as
	 * the buffer already holds, and a cache line left unwritten here stays
	 * valid in the receiving CPU's cache: on a veth the counter on the
	 * other CPU then misses only on the line holding the signature.
	 * Measured with scripts/xdp-counter-cost.sh: the counter's cost per
	 * frame fell by 8-10 ns (docs/BENCHMARKS.md). Unaligned 8-byte loads
	 * (headers[k] is 42*k bytes in) are fine on x86-64 and arm64. */
#pragma unroll
	for (int i = 0; i < LR_UDP_CSUM_OFFSET / 8; i++) {
		__u64 w = *(const __u64 *)(cfg->headers[k] + 8 * i);
		if (*(__u64 *)(data + 8 * i) != w)
			*(__u64 *)(data + 8 * i) = w;
	}
	/* Other layouts: the rest of the headers (any UDP checksum among
	 * them is rewritten below). */
	if (so > LR_SIG_OFFSET) {
		__builtin_memcpy(data + LR_UDP_CSUM_OFFSET, cfg->headers[k] + LR_UDP_CSUM_OFFSET,
				 LR_SIG_OFFSET - LR_UDP_CSUM_OFFSET);
		__builtin_memcpy(data + LR_SIG_OFFSET, cfg->headers_ext[k], so - LR_SIG_OFFSET);
	}
	__u16 stream = cfg->stream + cfg->stream_add[k];
	struct lr_signature *sig = data + so;
	sig->magic = bpf_htons(LR_MAGIC);
	sig->stream = bpf_htons(stream);
	sig->seq = bpf_htonl(seq32);
	sig->tx_ts = bpf_htonl(ts32);

	/* Flows: rewrite each varying field, summing (~old + new) per word
	 * for the checksums that cover it. */
	__u32 ip_delta = 0, udp_delta = 0;
#pragma unroll
	for (int i = 0; i < LR_MAX_RANGES; i++) {
		if (i >= cfg->nranges)
			break;
		struct lr_range *r = &cfg->ranges[i];
		__u64 span = r->span ? r->span : 1;
		__u64 v;
		if (r->mode == 2)
			v = r->min + splitmix64(seq ^ ((__u64)r->field << 56)) % span;
		else if (r->mode == 1)
			v = r->min + span - 1 - (r->start_off + (seq % span) * r->step) % span;
		else
			v = r->min + (r->start_off + (seq % span) * r->step) % span;
		__u32 off = r->offset & 63;
		__u8 *p = data + off;
		if ((void *)(p + 6) > data_end)
			return XDP_ABORTED;
		__u32 d = 0;
#pragma unroll
		for (int j = 0; j < 3; j++) {
			if (2 * j >= r->width)
				break;
			__u32 shift = 8 * (r->width - 2 - 2 * j);
			__u16 nw = (v >> shift) & 0xffff;
			__u16 old = ((__u16)p[2 * j] << 8) | p[2 * j + 1];
			d += (__u16)~old + (__u32)nw;
			p[2 * j] = nw >> 8;
			p[2 * j + 1] = nw & 0xff;
		}
		if (r->in_ip)
			ip_delta += d;
		if (r->in_udp)
			udp_delta += d;
	}
	if (ip_delta) {
		__u8 *c = data + so - 18; /* the IPv4 checksum: 24, or 28 tagged */
		__u16 old = ((__u16)c[0] << 8) | c[1];
		__u16 nc = ~fold16((__u16)~old + ip_delta) & 0xffff;
		c[0] = nc >> 8;
		c[1] = nc & 0xff;
	}

	__u32 sum = fold16(udp_delta) + cfg->csum_base[k] + stream + (seq32 >> 16) + (seq32 & 0xffff) +
		    (ts32 >> 16) + (ts32 & 0xffff);
	__u16 csum = ~fold16(sum) & 0xffff;
	if (csum == 0)
		csum = 0xffff; /* UDP: 0 means "no checksum" */
	*(__be16 *)(data + so - 2) = bpf_htons(csum);
	return XDP_TX;
}

/* Stamps frame `seq`, scheduled at `due` (CLOCK_MONOTONIC), and sends it. */
static __always_inline int send(struct xdp_md *ctx, struct gen_config *cfg, __u64 seq, __u64 due)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 ts = due + cfg->clock_offset;
	__u32 ts32 = (__u32)ts;

	__u32 slot = cfg->seq_len > 1 ? (__u32)(seq % cfg->seq_len) : 0;
	__u32 k = cfg->sequence[slot & (LR_MAX_SEQ - 1)] & (LR_MAX_SIZES - 1);
	__u32 trim = cfg->trim[k];
	if (trim) {
		if (bpf_xdp_adjust_tail(ctx, -(int)trim))
			return XDP_ABORTED;
		data = (void *)(long)ctx->data;
		data_end = (void *)(long)ctx->data_end;
	}
	switch (cfg->sig_offset) {
	case 46: /* IPv4, tagged */
		return stamp(data, data_end, cfg, k, seq, ts32, 46);
	case 62: /* IPv6 */
		return stamp(data, data_end, cfg, k, seq, ts32, 62);
	case 66: /* IPv6, tagged */
		return stamp(data, data_end, cfg, k, seq, ts32, 66);
	default: /* IPv4 */
		return stamp(data, data_end, cfg, k, seq, ts32, LR_SIG_OFFSET);
	}
}

SEC("xdp")
int lr_generate(struct xdp_md *ctx)
{
	__u32 zero = 0;

	struct gen_config *cfg = bpf_map_lookup_elem(&gen_config, &zero);
	struct gen_state *st = bpf_map_lookup_elem(&gen_state, &zero);
	if (!cfg || !st)
		return XDP_ABORTED;

	/* Only this object's own generator thread runs it (one copy of the
	 * object per thread), so the state needs no atomic operations. */
	st->ticks++;
	__u64 seq = st->next_seq;
	__u64 due;
	if (st->credit) {
		/* Due at the last clock read (LR_CREDIT), and before the give-up
		 * time then: credit is never more than the frames left. */
		st->credit--;
		due = st->start_ns + st->shift_ns + ((seq * cfg->interval_q16) >> 16);
		st->next_seq = seq + 1;
		return send(ctx, cfg, seq, due);
	}
	__u64 now = bpf_ktime_get_ns();
	if (!st->start_ns)
		st->start_ns = now;
	else if (now - st->last_tick_ns > st->max_gap_ns && st->next_seq < cfg->total)
		st->max_gap_ns = now - st->last_tick_ns;
	/* The ticks since the last read (1 + the credit it gave) each took
	 * longer than the catch-up gap: a credit now cannot burst. */
	int slow_ticks = now - st->last_tick_ns >= cfg->min_gap_ns * (st->granted + 1);
	st->last_tick_ns = now;
	st->granted = 0;
	if (seq >= cfg->total || now - st->start_ns - st->shift_ns > cfg->give_up_ns)
		return XDP_DROP;
	due = st->start_ns + st->shift_ns + ((seq * cfg->interval_q16) >> 16);
	if (now < due)
		return XDP_DROP;
	/* Held up (the CPU was taken) for longer than max_late_ns: the frames
	 * due meanwhile are not caught up in a burst, which would overflow the
	 * DUT's input queue and measure the tester's hiccup as the device's
	 * loss; the rest of the schedule moves back instead, as if the trial
	 * had paused. The DUT sees the trial's rate, with a pause. */
	if (cfg->max_late_ns && now - due > cfg->max_late_ns) {
		__u64 shift = now - due - cfg->max_late_ns;
		st->shift_ns += shift;
		st->shifts++;
		due += shift;
	}
	if (seq && now - st->last_ns < cfg->min_gap_ns)
		return XDP_DROP;
	st->next_seq = seq + 1;
	st->last_ns = now;
	/* More than LR_CREDIT frames behind: the next ones are due already. */
	if (slow_ticks && seq + 1 + LR_CREDIT <= cfg->total &&
	    ((now - due) << 16) > LR_CREDIT * cfg->interval_q16) {
		st->credit = LR_CREDIT;
		st->granted = LR_CREDIT;
	}
	return send(ctx, cfg, seq, due);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
