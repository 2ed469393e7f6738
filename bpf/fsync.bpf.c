//go:build ignore

/* fsync.bpf.c: every fsync(2)/fdatasync(2) of the traced processes, with
 * the file it was for, named in the kernel from the fd (the fd may be
 * closed or reused by the time userspace looks): at exit, if the fd still
 * holds the file it held at entry. Syscall tracepoints, because
 * function probes on vfs_fsync_range miss fdatasync on kernels that inline
 * it (Debian 6.1) and kprobes/fentry may be unavailable. Where every
 * traced file is on ext4 (FsyncConfig.FSTypes), Go attaches none of these
 * and stacked.bpf.c sees the calls on ext4's own tracepoints instead:
 * enabling a syscall tracepoint slows every syscall of every task. The
 * call itself is call.h's, shared by both. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "call.h"

char LICENSE[] SEC("license") = "GPL";

/* Keep the event types in the object for bpf2go -type. */
const struct fsync_event *unused_fsync_event __attribute__((unused));
const struct fsync_enter_event *unused_fsync_enter __attribute__((unused));
const enum es_kind *unused_es_kind __attribute__((unused));
const enum es_syscall *unused_es_syscall __attribute__((unused));
const struct kpart_event *unused_kpart_event __attribute__((unused));
const enum kpart_reason *unused_kpart_reason __attribute__((unused));
const struct kp_entry *unused_kp_entry __attribute__((unused));
const enum kp_entry_type *unused_kp_entry_type __attribute__((unused));
const enum kp_cat *unused_kp_cat __attribute__((unused));

static __always_inline int on_enter(int fd, __u8 syscall)
{
	es_call_enter(es_fd_file(fd), fd, syscall, false);
	return 0;
}

static __always_inline int on_exit(long ret)
{
	es_call_exit(ret, false, false);
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
