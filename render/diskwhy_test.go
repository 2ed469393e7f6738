package render

import (
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
)

// TestDiskWhy: a group of enough calls with no disk verdict says which
// condition it missed, with a share printed exactly enough to fall on
// its side of the threshold (a new user's 5 s run: device_flush 39.98%,
// shown "40.0%" in the table, and no verdict); no line far from any
// threshold, with a verdict, or under DiskVerdictMinCalls calls.
func TestDiskWhy(t *testing.T) {
	const ms = 1_000_000
	cases := []struct {
		name              string
		calls             int
		flush, queue, oth int64 // ns of a 10 ms call; the rest is data writeback
		want              string
	}{
		{"flush within rounding of floor", 20, 3_998_000, 0, 3 * ms, "device_flush 39.98%, under the 40% the floor verdict needs"},
		{"flush a hair under floor", 20, 3_999_990, 0, 3 * ms, "device_flush 39.9999%, under the 40% the floor verdict needs"},
		{"flush far under floor", 20, 2 * ms, 0, 0, ""},
		{"queue at the floor's limit", 20, 6 * ms, 1 * ms, 0, "block_queue 10.00%, not under the 10% the floor verdict allows"},
		{"flush not the largest layer", 20, 4 * ms, 0, 5 * ms, "device_flush 40.00% not the largest layer (other 50.00%), as floor needs"},
		{"queue near contention", 20, 2 * ms, 2_500_000, 0, "block_queue 25.00%, under the 30% the contention verdict needs"},
		{"queue under the flush share", 20, 4 * ms, 3 * ms, 0,
			"block_queue 30.00%, not under the 10% the floor verdict allows; block_queue 30.00% under device_flush 40.00%, where contention needs no less"},
		{"floor", 20, 6 * ms, 0, 0, ""},
		{"too few calls", analysis.DiskVerdictMinCalls - 1, 3_998_000, 0, 3 * ms, ""},
		// Calls at etcd's budget whose shares would give a verdict say
		// why there is none (a lone slow dd fdatasync got no line); the
		// goldens keep their one fast WAL-directory fsync without one.
		{"too few calls with floor shares", 3, 6 * ms, 0, 0, "3 calls, and a disk verdict needs at least 10; the shares alone would read floor"},
		{"one call with contention shares", 1, 2 * ms, 5 * ms, 0, "1 call, and a disk verdict needs at least 10; the shares alone would read contention"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var recs []analysis.FsyncRecord
			for i := 0; i < c.calls; i++ {
				l := analysis.Layers{DeviceFlushNs: c.flush, BlockQueueNs: c.queue, OtherNs: c.oth}
				l.DataWritebackNs = 10*ms - l.Sum()
				recs = append(recs, analysis.FsyncRecord{PID: 1, Comm: "etcd", Syscall: "fdatasync", Dev: "259:0", FS: "ext4", FileKind: analysis.KindWAL,
					TotalNs: 10 * ms, Layers: l, Flushes: 1})
			}
			g := analysis.BuildReport(recs, 0, 0, nil).Groups[0]
			if got := DiskWhyText(g.DiskWhy); got != c.want {
				t.Errorf("disk_verdict_why %q, want %q (verdict %v)", got, c.want, g.Disk)
			}
			if g.DiskWhy != nil && g.Disk != nil {
				t.Errorf("a why %+v beside a verdict %q", g.DiskWhy, g.Disk.Kind)
			}
		})
	}
}

// TestDiskWhyTopFlushPrintsTwoDecimals: device_flush as the largest layer
// is compared with itself; that comparison must not force six decimals
// (the demo printed "device_flush 36.651955%" beside the table's 36.7%).
func TestDiskWhyTopFlushPrintsTwoDecimals(t *testing.T) {
	if got := exactShare(0.36651955, analysis.FloorMinFlushShare, 0.36651955, 0.05); got != "36.65%" {
		t.Errorf("exactShare = %q, want 36.65%%", got)
	}
	if got := exactShare(0.399999, analysis.FloorMinFlushShare, 0.399999); got != "39.9999%" {
		t.Errorf("exactShare under the threshold = %q, want 39.9999%%", got)
	}
}
