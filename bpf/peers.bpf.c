//go:build ignore
/* peers.bpf.c: TCP connections on etcd's peer port (2380): handshake RTT,
 * setup (to the peer's first byte), smoothed/min RTT samples, lifetime,
 * retransmits. Tracepoints only (tp_btf:
 * the BTF twins hand us the struct sock pointer, so every tcp_sock field is a
 * CO-RE read; no kprobes or fentry, which some kernels refuse).
 *
 * Ports: the classic sock:inet_sock_set_state tracepoint stores sport/dport
 * already converted to host order (a known trap when mixing it with raw
 * sk reads). We read the sock directly: inet_sport and skc_dport are
 * network order and are converted here; the event carries host order only. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "peers.h"
#include "ring.h"

#define AF_INET 2
#define AF_INET6 10

/* TCP states (include/net/tcp_states.h) */
#define TCP_ESTABLISHED 1
#define TCP_SYN_SENT 2
#define TCP_SYN_RECV 3
#define TCP_CLOSE 7
#define TCP_LISTEN 10

/* Keep the record type and enums in the object for bpf2go -type. */
const struct peer_event *unused_peer_event __attribute__((unused));
const enum peer_event_kind *unused_peer_event_kind __attribute__((unused));
const enum peer_event_flag *unused_peer_event_flag __attribute__((unused));

/* port: the peer port; a socket matches if its local or remote port is it. */
const volatile __u16 port = 2380;
/* filter_peers: if set, only remote addresses in peer_addrs match. */
const volatile __u8 filter_peers = 0;
/* netns_ino: if non-zero, only sockets in this network namespace match. */
const volatile __u32 netns_ino = 0;
/* rtt_sample_interval_ns: at most one PEER_EV_RTT per socket this often. */
const volatile __u64 rtt_sample_interval_ns = 1000000000ULL;
/* peer_wake_bytes: unread bytes in peer_events past which a record wakes
 * the reader at once (ring.h; the tracer sets an eighth of the ring). Under
 * connection churn (tens of thousands of events a second) the adaptive
 * wake-up of a plain commit woke the reader every few records: most of a
 * starved reader's CPU went to waking (bench/findings.md, section 13). */
const volatile __u64 peer_wake_bytes = 1 << 17;
/* retransmit_err_arg: this kernel's tcp_retransmit_skb passes the
 * retransmit's error third (Linux 6.13+) and fires on failures too (before,
 * only on success): Go reads it from the prototype in the kernel's BTF
 * (tracer/peers.go) and the program then drops a failed retransmit, so
 * every kernel reports the same thing: segments sent again. Read-only: the
 * verifier drops the branch not taken, and with it the third argument. */
const volatile bool retransmit_err_arg = false;
/* owner_wake_gap_ns: the least time between two owner wake-ups (peer_submit);
 * the tracer sets its poll under load (tracer's pollInterval), so a record
 * that does not wake the reader is read within that of the last one that did. */
const volatile __u64 owner_wake_gap_ns = 50000000ULL;
/* last_owner_wake_ns: when a record last woke the reader for an owner
 * look-up. Shared by every CPU without a lock: two CPUs that race may both
 * wake it, one wake-up too many. */
__u64 last_owner_wake_ns = 0;

/* struct tcp_skb_cb's segment count under a flavour of our own, so a
 * kernel whose BTF lacks the struct still loads (retrans_segs). */
struct tcp_skb_cb___segs {
	__u32 seq;
	__u32 end_seq;
	__u16 tcp_gso_segs;
} __attribute__((preserve_access_index));

/* peer_addrs: key = remote address, 16 bytes, IPv4 as ::ffff:a.b.c.d;
 * value unused. Filled by userspace when filter_peers is set. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct in6_addr);
	__type(value, __u8);
} peer_addrs SEC(".maps");

/* sock_info: what we know about one live matching socket. */
struct sock_info {
	__u64 syn_ns;         /* SYN_SENT set (active opens), else 0 */
	__u64 est_ns;         /* ESTABLISHED reached, 0 if before the tracer */
	__u64 last_sample_ns; /* last PEER_EV_RTT sent */
	__u32 pid;            /* connect() caller's tgid, 0 if unknown */
	__u8 flags;           /* PEER_F_* */
	__u8 close_started;   /* PEER_EV_CLOSE_START already sent */
	__u8 setup_done;      /* PEER_EV_SETUP sent, or not wanted (adopted) */
	__u8 owner_woken;     /* a record woke the reader for its owner */
	char comm[16];
};

/* socks: key = struct sock address; value = sock_info. Entries are made at
 * SYN_SENT, at SYN_RECV→ESTABLISHED, or at the first segment of a socket
 * that predates the tracer, and deleted at →CLOSE. LRU so a missed CLOSE
 * cannot fill it. */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct sock_info);
} socks SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
	__type(value, struct peer_event);
} peer_events SEC(".maps");

/* lost_events: key 0 = ring buffer reserves that failed (per CPU). Added
 * to atomically: the programs nest (tcp_retransmit_skb and tcp_probe in
 * softirq on top of inet_sock_set_state in a task), and two failed
 * reserves on one CPU would otherwise count one (events.h's count_lost). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost_events SEC(".maps");

/* owner_wanted reports whether e is the record Go looks its socket's owner
 * up from (tracer/peers.go, PeersTracer.Read): its opener unknown (pid 0:
 * accepted, or open before the tracer), its file known (sock_ino: accepted),
 * not closing (the fd is likely gone), and no earlier record of the socket
 * woke the reader for it. */
static __always_inline bool owner_wanted(const struct peer_event *e, const struct sock_info *si)
{
	return si && !si->owner_woken && !e->pid && e->sock_ino &&
	       e->kind != PEER_EV_CLOSE_START && e->kind != PEER_EV_CLOSE;
}

/* peer_submit commits a reserved record quietly unless it is the one that
 * crosses peer_wake_bytes, or the first of a socket whose owner Go must look
 * up in /proc while the socket is still open (owner_wanted): that one wakes
 * the reader at once, however long an idle reader's poll has grown, unless
 * another did less than owner_wake_gap_ns ago (connection churn: then it is
 * read at the reader's next poll, at most that long after the wake-up, as
 * the reader polls every owner_wake_gap_ns while it finds records). si: the
 * socket's entry in socks, or NULL. */
static __always_inline void peer_submit(struct peer_event *e, struct sock_info *si)
{
	__u64 flags = es_wake_flags(&peer_events, peer_wake_bytes, sizeof(*e), true);

	if (owner_wanted(e, si) && e->ts_ns - last_owner_wake_ns >= owner_wake_gap_ns) {
		last_owner_wake_ns = e->ts_ns;
		si->owner_woken = 1;
		flags = BPF_RB_FORCE_WAKEUP;
	}
	bpf_ringbuf_submit(e, flags);
}

static __always_inline void count_lost(void)
{
	__u32 k = 0;
	__u64 *v = bpf_map_lookup_elem(&lost_events, &k);
	if (v)
		__sync_fetch_and_add(v, 1);
}

/* fill_addrs copies family, ports and addresses and reports whether the
 * socket matches the port, netns and peer filters. */
static __always_inline bool match_fill(const struct sock *sk, struct peer_event *e)
{
	__u16 family = BPF_CORE_READ(sk, __sk_common.skc_family);
	/* inet_sport, not skc_num: →CLOSE fires after inet_put_port zeroed
	 * skc_num (the trace call sits in inet_sk_state_store). */
	__u16 lport = bpf_ntohs(BPF_CORE_READ((const struct inet_sock *)sk, inet_sport));
	__u16 rport = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	struct in6_addr remote = {};

	if (family != AF_INET && family != AF_INET6)
		return false;
	if (lport != port && rport != port)
		return false;
	if (netns_ino) {
		__u32 ino = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
		if (ino != netns_ino)
			return false;
	}
	e->family = family;
	e->sport = lport;
	e->dport = rport;
	if (family == AF_INET) {
		__u32 s = BPF_CORE_READ(sk, __sk_common.skc_rcv_saddr);
		__u32 d = BPF_CORE_READ(sk, __sk_common.skc_daddr);
		__builtin_memcpy(e->saddr, &s, 4);
		__builtin_memcpy(e->daddr, &d, 4);
		remote.in6_u.u6_addr16[5] = 0xffff;
		remote.in6_u.u6_addr32[3] = d;
	} else {
		BPF_CORE_READ_INTO(&e->saddr, sk, __sk_common.skc_v6_rcv_saddr.in6_u.u6_addr8);
		BPF_CORE_READ_INTO(&e->daddr, sk, __sk_common.skc_v6_daddr.in6_u.u6_addr8);
		__builtin_memcpy(&remote, e->daddr, 16);
	}
	if (filter_peers && !bpf_map_lookup_elem(&peer_addrs, &remote))
		return false;
	return true;
}

static __always_inline void fill_tcp(const struct sock *sk, struct peer_event *e)
{
	const struct tcp_sock *tp = (const struct tcp_sock *)sk;

	e->srtt_us = BPF_CORE_READ(tp, srtt_us) >> 3;
	e->mdev_us = BPF_CORE_READ(tp, mdev_us) >> 2;
	e->min_rtt_us = BPF_CORE_READ(tp, rtt_min.s[0].v);
	e->total_retrans = BPF_CORE_READ(tp, total_retrans);
	e->bytes_acked = BPF_CORE_READ(tp, bytes_acked);
	e->bytes_received = BPF_CORE_READ(tp, bytes_received);
	e->netns = BPF_CORE_READ(sk, __sk_common.skc_net.net, ns.inum);
	/* NULL sk_socket (not yet accepted, or orphaned) reads as 0. */
	e->sock_ino = BPF_CORE_READ(sk, sk_socket, file, f_inode, i_ino);
}

static __always_inline void fill_info(struct peer_event *e, const struct sock_info *si)
{
	if (!si)
		return;
	e->pid = si->pid;
	e->flags = si->flags;
	__builtin_memcpy(e->comm, si->comm, sizeof(e->comm));
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(inet_sock_set_state, const struct sock *sk, int oldstate, int newstate)
{
	struct peer_event *e;
	struct sock_info *si;
	__u64 key = (__u64)sk, now = bpf_ktime_get_ns();
	__u8 kind;

	if (BPF_CORE_READ(sk, sk_protocol) != IPPROTO_TCP)
		return 0;
	/* Listening sockets come and go with etcd itself: not peers. */
	if (oldstate == TCP_LISTEN || newstate == TCP_LISTEN)
		return 0;

	if (newstate == TCP_SYN_SENT) {
		struct peer_event tmp = {};
		struct sock_info n = {};

		/* connect() runs in the caller's context: the owner is current.
		 * The local port may still be 0 here, so match on the remote. */
		if (!match_fill(sk, &tmp))
			return 0;
		n.syn_ns = now;
		n.pid = bpf_get_current_pid_tgid() >> 32;
		n.flags = PEER_F_ACTIVE;
		bpf_get_current_comm(n.comm, sizeof(n.comm));
		bpf_map_update_elem(&socks, &key, &n, BPF_ANY);
		return 0;
	}

	si = bpf_map_lookup_elem(&socks, &key);
	if (newstate == TCP_ESTABLISHED) {
		kind = PEER_EV_OPEN;
	} else if (newstate == TCP_CLOSE) {
		kind = PEER_EV_CLOSE;
	} else if (oldstate == TCP_ESTABLISHED) {
		kind = PEER_EV_CLOSE_START;
	} else {
		return 0;
	}

	e = bpf_ringbuf_reserve(&peer_events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		goto out;
	}
	__builtin_memset(e, 0, sizeof(*e));
	if (!match_fill(sk, e)) {
		bpf_ringbuf_discard(e, 0);
		return 0;
	}
	e->ts_ns = now;
	e->sk = key;
	e->kind = kind;
	e->oldstate = oldstate;
	e->newstate = newstate;
	fill_tcp(sk, e);

	if (kind == PEER_EV_OPEN) {
		if (oldstate == TCP_SYN_SENT && si) {
			e->duration_ns = now - si->syn_ns;
			si->est_ns = now;
		} else if (oldstate == TCP_SYN_RECV) {
			/* Softirq context: current is whoever the packet interrupted
			 * (on loopback usually the connecting peer), so no pid. */
			struct sock_info n = {};
			n.est_ns = now;
			n.flags = PEER_F_PASSIVE;
			bpf_map_update_elem(&socks, &key, &n, BPF_ANY);
			si = bpf_map_lookup_elem(&socks, &key);
		}
	} else if (si) {
		__u64 since = si->est_ns;
		if (kind == PEER_EV_CLOSE_START) {
			/* Active opens count from SYN_SENT: what a client that dials
			 * per request waits for (dial + TLS + request + answer). */
			if (si->syn_ns)
				since = si->syn_ns;
			si->close_started = 1;
		}
		e->duration_ns = since ? now - since : 0;
	}
	fill_info(e, si);
	peer_submit(e, si);
out:
	if (kind == PEER_EV_CLOSE)
		bpf_map_delete_elem(&socks, &key);
	return 0;
}

/* remember_existing returns the sock_info of a matching socket, creating
 * one for a connection that was established before the tracer started. */
static __always_inline struct sock_info *lookup_or_adopt(const struct sock *sk, __u64 key)
{
	struct sock_info *si = bpf_map_lookup_elem(&socks, &key);
	struct sock_info n = {};

	if (si)
		return si;
	n.flags = PEER_F_PREEXISTING;
	n.setup_done = 1; /* its setup happened before tracing */
	bpf_map_update_elem(&socks, &key, &n, BPF_NOEXIST);
	return bpf_map_lookup_elem(&socks, &key);
}

/* payload_len: bytes of data in a received TCP segment. At tcp_probe
 * (the top of tcp_rcv_established) skb->data is the TCP header. */
static __always_inline __u32 payload_len(const struct sk_buff *skb)
{
	const unsigned char *th = BPF_CORE_READ(skb, data);
	__u32 len = BPF_CORE_READ(skb, len);
	__u8 doff = 0;

	/* doff: the high nibble of byte 12, in 32-bit words. */
	bpf_probe_read_kernel(&doff, 1, th + 12);
	doff = (doff >> 4) * 4;
	return len > doff ? len - doff : 0;
}

/* tcp_probe fires for each segment received in ESTABLISHED. Sampling srtt
 * here (at most once per socket per rtt_sample_interval_ns) gives RTT for
 * connections that live for hours without waiting for their close. */
SEC("tp_btf/tcp_probe")
int BPF_PROG(tcp_probe, struct sock *sk, const struct sk_buff *skb)
{
	__u64 key = (__u64)sk, now = bpf_ktime_get_ns();
	struct peer_event *e, tmp = {};
	struct sock_info *si;

	/* Cheap port check before touching maps: tcp_probe sees every TCP
	 * segment received on the host. */
	if (!match_fill(sk, &tmp))
		return 0;
	si = lookup_or_adopt(sk, key);
	if (!si)
		return 0;
	if (!si->setup_done && (si->syn_ns || si->est_ns) && payload_len(skb) > 0) {
		si->setup_done = 1;
		e = bpf_ringbuf_reserve(&peer_events, sizeof(*e), 0);
		if (!e) {
			count_lost();
		} else {
			__builtin_memcpy(e, &tmp, sizeof(*e));
			e->ts_ns = now;
			e->sk = key;
			e->kind = PEER_EV_SETUP;
			e->oldstate = e->newstate = TCP_ESTABLISHED;
			e->duration_ns = now - (si->syn_ns ? si->syn_ns : si->est_ns);
			fill_tcp(sk, e);
			fill_info(e, si);
			peer_submit(e, si);
		}
	}
	if (si->last_sample_ns && now - si->last_sample_ns < rtt_sample_interval_ns)
		return 0;
	si->last_sample_ns = now;

	e = bpf_ringbuf_reserve(&peer_events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		return 0;
	}
	__builtin_memcpy(e, &tmp, sizeof(*e));
	e->ts_ns = now;
	e->sk = key;
	e->kind = PEER_EV_RTT;
	e->oldstate = e->newstate = TCP_ESTABLISHED;
	e->duration_ns = si->est_ns ? now - si->est_ns : 0;
	fill_tcp(sk, e);
	fill_info(e, si);
	peer_submit(e, si);
	return 0;
}

/* retrans_segs returns how many segments a retransmitted skb went out as:
 * tcp_skb_pcount(skb), TCP_SKB_CB(skb)->tcp_gso_segs in skb->cb (the
 * count __tcp_retransmit_skb adds to Tcp RetransSegs). Without the
 * struct in the kernel's BTF, its layout since Linux 3.18 (the count at
 * byte 8 of cb). */
static __always_inline __u16 retrans_segs(const struct sk_buff *skb)
{
	const void *cb = (const void *)skb->cb;
	__u16 segs = 0;

	if (bpf_core_type_exists(struct tcp_skb_cb___segs))
		segs = BPF_CORE_READ((const struct tcp_skb_cb___segs *)cb, tcp_gso_segs);
	else
		bpf_probe_read_kernel(&segs, sizeof(segs), cb + 8);
	return segs ? segs : 1;
}

SEC("tp_btf/tcp_retransmit_skb")
int BPF_PROG(tcp_retransmit_skb, const struct sock *sk, const struct sk_buff *skb)
{
	__u64 key = (__u64)sk;
	struct peer_event *e, tmp = {};
	struct sock_info *si;

	if (retransmit_err_arg) {
		int err = (int)ctx[2];

		if (err)
			return 0; /* not sent: not counted, as before 6.13 */
	}
	if (!match_fill(sk, &tmp))
		return 0;
	e = bpf_ringbuf_reserve(&peer_events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		return 0;
	}
	__builtin_memcpy(e, &tmp, sizeof(*e));
	e->ts_ns = bpf_ktime_get_ns();
	e->sk = key;
	e->kind = PEER_EV_RETRANSMIT;
	e->segs = retrans_segs(skb);
	e->oldstate = e->newstate = BPF_CORE_READ(sk, __sk_common.skc_state);
	fill_tcp(sk, e);
	si = bpf_map_lookup_elem(&socks, &key);
	fill_info(e, si);
	peer_submit(e, si);
	return 0;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
