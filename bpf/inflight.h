/* The call each traced thread is in: fsync.bpf.c's fsync/fdatasync and
 * write.bpf.c's write(2) family share one task-storage map (a thread is in
 * at most one syscall), so sched.bpf.c (--sched) needs one lookup to know
 * whether a task switching or waking is inside a traced call. Go creates
 * the map with the fsync object and hands it to the others as a map
 * replacement. */
#ifndef ETCDSCOPE_INFLIGHT_H
#define ETCDSCOPE_INFLIGHT_H

#include "compat.h"

/* struct call: what an enter program keeps for its exit program. The
 * record itself is built at exit, straight in the ring buffer. */
struct call {
	__u64 start_ns; /* 0 when no call is in flight */
	__u64 cgroup_id;
	__u64 file; /* the fd's struct file at entry; checked again at exit */
	__s32 fd;
	__u8 syscall; /* enum es_syscall: which exit program owns the call */
	__u8 wait;    /* write.bpf.c: the open wait, enum wait_kind */
	__u8 from_sys; /* call.h: started on the syscall tracepoint, counted in sys_calls */
	__u8 kp_slot;  /* kpart.h: its kp_calls slot + 1, or KP_UNTRACKED | enum kpart_reason */
	__u32 disk;      /* fsync.bpf.c: the disk marked busy (events.h), 0: busy_any */
	__u32 throttles; /* write.bpf.c, from here on */
	__u64 throttled_ns;
	__u64 writeback_wait_ns;
	__u64 mark_ns; /* start of the open wait */
	__u32 writeback_waits;
	__u32 _pad2;
};

/* inflight: each traced thread's call between enter and exit. Task
 * storage, not a hash keyed by tid: ~130 ns less per call here, no size
 * limit, freed with the task, and a lookup on a task without storage (the
 * writeback and scheduler tracepoints run for every task) is a pointer
 * read. Kernels without task storage for tracing programs get the hash
 * (es_call). */
struct {
	__uint(type, BPF_MAP_TYPE_TASK_STORAGE);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, int);
	__type(value, struct call);
} inflight SEC(".maps");

/* es_call returns the current thread's slot in inflight, creating it when
 * create; NULL when it has none or it could not be made. Without task
 * storage (compat.h's es_task_btf clear, before Linux 5.12) Go makes
 * inflight an LRU hash keyed by thread id: a thread's slot outlives it
 * until the LRU evicts it. */
static __always_inline struct call *es_call(bool create)
{
	struct call *c, zero = {};
	__u32 tid;

	if (es_task_btf)
		return bpf_task_storage_get(&inflight, bpf_get_current_task_btf(), 0,
					    create ? BPF_LOCAL_STORAGE_GET_F_CREATE : 0);
	tid = (__u32)bpf_get_current_pid_tgid();
	c = bpf_map_lookup_elem(&inflight, &tid);
	if (!c && create) {
		bpf_map_update_elem(&inflight, &tid, &zero, BPF_NOEXIST);
		c = bpf_map_lookup_elem(&inflight, &tid);
	}
	return c;
}

/* task_struct___es: the task fields read through a tp_btf argument, as a
 * CO-RE flavour of task_struct. Why not the kernel's struct: an object
 * that reads it carries all of it, and clang 19 emits the forward
 * declarations of its pointer members in heap-address order, so
 * sched.bpf.c's object changed with the length of the checkout's path
 * (make check-generate failed on a clean clone in CI). */
struct task_struct___es {
	int pid;
	unsigned int __state;
	long state; /* before Linux 5.14 */
	int on_cpu; /* CONFIG_SMP: still running on a CPU */
} __attribute__((preserve_access_index));

/* es_call_of returns task t's slot in inflight (a tp_btf argument), or
 * NULL. */
static __always_inline struct call *es_call_of(struct task_struct *t)
{
	__u32 tid;

	if (es_task_btf)
		return bpf_task_storage_get(&inflight, t, 0, 0);
	tid = ((struct task_struct___es *)t)->pid;
	return bpf_map_lookup_elem(&inflight, &tid);
}

#endif
