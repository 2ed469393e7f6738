//go:build ignore

/* stacked.bpf.c: ext4's sync_file tracepoints. They see the fsyncs that
 * kernel threads make on a filesystem, as the loop driver does when a
 * flush reaches a loop device (lo_req_flush → vfs_fsync of the backing
 * file): the host level under a stacked device's flush, which no syscall
 * tracepoint sees. Those events reuse struct fsync_event with syscall
 * ES_SYS_KTHREAD. With callers set (every traced file is on ext4:
 * FsyncConfig.FSTypes), they also see the traced processes' own
 * fsync/fdatasync calls, in place of fsync.bpf.c's syscall tracepoints:
 * two program runs fewer per call (these run for every ext4 fsync anyway),
 * and no syscall tracepoint enabled, which would put every syscall of
 * every task on the slow path (bench/findings.md, 10). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#define KP_EXIT /* kpart.h: ext4_sync_file_exit_kpart makes the records */
#include "call.h"

char LICENSE[] SEC("license") = "GPL";

#define PF_KTHREAD_ 0x00200000

/* kinflight: kernel thread id -> the fsync_event being built. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, struct fsync_event);
} kinflight SEC(".maps");

/* kscratch: per-CPU space to build an event (too big for the stack).
 * Only ext4_sync_file_enter uses it, and the kernel never nests a program
 * on itself (the nested run is skipped, counted in recursion_misses):
 * nothing overwrites it between the memset and the map update
 * (tracer/scratch_test.go keeps it so). */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct fsync_event);
} kscratch SEC(".maps");

static __always_inline bool in_kthread(void)
{
	if (es_task_btf)
		return bpf_get_current_task_btf()->flags & PF_KTHREAD_;
	return BPF_CORE_READ((struct task_struct *)bpf_get_current_task(), flags) & PF_KTHREAD_;
}

/* callers: the traced processes' calls may come from here (set from Go
 * before load); callers_on: they do (set from Go at load, or at run time
 * by FsyncTracer.SwitchToExt4, when the syscall tracepoints started
 * without knowing the traced files' filesystem hand the calls over). */
const volatile bool callers = false;
volatile bool callers_on = false;

/* The fsync and fdatasync syscall numbers (asm/unistd.h; 32-bit compat
 * calls have others and are not seen here), and where the syscall's
 * number and first argument sit in the task's user registers. */
#if defined(__TARGET_ARCH_arm64)
#define ES_NR_FSYNC 82
#define ES_NR_FDATASYNC 83
/* arm64's struct pt_regs (not in the x86 vmlinux.h), relocated by name. */
struct pt_regs___es_arm64 {
	__u64 orig_x0;
	__s32 syscallno;
} __attribute__((preserve_access_index));
#else
#define ES_NR_FSYNC 74
#define ES_NR_FDATASYNC 75
#endif

/* caller_syscall returns the enum es_syscall of the current task's
 * syscall if it is fsync(2) or fdatasync(2) (its fd in *fd), else -1:
 * ext4_sync_file also runs inside O_SYNC/O_DSYNC writes and msync,
 * which fsync.bpf.c's syscall tracepoints do not count as calls either. */
static __always_inline int caller_syscall(int *fd)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	long nr;

	if (!regs)
		return -1;
#if defined(__TARGET_ARCH_arm64)
	nr = BPF_CORE_READ((struct pt_regs___es_arm64 *)regs, syscallno);
	*fd = (int)BPF_CORE_READ((struct pt_regs___es_arm64 *)regs, orig_x0);
#else
	nr = regs->orig_ax;
	*fd = (int)regs->di;
#endif
	if (nr == ES_NR_FSYNC)
		return ES_SYS_FSYNC;
	if (nr == ES_NR_FDATASYNC)
		return ES_SYS_FDATASYNC;
	return -1;
}

SEC("tp_btf/ext4_sync_file_enter")
int BPF_PROG(ext4_sync_file_enter, struct file *file, int datasync)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id, zero = 0;
	struct fsync_enter_event ee = {};
	struct fsync_event *e;
	int fd, sc;

	if (!in_kthread()) {
		if (callers && callers_on && (sc = caller_syscall(&fd)) >= 0)
			es_call_enter(file, fd, sc, true);
		return 0;
	}
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

/* sync_file_exit ends a call at ext4_sync_file's exit; kp: with its
 * kpart_event (kpart.h). */
static __always_inline int sync_file_exit(struct inode *inode, int ret, bool kp)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct fsync_event *e;

	/* every ext4 fsync of every task passes here: no map lookup for the
	 * ones that are not a kernel thread's, unless callers (then one
	 * task-storage lookup: a pointer read for a task never traced) */
	if (!in_kthread()) {
		if (callers && callers_on)
			es_call_exit(ret, true, kp);
		return 0;
	}
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

SEC("tp_btf/ext4_sync_file_exit")
int BPF_PROG(ext4_sync_file_exit, struct inode *inode, int ret)
{
	return sync_file_exit(inode, ret, false);
}

/* ext4_sync_file_exit_kpart: ext4_sync_file_exit with the calls' kernel
 * slots (FsyncConfig.KernelPartition, kpart.h), which Go loads in its
 * place only then. */
SEC("tp_btf/ext4_sync_file_exit")
int BPF_PROG(ext4_sync_file_exit_kpart, struct inode *inode, int ret)
{
	return sync_file_exit(inode, ret, true);
}
