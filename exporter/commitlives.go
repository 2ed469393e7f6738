package exporter

import (
	"sync"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/pipeline"
)

// lives is one of the commit run's tracers across etcd's lives (serve
// --commit-comm follows each restarted etcd with new tracers) as the
// self-metrics and the loss log read it: the lost events and missed runs
// of the lives that ended (their final counts) plus the current life's,
// so that every counter stays monotonic across restarts. Program stats
// and attached programs are the current life's (a new tracer's programs
// count from zero); between lives, and before the first, there is none.
type lives[T Source] struct {
	attached func(T) int // the programs of a life's tracer attached
	mu       sync.Mutex
	cur      T
	live     bool // cur is set: a life's tracer is being read
	// curMissed: the most the current life's Missed said; a tracer
	// closed (its etcd exited) before end says 0.
	curMissed    uint64
	lost, missed uint64
}

// endLocked adds the final counts of the life that ended (its etcd
// exited); l.mu is held.
func (l *lives[T]) endLocked(lost, missed uint64) {
	l.lost += lost
	l.missed += max(missed, l.curMissed)
	var none T
	l.cur, l.live, l.curMissed = none, false, 0
}

// next goes on with the tracer on the next etcd; live is false for a
// life without this tracer (it did not start).
func (l *lives[T]) next(t T, live bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cur, l.live = t, live
}

func (l *lives[T]) current() (cur T, live bool, lost, missed uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur, l.live, l.lost, l.missed
}

// Lost implements Source.
func (l *lives[T]) Lost() (uint64, error) {
	cur, live, base, _ := l.current()
	if !live {
		return base, nil
	}
	n, err := cur.Lost()
	return base + n, err
}

// Missed implements Source.
func (l *lives[T]) Missed() uint64 {
	cur, live, _, base := l.current()
	if !live {
		return base
	}
	n := cur.Missed()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.live && Source(l.cur) == Source(cur) {
		l.curMissed = max(l.curMissed, n)
		n = l.curMissed
	}
	return base + n
}

// ProgramStats implements Source.
func (l *lives[T]) ProgramStats() []event.ProgramStats {
	if cur, live, _, _ := l.current(); live {
		return cur.ProgramStats()
	}
	return nil
}

// ProgramsAttached implements AttachedSource: the current life's.
func (l *lives[T]) ProgramsAttached() int {
	if cur, live, _, _ := l.current(); live {
		return l.attached(cur)
	}
	return 0
}

// commitLives is the commit tracer across etcd's lives, as the
// self-metrics, the loss log and CommitMetrics read it: besides lives'
// counts, the writes seen, sampled and cut, each the ended lives' final
// counts plus the current life's.
type commitLives struct {
	lives[CommitTracer]
	seen, sampled uint64 // guarded by lives.mu
	cut           uint64 // writes the ended lives' duty cycles cut
}

// newCommitLives starts with the tracer on the first etcd, or with none
// (first nil: serve --commit-comm waits for the first process).
func newCommitLives(first CommitTracer) *commitLives {
	l := &commitLives{lives: lives[CommitTracer]{attached: func(t CommitTracer) int { return len(t.Probes()) }}}
	l.cur, l.live = first, first != nil
	return l
}

// end adds the final counts of the life that res ended (its etcd exited).
func (l *commitLives) end(res *pipeline.CommitResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen += res.WritesSeen
	l.sampled += res.WritesSampled
	if l.live {
		l.cut += l.cur.WritesCut() // Go's count: readable after the close
	}
	l.endLocked(res.Lost, res.Missed)
}

// Writes implements WriteCounts.
func (l *commitLives) Writes() (seen, sampled, dropped uint64, err error) {
	l.mu.Lock()
	cur, live, baseSeen, baseSampled := l.cur, l.live, l.seen, l.sampled
	l.mu.Unlock()
	if !live {
		return baseSeen, baseSampled, 0, nil
	}
	seen, sampled, dropped, err = cur.Writes()
	return baseSeen + seen, baseSampled + sampled, dropped, err
}

// WritesCut implements WriteCounts.
func (l *commitLives) WritesCut() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.live {
		return l.cut
	}
	return l.cut + l.cur.WritesCut()
}

// syncLives is the fsync tracer on etcd alone (Config.CommitSyncs)
// across etcd's lives: etcdscope_*{tracer="commit_fsync"}.
type syncLives struct{ lives[CommitSyncTracer] }

// newSyncLives starts with the fsync tracer on the first etcd, or with
// none (it did not start, or serve waits for the first etcd).
func newSyncLives(first CommitSyncTracer) *syncLives {
	l := &syncLives{lives[CommitSyncTracer]{attached: func(t CommitSyncTracer) int { return attachedProbes(t.Probes()) }}}
	l.cur, l.live = first, first != nil
	return l
}

// end adds the final counts of the life that res ended (its etcd exited).
func (l *syncLives) end(res *pipeline.CommitResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.endLocked(res.SyncLost, res.SyncMissed)
}

// attachedProbes counts the probes attached.
func attachedProbes(ps []event.Probe) int {
	n := 0
	for _, p := range ps {
		if p.Attached {
			n++
		}
	}
	return n
}
