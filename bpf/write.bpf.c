//go:build ignore

/* write.bpf.c: every write(2), pwrite64(2), writev(2), pwritev(2) and
 * pwritev2(2) of the traced processes on a file the fsync tracer follows
 * (one it has named for an fsync: filecache.h), with the part of the call
 * spent throttled in balance_dirty_pages and waiting for a page under
 * writeback. etcd's WAL appends with write(2) and bbolt writes its pages
 * with pwrite64(2), before each fdatasync: a write that blocks is commit
 * latency that etcd's fsync metric does not see.
 *
 * The kernel marks the start of both waits, not their end:
 * writeback:balance_dirty_pages fires just before the task sleeps
 * io_schedule_timeout(pause) (pause > 0; pause <= 0: no sleep), and
 * writeback:folio_wait_writeback just before it sleeps on PG_writeback.
 * A wait ends at the task's next mark: the next of either, the
 * writeback:writeback_dirty_folio of the next page it dirties (the
 * write's copy goes on at once after a wait), or the syscall's exit. So
 * each wait reads high by the copy between its end and that mark (µs
 * against the ms of a throttle). Tracepoints only: no kprobe or fentry. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "fsync.h"
#include "write.h"
#include "events.h"
#include "file.h"
#include "filecache.h"
#include "filter.h"
#include "inflight.h"

char LICENSE[] SEC("license") = "GPL";

/* Keep the event type in the object for bpf2go -type. */
const struct write_event *unused_write_event __attribute__((unused));

enum wait_kind {
	WAIT_NONE = 0,
	WAIT_THROTTLED = 1,
	WAIT_WRITEBACK = 2,
};

static __always_inline struct call *current_call(void)
{
	struct call *c = es_call(false);

	/* an fsync in flight is fsync.bpf.c's */
	return c && c->start_ns && c->syscall >= ES_SYS_WRITE ? c : NULL;
}

/* close_wait ends the open wait of c at now. */
static __always_inline void close_wait(struct call *c, __u64 now)
{
	if (c->wait == WAIT_THROTTLED)
		c->throttled_ns += now - c->mark_ns;
	else if (c->wait == WAIT_WRITEBACK)
		c->writeback_wait_ns += now - c->mark_ns;
	c->wait = WAIT_NONE;
}

static __always_inline int on_enter(int fd, __u8 syscall)
{
	struct call c = {}, *slot;
	struct file *f;

	if (!es_selected(&c.cgroup_id))
		return 0;
	f = es_fd_file(fd);
	if (!f || !es_followed(f))
		return 0;
	c.file = (__u64)f;
	c.fd = fd;
	c.syscall = syscall;
	c.start_ns = bpf_ktime_get_ns();
	slot = es_call(true);
	if (!slot) {
		count_lost();
		return 0;
	}
	*slot = c;
	return 0;
}

static __always_inline int on_exit(long ret)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	struct call *c = current_call();
	struct write_event *e;
	struct file_info *fi;
	struct file *f;

	if (!c)
		return 0;
	close_wait(c, now);
	e = bpf_ringbuf_reserve(&events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		goto out;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = ES_KIND_WRITE;
	e->syscall = c->syscall;
	e->fd = c->fd;
	e->pid = id >> 32;
	e->tid = (__u32)id;
	e->cgroup_id = c->cgroup_id;
	e->start_ns = c->start_ns;
	e->end_ns = now;
	e->ret = ret;
	e->throttles = c->throttles;
	e->writeback_waits = c->writeback_waits;
	e->throttled_ns = c->throttled_ns;
	e->writeback_wait_ns = c->writeback_wait_ns;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	/* Named at exit from the cache, as fsync.bpf.c does, and only while
	 * the fd still holds the file seen at entry. */
	f = es_fd_file(c->fd);
	if (f && (__u64)f == c->file && (fi = es_cached_file(f))) {
		e->ino = fi->ino;
		e->dev = fi->dev;
		e->is_blockdev = fi->is_blockdev;
		__builtin_memcpy(e->fstype, fi->fstype, sizeof(e->fstype));
		__builtin_memcpy(e->names, fi->names, sizeof(e->names));
	}
	bpf_ringbuf_submit(e, wakeup_flags_reserved(sizeof(*e)));
out:
	c->start_ns = 0;
	return 0;
}

SEC("tracepoint/writeback/balance_dirty_pages")
int balance_dirty_pages(struct trace_event_raw_balance_dirty_pages *ctx)
{
	struct call *c = current_call();
	__u64 now;

	if (!c)
		return 0;
	now = bpf_ktime_get_ns();
	close_wait(c, now);
	/* pause (ms, from jiffies) <= 0: the task goes on without sleeping. */
	if (ctx->pause > 0) {
		c->wait = WAIT_THROTTLED;
		c->mark_ns = now;
		c->throttles++;
	}
	return 0;
}

SEC("tracepoint/writeback/folio_wait_writeback")
int folio_wait_writeback(void *ctx)
{
	struct call *c = current_call();
	__u64 now;

	if (!c)
		return 0;
	now = bpf_ktime_get_ns();
	close_wait(c, now);
	c->wait = WAIT_WRITEBACK;
	c->mark_ns = now;
	c->writeback_waits++;
	return 0;
}

SEC("tracepoint/writeback/writeback_dirty_folio")
int writeback_dirty_folio(void *ctx)
{
	struct call *c = current_call();

	if (c && c->wait != WAIT_NONE)
		close_wait(c, bpf_ktime_get_ns());
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_write")
int sys_enter_write(struct trace_event_raw_sys_enter *ctx)
{
	return on_enter((int)ctx->args[0], ES_SYS_WRITE);
}

SEC("tracepoint/syscalls/sys_enter_pwrite64")
int sys_enter_pwrite64(struct trace_event_raw_sys_enter *ctx)
{
	return on_enter((int)ctx->args[0], ES_SYS_PWRITE64);
}

SEC("tracepoint/syscalls/sys_enter_writev")
int sys_enter_writev(struct trace_event_raw_sys_enter *ctx)
{
	return on_enter((int)ctx->args[0], ES_SYS_WRITEV);
}

SEC("tracepoint/syscalls/sys_enter_pwritev")
int sys_enter_pwritev(struct trace_event_raw_sys_enter *ctx)
{
	return on_enter((int)ctx->args[0], ES_SYS_PWRITEV);
}

SEC("tracepoint/syscalls/sys_enter_pwritev2")
int sys_enter_pwritev2(struct trace_event_raw_sys_enter *ctx)
{
	return on_enter((int)ctx->args[0], ES_SYS_PWRITEV2);
}

/* One exit program for the five calls: the call in flight says which. */
SEC("tracepoint/syscalls/sys_exit_write")
int sys_exit_write(struct trace_event_raw_sys_exit *ctx)
{
	return on_exit(ctx->ret);
}
