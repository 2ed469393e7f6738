package exporter

import (
	"math"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/etcdscope/etcdscope/analysis/commit"
)

// TestCommitMetricsBounded: the parts observed per write sum to its
// duration, a write without a part leaves that part unobserved (absent,
// not 0), and a flood of distinct deciding votes (ids from a corrupt or
// hostile ring) stops at MaxVoteLabels values plus other.
func TestCommitMetricsBounded(t *testing.T) {
	c := NewCommitMetrics(nil, 1, nil, 1)
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	names := commit.Names{7: "m1"}
	w := commit.Write{Role: commit.RoleLeader, StartNs: 1000, EndNs: 4000, WALSyncNs: 1500,
		PartsNs:      map[string]int64{commit.PartPropose: 500, commit.PartWALAppend: 2000, commit.PartApply: 500},
		DeciderKnown: true, Decider: 7}
	for i := uint64(0); i < 40; i++ {
		if i > 0 {
			w.Decider = 100 + i
		}
		if err := c.ObserveWrite(&w, names); err != nil {
			t.Fatal(err)
		}
	}
	if n := testutil.CollectAndCount(c, "etcdscope_commit_deciding_vote_total"); n != MaxVoteLabels+1 {
		t.Errorf("%d vote series, want %d (MaxVoteLabels and other)", n, MaxVoteLabels+1)
	}
	if v := testutil.ToFloat64(c.vote.WithLabelValues("m1")); v != 1 {
		t.Errorf("vote m1 (the member's name for id 7) counted %v, want 1", v)
	}
	if v := testutil.ToFloat64(c.vote.WithLabelValues(OtherLabel)); v != 40-MaxVoteLabels {
		t.Errorf("vote other counted %v, want %d", v, 40-MaxVoteLabels)
	}
	if n := testutil.CollectAndCount(c, "etcdscope_commit_part_duration_seconds"); n != 3 {
		t.Errorf("%d part series, want the 3 measured parts", n)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]float64{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			sums[f.GetName()] += m.GetHistogram().GetSampleSum()
		}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-15 }
	if d, p := sums["etcdscope_commit_duration_seconds"], sums["etcdscope_commit_part_duration_seconds"]; !near(d, 40*3e-6) || !near(p, d) {
		t.Errorf("durations sum to %v s, parts to %v s: want both 40 × 3 µs", d, p)
	}
	if s := sums["etcdscope_commit_wal_sync_duration_seconds"]; !near(s, 40*1.5e-6) {
		t.Errorf("WAL fdatasync sum %v s, want 40 × 1.5 µs", s)
	}
}
