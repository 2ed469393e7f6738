/* Structs shared between bpf/classifier.bpf.c and netem/ (Go decodes them
 * through bpf2go -type). */
#ifndef ETCDSCOPE_CLASSIFIER_H
#define ETCDSCOPE_CLASSIFIER_H

/* peer_key is a peer address in network byte order. IPv4 peers are stored
 * IPv4-mapped (::ffff:a.b.c.d) so one map holds both families. */
struct peer_key {
	__u8 addr[16];
};

/* Indexes of the per-CPU counters in map "counters". */
enum classifier_counter {
	COUNTER_MATCHED = 0,  /* packets sent to the netem band */
	COUNTER_SHORT = 1,    /* packets too short to read ports: not matched */
	COUNTER_MAX = 2,
};

#endif
