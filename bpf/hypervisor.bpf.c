//go:build ignore

/* hypervisor.bpf.c: the I/O a hypervisor process (QEMU) does on its image
 * files, by the syscalls each aio mode uses: pread64/pwrite64/preadv/
 * pwritev(2) from worker threads (aio=threads), io_submit (aio=native),
 * io_uring_enter and the io_uring requests (aio=io_uring). The file is
 * resolved from the fd at entry (dev, inode, the last d_names, and
 * f_flags: O_DIRECT is cache=none). Syscall tracepoints and the io_uring
 * tracepoints only: kprobes may be absent. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "hypervisor.h"
#include "file.h"
#include "ring.h"

_Static_assert(HV_NAME_LEN == ES_NAME_LEN && HV_PATH_DEPTH == ES_PATH_DEPTH,
	       "hv_event.names must have fsync_event.names' shape for es_file_names");

char LICENSE[] SEC("license") = "GPL";

/* Filters, set from Go before load; zero/false means "any". */
const volatile __u32 targ_tgid = 0;
const volatile bool filter_comm = false;
const volatile char targ_comm[HV_COMM_LEN] = {};

/* Keep the event type in the object for bpf2go -type. */
const struct hv_event *unused_hv_event __attribute__((unused));
const enum hv_op *unused_hv_op __attribute__((unused));
const enum hv_file_flag *unused_hv_file_flag __attribute__((unused));

/* hv_events: struct hv_event records. Size is set from Go. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} hv_events SEC(".maps");

/* hv_wake_bytes: unread bytes in hv_events past which a record wakes the
 * reader (ring.h); set from Go to an eighth of the ring. */
const volatile __u64 hv_wake_bytes = 1 << 19;

/* hv_lost: per-CPU count of records that did not fit in hv_events, or
 * whose in-flight state did not fit in a map. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} hv_lost SEC(".maps");

/* hv_inflight: thread id -> the event being built between sys_enter and
 * sys_exit (a thread is in at most one syscall). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u32);
	__type(value, struct hv_event);
} hv_inflight SEC(".maps");

/* hv_requests: io_uring request (struct io_kiocb address) -> the event
 * being built between io_uring_submit_req and io_uring_complete. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, __u64);
	__type(value, struct hv_event);
} hv_requests SEC(".maps");

/* hv_scratch: per-CPU space to build an event (too big for the stack).
 * No run can overwrite it between start()'s memset and the map update
 * that copies it out: only classic tracepoint programs use it, and the
 * kernel starts none of those on a CPU where another runs
 * (bpf_prog_active; tracer/scratch_test.go keeps it so). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct hv_event);
} hv_scratch SEC(".maps");

/* O_DIRECT and O_DSYNC differ by architecture (asm/fcntl.h). */
#if defined(__TARGET_ARCH_arm64)
#define HV_O_DIRECT 0200000
#else
#define HV_O_DIRECT 040000
#endif
#define HV_O_DSYNC 010000
#define HV_O_SYNC_ONLY 04000000 /* __O_SYNC */

static __always_inline void count_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&hv_lost, &zero);
	if (n)
		*n += 1;
}

static __always_inline bool comm_matches(const char *comm)
{
	if (!filter_comm)
		return true;
#pragma unroll
	for (int i = 0; i < HV_COMM_LEN; i++) {
		if (comm[i] != targ_comm[i])
			return false;
		if (comm[i] == 0)
			return true;
	}
	return true;
}

static __always_inline void fill_file(struct hv_event *e, int fd)
{
	struct file *f = es_fd_file(fd);
	unsigned int flags;

	if (!f)
		return;
	flags = BPF_CORE_READ(f, f_flags);
	if (flags & HV_O_DIRECT)
		e->file_flags |= HV_F_DIRECT;
	if (flags & HV_O_DSYNC)
		e->file_flags |= HV_F_DSYNC;
	if (flags & HV_O_SYNC_ONLY)
		e->file_flags |= HV_F_SYNC;
	/* hv_event's name arrays have fsync_event's shape (hypervisor.h). */
	es_file_ident(f, &e->ino, &e->dev, &e->is_blockdev, e->fstype, sizeof(e->fstype));
	es_file_names(f, e->names);
}

/* start builds an event for the current task if it passes the filters. */
static __always_inline struct hv_event *start(__u8 op, int fd)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tgid = id >> 32;
	__u32 zero = 0;
	struct hv_event *e;

	if (targ_tgid && tgid != targ_tgid)
		return NULL;
	e = bpf_map_lookup_elem(&hv_scratch, &zero);
	if (!e)
		return NULL;
	__builtin_memset(e, 0, sizeof(*e));
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	if (!comm_matches(e->comm))
		return NULL;
	e->op = op;
	e->fd = fd;
	e->pid = tgid;
	e->tid = (__u32)id;
	fill_file(e, fd);
	e->start_ns = bpf_ktime_get_ns();
	return e;
}

static __always_inline int on_enter(__u8 op, int fd)
{
	struct hv_event *e = start(op, fd);

	if (e && bpf_map_update_elem(&hv_inflight, &e->tid, e, BPF_ANY))
		count_lost();
	return 0;
}

static __always_inline int on_exit(long ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct hv_event *e = bpf_map_lookup_elem(&hv_inflight, &tid);

	if (!e)
		return 0;
	e->end_ns = bpf_ktime_get_ns();
	e->ret = ret;
	if (bpf_ringbuf_output(&hv_events, e, sizeof(*e), es_wake_flags(&hv_events, hv_wake_bytes, sizeof(*e), false)))
		count_lost();
	bpf_map_delete_elem(&hv_inflight, &tid);
	return 0;
}

#define RW_SYSCALL(name, op)                                              \
	SEC("tracepoint/syscalls/sys_enter_" #name)                       \
	int sys_enter_##name(struct trace_event_raw_sys_enter *ctx)       \
	{                                                                 \
		return on_enter(op, (int)ctx->args[0]);                   \
	}                                                                 \
	SEC("tracepoint/syscalls/sys_exit_" #name)                        \
	int sys_exit_##name(struct trace_event_raw_sys_exit *ctx)         \
	{                                                                 \
		return on_exit(ctx->ret);                                 \
	}

RW_SYSCALL(pread64, HV_OP_PREAD64)
RW_SYSCALL(pwrite64, HV_OP_PWRITE64)
RW_SYSCALL(preadv, HV_OP_PREADV)
RW_SYSCALL(pwritev, HV_OP_PWRITEV)
RW_SYSCALL(preadv2, HV_OP_PREADV2)
RW_SYSCALL(pwritev2, HV_OP_PWRITEV2)

/* io_submit(ctx, nr, iocbpp): the file is that of the first iocb (QEMU's
 * linux-aio submits batches for one image file). */
SEC("tracepoint/syscalls/sys_enter_io_submit")
int sys_enter_io_submit(struct trace_event_raw_sys_enter *ctx)
{
	struct iocb **iocbpp = (struct iocb **)ctx->args[2];
	struct iocb *first = NULL;
	struct iocb cb = {};
	struct hv_event *e;
	long nr = (long)ctx->args[1];

	if (nr <= 0 || bpf_probe_read_user(&first, sizeof(first), iocbpp) ||
	    bpf_probe_read_user(&cb, sizeof(cb), first))
		cb.aio_fildes = (__u32)-1;
	e = start(HV_OP_IO_SUBMIT, (int)cb.aio_fildes);
	if (!e)
		return 0;
	e->nr = (__u32)nr;
	e->opcode = (__u8)cb.aio_lio_opcode;
	if (bpf_map_update_elem(&hv_inflight, &e->tid, e, BPF_ANY))
		count_lost();
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_io_submit")
int sys_exit_io_submit(struct trace_event_raw_sys_exit *ctx)
{
	return on_exit(ctx->ret);
}

/* io_uring_enter(fd, to_submit, min_complete, flags, ...): fd is the ring. */
SEC("tracepoint/syscalls/sys_enter_io_uring_enter")
int sys_enter_io_uring_enter(struct trace_event_raw_sys_enter *ctx)
{
	struct hv_event *e = start(HV_OP_IO_URING_ENTER, (int)ctx->args[0]);

	if (!e)
		return 0;
	e->nr = (__u32)ctx->args[1];
	if (bpf_map_update_elem(&hv_inflight, &e->tid, e, BPF_ANY))
		count_lost();
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_io_uring_enter")
int sys_exit_io_uring_enter(struct trace_event_raw_sys_exit *ctx)
{
	return on_exit(ctx->ret);
}

/* One io_uring request, from submission (in the submitting task, whose fd
 * table names the target file) to its completion (any context). */
SEC("tracepoint/io_uring/io_uring_submit_req")
int io_uring_submit_req(struct trace_event_raw_io_uring_submit_req *ctx)
{
	struct io_kiocb *req = BPF_CORE_READ(ctx, req);
	__u64 key = (__u64)req;
	struct hv_event *e;
	int fd = -1;

	if (req)
		fd = BPF_CORE_READ(req, cqe.fd);
	e = start(HV_OP_IO_URING_REQ, fd);
	if (!e)
		return 0;
	e->opcode = BPF_CORE_READ(ctx, opcode);
	if (bpf_map_update_elem(&hv_requests, &key, e, BPF_ANY))
		count_lost();
	return 0;
}

SEC("tracepoint/io_uring/io_uring_complete")
int io_uring_complete(struct trace_event_raw_io_uring_complete *ctx)
{
	__u64 key = (__u64)BPF_CORE_READ(ctx, req);
	struct hv_event *e = bpf_map_lookup_elem(&hv_requests, &key);

	if (!e)
		return 0;
	e->end_ns = bpf_ktime_get_ns();
	e->ret = BPF_CORE_READ(ctx, res);
	if (bpf_ringbuf_output(&hv_events, e, sizeof(*e), es_wake_flags(&hv_events, hv_wake_bytes, sizeof(*e), false)))
		count_lost();
	bpf_map_delete_elem(&hv_requests, &key);
	return 0;
}
