/* The process filter fsync.bpf.c and write.bpf.c share: the same flags
 * (--pid, --cgroup, --comm) select the same tasks in both. Each object
 * has its own copy of these globals; Go sets both from one FsyncConfig
 * (tracer's filterVariables). */
#ifndef ETCDSCOPE_FILTER_H
#define ETCDSCOPE_FILTER_H

#include "record.h"
#include "compat.h"

/* Filters, set from Go before load; zero/false means "any". */
const volatile __u32 targ_tgid = 0;
const volatile __u64 targ_cgroup_id = 0;
const volatile bool filter_comm = false;
const volatile char targ_comm[ES_COMM_LEN] = {};

static __always_inline bool comm_matches(void)
{
	char comm[ES_COMM_LEN];

	if (!filter_comm)
		return true;
	es_current_comm(comm);
#pragma unroll
	for (int i = 0; i < ES_COMM_LEN; i++) {
		if (comm[i] != targ_comm[i])
			return false;
		if (comm[i] == 0)
			return true;
	}
	return true;
}

/* es_selected says whether the current task is traced; *cgroup_id gets
 * its cgroup v2 id (read anyway for the cgroup filter and the record). */
static __always_inline bool es_selected(__u64 *cgroup_id)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;

	if (targ_tgid && tgid != targ_tgid)
		return false;
	*cgroup_id = bpf_get_current_cgroup_id();
	if (targ_cgroup_id && *cgroup_id != targ_cgroup_id)
		return false;
	return comm_matches();
}

#endif
