//go:build ignore

/* block.bpf.c: the life of every block request (insert, issue, complete),
 * keyed by struct request *, with op and flags read from the request and
 * normalised through CO-RE enum relocations, and when each flush bio got
 * its request (block_getrq). Requests are never paired by
 * (dev, sector): flushes carry no real sector. On a bio-based disk
 * (device-mapper), which makes no requests, the life of each write and
 * flush bio instead (queue, complete, keyed by struct bio *) and every
 * remap of a bio onto the disk beneath. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "block.h"
#include "events.h"
#include "compat.h"
#include "kpart.h"

char LICENSE[] SEC("license") = "GPL";

/* targ_dev: only requests of this disk (dev_t); 0 means every disk. */
const volatile __u32 targ_dev = 0;

/* every_block: emit completions and flush bios of every disk at any time,
 * not only of busy ones (events.h); the ftrace oracle test sets it. */
const volatile bool every_block = false;

/* rq_q_arg, bio_q_arg: this kernel's block_rq_insert, _issue and
 * _requeue (before Linux 5.10), and its block_bio_queue and
 * block_bio_remap (before 5.11), take the request queue first: Go reads it
 * from the prototypes in the kernel's BTF (tracer/compat.go) and the
 * programs read their arguments one further (blk_arg). Read-only
 * constants: the verifier drops the branch not taken. */
const volatile bool rq_q_arg = false;
const volatile bool bio_q_arg = false;

/* getrq_q_arg: this kernel's block_getrq takes (queue, bio, rw) (before
 * Linux 5.11), not (bio): the bio is then one further (blk_arg). */
const volatile bool getrq_q_arg = false;

/* Fields and enums older kernels name differently (CO-RE flavours): a
 * request's disk was rq->rq_disk (before 6.0), a bio's bi_disk (before
 * 5.12), and enum req_op was enum req_opf (before 6.0; same values). */
struct request___rq_disk {
	struct gendisk *rq_disk;
} __attribute__((preserve_access_index));

struct bio___bi_disk {
	struct gendisk *bi_disk;
} __attribute__((preserve_access_index));

enum req_opf___old {
	REQ_OP_READ___old = 0,
	REQ_OP_WRITE___old = 1,
	REQ_OP_FLUSH___old = 2,
	REQ_OP_DISCARD___old = 3,
	REQ_OP_SECURE_ERASE___old = 5,
	REQ_OP_WRITE_ZEROES___old = 9,
};

/* blk_arg returns argument i of a tracepoint listed at rq_q_arg (q_arg
 * is that constant) or bio_q_arg, counted without the queue. The loads
 * stay apart (barrier_var): merged into one load from ctx plus a computed
 * offset, the verifier would refuse it. */
static __always_inline void *blk_arg(unsigned long long *ctx, bool q_arg, int i)
{
	void *p;

	if (q_arg) {
		p = (void *)ctx[i + 1];
		barrier_var(p);
	} else {
		p = (void *)ctx[i];
		barrier_var(p);
	}
	return p;
}

/* Keep the record types and enums in the object for bpf2go -type. */
const struct blk_event *unused_blk_event __attribute__((unused));
const struct flush_bio_event *unused_flush_bio_event __attribute__((unused));
const struct dm_bio_event *unused_dm_bio_event __attribute__((unused));
const struct bio_remap_event *unused_bio_remap_event __attribute__((unused));
const enum es_op *unused_es_op __attribute__((unused));
const enum es_req_flag *unused_es_req_flag __attribute__((unused));
const enum blk_stat *unused_blk_stat __attribute__((unused));

struct rq_start {
	struct bpf_spin_lock lock; /* held by a claim of the free slot (and by its read and free off x86) */
	__u32 requeued; /* requeued since its issue: its next insert is the same life */
	__u64 rq;       /* struct request address this slot holds; 0: free */
	__u64 insert_ns;
	__u64 issue_ns;
	__u32 pid;
	__u32 tid;
	char comm[ES_COMM_LEN];
};

#define STARTS_BITS 12

/* starts: slot hash(struct request address), or the slot after it ->
 * when that request was inserted/issued and by whom; rq says which
 * request holds the slot, and the final completion frees it (rq = 0).
 * 4096 slots (224 KiB) and not 65536 (3 MiB): every insert landed on a
 * cold line of the large table, spread over 768 pages (a paired run under
 * fio: block_rq_insert 732 -> 501 ns a run, all programs -8 %,
 * bench/findings.md); a request takes the slot after its own when that
 * is held, so two requests collide only when three meet on two slots
 * (the struct requests of a queue are a fixed pool: few distinct
 * addresses). An array, not a hash map: its
 * lookups cannot fail and its stores take no lock, where a hash map's
 * update and delete take a bucket lock and are refused (-EBUSY, or
 * -EDEADLK with rqspinlock) when a completion in softirq or hardirq
 * context nests on the CPU of a program holding it. A refused delete left
 * a stale entry that a recycled request address then inherited (the old
 * pid, tid and times). A request that finds both its slots held by
 * others (a collision) keeps no start and is counted, never silent.
 *
 * A slot a request holds is written only by that request's own events
 * (insert, issue, requeue, completion), which the kernel runs one after
 * another: they take no lock. Each slot's own bpf_spin_lock (interrupts
 * off while held, so a completion cannot nest on it) makes a claim of a
 * free slot one step: without it two CPUs claiming one free slot at once
 * interleaved their stores (one request's address with the other's issue
 * time), and a request then looked issued twice: 34 false "unseen
 * completions" in a 15 s overload run in which the kernel ran the
 * program for every completion ftrace recorded (docs/performance.md; most
 * of those were addr_scratch's, below). Off x86 the final completion's
 * read and free is one hold too (FREE_ORDERED). Every update and free was
 * a hold until findings 23: 35-60 ns each, three a request, ~10 % of the
 * BPF time per fio fsync. A collision used to take the hash slot from its
 * holder, which needed the holder's updates locked. A spin lock and not a
 * compare-and-swap: BPF's cmpxchg needs Linux 5.12 and -mcpu=v3, a second
 * object; the lock is a read-only constant's branch in this one
 * (es_spin_lock: Linux 5.10 gives tracing programs no bpf_spin_lock, and
 * claims there go without it). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << STARTS_BITS);
	__type(key, __u32);
	__type(value, struct rq_start);
} starts SEC(".maps");

/* block_stats: per-CPU counters of what the block programs did (enum
 * blk_stat, block.h), to compare with ftrace's counts and to account for every
 * completion: runs = emitted + filtered + lost. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, BLK_STAT_NR);
	__type(key, __u32);
	__type(value, __u64);
} block_stats SEC(".maps");

static __always_inline void blk_count(__u32 stat)
{
	__u64 *n = bpf_map_lookup_elem(&block_stats, &stat);

	if (n)
		*n += 1;
}

/* addr_scratch: per-CPU word through which a request pointer becomes a
 * number the program may hash (the verifier allows no arithmetic but add
 * and subtract on a kernel pointer; a value read back from a map is a
 * plain scalar). Every program of this object shares it, and they nest:
 * a completion in hardirq or softirq context interrupts an insert or issue
 * on the same CPU. An interrupt between the store and the load left the
 * nested program's request in the word, and the interrupted program then
 * recorded its insert or issue under another request's address: that
 * request later looked issued twice (a false unseen completion) and the
 * interrupted one had no start (overload runs: 8 of 9 unseen completions
 * counted in one, 79 issues without their insert in the same run;
 * docs/performance.md). addr_hash checks what it read back. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} addr_scratch SEC(".maps");

/* ADDR_TRIES: how often addr_hash writes and reads back the word before
 * it gives up; each retry needs another interrupt in the two instructions
 * between the store and the load. */
#define ADDR_TRIES 4

/* addr_hash puts the address p as a number in *key and returns its
 * Fibonacci hash in bits bits (kernel objects are aligned: their low bits
 * are 0); -1 if a nested program changed the word ADDR_TRIES times in a
 * row (counted as a lost event: the caller drops what it was doing). */
static __always_inline __s64 addr_hash(void *p, __u64 *key, int bits)
{
	__u32 zero = 0;
	__u64 *w = bpf_map_lookup_elem(&addr_scratch, &zero), k;
	__s64 h;
	int i;

	if (!w)
		return -1;
#pragma unroll
	for (i = 0; i < ADDR_TRIES; i++) {
		*w = (__u64)p;
		k = *(volatile __u64 *)w;
		/* The number and its hash, made before the check: past it
		 * the compiler knows k equals p and would use the pointer,
		 * on which the verifier allows no multiplication. */
		*(volatile __u64 *)key = k;
		h = (__s64)((k * 0x9E3779B97F4A7C15ull) >> (64 - bits));
		barrier_var(h);
		/* a pointer compared with a number: privileged programs
		 * only, as every program here is */
		if (k == (__u64)p)
			return h;
	}
	count_lost();
	return -1;
}

/* es_spin_lock: tracing programs may call bpf_spin_lock (not on Linux
 * 5.10, where they get no such helper). Go probes it and clears it where
 * the kernel refuses it (tracer/compat.go); the verifier then drops the
 * lock calls. Here and not in compat.h: only this object takes locks. */
const volatile bool es_spin_lock = true;

/* slot_lock and slot_unlock take and give back slot s's lock where
 * tracing programs may (es_spin_lock). Without it (Linux 5.10) the slots
 * are claimed as before the lock: two CPUs claiming one free slot at once
 * can interleave their stores. */
#define slot_lock(s)                                                           \
	do {                                                                   \
		if (es_spin_lock)                                              \
			bpf_spin_lock(&(s)->lock);                             \
	} while (0)
#define slot_unlock(s)                                                         \
	do {                                                                   \
		if (es_spin_lock)                                              \
			bpf_spin_unlock(&(s)->lock);                           \
	} while (0)

/* FREE_ORDERED: this architecture keeps every load before a later store
 * (x86's TSO), so that block_rq_complete may read a slot
 * and then free it without the lock; arm64 may reorder them. bpf2go
 * builds an object per architecture (__TARGET_ARCH_x86, _arm64). */
#if defined(__TARGET_ARCH_x86)
#define FREE_ORDERED 1
#else
#define FREE_ORDERED 0
#endif

/* rq_who: the life a request starts at an insert or issue, read before a
 * slot's lock is taken (no helper may run while it is held). */
struct rq_who {
	__u64 now;
	__u32 pid;
	__u32 tid;
	char comm[ES_COMM_LEN];
};

/* slot_fill makes s the new life of request key; under s's lock. */
static __always_inline void slot_fill(struct rq_start *s, __u64 key, const struct rq_who *w, bool insert)
{
	s->rq = key;
	s->requeued = 0;
	s->pid = w->pid;
	s->tid = w->tid;
	__builtin_memcpy(s->comm, w->comm, sizeof(s->comm));
	s->insert_ns = insert ? w->now : 0;
	s->issue_ns = insert ? 0 : w->now;
}

/* slot_claim makes the free slot s the new life of request key; false if
 * another request holds it (or took it first on another CPU). */
static __always_inline bool slot_claim(struct rq_start *s, __u64 key, const struct rq_who *w, bool insert)
{
	bool free;

	slot_lock(s);
	free = !s->rq;
	if (free)
		slot_fill(s, key, w, insert);
	slot_unlock(s);
	return free;
}

/* start_slots looks up request rq's two slots (its hash slot and the one
 * after it) and puts its address as a number in *key; false only if a
 * lookup failed, which cannot happen (indexes are masked) but the
 * verifier wants checked. */
static __always_inline bool start_slots(struct request *rq, __u64 *key, struct rq_start **s, struct rq_start **t)
{
	__s64 h = addr_hash(rq, key, STARTS_BITS);
	__u32 i = (__u32)h, j;

	if (h < 0)
		return false;
	j = (i + 1) & ((1u << STARTS_BITS) - 1);
	*s = bpf_map_lookup_elem(&starts, &i);
	*t = bpf_map_lookup_elem(&starts, &j);
	return *s && *t;
}

/* own_slot returns the one of s and t that holds request key, or NULL.
 * Read without the lock: a slot becomes or stops being key's only
 * through key's own events, which the kernel runs one after another. */
static __always_inline struct rq_start *own_slot(__u64 key, struct rq_start *s, struct rq_start *t)
{
	if (s->rq == key)
		return s;
	if (t->rq == key)
		return t;
	return NULL;
}

struct dm_start {
	struct bpf_spin_lock lock; /* held while any field is read or written */
	__u32 _pad0;
	__u64 bio; /* struct bio address this slot holds; 0: free */
	__u64 queue_ns;
	__u32 dev;
	__u32 opf; /* bi_opf when queued */
	__u32 bytes;
	__u32 pid;
	__u32 tid;
	__u32 _pad;
	char comm[ES_COMM_LEN];
};

#define DM_BITS 12

/* dm_slot_mask: the bits of a bio's hash that pick its dm_starts slot;
 * all DM_BITS of them. A test sets fewer (tracer.TestDMSlotsRace: one
 * slot) so that bios on two CPUs meet in one slot. */
const volatile __u32 dm_slot_mask = (1u << DM_BITS) - 1;

/* dm_starts: slot hash(struct bio address) -> a write or flush bio queued
 * on a bio-based disk, until its completion on that disk frees the slot.
 * An array for the reason starts is one; a bio whose completion was never
 * seen holds its slot until another takes it (counted as a collision).
 *
 * Each slot's lock (es_spin_lock, as starts') makes a claim and a
 * read-and-free one step. Without it a completion on one CPU freed the
 * slot and then read its fields while a bio queued on another CPU, hashed
 * to the same slot, filled them: the record went out with the other
 * bio's queue time, disk, op and task (a wrong dm layer for the call), and
 * two bios claiming one free slot at once interleaved their stores, so
 * that one of them completed unseen and uncounted. Without the lock
 * (Linux 5.10) the completion copies the fields before it frees the slot
 * and drops the copy if the slot changed hands meanwhile (a queueing
 * stores its bio before its fields), which narrows the window but cannot
 * close it: x86 keeps stores in order, arm64 need not. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << DM_BITS);
	__type(key, __u32);
	__type(value, struct dm_start);
} dm_starts SEC(".maps");

/* upper_of: lower disk dev_t -> the bio-based disk (device-mapper) whose
 * bios were last remapped onto it (block_bio_remap). A lower disk counts
 * as busy while the disk above it is (busy_deep), so the requests that
 * serve a traced call on a dm device are kept. A disk under two dm
 * devices follows the one that remapped last: its events are then kept
 * while that one is busy. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u32);
} upper_of SEC(".maps");

/* busy_deep: disk dev, or a disk stacked on it up to three levels above,
 * has a traced call in flight. A global function: the verifier checks it
 * once, not at each of its callers with their states (inlined, its walk up
 * the levels is verified again in every state of every caller). */
__noinline int busy_deep(__u32 dev)
{
	__u32 *u;
	int i;

	for (i = 0; i < 4; i++) {
		if (busy(dev))
			return 1;
		u = bpf_map_lookup_elem(&upper_of, &dev);
		if (!u || *u == dev)
			return 0;
		dev = *u;
	}
	return 0;
}

static __always_inline __u32 disk_dev(struct gendisk *disk)
{
	return ((__u32)disk->major << 20) | (__u32)disk->first_minor;
}

#define REQ_OP_BITS_ 8

static __always_inline __u32 rq_dev(struct request *rq)
{
	/* rq is a tp_btf argument, a BTF pointer: plain loads (the verifier
	 * makes them fault-safe), not probe-read helper calls. */
	struct gendisk *disk;

	if (bpf_core_field_exists(struct request___rq_disk, rq_disk))
		disk = ((struct request___rq_disk *)rq)->rq_disk;
	else
		disk = rq->q->disk;

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

/* OP: the value of REQ_OP_x in this kernel's enum req_op or, before 6.0,
 * enum req_opf. */
#define OP(x)                                                                  \
	(bpf_core_type_exists(enum req_op) ? bpf_core_enum_value(enum req_op, x) \
					   : bpf_core_enum_value(enum req_opf___old, x##___old))

static __always_inline __u8 norm_op(__u32 cmd_flags)
{
	__u32 op = cmd_flags & ((1u << REQ_OP_BITS_) - 1);

	if (op == OP(REQ_OP_READ))
		return ES_OP_READ;
	if (op == OP(REQ_OP_WRITE))
		return ES_OP_WRITE;
	if (op == OP(REQ_OP_FLUSH))
		return ES_OP_FLUSH;
	if (op == OP(REQ_OP_DISCARD))
		return ES_OP_DISCARD;
	if (op == OP(REQ_OP_SECURE_ERASE))
		return ES_OP_SECURE_ERASE;
	if (op == OP(REQ_OP_WRITE_ZEROES))
		return ES_OP_WRITE_ZEROES;
	return ES_OP_OTHER;
}

/* bio_disk returns the disk bio is queued on. */
static __always_inline struct gendisk *bio_disk(struct bio *bio)
{
	struct block_device *bdev;

	if (bpf_core_field_exists(struct bio___bi_disk, bi_disk))
		return ((struct bio___bi_disk *)bio)->bi_disk;
	bdev = bio->bi_bdev;
	return bdev ? bdev->bd_disk : NULL;
}

/* is_flush: the request persists the disk's cache (event.Block.IsFlush). */
static __always_inline bool is_flush(__u32 cmd_flags)
{
	return norm_op(cmd_flags) == ES_OP_FLUSH || (norm_flags(cmd_flags) & (ES_REQ_PREFLUSH | ES_REQ_FUA));
}

/* kp_request appends a request's final completion to every call in
 * flight on its disk for which it has a role (analysis.roleOf): any flush;
 * a write with a start that is REQ_META or from a jbd2 thread (journal),
 * or else the call's own thread's (data). kpart.h. */
static __always_inline void kp_request(__u32 dev, __u32 cmd_flags, __u64 insert_ns, __u64 issue_ns, __u64 now,
				       const struct rq_who *w)
{
	bool journal, preflush = false;
	__u8 cat;

	if (is_flush(cmd_flags)) {
		cat = KP_CAT_FLUSH;
		preflush = norm_op(cmd_flags) == ES_OP_FLUSH || (norm_flags(cmd_flags) & ES_REQ_PREFLUSH);
	} else if ((!insert_ns && !issue_ns) || norm_op(cmd_flags) != ES_OP_WRITE) {
		return; /* no start, or not a write: no role */
	} else {
		journal = (norm_flags(cmd_flags) & ES_REQ_META) || (w->comm[0] == 'j' && w->comm[1] == 'b' &&
								     w->comm[2] == 'd' && w->comm[3] == '2' && w->comm[4] == '/');
		cat = journal ? KP_CAT_JOURNAL : KP_CAT_DATA;
	}
	kp_each(dev, 0, cat == KP_CAT_DATA, w->tid, insert_ns, issue_ns, now | kp_bits(KP_E_REQ, cat, preflush));
}

/* mark records an insert or an issue of request rq in its slot. */
static __always_inline void mark(struct request *rq, bool insert)
{
	struct rq_start *s, *t, *own;
	bool unseen;
	struct rq_who w;
	__u64 id, key;

	w.now = bpf_ktime_get_ns();
	if (targ_dev && rq_dev(rq) != targ_dev)
		return;
	if (!start_slots(rq, &key, &s, &t))
		return;
	own = own_slot(key, s, t);
	if (own && !own->issue_ns && (!insert || own->requeued)) {
		/* inserted (or requeued), now issued; or requeued, now
		 * inserted again: the same life, its who kept. No lock: a
		 * slot a request holds is written only by that request's
		 * own events, which the kernel runs one after another (a
		 * claim takes only a free slot, a collision takes none). */
		if (insert)
			own->insert_ns = w.now;
		else
			own->issue_ns = w.now;
		own->requeued = 0;
		return;
	}
	id = bpf_get_current_pid_tgid();
	w.pid = id >> 32;
	w.tid = (__u32)id;
	es_current_comm(w.comm);
	if (own) {
		/* A new life at this address. Its last one was issued and
		 * neither completed nor requeued since (unseen), or inserted
		 * and never issued: merged into another request
		 * (block_rq_merge) and freed, which ends it without a
		 * completion. Its own slot: no lock, as above. */
		unseen = own->issue_ns != 0;
		slot_fill(own, key, &w, insert);
		if (unseen && (every_block || busy_deep(rq_dev(rq))))
			/* The kernel ended the last life without running
			 * block_rq_complete's program, counting no recursion
			 * miss (ftrace recorded the completion; on this
			 * project's 6.18 test host: completions in softirq
			 * context on top of the sandbox agent's threads,
			 * docs/performance.md). Counted where it mattered (its
			 * disk busy): Go adds it to the missed probe runs. */
			blk_count(BLK_STAT_UNSEEN_COMPLETE);
		return;
	}
	if (slot_claim(s, key, &w, insert) || slot_claim(t, key, &w, insert))
		return;
	/* Both held by other requests: this one keeps no start (its
	 * completion goes out without one). Taking a held slot instead
	 * would race with its holder's own updates, which take no lock. */
	blk_count(BLK_STAT_COLLISION);
}

SEC("tp_btf/block_rq_insert")
int block_rq_insert(unsigned long long *ctx)
{
	mark(blk_arg(ctx, rq_q_arg, 0), true);
	return 0;
}

SEC("tp_btf/block_rq_issue")
int block_rq_issue(unsigned long long *ctx)
{
	mark(blk_arg(ctx, rq_q_arg, 0), false);
	return 0;
}

SEC("tp_btf/block_rq_requeue")
int block_rq_requeue(unsigned long long *ctx)
{
	struct request *rq = blk_arg(ctx, rq_q_arg, 0);
	struct rq_start *s, *t, *own;
	__u64 key;

	if (!start_slots(rq, &key, &s, &t))
		return 0;
	own = own_slot(key, s, t);
	if (!own)
		return 0;
	/* back to the queue: its next issue (or insert) is not a second
	 * life; its own slot, no lock (mark) */
	own->issue_ns = 0;
	own->requeued = 1;
	return 0;
}

SEC("tp_btf/block_rq_complete")
int BPF_PROG(block_rq_complete, struct request *rq, blk_status_t error, unsigned int nr_bytes)
{
	/* Time first: a reserve can spin on the ring buffer's lock. */
	__u64 now = bpf_ktime_get_ns();
	struct rq_start *s, *t, *own;
	struct rq_who w = {};
	__u64 key, insert_ns = 0, issue_ns = 0;
	struct blk_event *e;
	__u32 cmd_flags, data_len;
	bool final, known = false;

	blk_count(BLK_STAT_COMPLETE_RUNS);
	if (!start_slots(rq, &key, &s, &t))
		return 0;
	cmd_flags = rq->cmd_flags;
	data_len = rq->__data_len;
	final = nr_bytes >= data_len;
	own = own_slot(key, s, t);
	if (own) {
		/* its start, and the slot freed by the final completion: its
		 * own slot, which no other request writes until freed. A claim
		 * on another CPU may fill it once it reads rq == 0, so every
		 * field is read before that store. x86 keeps a load before a
		 * later store (and the JIT's loads and stores are plain
		 * moves): the compiler barrier is enough. arm64 may make the
		 * store visible first: there the read and the free are one
		 * hold of the slot's lock, which the claim takes too. */
		if (!FREE_ORDERED)
			slot_lock(own);
		known = true;
		insert_ns = own->insert_ns;
		issue_ns = own->issue_ns;
		w.pid = own->pid;
		w.tid = own->tid;
		__builtin_memcpy(w.comm, own->comm, sizeof(w.comm));
		barrier();
		if (final)
			own->rq = 0;
		if (!FREE_ORDERED)
			slot_unlock(own);
	}
	/* Unknown start: never inserted or issued while tracing (it started
	 * before, is a flush the flush state machine completed without issuing
	 * it, or is the second completion the flush state machine gives a data
	 * request), or its slot was taken by a collision. Emitted all the same
	 * (analysis decides); only another disk is filtered. */
	if (kpart && final)
		kp_request(rq_dev(rq), cmd_flags, insert_ns, issue_ns, now, &w);
	if (!known && targ_dev && rq_dev(rq) != targ_dev)
		return 0;
	if (!every_block && !busy_deep(rq_dev(rq))) {
		blk_count(BLK_STAT_IDLE_DISK);
		return 0;
	}
	if (!every_block && !is_flush(cmd_flags) && (norm_op(cmd_flags) != ES_OP_WRITE || !known)) {
		/* The analysis places a non-flush request only as a write
		 * with a start (analysis.roleOf): the rest (reads, discards,
		 * the 0-byte second completion the flush state machine gives a
		 * data write, requests from before tracing) are counted here,
		 * not sent: on ext4 over a loop device, 1.5 records per fsync. */
		blk_count(BLK_STAT_UNUSED);
		return 0;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		return 0;
	}
	e->kind = ES_KIND_BLK;
	e->op = norm_op(cmd_flags);
	e->flags = norm_flags(cmd_flags);
	e->cmd_flags = cmd_flags;
	e->dev = rq_dev(rq);
	e->error = error;
	e->bytes = nr_bytes;
	e->final = final;
	e->_pad = 0;
	e->rq = key;
	e->sector = rq->__sector;
	e->complete_ns = now;
	/* unknown: the completing context says nothing about who asked
	 * (times, pid, tid and comm 0) */
	e->insert_ns = insert_ns;
	e->issue_ns = issue_ns;
	e->pid = w.pid;
	e->tid = w.tid;
	__builtin_memcpy(e->comm, w.comm, sizeof(e->comm));
	if (!known)
		blk_count(BLK_STAT_NO_START);
	bpf_ringbuf_submit(e, wakeup_flags_reserved(sizeof(*e)));
	blk_count(BLK_STAT_COMPLETE_EMITS);
	return 0;
}

/* dm_queue keeps the start of a write or flush bio queued on bio-based
 * disk dev (one with no request queue: device-mapper) while it is busy. */
static __always_inline void dm_queue(struct bio *bio, struct gendisk *disk, __u32 dev, __u32 opf, __u64 now)
{
	__u8 op = norm_op(opf);
	struct dm_start *s;
	struct rq_who w;
	__u64 key, id;
	bool taken;
	__s64 h;
	__u32 i, bytes;

	if (disk->queue->mq_ops)
		return; /* request-based: its requests tell its story */
	if (op != ES_OP_WRITE && op != ES_OP_FLUSH)
		return;
	if (!every_block && !busy_deep(dev))
		return;
	h = addr_hash(bio, &key, DM_BITS);
	if (h < 0)
		return;
	i = (__u32)h & dm_slot_mask;
	s = bpf_map_lookup_elem(&dm_starts, &i);
	if (!s)
		return;
	/* everything a helper reads, before the lock */
	id = bpf_get_current_pid_tgid();
	w.now = now;
	w.pid = id >> 32;
	w.tid = (__u32)id;
	bpf_get_current_comm(w.comm, sizeof(w.comm));
	bytes = bio->bi_iter.bi_size;
	slot_lock(s);
	taken = s->bio && s->bio != key;
	s->bio = key;
	barrier(); /* the claim before the fields (block_bio_complete, no lock) */
	s->queue_ns = w.now;
	s->dev = dev;
	s->opf = opf;
	s->bytes = bytes;
	s->pid = w.pid;
	s->tid = w.tid;
	__builtin_memcpy(s->comm, w.comm, sizeof(s->comm));
	slot_unlock(s);
	if (taken) {
		/* the bio in flight here will complete unseen: an event lost */
		blk_count(BLK_STAT_DM_COLLISION);
		count_lost();
	}
}

/* block_bio_queue keeps the write and flush bios of bio-based disks
 * (device-mapper) for dm_queue. Go attaches it only when a stacked disk
 * exists (tracer/block.go): it runs for every bio of every disk, and on a
 * request-based disk the requests and block_getrq tell everything. */
SEC("tp_btf/block_bio_queue")
int block_bio_queue(unsigned long long *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	struct bio *bio = blk_arg(ctx, bio_q_arg, 0);
	struct gendisk *disk;

	disk = bio_disk(bio);
	if (!disk)
		return 0;
	dm_queue(bio, disk, disk_dev(disk), bio->bi_opf, now);
	return 0;
}

/* is_flush_bio: the bio asks for a flush of the disk's cache (an empty
 * REQ_OP_FLUSH, or a write with REQ_PREFLUSH): two tests, no enum walk,
 * so that every other bio returns at once. */
static __always_inline bool is_flush_bio(__u32 opf)
{
	return (opf & ((1u << REQ_OP_BITS_) - 1)) == OP(REQ_OP_FLUSH) ||
	       (bpf_core_enum_value_exists(enum req_flag_bits, __REQ_PREFLUSH) &&
		(opf & (1u << bpf_core_enum_value(enum req_flag_bits, __REQ_PREFLUSH))));
}

/* block_getrq: a bio of a request-based disk got its request (after
 * writeback throttling and the tag wait, before the plug or the
 * scheduler). A flush bio's time here is when the flush state machine was
 * asked for a flush: the analysis queues a flush request that was never
 * inserted from it (analysis.flushAsked). It runs once per request, not
 * per bio (merged bios get none), and returns at once for all but flushes:
 * this is what block_bio_queue did for every bio of every disk. */
SEC("tp_btf/block_getrq")
int block_getrq(unsigned long long *ctx)
{
	struct bio *bio = blk_arg(ctx, getrq_q_arg, 0);
	__u32 opf = bio->bi_opf;
	struct flush_bio_event e = {};
	struct gendisk *disk;
	__u64 id;

	if (!is_flush_bio(opf))
		return 0;
	disk = bio_disk(bio);
	if (!disk)
		return 0;
	e.dev = disk_dev(disk);
	if (targ_dev && e.dev != targ_dev)
		return 0;
	/* Taken before the busy test, one time for the raw record and the
	 * slots: with kpart_one a call holding a slot marks no disk busy
	 * (kpart.h), and its flush's queue time is this one. */
	e.queue_ns = bpf_ktime_get_ns();
	if (kpart)
		kp_each(e.dev, 0, false, 0, e.queue_ns, 0, kp_bits(KP_E_FBIO, 0, false));
	if (!every_block && !busy_deep(e.dev)) {
		blk_count(BLK_STAT_IDLE_DISK);
		return 0;
	}
	id = bpf_get_current_pid_tgid();
	e.kind = ES_KIND_FLUSH_BIO;
	e.op = norm_op(opf);
	e.flags = norm_flags(opf);
	e.pid = id >> 32;
	e.tid = (__u32)id;
	emit(&e, sizeof(e));
	blk_count(BLK_STAT_FLUSH_BIO_EMITS);
	return 0;
}

/* block_bio_remap: device-mapper hands a clone of a bio of disk dev to the
 * disk beneath (dm_submit_bio_remap). A partition's remap onto its whole
 * disk (blk_partition_remap) passes here too, naming the partition the bio
 * is on: it is no stacked driver and is skipped. */
SEC("tp_btf/block_bio_remap")
int block_bio_remap(unsigned long long *ctx)
{
	__u64 now = bpf_ktime_get_ns();
	struct bio *bio = blk_arg(ctx, bio_q_arg, 0);
	dev_t dev = (dev_t)(unsigned long)blk_arg(ctx, bio_q_arg, 1);
	__u32 opf = bio->bi_opf, target, *u;
	struct bio_remap_event *e;
	struct gendisk *disk;
	__u8 op = norm_op(opf);

	if (bpf_core_field_exists(struct bio___bi_disk, bi_disk)) {
		/* The bio names its whole disk; a partition's remap passes
		 * the partition, a minor of that same disk. */
		disk = ((struct bio___bi_disk *)bio)->bi_disk;
		if (!disk)
			return 0;
		if (dev >> 20 == (__u32)disk->major && (dev & 0xfffff) - (__u32)disk->first_minor < (__u32)disk->minors)
			return 0;
	} else {
		struct block_device *bdev = bio->bi_bdev;

		if (!bdev || bdev->bd_dev == dev)
			return 0;
		disk = bdev->bd_disk;
		if (!disk)
			return 0;
	}
	target = disk_dev(disk);
	if (target == dev)
		return 0;
	u = bpf_map_lookup_elem(&upper_of, &target);
	if (!u || *u != dev)
		bpf_map_update_elem(&upper_of, &target, &dev, BPF_ANY);
	if (op != ES_OP_WRITE && op != ES_OP_FLUSH)
		return 0;
	if (!every_block && !busy_deep(dev)) {
		blk_count(BLK_STAT_IDLE_DISK);
		return 0;
	}
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		return 0;
	}
	e->kind = ES_KIND_BIO_REMAP;
	e->op = op;
	e->_pad[0] = 0;
	e->_pad[1] = 0;
	e->flags = norm_flags(opf);
	e->dev = dev;
	e->target = target;
	e->tid = (__u32)bpf_get_current_pid_tgid();
	e->_pad2 = 0;
	e->sector = bio->bi_iter.bi_sector;
	e->remap_ns = now;
	bpf_ringbuf_submit(e, wakeup_flags_reserved(sizeof(*e)));
	blk_count(BLK_STAT_REMAP_EMITS);
	return 0;
}

/* block_bio_complete runs for every bio the block layer traced at
 * queueing, on every disk: one array lookup for those dm_queue did not
 * keep. */
SEC("tp_btf/block_bio_complete")
int BPF_PROG(block_bio_complete, struct request_queue *q, struct bio *bio)
{
	__u64 now = bpf_ktime_get_ns();
	struct dm_bio_event *e;
	struct dm_start *s;
	struct dm_start d;
	bool known = false;
	__u64 key;
	__s64 h = addr_hash(bio, &key, DM_BITS);
	__u32 i = (__u32)h & dm_slot_mask;

	if (h < 0)
		return 0;
	s = bpf_map_lookup_elem(&dm_starts, &i);
	/* Read without the lock first: every bio of every disk passes here,
	 * and a slot becomes this bio's only through its own queueing, which
	 * came before. Checked again under the lock. */
	if (!s || s->bio != key)
		return 0;
	slot_lock(s);
	if (s->bio == key) {
		/* copied before the slot is freed: a bio queued on another
		 * CPU may take it at once */
		known = true;
		d.queue_ns = s->queue_ns;
		d.dev = s->dev;
		d.opf = s->opf;
		d.bytes = s->bytes;
		d.pid = s->pid;
		d.tid = s->tid;
		__builtin_memcpy(d.comm, s->comm, sizeof(d.comm));
		barrier();
		/* Without the lock (Linux 5.10), a queueing on another CPU
		 * that took the slot during the copy has stored its bio
		 * first (dm_queue): the copy may hold its fields, and the
		 * record is dropped (that queueing found this bio in the
		 * slot and counted it lost). */
		if (!es_spin_lock && *(volatile __u64 *)&s->bio != key)
			known = false;
		else
			s->bio = 0;
	}
	slot_unlock(s);
	if (!known)
		return 0;
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		return 0;
	}
	e->kind = ES_KIND_DM_BIO;
	e->op = norm_op(d.opf);
	e->_pad[0] = 0;
	e->_pad[1] = 0;
	e->flags = norm_flags(d.opf);
	e->dev = d.dev;
	e->error = bio->bi_status;
	e->bytes = d.bytes;
	e->pid = d.pid;
	e->tid = d.tid;
	e->_pad2 = 0;
	e->bio = key;
	e->queue_ns = d.queue_ns;
	e->complete_ns = now;
	__builtin_memcpy(e->comm, d.comm, sizeof(e->comm));
	bpf_ringbuf_submit(e, wakeup_flags_reserved(sizeof(*e)));
	blk_count(BLK_STAT_DM_BIO_EMITS);
	return 0;
}
