package commit

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/event"
)

// # What the WAL fdatasync waited on
//
// The uprobes time etcd's (*WAL).sync, not what the kernel did inside it.
// The fsync tracer, filtered to etcd's process, splits every fdatasync
// call into kernel layers and its "other" time by scheduler state
// (analysis.FsyncRecord). A write's WAL fdatasync is joined to the one
// call of the same thread whose syscall window lies inside the write's
// (*WAL).sync window (JoinSyncs); its layers then say whether the write
// waited on the disk (device flush, journal, block queue) or on a CPU
// (runnable: run-queue wait or the cgroup's CPU throttling).

// Cause is where a write's WAL fdatasync time went: a layer of the
// fdatasync call (the fsync tracer's), its "other" time by scheduler
// state, or the part of (*WAL).sync outside the syscall. The values are
// the JSON keys of SyncCause.Ns.
type Cause string

// Causes.
const (
	CauseDataWriteback Cause = "data_writeback" // writing the file's dirty pages
	CauseJournal       Cause = "journal"        // the filesystem's journal commit
	CauseDeviceFlush   Cause = "device_flush"   // the disk's cache flush
	CauseBlockQueue    Cause = "block_queue"    // requests queued in the block layer
	CauseDM            Cause = "dm"             // held by a device-mapper target
	// CauseCPUWait: runnable, no I/O in flight: the thread waited for a
	// CPU, in the run queue or throttled by its cgroup's CPU quota;
	// inside a syscall or right after it (where Linux 6.18+ applies the
	// throttling, on the return to user space).
	CauseCPUWait Cause = "cpu_wait"
	CauseRunning Cause = "running" // on a CPU in the kernel, no I/O in flight
	CauseBlocked Cause = "blocked" // asleep on something else: a lock, a page fault, reclaim
	// CauseOther: no I/O in flight, the scheduler not followed.
	CauseOther Cause = "other"
	// CauseWriteWait: the encoder's write(2) before the fdatasync asleep
	// in dirty-page throttling or on a page under writeback.
	CauseWriteWait Cause = "write_wait"
	// CauseOutside: in (*WAL).sync outside the traced syscalls, the
	// thread running (Go code) or its state not followed (before the
	// first syscall of the sync).
	CauseOutside Cause = "outside_syscalls"
)

// CauseOrder lists every cause in report order.
var CauseOrder = []Cause{CauseDeviceFlush, CauseJournal, CauseBlockQueue, CauseDataWriteback, CauseDM, CauseWriteWait, CauseCPUWait, CauseRunning, CauseBlocked, CauseOther, CauseOutside}

// Disk says whether c is time the disk's I/O held the call.
func (c Cause) Disk() bool {
	switch c {
	case CauseDataWriteback, CauseJournal, CauseDeviceFlush, CauseBlockQueue, CauseDM, CauseWriteWait:
		return true
	}
	return false
}

// SyncWindow is the (*WAL).sync of a write's Save as the uprobes saw it:
// its entry and return (CLOCK_MONOTONIC ns; EndNs-StartNs is the write's
// WALSyncNs) and the threads they ran on.
type SyncWindow struct {
	StartNs, EndNs uint64
	TIDs           [2]uint32 // at the entry, at the return
}

// SyncCall is one fsync or fdatasync call, or write(2)-family call, of
// the traced process as the fsync tracer split it (the parts of an
// analysis.FsyncRecord or analysis.WriteRecord the join needs).
type SyncCall struct {
	TID            uint32
	StartNs, EndNs uint64
	WAL            bool // the file is a WAL segment (analysis.KindWAL)
	// Write: a write(2)-family call (the encoder's flush in (*WAL).sync);
	// its waits are WriteWaitNs, its Layers zero.
	Write       bool
	Layers      analysis.Layers
	WriteWaitNs int64
	// Other is the "other" layer by scheduler state; nil when the
	// scheduler was not followed.
	Other *analysis.SchedSplit
}

// SyncCallOf returns rec's SyncCall.
func SyncCallOf(rec *analysis.FsyncRecord) SyncCall {
	c := SyncCall{TID: rec.TID, StartNs: rec.StartNs, EndNs: rec.EndNs, WAL: rec.FileKind == analysis.KindWAL, Layers: rec.Layers}
	if rec.Sched != nil {
		o := rec.Sched.Other
		c.Other = &o
	}
	return c
}

// WriteCallOf returns the SyncCall of a write(2)-family record.
func WriteCallOf(rec *analysis.WriteRecord) SyncCall {
	c := SyncCall{TID: rec.TID, StartNs: rec.StartNs, EndNs: rec.EndNs, WAL: rec.FileKind == analysis.KindWAL, Write: true,
		WriteWaitNs: rec.Layers.ThrottledNs + rec.Layers.WritebackWaitNs, Layers: analysis.Layers{OtherNs: rec.Layers.OtherNs}}
	if rec.Sched != nil {
		o := rec.Sched.Other
		c.Other = &o
	}
	return c
}

// SyncCause is one write's (*WAL).sync split by cause: the joined
// fdatasync call's layers, the write(2) calls' before it, and the rest
// outside syscalls (Ns sums to the (*WAL).sync time, WALSyncNs).
type SyncCause struct {
	CallNs   int64           `json:"call_ns"`   // the fdatasync syscall
	WritesNs int64           `json:"writes_ns"` // the write(2) calls joined
	Ns       map[Cause]int64 `json:"ns"`        // by cause; absent: 0
}

func (sc *SyncCause) add(k Cause, ns int64) {
	if ns > 0 {
		sc.Ns[k] += ns
	}
}

// addAfter adds [from, to], a stretch of (*WAL).sync outside the
// syscalls (from its entry or a call's return), by the thread's
// scheduler states in evs (its events, in time order): running at from
// (Go code: CauseOutside), then runnable (CauseCPUWait) or blocked as the
// events say (event.CommitSched: the kernel reports no wake-up of a
// thread still on its CPU, so a runnable after running is a preemption
// or the cgroup's throttling). Without events (the scheduler not
// followed, or the thread never switched) it is all Go code.
func (sc *SyncCause) addAfter(evs []event.Sched, from, to uint64) {
	if to <= from {
		return
	}
	st, prev := event.SchedRunning, from
	put := func(until uint64) {
		d := int64(until - prev)
		switch st {
		case event.SchedRunnable:
			sc.add(CauseCPUWait, d)
		case event.SchedRunning:
			sc.add(CauseOutside, d)
		default:
			sc.add(CauseBlocked, d)
		}
	}
	for k := sort.Search(len(evs), func(k int) bool { return evs[k].Ns >= from }); k < len(evs) && evs[k].Ns < to; k++ {
		x := evs[k]
		put(x.Ns)
		st, prev = x.State, x.Ns
	}
	put(to)
}

// addCall adds call c's layers and its "other" by scheduler state.
func (sc *SyncCause) addCall(c *SyncCall) {
	l := c.Layers
	sc.add(CauseDataWriteback, l.DataWritebackNs)
	sc.add(CauseJournal, l.JournalNs)
	sc.add(CauseDeviceFlush, l.DeviceFlushNs)
	sc.add(CauseBlockQueue, l.BlockQueueNs)
	sc.add(CauseDM, l.DMNs)
	sc.add(CauseWriteWait, c.WriteWaitNs)
	if c.Other != nil {
		sc.add(CauseCPUWait, c.Other.RunnableNs)
		sc.add(CauseRunning, c.Other.RunningNs)
		sc.add(CauseBlocked, c.Other.BlockedNs)
	} else {
		sc.add(CauseOther, l.OtherNs)
	}
}

// JoinSyncs joins each write's WAL fdatasync with the fsync tracer's call
// of it: the call inside the write's (*WAL).sync window made by the
// thread that entered or left it, else (the goroutine moved to another
// thread between the probe and the syscall) the WAL file's only call
// inside the window (etcd holds the WAL's lock through sync, so no other
// fdatasync of the WAL overlaps it); of several, the longest. out[i] is
// wins[i]'s cause (wins: the writes' Write.WALSyncWindow), nil when the
// window is empty or no call matched.
// calls may be in any order.
func JoinSyncs(wins []SyncWindow, calls []SyncCall, scheds []event.Sched) []*SyncCause {
	cs := slices.Clone(calls)
	slices.SortFunc(cs, func(a, b SyncCall) int { return cmp.Compare(a.StartNs, b.StartNs) })
	byTID := map[uint32][]event.Sched{}
	for _, e := range scheds {
		byTID[e.TID] = append(byTID[e.TID], e)
	}
	for _, evs := range byTID {
		slices.SortStableFunc(evs, func(a, b event.Sched) int { return cmp.Compare(a.Ns, b.Ns) })
	}
	out := make([]*SyncCause, len(wins))
	for i, win := range wins {
		if win.EndNs <= win.StartNs {
			continue
		}
		var best *SyncCall
		var writes []*SyncCall
		bestTID := false
		for k := sort.Search(len(cs), func(k int) bool { return cs[k].StartNs >= win.StartNs }); k < len(cs) && cs[k].StartNs <= win.EndNs; k++ {
			c := &cs[k]
			if c.EndNs > win.EndNs {
				continue
			}
			tid := c.TID == win.TIDs[0] || c.TID == win.TIDs[1]
			if !tid && !c.WAL {
				continue
			}
			if c.Write {
				writes = append(writes, c)
				continue
			}
			if best == nil || tid && !bestTID || tid == bestTID && c.EndNs-c.StartNs > best.EndNs-best.StartNs {
				best, bestTID = c, tid
			}
		}
		if best == nil {
			continue
		}
		sc := SyncCause{CallNs: int64(best.EndNs - best.StartNs), Ns: map[Cause]int64{}}
		joined := []*SyncCall{}
		for _, w := range writes {
			// The encoder's flush runs before the fdatasync, on the
			// fdatasync's thread or the WAL's file.
			if w.EndNs <= best.StartNs && (w.TID == best.TID || w.WAL) {
				sc.WritesNs += int64(w.EndNs - w.StartNs)
				joined = append(joined, w)
			}
		}
		joined = append(joined, best)
		sc.addAfter(byTID[win.TIDs[0]], win.StartNs, joined[0].StartNs)
		for k, c := range joined {
			sc.addCall(c)
			// After each call, to the next or the sync's return: the
			// thread's states as the scheduler tail shows them.
			to := win.EndNs
			if k+1 < len(joined) {
				to = max(joined[k+1].StartNs, c.EndNs)
			}
			sc.addAfter(byTID[c.TID], c.EndNs, to)
		}
		out[i] = &sc
	}
	return out
}

// CauseTotals sums the writes' WAL fdatasync causes (Report.WALCause).
type CauseTotals struct {
	// Joined: writes whose fdatasync call the fsync tracer split;
	// Unjoined: writes with a WAL fdatasync it did not see.
	Joined   int             `json:"joined"`
	Unjoined int             `json:"unjoined"`
	Ns       map[Cause]int64 `json:"ns,omitempty"` // summed over the joined writes
	// rows: per joined write, its sides (the disk's layers together,
	// then each other cause in otherCauses order): the spread Lead weighs.
	rows leadRows[causeRow]
}

// otherCauses are the causes that are not the disk's, in CauseOrder: with
// the disk (its layers together) the sides a CauseLead weighs.
var otherCauses = []Cause{CauseCPUWait, CauseRunning, CauseBlocked, CauseOther, CauseOutside}

// causeRow is one write's time by side: [0] the disk, [1+k] otherCauses[k].
type causeRow [6]int64

// maxLeadRows is the most writes Lead resamples: the size of the largest
// cluster join, whose 2000 resamples take about 0.1 s here
// (docs/commit.md). Past it every other kept write is dropped and the
// stride doubles, a systematic sample in time order; its interval is
// wider than all the writes' would be, so a gap it calls close may not
// be, never the reverse beyond the level.
const maxLeadRows = 4096

// Add counts one write's cause (nil: not joined).
func (t *CauseTotals) Add(c *SyncCause) {
	if c == nil {
		t.Unjoined++
		return
	}
	t.Joined++
	if t.Ns == nil {
		t.Ns = map[Cause]int64{}
	}
	var row causeRow
	for k, v := range c.Ns {
		t.Ns[k] += v
		if k.Disk() {
			row[0] += v
		} else if i := slices.Index(otherCauses, k); i >= 0 {
			row[1+i] += v
		}
	}
	t.rows.add(row)
}

// leadRows keeps one row per item (a write) for a lead's bootstrap
// (weighGap): every item until maxLeadRows, then every stride-th.
type leadRows[R any] struct {
	rows         []R
	stride, seen int
}

// add keeps r when it falls on the stride.
func (s *leadRows[R]) add(r R) {
	if s.stride == 0 {
		s.stride = 1
	}
	if s.seen%s.stride == 0 {
		s.rows = append(s.rows, r)
		if len(s.rows) >= 2*maxLeadRows {
			for i := range maxLeadRows {
				s.rows[i] = s.rows[2*i]
			}
			s.rows, s.stride = s.rows[:maxLeadRows], 2*s.stride
		}
	}
	s.seen++
}

// Sums returns t without the per-write spread Lead weighs: the numbers
// its JSON carries.
func (t *CauseTotals) Sums() CauseTotals {
	return CauseTotals{Joined: t.Joined, Unjoined: t.Unjoined, Ns: t.Ns}
}

// Share returns cause c's part of the summed time, 0..1.
func (t *CauseTotals) Share(c Cause) float64 {
	var sum int64
	for _, v := range t.Ns {
		sum += v
	}
	if sum <= 0 {
		return 0
	}
	return float64(t.Ns[c]) / float64(sum)
}

// DiskShare returns the disk layers' part of the summed time, 0..1.
func (t *CauseTotals) DiskShare() float64 {
	var s float64
	for _, c := range CauseOrder {
		if c.Disk() {
			s += t.Share(c)
		}
	}
	return s
}

// Top returns the cause the time went to: the disk, named by its
// largest layer, when its layers together hold more than any other cause
// alone (a disk is one cause, its layers its parts); false when no write
// was joined or nothing was measured.
func (t *CauseTotals) Top() (Cause, bool) {
	var disk, other Cause
	var diskNs, otherNs, layerNs int64 = 0, -1, -1
	for _, c := range CauseOrder {
		v := t.Ns[c]
		switch {
		case c.Disk():
			diskNs += v
			if v > layerNs {
				disk, layerNs = c, v
			}
		case v > otherNs:
			other, otherNs = c, v
		}
	}
	if t.Joined == 0 || diskNs+otherNs <= 0 {
		return "", false
	}
	if diskNs >= otherNs {
		return disk, true
	}
	return other, true
}

// CauseLead is what the writes' WAL syncs waited on most, weighed against
// the next: the disk (its layers together, one cause) or another cause,
// each side's share of the summed time (the shares the table prints:
// Share, DiskShare), and whether the run's own spread sets the first
// apart.
type CauseLead struct {
	// Cause: Top's cause (the disk named by its largest layer); Pct its
	// side's share of the summed time, percent: every disk layer
	// together when Cause.Disk().
	Cause Cause
	Pct   float64
	// LayerPct: when Cause.Disk(), that layer's own share of the summed
	// time, percent (the split line's figure for it); 0 otherwise.
	LayerPct float64
	// Runner: the next side (the disk by its largest layer, or another
	// cause) and its share; HasRunner false when no other side was
	// measured.
	Runner    Cause
	RunnerPct float64
	HasRunner bool
	// Gap: Cause's side against Runner's over the joined writes.
	Gap
	// Separated: GapCI lies above 0: the claim is where the summed time
	// went, which the bootstrap of the shares tests (a cluster verdict
	// also asks the sign test, Longer, because it names a part as each
	// vote's cause). False when the spread is unknown (no per-write
	// split, as in totals read back from JSON). One write's interval is
	// a point: the verdict's Few caveat says so.
	Separated bool
}

// Lead returns the top cause against the runner-up with the evidence
// between them; false when Top has none.
func (t *CauseTotals) Lead() (CauseLead, bool) {
	top, ok := t.Top()
	if !ok {
		return CauseLead{}, false
	}
	var sum causeRow
	layer := func() Cause { // the disk's largest layer
		var c Cause
		var best int64 = -1
		for _, k := range CauseOrder {
			if k.Disk() && t.Ns[k] > best {
				c, best = k, t.Ns[k]
			}
		}
		return c
	}
	for k, v := range t.Ns {
		if k.Disk() {
			sum[0] += v
		} else if i := slices.Index(otherCauses, k); i >= 0 {
			sum[1+i] += v
		}
	}
	var total int64
	for _, v := range sum {
		total += v
	}
	side := func(i int) Cause {
		if i == 0 {
			return layer()
		}
		return otherCauses[i-1]
	}
	a := 0
	if !top.Disk() {
		a = 1 + slices.Index(otherCauses, top)
	}
	b := -1
	for i := range sum {
		if i != a && sum[i] > 0 && (b < 0 || sum[i] > sum[b]) {
			b = i
		}
	}
	pct := func(v int64) float64 { return 100 * float64(v) / float64(max(total, 1)) }
	l := CauseLead{Cause: top, Pct: pct(sum[a]), Gap: unweighed}
	if top.Disk() {
		l.LayerPct = pct(t.Ns[top])
	}
	if b < 0 {
		// Nothing else measured: the one side is all of it.
		l.Separated = len(t.rows.rows) > 0
		return l, true
	}
	l.Runner, l.RunnerPct, l.HasRunner = side(b), pct(sum[b]), true
	if len(t.rows.rows) == 0 {
		return l, true
	}
	gr := make([]gapRow, len(t.rows.rows))
	for i, r := range t.rows.rows {
		gr[i] = gapRow{A: r[a], B: r[b]}
		for _, v := range r {
			gr[i].Total += v
		}
	}
	l.Gap = weighGap(gr)
	l.Separated = l.GapCI.Lo > 0
	return l, true
}

// Gap is the evidence between the two sides of a lead (the first and
// the runner-up) over the items it resampled, writes: how far apart the
// first side's share of their summed time stands from the second's.
type Gap struct {
	// GapCI: the VerdictLevel paired bootstrap interval of the first
	// side's share minus the second's (percentage points); Longer of
	// Compared items spent longer on the first side than on the second
	// (ties left out), LongerCI = ClopperPearson(Longer, Compared).
	GapCI            Interval
	Longer, Compared int
	LongerCI         Interval
}

// unweighed is the Gap of a lead whose spread is unknown (no rows).
var unweighed = Gap{GapCI: Interval{math.Inf(-1), math.Inf(1)}, LongerCI: Interval{0, 1}}

// gapRow is one item's time on a lead's first side (A), on its second
// (B), and on every side together (Total).
type gapRow struct{ A, B, Total int64 }

// weighGap weighs the first side against the second over rows (at least
// one): the paired bootstrap (the cluster verdict's): rows resampled
// whole, BootstrapResamples times from a fixed seed, A's share of Total
// minus B's per resample, and its VerdictLevel percentile interval; and
// the sign counts.
func weighGap(rows []gapRow) Gap {
	rng := rand.New(rand.NewPCG(bootstrapSeed, uint64(len(rows))))
	gaps := make([]float64, 0, BootstrapResamples)
	for range BootstrapResamples {
		var sa, sb, st int64
		for range rows {
			r := &rows[rng.IntN(len(rows))]
			sa, sb, st = sa+r.A, sb+r.B, st+r.Total
		}
		if st > 0 {
			gaps = append(gaps, 100*float64(sa-sb)/float64(st))
		} else {
			gaps = append(gaps, 0)
		}
	}
	g := Gap{GapCI: percentile(gaps)}
	for _, r := range rows {
		if r.A != r.B {
			g.Compared++
			if r.A > r.B {
				g.Longer++
			}
		}
	}
	g.LongerCI = ClopperPearson(g.Longer, g.Compared)
	return g
}
