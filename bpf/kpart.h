/* kpart.h: what the fsync layer partition of analysis/doc.go needs of
 * each traced call, kept in the kernel and emitted with the call: one
 * record per call (kpart_one: bench/findings.md 33), or, beside the raw
 * stream, a kpart_event after the call's fsync_event (shadow mode, for
 * the tests that compare it with analysis.Attribute; findings 30, 32).
 * Only the calls of ext4's sync_file tracepoints (stacked.bpf.c through
 * call.h) get one.
 *
 * A call takes a kp_calls slot (events.h) at its enter: its thread, whole
 * disk and filesystem device. While it is in flight the block programs
 * append each request completing on that disk with the role it has for
 * the call (kp_add), and each flush bio's block_getrq; the journal
 * programs each jbd2 commit of its filesystem. At exit the slot's entries
 * are copied out (kp_exit), with the same timestamps the raw records
 * carry; userspace sweeps them with analysis.Attribute's rules
 * (Attributor.AttributeKPart). A slot that overflows says so
 * (KPART_OVERFLOW), never a wrong number. */
#ifndef ETCDSCOPE_KPART_H
#define ETCDSCOPE_KPART_H

#include "events.h"
#include "fsync.h"

/* kpart: assemble the records (set from Go before load in the fsync,
 * stacked, block and journal objects). Clear, the verifier prunes every
 * branch below: no cost, and no bpf_spin_lock reached on kernels whose
 * tracing programs have none (Linux 5.10). */
const volatile bool kpart = false;

/* kpart_one, with kpart: one record per call the kernel
 * partitions (ES_KIND_FSYNC_KPART: its fsync_event, kpart_event and
 * entries), and none of the raw records for it: a call that holds a slot
 * writes no fsync_enter_event and marks no disk busy (events.h), so the
 * block programs skip its requests and flush bios as they skip an idle
 * disk's, and jbd2_end_commit its commits (journal.bpf.c). A call with no
 * slot (enum kpart_reason) keeps today's path: its disk marked busy, its
 * enter and fsync_event, the raw records around it. Read by the enter and
 * exit (call.h) and journal.bpf.c. bench/findings.md 33. */
const volatile bool kpart_one = false;

/* KP_UNTRACKED: struct call's kp_slot holds a reason (enum kpart_reason)
 * for a call that has no slot, not a slot. */
#define KP_UNTRACKED 0x80

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

/* kp_one says whether a call whose struct call keeps kp_slot holds a
 * slot with kpart_one: its one record, and no raw records. */
static __always_inline bool kp_one(__u8 kp_slot)
{
	return kpart_one && kp_slot && !(kp_slot & KP_UNTRACKED);
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
	/* bio-based (dm), or a loop device (LOOP_MAJOR, uapi/linux/major.h):
	 * its flushes are served by the host's fsyncs, which the raw stream
	 * nests under them (analysis.Attributor's hosts) */
	if (!bdev->bd_disk || !bdev->bd_disk->queue->mq_ops || bdev->bd_disk->major == 7)
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
 * ext4_sync_file_exit_kpart runs. */
#ifdef KP_EXIT
/* kp_scratch: per-CPU space for the exit's record (too big for the
 * stack); only ext4_sync_file_exit_kpart uses it, which never nests on
 * itself. */
struct kp_scratch {
	struct fsync_event call; /* kpart_one: the record, ev right after it */
	struct kpart_event ev;   /* the shadow's record, e right after it */
	struct kp_entry e[KP_ENTRIES];
};

_Static_assert(__builtin_offsetof(struct kp_scratch, e) == sizeof(struct fsync_event) + sizeof(struct kpart_event),
	       "the records: the entries right after the kpart_event");
_Static_assert(__builtin_offsetof(struct kp_scratch, ev) == sizeof(struct fsync_event),
	       "kpart_one's record: the kpart_event right after the fsync_event");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct kp_scratch);
} kp_scratch SEC(".maps");

/* kp_exit emits the kpart_event of the call of thread tid, [s, e], whose
 * struct call keeps *kp_slot, with its slot's entries, and frees the
 * slot. With kpart_one the call holds a slot and w->call is its
 * fsync_event: one record of the two and the entries, whatever became of
 * the slot (reason). */
static __always_inline void kp_exit(struct kp_scratch *w, __u8 *kp_slot, __u32 tid, __u64 s, __u64 e)
{
	struct kpart_event ev = {};
	__u8 slot = *kp_slot;
	struct kp_call *k;
	__u32 i, n = 0;
	__u64 size;
	bool mine;

	*kp_slot = 0;
	if (!slot)
		return;
	ev.kind = ES_KIND_KPART;
	ev.tid = tid;
	ev.start_ns = s;
	ev.end_ns = e;
	if (slot & KP_UNTRACKED) {
		if (kpart_one)
			return; /* today's path: its fsync_event and raw records */
		ev.reason = slot & ~KP_UNTRACKED;
		goto out;
	}
	i = slot - 1;
	k = bpf_map_lookup_elem(&kp_calls, &i);
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
	if (!mine) {
		if (!kpart_one)
			return;
		ev.reason = KPART_LOST;
		n = 0;
	}
	ev.entries = n;
	if (ev.dropped) {
		ev.reason = KPART_OVERFLOW;
		n = 0;
	}
	if (n > KP_ENTRIES) /* never (kp_add): for the verifier */
		n = KP_ENTRIES;
	w->ev = ev;
	size = sizeof(ev) + (__u64)n * sizeof(struct kp_entry);
	if (kpart_one) {
		w->call.kind = ES_KIND_FSYNC_KPART;
		emit(&w->call, sizeof(w->call) + size);
	} else {
		emit(&w->ev, size);
	}
	return;
out:
	emit(&ev, sizeof(ev));
}

#endif /* KP_EXIT */

#endif
