/* write.h: the record of write.bpf.c, one write(2)-family call on a file
 * the fsync tracer follows, with the time it spent throttled and waiting
 * for pages under writeback. Shared with Go by bpf2go -type
 * (tracer/write.go). */
#ifndef ETCDSCOPE_WRITE_H
#define ETCDSCOPE_WRITE_H

#include "record.h"

struct write_event {
	__u8 kind;        /* ES_KIND_WRITE */
	__u8 syscall;     /* enum es_syscall (fsync.h): ES_SYS_WRITE .. ES_SYS_PWRITEV2 */
	__u8 is_blockdev; /* fd is a block device node: dev is its i_rdev */
	__u8 _pad;
	__s32 fd;
	__u32 pid; /* tgid */
	__u32 tid;
	__u32 dev;             /* i_sb->s_dev (or i_rdev for a block device node) */
	__u32 throttles;       /* balance_dirty_pages sleeps (pause > 0) */
	__u32 writeback_waits; /* folio_wait_writeback waits */
	__u32 _pad2;
	__u64 ino;
	__u64 cgroup_id;
	__u64 start_ns;
	__u64 end_ns;
	__s64 ret;               /* bytes written or -errno */
	__u64 throttled_ns;      /* from each sleeping balance_dirty_pages to the task's next mark */
	__u64 writeback_wait_ns; /* from each folio_wait_writeback to the task's next mark */
	char comm[ES_COMM_LEN];
	char fstype[ES_COMM_LEN];
	char names[ES_PATH_DEPTH][ES_NAME_LEN];
};

#endif
