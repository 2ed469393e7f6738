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
#include "file.h"

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
	es_fill_file(e, es_fd_file(fd));
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
