package tracer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	. "github.com/etcdscope/etcdscope/tracer"
)

// TestCommitDetachAttach takes the commit tracer's probes off and puts
// them back (serve --commit-duty) 10 times on the leader of a real
// three-member etcd while 8 clients put to it, and checks:
//   - every write the kernel followed is accounted for: records sent +
//     dropped + cut by a Detach = WritesSampled (none silently lost);
//   - a Detach with writes in flight counts each: with both followers
//     stopped (SIGSTOP: no quorum), 8 puts wait inside the leader's
//     write function, and a Detach then adds exactly 8 to WritesCut;
//   - Attach empties the state maps the last window left (read right
//     after it, with no put running);
//   - Attach on an attached tracer and Detach on a detached one do
//     nothing; after Close, Attach returns ErrClosed.
//
// It logs how long each Detach and Attach took.
func TestCommitDetachAttach(t *testing.T) {
	c, leader, _ := threeMembers(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{leader.ClientURL}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	put := func(ctx context.Context, n int) error {
		for i := range n {
			if _, err := cli.Put(ctx, fmt.Sprintf("%sduty-%d", etcdtest.PutKeyPrefix, i), "v"); err != nil {
				return err
			}
		}
		return nil
	}
	tr, err := NewCommit(CommitConfig{PID: leader.PID, Sched: true})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	records := 0
	read := make(chan struct{})
	go func() {
		defer close(read)
		readCommit(t, tr, func(ev event.Commit) {
			if ev.Kind == event.CommitWriteDone {
				records++
			}
		})
	}()
	if err := tr.Attach(); err != nil || !tr.Attached() {
		t.Fatalf("Attach on an attached tracer: %v, attached %v", err, tr.Attached())
	}
	var detach, attach []time.Duration
	stale := 0
	for range 10 {
		ctx, stop := context.WithTimeout(context.Background(), 300*time.Millisecond)
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() { put(ctx, 1000) })
		}
		time.Sleep(150 * time.Millisecond)
		st := time.Now()
		if err := tr.Detach(); err != nil {
			t.Fatal(err)
		}
		detach = append(detach, time.Since(st))
		if tr.Attached() {
			t.Error("attached after Detach")
		}
		if err := tr.Detach(); err != nil {
			t.Errorf("Detach on a detached tracer: %v", err)
		}
		wg.Wait()
		stop()
		// A put the client gave up on may still reach the leader's
		// handler after the Attach below: a new write, not the last
		// window's state. Wait until etcd has handled every Put it
		// started (fresh-root once read 1 entry right after Attach under
		// test-go's parallel packages), and has no proposal pending or
		// committed and not yet applied: a Put whose client gave up is
		// handled (DeadlineExceeded) while its proposal is still saved
		// and applied, and that Save after the Attach left 2 entries
		// (the raft loop's state and a sync) in one run at load ~3.
		waitPutsHandled(t, c, leader)
		n, err := tr.StateEntries()
		if err != nil {
			t.Fatal(err)
		}
		stale += n
		st = time.Now()
		if err := tr.Attach(); err != nil {
			t.Fatal(err)
		}
		attach = append(attach, time.Since(st))
		if n, err := tr.StateEntries(); err != nil || n != 0 {
			t.Errorf("%d entries in the state maps right after Attach (%v), want 0", n, err)
		}
	}
	// Writes held inside the write function: the followers stopped, no
	// quorum. Each is cut by the Detach.
	before, err := tr.Counts()
	if err != nil {
		t.Fatal(err)
	}
	var followers []int
	for _, m := range c.Members {
		if m.PID != leader.PID {
			followers = append(followers, m.PID)
		}
	}
	cont := func() {
		for _, p := range followers {
			syscall.Kill(p, syscall.SIGCONT)
		}
	}
	defer cont()
	for _, p := range followers {
		if err := syscall.Kill(p, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	held := 8
	ctx, stop := context.WithTimeout(context.Background(), 20*time.Second)
	defer stop()
	var wg sync.WaitGroup
	for range held {
		wg.Go(func() { put(ctx, 1) })
	}
	// Wait until every one has entered (the kernel counts it seen).
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cc, err := tr.Counts()
		if err != nil {
			t.Fatal(err)
		}
		if cc.WritesSeen-before.WritesSeen >= uint64(held) || time.Now().After(deadline) {
			break
		}
	}
	if err := tr.Detach(); err != nil {
		t.Fatal(err)
	}
	cont()
	wg.Wait()
	after, err := tr.Counts()
	if err != nil {
		t.Fatal(err)
	}
	if seen, cut := after.WritesSeen-before.WritesSeen, after.WritesCut-before.WritesCut; seen != uint64(held) || cut != uint64(held) {
		t.Errorf("%d puts held without quorum: %d seen, %d cut by the Detach; want %d and %d", held, seen, cut, held, held)
	}
	if err := tr.Drain(); err != nil {
		t.Fatal(err)
	}
	<-read
	cnt, err := tr.Counts()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(detach)
	slices.Sort(attach)
	t.Logf("10 cycles: Detach %v..%v (median %v), Attach %v..%v (median %v); %d stale state entries cleared",
		detach[0], detach[9], detach[5], attach[0], attach[9], attach[5], stale)
	t.Logf("writes seen %d, sampled %d, records %d, dropped %d, cut %d", cnt.WritesSeen, cnt.WritesSampled, records, cnt.WritesDropped, cnt.WritesCut)
	if uint64(records)+cnt.WritesDropped+cnt.WritesCut != cnt.WritesSampled {
		t.Errorf("records %d + dropped %d + cut %d != sampled %d: a write lost without a count", records, cnt.WritesDropped, cnt.WritesCut, cnt.WritesSampled)
	}
	if stale == 0 {
		t.Error("no state left at any Detach: Attach's clearing went unchecked")
	}
	tr.Close()
	if err := tr.Attach(); !errors.Is(err, ErrClosed) {
		t.Errorf("Attach after Close: %v, want ErrClosed", err)
	}
}

// waitPutsHandled waits until the member's gRPC server has handled every
// Put it started (grpc_server_started_total = grpc_server_handled_total,
// from its /metrics) and its raft has nothing in flight
// (etcd_server_proposals_pending 0, committed = applied), three scrapes
// in a row 20 ms apart, 10 s at most.
func waitPutsHandled(t *testing.T, c *etcdtest.Cluster, m *etcdtest.Member) {
	t.Helper()
	puts := func(fams map[string]*dto.MetricFamily, name string) float64 {
		var v float64
		for _, s := range fams[name].GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "grpc_method" && l.GetValue() == "Put" {
					v += s.GetCounter().GetValue()
				}
			}
		}
		return v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for still := 0; still < 3; time.Sleep(20 * time.Millisecond) {
		fams, err := c.Scrape(ctx, m)
		if err != nil {
			t.Fatalf("waiting for the Puts to be handled: %v", err)
		}
		gauge := func(name string) float64 {
			var v float64
			for _, s := range fams[name].GetMetric() {
				v += s.GetGauge().GetValue()
			}
			return v
		}
		started, handled := puts(fams, "grpc_server_started_total"), puts(fams, "grpc_server_handled_total")
		if started == handled && started > 0 && gauge("etcd_server_proposals_pending") == 0 &&
			gauge("etcd_server_proposals_committed_total") == gauge("etcd_server_proposals_applied_total") {
			still++
		} else {
			still = 0
		}
	}
}
