package analysis

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

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

// TestReportDisks: the summary lists each disk the calls' requests went
// to once, sorted; SetDiskCaches fills in the live run's write cache by
// device and leaves disks it does not know unknown.
func TestReportDisks(t *testing.T) {
	recs := []FsyncRecord{{Comm: "etcd", TotalNs: 1, Disks: []string{"259:0", "7:0"}}, {Comm: "etcd", TotalNs: 1, Disks: []string{"7:0"}}}
	rep := BuildReport(recs, 0, 0, nil)
	if len(rep.Disks) != 2 || rep.Disks[0].Dev != "259:0" || rep.Disks[1].Dev != "7:0" || rep.Disks[0].WriteCache != "" {
		t.Fatalf("disks %+v", rep.Disks)
	}
	rep.SetDiskCaches([]DiskCache{{Dev: "7:0", Name: "loop0", WriteCache: "write back"}, {Dev: "8:0", Name: "sda"}})
	if rep.Disks[1] != (DiskCache{Dev: "7:0", Name: "loop0", WriteCache: "write back"}) || rep.Disks[0] != (DiskCache{Dev: "259:0"}) {
		t.Fatalf("after SetDiskCaches: %+v", rep.Disks)
	}
	b, _ := json.Marshal(rep)
	if !strings.Contains(string(b), `"disks":[{"dev":"259:0"},{"dev":"7:0","name":"loop0","write_cache":"write back"}]`) {
		t.Errorf("JSON %s", b)
	}
}

// TestVerdictHolds: a verdict drawn from a trace with holes holds when no
// choice of the hidden calls' durations moves the nearest-rank p99 across
// the budget; checked against brute force (each hidden call either under
// or over the budget: the p99's side depends only on how many are over).
func TestVerdictHolds(t *testing.T) {
	// overP99 says whether the p99 of over calls at 20 ms and the rest of
	// n at 1 ms is over the budget.
	overP99 := func(n, over int64) bool {
		vals := make([]int64, n)
		for i := range vals {
			vals[i] = 1e6
			if int64(i) < over {
				vals[i] = 20e6
			}
		}
		slices.Sort(vals)
		return time.Duration(stats.Quantile(vals, 0.99)) >= WALFsyncBudget
	}
	for n := int64(1); n <= 300; n += 7 {
		for over := int64(0); over <= n; over += max(1, n/9) {
			v := VerdictOK
			if overP99(n, over) {
				v = VerdictOverBudget
			}
			for hidden := uint64(0); hidden <= 12; hidden++ {
				want := true
				for extra := int64(0); extra <= int64(hidden); extra++ {
					if overP99(n+int64(hidden), over+extra) != (v == VerdictOverBudget) {
						want = false
					}
				}
				if got := verdictHolds(v, n, over, hidden); got != want {
					t.Errorf("verdictHolds(%q, n %d, over %d, hidden %d) = %v, brute force %v", v, n, over, hidden, got, want)
				}
			}
		}
	}
	if verdictHolds("n/a", 100, 0, 1) {
		t.Error("n/a verdict holds")
	}
}
