package host

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// MonotonicNs returns CLOCK_MONOTONIC in ns, the clock of every event
// timestamp (bpf_ktime_get_ns).
func MonotonicNs() uint64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return uint64(ts.Nano())
}

// BPFStatsEnabled reports whether the kernel is counting BPF run time and
// run counts (sysctl kernel.bpf_stats_enabled, /proc/sys/kernel/bpf_stats_enabled).
// An error reading it counts as off.
func BPFStatsEnabled() bool {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	return err == nil && strings.TrimSpace(string(b)) != "0"
}
