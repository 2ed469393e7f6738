/* fsync.h: the records of fsync.bpf.c (one fsync(2)/fdatasync(2) call,
 * and its start), which stacked.bpf.c also writes for the vfs_fsync of a
 * kernel thread. Shared with Go by bpf2go -type (tracer/fsync.go). */
#ifndef ETCDSCOPE_FSYNC_H
#define ETCDSCOPE_FSYNC_H

#include "record.h"

enum es_syscall {
	ES_SYS_FSYNC = 0,
	ES_SYS_FDATASYNC = 1,
	ES_SYS_KTHREAD = 2, /* vfs_fsync in a kernel thread (loop worker): stacked.bpf.c */
	/* The write(2) family (write.bpf.c's struct write_event). */
	ES_SYS_WRITE = 3,
	ES_SYS_PWRITE64 = 4,
	ES_SYS_WRITEV = 5,
	ES_SYS_PWRITEV = 6,
	ES_SYS_PWRITEV2 = 7,
};

struct fsync_enter_event {
	__u8 kind; /* ES_KIND_FSYNC_ENTER */
	__u8 _pad[3];
	__u32 tid;
	__u64 start_ns;
};

struct fsync_event {
	__u8 kind;        /* ES_KIND_FSYNC */
	__u8 syscall;     /* enum es_syscall */
	__u8 is_blockdev; /* fd is a block device node: dev is its i_rdev */
	__u8 _pad;
	__s32 fd;
	__u32 pid; /* tgid */
	__u32 tid;
	__u32 dev; /* i_sb->s_dev (or i_rdev for a block device node) */
	__u32 _pad2;
	__u64 ino;
	__u64 cgroup_id;
	__u64 start_ns;
	__u64 end_ns;
	__s64 ret;
	char comm[ES_COMM_LEN];
	char fstype[ES_COMM_LEN];             /* i_sb->s_type->name */
	char names[ES_PATH_DEPTH][ES_NAME_LEN]; /* d_name of file, parent, ... */
};

#endif
