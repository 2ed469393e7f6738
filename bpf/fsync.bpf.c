//go:build ignore

/* fsync.bpf.c: every fsync(2)/fdatasync(2) of the traced processes, with
 * the file it was for, named in the kernel from the fd (the fd may be
 * closed or reused by the time userspace looks): at exit, if the fd still
 * holds the file it held at entry. Syscall tracepoints, because
 * function probes on vfs_fsync_range miss fdatasync on kernels that inline
 * it (Debian 6.1) and kprobes/fentry may be unavailable. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "fsync.h"
#include "events.h"
#include "file.h"
#include "filecache.h"
#include "filter.h"
#include "inflight.h"

char LICENSE[] SEC("license") = "GPL";

/* Keep the event types in the object for bpf2go -type. */
const struct fsync_event *unused_fsync_event __attribute__((unused));
const struct fsync_enter_event *unused_fsync_enter __attribute__((unused));
const enum es_kind *unused_es_kind __attribute__((unused));
const enum es_syscall *unused_es_syscall __attribute__((unused));

/* fill_file names f in e, from files when its entry still holds. */
static __always_inline void fill_file(struct fsync_event *e, struct file *f)
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

/* file_disk returns the whole disk f's writes go to (events.h's busy
 * disks): for a block device node the device's own disk (its bdev inode
 * sits in struct bdev_inode next to the block_device), else the disk
 * under f's filesystem; 0 when unknown. */
static __always_inline __u32 file_disk(struct file *f)
{
	struct inode *inode = BPF_CORE_READ(f, f_inode);
	struct block_device *bdev;
	struct gendisk *disk;

	if ((BPF_CORE_READ(inode, i_mode) & ES_S_IFMT) != ES_S_IFBLK)
		return inode_disk(inode);
	bdev = (void *)BPF_CORE_READ(f, f_mapping, host) - bpf_core_field_offset(struct bdev_inode, vfs_inode) +
	       bpf_core_field_offset(struct bdev_inode, bdev);
	disk = BPF_CORE_READ(bdev, bd_disk);
	if (!disk)
		return 0;
	return ((__u32)BPF_CORE_READ(disk, major) << 20) | (__u32)BPF_CORE_READ(disk, first_minor);
}

static __always_inline int on_enter(int fd, __u8 syscall)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct fsync_enter_event ee = {};
	struct call c = {}, *slot;
	struct file *f;

	if (!es_selected(&c.cgroup_id))
		return 0;
	c.syscall = syscall;
	c.fd = fd;
	f = es_fd_file(fd);
	c.file = (__u64)f;
	if (f)
		c.disk = file_disk(f);
	c.start_ns = bpf_ktime_get_ns();
	slot = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0, BPF_LOCAL_STORAGE_GET_F_CREATE);
	if (!slot) {
		count_lost();
		return 0;
	}
	*slot = c;
	busy_add(c.disk, 1); /* until on_exit */
	/* Tell userspace a call is in flight, so it keeps the block and journal
	 * events this call may wait on. */
	ee.kind = ES_KIND_FSYNC_ENTER;
	ee.tid = tid;
	ee.start_ns = c.start_ns;
	emit(&ee, sizeof(ee));
	return 0;
}

static __always_inline int on_exit(long ret)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct call *c = bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0, 0);
	struct fsync_event *e;
	struct file *f;

	if (!c || !c->start_ns || c->syscall > ES_SYS_FDATASYNC)
		return 0;
	busy_add(c->disk, -1);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		goto out;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = ES_KIND_FSYNC;
	e->syscall = c->syscall;
	e->fd = c->fd;
	e->pid = id >> 32;
	e->tid = tid;
	e->cgroup_id = c->cgroup_id;
	e->start_ns = c->start_ns;
	e->end_ns = now;
	e->ret = ret;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	/* The file is named at exit, from the fd. The fd table still
	 * holding the file seen at entry keeps it alive while it is read; if
	 * another thread closed or replaced the fd meanwhile, the file stays
	 * unnamed (ino 0) rather than read from memory that may be freed. */
	f = es_fd_file(c->fd);
	if (f && (__u64)f == c->file)
		fill_file(e, f);
	bpf_ringbuf_submit(e, wakeup_flags_reserved(sizeof(*e)));
out:
	c->start_ns = 0;
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_fsync")
int sys_enter_fsync(struct trace_event_raw_sys_enter *ctx)
{
	return on_enter((int)ctx->args[0], ES_SYS_FSYNC);
}

SEC("tracepoint/syscalls/sys_exit_fsync")
int sys_exit_fsync(struct trace_event_raw_sys_exit *ctx)
{
	return on_exit(ctx->ret);
}

SEC("tracepoint/syscalls/sys_enter_fdatasync")
int sys_enter_fdatasync(struct trace_event_raw_sys_enter *ctx)
{
	return on_enter((int)ctx->args[0], ES_SYS_FDATASYNC);
}

SEC("tracepoint/syscalls/sys_exit_fdatasync")
int sys_exit_fdatasync(struct trace_event_raw_sys_exit *ctx)
{
	return on_exit(ctx->ret);
}
