package testenv

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// SyscallTracepoints counts the syscall tracepoints (syscalls:sys_enter_*
// and sys_exit_*) that process pid holds BPF programs on, as the kernel
// reports them (`bpftool perf list`, BPF_TASK_FD_QUERY; bpftool from
// scripts/deps.sh): those of the write family (write, pwrite64, writev,
// pwritev, pwritev2), and all. sched counts its sched_switch and
// sched_wakeup programs.
func SyscallTracepoints(t testing.TB, pid int) (writes, all, sched int) {
	t.Helper()
	bpftool := LookPath(t, "bpftool", "bpftool")
	out, err := exec.Command(bpftool, "perf", "list", "-j").Output()
	if err != nil {
		t.Fatalf("bpftool perf list: %v", err)
	}
	var list []struct {
		PID        int    `json:"pid"`
		Tracepoint string `json:"tracepoint"`
	}
	if err := json.Unmarshal(out, &list); err != nil {
		t.Fatalf("bpftool perf list -j: %v", err)
	}
	for _, a := range list {
		switch {
		case a.PID != pid:
		case a.Tracepoint == "sched_switch" || a.Tracepoint == "sched_wakeup":
			sched++
		case strings.HasPrefix(a.Tracepoint, "sys_enter_") || strings.HasPrefix(a.Tracepoint, "sys_exit_"):
			all++
			if strings.Contains(a.Tracepoint, "write") {
				writes++
			}
		}
	}
	return writes, all, sched
}
