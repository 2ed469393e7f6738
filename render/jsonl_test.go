package render

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
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
