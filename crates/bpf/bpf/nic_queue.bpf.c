/* The lab's NIC receive ring on the DUT's input: a queue as deep as a
 * NIC's, filled on the tester's CPU and drained on the DUT's.
 *
 * lr_nic_rx runs in the DUT interface's NAPI, which the lab pins to the
 * tester's CPU (where the veth ring is filled): it moves every frame, still
 * an XDP frame (no socket buffer yet), into a cpumap entry for the DUT's
 * CPU, whose queue size is the ring depth. The cpumap's kernel thread on
 * the DUT's CPU runs lr_nic_deliver on each frame, then builds the socket
 * buffer and hands it to the DUT's stack, as a router's driver does with
 * what its NIC wrote into the ring. A full queue drops the frame, as a full
 * NIC ring does: frames queued minus frames delivered are those drops. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_CPUMAP);
	/* Keyed by CPU number; the loader sets it to the CPUs present. */
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct bpf_cpumap_val);
} lr_nic_cpus SEC(".maps");

/* 0: the DUT's CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} lr_nic_config SEC(".maps");

/* 0: frames queued, 1: frames delivered, per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} lr_nic_counts SEC(".maps");

static __always_inline void count(__u32 key)
{
	__u64 *n = bpf_map_lookup_elem(&lr_nic_counts, &key);
	if (n)
		*n += 1;
}

SEC("xdp.frags")
int lr_nic_rx(struct xdp_md *ctx)
{
	__u32 zero = 0;
	__u32 *cpu = bpf_map_lookup_elem(&lr_nic_config, &zero);
	long action;

	if (!cpu)
		return XDP_PASS;
	action = bpf_redirect_map(&lr_nic_cpus, *cpu, XDP_PASS);
	if (action == XDP_REDIRECT)
		count(0);
	return action;
}

SEC("xdp.frags/cpumap")
int lr_nic_deliver(struct xdp_md *ctx)
{
	count(1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
