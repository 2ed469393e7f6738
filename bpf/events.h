/* The ring buffer and lost-event counter that fsync.bpf.c, block.bpf.c and
 * journal.bpf.c share: Go creates them once with the fsync object and hands
 * them to the others as map replacements, so one reader sees every event
 * in reservation order. */
#ifndef ETCDSCOPE_EVENTS_H
#define ETCDSCOPE_EVENTS_H

/* events: records of struct fsync_event, fsync_enter_event, blk_event and
 * journal_event; the first byte says which. Size is set from Go. */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 22);
} events SEC(".maps");

/* lost_events: per-CPU count of records that did not fit in events. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} lost_events SEC(".maps");

static __always_inline void count_lost(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&lost_events, &zero);
	if (n)
		*n += 1;
}

/* wakeup_flags decides whether committing a record wakes the reader. A
 * wakeup per record costs microseconds in the traced task's own syscall
 * (an irq_work and a reader wake-up per event), so records go in quietly
 * and the reader polls every few milliseconds; only a ring filling past an
 * eighth wakes it at once, so a burst cannot overflow between polls. */
static __always_inline __u64 wakeup_flags(void)
{
	__u64 avail = bpf_ringbuf_query(&events, BPF_RB_AVAIL_DATA);
	__u64 size = bpf_ringbuf_query(&events, BPF_RB_RING_SIZE);

	return avail > size / 8 ? BPF_RB_FORCE_WAKEUP : BPF_RB_NO_WAKEUP;
}

static __always_inline void emit(void *data, __u64 size)
{
	if (bpf_ringbuf_output(&events, data, size, wakeup_flags()))
		count_lost();
}

#endif
