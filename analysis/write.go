package analysis

import (
	"slices"
	"sort"

	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
)

// Write layer names, as JSON keys and report rows use them.
const (
	LayerThrottled     = "throttled"
	LayerWritebackWait = "writeback_wait"
)

// WriteLayerNames lists a write's layers in report order.
var WriteLayerNames = []string{LayerThrottled, LayerWritebackWait, LayerOther}

// WriteLayers is the partition of one write(2)-family call's wall time,
// in ns; the fields sum exactly to the call's total.
type WriteLayers struct {
	// ThrottledNs: asleep in balance_dirty_pages, dirty-page throttling
	// (the writeback:balance_dirty_pages tracepoint with pause > 0, to
	// the task's next mark: bpf/write.bpf.c).
	ThrottledNs int64 `json:"throttled_ns"`
	// WritebackWaitNs: waiting for a page under writeback
	// (writeback:folio_wait_writeback to the task's next mark).
	WritebackWaitNs int64 `json:"writeback_wait_ns"`
	// OtherNs: the rest (copying, allocation, the filesystem, the CPU).
	OtherNs int64 `json:"other_ns"`
}

// Get returns the layer called name (one of WriteLayerNames), in ns.
func (l WriteLayers) Get(name string) int64 {
	switch name {
	case LayerThrottled:
		return l.ThrottledNs
	case LayerWritebackWait:
		return l.WritebackWaitNs
	}
	return l.OtherNs
}

// Sum returns the sum of all layers, ns.
func (l WriteLayers) Sum() int64 { return l.ThrottledNs + l.WritebackWaitNs + l.OtherNs }

// WriteRecord is one write(2)-family call on a file the fsync tracer
// follows: the JSON Lines record of `etcdscope fsync --writes --output
// json` (type "write", docs/schema.md).
type WriteRecord struct {
	Type           string      `json:"type"` // always "write"
	Version        int         `json:"v"`    // SchemaVersion
	StartNs        uint64      `json:"start_ns"`
	EndNs          uint64      `json:"end_ns"`
	TotalNs        int64       `json:"total_ns"`
	PID            uint32      `json:"pid"`
	TID            uint32      `json:"tid"`
	Comm           string      `json:"comm"`
	Syscall        string      `json:"syscall"` // write, pwrite64, writev, pwritev, pwritev2
	Ret            int64       `json:"ret"`     // bytes written or -errno
	FD             int32       `json:"fd"`
	Dev            string      `json:"dev"`
	DevName        string      `json:"dev_name"`
	Disks          []string    `json:"disks,omitempty"` // whole disks under Dev (major:minor)
	FS             string      `json:"fs"`
	Ino            uint64      `json:"ino"`
	Path           string      `json:"path"`
	FileKind       string      `json:"file_kind"`
	Layers         WriteLayers `json:"layers"`
	Throttles      uint32      `json:"throttles"`       // balance_dirty_pages sleeps
	WritebackWaits uint32      `json:"writeback_waits"` // folio_wait_writeback waits
	// Sched is the call's time by scheduler state, with "other" split
	// (fsync --sched); nil without it.
	Sched *Sched `json:"sched,omitempty"`
}

// AttributeWrite returns w's record (Path and FileKind are left for the
// caller, as for Attribute). The kernel measured the waits; "other" is
// what they leave of the wall time. Waits that sum over it (they cannot,
// unless clocks disagree) are clipped so the layers still partition it.
func (a *Attributor) AttributeWrite(w *event.Write) WriteRecord {
	f := &w.Call
	name, disks := "", []event.Dev(nil)
	if a.lookup != nil {
		name, disks = a.lookup(f.Dev)
	}
	rec := WriteRecord{
		Type: "write", Version: SchemaVersion, StartNs: f.StartNs, EndNs: f.EndNs,
		PID: f.PID, TID: f.TID, Comm: f.Comm, Syscall: f.Syscall.String(), Ret: f.Ret, FD: f.FD,
		Dev: a.devString(f.Dev), DevName: name, FS: f.FSType, Ino: f.Ino,
		Throttles: w.Throttles, WritebackWaits: w.WritebackWaits,
	}
	if f.IsBlockdev {
		rec.FS = "blockdev"
	}
	rec.Disks = a.diskStrings(f.Dev, disks)
	if f.EndNs < f.StartNs {
		return rec
	}
	rec.TotalNs = int64(f.EndNs - f.StartNs)
	left := rec.TotalNs
	rec.Layers.ThrottledNs = min(int64(w.ThrottledNs), left)
	left -= rec.Layers.ThrottledNs
	rec.Layers.WritebackWaitNs = min(int64(w.WritebackWaitNs), left)
	rec.Layers.OtherNs = left - rec.Layers.WritebackWaitNs
	if a.sched {
		rec.Sched = a.writeSched(f.TID, f.StartNs, f.EndNs, rec.Layers.ThrottledNs+rec.Layers.WritebackWaitNs)
	}
	return rec
}

// WriteGroup is the summary of every write with one GroupKey: the
// write(2) calls before the fsyncs of the Group with the same key.
type WriteGroup struct {
	Key      GroupKey      `json:"key"`
	Syscalls []string      `json:"syscalls"`
	Total    stats.Summary `json:"total_ns"`
	Layers   []LayerStat   `json:"layers"` // in WriteLayerNames order
	// Throttles and WritebackWaits count the waits over the group.
	Throttles      int64 `json:"throttles"`
	WritebackWaits int64 `json:"writeback_waits"`
	Errors         int64 `json:"errors"` // calls that returned < 0
	// OtherSplit: as Group.OtherSplit (fsync --sched).
	OtherSplit []LayerStat `json:"other_split,omitempty"`
	// Folded: as Group.Folded (the write groups past MaxGroups).
	Folded int64 `json:"folded_groups,omitempty"`
}

type writeAcc struct {
	key       GroupKey
	totals    stats.Series
	layers    [3]stats.Series // in WriteLayerNames order
	throttles int64
	waits     int64
	errors    int64
	syscalls  []string
	other     otherAcc
}

// AddWrite counts one write record in its group.
func (b *ReportBuilder) AddWrite(r *WriteRecord) {
	k := GroupKey{PID: r.PID, Comm: r.Comm, Dev: r.Dev, DevName: r.DevName, FS: r.FS, FileKind: r.FileKind}
	g := b.writes.get(k)
	g.totals.Add(r.TotalNs)
	for i, n := range WriteLayerNames {
		g.layers[i].Add(r.Layers.Get(n))
	}
	g.throttles += int64(r.Throttles)
	g.waits += int64(r.WritebackWaits)
	if r.Ret < 0 {
		g.errors++
	}
	g.syscalls = addSyscall(g.syscalls, r.Syscall)
	g.other.add(r.Sched)
}

// writeGroups summarises the write groups, largest first.
func (b *ReportBuilder) writeGroups() []WriteGroup {
	var out []WriteGroup
	var other *WriteGroup
	for _, g := range b.writes.all() {
		wg := WriteGroup{Key: g.key, Syscalls: slices.Sorted(slices.Values(g.syscalls)), Total: g.totals.Summary(),
			Throttles: g.throttles, WritebackWaits: g.waits, Errors: g.errors}
		wg.Layers = layerStats(WriteLayerNames, g.layers[:], wg.Total)
		wg.OtherSplit = g.other.stats(wg.Total)
		if g == b.writes.other {
			wg.Folded = b.writes.folded
			other = &wg
			continue
		}
		out = append(out, wg)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Total.Count != out[j].Total.Count {
			return out[i].Total.Count > out[j].Total.Count
		}
		return keyLess(out[i].Key, out[j].Key)
	})
	if other != nil {
		out = append(out, *other)
	}
	return out
}
