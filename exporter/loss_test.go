package exporter

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// steppedSource's totals grow by its steps, one step per Lost call.
type steppedSource struct {
	lost, missed []uint64
	progs        [][]event.ProgramStats // per step; nil: none named
	i            atomic.Int32
}

func (s *steppedSource) Lost() (uint64, error) {
	i := min(int(s.i.Add(1))-1, len(s.lost)-1)
	return s.lost[i], nil
}
func (s *steppedSource) Missed() uint64 {
	return s.missed[min(int(s.i.Load())-1, len(s.missed)-1)]
}
func (s *steppedSource) ProgramStats() []event.ProgramStats {
	if len(s.progs) == 0 {
		return nil
	}
	return s.progs[min(int(s.i.Load())-1, len(s.progs)-1)]
}

// brokenSource cannot read its lost-event count.
type brokenSource struct{ steppedSource }

func (b *brokenSource) Lost() (uint64, error) { return 0, errors.New("reading lost_events: bad fd") }

// logLossSteps runs logLoss every 20 ms on srcs until stepped has taken
// its steps (or 5 s), and returns what it wrote.
func logLossSteps(stepped *steppedSource, names []string, srcs []Source) string {
	var out testenv.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		logLoss(ctx, &out, 20*time.Millisecond, 1<<21, names, srcs)
		close(done)
	}()
	for deadline := time.Now().Add(5 * time.Second); stepped.i.Load() < 5 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	return out.String()
}

// TestLogLoss: one line per interval that lost events, with that
// interval's loss (not the running total) and the flag that fixes it;
// nothing for a lossless interval or source; a source whose count cannot
// be read is reported unknown, never as 0.
func TestLogLoss(t *testing.T) {
	fsync := &steppedSource{lost: []uint64{0, 2210, 2210, 2300}, missed: []uint64{0, 0, 0, 0}}
	quiet := &steppedSource{lost: []uint64{0}, missed: []uint64{0}}
	out := logLossSteps(fsync, []string{"fsync", "peers"}, []Source{fsync, quiet})
	want := []string{
		"etcdscope serve: fsync tracer lost 2210 events and missed 0 probe runs in the last 20ms: raise --ring-size (now 2097152 bytes)",
		"etcdscope serve: fsync tracer lost 90 events and missed 0 probe runs in the last 20ms: raise --ring-size (now 2097152 bytes)",
	}
	if got := strings.Split(strings.TrimSpace(out), "\n"); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}

	var out2 testenv.SyncBuffer
	ctx, cancel := context.WithCancel(context.Background())
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

// TestLogLossMissedOnly: an interval that lost nothing but missed runs
// leads with the number and the cause, names the programs the runs were
// skipped in (the kernel's recursion misses and the inferred unseen
// completions alike), says what they can leave short, links the docs, and
// stays within the 200 characters of cmd/etcdscope's TestOutputLinesConcise.
func TestLogLossMissedOnly(t *testing.T) {
	ps := func(complete, unseen, issue uint64) []event.ProgramStats {
		return []event.ProgramStats{
			{Name: "block_rq_complete", RecursionMisses: complete, UnseenRuns: unseen},
			{Name: "block_rq_issue", RecursionMisses: issue},
			{Name: "sys_exit_fdatasync"},
		}
	}
	fsync := &steppedSource{
		lost:   []uint64{0, 0, 0, 0},
		missed: []uint64{0, 20, 20, 27},
		progs:  [][]event.ProgramStats{ps(0, 0, 0), ps(0, 20, 0), ps(0, 20, 0), ps(2, 24, 1)},
	}
	out := logLossSteps(fsync, []string{"fsync"}, []Source{fsync})
	want := []string{
		"etcdscope serve: 20 fsync probe runs skipped in 20ms (block_rq_complete): the kernel ran no BPF program for them; " +
			"block layer times of calls may be short; docs/metrics.md#missed-probe-runs",
		"etcdscope serve: 7 fsync probe runs skipped in 20ms (block_rq_complete +1): 4 not run, 3 nested; " +
			"block layer times of calls may be short; docs/metrics.md#missed-probe-runs",
	}
	got := strings.Split(strings.TrimSpace(out), "\n")
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got:\n%s\nwant:\n%s", out, strings.Join(want, "\n"))
	}
	// The longest a minute's line gets: a 6-digit count, the longest
	// tracer name, program name (24 characters) and effect.
	long := missedLine("commit_fsync", 999999, time.Minute, []analysis.MissedRuns{
		{Program: "write_sys_enter_pwritev2", Runs: 333333}, {Program: "write_sys_enter_pwrite64", Runs: 333333}, {Program: "block_rq_complete", Runs: 333333, Unseen: 333332}})
	// No program's share readable: no cause claimed.
	if l, want := missedLine("peers", 3, time.Minute, nil), "etcdscope serve: 3 peers probe runs skipped in 1m0s: the kernel skipped them; RTT samples may be missing; docs/metrics.md#missed-probe-runs"; l != want {
		t.Errorf("got  %q\nwant %q", l, want)
	}
	for _, l := range append(got, long) {
		if n := utf8.RuneCountInString(l); n > 200 {
			t.Errorf("%d characters, over 200: %s", n, l)
		}
	}
}
