/* Structs shared by bpf/commit.bpf.c and Go (bpf2go -type). The uprobes
 * on etcd's own Go functions (the write path of a put: proposal, WAL save
 * and sync, the followers' acks, apply) run one program; the attach
 * cookie says which probe fired (enum commit_kind) and so which arguments
 * were read. The program assembles each write's firings into one struct
 * commit_write, each WAL Save with entries into one struct commit_save
 * and each (*WAL).sync into one struct commit_save of kind
 * COMMIT_SYNC_DONE (the same rules as analysis/commit.Assembler, the
 * reference); a follower's ack and the scheduler records stay one struct
 * commit_event each. With commit_raw set it also sends every firing as a
 * struct commit_event (the reference stream). Every struct ends with the
 * same tid and kind, so Go tells them apart by the record's last word.
 * Timestamps are bpf_ktime_get_ns(): CLOCK_MONOTONIC, ns. */
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
	 * (0, 0 when no entries), c = ents[0].Term. */
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
	 * index). The same probe sends a MsgApp with entries as a struct
	 * commit_msg of kind COMMIT_MSG_APP. */
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
	/* Assembled in the kernel (not probes): one write (struct
	 * commit_write), one WAL Save with entries, one (*WAL).sync (struct
	 * commit_save). */
	COMMIT_WRITE_DONE = 16,
	COMMIT_SAVE_DONE = 17,
	COMMIT_SYNC_DONE = 18,
	/* Process(ctx, m) with m.Type == MsgApp and entries: a follower
	 * receives entries from the leader (struct commit_msg: from, the
	 * first entry's term, the first and last index). Not assembled. */
	COMMIT_MSG_APP = 19,
	/* Assembled: the first Transport.Send on a Raft goroutine after its
	 * Save with entries returned (struct commit_msg: the Save's term,
	 * first and last index; from 0). On a follower that Send carries the
	 * Ready's MsgAppResp (etcd's raft loop sends a follower's messages
	 * after the Save); on the leader it is the next Ready's send. */
	COMMIT_SAVE_SENT = 20,
};

/* COMMIT_KINDS bounds enum commit_kind (the counters' arrays; a power of two, so that a kind masked with COMMIT_KINDS - 1 is in bounds for the verifier). */
#define COMMIT_KINDS 32

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

/* commit_write: one write, assembled from its handler goroutine's
 * probes (RPC, propose, Register) and the apply goroutine's (applyAll,
 * applyEntryNormal, Trigger); kind COMMIT_WRITE_DONE, sent at its last
 * probe (the RPC's return, else the function's). Only writes that were
 * applied (Triggered) are sent. */
struct commit_write {
	__u64 id;           /* etcd's request id (Register) */
	__u64 index;        /* Raft index (applyEntryNormal before the Trigger) */
	__u64 rpc_start_ns; /* processUnaryRPC's entry; 0: no RPC around the write */
	__u64 start_ns;     /* processInternalRaftRequestOnce's entry */
	__u64 end_ns;       /* its return */
	__u64 rpc_end_ns;   /* processUnaryRPC's return; 0 with no RPC around */
	__u64 batch_ns;     /* the apply goroutine's last applyAll before the Trigger (0: none) */
	__u64 trigger_ns;   /* wait.Trigger: the result handed back */
	__u64 goroutine;    /* the handler goroutine's g */
	__u32 tid;          /* thread of the last probe */
	__u8 kind;          /* COMMIT_WRITE_DONE */
	__u8 pad[3];
};

/* commit_save: one WAL Save with entries (COMMIT_SAVE_DONE, sent at its
 * return) or one (*WAL).sync (COMMIT_SYNC_DONE: only sync_start_ns and
 * sync_end_ns, sent at the sync's return). */
struct commit_save {
	__u64 first, last;    /* the entries' first and last index */
	__u64 term;           /* the first entry's term */
	__u64 send_ns;        /* the Transport.Send before it on the Raft goroutine (0: none) */
	__u64 start_ns;       /* Save's entry */
	__u64 end_ns;         /* Save's return */
	__u64 sync_start_ns;  /* the (*WAL).sync inside it (0: none) */
	__u64 sync_end_ns;
	__u32 sync_tids[2];   /* threads at the sync's entry and return */
	__u32 tid;
	__u8 kind;            /* COMMIT_SAVE_DONE or COMMIT_SYNC_DONE */
	__u8 pad[3];
};

/* commit_msg: a MsgApp received (COMMIT_MSG_APP) or the Send after a
 * Save with entries (COMMIT_SAVE_SENT). */
struct commit_msg {
	__u64 from;        /* MsgApp: the sender (the leader's member id); 0 for COMMIT_SAVE_SENT */
	__u64 term;        /* the first entry's term */
	__u64 first, last; /* the entries' first and last index */
	__u64 ts_ns;       /* Process's entry, or the Send's */
	__u32 tid;
	__u8 kind;         /* COMMIT_MSG_APP or COMMIT_SAVE_SENT */
	__u8 pad[3];
};

/* commit_counts: the program's per-CPU counters (map commit_counters). */
struct commit_counts {
	__u64 fired[COMMIT_KINDS];  /* probe firings by enum commit_kind */
	__u64 run_ns[COMMIT_KINDS]; /* the program's time by kind (only with commit_profile) */
	__u64 writes_seen;          /* processInternalRaftRequestOnce entries (not a restart) */
	__u64 writes_sampled;       /* of them, followed (1 in commit_sample_every) */
	__u64 writes_dropped;       /* followed, then forgotten: state map full, or returned unapplied */
};

/* raftpb layouts the probes read (go.etcd.io/raft/v3/raftpb, and
 * go.etcd.io/etcd/raft/v3/raftpb in etcd v3.5: the same leading fields;
 * go.etcd.io/etcd/raft/raftpb in v3.4 too, whose Entry is 72 bytes:
 * commit.bpf.c's commit_entry_size). */
#define COMMIT_ENTRY_SIZE 48      /* Term, Index uint64; Type int32; Data []byte (v3.5, v3.6) */
#define COMMIT_ENTRY_TERM 0
#define COMMIT_ENTRY_INDEX 8
#define COMMIT_MSG_TYPE 0         /* Message.Type (int32) */
#define COMMIT_MSG_FROM 16        /* Message.From */
#define COMMIT_MSG_INDEX 40       /* Message.Index */
#define COMMIT_MSG_ENTRIES 48     /* Message.Entries: pointer, then length at +8 */
#define COMMIT_MSGTYPE_APP 3      /* raftpb.MsgApp */
#define COMMIT_MSG_APP_RESP 4     /* raftpb.MsgAppResp */

#endif
