/* sched.h: the record of sched.bpf.c (--sched), one scheduler state
 * change of a thread inside a traced call. Shared with Go by bpf2go -type
 * (tracer/sched.go). */
#ifndef ETCDSCOPE_SCHED_H
#define ETCDSCOPE_SCHED_H

#include "record.h"

enum es_sched_state {
	ES_SCHED_RUNNING = 0,  /* switched in */
	ES_SCHED_RUNNABLE = 1, /* woken, or preempted: waiting for a CPU */
	ES_SCHED_BLOCKED = 2,  /* switched out asleep */
};

struct sched_event {
	__u8 kind;  /* ES_KIND_SCHED */
	__u8 state; /* enum es_sched_state, from ns on */
	__u8 _pad[2];
	__u32 tid;
	__u64 ns;
};

#endif
