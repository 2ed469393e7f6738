//go:build ignore

/* fsync.bpf.c: every fsync(2)/fdatasync(2) of the traced processes, with
 * the file it was for, resolved at entry from the fd (the fd may be closed
 * or reused by the time userspace looks). Syscall tracepoints, because
 * function probes on vfs_fsync_range miss fdatasync on kernels that inline
 * it (Debian 6.1) and kprobes/fentry may be unavailable. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "fsync.h"
#include "events.h"

char LICENSE[] SEC("license") = "GPL";

/* Filters, set from Go before load; zero/false means "any". */
const volatile __u32 targ_tgid = 0;
const volatile __u64 targ_cgroup_id = 0;
const volatile bool filter_comm = false;
const volatile char targ_comm[ES_COMM_LEN] = {};

/* Keep the event types in the object for bpf2go -type. */
const struct fsync_event *unused_fsync_event __attribute__((unused));
const struct fsync_enter_event *unused_fsync_enter __attribute__((unused));

/* inflight: thread id -> the fsync_event being built between enter and
 * exit (a thread is in at most one syscall). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct fsync_event);
} inflight SEC(".maps");

/* scratch: per-CPU space to build an event (too big for the BPF stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fsync_event);
} scratch SEC(".maps");

#define S_IFMT 00170000
#define S_IFBLK 0060000

static __always_inline bool comm_matches(const char *comm)
{
	if (!filter_comm)
		return true;
#pragma unroll
	for (int i = 0; i < ES_COMM_LEN; i++) {
		if (comm[i] != targ_comm[i])
			return false;
		if (comm[i] == 0)
			return true;
	}
	return true;
}

static __always_inline struct file *fd_file(int fd)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct file *f = NULL;

	if (!fdt || fd < 0 || (unsigned int)fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	bpf_probe_read_kernel(&f, sizeof(f), &fds[fd]);
	return f;
}

static __always_inline void fill_file(struct fsync_event *e, int fd)
{
	struct file *f = fd_file(fd);
	struct inode *inode;
	struct dentry *d;
	const char *fsname;

	if (!f)
		return;
	inode = BPF_CORE_READ(f, f_inode);
	e->ino = BPF_CORE_READ(inode, i_ino);
	if ((BPF_CORE_READ(inode, i_mode) & S_IFMT) == S_IFBLK) {
		e->is_blockdev = 1;
		e->dev = BPF_CORE_READ(inode, i_rdev);
	} else {
		e->dev = BPF_CORE_READ(inode, i_sb, s_dev);
	}
	fsname = BPF_CORE_READ(inode, i_sb, s_type, name);
	bpf_probe_read_kernel_str(e->fstype, sizeof(e->fstype), fsname);

	d = BPF_CORE_READ(f, f_path.dentry);
#pragma unroll
	for (int i = 0; i < ES_PATH_DEPTH; i++) {
		struct dentry *parent;

		if (!d)
			break;
		bpf_probe_read_kernel_str(e->names[i], ES_NAME_LEN, BPF_CORE_READ(d, d_name.name));
		parent = BPF_CORE_READ(d, d_parent);
		if (parent == d)
			break;
		d = parent;
	}
}

static __always_inline int on_enter(int fd, __u8 syscall)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32, tid = (__u32)id;
	__u32 zero = 0;
	struct fsync_event *e;
	struct fsync_enter_event ee = {};

	if (targ_tgid && tgid != targ_tgid)
		return 0;
	if (targ_cgroup_id && bpf_get_current_cgroup_id() != targ_cgroup_id)
		return 0;
	e = bpf_map_lookup_elem(&scratch, &zero);
	if (!e)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (!comm_matches(e->comm))
		return 0;

	e->kind = ES_KIND_FSYNC;
	e->syscall = syscall;
	e->fd = fd;
	e->pid = tgid;
	e->tid = tid;
	e->cgroup_id = bpf_get_current_cgroup_id();
	fill_file(e, fd);
	e->start_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&inflight, &tid, e, BPF_ANY)) {
		count_lost();
		return 0;
	}
	/* Tell userspace a call is in flight, so it keeps the block and journal
	 * events this call may wait on. */
	ee.kind = ES_KIND_FSYNC_ENTER;
	ee.tid = tid;
	ee.start_ns = e->start_ns;
	emit(&ee, sizeof(ee));
	return 0;
}

static __always_inline int on_exit(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct fsync_event *e = bpf_map_lookup_elem(&inflight, &tid);

	if (!e)
		return 0;
	e->end_ns = bpf_ktime_get_ns();
	e->ret = ret;
	emit(e, sizeof(*e));
	bpf_map_delete_elem(&inflight, &tid);
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
