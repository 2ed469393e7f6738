// The fsync record's schema: FsyncRecord and what it holds (Layers, Request,
// JournalWindow, DMLevel), as JSON Lines write it (docs/schema.md).

package analysis

import "strings"

// SchemaVersion is the version of the JSON Lines records this package
// writes and reads (docs/schema.md): "fsync" and "write". Readers refuse
// newer major versions.
const SchemaVersion = 1

// SummaryVersion is the version of the "summary" line. 2 (2026-12-06):
// its stacked levels are named by role (LevelUpper, LevelBacking, LevelDM,
// LevelLower; version 1 numbered them "L1", "L2", "L3" from the top, which
// virtualization reads as nested guests) and a level's untraced is an
// UntracedReason, not a sentence. ReadJSONL reads version 1 as version 2.
// 3 (2026-12-07): a group's biased is its counts ({"lost_events":N,
// "missed_events":M}, Bias), not version 2's text "biased: N lost events,
// M missed probe runs"; ReadJSONL reads versions 1 and 2 as version 3.
const SummaryVersion = 3

// Layer names, as JSON keys and report columns use them.
const (
	LayerDataWriteback = "data_writeback"
	LayerJournal       = "journal"
	LayerDeviceFlush   = "device_flush"
	LayerBlockQueue    = "block_queue"
	LayerDM            = "dm"
	LayerOther         = "other"
)

// LayerNames lists the layers in report order.
var LayerNames = []string{LayerDataWriteback, LayerJournal, LayerDeviceFlush, LayerBlockQueue, LayerDM, LayerOther}

// numLayers is len(LayerNames), for per-layer arrays.
const numLayers = 6

// Layers is the partition of one fsync's wall time, in ns; the fields sum
// exactly to the fsync's total (see the package doc for the rule).
type Layers struct {
	DataWritebackNs int64 `json:"data_writeback_ns"`
	JournalNs       int64 `json:"journal_ns"`
	DeviceFlushNs   int64 `json:"device_flush_ns"`
	BlockQueueNs    int64 `json:"block_queue_ns"`
	// DMNs: a device-mapper target held one of the call's bios (queued
	// on the dm device, not yet remapped; or its clone done beneath and
	// the bio not yet completed): dm-delay's delay, for one. Left out of
	// JSON when 0 (no dm device under the call).
	DMNs    int64 `json:"dm_ns,omitempty"`
	OtherNs int64 `json:"other_ns"`
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
	case LayerDM:
		return l.DMNs
	}
	return l.OtherNs
}

// values returns the layers in LayerNames order, ns: what Get returns for
// each name, without comparing names (the report's builders run it for
// every fsync: Get's string switch was ~0.1 µs per call at 10k fsync/s).
func (l *Layers) values() [numLayers]int64 {
	return [numLayers]int64{l.DataWritebackNs, l.JournalNs, l.DeviceFlushNs, l.BlockQueueNs, l.DMNs, l.OtherNs}
}

// Sum returns the sum of all layers, ns.
func (l Layers) Sum() int64 {
	return l.DataWritebackNs + l.JournalNs + l.DeviceFlushNs + l.BlockQueueNs + l.DMNs + l.OtherNs
}

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
	// DM marks a bio on a device-mapper disk (Dev), not a request: IssueNs
	// is when it was queued there, CompleteNs when it completed there.
	// RemapNs is when dm sent it (its first clone of the same kind: a
	// flush for a flush) on to disk Target ("": no remap seen in its
	// window); RemapNs − IssueNs is the target's hold before the remap.
	DM      bool   `json:"dm,omitempty"`
	RemapNs uint64 `json:"remap_ns,omitempty"`
	Target  string `json:"target,omitempty"`
	// Host holds, for a flush on a stacked device (loop), the fsyncs the
	// driver made of its backing file while the flush was in flight: the
	// host level, each with its own layers and requests.
	Host []FsyncRecord `json:"host,omitempty"`
	// HostUntraced, for a flush on a stacked device whose backing file
	// is on a filesystem whose fsyncs the host level cannot see
	// (HostLevelTraced false: fuse, nfs, xfs, ...), names that
	// filesystem: the flush's time then has no host level under it.
	HostUntraced string `json:"host_untraced,omitempty"`
	TID          uint32 `json:"tid"`  // submitting thread
	Comm         string `json:"comm"` // submitting thread's comm
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
	Disks    []string `json:"disks,omitempty"`
	FS       string   `json:"fs"`
	Ino      uint64   `json:"ino"`
	Path     string   `json:"path"`
	FileKind string   `json:"file_kind"` // see FileKind
	Layers   Layers   `json:"layers"`
	// Flushes counts the flushes waited on: REQ_OP_FLUSH requests (and
	// REQ_PREFLUSH ones), issued or completed by the flush state
	// machine. FUAWrites counts the writes with REQ_FUA issued to the
	// disk: on a disk with FUA (/sys/block/X/queue/fua = 1) a journal
	// commit is one flush and one FUA write, not two flushes. Both are
	// flush-role requests (device_flush time). The second completion of a
	// FUA write, when its flush sequence ends, counts in neither.
	Flushes   int             `json:"flushes"`
	FUAWrites int             `json:"fua_writes,omitempty"`
	Requests  []Request       `json:"requests"`
	Journal   []JournalWindow `json:"journal,omitempty"`
	// Sched is the call's time by scheduler state, with "other" split
	// (fsync --sched); nil without it.
	Sched *Sched `json:"sched,omitempty"`
	// DM is the device-mapper level under the call, when its filesystem
	// is on a dm device (nil otherwise).
	DM *DMLevel `json:"dm,omitempty"`
}

// DMLevel splits an fsync on a device-mapper device into levels: the
// filesystem's own time (TotalNs − HeldNs − Lower.Sum()), the time the dm
// target held the call's bios (HeldNs, the record's Layers.DMNs) and the
// time the disks beneath it spent on the call's requests (Lower: the
// part of the record's device_flush, block_queue, data_writeback and
// journal layers that their requests own). The three sum to TotalNs.
type DMLevel struct {
	Dev     string `json:"dev"`      // the dm disk, major:minor
	DevName string `json:"dev_name"` // e.g. dm-0
	// Targets are the disks beneath (major:minor) its remaps named, and
	// TargetNames their kernel names, in the same order.
	Targets     []string `json:"targets,omitempty"`
	TargetNames []string `json:"target_names,omitempty"`
	Bios        int      `json:"bios"`    // dm bios the call waited on
	HeldNs      int64    `json:"held_ns"` // = Layers.DMNs
	Lower       Layers   `json:"lower"`   // other_ns and dm_ns always 0
}

// Beneath names the disks beneath, comma-separated: each by its kernel
// name, or major:minor where it has none.
func (d *DMLevel) Beneath() string {
	var b strings.Builder
	for i, t := range d.Targets {
		if i > 0 {
			b.WriteByte(',')
		}
		if i < len(d.TargetNames) && d.TargetNames[i] != "" {
			t = d.TargetNames[i]
		}
		b.WriteString(t)
	}
	return b.String()
}
