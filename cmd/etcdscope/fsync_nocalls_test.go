package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/etcdscope/etcdscope/analysis"
	"github.com/etcdscope/etcdscope/tracer"
)

// TestFsyncNoCallsHint: a run on --pid that saw no call ends with a line
// naming the process and what to check (a walk ran `fsync --pid` of a
// process that makes no fsync for 20 s and read "0 calls", no hint); a
// pid that exited says so; a run that saw calls, or the built-in
// workload, says nothing.
func TestFsyncNoCallsHint(t *testing.T) {
	self := uint32(os.Getpid())
	hint := noCallsHint(tracer.FsyncConfig{PID: self}, fsyncFlags{}, analysis.Report{}, 20*time.Second)
	if !strings.Contains(hint, "no fsync/fdatasync from pid "+strconv.Itoa(int(self))+" (") || !strings.Contains(hint, "in the 20s traced: check it is etcd (pgrep -x etcd)") {
		t.Errorf("running pid: %q", hint)
	}
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := uint32(cmd.Process.Pid)
	if hint := noCallsHint(tracer.FsyncConfig{PID: gone}, fsyncFlags{}, analysis.Report{}, 20*time.Second); !strings.Contains(hint, "and it has exited: give the pid of the running etcd") {
		t.Errorf("exited pid: %q", hint)
	}
	if hint := noCallsHint(tracer.FsyncConfig{PID: self}, fsyncFlags{}, analysis.Report{Fsyncs: 1}, time.Second); hint != "" {
		t.Errorf("a run with calls: %q", hint)
	}
	if hint := noCallsHint(tracer.FsyncConfig{PID: self}, fsyncFlags{wl: "wal"}, analysis.Report{}, time.Second); hint != "" {
		t.Errorf("the workload: %q", hint)
	}
}
