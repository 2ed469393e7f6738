package exporter

import (
	"errors"
	"testing"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/pipeline"
)

// fakeSyncs is the fsync tracer on one etcd life; closed, its maps read
// as a closed tracer's do (tracer.FsyncTracer after Close).
type fakeSyncs struct {
	lost, missed uint64
	closed       bool
}

var errClosedMap = errors.New("reading lost_events: lookup: bad file descriptor")

func (f *fakeSyncs) Lost() (uint64, error) {
	if f.closed {
		return 0, errClosedMap
	}
	return f.lost, nil
}
func (f *fakeSyncs) Missed() uint64 {
	if f.closed {
		return 0
	}
	return f.missed
}
func (f *fakeSyncs) ProgramStats() []event.ProgramStats { return []event.ProgramStats{{Name: "p"}} }
func (f *fakeSyncs) Probes() []event.Probe {
	return []event.Probe{{Name: "a", Attached: true}, {Name: "b"}, {Name: "c", Attached: true}}
}
func (f *fakeSyncs) Drain() error              { return nil }
func (f *fakeSyncs) Close() error              { f.closed = true; return nil }
func (f *fakeSyncs) Read(*event.Any) error     { return errors.New("not read here") }
func (f *fakeSyncs) DetachThreadProbes() error { return nil }
func (f *fakeSyncs) AttachThreadProbes() error { return nil }

// TestSyncLivesFollowRestarts: etcdscope_*{tracer="commit_fsync"} read
// through syncLives across etcd's lives: each life's counts on top of the
// ended lives' final ones (monotonic), never the closed tracer of a life
// that ended (whose maps say "bad file descriptor"), and nothing between
// lives or before the first.
func TestSyncLivesFollowRestarts(t *testing.T) {
	check := func(when string, l *syncLives, lost, missed uint64, attached int) {
		t.Helper()
		n, err := l.Lost()
		if err != nil || n != lost || l.Missed() != missed || l.ProgramsAttached() != attached {
			t.Errorf("%s: lost %d (%v), missed %d, attached %d; want %d, %d, %d", when, n, err, l.Missed(), l.ProgramsAttached(), lost, missed, attached)
		}
	}
	first := &fakeSyncs{lost: 5, missed: 2}
	l := newSyncLives(first)
	check("first life", l, 5, 2, 2)
	first.Close() // the commit run's session closes it as etcd exits
	l.end(&pipeline.CommitResult{SyncLost: 5, SyncMissed: 2})
	check("between lives", l, 5, 2, 0)
	if l.ProgramStats() != nil {
		t.Error("program stats between lives")
	}
	second := &fakeSyncs{lost: 1, missed: 4}
	l.next(second, true)
	check("second life", l, 6, 6, 2)
	second.Close()
	l.end(&pipeline.CommitResult{SyncLost: 1, SyncMissed: 4})
	l.next(nil, false) // a life whose fsync tracer did not start
	check("a life without it", l, 6, 6, 0)

	none := newSyncLives(nil) // serve started before etcd
	check("before the first life", none, 0, 0, 0)
}
