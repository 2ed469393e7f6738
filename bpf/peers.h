/* peers.h: the event the peers programs send to Go, and its enums. Shared
 * with Go by bpf2go -type (tracer/peers.go decodes through the generated
 * struct; TestEnumsMatchC pins event.PeerKind to enum peer_event_kind). */
#ifndef ETCDSCOPE_PEERS_H
#define ETCDSCOPE_PEERS_H

/* peer_event.kind */
enum peer_event_kind {
	/* ESTABLISHED reached. Active open (SYN_SENT→ESTABLISHED): duration_ns is
	 * the handshake as the stack saw it (SYN_SENT set → SYN-ACK processed).
	 * Passive open (SYN_RECV→ESTABLISHED): duration_ns is 0 and srtt_us is
	 * the kernel's SYN-ACK→ACK RTT (tcp_synack_rtt_meas runs just before). */
	PEER_EV_OPEN = 1,
	/* First state after ESTABLISHED (FIN_WAIT1: we close; CLOSE_WAIT: the
	 * peer closes). duration_ns: since SYN_SENT (active) or ESTABLISHED
	 * (passive): how long the connection was in use. */
	PEER_EV_CLOSE_START = 2,
	/* →CLOSE. duration_ns: lifetime since ESTABLISHED (0 if unknown: the
	 * socket predates the tracer, or never got established). */
	PEER_EV_CLOSE = 3,
	/* Rate-limited RTT sample from tcp:tcp_probe (a received segment). */
	PEER_EV_RTT = 4,
	/* tcp:tcp_retransmit_skb on a matching socket. */
	PEER_EV_RETRANSMIT = 5,
	/* The first segment with data from the peer, once per connection
	 * opened while tracing. duration_ns is the connection's setup: since
	 * SYN_SENT (active: handshake + the peer's time to its first byte,
	 * e.g. a TLS ServerHello or the answer to the first request) or since
	 * ESTABLISHED (passive: the wait for the first request). */
	PEER_EV_SETUP = 6,
};

/* peer_event.flags: who opened the connection. */
enum peer_event_flag {
	PEER_F_ACTIVE = 1,      /* this host opened the connection (connect) */
	PEER_F_PASSIVE = 2,     /* this host accepted it */
	PEER_F_PREEXISTING = 4, /* first seen after it was established */
};

struct peer_event {
	__u64 ts_ns;          /* bpf_ktime_get_ns(): CLOCK_MONOTONIC */
	__u64 sk;             /* struct sock address: an id while it lives */
	__u64 duration_ns;    /* see enum peer_event_kind */
	__u64 bytes_acked;    /* tcp_sock.bytes_acked (sent and acked) */
	__u64 bytes_received; /* tcp_sock.bytes_received */
	__u32 pid;            /* tgid that called connect(); 0 if unknown */
	__u32 srtt_us;        /* tcp_sock.srtt_us >> 3: smoothed RTT, µs */
	__u32 mdev_us;        /* tcp_sock.mdev_us >> 2: mean deviation, µs */
	__u32 min_rtt_us;     /* tcp_sock.rtt_min.s[0].v: windowed min RTT, µs */
	__u32 total_retrans;  /* tcp_sock.total_retrans */
	__u32 netns;          /* network namespace inode */
	__u16 sport;          /* local port, host order */
	__u16 dport;          /* remote port, host order */
	__u16 family;         /* AF_INET or AF_INET6 */
	__u8 kind;            /* enum peer_event_kind */
	__u8 flags;           /* enum peer_event_flag */
	__u8 oldstate;        /* TCP_* state before (set_state events) */
	__u8 newstate;        /* TCP_* state after */
	__u16 segs;           /* PEER_EV_RETRANSMIT: segments the retransmit
	                       * sent (tcp_skb_pcount: what Tcp RetransSegs
	                       * and tcp_sock.total_retrans add; more than one
	                       * when writes queued behind a loss went out as
	                       * one GSO skb); 0 for the other kinds */
	__u8 saddr[16];       /* local address; IPv4 in the first 4 bytes */
	__u8 daddr[16];       /* remote address; IPv4 in the first 4 bytes */
	char comm[16];        /* comm of the connect() caller, if known */
	__u64 sock_ino;       /* inode of the socket's file, 0 if none yet
	                       * (not accepted) or any more (closed); lets
	                       * userspace find the owner in /proc/PID/fd */
};

#endif
