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

/* bpf_rdonly_cast, a kfunc (Linux 6.2+, open to every program type from
 * the start), makes an address a read-only BTF pointer: plain loads of
 * its fields, fault-safe as a probe read is (a fault reads 0), instead
 * of a probe-read helper call per field. Weak: on a kernel without it
 * the loader sets its address to 0 and the verifier drops every branch
 * taken under `if (bpf_rdonly_cast)`, which callers test first. es_cast
 * casts p to a pointer to the kernel's struct type t. */
extern void *bpf_rdonly_cast(const void *obj__ign, __u32 btf_id) __ksym __weak;
#define es_cast(p, t) ((t *)bpf_rdonly_cast((p), bpf_core_type_id_kernel(t)))

/* es_current_comm copies the current task's comm (16 bytes) to dst: two
 * plain loads from the task where es_task_btf, instead of the helper,
 * which copies it too but stops at the NUL and zero-pads the rest. Every
 * reader of a comm stops at its NUL (Go's cbytes, filter.h's
 * comm_matches): the bytes after it, which only these loads copy, are
 * never read. */
static __always_inline void es_current_comm(char *dst)
{
	if (es_task_btf)
		__builtin_memcpy(dst, bpf_get_current_task_btf()->comm, 16);
	else
		bpf_get_current_comm(dst, 16);
}

#endif
