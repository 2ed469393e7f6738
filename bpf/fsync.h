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

/* enum kpart_reason: why a call's slot (struct kpart_event) holds no
 * entries to partition it from; KPART_OK: its entries are complete. */
enum kpart_reason {
	KPART_OK = 0,
	KPART_NO_DISK = 1,  /* its filesystem names no disk (busy_any) */
	KPART_STACKED = 2,  /* its disk is bio-based (device-mapper) or a loop device: requests beneath */
	KPART_NO_SLOT = 3,  /* every kp_calls slot held by a call in flight */
	KPART_OVERFLOW = 4, /* more than KP_ENTRIES requests, flush bios and commits */
	KPART_LOST = 5,     /* its slot was freed before its exit (kp_free) */
};

/* struct kpart_event: what a traced call's kernel slot held (kpart.h):
 * its entries (struct kp_entry, events.h) follow it in the same record,
 * which userspace sweeps into the layer partition of analysis/doc.go;
 * emitted after its fsync_event,
 * or, with kpart_one, after it in one record (ES_KIND_FSYNC_KPART). */
struct kpart_event {
	__u8 kind;   /* ES_KIND_KPART */
	__u8 reason; /* enum kpart_reason */
	__u8 _pad[2];
	__u32 tid;
	__u64 start_ns;
	__u64 end_ns;
	__u32 entries; /* entries the call's slot held (KP_ENTRIES at most) */
	__u32 dropped; /* entries past KP_ENTRIES (KPART_OVERFLOW) */
};

#endif
