//go:build ignore

/* sched.bpf.c (--sched): the scheduler state changes of a thread while it
 * is inside a traced call (inflight.h), so that userspace can split the
 * call's "other" time into waiting for a CPU (runnable), running, and
 * blocked on something that is not the I/O the layers follow. tp_btf, the
 * cheapest hook: these run at every context switch and wake-up of every
 * task on the machine, and for all but the traced threads inside a call
 * they cost one task-storage lookup per task (two per switch). That tax
 * on unrelated tasks is why --sched is a flag (bench/findings.md). */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include "sched.h"
#include "events.h"
#include "inflight.h"

char LICENSE[] SEC("license") = "GPL";

/* Keep the types in the object for bpf2go -type. */
const struct sched_event *unused_sched_event __attribute__((unused));
const enum es_sched_state *unused_es_sched_state __attribute__((unused));

/* in_call says whether t is inside a traced call: for every other task,
 * the lookup is all these programs do (no clock read). */
static __always_inline bool in_call(struct task_struct *t)
{
	struct call *c = es_call_of(t);

	return c && c->start_ns;
}

static __always_inline void note(struct task_struct *t, __u64 now, __u8 state)
{
	struct sched_event e = {};

	e.kind = ES_KIND_SCHED;
	e.state = state;
	e.tid = ((struct task_struct___es *)t)->pid;
	e.ns = now;
	emit(&e, sizeof(e));
}

/* prev_state_arg: this kernel's sched_switch passes prev_state as its
 * fourth argument (Linux 5.18+); Go reads it from the tracepoint's
 * prototype in the kernel's BTF (tracer/compat.go). Before, the state is
 * read from the task: __state, or state before 5.14 (a CO-RE flavour). */
const volatile bool prev_state_arg = true;

SEC("tp_btf/sched_switch")
int sched_switch(unsigned long long *ctx)
{
	bool preempt = (bool)ctx[0];
	struct task_struct *prev = (void *)ctx[1], *next = (void *)ctx[2];
	bool p = in_call(prev), n = in_call(next);
	unsigned int prev_state;
	__u64 now;

	if (!p && !n)
		return 0;
	now = bpf_ktime_get_ns();
	if (prev_state_arg)
		prev_state = (unsigned int)ctx[3];
	else if (bpf_core_field_exists(struct task_struct___es, state))
		prev_state = (unsigned int)((struct task_struct___es *)prev)->state;
	else
		prev_state = ((struct task_struct___es *)prev)->__state;
	/* Preempted, or switched out still TASK_RUNNING (woken before it
	 * slept, a yield): it waits for a CPU; otherwise it sleeps. */
	if (p)
		note(prev, now, preempt || prev_state == 0 ? ES_SCHED_RUNNABLE : ES_SCHED_BLOCKED);
	if (n)
		note(next, now, ES_SCHED_RUNNING);
	return 0;
}

/* A wake-up of a thread still on its CPU (woken before it slept)
 * changes nothing and is not reported, so that every ES_SCHED_RUNNABLE
 * is a wait for a CPU, whether after a wake-up or a preemption: Go
 * (analysis/sched.go) then needs no context to tell them apart. */
SEC("tp_btf/sched_wakeup")
int BPF_PROG(sched_wakeup, struct task_struct *p)
{
	if (bpf_core_field_exists(struct task_struct___es, on_cpu) &&
	    ((struct task_struct___es *)p)->on_cpu)
		return 0;
	if (in_call(p))
		note(p, bpf_ktime_get_ns(), ES_SCHED_RUNNABLE);
	return 0;
}
