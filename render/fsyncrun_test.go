package render

import (
	"testing"
	"time"
)

// TestFsyncStart: fsync's start line, as cmd wrote it before the words
// moved here.
func TestFsyncStart(t *testing.T) {
	want := map[string]FsyncFilter{
		"tracing fsync/fdatasync Ctrl-C to stop":                                                                                                      {},
		"tracing fsync/fdatasync of pid 1 (systemd) on vda for 30s (Ctrl-C stops sooner)":                                                             {PID: 1, PIDComm: "systemd", Dev: "vda", Duration: 30 * time.Second},
		`tracing fsync/fdatasync of comm "etcd" in cgroup /sys/fs/cgroup/x (on ext4's own tracepoints: no syscall tracepoint enabled) Ctrl-C to stop`: {Comm: "etcd", Cgroup: "/sys/fs/cgroup/x", Ext4Only: true},
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
