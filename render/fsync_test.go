package render

import (
	"bytes"
	"strings"
	"testing"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/analysis/stats"
)

func TestFsyncReportTable(t *testing.T) {
	var recs []analysis.FsyncRecord
	for i := 0; i < 100; i++ {
		total := int64(1.1e6 + i*1e5)
		recs = append(recs, analysis.FsyncRecord{PID: 99, Comm: "etcd", Syscall: "fdatasync", Dev: "254:1", DevName: "vda1", FS: "ext4",
			FileKind: analysis.KindWAL, TotalNs: total, Flushes: 1, Layers: analysis.Layers{DeviceFlushNs: total - 1e5, OtherNs: 1e5}})
	}
	rep := analysis.BuildReport(recs, 3, 0, []string{"tp_btf/xfs_log_force: xfs not loaded"})
	var table bytes.Buffer
	if err := FsyncReport(&table, &rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"etcd pid 99", "ext4 on vda1 (254:1)", "wal files", "device_flush", "OVER BUDGET", "3 lost events", "raise --ring-size", "verdict biased: 3 events lost",
		"unavailable: tp_btf/xfs_log_force", "flushes per fsync: 1.00 (100 flush requests)"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
}

func TestFsyncReportBinnedNote(t *testing.T) {
	b := analysis.NewReportBuilder()
	for i := 0; i < stats.ExactLimit+10; i++ {
		r := analysis.FsyncRecord{Comm: "etcd", PID: 42, Syscall: "fdatasync", Dev: "254:1", FS: "ext4", FileKind: "wal", TotalNs: int64(1e5 + i)}
		b.Add(&r)
	}
	rep := b.Report(0, 0, nil)
	var out bytes.Buffer
	if err := FsyncReport(&out, &rep); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "binned as fio bins") {
		t.Errorf("table does not say its quantiles are binned:\n%s", out.String())
	}
}
