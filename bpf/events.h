/* The ring buffer and lost-event counter that fsync.bpf.c, block.bpf.c,
 * journal.bpf.c, stacked.bpf.c and jbd2wait.bpf.c share, and the busy-disk
 * counts that let block.bpf.c drop the I/O of disks no traced call waits
 * on: Go creates them once with the fsync object and hands them to the
 * others as map replacements, so one reader sees every event in
 * reservation order. The records are declared in record.h and each
 * probe's header. */
#ifndef ETCDSCOPE_EVENTS_H
#define ETCDSCOPE_EVENTS_H

#include "ring.h"
#include "record.h"

/* events: records of struct fsync_event, fsync_enter_event, blk_event,
 * flush_bio_event, dm_bio_event, bio_remap_event and journal_event; the
 * first byte (enum es_kind) says which. Size is set from Go. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

/* lost_events: per-CPU count of records that did not fit in events.
 * Shared by every object's programs (Go's map replacements), which nest:
 * a completion in softirq can fail its reserve between another program's
 * load and store of this count when the ring is full, and a plain += then
 * drops one of the two. Hence an atomic add (BPF's oldest atomic, on every
 * kernel): it costs only when a record is lost. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost_events SEC(".maps");

static __always_inline void count_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&lost_events, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
}

/* wake_bytes: how full (bytes of unread records) events may get before a
 * record wakes the reader (ring.h); set from Go to an eighth of its size. */
const volatile __u64 wake_bytes = 1 << 19;

/* wakeup_flags: es_wake_flags for a size-byte record to events, not yet
 * reserved; wakeup_flags_reserved for one already reserved. */
static __always_inline __u64 wakeup_flags(__u64 size)
{
	return es_wake_flags(&events, wake_bytes, size, false);
}

static __always_inline __u64 wakeup_flags_reserved(__u64 size)
{
	return es_wake_flags(&events, wake_bytes, size, true);
}

/* Disks with a traced call in flight. The block programs put a request's
 * completion or a bio in events only while its disk, or a device-mapper
 * disk stacked on it (block.bpf.c's busy_deep), is busy: a
 * traced fsync/fdatasync (fsync.bpf.c) or a kernel thread's fsync of a
 * stacked device's backing file (stacked.bpf.c) on a filesystem of that
 * disk is between enter and exit. Every other block event is dropped
 * before it takes ring space, so unrelated I/O on other disks, or between
 * calls, costs no ring space and no reader time. */
#define BUSY_BITS 10

/* busy_disks: slot hash(disk dev_t) -> calls in flight on that disk
 * (atomic adds). Two disks sharing a slot only make one look busy when
 * the other is: events kept, never lost. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1 << BUSY_BITS);
	__type(key, __u32);
	__type(value, __s64);
} busy_disks SEC(".maps");

/* busy_any: calls in flight whose disk is not known (a block device node,
 * a filesystem with no s_bdev): every disk counts as busy meanwhile. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} busy_any SEC(".maps");

/* busy_add adds delta to disk dev's in-flight count (dev 0: busy_any). */
static __always_inline void busy_add(__u32 dev, __s64 delta)
{
	__u32 k = (dev * 2654435761u) >> (32 - BUSY_BITS);
	__s64 *n;

	if (!dev)
		n = bpf_map_lookup_elem(&busy_any, &(__u32){0});
	else
		n = bpf_map_lookup_elem(&busy_disks, &k);
	if (n)
		__sync_fetch_and_add(n, delta);
}

/* busy says whether disk dev has a traced call in flight. */
static __always_inline bool busy(__u32 dev)
{
	__u32 k = (dev * 2654435761u) >> (32 - BUSY_BITS), zero = 0;
	__s64 *n = bpf_map_lookup_elem(&busy_any, &zero);

	if (n && *n > 0)
		return true;
	n = bpf_map_lookup_elem(&busy_disks, &k);
	return n && *n > 0;
}

/* inode_disk returns the dev_t (major << 20 | first_minor) of the whole
 * disk under inode's filesystem, or 0 when there is none to name (a
 * block device node's inode, a filesystem without s_bdev). */
static __always_inline __u32 inode_disk(struct inode *inode)
{
	struct block_device *bdev = BPF_CORE_READ(inode, i_sb, s_bdev);
	struct gendisk *disk;

	if (!bdev)
		return 0;
	disk = BPF_CORE_READ(bdev, bd_disk);
	if (!disk)
		return 0;
	return ((__u32)BPF_CORE_READ(disk, major) << 20) | (__u32)BPF_CORE_READ(disk, first_minor);
}

/* The in-flight calls of kpart.h (FsyncConfig.KernelPartition): a
 * fixed-size list each, of the requests, flush bios and jbd2 commits that
 * may count for it, which the block and journal programs append to. Here
 * and not in kpart.h: every object of the tracer takes Go's map
 * replacements, which must name maps each one has. */
#define KP_SLOTS 16
#define KP_ENTRIES 64

enum kp_entry_type {
	KP_E_REQ = 1,  /* a request's final completion: a insert, b issue, c complete */
	KP_E_FBIO = 2, /* a flush bio got its request (block_getrq): a then */
	KP_E_JWIN = 3, /* a jbd2 commit on the call's filesystem: a start, b end */
};

/* enum kp_cat: the sweep's categories in priority order (analysis's
 * catFlush...catJournalWindow, without dm); KP_CAT_OTHER: none. */
enum kp_cat {
	KP_CAT_FLUSH = 0,
	KP_CAT_QUEUE = 1,
	KP_CAT_DATA = 2,
	KP_CAT_JOURNAL = 3,
	KP_CAT_JWIN = 4,
	KP_CAT_OTHER = 5,
};

struct kp_entry {
	__u64 a, b, c;
	__u8 type;    /* enum kp_entry_type */
	__u8 cat;     /* KP_E_REQ: its role, KP_CAT_FLUSH, _DATA or _JOURNAL */
	__u8 preflush; /* KP_E_REQ: REQ_OP_FLUSH or REQ_PREFLUSH (else FUA only) */
	__u8 _pad[5];
};

struct kp_call {
	struct bpf_spin_lock lock; /* held for every read and write below */
	__u32 tid;
	__u64 start_ns; /* claimed then, just before the call started; 0: free */
	__u32 disk;     /* whole disk (es_file_disk) */
	__u32 sdev;     /* the file's i_sb->s_dev: its jbd2 journal's device */
	__u32 n;        /* entries held */
	__u32 dropped;  /* entries past KP_ENTRIES */
	struct kp_entry e[KP_ENTRIES];
};

/* kp_calls: slot -> a traced call in flight and what it may have waited
 * on, from its enter to its exit (kpart.h). */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, KP_SLOTS);
	__type(key, __u32);
	__type(value, struct kp_call);
} kp_calls SEC(".maps");

static __always_inline void emit(void *data, __u64 size)
{
	if (bpf_ringbuf_output(&events, data, size, wakeup_flags(size)))
		count_lost();
}

#endif
