//go:build ignore

/* commit.bpf.c: one uprobe program for every probe on etcd's write path
 * (enum commit_kind in commit.h, passed as the attach cookie). It reads
 * the few arguments the kind needs from Go's register ABI and the current
 * goroutine's g, and commits one record to the ring. The joining of
 * records into writes is done in Go (analysis/commit), so the programs
 * stay small and keep no state. Filtering by process is done at attach
 * time (the uprobe's pid). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "commit.h"
#include "ring.h"

char LICENSE[] SEC("license") = "GPL";

/* Keep the event type in the object for bpf2go -type. */
const struct commit_event *unused_commit_event __attribute__((unused));

/* commit_events: struct commit_event records. Size is set from Go. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} commit_events SEC(".maps");

/* commit_wake_bytes: unread bytes in commit_events past which a record
 * wakes the reader (ring.h); set from Go to an eighth of the ring. */
const volatile __u64 commit_wake_bytes = 1 << 17;

/* commit_lost: per-CPU count of records that did not fit in
 * commit_events, or whose arguments could not be read. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} commit_lost SEC(".maps");

/* in_sync: thread id -> when its (*WAL).sync began (ns), from the
 * COMMIT_SYNC_ENTER probe on it to the COMMIT_SYNC_RET on it; the
 * scheduler programs below report its state changes meanwhile. A
 * goroutine that moved to another thread leaves its entry behind: it is
 * ignored after in_sync_max_ns, and replaced at that thread's next sync. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1024);
	__type(key, __u32);
	__type(value, __u64);
} in_sync SEC(".maps");

#define in_sync_max_ns 2000000000ULL

static __always_inline void count_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&commit_lost, &zero);
	if (n)
		*n += 1;
}

/* Go's register ABI: integer arguments in order, the g pointer, and the
 * stack pointer (stack-assigned arguments start one word above it at a
 * function's entry, past the return address). */
#if defined(__TARGET_ARCH_x86)
#define GO_ARG1(r) ((r)->ax) /* the receiver */
#define GO_ARG2(r) ((r)->bx)
#define GO_ARG3(r) ((r)->cx)
#define GO_ARG4(r) ((r)->di)
#define GO_ARG5(r) ((r)->si)
#define GO_ARG6(r) ((r)->r8)
#define GO_G(r) ((r)->r14)
#define GO_SP(r) ((r)->sp)
#define GO_STACK_ARGS 8
#elif defined(__TARGET_ARCH_arm64)
/* arm64's pt_regs begins with user_pt_regs (not in the x86 vmlinux.h). */
struct go_arm64_regs {
	__u64 regs[31];
	__u64 sp;
};
#define GO_R(r, n) (((struct go_arm64_regs *)(r))->regs[n])
#define GO_ARG1(r) GO_R(r, 0)
#define GO_ARG2(r) GO_R(r, 1)
#define GO_ARG3(r) GO_R(r, 2)
#define GO_ARG4(r) GO_R(r, 3)
#define GO_ARG5(r) GO_R(r, 4)
#define GO_ARG6(r) GO_R(r, 5)
#define GO_G(r) GO_R(r, 28)
#define GO_SP(r) (((struct go_arm64_regs *)(r))->sp)
#define GO_STACK_ARGS 8
#endif

SEC("uprobe")
int commit_probe(struct pt_regs *ctx)
{
	__u64 ts = bpf_ktime_get_ns();
	__u8 kind = (__u8)bpf_get_attach_cookie(ctx);
	struct commit_event *e;
	__u64 id = bpf_get_current_pid_tgid();
	__u64 a = 0, b = 0, c = 0;

	switch (kind) {
	case COMMIT_REGISTER:
	case COMMIT_TRIGGER:
		a = GO_ARG2(ctx); /* id: the argument after the receiver */
		break;
	case COMMIT_APPLY_ENTRY: {
		__u64 ent = GO_ARG2(ctx); /* e *raftpb.Entry */
		if (bpf_probe_read_user(&a, sizeof(a), (void *)(ent + COMMIT_ENTRY_INDEX)))
			count_lost();
		break;
	}
	case COMMIT_SAVE_ENTER: {
		/* Save(st HardState{Term, Vote, Commit}, ents []Entry): st in
		 * the 2nd..4th registers, ents' pointer and length in the
		 * 5th and 6th. */
		__u64 ents = GO_ARG5(ctx), n = GO_ARG6(ctx);
		c = GO_ARG4(ctx);
		if (n > 0 && n < (1 << 24)) {
			if (bpf_probe_read_user(&a, sizeof(a), (void *)(ents + COMMIT_ENTRY_INDEX)) ||
			    bpf_probe_read_user(&b, sizeof(b), (void *)(ents + (n - 1) * COMMIT_ENTRY_SIZE + COMMIT_ENTRY_INDEX)))
				count_lost();
		}
		break;
	}
	case COMMIT_SEND:
		a = GO_ARG3(ctx); /* Send(msgs []Message): msgs' length */
		break;
	case COMMIT_APP_RESP: {
		/* Process(ctx context.Context, m raftpb.Message): m does not
		 * fit in registers, so the whole of it is on the stack. */
		__u64 m = GO_SP(ctx) + GO_STACK_ARGS;
		__s32 type = -1;
		if (bpf_probe_read_user(&type, sizeof(type), (void *)(m + COMMIT_MSG_TYPE)))
			count_lost();
		if (type != COMMIT_MSG_APP_RESP)
			return 0;
		if (bpf_probe_read_user(&a, sizeof(a), (void *)(m + COMMIT_MSG_FROM)) ||
		    bpf_probe_read_user(&b, sizeof(b), (void *)(m + COMMIT_MSG_INDEX)))
			count_lost();
		break;
	}
	}
	if (kind == COMMIT_SYNC_ENTER) {
		__u32 tid = (__u32)id;
		bpf_map_update_elem(&in_sync, &tid, &ts, BPF_ANY);
	} else if (kind == COMMIT_SYNC_RET) {
		__u32 tid = (__u32)id;
		bpf_map_delete_elem(&in_sync, &tid);
	}
	e = bpf_ringbuf_reserve(&commit_events, sizeof(*e), 0);
	if (!e) {
		count_lost();
		return 0;
	}
	e->ts_ns = ts;
	e->goroutine = GO_G(ctx);
	e->a = a;
	e->b = b;
	e->c = c;
	e->tid = (__u32)id;
	e->kind = kind;
	e->pad[0] = e->pad[1] = e->pad[2] = 0;
	bpf_ringbuf_submit(e, es_wake_flags(&commit_events, commit_wake_bytes, sizeof(*e), true));
	return 0;
}

/* syncing says whether thread tid is inside (*WAL).sync (in_sync, not
 * stale at now); for every other thread on the machine the hash lookup
 * is all the scheduler programs do. */
static __always_inline bool syncing(__u32 tid, __u64 now)
{
	__u64 *since = bpf_map_lookup_elem(&in_sync, &tid);

	return since && now - *since < in_sync_max_ns;
}

static __always_inline void note_sched(__u32 tid, __u64 now, __u8 state)
{
	struct commit_event *e = bpf_ringbuf_reserve(&commit_events, sizeof(*e), 0);

	if (!e) {
		count_lost();
		return;
	}
	__builtin_memset(e, 0, sizeof(*e));
	e->ts_ns = now;
	e->a = state;
	e->tid = tid;
	e->kind = COMMIT_SCHED;
	bpf_ringbuf_submit(e, es_wake_flags(&commit_events, commit_wake_bytes, sizeof(*e), true));
}

/* commit_sched_switch: a thread inside (*WAL).sync switched out (preempted
 * or still TASK_RUNNING: runnable, which is also how a cgroup's CPU
 * throttling shows; else blocked) or in. prev_state is the tracepoint's
 * fourth argument (Linux 5.18+, as bpf/sched.bpf.c). */
SEC("tp_btf/sched_switch")
int commit_sched_switch(unsigned long long *ctx)
{
	bool preempt = (bool)ctx[0];
	struct task_struct *prev = (void *)ctx[1], *next = (void *)ctx[2];
	__u32 ptid = BPF_CORE_READ(prev, pid), ntid = BPF_CORE_READ(next, pid);
	unsigned int prev_state = (unsigned int)ctx[3];
	__u64 now = bpf_ktime_get_ns();

	if (syncing(ptid, now))
		note_sched(ptid, now, preempt || prev_state == 0 ? COMMIT_SCHED_RUNNABLE : COMMIT_SCHED_BLOCKED);
	if (syncing(ntid, now))
		note_sched(ntid, now, COMMIT_SCHED_RUNNING);
	return 0;
}

/* commit_sched_wakeup: a thread inside (*WAL).sync was woken from a
 * sleep. A wake-up of a thread still on its CPU (woken before it slept)
 * changes nothing and is not reported, so that every COMMIT_SCHED
 * RUNNABLE is a wait for a CPU: Go reads no context into them. */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(commit_sched_wakeup, struct task_struct *p)
{
	__u32 tid = BPF_CORE_READ(p, pid);
	__u64 now = bpf_ktime_get_ns();

	if (BPF_CORE_READ(p, on_cpu))
		return 0;
	if (syncing(tid, now))
		note_sched(tid, now, COMMIT_SCHED_RUNNABLE);
	return 0;
}
