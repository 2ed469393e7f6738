/* Event struct shared by bpf/hypervisor.bpf.c and Go (bpf2go -type
 * hv_event). One record per I/O system call (or io_uring request) that the
 * hypervisor process made on a file: the read/write calls of aio=threads,
 * io_submit of aio=native, io_uring_enter and the io_uring requests of
 * aio=io_uring. The fdatasync/fsync calls themselves come from the fsync
 * tracer (bpf/fsync.bpf.c), which also attributes their host layers.
 * Timestamps are bpf_ktime_get_ns(): CLOCK_MONOTONIC, ns. */
#ifndef ETCDSCOPE_HYPERVISOR_H
#define ETCDSCOPE_HYPERVISOR_H

#define HV_COMM_LEN 16
#define HV_NAME_LEN 48
#define HV_PATH_DEPTH 4

enum hv_op {
	HV_OP_PREAD64 = 1,
	HV_OP_PWRITE64 = 2,
	HV_OP_PREADV = 3,
	HV_OP_PWRITEV = 4,
	HV_OP_PREADV2 = 5,
	HV_OP_PWRITEV2 = 6,
	HV_OP_IO_SUBMIT = 7,      /* nr iocbs; fd/opcode of the first iocb */
	HV_OP_IO_URING_ENTER = 8, /* fd is the ring's fd */
	HV_OP_IO_URING_REQ = 9,   /* one request, submit_req .. complete */
};

/* f_flags bits we report, normalised (O_DIRECT's value differs by arch). */
enum hv_file_flag {
	HV_F_DIRECT = 1 << 0,
	HV_F_DSYNC = 1 << 1,
	HV_F_SYNC = 1 << 2,
};

struct hv_event {
	__u8 op;          /* enum hv_op */
	__u8 is_blockdev; /* the file is a block device node: dev is i_rdev */
	__u8 file_flags;  /* enum hv_file_flag, read from f_flags at entry */
	__u8 opcode;      /* io_submit: aio_lio_opcode of iocb 0; io_uring: IORING_OP_* */
	__s32 fd;         /* the file (io_uring_enter: the ring) */
	__u32 pid;        /* tgid */
	__u32 tid;
	__u32 dev;        /* i_sb->s_dev, or i_rdev for a block device node */
	__u32 nr;         /* io_submit: iocbs passed; io_uring_enter: to_submit */
	__u64 ino;
	__u64 start_ns;
	__u64 end_ns;
	__s64 ret;        /* bytes, count or -errno (io_uring: cqe res) */
	char comm[HV_COMM_LEN];
	char fstype[HV_COMM_LEN];
	char names[HV_PATH_DEPTH][HV_NAME_LEN]; /* d_name of file, parent, ... */
};

#endif
