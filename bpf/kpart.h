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

/* KP_UNTRACKED: struct call's kp_slot holds a reason (enum kpart_reason)
 * for a call that has no slot, not a slot. */
#define KP_UNTRACKED 0x80
#define KP_IVS (2 * KP_ENTRIES)
#define KP_UNROLL 8

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
	struct kp_entry e[KP_ENTRIES];
	__u64 from[KP_IVS];
	__u64 to[KP_IVS];
	__u8 cat[KP_IVS];
	__u64 owned[KP_CAT_OTHER + 1];
	__u64 used; /* flush bios claimed (bit: entry) */
	__u64 q;    /* kp_claim's answer */
	__u32 ni;   /* intervals in from, to, cat */
	__u32 _pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kp_scratch);
} kp_scratch SEC(".maps");

/* kp_iv adds [from, to] of category cat to the sweep, clipped to [s, e]
 * (analysis's sweep.addAt). */
static __always_inline void kp_iv(struct kp_scratch *w, __u64 from, __u64 to, __u8 cat, __u64 s, __u64 e)
{
	/* in the map, not on the stack: a count the verifier does not
	 * follow, so that kp_for's states converge */
	__u32 k = w->ni;

	if (from < s)
		from = s;
	if (to > e)
		to = e;
	if (to <= from || k >= KP_IVS)
		return;
	w->from[k] = from;
	w->to[k] = to;
	w->cat[k] = cat;
	w->ni = k + 1;
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
	__u64 ins, iss, cpl, issue, cur, next, f, t;
	struct kp_entry *x;
	int i, k, kk, u, step;
	__u8 best;
	bool ok;

	w->used = 0;
	w->ni = 0;
	kp_for(i, 0, KP_ENTRIES) {
		if (i >= n)
			break;
		x = &w->e[i];
		if (x->type == KP_E_JWIN) {
			if (x->b < s || x->b > e)
				continue;
			ev->journal_windows++;
			kp_iv(w, x->a, x->b, KP_CAT_JWIN, s, e);
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
			kp_iv(w, ins, iss, KP_CAT_QUEUE, s, e);
		} else if (x->cat == KP_CAT_FLUSH && !ins) {
			/* the flush state machine's: queued from the flush
			 * bio that asked for it (Attribute's two cases) */
			ok = kp_claim(w, n, s, iss ? iss : cpl);
			if (!iss)
				issue = ok ? w->q : cpl;
			else if (ok)
				kp_iv(w, w->q, iss, KP_CAT_QUEUE, s, e);
		}
		if (!issue)
			issue = ins;
		if (x->cat == KP_CAT_FLUSH) {
			if (x->preflush)
				ev->flushes++;
			else if (iss)
				ev->fua_writes++;
		}
		kp_iv(w, issue, cpl, x->cat, s, e);
	}
	for (k = 0; k <= KP_CAT_OTHER; k++)
		w->owned[k] = 0;
	/* The sweep: from s, the next interval end or start after cur; the
	 * instants in between belong to the first category covering cur. */
	cur = s;
	kp_for(step, 0, 2 * KP_IVS + 1) {
		if (cur >= e)
			break;
		next = e;
		best = KP_CAT_OTHER;
		/* KP_UNROLL intervals a turn: a kfunc call (kp_for's next)
		 * per interval made the sweep most of the exit's time */
		kp_for(kk, 0, KP_IVS / KP_UNROLL) {
			if (kk * KP_UNROLL >= w->ni)
				break;
#pragma unroll
			for (u = 0; u < KP_UNROLL; u++) {
				k = kk * KP_UNROLL + u;
				if (k < 0 || k >= KP_IVS || k >= w->ni)
					break;
				f = w->from[k];
				t = w->to[k];
				if (f > cur && f < next)
					next = f;
				if (t > cur && t < next)
					next = t;
				if (f <= cur && t > cur && w->cat[k] < best)
					best = w->cat[k];
			}
		}
		if (best > KP_CAT_OTHER)
			best = KP_CAT_OTHER;
		w->owned[best] += next - cur;
		cur = next;
	}
	ev->device_flush_ns = w->owned[KP_CAT_FLUSH];
	ev->block_queue_ns = w->owned[KP_CAT_QUEUE];
	ev->data_writeback_ns = w->owned[KP_CAT_DATA];
	ev->journal_ns = w->owned[KP_CAT_JOURNAL] + w->owned[KP_CAT_JWIN];
	ev->other_ns = w->owned[KP_CAT_OTHER];
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
	kp_partition(w, n, s, e, &ev);
out:
	emit(&ev, sizeof(ev));
}

#endif /* KP_EXIT */

#endif
