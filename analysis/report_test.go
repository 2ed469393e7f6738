package analysis

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis/stats"
	"github.com/etcdscope/etcdscope/event"
)

// TestReportBuilderLongTrace: past stats.ExactLimit calls a group's
// quantiles switch to fio's bins and say so (JSON binned, a table note),
// stay within fio's half-bin of the exact order statistics of the same
// calls, and count, max and layer shares stay exact.
func TestReportBuilderLongTrace(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	b := NewReportBuilder()
	n := 2*stats.ExactLimit + 123
	totals := make([]int64, 0, n)
	var flushSum int64
	for i := 0; i < n; i++ {
		total := int64(math.Exp(rng.NormFloat64()*0.6 + math.Log(250e3)))
		flush := total / 3
		r := FsyncRecord{Comm: "etcd", PID: 42, Syscall: "fdatasync", Dev: "254:1", FS: "ext4", FileKind: "wal",
			TotalNs: total, Layers: Layers{DeviceFlushNs: flush, OtherNs: total - flush}}
		b.Add(&r)
		totals = append(totals, total)
		flushSum += flush
	}
	rep := b.Report(0, 0, nil)
	if len(rep.Groups) != 1 {
		t.Fatalf("%d groups, want 1", len(rep.Groups))
	}
	g := rep.Groups[0]
	exact := stats.Summarize(totals)
	if !g.Total.Binned || g.Total.Count != exact.Count || g.Total.Sum != exact.Sum || g.Total.Max != exact.Max || g.Total.Min != exact.Min {
		t.Fatalf("total %+v, want binned with exact count/sum/min/max of %+v", g.Total, exact)
	}
	for _, q := range [][2]int64{{g.Total.P50, exact.P50}, {g.Total.P99, exact.P99}} {
		if rel := math.Abs(float64(q[0]-q[1])) / float64(q[1]); rel > 1.0/128 {
			t.Errorf("binned quantile %d vs exact %d: %.2f%% off", q[0], q[1], 100*rel)
		}
	}
	for _, l := range g.Layers {
		if l.Name == "device_flush" && math.Abs(l.Share-float64(flushSum)/float64(exact.Sum)) > 1e-12 {
			t.Errorf("device_flush share %v, want %v", l.Share, float64(flushSum)/float64(exact.Sum))
		}
	}
}

// TestEmptyReportJSON: a run that traced nothing still writes "groups":[]
// (docs/schema.md), so `jq '.groups[]'` works on it.
func TestEmptyReportJSON(t *testing.T) {
	b, err := json.Marshal(NewReportBuilder().Report(0, 0, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"groups":[]`) {
		t.Fatalf("empty summary %s lacks \"groups\":[]", b)
	}
}

// TestReportDisks: the summary lists each disk the calls' requests went
// to once, sorted; SetDiskCaches fills in the live run's write cache by
// device and leaves disks it does not know unknown.
func TestReportDisks(t *testing.T) {
	recs := []FsyncRecord{{Comm: "etcd", TotalNs: 1, Disks: []string{"259:0", "7:0"}}, {Comm: "etcd", TotalNs: 1, Disks: []string{"7:0"}}}
	rep := BuildReport(recs, 0, 0, nil)
	if len(rep.Disks) != 2 || rep.Disks[0].Dev != "259:0" || rep.Disks[1].Dev != "7:0" || rep.Disks[0].WriteCache != "" {
		t.Fatalf("disks %+v", rep.Disks)
	}
	rep.SetDiskCaches([]DiskCache{{Dev: "7:0", Name: "loop0", WriteCache: "write back"}, {Dev: "8:0", Name: "sda"}})
	if rep.Disks[1] != (DiskCache{Dev: "7:0", Name: "loop0", WriteCache: "write back"}) || rep.Disks[0] != (DiskCache{Dev: "259:0"}) {
		t.Fatalf("after SetDiskCaches: %+v", rep.Disks)
	}
	b, _ := json.Marshal(rep)
	if !strings.Contains(string(b), `"disks":[{"dev":"259:0"},{"dev":"7:0","name":"loop0","write_cache":"write back"}]`) {
		t.Errorf("JSON %s", b)
	}
}

// TestVerdictHolds: a verdict drawn from a trace with holes holds when no
// choice of the hidden calls' durations moves the nearest-rank p99 across
// the budget; checked against brute force (each hidden call either under
// or over the budget: the p99's side depends only on how many are over).
func TestVerdictHolds(t *testing.T) {
	// overP99 says whether the p99 of over calls at 20 ms and the rest of
	// n at 1 ms is over the budget.
	overP99 := func(n, over int64) bool {
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = 1e6
			if int64(i) < over {
				vals[i] = 20e6
			}
		}
		slices.Sort(vals)
		return time.Duration(stats.Quantile(vals, 0.99)) >= WALFsyncBudget
	}
	for n := int64(1); n <= 300; n += 7 {
		for over := int64(0); over <= n; over += max(1, n/9) {
			v := VerdictOK
			if overP99(n, over) {
				v = VerdictOverBudget
			}
			for hidden := uint64(0); hidden <= 12; hidden++ {
				want := true
				for extra := int64(0); extra <= int64(hidden); extra++ {
					if overP99(n+int64(hidden), over+extra) != (v == VerdictOverBudget) {
						want = false
					}
				}
				if got := verdictHolds(v, n, over, hidden); got != want {
					t.Errorf("verdictHolds(%q, n %d, over %d, hidden %d) = %v, brute force %v", v, n, over, hidden, got, want)
				}
			}
		}
	}
	if verdictHolds("n/a", 100, 0, 1) {
		t.Error("n/a verdict holds")
	}
}

func TestReportAndJSONRoundTrip(t *testing.T) {
	a := NewAttributor(lookup)
	var recs []FsyncRecord
	for i := uint64(0); i < 100; i++ {
		s := 1e9 + i*2e7
		a.Add(event.FsyncEnter{TID: tid, StartNs: s})
		a.Add(blk(i*2+1, event.OpWrite, 0, 0, s+100, s+200+i*1000, tid, "etcd"))
		a.Add(blk(i*2+2, event.OpFlush, 0, 0, s+300+i*1000, s+1e6+i*1e5, 0, "kworker"))
		r := a.Attribute(fsyncEv(s, s+1.1e6+i*1e5))
		r.Path = "/d/member/wal/0.wal"
		r.FileKind = FileKind(r.Path)
		recs = append(recs, r)
	}
	rep := BuildReport(recs, 3, 0, []Unavailable{{Probe: "tp_btf/xfs_log_force", Dark: event.DarkXFSLogForce, Reason: event.ReasonModuleNotLoaded, Module: "xfs"}})
	if len(rep.Groups) != 1 {
		t.Fatalf("groups: %+v", rep.Groups)
	}
	g := rep.Groups[0]
	if g.Total.Count != 100 || g.Flushes != 100 || g.FlushesPerFsync != 1 {
		t.Fatalf("group %+v", g)
	}
	// p99 of 1.1 ms + i*0.1 ms, nearest rank: i = 98.
	if g.Total.P99 != 1.1e6+98*1e5 || g.Verdict != "over budget" {
		t.Fatalf("p99 %d verdict %s", g.Total.P99, g.Verdict)
	}
	var shares float64
	for _, l := range g.Layers {
		shares += l.Share
	}
	if shares < 0.999999 || shares > 1.000001 {
		t.Fatalf("shares sum to %v", shares)
	}
	if d := g.Dominant(); d.Name != LayerDeviceFlush {
		t.Fatalf("dominant %+v", d)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range recs {
		enc.Encode(r)
	}
	enc.Encode(rep)
	back, sum, err := ReadJSONL(&buf)
	if err != nil || sum.LostEvents != 3 || !reflect.DeepEqual(back, recs) {
		t.Fatalf("round trip: err %v lost %d equal %v", err, sum.LostEvents, reflect.DeepEqual(back, recs))
	}
	if again := BuildReport(back, sum.LostEvents, sum.MissedEvents, sum.Unavailable); !reflect.DeepEqual(again, rep) {
		t.Fatalf("report recomputed from the recording differs:\n%+v\n%+v", again, rep)
	}
	if _, _, err := ReadJSONL(strings.NewReader(`{"type":"fsync","v":99}`)); err == nil {
		t.Fatal("a newer schema version was accepted")
	}
}

// TestIntervalLoss: each live line shows what its own interval lost, from
// the tracer's running totals, not the totals (render.IntervalLoss words
// it).
func TestIntervalLoss(t *testing.T) {
	var b IntervalBuilder
	for _, tc := range []struct {
		lostTotal, missedTotal uint64
		lost, missed           uint64
	}{
		{0, 0, 0, 0},
		{7, 1, 7, 1},
		{7, 1, 0, 0},
		{20, 1, 13, 0},
	} {
		if l, m := b.Loss(tc.lostTotal, tc.missedTotal); l != tc.lost || m != tc.missed {
			t.Errorf("Loss(%d, %d) = %d, %d; want %d, %d", tc.lostTotal, tc.missedTotal, l, m, tc.lost, tc.missed)
		}
	}
}

// TestBiasedVerdict: a report from a trace with loss marks every verdict
// with its Bias (render.FsyncReport words it: render.TestFsyncReportTable),
// and the JSON carries its counts (summary version 3) and reads them back,
// as it reads the text versions 1 and 2 wrote.
func TestBiasedVerdict(t *testing.T) {
	recs := []FsyncRecord{{TotalNs: 1e6, Comm: "etcd", FileKind: KindWAL}}
	g := BuildReport(recs, 0, 0, nil).Groups[0]
	if !g.Bias.IsZero() || g.Verdict != "ok" {
		t.Fatalf("lossless: verdict %q bias %+v", g.Verdict, g.Bias)
	}
	if b, err := json.Marshal(g); err != nil || strings.Contains(string(b), "biased") {
		t.Errorf("lossless group's JSON has biased (%v): %s", err, b)
	}
	// Lost events and missed probe runs are counted apart, under the
	// summary's names (lost_events, missed_events), never summed.
	for _, tc := range []struct {
		lost, missed uint64
		want, v2     string
	}{
		{40, 2, `{"lost_events":40,"missed_events":2}`, "biased: 40 lost events, 2 missed probe runs"},
		{1, 0, `{"lost_events":1}`, "biased: 1 lost event"},
		{0, 1, `{"missed_events":1}`, "biased: 1 missed probe run"},
		{0, 4, `{"missed_events":4}`, "biased: 4 missed probe runs"},
	} {
		g := BuildReport(recs, tc.lost, tc.missed, nil).Groups[0]
		if g.Bias != (Bias{LostEvents: tc.lost, MissedRuns: tc.missed}) || g.Verdict != "ok" {
			t.Errorf("lost %d missed %d: verdict %q bias %+v", tc.lost, tc.missed, g.Verdict, g.Bias)
		}
		b, err := json.Marshal(g)
		if err != nil || !strings.Contains(string(b), `"biased":`+tc.want) {
			t.Errorf("lost %d missed %d: JSON (%v) %s, want biased %s", tc.lost, tc.missed, err, b, tc.want)
		}
		var back Group
		if err := json.Unmarshal(b, &back); err != nil || back.Bias != g.Bias {
			t.Errorf("%s read back as %+v (%v)", tc.want, back.Bias, err)
		}
		var old Bias
		if err := json.Unmarshal([]byte(strconv.Quote(tc.v2)), &old); err != nil || old != g.Bias {
			t.Errorf("version 2's %q read as %+v (%v)", tc.v2, old, err)
		}
	}
	for _, bad := range []string{`"3 lost events"`, `"biased: "`, `"biased: 0 lost events"`, `"biased: 3 dropped events"`, `"biased: x lost events"`, `{"lost_events":-1}`, `3`} {
		var b Bias
		if err := json.Unmarshal([]byte(bad), &b); err == nil {
			t.Errorf("%s read as %+v, want an error", bad, b)
		}
	}
}

// TestReadSummaryBiasVersions: a summary's biased is read as each version
// wrote it, and version 2's text in a version 3 summary is refused.
func TestReadSummaryBiasVersions(t *testing.T) {
	for _, tc := range []struct {
		line string
		want Bias
		bad  bool
	}{
		{`{"type":"summary","v":1,"fsyncs":1,"groups":[{"key":{"comm":"etcd"},"biased":"biased: 3 lost events"}]}`, Bias{LostEvents: 3}, false},
		{`{"type":"summary","v":2,"fsyncs":1,"groups":[{"key":{"comm":"etcd"},"biased":"biased: 3 lost events, 1 missed probe run"}]}`, Bias{LostEvents: 3, MissedRuns: 1}, false},
		{`{"type":"summary","v":3,"fsyncs":1,"groups":[{"key":{"comm":"etcd"},"biased":{"lost_events":3,"missed_events":1}}]}`, Bias{LostEvents: 3, MissedRuns: 1}, false},
		{`{"type":"summary","v":3,"fsyncs":1,"groups":[{"key":{"comm":"etcd"},"biased":"biased: 3 lost events"}]}`, Bias{}, true},
	} {
		_, sum, err := ReadJSONL(strings.NewReader(tc.line + "\n"))
		if tc.bad {
			if !errors.Is(err, ErrForgedSummary) {
				t.Errorf("%s: read (%v), want ErrForgedSummary", tc.line, err)
			}
			continue
		}
		if err != nil || len(sum.Groups) != 1 || sum.Groups[0].Bias != tc.want || sum.Version != SummaryVersion {
			t.Errorf("%s: read as %+v (%v), want bias %+v at version %d", tc.line, sum, err, tc.want, SummaryVersion)
		}
	}
}

func TestIntervalBuilder(t *testing.T) {
	recs := []FsyncRecord{
		{TotalNs: 2e6, Layers: Layers{DeviceFlushNs: 1.5e6, OtherNs: 0.5e6}},
		{TotalNs: 4e6, Layers: Layers{DeviceFlushNs: 3e6, OtherNs: 1e6}},
	}
	// The builder starts each interval afresh.
	var b IntervalBuilder
	for i := range recs {
		b.Add(&recs[i])
	}
	if b.Count() != 2 {
		t.Fatalf("Count %d, want 2", b.Count())
	}
	if got := b.Summary(); got != (Interval{Count: 2, P50: 2e6, P99: 4e6, Dominant: LayerDeviceFlush, Share: 0.75}) {
		t.Fatalf("first interval: got %+v", got)
	}
	if b.Count() != 0 {
		t.Fatalf("Count %d after Summary, want 0", b.Count())
	}
	if got := b.Summary(); got != (Interval{}) {
		t.Fatalf("empty interval: got %+v", got)
	}
	b.Add(&FsyncRecord{TotalNs: 1e6, Layers: Layers{JournalNs: 0.9e6, OtherNs: 0.1e6}})
	if got := b.Summary(); got.Count != 1 || got.P50 != 1e6 || got.P99 != 1e6 || got.Dominant != LayerJournal || math.Abs(got.Share-0.9) > 1e-9 {
		t.Fatalf("third interval: got %+v", got)
	}
}

// Calls of two groups interleaved (etcd's WAL and backend fsyncs, fsync
// and fdatasync mixed) land in their own groups with their own syscalls:
// the builder's shortcut for "same group as the last call" never leaks.
func TestReportBuilderInterleavedGroups(t *testing.T) {
	b := NewReportBuilder()
	for i := int64(0); i < 90; i++ {
		r := FsyncRecord{PID: 99, Comm: "etcd", Dev: "253:1", FS: "ext4", Syscall: "fdatasync", TotalNs: 1000 + i, Layers: Layers{OtherNs: 1000 + i}}
		switch i % 3 {
		case 0:
			r.FileKind = KindWAL
		case 1:
			r.FileKind, r.TotalNs, r.Layers.OtherNs = KindBackend, 5000+i, 5000+i
		case 2:
			r.FileKind, r.Syscall, r.TotalNs, r.Layers.OtherNs = KindBackend, "fsync", 5000+i, 5000+i
		}
		b.Add(&r)
	}
	rep := b.Report(0, 0, nil)
	if len(rep.Groups) != 2 || rep.Fsyncs != 90 {
		t.Fatalf("%d fsyncs in groups %+v", rep.Fsyncs, rep.Groups)
	}
	for _, g := range rep.Groups {
		switch g.Key.FileKind {
		case KindWAL:
			if g.Total.Count != 30 || g.Total.Max != 1087 || !slices.Equal(g.Syscalls, []string{"fdatasync"}) {
				t.Errorf("wal group %+v", g)
			}
		case KindBackend:
			if g.Total.Count != 60 || g.Total.Min != 5001 || !slices.Equal(g.Syscalls, []string{"fdatasync", "fsync"}) {
				t.Errorf("backend group %+v", g)
			}
		default:
			t.Errorf("unexpected group %+v", g)
		}
	}
}

// TestScanRefusesImpossibleTimes (issue 25): a record whose total_ns is
// negative or past MaxCallNs, a part of its time outside [0, total_ns], or
// calls whose times add up past 2^63 ns is refused (ErrImpossibleRecord),
// and a summary group with a negative number is forged; before, they were
// read (a mean of -1.1e11 ms from an overflowed sum).
func TestScanRefusesImpossibleTimes(t *testing.T) {
	rec := func(total int64, extra string) string {
		return fmt.Sprintf(`{"type":"fsync","v":1,"start_ns":1,"end_ns":2,"total_ns":%d,"pid":1,"tid":1,"comm":"x","syscall":"fsync"%s}`+"\n", total, extra)
	}
	level := func(v int, rows string) string {
		return fmt.Sprintf(`{"type":"summary","v":%d,"levels":[%s]}`+"\n", v, rows)
	}
	for _, c := range []struct {
		name, in string
		want     error
	}{
		{"a good record", rec(1000, `,"layers":{"other_ns":600,"device_flush_ns":400},"sched":{"call":{"running_ns":1000},"other":{"running_ns":600}}`), nil},
		{"negative total_ns", rec(-5, ""), ErrImpossibleRecord},
		{"total_ns near 2^63", rec(math.MaxInt64, ""), ErrImpossibleRecord},
		{"total_ns past a day", rec(MaxCallNs+1, ""), ErrImpossibleRecord},
		{"negative layer", rec(1000, `,"layers":{"other_ns":-1}`), ErrImpossibleRecord},
		{"layer past total", rec(1000, `,"layers":{"other_ns":1001}`), ErrImpossibleRecord},
		{"dm hold past total", rec(1000, `,"dm":{"dev":"253:0","held_ns":5000}`), ErrImpossibleRecord},
		{"sched split negative", rec(1000, `,"sched":{"call":{"blocked_ns":-3}}`), ErrImpossibleRecord},
		{"nested host call", rec(1000, `,"requests":[{"role":"flush","host":[{"type":"fsync","total_ns":2000,"layers":{"other_ns":2000}}]}]`), nil},
		{"nested host call negative", rec(1000, `,"requests":[{"role":"flush","host":[{"type":"fsync","total_ns":-2}]}]`), ErrImpossibleRecord},
		{"nested host layer past its total", rec(1000, `,"requests":[{"role":"flush","host":[{"type":"fsync","total_ns":20,"layers":{"journal_ns":30}}]}]`), ErrImpossibleRecord},
		{"negative write", `{"type":"write","v":1,"total_ns":-1}` + "\n", ErrImpossibleRecord},
		{"sums past 2^63", strings.Repeat(rec(MaxCallNs, ""), int(math.MaxInt64/MaxCallNs)+1), ErrImpossibleRecord},
		{"summary with a negative sum", `{"type":"summary","v":1,"groups":[{"total_ns":{"count":2,"sum":-7}}]}` + "\n", ErrForgedSummary},
		// Forged stacked-level rows (a hostile check, 2026-12-06: each was
		// printed as the run's), and the rows a run writes, v1 and v2.
		{"level rows v2", level(2, `{"level":"upper","device":"7:3","fs":"ext4","flushes_per_fsync":1.5,"layers":[{"name":"journal","share":0.5}]},{"level":"backing","device":"7:3","fs":"xfs","untraced":"backing_fs_unseen"}`), nil},
		{"level rows v1", level(1, `{"level":"L1","device":"7:3","fs":"ext4"},{"level":"L2","fs":"dm","folded_devices":3},{"level":"L2","device":"7:3","fs":"xfs","untraced":"its fsyncs are not seen"},{"level":"L3","device":"8:0"}`), nil},
		{"level unknown", level(2, `{"level":"L9"}`), ErrForgedSummary},
		{"level v1 name in v2", level(2, `{"level":"L1"}`), ErrForgedSummary},
		{"untraced reason unknown", level(2, `{"level":"backing","untraced":"\u001b]0;x\u0007"}`), ErrForgedSummary},
		{"flushes negative", level(2, `{"level":"upper","flushes_per_fsync":-1e308}`), ErrForgedSummary},
		{"nested share past 1", level(2, `{"level":"backing","nested_share":3}`), ErrForgedSummary},
		{"folded negative", level(1, `{"level":"L2","fs":"dm","folded_devices":-5}`), ErrForgedSummary},
		{"untraced dropped negative", level(2, `{"level":"backing","untraced_dropped":-9}`), ErrForgedSummary},
		{"level total negative", level(2, `{"level":"lower","total_ns":{"count":1,"sum":-1}}`), ErrForgedSummary},
		{"layer share negative", level(2, `{"level":"upper","layers":[{"name":"journal","share":-2}]}`), ErrForgedSummary},
		{"newline in fs", level(2, `{"level":"upper","device":"7:3","fs":"ext4\n  verdict: OK"}`), ErrForgedSummary},
		{"more rows than a run writes", level(2, strings.Repeat(`{"level":"lower"},`, maxLevelRowsAll)+`{"level":"lower"}`), ErrForgedSummary},
	} {
		_, _, _, err := ReadJSONLWrites(strings.NewReader(c.in))
		if !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestScanJSONLCommitRecording: a real `etcdscope commit --output json`
// recording (schema commit/v2) is named as one, not refused as an fsync
// recording of a newer version ("schema version 2 is newer than this
// etcdscope's 1").
func TestScanJSONLCommitRecording(t *testing.T) {
	f, err := os.Open("../testdata/loopback3/commit.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	_, err = ScanJSONL(f, func(*FsyncRecord) error { return nil }, nil)
	if !errors.Is(err, ErrCommitRecording) {
		t.Errorf("err %v, want ErrCommitRecording", err)
	}
}

// TestMissDelta: each interval's per-program skips (recursion misses and
// inferred unseen runs together, the unseen ones also apart), the most first, programs without new
// skips left out, and a total that went back (a new tracer) counted whole.
func TestMissDelta(t *testing.T) {
	var d MissDelta
	steps := []struct {
		ps   []event.ProgramStats
		want []MissedRuns
	}{
		{[]event.ProgramStats{{Name: "a", RecursionMisses: 1}, {Name: "b"}}, []MissedRuns{{"a", 1, 0}}},
		{[]event.ProgramStats{{Name: "a", RecursionMisses: 1}, {Name: "b"}}, nil},
		{[]event.ProgramStats{{Name: "a", RecursionMisses: 2}, {Name: "b", RecursionMisses: 1, UnseenRuns: 4}}, []MissedRuns{{"b", 5, 4}, {"a", 1, 0}}},
		{[]event.ProgramStats{{Name: "a", RecursionMisses: 1}, {Name: "b", RecursionMisses: 1, UnseenRuns: 4}}, []MissedRuns{{"a", 1, 0}}},
		{[]event.ProgramStats{{Name: "a", RecursionMisses: 1}, {Name: "b", RecursionMisses: 1, UnseenRuns: 7}}, []MissedRuns{{"b", 3, 3}}},
	}
	for i, s := range steps {
		if got := d.Since(s.ps); !reflect.DeepEqual(got, s.want) {
			t.Errorf("step %d: got %v, want %v", i, got, s.want)
		}
	}
}
