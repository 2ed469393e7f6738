/* journal.h: the record of journal.bpf.c (a jbd2 commit, an XFS log
 * force), which jbd2wait.bpf.c also writes for a thread's wait in
 * jbd2_log_wait_commit. Shared with Go by bpf2go -type (tracer/journal.go). */
#ifndef ETCDSCOPE_JOURNAL_H
#define ETCDSCOPE_JOURNAL_H

#include "record.h"

enum es_journal_source {
	ES_JOURNAL_JBD2_COMMIT = 1, /* ext4: jbd2_start_commit .. jbd2_end_commit */
	ES_JOURNAL_XFS_LOG_FORCE = 2, /* xfs_log_force by the fsyncing thread */
	ES_JOURNAL_JBD2_WAIT = 3, /* the thread waited in jbd2_log_wait_commit (jbd2wait.bpf.c) */
};

struct journal_event {
	__u8 kind;   /* ES_KIND_JOURNAL */
	__u8 source; /* enum es_journal_source */
	__u8 _pad[2];
	__u32 dev;      /* filesystem's block device (jbd2 j_fs_dev, xfs m_super->s_dev) */
	__u32 tid;      /* thread that forced the log (xfs) or waited (jbd2 wait); 0 for a commit */
	__u32 txn;      /* jbd2 transaction id (t_tid; for a wait: the one waited for) */
	__u64 start_ns;
	__u64 end_ns;   /* jbd2 end_commit; 0 for an xfs log force */
};

#endif
