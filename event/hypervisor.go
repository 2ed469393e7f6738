package event

import "strconv"

// HVOp is the system call (or io_uring request) of a HypervisorIO event.
type HVOp uint8

// Hypervisor I/O operations: enum hv_op of bpf/hypervisor.h (pinned by
// tracer's TestEnumsMatchC).
const (
	HVPread64      HVOp = 1
	HVPwrite64     HVOp = 2
	HVPreadv       HVOp = 3
	HVPwritev      HVOp = 4
	HVPreadv2      HVOp = 5
	HVPwritev2     HVOp = 6
	HVIOSubmit     HVOp = 7 // aio=native: Nr iocbs; FD/Opcode of the first
	HVIOUringEnter HVOp = 8 // aio=io_uring: FD is the ring
	HVIOUringReq   HVOp = 9 // one io_uring request, submit to completion
)

// String returns the system call's name ("pwritev", "io_submit",
// "io_uring_enter"), "io_uring_req", or "op<N>" for an unknown value.
func (o HVOp) String() string {
	switch o {
	case HVPread64:
		return "pread64"
	case HVPwrite64:
		return "pwrite64"
	case HVPreadv:
		return "preadv"
	case HVPwritev:
		return "pwritev"
	case HVPreadv2:
		return "preadv2"
	case HVPwritev2:
		return "pwritev2"
	case HVIOSubmit:
		return "io_submit"
	case HVIOUringEnter:
		return "io_uring_enter"
	case HVIOUringReq:
		return "io_uring_req"
	}
	return "op" + strconv.Itoa(int(o))
}

// HVFileFlags are the open flags of a HypervisorIO's file that decide
// whether its writes reach the disk on their own: enum hv_file_flag of
// bpf/hypervisor.h, read from f_flags at entry.
type HVFileFlags uint8

// File flags (pinned by tracer's TestEnumsMatchC).
const (
	HVODirect HVFileFlags = 1 << 0 // O_DIRECT: QEMU's cache=none/directsync
	HVODsync  HVFileFlags = 1 << 1 // O_DSYNC
	HVOSync   HVFileFlags = 1 << 2 // O_SYNC
)

// HypervisorIO is one I/O call of the hypervisor process on a file, entry
// to exit (for HVIOUringReq: io_uring_submit_req to io_uring_complete):
// struct hv_event of bpf/hypervisor.h, decoded by tracer.HypervisorTracer.
type HypervisorIO struct {
	Op         HVOp
	PID, TID   uint32
	Comm       string
	FD         int32    // the file (io_uring_enter: the ring's fd)
	Dev        Dev      // the file's filesystem (s_dev), or the device if IsBlockdev
	IsBlockdev bool     // the file is a block device node
	Ino        uint64   // inode number
	FSType     string   // i_sb->s_type->name, e.g. "ext4"
	Names      []string // d_name of the file, its parent, ... (innermost first); the tracer shares one slice between events of a file: read only
	// ODirect, ODsync, OSync: the file was opened with O_DIRECT (QEMU's
	// cache=none/directsync), O_DSYNC, O_SYNC (read from f_flags at entry).
	ODirect, ODsync, OSync bool
	Opcode                 uint8  // io_submit: aio_lio_opcode of iocb 0 (IOCB_CMD_*); io_uring: IORING_OP_*
	Nr                     uint32 // io_submit: iocbs passed; io_uring_enter: to_submit
	StartNs, EndNs         uint64 // CLOCK_MONOTONIC ns
	Ret                    int64  // bytes, count, or -errno (io_uring: the cqe's res)
}
