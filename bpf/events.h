/* The ring buffer and lost-event counter that fsync.bpf.c, block.bpf.c,
 * journal.bpf.c, stacked.bpf.c and jbd2wait.bpf.c share: Go creates them
 * once with the fsync object and hands them to the others as map
 * replacements, so one reader sees every event in reservation order. The
 * records are declared in record.h and each probe's header. */
#ifndef ETCDSCOPE_EVENTS_H
#define ETCDSCOPE_EVENTS_H

#include "ring.h"
#include "record.h"

/* events: records of struct fsync_event, fsync_enter_event, blk_event,
 * flush_bio_event and journal_event; the first byte (enum es_kind) says
 * which. Size is set from Go. */
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

/* wake_bytes: how full (bytes of unread records) events may get before a
 * record wakes the reader (ring.h); set from Go to an eighth of its size. */
const volatile __u64 wake_bytes = 1 << 19;

/* wakeup_flags: es_wake_flags for a size-byte record to events, not yet
 * reserved; wakeup_flags_reserved for one already reserved. */
static __always_inline __u64 wakeup_flags(__u64 size)
{
	return es_wake_flags(&events, wake_bytes, size, false);
}

static __always_inline __u64 wakeup_flags_reserved(__u64 size)
{
	return es_wake_flags(&events, wake_bytes, size, true);
}

static __always_inline void emit(void *data, __u64 size)
{
	if (bpf_ringbuf_output(&events, data, size, wakeup_flags(size)))
		count_lost();
}

#endif
