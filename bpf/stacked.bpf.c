//go:build ignore

/* stacked.bpf.c: fsyncs that kernel threads make on a filesystem, as the
 * loop driver does when a flush reaches a loop device (lo_req_flush →
 * vfs_fsync of the backing file). They are the host level under a stacked
 * device's flush, and no syscall tracepoint sees them: the filesystem's own
 * sync_file tracepoints do. ext4 has enter and exit; the events reuse
 * struct fsync_event with syscall ES_SYS_KTHREAD. Only kernel threads are
 * traced: syscall fsyncs come from fsync.bpf.c. */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "fsync.h"
#include "events.h"
#include "file.h"

char LICENSE[] SEC("license") = "GPL";

#define PF_KTHREAD_ 0x00200000

/* kinflight: kernel thread id -> the fsync_event being built. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct fsync_event);
} kinflight SEC(".maps");

/* kscratch: per-CPU space to build an event (too big for the stack). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fsync_event);
} kscratch SEC(".maps");

static __always_inline bool in_kthread(void)
{
	struct task_struct *task = bpf_get_current_task_btf();

	return task->flags & PF_KTHREAD_;
}

SEC("tp_btf/ext4_sync_file_enter")
int BPF_PROG(ext4_sync_file_enter, struct file *file, int datasync)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, zero = 0;
	struct fsync_enter_event ee = {};
	struct fsync_event *e;

	if (!in_kthread())
		return 0;
	e = bpf_map_lookup_elem(&kscratch, &zero);
	if (!e)
		return 0;
	__builtin_memset(e, 0, sizeof(*e));
	e->kind = ES_KIND_FSYNC;
	e->syscall = ES_SYS_KTHREAD;
	e->fd = -1;
	e->pid = id >> 32;
	e->tid = tid;
	bpf_get_current_comm(e->comm, sizeof(e->comm));
	es_fill_file(e, file);
	e->start_ns = bpf_ktime_get_ns();
	if (bpf_map_update_elem(&kinflight, &tid, e, BPF_ANY)) {
		count_lost();
		return 0;
	}
	busy_add(inode_disk(BPF_CORE_READ(file, f_inode)), 1); /* until the exit */
	ee.kind = ES_KIND_FSYNC_ENTER;
	ee.tid = tid;
	ee.start_ns = e->start_ns;
	emit(&ee, sizeof(ee));
	return 0;
}

SEC("tp_btf/ext4_sync_file_exit")
int BPF_PROG(ext4_sync_file_exit, struct inode *inode, int ret)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct fsync_event *e;

	/* every ext4 fsync of every task passes here: no map lookup for the
	 * ones that are not a kernel thread's */
	if (!in_kthread())
		return 0;
	e = bpf_map_lookup_elem(&kinflight, &tid);
	if (!e)
		return 0;
	busy_add(inode_disk(inode), -1);
	e->end_ns = now;
	e->ret = ret;
	emit(e, sizeof(*e));
	bpf_map_delete_elem(&kinflight, &tid);
	return 0;
}
