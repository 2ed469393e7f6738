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

// MonoToWallNs returns CLOCK_REALTIME − CLOCK_MONOTONIC now, ns: the
// summary's mono_to_wall_ns, which puts the records' monotonic timestamps
// on the wall clock (the HTML page's heatmap axis).
func MonoToWallNs() int64 {
	var mono, wall unix.Timespec
	if unix.ClockGettime(unix.CLOCK_MONOTONIC, &mono) != nil || unix.ClockGettime(unix.CLOCK_REALTIME, &wall) != nil {
		return 0
	}
	return wall.Nano() - mono.Nano()
}

// BPFStatsEnabled reports whether the kernel is counting BPF run time and
// run counts (sysctl kernel.bpf_stats_enabled, /proc/sys/kernel/bpf_stats_enabled).
// An error reading it counts as off.
func BPFStatsEnabled() bool {
	b, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	return err == nil && strings.TrimSpace(string(b)) != "0"
}
