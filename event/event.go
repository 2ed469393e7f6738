// Package event holds every decoded kernel event: what package tracer
// decodes from the ring buffers and package analysis consumes. The fsync
// tracer's kinds (Fsync, KernelFsync, FsyncEnter, Block, FlushBio, DMBio,
// BioRemap, Journal, held together in Any), the peers tracer's Peer and the hypervisor
// tracer's HypervisorIO, plus what a tracer reports about itself (Probe,
// ProgramStats). It is the only thing the two share, so analysis can be
// tested on synthetic events without root. Every type here has a fixed
// layout; a tracer decodes into a caller's value without allocating.
//
// Constants that mirror a C enum of bpf/*.h (Kind's counterpart es_kind,
// Op, ReqFlags, JournalSource, Syscall, HVOp, HVFileFlags, PeerKind) are
// pinned to it by package tracer's TestEnumsMatchC.
//
// Timestamps are CLOCK_MONOTONIC nanoseconds (bpf_ktime_get_ns). Devices
// are Dev values: the kernel's internal dev_t (major<<20 | minor), which is
// what BPF reads from struct block_device and struct super_block.
package event

import (
	"strconv"
	"strings"
)

// Dev is a kernel-internal dev_t: major in the top 12 bits, minor in the
// low 20 (include/linux/kdev_t.h MKDEV). It is not the userspace encoding
// that stat(2) returns; use DevFromUnix for that.
type Dev uint32

// Major returns the major device number.
func (d Dev) Major() uint32 { return uint32(d) >> 20 }

// Minor returns the minor device number.
func (d Dev) Minor() uint32 { return uint32(d) & (1<<20 - 1) }

// String formats d as "major:minor", the form of /proc/self/mountinfo and
// lsblk.
func (d Dev) String() string {
	var b [24]byte
	return string(d.Append(b[:0]))
}

// Append appends d as "major:minor" (String without allocating).
func (d Dev) Append(dst []byte) []byte {
	dst = strconv.AppendUint(dst, uint64(d.Major()), 10)
	dst = append(dst, ':')
	return strconv.AppendUint(dst, uint64(d.Minor()), 10)
}

// MkDev builds a Dev from major and minor numbers.
func MkDev(major, minor uint32) Dev { return Dev(major<<20 | minor&(1<<20-1)) }

// DevFromUnix converts a userspace dev_t (stat's st_dev/st_rdev, glibc
// encoding) to a Dev.
func DevFromUnix(d uint64) Dev {
	major := uint32((d>>8)&0xfff) | uint32((d>>32)&^0xfff)
	minor := uint32(d&0xff) | uint32((d>>12)&^0xff)
	return MkDev(major, minor)
}

// Syscall names the system call of an Fsync event.
type Syscall uint8

// The traced system calls, and the in-kernel fsync of a kernel thread.
const (
	SysFsync     Syscall = 0
	SysFdatasync Syscall = 1
	// SysKthread is vfs_fsync made by a kernel thread, not a syscall: the
	// loop driver syncing a backing file for a flush (seen through the
	// filesystem's sync_file tracepoints).
	SysKthread Syscall = 2
	// The write(2) family of a Write event.
	SysWrite    Syscall = 3
	SysPwrite64 Syscall = 4
	SysWritev   Syscall = 5
	SysPwritev  Syscall = 6
	SysPwritev2 Syscall = 7
)

// String returns the call's name: "fsync", "fdatasync", "vfs_fsync"
// (kernel thread), "write", "pwrite64", "writev", "pwritev", "pwritev2".
func (s Syscall) String() string {
	switch s {
	case SysFdatasync:
		return "fdatasync"
	case SysKthread:
		return "vfs_fsync"
	case SysWrite:
		return "write"
	case SysPwrite64:
		return "pwrite64"
	case SysWritev:
		return "writev"
	case SysPwritev:
		return "pwritev"
	case SysPwritev2:
		return "pwritev2"
	}
	return "fsync"
}

// Fsync is one fsync(2) or fdatasync(2) call, entry to exit.
type Fsync struct {
	Syscall    Syscall
	PID, TID   uint32
	Comm       string
	FD         int32
	Dev        Dev      // the file's filesystem (s_dev), or the device itself if IsBlockdev
	IsBlockdev bool     // fd was a block device node
	Ino        uint64   // inode number
	FSType     string   // i_sb->s_type->name, e.g. "ext4"
	Names      []string // d_name of the file, its parent, ... (up to 4, innermost first); tracer shares one slice between events of a file: read only
	CgroupID   uint64
	StartNs    uint64
	EndNs      uint64
	Ret        int64 // syscall return value (0 or -errno)
}

// KernelFsync is an fsync made inside the kernel by a kernel thread
// (Syscall SysKthread): the loop driver's vfs_fsync of its backing file for
// a flush, i.e. the host level under a stacked device. It is a distinct
// type so that consumers dispatching on event.Fsync see only syscalls.
type KernelFsync struct{ Fsync }

// Write is one write(2)-family call (Syscall SysWrite..SysPwritev2) on a
// file the fsync tracer follows (one the process has fsynced), entry to
// exit, with the part of it the kernel spent in two waits (bpf/write.bpf.c
// says how each is bracketed). Call.Ret is the bytes written or -errno.
type Write struct {
	Call Fsync // the call and its file, as for an fsync
	// ThrottledNs: asleep in balance_dirty_pages (dirty-page throttling),
	// in Throttles sleeps.
	ThrottledNs uint64
	Throttles   uint32
	// WritebackWaitNs: waiting for a page under writeback
	// (folio_wait_writeback), in WritebackWaits waits.
	WritebackWaitNs uint64
	WritebackWaits  uint32
}

// SchedState is a thread's scheduler state (bpf/sched.h enum
// es_sched_state).
type SchedState uint8

// Scheduler states of a Sched event.
const (
	SchedRunning  SchedState = 0 // switched in
	SchedRunnable SchedState = 1 // woken or preempted: waiting for a CPU
	SchedBlocked  SchedState = 2 // switched out asleep
)

// Sched says that thread TID, inside a traced call, entered State at Ns
// (sched_switch or sched_wakeup; fsync --sched).
type Sched struct {
	TID   uint32
	State SchedState
	Ns    uint64
}

// FsyncEnter says that thread TID entered fsync/fdatasync at StartNs; it
// lets the consumer keep the block events that call may wait on.
type FsyncEnter struct {
	TID     uint32
	StartNs uint64
}

// Op is a block request operation (enum req_op, normalised in BPF).
type Op uint8

// Block operations.
const (
	OpOther       Op = 0
	OpRead        Op = 1
	OpWrite       Op = 2
	OpFlush       Op = 3
	OpDiscard     Op = 4
	OpSecureErase Op = 5
	OpWriteZeroes Op = 6
)

// String returns the kernel's name without the REQ_OP_ prefix.
func (o Op) String() string {
	switch o {
	case OpRead:
		return "READ"
	case OpWrite:
		return "WRITE"
	case OpFlush:
		return "FLUSH"
	case OpDiscard:
		return "DISCARD"
	case OpSecureErase:
		return "SECURE_ERASE"
	case OpWriteZeroes:
		return "WRITE_ZEROES"
	}
	return "OTHER"
}

// ReqFlags are block request flags (enum req_flag_bits), normalised in BPF
// through CO-RE so their bit positions here never change.
type ReqFlags uint32

// Request flags, named as REQ_* in include/linux/blk_types.h.
const (
	ReqSync       ReqFlags = 1 << 0
	ReqMeta       ReqFlags = 1 << 1
	ReqPrio       ReqFlags = 1 << 2
	ReqNoMerge    ReqFlags = 1 << 3
	ReqIdle       ReqFlags = 1 << 4
	ReqFUA        ReqFlags = 1 << 5
	ReqPreflush   ReqFlags = 1 << 6
	ReqRahead     ReqFlags = 1 << 7
	ReqBackground ReqFlags = 1 << 8
	ReqNoWait     ReqFlags = 1 << 9
)

var flagNames = []struct {
	f    ReqFlags
	name string
}{
	{ReqPreflush, "PREFLUSH"}, {ReqFUA, "FUA"}, {ReqSync, "SYNC"}, {ReqMeta, "META"},
	{ReqPrio, "PRIO"}, {ReqNoMerge, "NOMERGE"}, {ReqIdle, "IDLE"}, {ReqRahead, "RAHEAD"},
	{ReqBackground, "BACKGROUND"}, {ReqNoWait, "NOWAIT"},
}

// Names returns the set flags as REQ_ names without the prefix.
func (f ReqFlags) Names() []string {
	var out []string
	for _, n := range flagNames {
		if f&n.f != 0 {
			out = append(out, n.name)
		}
	}
	return out
}

// Rwbs renders op and flags the way blktrace and the block tracepoints do
// (blk_fill_rwbs in kernel/trace/blktrace.c): F for REQ_PREFLUSH, then the
// op (W, R, D, DE, F for REQ_OP_FLUSH, N for anything else), F for REQ_FUA,
// A (readahead), S (sync), M (meta). A flush request renders as "F", a
// journal commit block written with preflush and FUA as "FWFSM".
func Rwbs(op Op, f ReqFlags) string {
	var b strings.Builder
	if f&ReqPreflush != 0 {
		b.WriteByte('F')
	}
	switch op {
	case OpWrite:
		b.WriteByte('W')
	case OpDiscard:
		b.WriteByte('D')
	case OpSecureErase:
		b.WriteString("DE")
	case OpFlush:
		b.WriteByte('F')
	case OpRead:
		b.WriteByte('R')
	default:
		b.WriteByte('N')
	}
	if f&ReqFUA != 0 {
		b.WriteByte('F')
	}
	if f&ReqRahead != 0 {
		b.WriteByte('A')
	}
	if f&ReqSync != 0 {
		b.WriteByte('S')
	}
	if f&ReqMeta != 0 {
		b.WriteByte('M')
	}
	return b.String()
}

// Block is one completion of a block request (a request completed in parts
// produces several, the last with Final set).
type Block struct {
	Rq         uint64 // struct request address; pairs insert/issue/complete
	Dev        Dev    // the disk (gendisk), as the block tracepoints report it
	Op         Op
	Flags      ReqFlags
	CmdFlags   uint32 // raw rq->cmd_flags of this kernel, for debugging
	Sector     uint64 // meaningless for flushes
	Bytes      uint32 // bytes this completion covered
	Error      int32  // blk_status_t
	Final      bool
	InsertNs   uint64 // 0: issued without insertion
	IssueNs    uint64 // 0: never issued (should not happen)
	CompleteNs uint64
	PID, TID   uint32 // task that inserted or issued it
	Comm       string
}

// IsFlush reports whether the request makes the device persist its cache:
// REQ_OP_FLUSH, or a write with REQ_PREFLUSH or REQ_FUA.
func (b *Block) IsFlush() bool {
	return b.Op == OpFlush || b.Flags&(ReqPreflush|ReqFUA) != 0
}

// StartNs is when the request entered the block layer's view: insert if it
// was inserted, otherwise issue.
func (b *Block) StartNs() uint64 {
	if b.InsertNs != 0 {
		return b.InsertNs
	}
	return b.IssueNs
}

// JournalSource says which filesystem mechanism a Journal event records.
type JournalSource uint8

// Journal sources.
const (
	JournalJBD2Commit  JournalSource = 1 // ext4: jbd2_start_commit .. jbd2_end_commit
	JournalXFSLogForce JournalSource = 2 // xfs_log_force by thread TID (no end)
	// JournalJBD2Wait: thread TID waited in jbd2_log_wait_commit for
	// transaction Txn (optional fentry/kprobe probe).
	JournalJBD2Wait JournalSource = 3
)

// String names the source.
func (s JournalSource) String() string {
	switch s {
	case JournalJBD2Commit:
		return "jbd2_commit"
	case JournalXFSLogForce:
		return "xfs_log_force"
	case JournalJBD2Wait:
		return "jbd2_wait"
	}
	return "unknown"
}

// Journal is one journal commit (jbd2) or log force (XFS).
type Journal struct {
	Source  JournalSource
	Dev     Dev    // the filesystem's block device
	TID     uint32 // XFS: thread that forced the log
	Txn     uint32 // jbd2 transaction id
	StartNs uint64
	EndNs   uint64 // 0 for an XFS log force
}

// FlushBio is a bio asking for a cache flush (REQ_OP_FLUSH or
// REQ_PREFLUSH) getting its request at QueueNs (tracepoint block_getrq:
// after writeback throttling and the wait for a tag, which are therefore
// not in the block queue layer). The flush request
// that answers it is issued later by the flush state machine from kblockd
// without an insert event; this marks when the flush was asked for.
type FlushBio struct {
	Dev      Dev // disk
	Op       Op
	Flags    ReqFlags
	PID, TID uint32 // submitter
	QueueNs  uint64
}

// DMBio is a write or flush bio on a bio-based disk (device-mapper: a
// disk that makes no requests of its own but sends each bio on to the
// disks beneath it), from its queueing on that disk to its completion
// there (tracepoints block_bio_queue and block_bio_complete).
type DMBio struct {
	Bio        uint64 // struct bio address: pairs the two events
	Dev        Dev    // the bio-based disk
	Op         Op
	Flags      ReqFlags
	Bytes      uint32 // bi_size when queued; 0 for an empty flush
	Error      int32  // blk_status_t at completion
	PID, TID   uint32 // task that queued it
	Comm       string
	QueueNs    uint64
	CompleteNs uint64
}

// IsFlush reports whether the bio persists the disk's cache, like
// Block.IsFlush.
func (b *DMBio) IsFlush() bool {
	return b.Op == OpFlush || b.Flags&(ReqPreflush|ReqFUA) != 0
}

// BioRemap is a stacked driver (device-mapper) sending a bio of disk Dev
// on to disk Target at RemapNs (tracepoint block_bio_remap): for
// dm-delay, when its hold ends. The bio sent is a clone, not the DMBio it
// serves: analysis pairs them by disk and time.
type BioRemap struct {
	Dev     Dev // the bio-based disk
	Target  Dev // the whole disk beneath it
	Op      Op
	Flags   ReqFlags
	TID     uint32 // task that sent it down
	Sector  uint64 // on Target
	RemapNs uint64
}

// Kind says which field of an Any holds its event.
type Kind uint8

// Event kinds.
const (
	KindNone Kind = iota
	KindFsync
	KindKernelFsync // in Any.Fsync, Syscall SysKthread
	KindFsyncEnter
	KindBlock
	KindJournal
	KindFlushBio
	KindWrite
	KindSched
	KindDMBio
	KindBioRemap
	KindKPart // a call's partition assembled in the kernel (FsyncConfig.KernelPartition)
	// KindFsyncKPart: a call and what its slot held, one record (in
	// Any.Fsync and Any.KPart; FsyncConfig.KernelPartitionOnly)
	KindFsyncKPart
)

// Any holds one event of the fsync tracer, of any kind, by value: the
// value tracer.FsyncTracer.Read decodes into, reused from event to event
// (receiving each in an interface would cost an allocation per event).
// Only the field Kind names is meaningful; the others keep older events.
type Any struct {
	Kind     Kind
	Fsync    Fsync // KindFsync and KindKernelFsync
	Enter    FsyncEnter
	Block    Block
	Journal  Journal
	FlushBio FlushBio
	Write    Write
	Sched    Sched
	DMBio    DMBio
	Remap    BioRemap
	KPart    KPart // KindKPart and KindFsyncKPart
}

// FsyncKPart is a KindFsyncKPart event as a value: one traced call and
// what its kernel slot held (KPart.Slot), in one record.
type FsyncKPart struct {
	Fsync Fsync
	KPart KPart
}

// Value returns the event as an interface holding event.Fsync,
// event.KernelFsync, event.FsyncEnter, event.Block, event.Journal or
// event.FlushBio, event.Write, event.Sched, event.DMBio, event.BioRemap or
// event.KPart or event.FsyncKPart (nil for KindNone).
func (a *Any) Value() any {
	switch a.Kind {
	case KindFsync:
		return a.Fsync
	case KindKernelFsync:
		return KernelFsync{Fsync: a.Fsync}
	case KindFsyncEnter:
		return a.Enter
	case KindBlock:
		return a.Block
	case KindJournal:
		return a.Journal
	case KindFlushBio:
		return a.FlushBio
	case KindWrite:
		return a.Write
	case KindSched:
		return a.Sched
	case KindDMBio:
		return a.DMBio
	case KindBioRemap:
		return a.Remap
	case KindKPart:
		return a.KPart
	case KindFsyncKPart:
		return FsyncKPart{Fsync: a.Fsync, KPart: a.KPart}
	}
	return nil
}
