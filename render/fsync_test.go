package render

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
)

func TestFsyncReportTable(t *testing.T) {
	var recs []analysis.FsyncRecord
	for i := 0; i < 100; i++ {
		total := int64(1.1e6 + i*1e5)
		recs = append(recs, analysis.FsyncRecord{PID: 99, Comm: "etcd", Syscall: "fdatasync", Dev: "254:1", DevName: "vda1", FS: "ext4",
			FileKind: analysis.KindWAL, TotalNs: total, Flushes: 1, Layers: analysis.Layers{DeviceFlushNs: total - 1e5, OtherNs: 1e5}})
	}
	rep := analysis.BuildReport(recs, 3, 0, []analysis.Unavailable{{Probe: "tp_btf/xfs_log_force", Dark: event.DarkXFSLogForce, Reason: event.ReasonModuleNotLoaded, Module: "xfs"}})
	var table bytes.Buffer
	if err := FsyncReport(&table, &rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"etcd pid 99", "ext4 on vda1 (254:1)", "wal files", "device_flush", "OVER BUDGET", "3 lost events",
		// 11 of 100 calls over 10 ms: 3 hidden calls cannot bring p99 under.
		"verdict holds though 3 lost events: even if each hid a call under 10ms, p99 would stay over the budget (the ring buffer overflowed: raise --ring-size)",
		"unavailable: tp_btf/xfs_log_force: no xfs_log_force: an xfs fsync's log force unseen\n  why: xfs not loaded: no xfs tracepoints\n", "flushes per fsync: 1.00 (100 flush requests)",
		"disk verdict: floor: device_flush 98% of the time, 5.950 ms per flush or FUA write, a volatile write cache's fixed cost: a drive with power-loss protection helps, throttling other I/O does not\n    device_flush p50 5.900 ms a call (the fixed price a floor shows); block_queue p99 0.000 ms a call, 0% of the time (the queue contention shows)"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	// One call of 100 over the budget: p99 (the 99th) is under it, and 4
	// hidden calls over it would make it over: biased.
	edge := make([]analysis.FsyncRecord, 100)
	for i := range edge {
		edge[i] = recs[0]
		edge[i].TotalNs = 1e6
	}
	edge[99].TotalNs = 20e6
	// Only missed probe runs (the demo's 4 on 6.18): the verdict is
	// biased, but a bigger ring would not help, and the line says so.
	rep = analysis.BuildReport(edge, 0, 4, nil)
	table.Reset()
	if err := FsyncReport(&table, &rep); err != nil {
		t.Fatal(err)
	}
	if s := table.String(); !strings.Contains(s, "verdict uncertain: 4 missed probe runs could each hide a call that would change it (runs the kernel skipped, not the ring: --ring-size does not help)") || strings.Contains(s, "raise --ring-size") || strings.Contains(s, "biased: 0") {
		t.Errorf("missed-only verdict line:\n%s", s)
	}
	// Both: each count under its own name, the summary's, and the hint
	// says which one a bigger ring helps.
	rep = analysis.BuildReport(edge, 1, 2, nil)
	table.Reset()
	if err := FsyncReport(&table, &rep); err != nil {
		t.Fatal(err)
	}
	if s := table.String(); !strings.Contains(s, "verdict uncertain: 1 lost event, 2 missed probe runs could each hide a call that would change it (raise --ring-size for the lost events; it does not bring back the missed probe runs)") {
		t.Errorf("lost and missed verdict line:\n%s", s)
	}
	// 1000 calls all at 1 ms: 4 hidden calls over 10 ms leave p99 under.
	many := make([]analysis.FsyncRecord, 1000)
	for i := range many {
		many[i] = edge[0]
	}
	rep = analysis.BuildReport(many, 0, 4, nil)
	table.Reset()
	if err := FsyncReport(&table, &rep); err != nil {
		t.Fatal(err)
	}
	if s := table.String(); !strings.Contains(s, "verdict: OK") || !strings.Contains(s, "verdict holds though 4 missed probe runs: even if each hid a call of 10ms or more, p99 would stay under the budget (runs the kernel skipped, not the ring: --ring-size does not help)") {
		t.Errorf("ok verdict that holds:\n%s", s)
	}
	// A group with no verdict (fsyncs of the WAL directory: etcd's budget
	// is for WAL files) has its numbers biased, not a verdict.
	for i := range recs {
		recs[i].FileKind = analysis.KindWALDir
	}
	rep = analysis.BuildReport(recs, 3, 0, nil)
	table.Reset()
	if err := FsyncReport(&table, &rep); err != nil {
		t.Fatal(err)
	}
	if s := table.String(); !strings.Contains(s, "verdict: n/a") || !strings.Contains(s, "numbers biased: 3 lost events (the ring buffer overflowed: raise --ring-size)") || strings.Contains(s, "verdict uncertain") {
		t.Errorf("no-verdict group's biased line:\n%s", s)
	}
}

// TestFsyncReportFUAWrites: FUA writes are counted apart from flushes.
func TestFsyncReportFUAWrites(t *testing.T) {
	recs := []analysis.FsyncRecord{{PID: 1, Comm: "etcd", Syscall: "fdatasync", Dev: "254:1", FS: "ext4", FileKind: analysis.KindWAL,
		TotalNs: 2e6, Flushes: 1, FUAWrites: 1, Layers: analysis.Layers{DeviceFlushNs: 1e6, OtherNs: 1e6}}}
	rep := analysis.BuildReport(recs, 0, 0, nil)
	var out bytes.Buffer
	if err := FsyncReport(&out, &rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "flushes per fsync: 1.00 (1 flush request, and 1 FUA write); ") {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestFsyncReportUnpartitioned: the calls --kernel-partition could not
// record are named as such, beside the lost events they are part of.
func TestFsyncReportUnpartitioned(t *testing.T) {
	recs := []analysis.FsyncRecord{{PID: 1, Comm: "etcd", Syscall: "fdatasync", Dev: "254:1", FS: "ext4", FileKind: analysis.KindWAL,
		TotalNs: 2e6, Layers: analysis.Layers{OtherNs: 2e6}}}
	rep := analysis.BuildReport(recs, 3, 0, nil)
	rep.Unpartitioned = 3
	var out bytes.Buffer
	if err := FsyncReport(&out, &rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "not partitioned: 3 calls the kernel could not assemble") {
		t.Errorf("table:\n%s", out.String())
	}
}

// TestFsyncReportDiskCaches: each disk's write cache mode, where known.
func TestFsyncReportDiskCaches(t *testing.T) {
	rep := analysis.Report{Disks: []analysis.DiskCache{{Dev: "252:0", Name: "nullb0", WriteCache: "write back", FUA: true},
		{Dev: "7:0", Name: "loop0", WriteCache: "write back"}, {Dev: "253:0", Name: "vda", WriteCache: "write through"}, {Dev: "8:0"}}}
	var out bytes.Buffer
	if err := FsyncReport(&out, &rep); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{"disk nullb0 (252:0): write cache write back, FUA (a journal commit is a flush and a FUA write)\n",
		"disk loop0 (7:0): write cache write back, no FUA (the block layer follows each FUA write with a flush)\n",
		"disk vda (253:0): write cache write through, no volatile cache (the block layer drops flushes and FUA)\n"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "8:0") {
		t.Errorf("a disk whose cache is unknown is shown:\n%s", s)
	}
}

func TestFsyncReportBinnedNote(t *testing.T) {
	b := analysis.NewReportBuilder()
	for i := 0; i < stats.ExactLimit+10; i++ {
		r := analysis.FsyncRecord{Comm: "etcd", PID: 42, Syscall: "fdatasync", Dev: "254:1", FS: "ext4", FileKind: "wal", TotalNs: int64(1e5 + i)}
		b.Add(&r)
	}
	rep := b.Report(0, 0, nil)
	var out bytes.Buffer
	if err := FsyncReport(&out, &rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "binned as fio bins") {
		t.Errorf("table does not say its quantiles are binned:\n%s", out.String())
	}
}

// TestFsyncReportDMLevels: calls on a device-mapper device get a dm row in
// their group's layers and the levels table's dm and lower rows; a group
// without dm time keeps its five rows.
func TestFsyncReportDMLevels(t *testing.T) {
	dm := analysis.FsyncRecord{PID: 99, Comm: "etcd", Syscall: "fdatasync", Dev: "253:0", DevName: "dm-0", FS: "ext4",
		FileKind: analysis.KindWAL, TotalNs: 25e6, Flushes: 2,
		Layers:   analysis.Layers{DMNs: 21e6, DeviceFlushNs: 1e6, BlockQueueNs: 1e6, OtherNs: 2e6},
		Requests: []analysis.Request{{Role: analysis.RoleFlush, DM: true}, {Role: analysis.RoleFlush}},
		DM: &analysis.DMLevel{Dev: "253:0", DevName: "dm-0", Targets: []string{"7:0"}, TargetNames: []string{"loop0"}, Bios: 1, HeldNs: 21e6,
			Lower: analysis.Layers{DeviceFlushNs: 1e6, BlockQueueNs: 1e6}}}
	plain := analysis.FsyncRecord{PID: 98, Comm: "etcd", Syscall: "fdatasync", Dev: "254:1", DevName: "vda1", FS: "ext4",
		FileKind: analysis.KindBackend, TotalNs: 1e6, Layers: analysis.Layers{DeviceFlushNs: 1e6}}
	rep := analysis.BuildReport([]analysis.FsyncRecord{dm, dm, plain}, 0, 0, nil)
	var table bytes.Buffer
	if err := FsyncReport(&table, &rep); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	for _, want := range []string{"most time in dm (84%)",
		"stacked levels (dm: the time the device-mapper target held upper's bios; lower: the requests beneath it, per upper fsync; flushes: flush requests per upper fsync)",
		"upper   dm-0 / ext4", "dm      dm-0 / dm                  21.000     21.000       1.00  dm 100%",
		"lower   loop0 / disk                2.000      2.000       1.00  device_flush 50%, block_queue 50%"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n  dm          "); n != 1 { // not the level row "  dm      dm-0"
		t.Errorf("%d group rows named dm, want 1 (the dm-0 group's only):\n%s", n, out)
	}
}

// TestFsyncReportOtherPointsToSched: a group whose time is mostly "other"
// (no kernel layer explains it) points to --sched; with the split present,
// or with a kernel layer largest, it does not.
func TestFsyncReportOtherPointsToSched(t *testing.T) {
	report := func(layers analysis.Layers, sched *analysis.Sched) string {
		b := analysis.NewReportBuilder()
		for i := 0; i < 20; i++ {
			r := analysis.FsyncRecord{Comm: "etcd", PID: 42, Syscall: "fdatasync", Dev: "254:1", FS: "ext4", FileKind: "wal",
				TotalNs: layers.Sum(), Layers: layers, Sched: sched}
			b.Add(&r)
		}
		rep := b.Report(0, 0, nil)
		var out bytes.Buffer
		if err := FsyncReport(&out, &rep); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	const hint = "rerun with --sched"
	if out := report(analysis.Layers{DeviceFlushNs: 1e6, OtherNs: 88e6}, nil); !strings.Contains(out, hint) {
		t.Errorf("88 ms of 89 in other, no hint:\n%s", out)
	}
	if out := report(analysis.Layers{DeviceFlushNs: 6e6, OtherNs: 4e6}, nil); strings.Contains(out, hint) {
		t.Errorf("device flush largest, hint given:\n%s", out)
	}
	if out := report(analysis.Layers{DeviceFlushNs: 1e6, OtherNs: 88e6}, &analysis.Sched{Call: analysis.SchedSplit{RunnableNs: 81e6, RunningNs: 8e6}, Other: analysis.SchedSplit{RunnableNs: 80e6, RunningNs: 8e6}}); strings.Contains(out, hint) {
		t.Errorf("--sched's split present, hint given:\n%s", out)
	}
}

// TestFsyncReportInMemory: WAL calls on tmpfs reach no disk: no "OK"
// against the disk budget, however fast, and no --sched hint for the
// copy that is all their time.
func TestFsyncReportInMemory(t *testing.T) {
	b := analysis.NewReportBuilder()
	for i := 0; i < 20; i++ {
		r := analysis.FsyncRecord{Comm: "etcd", PID: 42, Syscall: "fdatasync", Dev: "0:27", FS: "tmpfs", FileKind: "wal",
			TotalNs: 900, Layers: analysis.Layers{OtherNs: 900}}
		b.Add(&r)
	}
	rep := b.Report(0, 0, nil)
	if v := rep.Groups[0].Verdict; v != analysis.VerdictInMemory {
		t.Fatalf("verdict %q on tmpfs, want %q", v, analysis.VerdictInMemory)
	}
	var out bytes.Buffer
	if err := FsyncReport(&out, &rep); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, "verdict: not judged, tmpfs keeps files in memory") || strings.Contains(s, "OK") || strings.Contains(s, "--sched") {
		t.Errorf("tmpfs WAL group:\n%s", s)
	}
}

// TestFsyncReportNoCommitNote: the note on calls that waited on no jbd2
// commit gives each file kind its own reason: the WAL's preallocation
// (unwritten extents, whose first write needs a commit) only for the WAL
// files, never for the WAL directory's fsync (a directory's fsync commits
// whatever the journal holds); and for every kind, that an ext4 without a
// journal has none.
func TestFsyncReportNoCommitNote(t *testing.T) {
	const prealloc = "the WAL segments etcd preallocates"
	const noJournal = "note: an ext4 without a journal has no jbd2 commits"
	for _, tc := range []struct {
		kind, want string
		prealloc   bool
	}{
		{analysis.KindWAL, "with a journal etcd's WAL calls usually do (the first write to each extent of " + prealloc + " is new metadata)", true},
		{analysis.KindWALDir, "a directory's fsync commits whatever the journal holds: none when nothing changed since the last commit", false},
		{analysis.KindBackend, "an fdatasync needs one only for new metadata (a new block, a larger size, an unwritten extent's first write), not to overwrite blocks", false},
	} {
		recs := []analysis.FsyncRecord{{PID: 1, Comm: "etcd", Syscall: "fsync", Dev: "254:1", FS: "ext4", FileKind: tc.kind,
			TotalNs: 1e6, Layers: analysis.Layers{OtherNs: 1e6}}}
		rep := analysis.BuildReport(recs, 0, 0, nil)
		var out bytes.Buffer
		if err := FsyncReport(&out, &rep); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		if !strings.Contains(s, "note: no call waited on a jbd2 commit: "+tc.want+"\n") || !strings.Contains(s, noJournal) {
			t.Errorf("%s: note lacks %q:\n%s", tc.kind, tc.want, s)
		}
		// All of the call in other: the --sched hint, which says what
		// other is (the layer rows above it may be non-zero).
		if !strings.Contains(s, "note: 100% of the time is in other (no block request or journal commit in flight): rerun with --sched") {
			t.Errorf("%s: no --sched hint for a call all in other:\n%s", tc.kind, s)
		}
		if strings.Contains(s, prealloc) != tc.prealloc {
			t.Errorf("%s: preallocation note shown %v, want %v:\n%s", tc.kind, !tc.prealloc, tc.prealloc, s)
		}
	}
}

// TestFsyncReportJournalKnown: where the live run read /proc/fs/jbd2
// (Report.Journals), the table says the one note that holds: an ext4
// without a journal gets "no jbd2 journal on DEV", not the WAL's
// preallocation reason (a fresh user's run on this machine's journal-less
// root printed both); one with a journal the reason only.
func TestFsyncReportJournalKnown(t *testing.T) {
	const noJournal = "note: an ext4 without a journal has no jbd2 commits"
	for _, tc := range []struct {
		jbd2 bool
		want string
		not  []string
	}{
		{false, "  note: no jbd2 journal on vda (not in /proc/fs/jbd2): no call waits on a commit; its REQ_META writes are the journal layer\n",
			[]string{noJournal, "no call waited on a jbd2 commit"}},
		{true, "  note: no call waited on a jbd2 commit: with a journal etcd's WAL calls usually do",
			[]string{noJournal, "no jbd2 journal on"}},
	} {
		recs := []analysis.FsyncRecord{{PID: 1, Comm: "etcd", Syscall: "fdatasync", Dev: "254:0", DevName: "vda", FS: "ext4", FileKind: analysis.KindWAL,
			TotalNs: 1e6, Layers: analysis.Layers{OtherNs: 1e6}}}
		rep := analysis.BuildReport(recs, 0, 0, nil)
		rep.SetJournals([]analysis.Journal{{Dev: "254:9", Name: "vdb", JBD2: !tc.jbd2}, {Dev: "254:0", Name: "vda", JBD2: tc.jbd2}})
		if len(rep.Journals) != 1 {
			t.Fatalf("journals %+v: want the one of the group's device", rep.Journals)
		}
		var out bytes.Buffer
		if err := FsyncReport(&out, &rep); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		if !strings.Contains(s, tc.want) {
			t.Errorf("jbd2 %v: no %q:\n%s", tc.jbd2, tc.want, s)
		}
		for _, n := range tc.not {
			if strings.Contains(s, n) {
				t.Errorf("jbd2 %v: has %q:\n%s", tc.jbd2, n, s)
			}
		}
	}
}

// TestFsyncReportDiskWhy: a new user's 5 s run had device_flush 39.98%
// of a group's time, which the layer table prints "40.0%", and no disk
// verdict: the table now says the floor's 40% was missed, with the exact
// share, and the JSON summary carries the same line.
func TestFsyncReportDiskWhy(t *testing.T) {
	var recs []analysis.FsyncRecord
	for i := 0; i < 20; i++ {
		recs = append(recs, analysis.FsyncRecord{PID: 1, Comm: "etcd", Syscall: "fdatasync", Dev: "254:1", FS: "ext4", FileKind: analysis.KindWAL,
			TotalNs: 4e6, Flushes: 1, Layers: analysis.Layers{DeviceFlushNs: 1_599_200, OtherNs: 1_200_000, DataWritebackNs: 1_200_800}})
	}
	rep := analysis.BuildReport(recs, 0, 0, nil)
	var table bytes.Buffer
	if err := FsyncReport(&table, &rep); err != nil {
		t.Fatal(err)
	}
	why := "device_flush 39.98%, under the 40% the floor verdict needs"
	if s := table.String(); !strings.Contains(s, "40.0%") || !strings.Contains(s, "  disk verdict: none ("+why+")\n") {
		t.Errorf("table lacks the rounded share or %q:\n%s", why, s)
	}
	var js bytes.Buffer
	if err := SummaryJSON(&js, &rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"disk_verdict_why":"`+why+`"`) {
		t.Errorf("JSON summary lacks disk_verdict_why: %s", js.String())
	}
	// Read back, the summary's group has its why again (from its layers).
	_, back, err := analysis.ReadJSONL(bytes.NewReader(js.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Groups) != 1 || DiskWhyText(back.Groups[0].DiskWhy) != why {
		t.Errorf("read back: %+v", back.Groups)
	}
}

// TestBiasCountsAsTheJSON: the table and the page word a group's Bias in
// the summary's terms: BiasCounts names each count the JSON's
// groups[].biased carries (docs/schema.md), with its number, and no other.
func TestBiasCountsAsTheJSON(t *testing.T) {
	for _, tc := range []struct {
		b     analysis.Bias
		words string
	}{
		{analysis.Bias{LostEvents: 1}, "1 lost event"},
		{analysis.Bias{LostEvents: 40, MissedRuns: 2}, "40 lost events, 2 missed probe runs"},
		{analysis.Bias{MissedRuns: 1}, "1 missed probe run"},
		{analysis.Bias{MissedRuns: 4}, "4 missed probe runs"},
	} {
		js, err := json.Marshal(tc.b)
		if err != nil {
			t.Fatal(err)
		}
		var counts map[string]uint64
		if err := json.Unmarshal(js, &counts); err != nil {
			t.Fatal(err)
		}
		if counts["lost_events"] != tc.b.LostEvents || counts["missed_events"] != tc.b.MissedRuns || BiasCounts(tc.b) != tc.words {
			t.Errorf("%+v: JSON %s, words %q, want %q", tc.b, js, BiasCounts(tc.b), tc.words)
		}
	}
}

// TestIntervalLine: the live line's words for an interval
// (analysis.TestIntervalBuilder has the numbers) and its loss.
func TestIntervalLine(t *testing.T) {
	for _, c := range []struct {
		iv   analysis.Interval
		want string
	}{
		{analysis.Interval{Count: 2, P50: 2e6, P99: 4e6, Dominant: analysis.LayerDeviceFlush, Share: 0.75}, "fsyncs=2 p50=2.000ms p99=4.000ms dominant=device_flush(75%)"},
		{analysis.Interval{}, "fsyncs=0"},
		{analysis.Interval{Count: 1, P50: 1e6, P99: 1e6, Dominant: analysis.LayerJournal, Share: 0.9}, "fsyncs=1 p50=1.000ms p99=1.000ms dominant=journal(90%)"},
	} {
		if got := IntervalLine(c.iv); got != c.want {
			t.Errorf("%+v: %q, want %q", c.iv, got, c.want)
		}
	}
	if got := IntervalLoss(13, 0); got != "lost=13 missed=0" {
		t.Errorf("loss %q", got)
	}
}

// TestLevelsSayUntracedDropped: the row that counts the flush requests on
// untraced levels past those listed says how many, in the levels table.
func TestLevelsSayUntracedDropped(t *testing.T) {
	var b bytes.Buffer
	Levels(&b, []analysis.LevelRow{{Level: analysis.LevelBacking, Device: "7:0", FS: "fuse.x", Untraced: analysis.UntracedBackingFS},
		{Level: analysis.LevelBacking, UntracedDropped: 48}})
	for _, want := range []string{"not listed: 48 flush requests on more untraced backing filesystems",
		"  backing 7:0 / fuse.x           not traced: the loop driver's fsyncs of a backing file on fuse.x come from a kernel thread"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}

// TestLevelDeviceFoldedBound: a level's folded row names how many devices
// it folded, and at analysis.MaxFoldedDevices (where the count stops, a
// lower bound) says "or more".
func TestLevelDeviceFoldedBound(t *testing.T) {
	for _, c := range []struct {
		folded int64
		want   string
	}{
		{3, "other (3 devices folded:"},
		{analysis.MaxFoldedDevices - 1, "other (65535 devices folded:"},
		{analysis.MaxFoldedDevices, "other (65536 or more devices folded:"},
	} {
		if got := LevelDevice(&analysis.LevelRow{Folded: c.folded}); !strings.HasPrefix(got, c.want) {
			t.Errorf("LevelDevice(folded %d) = %q, want %q...", c.folded, got, c.want)
		}
	}
}

// TestFsyncMissedByKind: a walk of 2026-12-07 (fsync --workload wal, WAL
// 315/315 calls against etcd's metric) read "verdict uncertain: 5 missed
// probe runs could each hide a call" though the runs were
// block_rq_complete's, a completion, which cannot hide a call. Only the
// call programs' misses bring that line; a block or journal program's get
// a line naming it and what it can leave short, in serve's words.
func TestFsyncMissedByKind(t *testing.T) {
	// 100 calls at the budget's edge: one hidden call over it would make
	// the p99 over (as TestFsyncReportTable's edge).
	edge := make([]analysis.FsyncRecord, 100)
	for i := range edge {
		edge[i] = analysis.FsyncRecord{PID: 99, Comm: "etcd", Syscall: "fdatasync", Dev: "254:1", DevName: "vda1", FS: "ext4",
			FileKind: analysis.KindWAL, TotalNs: 1e6, Flushes: 1, Layers: analysis.Layers{DeviceFlushNs: 9e5, OtherNs: 1e5}}
	}
	edge[99].TotalNs = 20e6
	for _, c := range []struct {
		name     string
		progs    []analysis.MissedRuns
		want     []string
		wantNone string
	}{
		{"block completions only", []analysis.MissedRuns{{Program: "block_rq_complete", Runs: 5, Unseen: 5}},
			[]string{"5 missed probe runs (skipped by the kernel, no ring size brings them back (block_rq_complete): block layer times of calls may be short)",
				"  5 missed probe runs (block_rq_complete) cannot hide a call: block layer times of calls may be short (runs the kernel skipped: --ring-size does not bring them back)"},
			"verdict uncertain"},
		{"a call's exit and a completion", []analysis.MissedRuns{{Program: "block_rq_complete", Runs: 3, Unseen: 3}, {Program: "sys_exit_fdatasync", Runs: 2}},
			[]string{"5 missed probe runs (skipped by the kernel, no ring size brings them back (block_rq_complete +1): calls may be uncounted or short)",
				"verdict uncertain: 2 missed probe runs could each hide a call that would change it", "  3 missed probe runs (block_rq_complete) cannot hide a call"}, "5 missed probe runs could"},
		{"journal and block", []analysis.MissedRuns{{Program: "block_rq_issue", Runs: 3}, {Program: "jbd2_end_commit", Runs: 2}},
			[]string{"  5 missed probe runs (block_rq_issue +1) cannot hide a call: block layer and journal times of calls may be short"}, "verdict uncertain"},
		// Programs not known (a recording without missed_programs): every
		// run could hide a call, as before.
		{"not known", nil, []string{"verdict uncertain: 5 missed probe runs could each hide a call"}, "cannot hide"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := analysis.NewReportBuilder()
			for i := range edge {
				b.Add(&edge[i])
			}
			b.SetMissedPrograms(c.progs)
			rep := b.Report(0, 5, nil)
			var out bytes.Buffer
			if err := FsyncReport(&out, &rep); err != nil {
				t.Fatal(err)
			}
			s := out.String()
			for _, w := range c.want {
				if !strings.Contains(s, w) {
					t.Errorf("report lacks %q:\n%s", w, s)
				}
			}
			if strings.Contains(s, c.wantNone) {
				t.Errorf("report has %q:\n%s", c.wantNone, s)
			}
		})
	}
}
