/* One traced fsync/fdatasync call, from its start to its record: what
 * fsync.bpf.c does on the syscall tracepoints and stacked.bpf.c on ext4's
 * sync_file tracepoints when they replace them (FsyncConfig.FSTypes). The
 * including object declares the maps of events.h, filecache.h and
 * inflight.h (shared through Go's map replacements) and filter.h's
 * globals. */
#ifndef ETCDSCOPE_CALL_H
#define ETCDSCOPE_CALL_H

#include "fsync.h"
#include "events.h"
#include "file.h"
#include "filecache.h"
#include "filter.h"
#include "inflight.h"
#include "kpart.h"

/* sys_calls: the calls started on the syscall tracepoint (fsync.bpf.c)
 * and not yet recorded, nor taken over by ext4's sync_file_enter: what
 * the syscall exit programs still owe. Go hands the fsync object's to
 * stacked.bpf.c, and waits for it to reach 0 before it detaches the exit
 * programs when it moves the calls to ext4's tracepoints at run time
 * (FsyncTracer.SwitchToExt4): a call in flight then is recorded once,
 * by whichever exit it reaches. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __s64);
} sys_calls SEC(".maps");

/* handover: the syscall tracepoints may hand their calls over to ext4's
 * at run time (FsyncConfig.SwitchLater; set from Go before load in both
 * objects): only then are the calls counted in sys_calls and taken over
 * at ext4's enter. Clear, the verifier prunes all of it: no cost. */
const volatile bool handover = false;

static __always_inline void sys_calls_add(__s64 delta)
{
	__s64 *n = bpf_map_lookup_elem(&sys_calls, &(__u32){0});

	if (n)
		__sync_fetch_and_add(n, delta);
}

/* es_fill_cached names f in e, from files when its entry still holds. */
static __always_inline void es_fill_cached(struct fsync_event *e, struct file *f)
{
	struct file_info *fi = es_cached_file(f);

	if (!fi)
		return;
	e->ino = fi->ino;
	e->dev = fi->dev;
	e->is_blockdev = fi->is_blockdev;
	__builtin_memcpy(e->fstype, fi->fstype, sizeof(e->fstype));
	__builtin_memcpy(e->names, fi->names, sizeof(e->names));
}

/* es_btf_file_disk is es_file_disk for a file on a filesystem (not a
 * block device node) given as a BTF pointer (a tp_btf argument, or
 * es_cast's): plain loads, which the verifier makes fault-safe, instead
 * of a probe-read helper call per field. */
static __always_inline __u32 es_btf_file_disk(struct file *f)
{
	struct block_device *bdev = f->f_inode->i_sb->s_bdev;
	struct gendisk *disk;

	if (!bdev)
		return 0;
	disk = bdev->bd_disk;
	if (!disk)
		return 0;
	return ((__u32)disk->major << 20) | (__u32)disk->first_minor;
}

/* es_file_disk returns the whole disk f's writes go to (events.h's busy
 * disks): for a block device node the device's own disk (its bdev inode
 * sits in struct bdev_inode next to the block_device), else the disk
 * under f's filesystem; 0 when unknown. */
static __always_inline __u32 es_file_disk(struct file *f)
{
	struct block_device *bdev;
	struct inode *inode;
	struct gendisk *disk;

	if (bpf_rdonly_cast) {
		/* plain loads (compat.h) of the same fields */
		struct file *bf = es_cast(f, struct file);

		if ((bf->f_inode->i_mode & ES_S_IFMT) != ES_S_IFBLK)
			return es_btf_file_disk(bf);
	} else {
		inode = BPF_CORE_READ(f, f_inode);
		if ((BPF_CORE_READ(inode, i_mode) & ES_S_IFMT) != ES_S_IFBLK)
			return inode_disk(inode);
	}
	bdev = (void *)BPF_CORE_READ(f, f_mapping, host) - bpf_core_field_offset(struct bdev_inode, vfs_inode) +
	       bpf_core_field_offset(struct bdev_inode, bdev);
	disk = BPF_CORE_READ(bdev, bd_disk);
	if (!disk)
		return 0;
	return ((__u32)BPF_CORE_READ(disk, major) << 20) | (__u32)BPF_CORE_READ(disk, first_minor);
}

/* es_call_enter starts a call of the current task on fd (its file f, or
 * NULL) if the task is traced: its state in inflight, its disk marked
 * busy, and a fsync_enter_event so userspace keeps the block and journal
 * events this call may wait on (neither for a call kpart_one partitions:
 * kpart.h). btf: f is a BTF pointer to a file on a
 * filesystem (es_btf_file_disk). */
static __always_inline void es_call_enter(struct file *f, int fd, __u8 syscall, bool btf)
{
	struct fsync_enter_event ee = {};
	struct call c = {}, *slot;

	if (!es_selected(&c.cgroup_id))
		return;
	c.syscall = syscall;
	c.fd = fd;
	c.file = (__u64)f;
	if (btf)
		c.disk = es_btf_file_disk(f);
	else if (f)
		c.disk = es_file_disk(f);
	c.start_ns = bpf_ktime_get_ns();
	slot = es_call(true);
	if (!slot) {
		count_lost();
		return;
	}
	if (handover && btf && slot->start_ns && slot->syscall <= ES_SYS_FDATASYNC) {
		/* ext4's enter inside a call the syscall tracepoint started
		 * (both attached: SwitchToExt4's handover): the same call when
		 * its fd, syscall and file are, taken over as it is (its start
		 * and enter record are the syscall's), and recorded once, at
		 * ext4's exit. Anything else is a call whose exit was never
		 * seen (the syscall exit detached after SwitchToExt4's bounded
		 * wait): replaced. */
		if (slot->from_sys) {
			slot->from_sys = 0;
			sys_calls_add(-1);
		}
		if (slot->fd == fd && slot->syscall == syscall && slot->file == c.file)
			return;
		busy_add(slot->disk, -1);
	}
	if (handover && !btf) {
		c.from_sys = 1;
		if (!slot->from_sys) /* else a call whose exit was missed: counted once */
			sys_calls_add(1);
	}
	if (kpart && btf) {
		/* The slot first, then the call's start: a request that
		 * completes after the start is in the slot too. */
		kp_free(slot->kp_slot); /* a call whose exit was never seen */
		c.kp_slot = kp_enter(f, (__u32)bpf_get_current_pid_tgid(), c.disk, bpf_ktime_get_ns());
		c.start_ns = bpf_ktime_get_ns();
	}
	*slot = c;
	if (kp_one(c.kp_slot)) /* no raw records: kpart.h's kpart_one */
		return;
	busy_add(c.disk, 1); /* until es_call_exit */
	ee.kind = ES_KIND_FSYNC_ENTER;
	ee.tid = (__u32)bpf_get_current_pid_tgid();
	ee.start_ns = c.start_ns;
	emit(&ee, sizeof(ee));
}

/* es_call_fill fills e, the fsync_event of call c of the current task
 * (id: its pid_tgid), ended at now with ret. pinned: the call still
 * holds its file (a filesystem's own exit tracepoint, inside the call),
 * so it is named from the pointer kept at entry; otherwise (the syscall's
 * exit, after the kernel dropped its reference) only if the fd table
 * still holds that file, which keeps it alive while it is read: a file
 * another thread closed or replaced meanwhile stays unnamed (ino 0) rather
 * than read from memory that may be freed. */
static __always_inline void es_call_fill(struct fsync_event *e, struct call *c, __u64 id, __u64 now, long ret, bool pinned)
{
	struct file *f;

	__builtin_memset(e, 0, sizeof(*e));
	e->kind = ES_KIND_FSYNC;
	e->syscall = c->syscall;
	e->fd = c->fd;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->cgroup_id = c->cgroup_id;
	e->start_ns = c->start_ns;
	e->end_ns = now;
	e->ret = ret;
	es_current_comm(e->comm);
	f = pinned ? (struct file *)c->file : es_fd_file(c->fd);
	if (f && (__u64)f == c->file)
		es_fill_cached(e, f);
}

/* es_call_exit ends the current task's call, if es_call_enter started one,
 * with its fsync_event built in place in the ring (es_call_fill's pinned).
 * kp: also emit the call's kpart_event (kpart.h; ext4_sync_file_exit_kpart
 * only), which with kpart_one carries the fsync_event of a call that holds
 * a slot: one record. */
static __always_inline void es_call_exit(long ret, bool pinned, bool kp)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct call *c = es_call(false);
	struct fsync_event *e;
#ifdef KP_EXIT
	struct kp_scratch *w = NULL;
#endif

	if (!c || !c->start_ns || c->syscall > ES_SYS_FDATASYNC)
		return;
	if (handover && c->from_sys) {
		c->from_sys = 0;
		sys_calls_add(-1);
	}
#ifdef KP_EXIT
	if (kp && kpart)
		w = bpf_map_lookup_elem(&kp_scratch, &(__u32){0});
	if (kp && kp_one(c->kp_slot)) {
		if (w) {
			es_call_fill(&w->call, c, id, now, ret, pinned);
			kp_exit(w, &c->kp_slot, (__u32)id, c->start_ns, now);
		} else {
			count_lost();
		}
		c->start_ns = 0;
		return;
	}
#endif
	busy_add(c->disk, -1);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		goto out;
	}
	es_call_fill(e, c, id, now, ret, pinned);
	bpf_ringbuf_submit(e, wakeup_flags_reserved(sizeof(*e)));
out:
#ifdef KP_EXIT
	if (kp && kpart)
		kp_exit(w, &c->kp_slot, (__u32)id, c->start_ns, now);
#endif
	c->start_ns = 0;
}

#endif
