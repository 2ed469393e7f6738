/* Event structs shared by bpf/fsync.bpf.c, bpf/block.bpf.c,
 * bpf/journal.bpf.c and Go (bpf2go -type). All three programs write into
 * one ring buffer (events.h); the first byte of every record is its kind.
 * Timestamps are bpf_ktime_get_ns(): CLOCK_MONOTONIC, ns. Devices are the
 * kernel's dev_t encoding (major << 20 | minor). */
#ifndef ETCDSCOPE_FSYNC_H
#define ETCDSCOPE_FSYNC_H

#define ES_COMM_LEN 16
#define ES_NAME_LEN 48
#define ES_PATH_DEPTH 4

enum es_kind {
	ES_KIND_FSYNC = 1,       /* struct fsync_event: one fsync/fdatasync call */
	ES_KIND_FSYNC_ENTER = 2, /* struct fsync_enter_event: a call started */
	ES_KIND_BLK = 3,         /* struct blk_event: one request completion */
	ES_KIND_JOURNAL = 4,     /* struct journal_event */
	ES_KIND_FLUSH_BIO = 5,   /* struct flush_bio_event */
};

enum es_syscall {
	ES_SYS_FSYNC = 0,
	ES_SYS_FDATASYNC = 1,
	ES_SYS_KTHREAD = 2, /* vfs_fsync in a kernel thread (loop worker): stacked.bpf.c */
};

/* Block operations, normalised from enum req_op through CO-RE so that Go
 * never depends on one kernel's numbering. */
enum es_op {
	ES_OP_OTHER = 0,
	ES_OP_READ = 1,
	ES_OP_WRITE = 2,
	ES_OP_FLUSH = 3,
	ES_OP_DISCARD = 4,
	ES_OP_SECURE_ERASE = 5,
	ES_OP_WRITE_ZEROES = 6,
};

/* Request flags, normalised from enum req_flag_bits through CO-RE (bit
 * positions move between kernel versions). */
enum es_req_flag {
	ES_REQ_SYNC = 1 << 0,
	ES_REQ_META = 1 << 1,
	ES_REQ_PRIO = 1 << 2,
	ES_REQ_NOMERGE = 1 << 3,
	ES_REQ_IDLE = 1 << 4,
	ES_REQ_FUA = 1 << 5,
	ES_REQ_PREFLUSH = 1 << 6,
	ES_REQ_RAHEAD = 1 << 7,
	ES_REQ_BACKGROUND = 1 << 8,
	ES_REQ_NOWAIT = 1 << 9,
};

enum es_journal_source {
	ES_JOURNAL_JBD2_COMMIT = 1, /* ext4: jbd2_start_commit .. jbd2_end_commit */
	ES_JOURNAL_XFS_LOG_FORCE = 2, /* xfs_log_force by the fsyncing thread */
	ES_JOURNAL_JBD2_WAIT = 3, /* the thread waited in jbd2_log_wait_commit (extras.bpf.c) */
};

struct fsync_enter_event {
	__u8 kind; /* ES_KIND_FSYNC_ENTER */
	__u8 _pad[3];
	__u32 tid;
	__u64 start_ns;
};

struct fsync_event {
	__u8 kind;        /* ES_KIND_FSYNC */
	__u8 syscall;     /* enum es_syscall */
	__u8 is_blockdev; /* fd is a block device node: dev is its i_rdev */
	__u8 _pad;
	__s32 fd;
	__u32 pid; /* tgid */
	__u32 tid;
	__u32 dev; /* i_sb->s_dev (or i_rdev for a block device node) */
	__u32 _pad2;
	__u64 ino;
	__u64 cgroup_id;
	__u64 start_ns;
	__u64 end_ns;
	__s64 ret;
	char comm[ES_COMM_LEN];
	char fstype[ES_COMM_LEN];             /* i_sb->s_type->name */
	char names[ES_PATH_DEPTH][ES_NAME_LEN]; /* d_name of file, parent, ... */
};

struct blk_event {
	__u8 kind;  /* ES_KIND_BLK */
	__u8 op;    /* enum es_op */
	__u8 final; /* this completion finished the request */
	__u8 _pad;
	__u32 flags;     /* enum es_req_flag bits */
	__u32 cmd_flags; /* raw rq->cmd_flags, for debugging only */
	__u32 dev;       /* disk dev_t, as the block tracepoints report it */
	__s32 error;     /* blk_status_t */
	__u32 bytes;     /* nr_bytes of this completion */
	__u64 rq;        /* struct request address: pairs the three events */
	__u64 sector;
	__u64 insert_ns; /* 0: never inserted (issued directly) */
	__u64 issue_ns;
	__u64 complete_ns;
	__u32 pid; /* task that inserted (or, if none, issued) the request */
	__u32 tid;
	char comm[ES_COMM_LEN];
};

/* A bio asking for a cache flush (REQ_OP_FLUSH or REQ_PREFLUSH) entered
 * the block layer. The flush state machine (block/blk-flush.c) answers it
 * with a separate flush request issued later from kblockd, which has no
 * insert event: this marks when the flush was asked for. */
struct flush_bio_event {
	__u8 kind; /* ES_KIND_FLUSH_BIO */
	__u8 op;   /* enum es_op */
	__u8 _pad[2];
	__u32 flags; /* enum es_req_flag bits */
	__u32 dev;   /* disk dev_t */
	__u32 pid;
	__u32 tid;
	__u32 _pad2;
	__u64 queue_ns;
};

struct journal_event {
	__u8 kind;   /* ES_KIND_JOURNAL */
	__u8 source; /* enum es_journal_source */
	__u8 _pad[2];
	__u32 dev;      /* filesystem's block device (jbd2 j_fs_dev, xfs m_super->s_dev) */
	__u32 tid;      /* thread that forced the log (xfs) or waited (jbd2 wait); 0 for a commit */
	__u32 txn;      /* jbd2 transaction id (t_tid; for a wait: the one waited for) */
	__u64 start_ns;
	__u64 end_ns;   /* jbd2 end_commit; 0 for an xfs log force */
};

#endif
