package tracer

//go:generate go run github.com/cilium/ebpf/cmd/bpf2go -cc ${BPF_CLANG} -cflags "-O2 -g -Wall -Werror -I../bpf -I.." -target amd64,arm64 -type commit_event -type commit_write -type commit_save -type commit_msg -type commit_counts commit ../bpf/commit.bpf.c

import (
	"errors"
	"fmt"
	"go/version"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/features"
	"github.com/cilium/ebpf/link"
	"github.com/cilium/ebpf/ringbuf"

	"github.com/etcdscope/etcdscope/event"
)

// CommitConfig selects the etcd process whose write path the commit
// tracer times with uprobes on etcd's own Go functions.
type CommitConfig struct {
	// PID is the etcd process (required): the probes go on its
	// executable (/proc/PID/exe) and fire only in it.
	PID int
	// RingBytes is the ring buffer size (a power of two ≥ page size); 0
	// means DefaultRingBytes (2 MiB, ~40k events).
	RingBytes uint32
	// PerPointLinks attaches one perf-event uprobe per probe point even
	// where the kernel has uprobe_multi links (tests measure both).
	PerPointLinks bool
	// Sched also follows the scheduler states of a thread inside etcd's
	// (*WAL).sync (tp_btf sched_switch and sched_wakeup: event.CommitSched
	// records), so that a CPU wait there (run-queue wait, or a cgroup's
	// CPU throttling, which Linux 6.18+ applies on the return to user
	// space, outside any syscall) is seen. They run at every context
	// switch on the machine (one hash lookup for other threads). Where
	// they cannot be loaded or attached, PartSched is unavailable.
	Sched bool
	// Raw also sends every probe's firing (the reference stream an
	// analysis/commit.Assembler turns into the same records the kernel
	// assembles), beside the assembled records. Needs SampleEvery <= 1.
	Raw bool
	// SampleEvery follows 1 write in N (per CPU, decided in the kernel at
	// the write's entry: the probes of a write not followed only look it
	// up); 0 and 1 follow every write. The WAL's Saves and syncs and the
	// followers' acks are always followed. Counts says how many writes
	// were seen and followed.
	SampleEvery uint32
	// Profile adds each program run's time to Counts' RunNs, by probe
	// kind (two clock reads a run).
	Profile bool
	// NoGRPC leaves the unary RPC around each write unprobed (PartGRPC
	// unavailable: writes start and end at the write's own function, no
	// grpc part): two firings a write fewer, one of them single-stepped.
	NoGRPC bool
	// RetProbes puts a function's return probes at its RET instructions
	// even where GoBinary.ReturnSites finds emulated points after each of
	// its calls (a RET is single-stepped: a second trap per firing).
	RetProbes bool
}

// CommitCounts are the commit program's counters, summed over CPUs.
type CommitCounts struct {
	// Fired counts the probes' firings by kind (index: event.CommitKind).
	Fired [event.CommitSaveSent + 1]uint64
	// RunNs is the program's time by kind (CommitConfig.Profile), ns.
	RunNs [event.CommitSaveSent + 1]uint64
	// WritesSeen counts the writes that entered etcd's write function,
	// WritesSampled those followed (1 in CommitConfig.SampleEvery), and
	// WritesDropped the followed ones forgotten (a full map, or a failed
	// proposal: returned and never applied).
	WritesSeen, WritesSampled, WritesDropped uint64
	// WritesCut counts the followed writes still in progress when Detach
	// took the probes off (entered, not yet returned): their records
	// never come. Counted by Go, not by the kernel.
	WritesCut uint64
}

// CommitPart names a part of a write that one or more probes show; a
// probe that cannot be attached makes its part unavailable.
type CommitPart string

// The parts of a write the commit tracer can time.
const (
	PartWrite   CommitPart = "write"          // the write itself (begin, end): required
	PartID      CommitPart = "write_id"       // which request id the write is, to follow it to apply
	PartWAL     CommitPart = "wal"            // the leader's WAL append (Save) and its fdatasync (sync)
	PartQuorum  CommitPart = "quorum"         // the Ready's send and the followers' acks
	PartApply   CommitPart = "apply"          // applying the committed entry
	PartWALSync CommitPart = "wal_sync"       // the WAL sync inside the WAL append: the encoder's write(2), then the fdatasync
	PartGRPC    CommitPart = "grpc"           // the unary RPC around the write (decode, interceptors, encode)
	PartSched   CommitPart = "wal_sync_sched" // the thread's scheduler states inside the WAL sync (CommitConfig.Sched)
)

// commitProbe is one probe point: a function (by its receiver's package,
// resolved per etcdBuild, and its name), at entry or at its RETs.
type commitProbe struct {
	kind event.CommitKind
	pkg  etcdPkg
	fn   string // "processInternalRaftRequestOnce", "Save", ...
	ret  bool
	part CommitPart
}

// etcdPkg is the receiver type a probed function belongs to, whose
// package path depends on etcd's release line (etcdBuild).
type etcdPkg int

const (
	pkgServer   etcdPkg = iota // etcdserver.(*EtcdServer)
	pkgWait                    // pkg/wait.(*list)
	pkgWAL                     // wal.(*WAL)
	pkgRafthttp                // rafthttp.(*Transport)
	pkgGRPC                    // grpc.(*Server): the same path in every release
	etcdPkgs
)

// etcdBuild is one line of etcd's releases as the probes see it: the
// package paths of the probed functions (its module's layout) and what
// the probes read that differs between lines (Go's amd64 register ABI
// applied to its raftpb structs). The write function's path tells the
// lines apart (pickBuild).
type etcdBuild struct {
	name string
	// prefixes holds each receiver's "path.(*T)." by etcdPkg, newest
	// release first where the line moved it (v3.6's storage/wal).
	prefixes [etcdPkgs][]string
	// entrySize is sizeof(raftpb.Entry): the stride of a Save's and a
	// MsgApp's entries (commit.bpf.c's commit_entry_size).
	entrySize uint32
	// saveEntsOnStack: (*WAL).Save(st, ents) is passed ents on the
	// stack (commit_save_ents_stack), not in the 5th and 6th registers.
	saveEntsOnStack bool
}

const grpcServer = "google.golang.org/grpc.(*Server)."

// etcdBuilds are the release lines the commit tracer probes. Each one's
// reads were checked against its machine code (docs/commit.md, "Which
// etcd"):
//
//   - v3.5/v3.6 (module go.etcd.io/etcd/server/v3; raftpb structs without
//     XXX_unrecognized): Entry 48 bytes (Term 0, Index 8); HardState 3
//     words, so Save's ents are in RSI/R8.
//   - v3.4 (module go.etcd.io/etcd; gogoproto structs that end in
//     XXX_unrecognized []byte): Entry 72 bytes (Term 0, Index 8);
//     HardState 6 words, so the receiver and st take 7 of amd64's 9
//     integer argument registers and ents (3 words) is passed on the
//     stack (pointer at SP+8, length at SP+16 at the entry). Message's
//     leading fields (Type 0, From 16, Index 40, Entries 48), Process's
//     m on the stack, Send's msgs, Register's and Trigger's id and
//     applyEntryNormal's e are as in v3.5/v3.6.
var etcdBuilds = []etcdBuild{
	{
		name: "v3.5/v3.6",
		prefixes: [etcdPkgs][]string{
			pkgServer:   {"go.etcd.io/etcd/server/v3/etcdserver.(*EtcdServer)."},
			pkgWait:     {"go.etcd.io/etcd/pkg/v3/wait.(*list)."},
			pkgWAL:      {"go.etcd.io/etcd/server/v3/storage/wal.(*WAL).", "go.etcd.io/etcd/server/v3/wal.(*WAL)."},
			pkgRafthttp: {"go.etcd.io/etcd/server/v3/etcdserver/api/rafthttp.(*Transport)."},
			pkgGRPC:     {grpcServer},
		},
		entrySize: 48,
	},
	{
		name: "v3.4",
		prefixes: [etcdPkgs][]string{
			pkgServer:   {"go.etcd.io/etcd/etcdserver.(*EtcdServer)."},
			pkgWait:     {"go.etcd.io/etcd/pkg/wait.(*list)."},
			pkgWAL:      {"go.etcd.io/etcd/wal.(*WAL)."},
			pkgRafthttp: {"go.etcd.io/etcd/etcdserver/api/rafthttp.(*Transport)."},
			pkgGRPC:     {grpcServer},
		},
		entrySize:       72,
		saveEntsOnStack: true,
	},
}

// names returns p's function names in build b, newest first.
func (p commitProbe) names(b etcdBuild) []string {
	var ns []string
	for _, pre := range b.prefixes[p.pkg] {
		ns = append(ns, pre+p.fn)
	}
	return ns
}

// pickBuild returns the release line whose write function bin has; ok
// is false when it has none of theirs.
func pickBuild(bin *GoBinary) (etcdBuild, bool) {
	for _, b := range etcdBuilds {
		if _, err := findFunc(bin, commitProbes[0].names(b), false); err == nil {
			return b, true
		}
	}
	return etcdBuilds[0], false
}

// commitProbes are the functions of etcd's write path (server/etcdserver
// v3_server.go, server.go, raft.go; storage/wal/wal.go), chosen so that
// each fires once per write or once per Raft Ready, not per key. The
// first is the write's own function.
var commitProbes = []commitProbe{
	{event.CommitProposeEnter, pkgServer, "processInternalRaftRequestOnce", false, PartWrite},
	{event.CommitProposeRet, pkgServer, "processInternalRaftRequestOnce", true, PartWrite},
	{event.CommitRegister, pkgWait, "Register", false, PartID},
	{event.CommitTrigger, pkgWait, "Trigger", false, PartApply},
	{event.CommitApplyEntry, pkgServer, "applyEntryNormal", false, PartApply},
	{event.CommitApplyAll, pkgServer, "applyAll", false, PartApply},
	{event.CommitSaveEnter, pkgWAL, "Save", false, PartWAL},
	{event.CommitSaveRet, pkgWAL, "Save", true, PartWAL},
	{event.CommitSyncEnter, pkgWAL, "sync", false, PartWALSync},
	{event.CommitSyncRet, pkgWAL, "sync", true, PartWALSync},
	{event.CommitSend, pkgRafthttp, "Send", false, PartQuorum},
	{event.CommitAppResp, pkgServer, "Process", false, PartQuorum},
	{event.CommitRPCEnter, pkgGRPC, "processUnaryRPC", false, PartGRPC},
	{event.CommitRPCRet, pkgGRPC, "processUnaryRPC", true, PartGRPC},
}

// CommitTracer times etcd's write path with uprobes on its Go functions
// (found through the binary's pclntab; see CommitPart for what each
// shows). Return probes are uprobes at each RET instruction; records are
// keyed by goroutine (the g pointer) and joined in analysis/commit. It
// has the shape of Tracer[event.Commit].
type CommitTracer struct {
	objs commitObjects
	// mu guards links and what Attach needs against Detach, Attach and
	// Close running at once (serve's duty cycle beside its shutdown).
	mu     sync.Mutex
	links  []link.Link
	ex     *link.Executable // etcd's executable, for Attach
	at     []uprobeAt       // the probe points, for Attach
	pid    int
	sched  bool // the scheduler programs were attached at start: Attach attaches them again
	closed bool
	cut    atomic.Uint64 // CommitCounts.WritesCut
	ring   *quietRing
	probes []event.Probe
	down   map[CommitPart]event.Probe // part -> the probe that left it unavailable, and why
	rec    ringbuf.Record
	multi  bool // links is one uprobe_multi link
	build  etcdBuild

	closeOnce sync.Once
	closeErr  error
}

// NewCommit loads the commit program and attaches it to etcd's functions
// in process cfg.PID. A function the binary lacks (another etcd version,
// inlined, renamed) leaves its part unavailable (Unavailable, Probes);
// missing the write's own function is an error wrapping
// ErrGoFuncNotFound. Errors wrap ErrNoPrivilege or ErrNoBTF where those
// are the cause.
func NewCommit(cfg CommitConfig) (_ *CommitTracer, err error) {
	if cfg.PID <= 0 {
		return nil, errors.New("commit tracer needs the etcd process id")
	}
	if err := prepare(""); err != nil {
		return nil, err
	}
	t := &CommitTracer{down: map[CommitPart]event.Probe{}}
	defer func() {
		if err != nil {
			t.Close()
		}
	}()
	exe := "/proc/" + strconv.Itoa(cfg.PID) + "/exe"
	bin, err := OpenGoBinary(exe)
	if err != nil {
		return nil, err
	}
	defer bin.Close()

	// The release line, by its write function's package path; then the
	// probe points: every function's entry or RETs, each with its kind
	// as the cookie.
	build, found := pickBuild(bin)
	t.build = build
	if err := registerABI(bin.GoVersion()); err != nil && found {
		return nil, err
	}
	var at []uprobeAt
	for _, p := range commitProbes {
		if p.part == PartGRPC && cfg.NoGRPC {
			t.down[PartGRPC] = event.Probe{Name: "uprobe/" + p.names(build)[0], Reason: event.ReasonConfigured}
			continue
		}
		names := p.names(build)
		fn, ferr := findFunc(bin, names, true)
		what := "uprobe/" + names[0]
		if p.ret {
			what += " (RET)"
		}
		if ferr != nil {
			missing := event.Probe{Name: what, Dark: event.DarkCommitFunction, Reason: event.ReasonNoFunction, Err: shortErr(ferr)}
			t.probes = append(t.probes, missing)
			if _, ok := t.down[p.part]; !ok {
				t.down[p.part] = missing
			}
			continue
		}
		offsets := []uint64{fn.EntryOffset}
		if p.ret {
			offsets = fn.RetOffsets
			sites, ok, err := bin.ReturnSites(fn)
			if err != nil {
				return nil, err
			}
			if ok && !cfg.RetProbes {
				offsets = sites
				what = "uprobe/" + names[0] + " (return sites)"
			}
		}
		for _, off := range offsets {
			at = append(at, uprobeAt{fn.Name, off, uint64(p.kind)})
		}
		t.probes = append(t.probes, event.Probe{Name: what + " " + fn.Name, Attached: true})
	}
	if down, ok := t.down[PartWrite]; ok {
		return nil, writePathErr(build, found, down.Err)
	}
	// One uprobe_multi link for every point where the kernel has it
	// (Linux 6.6+): closing it unregisters them all and waits for the
	// kernel's uprobe grace period once, where one perf-event uprobe per
	// point waits once each. On 6.18 (2 cores, etcd v3.6) that detach took
	// 4.2-4.9 s per-point, 0.05-0.09 s as one link: most of commit's exit
	// time, and of the reaping of a killed etcdscope. The program's attach
	// type is fixed at load, so a failed multi attach reloads it for
	// per-point links.
	t.multi = !cfg.PerPointLinks && features.HaveBPFLinkUprobeMulti() == nil
	if err = t.load(cfg, exe, at); err != nil && t.multi {
		t.objs.Close()
		t.objs, t.multi = commitObjects{}, false
		err = t.load(cfg, exe, at)
	}
	if err != nil {
		return nil, err
	}
	t.attachSched()
	if t.ring, err = openQuietRing(t.objs.CommitEvents); err != nil {
		return nil, err
	}
	return t, nil
}

// commitCore is the commit object without its scheduler programs, loaded
// when CommitConfig.Sched is off or they cannot be loaded.
type commitCore struct {
	CommitProbe *ebpf.Program `ebpf:"commit_probe"`
	commitMaps
}

// loadObjects loads spec into t.objs: with the scheduler programs when
// sched (PartSched unavailable, and the rest loaded, when they fail).
func (t *CommitTracer) loadObjects(spec *ebpf.CollectionSpec, sched bool) error {
	if sched {
		err := spec.LoadAndAssign(&t.objs, nil)
		if err == nil {
			return nil
		}
		t.down[PartSched] = event.Probe{Name: "tp_btf/sched_switch+sched_wakeup", Reason: event.ReasonLoadFailed, Err: explainLoad("commit sched programs", err).Error()}
	}
	var core commitCore
	if err := spec.LoadAndAssign(&core, nil); err != nil {
		return explainLoad("commit program", err)
	}
	t.objs.CommitProbe, t.objs.commitMaps = core.CommitProbe, core.commitMaps
	return nil
}

// attachSched attaches the scheduler programs, if loaded.
func (t *CommitTracer) attachSched() {
	if t.objs.CommitSchedSwitch == nil {
		return
	}
	if err := t.attachSchedLinks(); err != nil {
		t.down[PartSched] = event.Probe{Name: "tp_btf sched_switch+sched_wakeup", Reason: event.ReasonAttachFailed, Err: err.Error()}
		return
	}
	for _, p := range []*ebpf.Program{t.objs.CommitSchedSwitch, t.objs.CommitSchedWakeup} {
		t.probes = append(t.probes, event.Probe{Name: "tp_btf " + p.String(), Attached: true})
	}
	t.sched = true
}

// attachSchedLinks attaches both scheduler programs, or neither.
func (t *CommitTracer) attachSchedLinks() error {
	var ls []link.Link
	for _, p := range []*ebpf.Program{t.objs.CommitSchedSwitch, t.objs.CommitSchedWakeup} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			closeLinks(ls)
			return fmt.Errorf("attaching %v: %w", p, err)
		}
		ls = append(ls, l)
	}
	t.links = append(t.links, ls...)
	return nil
}

// uprobeAt is one probe point: a function's entry or one of its RETs
// (file offset), with the cookie the program reads (its kind).
type uprobeAt struct {
	fn     string
	off    uint64
	cookie uint64
}

// load loads the commit program (for uprobe_multi when t.multi) and
// attaches it at every point of at in process cfg.PID: one link, or one
// per point.
func (t *CommitTracer) load(cfg CommitConfig, exe string, at []uprobeAt) error {
	spec, err := loadCommit()
	if err != nil {
		return fmt.Errorf("reading commit object: %w", err)
	}
	ring := cfg.RingBytes
	if ring == 0 {
		ring = DefaultRingBytes
	}
	spec.Maps["commit_events"].MaxEntries = ring
	every := max(cfg.SampleEvery, 1)
	if cfg.Raw && every > 1 {
		return errors.New("commit tracer: the raw stream follows every write (SampleEvery 1)")
	}
	vars := map[string]any{"commit_wake_bytes": uint64(ring / 8), "commit_sample_every": every,
		"commit_raw": boolByte(cfg.Raw), "commit_profile": boolByte(cfg.Profile),
		"commit_entry_size": t.build.entrySize, "commit_save_ents_stack": boolByte(t.build.saveEntsOnStack)}
	if err := setVariables(spec, vars); err != nil {
		return err
	}
	if t.multi {
		spec.Programs["commit_probe"].AttachType = ebpf.AttachTraceUprobeMulti
	}
	if err := t.loadObjects(spec, cfg.Sched); err != nil {
		return err
	}
	ex, err := link.OpenExecutable(exe)
	if err != nil {
		return fmt.Errorf("opening %s for uprobes: %w", exe, err)
	}
	t.ex, t.at, t.pid = ex, at, cfg.PID
	return t.attachUprobes()
}

// attachUprobes attaches the loaded program at every point of t.at in
// process t.pid: one link, or one per point.
func (t *CommitTracer) attachUprobes() error {
	if t.multi {
		opt := &link.UprobeMultiOptions{PID: uint32(t.pid)}
		for _, a := range t.at {
			opt.Addresses = append(opt.Addresses, a.off)
			opt.Cookies = append(opt.Cookies, a.cookie)
		}
		l, err := t.ex.UprobeMulti(nil, t.objs.CommitProbe, opt)
		if err != nil {
			return fmt.Errorf("attaching one uprobe_multi link at %d points: %w", len(t.at), err)
		}
		t.links = append(t.links, l)
		return nil
	}
	for _, a := range t.at {
		l, err := t.ex.Uprobe(a.fn, t.objs.CommitProbe, &link.UprobeOptions{Address: a.off, PID: t.pid, Cookie: a.cookie})
		if err != nil {
			return fmt.Errorf("attaching uprobe %s at file offset %#x (needs uprobes, CONFIG_UPROBE_EVENTS, and bpf cookies, Linux 5.15+): %w", a.fn, a.off, err)
		}
		t.links = append(t.links, l)
	}
	return nil
}

// Multi reports whether the probes are one uprobe_multi link (else one
// perf-event uprobe per point).
func (t *CommitTracer) Multi() bool { return t.multi }

// Build names the etcd release line whose functions and layouts the
// probes use ("v3.5/v3.6", "v3.4").
func (t *CommitTracer) Build() string { return t.build.name }

// writePathErr says why the write path cannot be followed: no release
// line's write function in the binary, or build's not probeable (why:
// no RET found, not amd64). It is ErrGoFuncNotFound, so that commit
// falls back to the model.
func writePathErr(build etcdBuild, found bool, why string) error {
	if !found {
		return notFoundErr("etcd's write function is not in the binary's symbol table: " + commitProbes[0].names(etcdBuilds[0])[0])
	}
	return notFoundErr("etcd " + build.name + ": its write function cannot be probed: " + why)
}

// registerABI returns an error (ErrGoFuncNotFound, so that commit falls
// back to the model) when etcd was built by a Go release older than 1.17,
// whose functions take their arguments on the stack (ABI0): the probes
// read Go's amd64 register ABI (ABIInternal), the default since Go 1.17.
// etcd's own releases of v3.4 and early v3.5 were built with older Go;
// an unknown version (no build info) is taken as recent.
func registerABI(goVersion string) error {
	if version.IsValid(goVersion) && version.Compare(goVersion, "go1.17") < 0 {
		return notFoundErr("etcd built with " + goVersion + ": its functions take their arguments on the stack (Go's register ABI came with go1.17), which these probes do not read")
	}
	return nil
}

// notFoundErr is an error that reads as itself and is ErrGoFuncNotFound.
type notFoundErr string

func (e notFoundErr) Error() string { return string(e) }

// Is makes errors.Is(e, ErrGoFuncNotFound) true.
func (e notFoundErr) Is(target error) bool { return target == ErrGoFuncNotFound }

// findFunc returns the first of names the binary has.
func findFunc(bin *GoBinary, names []string, rets bool) (GoFunc, error) {
	var first error
	for _, n := range names {
		fn, err := bin.Func(n, rets)
		if err == nil {
			return fn, nil
		}
		if first == nil {
			first = err
		}
	}
	return GoFunc{}, first
}

// Unavailable returns the parts of a write the binary's probes cannot show,
// each with the probe that left it dark and why (its Reason and Err).
func (t *CommitTracer) Unavailable() map[CommitPart]event.Probe { return t.down }

// Probes lists every probe with whether it is attached.
func (t *CommitTracer) Probes() []event.Probe { return t.probes }

// Lost returns how many events did not fit in the ring buffer or whose
// arguments could not be read (summed over CPUs).
func (t *CommitTracer) Lost() (uint64, error) {
	return sumPerCPU(t.objs.CommitLost, "commit_lost")
}

// boolByte is a C bool (__u8) for a const volatile.
func boolByte(b bool) uint8 {
	if b {
		return 1
	}
	return 0
}

// Counts returns the commit program's counters, summed over CPUs.
func (t *CommitTracer) Counts() (CommitCounts, error) {
	var perCPU []commitCommitCounts
	var c CommitCounts
	if err := t.objs.CommitCounters.Lookup(uint32(0), &perCPU); err != nil {
		return c, fmt.Errorf("reading commit_counters: %w", err)
	}
	for i := range perCPU {
		p := &perCPU[i]
		for k := range c.Fired {
			c.Fired[k] += p.Fired[k]
			c.RunNs[k] += p.RunNs[k]
		}
		c.WritesSeen += p.WritesSeen
		c.WritesSampled += p.WritesSampled
		c.WritesDropped += p.WritesDropped
	}
	c.WritesCut = t.cut.Load()
	return c, nil
}

// Read blocks until the next record and decodes it into ev: a probe's
// firing (a follower's ack, a scheduler record, and with
// CommitConfig.Raw every firing) or a record assembled in the kernel (a
// write, a WAL Save, a sync). Every record ends with its tid and kind. It
// returns ErrClosed after Close and ErrDrained once Drain has emptied the
// ring.
func (t *CommitTracer) Read(ev *event.Commit) error {
	for {
		if err := t.ring.read(&t.rec); err != nil {
			return err
		}
		if len(t.rec.RawSample) != 0 {
			break
		}
	}
	raw := t.rec.RawSample
	if len(raw) < 4 {
		return fmt.Errorf("decoding commit record: %d bytes is too short", len(raw))
	}
	switch kind := event.CommitKind(raw[len(raw)-4]); kind {
	case event.CommitWriteDone:
		e, err := fixed[commitCommitWrite](raw, "commit write")
		if err != nil {
			return err
		}
		*ev = event.Commit{Kind: kind, TsNs: max(e.EndNs, e.RpcEndNs), Goroutine: e.Goroutine, TID: e.Tid,
			Write: event.CommitWrite{ID: e.Id, Index: e.Index, RPCStartNs: e.RpcStartNs, StartNs: e.StartNs, EndNs: e.EndNs,
				RPCEndNs: e.RpcEndNs, BatchNs: e.BatchNs, TriggerNs: e.TriggerNs}}
	case event.CommitSaveDone, event.CommitSyncDone:
		e, err := fixed[commitCommitSave](raw, "commit save")
		if err != nil {
			return err
		}
		*ev = event.Commit{Kind: kind, TsNs: max(e.EndNs, e.SyncEndNs), TID: e.Tid,
			Save: event.CommitSave{First: e.First, Last: e.Last, Term: e.Term, SendNs: e.SendNs, StartNs: e.StartNs, EndNs: e.EndNs,
				SyncStartNs: e.SyncStartNs, SyncEndNs: e.SyncEndNs, SyncTIDs: e.SyncTids}}
	case event.CommitMsgApp, event.CommitSaveSent:
		e, err := fixed[commitCommitMsg](raw, "commit msg")
		if err != nil {
			return err
		}
		*ev = event.Commit{Kind: kind, TsNs: e.TsNs, TID: e.Tid, Msg: event.CommitMsg{From: e.From, Term: e.Term, First: e.First, Last: e.Last}}
	default:
		e, err := fixed[commitCommitEvent](raw, "commit")
		if err != nil {
			return err
		}
		*ev = event.Commit{Kind: event.CommitKind(e.Kind), TsNs: e.TsNs, Goroutine: e.Goroutine, TID: e.Tid, A: e.A, B: e.B, C: e.C}
	}
	return nil
}

// ProgramStats returns the statistics of the commit program (one program
// serves every probe).
func (t *CommitTracer) ProgramStats() []event.ProgramStats {
	progs := map[string]*ebpf.Program{"commit_probe": t.objs.CommitProbe}
	if t.objs.CommitSchedSwitch != nil {
		progs["commit_sched_switch"], progs["commit_sched_wakeup"] = t.objs.CommitSchedSwitch, t.objs.CommitSchedWakeup
	}
	return programStats(progs)
}

// Missed returns how many times the kernel skipped the program because a
// BPF program was already running on that CPU (each is an event lost).
func (t *CommitTracer) Missed() uint64 {
	n := missed(t.objs.CommitProbe)
	if t.objs.CommitSchedSwitch != nil {
		n += missed(t.objs.CommitSchedSwitch) + missed(t.objs.CommitSchedWakeup)
	}
	return n
}

// Drain makes a Read in progress, and the ones after it, return every
// record already in the ring buffer and then ErrDrained.
func (t *CommitTracer) Drain() error { return t.ring.drain() }

// Detach takes every probe off (the uprobes and the scheduler programs),
// keeping the programs and maps loaded, so that etcd's functions trap no
// more; Attach puts them back (serve --commit-duty). The followed writes
// still in progress are counted in WritesCut: their records will not
// come. Detaching a detached tracer does nothing.
func (t *CommitTracer) Detach() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed || len(t.links) == 0 {
		return nil
	}
	err := errors.Join(closeLinks(t.links)...)
	t.links = nil
	// Each uprobe's detach waited for the programs running on it (the
	// kernel's uprobe grace period): the maps are still now.
	n, cerr := t.countCut()
	t.cut.Add(n)
	return errors.Join(err, cerr)
}

// Attach puts the probes back after Detach: first it clears the maps of
// the state the last window left (writes, RPCs, ids, applies, Raft
// goroutines, threads in sync: safe while nothing is attached), so that
// a probe of the new window never joins a part of the old one. Attaching
// an attached tracer does nothing; after Close it returns ErrClosed.
func (t *CommitTracer) Attach() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return ErrClosed
	}
	if len(t.links) > 0 {
		return nil
	}
	if err := t.clearState(); err != nil {
		return err
	}
	if err := t.attachUprobes(); err != nil {
		return err
	}
	if t.sched {
		if err := t.attachSchedLinks(); err != nil {
			return err
		}
	}
	return nil
}

// Attached reports whether the probes are on (not detached).
func (t *CommitTracer) Attached() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.links) > 0
}

// wsSkip is commit.bpf.c's WS_SKIP: a write seen but not followed.
const wsSkip = 8

// countCut counts the followed writes in commit_writes (each is a write
// entered and not yet sent: once the probes are off, never sent).
func (t *CommitTracer) countCut() (uint64, error) {
	var g uint64
	var w commitCommitWstate
	var n uint64
	it := t.objs.CommitWrites.Iterate()
	for it.Next(&g, &w) {
		if w.Flags&wsSkip == 0 {
			n++
		}
	}
	if err := it.Err(); err != nil {
		return n, fmt.Errorf("reading commit_writes: %w", err)
	}
	return n, nil
}

// stateMaps are the commit program's maps of writes, RPCs, ids, apply
// and Raft goroutines, and threads in sync, in progress.
func (t *CommitTracer) stateMaps() []*ebpf.Map {
	return []*ebpf.Map{t.objs.CommitWrites, t.objs.CommitRpcs, t.objs.CommitIds, t.objs.CommitApplies, t.objs.CommitRafts, t.objs.InSync}
}

// clearState empties the commit program's state maps.
func (t *CommitTracer) clearState() error {
	for _, m := range t.stateMaps() {
		if err := clearMap(m); err != nil {
			return err
		}
	}
	return nil
}

// clearMap deletes every key of hash map m (its keys read first: deleting
// while walking them with NextKey would restart the walk).
func clearMap(m *ebpf.Map) error {
	var keys [][]byte
	key := make([]byte, m.KeySize())
	var prev any // nil: the first key
	for {
		if err := m.NextKey(prev, &key); err != nil {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				break
			}
			return fmt.Errorf("clearing %v: %w", m, err)
		}
		keys = append(keys, append([]byte(nil), key...))
		prev = keys[len(keys)-1]
	}
	for _, k := range keys {
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("clearing %v: %w", m, err)
		}
	}
	return nil
}

// Close detaches every probe and frees every object; it is safe to call
// more than once, concurrently, and on a half-built tracer.
func (t *CommitTracer) Close() error {
	t.closeOnce.Do(func() { t.closeErr = t.close() })
	return t.closeErr
}

func (t *CommitTracer) close() error {
	var errs []error
	if t.ring != nil {
		errs = append(errs, t.ring.close())
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	errs = append(errs, closeLinks(t.links)...)
	t.links = nil
	errs = append(errs, t.objs.Close())
	return errors.Join(errs...)
}

// Writes returns CommitCounts' WritesSeen, WritesSampled and
// WritesDropped (pipeline.CommitSource).
func (t *CommitTracer) Writes() (seen, sampled, dropped uint64, err error) {
	c, err := t.Counts()
	return c.WritesSeen, c.WritesSampled, c.WritesDropped, err
}

// WritesCut returns CommitCounts' WritesCut: the followed writes a
// Detach cut short.
func (t *CommitTracer) WritesCut() uint64 { return t.cut.Load() }
