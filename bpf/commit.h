/* Event struct shared by bpf/commit.bpf.c and Go (bpf2go -type
 * commit_event). One record per firing of a uprobe on one of etcd's own Go
 * functions (the write path of a put: proposal, WAL save and sync, the
 * followers' acks, apply). The program is the same for every probe; the
 * attach cookie says which probe fired (enum commit_kind) and so which
 * arguments were read. Go (tracer/commit.go) decodes and package
 * analysis/commit joins the records into writes. Timestamps are
 * bpf_ktime_get_ns(): CLOCK_MONOTONIC, ns. */
#ifndef ETCDSCOPE_COMMIT_H
#define ETCDSCOPE_COMMIT_H

/* commit_kind: which probe fired. _RET kinds fire at one of the
 * function's RET instructions (Go code cannot take uretprobes: goroutine
 * stacks move). Arguments follow Go's amd64 register ABI (ABIInternal:
 * RAX, RBX, RCX, RDI, RSI, R8, ...; the goroutine's g in R14). */
enum commit_kind {
	/* (*EtcdServer).processInternalRaftRequestOnce: a write's whole
	 * server-side life, on the gRPC handler's goroutine. */
	COMMIT_PROPOSE_ENTER = 1,
	COMMIT_PROPOSE_RET = 2,
	/* wait.(*list).Register(id): a = the request id, on the write's
	 * goroutine. */
	COMMIT_REGISTER = 3,
	/* wait.(*list).Trigger(id, x): a = the request id; the write's
	 * result is handed back (apply done), on the apply goroutine. */
	COMMIT_TRIGGER = 4,
	/* (*EtcdServer).applyEntryNormal(e): a = e.Index. */
	COMMIT_APPLY_ENTRY = 5,
	/* (*EtcdServer).applyAll: one batch of committed entries (one Ready)
	 * starts applying. */
	COMMIT_APPLY_ALL = 6,
	/* (*WAL).Save(st, ents): a = ents[0].Index, b = ents[len-1].Index
	 * (0, 0 when no entries), c = st.Commit. */
	COMMIT_SAVE_ENTER = 7,
	COMMIT_SAVE_RET = 8,
	/* (*WAL).sync: the WAL's fdatasync (with its flush of the buffered
	 * writes). */
	COMMIT_SYNC_ENTER = 9,
	COMMIT_SYNC_RET = 10,
	/* rafthttp.(*Transport).Send(msgs): a = len(msgs); the leader sends
	 * a Ready's messages before it saves the entries. */
	COMMIT_SEND = 11,
	/* (*EtcdServer).Process(ctx, m) with m.Type == MsgAppResp: a =
	 * m.From (member id), b = m.Index (the follower's last appended
	 * index). */
	COMMIT_APP_RESP = 12,
	/* grpc.(*Server).processUnaryRPC: one unary RPC from its request
	 * to its response queued for sending, on the goroutine that then runs
	 * the handler (and so processInternalRaftRequestOnce). */
	COMMIT_RPC_ENTER = 13,
	COMMIT_RPC_RET = 14,
	/* Not a uprobe: a scheduler state change (tp_btf sched_switch,
	 * sched_wakeup) of a thread inside (*WAL).sync, between the
	 * COMMIT_SYNC_ENTER and COMMIT_SYNC_RET on it; a = enum
	 * commit_sched_state, tid the thread, goroutine 0. */
	COMMIT_SCHED = 15,
};

/* commit_sched_state: a = of a COMMIT_SCHED record (event.SchedState's
 * values). */
enum commit_sched_state {
	COMMIT_SCHED_RUNNING = 0,  /* switched in */
	COMMIT_SCHED_RUNNABLE = 1, /* woken, or preempted or throttled: waiting for a CPU */
	COMMIT_SCHED_BLOCKED = 2,  /* switched out asleep */
};

struct commit_event {
	__u64 ts_ns;
	__u64 goroutine; /* the g pointer (R14 on amd64): a stable key per goroutine */
	__u64 a, b, c;   /* per enum commit_kind */
	__u32 tid;
	__u8 kind;       /* enum commit_kind */
	__u8 pad[3];
};

/* raftpb layouts the probes read (go.etcd.io/raft/v3/raftpb, and
 * go.etcd.io/etcd/raft/v3/raftpb in etcd v3.5: the same leading fields). */
#define COMMIT_ENTRY_SIZE 48      /* Term, Index uint64; Type int32; Data []byte */
#define COMMIT_ENTRY_INDEX 8
#define COMMIT_MSG_TYPE 0         /* Message.Type (int32) */
#define COMMIT_MSG_FROM 16        /* Message.From */
#define COMMIT_MSG_INDEX 40       /* Message.Index */
#define COMMIT_MSG_APP_RESP 4     /* raftpb.MsgAppResp */

#endif
