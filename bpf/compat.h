/* compat.h: what older kernels lack, chosen at load time. Go probes the
 * running kernel (tracer/compat.go: a helper probe, the kernel's BTF) and
 * sets these read-only constants before load; the verifier then drops the
 * branch not taken, helper calls and all, so one object loads on every
 * kernel. Nothing here compares kernel versions. */
#ifndef ETCDSCOPE_COMPAT_H
#define ETCDSCOPE_COMPAT_H

/* es_task_btf: tracing programs may call bpf_get_current_task_btf and
 * bpf_task_storage_get (Linux 5.12+). Go clears it where the kernel
 * refuses them: the current task is then read through probe reads and
 * inflight.h's map is an LRU hash keyed by thread id. */
const volatile bool es_task_btf = true;

#endif
