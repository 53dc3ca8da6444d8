/* What the kernel did with the frames the in-kernel generator sent.
 *
 * The generator's XDP_TX in live-frames mode is a redirect to the tester
 * port itself: each frame is queued for the device (dev_xdp_enqueue) and
 * handed to the driver's ndo_xdp_xmit when the batch is flushed. Both
 * steps can refuse a frame, and the program that returned XDP_TX never
 * learns of it. The kernel reports both on tracepoints:
 *
 * - xdp_redirect_err: the frame was not even queued (the device has no
 *   ndo_xdp_xmit or does not advertise it: a veth whose peer has no NAPI,
 *   a NIC without an XDP program of its own; frame above the MTU).
 * - xdp_devmap_xmit: per flush, `sent` frames the driver took and `drops`
 *   it did not; `err` < 0 when it refused the whole bulk (veth: -ENXIO,
 *   the peer cannot receive XDP frames), 0 when only the ring was full.
 *
 * The flush runs inside the generator's BPF_PROG_RUN call, on the
 * generator's thread, so each generator thread registers its thread id
 * and port; events of other threads, of other devices, and of a DUT
 * redirecting in a softirq that happens to run on this thread (its
 * from_dev differs from to_dev) are ignored.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Only the field read; CO-RE finds it in the running kernel's BTF. */
struct net_device {
	int ifindex;
} __attribute__((preserve_access_index));

struct tx_tally {
	__u32 ifindex;	/* the tester port (in the generator's namespace) */
	__s32 last_err; /* the last error the kernel gave (0: none) */
	__u64 sent;	/* taken by the driver */
	__u64 ring_full;/* refused by the driver with err 0: its ring was full */
	__u64 refused;	/* refused outright (err < 0) or never queued */
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32); /* thread id */
	__type(value, struct tx_tally);
} tx_tally SEC(".maps");

static __always_inline struct tx_tally *mine(const struct net_device *dev)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct tx_tally *t = bpf_map_lookup_elem(&tx_tally, &tid);

	if (!t || !dev || dev->ifindex != (int)t->ifindex)
		return 0;
	return t;
}

SEC("tp_btf/xdp_devmap_xmit")
int lr_devmap_xmit(unsigned long long *ctx)
{
	const struct net_device *from = (const void *)ctx[0];
	const struct net_device *to = (const void *)ctx[1];
	int sent = (int)ctx[2], drops = (int)ctx[3], err = (int)ctx[4];
	struct tx_tally *t;

	if (from != to)
		return 0;
	t = mine(to);
	if (!t)
		return 0;
	if (sent > 0)
		__sync_fetch_and_add(&t->sent, sent);
	if (drops > 0) {
		if (err < 0)
			__sync_fetch_and_add(&t->refused, drops);
		else
			__sync_fetch_and_add(&t->ring_full, drops);
	}
	if (err)
		t->last_err = err;
	return 0;
}

SEC("tp_btf/xdp_redirect_err")
int lr_redirect_err(unsigned long long *ctx)
{
	const struct net_device *dev = (const void *)ctx[0];
	int err = (int)ctx[3];
	struct tx_tally *t = mine(dev);

	if (!t)
		return 0;
	__sync_fetch_and_add(&t->refused, 1);
	t->last_err = err;
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
