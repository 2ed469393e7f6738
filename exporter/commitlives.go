package exporter

import (
	"sync"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/pipeline"
)

// commitLives is the commit tracer across etcd's lives (serve
// --commit-comm follows each restarted etcd with a new tracer) as the
// self-metrics, the loss log and CommitMetrics read it: the writes seen
// and sampled, lost events and missed runs of the lives that ended (their
// final counts) plus the current life's, so that every counter stays
// monotonic across restarts. Program stats are the current life's (a new
// tracer's programs count from zero); between lives there is none.
type commitLives struct {
	// curMissed: the most the current life's Missed said; a tracer
	// closed (its etcd exited) before end says 0.
	curMissed                   uint64
	mu                          sync.Mutex
	cur                         CommitTracer
	seen, sampled, lost, missed uint64
	cut                         uint64 // writes the ended lives' duty cycles cut
}

// newCommitLives starts with the tracer on the first etcd.
func newCommitLives(first CommitTracer) *commitLives { return &commitLives{cur: first} }

// end adds the final counts of the life that res ended (its etcd exited).
func (l *commitLives) end(res *pipeline.CommitResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen += res.WritesSeen
	l.sampled += res.WritesSampled
	l.lost += res.Lost
	l.missed += max(res.Missed, l.curMissed)
	if l.cur != nil {
		l.cut += l.cur.WritesCut() // Go's count: readable after the close
	}
	l.cur, l.curMissed = nil, 0
}

// next goes on with the tracer on the next etcd.
func (l *commitLives) next(t CommitTracer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cur = t
}

func (l *commitLives) current() (CommitTracer, [4]uint64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cur, [4]uint64{l.seen, l.sampled, l.lost, l.missed}
}

// Writes implements WriteCounts.
func (l *commitLives) Writes() (seen, sampled, dropped uint64, err error) {
	cur, base := l.current()
	if cur == nil {
		return base[0], base[1], 0, nil
	}
	seen, sampled, dropped, err = cur.Writes()
	return base[0] + seen, base[1] + sampled, dropped, err
}

// WritesCut implements WriteCounts.
func (l *commitLives) WritesCut() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil {
		return l.cut
	}
	return l.cut + l.cur.WritesCut()
}

// Lost implements Source.
func (l *commitLives) Lost() (uint64, error) {
	cur, base := l.current()
	if cur == nil {
		return base[2], nil
	}
	n, err := cur.Lost()
	return base[2] + n, err
}

// Missed implements Source.
func (l *commitLives) Missed() uint64 {
	cur, base := l.current()
	if cur == nil {
		return base[3]
	}
	n := cur.Missed()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == cur {
		l.curMissed = max(l.curMissed, n)
		n = l.curMissed
	}
	return base[3] + n
}

// ProgramStats implements Source.
func (l *commitLives) ProgramStats() []event.ProgramStats {
	if cur, _ := l.current(); cur != nil {
		return cur.ProgramStats()
	}
	return nil
}
