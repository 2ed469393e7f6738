package render

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/event"
)

// timedWriter records what was written and when.
type timedWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	writes []time.Time
}

func (w *timedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, time.Now())
	return w.buf.Write(b)
}

func (w *timedWriter) snapshot() (string, []time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String(), append([]time.Time(nil), w.writes...)
}

// TestJSONLinesFlushesOnlyWhatWaits: a record reaches the writer within
// JSONLinesFlushEvery (plus scheduling slack) as the exact line AppendJSON
// makes; with nothing buffered no timer is armed (an idle tracer is not
// woken), and a record written after a flush arms it again.
func TestJSONLinesFlushesOnlyWhatWaits(t *testing.T) {
	var w timedWriter
	l := NewJSONLines(&w, 0)
	rec := analysis.FsyncRecord{Type: "fsync", Version: analysis.SchemaVersion, StartNs: 1, EndNs: 5, TotalNs: 4, Comm: "etcd", Path: "/var/lib/etcd/member/wal/0.wal", Requests: []analysis.Request{}}
	want := string(rec.AppendJSON(nil)) + "\n"
	for round := 0; round < 2; round++ {
		l.mu.Lock()
		armed := l.armed
		l.mu.Unlock()
		if armed {
			t.Fatalf("round %d: flush timer armed with nothing buffered", round)
		}
		start := time.Now()
		if err := l.Fsync(&rec); err != nil {
			t.Fatal(err)
		}
		if got, _ := w.snapshot(); got != string(bytes.Repeat([]byte(want), round)) {
			t.Fatalf("round %d: written before the timer: %q", round, got)
		}
		deadline := start.Add(5 * JSONLinesFlushEvery) // slack for a loaded machine
		for {
			got, writes := w.snapshot()
			if got == string(bytes.Repeat([]byte(want), round+1)) {
				d := writes[len(writes)-1].Sub(start)
				if d < JSONLinesFlushEvery {
					t.Fatalf("round %d: flushed after %v, before JSONLinesFlushEvery (%v)", round, d, JSONLinesFlushEvery)
				}
				t.Logf("round %d: flushed after %v", round, d)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("round %d: not flushed after %v: %q", round, time.Since(start), got)
			}
			time.Sleep(5 * time.Millisecond)
		}
		// The flush and the disarm happen under one lock hold.
		l.mu.Lock()
		armed = l.armed
		l.mu.Unlock()
		if armed {
			t.Fatalf("round %d: flush timer still armed after the flush", round)
		}
	}
	if err := l.Fsync(&rec); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _ := w.snapshot(); got != string(bytes.Repeat([]byte(want), 3)) {
		t.Fatalf("Close did not flush the last record: %q", got)
	}
	if err := l.Close(); err != nil { // a second Close is harmless
		t.Fatal(err)
	}
}

// TestJSONLinesTimerQuietUnderLoad: while lines fill the buffer faster
// than JSONLinesFlushEvery, each write of the full buffer moves the timer
// back, so it does not fire during the stream; the stream's tail still
// reaches the writer within JSONLinesFlushEvery (plus slack) of its line.
func TestJSONLinesTimerQuietUnderLoad(t *testing.T) {
	var w timedWriter
	l := NewJSONLines(&w, 0)
	rec := analysis.FsyncRecord{Type: "fsync", Version: analysis.SchemaVersion, StartNs: 1, EndNs: 5, TotalNs: 4, Comm: "etcd",
		Path: "/" + strings.Repeat("d", 4000), Requests: []analysis.Request{}}
	line := string(rec.AppendJSON(nil)) + "\n"
	stream := 5 * JSONLinesFlushEvery
	n := 0
	for start := time.Now(); time.Since(start) < stream; n++ {
		if err := l.Fsync(&rec); err != nil { // ~16 lines a 64 KiB buffer: a write every ~16 ms
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	last := time.Now()
	l.mu.Lock()
	fires := l.timerFlushes
	l.mu.Unlock()
	// Without the move back it fires every JSONLinesFlushEvery (5 times);
	// a stall of the loop past it on a loaded machine may let one through.
	if fires > 1 {
		t.Errorf("the flush timer fired %d times during a %v stream of %d lines", fires, stream, n)
	}
	for {
		got, writes := w.snapshot()
		if got == strings.Repeat(line, n) {
			if d := writes[len(writes)-1].Sub(last); d > 5*JSONLinesFlushEvery {
				t.Errorf("the tail was flushed %v after its line", d)
			}
			break
		}
		if time.Since(last) > 5*JSONLinesFlushEvery {
			t.Fatalf("%d of %d bytes written %v after the last line", len(got), n*len(line), time.Since(last))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSummaryJSONFieldOrder: SummaryJSON writes what json.Encoder writes
// for the report, with disk_verdict.text last in its object: summaryGroup
// declares Group's last two fields again, so they must stay its last two.
func TestSummaryJSONFieldOrder(t *testing.T) {
	gt := reflect.TypeFor[analysis.Group]()
	n := gt.NumField()
	if gt.Field(n-2).Name != "Disk" || gt.Field(n-1).Name != "DiskWhy" {
		t.Fatalf("analysis.Group's last fields are %s, %s: summaryGroup must declare again every field from Disk on", gt.Field(n-2).Name, gt.Field(n-1).Name)
	}
	const ms = 1_000_000
	var recs []analysis.FsyncRecord
	for i := 0; i < 20; i++ {
		recs = append(recs, analysis.FsyncRecord{PID: 1, Comm: "etcd", Syscall: "fdatasync", Dev: "7:3", DevName: "loop3", FS: "ext4", FileKind: analysis.KindWAL,
			TotalNs: 10 * ms, Layers: analysis.Layers{DeviceFlushNs: 6 * ms, DataWritebackNs: 4 * ms}, Flushes: 2})
	}
	recs = append(recs, analysis.FsyncRecord{PID: 1, Comm: "etcd", Syscall: "fsync", Dev: "7:3", DevName: "loop3", FS: "ext4", FileKind: analysis.KindWALDir,
		TotalNs: ms, Layers: analysis.Layers{OtherNs: ms}})
	for _, rep := range []analysis.Report{
		analysis.BuildReport(recs, 2, 1, []analysis.Unavailable{{Probe: "a <probe>", Text: "\"unavailable\""}, {Probe: "tp_btf/x", Dark: event.DarkIOUring, Reason: event.ReasonRefused, Err: "<err>"}}),
		analysis.BuildReport(recs[20:], 0, 0, nil),
		analysis.BuildReport(nil, 0, 0, nil),
		{Type: "summary", LossCut: analysis.LossNoSummary},
	} {
		var got, want bytes.Buffer
		if err := SummaryJSON(&got, &rep); err != nil {
			t.Fatal(err)
		}
		worded := rep
		worded.LossUnknown = LossUnknown(&rep)
		if err := json.NewEncoder(&want).Encode(worded); err != nil {
			t.Fatal(err)
		}
		w := want.String()
		for _, g := range rep.Groups {
			if g.Disk == nil {
				continue
			}
			// json.Encoder escapes as SummaryJSON does (HTML too).
			text, _ := json.Marshal(DiskVerdictText(g.Disk))
			before, after, ok := strings.Cut(w, `"per_flush_ns":`+strconv.FormatInt(g.Disk.PerFlushNs, 10))
			if !ok {
				t.Fatalf("no per_flush_ns in %s", w)
			}
			w = before + `"per_flush_ns":` + strconv.FormatInt(g.Disk.PerFlushNs, 10) + `,"text":` + string(text) + after
		}
		if got.String() != w {
			t.Errorf("SummaryJSON:\n%s\nwant:\n%s", got.String(), w)
		}
	}
}

// TestDiskVerdictText: each kind of disk verdict's line, leading with the
// number it rests on, and the numbers line under it, every number of the
// JSON's disk_verdict in one of the two, each line at most 200 characters
// (analysis.TestDiskVerdict judges the kinds).
func TestDiskVerdictText(t *testing.T) {
	v := analysis.DiskVerdict{DeviceFlushShare: 0.6, BlockQueueShare: 0.05, DeviceFlushP50Ns: 6_000_000, BlockQueueP99Ns: 120_000, PerFlushNs: 3_000_000}
	flush := "device_flush 60% of the time, 3.000 ms per flush or FUA write"
	for _, c := range []struct {
		kind string
		loop bool
		want string
	}{
		{analysis.DiskFloor, false, "floor: " + flush + ", a volatile write cache's fixed cost: a drive with power-loss protection helps, throttling other I/O does not"},
		{analysis.DiskFloor, true, "floor: " + flush + ": the host's fsync of the loop's backing file (levels: backing): a faster host fsync helps, throttling not"},
		{analysis.DiskContention, false, "contention: block_queue 5% of the time: other I/O on this disk delays etcd's (" + flush + ")"},
	} {
		v.Kind, v.LoopDevice = c.kind, c.loop
		got := DiskVerdictText(&v)
		if got != c.want {
			t.Errorf("%s loop %v: %q", c.kind, c.loop, got)
		}
		numbers := DiskVerdictNumbers(&v)
		if want := "device_flush p50 6.000 ms a call (the fixed price a floor shows); block_queue p99 0.120 ms a call, 5% of the time (the queue contention shows)"; numbers != want {
			t.Errorf("numbers %q, want %q", numbers, want)
		}
		// The longest the numbers make it: 100% and seconds-long flushes.
		wide := analysis.DiskVerdict{Kind: c.kind, LoopDevice: c.loop, DeviceFlushShare: 1, BlockQueueShare: 1, DeviceFlushP50Ns: 9_999_999_999, BlockQueueP99Ns: 9_999_999_999, PerFlushNs: 9_999_999_999}
		for _, line := range []string{"  disk verdict: " + DiskVerdictText(&wide), "    " + DiskVerdictNumbers(&wide)} {
			if n := utf8.RuneCountInString(line); n > 200 {
				t.Errorf("%d characters, at most 200: %s", n, line)
			}
		}
	}
}
