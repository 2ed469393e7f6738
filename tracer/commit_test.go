package tracer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
	. "github.com/etcdscope/etcdscope/tracer"
)

// TestCommitTracer (an external test package: etcdtest imports etcdinfo,
// which imports tracer) attaches to a real one-member etcd (make etcd) and
// counts the probes' firings for 20 sequential puts: each put is one
// processInternalRaftRequestOnce (entry, return, Register, Trigger) and,
// on one member, one WAL Save with entries and one (*WAL).sync; every
// probe attaches, and Close is idempotent. It does so with one
// uprobe_multi link (where the kernel has it) and with one perf-event
// uprobe per point, and logs how long each takes to detach.
func TestCommitTracer(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	for _, perPoint := range []bool{false, true} {
		name := "multi"
		if perPoint {
			name = "per-point"
		}
		t.Run(name, func(t *testing.T) { checkCommitTracer(t, c, perPoint) })
	}
}

func checkCommitTracer(t *testing.T, c *etcdtest.Cluster, perPoint bool) {
	// The multi variant also follows the scheduler inside (*WAL).sync
	// (what etcdscope commit runs); the per-point one shows the core
	// object loads without those programs (what serve runs).
	tr, err := NewCommit(CommitConfig{PID: c.Members[0].PID, PerPointLinks: perPoint, Sched: !perPoint})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if perPoint && tr.Multi() {
		t.Error("PerPointLinks: attached one uprobe_multi link")
	}
	t.Logf("one uprobe_multi link: %v", tr.Multi())
	for _, p := range tr.Probes() {
		if !p.Attached {
			t.Errorf("probe %s not attached: %s", p.Name, p.Why)
		}
	}
	const puts = 20
	done := make(chan error, 1)
	go func() {
		err := c.Put(context.Background(), puts, 50, 100)
		time.Sleep(300 * time.Millisecond)
		done <- errors.Join(err, tr.Drain())
	}()
	n := map[event.CommitKind]int{}
	saves := 0
	var ev event.Commit
	for {
		if err := tr.Read(&ev); err != nil {
			if !errors.Is(err, ErrDrained) {
				t.Fatal(err)
			}
			break
		}
		n[ev.Kind]++
		if ev.Kind == event.CommitSaveEnter && ev.B != 0 {
			saves++
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	t.Logf("firings: %v", n)
	for _, k := range []event.CommitKind{event.CommitProposeEnter, event.CommitProposeRet, event.CommitRegister, event.CommitTrigger, event.CommitApplyEntry, event.CommitSyncEnter, event.CommitSyncRet, event.CommitRPCEnter} {
		if n[k] != puts {
			t.Errorf("%s fired %d times for %d puts", k, n[k], puts)
		}
	}
	if saves != puts {
		t.Errorf("%d WAL Saves with entries for %d puts", saves, puts)
	}
	// Each fdatasync sleeps on the disk (or its wake-up is seen), so the
	// WAL sync's thread switches at least once per put while marked.
	if why, ok := tr.Unavailable()[LayerSched]; ok && !perPoint {
		t.Errorf("scheduler programs unavailable: %s", why)
	}
	if perPoint && n[event.CommitSched] != 0 || !perPoint && n[event.CommitSched] < puts {
		t.Errorf("%d scheduler records inside (*WAL).sync for %d puts (followed: %v)", n[event.CommitSched], puts, !perPoint)
	}
	if lost, err := tr.Lost(); err != nil || lost != 0 {
		t.Errorf("lost %d (%v)", lost, err)
	}
	start := time.Now()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("Close (detach) took %v", time.Since(start))
	if err := tr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
