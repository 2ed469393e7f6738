//go:build ignore

/* block.bpf.c: the life of every block request (insert, issue, complete),
 * keyed by struct request *, with op and flags read from the request and
 * normalised through CO-RE enum relocations. Requests are never paired by
 * (dev, sector): flushes carry no real sector. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "block.h"
#include "events.h"

char LICENSE[] SEC("license") = "GPL";

/* targ_dev: only requests of this disk (dev_t); 0 means every disk. */
const volatile __u32 targ_dev = 0;

/* Keep the record types and enums in the object for bpf2go -type. */
const struct blk_event *unused_blk_event __attribute__((unused));
const struct flush_bio_event *unused_flush_bio_event __attribute__((unused));
const enum es_op *unused_es_op __attribute__((unused));
const enum es_req_flag *unused_es_req_flag __attribute__((unused));

struct rq_start {
	__u64 insert_ns;
	__u64 issue_ns;
	__u32 pid;
	__u32 tid;
	char comm[ES_COMM_LEN];
};

/* starts: struct request address -> when it was inserted/issued and by
 * whom. Deleted at the completion that finishes the request. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, struct rq_start);
} starts SEC(".maps");

#define REQ_OP_BITS_ 8

static __always_inline __u32 rq_dev(struct request *rq)
{
	/* rq is a tp_btf argument, a BTF pointer: plain loads (the verifier
	 * makes them fault-safe), not probe-read helper calls. */
	struct gendisk *disk = rq->q->disk;

	if (!disk)
		return 0;
	return ((__u32)disk->major << 20) | (__u32)disk->first_minor;
}

#define FLAG(bit, out)                                                         \
	if (bpf_core_enum_value_exists(enum req_flag_bits, bit) &&             \
	    (cmd_flags & (1u << bpf_core_enum_value(enum req_flag_bits, bit))))  \
		f |= out;

static __always_inline __u32 norm_flags(__u32 cmd_flags)
{
	__u32 f = 0;

	FLAG(__REQ_SYNC, ES_REQ_SYNC);
	FLAG(__REQ_META, ES_REQ_META);
	FLAG(__REQ_PRIO, ES_REQ_PRIO);
	FLAG(__REQ_NOMERGE, ES_REQ_NOMERGE);
	FLAG(__REQ_IDLE, ES_REQ_IDLE);
	FLAG(__REQ_FUA, ES_REQ_FUA);
	FLAG(__REQ_PREFLUSH, ES_REQ_PREFLUSH);
	FLAG(__REQ_RAHEAD, ES_REQ_RAHEAD);
	FLAG(__REQ_BACKGROUND, ES_REQ_BACKGROUND);
	FLAG(__REQ_NOWAIT, ES_REQ_NOWAIT);
	return f;
}

static __always_inline __u8 norm_op(__u32 cmd_flags)
{
	__u32 op = cmd_flags & ((1u << REQ_OP_BITS_) - 1);

	if (op == bpf_core_enum_value(enum req_op, REQ_OP_READ))
		return ES_OP_READ;
	if (op == bpf_core_enum_value(enum req_op, REQ_OP_WRITE))
		return ES_OP_WRITE;
	if (op == bpf_core_enum_value(enum req_op, REQ_OP_FLUSH))
		return ES_OP_FLUSH;
	if (op == bpf_core_enum_value(enum req_op, REQ_OP_DISCARD))
		return ES_OP_DISCARD;
	if (op == bpf_core_enum_value(enum req_op, REQ_OP_SECURE_ERASE))
		return ES_OP_SECURE_ERASE;
	if (op == bpf_core_enum_value(enum req_op, REQ_OP_WRITE_ZEROES))
		return ES_OP_WRITE_ZEROES;
	return ES_OP_OTHER;
}

static __always_inline void mark(struct request *rq, bool insert)
{
	__u64 key = (__u64)rq;
	__u64 now = bpf_ktime_get_ns();
	struct rq_start *s, n = {};

	if (targ_dev && rq_dev(rq) != targ_dev)
		return;
	s = bpf_map_lookup_elem(&starts, &key);
	if (s) {
		if (insert)
			s->insert_ns = now; /* requeued and inserted again */
		else
			s->issue_ns = now;
		return;
	}
	__u64 id = bpf_get_current_pid_tgid();
	n.pid = id >> 32;
	n.tid = (__u32)id;
	bpf_get_current_comm(n.comm, sizeof(n.comm));
	if (insert)
		n.insert_ns = now;
	else
		n.issue_ns = now;
	if (bpf_map_update_elem(&starts, &key, &n, BPF_ANY))
		count_lost(); /* its completion will not be reported */
}

SEC("tp_btf/block_rq_insert")
int BPF_PROG(block_rq_insert, struct request *rq)
{
	mark(rq, true);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int BPF_PROG(block_rq_issue, struct request *rq)
{
	mark(rq, false);
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	/* Time first: a reserve can spin on the ring buffer's lock. */
	__u64 now = bpf_ktime_get_ns();
	__u64 key = (__u64)rq;
	struct rq_start *s = bpf_map_lookup_elem(&starts, &key);
	struct blk_event *e;
	__u32 cmd_flags, data_len;
	bool final;

	cmd_flags = rq->cmd_flags;
	if (!s) {
		/* Never inserted or issued: it started before tracing, is on a
		 * filtered disk, or is a flush the flush state machine completed
		 * without issuing it (it waited on a flush already in flight).
		 * Report the last kind: the caller waited for a flush. */
		if (norm_op(cmd_flags) != ES_OP_FLUSH && !(norm_flags(cmd_flags) & ES_REQ_PREFLUSH))
			return 0;
		if (targ_dev && rq_dev(rq) != targ_dev)
			return 0;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		/* the request still ends: do not leak its entry */
		goto out;
	}
	data_len = rq->__data_len;
	e->kind = ES_KIND_BLK;
	e->op = norm_op(cmd_flags);
	e->flags = norm_flags(cmd_flags);
	e->cmd_flags = cmd_flags;
	e->dev = rq_dev(rq);
	e->error = error;
	e->bytes = nr_bytes;
	final = nr_bytes >= data_len;
	e->final = final;
	e->_pad = 0;
	e->rq = key;
	e->sector = rq->__sector;
	e->complete_ns = now;
	if (s) {
		e->insert_ns = s->insert_ns;
		e->issue_ns = s->issue_ns;
		e->pid = s->pid;
		e->tid = s->tid;
		__builtin_memcpy(e->comm, s->comm, sizeof(e->comm));
	} else {
		/* the completing context says nothing about who asked */
		e->insert_ns = 0;
		e->issue_ns = 0;
		e->pid = 0;
		e->tid = 0;
		__builtin_memset(e->comm, 0, sizeof(e->comm));
	}
	bpf_ringbuf_submit(e, wakeup_flags_reserved(sizeof(*e)));
	if (!final)
		return 0;
out:
	bpf_map_delete_elem(&starts, &key);
	return 0;
}

SEC("tp_btf/block_bio_queue")
int BPF_PROG(block_bio_queue, struct bio *bio)
{
	__u32 opf = bio->bi_opf;
	__u8 op = norm_op(opf);
	__u32 flags = norm_flags(opf);
	struct flush_bio_event e = {};
	struct gendisk *disk;
	__u64 id;

	if (op != ES_OP_FLUSH && !(flags & ES_REQ_PREFLUSH))
		return 0;
	disk = bio->bi_bdev->bd_disk;
	if (!disk)
		return 0;
	e.dev = ((__u32)disk->major << 20) | (__u32)disk->first_minor;
	if (targ_dev && e.dev != targ_dev)
		return 0;
	id = bpf_get_current_pid_tgid();
	e.kind = ES_KIND_FLUSH_BIO;
	e.op = op;
	e.flags = flags;
	e.pid = id >> 32;
	e.tid = (__u32)id;
	e.queue_ns = bpf_ktime_get_ns();
	emit(&e, sizeof(e));
	return 0;
}
