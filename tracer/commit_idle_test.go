package tracer_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
	. "github.com/etcdscope/etcdscope/tracer"
)

// TestCommitAfterIdle: a write made after the commit ring has been empty
// long enough for its poll to back off to IdlePoll reaches the reader
// whole (its index and its times) within that poll, without a wake-up
// from the kernel: nothing the commit pipeline does with a record depends
// on when it is read (bench/findings.md 36), so the poll only sets how
// late the first write after a quiet spell shows; the slowest of five
// puts at five phases of the poll waits most of it (the back-off). The
// oracle: the put's return, after the write's record was made.
func TestCommitAfterIdle(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{IPs: []string{"127.0.42.11"}})
	tr, err := NewCommit(CommitConfig{PID: c.Members[0].PID})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	type read struct {
		ev event.Commit
		at time.Time
	}
	reads := make(chan read, 1024)
	go func() {
		defer close(reads)
		var ev event.Commit
		for tr.Read(&ev) == nil {
			if ev.Kind == event.CommitWriteDone {
				reads <- read{ev, time.Now()}
			}
		}
	}()
	const (
		rounds = 5
		// idle: past the back-off to IdlePoll (100 + 200 ms after the
		// last record); each round's is step longer, so that the puts
		// land at five phases of the poll.
		idle = 1200 * time.Millisecond
		step = IdlePoll / rounds
		// slack over IdlePoll: measured, 3 runs of 5 rounds at load
		// 1.8-3.3, the record read 30-191 ms after the put returned (the
		// five phases: ~30, 70, 110, 150, 190 ms in every run): worst
		// 191 ms against the bound's 300, a margin of 109 ms.
		slack = 100 * time.Millisecond
	)
	var lats []time.Duration
	for i := range rounds {
		time.Sleep(idle + time.Duration(i)*step)
		if err := c.Put(context.Background(), 1, 0, 100); err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		select {
		case r, ok := <-reads:
			if !ok {
				t.Fatal("reader ended")
			}
			w := r.ev.Write
			if w.Index == 0 || w.StartNs == 0 || w.EndNs < w.StartNs || w.TriggerNs == 0 {
				t.Errorf("write record not whole: %+v", w)
			}
			lat := max(r.at.Sub(returned), 0)
			lats = append(lats, lat)
			if lat > IdlePoll+slack {
				t.Errorf("the write after %v idle read %v after its put returned, want within the idle poll %v + %v", idle, lat, IdlePoll, slack)
			}
		case <-time.After(2 * time.Second):
			t.Fatal("no write record 2 s after the put")
		}
	}
	slices.Sort(lats)
	t.Logf("read after the put returned: %v", lats)
	// The ring backed off: a put at the start of a 200 ms poll waits most
	// of it (at pollInterval, 50 ms, none would wait past ~50 ms).
	if len(lats) == rounds && lats[rounds-1] < IdlePoll/2 {
		t.Errorf("the slowest of %d writes after idle read %v after its put, want over %v: the commit ring's poll did not back off to %v", rounds, lats[rounds-1], IdlePoll/2, IdlePoll)
	}
	if len(reads) != 0 {
		t.Errorf("%d write records more than the %d puts", len(reads), rounds)
	}
}
