package analysis

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis/stats"
)

// TestReportBuilderLongTrace: past stats.ExactLimit calls a group's
// quantiles switch to fio's bins and say so (JSON binned, a table note),
// stay within fio's half-bin of the exact order statistics of the same
// calls, and count, max and layer shares stay exact.
func TestReportBuilderLongTrace(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	b := NewReportBuilder()
	n := 2*stats.ExactLimit + 123
	totals := make([]int64, 0, n)
	var flushSum int64
	for i := 0; i < n; i++ {
		total := int64(math.Exp(rng.NormFloat64()*0.6 + math.Log(250e3)))
		flush := total / 3
		r := FsyncRecord{Comm: "etcd", PID: 42, Syscall: "fdatasync", Dev: "254:1", FS: "ext4", FileKind: "wal",
			TotalNs: total, Layers: Layers{DeviceFlushNs: flush, OtherNs: total - flush}}
		b.Add(&r)
		totals = append(totals, total)
		flushSum += flush
	}
	rep := b.Report(0, 0, nil)
	if len(rep.Groups) != 1 {
		t.Fatalf("%d groups, want 1", len(rep.Groups))
	}
	g := rep.Groups[0]
	exact := stats.Summarize(totals)
	if !g.Total.Binned || g.Total.Count != exact.Count || g.Total.Sum != exact.Sum || g.Total.Max != exact.Max || g.Total.Min != exact.Min {
		t.Fatalf("total %+v, want binned with exact count/sum/min/max of %+v", g.Total, exact)
	}
	for _, q := range [][2]int64{{g.Total.P50, exact.P50}, {g.Total.P99, exact.P99}} {
		if rel := math.Abs(float64(q[0]-q[1])) / float64(q[1]); rel > 1.0/128 {
			t.Errorf("binned quantile %d vs exact %d: %.2f%% off", q[0], q[1], 100*rel)
		}
	}
	for _, l := range g.Layers {
		if l.Name == "device_flush" && math.Abs(l.Share-float64(flushSum)/float64(exact.Sum)) > 1e-12 {
			t.Errorf("device_flush share %v, want %v", l.Share, float64(flushSum)/float64(exact.Sum))
		}
	}
}

// TestEmptyReportJSON: a run that traced nothing still writes "groups":[]
// (docs/schema.md), so `jq '.groups[]'` works on it.
func TestEmptyReportJSON(t *testing.T) {
	b, err := json.Marshal(NewReportBuilder().Report(0, 0, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"groups":[]`) {
		t.Fatalf("empty summary %s lacks \"groups\":[]", b)
	}
}
