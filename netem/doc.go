// Package netem delays and drops etcd's peer traffic, and only that: it
// builds, verifies, shows and removes a tc tree on one device,
//
//	root  prio 1: bands 4, default priomap (selects bands 1-3 only)
//	1:4   netem 40: delay/jitter/loss as asked
//	1:    classifier: dst = peer AND (dport = 2380 OR sport = 2380) -> 1:4
//
// so both the client side (we dial the peer's :2380) and the server side
// (the peer dialled our :2380) of every peer link are delayed, IPv4 and
// IPv6, TCP and UDP, while SSH, storage and the client port 2379 are not.
// The classifier is a cls_bpf program (bpf/classifier.bpf.c, peers in a
// BPF hash map that apply updates in place) or plain u32 filters.
//
// Units: delays are time.Duration nanoseconds end to end (netem's
// TCA_NETEM_LATENCY64/JITTER64, never PSCHED ticks); probabilities and
// correlations are percentages mapped onto the kernel's u32 scale exactly
// as iproute2 does (rint(p/100 * UINT32_MAX)); distribution tables are
// computed as iproute2's netem/normal.c, pareto.c and paretonormal.c
// compute the files tc loads (the tests compare them entry by entry); the
// netem queue limit is rate × maximum delay in MTU-sized packets, never
// below netem's default 1000.
//
// Safety: Apply feature-probes the kernel in a throwaway network
// namespace before it touches anything; refuses to replace a root qdisc
// it did not make unless Options.Replace; writes a state file under
// /run/etcdscope/netem before its first change; reads the tree back and
// fails (rolling back) if the kernel holds anything other than what was
// asked. Clear restores the saved root qdisc from its raw TCA_OPTIONS, or
// the kernel default, from the state file alone (so it also works after
// a SIGKILLed apply).
//
// Libraries. Building uses florianl/go-tc: it encodes netem's
// LATENCY64, JITTER64, CORR and DELAY_DIST attributes and the prio, u32
// and cls_bpf options, which vishvananda/netlink cannot (it has no 64-bit
// latency or jitter, its PR #706 was never merged, and it reads back
// ticks and raw u32 loss values, its issue #480). Reading uses
// mdlayher/netlink (go-tc's transport) raw: go-tc's dump fails as a whole
// on any attribute it does not know anywhere on the host, while `show`
// must decode whatever a host holds, and the raw TCA_OPTIONS bytes are
// exactly what restoring a foreign root needs. vishvananda/netlink only
// resolves device names. The BPF side is cilium/ebpf, as in the tracer.
package netem
