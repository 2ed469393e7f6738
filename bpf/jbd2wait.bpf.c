//go:build ignore

/* jbd2wait.bpf.c: optional function probes that sharpen the journal layer
 * where the kernel allows them. jbd2_log_wait_commit(journal, tid) is where
 * an ext4 fsync waits for the commit of its transaction: its entry and exit
 * in the fsyncing thread give the exact wait and the transaction waited
 * for. Two variants of the same probe, fentry/fexit and kprobe/kretprobe;
 * userspace keeps the first that loads and attaches (fentry is refused on
 * some kernels, kprobes are compiled out of others) and reports the layer
 * as unavailable when neither does. The baseline never depends on them. */
#include "vmlinux.h"
#if defined(__TARGET_ARCH_arm64)
/* vmlinux.h comes from an x86 kernel; arm64's kprobe register access
 * needs the start of its struct pt_regs. */
struct user_pt_regs {
	__u64 regs[31];
	__u64 sp;
	__u64 pc;
	__u64 pstate;
};
#endif
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "journal.h"
#include "events.h"

char LICENSE[] SEC("license") = "GPL";

/* Same process filters as fsync.bpf.c, set from Go. */
const volatile __u32 targ_tgid = 0;
const volatile __u64 targ_cgroup_id = 0;

struct wait_start {
	__u64 start_ns;
	__u32 dev;
	__u32 txn;
};

/* waits: thread id -> the jbd2 commit wait it is in. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u32);
	__type(value, struct wait_start);
} waits SEC(".maps");

static __always_inline void wait_enter(journal_t *journal, __u32 txn)
{
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct wait_start w = {};

	if (targ_tgid && (id >> 32) != targ_tgid)
		return;
	if (targ_cgroup_id && bpf_get_current_cgroup_id() != targ_cgroup_id)
		return;
	w.start_ns = bpf_ktime_get_ns();
	w.dev = BPF_CORE_READ(journal, j_fs_dev, bd_dev);
	w.txn = txn;
	if (bpf_map_update_elem(&waits, &tid, &w, BPF_ANY))
		count_lost();
}

static __always_inline void wait_exit(void)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct wait_start *w = bpf_map_lookup_elem(&waits, &tid);
	struct journal_event e = {};

	if (!w)
		return;
	e.kind = ES_KIND_JOURNAL;
	e.source = ES_JOURNAL_JBD2_WAIT;
	e.dev = w->dev;
	e.tid = tid;
	e.txn = w->txn;
	e.start_ns = w->start_ns;
	e.end_ns = now;
	bpf_map_delete_elem(&waits, &tid);
	emit(&e, sizeof(e));
}

SEC("fentry/jbd2_log_wait_commit")
int BPF_PROG(jbd2_wait_fentry, journal_t *journal, tid_t txn)
{
	wait_enter(journal, txn);
	return 0;
}

SEC("fexit/jbd2_log_wait_commit")
int BPF_PROG(jbd2_wait_fexit, journal_t *journal, tid_t txn, int ret)
{
	wait_exit();
	return 0;
}

SEC("kprobe/jbd2_log_wait_commit")
int BPF_KPROBE(jbd2_wait_kprobe, journal_t *journal, tid_t txn)
{
	wait_enter(journal, txn);
	return 0;
}

SEC("kretprobe/jbd2_log_wait_commit")
int BPF_KRETPROBE(jbd2_wait_kretprobe)
{
	wait_exit();
	return 0;
}
