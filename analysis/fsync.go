package analysis

import (
	"cmp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/etcdscope/etcdscope/event"
)

// SchemaVersion is the version of the JSON Lines records this package
// writes and reads (docs/schema.md). Readers refuse newer major versions.
const SchemaVersion = 1

// Layer names, as JSON keys and report columns use them.
const (
	LayerDataWriteback = "data_writeback"
	LayerJournal       = "journal"
	LayerDeviceFlush   = "device_flush"
	LayerBlockQueue    = "block_queue"
	LayerOther         = "other"
)

// LayerNames lists the layers in report order.
var LayerNames = []string{LayerDataWriteback, LayerJournal, LayerDeviceFlush, LayerBlockQueue, LayerOther}

// Layers is the partition of one fsync's wall time, in ns; the fields sum
// exactly to the fsync's total (see the package doc for the rule).
type Layers struct {
	DataWritebackNs int64 `json:"data_writeback_ns"`
	JournalNs       int64 `json:"journal_ns"`
	DeviceFlushNs   int64 `json:"device_flush_ns"`
	BlockQueueNs    int64 `json:"block_queue_ns"`
	OtherNs         int64 `json:"other_ns"`
}

// Get returns the layer called name (one of LayerNames), in ns.
func (l Layers) Get(name string) int64 {
	switch name {
	case LayerDataWriteback:
		return l.DataWritebackNs
	case LayerJournal:
		return l.JournalNs
	case LayerDeviceFlush:
		return l.DeviceFlushNs
	case LayerBlockQueue:
		return l.BlockQueueNs
	}
	return l.OtherNs
}

// Sum returns the sum of all layers, ns.
func (l Layers) Sum() int64 {
	return l.DataWritebackNs + l.JournalNs + l.DeviceFlushNs + l.BlockQueueNs + l.OtherNs
}

// Request roles.
const (
	RoleData    = "data"
	RoleJournal = "journal"
	RoleFlush   = "flush"
)

// Request is one block request an fsync waited on, as recorded in JSON.
type Request struct {
	Role       string   `json:"role"` // data, journal or flush
	Dev        string   `json:"dev"`  // disk major:minor
	Op         string   `json:"op"`   // READ, WRITE, FLUSH, ...
	Flags      []string `json:"flags,omitempty"`
	Rwbs       string   `json:"rwbs"`             // as blktrace prints it
	Sector     uint64   `json:"sector,omitempty"` // omitted for flushes: they have none
	Bytes      uint32   `json:"bytes"`
	InsertNs   uint64   `json:"insert_ns,omitempty"` // 0: issued without insertion
	IssueNs    uint64   `json:"issue_ns"`
	CompleteNs uint64   `json:"complete_ns"`
	// NotIssued: a flush the flush state machine completed without
	// issuing it, because it rode on a flush already in flight.
	NotIssued bool `json:"not_issued,omitempty"`
	// Host holds, for a flush on a stacked device (loop), the fsyncs the
	// driver made of its backing file while the flush was in flight: the
	// host level, each with its own layers and requests.
	Host []FsyncRecord `json:"host,omitempty"`
	TID  uint32        `json:"tid"`  // submitting thread
	Comm string        `json:"comm"` // submitting thread's comm
}

// JournalWindow is one journal commit or log force an fsync waited on.
type JournalWindow struct {
	Source  string `json:"source"` // jbd2_commit or xfs_log_force
	Dev     string `json:"dev"`
	Txn     uint32 `json:"txn,omitempty"`
	StartNs uint64 `json:"start_ns"`
	EndNs   uint64 `json:"end_ns"` // for a log force: the fsync's end
}

// FsyncRecord is one attributed fsync: the JSON Lines record of
// `etcdscope fsync --output json` (type "fsync", docs/schema.md).
type FsyncRecord struct {
	Type     string `json:"type"` // always "fsync"
	Version  int    `json:"v"`    // SchemaVersion
	StartNs  uint64 `json:"start_ns"`
	EndNs    uint64 `json:"end_ns"`
	TotalNs  int64  `json:"total_ns"`
	PID      uint32 `json:"pid"`
	TID      uint32 `json:"tid"`
	Comm     string `json:"comm"`
	Syscall  string `json:"syscall"` // fsync or fdatasync
	Datasync bool   `json:"datasync"`
	Ret      int64  `json:"ret"` // 0 or -errno
	FD       int32  `json:"fd"`
	Dev      string `json:"dev"`      // filesystem's device, major:minor
	DevName  string `json:"dev_name"` // e.g. vda1; "" if not a block device
	// Disks are the whole disks whose requests counted (major:minor).
	Disks    []string        `json:"disks,omitempty"`
	FS       string          `json:"fs"`
	Ino      uint64          `json:"ino"`
	Path     string          `json:"path"`
	FileKind string          `json:"file_kind"` // see FileKind
	Layers   Layers          `json:"layers"`
	Flushes  int             `json:"flushes"` // flush-role requests waited on
	Requests []Request       `json:"requests"`
	Journal  []JournalWindow `json:"journal,omitempty"`
	// Sched is the call's time by scheduler state, with "other" split
	// (fsync --sched); nil without it.
	Sched *Sched `json:"sched,omitempty"`
}

// DeviceLookup names a filesystem device and lists the whole disks whose
// requests serve it (host.DeviceResolver in production).
type DeviceLookup func(dev event.Dev) (name string, disks []event.Dev)

// Attributor keeps the recent block and journal events and partitions each
// fsync as it arrives. Events must be added in ring-buffer order; an fsync
// is attributed from the events added before it, which includes everything
// it waited for (those were emitted before the syscall returned).
// Not safe for concurrent use.
type Attributor struct {
	lookup   DeviceLookup
	blocks   []event.Block // in arrival order, ≈ by CompleteNs
	blockBuf []event.Block // the array blocks is a window of (appendBlock)
	partial  map[uint64]event.Block
	journals []event.Journal
	bios     []event.FlushBio // flush bios, by QueueNs
	hosts    []FsyncRecord    // attributed kernel-thread fsyncs, by EndNs
	backing  BackingLookup
	inflight map[uint32]uint64 // tid -> start of an fsync in flight
	latestNs uint64
	prunedNs uint64        // latestNs at the last prune
	sched    bool          // SetSched: split calls by scheduler state
	scheds   []event.Sched // in arrival order, ≈ by Ns
	schedBuf []event.Sched // one call's, reused

	// Per-call scratch and formatting caches: Attribute allocated ~30
	// times per fsync before them (BenchmarkAttributorFsync).
	reqs    []Request // the requests of the call being attributed
	used    []int     // indexes into bios claimed by this call's flushes
	sw      sweep     // its points slice is reused
	devs    map[event.Dev]string
	disks   map[event.Dev]diskNames
	reqFmts map[reqFmtKey]reqFmt
}

// diskNames caches, per filesystem device, the lookup's answer formatted
// for FsyncRecord (Disks is shared by the records: do not modify it).
type diskNames struct {
	devs  []event.Dev
	names []string
}

type reqFmtKey struct {
	op    event.Op
	flags event.ReqFlags
}

// reqFmt is a request's op and flags as JSON writes them; Flags is shared
// by every Request with the same op and flags: do not modify it.
type reqFmt struct {
	flags []string
	rwbs  string
}

// keepNs is how long events are kept when no fsync is in flight: it covers
// the skew between an fsync's start and its enter event's arrival.
const keepNs = 2e9

// pruneEveryNs spaces Attribute's prunes: a prune walks every retained
// event, so pruning on each fsync made Attribute O(2 s of events)
// (BenchmarkAttributorFsync, docs/performance.md).
const pruneEveryNs = 100e6

// inflightMaxNs drops an in-flight entry whose exit never came.
const inflightMaxNs = 120e9

// Backing is the file under a stacked block device (a loop device's
// backing file): where its flushes become fsyncs of the host filesystem.
type Backing struct {
	Dev  event.Dev // the backing file's filesystem (s_dev)
	Ino  uint64
	Path string
}

// BackingLookup returns the backing file of a disk, ok=false for a disk
// that is not stacked (host.DeviceResolver.Backing in production).
type BackingLookup func(disk event.Dev) (Backing, bool)

// SetBackingLookup enables nesting: flush requests on disks that lookup
// knows as stacked get the host-level fsyncs (event.KernelFsync) made of
// their backing file while they were in flight.
func (a *Attributor) SetBackingLookup(lookup BackingLookup) { a.backing = lookup }

// NewAttributor returns an Attributor resolving devices with lookup.
func NewAttributor(lookup DeviceLookup) *Attributor {
	return &Attributor{lookup: lookup, partial: map[uint64]event.Block{}, inflight: map[uint32]uint64{},
		devs: map[event.Dev]string{}, disks: map[event.Dev]diskNames{}, reqFmts: map[reqFmtKey]reqFmt{}}
}

// devString is d.String(), formatted once per device.
func (a *Attributor) devString(d event.Dev) string {
	s, ok := a.devs[d]
	if !ok {
		if len(a.devs) > 4096 {
			clear(a.devs) // bound the cache against a stream of bogus devices
		}
		s = d.String()
		a.devs[d] = s
	}
	return s
}

// diskStrings formats the lookup's disks of filesystem dev, reusing the
// last slice made for dev while the lookup answers the same.
func (a *Attributor) diskStrings(dev event.Dev, disks []event.Dev) []string {
	if len(disks) == 0 {
		return nil
	}
	c, ok := a.disks[dev]
	if ok && slices.Equal(c.devs, disks) {
		return c.names
	}
	c = diskNames{devs: slices.Clone(disks), names: make([]string, len(disks))}
	for i, d := range disks {
		c.names[i] = a.devString(d)
	}
	if len(a.disks) > 4096 {
		clear(a.disks)
	}
	a.disks[dev] = c
	return c.names
}

// reqFormat returns op and flags as REQ_ names and rwbs, made once per
// combination (a disk sees a handful).
func (a *Attributor) reqFormat(op event.Op, flags event.ReqFlags) reqFmt {
	k := reqFmtKey{op, flags}
	f, ok := a.reqFmts[k]
	if !ok {
		if len(a.reqFmts) > 4096 {
			clear(a.reqFmts)
		}
		f = reqFmt{flags: flags.Names(), rwbs: event.Rwbs(op, flags)}
		a.reqFmts[k] = f
	}
	return f
}

// Add records a non-fsync event: event.FsyncEnter, event.Block,
// event.FlushBio, event.Journal, event.Sched, or event.KernelFsync (attributed at once
// and kept to nest under the stacked-device flush it served). Other values
// are ignored.
func (a *Attributor) Add(ev any) {
	switch e := ev.(type) {
	case event.KernelFsync:
		a.addKernelFsync(&e.Fsync)
	case event.FsyncEnter:
		a.addEnter(e)
	case event.Block:
		a.addBlock(&e)
	case event.FlushBio:
		a.addFlushBio(&e)
	case event.Journal:
		a.addJournal(&e)
	case event.Sched:
		a.addSched(&e)
	}
}

// AddEvent is Add of the event ev holds (tracer.FsyncTracer.Read's
// form, which costs no allocation per event); an fsync (KindFsync) is
// ignored, as by Add: pass ev.Fsync to Attribute.
func (a *Attributor) AddEvent(ev *event.Any) {
	switch ev.Kind {
	case event.KindKernelFsync:
		a.addKernelFsync(&ev.Fsync)
	case event.KindFsyncEnter:
		a.addEnter(ev.Enter)
	case event.KindBlock:
		b := ev.Block // addBlock sums partial completions into its copy
		a.addBlock(&b)
	case event.KindFlushBio:
		a.addFlushBio(&ev.FlushBio)
	case event.KindJournal:
		a.addJournal(&ev.Journal)
	case event.KindSched:
		a.addSched(&ev.Sched)
	}
}

func (a *Attributor) addKernelFsync(f *event.Fsync) {
	rec := a.Attribute(*f)
	a.hosts = append(a.hosts, rec)
}

func (a *Attributor) addEnter(e event.FsyncEnter) {
	a.inflight[e.TID] = e.StartNs
	a.see(e.StartNs)
}

// addBlock keeps a final completion, with the bytes of the partial ones
// before it added to e.
func (a *Attributor) addBlock(e *event.Block) {
	a.see(e.CompleteNs)
	if !e.Final {
		if p, ok := a.partial[e.Rq]; ok {
			e.Bytes += p.Bytes
		}
		a.partial[e.Rq] = *e
		return
	}
	if p, ok := a.partial[e.Rq]; ok {
		e.Bytes += p.Bytes
		delete(a.partial, e.Rq)
	}
	a.appendBlock(*e)
	if len(a.blocks)%4096 == 0 {
		a.prune() // bound memory while no fsync comes
	}
}

func (a *Attributor) addFlushBio(e *event.FlushBio) {
	a.see(e.QueueNs)
	a.bios = append(a.bios, *e)
}

func (a *Attributor) addJournal(e *event.Journal) {
	a.see(e.StartNs)
	a.see(e.EndNs)
	a.journals = append(a.journals, *e)
}

// appendBlock appends to blocks, whose window prune slides forward along
// blockBuf: when the window reaches the array's end while it fills at most
// half of it, the live events move back to the front instead of append
// growing a new array by a quarter. Each event is then copied about once,
// where append behind a sliding window allocated, cleared and copied the
// whole window every few thousand events (memclr and memmove led
// BenchmarkAttributorFsync's profile). Dead events past the window keep
// their Comm strings alive until overwritten: bounded by the array.
func (a *Attributor) appendBlock(b event.Block) {
	if len(a.blocks) == cap(a.blocks) {
		if len(a.blocks) <= cap(a.blockBuf)/2 {
			a.blocks = a.blockBuf[:copy(a.blockBuf[:cap(a.blockBuf)], a.blocks)]
		} else {
			// Twice the window, so that the next time it fills at most half.
			a.blockBuf = make([]event.Block, 0, 2*len(a.blocks)+64)
			a.blocks = append(a.blockBuf, a.blocks...)
		}
	}
	a.blocks = append(a.blocks, b)
}

func (a *Attributor) see(ns uint64) {
	if ns > a.latestNs {
		a.latestNs = ns
	}
}

// Retained returns how many block and journal events are held; a bound on
// memory that benchmarks watch.
func (a *Attributor) Retained() int {
	return len(a.blocks) + len(a.journals) + len(a.partial) + len(a.bios) + len(a.hosts)
}

// prune drops events that no fsync in flight or still to come can need.
func (a *Attributor) prune() {
	a.prunedNs = a.latestNs
	horizon := uint64(0)
	if a.latestNs > keepNs {
		horizon = a.latestNs - keepNs
	}
	for tid, start := range a.inflight {
		if a.latestNs > start && a.latestNs-start > inflightMaxNs {
			delete(a.inflight, tid)
			continue
		}
		if start < horizon {
			horizon = start
		}
	}
	i := 0
	for i < len(a.blocks) && a.blocks[i].CompleteNs < horizon {
		i++
	}
	if i > 0 {
		a.blocks = a.blocks[i:]
	}
	j := 0
	for _, jw := range a.journals {
		end := jw.EndNs
		if end == 0 {
			end = jw.StartNs
		}
		if end >= horizon {
			a.journals[j] = jw
			j++
		}
	}
	a.journals = a.journals[:j]
	k := 0
	for k < len(a.bios) && a.bios[k].QueueNs < horizon {
		k++
	}
	if k > 0 {
		a.bios = a.bios[k:]
	}
	h := 0
	for h < len(a.hosts) && a.hosts[h].EndNs < horizon {
		h++
	}
	if h > 0 {
		a.hosts = a.hosts[h:]
	}
	a.pruneScheds(horizon)
}

// Attribute partitions f into layers from the events added so far and
// returns its record (Path and FileKind are left for the caller, who can
// read /proc).
func (a *Attributor) Attribute(f event.Fsync) FsyncRecord {
	delete(a.inflight, f.TID)
	a.see(f.EndNs)
	name, disks := "", []event.Dev(nil)
	if a.lookup != nil {
		name, disks = a.lookup(f.Dev)
	}
	rec := FsyncRecord{
		Type: "fsync", Version: SchemaVersion,
		StartNs: f.StartNs, EndNs: f.EndNs, TotalNs: int64(f.EndNs - f.StartNs),
		PID: f.PID, TID: f.TID, Comm: f.Comm, Syscall: f.Syscall.String(),
		Datasync: f.Syscall == event.SysFdatasync, Ret: f.Ret, FD: f.FD,
		Dev: a.devString(f.Dev), DevName: name, FS: f.FSType, Ino: f.Ino,
		Requests: []Request{},
	}
	if f.IsBlockdev {
		rec.FS = "blockdev"
	}
	rec.Disks = a.diskStrings(f.Dev, disks)
	if f.EndNs < f.StartNs {
		rec.TotalNs = 0
		return rec
	}
	s, e := f.StartNs, f.EndNs
	sw := &a.sw
	sw.init(s, e)
	a.used = a.used[:0]
	// Requests collect in a.reqs and are copied out at the end: one
	// allocation of the right size instead of append's growth.
	a.reqs = a.reqs[:0]
	reqs := &a.reqs

	// Blocks are nearly sorted by completion; start a little early to
	// absorb cross-CPU skew between timestamp and reservation.
	const skew = 10e6
	lo := sort.Search(len(a.blocks), func(i int) bool { return a.blocks[i].CompleteNs+skew >= s })
	for i := lo; i < len(a.blocks); i++ {
		b := &a.blocks[i]
		if b.CompleteNs > e+skew {
			break
		}
		if b.CompleteNs < s || b.CompleteNs > e || !containsDev(disks, b.Dev) {
			continue
		}
		role := roleOf(b, f.TID)
		if role == "" {
			continue
		}
		rf := a.reqFormat(b.Op, b.Flags)
		*reqs = append(*reqs, Request{
			Role: role, Dev: a.devString(b.Dev), Op: b.Op.String(), Flags: rf.flags,
			Rwbs: rf.rwbs, Sector: sectorOf(b), Bytes: b.Bytes,
			InsertNs: b.InsertNs, IssueNs: b.IssueNs, CompleteNs: b.CompleteNs,
			TID: b.TID, Comm: b.Comm,
		})
		issue := b.IssueNs
		switch {
		case b.InsertNs != 0 && b.IssueNs > b.InsertNs:
			sw.add(b.InsertNs, b.IssueNs, catQueue)
		case role == RoleFlush && b.InsertNs == 0 && b.IssueNs == 0:
			// Completed by the flush state machine without being issued:
			// it waited, from its bio's queueing, on a flush already in
			// flight. That wait is device flush time.
			req := &(*reqs)[len(*reqs)-1]
			req.NotIssued = true
			issue = b.CompleteNs
			if q, ok := a.flushAsked(b.Dev, s, b.CompleteNs); ok {
				req.InsertNs, issue = q, q
			}
		case role == RoleFlush && b.InsertNs == 0:
			// A flush request from the flush state machine is issued from
			// kblockd with no insert event: it was asked for when the last
			// flush bio on the disk was queued before it.
			if q, ok := a.flushAsked(b.Dev, s, b.IssueNs); ok {
				(*reqs)[len(*reqs)-1].InsertNs = q
				sw.add(q, b.IssueNs, catQueue)
			}
		}
		if issue == 0 {
			issue = b.InsertNs
		}
		switch role {
		case RoleFlush:
			rec.Flushes++
			sw.add(issue, b.CompleteNs, catFlush)
		case RoleData:
			sw.add(issue, b.CompleteNs, catData)
		case RoleJournal:
			sw.add(issue, b.CompleteNs, catJournal)
		}
	}
	// Journal events arrive ≈ in emit order, like blocks: skip to s.
	jlo := sort.Search(len(a.journals), func(i int) bool { return journalKey(&a.journals[i])+skew >= s })
	for _, j := range a.journals[jlo:] {
		if journalKey(&j) > e+skew {
			break
		}
		switch j.Source {
		case event.JournalJBD2Commit:
			if j.Dev != f.Dev || j.EndNs < s || j.EndNs > e {
				continue
			}
			rec.Journal = append(rec.Journal, JournalWindow{Source: j.Source.String(), Dev: a.devString(j.Dev), Txn: j.Txn, StartNs: j.StartNs, EndNs: j.EndNs})
			sw.add(j.StartNs, j.EndNs, catJournal)
		case event.JournalJBD2Wait:
			if j.TID != f.TID || j.StartNs < s || j.EndNs > e {
				continue
			}
			rec.Journal = append(rec.Journal, JournalWindow{Source: j.Source.String(), Dev: a.devString(j.Dev), Txn: j.Txn, StartNs: j.StartNs, EndNs: j.EndNs})
			sw.add(j.StartNs, j.EndNs, catJournal)
		case event.JournalXFSLogForce:
			if j.Dev != f.Dev || j.TID != f.TID || j.StartNs < s || j.StartNs > e {
				continue
			}
			rec.Journal = append(rec.Journal, JournalWindow{Source: j.Source.String(), Dev: a.devString(j.Dev), StartNs: j.StartNs, EndNs: e})
			sw.add(j.StartNs, e, catJournal)
		}
	}
	var call SchedSplit
	withSched := a.sched && f.Syscall != event.SysKthread // kernel threads' calls are not in inflight.h
	if withSched {
		call = a.schedSweep(f.TID, s, e)
	}
	var other SchedSplit
	rec.Layers, other = sw.partition()
	if withSched {
		rec.Sched = &Sched{Call: call, Other: other}
	}
	if len(*reqs) > 0 {
		rec.Requests = slices.Clone(*reqs)
		clear(*reqs) // drop references to the strings and host records
		// slices.SortFunc is the same pdqsort as the sort.Slice it
		// replaces: requests with equal IssueNs keep the order they had.
		slices.SortFunc(rec.Requests, func(x, y Request) int { return cmp.Compare(x.IssueNs, y.IssueNs) })
	}
	a.nest(&rec)
	if a.latestNs-a.prunedNs >= pruneEveryNs {
		a.prune()
	}
	return rec
}

// journalKey is when a journal event was emitted: a jbd2 commit or wait
// at its end, an XFS log force (no end) at its start.
func journalKey(j *event.Journal) uint64 {
	if j.EndNs != 0 {
		return j.EndNs
	}
	return j.StartNs
}

// nest attaches to each issued flush of a stacked disk the host-level
// fsyncs of its backing file that ran entirely while it was in flight.
func (a *Attributor) nest(rec *FsyncRecord) {
	if a.backing == nil || len(a.hosts) == 0 {
		return
	}
	for i := range rec.Requests {
		r := &rec.Requests[i]
		if r.Role != RoleFlush || r.NotIssued {
			continue
		}
		// r.Dev is "major:minor" (devString); fmt.Sscanf was a fifth of
		// nest's time.
		ma, mi, found := strings.Cut(r.Dev, ":")
		maj, err1 := strconv.ParseUint(ma, 10, 32)
		min, err2 := strconv.ParseUint(mi, 10, 32)
		if !found || err1 != nil || err2 != nil {
			continue
		}
		b, ok := a.backing(event.MkDev(uint32(maj), uint32(min)))
		if !ok {
			continue
		}
		// hosts are nearly sorted by EndNs (emit order): look only at those
		// that can end inside the flush, not at every retained one. Each
		// flush scanned them all, copying each record and formatting b.Dev
		// per host: 91% of the reader's CPU on ext4 over a loop device
		// (~300 µs per fsync), which starved the reader into losing events.
		const skew = 10e6
		dev := b.Dev.String()
		lo := sort.Search(len(a.hosts), func(i int) bool { return a.hosts[i].EndNs+skew >= r.IssueNs })
		for j := lo; j < len(a.hosts); j++ {
			h := &a.hosts[j]
			if h.EndNs > r.CompleteNs+skew {
				break
			}
			if h.Dev == dev && h.Ino == b.Ino && h.StartNs >= r.IssueNs && h.EndNs <= r.CompleteNs {
				hr := *h
				if hr.Path == "" {
					hr.Path = b.Path
				}
				r.Host = append(r.Host, hr)
			}
		}
	}
}

// flushAsked returns the queue time of the latest flush bio on disk queued
// in [from, issue] that no flush request of this call has claimed yet
// (a.used), and claims it, so two flush requests never claim one bio.
func (a *Attributor) flushAsked(disk event.Dev, from, issue uint64) (uint64, bool) {
	for i := len(a.bios) - 1; i >= 0; i-- {
		q := a.bios[i].QueueNs
		if q > issue || a.bios[i].Dev != disk || slices.Contains(a.used, i) {
			continue
		}
		if q < from {
			break
		}
		a.used = append(a.used, i)
		return q, true
	}
	return 0, false
}

func sectorOf(b *event.Block) uint64 {
	if b.Op == event.OpFlush {
		return 0
	}
	return b.Sector
}

func containsDev(ds []event.Dev, d event.Dev) bool {
	for _, x := range ds {
		if x == d {
			return true
		}
	}
	return false
}

// roleOf classifies a request for an fsync by thread tid ("" = not
// counted), following the package doc.
func roleOf(b *event.Block, tid uint32) string {
	switch {
	case b.IsFlush():
		return RoleFlush
	case b.Op != event.OpWrite:
		return ""
	case b.InsertNs == 0 && b.IssueNs == 0:
		// Start not seen (before tracing, or the second completion the
		// flush state machine gives a data request): no time to place.
		return ""
	case b.Flags&event.ReqMeta != 0, strings.HasPrefix(b.Comm, "jbd2/"):
		return RoleJournal
	case b.TID == tid:
		return RoleData
	}
	return ""
}

// Categories of the sweep, in priority order (lower wins).
const (
	catFlush = iota
	catQueue
	catData
	catJournal
	// Below every I/O layer, what splits "other" (SetSched): the thread
	// waiting for a CPU or running; uncovered time is then blocked.
	catRunnable
	catRunning
	numCats
)

// sweep assigns every instant of [s, e] to the highest-priority category
// whose intervals cover it.
type sweep struct {
	s, e   uint64
	points []sweepPoint
}

type sweepPoint struct {
	t     uint64
	cat   int
	delta int
}

// init starts a sweep of [s, e], reusing the points slice.
func (w *sweep) init(s, e uint64) { w.s, w.e, w.points = s, e, w.points[:0] }

func (w *sweep) add(from, to uint64, cat int) {
	if from < w.s {
		from = w.s
	}
	if to > w.e {
		to = w.e
	}
	if to <= from {
		return
	}
	w.points = append(w.points, sweepPoint{from, cat, +1}, sweepPoint{to, cat, -1})
}

func (w *sweep) partition() (Layers, SchedSplit) {
	// Points with equal t may come in any order: time is credited only
	// when t advances, after every delta at the previous t is applied.
	slices.SortFunc(w.points, func(x, y sweepPoint) int { return cmp.Compare(x.t, y.t) })
	var active [numCats]int
	var owned [numCats + 1]int64 // last slot: other
	prev := w.s
	for _, p := range w.points {
		if p.t > prev {
			owned[owner(&active)] += int64(p.t - prev)
			prev = p.t
		}
		active[p.cat] += p.delta
	}
	if w.e > prev {
		owned[owner(&active)] += int64(w.e - prev)
	}
	other := SchedSplit{RunnableNs: owned[catRunnable], RunningNs: owned[catRunning], BlockedNs: owned[numCats]}
	return Layers{
		DeviceFlushNs:   owned[catFlush],
		BlockQueueNs:    owned[catQueue],
		DataWritebackNs: owned[catData],
		JournalNs:       owned[catJournal],
		OtherNs:         other.Sum(),
	}, other
}

func owner(active *[numCats]int) int {
	for c := 0; c < numCats; c++ {
		if active[c] > 0 {
			return c
		}
	}
	return numCats
}

// File kinds of etcd's data directory (etcd server/storage layout).
const (
	KindWAL      = "wal"      // member/wal/*.wal: the write-ahead log
	KindWALDir   = "wal-dir"  // member/wal itself (fsync after a segment cut)
	KindBackend  = "backend"  // member/snap/db: bbolt, fdatasync'd twice per commit
	KindSnapshot = "snapshot" // member/snap/*.snap
	KindOther    = "other"
)

// FileKind labels a path by its place in etcd's data directory.
func FileKind(path string) string {
	switch {
	case strings.HasSuffix(path, ".wal") && strings.Contains(path, "/wal/"):
		return KindWAL
	case strings.HasSuffix(path, "/member/wal") || strings.HasSuffix(path, "member/wal/"):
		return KindWALDir
	case strings.HasSuffix(path, "/snap/db"):
		return KindBackend
	case strings.HasSuffix(path, ".snap") && strings.Contains(path, "/snap/"):
		return KindSnapshot
	}
	return KindOther
}
