package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type fsync_event -type fsync_enter_event -type es_kind -type es_syscall -type kpart_event -type kpart_reason -type kp_entry -type kp_entry_type -type kp_cat fsync ../bpf/fsync.bpf.c

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
)

// DefaultRingBytes is the fsync, hypervisor and peers tracers' ring
// buffer size when their config's RingBytes is 0: 2 MiB. The kernel maps a ring
// buffer's data pages twice into the reader, all at once, so a ring costs
// twice its size in resident memory from the start (a 16 MiB ring was 32
// MiB of the process's RSS). 2 MiB holds ~6.5k fsyncs of a tmpfs loop (two
// records, 320 bytes with the ring's 8-byte headers) or ~21k block
// completions (96 bytes): at the 100k fsyncs/s (200k records/s) make
// bench drives through it, ~65 ms, of which the first 8 fill the eighth
// that wakes the reader; at etcd's few thousand WAL fsyncs/s with ~6
// records each, over half a second. --ring-size raises it.
const DefaultRingBytes = 2 << 20

// FsyncConfig selects what the fsync tracer records. Zero values mean
// "everything".
type FsyncConfig struct {
	PID      uint32    // only this process (tgid)
	CgroupID uint64    // only tasks in this cgroup v2 (its directory's inode number)
	Comm     string    // only tasks with this comm (≤ 15 bytes)
	Disk     event.Dev // only block requests of this disk (whole-disk dev)
	// RingBytes is the ring buffer size (a power of two ≥ page size);
	// 0 means DefaultRingBytes.
	RingBytes uint32
	// JBD2Wait picks the variant of the optional jbd2_log_wait_commit
	// probe (jbd2wait.go): "" tries fentry then kprobe, "fentry" or
	// "kprobe" only that one, "none" neither.
	JBD2Wait string
	// EveryBlock emits the completions and flush bios of every disk at
	// all times. Without it (the default) the kernel drops those of disks
	// with no traced call in flight before they take ring space: the
	// analysis uses only requests completing inside a call, on its disk
	// (or, stacked, on the disk of a kernel thread's fsync in flight).
	// The ftrace oracle test sets it.
	EveryBlock bool
	// Writes also traces the write(2) family on the files the fsync
	// programs follow, split into throttled, writeback_wait and other
	// (write.go; fsync --writes). Off by default: ~1-1.5 µs more BPF per
	// fsync and 1-3% more of a core in the reader at 10k fsync/s
	// (bench/findings.md).
	Writes bool
	// FSTypes are the types of the filesystems every file the traced
	// calls fsync is on, where the caller knows them (fsync --dev: those
	// mounted on the disk; --workload: its directory's); nil: unknown.
	// When each one has sync_file tracepoints of its own (ext4), the
	// calls are traced there and the syscall tracepoints are not
	// attached: an enabled syscall tracepoint puts every syscall of every
	// task on the machine on the slow path (bench/findings.md). An fsync
	// of a file elsewhere (a block device node, another filesystem) is
	// then not seen.
	FSTypes []string
	// Sched also follows the scheduler (sched_switch, sched_wakeup) for
	// the threads inside a traced call, to split its "other" time into
	// runnable, running and blocked (sched.go; fsync --sched). Off by
	// default: it runs at every context switch on the machine
	// (bench/findings.md).
	Sched bool
	// SwitchLater: FSTypes is nil because the filesystem is not known
	// yet (serve started before etcd): the syscall tracepoints are
	// attached as without it, and ext4's sync_file programs are loaded
	// ready to take the calls over, so that SwitchToExt4 can move them
	// there once the traced files are known to be on ext4.
	SwitchLater bool
	// KernelPartition keeps, in the kernel, what each call on ext4's
	// sync_file tracepoints waits on (bpf/kpart.h) and emits it beside
	// the raw stream as a KindKPart event after the call's KindFsync
	// (shadow mode: the tests compare analysis.Attributor.AttributeKPart
	// of it with Attribute of the raw stream; bench/findings.md 30, 32).
	// Only with FSTypes ext4, on kernels whose tracing programs have
	// bpf_spin_lock; off by default, and then pruned from the programs.
	KernelPartition bool
	// KernelPartitionOnly, with KernelPartition: each call that holds a
	// kernel slot is one record (event.KindFsyncKPart: its Fsync and its
	// slot's entries, which analysis.Attributor.AttributeKPart sweeps),
	// and the raw records around it (its enter, its disk's completions and
	// flush bios, its filesystem's jbd2 commits) are not written while no
	// call without a slot is in flight on that disk (bpf/kpart.h's
	// kpart_one). A call the kernel could not partition after all (its
	// slot overflowed or was lost: event.KPart.Reason) has no raw records
	// to fall back on: Lost counts it. Calls without a slot (every slot
	// held, a dm or loop disk) keep the raw stream. Not with a capture:
	// replays and goldens need the raw records (bench/findings.md 33).
	KernelPartitionOnly bool
}

// FsyncTracer traces fsync/fdatasync calls, the block requests below them
// and journal commits, into one ring buffer. It composes five probes, each
// loaded by its own file: the syscalls (fsync.go, which owns the ring
// buffer bpf/events.h declares), block requests (block.go), journal
// commits and log forces (journal.go), kernel threads' fsyncs under
// stacked devices (stacked.go) and the optional jbd2 commit wait
// (jbd2wait.go). It has the shape of Tracer[event.Any].
type FsyncTracer struct {
	fsync    fsyncObjects
	block    blockObjects
	write    writeObjects // loaded only with FsyncConfig.Writes
	sched    schedObjects // loaded only with FsyncConfig.Sched
	journal  *ebpf.Collection
	stacked  *ebpf.Collection
	jbd2wait *ebpf.Collection
	links    []link.Link
	kpart    bool // FsyncConfig.KernelPartition
	kpartOne bool // FsyncConfig.KernelPartitionOnly
	// unpartitioned counts the KindFsyncKPart calls the kernel could not
	// partition (added to Lost).
	unpartitioned atomic.Uint64
	// sysMu guards the syscall tracepoints' links (sysEnter, sysExit),
	// which SwitchToExt4 closes while the tracer runs, and probes, which
	// it rewrites then.
	sysMu             sync.Mutex
	sysEnter, sysExit []link.Link
	sysClosed         bool
	// switchable: the stacked programs can take the calls over at run
	// time (FsyncConfig.SwitchLater, on a kernel that has them).
	switchable bool
	// stranded counts the calls SwitchToExt4 left uncounted: started on
	// the syscall tracepoints, on no ext4 file, and still in flight at
	// its bounded wait's end (added to Lost).
	stranded atomic.Uint64
	// threadProbes make the links of the probes that run at the traced
	// threads' every write(2) and context switch (Writes, Sched), which
	// DetachThreadProbes takes off; threadLinks holds them while on.
	threadMu     sync.Mutex
	threadProbes []func() (link.Link, error)
	threadLinks  []link.Link
	threadOff    bool
	threadClosed bool
	ring         *quietRing
	untrace      func()
	probes       []event.Probe
	rec          ringbuf.Record
	dec          decoder

	closeOnce sync.Once
	closeErr  error

	// watchStacked (block.go), when no stacked disk existed at start: it
	// alone writes lateLinks and lateErr until watchDone is closed.
	stopWatch, watchDone chan struct{}
	lateLinks            []link.Link
	lateErr              error
}

// NewFsync loads and attaches the programs of the five probes. Syscall and
// block tracepoints are required; journal, stacked-device and jbd2 wait
// probes are optional and reported through Probes when this kernel lacks
// them (no ext4/jbd2, no XFS, no fentry or kprobes). Errors wrap
// ErrNoPrivilege or ErrNoBTF where those are the cause.
func NewFsync(cfg FsyncConfig) (*FsyncTracer, error) {
	if cfg.KernelPartitionOnly && (!fsCallers(cfg.FSTypes) || !haveSpinLock()) {
		cfg.KernelPartition, cfg.KernelPartitionOnly = false, false // the raw stream
	}
	t, err := newFsync(cfg)
	if err != nil && cfg.KernelPartitionOnly {
		// This kernel refused the slots' programs: the raw stream.
		cfg.KernelPartition, cfg.KernelPartitionOnly = false, false
		return newFsync(cfg)
	}
	return t, err
}

// KernelPartitionOnly says whether the calls that hold a kernel slot come
// as one record each (FsyncConfig.KernelPartitionOnly, on this kernel).
func (t *FsyncTracer) KernelPartitionOnly() bool { return t.kpartOne }

// newFsync is NewFsync with cfg as it is.
func newFsync(cfg FsyncConfig) (_ *FsyncTracer, err error) {
	if err := prepare(cfg.Comm); err != nil {
		return nil, err
	}
	t := &FsyncTracer{}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	if t.untrace, err = host.Tracefs(); err != nil {
		return nil, err
	}
	ring := cfg.RingBytes
	if ring == 0 {
		ring = DefaultRingBytes
	}
	// One cache of the kernel's BTF for every object loaded here: without it
	// each load decodes vmlinux BTF again (six times; NewFsync took 240-430
	// ms on make bench's VM, 125-195 ms with the cache).
	cache := btf.NewCache()
	if cfg.KernelPartition && (!fsCallers(cfg.FSTypes) || !haveSpinLock()) {
		return nil, fmt.Errorf("kernel partition: needs the calls on ext4's sync_file tracepoints (FSTypes ext4) and bpf_spin_lock in tracing programs")
	}
	t.kpart = cfg.KernelPartition
	t.kpartOne = cfg.KernelPartition && cfg.KernelPartitionOnly
	shared, err := t.loadSyscalls(cfg, ring, cache)
	if err != nil {
		return nil, err
	}
	if err := t.loadBlock(shared, cfg); err != nil {
		return nil, err
	}
	callers := fsCallers(cfg.FSTypes)
	// able: the stacked programs are loaded able to take the calls (with
	// callers, from the start; with SwitchLater, once SwitchToExt4 says).
	able := callers || handoverWanted(cfg)
	if !callers {
		if err := t.attachSyscalls(); err != nil {
			return nil, err
		}
	}
	if cfg.Writes {
		if err := t.loadWrite(shared, cfg); err != nil {
			return nil, err
		}
	}
	if cfg.Sched {
		if err := t.loadSched(shared); err != nil {
			return nil, err
		}
	}
	if err := t.attachBlock(); err != nil {
		return nil, err
	}
	if err := t.attachJournal(shared); err != nil {
		return nil, err
	}
	if err := t.attachStacked(shared, cfg, able, callers); err != nil {
		return nil, err
	}
	t.switchable = able && !callers && t.stacked != nil
	t.attachJBD2Wait(shared, cfg)

	if t.ring, err = openQuietRing(t.fsync.Events); err != nil {
		return nil, err
	}
	return t, nil
}

// loadSyscalls loads the fsync object (bpf/fsync.bpf.c), which owns the
// ring buffer and lost counter of bpf/events.h, and returns the options
// that make every other object of the tracer share them (and the BTF
// cache).
func (t *FsyncTracer) loadSyscalls(cfg FsyncConfig, ring uint32, cache *btf.Cache) (ebpf.CollectionOptions, error) {
	spec, err := loadFsync()
	if err != nil {
		return ebpf.CollectionOptions{}, fmt.Errorf("reading fsync object: %w", err)
	}
	if err := sizeEvents(spec, ring); err != nil {
		return ebpf.CollectionOptions{}, err
	}
	vars := filterVariables(cfg)
	vars["handover"] = handoverWanted(cfg)
	vars["kpart"] = t.kpart
	if err := setVariables(spec, vars); err != nil {
		return ebpf.CollectionOptions{}, err
	}
	if err := applyCompat(spec); err != nil {
		return ebpf.CollectionOptions{}, err
	}
	if err := spec.LoadAndAssign(&t.fsync, &ebpf.CollectionOptions{Cache: cache}); err != nil {
		return ebpf.CollectionOptions{}, explainLoad("fsync programs", err)
	}
	return ebpf.CollectionOptions{
		MapReplacements: map[string]*ebpf.Map{"events": t.fsync.Events, "lost_events": t.fsync.LostEvents,
			"busy_disks": t.fsync.BusyDisks, "busy_any": t.fsync.BusyAny, "kp_calls": t.fsync.KpCalls},
		Cache: cache,
	}, nil
}

// fsCallers says whether the traced calls are seen on ext4's sync_file
// tracepoints (bpf/stacked.bpf.c) instead of the syscall tracepoints:
// every filesystem in fstypes is ext4, this kernel has the tracepoints,
// and its tracing programs have bpf_task_pt_regs (Linux 5.15+), through
// which they tell a fsync(2) or fdatasync(2) from the O_SYNC writes and
// msyncs that reach ext4_sync_file too.
func fsCallers(fstypes []string) bool {
	if len(fstypes) == 0 {
		return false
	}
	for _, t := range fstypes {
		if t != "ext4" {
			return false
		}
	}
	return tracepointHasBTF("ext4_sync_file_enter") && tracepointHasBTF("ext4_sync_file_exit") &&
		features.HaveProgramHelper(ebpf.TracePoint, asm.FnTaskPtRegs) == nil
}

// handoverWanted says whether the tracer loads ready for SwitchToExt4
// (bpf/call.h's handover): on the syscall tracepoints now, ext4's able to
// take the calls over later.
func handoverWanted(cfg FsyncConfig) bool {
	return cfg.SwitchLater && !fsCallers(cfg.FSTypes) && fsCallers([]string{"ext4"})
}

// filterVariables are the values of bpf/filter.h's globals for cfg, in
// every object that includes it.
func filterVariables(cfg FsyncConfig) map[string]any {
	return map[string]any{
		"targ_tgid": cfg.PID, "targ_cgroup_id": cfg.CgroupID,
		"filter_comm": cfg.Comm != "", "targ_comm": commBytes(cfg.Comm),
	}
}

// attachSyscalls attaches the four syscall tracepoints (required: syscall
// tracepoints have no BTF twin, so they need CONFIG_FTRACE_SYSCALLS).
func (t *FsyncTracer) attachSyscalls() error {
	for _, tp := range []struct {
		name string
		prog *ebpf.Program
	}{
		{"sys_enter_fsync", t.fsync.SysEnterFsync},
		{"sys_exit_fsync", t.fsync.SysExitFsync},
		{"sys_enter_fdatasync", t.fsync.SysEnterFdatasync},
		{"sys_exit_fdatasync", t.fsync.SysExitFdatasync},
	} {
		l, err := link.Tracepoint("syscalls", tp.name, tp.prog, nil)
		if err != nil {
			return fmt.Errorf("attaching tracepoint/syscalls/%s (needs CONFIG_FTRACE_SYSCALLS): %w", tp.name, err)
		}
		t.sysMu.Lock()
		if strings.HasPrefix(tp.name, "sys_enter_") {
			t.sysEnter = append(t.sysEnter, l)
		} else {
			t.sysExit = append(t.sysExit, l)
		}
		t.sysMu.Unlock()
		t.probes = append(t.probes, event.Probe{Name: "tracepoint/syscalls/" + tp.name, Attached: true})
	}
	return nil
}

// Probes lists every probe with whether it is attached; the report shows
// the layers that missing probes leave dark.
// (SwitchToExt4 changes them: read them again after it.)
func (t *FsyncTracer) Probes() []event.Probe {
	t.sysMu.Lock()
	defer t.sysMu.Unlock()
	return t.probes
}

// ProgramsAttached counts the probes attached now (the exporter reads it
// at each scrape: SwitchToExt4 detaches four).
func (t *FsyncTracer) ProgramsAttached() int {
	n := 0
	for _, p := range t.Probes() {
		if p.Attached {
			n++
		}
	}
	return n
}

// Lost returns how many events did not fit in the ring buffer (summed over
// CPUs) since the tracer started, plus the calls SwitchToExt4 could not
// wait for (their in-flight calls on another filesystem: SwitchToExt4),
// plus, with FsyncConfig.KernelPartitionOnly, the calls the kernel could
// not partition (Unpartitioned: their requests were recorded nowhere).
func (t *FsyncTracer) Lost() (uint64, error) {
	n, err := sumPerCPU(t.fsync.LostEvents, "lost_events")
	return n + t.stranded.Load() + t.unpartitioned.Load(), err
}

// Unpartitioned counts the calls read so far whose one record
// (event.KindFsyncKPart) says the kernel could not partition them
// (event.KPart.Reason not KPartOK): with no raw records to attribute them
// from, they are counted in Lost and reach no sink.
func (t *FsyncTracer) Unpartitioned() uint64 { return t.unpartitioned.Load() }

// Missed returns how many times the kernel skipped one of the tracer's
// programs: because a BPF program was already running on that CPU (a
// softirq completing a request while a program ran in process context),
// bpf_prog_info.recursion_misses summed over every program (Linux 5.12+;
// 0 where the kernel does not count them), plus the block_rq_complete
// runs it skipped without counting them (BlockStats.UnseenCompletions,
// inferred: completions ftrace records and no BPF program runs for). Each
// miss is an event lost.
func (t *FsyncTracer) Missed() uint64 {
	// The one block counter it needs, not BlockStats' eleven: the
	// interval line reads Missed every second (bench/findings.md 31).
	n, _ := t.blockStat(blockBlkStatBLK_STAT_UNSEEN_COMPLETE)
	for _, p := range t.programs() {
		n += missed(p)
	}
	return n
}

// ProgramStats returns the statistics of every loaded program of the fsync
// tracer (syscall, block, journal, stacked-device and jbd2 wait programs),
// sorted by name. Programs that were not loaded (a kernel without jbd2 or
// XFS) are left out.
// block_rq_complete's entry carries BlockStats.UnseenCompletions as its
// UnseenRuns, so the per-program skips add up to Missed.
func (t *FsyncTracer) ProgramStats() []event.ProgramStats {
	ps := programStats(t.programs())
	if st, err := t.BlockStats(); err == nil {
		for i := range ps {
			if ps[i].Name == "block_rq_complete" {
				ps[i].UnseenRuns = st.UnseenCompletions
			}
		}
	}
	return ps
}

// programs returns every loaded program by name.
func (t *FsyncTracer) programs() map[string]*ebpf.Program {
	progs := map[string]*ebpf.Program{
		"sys_enter_fsync":     t.fsync.SysEnterFsync,
		"sys_exit_fsync":      t.fsync.SysExitFsync,
		"sys_enter_fdatasync": t.fsync.SysEnterFdatasync,
		"sys_exit_fdatasync":  t.fsync.SysExitFdatasync,
		"block_rq_insert":     t.block.BlockRqInsert,
		"block_rq_issue":      t.block.BlockRqIssue,
		"block_rq_requeue":    t.block.BlockRqRequeue,
		"block_rq_complete":   t.block.BlockRqComplete,
		"block_getrq":         t.block.BlockGetrq,
		"block_bio_queue":     t.block.BlockBioQueue,
		"block_bio_remap":     t.block.BlockBioRemap,
		"block_bio_complete":  t.block.BlockBioComplete,
	}
	if t.write.SysExitWrite != nil {
		progs["write_sys_enter_write"] = t.write.SysEnterWrite
		progs["write_sys_enter_pwrite64"] = t.write.SysEnterPwrite64
		progs["write_sys_enter_writev"] = t.write.SysEnterWritev
		progs["write_sys_enter_pwritev"] = t.write.SysEnterPwritev
		progs["write_sys_enter_pwritev2"] = t.write.SysEnterPwritev2
		progs["write_sys_exit"] = t.write.SysExitWrite
		progs["balance_dirty_pages"] = t.write.BalanceDirtyPages
		progs["folio_wait_writeback"] = t.write.FolioWaitWriteback
		progs["writeback_dirty_folio"] = t.write.WritebackDirtyFolio
	}
	if t.sched.SchedSwitch != nil {
		progs["sched_switch"] = t.sched.SchedSwitch
		progs["sched_wakeup"] = t.sched.SchedWakeup
	}
	for _, c := range []*ebpf.Collection{t.journal, t.stacked, t.jbd2wait} {
		if c == nil {
			continue
		}
		for name, p := range c.Programs {
			progs[name] = p
		}
	}
	return progs
}

// Read blocks until the next event and decodes it into the field of ev
// that ev.Kind then names: an fsync or fdatasync call (KindFsync), a
// kernel thread's vfs_fsync (KindKernelFsync), a call's start
// (KindFsyncEnter), a block request completion (KindBlock), a flush bio
// (KindFlushBio), a bio on a device-mapper disk (KindDMBio) and its remaps
// (KindBioRemap), a journal commit, log force or wait (KindJournal) or,
// with FsyncConfig.Writes, a write(2)-family call (KindWrite) or, with
// FsyncConfig.Sched, a traced thread's scheduler state (KindSched), or,
// with FsyncConfig.KernelPartition, a call's kernel-made partition
// (KindKPart) or a call and its slot's entries in one record
// (KindFsyncKPart).
// Records are decoded by fixed layout (the bpf2go structs), without
// reflection or allocation once their strings have been seen; strings and
// the Names slice are shared with other events: read only. It returns
// ErrClosed after Close and ErrDrained once Drain has emptied the ring.
func (t *FsyncTracer) Read(ev *event.Any) error {
	for {
		if err := t.ring.read(&t.rec); err != nil {
			return err
		}
		if len(t.rec.RawSample) == 0 {
			continue
		}
		err := t.dec.record(ev, t.rec.RawSample)
		if err == nil && ev.Kind == event.KindFsyncKPart && ev.KPart.Reason != event.KPartOK {
			t.unpartitioned.Add(1)
		}
		return err
	}
}

// record decodes one record of the shared ring, whose first byte is its
// enum es_kind (bpf/record.h), into the field of ev it names.
func (d *decoder) record(ev *event.Any, raw []byte) error {
	switch fsyncEsKind(raw[0]) {
	case fsyncEsKindES_KIND_FSYNC:
		e, err := fixed[fsyncFsyncEvent](raw, "fsync")
		if err != nil {
			return err
		}
		d.fsync(&ev.Fsync, e)
		ev.Kind = event.KindFsync
		if ev.Fsync.Syscall == event.SysKthread { // stacked.bpf.c's
			ev.Kind = event.KindKernelFsync
		}
	case fsyncEsKindES_KIND_FSYNC_ENTER:
		e, err := fixed[fsyncFsyncEnterEvent](raw, "fsync_enter")
		if err != nil {
			return err
		}
		ev.Kind, ev.Enter = event.KindFsyncEnter, event.FsyncEnter{TID: e.Tid, StartNs: e.StartNs}
	case fsyncEsKindES_KIND_BLK:
		e, err := fixed[blockBlkEvent](raw, "blk")
		if err != nil {
			return err
		}
		d.block(&ev.Block, e)
		ev.Kind = event.KindBlock
	case fsyncEsKindES_KIND_JOURNAL:
		e, err := fixed[journalJournalEvent](raw, "journal")
		if err != nil {
			return err
		}
		decodeJournal(&ev.Journal, e)
		ev.Kind = event.KindJournal
	case fsyncEsKindES_KIND_FLUSH_BIO:
		e, err := fixed[blockFlushBioEvent](raw, "flush_bio")
		if err != nil {
			return err
		}
		decodeFlushBio(&ev.FlushBio, e)
		ev.Kind = event.KindFlushBio
	case fsyncEsKindES_KIND_WRITE:
		e, err := fixed[writeWriteEvent](raw, "write")
		if err != nil {
			return err
		}
		d.writeRecord(&ev.Write, e)
		ev.Kind = event.KindWrite
	case fsyncEsKindES_KIND_SCHED:
		e, err := fixed[schedSchedEvent](raw, "sched")
		if err != nil {
			return err
		}
		decodeSched(&ev.Sched, e)
		ev.Kind = event.KindSched
	case fsyncEsKindES_KIND_DM_BIO:
		e, err := fixed[blockDmBioEvent](raw, "dm_bio")
		if err != nil {
			return err
		}
		d.dmBio(&ev.DMBio, e)
		ev.Kind = event.KindDMBio
	case fsyncEsKindES_KIND_BIO_REMAP:
		e, err := fixed[blockBioRemapEvent](raw, "bio_remap")
		if err != nil {
			return err
		}
		decodeRemap(&ev.Remap, e)
		ev.Kind = event.KindBioRemap
	case fsyncEsKindES_KIND_KPART:
		e, err := fixed[fsyncKpartEvent](raw, "kpart")
		if err != nil {
			return err
		}
		decodeKPart(&ev.KPart, e)
		d.kpEntries(&ev.KPart, raw[unsafe.Sizeof(*e):])
		ev.Kind = event.KindKPart
	case fsyncEsKindES_KIND_FSYNC_KPART:
		e, err := fixed[fsyncFsyncEvent](raw, "fsync_kpart")
		if err != nil {
			return err
		}
		k, err := fixed[fsyncKpartEvent](raw[unsafe.Sizeof(*e):], "fsync_kpart")
		if err != nil {
			return err
		}
		d.fsync(&ev.Fsync, e)
		decodeKPart(&ev.KPart, k)
		d.kpEntries(&ev.KPart, raw[unsafe.Sizeof(*e)+unsafe.Sizeof(*k):])
		ev.Kind = event.KindFsyncKPart
	default:
		return fmt.Errorf("decoding event: unknown kind %d", raw[0])
	}
	return nil
}

// decodeKPart decodes struct kpart_event (bpf/fsync.h).
func decodeKPart(k *event.KPart, e *fsyncKpartEvent) {
	*k = event.KPart{TID: e.Tid, StartNs: e.StartNs, EndNs: e.EndNs, Reason: event.KPartReason(e.Reason), Entries: e.Entries, Dropped: e.Dropped}
}

// kpEntries decodes the struct kp_entry array that follows a kpart_event
// (bpf/kpart.h) into k.Slot, the decoder's buffer.
func (d *decoder) kpEntries(k *event.KPart, raw []byte) {
	const size = int(unsafe.Sizeof(fsyncKpEntry{}))
	d.kp = d.kp[:0]
	for ; len(raw) >= size; raw = raw[size:] {
		x := (*fsyncKpEntry)(unsafe.Pointer(&raw[0]))
		d.kp = append(d.kp, event.KPEntry{A: x.A, B: x.B, C: x.C, Type: event.KPEntryType(x.Type), Cat: event.KPCat(x.Cat), Preflush: x.Preflush != 0})
	}
	if len(d.kp) > 0 {
		k.Slot = d.kp
	}
}

// fsync decodes struct fsync_event (bpf/fsync.h).
func (d *decoder) fsync(f *event.Fsync, e *fsyncFsyncEvent) {
	*f = event.Fsync{
		Syscall: event.Syscall(e.Syscall), PID: e.Pid, TID: e.Tid, Comm: d.intern(cbytes(e.Comm[:])),
		FD: e.Fd, Dev: event.Dev(e.Dev), IsBlockdev: e.IsBlockdev != 0, Ino: e.Ino,
		FSType: d.intern(cbytes(e.Fstype[:])), CgroupID: e.CgroupId, StartNs: e.StartNs, EndNs: e.EndNs, Ret: e.Ret,
		Names: d.pathNames(e.Names[:]),
	}
}

// Close detaches every probe and frees every object; it is safe to call
// more than once and on a half-built tracer.
func (t *FsyncTracer) Close() error {
	t.closeOnce.Do(func() { t.closeErr = t.close() })
	return t.closeErr
}

func (t *FsyncTracer) close() error {
	var errs []error
	if t.stopWatch != nil {
		close(t.stopWatch)
		<-t.watchDone
		t.links = append(t.links, t.lateLinks...)
	}
	if t.ring != nil {
		errs = append(errs, t.ring.close())
	}
	errs = append(errs, closeLinks(t.links)...)
	t.links = nil
	t.sysMu.Lock()
	errs = append(errs, closeLinks(append(t.sysEnter, t.sysExit...))...)
	t.sysEnter, t.sysExit, t.sysClosed = nil, nil, true
	t.sysMu.Unlock()
	t.threadMu.Lock()
	errs = append(errs, closeLinks(t.threadLinks)...)
	t.threadLinks, t.threadOff, t.threadClosed = nil, true, true
	t.threadMu.Unlock()
	if t.journal != nil {
		t.journal.Close()
	}
	if t.stacked != nil {
		t.stacked.Close()
	}
	if t.jbd2wait != nil {
		t.jbd2wait.Close()
	}
	errs = append(errs, t.sched.Close(), t.write.Close(), t.block.Close(), t.fsync.Close())
	if t.untrace != nil {
		t.untrace()
	}
	return errors.Join(errs...)
}

// Drain makes a Read in progress, and the ones after it, return every
// record already in the ring buffer and then ErrDrained: how a caller stops
// without losing the events of calls that have already returned. (The
// reader's SetDeadline would wait for a blocked Read to wake first.)
func (t *FsyncTracer) Drain() error { return t.ring.drain() }

// RingPeakBytes returns the most unread data the reader has seen in the
// events ring (sampled, so a lower bound), in bytes: how close a slow or
// starved reader came to losing events (the ring holds RingBytes).
func (t *FsyncTracer) RingPeakBytes() uint64 { return t.ring.peakBytes() }
