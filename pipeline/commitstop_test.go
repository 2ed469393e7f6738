package pipeline

import (
	"context"
	"io"
	"os"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/event"
)

// fakeCommit is a CommitSource on a quiet etcd: Read blocks until the
// tracer is drained or closed, then says the end.
type fakeCommit struct{ *fakeTracer }

func (f fakeCommit) Read(*event.Commit) error {
	<-f.stopped
	return io.EOF
}

func (f fakeCommit) Writes() (seen, sampled, dropped uint64, err error) { return 0, 0, 0, nil }

// TestRunCommitStopAtOnce: a run stopped by its context with StopAtOnce
// (serve at SIGINT) finishes without the settle before the drain, so the
// close (the probes' detach, the slowest step of serve's exit) starts at
// once; without it the finish waits finishSettle first.
func TestRunCommitStopAtOnce(t *testing.T) {
	for _, tc := range []struct {
		atOnce   bool
		min, max time.Duration
	}{
		// Measured (2 cores, load ~5): 0.1-0.3 ms at once, 200.2-200.6
		// ms with the settle; the bound at once leaves 50 ms for a
		// loaded machine's scheduling, well under finishSettle.
		{atOnce: true, max: 50 * time.Millisecond},
		{atOnce: false, min: finishSettle, max: time.Second},
	} {
		log := &callLog{}
		ft := fakeCommit{newFake("commit", log)}
		ctx, cancel := context.WithCancel(context.Background())
		s := NewSession(ctx, 0, "")
		s.Add("commit", ft)
		done := make(chan time.Duration, 1)
		var start time.Time
		go func() {
			// Stopped once the run waits (its start is immediate: no
			// endpoints, no model).
			time.Sleep(50 * time.Millisecond)
			start = time.Now()
			cancel()
		}()
		go func() {
			defer s.Close()
			if _, err := RunCommit(s, CommitOptions{PID: os.Getpid(), Source: ft, ModelScrapeEvery: -1, StopAtOnce: tc.atOnce}); err != nil {
				t.Error(err)
			}
			done <- time.Since(start)
		}()
		took := <-done
		t.Logf("StopAtOnce %v: the run returned %v after the stop", tc.atOnce, took)
		if took < tc.min || took > tc.max {
			t.Errorf("StopAtOnce %v: the run returned %v after the stop, want %v to %v", tc.atOnce, took, tc.min, tc.max)
		}
		if ft.closeCount() != 1 {
			t.Errorf("StopAtOnce %v: closed %d times, want 1", tc.atOnce, ft.closeCount())
		}
	}
}
