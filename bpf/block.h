/* block.h: the records of block.bpf.c, one per block request completion
 * and one per flush bio, with op and flags normalised. Shared with Go by
 * bpf2go -type (tracer/block.go). */
#ifndef ETCDSCOPE_BLOCK_H
#define ETCDSCOPE_BLOCK_H

#include "record.h"

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

/* A bio asking for a cache flush (REQ_OP_FLUSH or REQ_PREFLUSH) of a
 * request-based disk got its request (block_getrq). The flush state
 * machine (block/blk-flush.c) answers it with a separate flush request
 * issued later from kblockd, which has no insert event: this marks when
 * the flush was asked for. */
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

/* A write or flush bio on a bio-based disk (device-mapper: a disk with
 * no request queue of its own, whose driver sends each bio on to the
 * disks beneath it), from block_bio_queue to block_bio_complete on that
 * disk. What the driver did in between is the bio_remap_events from this
 * disk and the requests of the disks they name. */
struct dm_bio_event {
	__u8 kind; /* ES_KIND_DM_BIO */
	__u8 op;   /* enum es_op */
	__u8 _pad[2];
	__u32 flags; /* enum es_req_flag bits */
	__u32 dev;   /* the bio-based disk's dev_t */
	__s32 error; /* bi_status at completion */
	__u32 bytes; /* bi_size when queued (0: an empty flush) */
	__u32 pid;   /* task that queued it */
	__u32 tid;
	__u32 _pad2;
	__u64 bio; /* struct bio address: pairs queue and completion */
	__u64 queue_ns;
	__u64 complete_ns;
	char comm[ES_COMM_LEN];
};

/* A stacked driver (device-mapper) remapped a bio of disk dev onto disk
 * target (tracepoint block_bio_remap, written by dm when the target map
 * hands the clone down: after dm-delay's hold, for instance). The clone is
 * not the bio dm_bio_event names: analysis pairs them by disk and time. */
struct bio_remap_event {
	__u8 kind; /* ES_KIND_BIO_REMAP */
	__u8 op;   /* enum es_op */
	__u8 _pad[2];
	__u32 flags;  /* enum es_req_flag bits of the clone */
	__u32 dev;    /* the bio-based disk the bio was sent to */
	__u32 target; /* the whole disk it goes on to */
	__u32 tid;    /* task that sent it down (a dm-delay worker, or the submitter) */
	__u32 _pad2;
	__u64 sector; /* on target */
	__u64 remap_ns;
};

/* Indexes of block.bpf.c's per-CPU block_stats counters (read by Go as
 * FsyncTracer.BlockStats through the bpf2go -type constants). */
enum blk_stat {
	BLK_STAT_COMPLETE_RUNS = 0,  /* block_rq_complete runs (every disk) */
	BLK_STAT_COMPLETE_EMITS = 1, /* block completions put in events */
	BLK_STAT_NO_START = 2,       /* completions emitted with no insert/issue seen */
	BLK_STAT_COLLISION = 3,      /* both slots held by others: a start not kept */
	BLK_STAT_FLUSH_BIO_EMITS = 4,
	BLK_STAT_UNSEEN_COMPLETE = 5, /* a request of a busy disk issued again without its completion seen */
	BLK_STAT_IDLE_DISK = 6,       /* completions and flush bios dropped: no traced call in flight on their disk */
	BLK_STAT_UNUSED = 7,          /* completions dropped: no use to the analysis (a read; a write with no start seen) */
	BLK_STAT_DM_BIO_EMITS = 8,    /* dm_bio_events put in events */
	BLK_STAT_DM_COLLISION = 9,    /* a dm bio's start overwrote another one in flight in the same slot */
	BLK_STAT_REMAP_EMITS = 10,    /* bio_remap_events put in events */
	BLK_STAT_NR = 11,
};

#endif
