/* What every record of the fsync tracer's shared ring buffer (events.h)
 * has in common: its first byte, enum es_kind, says which struct it is,
 * and the sizes of the strings records carry. Each probe's header
 * (fsync.h, block.h, journal.h) declares its records; Go decodes them
 * through the bpf2go types (tracer/<probe>.go). Timestamps are
 * bpf_ktime_get_ns(): CLOCK_MONOTONIC, ns. Devices are the kernel's dev_t
 * encoding (major << 20 | minor). */
#ifndef ETCDSCOPE_RECORD_H
#define ETCDSCOPE_RECORD_H

#define ES_COMM_LEN 16
#define ES_NAME_LEN 48
#define ES_PATH_DEPTH 4

enum es_kind {
	ES_KIND_FSYNC = 1,       /* struct fsync_event (fsync.h): one fsync/fdatasync call */
	ES_KIND_FSYNC_ENTER = 2, /* struct fsync_enter_event (fsync.h): a call started */
	ES_KIND_BLK = 3,         /* struct blk_event (block.h): one request completion */
	ES_KIND_JOURNAL = 4,     /* struct journal_event (journal.h) */
	ES_KIND_FLUSH_BIO = 5,   /* struct flush_bio_event (block.h) */
	ES_KIND_WRITE = 6,       /* struct write_event (write.h): one write(2)-family call */
	ES_KIND_SCHED = 7,       /* struct sched_event (sched.h): a traced thread's scheduler state */
	ES_KIND_DM_BIO = 8,      /* struct dm_bio_event (block.h): a bio on a bio-based disk, queued to completed */
	ES_KIND_BIO_REMAP = 9,   /* struct bio_remap_event (block.h): a stacked driver sent a bio down */
	ES_KIND_KPART = 10,      /* struct kpart_event (fsync.h): a call's partition made in the kernel (kpart.h) */
	ES_KIND_FSYNC_KPART = 11, /* struct fsync_event, kpart_event and its kp_entry array: one call, one record (kpart.h's kpart_one) */
};

#endif
