package exporter

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// steppedSource's totals grow by its steps, one step per Lost call.
type steppedSource struct {
	lost, missed []uint64
	i            atomic.Int32
}

func (s *steppedSource) Lost() (uint64, error) {
	i := min(int(s.i.Add(1))-1, len(s.lost)-1)
	return s.lost[i], nil
}
func (s *steppedSource) Missed() uint64 {
	return s.missed[min(int(s.i.Load())-1, len(s.missed)-1)]
}
func (s *steppedSource) ProgramStats() []event.ProgramStats { return nil }

// brokenSource cannot read its lost-event count.
type brokenSource struct{ steppedSource }

func (b *brokenSource) Lost() (uint64, error) { return 0, errors.New("reading lost_events: bad fd") }

// TestLogLoss: one line per interval that lost events, with that
// interval's loss (not the running total) and the flag that fixes it;
// nothing for a lossless interval or source; a source whose count cannot
// be read is reported unknown, never as 0.
func TestLogLoss(t *testing.T) {
	fsync := &steppedSource{lost: []uint64{0, 2210, 2210, 2300}, missed: []uint64{0, 0, 0, 0}}
	quiet := &steppedSource{lost: []uint64{0}, missed: []uint64{0}}
	var out testenv.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		logLoss(ctx, &out, 20*time.Millisecond, 1<<21, []string{"fsync", "peers"}, []Source{fsync, quiet})
		close(done)
	}()
	for deadline := time.Now().Add(5 * time.Second); fsync.i.Load() < 5 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	want := []string{
		"etcdscope serve: fsync tracer lost 2210 events and missed 0 probe runs in the last 20ms: raise --ring-size (now 2097152 bytes)",
		"etcdscope serve: fsync tracer lost 90 events and missed 0 probe runs in the last 20ms: raise --ring-size (now 2097152 bytes)",
	}
	if got := strings.Split(strings.TrimSpace(out.String()), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", out.String(), strings.Join(want, "\n"))
	}

	var out2 testenv.SyncBuffer
	ctx, cancel = context.WithCancel(context.Background())
	go func() { // until the first line (or 5 s)
		for deadline := time.Now().Add(5 * time.Second); out2.String() == "" && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	logLoss(ctx, &out2, 20*time.Millisecond, 1<<21, []string{"peers"}, []Source{&brokenSource{}})
	if got, want := out2.String(), "etcdscope serve: peers tracer's lost events unknown in the last 20ms: reading lost_events: bad fd\n"; !strings.HasPrefix(got, want) {
		t.Fatalf("got %q, want it to start with %q", got, want)
	}
}
