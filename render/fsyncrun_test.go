package render

import (
	"errors"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
)

// TestFsyncStart: fsync's start line, as cmd wrote it before the words
// moved here.
func TestFsyncStart(t *testing.T) {
	want := map[string]FsyncFilter{
		"tracing fsync/fdatasync Ctrl-C to stop":                                                                                                      {},
		"tracing fsync/fdatasync of pid 1 (systemd) on vda for 30s (Ctrl-C stops sooner)":                                                             {PID: 1, PIDComm: "systemd", Dev: "vda", Duration: 30 * time.Second},
		`tracing fsync/fdatasync of comm "etcd" in cgroup /sys/fs/cgroup/x (on ext4's own tracepoints: no syscall tracepoint enabled) Ctrl-C to stop`: {Comm: "etcd", Cgroup: "/sys/fs/cgroup/x", Ext4Only: true},
		"tracing fsync/fdatasync, one kernel record per call on a plain disk Ctrl-C to stop":                                                          {KernelPartition: true, KernelPartitionOn: true},
		"tracing fsync/fdatasync, per-request records (--kernel-partition needs ext4's tracepoints and BPF spin locks) Ctrl-C to stop":                {KernelPartition: true},
	}
	for line, f := range want {
		if got := FsyncStart(f); got != line {
			t.Errorf("got  %s\nwant %s", got, line)
		}
	}
	if got := WALWorkloadEnd(10, 1, 1_500_000, 2_000_000); got != "workload: 10 appends in 1 segment(s); fdatasync as timed in userspace: p50 1.500 ms, p99 2.000 ms" {
		t.Errorf("workload end: %s", got)
	}
}

// TestIntervalRow: a live line of fsync --interval, its loss unknown when
// the count could not be read, and the last partial one marked.
func TestIntervalRow(t *testing.T) {
	at := time.Date(2026, 12, 7, 2, 40, 5, 0, time.UTC)
	iv := analysis.Interval{Count: 2, P50: 2e6, P99: 4e6, Dominant: "device_flush", Share: 0.75}
	if got, want := IntervalRow(at, iv, 1, 0, nil, false), "02:40:05 fsyncs=2 p50=2.000ms p99=4.000ms dominant=device_flush(75%) lost=1 missed=0"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	if got, want := IntervalRow(at, analysis.Interval{}, 0, 0, errors.New("no map"), true), "02:40:05 fsyncs=0 lost=unknown (no map) (last, partial interval)"; got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
