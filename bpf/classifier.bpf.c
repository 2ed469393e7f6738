//go:build ignore
/* classifier.bpf.c: the cls_bpf classifier of `etcdscope netem`.
 *
 * Attached (not direct-action) to the root prio qdisc 1: with classid 1:4,
 * it returns -1 ("use my classid": the netem band) for a packet whose
 * destination is a peer and whose TCP or UDP destination port (client side)
 * or source port (server side) is `port`, and 0 (no match: the priomap
 * decides, never band 1:4) for everything else. Offsets are taken from the
 * network header (bpf_skb_load_bytes_relative), so it works on devices with
 * and without a link-layer header.
 *
 * Not matched: IPv4 non-first fragments and IPv6 packets whose next header
 * is not TCP or UDP directly (extension headers); etcd's peer traffic has
 * neither.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "classifier.h"

#define ETH_P_IP 0x0800
#define ETH_P_IPV6 0x86DD
#define IP_OFFSET_MASK 0x1fff

/* port is the L4 port (host order) that marks etcd peer traffic; set by
 * netem/ before load. Changing it means loading a new program. */
const volatile __u16 port = 2380;

/* peers: key = peer address (struct peer_key, IPv4 mapped into IPv6),
 * value = unused (1). netem/ updates it in place to change the peer set. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct peer_key);
	__type(value, __u8);
} peers SEC(".maps");

/* counters: key = enum classifier_counter, value = packets (per CPU). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, COUNTER_MAX);
	__type(key, __u32);
	__type(value, __u64);
} counters SEC(".maps");

static __always_inline void count(__u32 idx)
{
	__u64 *v = bpf_map_lookup_elem(&counters, &idx);
	if (v)
		*v += 1;
}

/* match returns -1 if dst is a peer and either port is ours. */
static __always_inline int match(struct __sk_buff *skb, struct peer_key *dst, __u32 l4_off)
{
	__be16 ports[2];

	if (!bpf_map_lookup_elem(&peers, dst))
		return 0;
	if (bpf_skb_load_bytes_relative(skb, l4_off, ports, sizeof(ports), BPF_HDR_START_NET)) {
		count(COUNTER_SHORT);
		return 0;
	}
	if (bpf_ntohs(ports[1]) == port || bpf_ntohs(ports[0]) == port) {
		count(COUNTER_MATCHED);
		return -1;
	}
	return 0;
}

SEC("classifier")
int etcdscope_peer(struct __sk_buff *skb)
{
	struct peer_key dst = {};

	if (skb->protocol == bpf_htons(ETH_P_IP)) {
		struct iphdr ip;

		if (bpf_skb_load_bytes_relative(skb, 0, &ip, sizeof(ip), BPF_HDR_START_NET))
			return 0;
		if (ip.version != 4 || ip.ihl < 5)
			return 0;
		if (ip.protocol != IPPROTO_TCP && ip.protocol != IPPROTO_UDP)
			return 0;
		if (bpf_ntohs(ip.frag_off) & IP_OFFSET_MASK)
			return 0;
		dst.addr[10] = 0xff;
		dst.addr[11] = 0xff;
		__builtin_memcpy(&dst.addr[12], &ip.daddr, 4);
		return match(skb, &dst, ip.ihl * 4);
	}
	if (skb->protocol == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr ip6;

		if (bpf_skb_load_bytes_relative(skb, 0, &ip6, sizeof(ip6), BPF_HDR_START_NET))
			return 0;
		if (ip6.nexthdr != IPPROTO_TCP && ip6.nexthdr != IPPROTO_UDP)
			return 0;
		__builtin_memcpy(dst.addr, &ip6.daddr, 16);
		return match(skb, &dst, sizeof(ip6));
	}
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
