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
