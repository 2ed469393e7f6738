package tracer_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/etcdscope/etcdscope/event"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
	. "github.com/etcdscope/etcdscope/tracer"
)

// useEtcd34 makes the test's clusters run Debian's etcd v3.4 (bin/etcd34,
// scripts/deps.sh: 3.4.23, Go 1.19.8, cgo, stripped).
func useEtcd34(t *testing.T) {
	bin := filepath.Join(testenv.RepoRoot(t), "bin", "etcd34")
	if _, err := os.Stat(bin); err != nil {
		testenv.Missing(t, "no "+bin+" (scripts/deps.sh extracts it from Debian's etcd-server: etcd v3.4)")
	}
	if out, err := exec.Command(bin, "--version").Output(); err != nil || !regexp.MustCompile(`etcd Version: 3\.4\.`).Match(out) {
		testenv.Missing(t, bin+" is not etcd v3.4: "+string(out))
	}
	t.Setenv("ETCDSCOPE_ETCD", bin)
}

// TestCommitTracerEtcd34 runs TestCommitTracer's checks on etcd v3.4
// (its own package paths, a 72-byte raftpb.Entry, Save's ents on the
// stack): per put one write entered, registered, triggered, applied and
// returned, one Save with entries and one sync; the kernel's records
// equal the Assembler's of the raw firings. Then puts from 8 clients at
// once, so that Raft batches several entries into one Save: the Saves'
// index ranges (the last entry read at (n-1) strides of the entries)
// must tile the leader's commit index delta (etcd's own count), each
// index in exactly one Save, and every write must be split.
func TestCommitTracerEtcd34(t *testing.T) {
	testenv.RequireRoot(t)
	useEtcd34(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	t.Run("multi", func(t *testing.T) { checkCommitTracer(t, c, false, "v3.4") })
	t.Run("batched", func(t *testing.T) { checkBatchedSaves(t, c) })
}

func checkBatchedSaves(t *testing.T, c *etcdtest.Cluster) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	tr, err := NewCommit(CommitConfig{PID: c.Members[0].PID})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	before, err := c.Scrape(ctx, c.Members[0])
	if err != nil {
		t.Fatal(err)
	}
	const clients, each = 8, 25
	done := make(chan error, 1)
	var after map[string]*dto.MetricFamily
	go func() {
		var wg sync.WaitGroup
		errs := make([]error, clients)
		for i := range clients {
			wg.Go(func() { errs[i] = c.Put(ctx, each, 0, 100) })
		}
		wg.Wait()
		time.Sleep(300 * time.Millisecond)
		var serr error
		after, serr = c.Scrape(ctx, c.Members[0])
		done <- errors.Join(errors.Join(errs...), serr, tr.Drain())
	}()
	saved := map[uint64]int{}
	batches, writes := 0, 0
	readCommit(t, tr, func(ev event.Commit) {
		switch ev.Kind {
		case event.CommitSaveDone:
			s := ev.Save
			if s.First == 0 || s.Last < s.First || s.Last-s.First >= clients || s.Term == 0 {
				t.Errorf("Save %+v: want a term and at most %d entries", s, clients)
				return
			}
			if s.Last > s.First {
				batches++
			}
			for i := s.First; i <= s.Last; i++ {
				saved[i]++
			}
		case event.CommitWriteDone:
			writes++
		}
	})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	gauge := func(fams map[string]*dto.MetricFamily) uint64 {
		return uint64(fams["etcd_server_proposals_committed_total"].GetMetric()[0].GetGauge().GetValue())
	}
	from, to := gauge(before), gauge(after)
	t.Logf("commit index %d -> %d; %d indexes saved, %d Saves of several entries; %d writes", from, to, len(saved), batches, writes)
	for i := from + 1; i <= to; i++ {
		if saved[i] != 1 {
			t.Errorf("index %d saved %d times, want once", i, saved[i])
		}
	}
	if uint64(len(saved)) != to-from || writes != clients*each {
		t.Errorf("%d indexes saved, %d writes: want the commit index delta %d and %d puts", len(saved), writes, to-from, clients*each)
	}
	if batches == 0 {
		t.Error("no Save held several entries: the stride was not exercised")
	}
	if lost, err := tr.Lost(); err != nil || lost != 0 {
		t.Errorf("lost %d (%v)", lost, err)
	}
}

// TestCommitAssemblyThreeMembersEtcd34 and TestCommitFollowerEntriesEtcd34
// run those tests on three v3.4 members: the followers' acks (Process's
// Message on the stack: Type, From, Index) on the leader, and on a
// follower the MsgApps' sender, term and index range (Entries, read at
// v3.4's 72-byte stride), each against the leader's commit index.
func TestCommitAssemblyThreeMembersEtcd34(t *testing.T) {
	testenv.RequireRoot(t)
	useEtcd34(t)
	checkAssemblyThreeMembers(t)
}

func TestCommitFollowerEntriesEtcd34(t *testing.T) {
	testenv.RequireRoot(t)
	useEtcd34(t)
	checkFollowerEntries(t)
}
