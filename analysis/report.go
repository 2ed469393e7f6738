package analysis

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/etcdscope/etcdscope/analysis/jsonl"
	"github.com/etcdscope/etcdscope/analysis/peers"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
)

// WALFsyncBudget is the budget for etcd's WAL fsync: p99 of
// etcd_disk_wal_fsync_duration_seconds under 10 ms (OpenShift's
// "Recommended etcd practices", citing etcd's performance docs; the same
// documents put the backend commit p99 at 25 ms).
const WALFsyncBudget = 10 * time.Millisecond

// GroupKey identifies one table of the report: a process, a filesystem
// device and a file kind.
type GroupKey struct {
	PID      uint32 `json:"pid"`
	Comm     string `json:"comm"`
	Dev      string `json:"dev"`
	DevName  string `json:"dev_name"`
	FS       string `json:"fs"`
	FileKind string `json:"file_kind"`
}

// LayerStat is one layer's order statistics over a group (ns) and its
// share of the group's summed wall time (0..1).
type LayerStat struct {
	Name  string        `json:"name"`
	Stats stats.Summary `json:"stats_ns"`
	Share float64       `json:"share"`
}

// Group is the summary of every fsync with one GroupKey.
type Group struct {
	Key             GroupKey      `json:"key"`
	Syscalls        []string      `json:"syscalls"` // fsync and/or fdatasync
	Total           stats.Summary `json:"total_ns"`
	Layers          []LayerStat   `json:"layers"`
	FlushesPerFsync float64       `json:"flushes_per_fsync"`
	Flushes         int64         `json:"flushes"`
	// FUAWrites sums the calls' FsyncRecord.FUAWrites: writes with
	// REQ_FUA, counted apart from the flushes.
	FUAWrites int64 `json:"fua_writes"`
	Errors    int64 `json:"errors"` // calls that returned < 0
	// WithCommit counts fsyncs that waited on a journal commit or log force
	// (jbd2_commit, xfs_log_force); the rest paid only for metadata writes
	// (REQ_META) or nothing in the journal layer.
	WithCommit int64 `json:"with_commit"`
	// Verdict compares p99 with WALFsyncBudget: VerdictOK, VerdictOverBudget,
	// VerdictNA for kinds the budget does not apply to (bbolt backend,
	// snapshots, the WAL directory's fsync at a segment cut), or
	// VerdictInMemory for files on a filesystem with no disk (tmpfs).
	Verdict Verdict `json:"verdict"`
	// Bias counts the holes in the trace the group was drawn from (calls
	// absent, requests unattributed): the report's lost_events and
	// missed_events, the zero Bias for a lossless trace. In JSON its
	// counts (Bias), absent when zero.
	Bias Bias `json:"biased,omitzero"`
	// VerdictHolds: the trace has holes (Bias not zero) but the verdict
	// cannot change whatever they hid. Each lost event or missed probe
	// run hides at most one call (a call is absent only when one of its
	// syscall events is), and they are counted trace-wide, so all may be
	// this group's: "ok" holds if p99 stays under the budget with that
	// many more calls all over it, "over budget" if it stays over with
	// that many more all under it (nearest-rank p99, as Total.P99). False
	// without holes, for "n/a" verdicts, and when the holes could flip it.
	VerdictHolds bool `json:"verdict_holds,omitempty"`
	// OtherSplit splits the other layer into runnable, running and
	// blocked (fsync --sched; SchedNames), each with its share of the
	// group's summed wall time. Absent without --sched.
	OtherSplit []LayerStat `json:"other_split,omitempty"`
	// Folded, when not 0, marks the one group that sums the groups past
	// MaxGroups (its Key is zero): how many rows were folded into it (a
	// group folded, seen again and folded again counts twice). It comes
	// last, whatever its count, and its verdict is VerdictNA.
	Folded int64 `json:"folded_groups,omitempty"`
	// Disk says whether the calls pay a fixed price per flush or wait
	// behind other I/O (DiskVerdict); absent when neither holds.
	Disk *DiskVerdict `json:"disk_verdict,omitempty"`
	// DiskWhy says why a group with no disk verdict got none, when it
	// came near one (DiskWhy); nil otherwise. Not in the JSON itself:
	// its disk_verdict_why says it in words (render.SummaryJSON), and
	// ReadJSONL sets it again from the group's layers.
	DiskWhy *DiskWhy `json:"-"`
}

// Report is the end-of-run summary of `etcdscope fsync` (JSON type
// "summary").
type Report struct {
	Type         string `json:"type"` // always "summary"
	Version      int    `json:"v"`
	Fsyncs       int64  `json:"fsyncs"`
	LostEvents   uint64 `json:"lost_events"`   // records that did not fit in the ring buffer
	MissedEvents uint64 `json:"missed_events"` // probe runs the kernel skipped (BPF recursion)
	// RingPeakBytes is the most unread data the reader saw in the ring
	// buffer (sampled: a lower bound), bytes; against --ring-size it says
	// how close the trace came to losing events. 0: not known (a replay).
	RingPeakBytes uint64  `json:"ring_peak_bytes,omitempty"`
	Groups        []Group `json:"groups"`
	// Levels is the stacked-device table (BuildLevels), when any flush
	// nested host-level fsyncs.
	Levels []LevelRow `json:"levels,omitempty"`
	// Writes summarises the write(2)-family calls (fsync --writes), one
	// group per GroupKey, as the fsync groups.
	Writes      []WriteGroup  `json:"writes,omitempty"`
	Unavailable []Unavailable `json:"unavailable,omitempty"` // probes that did not attach and what they leave dark
	// Disks are the whole disks the calls' requests went to, with their
	// write cache mode where the run knew it (SetDiskCaches).
	Disks []DiskCache `json:"disks,omitempty"`
	// Journals says, for each ext4 group's device, whether a jbd2 journal
	// was mounted on it when the live run ended (SetJournals); a device
	// absent here is not known (a replay of an older capture).
	Journals []Journal `json:"journals,omitempty"`
	// WindowNs is the traced wall time of the run, ns: from its probes
	// attached to its end (pipeline.Session.Window), the length the user
	// recorded. 0 when the writer did not know it (older recordings).
	WindowNs int64 `json:"window_ns,omitempty"`
	// MonoToWallNs is CLOCK_REALTIME − CLOCK_MONOTONIC (ns) when the run
	// ended: add it to a record's start_ns/end_ns for Unix time. 0 when
	// the writer did not know it (older recordings).
	MonoToWallNs int64 `json:"mono_to_wall_ns,omitempty"`
	// LossCut, when set, says why LostEvents and MissedEvents are not
	// known (a recording cut before its summary line): the JSON form then
	// carries lost_events and missed_events as null, never 0, and the
	// table says "unknown".
	LossCut LossCut `json:"-"`
	// MissedPrograms is MissedEvents by program, the most first
	// (SetMissedPrograms); absent when none missed or not known (a
	// replay of an older recording): then every missed run counts as
	// one that could hide a call.
	MissedPrograms []MissedRuns `json:"missed_programs,omitempty"`
	// LossUnknown is LossCut worded, as the JSON summary carries it
	// (render.SummaryJSON fills it from LossCut); a summary read back
	// keeps the words it was written with here.
	LossUnknown string `json:"loss_unknown,omitempty"`
	// DroppedEnters and DroppedPartials count the fsync enters and partial
	// block completions the attribution did not hold, past MaxInflight and
	// MaxPartial (Attributor.Overflow): a capture's replay sets them.
	DroppedEnters   uint64 `json:"dropped_enters,omitempty"`
	DroppedPartials uint64 `json:"dropped_partial_completions,omitempty"`
	// Unpartitioned counts the calls the kernel could not assemble (fsync
	// --kernel-partition: their slot overflowed or was taken back,
	// event.KPart.Reason): no record, and counted in LostEvents too.
	Unpartitioned uint64 `json:"unpartitioned_calls,omitempty"`
}

// Unavailable is a probe that did not attach (event.Probe), as the
// summary, the capture's header and the hypervisor's summary carry it:
// the probe, what the run lacks without it, why, and the kernel's own
// error text; render.Unavailable words it. Summary versions 1 and 2 (and
// capture version 1) held an entry as one string, "probe: words": it reads
// as Probe and Text.
type Unavailable struct {
	// Part: the part of a write it leaves dark, for etcdscope commit (a
	// tracer.CommitPart: "wal", "grpc", ...; "uprobes" when no function
	// of etcd's could be probed, and Probe is empty).
	Part     string       `json:"part,omitempty"`
	Probe    string       `json:"probe,omitempty"`
	Dark     event.Dark   `json:"dark,omitempty"`
	Reason   event.Reason `json:"reason,omitempty"`
	Module   string       `json:"module,omitempty"` // the kernel module the Reason is of
	Err      string       `json:"err,omitempty"`    // the kernel's or the loader's error text
	Optional bool         `json:"optional,omitempty"`
	// Text is an older entry's words after its probe's name, kept as they
	// were written (a report of an old recording writes them again);
	// empty in an entry of fields.
	Text string `json:"text,omitempty"`
}

// UnavailableProbes returns the probes of ps that did not attach.
func UnavailableProbes(ps []event.Probe) []Unavailable {
	var out []Unavailable
	for _, p := range ps {
		if !p.Attached {
			out = append(out, Unavailable{Probe: p.Name, Dark: p.Dark, Reason: p.Reason, Module: p.Module, Err: p.Err, Optional: p.Optional})
		}
	}
	return out
}

// UnavailablePart is the part of a write (commit) that probe p left dark.
func UnavailablePart(part string, p event.Probe) Unavailable {
	return Unavailable{Part: part, Probe: p.Name, Dark: p.Dark, Reason: p.Reason, Module: p.Module, Err: p.Err, Optional: p.Optional}
}

// SortUnavailable sorts us by part, then probe.
func SortUnavailable(us []Unavailable) {
	slices.SortFunc(us, func(a, b Unavailable) int { return cmp.Or(cmp.Compare(a.Part, b.Part), cmp.Compare(a.Probe, b.Probe)) })
}

// UnmarshalJSON reads an entry of fields, or an older entry's string
// ("probe: words"; Optional where its words begin "optional, ", as the
// jbd2 wait's did).
func (u *Unavailable) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		probe, text, _ := strings.Cut(s, ": ")
		*u = Unavailable{Probe: probe, Text: text, Optional: strings.HasPrefix(text, "optional, ")}
		return nil
	}
	type plain Unavailable // without this method
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*u = Unavailable(p)
	return nil
}

// DiskCache is one disk's write cache, from its queue in sysfs when the
// live run ended.
type DiskCache struct {
	Dev  string `json:"dev"`            // major:minor
	Name string `json:"name,omitempty"` // kernel name
	// WriteCache is /sys/block/NAME/queue/write_cache: "write back" (a
	// volatile cache: flushes reach it) or "write through" (the block
	// layer drops flushes and FUA); "" when not known (a replay).
	WriteCache string `json:"write_cache,omitempty"`
	FUA        bool   `json:"fua,omitempty"` // queue/fua: takes FUA writes itself
}

// Journal is whether an ext4 filesystem's device held a jbd2 journal
// (/proc/fs/jbd2) when the live run ended: without one no fsync waits on
// a jbd2 commit, and its REQ_META writes are the journal layer.
type Journal struct {
	Dev  string `json:"dev"`            // the filesystem's major:minor, as GroupKey.Dev
	Name string `json:"name,omitempty"` // kernel name, as GroupKey.DevName
	JBD2 bool   `json:"jbd2"`
}

// JBD2 says whether the filesystem on dev (GroupKey.Dev) had a jbd2
// journal, and whether that is known.
func (r *Report) JBD2(dev string) (has, known bool) {
	for _, j := range r.Journals {
		if j.Dev == dev {
			return j.JBD2, true
		}
	}
	return false, false
}

// SetJournals sets Journals to known's entries for the devices of r's
// ext4 groups (the live run's, e.g. a recording's summary or a capture's
// end line).
func (r *Report) SetJournals(known []Journal) {
	r.Journals = nil
	for _, g := range r.Groups {
		if g.Key.FS != "ext4" || slices.ContainsFunc(r.Journals, func(j Journal) bool { return j.Dev == g.Key.Dev }) {
			continue
		}
		if i := slices.IndexFunc(known, func(j Journal) bool { return j.Dev == g.Key.Dev }); i >= 0 {
			r.Journals = append(r.Journals, known[i])
		}
	}
}

// maxDisks bounds Report.Disks (a trace sees a handful of disks; a
// pathological one is not allowed to grow the summary without end).
const maxDisks = 64

// SetDiskCaches fills Disks' write cache fields from known (the live
// run's, e.g. a recording's summary), matching by Dev.
func (r *Report) SetDiskCaches(known []DiskCache) {
	for i := range r.Disks {
		for _, k := range known {
			if k.Dev == r.Disks[i].Dev {
				r.Disks[i] = k
			}
		}
	}
}

// LossCut says why a report's loss counts are not known; render.LossUnknown
// words it.
type LossCut uint8

// Why a report's loss is not known.
const (
	// LossKnown: the counts are the run's.
	LossKnown LossCut = iota
	// LossNoSummary: a recording without its summary line (the run was
	// killed or its output cut).
	LossNoSummary
	// LossNoEndLine: a capture without its end line (the same).
	LossNoEndLine
)

// LossIsUnknown says whether r's loss counts are not known: LossCut says
// why, or a summary read back said so in words.
func (r *Report) LossIsUnknown() bool { return r.LossCut != LossKnown || r.LossUnknown != "" }

// MarshalJSON writes r as its fields say, except that with its loss unknown
// lost_events and missed_events are null.
func (r Report) MarshalJSON() ([]byte, error) {
	type plain Report // without this method
	if !r.LossIsUnknown() {
		return json.Marshal(plain(r))
	}
	return json.Marshal(struct {
		plain
		LostEvents   *uint64 `json:"lost_events"`
		MissedEvents *uint64 `json:"missed_events"`
	}{plain: plain(r)})
}

// MaxExactValues bounds the exact values a ReportBuilder keeps for its
// quantiles, across every series of its groups, write groups and level
// rows (stats.Budget; 8 bytes each, 16 MiB): a series keeps at most
// stats.ExactLimit, and a report holds hundreds of series (MaxGroups
// groups of 10, as many write groups of 7, MaxLevelRows rows of 7 in
// three levels), which hostile recordings filled: 16 device-mapper
// groups of 65,535 calls each took 505-562 MiB. Past it a series bins its
// values as fio does, its quantiles within 0.8% (Summary.Binned).
const MaxExactValues = 1 << 21

// ReportBuilder accumulates fsync records into a Report without keeping
// them: per group it holds the total and each layer's value of each call
// in a stats.Series (exact quantiles for the first stats.ExactLimit calls,
// 48 bytes a call; fio's bins after that, a fixed 90 KiB a group), not the
// records with their requests (kilobytes a call). The zero value is not ready: use
// NewReportBuilder. Not safe for concurrent use.
type ReportBuilder struct {
	groups groupSet[groupAcc, *groupAcc]
	writes groupSet[writeAcc, *writeAcc]
	last   *groupAcc // the group of the previous call: the next is most often in it too
	levels *levelsAcc
	count  int64
	disks  []string // distinct FsyncRecord.Disks, at most maxDisks
	// missedBy: the run's missed probe runs by program (SetMissedPrograms).
	missedBy []MissedRuns
}

// SetMissedPrograms tells the builder which programs the missed runs that
// Report is given were of (MissDelta.Since over the tracer's totals), so
// that only those that can hide a call weigh on a verdict (Bias.Hiding).
// Without it every missed run is counted as one that could.
func (b *ReportBuilder) SetMissedPrograms(progs []MissedRuns) { b.missedBy = progs }

type groupAcc struct {
	key      GroupKey
	totals   stats.Series
	layers   [numLayers]stats.Series // in LayerNames order
	flushes  int64
	fuas     int64
	errors   int64
	commits  int64
	syscalls []string // distinct, in order of appearance (at most a few)
	// overBudget counts calls that took WALFsyncBudget or more, exactly
	// (totals' quantiles may be binned): verdictHolds needs it.
	overBudget int64
	other      otherAcc // the "other" layer's split (--sched)
}

// NewReportBuilder returns an empty builder.
func NewReportBuilder() *ReportBuilder {
	b := stats.NewBudget(MaxExactValues)
	return &ReportBuilder{groups: newGroupSet[groupAcc](b), writes: newGroupSet[writeAcc](b), levels: newLevelsAcc(b)}
}

// Add counts one record in its group (and in the stacked-device levels if
// its flushes nested host fsyncs).
func (b *ReportBuilder) Add(r *FsyncRecord) {
	b.count++
	k := GroupKey{PID: r.PID, Comm: r.Comm, Dev: r.Dev, DevName: r.DevName, FS: r.FS, FileKind: r.FileKind}
	g := b.last
	if g == nil || g.key != k { // comparing is cheaper than hashing the key's strings
		g = b.groups.get(k)
		b.last = g
	}
	g.totals.Add(r.TotalNs)
	if r.TotalNs >= int64(WALFsyncBudget) {
		g.overBudget++
	}
	for i, v := range r.Layers.values() {
		g.layers[i].Add(v)
	}
	g.flushes += int64(r.Flushes)
	g.fuas += int64(r.FUAWrites)
	if len(r.Journal) > 0 {
		g.commits++
	}
	if r.Ret < 0 {
		g.errors++
	}
	g.syscalls = addSyscall(g.syscalls, r.Syscall)
	g.other.add(r.Sched)
	b.levels.add(r)
	for _, d := range r.Disks {
		if len(b.disks) < maxDisks && !slices.Contains(b.disks, d) {
			b.disks = append(b.disks, d)
		}
	}
}

// Report summarises what was added, largest groups first. lost and missed
// are the tracer's lost-event and skipped-probe counts; unavailable lists
// probes that could not attach. The builder stays usable.
func (b *ReportBuilder) Report(lost, missed uint64, unavailable []Unavailable) Report {
	rep := Report{Type: "summary", Version: SummaryVersion, Fsyncs: b.count, LostEvents: lost, MissedEvents: missed, Unavailable: unavailable,
		Groups: make([]Group, 0, len(b.groups.held)+1)} // [] in JSON when nothing was traced, as docs/schema.md shows
	rep.MissedPrograms = b.missedBy
	_, layerRuns := LayerMisses(b.missedBy)
	var other *Group
	for _, g := range b.groups.all() {
		out := Group{Key: g.key, Flushes: g.flushes, FUAWrites: g.fuas, Errors: g.errors, WithCommit: g.commits}
		out.Syscalls = slices.Sorted(slices.Values(g.syscalls))
		out.Total = g.totals.Summary()
		out.Layers = layerStats(LayerNames, g.layers[:], out.Total)
		out.OtherSplit = g.other.stats(out.Total)
		if out.Total.Count > 0 {
			out.FlushesPerFsync = float64(g.flushes) / float64(out.Total.Count)
		}
		out.Verdict = verdict(g.key.FileKind, g.key.FS, out.Total.P99)
		out.Bias = Bias{LostEvents: lost, MissedRuns: missed, MissedLayerRuns: layerRuns}
		if g == b.groups.other {
			// Many groups' calls in one: no verdict, no disk verdict.
			out.Folded, out.Verdict = b.groups.folded, VerdictNA
			other = &out
			continue
		}
		// Only the holes that can hide a call can change the verdict.
		hide := out.Bias.Hiding()
		out.VerdictHolds = !hide.IsZero() && verdictHolds(out.Verdict, out.Total.Count, g.overBudget, hide.LostEvents+hide.MissedRuns)
		out.Disk = diskVerdict(&out)
		out.DiskWhy = diskWhy(&out)
		rep.Groups = append(rep.Groups, out)
	}
	rep.Levels = b.levels.rows()
	rep.Writes = b.writeGroups()
	for _, d := range slices.Sorted(slices.Values(b.disks)) {
		rep.Disks = append(rep.Disks, DiskCache{Dev: d})
	}
	sort.Slice(rep.Groups, func(i, j int) bool {
		a, b := rep.Groups[i], rep.Groups[j]
		if a.Total.Count != b.Total.Count {
			return a.Total.Count > b.Total.Count
		}
		return keyLess(a.Key, b.Key)
	})
	if other != nil {
		rep.Groups = append(rep.Groups, *other)
	}
	return rep
}

// layerStats summarises each layer's series (in names' order) with its
// share of total; the dm layer only where it has time (no dm device under
// the calls: no row for it).
func layerStats(names []string, series []stats.Series, total stats.Summary) []LayerStat {
	out := make([]LayerStat, 0, len(names))
	for i, n := range names {
		st := series[i].Summary()
		if n == LayerDM && st.Sum == 0 {
			continue
		}
		share := 0.0
		if total.Sum > 0 {
			share = float64(st.Sum) / float64(total.Sum)
		}
		out = append(out, LayerStat{Name: n, Stats: st, Share: share})
	}
	return out
}

// keyLess orders groups of equal size.
func keyLess(a, b GroupKey) bool {
	return cmp.Or(cmp.Compare(a.PID, b.PID), strings.Compare(a.Comm, b.Comm), strings.Compare(a.Dev, b.Dev),
		strings.Compare(a.DevName, b.DevName), strings.Compare(a.FS, b.FS), strings.Compare(a.FileKind, b.FileKind)) < 0
}

// BuildReport summarises records at once (ReportBuilder for a stream).
func BuildReport(recs []FsyncRecord, lost, missed uint64, unavailable []Unavailable) Report {
	return BuildReportWrites(recs, nil, lost, missed, unavailable)
}

// BuildReportWrites is BuildReport with write records too.
func BuildReportWrites(recs []FsyncRecord, writes []WriteRecord, lost, missed uint64, unavailable []Unavailable) Report {
	b := NewReportBuilder()
	for i := range recs {
		b.Add(&recs[i])
	}
	for i := range writes {
		b.AddWrite(&writes[i])
	}
	return b.Report(lost, missed, unavailable)
}

// Bias counts the holes in a trace: events lost (they did not fit in the
// ring buffer; a bigger one brings them back) and probe runs missed (runs
// the kernel skipped, docs/metrics.md#missed-probe-runs, which no ring size
// brings back).
// Each hides at most one call. The zero Bias is a lossless trace. In JSON
// (docs/schema.md's groups[].biased, summary version 3) it is its two
// counts under the summary's own names, each absent when 0; render.BiasCounts
// words it.
type Bias struct {
	LostEvents uint64 `json:"lost_events,omitempty"`
	MissedRuns uint64 `json:"missed_events,omitempty"`
	// MissedLayerRuns: of MissedRuns, those of programs that cannot hide
	// a call (LayerMisses: block and journal programs), which can only
	// leave a counted call's layer times short; absent when 0 or not
	// known (a recording without missed_programs).
	MissedLayerRuns uint64 `json:"missed_layer_runs,omitempty"`
}

// IsZero reports a lossless trace.
func (b Bias) IsZero() bool { return b == Bias{} }

// Hiding is the part of b that can hide a call: the lost events and the
// missed runs not known to be a layer program's.
func (b Bias) Hiding() Bias {
	return Bias{LostEvents: b.LostEvents, MissedRuns: b.MissedRuns - min(b.MissedLayerRuns, b.MissedRuns)}
}

// UnmarshalJSON reads a Bias as summary version 3 writes it (an object of
// counts) or as versions 1 and 2 did (a JSON string, biasV2).
// ScanJSONLSpans refuses the string in a version 3 summary.
func (b *Bias) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '"' {
		var s string
		if err := json.Unmarshal(data, &s); err != nil {
			return err
		}
		return b.biasV2(s)
	}
	type plain Bias // without this method
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*b = Bias(p)
	return nil
}

// biasV2 reads the text summary versions 1 and 2 wrote for a Bias:
// "biased: " then "N lost event(s)" and "M missed probe run(s)", joined by
// ", ", each only where its count was not 0.
func (b *Bias) biasV2(s string) error {
	*b = Bias{}
	counts, ok := strings.CutPrefix(s, "biased: ")
	if !ok || counts == "" {
		return fmt.Errorf("biased %q: not \"biased: N lost events, M missed probe runs\"", s)
	}
	for _, part := range strings.Split(counts, ", ") {
		n, what, _ := strings.Cut(part, " ")
		v, err := strconv.ParseUint(n, 10, 64)
		switch what = strings.TrimSuffix(what, "s"); {
		case err != nil || v == 0:
			return fmt.Errorf("biased %q: count %q", s, n)
		case what == "lost event":
			b.LostEvents = v
		case what == "missed probe run":
			b.MissedRuns = v
		default:
			return fmt.Errorf("biased %q: %q is neither lost events nor missed probe runs", s, what)
		}
	}
	return nil
}

// biasAsText reports whether a summary line's groups hold a biased as
// versions 1 and 2 wrote it (a JSON string).
func biasAsText(raw []byte) bool {
	var line struct {
		Groups []struct {
			Biased json.RawMessage `json:"biased"`
		} `json:"groups"`
	}
	if json.Unmarshal(raw, &line) != nil {
		return false
	}
	for _, g := range line.Groups {
		if len(g.Biased) > 0 && g.Biased[0] == '"' {
			return true
		}
	}
	return false
}

// verdictHolds reports whether verdict ("ok" or "over budget"), drawn
// from n calls of which over took WALFsyncBudget or more, stays the same
// with hidden more calls of any duration. The p99 is the nearest-rank
// sample: rank ceil(0.99·N) of N, so it is under the budget exactly when
// at least that many calls are.
func verdictHolds(verdict Verdict, n, over int64, hidden uint64) bool {
	if hidden > math.MaxInt32 {
		return false
	}
	all := n + int64(hidden)
	rank := int64(math.Ceil(0.99 * float64(all)))
	switch verdict {
	case VerdictOK: // worst case: every hidden call over the budget
		return n-over >= rank
	case VerdictOverBudget: // worst case: every hidden call under it
		return n-over+int64(hidden) < rank
	}
	return false
}

// Verdict is a group's p99 judged against WALFsyncBudget. Its values are
// the JSON schema's words (docs/schema.md).
type Verdict string

// The verdicts of a group.
const (
	VerdictOK         Verdict = "ok"          // p99 under the budget
	VerdictOverBudget Verdict = "over budget" // p99 at the budget or over
	VerdictNA         Verdict = "n/a"         // the budget does not apply to this kind of file
	// VerdictInMemory: the files are on a filesystem kept in memory
	// (InMemoryFS): their fsyncs reach no disk, so the budget, which is
	// a disk's, is not judged.
	VerdictInMemory Verdict = "in memory"
)

// InMemoryFS reports whether fs (a GroupKey.FS, the kernel's name of a
// filesystem type) keeps its files in memory only: tmpfs, ramfs,
// hugetlbfs, devtmpfs. An fsync there returns without I/O.
func InMemoryFS(fs string) bool {
	switch fs {
	case "tmpfs", "ramfs", "hugetlbfs", "devtmpfs":
		return true
	}
	return false
}

// Judged reports whether v is a judgement against the budget (ok or over
// budget), not n/a or empty.
func (v Verdict) Judged() bool { return v == VerdictOK || v == VerdictOverBudget }

func verdict(kind, fs string, p99 int64) Verdict {
	switch kind {
	case KindBackend, KindSnapshot, KindWALDir:
		return VerdictNA
	}
	if InMemoryFS(fs) {
		return VerdictInMemory
	}
	if time.Duration(p99) < WALFsyncBudget {
		return VerdictOK
	}
	return VerdictOverBudget
}

// Dominant returns the layer with the largest share of a group.
func (g *Group) Dominant() LayerStat {
	var best LayerStat
	for _, l := range g.Layers {
		if l.Share > best.Share {
			best = l
		}
	}
	return best
}

// IntervalBuilder accumulates one interval's fsyncs for the live line of
// `etcdscope fsync --interval` (count, p50/p99 of the total and the layer
// with the largest share), keeping 8 bytes a call (its total, for p50/p99) and one sum per layer
// sums instead of the records. The zero value is ready. Not safe for
// concurrent use.
type IntervalBuilder struct {
	totals []int64
	sums   [numLayers]int64 // in LayerNames order
	loss   LossDelta
}

// Loss turns the tracer's running totals of lost events and missed probe
// runs into this interval's (what the totals grew by since the previous
// call), for the live line; a trace that is losing events shows it in the
// interval it happens, not as a total that only grows.
func (b *IntervalBuilder) Loss(lostTotal, missedTotal uint64) (lost, missed uint64) {
	return b.loss.Since(lostTotal, missedTotal)
}

// LossDelta turns a tracer's running totals of lost events and missed
// probe runs (Lost, Missed) into what each interval added. The zero value
// starts from 0.
type LossDelta struct{ lost, missed uint64 }

// Since returns how much the totals grew since the previous call (the
// totals themselves if they went back: a new tracer) and remembers them.
func (d *LossDelta) Since(lostTotal, missedTotal uint64) (lost, missed uint64) {
	lost, missed = lostTotal-d.lost, missedTotal-d.missed
	if lostTotal < d.lost {
		lost = lostTotal
	}
	if missedTotal < d.missed {
		missed = missedTotal
	}
	d.lost, d.missed = lostTotal, missedTotal
	return lost, missed
}

// MissedRuns is one program's share of an interval's missed probe runs:
// its event.ProgramStats name, the runs the kernel skipped, and of them
// Unseen, those it ran no BPF program for at all (event.ProgramStats'
// UnseenRuns; the rest are recursion misses: a program already running
// on that CPU).
type MissedRuns struct {
	Program string `json:"program"`
	Runs    uint64 `json:"runs"`
	Unseen  uint64 `json:"unseen,omitempty"`
}

// MissDelta turns a tracer's per-program skip totals (event.ProgramStats'
// RecursionMisses plus UnseenRuns) into what each interval added. The zero
// value starts from 0.
type MissDelta struct{ prev map[string][2]uint64 }

// Since returns the programs whose skips grew since the previous call, the
// most first (then by name), and remembers the totals. A total that went
// back (a new tracer) counts whole.
func (d *MissDelta) Since(ps []event.ProgramStats) []MissedRuns {
	var out []MissedRuns
	cur := make(map[string][2]uint64, len(ps))
	for _, p := range ps {
		n := [2]uint64{p.RecursionMisses, p.UnseenRuns}
		cur[p.Name] = n
		var grew [2]uint64
		for i := range n {
			grew[i] = n[i] - d.prev[p.Name][i]
			if n[i] < d.prev[p.Name][i] {
				grew[i] = n[i]
			}
		}
		if grew[0]+grew[1] > 0 {
			out = append(out, MissedRuns{p.Name, grew[0] + grew[1], grew[1]})
		}
	}
	d.prev = cur
	slices.SortFunc(out, func(a, b MissedRuns) int {
		return cmp.Or(cmp.Compare(b.Runs, a.Runs), cmp.Compare(a.Program, b.Program))
	})
	return out
}

// Add counts r in the current interval.
func (b *IntervalBuilder) Add(r *FsyncRecord) {
	b.totals = append(b.totals, r.TotalNs)
	for i, v := range r.Layers.values() {
		b.sums[i] += v
	}
}

// Count is how many fsyncs were added since the last Summary.
func (b *IntervalBuilder) Count() int { return len(b.totals) }

// Interval is one interval of the live line: how many fsyncs, the p50
// and p99 of their wall time (ns), and the layer with the largest share
// of it (Dominant, "" for no fsyncs) with that share (0..1).
type Interval struct {
	Count    int64
	P50, P99 int64
	Dominant string
	Share    float64
}

// Summary returns what was added since the last Summary and starts the
// next interval (reusing the memory).
func (b *IntervalBuilder) Summary() Interval {
	defer func() { b.totals, b.sums = b.totals[:0], [numLayers]int64{} }()
	if len(b.totals) == 0 {
		return Interval{}
	}
	s := stats.Summarize(b.totals)
	best := 0
	for j := range b.sums {
		if b.sums[j] > b.sums[best] {
			best = j
		}
	}
	share := 0.0
	if s.Sum > 0 {
		share = float64(b.sums[best]) / float64(s.Sum)
	}
	return Interval{Count: s.Count, P50: s.P50, P99: s.P99, Dominant: LayerNames[best], Share: share}
}

// ReadJSONL reads a recording written by `etcdscope fsync --output json`:
// every fsync record, and the last summary (zero if the recording has
// none; its groups are not needed, BuildReport recomputes them). Lines of
// other types are skipped; a record of a newer schema version is an error.
func ReadJSONL(r io.Reader) (recs []FsyncRecord, summary Report, err error) {
	recs, _, summary, err = ReadJSONLWrites(r)
	return recs, summary, err
}

// ReadJSONLWrites is ReadJSONL that also returns the write records
// (type "write", fsync --writes). It holds the whole recording: a reader
// that needs only the report streams it through ScanJSONL.
func ReadJSONLWrites(r io.Reader) (recs []FsyncRecord, writes []WriteRecord, summary Report, err error) {
	summary, err = ScanJSONL(r, func(rec *FsyncRecord) error {
		recs = append(recs, *rec)
		return nil
	}, func(rec *WriteRecord) error {
		writes = append(writes, *rec)
		return nil
	})
	if err != nil {
		return nil, nil, Report{}, err
	}
	return recs, writes, summary, nil
}

// ScanJSONL reads a recording as ReadJSONLWrites does, one line at a time:
// fsync gets each fsync record and write each write record (nil: skipped),
// in the recording's order, and neither may keep the pointer (the record is
// a fresh value each line, its fields are theirs). It returns the last
// summary line (zero if none) and the first error, a callback's included.
// Its memory is one line, so a report built by a ReportBuilder from it is
// bounded by the report's own state, not by the recording's size.
func ScanJSONL(r io.Reader, fsync func(*FsyncRecord) error, write func(*WriteRecord) error) (summary Report, err error) {
	return ScanJSONLSpans(r, func(rec *FsyncRecord, _ jsonl.Span) error { return fsync(rec) }, write)
}

// ScanJSONLSpans is ScanJSONL that also gives each fsync record's line
// Span in r, for a reader that reads the record again from a file
// (DecodeFsync) instead of holding it.
func ScanJSONLSpans(r io.Reader, fsync func(*FsyncRecord, jsonl.Span) error, write func(*WriteRecord) error) (summary Report, err error) {
	var spent uint64 // the calls' total_ns so far: every series' sum is within it
	err = jsonl.ScanSpans(r, func(_ int, at jsonl.Span, h jsonl.Head, raw []byte) error {
		if h.Type == "commit" || h.Type == "commit_summary" {
			// Another command's recording: its "v" is its own schema's
			// (commit/v2), not this one's.
			return ErrCommitRecording
		}
		if h.Type == peers.HeaderType {
			// etcdscope peers --record's header (schema peers/v1): its
			// lines are TCP events, read by etcdmetric.ScanRecording.
			return ErrPeersRecording
		}
		if h.Type == "hypervisor" || h.Type == "hv_io" || h.Type == "hv_summary" {
			// The host's side of a guest/host pair (docs/merge.md): its
			// fsync records are QEMU's flushes, and its hv_summary's
			// "v" is its own line's version.
			return ErrHypervisorRecording
		}
		if max := versionOf(h.Type); h.V > max {
			return fmt.Errorf("schema version %d is newer than this etcdscope's %d", h.V, max)
		}
		switch h.Type {
		case "fsync":
			var rec FsyncRecord
			if err := json.Unmarshal(raw, &rec); err != nil {
				return err
			}
			if err := rec.checkTimes(&spent); err != nil {
				return err
			}
			return fsync(&rec, at)
		case "write":
			if write == nil {
				return nil
			}
			var rec WriteRecord
			if err := json.Unmarshal(raw, &rec); err != nil {
				return err
			}
			if err := rec.checkTimes(&spent); err != nil {
				return err
			}
			return write(&rec)
		case "summary":
			if err := json.Unmarshal(raw, &summary); err != nil {
				return err
			}
			switch {
			case summary.Version < 2: // read as the version this package writes
				for i := range summary.Levels {
					summary.Levels[i].levelV1()
				}
				summary.Version = SummaryVersion
			case summary.Version < 3: // its groups' biased text was read by Bias.UnmarshalJSON
				summary.Version = SummaryVersion
			case slices.ContainsFunc(summary.Groups, func(g Group) bool { return !g.Bias.IsZero() }) && biasAsText(raw):
				return fmt.Errorf("%w: a version %d summary with a group's biased as version 2's text", ErrForgedSummary, summary.Version)
			}
			// A run writes at most MaxGroups groups and other (and as
			// many write groups): a summary of more was not written by
			// one, and each would be a table of its own.
			if len(summary.Groups) > MaxGroups+1 || len(summary.Writes) > MaxGroups+1 {
				return fmt.Errorf("%w: a summary of %d groups and %d write groups (a run writes at most %d of each)", ErrForgedSummary, len(summary.Groups), len(summary.Writes), MaxGroups+1)
			}
			if err := checkLevelRows(summary.Levels); err != nil {
				return err
			}
			for i := range summary.Groups {
				g := &summary.Groups[i]
				if !nonNegative(g.Total) {
					return fmt.Errorf("%w: a group's total_ns of count %d, sum %d, min %d, max %d", ErrForgedSummary, g.Total.Count, g.Total.Sum, g.Total.Min, g.Total.Max)
				}
				if g.Disk != nil { // not in the JSON: the key says it
					g.Disk.LoopDevice = g.Disk.Kind == DiskFloor && isLoopDev(g.Key.DevName)
				}
				g.DiskWhy = diskWhy(g) // not in the JSON: the layers say it
			}
		}
		return nil
	})
	if err != nil {
		return Report{}, err
	}
	return summary, nil
}

// versionOf returns the newest version of a line of type typ this package
// reads: SummaryVersion for "summary", SchemaVersion for the records.
func versionOf(typ string) int {
	if typ == "summary" {
		return SummaryVersion
	}
	return SchemaVersion
}

// MaxCallNs bounds a recorded call's total_ns: a call of more than a day
// is no call a run records (etcd's members time out in seconds), and
// values near 2^63 made a group's sum overflow (a mean of -1.1e11 ms).
const MaxCallNs = int64(24 * time.Hour)

// ErrImpossibleRecord is returned (wrapped, naming the field) by
// ScanJSONL for a record no run writes: a total_ns (its own or a nested
// host call's) below 0 or above MaxCallNs, a part of a call (a layer, the
// dm hold and lower layers, the scheduler's split) below 0 or above its
// total_ns, or calls whose total_ns add up past 2^63 ns (292 years), which
// no sum holds.
var ErrImpossibleRecord = errors.New("not a record etcdscope writes")

// ErrCommitRecording is returned (wrapped with its line) by ScanJSONL for a
// recording of `etcdscope commit --output json` (schema commit/v2, read by
// analysis/commit.ReadRecords): its records are writes, not fsync calls.
var ErrCommitRecording = errors.New("a commit recording (etcdscope commit --output json, schema commit/v2), not an fsync one")

// ErrPeersRecording is returned (wrapped with its line) by ScanJSONL for a
// recording of `etcdscope peers --record` (schema peers/v1, docs/peers.md),
// which the page reads with --peers beside an fsync recording.
var ErrPeersRecording = errors.New("a peers recording (etcdscope peers --record, schema peers/v1), not an fsync one")

// ErrHypervisorRecording is returned (wrapped with its line) by ScanJSONL
// for a recording of `etcdscope hypervisor --output json` (docs/merge.md:
// "hypervisor", "hv_io", "hv_summary" lines beside the host's flushes),
// which merge reads beside the guest's fsync recording.
var ErrHypervisorRecording = errors.New("a hypervisor recording (etcdscope hypervisor --output json), not an fsync one")

// checkTimes fails for a record no run writes (ErrImpossibleRecord), and
// adds its total_ns and its nested host calls' to spent (the stacked
// levels sum those).
func (r *FsyncRecord) checkTimes(spent *uint64) error {
	if err := checkTotal(r.TotalNs, spent); err != nil {
		return err
	}
	total := r.TotalNs
	layers := r.Layers.values()
	parts := append(layers[:], r.Sched.parts()...)
	if r.DM != nil {
		lower := r.DM.Lower.values()
		parts = append(append(parts, r.DM.HeldNs), lower[:]...)
	}
	for _, v := range parts {
		if v < 0 || v > total {
			return fmt.Errorf("%w: a part of the call of %d ns, its total_ns %d", ErrImpossibleRecord, v, total)
		}
	}
	// A host call nests in a flush request, which may have been issued
	// before the call began: within a day, not within the call.
	for i := range r.Requests {
		for j := range r.Requests[i].Host {
			if err := r.Requests[i].Host[j].checkTimes(spent); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkTimes is FsyncRecord.checkTimes for a write record.
func (r *WriteRecord) checkTimes(spent *uint64) error {
	if err := checkTotal(r.TotalNs, spent); err != nil {
		return err
	}
	parts := append([]int64{r.Layers.ThrottledNs, r.Layers.WritebackWaitNs, r.Layers.OtherNs}, r.Sched.parts()...)
	for _, v := range parts {
		if v < 0 || v > r.TotalNs {
			return fmt.Errorf("%w: a part of the call of %d ns, its total_ns %d", ErrImpossibleRecord, v, r.TotalNs)
		}
	}
	return nil
}

// checkTotal fails for a total_ns outside [0, MaxCallNs] or one that
// takes spent past 2^63, and adds it to spent.
func checkTotal(total int64, spent *uint64) error {
	if total < 0 || total > MaxCallNs {
		return fmt.Errorf("%w: total_ns %d (a call takes 0 to %d ns)", ErrImpossibleRecord, total, MaxCallNs)
	}
	if *spent += uint64(total); *spent > math.MaxInt64 {
		return fmt.Errorf("%w: the calls' total_ns add up to more than 2^63 ns", ErrImpossibleRecord)
	}
	return nil
}

// nonNegative reports whether every number of s is 0 or more, as a run's
// are.
func nonNegative(s stats.Summary) bool {
	return min(s.Count, s.Sum, s.Min, s.P50, s.P90, s.P99, s.Max) >= 0
}

// maxLevelRowsAll bounds a summary's stacked-level rows: MaxLevelRows
// and a folded row for each level, MaxUntracedLevels untraced rows and
// their dropped row.
const maxLevelRowsAll = 4*(MaxLevelRows+1) + MaxUntracedLevels + 1 // 4: len(LevelNames)

// checkLevelRows fails (ErrForgedSummary) for stacked-level rows no run
// writes: more than maxLevelRowsAll, a level or untraced reason this
// package does not name, a negative or non-finite number, a share outside
// [0, 1], a newline in a device or filesystem. A forged summary's rows
// were printed as the run's: "-1e308" flushes as a 310-digit number, 2^62
// devices folded as they came, an unknown reason quoted, a newline in fs a line of its
// own (a hostile check, 2026-12-06).
func checkLevelRows(rows []LevelRow) error {
	if len(rows) > maxLevelRowsAll {
		return fmt.Errorf("%w: %d stacked-level rows (a run writes at most %d)", ErrForgedSummary, len(rows), maxLevelRowsAll)
	}
	share := func(f float64) bool { return f >= 0 && f <= 1 }
	for _, r := range rows {
		ok := slices.Contains(LevelNames, r.Level) && (r.Untraced == "" || r.Untraced == UntracedBackingFS) &&
			nonNegative(r.Total) && r.FlushesPerFsync >= 0 && !math.IsInf(r.FlushesPerFsync, 0) && share(r.NestedShare) &&
			r.Folded >= 0 && r.UntracedDropped >= 0 &&
			!strings.ContainsAny(r.Device+r.FS, "\n\r")
		for _, l := range r.Layers {
			ok = ok && nonNegative(l.Stats) && share(l.Share) && !strings.ContainsAny(l.Name, "\n\r")
		}
		if !ok {
			return fmt.Errorf("%w: a stacked-level row %q on %q no run writes (its level, reason, a number or a name)", ErrForgedSummary, r.Level, r.Device)
		}
	}
	return nil
}

// ErrForgedSummary is returned (wrapped) by ReadJSONL for a summary line
// no run writes.
var ErrForgedSummary = errors.New("not a summary etcdscope writes")

// ErrRecordingChanged is returned by FsyncAt when the line at a span
// ScanJSONLSpans gave is no longer that fsync record: the file was
// written between the two reads.
var ErrRecordingChanged = errors.New("changed while it was read: the line of an fsync record read before is no longer one")

// FsyncAt reads again the fsync record whose line ScanJSONLSpans found at
// at in r (the same file), in buf if it is large enough.
func FsyncAt(r io.ReaderAt, at jsonl.Span, buf []byte) (rec FsyncRecord, _ []byte, err error) {
	if cap(buf) < at.Len {
		buf = make([]byte, at.Len)
	}
	buf = buf[:at.Len]
	if _, err := r.ReadAt(buf, at.Off); err != nil {
		return rec, buf, fmt.Errorf("%w (%v)", ErrRecordingChanged, err)
	}
	if err := json.Unmarshal(buf, &rec); err != nil || rec.Type != "fsync" {
		return rec, buf, ErrRecordingChanged
	}
	return rec, buf, nil
}
