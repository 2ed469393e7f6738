/* kpart.h: the fsync layer partition of analysis/doc.go assembled in the
 * kernel, one struct kpart_event per traced call at its exit, beside the
 * raw stream (shadow mode: FsyncConfig.KernelPartition; stage 1 of issue
 * 27, bench/findings.md 30). Only the calls of ext4's sync_file
 * tracepoints (stacked.bpf.c through call.h) get one.
 *
 * A call takes a kp_calls slot (events.h) at its enter: its thread, whole
 * disk and filesystem device. While it is in flight the block programs
 * append each request completing on that disk with the role it has for
 * the call (kp_add), and each flush bio's block_getrq; the journal
 * programs each jbd2 commit of its filesystem. At exit the slot is
 * emptied into per-CPU kp_scratch and swept (kp_exit): the same rules,
 * order and clipping as analysis.Attribute, with the same timestamps the
 * raw records carry. A slot that overflows says so (KPART_OVERFLOW),
 * never a wrong number. */
#ifndef ETCDSCOPE_KPART_H
#define ETCDSCOPE_KPART_H

#include "events.h"
#include "fsync.h"

/* kpart: assemble the records (set from Go before load in the fsync,
 * stacked, block and journal objects). Clear, the verifier prunes every
 * branch below: no cost, and no bpf_spin_lock reached on kernels whose
 * tracing programs have none (Linux 5.10). */
const volatile bool kpart = false;

/* kpart_entries: with kpart, the exit does not sweep: its kpart_event
 * (layers and counts zero) goes on, in the same record, with the slot's
 * entries (struct kp_entry), which userspace sweeps
 * (analysis.PartitionKPart). bench/findings.md 32, the raw records
 * skipped: 1.08-1.10x today's BPF time per fsync, 1.25x with the sweep
 * here. Read only by the exit (stacked.bpf.c). */
const volatile bool kpart_entries = false;

/* KP_UNTRACKED: struct call's kp_slot holds a reason (enum kpart_reason)
 * for a call that has no slot, not a slot. */
#define KP_UNTRACKED 0x80
#define KP_IVS (2 * KP_ENTRIES)

/* KP_BITS_SHIFT: kp_add packs an entry's type, cat and preflush into the
 * top byte of its c (ns since boot fit in 56 bits for 2.2 years). */
#define KP_BITS_SHIFT 56

/* kp_add appends an entry (a, b, and c with its type, cat and preflush
 * in the top byte) to slot i if it still holds the call that started at
 * start_ns; counted as dropped past KP_ENTRIES. A global function: the
 * verifier checks it once, not in every state of the slot loop that calls
 * it (inlined, it ran out of its jump history), and its first test keeps
 * it free of bpf_spin_lock where kpart is clear. */
__noinline int kp_add(__u32 i, __u64 start_ns, __u64 a, __u64 b, __u64 c)
{
	struct kp_call *s;
	struct kp_entry *x;
	__u32 n;

	if (!kpart)
		return 0;
	s = bpf_map_lookup_elem(&kp_calls, &i);
	if (!s)
		return 0;
	bpf_spin_lock(&s->lock);
	if (s->start_ns == start_ns) {
		n = s->n;
		if (n < KP_ENTRIES) {
			x = &s->e[n & (KP_ENTRIES - 1)];
			x->a = a;
			x->b = b;
			x->c = c & ((1ull << KP_BITS_SHIFT) - 1);
			x->type = (c >> KP_BITS_SHIFT) & 3;
			x->cat = (c >> (KP_BITS_SHIFT + 2)) & 7;
			x->preflush = (c >> (KP_BITS_SHIFT + 5)) & 1;
			s->n = n + 1;
		} else {
			s->dropped++;
		}
	}
	bpf_spin_unlock(&s->lock);
	return 0;
}

/* kp_bits packs an entry's type, cat and preflush for kp_add. */
static __always_inline __u64 kp_bits(__u8 type, __u8 cat, bool preflush)
{
	return ((__u64)type | (__u64)cat << 2 | (__u64)preflush << 5) << KP_BITS_SHIFT;
}

/* kp_enter gives the call of thread tid about to start on file f (a BTF
 * pointer, on a filesystem) a slot from claim_ns on (kp_add's check), and
 * returns what struct call's kp_slot keeps: the slot + 1, or KP_UNTRACKED
 * and why not. */
static __always_inline __u8 kp_enter(struct file *f, __u32 tid, __u32 disk, __u64 claim_ns)
{
	struct super_block *sb = f->f_inode->i_sb;
	struct block_device *bdev = sb->s_bdev;
	struct kp_call *s;
	bool taken;
	__u32 i, key;

	if (!disk || !bdev)
		return KP_UNTRACKED | KPART_NO_DISK;
	if (!bdev->bd_disk || !bdev->bd_disk->queue->mq_ops)
		return KP_UNTRACKED | KPART_STACKED;
	for (i = 0; i < KP_SLOTS; i++) {
		key = i; /* i stays in a register: the verifier sees it count */
		s = bpf_map_lookup_elem(&kp_calls, &key);
		if (!s || s->start_ns)
			continue;
		bpf_spin_lock(&s->lock);
		taken = !s->start_ns;
		if (taken) {
			s->start_ns = claim_ns;
			s->tid = tid;
			s->disk = disk;
			s->sdev = sb->s_dev;
			s->n = 0;
			s->dropped = 0;
		}
		bpf_spin_unlock(&s->lock);
		if (taken)
			return i + 1;
	}
	return KP_UNTRACKED | KPART_NO_SLOT;
}

/* kp_free empties the slot kp_slot names (a call whose exit was never
 * seen, replaced by its thread's next). */
static __always_inline void kp_free(__u8 kp_slot)
{
	__u32 i = kp_slot - 1;
	struct kp_call *s;

	if (!kp_slot || (kp_slot & KP_UNTRACKED))
		return;
	s = bpf_map_lookup_elem(&kp_calls, &i);
	if (!s)
		return;
	bpf_spin_lock(&s->lock);
	s->start_ns = 0;
	bpf_spin_unlock(&s->lock);
}

/* kp_each appends an entry (kp_add's a, b, c) to every call in flight
 * on disk (whole disk dev_t), or, sdev set, on the filesystem of device
 * sdev; own: only to the calls of thread tid. */
static __always_inline void kp_each(__u32 disk, __u32 sdev, bool own, __u32 tid, __u64 a, __u64 b, __u64 c)
{
	struct kp_call *s;
	__u64 st;
	__u32 i, key;

	for (i = 0; i < KP_SLOTS; i++) {
		key = i; /* i stays in a register: the verifier sees it count */
		s = bpf_map_lookup_elem(&kp_calls, &key);
		if (!s)
			continue;
		st = s->start_ns; /* unlocked look; kp_add checks it again */
		if (!st || (sdev ? s->sdev != sdev : s->disk != disk) || (own && s->tid != tid))
			continue;
		kp_add(i, st, a, b, c);
	}
}

/* KP_EXIT (stacked.bpf.c): the exit's part, which only
 * ext4_sync_file_exit_kpart runs: its scratch map and its loops. */
#ifdef KP_EXIT
/* Open-coded iterators (Linux 6.4+; libbpf's bpf_for, which this
 * libbpf's headers lack): the verifier checks a kp_for body until its
 * states converge instead of once per iteration, as it must for the
 * exit's nested loops (a bounded for ran past its 1M instructions).
 * Only ext4_sync_file_exit_kpart calls them, a program Go loads only
 * with kpart (stacked.bpf.c): older kernels never see these kfuncs. */
extern int bpf_iter_num_new(struct bpf_iter_num *it, int start, int end) __ksym __weak;
extern int *bpf_iter_num_next(struct bpf_iter_num *it) __ksym __weak;
extern void bpf_iter_num_destroy(struct bpf_iter_num *it) __ksym __weak;

#define kp_for(i, start, end)                                                               \
	for (struct bpf_iter_num ___it __attribute__((aligned(8), cleanup(bpf_iter_num_destroy))), \
	     *___p __attribute__((unused)) =                                                 \
		     (bpf_iter_num_new(&___it, (start), (end)), (void)bpf_iter_num_destroy, (void *)0); \
	     ({                                                                              \
		     int *___t = bpf_iter_num_next(&___it);                                   \
		     (___t && ((i) = *___t, (i) >= (start) && (i) < (end)));                  \
	     });)

/* kp_scratch: per-CPU space for the exit's sweep (too big for the stack);
 * only ext4_sync_file_exit_kpart uses it, which never nests on itself. */
struct kp_scratch {
	struct kpart_event ev; /* kpart_entries: the record, e right after it */
	struct kp_entry e[KP_ENTRIES];
	__u64 from[KP_IVS];
	__u64 to[KP_IVS];
	__u8 cat[KP_IVS];
	__u64 used; /* flush bios claimed (bit: entry) */
	__u32 at;   /* kp_iv's place for the new interval */
	__u64 s_ns, e_ns; /* the call's window */
	/* the sweep's unions of categories 0..c: their last run, and the
	 * length before it (in the map: values the verifier does not follow) */
	__u64 cs[KP_CAT_OTHER], ce[KP_CAT_OTHER], un[KP_CAT_OTHER];
	__u32 _pad2;
	__u64 q;    /* kp_claim's answer */
	__u32 ni;   /* intervals in from, to, cat */
	__u32 _pad;
};

_Static_assert(__builtin_offsetof(struct kp_scratch, e) == sizeof(struct kpart_event),
	       "kpart_entries' record: the entries right after the kpart_event");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kp_scratch);
} kp_scratch SEC(".maps");

/* kp_iv adds [from, to] of category cat to the sweep, clipped to the
 * call's [w->s_ns, w->e_ns] (analysis's sweep.addAt). A global function: the
 * verifier checks its loop once, not inside every pass of the caller's. */
__noinline int kp_iv(struct kp_scratch *w, __u64 from, __u64 to, __u64 cat)
{
	/* counts and places in the map, not on the stack: values the
	 * verifier does not follow, so that kp_for's states converge */
	__u32 n, j;
	int r;

	if (!w)
		return 0;
	n = w->ni;
	if (from < w->s_ns)
		from = w->s_ns;
	if (to > w->e_ns)
		to = w->e_ns;
	if (to <= from || n >= KP_IVS)
		return 0;
	/* kept in order of from (insertion): the sweep is then one pass */
	w->at = n;
	kp_for(r, 0, KP_IVS) {
		j = w->ni - 1 - r; /* past 0 it wraps: too large, the end */
		if (j >= KP_IVS - 1)
			break;
		j &= KP_IVS - 1; /* (a power of 2) for the verifier */
		if (w->from[j] <= from)
			break;
		w->from[(j + 1) & (KP_IVS - 1)] = w->from[j];
		w->to[(j + 1) & (KP_IVS - 1)] = w->to[j];
		w->cat[(j + 1) & (KP_IVS - 1)] = w->cat[j];
		w->at = j;
	}
	j = w->at;
	if (j >= KP_IVS)
		return 0;
	w->from[j] = from;
	w->to[j] = to;
	w->cat[j] = cat;
	w->ni = n + 1;
	return 0;
}

/* kp_claim puts in w->q the latest (by queue time) flush bio of the
 * call's entries queued in [s, by] that no flush request of the call has
 * claimed yet (analysis.flushAsked), claims it in w->used and says
 * whether it found one. */
static __always_inline bool kp_claim(struct kp_scratch *w, __u32 n, __u64 s, __u64 by)
{
	struct kp_entry *y;
	int j, best = -1;

	w->q = 0;
	kp_for(j, 0, KP_ENTRIES) {
		if (j >= n)
			break;
		y = &w->e[j];
		if (y->type != KP_E_FBIO || y->a > by || y->a < s || (w->used & (1ull << j)) || y->a <= w->q)
			continue;
		w->q = y->a;
		best = j;
	}
	if (best < 0 || best >= KP_ENTRIES)
		return false;
	w->used |= 1ull << best;
	return true;
}

/* kp_partition fills ev's layers and counts from the n entries in w, for
 * a call of [s, e]: analysis.Attribute's rules for a plain disk. */
static __always_inline void kp_partition(struct kp_scratch *w, __u32 n, __u64 s, __u64 e, struct kpart_event *ev)
{
	__u64 ins, iss, cpl, issue, f, t;
	struct kp_entry *x;
	int i, k, c;
	__u8 cat;
	bool ok;

	w->used = 0;
	w->ni = 0;
	w->s_ns = s;
	w->e_ns = e;
	kp_for(i, 0, KP_ENTRIES) {
		if (i >= n)
			break;
		x = &w->e[i];
		if (x->type == KP_E_JWIN) {
			if (x->b < s || x->b > e)
				continue;
			ev->journal_windows++;
			kp_iv(w, x->a, x->b, KP_CAT_JWIN);
			continue;
		}
		if (x->type != KP_E_REQ)
			continue;
		ins = x->a;
		iss = x->b;
		cpl = x->c;
		if (cpl < s || cpl > e)
			continue;
		ev->requests++;
		issue = iss;
		if (ins && iss > ins) {
			kp_iv(w, ins, iss, KP_CAT_QUEUE);
		} else if (x->cat == KP_CAT_FLUSH && !ins) {
			/* the flush state machine's: queued from the flush
			 * bio that asked for it (Attribute's two cases) */
			ok = kp_claim(w, n, s, iss ? iss : cpl);
			if (!iss)
				issue = ok ? w->q : cpl;
			else if (ok)
				kp_iv(w, w->q, iss, KP_CAT_QUEUE);
		}
		if (!issue)
			issue = ins;
		if (x->cat == KP_CAT_FLUSH) {
			if (x->preflush)
				ev->flushes++;
			else if (iss)
				ev->fua_writes++;
		}
		kp_iv(w, issue, cpl, x->cat);
	}
	/* The sweep, one pass over the intervals in order of from: the
	 * length of the union of categories 0..c for each c (cs, ce: the
	 * union's last run); category c owns what its union adds to that of
	 * the categories before it, other what none covers. The same
	 * partition as analysis's sweep of points, in O(intervals). */
#pragma unroll
	for (c = 0; c < KP_CAT_OTHER; c++) {
		w->cs[c] = s;
		w->ce[c] = s;
		w->un[c] = 0;
	}
	kp_for(k, 0, KP_IVS) {
		if (k >= w->ni)
			break;
		f = w->from[k];
		t = w->to[k];
		cat = w->cat[k];
#pragma unroll
		for (c = 0; c < KP_CAT_OTHER; c++) {
			if (c < cat)
				continue;
			if (f > w->ce[c]) {
				w->un[c] += w->ce[c] - w->cs[c];
				w->cs[c] = f;
				w->ce[c] = t;
			} else if (t > w->ce[c]) {
				w->ce[c] = t;
			}
		}
	}
#pragma unroll
	for (c = 0; c < KP_CAT_OTHER; c++)
		w->un[c] += w->ce[c] - w->cs[c];
	ev->device_flush_ns = w->un[KP_CAT_FLUSH];
	ev->block_queue_ns = w->un[KP_CAT_QUEUE] - w->un[KP_CAT_FLUSH];
	ev->data_writeback_ns = w->un[KP_CAT_DATA] - w->un[KP_CAT_QUEUE];
	ev->journal_ns = w->un[KP_CAT_JWIN] - w->un[KP_CAT_DATA];
	ev->other_ns = e - s - w->un[KP_CAT_JWIN];
}

/* kp_exit emits the kpart_event of the call of thread tid, [s, e], whose
 * struct call keeps *kp_slot, and frees its slot. */
static __always_inline void kp_exit(__u8 *kp_slot, __u32 tid, __u64 s, __u64 e)
{
	struct kpart_event ev = {};
	__u8 slot = *kp_slot;
	struct kp_scratch *w;
	struct kp_call *k;
	__u32 i, n = 0, zero = 0;
	bool mine;

	*kp_slot = 0;
	if (!slot)
		return;
	ev.kind = ES_KIND_KPART;
	ev.tid = tid;
	ev.start_ns = s;
	ev.end_ns = e;
	if (slot & KP_UNTRACKED) {
		ev.reason = slot & ~KP_UNTRACKED;
		goto out;
	}
	i = slot - 1;
	k = bpf_map_lookup_elem(&kp_calls, &i);
	w = bpf_map_lookup_elem(&kp_scratch, &zero);
	if (!k || !w)
		return;
	bpf_spin_lock(&k->lock);
	/* its own slot (only its thread frees it) unless kp_free did */
	mine = k->start_ns && k->tid == tid;
	if (mine) {
		n = k->n;
		ev.dropped = k->dropped;
		for (i = 0; i < KP_ENTRIES; i++) {
			if (i >= n)
				break;
			w->e[i] = k->e[i];
		}
		k->start_ns = 0;
	}
	bpf_spin_unlock(&k->lock);
	if (!mine)
		return;
	ev.entries = n;
	if (ev.dropped) {
		ev.reason = KPART_OVERFLOW;
		goto out;
	}
	if (kpart_entries) {
		__u64 size;

		if (n > KP_ENTRIES) /* never (kp_add): for the verifier */
			n = KP_ENTRIES;
		w->ev = ev;
		size = sizeof(ev) + (__u64)n * sizeof(struct kp_entry);
		emit(&w->ev, size);
		return;
	}
	kp_partition(w, n, s, e, &ev);
out:
	emit(&ev, sizeof(ev));
}

#endif /* KP_EXIT */

#endif
