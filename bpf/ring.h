/* Quiet ring-buffer commits, shared by events.h (the fsync tracer's ring)
 * and hypervisor.bpf.c (its own ring). */
#ifndef ETCDSCOPE_RING_H
#define ETCDSCOPE_RING_H

/* es_wake_flags decides whether committing a size-byte record to ring
 * wakes the reader. A wake-up costs microseconds in the traced task's own
 * syscall (an irq_work, then the reader's thread woken), so records go in
 * quietly and the reader polls every few milliseconds (tracer's
 * pollInterval). Only the record that takes the unread data past
 * wake_bytes wakes it at once, so a burst cannot overflow the ring between
 * polls; the records after that one stay quiet (the reader, once woken,
 * drains all there is before it sleeps again), else a reader that lags
 * would be woken by every record. reserved: the record is already
 * reserved (bpf_ringbuf_reserve counts it as unread data). 8: the header
 * the ring adds to every record. */
static __always_inline __u64 es_wake_flags(void *ring, __u64 wake_bytes, __u64 size, bool reserved)
{
	__u64 avail = bpf_ringbuf_query(ring, BPF_RB_AVAIL_DATA);
	__u64 before = reserved ? avail - size - 8 : avail;

	return before <= wake_bytes && before + size + 8 > wake_bytes ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

#endif
