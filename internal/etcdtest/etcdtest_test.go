package etcdtest

import (
	"context"
	"testing"
	"time"
)

// walFsyncs is etcd's own count of WAL fdatasync calls: a histogram whose
// sample count grows by one per wal.sync.
const walFsyncs = "etcd_disk_wal_fsync_duration_seconds"

// TestSingleMemberPutsFsyncWAL checks the harness against etcd's own
// metrics: 200 puts at 100/s on one member must raise the WAL fsync count
// by at least 200.
//
// Why exactly one fsync per put, and why at least 200: Put is sequential,
// so put k+1 is proposed only after put k was applied, which happens after
// its entry left raft in a Ready of its own. Every Ready that carries new
// entries makes etcd's wal.Save call fdatasync (raft.MustSync is true when
// entries are appended). Batching, which merges several proposals into one
// Ready and one fsync, needs concurrent proposals; Put never makes them.
// Measured here (5 runs, ext4 on 2 vCPUs): delta exactly 200 every time,
// 1.000 fsyncs per put. The upper slack of 10 allows for startup proposals
// (member attribute publish, cluster version) that land after /health
// turned true and before the first scrape: 6 or 7 fsyncs precede it.
func TestSingleMemberPutsFsyncWAL(t *testing.T) {
	c := Start(t, Options{})
	m := c.Members[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	before, err := c.Scrape(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	const n = 200
	start := time.Now()
	if err := c.Put(ctx, n, 100, 2300); err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(start)
	after, err := c.Scrape(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := after[walFsyncs]; !ok {
		t.Fatalf("%s missing from %s", walFsyncs, m.MetricsURL)
	}
	delta := SumCounter(after, walFsyncs) - SumCounter(before, walFsyncs)
	t.Logf("%d puts in %v (%.1f/s): WAL fsync count %v -> %v, delta %v, %.3f fsyncs per put",
		n, elapsed.Round(time.Millisecond), n/elapsed.Seconds(),
		SumCounter(before, walFsyncs), SumCounter(after, walFsyncs), delta, delta/n)
	if delta < n || delta > n+10 {
		t.Errorf("WAL fsync delta %v for %d sequential puts, want %d..%d (one per put plus a few startup proposals)", delta, n, n, n+10)
	}
	// The rate limit holds: 200 puts at 100/s take at least 199 intervals.
	if elapsed < 1990*time.Millisecond {
		t.Errorf("%d puts at 100/s took %v, want >= 1.99 s", n, elapsed)
	}
}
