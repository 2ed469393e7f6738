package e2e

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/host"
	"github.com/etcdscope/etcdscope/internal/etcdtest"
	"github.com/etcdscope/etcdscope/internal/testenv"
)

// TestEtcdWALFsyncsMatchEtcdMetric is oracle 3: a real etcd (v3.6, built by
// `make etcd`) under a rate-limited put load. The fdatasync calls
// etcdscope traces on WAL segment files between two scrapes equal, exactly,
// the delta of etcd's own etcd_disk_wal_fsync_duration_seconds_count over
// the same interval (etcd observes that histogram once around each WAL
// fdatasync). Backend (bbolt) fsyncs are reported separately.
func TestEtcdWALFsyncsMatchEtcdMetric(t *testing.T) {
	testenv.RequireRoot(t)
	c := etcdtest.Start(t, etcdtest.Options{})
	m := c.Members[0]
	tr := startFsync(t, "--pid", strconv.Itoa(m.PID))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Scrape in quiet moments, so no fsync straddles a scrape.
	time.Sleep(500 * time.Millisecond)
	before, err := c.Scrape(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	t1 := host.MonotonicNs()
	const puts = 300
	if err := c.Put(ctx, puts, 100, 2300); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	t2 := host.MonotonicNs()
	after, err := c.Scrape(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	recs, rep := tr.stop()
	checkPartition(t, recs)

	const walCount = "etcd_disk_wal_fsync_duration_seconds"
	const backendCount = "etcd_disk_backend_commit_duration_seconds"
	walDelta := int(etcdtest.SumCounter(after, walCount) - etcdtest.SumCounter(before, walCount))
	commitDelta := int(etcdtest.SumCounter(after, backendCount) - etcdtest.SumCounter(before, backendCount))
	var wal, backend, other int
	for _, r := range recs {
		if r.EndNs <= t1 || r.EndNs > t2 {
			continue
		}
		switch {
		case r.FileKind == analysis.KindWAL && r.Syscall == "fdatasync":
			wal++
		case r.FileKind == analysis.KindBackend:
			backend++
		default:
			other++
		}
	}
	t.Logf("%d puts: etcd's WAL fsync count rose by %d, etcdscope traced %d WAL fdatasyncs; backend: %d commits, %d fdatasyncs traced (%.2f per commit); %d other",
		puts, walDelta, wal, commitDelta, backend, float64(backend)/float64(max(commitDelta, 1)), other)
	if walDelta < puts {
		t.Fatalf("etcd's WAL fsync count rose by only %d for %d puts", walDelta, puts)
	}
	if wal != walDelta {
		t.Fatalf("etcdscope traced %d WAL fdatasyncs, etcd's own metric counted %d", wal, walDelta)
	}
	// bbolt's tx.Commit fdatasyncs twice (dirty pages, then the meta
	// page); a commit that grows the file adds one more (db.grow).
	if commitDelta == 0 || backend < 2*commitDelta || backend > 2*commitDelta+2 {
		t.Fatalf("%d backend fsyncs for %d bbolt commits, want 2 per commit", backend, commitDelta)
	}
	var walGroup, backendGroup bool
	for _, g := range rep.Groups {
		walGroup = walGroup || g.Key.FileKind == analysis.KindWAL
		backendGroup = backendGroup || g.Key.FileKind == analysis.KindBackend
	}
	if !walGroup || !backendGroup {
		t.Fatalf("report lacks a separate WAL (%v) or backend (%v) group", walGroup, backendGroup)
	}
	// Missed probe runs are the kernel's (a program skipped while another
	// BPF program ran on the CPU; on this 6.18 test host, block
	// completions in softirq on top of the sandbox agent's threads, for
	// which the kernel runs no BPF program at all: docs/performance.md);
	// the counts above are matched exactly anyway, and a miss
	// biases only the split of the call it touches. What the product owes
	// is to report them: each group's verdict is marked biased. Lost must
	// be 0. The bound, 5% of the calls, is for a recursion of etcdscope's
	// own programs, which would miss about one run per call: 2-3 appeared
	// with other tracers on the host, 5 of 360 (1.4%) in a CI run alone.
	// Measured after block.bpf.c's false counts were fixed, 20 runs:
	// worst 8 of the 18 allowed (0-8, load 4-13; docs/testing.md).
	t.Logf("lost %d, missed %d probe runs", rep.LostEvents, rep.MissedEvents)
	t.Logf("flakehunt: margin etcd-missed-runs %d of %d", rep.MissedEvents, len(recs)/20)
	if rep.LostEvents != 0 || rep.MissedEvents*20 > uint64(len(recs)) {
		t.Errorf("lost %d events, missed %d probe runs (of %d calls: more than 5%%)", rep.LostEvents, rep.MissedEvents, len(recs))
	}
	for _, g := range rep.Groups {
		if g.Bias.MissedRuns != rep.MissedEvents {
			t.Errorf("%d missed probe runs, but the %s group's bias is %+v", rep.MissedEvents, g.Key.FileKind, g.Bias)
		}
	}
}
