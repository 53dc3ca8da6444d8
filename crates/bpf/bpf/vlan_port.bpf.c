/* The lab DUT's 802.1Q ports, for kernels built without 802.1Q support
 * (CONFIG_VLAN_8021Q unset: no VLAN subinterfaces). Attached with tcx to
 * each of the router's tester-facing interfaces:
 *
 * - ingress (lr_vlan_ingress): a frame tagged with the lab's VLAN id loses
 *   its tag and goes on to the router untagged; anything else (untagged,
 *   or another VLAN) is dropped, as a VLAN subinterface would not see it.
 *   The kernel has already moved the tag out of the frame into the skb
 *   (skb_vlan_untag) when tc runs, so the program reads vlan_tci.
 * - egress (lr_vlan_egress): every frame the router sends (forwarded test
 *   frames, ARP, Neighbor Discovery) gets the tag pushed. With the veth's
 *   transmit VLAN offload off, the kernel writes it into the frame data.
 *
 * The tag control information (VLAN id and priority) is in vlan_config[0].
 */
#include "common.h"
#include <linux/pkt_cls.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} vlan_config SEC(".maps");

static __always_inline int config_tci(__u32 *tci)
{
	__u32 zero = 0;
	__u32 *v = bpf_map_lookup_elem(&vlan_config, &zero);
	if (!v)
		return -1;
	*tci = *v;
	return 0;
}

SEC("tcx/ingress")
int lr_vlan_ingress(struct __sk_buff *skb)
{
	__u32 tci;
	if (config_tci(&tci))
		return TC_ACT_SHOT;
	if (!skb->vlan_present || (skb->vlan_tci & 0x0fff) != (tci & 0x0fff))
		return TC_ACT_SHOT;
	if (bpf_skb_vlan_pop(skb))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

SEC("tcx/egress")
int lr_vlan_egress(struct __sk_buff *skb)
{
	__u32 tci;
	if (config_tci(&tci))
		return TC_ACT_SHOT;
	if (bpf_skb_vlan_push(skb, bpf_htons(0x8100), (__u16)tci))
		return TC_ACT_SHOT;
	return TC_ACT_OK;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
