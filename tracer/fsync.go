package tracer

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/host"
)

// DefaultRingBytes is the fsync and hypervisor tracers' ring buffer size
// when their config's RingBytes is 0: 2 MiB. The kernel maps a ring
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
	// Extras picks the optional function-probe variant: "" tries fentry
	// then kprobe, "fentry" or "kprobe" only that one, "none" neither.
	Extras string
}

// FsyncTracer traces fsync/fdatasync calls, the block requests below them
// and journal commits, into one ring buffer.
type FsyncTracer struct {
	fsync   fsyncObjects
	block   blockObjects
	journal *ebpf.Collection
	stacked *ebpf.Collection
	extras  *ebpf.Collection
	links   []link.Link
	ring    *quietRing
	untrace func()
	probes  []event.Probe
	rec     ringbuf.Record
	dec     decoder

	closeOnce sync.Once
	closeErr  error
}

// NewFsync loads and attaches the fsync, block and journal programs.
// Syscall and block tracepoints are required; journal probes are optional
// and reported through Probes when this kernel lacks them (no ext4/jbd2, no
// XFS). Errors wrap ErrNoPrivilege or ErrNoBTF where those are the cause.
func NewFsync(cfg FsyncConfig) (_ *FsyncTracer, err error) {
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

	// fsync object: owns the shared ring buffer and lost counter.
	fspec, err := loadFsync()
	if err != nil {
		return nil, fmt.Errorf("reading fsync object: %w", err)
	}
	ring := cfg.RingBytes
	if ring == 0 {
		ring = DefaultRingBytes
	}
	if err := sizeEvents(fspec, ring); err != nil {
		return nil, err
	}
	if err := setVariables(fspec, map[string]any{
		"targ_tgid": cfg.PID, "targ_cgroup_id": cfg.CgroupID,
		"filter_comm": cfg.Comm != "", "targ_comm": commBytes(cfg.Comm),
	}); err != nil {
		return nil, err
	}
	// One cache of the kernel's BTF for every object loaded here: without it
	// each load decodes vmlinux BTF again (six times; NewFsync took 240-430
	// ms on make bench's VM, 125-195 ms with the cache).
	cache := btf.NewCache()
	if err := fspec.LoadAndAssign(&t.fsync, &ebpf.CollectionOptions{Cache: cache}); err != nil {
		return nil, explainLoad("fsync programs", err)
	}
	shared := ebpf.CollectionOptions{
		MapReplacements: map[string]*ebpf.Map{"events": t.fsync.Events, "lost_events": t.fsync.LostEvents},
		Cache:           cache,
	}

	bspec, err := loadBlock()
	if err != nil {
		return nil, fmt.Errorf("reading block object: %w", err)
	}
	if err := sizeEvents(bspec, ring); err != nil {
		return nil, err
	}
	if err := setVariables(bspec, map[string]any{"targ_dev": uint32(cfg.Disk)}); err != nil {
		return nil, err
	}
	if err := bspec.LoadAndAssign(&t.block, &shared); err != nil {
		return nil, explainLoad("block programs", err)
	}

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
			return nil, fmt.Errorf("attaching tracepoint/syscalls/%s (needs CONFIG_FTRACE_SYSCALLS): %w", tp.name, err)
		}
		t.links = append(t.links, l)
		t.probes = append(t.probes, event.Probe{Name: "tracepoint/syscalls/" + tp.name, Attached: true})
	}
	for _, p := range []*ebpf.Program{t.block.BlockRqInsert, t.block.BlockRqIssue, t.block.BlockRqComplete, t.block.BlockBioQueue} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return nil, fmt.Errorf("attaching tp_btf program %s: %w", p, err)
		}
		t.links = append(t.links, l)
	}
	t.probes = append(t.probes,
		event.Probe{Name: "tp_btf/block_rq_insert", Attached: true},
		event.Probe{Name: "tp_btf/block_rq_issue", Attached: true},
		event.Probe{Name: "tp_btf/block_rq_complete", Attached: true},
		event.Probe{Name: "tp_btf/block_bio_queue", Attached: true})

	if err := t.attachJournal(shared); err != nil {
		return nil, err
	}
	if err := t.attachStacked(shared); err != nil {
		return nil, err
	}
	t.attachExtras(shared, cfg)

	if t.ring, err = openQuietRing(t.fsync.Events); err != nil {
		return nil, err
	}
	return t, nil
}

// attachJournal loads each journal program whose tracepoint this kernel
// has (jbd2 and xfs may be modules, not loaded, or absent) and records the
// others as unavailable instead of failing.
func (t *FsyncTracer) attachJournal(shared ebpf.CollectionOptions) error {
	spec, err := loadJournal()
	if err != nil {
		return fmt.Errorf("reading journal object: %w", err)
	}
	if err := sizeEvents(spec, shared.MapReplacements["events"].MaxEntries()); err != nil {
		return err
	}
	want := map[string]string{
		"jbd2_start_commit": "ext4/jbd2 not loaded: no jbd2 commit tracepoint",
		"jbd2_end_commit":   "ext4/jbd2 not loaded: no jbd2 commit tracepoint",
		"xfs_log_force":     "xfs not loaded: no xfs_log_force tracepoint",
	}
	var missing []event.Probe
	for name, why := range want {
		if !tracepointHasBTF(name) {
			delete(spec.Programs, name)
			missing = append(missing, event.Probe{Name: "tp_btf/" + name, Why: why})
		}
	}
	// jbd2 start and end only make sense together.
	if _, ok := spec.Programs["jbd2_start_commit"]; !ok {
		delete(spec.Programs, "jbd2_end_commit")
	} else if _, ok := spec.Programs["jbd2_end_commit"]; !ok {
		delete(spec.Programs, "jbd2_start_commit")
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, shared)
	if err != nil {
		return explainLoad("journal programs", err)
	}
	t.journal = coll
	for _, name := range []string{"jbd2_start_commit", "jbd2_end_commit", "xfs_log_force"} {
		p, ok := coll.Programs[name]
		if !ok {
			continue
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			return fmt.Errorf("attaching tp_btf/%s: %w", name, err)
		}
		t.links = append(t.links, l)
		t.probes = append(t.probes, event.Probe{Name: "tp_btf/" + name, Attached: true})
	}
	t.probes = append(t.probes, missing...)
	return nil
}

// attachStacked loads the programs that see fsyncs made by kernel threads
// (the loop driver's vfs_fsync of a backing file: the host level under a
// stacked device), where this kernel has ext4's sync_file tracepoints.
func (t *FsyncTracer) attachStacked(shared ebpf.CollectionOptions) error {
	if !tracepointHasBTF("ext4_sync_file_enter") || !tracepointHasBTF("ext4_sync_file_exit") {
		t.probes = append(t.probes,
			event.Probe{Name: "tp_btf/ext4_sync_file_enter", Why: "ext4 not loaded: fsyncs by kernel threads (loop backing files on ext4) unseen"},
			event.Probe{Name: "tp_btf/ext4_sync_file_exit", Why: "ext4 not loaded"})
		return nil
	}
	spec, err := loadStacked()
	if err != nil {
		return fmt.Errorf("reading stacked object: %w", err)
	}
	if err := sizeEvents(spec, shared.MapReplacements["events"].MaxEntries()); err != nil {
		return err
	}
	coll, err := ebpf.NewCollectionWithOptions(spec, shared)
	if err != nil {
		return explainLoad("stacked-device programs", err)
	}
	t.stacked = coll
	for _, name := range []string{"ext4_sync_file_enter", "ext4_sync_file_exit"} {
		l, err := link.AttachTracing(link.TracingOptions{Program: coll.Programs[name]})
		if err != nil {
			return fmt.Errorf("attaching tp_btf/%s: %w", name, err)
		}
		t.links = append(t.links, l)
		t.probes = append(t.probes, event.Probe{Name: "tp_btf/" + name, Attached: true})
	}
	return nil
}

// attachExtras tries the optional function probes of extras.bpf.c: the
// fentry/fexit pair first, then kprobe/kretprobe. Neither is required;
// when both fail the probes say why and the report lists the journal wait
// as unavailable (the jbd2 commit tracepoints still give the journal layer
// by overlap).
func (t *FsyncTracer) attachExtras(shared ebpf.CollectionOptions, cfg FsyncConfig) {
	const fn = "jbd2_log_wait_commit"
	variants := []struct {
		kind       string
		enter, out string
		attach     func(c *ebpf.Collection) ([]link.Link, error)
	}{
		{"fentry", "jbd2_wait_fentry", "jbd2_wait_fexit", func(c *ebpf.Collection) ([]link.Link, error) {
			var ls []link.Link
			for _, n := range []string{"jbd2_wait_fentry", "jbd2_wait_fexit"} {
				l, err := link.AttachTracing(link.TracingOptions{Program: c.Programs[n]})
				if err != nil {
					return ls, err
				}
				ls = append(ls, l)
			}
			return ls, nil
		}},
		{"kprobe", "jbd2_wait_kprobe", "jbd2_wait_kretprobe", func(c *ebpf.Collection) ([]link.Link, error) {
			var ls []link.Link
			l, err := link.Kprobe(fn, c.Programs["jbd2_wait_kprobe"], nil)
			if err != nil {
				return ls, err
			}
			ls = append(ls, l)
			l, err = link.Kretprobe(fn, c.Programs["jbd2_wait_kretprobe"], nil)
			if err != nil {
				return ls, err
			}
			return append(ls, l), nil
		}},
	}
	var why []string
	if cfg.Extras == "none" {
		return
	}
	for _, v := range variants {
		if cfg.Extras != "" && cfg.Extras != v.kind {
			continue
		}
		spec, err := loadExtras()
		if err != nil {
			why = append(why, v.kind+": "+err.Error())
			continue
		}
		for name := range spec.Programs {
			if name != v.enter && name != v.out {
				delete(spec.Programs, name)
			}
		}
		if err := sizeEvents(spec, shared.MapReplacements["events"].MaxEntries()); err != nil {
			why = append(why, v.kind+": "+err.Error())
			continue
		}
		if err := setVariables(spec, map[string]any{"targ_tgid": cfg.PID, "targ_cgroup_id": cfg.CgroupID}); err != nil {
			why = append(why, v.kind+": "+err.Error())
			continue
		}
		coll, err := ebpf.NewCollectionWithOptions(spec, shared)
		if err != nil {
			why = append(why, v.kind+" load: "+shortErr(err))
			if errors.Is(err, unix.EPERM) {
				why[len(why)-1] = v.kind + ": refused by this kernel (EPERM)"
			}
			continue
		}
		ls, err := v.attach(coll)
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			coll.Close()
			why = append(why, v.kind+" attach: "+shortErr(err))
			if errors.Is(err, os.ErrNotExist) && v.kind == "kprobe" {
				why[len(why)-1] = "kprobe: no kprobe_events in tracefs (CONFIG_KPROBES off)"
			}
			continue
		}
		t.extras = coll
		t.links = append(t.links, ls...)
		t.probes = append(t.probes, event.Probe{Name: v.kind + "/" + fn, Attached: true})
		return
	}
	t.probes = append(t.probes, event.Probe{Name: "fentry|kprobe/" + fn,
		Why: "exact jbd2 commit wait unavailable, journal layer by overlap with jbd2 commits instead (" + strings.Join(why, "; ") + ")"})
}

// sizeEvents sizes the shared events ring buffer of an object that
// includes bpf/events.h (ring bytes, a power of two ≥ page size) and sets
// wake_bytes, the fill level whose crossing wakes the reader early, to an
// eighth of it (256 KiB of the default ring: ~8 ms of make bench's 200k
// records/s, so a reader that missed a poll is woken before it fills).
func sizeEvents(spec *ebpf.CollectionSpec, ring uint32) error {
	spec.Maps["events"].MaxEntries = ring
	return setVariables(spec, map[string]any{"wake_bytes": uint64(ring / 8)})
}

// shortErr keeps the first line of an error (verifier logs are long).
func shortErr(err error) string {
	s := err.Error()
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// tracepointHasBTF reports whether the kernel (or a loaded module) has
// tracepoint name, which is when it also has the btf_trace_<name> typedef
// a tp_btf program attaches through. It asks tracefs (mounted by then)
// rather than parsing the kernel's BTF once more: the loader parses it
// anyway, and a second parse cost start-up time (docs/performance.md).
func tracepointHasBTF(name string) bool {
	return host.TracepointExists(tracepointSystem(name), name)
}

func tracepointSystem(name string) string {
	switch {
	case len(name) > 5 && name[:5] == "jbd2_":
		return "jbd2"
	case len(name) > 4 && name[:4] == "xfs_":
		return "xfs"
	case len(name) > 5 && name[:5] == "ext4_":
		return "ext4"
	}
	return ""
}

// Probes lists every probe with whether it is attached; the report shows
// the layers that missing probes leave dark.
func (t *FsyncTracer) Probes() []event.Probe { return t.probes }

// Lost returns how many events did not fit in the ring buffer (summed over
// CPUs) since the tracer started.
func (t *FsyncTracer) Lost() (uint64, error) {
	return sumPerCPU(t.fsync.LostEvents, "lost_events")
}

// Missed returns how many times the kernel skipped one of the tracer's
// programs because a BPF program was already running on that CPU (a
// softirq completing a request while a program ran in process context):
// bpf_prog_info.recursion_misses summed over every program (Linux 5.12+;
// 0 where the kernel does not count them). Each miss is an event lost.
func (t *FsyncTracer) Missed() uint64 {
	var n uint64
	for _, p := range t.programs() {
		n += missed(p)
	}
	return n
}

// ProgramStats returns the statistics of every loaded program of the fsync
// tracer (syscall, block, journal, stacked-device and jbd2 wait programs),
// sorted by name. Programs that were not loaded (a kernel without jbd2 or
// XFS) are left out.
func (t *FsyncTracer) ProgramStats() []event.ProgramStats { return programStats(t.programs()) }

// programs returns every loaded program by name.
func (t *FsyncTracer) programs() map[string]*ebpf.Program {
	progs := map[string]*ebpf.Program{
		"sys_enter_fsync":     t.fsync.SysEnterFsync,
		"sys_exit_fsync":      t.fsync.SysExitFsync,
		"sys_enter_fdatasync": t.fsync.SysEnterFdatasync,
		"sys_exit_fdatasync":  t.fsync.SysExitFdatasync,
		"block_rq_insert":     t.block.BlockRqInsert,
		"block_rq_issue":      t.block.BlockRqIssue,
		"block_rq_complete":   t.block.BlockRqComplete,
		"block_bio_queue":     t.block.BlockBioQueue,
	}
	for _, c := range []*ebpf.Collection{t.journal, t.stacked, t.extras} {
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
// (KindFlushBio) or a journal commit, log force or wait (KindJournal).
// Records are decoded by fixed layout (the bpf2go structs), without
// reflection or allocation once their strings have been seen; strings and
// the Names slice are shared with other events: read only. It returns
// ErrClosed after Close and ErrDrained once Drain has emptied the ring.
func (t *FsyncTracer) Read(ev *event.Any) error {
	for {
		if err := t.ring.read(&t.rec); err != nil {
			return err
		}
		raw := t.rec.RawSample
		if len(raw) == 0 {
			continue
		}
		switch raw[0] {
		case 1: // ES_KIND_FSYNC
			if len(raw) < int(unsafe.Sizeof(fsyncFsyncEvent{})) {
				return errShort("fsync", len(raw))
			}
			t.dec.fsync(&ev.Fsync, (*fsyncFsyncEvent)(unsafe.Pointer(&raw[0])))
			ev.Kind = event.KindFsync
			if ev.Fsync.Syscall == event.SysKthread {
				ev.Kind = event.KindKernelFsync
			}
		case 2: // ES_KIND_FSYNC_ENTER
			if len(raw) < int(unsafe.Sizeof(fsyncFsyncEnterEvent{})) {
				return errShort("fsync_enter", len(raw))
			}
			e := (*fsyncFsyncEnterEvent)(unsafe.Pointer(&raw[0]))
			ev.Kind, ev.Enter = event.KindFsyncEnter, event.FsyncEnter{TID: e.Tid, StartNs: e.StartNs}
		case 3: // ES_KIND_BLK
			if len(raw) < int(unsafe.Sizeof(blockBlkEvent{})) {
				return errShort("blk", len(raw))
			}
			t.dec.block(&ev.Block, (*blockBlkEvent)(unsafe.Pointer(&raw[0])))
			ev.Kind = event.KindBlock
		case 4: // ES_KIND_JOURNAL
			if len(raw) < int(unsafe.Sizeof(journalJournalEvent{})) {
				return errShort("journal", len(raw))
			}
			e := (*journalJournalEvent)(unsafe.Pointer(&raw[0]))
			ev.Kind, ev.Journal = event.KindJournal, event.Journal{Source: event.JournalSource(e.Source), Dev: event.Dev(e.Dev),
				TID: e.Tid, Txn: e.Txn, StartNs: e.StartNs, EndNs: e.EndNs}
		case 5: // ES_KIND_FLUSH_BIO
			if len(raw) < int(unsafe.Sizeof(blockFlushBioEvent{})) {
				return errShort("flush_bio", len(raw))
			}
			e := (*blockFlushBioEvent)(unsafe.Pointer(&raw[0]))
			ev.Kind, ev.FlushBio = event.KindFlushBio, event.FlushBio{Dev: event.Dev(e.Dev), Op: event.Op(e.Op), Flags: event.ReqFlags(e.Flags),
				PID: e.Pid, TID: e.Tid, QueueNs: e.QueueNs}
		default:
			return fmt.Errorf("decoding event: unknown kind %d", raw[0])
		}
		return nil
	}
}

func errShort(kind string, n int) error {
	return fmt.Errorf("decoding %s event: record of %d bytes is too short", kind, n)
}

func cstr(b []int8) string { return string(cbytes(b)) }

// cbytes returns the bytes of a NUL-terminated C string field, without
// copying them.
func cbytes(b []int8) []byte {
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&b[0])), len(b))
	for i, c := range buf {
		if c == 0 {
			return buf[:i]
		}
	}
	return buf
}

// internMax bounds each of decoder's tables; one that fills is emptied
// and refills with what is current (files come and go: WAL segments).
const internMax = 4096

// decoder turns raw records into events. It interns the strings that
// repeat from record to record (comm, filesystem type, path components,
// the Names slice itself), so a steady stream decodes without allocating:
// ten allocations per fsync record before (BenchmarkDecodeFsync).
// Interned values are shared between events and must not be modified.
// Not safe for concurrent use; the zero value is ready.
type decoder struct {
	recent [64]string
	strs   map[string]string
	names  map[string][]string // key: the raw components, each ended by NUL
	key    []byte
}

// intern returns b as a string, allocating only the first time. A small
// direct-mapped cache in front of the map answers the common case (the
// same few comms) in a compare instead of a hash.
func (d *decoder) intern(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	h := (uint(len(b))*31 + uint(b[0])*7 + uint(b[len(b)-1])) % uint(len(d.recent))
	if s := d.recent[h]; s == string(b) { // comparing with string(b) does not allocate
		return s
	}
	s, ok := d.strs[string(b)] // nor does a lookup by it
	if !ok {
		if d.strs == nil || len(d.strs) >= internMax {
			d.strs = make(map[string]string)
		}
		s = string(b)
		d.strs[s] = s
	}
	d.recent[h] = s
	return s
}

// pathNames returns the non-empty leading components of names as strings,
// the same slice every time for the same components.
func (d *decoder) pathNames(names [][48]int8) []string {
	d.key = d.key[:0]
	n := 0
	for i := range names {
		c := cbytes(names[i][:])
		if len(c) == 0 {
			break
		}
		d.key = append(append(d.key, c...), 0)
		n++
	}
	if n == 0 {
		return nil
	}
	if v, ok := d.names[string(d.key)]; ok {
		return v
	}
	v := make([]string, n)
	for i := range v {
		v[i] = d.intern(cbytes(names[i][:]))
	}
	if d.names == nil || len(d.names) >= internMax {
		d.names = make(map[string][]string)
	}
	d.names[string(d.key)] = v
	return v
}

func (d *decoder) fsync(f *event.Fsync, e *fsyncFsyncEvent) {
	*f = event.Fsync{
		Syscall: event.Syscall(e.Syscall), PID: e.Pid, TID: e.Tid, Comm: d.intern(cbytes(e.Comm[:])),
		FD: e.Fd, Dev: event.Dev(e.Dev), IsBlockdev: e.IsBlockdev != 0, Ino: e.Ino,
		FSType: d.intern(cbytes(e.Fstype[:])), CgroupID: e.CgroupId, StartNs: e.StartNs, EndNs: e.EndNs, Ret: e.Ret,
		Names: d.pathNames(e.Names[:]),
	}
}

func (d *decoder) block(b *event.Block, e *blockBlkEvent) {
	*b = event.Block{
		Rq: e.Rq, Dev: event.Dev(e.Dev), Op: event.Op(e.Op), Flags: event.ReqFlags(e.Flags),
		CmdFlags: e.CmdFlags, Sector: e.Sector, Bytes: e.Bytes, Error: e.Error, Final: e.Final != 0,
		InsertNs: e.InsertNs, IssueNs: e.IssueNs, CompleteNs: e.CompleteNs,
		PID: e.Pid, TID: e.Tid, Comm: d.intern(cbytes(e.Comm[:])),
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
	if t.ring != nil {
		errs = append(errs, t.ring.close())
	}
	for _, l := range t.links {
		errs = append(errs, l.Close())
	}
	t.links = nil
	if t.journal != nil {
		t.journal.Close()
	}
	if t.stacked != nil {
		t.stacked.Close()
	}
	if t.extras != nil {
		t.extras.Close()
	}
	errs = append(errs, t.block.Close(), t.fsync.Close())
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
