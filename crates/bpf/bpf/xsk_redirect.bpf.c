/* The AF_XDP engine's receive hook: every frame arriving on a receive queue
 * that has an AF_XDP socket in xsks_map goes to that socket; frames of other
 * queues (no entry) go on to the stack as if nothing were attached.
 *
 * The flags argument of bpf_redirect_map (XDP_PASS) is the action taken
 * when the lookup finds no socket, so no separate lookup is needed. */
#include "common.h"

struct {
	__uint(type, BPF_MAP_TYPE_XSKMAP);
	/* Receive queue index -> AF_XDP socket. 64 covers the queue ids a
	 * tester port can ask for (linerate binds one queue per port). */
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u32);
} xsks_map SEC(".maps");

SEC("xdp")
int xsk_redirect(struct xdp_md *ctx)
{
	return bpf_redirect_map(&xsks_map, ctx->rx_queue_index, XDP_PASS);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
